//===- Passes.td - hopper dialect passes -----------------------*- tablegen -*-===//

#ifndef FA3_HOPPER_PASSES
#define FA3_HOPPER_PASSES

include "mlir/Pass/PassBase.td"

def HopperWarpSpecialize : Pass<"hopper-warp-specialize"> {
  let summary = "Move the consumers' ring fills into the producer thread";
  let description = [{
    Warp specialization proper: the kernel pass writes one program, the
    consumers region of a `hopper.warp_specialize`, in which each ring
    slot's loads stand where the slot is used (`hopper.ring.fill`, before
    the consumers' wait). This pass builds the producer thread's program
    from it (a `hopper.producer_thread` at the start of the producer
    region):

    - the control flow around the fills: each `scf.for` and `scf.if` that
      holds one, rebuilt without results or loop-carried values;
    - the arithmetic and reads the fills' operands and that control flow
      need, cloned (a `hopper.warp_uniform` becomes its operand: one lane
      runs the producer thread);
    - each fill, in program order, as `hopper.ring.producer_acquire` of
      its slot followed by its loads (hopper-async-copy then writes their
      commits and transfers).

    The fills leave the consumers, and with them what only they needed.
    The producer thread thus issues slot after slot as the consumers use
    them, and runs ahead of them by the ring's depth. Refused with the
    reason: a fill that needs the consumer index, a loop-carried value, a
    result of control flow that holds fills, a value of the thread's own
    (its index, a register fragment; also where computed above the roles),
    or an op the producer thread cannot run again for itself (a write, a
    read of shared memory, a barrier, a warp-wide shuffle, a call of a
    function without a body or of one that calls itself); a fill inside
    control flow other than scf.for and scf.if; a fill whose body holds
    more than its loads and what chooses between them; ring fills beside a
    hopper.producer_thread already built.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def HopperWarpCopy : Pass<"hopper-warp-copy"> {
  let summary = "The copies' warps run the producer's program where its "
                "copies take every lane (small pages)";
  let description = [{
    `hopper.copy_paged_tile` (the decoding kernel's path for pages of fewer
    rows than its kv tile, FlashAttention-3's cp.async producer) is copied
    by every lane of the warps that run it (its `warps`: four, as
    FlashAttention-3, or warp 0 alone where FP8's warps 1 .. 3 transpose
    V; four beside a transposer on warps 1 .. 3 that counts all four as
    its workers, whose step hopper-producer-warp-transpose then moves into
    their program). Where the producer thread's program (`hopper.producer_thread`)
    holds one, this pass gives that program to those warps
    (`hopper.producer_warps ... first 0 count N`, each copy its warp's
    index): every lane follows its control flow and waits for the slots
    it acquires, and each run of steps one thread must take (tile claims,
    a slot's words and commit, `hopper.load_tile` and
    `hopper.load_paged_tile`, which hopper-async-copy then turns into one
    thread's TMA transfers) is a `hopper.producer_thread` inside it, whose
    results reach every lane.

    Runs after hopper-warp-specialize and before hopper-async-copy. A
    program without such copies is left as it is; a copy left outside its
    warps' program is refused by convert-hopper-to-nvvm. Refused here:
    copies of one program by different numbers of warps; warps another
    role runs (but for that transposer); an op
    of the program that every lane could not run (a write, a barrier, a
    read of the thread's index, a TMA transfer already written, a call of a
    function that does such things).
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def HopperCopyOffsets : Pass<"hopper-copy-offsets"> {
  let summary = "Load a paged copy's page-table entries one kv block "
                "ahead, once for a block's K and V";
  let description = [{
    `hopper.copy_paged_tile` loads the page-table entries of its rows, then
    copies them: where it stands, right after its slot's
    `hopper.ring.producer_acquire`, every copy waits first for the empty
    slot and then for those loads. This pass splits each copy of a warps'
    program (after hopper-warp-copy) into `hopper.paged_offsets` and the
    copy of those offsets, and moves the offsets before the acquire of the
    copy's ring and slot that precedes it (in its block or an enclosing
    one, up to the program), where all its operands are available: the
    loads then run while the producer waits for the slot. A later offsets
    op in the same block with the same operands (a block's V after its K:
    the caches share the page table and strides) takes the earlier one's
    results: the page table does not change while the kernel runs. Where
    no acquire precedes the copy, or an operand is computed after it, the
    offsets stay just before the copy (the copy's own loads, split off).
    The offsets now run where the page table is given though the launch
    boxes the pages (the copy then skipped by its branch): a load a lane
    of a block's entries, while the producer waits. Only copies whose
    lanes load one entry each (at most 32 rows a warp) are split: with
    more, the carried entries cost the producer's few registers (FP8's
    copies by warp 0 alone, four a lane, spilled and ran slower).

    With `ahead` (the default), offsets in an scf.for's body whose row
    follows from the induction variable (and whose other operands come
    from outside the loop) are loaded one iteration early: the next
    iteration's where this one's stood, carried into it, the first
    iteration's before the loop. Before the wait alone did not speed the
    copies up (the slot is mostly free, so the load's latency still stood
    before the copy); one iteration ahead did (bench/NOTES.md, Log, "Page-
    table loads one block ahead").

    With `only-when-copying` (the default), each offsets op names the
    bases of its program's copies (`for`, where every base comes from
    above the warps' program): it reads the page table only where the
    launch gives one of them, since a launch that boxes its pages by TMA
    runs no copy, and its producer would otherwise load their entries on
    every fill's path: paged prefill with boxed pages of 256 rows +1-6 %,
    pages of 16 (copied) and decoding unchanged (bench/NOTES.md, Log,
    "The copies' offsets only where they copy").
  }];
  let options = [
    Option<"ahead", "ahead", "bool", /*default=*/"true",
           "load a loop's offsets one iteration ahead (false: just before "
           "the slot's wait)">,
    Option<"onlyWhenCopying", "only-when-copying", "bool",
           /*default=*/"true",
           "the offsets read the page table only where the launch gives a "
           "copy's base (a boxing launch runs no copy)">,
  ];
}

def HopperProducerWarpTranspose : Pass<"hopper-producer-warp-transpose"> {
  let summary = "V's filling warps transpose V too, one fill behind (FP8)";
  let description = [{
    FP8's V transposer runs on warps 1 .. 3 of the producer warpgroup
    (`hopper.producer_warps ... first 1`). Where its `hopper.transpose_stage`
    counts one worker more than those warps (the kernel's `transpose_warps
    4`), the warps that fill V transpose it too, as in FlashAttention-3,
    whose four producer warps transpose each slot one stage behind their
    loads:

    - TMA loads (the producer thread's program, `hopper.producer_thread`):
      warp 0 runs that program as a whole warp (`hopper.producer_warps
      ... first 0 count 1`): every lane follows its control flow and waits
      for the slots it acquires; each run of steps one thread must take
      (tile claims and the counter's reset, a slot's words and commit, TMA
      loads) is a `hopper.producer_thread` inside it, whose results (the
      tile a claim took) reach every lane. It is worker 0; warps 1 .. 3
      keep their loop, and the transposed slot's commit stays warp 1's.
    - Small pages copied by warps 0 .. 3 (hopper-warp-copy's program of
      the decoding kernel, `first 0 count 4`): the four copying warps are
      the four workers, each its warp's index; the step takes the
      transposed slot's commit (thread 32's) with it, and the loop of
      warps 1 .. 3 is erased.

    The step (the wait for V's slot, the transposed slot's acquire, the
    transpose, V's release and the transposers' barrier) follows each
    fill site: the op of the kv loop's body that holds a fill of V (a
    commit carrying bytes, or a copy of pages), itself or in a branch (the
    decoding kernel's paths: copied pages, a box a page, a contiguous
    cache). In the kv loop, after each fill but the first, the previous
    block's slot; after the loop the last block's, so that a tile's slots
    are all transposed before the next tile's Q (with one Q buffer it
    waits for the consumers to finish this tile, whose last P V waits for
    that slot); a fill outside loops, its own slot; a fill that carries
    words only (`tx 0`: the end of the tiles), none. The transposers'
    named barrier is marked `diverged` (warp 0's lanes may reach it apart).

    Runs after hopper-async-copy (the loads are TMA transfers by then).
    A kernel without such a transposer is left as it is; one that needs
    it and did not get it is refused by convert-hopper-to-nvvm. Refused
    here: a transposer that asks for warp 0 beside no producer thread or
    copying warps; copying warps neither warp 0 alone nor all the workers;
    a step that is not in a loop over V's slots, or reads the transposer
    warps' own values; a fill of V in a loop its fillers cannot follow one
    behind (a step other than 1, a slot other than the induction variable
    plus a value from before the loop); two paths of one fill site that
    fill different slots; an op of the producer thread's program that
    every lane could not run (a write, a barrier, a read of the thread's
    index, a call of a function that does such things).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def HopperPingPong : Pass<"hopper-pingpong"> {
  let summary = "Order two consumer warpgroups' wgmma issues (ping-pong)";
  let description = [{
    FA3's warp scheduling: the two consumer warpgroups of a
    `hopper.warp_specialize` marked `hopper.pingpong` take turns to issue
    their warpgroup MMAs, so that one's softmax runs while the other's
    GEMMs do. Each issue window — an `nvvm.wgmma.fence.aligned` and the
    `hopper.wgmma.ss` / `hopper.wgmma.rs` ops right after it — is preceded
    by a sync on the consumer's own turn barrier and followed by an arrive
    on the other's (`hopper.named_barrier` kind `turn`, 256 threads: 128
    syncing, 128 arriving). Both consumers issue as many windows, so the
    turns are balanced by two edges around the consumers' region: consumer 1
    opens consumer 0's first turn at the start, consumer 0 takes the turn
    consumer 1 handed over last at the end (in a persistent kernel the turn
    thus passes on from one tile to the next, and consumer 0 starts an
    epilogue without waiting for consumer 1's last turn). The two consumers
    must run
    the same number of windows (in the kernel they work on one tile, whose
    kv blocks set the count). The marker is removed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def HopperAsyncCopy : Pass<"hopper-async-copy"> {
  let summary = "Turn tile loads into ring slots, and O stores, into TMA transfers";
  let description = [{
    Each `hopper.load_tile` (a tile of a tensor as the payload of an
    acquired ring slot) becomes its transfer: a
    `hopper.ring.producer_commit` expecting the tile's bytes, then one
    `hopper.tma_load` per 128-byte swizzle row of columns (box c at byte
    c * rows * 128 of the stage). In a ring shared by a 2-CTA cluster each
    CTA loads the boxes of its cluster rank (rank, rank + 2, ...) with
    multicast into both CTAs' rings. A `hopper.load_paged_tile` (a tile
    of a paged KV cache) becomes the commit and a loop over its pages'
    chunks of rows: the page index from the page table, then the chunk's
    boxes. A `hopper.store_o` (a warpgroup's O rows and where they go)
    becomes `hopper.store_o_tma` where its `tma` clause allows it (in a
    packed batch, `within`: only where the 64 rows lie inside their
    sequence, else `hopper.store_o_direct` in a warpgroup-uniform branch),
    otherwise `hopper.store_o_direct`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect"];
}

def HopperOverlap : Pass<"hopper-overlap"> {
  let summary = "Overlap a kv block's softmax with the previous block's P V "
                "(FA3's intra-warpgroup pipelining)";
  let description = [{
    Software-pipelines each `scf.for` marked `hopper.overlap` by one
    iteration. Stage 1 of an iteration is its `hopper.wgmma.rs` (O += P V),
    the `nvvm.wgmma.fence.aligned` before it, its `hopper.wgmma.wait 0`
    (whose result the body yields as O), the arithmetic only its descriptor
    needs, and the wait and release of the ring slots that arithmetic
    addresses; the rest is stage 0 (S = Q K^T, the softmax step, O's
    rescale). The result:

    - prologue: stage 0 of the first iteration, specialised to the initial
      state: a `hopper.softmax_step` from m = -inf, l = 0 (a
      `hopper.fill` of -inf and a `hopper.zero`) becomes the stateless
      first step, and the rescale of an O that starts as `hopper.zero` is
      dropped with the vote that guards it;
    - the loop from the second iteration: stage 0 of iteration t with
      stage 1 of t - 1 merged in: its descriptor arithmetic before stage
      0's first ring wait, its ring waits before stage 0's wgmma fence, its
      product right after stage 0's last wgmma of that window (the waits
      in between expect one more group in flight), its wait at O's first
      use in each block (in both arms of a lazy-rescale branch), its
      releases at the end. P of iteration t - 1 is carried; a slot
      `x + iv` of stage 1 becomes `x + iv - step`;
    - tail: stage 1 of the last iteration, placed at the first use of the
      loop's O (work after the loop that does not read O, such as
      releasing Q's ring slot, comes first).

    The loop must sit in an `scf.if` on ub > lb (its first iteration is
    peeled) and step by 1. What it cannot pipeline is refused with the
    reason (a second wgmma window of stage 0 before O's first use, a
    product whose descriptor does not come from a ring slot of its own,
    stage 1 reading the loop's state, ...). The marker is removed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FA3_HOPPER_PASSES
