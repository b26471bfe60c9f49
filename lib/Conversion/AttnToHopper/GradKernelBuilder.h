//===- GradKernelBuilder.h - the FA3-style Hopper backward kernel -*- C++ -*-===//
//
// Builds the hopper-level body of the FlashAttention backward's main kernel
// (gpu.func) for one configuration, in FA3's loop order (the tiled form of
// attn.flash_attention_grad): one CTA per (kv block, kv head, batch),
//
//   warpgroup 0   producer: K and V of the block once, then Q and dO of
//                 each m-block that sees the block, for each q head of the
//                 kv head's group, into `stages`-deep rings (thread 0);
//                 the queries' LSE and D per step into a ring of their own
//                 (warp 2);
//                 the dQ writer (warp 1: the consumers' staged dQ added
//                 into dQaccum by bulk reductions);
//   warpgroups 1, 2  consumers, 64 keys each (or, sharedKeys, the same 64
//                 keys: half of the queries each for S^T and dP^T, half of
//                 the head dim for dK, dV and dQ, P^T and dS^T in shared
//                 memory, dV and dK by wgmma SS): S^T = K Q^T and dP^T = V dO^T
//                 (wgmma SS, keys as rows), P^T = exp2(S^T scale_log2 -
//                 LSE log2 e) with the forward's builder (softcap: S^T
//                 = cap tanh(x / cap) first, the forward's mask after),
//                 dS^T = P^T (dP^T - D) (softcap: times 1 - tanh^2); dV += P^T dO and dK += dS^T Q (wgmma RS, the
//                 f32 dV/dK accumulators in registers for the whole loop);
//                 dS^T staged in shared memory (two buffers) for dQ = dS K
//                 (wgmma SS, both operands MN-major; the warpgroups split
//                 dQ's columns), staged in shared memory in accumulator
//                 order for the producer's dQ writer (warp 1), which adds
//                 it into the f32 dQaccum by one bulk reduction per
//                 warpgroup (or, without tma_store, the consumers' vector
//                 reductions); deterministic, in the kv blocks' turns
//                 (hopper.wait_turn / pass_turn on a counter per dQ tile).
//   epilogue      dK * scale and dV staged in the Q and dO rings (free
//                 once both consumers have left the loop) and copied out
//                 in 16-byte units (hopper.store_o ... staging).
//
// D = rowsum(dO o) with dQaccum zeroed before it, and dQ = scale dQaccum
// after it, are the kernels <kernel>_pre and <kernel>_post beside it
// (GradAuxKernels.h).
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_GRADKERNELBUILDER_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_GRADKERNELBUILDER_H

