//===- LoweringUtils.h - IR builders shared by the attn lowerings -*- C++ -*-===//
//
// The pieces of attention semantics that more than one lowering needs (which
// keys a query sees, the softcapped score) are built here once, so the CPU
// reference, the tiled CPU program and the Hopper kernel cannot drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_DIALECT_ATTN_UTILS_LOWERINGUTILS_H
#define FA3_DIALECT_ATTN_UTILS_LOWERINGUTILS_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "mlir/IR/Value.h"

namespace fa3::attn {

/// log2(e): scores are kept in the log2 domain (tile ops carry
/// scale_log2 = scale * log2(e)) so that the softmax uses exp2.
inline constexpr double kLog2e = 1.4426950408889634;

/// Softcap in the log2 domain, for the CPU tiles and the Hopper kernels
/// (forward and backward) alike: the tanh's argument x * scale / cap is
/// (x * scale_log2) * softcapTanhFactor(cap), and the softmax then takes
/// the tanh with scale_log2 = softcapLog2Scale(cap) (cap * log2 e).
inline constexpr double softcapTanhFactor(double cap) {
  return 1.0 / (kLog2e * cap);
}
inline constexpr double softcapLog2Scale(double cap) { return cap * kLog2e; }

/// Index constant.
mlir::Value indexConst(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
/// f32 constant.
mlir::Value f32Const(mlir::OpBuilder &b, mlir::Location loc, double v);

/// Loads memref[indices] and extends it to f32 (f8E4M3FN decoded in integer
/// arithmetic).
mlir::Value loadAsF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref,
                      mlir::ValueRange indices);
/// Converts an f32 value to `memref`'s element type and stores it
/// (f8E4M3FN: rounded to nearest even in integer arithmetic; the value must
/// be within +-448 or NaN).
void storeFromF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                  mlir::Value memref, mlir::ValueRange indices);

/// The keys query `row` sees under window [left, right] (-1 = unbounded)
/// with `offset` = Skv - Sq (bottom-right alignment): the columns `col`
/// with lo <= col < hi. A null bound is unbounded on that side.
struct VisibleCols {
  mlir::Value lo, hi;
};
VisibleCols buildVisibleCols(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value row, mlir::Value offset, int64_t left,
                             int64_t right);

/// i1: key `col` is visible to query `row` under window [left, right]
/// (-1 = unbounded) with `offset` = Skv - Sq (bottom-right alignment).
/// Returns null when every key is visible (no window at all).
mlir::Value buildVisible(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                         mlir::Value col, mlir::Value offset, int64_t left,
                         int64_t right);

/// The kv-block schedule of one m-block (semantics of attn.kv_range):
/// visited blocks [lo, hi) and unmasked interior blocks [interiorLo,
/// interiorHi). All values are index-typed.
struct KvRange {
  mlir::Value lo, hi, interiorLo, interiorHi;
};
KvRange buildKvRange(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row0,
                     mlir::Value seqQ, mlir::Value seqKv, int64_t blockM,
                     int64_t blockN, int64_t left, int64_t right);

/// The m-block schedule of one kv-block (semantics of attn.q_range, the
/// backward's): m-blocks [lo, hi) with a row that sees a key of the block,
/// unmasked interior m-blocks [interiorLo, interiorHi). Index-typed.
KvRange buildQRange(mlir::OpBuilder &b, mlir::Location loc, mlir::Value col0,
                    mlir::Value seqQ, mlir::Value seqKv, int64_t blockM,
                    int64_t blockN, int64_t left, int64_t right);

/// dot(q[bi, h, i, :], k[bi, hk, j, :]) in f32 over the static head dim.
mlir::Value buildDot(mlir::OpBuilder &b, mlir::Location loc, mlir::Value q,
                     mlir::Value k, mlir::Value bi, mlir::Value h, mlir::Value hk,
                     mlir::Value i, mlir::Value j);

/// Applies softcap (when > 0) to the scaled score `s`: softcap*tanh(s/softcap).
mlir::Value buildSoftcap(mlir::OpBuilder &b, mlir::Location loc, mlir::Value s,
                         double softcap);

