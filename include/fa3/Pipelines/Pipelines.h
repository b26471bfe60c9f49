//===- Pipelines.h - the named pass pipelines -------------------*- C++ -*-===//
//
// The pipelines users run (fa3-opt flags, the C API): each is built from the
// passes' own option structs, so no option value is ever pasted into
// pipeline text. Invalid values and a pass manager anchored on the wrong op
// become a diagnostic when the pipeline runs, never an abort.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_PIPELINES_PIPELINES_H
#define FA3_PIPELINES_PIPELINES_H

#include "fa3/Conversion/Passes.h"
#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace fa3 {
/// What gpu-module-to-binary embeds at the end of the Hopper pipeline.
enum class BinaryFormat { Isa, Bin, Fatbin, None };

/// attn-hopper-pipeline: bufferize, attn-hopper-config, attn-tile,
/// convert-attn-to-hopper, NVVM lowering, gpu-module-to-binary.
struct HopperPipelineOptions {
  AttnHopperConfigOptions config;    // tiles, stages, persistence, ...
  std::string chip = "sm_90a";       // wgmma and setmaxnreg need sm_90a
  std::string features = "+ptx81";   // PTX ISA version (8.1 or later)
  std::string toolkit;               // CUDA toolkit for ptxas ("": default)
  BinaryFormat format = BinaryFormat::Bin;
};

/// Appends the Hopper pipeline to `pm` (anchored on builtin.module).
void addHopperPipeline(mlir::OpPassManager &pm, const HopperPipelineOptions &o);
/// Appends gpu-module-to-binary with the CUDA toolkit to take ptxas from.
void addHopperBinaryStep(mlir::OpPassManager &pm, BinaryFormat format,
                         llvm::StringRef toolkit = "");
/// Appends the CPU pipelines: the reference lowering, or the tiled one.
void addCpuReferencePipeline(mlir::OpPassManager &pm);
void addCpuTiledPipeline(mlir::OpPassManager &pm,
                         const attn::AttnTileOptions &tile,
                         bool countBlocks = false);

/// Why `chip`/`features` cannot build our kernels ("" if they can).
std::string checkTarget(llvm::StringRef chip, llvm::StringRef features);

/// Registers the named pipelines (attn-hopper-pipeline, ...) with fa3-opt's
/// pass registry.
void registerAttnPipelines();
} // namespace fa3

#endif
