//===- LowerTilesToLoops.cpp - CPU expansion of the tile ops --------------===//
//
// attn.tile_update / attn.tile_finalize become scalar loops, one query row at
// a time, with a block_n-wide f32 score row in a scratch buffer; the
// backward's tile ops, loops over the tile's (row, key) pairs through the
// oracle's per-pair builder (buildGradPair). This is what makes
// the tiled schedule executable (and so testable) on the CPU. The softmax step
// is the kernel's (buildOnlineSoftmaxStep), lazy rescaling included, so the
// CPU run checks the GPU's arithmetic.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Attn/Utils/OnlineSoftmax.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

#include <limits>

namespace fa3::attn {
#define GEN_PASS_DEF_ATTNLOWERTILESTOLOOPS
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace fa3::attn

using namespace mlir;
using namespace fa3::attn;

static constexpr double kLn2 = 0.6931471805599453;

/// Runs `body(row, r)` for r in [0, blockM) where row = row0 + r < Sq.
static void forValidRows(OpBuilder &b, Location loc, Value row0, int64_t blockM,
                         Value sq,
                         function_ref<void(OpBuilder &, Location, Value, Value)> body) {
  // Bounds named first: argument evaluation order is unspecified.
  Value lb = indexConst(b, loc, 0);
  Value ub = indexConst(b, loc, blockM);
  Value step = indexConst(b, loc, 1);
  scf::ForOp::create(
      b, loc, lb, ub, step, ValueRange{},
      [&](OpBuilder &b, Location loc, Value r, ValueRange) {
        Value row = arith::AddIOp::create(b, loc, row0, r);
        Value inside =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, row, sq);
        scf::IfOp::create(b, loc, inside, [&](OpBuilder &b, Location loc) {
          body(b, loc, row, r);
          scf::YieldOp::create(b, loc);
        });
        scf::YieldOp::create(b, loc);
      });
}

/// Increments the i64 memref.global `name` (created on first use).
static void bumpCounter(OpBuilder &b, Location loc, ModuleOp module,
                        StringRef name) {
  auto type = MemRefType::get({}, b.getI64Type());
  if (!module.lookupSymbol(name)) {
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    memref::GlobalOp::create(
        mb, loc, name, mb.getStringAttr("private"), type,
        DenseElementsAttr::get(RankedTensorType::get({}, mb.getI64Type()),
                               mb.getI64IntegerAttr(0).getValue()),
        /*constant=*/false, /*alignment=*/nullptr);
  }
  Value g = memref::GetGlobalOp::create(b, loc, type, name);
  Value x = memref::LoadOp::create(b, loc, g, ValueRange{});
  x = arith::AddIOp::create(
      b, loc, x, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1)));
  memref::StoreOp::create(b, loc, x, g, ValueRange{});
}

