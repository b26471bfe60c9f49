//===- CacheAppendKernel.h - new keys and values into a KV cache -*- C++ -*-===//
//
// The decoding kernel's <kernel>_append (FlashAttention's
// flash_attn_with_kvcache(k=, v=)): k_new and v_new [B, Snew, Hkv, D / Dv]
// copied into the cache at rows cache_seqlens[b] .. + Snew - 1 of each
// batch, contiguous or through the page table, and the lengths after the
// append written for the attention that follows (fa3rt_abi.def:
// FA3RT_FWD_APPEND_PARAM, FA3RT_FWD_APPEND_THREADS).
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_CACHEAPPENDKERNEL_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_CACHEAPPENDKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <string>

namespace fa3::hopper {

/// Builds `name` at the end of `module` for head dims `headDim` (k) and
/// `headDimV` (v) of elements of `elemBytes` bytes (2: bf16 / f16, 1:
/// e4m3), whole 16-byte copies a row.
void buildCacheAppendKernel(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::gpu::GPUModuleOp module,
                            const std::string &name, int64_t headDim,
                            int64_t headDimV, int64_t elemBytes);

} // namespace fa3::hopper

#endif
