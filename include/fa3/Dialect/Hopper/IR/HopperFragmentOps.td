//===- HopperFragmentOps.td - register fragments and their math -*- tablegen -*-===//
//
// A consumer warpgroup's tiles live in registers, spread over its 128
// threads in the layout of the wgmma accumulator. These ops keep such a
// tile one SSA value of a fragment type; only convert-hopper-to-nvvm
// unrolls it into one value per register.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_HOPPER_FRAGMENT_OPS
#define FA3_HOPPER_FRAGMENT_OPS

def Hopper_FragmentType : TypeDef<Hopper_Dialect, "Fragment"> {
  let mnemonic = "frag";
  let summary = "a warpgroup's 64-row tile in registers, wgmma accumulator layout";
  let description = [{
    `!hopper.frag<64xNxf32>`: a 64 x N tile held by the 128 threads of a
    warpgroup in the wgmma m64nNk16 accumulator layout: thread t (warp w =
    t / 32, lane l = t % 32) holds rows 16w + l/4 and 16w + l/4 + 8, columns
    8k + 2(l % 4) + {0, 1} for k < N / 8, as registers 4k + 2i + e (i the
    row, e the column). N / 2 f32 registers a thread.

    `!hopper.frag<64xNxbf16>` (or f16): the same tile in 16-bit floats, two
    to a 32-bit register ({e = 0, e = 1} of one row). This is also the
    register A operand of a wgmma with K = N (a P V product takes the
    softmax's P without moving it between threads).

    `!hopper.frag<64xNxf8E4M3FN>`: the same tile in 8-bit floats, the
    register A operand of an FP8 wgmma (k-steps of 32 columns): for k-step
    c, register 4c + 2h + i holds row i of the thread's (i = 0, 1) and the
    tile's columns 32c + 16h + 8 {0, 1} + 2 (l % 4) + {0, 1}, lowest byte
    first. wgmma reads the register as the k indices 32c + 16h + 4 (l % 4)
    + {0 .. 3}; the B operand (V transposed, `hopper.transpose_stage`) holds
    its rows in that order, so the product is P V. (`hopper.load_shared`
    leaves an 8-bit tile in wgmma's own k order instead, for a B in
    natural order.)

    `!hopper.frag<64xf32>`: one value per row of such a tile, held by the
    four threads of the row's quad (two rows a thread). Row maxima are the
    row's; row sums (`hopper.softmax_step`'s l) are the thread's partial
    sums over its own columns until `hopper.finalize_rows` adds the quad's.
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Rows of the tile (64) and columns (N; 1 for a row vector).
    int64_t getRows() const { return getShape()[0]; }
    int64_t getColumns() const { return getShape().size() == 2 ? getShape()[1] : 1; }
    bool isRowVector() const { return getShape().size() == 1; }
    /// 32-bit registers a thread holds: N / 2 (f32), N / 4 (16-bit), 2 (rows).
    int64_t getRegisters() const;
  }];
}

def Hopper_Tile : Type<CPred<"::llvm::isa<::fa3::hopper::FragmentType>($_self) && "
                             "!::llvm::cast<::fa3::hopper::FragmentType>($_self).isRowVector()">,
                       "a 64xN register fragment", "::fa3::hopper::FragmentType">;
// There is one row vector type, !hopper.frag<64xf32>: buildable, so that an
// op's syntax may spell only its tile's type.
def Hopper_Rows : Type<CPred<"::llvm::isa<::fa3::hopper::FragmentType>($_self) && "
                             "::llvm::cast<::fa3::hopper::FragmentType>($_self).isRowVector()">,
                       "a row vector fragment (64 x f32)", "::fa3::hopper::FragmentType">,
                  BuildableType<"::fa3::hopper::FragmentType::get($_builder.getContext(), "
                                "::llvm::ArrayRef<int64_t>{64}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// Warpgroup MMA
//===----------------------------------------------------------------------===//