static void lowerUpdate(TileUpdateOp op, bool countBlocks) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t bm = op.getBlockM(), bn = op.getBlockN();
  bool masked = op.getMasked();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value mBuf = op.getRowMax(), lBuf = op.getRowSum(), acc = op.getAcc();
  Value bi = op.getBatch(), h = op.getQhead(), hk = op.getKvhead();
  Value row0 = op.getRow0(), col0 = op.getCol0();
  int64_t dv = cast<MemRefType>(v.getType()).getDimSize(3);
  double softcap = op.getSoftcap().convertToDouble();
  double scaleLog2 = op.getScaleLog2().convertToDouble();
  ArrayRef<int64_t> window = op.getWindow();
  double threshold = 0;
  if (std::optional<APFloat> t = op.getRescaleThreshold())
    threshold = t->convertToDouble();

  if (countBlocks) {
    auto module = op->getParentOfType<ModuleOp>();
    bumpCounter(b, loc, module, "attn_tiles_visited");
    if (masked)
      bumpCounter(b, loc, module, "attn_tiles_masked");
  }

  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value sq = dimOf(b, loc, q, 2), skv = dimOf(b, loc, k, 2);
  Value offset = arith::SubIOp::create(b, loc, skv, sq);
  Value sRow = memref::AllocOp::create(b, loc,
                                       MemRefType::get({bn}, b.getF32Type()));
  // Masked tiles may hang over Skv: only their first Skv - col0 columns exist.
  Value cEnd = indexConst(b, loc, bn);
  if (masked)
    cEnd = arith::MinSIOp::create(
        b, loc, cEnd, arith::SubIOp::create(b, loc, skv, col0));
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  Value zero = f32Const(b, loc, 0.0);
  // The kernel's split of the log2-domain score: the row max is taken over
  // s (after softcap and mask) and s * sl2 is fused into the exponent.
  // With softcap, s = tanh(qk * pre), pre = scale_log2 * (1 / (log2 e *
  // softcap)) rounded to f32 as the kernel does.
  Value pre, sl2 = f32Const(b, loc, scaleLog2);
  if (softcap > 0) {
    Value inv = f32Const(b, loc, softcapTanhFactor(softcap));
    pre = arith::MulFOp::create(b, loc, sl2, inv);
    sl2 = f32Const(b, loc, softcapLog2Scale(softcap));
  }

  // FP8: qk * qd * kd before anything else, V * vd (the op's definition)
  ValueRange descales = op.getDescales();
  const int64_t block = FlashAttentionOp::kDescaleBlock;

  forValidRows(b, loc, row0, bm, sq, [&](OpBuilder &b, Location loc, Value row,
                                         Value r) {
    Value qd, vd;
    if (!descales.empty()) {
      // q's per q head, or FA3's per kv head ([B, Hkv]) for its group
      int64_t hq = cast<MemRefType>(q.getType()).getDimSize(1);
      Value qh = queryDescaleHead(descales[0], hq, h, hk);
      qd = loadDescale(b, loc, descales[0], bi, qh, row, block);
      vd = loadDescale(b, loc, descales[2], bi, hk, row, block);
    }
    auto scoreLoop = scf::ForOp::create(
        b, loc, c0, cEnd, c1, ValueRange{negInf},
        [&](OpBuilder &b, Location loc, Value c, ValueRange iter) {
          Value col = arith::AddIOp::create(b, loc, col0, c);
          Value s = buildDot(b, loc, q, k, bi, h, hk, row, col);
          if (qd) {
            Value kd = loadDescale(b, loc, descales[1], bi, hk, col, block);
            Value f = arith::MulFOp::create(b, loc, qd, kd);
            s = arith::MulFOp::create(b, loc, s, f);
          }
          if (pre)
            s = math::TanhOp::create(b, loc,
                                     arith::MulFOp::create(b, loc, s, pre));
          if (masked)
            if (Value vis = buildVisible(b, loc, row, col, offset, window[0],
                                         window[1]))
              s = arith::SelectOp::create(b, loc, vis, s, negInf);
          memref::StoreOp::create(b, loc, s, sRow, c);
          scf::YieldOp::create(b, loc, ValueRange{
              arith::MaxNumFOp::create(b, loc, iter[0], s)});
        });
    Value mOld = memref::LoadOp::create(b, loc, mBuf, r);
    OnlineSoftmaxStep step = buildOnlineSoftmaxStep(
        b, loc, mOld, scoreLoop.getResult(0), sl2, threshold);
    auto sumLoop = scf::ForOp::create(
        b, loc, c0, cEnd, c1, ValueRange{zero},
        [&](OpBuilder &b, Location loc, Value c, ValueRange iter) {
          Value s = memref::LoadOp::create(b, loc, sRow, c);
          Value p = buildSoftmaxProb(b, loc, s, sl2, step.negMu);
          memref::StoreOp::create(b, loc, p, sRow, c);
          scf::YieldOp::create(b, loc, ValueRange{
              arith::AddFOp::create(b, loc, iter[0], p)});
        });
    Value lOld = memref::LoadOp::create(b, loc, lBuf, r);
    Value lNew =
        buildRescaledSum(b, loc, lOld, step.alpha, sumLoop.getResult(0));
    memref::StoreOp::create(b, loc, lNew, lBuf, r);
    memref::StoreOp::create(b, loc, step.mNew, mBuf, r);
    // acc[r, :] = acc[r, :] * alpha + P V
    scf::ForOp::create(
        b, loc, c0, indexConst(b, loc, dv), c1, ValueRange{},
        [&](OpBuilder &b, Location loc, Value d, ValueRange) {
          Value a = memref::LoadOp::create(b, loc, acc, ValueRange{r, d});
          a = arith::MulFOp::create(b, loc, a, step.alpha);
          auto pv = scf::ForOp::create(
              b, loc, c0, cEnd, c1, ValueRange{a},
              [&](OpBuilder &b, Location loc, Value c, ValueRange iter) {
                Value col = arith::AddIOp::create(b, loc, col0, c);
                Value p = memref::LoadOp::create(b, loc, sRow, c);
                Value vv = loadAsF32(b, loc, v, {bi, hk, col, d});
                if (vd)
                  vv = arith::MulFOp::create(b, loc, vv, vd);
                scf::YieldOp::create(b, loc, ValueRange{
                    math::FmaOp::create(b, loc, p, vv, iter[0])});
              });
          memref::StoreOp::create(b, loc, pv.getResult(0), acc,
                                  ValueRange{r, d});
          scf::YieldOp::create(b, loc);
        });
  });
  memref::DeallocOp::create(b, loc, sRow);
  op.erase();
}

