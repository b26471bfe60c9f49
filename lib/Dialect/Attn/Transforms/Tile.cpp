//===- Tile.cpp - attn-tile: the FlashAttention schedule ------------------===//
//
// Produces, per attn.flash_attention (memref form):
//
//   scf.parallel (%mb, %h, %b) = (0, 0, 0) to (ceil(Sq/BM), Hq, B) {
//       state buffers m [BM], l [BM], acc [BM, Dv] (f32), filled -inf / 0 / 0
//       %nLo, %nHi, %uLo, %uHi = attn.kv_range rows %row0 seq(%Sq, %Skv)
//       scf.for %nb = %nLo to %nHi {
//         if (nb < uLo || nb >= uHi)  attn.tile_update ... masked
//         else                        attn.tile_update ...
//       }
//       attn.tile_finalize
//   }
//
// attn.kv_range decides which kv-blocks a query block visits and which of
// them need the mask; the CPU expansion and the Hopper kernel both expand it
// with the same builder (buildKvRange). An attn.hopper_config on the op
// (attn-hopper-config) sets the tile sizes and the steps' lazy-rescale
// threshold, and is carried on the attn.kv_range to convert-attn-to-hopper.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <limits>

namespace fa3::attn {
#define GEN_PASS_DEF_ATTNTILE
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace fa3::attn

using namespace mlir;
using namespace fa3::attn;

/// Tile sides without a configuration or options: one square tile for every
/// head dim. The target's sizes are chosen by its configuration pass
/// (attn-hopper-config), not here.
constexpr int64_t kDefaultBlock = 128;

namespace {
struct TileSizes {
  int64_t m, n;
};

struct IndexMath {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return indexConst(b, loc, v); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value ceilDiv(Value x, int64_t d) {
    return arith::CeilDivSIOp::create(b, loc, x, c(d));
  }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
  }
  Value ge(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, x, y);
  }
};
} // namespace

/// `if (blk < interiorLo || blk >= interiorHi) emit(masked) else
/// emit(unmasked)`: the schedule's boundary blocks take the masked step
/// (the forward's kv-blocks and the backward's m-blocks alike).
static void buildBoundaryIf(
    OpBuilder &b, Location loc, Value blk, Value interiorLo, Value interiorHi,
    function_ref<void(OpBuilder &, Location, bool masked)> emit) {
  IndexMath m{b, loc};
  // Named first: the order of function arguments is unspecified, and GCC
  // and clang would emit the two compares in different orders.
  Value before = m.lt(blk, interiorLo);
  Value after = m.ge(blk, interiorHi);
  Value boundary = arith::OrIOp::create(b, loc, before, after);
  auto step = [&](bool masked) {
    return [&, masked](OpBuilder &sb, Location sl) {
      emit(sb, sl, masked);
      scf::YieldOp::create(sb, sl);
    };
  };
  scf::IfOp::create(b, loc, boundary, step(true), step(false));
}

/// The op's recorded configuration decides; else the options; else the
/// default. Options beside a configuration are refused rather than ignored.
static FailureOr<TileSizes> pickTiles(Operation *op, int64_t optM,
                                      int64_t optN) {
  auto config =
      op->getAttrOfType<HopperConfigAttr>(HopperConfigAttr::kAttrName);
  if (!config)
    return TileSizes{optM ? optM : kDefaultBlock, optN ? optN : kDefaultBlock};
  if (optM || optN)
    return op->emitOpError("attn-tile: the tiles of this op were chosen by "
                          "attn-hopper-config (")
           << config.getBlockM() << " x " << config.getBlockN()
           << "); give block-m and block-n to that pass instead";
  return TileSizes{config.getBlockM(), config.getBlockN()};
}

