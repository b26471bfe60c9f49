//===- GradAuxKernels.h - the backward's element-wise kernels ---*- C++ -*-===//
//
// attn.grad_preprocess and attn.grad_postprocess of the backward's tiled
// form, as two kernels beside the main one in its gpu.module:
//
//   <kernel>_pre    delta = rowsum(dO o) in f32, dQaccum zeroed;
//   <kernel>_post   dQ = scale dQaccum, rounded once to q's dtype.
//
// In _pre a row is one (batch, query, q head): D * 2 / 16 threads take its
// 16-bit elements 16 bytes each; _post converts a 64 x 64 block of dQ at a
// time through shared memory. Both step with the grid's stride, so any
// grid is correct (fa3rt_abi.def: FA3RT_BWD_PRE_PARAM,
// FA3RT_BWD_POST_PARAM).
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_GRADAUXKERNELS_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_GRADAUXKERNELS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <string>

namespace fa3::hopper {

/// Builds <kernel>_pre and <kernel>_post at the end of `module` for
/// `dtype` ("bf16" or "f16") and head dim `headDim` (D = Dv): D / 8 lanes a
/// row must be a power of two (the butterflies stay inside a row, whole
/// rows fill a block): D = 64, 128 or 256. `deterministic`: _pre zeroes
/// the turn counters after dQaccum's tiles too (fa3rt_abi.def).
void buildGradAuxKernels(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::gpu::GPUModuleOp module,
                         const std::string &kernel, const std::string &dtype,
                         int64_t headDim, bool deterministic);

} // namespace fa3::hopper

#endif
