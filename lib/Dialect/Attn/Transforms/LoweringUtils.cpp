//===- LoweringUtils.cpp - IR builders shared by the attn lowerings ------===//

#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"

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

static Value i32Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}

/// The f32 value of e4m3 (f8E4M3FN) `x`, in integer arithmetic: the LLVM
/// dialect has no 8-bit float for arith.extf to lower to. Normal codes
/// rebias the exponent (7 -> 127) and widen the 3 mantissa bits; exponent 0
/// is m * 2^-9; S.1111.111 is NaN.
static Value e4m3ToF32(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto c = [&](int64_t v) { return i32Const(b, loc, v); };
  Value byte = arith::BitcastOp::create(b, loc, b.getI8Type(), x);
  Value v = arith::ExtUIOp::create(b, loc, i32, byte);
  Value sign = arith::AndIOp::create(b, loc, v, c(0x80));
  sign = arith::ShLIOp::create(b, loc, sign, c(24));
  Value mag = arith::AndIOp::create(b, loc, v, c(0x7F));
  Value normal = arith::ShLIOp::create(b, loc, mag, c(20));
  normal = arith::AddIOp::create(b, loc, normal, c(120 << 23));
  Value m = arith::AndIOp::create(b, loc, mag, c(7));
  Value sub = arith::UIToFPOp::create(b, loc, f32, m);
  sub = arith::MulFOp::create(b, loc, sub, f32Const(b, loc, 1.0 / 512));
  sub = arith::BitcastOp::create(b, loc, i32, sub);
  Value isSub = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, mag,
                                      c(8));
  Value bits = arith::SelectOp::create(b, loc, isSub, sub, normal);
  Value nan = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, mag,
                                    c(0x7F));
  bits = arith::SelectOp::create(b, loc, nan, c(0x7FC00000), bits);
  bits = arith::OrIOp::create(b, loc, bits, sign);
  return arith::BitcastOp::create(b, loc, f32, bits);
}

Value loadAsF32(OpBuilder &b, Location loc, Value memref, ValueRange indices) {
  Value x = memref::LoadOp::create(b, loc, memref, indices);
  if (isa<Float8E4M3FNType>(x.getType()))
    return e4m3ToF32(b, loc, x);
  if (!x.getType().isF32())
    x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  return x;
}

/// The e4m3 (f8E4M3FN) value of f32 `x` (|x| <= 448 or NaN: the caller
/// saturates), rounded to nearest even, in integer arithmetic: the LLVM
/// dialect has no 8-bit float for arith.truncf to lower to.
static Value f32ToE4M3(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type();
  auto c = [&](int64_t v) { return i32Const(b, loc, v); };
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  Value sign = arith::ShRUIOp::create(b, loc, bits, c(24));
  sign = arith::AndIOp::create(b, loc, sign, c(0x80));
  Value a = arith::AndIOp::create(b, loc, bits, c(0x7FFFFFFF));
  // normal (|x| >= 2^-6): 3 of f32's 23 mantissa bits, rounded to nearest
  // even by adding just under half an ulp plus the kept lsb; exponent bias
  // 127 -> 7
  Value lsb = arith::ShRUIOp::create(b, loc, a, c(20));
  lsb = arith::AndIOp::create(b, loc, lsb, c(1));
  Value r = arith::AddIOp::create(b, loc, a, c(0x7FFFF));
  r = arith::AddIOp::create(b, loc, r, lsb);
  r = arith::ShRUIOp::create(b, loc, r, c(20));
  Value normal = arith::SubIOp::create(b, loc, r, c(120 << 3));
  // subnormal: |x| / 2^-9 rounded to nearest even (0 .. 8; 8 is 2^-6's
  // encoding), by adding and subtracting 2^23
  Value af = arith::BitcastOp::create(b, loc, b.getF32Type(), a);
  Value t = arith::MulFOp::create(b, loc, af, f32Const(b, loc, 512.0));
  t = arith::AddFOp::create(b, loc, t, f32Const(b, loc, 8388608.0));
  t = arith::SubFOp::create(b, loc, t, f32Const(b, loc, 8388608.0));
  Value sub = arith::FPToUIOp::create(b, loc, i32, t);
  Value small = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, a,
                                      c(0x3C800000));
  Value mag = arith::SelectOp::create(b, loc, small, sub, normal);
  Value nan = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, a,
                                    c(0x7F800000));
  mag = arith::SelectOp::create(b, loc, nan, c(0x7F), mag);
  Value e = arith::OrIOp::create(b, loc, mag, sign);
  Value byte = arith::TruncIOp::create(b, loc, b.getI8Type(), e);
  return arith::BitcastOp::create(b, loc, b.getType<Float8E4M3FNType>(), byte);
}

