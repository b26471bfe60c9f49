/*===- fa3-c/Attn.h - C API of the attn dialect -------------------*- C -*-===*\
|*                                                                            *|
|* Registration of the attn dialect and builders for attn.flash_attention,  *|
|* its packed variable-length form and its backward,                         *|
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
 * and as the last error. */
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

#ifdef __cplusplus
}
#endif

#endif /* FA3_C_ATTN_H */
