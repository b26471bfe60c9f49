//===- AttnDialect.h - the attn dialect -------------------------*- C++ -*-===//
#ifndef FA3_DIALECT_ATTN_IR_ATTNDIALECT_H
#define FA3_DIALECT_ATTN_IR_ATTNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fa3/Dialect/Attn/IR/AttnOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fa3/Dialect/Attn/IR/AttnOpsAttrs.h.inc"

#define GET_OP_CLASSES
#include "fa3/Dialect/Attn/IR/AttnOps.h.inc"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace fa3::attn {
/// The largest tile side: what attn-tile's options accept and what the tile
/// ops and #attn.hopper_config verify (the CPU lowering allocates
/// block_m x Dv state per grid cell).
constexpr int64_t kMaxBlock = 1024;

/// Registers the external models (bufferization) of the attn ops.
void registerBufferizableOpInterfaceExternalModels(mlir::DialectRegistry &registry);
} // namespace fa3::attn

#endif