/// The tile steps' lazy-rescale threshold (none: exact): the
/// configuration's when it rescales lazily (the kernel's rule, for the CPU
/// expansion to check and the kernel to lower), else the option's; 0 is
/// exact. An option beside a configuration is refused.
static FailureOr<std::optional<double>> pickRescaleThreshold(Operation *op,
                                                              double opt) {
  auto config =
      op->getAttrOfType<HopperConfigAttr>(HopperConfigAttr::kAttrName);
  if (!config)
    return opt > 0 ? std::optional<double>(opt) : std::nullopt;
  if (opt != 0)
    return op->emitOpError("attn-tile: the rescaling of this op was chosen by "
                          "attn-hopper-config; give rescale-threshold (and "
                          "lazy-rescale) to that pass instead");
  double tau = config.getRescaleThreshold().convertToDouble();
  if (!config.getLazyRescale() || tau == 0)
    return std::optional<double>();
  return std::optional<double>(tau);
}

namespace {
/// What every grid cell of the forward's tiled form shares: the operands
/// (rank 4, [B, H, S, D]; lse [B, H, S] or null) and the step's parameters.
struct ForwardTiling {
  Value q, k, v, o, lse;
  ValueRange descales; // FP8: q's, k's and v's, or none
  int64_t hq, hkv, dv;
  TileSizes ts;
  std::optional<double> threshold;
  double scale, softcap;
  int64_t left, right;
  Attribute config; // the op's attn.hopper_config, or null
};
} // namespace

/// One grid cell (m-block `mb`, q head `h`, batch `bi`; `sq` x `skv` the
/// problem): the online softmax's state, attn.kv_range, the kv loop of
/// attn.tile_update (masked on the boundary blocks), attn.tile_finalize.
static void buildForwardCell(OpBuilder &b, Location loc, const ForwardTiling &t,
                             Value mb, Value h, Value bi, Value sq, Value skv) {
  IndexMath ib{b, loc};
  const TileSizes &ts = t.ts;
  // Running state of the online softmax, private to this grid cell. (Heap
  // buffers: stack allocas inside a loop would grow the CPU stack per cell.)
  Type f32 = b.getF32Type();
  Value m = memref::AllocOp::create(b, loc, MemRefType::get({ts.m}, f32));
  Value l = memref::AllocOp::create(b, loc, MemRefType::get({ts.m}, f32));
  Value acc =
      memref::AllocOp::create(b, loc, MemRefType::get({ts.m, t.dv}, f32));
  linalg::FillOp::create(
      b, loc, f32Const(b, loc, -std::numeric_limits<double>::infinity()), m);
  linalg::FillOp::create(b, loc, f32Const(b, loc, 0.0), l);
  linalg::FillOp::create(b, loc, f32Const(b, loc, 0.0), acc);

  Value hk = arith::DivUIOp::create(b, loc, h, ib.c(t.hq / t.hkv));
  Value row0 = ib.mul(mb, ib.c(ts.m));
  Type idx = b.getIndexType();
  auto range = KvRangeOp::create(
      b, loc, TypeRange{idx, idx, idx, idx}, row0, sq, skv, b.getI64IntegerAttr(ts.m),
      b.getI64IntegerAttr(ts.n), b.getDenseI64ArrayAttr({t.left, t.right}));
  // The target's configuration travels with the schedule, whose tiles it
  // chose (the verifier keeps the two equal).
  if (t.config)
    range->setAttr(HopperConfigAttr::kAttrName, t.config);
  Value nLo = range.getLo(), nHi = range.getHi();
  Value uLo = range.getInteriorLo(), uHi = range.getInteriorHi();

  auto attrs = [&](bool masked) {
    SmallVector<NamedAttribute> a;
    a.push_back(b.getNamedAttr("block_m", b.getI64IntegerAttr(ts.m)));
    a.push_back(b.getNamedAttr("block_n", b.getI64IntegerAttr(ts.n)));
    a.push_back(b.getNamedAttr("scale_log2", b.getF32FloatAttr(t.scale * kLog2e)));
    a.push_back(b.getNamedAttr("softcap", b.getF32FloatAttr(t.softcap)));
    a.push_back(b.getNamedAttr("window", b.getDenseI64ArrayAttr({t.left, t.right})));
    if (masked)
      a.push_back(b.getNamedAttr("masked", b.getUnitAttr()));
    if (t.threshold)
      a.push_back(b.getNamedAttr("rescale_threshold",
                                 b.getF64FloatAttr(*t.threshold)));
    return a;
  };
  scf::ForOp::create(
      b, loc, nLo, nHi, ib.c(1), ValueRange{},
      [&](OpBuilder &lb, Location ll, Value n, ValueRange) {
        IndexMath jb{lb, ll};
        Value col0 = jb.mul(n, jb.c(ts.n));
        SmallVector<Value> operands = {t.q, t.k, t.v, m, l, acc, bi, h, hk,
                                       row0, col0};
        llvm::append_range(operands, t.descales);
        buildBoundaryIf(lb, ll, n, uLo, uHi,
                        [&](OpBuilder &sb, Location sl, bool masked) {
                          auto upd = TileUpdateOp::create(
                              sb, sl, TypeRange{}, operands);
                          upd->setAttrs(attrs(masked));
                        });
        scf::YieldOp::create(lb, ll);
      });
  TileFinalizeOp::create(b, loc, m, l, acc, t.o, t.lse, bi, h, row0,
                         b.getI64IntegerAttr(ts.m));
  for (Value buf : {m, l, acc})
    memref::DeallocOp::create(b, loc, buf);
}

