//===- HopperDialect.h - the hopper dialect ---------------------*- C++ -*-===//
#ifndef FA3_DIALECT_HOPPER_IR_HOPPERDIALECT_H
#define FA3_DIALECT_HOPPER_IR_HOPPERDIALECT_H

#include "fa3/Dialect/Hopper/IR/HopperLimits.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include "fa3/Dialect/Hopper/IR/HopperOpsDialect.h.inc"
#include "fa3/Dialect/Hopper/IR/HopperOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOpsAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOps.h.inc"

namespace fa3::hopper {
/// The hardware id (1 to 15) of consumer warpgroup `consumer`'s named
/// barrier of `kind` when the CTA has `consumers` consumer warpgroups: the
/// one assignment of ids (HopperOps.td, named barriers).
int64_t namedBarrierBase(BarrierKind kind, int64_t consumers);

/// Refuses a constant consumer index that names none of the `consumers`
/// consumer warpgroups (its barrier id would be another's, or past the 16
/// the hardware has); a dynamic index is left to the kernel.
mlir::LogicalResult verifyConsumerIndex(mlir::Operation *op,
                                        mlir::Value consumer,
                                        int64_t consumers);

/// The region of the innermost hopper.warp_specialize that holds `op` (its
/// producer or its consumers region), or null outside every one.
mlir::Region *enclosingRole(mlir::Operation *op);

/// Whether `op` is a producer arrive on its ring slot: a load (whose commit
/// hopper-async-copy writes) or a hopper.ring.producer_commit.
bool arrivesOnSlot(mlir::Operation *op);

/// The nearest op before `op` for which `match` holds: in its block, then
/// before each enclosing op, up to the innermost hopper.warp_specialize;
/// null if none.
mlir::Operation *findBefore(mlir::Operation *op,
                            llvm::function_ref<bool(mlir::Operation *)> match);

/// Refuses every hopper.ring.fill under `root` that hopper-warp-specialize
/// has not moved into the producer (`why`: what the calling pass would do
/// wrong with it); success when there is none.
mlir::LogicalResult refuseUnmovedFills(mlir::Operation *root,
                                       llvm::StringRef why);
} // namespace fa3::hopper

#endif
