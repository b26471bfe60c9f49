//===- Passes.h - hopper dialect passes -------------------------*- C++ -*-===//
#ifndef FA3_DIALECT_HOPPER_TRANSFORMS_PASSES_H
#define FA3_DIALECT_HOPPER_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace fa3::hopper {
/// The discardable attribute that asks hopper-pingpong to order a
/// hopper.warp_specialize's two consumers.
constexpr llvm::StringLiteral kPingPongAttr = "hopper.pingpong";
/// The discardable attribute that asks hopper-overlap to software-pipeline
/// a consumer's kv loop.
constexpr llvm::StringLiteral kOverlapAttr = "hopper.overlap";

#define GEN_PASS_DECL
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

#endif
