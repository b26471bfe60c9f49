//===- OnlineSoftmax.h - the online-softmax step, built once -----*- C++ -*-===//
//
// The arithmetic of one FlashAttention step for one query row, as the Hopper
// kernel computes it (lazy rescaling included), so that the CPU expansion of
// attn.tile_update runs the GPU's arithmetic and checks it against NumPy.
// The caller owns the data layout: it reduces the row's scores (a scalar loop
// on the CPU, a register tree and quad shuffles on the GPU), keeps l and O,
// and applies P V; this file builds the per-row values between.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_DIALECT_ATTN_UTILS_ONLINESOFTMAX_H
#define FA3_DIALECT_ATTN_UTILS_ONLINESOFTMAX_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace fa3::attn {

/// Per-row results of buildOnlineSoftmaxStep (all f32 but `raised`).
struct OnlineSoftmaxStep {
  mlir::Value mNew;   // the row's reference max after this block
  mlir::Value negMu;  // -mu, mu = m_new, or 0 while m_new is -inf
  mlir::Value alpha;  // factor of the old l and O: exp2(m_old - mu), or 1
                      // (null for the first block)
  mlir::Value raised; // i1, lazy rescaling only (else null): m was raised
};

/// One kv block of one query row, in the log2 domain. The caller supplies
/// (all f32 scalars):
///   mOld     - the row's max before the block: -inf before its first
///              visible key; null for the row's first block (the kernel's
///              prologue), which gives m_new = rowMax * sl2 and no alpha;
///   rowMax   - max of the block's scores s, s being q.k after softcap
///              (tanh(q.k * pre)) and mask (-inf), not yet scaled;
///   scaleLog2 - sl2 > 0, which turns s into log2 units (softmax scale *
///              log2 e, or softcap * log2 e with softcap);
/// and `rescaleThreshold` tau in log2 units, 0..15: 0 builds the exact
/// rule, m_new = max(m_old, mxs) with mxs = rowMax * sl2; tau > 0 the lazy
/// one, which raises m only when mxs > m_old + tau (else keeps m_old and
/// alpha = 1), so that O is rescaled rarely while p <= 2^tau stays finite.
/// With m_old = -inf both rules agree; O / l is the same under either.
OnlineSoftmaxStep buildOnlineSoftmaxStep(mlir::OpBuilder &b,
                                         mlir::Location loc, mlir::Value mOld,
                                         mlir::Value rowMax,
                                         mlir::Value scaleLog2,
                                         double rescaleThreshold);

/// p = exp2(s * sl2 - mu) for one score s of the block (one fma, then exp2;
/// -inf where masked gives 0). The row sum of p and P V are the caller's:
/// l = l * alpha + rowsum(p) (buildRescaledSum), O = O * alpha + P V.
mlir::Value buildSoftmaxProb(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value s, mlir::Value scaleLog2,
                             mlir::Value negMu);

/// l * alpha + rowSum, as one fma.
mlir::Value buildRescaledSum(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value lOld, mlir::Value alpha,
                             mlir::Value rowSum);

} // namespace fa3::attn

#endif
