//===- Passes.td - attn dialect passes ------------------------*- tablegen -*-===//

#ifndef FA3_ATTN_PASSES
#define FA3_ATTN_PASSES

include "mlir/Pass/PassBase.td"

def AttnLowerToLoops : Pass<"attn-lower-to-loops"> {
  let summary = "Reference lowering of the attn ops (forward, varlen, backward, FP8 quantize) to scalar loops";
  let description = [{
    Rewrites the memref form of `attn.flash_attention` into plain
    scf/arith/math/memref loops with exactly the op's semantics (two passes
    over the keys: row max, then exp-sum and weighted sum of V), that of
    `attn.flash_attention_varlen` into the same per sequence of the packed
    batch, and that of `attn.flash_attention_grad` into one pass over the keys per query
    row (p from the forward's lse, dS, then dQ, dK, dV summed in f32
    buffers and converted into the outputs), and that of `attn.quantize`
    into its definition (per group of rows: the amax of the rotated rows,
    the rotation a plain matrix product, then the rows scaled and rounded
    to e4m3 in integer arithmetic). It is the numerical oracle
    for every other lowering, not a fast path. Run `one-shot-bufferize`
    first on the tensor form.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def AttnTile : Pass<"attn-tile"> {
  let summary = "Tile attn.flash_attention into the FlashAttention algorithm";
  let description = [{
    Rewrites the memref form of `attn.flash_attention` into a parallel grid
    over (m-block, query head, batch) and, inside, an scf.for over the
    kv-blocks that the causal/window band and Skv leave visible. Each step is
    an `attn.tile_update` on state buffers (running row max, row sum and f32
    accumulator); only the boundary blocks carry `masked`. An
    `attn.tile_finalize` ends each m-block. Scores are kept in the log2
    domain (log2(e) folded into the scale) so that softmax uses exp2.
    Tile sizes: those of the op's `attn.hopper_config` when it has one
    (chosen by `attn-hopper-config`, which this pass then copies onto the
    grid's `attn.kv_range` for `convert-attn-to-hopper`), else the options,
    else 128 x 128. The pass knows no target: sizes for a GPU come from its
    configuration pass. Likewise the tile steps' `rescale_threshold` (lazy
    rescaling of the online softmax): the configuration's when it has
    `lazy_rescale`, none when it has not, else the `rescale-threshold`
    option (0: exact), so that the CPU expansion can run the kernel's rule.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", /*default=*/"0",
           "Rows of Q per tile (0: the op's attn.hopper_config, else 128; "
           "refused beside a configuration)">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"0",
           "Rows of K/V per tile (0: the op's attn.hopper_config, else 128; "
           "refused beside a configuration)">,
    Option<"rescaleThreshold", "rescale-threshold", "double",
           /*default=*/"0.0",
           "Lazy rescaling of the online softmax: raise a row's max only when "
           "a block's exceeds it by more than this (log2 units, 0 to 15; 0: "
           "exact; refused beside a configuration, which decides)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def AttnLowerTilesToLoops : Pass<"attn-lower-tiles-to-loops"> {
  let summary = "CPU lowering of the tile ops (attn.tile_update/finalize) to loops";
  let description = [{
    Expands `attn.tile_update` and `attn.tile_finalize` into scf loops over
    the tile with a (block_m x block_n) f32 score buffer, so the tiled program
    runs on the CPU. With `count-blocks`, every tile_update also increments
    the i64 counters in the memref.global symbols `@attn_tiles_visited` and
    `@attn_tiles_masked` (created if missing), for tests of the schedule.
  }];
  let options = [
    Option<"countBlocks", "count-blocks", "bool", /*default=*/"false",
           "Count visited and masked tiles in global counters">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FA3_ATTN_PASSES
