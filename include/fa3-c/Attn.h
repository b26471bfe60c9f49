/*===- fa3-c/Attn.h - C API of the attn dialect -------------------*- C -*-===*\
|*                                                                            *|
|* Registration of the attn dialect and builders for attn.flash_attention,  *|
|* its FP8, packed variable-length and backward forms, and attn.quantize,    *|
|* for ML compilers that embed FA3-MLIR through MLIR's C API.                 *|
\*===----------------------------------------------------------------------===*/
#ifndef FA3_C_ATTN_H
#define FA3_C_ATTN_H

#include "fa3-c/Support.h"
#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__attn__() */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Attn, attn);

/* Attributes of attn.flash_attention. Start from
 * fa3FlashAttentionOptionsDefault() and change what you need. */
typedef struct Fa3FlashAttentionOptions {
  bool hasScale;       /* false: scale = 1/sqrt(D) */
  float scale;
  bool causal;         /* bottom-right aligned when Sq != Skv */
  int64_t windowLeft;  /* -1 = unbounded */
  int64_t windowRight; /* -1 = unbounded */
  float softcap;       /* 0 = off */
} Fa3FlashAttentionOptions;

MLIR_CAPI_EXPORTED Fa3FlashAttentionOptions fa3FlashAttentionOptionsDefault(void);

/* Builds (does not insert) an attn.flash_attention op and verifies it. q, k,
 * v, o (and lse, or a null MlirValue) are all tensors or all memrefs of
 * loc's context; the tensor form gets one result per output. A null loc or
 * a null q, k, v or o, values of another context, or an op the verifier
 * refuses (wrong types, bad options): a null op, the reason as an error
 * diagnostic at loc and as the last error. */
MLIR_CAPI_EXPORTED MlirOperation fa3FlashAttentionCreate(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v, MlirValue o,
    MlirValue lse, Fa3FlashAttentionOptions options);

/* Whether `op` is an attn.flash_attention (a null op: false, last error). */
MLIR_CAPI_EXPORTED bool fa3OperationIsAFlashAttention(MlirOperation op);

/* Builds (does not insert) the backward, attn.flash_attention_grad, with the
 * forward's options, and verifies it: from q, k, v, the forward's o and lse
 * and dO (the loss's gradient with respect to o) into dq, dk and dv. All
 * tensors or all memrefs of loc's context; the tensor form gets three
 * results. A null loc or value, values of another context, or an op the
 * verifier refuses: a null op, the reason as an error diagnostic at loc
 * and as the last error. Its `deterministic` unit attribute (dq bitwise
 * the same from run to run) is not a forward option: set it on the op with
 * mlirOperationSetInherentAttributeByName(op, "deterministic", unit). */
MLIR_CAPI_EXPORTED MlirOperation fa3FlashAttentionGradCreate(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v, MlirValue o,
    MlirValue dO, MlirValue lse, MlirValue dq, MlirValue dk, MlirValue dv,
    Fa3FlashAttentionOptions options);

/* Whether `op` is an attn.flash_attention_grad (a null op: false, last
 * error). */
MLIR_CAPI_EXPORTED bool fa3OperationIsAFlashAttentionGrad(MlirOperation op);

/* Builds (does not insert) attn.flash_attention_varlen, the packed
 * variable-length form: q [Tq, Hq, D], k/v [Tk, Hkv, D/Dv], i32 cuSeqlensQ /
 * cuSeqlensK [B + 1], sequsedK [B] (or a null MlirValue), o [Tq, Hq, Dv] and
 * lse [Hq, Tq] (or a null MlirValue); all tensors or all memrefs of loc's
 * context, verified as fa3FlashAttentionCreate's op. */
MLIR_CAPI_EXPORTED MlirOperation fa3FlashAttentionVarlenCreate(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v,
    MlirValue cuSeqlensQ, MlirValue cuSeqlensK, MlirValue sequsedK,
    MlirValue o, MlirValue lse, Fa3FlashAttentionOptions options);

/* Whether `op` is an attn.flash_attention_varlen (a null op: false, last
 * error). */
MLIR_CAPI_EXPORTED bool fa3OperationIsAFlashAttentionVarlen(MlirOperation op);

/* Builds (does not insert) attn.flash_attention on FP8 (f8E4M3FN) q, k, v
 * with FlashAttention-3's descale factors: qDescale, kDescale, vDescale f32
 * (all three given), each rank 0 or per (batch, head) ([B, Hq] or [B, Hkv]
 * for q, [B, Hkv] for k and v) or, for q and k, per 128 rows ([B, H,
 * ceil(S / 128)]); s = scale qd kd q.k, o = vd P V. Otherwise as
 * fa3FlashAttentionCreate (the same refusals). */
MLIR_CAPI_EXPORTED MlirOperation fa3FlashAttentionFp8Create(
    MlirLocation loc, MlirValue q, MlirValue k, MlirValue v, MlirValue qDescale,
    MlirValue kDescale, MlirValue vDescale, MlirValue o, MlirValue lse,
    Fa3FlashAttentionOptions options);

/* Builds (does not insert) attn.quantize and verifies it: x [B, H, S, D]
 * (f16, bf16 or f32) to y (f8E4M3FN, x's shape) with f32 descales, one per
 * `block` rows of a head ([B, H, ceil(S / block)]) or, with block 0, one per
 * head ([B, H]); with `signs` (f32 [D], or a null MlirValue) x is first
 * rotated by H_D diag(signs) / sqrt(D). All tensors or all memrefs of loc's
 * context; the tensor form gets two results. Refused as the other
 * builders' (a null op, the reason at loc and as the last error); block
 * below 0 or above 2^31 - 1 by name. */
MLIR_CAPI_EXPORTED MlirOperation fa3QuantizeCreate(MlirLocation loc, MlirValue x,
                                                   MlirValue signs, MlirValue y,
                                                   MlirValue descale, int64_t block);

/* Whether `op` is an attn.quantize (a null op: false, last error). */
MLIR_CAPI_EXPORTED bool fa3OperationIsAQuantize(MlirOperation op);

#ifdef __cplusplus
}
#endif

#endif /* FA3_C_ATTN_H */
