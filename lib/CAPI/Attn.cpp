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

/// Every value of `values` there (null allowed where `optional` names it)
/// and of loc's context; else the misuse is reported and false returned.
static bool checkValues(const char *fn, Location l,
                        ArrayRef<const char *> names,
                        ArrayRef<MlirValue> values, int optional = -1) {
  for (auto [i, name, val] : llvm::enumerate(names, values)) {
    if (mlirValueIsNull(val)) {
      if (static_cast<int>(i) == optional)
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

MlirOperation fa3FlashAttentionCreate(MlirLocation loc, MlirValue q,
                                      MlirValue k, MlirValue v, MlirValue o,
                                      MlirValue lse,
                                      Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  clearLastError();
  if (mlirLocationIsNull(loc)) {
    misuse(fn, "the location is null");
    return MlirOperation{nullptr};
  }
  Location l = unwrap(loc);
  MLIRContext *ctx = l.getContext();
  // Every value must be there (lse may be null) and live in loc's context:
  // the builder would dereference a null one.
  if (!checkValues(fn, l, {"q", "k", "v", "o", "lse"}, {q, k, v, o, lse},
                   /*optional=*/4))
    return MlirOperation{nullptr};
  FirstError firstError(ctx);
  OpBuilder b(ctx);
  SmallVector<Value> outs{unwrap(o)};
  if (!mlirValueIsNull(lse))
    outs.push_back(unwrap(lse));
  SmallVector<Type> resultTypes;
  if (isa<RankedTensorType>(unwrap(q).getType()))
    for (Value out : outs)
      resultTypes.push_back(out.getType());
  FloatAttr scale =
      options.hasScale ? b.getF32FloatAttr(options.scale) : FloatAttr();
  UnitAttr causal = options.causal ? b.getUnitAttr() : UnitAttr();
  auto op = FlashAttentionOp::create(
      b, l, resultTypes, unwrap(q), unwrap(k), unwrap(v), outs, scale, causal,
      b.getDenseI64ArrayAttr({options.windowLeft, options.windowRight}),
      b.getF32FloatAttr(options.softcap));
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
  if (mlirLocationIsNull(loc)) {
    misuse(fn, "the location is null");
    return MlirOperation{nullptr};
  }
  Location l = unwrap(loc);
  MLIRContext *ctx = l.getContext();
  if (!checkValues(fn, l, {"q", "k", "v", "o", "dO", "lse", "dq", "dk", "dv"},
                   {q, k, v, o, dO, lse, dq, dk, dv}))
    return MlirOperation{nullptr};
  FirstError firstError(ctx);
  OpBuilder b(ctx);
  SmallVector<Value> outs{unwrap(dq), unwrap(dk), unwrap(dv)};
  SmallVector<Type> resultTypes;
  if (isa<RankedTensorType>(unwrap(q).getType()))
    for (Value out : outs)
      resultTypes.push_back(out.getType());
  FloatAttr scale =
      options.hasScale ? b.getF32FloatAttr(options.scale) : FloatAttr();
  UnitAttr causal = options.causal ? b.getUnitAttr() : UnitAttr();
  auto op = FlashAttentionGradOp::create(
      b, l, resultTypes, unwrap(q), unwrap(k), unwrap(v), unwrap(o),
      unwrap(dO), unwrap(lse), outs, scale, causal,
      b.getDenseI64ArrayAttr({options.windowLeft, options.windowRight}),
      b.getF32FloatAttr(options.softcap));
  return verified(fn, op, firstError);
}

MlirOperation fa3FlashAttentionVarlenCreate(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v,
    MlirValue cuSeqlensQ, MlirValue cuSeqlensK, MlirValue sequsedK,
    MlirValue o, MlirValue lse, Fa3FlashAttentionOptions options) {
  const char *fn = __func__;
  clearLastError();
  if (mlirLocationIsNull(loc)) {
    misuse(fn, "the location is null");
    return MlirOperation{nullptr};
  }
  Location l = unwrap(loc);
  MLIRContext *ctx = l.getContext();
  const char *names[] = {"q",         "k", "v",  "cuSeqlensQ", "cuSeqlensK",
                         "sequsedK",  "o", "lse"};
  const MlirValue values[] = {q, k, v, cuSeqlensQ, cuSeqlensK, sequsedK, o,
                              lse};
  const bool optional[] = {false, false, false, false,
                           false, true,  false, true};
  for (int i = 0; i < 8; ++i) {
    // sequsedK and lse may be null; everything else must be there.
    if (optional[i] && mlirValueIsNull(values[i]))
      continue;
    if (!checkValues(fn, l, {names[i]}, {values[i]}))
      return MlirOperation{nullptr};
  }
  FirstError firstError(ctx);
  OpBuilder b(ctx);
  SmallVector<Value> outs{unwrap(o)};
  if (!mlirValueIsNull(lse))
    outs.push_back(unwrap(lse));
  SmallVector<Type> resultTypes;
  if (isa<RankedTensorType>(unwrap(q).getType()))
    for (Value out : outs)
      resultTypes.push_back(out.getType());
  FloatAttr scale =
      options.hasScale ? b.getF32FloatAttr(options.scale) : FloatAttr();
  UnitAttr causal = options.causal ? b.getUnitAttr() : UnitAttr();
  Value used = mlirValueIsNull(sequsedK) ? Value() : unwrap(sequsedK);
  auto op = FlashAttentionVarlenOp::create(
      b, l, resultTypes, unwrap(q), unwrap(k), unwrap(v), unwrap(cuSeqlensQ),
      unwrap(cuSeqlensK), used, outs, scale, causal,
      b.getDenseI64ArrayAttr({options.windowLeft, options.windowRight}),
      b.getF32FloatAttr(options.softcap));
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