static void lowerFinalize(TileFinalizeOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value mBuf = op.getRowMax(), lBuf = op.getRowSum(), acc = op.getAcc();
  Value o = op.getOut(), lse = op.getLse();
  Value bi = op.getBatch(), h = op.getQhead();
  int64_t dv = cast<MemRefType>(o.getType()).getDimSize(3);
  Value sq = dimOf(b, loc, o, 2);
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value zero = f32Const(b, loc, 0.0), one = f32Const(b, loc, 1.0);
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  forValidRows(b, loc, op.getRow0(), op.getBlockM(), sq,
               [&](OpBuilder &b, Location loc, Value row, Value r) {
    Value l = memref::LoadOp::create(b, loc, lBuf, r);
    Value any = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, l, zero);
    Value inv = arith::SelectOp::create(b, loc, any,
                                        arith::DivFOp::create(b, loc, one, l), zero);
    scf::ForOp::create(b, loc, c0, indexConst(b, loc, dv), c1, ValueRange{},
                       [&](OpBuilder &b, Location loc, Value d, ValueRange) {
                         Value a = memref::LoadOp::create(b, loc, acc, ValueRange{r, d});
                         storeFromF32(b, loc, arith::MulFOp::create(b, loc, a, inv),
                                      o, {bi, h, row, d});
                         scf::YieldOp::create(b, loc);
                       });
    if (lse) {
      Value m = memref::LoadOp::create(b, loc, mBuf, r);
      Value val = arith::AddFOp::create(b, loc, m, math::Log2Op::create(b, loc, l));
      val = arith::MulFOp::create(b, loc, val, f32Const(b, loc, kLn2));
      val = arith::SelectOp::create(b, loc, any, val, negInf);
      memref::StoreOp::create(b, loc, val, lse, ValueRange{bi, h, row});
    }
  });
  op.erase();
}

/// Runs `body(indices)` over [0, sizes[i]) for each i (static or dynamic).
static void forEachIndex(OpBuilder &b, Location loc, ArrayRef<Value> sizes,
                         function_ref<void(OpBuilder &, Location, ValueRange)>
                             body) {
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  SmallVector<Value> lbs(sizes.size(), c0), steps(sizes.size(), c1);
  scf::buildLoopNest(b, loc, lbs, sizes, steps,
                     [&](OpBuilder &b, Location loc, ValueRange idx) {
                       body(b, loc, idx);
                     });
}

/// The extents of `buf`'s dimensions.
static SmallVector<Value> sizesOf(OpBuilder &b, Location loc, Value buf) {
  SmallVector<Value> sizes;
  for (unsigned d = 0; d < cast<MemRefType>(buf.getType()).getRank(); ++d)
    sizes.push_back(dimOf(b, loc, buf, d));
  return sizes;
}

static void lowerGradPreprocess(GradPreprocessOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value o = op.getOut(), dO = op.getGradOut(), delta = op.getDelta();
  Value dqAcc = op.getDqAcc();
  forEachIndex(b, loc, sizesOf(b, loc, delta),
               [&](OpBuilder &b, Location loc, ValueRange i) {
                 // D = dot(dO_i, o_i), the oracle's (buildDot) sum
                 Value d = buildDot(b, loc, dO, o, i[0], i[1], i[1], i[2], i[2]);
                 memref::StoreOp::create(b, loc, d, delta, i);
               });
  Value zero = f32Const(b, loc, 0.0);
  forEachIndex(b, loc, sizesOf(b, loc, dqAcc),
               [&](OpBuilder &b, Location loc, ValueRange i) {
                 memref::StoreOp::create(b, loc, zero, dqAcc, i);
               });
  op.erase();
}

