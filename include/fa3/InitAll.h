//===- InitAll.h - register everything fa3 tools need -----------*- C++ -*-===//
#ifndef FA3_INITALL_H
#define FA3_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace fa3 {
/// The attn dialect, its external models, and the upstream dialects,
/// extensions and LLVM-IR translations the pipelines use (gpu, nvgpu, nvvm,
/// scf, memref, bufferization, llvm, ...).
void registerAllDialects(mlir::DialectRegistry &registry);
/// Every upstream pass plus the attn passes and pipelines.
void registerAllPasses();
} // namespace fa3

#endif
