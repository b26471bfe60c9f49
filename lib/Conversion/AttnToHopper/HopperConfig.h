//===- HopperConfig.h - the Hopper kernel's configuration -------*- C++ -*-===//
//
// What attn-hopper-config, which chooses an attention's configuration, and
// convert-attn-to-hopper, which reads it back, share: the operand checks,
// the facts of an attention that shape its kernel, and the mapping between
// #attn.hopper_config and the kernel builder's KernelConfig.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_HOPPERCONFIG_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_HOPPERCONFIG_H

#include "GradKernelBuilder.h"
#include "KernelBuilder.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace fa3::hopper {
using mlir::FailureOr;

/// Why the kernel cannot take these memref operands ("" if it can): q, k,
/// v and o of one element type, bf16 or f16; a contiguous head dim
/// everywhere (TMA). The head dims themselves: checkSupported.
std::string checkOperands(mlir::Value q, mlir::Value k, mlir::Value v,
                          mlir::Value o);

/// A configuration holding only the facts of the attention that shape the
/// kernel: element type and head dim (of `q`, which checkOperands
/// accepted), value head dim (of `v`) and the mask's bounds (-1: unbounded).
KernelConfig attentionFacts(mlir::MemRefType q, mlir::MemRefType v,
                            int64_t windowLeft, int64_t windowRight);

/// The backward's table: block sizes, stages, dQ's path and the consumers'
/// register choices per head dim and mask (`masked`: a causal or window
/// bound), for softcap and for the deterministic kernel, before the
/// options; `dqBulk` false (attn-hopper-config tma-store=false): dQ by the
/// consumers' atomics, and the table's choices for them.
GradKernelConfig gradTable(int64_t headDim, bool masked, bool deterministic,
                           bool softcap, bool dqBulk = true);

/// The backward's choices that follow from its step size, staging and
/// mask once the options are applied (the table's measurements name the
/// forms they were taken with): the causal L2 sections, the order of dV,
/// the dQ staging buffers.
void gradStepForms(GradKernelConfig &cfg, llvm::ArrayRef<int64_t> window);

/// The backward's kernel configuration for memrefs q, k, v, dO, dK, dV
/// (attn.flash_attention_grad's, or its tiled form's) under the mask
/// `window` with `softcap`, dQ's sums `deterministic` or not, `config`
/// recorded (null: the backward's table), or why the Hopper backward
/// cannot take them.
FailureOr<GradKernelConfig> gradConfig(mlir::Value q, mlir::Value k,
                                       mlir::Value v, mlir::Value dO,
                                       mlir::Value dk, mlir::Value dv,
                                       llvm::ArrayRef<int64_t> window,
                                       double softcap, bool deterministic,
                                       attn::HopperConfigAttr config,
                                       std::string &why);

/// The backward's configuration as the attribute that records it.
attn::HopperConfigAttr recordGradConfig(mlir::MLIRContext *ctx,
                                        const GradKernelConfig &cfg);

/// `config`'s choices, written into `cfg`.
void applyConfig(attn::HopperConfigAttr config, KernelConfig &cfg);

/// The choices of `cfg` as the attribute that records them.
attn::HopperConfigAttr recordConfig(mlir::MLIRContext *ctx,
                                    const KernelConfig &cfg);

} // namespace fa3::hopper

#endif