def Hopper_WgmmaSSOp : Hopper_Op<"wgmma.ss", [
    OptionalTypesMatchWith<"the accumulator has the result's type", "d", "c",
                           "$_self">]> {
  let summary = "D = A B^T of two shared-memory tiles, one wgmma group";
  let description = [{
    Issues the k-steps of a 64 x N x K warpgroup product whose operands are
    both in shared memory, K-major, 128B-swizzled, stored as boxes of 64
    columns (the TMA boxes): `desc_a` and `desc_b` are the wgmma
    descriptors of the first box, `a_box_bytes` / `b_box_bytes` the distance
    between boxes. The accumulator starts at zero (scale-d 0 on the first
    k-step), or at `c` where given (`acc %c`: D = C + A B^T, as the
    backward's dK and dV accumulate when both operands are in shared
    memory); the k-steps form one wgmma group (commit). The result is
    asynchronous: read it only after `hopper.wgmma.wait`.

    With `a_mn_major` (`b_mn_major`) the operand is stored transposed:
    its M (N) index runs along the 128-byte swizzle rows and its K index
    down the rows, as V is for P V; a k-step is then 16 rows (2048 bytes)
    further, the distance between 64-wide boxes along M (N) is the
    descriptor's leading byte offset, and the operand's box distance must
    be 0. The backward's dQ = dS K reads dS and K this way.

    ```mlir
    %s = hopper.wgmma.ss %descQ, %descK k 128 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
    %dv = hopper.wgmma.ss %descP, %descDO acc %dv k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
    ```
  }];
  let arguments = (ins I64:$desc_a, I64:$desc_b, Optional<Hopper_Tile>:$c,
                       ConfinedAttr<I64Attr, [IntMinValue<16>]>:$k,
                       I64Attr:$a_box_bytes, I64Attr:$b_box_bytes,
                       TypeAttr:$operand_type,
                       UnitAttr:$a_mn_major, UnitAttr:$b_mn_major);
  let results = (outs Hopper_Tile:$d);
  let assemblyFormat = [{
    $desc_a `,` $desc_b (`acc` $c^)? `k` $k `boxes` $a_box_bytes `,` $b_box_bytes attr-dict
    `:` $operand_type `->` qualified(type($d))
  }];
  let hasVerifier = 1;
}

