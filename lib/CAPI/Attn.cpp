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
  const char *names[] = {"q", "k", "v", "o", "lse"};
  const MlirValue values[] = {q, k, v, o, lse};
  for (int i = 0; i < 5; ++i) {
    if (mlirValueIsNull(values[i])) {
      if (i == 4)
        continue;
      misuseAt(fn, l, llvm::Twine(names[i]) + " is a null MlirValue");
      return MlirOperation{nullptr};
    }
    if (unwrap(values[i]).getContext() != ctx) {
      misuseAt(fn, l,
               llvm::Twine(names[i]) + " belongs to another context than loc");
      return MlirOperation{nullptr};
    }
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
  auto op = FlashAttentionOp::create(
      b, l, resultTypes, unwrap(q), unwrap(k), unwrap(v), outs, scale, causal,
      b.getDenseI64ArrayAttr({options.windowLeft, options.windowRight}),
      b.getF32FloatAttr(options.softcap));
  // Values of the wrong types or bad options: the verifier says why, and
  // the caller gets no op rather than an invalid one.
  if (failed(verify(op))) {
    op->erase();
    firstError.failed(fn);
    return MlirOperation{nullptr};
  }
  return wrap(op.getOperation());
}

bool fa3OperationIsAFlashAttention(MlirOperation op) {
  clearLastError();
  if (mlirOperationIsNull(op)) {
    misuse(__func__, "the operation is null");
    return false;
  }
  return isa<FlashAttentionOp>(unwrap(op));
}