#include "KernelBuilder.h" // the ABI: kGradKernelParams

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace fa3::hopper {

/// A causal or window bound on either side of `window` (-1: unbounded).
inline bool hasMask(llvm::ArrayRef<int64_t> window) {
  return llvm::any_of(window, [](int64_t side) { return side >= 0; });
}

struct GradKernelConfig {
  std::string name;       // gpu.func symbol
  std::string dtype;      // "bf16" or "f16": q, k, v, dO, dK, dV
  int64_t headDim = 128;  // D of q, k and v (Dv = D)
  int64_t blockM = 64;    // query rows per step (one Q / dO ring stage)
  int64_t blockN = 128;   // keys per CTA: 64 per consumer warpgroup, or
                          // 64 that both see (sharedKeys)
  int64_t stages = 2;     // depth of the Q and dO rings
  std::string qRangeFn;   // device func: (col0, Sq, Skv) -> (lo, hi, ilo, ihi)
  std::string visibleColsFn; // device func: (row, Sq, Skv) -> (lo, hi)
  bool leftBounded = false;  // the mask has a lower column bound (window)
  double softcap = 0.0;      // scores softcap * tanh(x / softcap); 0: off
  bool dqBulk = true;        // dQ staged in shared memory and added by the
                             // producer's bulk reductions, else
                             // red.global.add.v4.f32 from the consumers'
                             // registers (bench/NOTES.md, Backward)
  // dQ staging buffers a consumer warpgroup has (dqBulk): with 2 it stages
  // a step's dQ while the writer's reduction of the step before may still
  // read the other (by step parity); never deterministic, whose turns wait
  // for each step's reductions to complete.
  int64_t dqBuffers = 1;
  bool deterministic = false; // dQ's tiles added in a fixed order of the
                              // kv blocks (turn counters after dQaccum's
                              // tiles: fa3rt_abi.def); needs dqBulk
  // Where the consumers' registers are spent (gradTable: measured per head
  // dim and mask): the queries' LSE and D read from the rows ring where each
  // 8-column block uses them (hopper.grad_probs / grad_scores ... columns),
  // else each whole vector (load_columns) while the products run; dS^T (and
  // P^T) into shared memory by stmatrix, else by 4-byte stores.
  bool lseAtUse = false;
  bool deltaAtUse = false;
  bool dsStmatrix = false;
  // 128 keys: dV += P^T dO issued after dS^T's stores to shared memory
  // (FA3's order), else before them (gradTable: measured per mask).
  bool dvAfterDs = false;
  // The mask of S^T as a band of keys around each query (hopper.band_mask:
  // a comparison with a constant per register), else per column of the
  // thread through the visibility function (hopper.mask ... transposed).
  bool bandMask = false;
  // A causal mask's tiles in L2 sections of (kv head, batch) pairs, kv
  // block slowest, the first (which sees the most queries) first; never
  // deterministic, whose turns fix the order.
  bool l2Sections = false;

  /// Both consumer warpgroups see the block's 64 keys: each computes S^T
  /// and dP^T for half of the step's queries and dK, dV, dQ for half of
  /// the head dim, P^T and dS^T meeting in shared memory. At head dim 256
  /// a warpgroup of 64 keys would hold 64 x 256 of dK and of dV: 256
  /// registers a thread.
  bool sharedKeys() const { return blockN == 64; }
  int64_t consumers() const { return sharedKeys() ? 2 : blockN / 64; }
  int64_t threads() const { return 128 * (1 + consumers()); }
  /// The columns of the kernel's shared tiles and of TMA's loads of Q, K,
  /// V and dO: whole 64-column boxes (at 96 two, the second half past the
  /// tensor, which TMA fills with zeros). dQ's halves at 96 take all 128
  /// (48 columns a warpgroup would take two wgmmas each: splitParts), the
  /// columns past the head dim computed and dropped (a product's output
  /// column reads only its own column of B).
  int64_t tileD() const { return (headDim + 63) / 64 * 64; }

  /// With 128-query steps (head dim 64) each consumer warpgroup computes
  /// dQ for one of the step's two 64-row tiles over the whole head dim
  /// (FA3's AtomLayoutMdQ = 2), else for the step's rows over its part of
  /// the columns: at N = 64 a wgmma reads each element of dS^T and K from
  /// shared memory once, where two 32-column halves read dS^T twice.
  bool dqByRows() const { return blockM == 128; }

  /// A part of the columns each consumer warpgroup holds where the tile's
  /// columns are split between the two (dQ; sharedKeys, dK and dV too):
  /// `cols` columns from tile column base + c * stride for warpgroup c.
  struct SplitPart {
    int64_t cols, base, stride;
    /// Consumer c's first column of the part.
    int64_t firstCol(int64_t c) const { return base + c * stride; }
  };
  /// Half the tile each, or at head dim 192 a whole 64-column box (0 or
  /// 128) and half of the middle box (64 or 96): a wgmma's N on an MN-major
  /// operand may start inside a 64-column box only if it stays inside it.
  /// (dqByRows: all columns for each.)
  llvm::SmallVector<SplitPart, 2> splitParts() const {
    if (dqByRows())
      return {{tileD(), 0, 0}};
    if (headDim == 192)
      return {{64, 0, 128}, {32, 64, 32}};
    const int64_t half = tileD() / 2;
    return {{half, 0, half}};
  }
  /// The head dim's columns of part p for consumer c (all of them but in
  /// a tile wider than the head dim).
  int64_t validCols(const SplitPart &p, int64_t c) const {
    return std::max<int64_t>(0, std::min(p.cols, headDim - p.firstCol(c)));
  }
};

/// Shared-memory layout (bytes from a 1024-aligned base).
struct GradSmemLayout {
  int64_t kOff, vOff, qOff, doOff, dsOff, pOff, dqOff, rowsOff;
  int64_t kBytes, vBytes, qBytes, doBytes, dsBytes, pBytes, dqBytes,
      rowsBytes; // dsBytes, pBytes, dqBytes: one buffer (two of dS^T and
                 // P^T, cfg.dqBuffers of the dQ staging)
  // mbarriers: K, V full/empty (one stage each), then Q, dO and the rows
  // (LSE and D) full/empty per stage.
  int64_t kFull, kEmpty, vFull, vEmpty, qFull, qEmpty, doFull, doEmpty,
      rowsFull, rowsEmpty;
  int64_t total;
};
GradSmemLayout computeGradSmemLayout(const GradKernelConfig &cfg);

/// Returns an empty string if the configuration is supported, else why not.
std::string checkGradSupported(const GradKernelConfig &cfg);

/// One kv block's program in attn-tile's form of the backward, from which
/// the consumers' loop is lowered (matchTiledGradCell, TiledCell.h, checks
/// this shape): dK's and dV's sums filled with 0, attn.q_range, an scf.for
/// over the kv head's q heads around an scf.for over the range's m-blocks
/// [lo, hi), whose body is index arithmetic and one step per m-block (an
/// attn.tile_grad_update, or attn-tile's boundary split: an scf.if between
/// its masked and unmasked forms), and attn.tile_grad_finalize. The kernel
/// runs the two loops as one over (q head, m-block), its group of q heads
/// the launch's Hq / Hkv.
struct TiledGradCell {
  mlir::Operation *range = nullptr;    // attn.q_range
  mlir::Operation *headLoop = nullptr; // scf.for over the kv head's q heads
  mlir::Operation *mLoop = nullptr;    // scf.for over the range's m-blocks
  TiledStep step;                      // attn.tile_grad_update's forms
  mlir::Operation *finalize = nullptr; // attn.tile_grad_finalize
};

/// Builds the kernel at the end of `module` (as buildKernel does): its
/// structure (roles, rings, dQ's writer) the configuration's, the
/// consumers' per-step mask and first row `cell` lowered.
mlir::gpu::GPUFuncOp buildGradKernel(mlir::OpBuilder &b, mlir::Location loc,
                                     mlir::gpu::GPUModuleOp module,
                                     const GradKernelConfig &cfg,
                                     const TiledGradCell &cell);

} // namespace fa3::hopper

#endif
