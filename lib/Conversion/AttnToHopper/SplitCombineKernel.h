//===- SplitCombineKernel.h - split-KV's merge of partial outputs -*- C++ -*-===//
//
// The decoding kernel (split-KV, flash-decoding) writes, per split, O / l
// of its kv blocks in f32 and their LSE; <kernel>_combine, beside it in its
// gpu.module, merges the splits of each row (b, h, s):
//
//   m   = max_i lse_i,  w_i = exp(lse_i - m),  W = sum_i w_i
//   o   = sum_i (w_i / W) o_i   (rounded once to the kernel's dtype)
//   lse = m + log W             (-inf, and o = 0, when no split saw a key)
//
// Thread i of the grid takes 4 consecutive columns of one row (Dv / 4
// threads a row), blocks striding over the rows (fa3rt_abi.def:
// FA3RT_FWD_COMBINE_PARAM, FA3RT_FWD_COMBINE_THREADS).
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_SPLITCOMBINEKERNEL_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_SPLITCOMBINEKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <string>

namespace fa3::hopper {

/// Builds `name` at the end of `module` for o of `dtype` ("bf16" or "f16")
/// and value head dim `headDimV` (a multiple of 4).
void buildSplitCombineKernel(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::gpu::GPUModuleOp module,
                             const std::string &name, const std::string &dtype,
                             int64_t headDimV);

} // namespace fa3::hopper

#endif