def Hopper_WgmmaRSOp : Hopper_Op<"wgmma.rs", [AllTypesMatch<["c", "d"]>]> {
  let summary = "D += A B of a register A and a shared-memory B, one wgmma group";
  let description = [{
    Issues the k-steps of D (64 x N, f32) += A (64 x K, registers) B (K x N,
    shared memory, N-major: rows of 128 bytes, 128B swizzle, N > 64 as boxes
    of 64 columns whose distance the descriptor's leading byte offset
    gives): `desc_b` describes B's first 16 rows; each k-step advances it by
    16 rows. A is a 16-bit fragment: the accumulator layout of the product
    that made it. One wgmma group; the result is asynchronous.

    With an 8-bit A (f8E4M3FN, k-steps of 32), B is K-major, as FP8 wgmma
    requires: N rows of K bytes (one 128-byte swizzle row at K = 128),
    8-row atoms 1024 bytes apart; each k-step advances it by 32 bytes. K
    beyond 128 lies in further boxes of N rows of 128 bytes,
    `b_box_bytes` apart (FP8's kv tiles of 160 or 224 keys: the
    transposed V's second box, `hopper.transpose_stage`).

    A `c` that is `hopper.zero` starts the product from zero (scale-d 0
    on the first k-step; the zeros are never moved into registers): FP8's
    S = Q K^T with Q in registers (`hopper.load_shared`), K as the K-major
    B.

    MLIR 22's `nvvm.wgmma.mma_async` has no register-A form and
    `nvvm.inline_ptx` does not tie read-write operands to results, so the
    lowering writes the instruction's constraints itself.

    ```mlir
    %o2 = hopper.wgmma.rs %p, %descV, %o : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>
    %o3 = hopper.wgmma.rs %p8, %descVt, %o b_box_bytes 16384
        : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$a, I64:$desc_b, Hopper_Tile:$c,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$b_box_bytes);
  let results = (outs Hopper_Tile:$d);
  let builders = [
    // B in one box (16-bit A, or K up to 128 8-bit columns)
    OpBuilder<(ins "::mlir::Value":$a, "::mlir::Value":$desc_b, "::mlir::Value":$c), [{
      build($_builder, $_state, a, desc_b, c, ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $a `,` $desc_b `,` $c (`b_box_bytes` $b_box_bytes^)? attr-dict `:`
    qualified(type($a)) `,` qualified(type($c))
  }];
  let hasVerifier = 1;
}

def Hopper_WgmmaWaitOp : Hopper_Op<"wgmma.wait", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "wait until at most `pending` wgmma groups are in flight";
  let description = [{
    wgmma.wait_group `pending`; its results are its operands, now readable.
    The lowering fences each fragment register after the wait (an empty asm
    that redefines them), so that no read of an accumulator moves into the
    asynchronous window.

    ```mlir
    %s1 = hopper.wgmma.wait 1, %s : !hopper.frag<64x128xf32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<7>]>:$pending,
                       Variadic<Hopper_Tile>:$fragments);
  let results = (outs Variadic<Hopper_Tile>:$ready);
  let assemblyFormat = [{
    $pending (`,` $fragments^ `:` qualified(type($fragments)))? attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The online softmax on a score fragment
//===----------------------------------------------------------------------===//

def Hopper_SoftcapOp : Hopper_Op<"softcap", [Pure, AllTypesMatch<["scores", "result"]>]> {
  let summary = "s = tanh(s * pre), each score";
  let description = [{
    The tanh of softcapping (tanh.approx); the factor `pre` is the softmax
    scale over the cap, the cap itself is applied with the softmax scale
    afterwards (`hopper.softmax_step`'s scale).
  }];
  let arguments = (ins Hopper_Tile:$scores, F32:$pre);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = "$scores `,` $pre attr-dict `:` qualified(type($scores))";
  let hasVerifier = 1;
}

def Hopper_MaskOp : Hopper_Op<"mask", [Pure, AllTypesMatch<["scores", "result"]>]> {
  let summary = "scores outside the visible columns of their row set to -inf";
  let description = [{
    The tile's rows are `row0` + 0 .. 63 and its columns `col0` + 0 .. N-1.
    `visible` is the kernel's visibility function: (row, Sq, Skv) ->
    (lo, hi), the row's visible columns lo <= col < hi; the lower bound is
    tested only when `left_bounded` (a window). Called once per row of the
    thread, on an opaque copy of the row so that LLVM does not keep the
    bounds live across the kv loop.

    `group` (GQA packing, g): the tile's rows are (query, q head) pairs,
    query-major; row p is query p / g, which `visible` is called on.

    `transposed`: the tile is S^T (the backward's), its rows keys and its
    columns queries: `visible` is called once per column of the thread
    (N / 4 of them) and a score is kept iff its row lies in its column's
    visible range.

    ```mlir
    %m = hopper.mask %s rows %row0 cols %col0 visible @k_visible_cols(%Sq, %Skv) : !hopper.frag<64x128xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$scores, I32:$row0, Optional<I32>:$group,
                       I32:$col0, FlatSymbolRefAttr:$visible, I32:$sq,
                       I32:$skv, UnitAttr:$left_bounded, UnitAttr:$transposed);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = [{
    $scores `rows` $row0 (`group` $group^)? `cols` $col0 `visible` $visible `(` $sq `,` $skv `)`
    (`left_bounded` $left_bounded^)? (`transposed` $transposed^)? attr-dict
    `:` qualified(type($scores))
  }];
  let hasVerifier = 1;
}

def Hopper_BandMaskOp : Hopper_Op<"band_mask", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["scores", "result"]>]> {
  let summary = "S^T's scores outside a band of keys around their query set to -inf";
  let description = [{
    The tile is S^T (the backward's): its rows are keys `row0` + 0 .. 63,
    its columns queries `col0` + 0 .. N-1. Key r is visible to query c iff
    r < `skv`, r >= c + `lo` (where given) and r < c + `hi` (where given):
    FlashAttention's window, lo = Skv - Sq - left and hi = Skv - Sq + right
    + 1 (causal: hi only), the band that the kernel's visibility function
    clamps to [0, Skv). Others are set to -inf.

    A bound is one comparison per register of a thread scalar (the band's
    offset plus the thread's first column less its first row, clamped to
    +-512, past any tile's reach) with the register's constant (8 i - 8 k
    - e): no per-column bound is live, where `hopper.mask ... transposed`
    holds one pair per column of the thread.

    ```mlir
    %m = hopper.band_mask %s rows %r0 cols %c0 keys %skv hi %hi : !hopper.frag<64x64xf32>
    %w = hopper.band_mask %s rows %r0 cols %c0 keys %skv lo %lo hi %hi : !hopper.frag<64x64xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$scores, I32:$row0, I32:$col0, I32:$skv,
                       Optional<I64>:$lo, Optional<I64>:$hi);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = [{
    $scores `rows` $row0 `cols` $col0 `keys` $skv (`lo` $lo^)? (`hi` $hi^)?
    attr-dict `:` qualified(type($scores))
  }];
  let hasVerifier = 1;
}

// Not Pure: its row reductions shuffle across the quad's lanes, so no pass
// may move it into control flow that the four threads do not share.
def Hopper_SoftmaxStepOp : Hopper_Op<"softmax_step", [AttrSizedOperandSegments]> {
  let summary = "one online-softmax step on a score fragment";
  let description = [{
    For each row of the tile: the row max of the scores (a register tree,
    then the quad's shuffles), the new running max m and the factor alpha
    of the old l and O from the shared builder (fa3::attn::
    buildOnlineSoftmaxStep, which the CPU lowering of attn.tile_update
    calls too: lazy rescaling with `rescale_threshold` > 0), then p =
    exp2(s * scale - mu) and l = l * alpha + rowsum(p) (the thread's
    partial sums). Without `m_old`/`l_old` this is the row's first block
    (m_old = -inf, l_old = 0): alpha is 0 and `raised` false.
    `raised` is true iff one of the thread's rows raised its max (lazy
    rescaling; false otherwise), for the warpgroup's vote on rescaling O.

    ```mlir
    %p, %m, %l, %alpha, %raised = hopper.softmax_step %s scale %sl2 state(%m0, %l0) threshold 8.0
        : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$scores, F32:$scale,
                       Optional<Hopper_Rows>:$m_old, Optional<Hopper_Rows>:$l_old,
                       DefaultValuedAttr<F64Attr, "0.0">:$rescale_threshold);
  let results = (outs Hopper_Tile:$p, Hopper_Rows:$m_new, Hopper_Rows:$l_new,
                      Hopper_Rows:$alpha, I1:$raised);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Hopper_ScaleRowsOp : Hopper_Op<"scale_rows", [Pure, AllTypesMatch<["tile", "result"]>]> {
  let summary = "each row of a tile times its row's factor";
  let description = [{
    O *= alpha for the online softmax's rescale of the output accumulator.
  }];
  let arguments = (ins Hopper_Tile:$tile, Hopper_Rows:$factors);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = "$tile `,` $factors attr-dict `:` qualified(type($tile)) `,` qualified(type($factors))";
  let hasVerifier = 1;
}

def Hopper_ScaleKeyBlocksOp : Hopper_Op<"scale_key_blocks", [Pure, AllTypesMatch<["tile", "result"]>]> {
  let summary = "each column of a score tile times its key's 128-key block factor";
  let description = [{
    FP8's k block scales (one descale per 128 keys) in a tile of more keys
    than 128, or not aligned to them (FlashAttention-3's 160- or 224-key
    tiles): column c of the tile holds key `first` + c, which lies in the
    descale block (`first` mod 128 + c) / 128 counted from `first`'s own;
    the column is multiplied by that factor. `first` must be a multiple of
    8 (a kv block's first key: tiles of a multiple of 8 keys), so that an
    n8 block of columns takes one factor; as many factors as a tile of N
    columns can reach, (126 + N) / 128 + 1.

    ```mlir
    %s2 = hopper.scale_key_blocks %s first %k0 by %f0, %f1, %f2 : !hopper.frag<64x224xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$tile, I32:$first, Variadic<F32>:$factors);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = "$tile `first` $first `by` $factors attr-dict `:` qualified(type($tile))";
  let hasVerifier = 1;
}

def Hopper_TruncOp : Hopper_Op<"trunc", [Pure]> {
  let summary = "an f32 tile rounded to 16- or 8-bit floats, in the same layout";
  let description = [{
    Packs each pair {e = 0, e = 1} of a row into one 32-bit register: the
    register-A operand layout of the next wgmma (P for P V). To f8E4M3FN
    (round to nearest, saturating to +-448): the pairs of two adjacent n8
    blocks of a row into one register (the fragment type's 8-bit layout).
  }];
  let arguments = (ins Hopper_Tile:$tile);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = "$tile attr-dict `:` qualified(type($tile)) `to` qualified(type($result))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The backward's math on S^T and dP^T (rows keys, columns queries)
//===----------------------------------------------------------------------===//

def Hopper_StageRowsOp : Hopper_Op<"stage_rows"> {
  let summary = "a warp copies a run of f32 rows of a vector into shared memory";
  let description = [{
    The 32 lanes of a warp copy `ptr[base + row0 + i]` (f32), or `fill`
    where row0 + i >= `bound`, to byte `offset` + 4 i of `smem`, for i <
    `rows` (a multiple of 32: lane l takes i = l, l + 32, ...). The
    backward's producer stages each step's LSE and D this way, so that the
    consumers read them from shared memory (`hopper.load_columns`)
    instead of waiting on global loads in their loop; the fill gives the
    queries past Sq p = 0 (lse = +inf, or -inf once staged as -lse
    log2(e) with `neg_log2`). Ordering with the readers is the
    caller's (a warp barrier, then a ring commit).

    With `neg_log2`, each value v read is staged as -v log2(e), and an
    infinite v as -inf (the fill as given): the LSE as the exponent offset
    of p = exp2(s scale_log2 + staged), which `hopper.grad_probs
    {lse_neg_log2}` takes, computed once a query by the producer instead
    of by every consumer thread that reads it (FA3's preprocessing writes
    its LSE times log2(e) for the same reason).

    ```mlir
    hopper.stage_rows %LSE [%base] rows %m0 bound %Sq fill %inf to %smem[%off] count 64
    hopper.stage_rows %LSE [%base] rows %m0 bound %Sq fill %ninf to %smem[%off] count 64 neg_log2
    ```
  }];
  let arguments = (ins Hopper_GlobalPtr:$ptr, I64:$base, I32:$row0,
                       I32:$bound, F32:$fill, Hopper_SharedPtr:$smem,
                       I32:$offset, I64Attr:$rows, UnitAttr:$neg_log2);
  let assemblyFormat = [{
    $ptr `[` $base `]` `rows` $row0 `bound` $bound `fill` $fill `to` $smem
    `[` $offset `]` `count` $rows (`neg_log2` $neg_log2^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_LoadColumnsOp : Hopper_Op<"load_columns", [
    MemoryEffects<[MemRead]>]> {
  let summary = "one f32 per column of a tile from shared memory, broadcast over its rows";
  let description = [{
    Element (r, c) of the result is the f32 at byte `offset` + 4 c of
    `smem`: a per-query vector (the backward's LSE and D, which
    `hopper.stage_rows` wrote) in the layout of a tile whose columns are
    queries. Each thread reads its N / 4 columns, two adjacent ones per
    8-byte load; its two rows share the registers.

    ```mlir
    %lse = hopper.load_columns %smem[%off] : !hopper.frag<64x64xf32>
    ```
  }];
  let arguments = (ins Hopper_SharedPtr:$smem, I32:$offset);
  let results = (outs Hopper_Tile:$result);
  let assemblyFormat = [{
    $smem `[` $offset `]` attr-dict `:` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Hopper_GradProbsOp : Hopper_Op<"grad_probs", [AttrSizedOperandSegments,
    AllTypesMatch<["scores", "p"]>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>,
    OptionalTypesMatchWith<"lse has the scores' type", "scores", "lse", "$_self">,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "the forward's probabilities recomputed: p = exp2(s scale_log2 - lse log2(e))";
  let description = [{
    Each score `s` (masked ones -inf) and its column's natural-log `lse`
    (the forward's, broadcast over the rows) give
    p = exp2(s * scale_log2 - lse * log2(e)), the probability the forward
    used. A column whose lse is -inf (its query saw no key) or +inf (past
    the queries) has p = 0.

    The lse is a fragment (`hopper.load_columns`, read before), or
    `columns %smem[%off]`: the per-query vector load_columns would read,
    each thread's pair of columns read from shared memory where its 8-column
    block is used, so that no register holds the whole vector (the
    backward's `lse_at_use`, bench/NOTES.md, Backward).

    With `lse_neg_log2` the values read are -lse log2(e) already, infinite
    ones -inf (`hopper.stage_rows ... neg_log2`): p = exp2(s scale_log2 +
    value), one FFMA and the exponential a score.

    ```mlir
    %p = hopper.grad_probs %s, %lse scale %sl2 : !hopper.frag<64x64xf32>
    %p = hopper.grad_probs %s, columns %smem[%off] scale %sl2 : !hopper.frag<64x64xf32>
    %p = hopper.grad_probs %s, columns %smem[%off] scale %sl2 lse_neg_log2 : !hopper.frag<64x64xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$scores, Optional<Hopper_Tile>:$lse,
                       Optional<Hopper_SharedPtr>:$smem, Optional<I32>:$offset,
                       F32:$scale_log2, UnitAttr:$lse_neg_log2);
  let results = (outs Hopper_Tile:$p);
  let assemblyFormat = [{
    $scores `,` ($lse^)? (`columns` $smem^ `[` $offset `]`)? `scale` $scale_log2
    (`lse_neg_log2` $lse_neg_log2^)? attr-dict `:` qualified(type($scores))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$scores, "::mlir::Value":$lse,
                   "::mlir::Value":$scaleLog2,
                   CArg<"bool", "false">:$lseNegLog2), [{
      build($_builder, $_state, scores, lse, ::mlir::Value(), ::mlir::Value(),
            scaleLog2, lseNegLog2);
    }]>,
    OpBuilder<(ins "::mlir::Value":$scores, "::mlir::Value":$smem,
                   "::mlir::Value":$offset, "::mlir::Value":$scaleLog2,
                   CArg<"bool", "false">:$lseNegLog2), [{
      build($_builder, $_state, scores, ::mlir::Value(), smem, offset,
            scaleLog2, lseNegLog2);
    }]>];
  let hasVerifier = 1;
}

def Hopper_GradScoresOp : Hopper_Op<"grad_scores", [AttrSizedOperandSegments,
    AllTypesMatch<["p", "dp", "ds"]>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>,
    OptionalTypesMatchWith<"delta has p's type", "p", "delta", "$_self">,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "the scores' gradient: ds = p (dp - delta)";
  let description = [{
    With dp = dO V^T (here its transpose) and delta = rowsum(dO o) of the
    column's query (broadcast over the rows), the softmax's backward
    ds = p (dp - delta), without the softmax scale (applied to dK and dQ
    once, at their ends). delta is a fragment or, as `hopper.grad_probs`'s
    lse, `columns %smem[%off]` read where each block is used.

    ```mlir
    %ds = hopper.grad_scores %p, %dp, %delta : !hopper.frag<64x64xf32>
    %ds = hopper.grad_scores %p, %dp, columns %smem[%off] : !hopper.frag<64x64xf32>
    ```
  }];
  let arguments = (ins Hopper_Tile:$p, Hopper_Tile:$dp,
                       Optional<Hopper_Tile>:$delta,
                       Optional<Hopper_SharedPtr>:$smem, Optional<I32>:$offset);
  let results = (outs Hopper_Tile:$ds);
  let assemblyFormat = [{
    $p `,` $dp `,` ($delta^)? (`columns` $smem^ `[` $offset `]`)?
    attr-dict `:` qualified(type($p))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$p, "::mlir::Value":$dp,
                   "::mlir::Value":$delta), [{
      build($_builder, $_state, p, dp, delta, ::mlir::Value(), ::mlir::Value());
    }]>,
    OpBuilder<(ins "::mlir::Value":$p, "::mlir::Value":$dp,
                   "::mlir::Value":$smem, "::mlir::Value":$offset), [{
      build($_builder, $_state, p, dp, ::mlir::Value(), smem, offset);
    }]>];
  let hasVerifier = 1;
}

def Hopper_GradSoftcapOp : Hopper_Op<"grad_softcap", [Pure, AllTypesMatch<["ds", "tanh", "dx"]>]> {
  let summary = "the scores' gradient through softcap: dx = ds (1 - t^2)";
  let description = [{
    With softcap the scores were s = softcap * tanh(x / softcap), and `t`
    is that tanh (`hopper.softcap`'s, taken before any mask so that it is
    finite where p = 0): the gradient with respect to x is ds (1 - t^2).
  }];
  let arguments = (ins Hopper_Tile:$ds, Hopper_Tile:$tanh);
  let results = (outs Hopper_Tile:$dx);
  let assemblyFormat = [{
    $ds `,` $tanh attr-dict `:` qualified(type($ds))
  }];
  let hasVerifier = 1;
}

def Hopper_StoreSharedOp : Hopper_Op<"store_shared"> {
  let summary = "a 16-bit tile into shared memory, 128B-swizzled, for a wgmma to read";
  let description = [{
    Writes the warpgroup's 64 x N tile (bf16 or f16) at `offset` bytes from
    `smem` as rows of 128 bytes (64 columns) with the 128-byte swizzle
    (16-byte unit u of row r at u ^ (r % 8)), N > 64 as boxes of 64 columns
    `box_bytes` apart: the layout TMA loads and wgmma descriptors read.
    Each register is one 4-byte store, or with `stmatrix` each pair of
    8-column blocks one `stmatrix.x4` (a quarter of the instructions; which
    is faster depends on the kernel's registers: the backward's table,
    bench/NOTES.md, Backward); `offset` is a multiple of 1024 (the swizzle
    atom: the caller's promise, which also gives stmatrix its 16-byte row
    addresses).
    With `column %c`, a tile narrower than a box is columns c .. c + N - 1
    of the box's rows (c a multiple of 8, c + N <= 64: the caller's
    promise), so that warpgroups can each write their part of one tile:
    the backward's P^T and dS^T where both warpgroups see the same keys.
    Then fences the generic proxy's writes for the async proxy
    (fence.proxy.async.shared::cta); the warpgroup must still meet at a
    barrier before a wgmma reads the tile.

    ```mlir
    hopper.store_shared %ds to %smem [%off] box_bytes 8192 : !hopper.frag<64x64xbf16>
    hopper.store_shared %ds to %smem [%off] column %c32 box_bytes 0 stmatrix : !hopper.frag<64x32xbf16>
    ```
  }];
  let arguments = (ins Hopper_Tile:$tile, Hopper_SharedPtr:$smem, I32:$offset,
                       Optional<I32>:$column, I64Attr:$box_bytes,
                       UnitAttr:$stmatrix);
  let assemblyFormat = [{
    $tile `to` $smem `[` $offset `]` (`column` $column^)? `box_bytes` $box_bytes
    (`stmatrix` $stmatrix^)? attr-dict `:` qualified(type($tile))
  }];
  let hasVerifier = 1;
}

def Hopper_LoadSharedOp : Hopper_Op<"load_shared", [MemoryEffects<[MemRead]>]> {
  let summary = "a wgmma register A operand loaded from a 128B-swizzled K-major tile";
  let description = [{
    Reads the warpgroup's 64 x K tile at `offset` bytes from `smem`, stored
    as TMA loads it for a wgmma descriptor: rows of 128 bytes with the
    128-byte swizzle (16-byte unit u of row r at u ^ (r % 8)), K beyond
    one row in boxes `box_bytes` apart; `offset` is a multiple of 1024
    (the caller's promise). One `ldmatrix.x4` a warp per 32 bytes of K
    (a wgmma k-step): lane l addresses row l % 16 of the warp's 16 and
    the step's 16-byte unit l / 16, so the registers come back as a
    wgmma A operand reads them.

    A 16-bit tile is then in its type's layout. An 8-bit one holds, for
    k-step c, the k indices 32c + 16h + 4 (l % 4) + {0 .. 3} in register
    4c + 2h + i: the order wgmma reads, not `hopper.trunc`'s; its use is
    the A of a `hopper.wgmma.rs` whose K-major B holds its k in natural
    order (FP8's S = Q K^T with Q in registers).

    ```mlir
    %q = hopper.load_shared %smem [%off] box_bytes 16384 : !hopper.frag<64x128xf8E4M3FN>
    ```
  }];
  let arguments = (ins Hopper_SharedPtr:$smem, I32:$offset, I64Attr:$box_bytes);
  let results = (outs Hopper_Tile:$tile);
  let assemblyFormat = [{
    $smem `[` $offset `]` `box_bytes` $box_bytes attr-dict `:` qualified(type($tile))
  }];
  let hasVerifier = 1;
}

def Hopper_FragmentZeroOp : Hopper_Op<"zero", [Pure]> {
  let summary = "a fragment (or row vector) of zeros";
  let results = (outs Hopper_FragmentType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

def Hopper_FragmentFillOp : Hopper_Op<"fill", [Pure]> {
  let summary = "a fragment (or row vector) with one value everywhere";
  let arguments = (ins AnyTypeOf<[F32, BF16, F16]>:$value);
  let results = (outs Hopper_FragmentType:$result);
  let assemblyFormat = "$value attr-dict `:` qualified(type($value)) `to` qualified(type($result))";
  let hasVerifier = 1;
}

#endif // FA3_HOPPER_FRAGMENT_OPS