static void lowerGradUpdate(TileGradUpdateOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q = op.getQuery(), k = op.getKey();
  Value bi = op.getBatch(), h = op.getQhead(), hk = op.getKvhead();
  Value col0 = op.getCol0();
  ArrayRef<int64_t> window = op.getWindow();
  bool masked = op.getMasked();
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value sq = dimOf(b, loc, q, 2), skv = dimOf(b, loc, k, 2);
  Value offset = arith::SubIOp::create(b, loc, skv, sq);
  // Masked tiles may hang over Skv: only their first Skv - col0 keys exist.
  Value cEnd = indexConst(b, loc, op.getBlockN());
  if (masked)
    cEnd = arith::MinSIOp::create(
        b, loc, cEnd, arith::SubIOp::create(b, loc, skv, col0));
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  forValidRows(b, loc, op.getRow0(), op.getBlockM(), sq,
               [&](OpBuilder &b, Location loc, Value row, Value) {
    Value rowLse = memref::LoadOp::create(b, loc, op.getLse(),
                                          ValueRange{bi, h, row});
    Value rowD = memref::LoadOp::create(b, loc, op.getDelta(),
                                        ValueRange{bi, h, row});
    // A row that saw no key (lse = -inf) contributes nothing.
    Value live = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                       rowLse, negInf);
    scf::ForOp::create(
        b, loc, c0, cEnd, c1, ValueRange{},
        [&](OpBuilder &b, Location loc, Value c, ValueRange) {
          Value col = arith::AddIOp::create(b, loc, col0, c);
          Value keep = live;
          if (masked)
            if (Value vis = buildVisible(b, loc, row, col, offset, window[0],
                                         window[1]))
              keep = arith::AndIOp::create(b, loc, keep, vis);
          GradPair pair{q,    k,    op.getValue(), op.getGradOut(),
                        bi,   h,    hk,            row,
                        col,  rowLse, rowD,        keep,
                        op.getScale().convertToDouble(),
                        op.getSoftcap().convertToDouble()};
          // dQ's sums are shared by the grid's cells (kv-blocks): atomic.
          buildGradPair(b, loc, pair,
                        GradSum{op.getDqAcc(), {bi, h, row}, /*atomic=*/true},
                        GradSum{op.getDkAcc(), {c}},
                        GradSum{op.getDvAcc(), {c}});
          scf::YieldOp::create(b, loc);
        });
  });
  op.erase();
}

static void lowerGradFinalize(TileGradFinalizeOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value dk = op.getGradKey(), dv = op.getGradValue();
  Value bi = op.getBatch(), hk = op.getKvhead();
  // rows col0 .. col0 + block_n - 1 below Skv
  Value skv = dimOf(b, loc, dk, 2);
  forValidRows(b, loc, op.getCol0(), op.getBlockN(), skv,
               [&](OpBuilder &b, Location loc, Value row, Value c) {
    const std::pair<Value, Value> pairs[] = {{op.getDkAcc(), dk},
                                             {op.getDvAcc(), dv}};
    for (const auto &pair : pairs) {
      Value acc = pair.first, out = pair.second;
      Value width = dimOf(b, loc, acc, 1);
      forEachIndex(b, loc, {width},
                   [&](OpBuilder &b, Location loc, ValueRange x) {
                     Value a = memref::LoadOp::create(b, loc, acc,
                                                      ValueRange{c, x[0]});
                     storeFromF32(b, loc, a, out, {bi, hk, row, x[0]});
                   });
    }
  });
  op.erase();
}

static void lowerGradPostprocess(GradPostprocessOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value acc = op.getDqAcc(), dq = op.getGradQuery();
  forEachIndex(b, loc, sizesOf(b, loc, dq),
               [&](OpBuilder &b, Location loc, ValueRange i) {
                 Value a = memref::LoadOp::create(b, loc, acc, i);
                 storeFromF32(b, loc, a, dq, i);
               });
  op.erase();
}

static void lowerKvRange(KvRangeOp op) {
  OpBuilder b(op);
  KvRange r = buildKvRange(b, op.getLoc(), op.getRow0(), op.getSeqQ(),
                           op.getSeqKv(), op.getBlockM(), op.getBlockN(),
                           op.getWindow()[0], op.getWindow()[1]);
  op.replaceAllUsesWith(ValueRange{r.lo, r.hi, r.interiorLo, r.interiorHi});
  op.erase();
}

