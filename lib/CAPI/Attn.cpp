//===- Attn.cpp - C API of the attn dialect -------------------------------===//

#include "fa3-c/Attn.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "Errors.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <optional>

using namespace mlir;
using namespace fa3::attn;
using namespace fa3::capi;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Attn, attn, fa3::attn::AttnDialect)

Fa3FlashAttentionOptions fa3FlashAttentionOptionsDefault(void) {
  Fa3FlashAttentionOptions o;
  o.hasScale = false;
  o.scale = 0.0f;
  o.causal = false;
  o.windowLeft = -1;
  o.windowRight = -1;
  o.softcap = 0.0f;
  return o;
}

/// Every value of `values` there (null allowed where `optional` says so)
/// and of loc's context; else the misuse is reported and false returned.
static bool checkValues(const char *fn, Location l,
                        ArrayRef<const char *> names,
                        ArrayRef<MlirValue> values,
                        ArrayRef<bool> optional = {}) {
  for (auto [i, name, val] : llvm::enumerate(names, values)) {
    if (mlirValueIsNull(val)) {
      if (i < optional.size() && optional[i])
        continue;
      misuseAt(fn, l, llvm::Twine(name) + " is a null MlirValue");
      return false;
    }
    if (unwrap(val).getContext() != l.getContext()) {
      misuseAt(fn, l, llvm::Twine(name) + " belongs to another context than loc");
      return false;
    }
  }
  return true;
}

/// `op` verified and returned, or erased (the verifier's reason as the
/// first error) and null: values of the wrong types or bad options give
/// the caller no op rather than an invalid one.
static MlirOperation verified(const char *fn, Operation *op,
                              FirstError &firstError) {
  if (failed(verify(op))) {
    op->erase();
    firstError.failed(fn);
    return MlirOperation{nullptr};
  }
  return wrap(op);
}

/// The attributes every attention op takes, from the options (scale and
/// causal absent where off, as the parser leaves them).
struct AttentionAttrs {
  FloatAttr scale;
  UnitAttr causal;
  DenseI64ArrayAttr window;
  FloatAttr softcap;
};
static AttentionAttrs attrsOf(OpBuilder &b,
                              const Fa3FlashAttentionOptions &o) {
  AttentionAttrs a;
  a.scale = o.hasScale ? b.getF32FloatAttr(o.scale) : FloatAttr();
  a.causal = o.causal ? b.getUnitAttr() : UnitAttr();
  a.window = b.getDenseI64ArrayAttr({o.windowLeft, o.windowRight});
  a.softcap = b.getF32FloatAttr(o.softcap);
  return a;
}

/// One result per output in the tensor form (q a tensor), none otherwise.
static SmallVector<Type> resultTypesOf(Value q, ValueRange outs) {
  SmallVector<Type> types;
  if (isa<RankedTensorType>(q.getType()))
    for (Value out : outs)
      types.push_back(out.getType());
  return types;
}

/// Whether `op` is an OpT (a null op: false, the last error).
template <typename OpT> static bool isA(const char *fn, MlirOperation op) {
  clearLastError();
  if (mlirOperationIsNull(op)) {
    misuse(fn, "the operation is null");
    return false;
  }
  return isa<OpT>(unwrap(op));
}

/// Every builder's first check: a location (its context is the op's).
static bool haveLocation(const char *fn, MlirLocation loc) {
  if (mlirLocationIsNull(loc)) {
    misuse(fn, "the location is null");
    return false;
  }
  return true;
}

/// Every op builder's first step: the last error cleared, then `loc`
/// non-null and each value (named, null only where `optional`) non-null
/// and in loc's context, since the builders would dereference a null one.
/// Returns the location, or nothing after the misuse was reported.
static std::optional<Location> checkedArgs(const char *fn, MlirLocation loc,
                                           ArrayRef<const char *> names,
                                           ArrayRef<MlirValue> values,
                                           ArrayRef<bool> optional = {}) {
  clearLastError();
  if (!haveLocation(fn, loc))
    return std::nullopt;
  Location l = unwrap(loc);
  if (!checkValues(fn, l, names, values, optional))
    return std::nullopt;
  return l;
}

/// attn.flash_attention from the C API's values, checked (none null but
/// lse; descales: none or all three) and verified.
static MlirOperation createAttention(const char *fn, MlirLocation loc,
                                     MlirValue q, MlirValue k, MlirValue v,
                                     ArrayRef<MlirValue> descales, MlirValue o,
                                     MlirValue lse,
                                     const Fa3FlashAttentionOptions &options) {
  // every value but lse (and the descales, all or none)
  SmallVector<const char *> names = {"q", "k", "v"};
  SmallVector<MlirValue> values = {q, k, v};
  if (!descales.empty()) {
    names.append({"qDescale", "kDescale", "vDescale"});
    values.append(descales.begin(), descales.end());
  }
  names.append({"o", "lse"});
  values.append({o, lse});
  SmallVector<bool> optional(values.size(), false);
  optional.back() = true;
  std::optional<Location> checked =
      checkedArgs(fn, loc, names, values, optional);
  if (!checked)
    return MlirOperation{nullptr};
  Location l = *checked;
  FirstError firstError(l.getContext());
  OpBuilder b(l.getContext());
  SmallVector<Value> outs{unwrap(o)};
  if (!mlirValueIsNull(lse))
    outs.push_back(unwrap(lse));
  SmallVector<Value> ds;
  for (MlirValue d : descales)
    ds.push_back(unwrap(d));
  AttentionAttrs a = attrsOf(b, options);
  auto op = FlashAttentionOp::create(b, l, resultTypesOf(unwrap(q), outs),
                                     unwrap(q), unwrap(k), unwrap(v), ds, outs,
                                     a.scale, a.causal, a.window, a.softcap);
  return verified(fn, op, firstError);
}

