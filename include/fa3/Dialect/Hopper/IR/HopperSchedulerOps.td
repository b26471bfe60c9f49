//===- HopperSchedulerOps.td - the tile scheduler -------------*- tablegen -*-===//
//
// Which tiles of work (m-block, q head, batch) a CTA runs, and in what
// order: the grid of tiles, a tile's coordinates, the next tile of a
// persistent CTA (static stride or a global counter), and the counter's
// reset. The loop over a CTA's tiles is the kernel's (scf.while); these ops
// are its arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_HOPPER_SCHEDULER_OPS
#define FA3_HOPPER_SCHEDULER_OPS

def Hopper_ScheduleStatic : I32EnumAttrCase<"static_stride", 0, "static">;
def Hopper_ScheduleDynamic : I32EnumAttrCase<"dynamic", 1>;
def Hopper_TileSchedule : I32EnumAttr<"TileSchedule",
    "how a persistent CTA finds its next tile",
    [Hopper_ScheduleStatic, Hopper_ScheduleDynamic]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::fa3::hopper";
}
def Hopper_TileScheduleAttr
    : EnumAttr<Hopper_Dialect, Hopper_TileSchedule, "schedule"> {
  let assemblyFormat = "$value";
}

def Hopper_TileGridOp : Hopper_Op<"tile_grid", [Pure]> {
  let summary = "the tiles of an attention: m-blocks x q heads x batch";
  let description = [{
    `numM` = ceil(Sq / block_m) m-blocks (with `pairs`, rounded up to even:
    the two CTAs of a cluster take m-blocks 2i and 2i + 1, and an odd count
    gets one block past Sq, which the TMA clips), and `tiles` = numM x Hq x
    B. The lowering reads Sq through an opaque copy so that each role of a
    warp-specialized kernel computes its own grid: a value computed before
    the role split would live across the producer's setmaxnreg, where
    ptxas would spill it.

    ```mlir
    %numM, %tiles = hopper.tile_grid %Sq, %Hq, %B block_m 128
    ```
  }];
  let arguments = (ins I32:$sq, I32:$hq, I32:$batch,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$block_m,
                       UnitAttr:$pairs);
  let results = (outs I32:$num_m, I32:$tiles);
  let assemblyFormat = [{
    $sq `,` $hq `,` $batch `block_m` $block_m (`pairs` $pairs^)? attr-dict
  }];
}

def Hopper_TileCoordsOp : Hopper_Op<"tile_coords",
                                    [Pure, AttrSizedOperandSegments]> {
  let summary = "a tile's first query row, q head and batch";
  let description = [{
    Without sections, tiles are numbered m-block fastest, then q head, then
    batch: the CTAs running at one time work on one head, so that head's
    K/V stays in L2 (heads fastest measured 5-15 % slower: every CTA then
    streams another head's K/V). With `longest_first` the m-blocks run last
    to first: under a right-bounded (causal) mask the last ones see the
    most keys, and starting them first shortens the tail.

    With `sections %n of %pairs` (n >= 1, pairs = the grid's heads x
    batches) the (head, batch) pairs go in ceil(pairs / n) sections of at
    most n, as even as they divide (the first pairs % count sections one
    pair larger), and within a section the m-block is the slower index,
    heads fastest: last first with `longest_first` (the forward under a
    causal mask), first first without (the backward's kv blocks, of which
    the first see the most queries under a causal mask). Either way a
    section's tiles run longest first across all its heads, so the grid
    ends on the shortest tiles of its last section instead of on the long
    tiles of its last heads (FlashAttention-3's causal orders, forward and
    backward). n is chosen so that what a section's tiles share fits in
    L2; n = 1 is the order without sections.

    ```mlir
    %m0, %head, %batch = hopper.tile_coords %tile in %numM, %Hq block_m 128 longest_first
    %m0, %head, %batch = hopper.tile_coords %tile in %numM, %Hq block_m 128 longest_first
        sections %n of %pairs
    ```
  }];
  let arguments = (ins I32:$tile, I32:$num_m, I32:$hq,
                       Optional<I32>:$section_pairs, Optional<I32>:$pairs,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$block_m,
                       UnitAttr:$longest_first);
  let results = (outs I32:$m0, I32:$head, I32:$batch);
  let assemblyFormat = [{
    $tile `in` $num_m `,` $hq `block_m` $block_m
    (`longest_first` $longest_first^)?
    (`sections` $section_pairs^ `of` $pairs)? attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_TileNextOp : Hopper_Op<"tile_next"> {
  let summary = "a persistent CTA's next tile";
  let description = [{
    `static`: tile + gridDim.x (every full-mask tile costs the same; the two
    CTAs of a cluster keep their pair of m-blocks in step, since the grid
    and the m-block count are even). `dynamic`: the next tile from a global
    counter (atomic add, + gridDim.x: a CTA's first tile is its ctaid.x),
    so that CTAs given short (causal) tiles take more of them; `counter`
    points at the kernel's two 32-bit counters (the second counts the CTAs
    that are done, for `hopper.tile_counter_reset`).

    ```mlir
    %next = hopper.tile_next %tile static
    %next = hopper.tile_next %tile dynamic counter %tileCounter
    ```
  }];
  let arguments = (ins I32:$tile, Hopper_TileScheduleAttr:$schedule,
                       Optional<LLVM_PointerInAddressSpace<1>>:$counter);
  let results = (outs I32:$next);
  let assemblyFormat = [{
    $tile $schedule (`counter` $counter^ `:` qualified(type($counter)))? attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_TileClaimOp : Hopper_Op<"tile_claim"> {
  let summary = "a persistent CTA's k-th tile";
  let description = [{
    The tile this CTA runs as its `k`-th (k counts its tiles from 0),
    claimed when the op runs, once per k and in order: `static`, first +
    k x gridDim.x; `dynamic`, `first` (the CTA's ctaid.x) for k = 0, else
    the global counter's next as `hopper.tile_next ... dynamic` takes it.
    Run by the producer thread inside the ring fill that publishes the
    tile, where claiming it costs no register across the tile before.

    ```mlir
    %t = hopper.tile_claim %k first %cta static
    %t = hopper.tile_claim %k first %cta dynamic counter %tileCounter
        : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins I32:$k, I32:$first, Hopper_TileScheduleAttr:$schedule,
                       Optional<LLVM_PointerInAddressSpace<1>>:$counter);
  let results = (outs I32:$tile);
  let assemblyFormat = [{
    $k `first` $first $schedule (`counter` $counter^ `:` qualified(type($counter)))? attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_TileCounterResetOp : Hopper_Op<"tile_counter_reset"> {
  let summary = "the last CTA to finish fetching zeroes the tile counters";
  let description = [{
    Each CTA, after its last `hopper.tile_next ... dynamic`, counts itself
    done on the second counter (atom.acq_rel, so that every CTA's last
    fetch happens before the reset; LLVM's atomicrmw acq_rel loses that
    ordering on NVPTX); the one that completes gridDim.x zeroes both, so
    the next launch starts from 0 without a memset.
  }];
  let arguments = (ins LLVM_PointerInAddressSpace<1>:$counter);
  let assemblyFormat = "$counter attr-dict `:` qualified(type($counter))";
  let hasVerifier = 1;
}

#endif // FA3_HOPPER_SCHEDULER_OPS
