//===- QuantizeKernel.h - FP8 quantization with a Hadamard rotation -*- C++ -*-===//
//
// The FP8 kernels' <kernel>_quantize, the GPU form of attn.quantize: x
// (bf16 or f16; [B, S, H, D] storage by strides) rotated by H_D diag(signs) / sqrt(D) where
// signs is given, one amax per block of 128 rows (or per head, in two
// launches), scaled to e4m3's 448 and converted, in one pass over the data
// (fa3rt_abi.def: FA3RT_FP8_QUANTIZE_PARAM).
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_QUANTIZEKERNEL_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_QUANTIZEKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <string>

namespace fa3::hopper {

/// Builds `name` at the end of `module` for head dim `headDim` (64, 128 or
/// 256: a row over 2, 2 or 4 lanes, the Hadamard transform's butterflies
/// inside the lane but for one or two shuffle stages).
void buildQuantizeKernel(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::gpu::GPUModuleOp module,
                         const std::string &name, int64_t headDim);

} // namespace fa3::hopper

#endif