MlirOperation fa3FlashAttentionCreate(MlirLocation loc, MlirValue q,
                                      MlirValue k, MlirValue v, MlirValue o,
                                      MlirValue lse,
                                      Fa3FlashAttentionOptions options) {
  return createAttention(__func__, loc, q, k, v, {}, o, lse, options);
}

MlirOperation fa3FlashAttentionFp8Create(MlirLocation loc, MlirValue q,
                                         MlirValue k, MlirValue v,
                                         MlirValue qDescale, MlirValue kDescale,
                                         MlirValue vDescale, MlirValue o,
                                         MlirValue lse,
                                         Fa3FlashAttentionOptions options) {
  MlirValue descales[] = {qDescale, kDescale, vDescale};
  return createAttention(__func__, loc, q, k, v, descales, o, lse, options);
}

MlirOperation fa3QuantizeCreate(MlirLocation loc, MlirValue x, MlirValue signs,
                                MlirValue y, MlirValue descale,
                                int64_t block) {
  const char *fn = __func__;
  std::optional<Location> checked =
      checkedArgs(fn, loc, {"x", "signs", "y", "descale"},
                  {x, signs, y, descale}, {false, true, false, false});
  if (!checked)
    return MlirOperation{nullptr};
  Location l = *checked;
  if (block < 0 || block > INT32_MAX) {
    misuseAt(fn, l, "block is " + std::to_string(block) +
                        "; 0 (one descale per head) or 1 to 2^31-1 rows");
    return MlirOperation{nullptr};
  }
  FirstError firstError(l.getContext());
  OpBuilder b(l.getContext());
  Value outs[] = {unwrap(y), unwrap(descale)};
  auto op = QuantizeOp::create(
      b, l, resultTypesOf(unwrap(x), outs), unwrap(x),
      mlirValueIsNull(signs) ? Value() : unwrap(signs), outs,
      block ? b.getI64IntegerAttr(block) : IntegerAttr());
  return verified(fn, op, firstError);
}

bool fa3OperationIsAQuantize(MlirOperation op) {
  return isA<QuantizeOp>(__func__, op);
}

MlirOperation fa3FlashAttentionGradCreate(MlirLocation loc, MlirValue q,
                                          MlirValue k, MlirValue v,
                                          MlirValue o, MlirValue dO,
                                          MlirValue lse, MlirValue dq,
                                          MlirValue dk, MlirValue dv,
                                          Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  std::optional<Location> checked =
      checkedArgs(fn, loc, {"q", "k", "v", "o", "dO", "lse", "dq", "dk", "dv"},
                  {q, k, v, o, dO, lse, dq, dk, dv});
  if (!checked)
    return MlirOperation{nullptr};
  Location l = *checked;
  FirstError firstError(l.getContext());
  OpBuilder b(l.getContext());
  SmallVector<Value> outs{unwrap(dq), unwrap(dk), unwrap(dv)};
  AttentionAttrs a = attrsOf(b, options);
  auto op = FlashAttentionGradOp::create(
      b, l, resultTypesOf(unwrap(q), outs), unwrap(q), unwrap(k), unwrap(v),
      unwrap(o), unwrap(dO), unwrap(lse), outs, a.scale, a.causal, a.window,
      a.softcap, /*deterministic=*/UnitAttr());
  return verified(fn, op, firstError);
}

MlirOperation fa3FlashAttentionVarlenCreate(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v,
    MlirValue cuSeqlensQ, MlirValue cuSeqlensK, MlirValue sequsedK,
    MlirValue o, MlirValue lse, Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  // sequsedK and lse may be null; everything else must be there.
  std::optional<Location> checked = checkedArgs(
      fn, loc,
      {"q", "k", "v", "cuSeqlensQ", "cuSeqlensK", "sequsedK", "o", "lse"},
      {q, k, v, cuSeqlensQ, cuSeqlensK, sequsedK, o, lse},
      {false, false, false, false, false, true, false, true});
  if (!checked)
    return MlirOperation{nullptr};
  Location l = *checked;
  FirstError firstError(l.getContext());
  OpBuilder b(l.getContext());
  SmallVector<Value> outs{unwrap(o)};
  if (!mlirValueIsNull(lse))
    outs.push_back(unwrap(lse));
  Value used = mlirValueIsNull(sequsedK) ? Value() : unwrap(sequsedK);
  AttentionAttrs a = attrsOf(b, options);
  auto op = FlashAttentionVarlenOp::create(
      b, l, resultTypesOf(unwrap(q), outs), unwrap(q), unwrap(k), unwrap(v),
      unwrap(cuSeqlensQ), unwrap(cuSeqlensK), used, outs, a.scale, a.causal,
      a.window, a.softcap);
  return verified(fn, op, firstError);
}

bool fa3OperationIsAFlashAttentionVarlen(MlirOperation op) {
  return isA<FlashAttentionVarlenOp>(__func__, op);
}

bool fa3OperationIsAFlashAttention(MlirOperation op) {
  return isA<FlashAttentionOp>(__func__, op);
}

bool fa3OperationIsAFlashAttentionGrad(MlirOperation op) {
  return isA<FlashAttentionGradOp>(__func__, op);
}
