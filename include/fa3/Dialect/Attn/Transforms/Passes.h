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

#include <string>

namespace fa3::attn {
#define GEN_PASS_DECL
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa3/Dialect/Attn/Transforms/Passes.h.inc"

/// Appends the Hopper pipeline (see attn-hopper-pipeline) to `pm`.
struct HopperPipelineConfig {
  int64_t blockM = 0;            // 0: per head dim (128)
  int64_t blockN = 0;            // 0: per head dim
  int64_t stages = 0;            // depth of the K/V ring (0: per head dim)
  bool pingpong = true;          // consumer warpgroups take turns
  std::string persistent = "auto"; // CTAs loop over tiles: auto | on | off
  bool tmaStore = true;          // O via shared memory + TMA store
  int64_t qBuffers = 0;          // Q tiles in shared memory (0: 2 where it fits)
  std::string lazyRescale = "auto"; // O *= alpha only where a max was raised
  double rescaleThreshold = 8.0; // ... by more than this (log2; 0: exact max)
  std::string kvMulticast = "auto"; // 2-CTA clusters sharing K/V: auto | on | off
  std::string format = "bin";    // isa | bin | fatbin | none
  std::string chip = "sm_90a";
  std::string features = "+ptx80";
  std::string toolkit;           // CUDA toolkit for ptxas ("" = default)
};
void addHopperPipeline(mlir::OpPassManager &pm, const HopperPipelineConfig &c);
/// The ptxas to assemble with: <toolkit>/bin/ptxas (toolkit "" = the default
/// of addHopperBinaryStep: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda), or the
/// one on PATH when there is no toolkit at all; "" if none.
std::string findPtxas(llvm::StringRef toolkit = "");
/// Appends gpu-module-to-binary with the CUDA toolkit to take ptxas from.
void addHopperBinaryStep(mlir::OpPassManager &pm, llvm::StringRef format,
                         llvm::StringRef toolkit = "");
/// Registers the named pipelines (attn-cpu-reference-pipeline, ...).
void registerAttnPipelines();
/// Registers every pass and pipeline of the project.
inline void registerAllFA3Passes() {
  registerAttnPasses();
  registerAttnPipelines();
}
} // namespace fa3::attn

#endif
