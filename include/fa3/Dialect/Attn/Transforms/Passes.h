//===- Passes.h - attn dialect passes ---------------------------*- C++ -*-===//
#ifndef FA3_DIALECT_ATTN_TRANSFORMS_PASSES_H
#define FA3_DIALECT_ATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace fa3::attn {
#define GEN_PASS_DECL
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"

} // namespace fa3::attn

#endif
