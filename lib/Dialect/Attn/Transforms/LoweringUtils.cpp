//===- LoweringUtils.cpp - IR builders shared by the attn lowerings ------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace fa3::attn {

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value f32Const(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

Value loadAsF32(OpBuilder &b, Location loc, Value memref, ValueRange indices) {
  Value x = memref::LoadOp::create(b, loc, memref, indices);
  if (!x.getType().isF32())
    x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  return x;
}

void storeFromF32(OpBuilder &b, Location loc, Value value, Value memref,
                  ValueRange indices) {
  Type et = cast<MemRefType>(memref.getType()).getElementType();
  if (et != value.getType())
    value = arith::TruncFOp::create(b, loc, et, value);
  memref::StoreOp::create(b, loc, value, memref, indices);
}

Value buildVisible(OpBuilder &b, Location loc, Value row, Value col,
                   Value offset, int64_t left, int64_t right) {
  Value diag = arith::AddIOp::create(b, loc, row, offset);
  Value visible;
  if (left >= 0) {
    Value lo = arith::SubIOp::create(b, loc, diag, indexConst(b, loc, left));
    visible = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, col, lo);
  }
  if (right >= 0) {
    Value hi = arith::AddIOp::create(b, loc, diag, indexConst(b, loc, right));
    Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, col, hi);
    visible = visible ? arith::AndIOp::create(b, loc, visible, ok).getResult()
                      : ok;
  }
  return visible;
}

Value buildDot(OpBuilder &b, Location loc, Value q, Value k, Value bi, Value h,
               Value hk, Value i, Value j) {
  int64_t d = cast<MemRefType>(q.getType()).getDimSize(3);
  Value zero = f32Const(b, loc, 0.0);
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), indexConst(b, loc, d),
      indexConst(b, loc, 1), ValueRange{zero},
      [&](OpBuilder &nb, Location nl, Value dd, ValueRange iter) {
        Value qv = loadAsF32(nb, nl, q, {bi, h, i, dd});
        Value kv = loadAsF32(nb, nl, k, {bi, hk, j, dd});
        Value s = math::FmaOp::create(nb, nl, qv, kv, iter[0]);
        scf::YieldOp::create(nb, nl, s);
      });
  return loop.getResult(0);
}

Value buildSoftcap(OpBuilder &b, Location loc, Value s, double softcap) {
  if (softcap <= 0)
    return s;
  Value c = f32Const(b, loc, softcap);
  Value t = math::TanhOp::create(b, loc, arith::DivFOp::create(b, loc, s, c));
  return arith::MulFOp::create(b, loc, t, c);
}

Value dimOf(OpBuilder &b, Location loc, Value memref, unsigned dim) {
  auto t = cast<ShapedType>(memref.getType());
  if (!t.isDynamicDim(dim))
    return indexConst(b, loc, t.getDimSize(dim));
  return memref::DimOp::create(b, loc, memref, dim);
}

} // namespace fa3::attn
