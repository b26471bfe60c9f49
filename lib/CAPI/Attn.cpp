//===- Attn.cpp - C API of the attn dialect -------------------------------===//

#include "fa3-c/Attn.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "Errors.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

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

/// Every builder's first check: a location (its context is the op's).
static bool haveLocation(const char *fn, MlirLocation loc) {
  if (mlirLocationIsNull(loc)) {
    misuse(fn, "the location is null");
    return false;
  }
  return true;
}

MlirOperation fa3FlashAttentionCreate(MlirLocation loc, MlirValue q,
                                      MlirValue k, MlirValue v, MlirValue o,
                                      MlirValue lse,
                                      Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  clearLastError();
  if (!haveLocation(fn, loc))
    return MlirOperation{nullptr};
  Location l = unwrap(loc);
  // Every value must be there (lse may be null) and live in loc's context:
  // the builder would dereference a null one.
  if (!checkValues(fn, l, {"q", "k", "v", "o", "lse"}, {q, k, v, o, lse},
                   {false, false, false, false, true}))
    return MlirOperation{nullptr};
  FirstError firstError(l.getContext());
  OpBuilder b(l.getContext());
  SmallVector<Value> outs{unwrap(o)};
  if (!mlirValueIsNull(lse))
    outs.push_back(unwrap(lse));
  AttentionAttrs a = attrsOf(b, options);
  auto op = FlashAttentionOp::create(b, l, resultTypesOf(unwrap(q), outs),
                                     unwrap(q), unwrap(k), unwrap(v),
                                     ValueRange{}, outs, a.scale, a.causal,
                                     a.window, a.softcap);
  return verified(fn, op, firstError);
}

MlirOperation fa3FlashAttentionGradCreate(MlirLocation loc, MlirValue q,
                                          MlirValue k, MlirValue v,
                                          MlirValue o, MlirValue dO,
                                          MlirValue lse, MlirValue dq,
                                          MlirValue dk, MlirValue dv,
                                          Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  clearLastError();
  if (!haveLocation(fn, loc))
    return MlirOperation{nullptr};
  Location l = unwrap(loc);
  if (!checkValues(fn, l, {"q", "k", "v", "o", "dO", "lse", "dq", "dk", "dv"},
                   {q, k, v, o, dO, lse, dq, dk, dv}))
    return MlirOperation{nullptr};
  FirstError firstError(l.getContext());
  OpBuilder b(l.getContext());
  SmallVector<Value> outs{unwrap(dq), unwrap(dk), unwrap(dv)};
  AttentionAttrs a = attrsOf(b, options);
  auto op = FlashAttentionGradOp::create(
      b, l, resultTypesOf(unwrap(q), outs), unwrap(q), unwrap(k), unwrap(v),
      unwrap(o), unwrap(dO), unwrap(lse), outs, a.scale, a.causal, a.window,
      a.softcap);
  return verified(fn, op, firstError);
}

MlirOperation fa3FlashAttentionVarlenCreate(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v,
    MlirValue cuSeqlensQ, MlirValue cuSeqlensK, MlirValue sequsedK,
    MlirValue o, MlirValue lse, Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  clearLastError();
  if (!haveLocation(fn, loc))
    return MlirOperation{nullptr};
  Location l = unwrap(loc);
  // sequsedK and lse may be null; everything else must be there.
  if (!checkValues(fn, l,
                   {"q", "k", "v", "cuSeqlensQ", "cuSeqlensK", "sequsedK", "o",
                    "lse"},
                   {q, k, v, cuSeqlensQ, cuSeqlensK, sequsedK, o, lse},
                   {false, false, false, false, false, true, false, true}))
    return MlirOperation{nullptr};
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
  clearLastError();
  if (mlirOperationIsNull(op)) {
    misuse(__func__, "the operation is null");
    return false;
  }
  return isa<FlashAttentionVarlenOp>(unwrap(op));
}

bool fa3OperationIsAFlashAttention(MlirOperation op) {
  clearLastError();
  if (mlirOperationIsNull(op)) {
    misuse(__func__, "the operation is null");
    return false;
  }
  return isa<FlashAttentionOp>(unwrap(op));
}

bool fa3OperationIsAFlashAttentionGrad(MlirOperation op) {
  clearLastError();
  if (mlirOperationIsNull(op)) {
    misuse(__func__, "the operation is null");
    return false;
  }
  return isa<FlashAttentionGradOp>(unwrap(op));
}
