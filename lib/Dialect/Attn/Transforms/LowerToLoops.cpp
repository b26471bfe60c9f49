//===- LowerToLoops.cpp - reference lowering of flash_attention ----------===//
//
// The numerical oracle: a direct, untiled evaluation of the ops'
// definitions (natural exp/log; the forward in two passes over the keys, the
// backward in one, given the forward's lse). Deliberately simple; every
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

#include <cmath>
#include <limits>
#include <optional>

namespace fa3::attn {
#define GEN_PASS_DEF_ATTNLOWERTOLOOPS
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace fa3::attn

using namespace mlir;
using namespace fa3::attn;

namespace {
/// One query row of the reference: q/o/lse rows at [bi, h, row], keys
/// keyBase + j for j < keyCount of kv head hk, visibility by the row's
/// place `localRow` in its sequence and offset = Skv - Sq of that sequence.
struct ReferenceRow {
  Value q, k, v, o, lse; // 4-D [B, H, S, D] views; lse [B, H, S] or null
  Value bi, h, hk, row;
  Value keyBase;         // null: 0
  Value keyCount, localRow, offset;
  // FP8 descale factors (attn.flash_attention's descale operands), null
  // for 1: q's of this row and v's of its kv head (f32 values), k's memref
  Value qDescale, vDescale, kDescale;
};

} // namespace

/// The reference's evaluation of one query row (the op's definition, two
/// passes over the keys), with `acc` a [Dv] f32 scratch buffer.
static void buildReferenceRow(OpBuilder &b, Location loc,
                              const ReferenceRow &r, Value acc, double scale,
                              double softcap, int64_t left, int64_t right) {
  int64_t dv = cast<MemRefType>(r.v.getType()).getDimSize(3);
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value cDv = indexConst(b, loc, dv);
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  Value zero = f32Const(b, loc, 0.0), one = f32Const(b, loc, 1.0);
  Value cScale = f32Const(b, loc, scale);
  // s = scale * qd * kd * dot (FP8's descales; absent: 1)
  if (r.qDescale)
    cScale = arith::MulFOp::create(b, loc, cScale, r.qDescale);
  auto keyOf = [&](OpBuilder &b, Location loc, Value j) -> Value {
    return r.keyBase ? arith::AddIOp::create(b, loc, r.keyBase, j).getResult()
                     : j;
  };
  // Score and visibility of key j for this query row.
  auto score = [&](OpBuilder &b, Location loc, Value j) {
    Value s = buildDot(b, loc, r.q, r.k, r.bi, r.h, r.hk, r.row,
                       keyOf(b, loc, j));
    Value factor = cScale;
    if (r.kDescale) {
      Value kd = loadDescale(b, loc, r.kDescale, r.bi, r.hk, keyOf(b, loc, j),
                              FlashAttentionOp::kDescaleBlock);
      factor = arith::MulFOp::create(b, loc, factor, kd);
    }
    s = arith::MulFOp::create(b, loc, s, factor);
    return buildSoftcap(b, loc, s, softcap);
  };
  auto visible = [&](OpBuilder &b, Location loc, Value j) {
    return buildVisible(b, loc, r.localRow, j, r.offset, left, right);
  };
  // Pass 1: row max over visible keys.
  auto maxLoop = scf::ForOp::create(
      b, loc, c0, r.keyCount, c1, ValueRange{negInf},
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
      b, loc, c0, r.keyCount, c1, ValueRange{zero},
      [&](OpBuilder &b, Location loc, Value j, ValueRange iter) {
        Value s = score(b, loc, j);
        Value p = math::ExpOp::create(b, loc,
                                      arith::SubFOp::create(b, loc, s, m));
        if (Value vis = visible(b, loc, j))
          p = arith::SelectOp::create(b, loc, vis, p, zero);
        Value key = keyOf(b, loc, j);
        scf::ForOp::create(
            b, loc, c0, cDv, c1, ValueRange{},
            [&](OpBuilder &b, Location loc, Value d, ValueRange) {
              Value vv = loadAsF32(b, loc, r.v, {r.bi, r.hk, key, d});
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
  Value any =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, l, zero);
  Value inv = arith::SelectOp::create(
      b, loc, any, arith::DivFOp::create(b, loc, one, l), zero);
  if (r.vDescale)
    inv = arith::MulFOp::create(b, loc, inv, r.vDescale);
  scf::ForOp::create(b, loc, c0, cDv, c1, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value d, ValueRange) {
                       Value a = memref::LoadOp::create(b, loc, acc, d);
                       storeFromF32(b, loc,
                                    arith::MulFOp::create(b, loc, a, inv), r.o,
                                    {r.bi, r.h, r.row, d});
                       scf::YieldOp::create(b, loc);
                     });
  if (r.lse) {
    Value val =
        arith::AddFOp::create(b, loc, m, math::LogOp::create(b, loc, l));
    val = arith::SelectOp::create(b, loc, any, val, negInf);
    memref::StoreOp::create(b, loc, val, r.lse, ValueRange{r.bi, r.h, r.row});
  }
}

/// The loop nest over query rows (batch bi < nb, query head h < hq, row
/// i < sq) that both reference lowerings run, with the row's kv head
/// hk = h / group (GQA).
static void forEachQueryRow(
    OpBuilder &b, Location loc, Value nb, int64_t hq, Value sq, Value group,
    llvm::function_ref<void(OpBuilder &, Location, Value, Value, Value, Value)>
        body) {
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  scf::buildLoopNest(
      b, loc, ValueRange{c0, c0, c0}, ValueRange{nb, indexConst(b, loc, hq), sq},
      ValueRange{c1, c1, c1},
      [&](OpBuilder &b, Location loc, ValueRange ivs) {
        Value h = ivs[1];
        Value hk = arith::DivUIOp::create(b, loc, h, group);
        body(b, loc, ivs[0], h, hk, ivs[2]);
      });
}

static void lowerToLoops(FlashAttentionOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  auto qt = cast<MemRefType>(q.getType());
  int64_t hq = qt.getDimSize(1);
  int64_t hkv = cast<MemRefType>(k.getType()).getDimSize(1);
  int64_t dv = cast<MemRefType>(v.getType()).getDimSize(3);

  Value nb = dimOf(b, loc, q, 0), sq = dimOf(b, loc, q, 2),
        skv = dimOf(b, loc, k, 2);
  Value offset = arith::SubIOp::create(b, loc, skv, sq);
  Value group = indexConst(b, loc, hq / hkv);
  Value acc = memref::AllocaOp::create(
      b, loc, MemRefType::get({dv}, b.getF32Type()));

  forEachQueryRow(
      b, loc, nb, hq, sq, group,
      [&](OpBuilder &b, Location loc, Value bi, Value h, Value hk, Value i) {
        ReferenceRow r{q,  k,  v,  op.getOut(), op.getLse(), bi,
                       h,  hk, i,  Value(),     skv,         i,
                       offset, Value(), Value(), Value()};
        if (op.getQueryDescale()) {
          // q's per q head, or FA3's per kv head ([B, Hkv]) for its group
          Value qd = op.getQueryDescale();
          Value head = queryDescaleHead(qd, hq, h, hk);
          r.qDescale = loadDescale(b, loc, qd, bi, head, i,
                              FlashAttentionOp::kDescaleBlock);
          r.kDescale = op.getKeyDescale();
          r.vDescale = loadDescale(b, loc, op.getValueDescale(), bi, hk, i,
                              FlashAttentionOp::kDescaleBlock);
        }
        buildReferenceRow(b, loc, r, acc, op.getEffectiveScale(),
                          op.getSoftcap().convertToDouble(),
                          op.getWindowLeft(), op.getWindowRight());
      });
  op.erase();
}

/// Each sequence b of the packed batch as the forward's reference: its
/// rows cu_q[b] + i of q/o/lse, its keys cu_k[b] + j (j < Skv_b).
static void lowerVarlenToLoops(FlashAttentionVarlenOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto qt = cast<MemRefType>(op.getQuery().getType());
  int64_t hq = qt.getDimSize(1);
  int64_t hkv = cast<MemRefType>(op.getKey().getType()).getDimSize(1);
  int64_t dv = cast<MemRefType>(op.getValue().getType()).getDimSize(2);
  Value q = batchOfOneView(b, loc, op.getQuery());
  Value k = batchOfOneView(b, loc, op.getKey());
  Value v = batchOfOneView(b, loc, op.getValue());
  Value o = batchOfOneView(b, loc, op.getOut());
  Value lse = op.getLse() ? batchOfOneView(b, loc, op.getLse()) : Value();
  Value cuQ = op.getCuSeqlensQ(), cuK = op.getCuSeqlensK(),
        used = op.getSequsedK();

  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value nseq = arith::SubIOp::create(b, loc, dimOf(b, loc, cuQ, 0), c1);
  Value group = indexConst(b, loc, hq / hkv);
  Value acc = memref::AllocaOp::create(
      b, loc, MemRefType::get({dv}, b.getF32Type()));
  scf::ForOp::create(
      b, loc, c0, nseq, c1, ValueRange{},
      [&](OpBuilder &b, Location loc, Value s, ValueRange) {
        SequenceBounds seq = buildSequenceBounds(b, loc, cuQ, cuK, used, s);
        Value q0 = seq.q0, k0 = seq.k0, sq = seq.sq, skv = seq.skv;
        Value offset = arith::SubIOp::create(b, loc, skv, sq);
        scf::buildLoopNest(
            b, loc, ValueRange{c0, c0}, ValueRange{indexConst(b, loc, hq), sq},
            ValueRange{c1, c1},
            [&](OpBuilder &b, Location loc, ValueRange ivs) {
              Value h = ivs[0], i = ivs[1];
              Value hk = arith::DivUIOp::create(b, loc, h, group);
              Value row = arith::AddIOp::create(b, loc, q0, i);
              ReferenceRow r{q,   k,   v,   o,      lse,     c0,
                             h,   hk,  row, k0,     skv,     i,
                             offset, Value(), Value(), Value()};
              buildReferenceRow(b, loc, r, acc, op.getEffectiveScale(),
                                op.getSoftcap().convertToDouble(),
                                op.getWindowLeft(), op.getWindowRight());
            });
        scf::YieldOp::create(b, loc);
      });
  op.erase();
}

/// Runs `body(indices)` over every element of the rank-4 `like`.
static void forEach4(OpBuilder &b, Location loc, Value like,
                     llvm::function_ref<void(OpBuilder &, Location, ValueRange)>
                         body) {
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  SmallVector<Value> lbs(4, c0), steps(4, c1), ubs;
  for (unsigned d = 0; d < 4; ++d)
    ubs.push_back(dimOf(b, loc, like, d));
  scf::buildLoopNest(b, loc, lbs, ubs, steps, body);
}

/// The backward's definition (FlashAttentionGradOp's description), summed in
/// f32 buffers for dQ, dK and dV, then converted into the outputs.
static void lowerGradToLoops(FlashAttentionGradOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value o = op.getOut(), dO = op.getGradOut(), lse = op.getLse();
  Value dq = op.getGradQuery(), dk = op.getGradKey(), dv = op.getGradValue();
  auto qt = cast<MemRefType>(q.getType());
  int64_t hq = qt.getDimSize(1);
  int64_t hkv = cast<MemRefType>(k.getType()).getDimSize(1);
  double scale = op.getEffectiveScale();
  double softcap = op.getSoftcap().convertToDouble();
  int64_t left = op.getWindowLeft(), right = op.getWindowRight();

  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value nb = dimOf(b, loc, q, 0), sq = dimOf(b, loc, q, 2),
        skv = dimOf(b, loc, k, 2);
  Value offset = arith::SubIOp::create(b, loc, skv, sq);
  Value group = indexConst(b, loc, hq / hkv);
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  Value zero = f32Const(b, loc, 0.0);

  // f32 sums, zeroed.
  Value sums[] = {allocF32Like(b, loc, dq), allocF32Like(b, loc, dk),
                  allocF32Like(b, loc, dv)};
  for (Value buf : sums)
    forEach4(b, loc, buf, [&](OpBuilder &b, Location loc, ValueRange idx) {
      memref::StoreOp::create(b, loc, zero, buf, idx);
    });
  Value dq32 = sums[0], dk32 = sums[1], dv32 = sums[2];

  forEachQueryRow(
      b, loc, nb, hq, sq, group,
      [&](OpBuilder &b, Location loc, Value bi, Value h, Value hk, Value i) {
        Value rowLse = memref::LoadOp::create(b, loc, lse, ValueRange{bi, h, i});
        // A row that saw no key (lse = -inf) contributes nothing.
        Value live = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                           rowLse, negInf);
        // D_i = dot(dO_i, o_i)
        Value rowD = buildDot(b, loc, dO, o, bi, h, h, i, i);
        scf::ForOp::create(
            b, loc, c0, skv, c1, ValueRange{},
            [&](OpBuilder &b, Location loc, Value j, ValueRange) {
              Value keep = live;
              if (Value vis = buildVisible(b, loc, i, j, offset, left, right))
                keep = arith::AndIOp::create(b, loc, keep, vis);
              GradPair pair{q, k,      v,    dO,   bi,    h,      hk,
                            i, j, rowLse, rowD, keep, scale, softcap};
              buildGradPair(b, loc, pair, GradSum{dq32, {bi, h, i}},
                            GradSum{dk32, {bi, hk, j}},
                            GradSum{dv32, {bi, hk, j}});
              scf::YieldOp::create(b, loc);
            });
      });

  // Into the outputs, in their element types.
  const Value outs[] = {dq, dk, dv};
  for (int g = 0; g < 3; ++g) {
    Value sum = sums[g], out = outs[g];
    forEach4(b, loc, out, [&](OpBuilder &b, Location loc, ValueRange idx) {
      Value x = memref::LoadOp::create(b, loc, sum, idx);
      storeFromF32(b, loc, x, out, idx);
    });
    memref::DeallocOp::create(b, loc, sum);
  }
  op.erase();
}

/// attn.quantize's definition, directly: per (batch, head, group of rows),
/// the amax of the (rotated) rows, the scales, then the rows again,
/// scaled, clamped and rounded. The rotation is the matrix product
/// (sum over k of x[k] H[k][j], H[k][j] = (-1)^popcount(k & j)), not a
/// fast transform: an independent check of the kernel's.
static void lowerQuantizeToLoops(QuantizeOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value x = op.getInput(), signs = op.getSigns(), y = op.getOutput(),
        descale = op.getDescale();
  std::optional<int64_t> block;
  if (op.getBlockAttr())
    block = op.getBlockAttr().getInt();
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value nb = dimOf(b, loc, x, 0), nh = dimOf(b, loc, x, 1),
        ns = dimOf(b, loc, x, 2), nd = dimOf(b, loc, x, 3);
  Value rows = block ? indexConst(b, loc, *block) : ns;
  Value groups = c1;
  if (block) {
    groups = arith::AddIOp::create(b, loc, ns, indexConst(b, loc, *block - 1));
    groups = arith::DivUIOp::create(b, loc, groups, rows);
  }
  int64_t d = cast<ShapedType>(x.getType()).getDimSize(3);
  Value zero = f32Const(b, loc, 0.0), one = f32Const(b, loc, 1.0);
  Value e4m3Max = f32Const(b, loc, QuantizeOp::kE4M3Max);
  Value negMax = f32Const(b, loc, -QuantizeOp::kE4M3Max);
  // element (bi, h, i, j) of the (rotated) input
  auto element = [&](OpBuilder &b, Location loc, Value bi, Value h, Value i,
                     Value j) -> Value {
    if (!signs)
      return loadAsF32(b, loc, x, ValueRange{bi, h, i, j});
    Value ji = arith::IndexCastOp::create(b, loc, b.getI64Type(), j);
    auto sum = scf::ForOp::create(
        b, loc, c0, nd, c1, ValueRange{zero},
        [&](OpBuilder &b, Location loc, Value k, ValueRange acc) {
          Value xv = loadAsF32(b, loc, x, ValueRange{bi, h, i, k});
          Value ki = arith::IndexCastOp::create(b, loc, b.getI64Type(), k);
          // the parity of popcount(k & j), by xor-folding its bits
          Value par = arith::AndIOp::create(b, loc, ki, ji);
          for (int64_t sh : {32, 16, 8, 4, 2, 1}) {
            Value hi = arith::ShRUIOp::create(
                b, loc, par,
                arith::ConstantIntOp::create(b, loc, b.getI64Type(), sh));
            par = arith::XOrIOp::create(b, loc, par, hi);
          }
          Value odd = arith::TruncIOp::create(b, loc, b.getI1Type(), par);
          Value plus = arith::AddFOp::create(b, loc, acc[0], xv);
          Value minus = arith::SubFOp::create(b, loc, acc[0], xv);
          Value next = arith::SelectOp::create(b, loc, odd, minus, plus);
          scf::YieldOp::create(b, loc, next);
        });
    Value sg = memref::LoadOp::create(b, loc, signs, ValueRange{j});
    Value cj = arith::MulFOp::create(
        b, loc, sg, f32Const(b, loc, 1.0 / std::sqrt(static_cast<double>(d))));
    return arith::MulFOp::create(b, loc, sum.getResult(0), cj);
  };
  // over the rows r0 .. r1 of a group and every column: fn(i, j, carried)
  auto overGroup = [&](OpBuilder &b, Location loc, Value r0, Value r1,
                       ValueRange init,
                       function_ref<Value(OpBuilder &, Location, Value, Value,
                                          Value)> fn) -> ValueRange {
    auto rowsLoop = scf::ForOp::create(
        b, loc, r0, r1, c1, init,
        [&](OpBuilder &b, Location loc, Value i, ValueRange acc) {
          auto cols = scf::ForOp::create(
              b, loc, c0, nd, c1, acc,
              [&](OpBuilder &b, Location loc, Value j, ValueRange acc2) {
                Value next = fn(b, loc, i, j, acc2.empty() ? Value() : acc2[0]);
                scf::YieldOp::create(b, loc,
                                     next ? ValueRange{next} : ValueRange{});
              });
          scf::YieldOp::create(b, loc, cols.getResults());
        });
    return rowsLoop.getResults();
  };
  scf::buildLoopNest(
      b, loc, ValueRange{c0, c0, c0}, ValueRange{nb, nh, groups},
      ValueRange{c1, c1, c1},
      [&](OpBuilder &b, Location loc, ValueRange ivs) {
        Value bi = ivs[0], h = ivs[1], t = ivs[2];
        Value r0 = arith::MulIOp::create(b, loc, t, rows);
        Value r1 = arith::AddIOp::create(b, loc, r0, rows);
        r1 = arith::MinUIOp::create(b, loc, r1, ns);
        Value amax =
            overGroup(b, loc, r0, r1, ValueRange{zero},
                      [&](OpBuilder &b, Location loc, Value i, Value j,
                          Value acc) -> Value {
                        Value v = element(b, loc, bi, h, i, j);
                        Value m = math::AbsFOp::create(b, loc, v);
                        return arith::MaximumFOp::create(b, loc, acc, m);
                      })[0];
        Value ok = arith::CmpFOp::create(
            b, loc, arith::CmpFPredicate::OGE, amax,
            f32Const(b, loc, QuantizeOp::kAmaxMin));
        Value safe = arith::SelectOp::create(b, loc, ok, amax, one);
        Value ds = arith::DivFOp::create(b, loc, safe, e4m3Max);
        ds = arith::SelectOp::create(b, loc, ok, ds, one);
        Value scale = arith::DivFOp::create(b, loc, e4m3Max, safe);
        scale = arith::SelectOp::create(b, loc, ok, scale, one);
        SmallVector<Value> at{bi, h};
        if (block)
          at.push_back(t);
        memref::StoreOp::create(b, loc, ds, descale, at);
        overGroup(b, loc, r0, r1, ValueRange{},
                  [&](OpBuilder &b, Location loc, Value i, Value j,
                      Value) -> Value {
                    Value v = element(b, loc, bi, h, i, j);
                    v = arith::MulFOp::create(b, loc, v, scale);
                    v = arith::MaximumFOp::create(b, loc, v, negMax);
                    v = arith::MinimumFOp::create(b, loc, v, e4m3Max);
                    storeFromF32(b, loc, v, y, ValueRange{bi, h, i, j});
                    return Value();
                  });
      });
  op.erase();
}

namespace {
struct AttnLowerToLoopsPass
    : public fa3::attn::impl::AttnLowerToLoopsBase<AttnLowerToLoopsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    bool failedAny = false;
    getOperation()->walk([&](Operation *op) {
      if (!isa<FlashAttentionOp, FlashAttentionVarlenOp, FlashAttentionGradOp,
               QuantizeOp>(op))
        return;
      if (!isa<MemRefType>(op->getOperand(0).getType())) {
        op->emitOpError("attn-lower-to-loops needs the memref form: run "
                        "--one-shot-bufferize=\"bufferize-function-boundaries "
                        "function-boundary-type-conversion=identity-layout-map\" "
                        "first, or a pipeline (")
            << (isa<FlashAttentionOp>(op)
                    ? "--attn-cpu-tiled-pipeline, --attn-hopper-pipeline"
                    : "--attn-cpu-reference-pipeline")
            << "), which bufferizes";
        failedAny = true;
        return;
      }
      ops.push_back(op);
    });
    if (failedAny)
      return signalPassFailure();
    for (Operation *op : ops) {
      if (auto fwd = dyn_cast<FlashAttentionOp>(op))
        lowerToLoops(fwd);
      else if (auto varlen = dyn_cast<FlashAttentionVarlenOp>(op))
        lowerVarlenToLoops(varlen);
      else if (auto quantize = dyn_cast<QuantizeOp>(op))
        lowerQuantizeToLoops(quantize);
      else
        lowerGradToLoops(cast<FlashAttentionGradOp>(op));
    }
  }
};
} // namespace
