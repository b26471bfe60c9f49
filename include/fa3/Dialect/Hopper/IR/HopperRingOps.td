//===- HopperRingOps.td - the pipeline ring of the hopper dialect -*- tablegen -*-===//
//
// The shared-memory ring through which the producer warpgroup hands tiles
// (K, V, Q) to the consumers: a type whose parameters are the ring's static
// facts (stages, where its buffers and mbarriers sit) and the ops of the
// two sides of the pipeline. Included from HopperOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_HOPPER_RING_OPS
#define FA3_HOPPER_RING_OPS

include "mlir/Dialect/LLVMIR/LLVMOpBase.td"

//===----------------------------------------------------------------------===//
// !hopper.ring
//===----------------------------------------------------------------------===//

def Hopper_RingType : TypeDef<Hopper_Dialect, "Ring"> {
  let mnemonic = "ring";
  let summary = "a multi-stage shared-memory pipeline with mbarrier pairs";
  let description = [{
    A ring of `stages` buffers in dynamic shared memory, each guarded by two
    mbarriers: the stage's *full* barrier (count `producers`: the producer's
    arrive, plus the transaction bytes its TMA loads complete) and its *empty*
    barrier (count `arrivals`: the consumer threads that release the stage,
    plus, in a cluster, the peer CTA's consumer warps). Slot u of the ring
    (the u-th use, counted by both sides alike) is stage u % stages with
    phase (u / stages) & 1; that arithmetic and the barrier addresses are
    the lowering's, not the kernel's.

    The parameters are byte offsets from the 1024-aligned start of dynamic
    shared memory:

      stages       number of buffers (>= 1)
      stage_bytes  bytes of one stage's buffer (a multiple of 1024: each
                   stage starts 128B-swizzle-atom aligned)
      data         the first stage's buffer (1024-aligned); stage s at
                   data + s * stage_bytes
      full, empty  stage s's barriers at full + 8 s and empty + 8 s
      arrivals     the empty barrier's count
      cluster      CTAs that share each stage: 1, or 2 when both CTAs of a
                   cluster multicast into it (each CTA's consumers then
                   also release the peer's stage)
      producers    the full barrier's count (default 1, then not printed):
                   the arrivals that complete a stage. A warp whose lanes
                   all write a stage commits it with one arrive each, so
                   that each lane's release covers its own writes; lanes
                   that copy a stage (`hopper.copy_paged_tile`) arrive
                   each after their copies, and one thread's TMA fill of
                   the same ring arrives for all of them
                   (`producer_commit`'s count)

    ```mlir
    !hopper.ring<stages = 2, stage_bytes = 32768, data = 32768, full = 229376,
                 empty = 229408, arrivals = 264, cluster = 2>
    ```
  }];
  let parameters = (ins "int64_t":$stages, "int64_t":$stage_bytes,
                        "int64_t":$data, "int64_t":$full, "int64_t":$empty,
                        "int64_t":$arrivals, "int64_t":$cluster,
                        DefaultValuedParameter<"int64_t", "1">:$producers);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

class Hopper_RingOp<string mnemonic, string what, list<Trait> traits = []>
    : Hopper_Op<"ring." # mnemonic, traits> {
  let summary = "pipeline ring: " # what;
}

// The ring's slot: the ring and the use count u (i32).
class Hopper_RingSlotOp<string mnemonic, string what>
    : Hopper_RingOp<mnemonic, what> {
  let arguments = (ins Hopper_RingType:$ring, I32:$slot);
  let assemblyFormat = "$ring `[` $slot `]` attr-dict `:` qualified(type($ring))";
}

def Hopper_RingCreateOp : Hopper_RingOp<"create", "the ring in shared memory"> {
  let description = [{
    The ring at `smem`, the base of the CTA's dynamic shared memory; the
    ring's type says where its buffers and barriers are. Created once at the
    top of the kernel; the other ring ops take the value (it lowers to
    `smem` itself).

    ```mlir
    %k = hopper.ring.create %smem : !hopper.ring<stages = 2, ...>
    ```
  }];
  let arguments = (ins LLVM_PointerInAddressSpace<3>:$smem);
  let results = (outs Hopper_RingType:$ring);
  let assemblyFormat = "$smem attr-dict `:` qualified(type($ring))";
}

def Hopper_RingInitOp : Hopper_RingOp<"init", "initialise the barriers"> {
  let description = [{
    Initialises every stage's barriers, stage by stage: full with count
    `producers`, empty with count `arrivals`. One thread of the CTA runs
    it, before any other ring op; the inits must then be made visible
    (fence.mbarrier.init and a CTA, or with multicast a cluster, barrier),
    which the kernel does once for all of its rings.
  }];
  let arguments = (ins Hopper_RingType:$ring);
  let assemblyFormat = "$ring attr-dict `:` qualified(type($ring))";
}

def Hopper_RingProducerAcquireOp
    : Hopper_RingSlotOp<"producer_acquire", "wait until a slot's stage is free"> {
  let description = [{
    The producer waits until the consumers have released slot `slot`'s
    stage, i.e. until the empty barrier completed the phase before this
    slot's: try_wait.parity on it with the slot's phase flipped (the first
    `stages` slots pass at once, as a fresh barrier counts as having
    completed the phase before phase 0). Between acquire and commit the
    producer may write the stage's shared memory; the commit's arrive
    releases those writes to the consumers (the persistent kernel publishes
    its tile words that way).
  }];
}

def Hopper_RingProducerCommitOp
    : Hopper_RingOp<"producer_commit", "arrive on a slot's full barrier"> {
  let description = [{
    The producer's arrive on slot `slot`'s full barrier, expecting `tx`
    transaction bytes: the phase completes when the bytes of the stage's TMA
    loads (`hopper.tma_load` into the same slot, issued after the commit)
    have landed. `tx 0` is a plain arrive: the slot then carries only what
    the producer wrote between acquire and commit (a persistent producer's
    "no tile left", FP8's end flag for the transposer warps). A stage
    holds `stage_bytes`, so a commit expects at most that many.

    `count` (default 1, then not printed) is the arrivals the commit makes,
    at most the ring's `producers`: one thread that fills a stage alone in
    a ring whose other fills are copied by many lanes (each an arrival)
    arrives for all of them, after it expects the bytes (`mbarrier.arrive`
    with count - 1).

    ```mlir
    hopper.ring.producer_commit %k[%u] tx 32768 : !hopper.ring<...>
    hopper.ring.producer_commit %k[%u] tx 32768 count 128
        : !hopper.ring<..., producers = 128>
    ```
  }];
  let arguments = (ins Hopper_RingType:$ring, I32:$slot,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$tx,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>,
                                         "1">:$count);
  let assemblyFormat = [{
    $ring `[` $slot `]` `tx` $tx (`count` $count^)? attr-dict `:`
    qualified(type($ring))
  }];
  let extraClassDeclaration = [{
    /// One thread's commit of the whole stage (its TMA loads' bytes, or
    /// its words with tx 0): it arrives for all of the ring's producers.
    static RingProducerCommitOp createWhole(::mlir::OpBuilder &b,
                                            ::mlir::Location loc,
                                            ::mlir::Value ring,
                                            ::mlir::Value slot, uint64_t tx);
  }];
  let hasVerifier = 1;
}

def Hopper_RingConsumerWaitOp
    : Hopper_RingSlotOp<"consumer_wait", "wait until a slot's stage is full"> {
  let description = [{
    A consumer waits for slot `slot`: try_wait.parity on the stage's full
    barrier with the slot's phase. After it, the stage's data (and what the
    producer wrote before its commit) is visible.
  }];
}

def Hopper_RingConsumerReleaseOp
    : Hopper_RingSlotOp<"consumer_release", "free a slot's stage"> {
  let description = [{
    A consumer thread is done with slot `slot`'s stage: it arrives on the
    stage's empty barrier. In a ring of a 2-CTA cluster, both CTAs'
    producers multicast into the stage, so it may be refilled only once the
    consumers of both CTAs released it: lane 0 of each warp also arrives on
    the peer CTA's empty barrier (mapa + mbarrier.arrive.shared::cluster),
    predicated inside one asm rather than branched around, because a
    release sits inside a wgmma window that a branch would serialise; the
    remote arrive keeps the default .release.cta (as CUTLASS's cluster
    barriers do), since .release.cluster costs a MEMBAR.GPU per arrive.
    `arrivals` counts all of them: the local threads plus one per peer warp.
  }];
}

def Hopper_RingFillOp
    : Hopper_RingOp<"fill", "the producer's loads of a slot, beside their use",
        [SingleBlockImplicitTerminator<"::mlir::gpu::YieldOp">,
         RecursiveMemoryEffects, NoRegionArguments]> {
  let description = [{
    The kernel before warp specialization says what fills each ring slot
    where the consumers use it: the region holds the slot's loads
    (`hopper.load_tile` / `hopper.load_paged_tile` into `ring[slot]`, and
    what chooses between them), placed before the consumers' wait for the
    slot. `hopper-warp-specialize` moves every fill of the consumers region
    into the producer thread's program: the control flow around the fills
    and the arithmetic their operands need are recomputed there, each fill
    becomes the slot's `producer_acquire` and its body, in program order
    (the acquire after the tile claims the body starts with, if any: the
    claim then overlaps the wait); the consumers keep the rest. A slot may
    carry words only (`hopper.ring.publish` and a `producer_commit ... tx
    0`, no load): an end-of-work flag for a role that follows the ring.

    ```mlir
    hopper.ring.fill %k[%u] : !hopper.ring<...> {
      hopper.load_tile %mapK[%row, %head, %batch] into %k[%u] rows 128
          cols 128 : bf16, !hopper.ring<...>
    }
    hopper.ring.consumer_wait %k[%u] : !hopper.ring<...>
    ```
  }];
  let arguments = (ins Hopper_RingType:$ring, I32:$slot);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $ring `[` $slot `]` `:` qualified(type($ring)) $body attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_RingPublishOp
    : Hopper_RingOp<"publish", "words the producer hands over with a slot"> {
  let description = [{
    Inside a `hopper.ring.fill` of `ring[slot]`, at its top level, before
    its loads: the producer thread stores `words` (i32) at shared address
    `addr` (bytes, 4-aligned), where the consumers read them once they
    have waited for the slot (`hopper.ring.published`); the slot's commit,
    after the stores, releases them. A persistent kernel's producer
    publishes each tile it claims this way with the tile's Q. One scalar
    store per word: a vector store would want consecutive registers, which
    the producer's 24 cannot spare.

    ```mlir
    hopper.ring.publish %tile, %m0, %head, %batch at %addr
        to %q[%k] : !hopper.ring<...>
    ```
  }];
  let arguments = (ins Hopper_RingType:$ring, I32:$slot, I32:$addr,
                       Variadic<I32>:$words);
  let assemblyFormat = [{
    $words `at` $addr `to` $ring `[` $slot `]` attr-dict `:` qualified(type($ring))
  }];
  let hasVerifier = 1;
}

def Hopper_RingPublishedOp
    : Hopper_RingOp<"published", "a word published with a slot"> {
  let description = [{
    Word `word` of what the producer published with `ring[slot]` at
    `addr` (`hopper.ring.publish`), read from shared memory: valid between
    the consumers' wait for the slot and their release of it. Inside
    `hopper.warp_specialize` the verifier finds that wait (a
    `hopper.ring.consumer_wait` of the same ring and slot before the read,
    in its block or an enclosing one). Before warp
    specialization it names the value the producer publishes:
    `hopper-warp-specialize` gives the producer thread that value itself
    wherever its program needs the word (a persistent kernel's loop over
    the tiles it claims), and leaves the read to the consumers.

    ```mlir
    %m0 = hopper.ring.published %q[%k] word 1 at %addr : !hopper.ring<...>
    ```
  }];
  let arguments = (ins Hopper_RingType:$ring, I32:$slot, I32:$addr,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$word);
  let results = (outs I32:$value);
  let assemblyFormat = [{
    $ring `[` $slot `]` `word` $word `at` $addr attr-dict `:` qualified(type($ring))
  }];
  let hasVerifier = 1;
}

def Hopper_RingStageOp
    : Hopper_RingOp<"stage", "the stage index of a slot", [Pure]> {
  let description = [{
    Slot `slot`'s stage index, slot % stages: for the addresses the
    consumers compute themselves (the wgmma descriptors of the stage's
    buffer) and for what the kernel keeps per stage beside the ring (the
    published tile words of the Q ring).

    ```mlir
    %s = hopper.ring.stage %k[%u] : !hopper.ring<...>
    ```
  }];
  let arguments = (ins Hopper_RingType:$ring, I32:$slot);
  let results = (outs I32:$stage);
  let assemblyFormat = "$ring `[` $slot `]` attr-dict `:` qualified(type($ring))";
}

//===----------------------------------------------------------------------===//
// TMA load into a ring stage
//===----------------------------------------------------------------------===//

def Hopper_TmaLoadOp : Hopper_Op<"tma_load"> {
  let summary = "one TMA box from global memory into a ring stage";
  let description = [{
    cp.async.bulk.tensor of the box at `coords` (1 to 5 i32 coordinates,
    innermost first) of the tensor map `map` into slot `slot`'s stage of
    `ring`, `offset` bytes into the stage's buffer (a multiple of 128: TMA
    writes shared memory from 128-byte aligned addresses); its bytes
    complete on the stage's full barrier, which the producer's
    `producer_commit` told how many to expect. With `multicast`, the box
    lands at the same offset in the ring of every CTA of the cluster whose
    bit is set in the mask (bit r: the CTA of cluster rank r) and completes
    on each CTA's own full barrier; the ring must then be shared by the
    cluster (cluster = 2).

    ```mlir
    hopper.tma_load %mapK[%col, %head, %row, %batch] into %k[%u] at %off
        multicast 3 : !hopper.ring<...>
    ```
  }];
  let arguments = (ins LLVM_PointerInAddressSpace<0>:$map, Variadic<I32>:$coords,
                       Hopper_RingType:$ring, I32:$slot, I32:$offset,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$multicast);
  let assemblyFormat = [{
    $map `[` $coords `]` `into` $ring `[` $slot `]` `at` $offset
    (`multicast` $multicast^)? attr-dict `:` qualified(type($ring))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// A tile into a ring slot (before hopper-async-copy)
//===----------------------------------------------------------------------===//

def Hopper_LoadTileOp : Hopper_Op<"load_tile"> {
  let summary = "a tile of a tensor as the payload of a ring slot";
  let description = [{
    The producer's transfer of one tile into slot `slot` of `ring`, which
    it has acquired (`hopper.ring.producer_acquire`): rows `row` ..
    `row` + `rows` - 1 and columns 0 .. `cols` - 1 of head `head`, batch
    `batch` of the 4-D tensor map `map` (coordinates innermost first:
    column, head, row, batch), of `element` type. It completes the slot:
    the consumers' wait on it returns once the whole tile has landed.

    `hopper-async-copy` turns it into the transfer: a commit expecting the
    tile's bytes on the slot's full barrier, then one TMA box per 128-byte
    swizzle row of columns (`box_cols` = 128 / element bytes), box c at
    byte c * rows * 128 of the stage. In a ring shared by a 2-CTA cluster
    (cluster = 2) each CTA loads every other box (those of its cluster
    rank) and multicasts it into both CTAs' rings: each tile leaves L2
    once per pair, and the full barrier still expects the whole tile.

    ```mlir
    hopper.load_tile %mapK[%row, %head, %batch] into %k[%u] rows 128 cols 128
        : bf16, !hopper.ring<...>
    ```
  }];
  let arguments = (ins LLVM_PointerInAddressSpace<0>:$map, I32:$row, I32:$head,
                       I32:$batch, Hopper_RingType:$ring, I32:$slot,
                       ConfinedAttr<I64Attr, [IntPositive]>:$rows,
                       ConfinedAttr<I64Attr, [IntPositive]>:$cols,
                       TypeAttrOf<AnyTypeOf<[BF16, F16, F8E4M3FN]>>:$element);
  let assemblyFormat = [{
    $map `[` $row `,` $head `,` $batch `]` `into` $ring `[` $slot `]`
    `rows` $rows `cols` $cols attr-dict `:` $element `,` qualified(type($ring))
  }];
  let extraClassDeclaration = [{
    /// Bytes of one element, columns and bytes of one TMA box, boxes per
    /// row and bytes of the whole tile.
    int64_t getElementBytes();
    int64_t getBoxCols();
    int64_t getBoxBytes() { return getRows() * kSwizzleBytes; }
    int64_t getBoxes() { return getCols() / getBoxCols(); }
    int64_t getTileBytes() { return getBoxes() * getBoxBytes(); }
  }];
  let hasVerifier = 1;
}

def Hopper_LoadPagedTileOp : Hopper_Op<"load_paged_tile"> {
  let summary = "a tile of a paged tensor as the payload of a ring slot";
  let description = [{
    `hopper.load_tile` of a sequence stored in pages (a paged KV cache):
    the map's dimensions are (column, head, row in page, page), and row r
    of the sequence is row r % `page_size` of page `pages`[r / page_size]
    (`pages`: the sequence's row of the page table, i32 page indices).
    Rows `row` .. `row` + `rows` - 1 at or past `bound` (the sequence's
    rows) take the page of row `bound` - 1 (whose entry the table has):
    their values are the caller's to mask. `bound` must be at least 1 (a
    sequence without keys has no tiles to load). `page_size` must divide `rows`
    or be a multiple of it (a chunk of fewer than 8 rows is part of a
    128-byte swizzle atom: TMA swizzles by the shared-memory address, so
    its box lands in its rows of the atom).

    `hopper-async-copy` writes the commit of the tile's bytes and, per
    min(page_size, rows) rows (a chunk in one page), the page index's load
    and one TMA box per 128-byte swizzle row of columns, at byte c * rows *
    128 + chunk rows * 128 of the stage.

    ```mlir
    hopper.load_paged_tile %mapK[%row, %head] pages %table page_size %ps
        bound %len into %k[%u] rows 128 cols 128 : bf16, !hopper.ring<...>
    ```
  }];
  let arguments = (ins LLVM_PointerInAddressSpace<0>:$map, I32:$row, I32:$head,
                       Hopper_GlobalPtr:$pages, I32:$page_size, I32:$bound,
                       Hopper_RingType:$ring, I32:$slot,
                       ConfinedAttr<I64Attr, [IntPositive]>:$rows,
                       ConfinedAttr<I64Attr, [IntPositive]>:$cols,
                       TypeAttrOf<AnyTypeOf<[BF16, F16, F8E4M3FN]>>:$element);
  let assemblyFormat = [{
    $map `[` $row `,` $head `]` `pages` $pages `page_size` $page_size
    `bound` $bound `into` $ring `[` $slot `]` `rows` $rows `cols` $cols
    attr-dict `:` $element `,` qualified(type($ring))
  }];
  let extraClassDeclaration = [{
    int64_t getElementBytes() { return getElement().getIntOrFloatBitWidth() / 8; }
    int64_t getBoxCols() { return kSwizzleBytes / getElementBytes(); }
    int64_t getBoxBytes() { return getRows() * kSwizzleBytes; }
    int64_t getBoxes() { return getCols() / getBoxCols(); }
    int64_t getTileBytes() { return getBoxes() * getBoxBytes(); }
  }];
  let hasVerifier = 1;
}

def Hopper_PagedOffsetsOp : Hopper_Op<"paged_offsets",
    [MemoryEffects<[MemRead]>, AttrSizedOperandSegments]> {
  let summary = "where a paged copy's rows lie, a lane's, from the page table";
  let description = [{
    The first half of `hopper.copy_paged_tile`, on its own so that it can
    stand apart from the copy (hopper-copy-offsets: before the slot's wait,
    and once for a block's K and V, whose caches share their strides and
    page table). Each lane of the warps that run it (`warps`, this warp
    `warp`, as the copy's) loads the page of its rows of the tile: result
    j is, in 16-byte units, `pages`[r / `page_size`] * `stride_page` +
    (r % `page_size`) * `stride_row` for r = `row` + the tile's row that
    lane + 32 j of the warp copies (the copy's interleaving of its warps'
    passes of `rows_per_pass` rows), with r clamped to `bound` - 1 and the
    page index to `pool_pages` - 1 as the copy does. A null `pages`, or a
    `bound` of 0, reads nothing and gives zeros (a kernel whose cache is
    contiguous at the launch, where the offsets are computed but not used;
    offsets loaded ahead of a loop that runs no iteration). With `for`
    the base pointers of the copies the offsets serve, they also read
    nothing where the launch gives none of them (its copies do not run:
    it boxes its pages by TMA, or reads a contiguous cache). The page
    table does not change while a kernel runs, which is what lets two of
    these with the same operands be one.

    ```mlir
    %o = hopper.paged_offsets %table[%row] page_size %ps pool %n bound %len
        strides %sp, %sr rows 64 per_pass 4 warps 4 warp %w for %kc, %vc : i32
    ```
  }];
  let arguments = (ins Hopper_GlobalPtr:$pages, I32:$row, I32:$page_size,
                       I32:$pool_pages, I32:$bound, I64:$stride_page,
                       I64:$stride_row, Optional<I32>:$warp,
                       Variadic<Hopper_GlobalPtr>:$bases,
                       ConfinedAttr<I64Attr, [IntPositive]>:$rows,
                       ConfinedAttr<I64Attr, [IntPositive]>:$per_pass,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$warps);
  let results = (outs Variadic<I32>:$offsets);
  let assemblyFormat = [{
    $pages `[` $row `]` `page_size` $page_size `pool` $pool_pages `bound`
    $bound `strides` $stride_page `,` $stride_row `rows` $rows `per_pass`
    $per_pass (`warps` $warps^)? (`warp` $warp^)? (`for` $bases^)? attr-dict
    `:` type($offsets)
  }];
  let extraClassDeclaration = [{
    int64_t getRowsPerWarp() { return getRows() / getWarps(); }
    /// The rows whose page entries a lane loads: one per 32 of a warp's.
    static int64_t entriesFor(int64_t rowsPerWarp) {
      return (rowsPerWarp + 31) / 32;
    }
    /// The results: each of those rows' entry, then its row in its page.
    static int64_t resultsFor(int64_t rowsPerWarp) {
      return 2 * entriesFor(rowsPerWarp);
    }
  }];
  let hasVerifier = 1;
}

def Hopper_CopyPagedTileOp : Hopper_Op<"copy_paged_tile",
    [AttrSizedOperandSegments]> {
  let summary = "a paged tile copied by the lanes of the warp that runs it";
  let description = [{
    `hopper.load_paged_tile`'s tile, for pages of a few rows: every lane of
    the warp that runs it (hopper-warp-copy gives warp 0 the producer's
    program for it) copies 16-byte pieces by `cp.async`, FlashAttention-3's
    path for pages TMA cannot box whole; a box a row, the TMA path for such
    pages, issues too slowly. Row r of the sequence lies at byte
    `pages`[r / `page_size`] * `stride_page` + (r % `page_size`) *
    `stride_row` + `head` * `stride_head` of `base`; rows at or past
    `bound` read row `bound` - 1 (theirs to mask), and a page index at or
    past `pool_pages` (or negative) reads page `pool_pages` - 1, so that a
    wrong page table reads inside the pool. The offsets are held in
    16-byte units (32 bits): the pool's pages span at most 2^36 bytes. The
    stage's layout is the TMA tile's (128-byte swizzle rows, box c of
    columns at byte c * rows * 128): a piece's 16-byte unit within its row
    is XORed with the row's index mod 8, as the 128-byte swizzle does by
    address. Where the tensor's rows are narrower than the tile (`valid`
    columns: head dim 96 in a 128-column tile, FP8 head dim 64 in a box of
    128), the pieces past them are zero-filled and read nothing
    (cp.async's source size 0), as TMA fills a box past the tensor. The
    rows' offsets are `offsets` where given (`hopper.paged_offsets` of the
    same rows, warps and passes), else loaded here.

    `warps` warps share the copy (FlashAttention-3 copies by all four
    producer warps), warp `warp` (0 .. warps - 1, absent for one) taking
    the tile's rows warp x rows / warps onward: the warps of a
    `hopper.producer_warps` first 0 count `warps` (hopper-warp-copy reads
    `warps` and gives each copy its warp index). Within a warp, each lane
    loads the page of its rows lane, lane + 32, ... and hands the offsets
    to the lanes that copy those rows (shuffles), so a warp's rows are
    whole passes and a row's pieces (cols x element bytes / 16) a power of
    two up to 32. It completes the slot. In a ring whose `producers` are
    the copying lanes (32 x `warps`; the kernels' form): each lane's
    `cp.async.mbarrier.arrive.noinc`, its arrival once its copies land, no
    barrier between the warps. In a ring of one producer: every lane's
    `cp.async.mbarrier.arrive` without .noinc (the barrier waits for the
    lane's copies but expects no more arrivals), then, after the warp's
    barrier (several warps': the `copy` named barrier), warp 0's lane 0's
    plain arrive on the slot's full barrier (correct, but
    compute-sanitizer's synccheck reports the lanes' arrivals as a missing
    wait).

    ```mlir
    hopper.copy_paged_tile %kcache[%row, %head] strides %sp, %sr, %sh
        pages %table page_size %ps pool %n bound %len into %k[%u] rows 64
        cols 128 warps 4 warp %w : bf16, !hopper.ring<...>
    ```
  }];
  let arguments = (ins Hopper_GlobalPtr:$base, I64:$stride_page,
                       I64:$stride_row, I64:$stride_head, I32:$row, I32:$head,
                       Hopper_GlobalPtr:$pages, I32:$page_size,
                       I32:$pool_pages, I32:$bound,
                       Hopper_RingType:$ring, I32:$slot,
                       Optional<I32>:$warp, Variadic<I32>:$offsets,
                       ConfinedAttr<I64Attr, [IntPositive]>:$rows,
                       ConfinedAttr<I64Attr, [IntPositive]>:$cols,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$valid,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$warps,
                       TypeAttrOf<AnyTypeOf<[BF16, F16, F8E4M3FN]>>:$element);
  let assemblyFormat = [{
    $base `[` $row `,` $head `]` `strides` $stride_page `,` $stride_row `,`
    $stride_head `pages` $pages `page_size` $page_size `pool` $pool_pages
    `bound` $bound `into`
    $ring `[` $slot `]` `rows` $rows `cols` $cols (`valid` $valid^)?
    (`warps` $warps^)? (`warp` $warp^)? (`offsets` $offsets^)?
    attr-dict `:` $element `,` qualified(type($ring))
  }];
  let extraClassDeclaration = [{
    int64_t getElementBytes() { return getElement().getIntOrFloatBitWidth() / 8; }
    int64_t getBoxCols() { return kSwizzleBytes / getElementBytes(); }
    int64_t getBoxBytes() { return getRows() * kSwizzleBytes; }
    int64_t getBoxes() { return getCols() / getBoxCols(); }
    int64_t getTileBytes() { return getBoxes() * getBoxBytes(); }
    /// 16-byte pieces of a row, rows a pass of the warp's 32 lanes, and
    /// rows a warp copies.
    int64_t getPiecesPerRow() { return getCols() * getElementBytes() / 16; }
    int64_t getRowsPerPass() { return 32 / getPiecesPerRow(); }
    int64_t getRowsPerWarp() { return getRows() / getWarps(); }
    /// The pieces of the tensor's row (the rest are zero-filled).
    int64_t getValidPieces() {
      return getValid().value_or(getCols()) * getElementBytes() / 16;
    }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// FP8: V transposed in shared memory
//===----------------------------------------------------------------------===//

def Hopper_TransposeStageOp : Hopper_Op<"transpose_stage"> {
  let summary = "an 8-bit tile of a ring stage transposed into another ring's stage";
  let description = [{
    FP8 wgmma reads both operands K-major, and V's K (its rows, the keys) is
    not its contiguous dimension: V is transposed in shared memory (as
    FlashAttention-3 does), by `workers` warps of the producer warpgroup.
    Each of them runs this op with its index `worker` (0 ..
    `workers` - 1); together they read slot `slot`'s stage of `src`, the
    first `cols` (a multiple of 32) columns of a `rows` x 128k tile of
    bytes as TMA loaded it (boxes of 128 columns, rows of 128 bytes, 128B
    swizzle), and write `dst`'s stage of the same slot as `cols` rows of
    `rows` bytes, 128B-swizzled: the K-major B operand of O += P V. Rows of
    more than 128 keys (FP8's 160- or 224-key tiles, as FlashAttention-3's)
    continue in a second box of `cols` rows of 128 bytes, `cols` x 128
    bytes on (`hopper.wgmma.rs ... b_box_bytes`), whose bytes past the
    tile's keys are not written. Position p of a row holds key
    16 (p / 16) + 8 ((p % 4) / 2) + 2 ((p % 16) / 4) + p % 2: the key whose
    score the 8-bit P fragment (`hopper.trunc` to f8E4M3FN) keeps at k
    index p, so that P goes from the S accumulator to the wgmma A operand
    without moving between threads.

    A warp's unit is `unit_keys` keys (64 unless given; a power of two from
    16 to 128 that divides `rows`) x 32 columns, groups of 16 keys: per
    group one `ldmatrix.x4.trans` of 16-bit elements (keys 0-7 and 8-15
    of two 16-column chunks), four byte permutes (prmt) that make each
    column's word of four keys, and one `stmatrix.x4`, with the rows of
    each 8-row phase chosen so that neither side has bank conflicts (as
    FlashAttention-3's LDSM.T / STSM transpose); the workers take the
    units in turn. A unit's addresses are computed once and its groups'
    are constants from them: larger units, fewer instructions a group. The writes are
    then fenced for the async proxy; the caller waits for the source slot
    before (`hopper.ring.consumer_wait`) and, after a barrier of the
    workers, commits the destination slot (`hopper.ring.producer_commit`
    tx 0).

    ```mlir
    hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128
        : !hopper.ring<...>, !hopper.ring<...>
    hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 256
        unit_keys 128 : !hopper.ring<...>, !hopper.ring<...>
    hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 224 cols 128
        unit_keys 32 : !hopper.ring<...>, !hopper.ring<...>
    ```
  }];
  let arguments = (ins Hopper_RingType:$src, I32:$slot, Hopper_RingType:$dst,
                       I32:$worker, ConfinedAttr<I64Attr, [IntPositive]>:$workers,
                       ConfinedAttr<I64Attr, [IntPositive]>:$rows,
                       ConfinedAttr<I64Attr, [IntPositive]>:$cols,
                       DefaultValuedAttr<I64Attr, "64">:$unit_keys);
  let assemblyFormat = [{
    $src `[` $slot `]` `to` $dst `worker` $worker `of` $workers `rows` $rows
    `cols` $cols (`unit_keys` $unit_keys^)? attr-dict `:` qualified(type($src))
    `,` qualified(type($dst))
  }];
  let hasVerifier = 1;
}

#endif // FA3_HOPPER_RING_OPS