/// What one (query row, key) pair of the backward reads: the operands, the
/// pair's indices, the row's lse and delta (D = rowsum(dO o)) and whether
/// the pair counts (`keep`: the row saw a key and the key is visible to it;
/// null: always).
struct GradPair {
  mlir::Value q, k, v, dO;
  mlir::Value bi, h, hk, i, j;
  mlir::Value rowLse, rowD, keep;
  double scale, softcap;
};
/// An f32 sum of the backward: element x of a row goes to buf[prefix..., x],
/// by an atomic add where other iterations of a parallel loop add into the
/// same buffer (the tiled form's dQ).
struct GradSum {
  mlir::Value buf;
  llvm::SmallVector<mlir::Value, 4> prefix;
  bool atomic = false;
};
/// The backward of one pair (FlashAttentionGradOp's definition): s = scale
/// q k (softcapped), p = exp(s - lse) (0 unless `keep`), ds = p (dO v - D)
/// (through softcap's derivative); adds scale ds k to dq, scale ds q to dk
/// and p dO to dv. The CPU oracle and the tiled form's expansion both call
/// it, so the tiles are checked with the oracle's arithmetic.
void buildGradPair(mlir::OpBuilder &b, mlir::Location loc, const GradPair &in,
                   const GradSum &dq, const GradSum &dk, const GradSum &dv);

/// An f32 buffer of the shape of `like`'s first `dims` dimensions (all when
/// negative), its dynamic sizes taken from `like`.
mlir::Value allocF32Like(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value like, int dims = -1);

/// buf[idx] += x.
void accumulate(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buf,
                mlir::ValueRange idx, mlir::Value x);

/// A packed (variable-length) operand as a batch of one, without a copy:
/// [T, H, D] as the [1, H, T, D] view the forward's code indexes, lse
/// [H, T] as [1, H, T].
mlir::Value batchOfOneView(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value packed);

/// Sequence `s` of a packed batch: its first query token q0, its query
/// count sq, its first key k0 and key count skv (seqused_k[s] when given,
/// clamped to 0 .. the keys cu_seqlens_k gives it: clampUsedKeys; else
/// those keys). Index-typed.
struct SequenceBounds {
  mlir::Value q0, sq, k0, skv;
};
SequenceBounds buildSequenceBounds(mlir::OpBuilder &b, mlir::Location loc,
                                   mlir::Value cuQ, mlir::Value cuK,
                                   mlir::Value used, mlir::Value s);
/// A sequence's seqused_k entry `used` kept inside its `keys` (0 ..
/// keys): the caller's to keep in range, as in FlashAttention, but a wrong
/// one then reads no key outside the sequence (or the cache).
mlir::Value clampUsedKeys(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value used, mlir::Value keys);
/// The same arithmetic where the arrays are read by `load(array, index)`,
/// whose values have the type of `s` (the Hopper kernel reads them from
/// global memory as i32).
enum class SeqlensArray { CuQ, CuK, UsedK };
SequenceBounds buildSequenceBounds(
    mlir::OpBuilder &b, mlir::Location loc,
    llvm::function_ref<mlir::Value(SeqlensArray, mlir::Value)> load,
    bool hasUsed, mlir::Value s);

/// FP8 descale `d` (f32, rank 0, [B, H'] or [B, H', blocks of `block`
/// rows]) for batch `bi`, head `head` (the q or kv head, as H' counts them)
/// and row or key `pos`.
mlir::Value loadDescale(mlir::OpBuilder &b, mlir::Location loc, mlir::Value d,
                        mlir::Value bi, mlir::Value head, mlir::Value pos,
                        int64_t block);

/// The head that indexes q's descale `qd` for q head `h` of kv head `hk`:
/// `hk` for FA3's per-kv-head form ([B, Hkv] with Hkv != `hq`), else `h`.
mlir::Value queryDescaleHead(mlir::Value qd, int64_t hq, mlir::Value h,
                             mlir::Value hk);

/// Static extent of dimension `dim` of a shaped value, or a memref.dim op.
mlir::Value dimOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref,
                  unsigned dim);

} // namespace fa3::attn

#endif