void storeFromF32(OpBuilder &b, Location loc, Value value, Value memref,
                  ValueRange indices) {
  Type et = cast<MemRefType>(memref.getType()).getElementType();
  if (isa<Float8E4M3FNType>(et))
    value = f32ToE4M3(b, loc, value);
  else if (et != value.getType())
    value = arith::TruncFOp::create(b, loc, et, value);
  memref::StoreOp::create(b, loc, value, memref, indices);
}

VisibleCols buildVisibleCols(OpBuilder &b, Location loc, Value row,
                             Value offset, int64_t left, int64_t right) {
  Value diag = arith::AddIOp::create(b, loc, row, offset);
  VisibleCols c;
  if (left >= 0)
    c.lo = arith::SubIOp::create(b, loc, diag, indexConst(b, loc, left));
  if (right >= 0)
    c.hi = arith::AddIOp::create(b, loc, diag, indexConst(b, loc, right + 1));
  return c;
}

Value buildVisible(OpBuilder &b, Location loc, Value row, Value col,
                   Value offset, int64_t left, int64_t right) {
  VisibleCols c = buildVisibleCols(b, loc, row, offset, left, right);
  Value visible;
  if (c.lo)
    visible = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, col, c.lo);
  if (c.hi) {
    Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, col, c.hi);
    visible = visible ? arith::AndIOp::create(b, loc, visible, ok).getResult()
                      : ok;
  }
  return visible;
}

