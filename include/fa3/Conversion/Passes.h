//===- Passes.h - conversions out of the attn dialect -----------*- C++ -*-===//
#ifndef FA3_CONVERSION_PASSES_H
#define FA3_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace fa3 {
/// A compiler choice that defaults to what measured faster: the values of
/// the persistent, lazy-rescale and kv-multicast options.
enum class Toggle { Auto, On, Off };

#define GEN_PASS_DECL
#include "fa3/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa3/Conversion/Passes.h.inc"
} // namespace fa3

#endif
