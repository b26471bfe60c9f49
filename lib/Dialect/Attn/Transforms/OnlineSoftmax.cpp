//===- OnlineSoftmax.cpp - the online-softmax step, built once -----------===//

#include "fa3/Dialect/Attn/Utils/OnlineSoftmax.h"
#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;

namespace fa3::attn {

OnlineSoftmaxStep buildOnlineSoftmaxStep(OpBuilder &b, Location loc,
                                         Value mOld, Value rowMax,
                                         Value scaleLog2,
                                         double rescaleThreshold) {
  OnlineSoftmaxStep r;
  // The max is taken before scaling (sl2 > 0 keeps it the max): one
  // multiply per row instead of one per score.
  Value mxs = arith::MulFOp::create(b, loc, rowMax, scaleLog2);
  if (!mOld) {
    // The row's first block: m_new is the block's max (no alpha: there is
    // no old l or O to rescale).
    r.mNew = mxs;
  } else if (rescaleThreshold > 0) {
    Value bound = arith::AddFOp::create(b, loc, mOld,
                                        f32Const(b, loc, rescaleThreshold));
    r.raised = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, mxs,
                                     bound);
    r.mNew = arith::SelectOp::create(b, loc, r.raised, mxs, mOld);
  } else {
    // maxnum, as the kernel's reduction (llvm.intr.maxnum).
    r.mNew = arith::MaxNumFOp::create(b, loc, mOld, mxs);
  }
  // A row with no visible key so far keeps m = -inf: exponentiate against
  // 0 then, so that exp2(-inf - -inf) never makes a NaN.
  Value negInf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  Value isNegInf =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, r.mNew, negInf);
  Value zero = f32Const(b, loc, 0.0);
  Value mu = arith::SelectOp::create(b, loc, isNegInf, zero, r.mNew);
  if (mOld) {
    Value diff = arith::SubFOp::create(b, loc, mOld, mu);
    r.alpha = math::Exp2Op::create(b, loc, diff);
    if (r.raised)
      r.alpha = arith::SelectOp::create(b, loc, r.raised, r.alpha,
                                        f32Const(b, loc, 1.0));
  }
  r.negMu = arith::NegFOp::create(b, loc, mu);
  return r;
}

Value buildSoftmaxProb(OpBuilder &b, Location loc, Value s, Value scaleLog2,
                       Value negMu) {
  Value x = math::FmaOp::create(b, loc, s, scaleLog2, negMu);
  return math::Exp2Op::create(b, loc, x);
}

Value buildRescaledSum(OpBuilder &b, Location loc, Value lOld, Value alpha,
                       Value rowSum) {
  return math::FmaOp::create(b, loc, lOld, alpha, rowSum);
}

} // namespace fa3::attn