static void lowerQRange(QRangeOp op) {
  OpBuilder b(op);
  KvRange r = buildQRange(b, op.getLoc(), op.getCol0(), op.getSeqQ(),
                          op.getSeqKv(), op.getBlockM(), op.getBlockN(),
                          op.getWindow()[0], op.getWindow()[1]);
  op.replaceAllUsesWith(ValueRange{r.lo, r.hi, r.interiorLo, r.interiorHi});
  op.erase();
}

/// With count-blocks: `func.func @attn_tile_counters(memref<2xi64>)` copies
/// (visited, masked) out, so a host can read them after a run.
static void addCounterReader(ModuleOp module) {
  if (module.lookupSymbol("attn_tile_counters"))
    return;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  auto outType = MemRefType::get({2}, b.getI64Type());
  auto fn = func::FuncOp::create(b, loc, "attn_tile_counters",
                                 b.getFunctionType({outType}, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto type = MemRefType::get({}, b.getI64Type());
  // A named array: an initializer list inside the range expression would
  // die before the loop body runs.
  static constexpr StringRef kCounters[] = {"attn_tiles_visited",
                                            "attn_tiles_masked"};
  for (auto [i, name] : llvm::enumerate(kCounters)) {
    Value x;
    if (module.lookupSymbol(name)) {
      Value g = memref::GetGlobalOp::create(b, loc, type, name);
      x = memref::LoadOp::create(b, loc, g, ValueRange{});
    } else {
      x = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
    }
    memref::StoreOp::create(b, loc, x, body->getArgument(0),
                            ValueRange{indexConst(b, loc, i)});
  }
  func::ReturnOp::create(b, loc);
}

namespace {
struct AttnLowerTilesToLoopsPass
    : public fa3::attn::impl::AttnLowerTilesToLoopsBase<AttnLowerTilesToLoopsPass> {
  using AttnLowerTilesToLoopsBase::AttnLowerTilesToLoopsBase;
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<TileUpdateOp, TileFinalizeOp, KvRangeOp, QRangeOp,
              GradPreprocessOp, TileGradUpdateOp, TileGradFinalizeOp,
              GradPostprocessOp>(op))
        ops.push_back(op);
    });
    if (countBlocks && !isa<ModuleOp>(getOperation())) {
      getOperation()->emitError("attn-lower-tiles-to-loops{count-blocks} must "
                                "run on a builtin.module");
      return signalPassFailure();
    }
    // The counters are globals of the module: a tile op under another
    // symbol table (a gpu.module) could not reference them.
    if (countBlocks)
      for (Operation *op : ops)
        // (SymbolTable's own lookup: a trait query compiled into this
        // library answered differently under GCC in libFA3CAPI.)
        if (Operation *table = SymbolTable::getNearestSymbolTable(
                op->getParentOp());
            table != getOperation()) {
          mlir::emitError(op->getLoc(),
                          "attn-lower-tiles-to-loops{count-blocks} counts in "
                          "globals of the builtin.module, which this op "
                          "inside ")
              << (table ? table->getName().getStringRef() : "no symbol table")
              << " cannot reach";
          return signalPassFailure();
        }
    for (Operation *op : ops) {
      if (auto u = dyn_cast<TileUpdateOp>(op))
        lowerUpdate(u, countBlocks);
      else if (auto r = dyn_cast<KvRangeOp>(op))
        lowerKvRange(r);
      else if (auto r = dyn_cast<QRangeOp>(op))
        lowerQRange(r);
      else if (auto f = dyn_cast<TileFinalizeOp>(op))
        lowerFinalize(f);
      else if (auto p = dyn_cast<GradPreprocessOp>(op))
        lowerGradPreprocess(p);
      else if (auto g = dyn_cast<TileGradUpdateOp>(op))
        lowerGradUpdate(g);
      else if (auto f = dyn_cast<TileGradFinalizeOp>(op))
        lowerGradFinalize(f);
      else
        lowerGradPostprocess(cast<GradPostprocessOp>(op));
    }
    if (countBlocks)
      addCounterReader(cast<ModuleOp>(getOperation()));
  }
};
} // namespace