/// The tiling parameters of a forward or variable-length op.
template <typename OpT>
static FailureOr<ForwardTiling> forwardTiling(OpT op, int64_t optM,
                                              int64_t optN,
                                              double optThreshold) {
  FailureOr<TileSizes> picked = pickTiles(op, optM, optN);
  if (failed(picked))
    return failure();
  FailureOr<std::optional<double>> threshold =
      pickRescaleThreshold(op, optThreshold);
  if (failed(threshold))
    return failure();
  ForwardTiling t;
  auto qt = cast<MemRefType>(op.getQuery().getType());
  auto kt = cast<MemRefType>(op.getKey().getType());
  auto vt = cast<MemRefType>(op.getValue().getType());
  // [B, H, S, D], or packed [T, H, D]: the heads are dimension 1 either way
  t.hq = qt.getDimSize(1);
  t.hkv = kt.getDimSize(1);
  t.dv = vt.getDimSize(vt.getRank() - 1);
  t.ts = *picked;
  t.threshold = *threshold;
  t.scale = op.getEffectiveScale();
  t.softcap = op.getSoftcap().convertToDouble();
  t.left = op.getWindowLeft();
  t.right = op.getWindowRight();
  t.config = op->getAttr(HopperConfigAttr::kAttrName);
  return t;
}

static LogicalResult tile(FlashAttentionOp op, int64_t optM, int64_t optN,
                          double optThreshold) {
  FailureOr<ForwardTiling> tiling = forwardTiling(op, optM, optN, optThreshold);
  if (failed(tiling))
    return failure();
  ForwardTiling t = *tiling;
  t.q = op.getQuery(), t.k = op.getKey(), t.v = op.getValue();
  t.o = op.getOut(), t.lse = op.getLse();
  t.descales = op.getDescales();

  OpBuilder b(op);
  Location loc = op.getLoc();
  IndexMath ib{b, loc};
  Value sq = dimOf(b, loc, t.q, 2), skv = dimOf(b, loc, t.k, 2);
  Value nb = dimOf(b, loc, t.q, 0);
  Value numM = ib.ceilDiv(sq, t.ts.m);
  // Named first: function arguments are evaluated in an unspecified order.
  SmallVector<Value> lower{ib.c(0), ib.c(0), ib.c(0)};
  SmallVector<Value> upper{numM, ib.c(t.hq), nb};
  SmallVector<Value> steps{ib.c(1), ib.c(1), ib.c(1)};
  auto grid = scf::ParallelOp::create(b, loc, lower, upper, steps);
  b.setInsertionPointToStart(grid.getBody());
  Value mb = grid.getInductionVars()[0], h = grid.getInductionVars()[1],
        bi = grid.getInductionVars()[2];
  buildForwardCell(b, loc, t, mb, h, bi, sq, skv);
  op.erase();
  return success();
}

