//===- LowerToLoops.cpp - reference lowering of flash_attention ----------===//
//
// The numerical oracle: a direct, untiled evaluation of the op's definition
// (natural exp/log, two passes over the keys). Deliberately simple; every
// faster lowering is checked against it.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

namespace fa3::attn {
#define GEN_PASS_DEF_ATTNLOWERTOLOOPS
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace fa3::attn

using namespace mlir;
using namespace fa3::attn;

static void lowerToLoops(FlashAttentionOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value o = op.getOut(), lse = op.getLse();
  auto qt = cast<MemRefType>(q.getType());
  auto vt = cast<MemRefType>(v.getType());
  int64_t hq = qt.getDimSize(1);
  int64_t hkv = cast<MemRefType>(k.getType()).getDimSize(1);
  int64_t dv = vt.getDimSize(3);
  double scale = op.getEffectiveScale();
  double softcap = op.getSoftcap().convertToDouble();
  int64_t left = op.getWindowLeft(), right = op.getWindowRight();

  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value nb = dimOf(b, loc, q, 0), sq = dimOf(b, loc, q, 2),
        skv = dimOf(b, loc, k, 2);
  Value offset = arith::SubIOp::create(b, loc, skv, sq);
  Value group = indexConst(b, loc, hq / hkv);
  Value cDv = indexConst(b, loc, dv);
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  Value zero = f32Const(b, loc, 0.0), one = f32Const(b, loc, 1.0);
  Value cScale = f32Const(b, loc, scale);
  auto accType = MemRefType::get({dv}, b.getF32Type());
  Value acc = memref::AllocaOp::create(b, loc, accType);

  scf::buildLoopNest(
      b, loc, ValueRange{c0, c0, c0}, ValueRange{nb, indexConst(b, loc, hq), sq},
      ValueRange{c1, c1, c1},
      [&](OpBuilder &b, Location loc, ValueRange ivs) {
        Value bi = ivs[0], h = ivs[1], i = ivs[2];
        Value hk = arith::DivUIOp::create(b, loc, h, group);
        // Score and visibility of key j for this query row.
        auto score = [&](OpBuilder &b, Location loc, Value j) {
          Value s = buildDot(b, loc, q, k, bi, h, hk, i, j);
          s = arith::MulFOp::create(b, loc, s, cScale);
          return buildSoftcap(b, loc, s, softcap);
        };
        auto visible = [&](OpBuilder &b, Location loc, Value j) {
          return buildVisible(b, loc, i, j, offset, left, right);
        };
        // Pass 1: row max over visible keys.
        auto maxLoop = scf::ForOp::create(
            b, loc, c0, skv, c1, ValueRange{negInf},
            [&](OpBuilder &b, Location loc, Value j, ValueRange iter) {
              Value s = score(b, loc, j);
              Value m = arith::MaximumFOp::create(b, loc, iter[0], s);
              if (Value vis = visible(b, loc, j))
                m = arith::SelectOp::create(b, loc, vis, m, iter[0]);
              scf::YieldOp::create(b, loc, m);
            });
        Value m = maxLoop.getResult(0);
        // Pass 2: exp-sum and the weighted sum of V.
        scf::ForOp::create(b, loc, c0, cDv, c1, ValueRange{},
                           [&](OpBuilder &b, Location loc, Value d, ValueRange) {
                             memref::StoreOp::create(b, loc, zero, acc, d);
                             scf::YieldOp::create(b, loc);
                           });
        auto sumLoop = scf::ForOp::create(
            b, loc, c0, skv, c1, ValueRange{zero},
            [&](OpBuilder &b, Location loc, Value j, ValueRange iter) {
              Value s = score(b, loc, j);
              Value p = math::ExpOp::create(
                  b, loc, arith::SubFOp::create(b, loc, s, m));
              if (Value vis = visible(b, loc, j))
                p = arith::SelectOp::create(b, loc, vis, p, zero);
              scf::ForOp::create(
                  b, loc, c0, cDv, c1, ValueRange{},
                  [&](OpBuilder &b, Location loc, Value d, ValueRange) {
                    Value vv = loadAsF32(b, loc, v, {bi, hk, j, d});
                    Value a = memref::LoadOp::create(b, loc, acc, d);
                    a = math::FmaOp::create(b, loc, p, vv, a);
                    memref::StoreOp::create(b, loc, a, acc, d);
                    scf::YieldOp::create(b, loc);
                  });
              scf::YieldOp::create(
                  b, loc, ValueRange{arith::AddFOp::create(b, loc, iter[0], p)});
            });
        Value l = sumLoop.getResult(0);
        // A row that sees no key: o = 0, lse = -inf.
        Value any = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, l,
                                          zero);
        Value inv = arith::SelectOp::create(
            b, loc, any, arith::DivFOp::create(b, loc, one, l), zero);
        scf::ForOp::create(b, loc, c0, cDv, c1, ValueRange{},
                           [&](OpBuilder &b, Location loc, Value d, ValueRange) {
                             Value a = memref::LoadOp::create(b, loc, acc, d);
                             storeFromF32(b, loc,
                                          arith::MulFOp::create(b, loc, a, inv),
                                          o, {bi, h, i, d});
                             scf::YieldOp::create(b, loc);
                           });
        if (lse) {
          Value val = arith::AddFOp::create(b, loc, m,
                                            math::LogOp::create(b, loc, l));
          val = arith::SelectOp::create(b, loc, any, val, negInf);
          memref::StoreOp::create(b, loc, val, lse, ValueRange{bi, h, i});
        }
      });
  op.erase();
}

namespace {
struct AttnLowerToLoopsPass
    : public fa3::attn::impl::AttnLowerToLoopsBase<AttnLowerToLoopsPass> {
  void runOnOperation() override {
    SmallVector<FlashAttentionOp> ops;
    bool failedAny = false;
    getOperation()->walk([&](FlashAttentionOp op) {
      if (!op.hasBufferSemantics()) {
        op.emitOpError("attn-lower-to-loops needs the memref form: run "
                       "--one-shot-bufferize=\"bufferize-function-boundaries "
                       "function-boundary-type-conversion=identity-layout-map\" "
                       "first, or a pipeline (--attn-cpu-tiled-pipeline, "
                       "--attn-hopper-pipeline), which bufferizes");
        failedAny = true;
        return;
      }
      ops.push_back(op);
    });
    if (failedAny)
      return signalPassFailure();
    for (FlashAttentionOp op : ops)
      lowerToLoops(op);
  }
};
} // namespace
