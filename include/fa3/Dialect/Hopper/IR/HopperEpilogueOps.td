//===- HopperEpilogueOps.td - a tile's epilogue on fragments -*- tablegen -*-===//
//
// After a tile's last kv block, each consumer warpgroup turns its row
// state (m, l) and its O accumulator, all register fragments, into the
// kernel's outputs: O / l rounded to the output type, and the row's
// log-sum-exp. These ops take the fragments whole; convert-hopper-to-nvvm
// unrolls them into the thread's registers (EpilogueToNVVM.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FA3_HOPPER_EPILOGUE_OPS
#define FA3_HOPPER_EPILOGUE_OPS


// Not Pure: the quad's sums are shuffles across lanes (see softmax_step).
def Hopper_FinalizeRowsOp : Hopper_Op<"finalize_rows", [
    AllTypesMatch<["m", "l", "inv", "lse"]>]> {
  let summary = "a tile's row sums completed: 1 / l and the log-sum-exp";
  let description = [{
    `m` is each row's running max and `l` the thread's partial row sum (of
    its own columns: `hopper.softmax_step`'s l), both in the log2 domain of
    the softmax. The quad's four partial sums are added (shuffles across
    lanes 1 and 2 apart: the four threads of a row are adjacent lanes),
    then per row

      inv = l == 0 ? 0    : 1 / l                   (rcp.approx.ftz)
      lse = l == 0 ? -inf : (m + log2 l) * ln 2     (lg2.approx)

    A row with no visible key has l = 0: its output is 0 and its LSE -inf.
    The reciprocal is rcp.approx (1 ulp) rather than a correctly rounded
    division: O / l is rounded to 16 bits right after, and div.rn is a long
    sequence on each tile's serial epilogue. The LSE is in natural-log
    units (attn.flash_attention's lse).

    ```mlir
    %inv, %lse = hopper.finalize_rows %m, %l : !hopper.frag<64xf32>
    ```
  }];
  let arguments = (ins Hopper_Rows:$m, Hopper_Rows:$l);
  let results = (outs Hopper_Rows:$inv, Hopper_Rows:$lse);
  let assemblyFormat = "$m `,` $l attr-dict `:` qualified(type($m))";
}

def Hopper_StoreLseOp : Hopper_Op<"store_lse", [AttrSizedOperandSegments]> {
  let summary = "the log-sum-exp of a warpgroup's rows, to [B, Hq, Sq] f32";
  let description = [{
    Writes `lse` (one value per row, `hopper.finalize_rows`) to the f32
    tensor at `ptr`, contiguous [batch][heads][stride]: row r of the tile
    goes to element (batch * heads + head) * stride + row0 + r, where
    `stride` is `bound` unless given. `row0` is the warpgroup's first row
    (the tile's m0 + 64 x consumer). Of each row's quad, only the thread
    holding columns 0 and 1 (lane % 4 == 0) stores; rows at or past
    `bound` (Sq) are skipped, and nothing is stored when `ptr` is null
    (the caller asked for no LSE). A packed variable-length batch gives
    the stride (the tensor's Tq of [Hq, Tq]) and bounds the rows at its
    sequence's end. With `group` (GQA packing, g), the rows are (query, q
    head) pairs, query-major: row p is query p / g (bounded by `bound`) of
    head `head` + p % g.

    ```mlir
    hopper.store_lse %lse to %LSE rows %row0 head %h batch %b heads %Hq bound %Sq : !hopper.frag<64xf32>
    hopper.store_lse %lse to %LSE rows %row0 head %h batch %c0 heads %Hq bound %end stride %Tq : !hopper.frag<64xf32>
    ```
  }];
  let arguments = (ins Hopper_Rows:$lse, Hopper_GlobalPtr:$ptr, I32:$row0,
                       Optional<I32>:$group, I32:$head, I32:$batch,
                       I32:$heads, I32:$bound, Optional<I32>:$stride);
  let assemblyFormat = [{
    $lse `to` $ptr `rows` $row0 (`group` $group^)? `head` $head `batch` $batch
    `heads` $heads `bound` $bound (`stride` $stride^)? attr-dict `:`
    qualified(type($lse))
  }];
}

def Hopper_StoreOOp : Hopper_Op<"store_o", [AttrSizedOperandSegments]> {
  let summary = "O / l of a warpgroup's 64 rows to global memory, the "
                "transfer left to hopper-async-copy";
  let description = [{
    What an O tile store means, as `hopper.load_tile` is for a load: O / l
    (`inv` = 1 / l per row) of the warpgroup's rows row0 .. row0 + 63,
    rounded to `out_type`, at element

      batch * strides[0] + row * strides[1] + head * strides[2] + column

    of `ptr` for rows below `bound`, with `group` and `columns` as
    `hopper.store_o_direct` takes them. The clauses say how it may travel
    (attn-hopper-config's `tma_store`, and the rule for packed batches
    beside it), and `hopper-async-copy` writes the transfer:

    - none: `hopper.store_o_direct` (each thread's registers, 4-byte
      stores);
    - `staging %smem[offset] consumer[%c] of n`: through the staging
      buffer at byte `offset` of `smem`, copied out by the warpgroup's
      threads in 16-byte units (`hopper.store_o_staged`; FlashAttention-3's
      epilogue for packed batches: no box can cross a sequence's end);
    - with `tma %map tile(%row, %head)` as well: a TMA store of the staged
      boxes through the 4-D tensor map `map`, at (tile row `row`, tile head
      `head`, `batch`) (`hopper.store_o_tma`);
    - with `within(%r, %len)` too (a packed batch): the TMA store where the
      warpgroup's 64 rows lie inside their sequence (`r` + 64 <= `len`: its
      first row in the sequence and the sequence's length), else the direct
      store, in a warpgroup-uniform branch (both stores are warpgroup
      collectives).

    `wait_previous` (a persistent kernel's own staging buffer: the previous
    tile's store must have read it) and `drain` (the buffer is Q's,
    released to the producer's TMA loads right after: the store must be
    done with it when the op ends) need the staging clause. `group` (GQA
    packing) cannot go with tma: the TMA store's box is the tile's rows.

    ```mlir
    hopper.store_o %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h batch %b bound %Sq
        : !hopper.frag<64x128xf32> as bf16
    hopper.store_o %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h batch %b bound %Sq
        staging %smem[81920] consumer[%cw] of 2 tma %mapO tile(%m0, %h) wait_previous
        : !hopper.frag<64x128xf32> as bf16
    ```
  }];
  let arguments = (ins Hopper_Tile:$o, Hopper_Rows:$inv, Hopper_GlobalPtr:$ptr,
                       I64:$stride_batch, I64:$stride_row, I64:$stride_head,
                       I32:$row0, Optional<I32>:$group, I32:$head,
                       I32:$batch, I32:$bound,
                       Optional<Hopper_SharedPtr>:$smem,
                       Optional<I32>:$consumer,
                       Optional<Hopper_GenericPtr>:$map,
                       Optional<I32>:$tile_row, Optional<I32>:$tile_head,
                       Optional<I32>:$seq_row0, Optional<I32>:$seq_len,
                       OptionalAttr<I64Attr>:$staging_offset,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<3>]>>:$consumers,
                       UnitAttr:$wait_previous, UnitAttr:$drain,
                       TypeAttr:$out_type, OptionalAttr<I64Attr>:$columns);
  let assemblyFormat = [{
    $o `,` $inv `to` $ptr `strides` `(` $stride_batch `,` $stride_row `,`
    $stride_head `)` `rows` $row0 (`group` $group^)? `head` $head `batch` $batch `bound` $bound
    (`staging` $smem^ `[` $staging_offset `]` `consumer` `[` $consumer `]` `of` $consumers)?
    (`tma` $map^ `tile` `(` $tile_row `,` $tile_head `)`)?
    (`within` `(` $seq_row0^ `,` $seq_len `)`)?
    (`wait_previous` $wait_previous^)? (`drain` $drain^)?
    attr-dict `:` qualified(type($o)) `as` $out_type
  }];
  let builders = [
    // The direct store (no tma clause).
    OpBuilder<(ins "::mlir::Value":$o, "::mlir::Value":$inv, "::mlir::Value":$ptr,
                   "::mlir::Value":$strideBatch, "::mlir::Value":$strideRow,
                   "::mlir::Value":$strideHead, "::mlir::Value":$row0, "::mlir::Value":$group,
                   "::mlir::Value":$head, "::mlir::Value":$batch, "::mlir::Value":$bound,
                   "::mlir::Type":$outType, "::mlir::IntegerAttr":$columns), [{
      build($_builder, $_state, o, inv, ptr, strideBatch, strideRow,
            strideHead, row0, group, head, batch, bound, Value(), Value(),
            Value(), Value(), Value(), Value(), Value(), IntegerAttr(),
            IntegerAttr(), UnitAttr(), UnitAttr(), TypeAttr::get(outType),
            columns);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether O goes through the staging buffer; whether by TMA from it.
    bool isStaged() { return static_cast<bool>(getSmem()); }
    bool isTma() { return static_cast<bool>(getMap()); }
  }];
  let hasVerifier = 1;
}

def Hopper_StoreODirectOp : Hopper_Op<"store_o_direct"> {
  let summary = "O / l from the fragment to global memory, 4-byte stores";
  let description = [{
    Each thread multiplies its registers of row i by `inv` (1 / l of the
    row, `hopper.finalize_rows`), rounds each pair of adjacent columns to
    `out_type` (bf16 or f16) and stores the pair (4 bytes) at element

      batch * strides[0] + row * strides[1] + head * strides[2] + column

    of `ptr`, for rows row0 + 0 .. 63 below `bound` (Sq). The strides are
    in elements, the caller's (BSHD or BHSD); the column stride is 1.
    `row0` is the warpgroup's first row (the tile's m0 + 64 x consumer).
    With `columns`, only the first `columns` columns are stored: O's
    fragment may be wider than the tensor (head dim 96 is computed in a
    128-column tile). With `group` (GQA packing, g), the rows are (query,
    q head) pairs, query-major: row p is query p / g (bounded by `bound`)
    of head `head` + p % g. `out_type` f32 stores the pairs unrounded (8
    bytes each: a split-KV kernel's partial O).
    No shared memory and no synchronisation: the kernel's `tma-store=false`
    (measured 4-17 % slower than `hopper.store_o_tma` at 512-2k).

    ```mlir
    hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h batch %b bound %Sq
        : !hopper.frag<64x128xf32> as bf16
    ```
  }];
  let arguments = (ins Hopper_Tile:$o, Hopper_Rows:$inv, Hopper_GlobalPtr:$ptr,
                       I64:$stride_batch, I64:$stride_row, I64:$stride_head,
                       I32:$row0, Optional<I32>:$group, I32:$head,
                       I32:$batch, I32:$bound,
                       TypeAttr:$out_type, OptionalAttr<I64Attr>:$columns);
  let assemblyFormat = [{
    $o `,` $inv `to` $ptr `strides` `(` $stride_batch `,` $stride_row `,`
    $stride_head `)` `rows` $row0 (`group` $group^)? `head` $head `batch` $batch `bound` $bound
    attr-dict `:` qualified(type($o)) `as` $out_type
  }];
  let hasVerifier = 1;
}

def Hopper_ReduceAddOp : Hopper_Op<"reduce_add"> {
  let summary = "an f32 tile added into global memory in accumulator order, by atomic adds";
  let description = [{
    Adds the warpgroup's 64 x N f32 tile into the 64 N floats at `ptr`,
    which hold it in accumulator order: thread t's registers 4j .. 4j + 3
    (rows r and r + 8, columns 8j + 2 (t mod 4) + {0, 1}: the wgmma
    accumulator layout) are the floats at 4 (128 j + t). So each register
    quadruple is one red.global.add.v4.f32 and a warp's reduction covers
    512 contiguous bytes (PTX ISA, red: vector f32 reductions, sm_90). The
    backward's dQaccum is laid out this way per (batch, head, 64 queries,
    warpgroup); its <kernel>_post reads it back. `ptr` must be 16-byte
    aligned (the launcher's).

    With `columns` (a multiple of 8 below N), only the tile's first
    `columns` columns are added: the quadruples j < columns / 8, the first
    64 `columns` floats at `ptr` (a tile wider than the tensor: the
    backward's head dim 96, whose second half of dQ's 128 columns holds
    32 of the head dim's).

    ```mlir
    hopper.reduce_add %dq to %p : !hopper.frag<64x64xf32>
    hopper.reduce_add %dq to %p columns 32 : !hopper.frag<64x64xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$tile, Hopper_GlobalPtr:$ptr,
                       OptionalAttr<I64Attr>:$columns);
  let assemblyFormat = [{
    $tile `to` $ptr (`columns` $columns^)? attr-dict `:` qualified(type($tile))
  }];
  let hasVerifier = 1;
}

def Hopper_StageFragmentOp : Hopper_Op<"stage_fragment"> {
  let summary = "an f32 tile into shared memory in accumulator order";
  let description = [{
    Stores the warpgroup's 64 x N f32 tile at byte `offset` of `smem` in
    the accumulator order of `hopper.reduce_add` (thread t's registers
    4j .. 4j + 3 at byte 16 (128 j + t)): one 16-byte store a quadruple,
    a warp's 512 contiguous bytes, free of bank conflicts. Then fences the
    stores for the async proxy (fence.proxy.async.shared::cta), so that a
    bulk copy issued after a barrier reads them. The 64 N x 4 bytes are
    what one `hopper.reduce_add_bulk` adds into an accumulator-order
    global buffer.

    ```mlir
    hopper.stage_fragment %dq to %smem[%off] : !hopper.frag<64x64xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$tile, Hopper_SharedPtr:$smem, I32:$offset);
  let assemblyFormat = [{
    $tile `to` $smem `[` $offset `]` attr-dict `:` qualified(type($tile))
  }];
  let hasVerifier = 1;
}

def Hopper_ReduceAddBulkOp : Hopper_Op<"reduce_add_bulk"> {
  let summary = "f32s in shared memory added into global memory by one bulk reduction";
  let description = [{
    Adds the `bytes` / 4 floats at byte `offset` of `smem` element-wise into
    those at `ptr`, by one cp.reduce.async.bulk .add.f32 (the L2 adds them;
    the issuing thread goes on) committed as a bulk group of its own. The
    backward's dQ writer (one thread of the producer warpgroup) issues it
    for each warpgroup's `hopper.stage_fragment`, so that the consumers
    neither wait for atomics nor hold their addresses; before the staging
    buffer is written again, the writer waits for the group's reads
    (cp.async.bulk.wait_group.read). Both addresses 16-byte aligned,
    `bytes` a positive multiple of 16.

    ```mlir
    hopper.reduce_add_bulk %smem[%off] to %p bytes 16384
    ```
  }];
  let arguments = (ins Hopper_SharedPtr:$smem, I32:$offset,
                       Hopper_GlobalPtr:$ptr, I64Attr:$bytes);
  let assemblyFormat = [{
    $smem `[` $offset `]` `to` $ptr `bytes` $bytes attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_WaitTurnOp : Hopper_Op<"wait_turn"> {
  let summary = "wait until a turn counter in global memory reaches `turn`";
  let description = [{
    Spins (one thread) until the u32 at `counter` equals `turn`, each read
    an acquire at GPU scope, then fences the generic proxy against the
    async proxy (fence.proxy.async.global), so that bulk reductions the
    thread issues next come after the ones whose `hopper.pass_turn` it
    saw. The deterministic backward's dQ writer waits for its kv block's
    turn on each dQ tile (FlashAttention-3's deterministic mode): a tile's
    sums are then added in one order every run. The CTAs whose turns come
    first must be running or done: they have lower block indices, which
    the hardware starts first.

    ```mlir
    hopper.wait_turn %counter, %n
    ```
  }];
  let arguments = (ins Hopper_GlobalPtr:$counter, I32:$turn);
  let assemblyFormat = [{ $counter `,` $turn attr-dict }];
}

def Hopper_PassTurnOp : Hopper_Op<"pass_turn"> {
  let summary = "count a turn on once this thread's bulk reductions are done";
  let description = [{
    Waits until every bulk group the thread committed has completed, its
    writes included (cp.async.bulk.wait_group 0), then adds 1 to the u32
    at `counter` with release semantics at GPU scope
    (red.release.gpu.global.add.u32): whoever `hopper.wait_turn`s for the
    next turn sees those writes done.

    ```mlir
    hopper.pass_turn %counter
    ```
  }];
  let arguments = (ins Hopper_GlobalPtr:$counter);
  let assemblyFormat = [{ $counter attr-dict }];
}

def Hopper_StoreOTmaOp : Hopper_Op<"store_o_tma"> {
  let summary = "O / l through shared memory and a TMA store, one per warpgroup";
  let description = [{
    Consumer warpgroup `consumer` (of `consumers`) stages its 64 rows of
    O / l (`inv` = 1 / l per row), rounded to `out_type`, in shared memory
    and one of its threads stores them by TMA through the tensor map `map`
    (4-D, coordinates (column, head, row, batch), boxes of 64 columns x 64
    rows, 128B swizzle):

    - The staging buffer, at byte `staging_offset` of the CTA's shared
      memory `smem` (1024-aligned: 128B swizzle atoms), holds every
      warpgroup's rows in the layout of the TMA boxes: [ceil(D / 64)
      boxes][64 x consumers rows][128 bytes] (O's width D a multiple of
      16; a last box of fewer columns is staged in part and the tensor map,
      whose head dim ends there, clips the rest), this warpgroup's rows at
      64 x consumer. In a box row, 16-byte unit u of row r sits at unit
      u ^ (r % 8) (128B swizzle), which also makes the warps' writes
      bank-conflict free.
    - The registers go there by `stmatrix` (.x4, 8x8 b16 matrices): the
      accumulator's n8 blocks k, k + 1 of a warp's 16 rows are exactly the
      four matrices of one stmatrix, so each thread writes its own
      registers without a shuffle.
    - fence.proxy.async (the generic-proxy writes become visible to the
      TMA unit, the async proxy), the warpgroup's `epilogue` named barrier
      (`hopper.named_barrier.sync epilogue[consumer]`, 128 threads), then
      the leader (thread 0 of the warpgroup) issues one TMA store per box
      and commits them as a bulk group: one thread, because a TMA store
      moves the whole box. Rows past the tensor's end (Sq) are clipped by
      the TMA unit. The box is at (0 .. D - 64, head, m0 + 64 x consumer,
      batch); `m0` is the tile's first row.

    Two flags for a persistent kernel, whose next tile reuses the buffer:

    - `wait_previous`: before staging, the leader waits until the previous
      tile's O store has read the buffer (cp.async.bulk.wait_group.read 0),
      then the warpgroup syncs on its epilogue barrier. For a buffer of
      O's own, whose previous store may still be in flight.
    - `drain`: after committing, the leader waits until this store has
      read the buffer, then the warpgroup syncs on its epilogue barrier:
      when any thread of the warpgroup is past the op, the buffer is free.
      For O staged in a buffer that is needed again right away (Q's, which
      the caller then releases to the producer).

    Without either, the buffer must not be rewritten before the bulk group
    has been read: the caller waits (cp.async.bulk.wait_group.read) before
    the CTA exits or reuses it.

    ```mlir
    hopper.store_o_tma %o, %inv to %mapO tile(%m0, %head, %batch) staging %smem[81920]
        consumer[%cw] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
    ```
  }];
  let arguments = (ins Hopper_Tile:$o, Hopper_Rows:$inv, Hopper_GenericPtr:$map,
                       I32:$m0, I32:$head, I32:$batch,
                       Hopper_SharedPtr:$smem, I64Attr:$staging_offset,
                       I32:$consumer,
                       ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<3>]>:$consumers,
                       UnitAttr:$wait_previous, UnitAttr:$drain,
                       TypeAttr:$out_type);
  let assemblyFormat = [{
    $o `,` $inv `to` $map `tile` `(` $m0 `,` $head `,` $batch `)`
    `staging` $smem `[` $staging_offset `]`
    `consumer` `[` $consumer `]` `of` $consumers
    (`wait_previous` $wait_previous^)? (`drain` $drain^)?
    attr-dict `:` qualified(type($o)) `as` $out_type
  }];
  let hasVerifier = 1;
}

def Hopper_StoreOStagedOp : Hopper_Op<"store_o_staged"> {
  let summary = "O / l through shared memory, copied out by the warpgroup "
                "in 16-byte rows";
  let description = [{
    O / l (`inv` = 1 / l per row) of consumer warpgroup `consumer`'s 64
    rows, rounded to `out_type`, staged in shared memory exactly as
    `hopper.store_o_tma` stages it (stmatrix into the 128B-swizzled box
    layout at byte `staging_offset` of `smem`), then, after the
    warpgroup's epilogue barrier, copied out by its 128 threads: 16 bytes
    (8 columns) a thread at a time, consecutive threads on consecutive
    16-byte units of a row, so that each warp writes whole rows of O
    (coalesced), to element

      batch * strides[0] + row * strides[1] + head * strides[2] + column

    of `ptr` for rows row0 + 0 .. 63 below `bound`, with `group` (GQA
    packing) and `columns` (the tensor's width where the fragment is
    wider) as `hopper.store_o_direct` takes them. FlashAttention-3's
    epilogue for packed variable-length batches: no box can cross a
    sequence's end, and there is no branch between two stores. The rows'
    strides must keep 16-byte alignment (as a TMA store's). `wait_previous`
    (a persistent kernel's own O buffer): the warpgroup syncs on its
    epilogue barrier before staging, so that every thread has copied out
    the previous tile's rows. A thread's copy-out reads are complete once
    it has stored them; `drain` (the buffer is Q's, which the caller then
    releases to the producer's TMA loads): each thread ends with
    fence.proxy.async, so that its generic-proxy accesses come before the
    async proxy's writes of the next Q.

    ```mlir
    hopper.store_o_staged %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h batch %b bound %end
        staging %smem[81920] consumer[%cw] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
    ```
  }];
  let arguments = (ins Hopper_Tile:$o, Hopper_Rows:$inv, Hopper_GlobalPtr:$ptr,
                       I64:$stride_batch, I64:$stride_row, I64:$stride_head,
                       I32:$row0, Optional<I32>:$group, I32:$head,
                       I32:$batch, I32:$bound,
                       Hopper_SharedPtr:$smem, I64Attr:$staging_offset,
                       I32:$consumer,
                       ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<3>]>:$consumers,
                       UnitAttr:$wait_previous, UnitAttr:$drain,
                       TypeAttr:$out_type, OptionalAttr<I64Attr>:$columns);
  let assemblyFormat = [{
    $o `,` $inv `to` $ptr `strides` `(` $stride_batch `,` $stride_row `,`
    $stride_head `)` `rows` $row0 (`group` $group^)? `head` $head `batch` $batch `bound` $bound
    `staging` $smem `[` $staging_offset `]` `consumer` `[` $consumer `]` `of` $consumers
    (`wait_previous` $wait_previous^)? (`drain` $drain^)?
    attr-dict `:` qualified(type($o)) `as` $out_type
  }];
  let hasVerifier = 1;
}

#endif // FA3_HOPPER_EPILOGUE_OPS