namespace {
/// Index arithmetic for the schedule builders, one op per call: built one
/// per statement, the ops come out in the same order under GCC and clang
/// (C++ leaves the order of function arguments open).
struct IndexMath {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return indexConst(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value minS(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value maxS(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value floorDiv(Value x, int64_t d) {
    return arith::FloorDivSIOp::create(b, loc, x, c(d));
  }
  Value ceilDiv(Value x, int64_t d) {
    return arith::CeilDivSIOp::create(b, loc, x, c(d));
  }
  Value sle(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
};
} // namespace

KvRange buildKvRange(OpBuilder &b, Location loc, Value row0, Value sq,
                     Value skv, int64_t bm, int64_t bn, int64_t left,
                     int64_t right) {
  IndexMath m{b, loc};
  // One op per statement: C++ leaves the order of function arguments
  // unspecified, and GCC and clang would emit them in different orders.
  Value offset = m.sub(skv, sq);
  Value bmC = m.c(bm);
  Value rowEnd = m.minS(m.add(row0, bmC), sq);
  Value one = m.c(1);
  Value lastRow = m.sub(rowEnd, one);
  // Visible key columns of the whole block: [colLo, colHi).
  Value colLo = m.c(0), colHi = skv;
  if (left >= 0) {
    Value diag = m.add(row0, offset);
    Value leftC = m.c(left);
    colLo = m.maxS(colLo, m.sub(diag, leftC));
  }
  if (right >= 0) {
    Value diag = m.add(lastRow, offset);
    Value rightC = m.c(right + 1);
    colHi = m.minS(colHi, m.add(diag, rightC));
  }
  KvRange r;
  r.lo = m.floorDiv(colLo, bn);
  r.hi = m.maxS(r.lo, m.ceilDiv(colHi, bn));
  // Interior blocks: visible to every row of the block and inside Skv.
  r.interiorLo = r.lo;
  r.interiorHi = m.floorDiv(skv, bn);
  if (left >= 0) {
    Value diag = m.add(lastRow, offset);
    Value leftC = m.c(left);
    r.interiorLo = m.maxS(r.lo, m.ceilDiv(m.sub(diag, leftC), bn));
  }
  if (right >= 0) {
    Value diag = m.add(row0, offset);
    Value rightC = m.c(right + 1);
    r.interiorHi = m.minS(r.interiorHi, m.floorDiv(m.add(diag, rightC), bn));
  }
  return r;
}

KvRange buildQRange(OpBuilder &b, Location loc, Value col0, Value sq,
                    Value skv, int64_t bm, int64_t bn, int64_t left,
                    int64_t right) {
  IndexMath m{b, loc};
  // One op per statement (see buildKvRange). Row i sees key j iff
  // i + off - left <= j <= i + off + right: the rows that see a key of
  // [col0, colEnd) are col0 - off - right <= i < colEnd - off + left,
  // clipped to [0, Sq); none when the block holds no key (col0 >= Skv).
  Value offset = m.sub(skv, sq);
  Value bnC = m.c(bn);
  Value fullEnd = m.add(col0, bnC);
  Value colEnd = m.minS(fullEnd, skv);
  Value rowLo = m.c(0), rowHi = sq;
  if (right >= 0) {
    Value diag = m.sub(col0, offset);
    Value rightC = m.c(right);
    rowLo = m.maxS(rowLo, m.sub(diag, rightC));
  }
  if (left >= 0) {
    Value diag = m.sub(colEnd, offset);
    Value leftC = m.c(left);
    rowHi = m.minS(rowHi, m.add(diag, leftC));
  }
  Value noKey = m.sle(colEnd, col0);
  Value noRow = m.sle(rowHi, rowLo);
  Value none = arith::OrIOp::create(b, loc, noKey, noRow);
  KvRange r;
  r.lo = m.floorDiv(rowLo, bm);
  Value hiBlocks = m.maxS(r.lo, m.ceilDiv(rowHi, bm));
  r.hi = m.select(none, r.lo, hiBlocks);
  // Interior: every row (below Sq) sees every key of a block wholly below
  // Skv: the first row sees the last key, the last row the first key.
  Value interiorLo = r.lo, interiorHi = m.floorDiv(sq, bm);
  if (right >= 0) {
    Value one = m.c(1);
    Value lastKey = m.sub(fullEnd, one);
    Value diag = m.sub(lastKey, offset);
    Value rightC = m.c(right);
    interiorLo = m.maxS(r.lo, m.ceilDiv(m.sub(diag, rightC), bm));
  }
  if (left >= 0) {
    Value diag = m.sub(col0, offset);
    Value leftC = m.c(left + 1);
    interiorHi = m.minS(interiorHi, m.floorDiv(m.add(diag, leftC), bm));
  }
  interiorHi = m.minS(interiorHi, r.hi);
  Value partial = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                        fullEnd, skv);
  Value emptyInterior = arith::OrIOp::create(b, loc, partial,
                                             m.sle(interiorHi, interiorLo));
  r.interiorLo = interiorLo;
  r.interiorHi = m.select(emptyInterior, interiorLo, interiorHi);
  return r;
}

Value buildDot(OpBuilder &b, Location loc, Value q, Value k, Value bi, Value h,
               Value hk, Value i, Value j) {
  int64_t d = cast<MemRefType>(q.getType()).getDimSize(3);
  Value zero = f32Const(b, loc, 0.0);
  Value lb = indexConst(b, loc, 0);
  Value ub = indexConst(b, loc, d);
  Value step = indexConst(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, lb, ub, step, ValueRange{zero},
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

Value loadDescale(OpBuilder &b, Location loc, Value d, Value bi, Value head,
                  Value pos, int64_t block) {
  int64_t rank = cast<MemRefType>(d.getType()).getRank();
  SmallVector<Value> at;
  if (rank >= 2)
    at = {bi, head};
  if (rank == 3) {
    Value blk = indexConst(b, loc, block);
    at.push_back(arith::DivUIOp::create(b, loc, pos, blk));
  }
  return memref::LoadOp::create(b, loc, d, at);
}

Value queryDescaleHead(Value qd, int64_t hq, Value h, Value hk) {
  auto t = cast<MemRefType>(qd.getType());
  return t.getRank() == 2 && t.getDimSize(1) != hq ? hk : h;
}

Value dimOf(OpBuilder &b, Location loc, Value memref, unsigned dim) {
  auto t = cast<ShapedType>(memref.getType());
  if (!t.isDynamicDim(dim))
    return indexConst(b, loc, t.getDimSize(dim));
  return memref::DimOp::create(b, loc, memref, dim);
}

Value allocF32Like(OpBuilder &b, Location loc, Value like, int dims) {
  auto t = cast<MemRefType>(like.getType());
  int64_t rank = dims < 0 ? t.getRank() : dims;
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < rank; ++d)
    if (t.isDynamicDim(d))
      dyn.push_back(dimOf(b, loc, like, d));
  auto f32T = MemRefType::get(t.getShape().take_front(rank), b.getF32Type());
  return memref::AllocOp::create(b, loc, f32T, dyn);
}

void accumulate(OpBuilder &b, Location loc, Value buf, ValueRange idx,
                Value x) {
  Value a = memref::LoadOp::create(b, loc, buf, idx);
  a = arith::AddFOp::create(b, loc, a, x);
  memref::StoreOp::create(b, loc, a, buf, idx);
}

/// sum.buf[sum.prefix..., x] += f * src[at..., x] for x < the extent of
/// src's last dimension.
static void addScaledRow(OpBuilder &b, Location loc, const GradSum &sum,
                         Value f, Value src, ValueRange at) {
  int64_t n = cast<MemRefType>(src.getType()).getDimSize(3);
  Value c0 = indexConst(b, loc, 0);
  Value cn = indexConst(b, loc, n);
  Value c1 = indexConst(b, loc, 1);
  scf::ForOp::create(
      b, loc, c0, cn, c1, ValueRange{},
      [&](OpBuilder &b, Location loc, Value x, ValueRange) {
        SmallVector<Value, 4> from(at.begin(), at.end());
        from.push_back(x);
        Value e = loadAsF32(b, loc, src, from);
        SmallVector<Value, 4> to(sum.prefix.begin(), sum.prefix.end());
        to.push_back(x);
        Value term = arith::MulFOp::create(b, loc, f, e);
        if (sum.atomic)
          memref::AtomicRMWOp::create(
              b, loc,
              arith::AtomicRMWKindAttr::get(b.getContext(),
                                            arith::AtomicRMWKind::addf),
              term, sum.buf, to);
        else
          accumulate(b, loc, sum.buf, to, term);
        scf::YieldOp::create(b, loc);
      });
}

void buildGradPair(OpBuilder &b, Location loc, const GradPair &in,
                   const GradSum &dq, const GradSum &dk, const GradSum &dv) {
  Value cScale = f32Const(b, loc, in.scale);
  Value s = buildDot(b, loc, in.q, in.k, in.bi, in.h, in.hk, in.i, in.j);
  s = arith::MulFOp::create(b, loc, s, cScale);
  s = buildSoftcap(b, loc, s, in.softcap);
  Value p = math::ExpOp::create(b, loc,
                                arith::SubFOp::create(b, loc, s, in.rowLse));
  if (in.keep)
    p = arith::SelectOp::create(b, loc, in.keep, p, f32Const(b, loc, 0.0));
  // ds = p (dot(dO_i, v_j) - D_i), through softcap's derivative
  Value dp = buildDot(b, loc, in.dO, in.v, in.bi, in.h, in.hk, in.i, in.j);
  Value ds = arith::MulFOp::create(b, loc, p,
                                   arith::SubFOp::create(b, loc, dp, in.rowD));
  if (in.softcap > 0) {
    Value t = arith::DivFOp::create(b, loc, s, f32Const(b, loc, in.softcap));
    Value t2 = arith::MulFOp::create(b, loc, t, t);
    Value one = f32Const(b, loc, 1.0);
    ds = arith::MulFOp::create(b, loc, ds,
                               arith::SubFOp::create(b, loc, one, t2));
  }
  Value dss = arith::MulFOp::create(b, loc, ds, cScale);
  addScaledRow(b, loc, dq, dss, in.k, {in.bi, in.hk, in.j});
  addScaledRow(b, loc, dk, dss, in.q, {in.bi, in.h, in.i});
  addScaledRow(b, loc, dv, p, in.dO, {in.bi, in.h, in.i});
}

Value batchOfOneView(OpBuilder &b, Location loc, Value packed) {
  auto t = cast<MemRefType>(packed.getType());
  SmallVector<int64_t> shape = {1};
  shape.append(t.getShape().begin(), t.getShape().end());
  SmallVector<ReassociationIndices> reassoc;
  if (t.getRank() == 3)
    reassoc = {{0, 1}, {2}, {3}};
  else // lse [H, T] -> [1, H, T]
    reassoc = {{0, 1}, {2}};
  Value e = memref::ExpandShapeOp::create(
      b, loc, shape, packed, reassoc);
  if (t.getRank() == 2)
    return e;
  auto perm = AffineMap::getPermutationMap(ArrayRef<unsigned>{0, 2, 1, 3},
                                           b.getContext());
  return memref::TransposeOp::create(b, loc, e, AffineMapAttr::get(perm));
}

SequenceBounds
buildSequenceBounds(OpBuilder &b, Location loc,
                    llvm::function_ref<Value(SeqlensArray, Value)> load,
                    bool hasUsed, Value s) {
  Value c1 = arith::ConstantOp::create(b, loc, s.getType(),
                                       b.getIntegerAttr(s.getType(), 1));
  Value s1 = arith::AddIOp::create(b, loc, s, c1);
  SequenceBounds r;
  r.q0 = load(SeqlensArray::CuQ, s);
  Value q1 = load(SeqlensArray::CuQ, s1);
  r.k0 = load(SeqlensArray::CuK, s);
  Value k1 = load(SeqlensArray::CuK, s1);
  r.skv = arith::SubIOp::create(b, loc, k1, r.k0);
  if (hasUsed) {
    Value used = load(SeqlensArray::UsedK, s);
    r.skv = clampUsedKeys(b, loc, used, r.skv);
  }
  r.sq = arith::SubIOp::create(b, loc, q1, r.q0);
  return r;
}

Value clampUsedKeys(OpBuilder &b, Location loc, Value used, Value keys) {
  Value zero = arith::ConstantOp::create(b, loc, used.getType(),
                                         b.getIntegerAttr(used.getType(), 0));
  Value n = arith::MaxSIOp::create(b, loc, used, zero);
  return arith::MinSIOp::create(b, loc, n, keys);
}

SequenceBounds buildSequenceBounds(OpBuilder &b, Location loc, Value cuQ,
                                   Value cuK, Value used, Value s) {
  auto load = [&](SeqlensArray a, Value i) -> Value {
    Value buf = a == SeqlensArray::CuQ ? cuQ
                : a == SeqlensArray::CuK ? cuK
                                         : used;
    Value x = memref::LoadOp::create(b, loc, buf, i);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
  };
  return buildSequenceBounds(b, loc, load, used != nullptr, s);
}

} // namespace fa3::attn
