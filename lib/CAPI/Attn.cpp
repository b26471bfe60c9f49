//===- Attn.cpp - C API of the attn dialect -------------------------------===//

#include "fa3-c/Attn.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace fa3::attn;

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
  Location l = unwrap(loc);
  OpBuilder b(l.getContext());
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
  return wrap(op.getOperation());
}

bool fa3OperationIsAFlashAttention(MlirOperation op) {
  return isa<FlashAttentionOp>(unwrap(op));
}