/// Rows [start, start + len) of a batch-of-one view [1, H, T(, D)].
static Value sequenceView(OpBuilder &b, Location loc, Value view, Value start,
                          Value len) {
  auto t = cast<MemRefType>(view.getType());
  SmallVector<OpFoldResult> offsets(t.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(t.getRank(), b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes = memref::getMixedSizes(b, loc, view);
  offsets[2] = start;
  sizes[2] = len;
  return memref::SubViewOp::create(b, loc, view, offsets, sizes, strides);
}

/// The packed variable-length form: a grid over (sequence, q head) whose
/// cell takes the sequence's rows and keys as a [1, H, S, D] problem (views,
/// no copy) and walks its m-blocks with the forward's cell. Bottom-right
/// alignment per sequence follows from the views' own Sq and Skv.
static LogicalResult tileVarlen(FlashAttentionVarlenOp op, int64_t optM,
                                int64_t optN, double optThreshold) {
  FailureOr<ForwardTiling> tiling = forwardTiling(op, optM, optN, optThreshold);
  if (failed(tiling))
    return failure();
  ForwardTiling packed = *tiling;
  OpBuilder b(op);
  Location loc = op.getLoc();
  IndexMath ib{b, loc};
  Value q = batchOfOneView(b, loc, op.getQuery());
  Value k = batchOfOneView(b, loc, op.getKey());
  Value v = batchOfOneView(b, loc, op.getValue());
  Value o = batchOfOneView(b, loc, op.getOut());
  Value lse = op.getLse() ? batchOfOneView(b, loc, op.getLse()) : Value();
  Value cuQ = op.getCuSeqlensQ(), cuK = op.getCuSeqlensK();
  Value used = op.getSequsedK();
  Value nseq = arith::SubIOp::create(b, loc, dimOf(b, loc, cuQ, 0), ib.c(1));
  SmallVector<Value> lower{ib.c(0), ib.c(0)};
  SmallVector<Value> upper{nseq, ib.c(packed.hq)};
  SmallVector<Value> steps{ib.c(1), ib.c(1)};
  auto grid = scf::ParallelOp::create(b, loc, lower, upper, steps);
  b.setInsertionPointToStart(grid.getBody());
  Value s = grid.getInductionVars()[0], h = grid.getInductionVars()[1];
  SequenceBounds seq = buildSequenceBounds(b, loc, cuQ, cuK, used, s);
  Value q0 = seq.q0, k0 = seq.k0, sq = seq.sq, skv = seq.skv;
  ForwardTiling t = packed;
  t.q = sequenceView(b, loc, q, q0, sq);
  t.k = sequenceView(b, loc, k, k0, skv);
  t.v = sequenceView(b, loc, v, k0, skv);
  t.o = sequenceView(b, loc, o, q0, sq);
  t.lse = lse ? sequenceView(b, loc, lse, q0, sq) : Value();
  Value numM = ib.ceilDiv(sq, t.ts.m);
  Value zero = ib.c(0);
  scf::ForOp::create(b, loc, zero, numM, ib.c(1), ValueRange{},
                     [&](OpBuilder &mb, Location ml, Value m, ValueRange) {
                       buildForwardCell(mb, ml, t, m, h, indexConst(mb, ml, 0),
                                        sq, skv);
                       scf::YieldOp::create(mb, ml);
                     });
  op.erase();
  return success();
}

/// FlashAttention's backward schedule, per attn.flash_attention_grad:
///
///   attn.grad_preprocess o, dO to delta, dq_acc      (D = rowsum(dO o))
///   scf.parallel (%nb, %hk, %b) = (0, 0, 0) to (ceil(Skv/BN), Hkv, B) {
///     dk_acc [BN, D], dv_acc [BN, Dv] (f32) = 0
///     %mLo, %mHi, %iLo, %iHi = attn.q_range cols %col0 seq(%Sq, %Skv)
///     scf.for %g = 0 to Hq / Hkv {                 (the kv head's q heads)
///       scf.for %mb = %mLo to %mHi {
///         if (mb < iLo || mb >= iHi)  attn.tile_grad_update ... masked
///         else                        attn.tile_grad_update ...
///     } }
///     attn.tile_grad_finalize acc(dk_acc, dv_acc) to dk, dv
///   }
///   attn.grad_postprocess dq_acc to dq
///
/// K and V of a kv-block stay put while the q-blocks that see it stream by
/// (FA3's loop order); dQ is summed across the grid's cells.
static LogicalResult tileGrad(FlashAttentionGradOp op, int64_t optM,
                              int64_t optN) {
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  auto qt = cast<MemRefType>(q.getType());
  int64_t hq = qt.getDimSize(1), d = qt.getDimSize(3);
  int64_t hkv = cast<MemRefType>(k.getType()).getDimSize(1);
  int64_t dv = cast<MemRefType>(v.getType()).getDimSize(3);
  int64_t left = op.getWindowLeft(), right = op.getWindowRight();
  FailureOr<TileSizes> picked = pickTiles(op, optM, optN);
  if (failed(picked))
    return failure();
  TileSizes ts = *picked;
  double scale = op.getEffectiveScale();
  double softcap = op.getSoftcap().convertToDouble();

  OpBuilder b(op);
  Location loc = op.getLoc();
  IndexMath ib{b, loc};
  Type f32 = b.getF32Type();
  Value sq = dimOf(b, loc, q, 2), skv = dimOf(b, loc, k, 2);
  Value nb = dimOf(b, loc, q, 0);
  Value delta = allocF32Like(b, loc, q, /*dims=*/3);
  Value dqAcc = allocF32Like(b, loc, q);
  GradPreprocessOp::create(b, loc, op.getOut(), op.getGradOut(), delta, dqAcc);

  Value numN = ib.ceilDiv(skv, ts.n);
  SmallVector<Value> lower{ib.c(0), ib.c(0), ib.c(0)};
  SmallVector<Value> upper{numN, ib.c(hkv), nb};
  SmallVector<Value> steps{ib.c(1), ib.c(1), ib.c(1)};
  auto grid = scf::ParallelOp::create(b, loc, lower, upper, steps);
  b.setInsertionPointToStart(grid.getBody());
  Value n = grid.getInductionVars()[0], hk = grid.getInductionVars()[1],
        bi = grid.getInductionVars()[2];
  Value dkAcc = memref::AllocOp::create(b, loc, MemRefType::get({ts.n, d}, f32));
  Value dvAcc = memref::AllocOp::create(b, loc, MemRefType::get({ts.n, dv}, f32));
  Value zero = f32Const(b, loc, 0.0);
  linalg::FillOp::create(b, loc, zero, dkAcc);
  linalg::FillOp::create(b, loc, zero, dvAcc);
  Value col0 = ib.mul(n, ib.c(ts.n));
  Type idx = b.getIndexType();
  auto range = QRangeOp::create(
      b, loc, TypeRange{idx, idx, idx, idx}, col0, sq, skv,
      b.getI64IntegerAttr(ts.m), b.getI64IntegerAttr(ts.n),
      b.getDenseI64ArrayAttr({left, right}));
  // convert-attn-to-hopper reads the configuration here, as the forward's
  // on attn.kv_range.
  if (Attribute config = op->getAttr(HopperConfigAttr::kAttrName))
    range->setAttr(HopperConfigAttr::kAttrName, config);
  Value mLo = range.getLo(), mHi = range.getHi();
  Value iLo = range.getInteriorLo(), iHi = range.getInteriorHi();

  int64_t group = hq / hkv;
  scf::ForOp::create(
      b, loc, ib.c(0), ib.c(group), ib.c(1), ValueRange{},
      [&](OpBuilder &gb, Location gl, Value g, ValueRange) {
        IndexMath hb{gb, gl};
        Value first = hb.mul(hk, hb.c(group));
        Value h = arith::AddIOp::create(gb, gl, first, g);
        scf::ForOp::create(
            gb, gl, mLo, mHi, hb.c(1), ValueRange{},
            [&](OpBuilder &lb, Location ll, Value mb, ValueRange) {
              IndexMath jb{lb, ll};
              Value row0 = jb.mul(mb, jb.c(ts.m));
              buildBoundaryIf(
                  lb, ll, mb, iLo, iHi,
                  [&](OpBuilder &sb, Location sl, bool masked) {
                    auto upd = TileGradUpdateOp::create(
                        sb, sl, TypeRange{},
                        ValueRange{q, k, v, op.getGradOut(), op.getLse(),
                                   delta, dqAcc, dkAcc, dvAcc, bi, h, hk,
                                   row0, col0});
                    SmallVector<NamedAttribute> a = {
                        sb.getNamedAttr("block_m", sb.getI64IntegerAttr(ts.m)),
                        sb.getNamedAttr("block_n", sb.getI64IntegerAttr(ts.n)),
                        sb.getNamedAttr("scale", sb.getF32FloatAttr(scale)),
                        sb.getNamedAttr("softcap",
                                        sb.getF32FloatAttr(softcap)),
                        sb.getNamedAttr("window",
                                        sb.getDenseI64ArrayAttr({left, right}))};
                    if (masked)
                      a.push_back(sb.getNamedAttr("masked", sb.getUnitAttr()));
                    if (op.getDeterministic())
                      a.push_back(
                          sb.getNamedAttr("deterministic", sb.getUnitAttr()));
                    upd->setAttrs(a);
                  });
              scf::YieldOp::create(lb, ll);
            });
        scf::YieldOp::create(gb, gl);
      });
  TileGradFinalizeOp::create(b, loc, dkAcc, dvAcc, op.getGradKey(),
                             op.getGradValue(), bi, hk, col0,
                             b.getI64IntegerAttr(ts.n));
  for (Value buf : {dkAcc, dvAcc})
    memref::DeallocOp::create(b, loc, buf);
  b.setInsertionPointAfter(grid);
  GradPostprocessOp::create(b, loc, dqAcc, op.getGradQuery());
  for (Value buf : {delta, dqAcc})
    memref::DeallocOp::create(b, loc, buf);
  op.erase();
  return success();
}

namespace {
struct AttnTilePass : public fa3::attn::impl::AttnTileBase<AttnTilePass> {
  using AttnTileBase::AttnTileBase;
  void runOnOperation() override {
    for (auto [name, value] : {std::pair<StringRef, int64_t>{"block-m", blockM},
                               {"block-n", blockN}})
      if (value < 0 || value > kMaxBlock) {
        mlir::emitError(getOperation()->getLoc(), "attn-tile: ")
            << name << " must be 0 (default) to " << kMaxBlock << ", got "
            << value;
        return signalPassFailure();
      }
    if (!(rescaleThreshold >= 0.0 &&
          rescaleThreshold <= HopperConfigAttr::kMaxRescaleThreshold)) {
      std::string msg;
      llvm::raw_string_ostream(msg)
          << llvm::format("attn-tile: rescale-threshold must be 0 (exact) to "
                          "%g (log2 units), got %g",
                          HopperConfigAttr::kMaxRescaleThreshold,
                          rescaleThreshold.getValue());
      mlir::emitError(getOperation()->getLoc(), msg);
      return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    bool bad = false;
    getOperation()->walk([&](Operation *op) {
      if (!isa<FlashAttentionOp, FlashAttentionGradOp, FlashAttentionVarlenOp>(
              op))
        return;
      if (!isa<MemRefType>(op->getOperand(0).getType())) {
        op->emitOpError("attn-tile needs the memref form: run "
                       "--one-shot-bufferize=\"bufferize-function-boundaries "
                       "function-boundary-type-conversion=identity-layout-map\" "
                       "first, or a pipeline (--attn-cpu-tiled-pipeline, "
                       "--attn-hopper-pipeline), which bufferizes");
        bad = true;
      }
      ops.push_back(op);
    });
    if (bad)
      return signalPassFailure();
    for (Operation *op : ops) {
      LogicalResult done = failure();
      if (auto fwd = dyn_cast<FlashAttentionOp>(op))
        done = tile(fwd, blockM, blockN, rescaleThreshold);
      else if (auto varlen = dyn_cast<FlashAttentionVarlenOp>(op))
        done = tileVarlen(varlen, blockM, blockN, rescaleThreshold);
      else
        done = tileGrad(cast<FlashAttentionGradOp>(op), blockM, blockN);
      if (failed(done))
        return signalPassFailure();
    }
  }
};
} // namespace
