/*===- fa3-c/Compile.h - one-call compilation to Hopper kernels ---*- C -*-===*\
|*                                                                            *|
|* What an ML compiler calls to turn attention into an sm_90a kernel: PTX,  *|
|* cubin and the launch facts the runtime (runtime/include/fa3rt.h) needs.  *|
|* Errors are reported as diagnostics of the context (attach a handler or a *|
|* Fa3DiagnosticLog) and the call returns NULL; the first one is also the   *|
|* last error (fa3-c/Support.h).                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef FA3_C_COMPILE_H
#define FA3_C_COMPILE_H

#include "fa3-c/Support.h"
#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compilation options; start from fa3HopperOptionsDefault(). */
typedef struct Fa3HopperOptions {
  int64_t blockN;       /* 0: per head dim (128 up to 128; at 192, 112
                           full and 96 causal, 128 with Dv 128; 64 at 256;
                           the decoding kernel of 64 rows: 64 up to 128;
                           FP8 128, or FA3's wider 160 .. 224: see
                           fa3-compile --help) */
  int64_t stages;       /* depth of the K/V ring; 0: per head dim (4 for
                           64 with 128-row tiles, else 2; FP8 3 at 64,
                           else 2) */
  bool pingpong;        /* consumer warpgroups take turns (true) */
  int persistent;       /* CTAs loop over tiles: 1 on, -1 off, 0 auto (on
                           where measured faster: head dim up to 128) */
  bool tmaStore;        /* O through shared memory + TMA store (true; a
                           persistent varlen kernel copies it out by its
                           threads); false: 4-byte stores from registers. The
                           backward: dQ added by bulk reductions (true) or
                           the consumers' atomics */
  const char *chip;     /* "sm_90a" */
  const char *features; /* "+ptx81" (8.1 or later) */
  const char *toolkit;  /* CUDA toolkit with bin/ptxas; NULL: $CUDA_HOME,
                           $CUDA_PATH, else /usr/local/cuda */
  bool emitCubin;       /* false: PTX and facts only (no ptxas needed) */
  int64_t qBuffers;     /* Q tiles in shared memory; 0: 2 for persistent
                           CTAs where they fit (head dim up to 128; not
                           the packed 192-row causal kernel of minSeqlenQ,
                           where two spill), else 1 */
  int lazyRescale;      /* O *= alpha only in warpgroups where a row
                           raised its running max: 1 on, -1 off (after
                           every kv block), 0 auto (on where measured
                           faster: head dim above 64) */
  double rescaleThreshold; /* with lazy rescaling, a row's max is raised
                           only when a kv block exceeds it by more than
                           this (log2 units, 0 to 15; 8); 0: exact, O
                           rescaled after every kv block */
  int kvMulticast;      /* 2-CTA clusters sharing each K/V tile by TMA
                           multicast: 1 on (wherever it applies: full
                           mask, head dim 96, 128 and 256), -1 off, 0 auto
                           (persistent kernels with a full mask: head
                           dim 96 and 128) */
  int64_t blockM;       /* rows of Q per tile: 128 (two consumer
                           warpgroups, ping-pong) or 192 (three); with
                           decode also 64 (one); 0: per head dim (192 for
                           64 with a full mask, and for 64 causal from
                           minSeqlenQ 6144; else 128; 64 with decode) */
  int64_t ptxasTimeoutSeconds; /* ptxas is stopped after this long (1 to
                           86400); 0: 600 */
  int64_t minSeqlenQ;   /* configure the forward for calls with at least
                           this many query rows (0 to 2^31-1; 0: any
                           length): where the table has an entry for long
                           sequences (head dim 64 causal: 192 rows from
                           6144; FP8 head dim 128 full or causal: 192
                           keys from 8192) and this reaches it, that
                           entry applies,
                           and the facts say `min_seqlen_q`. Appended in
                           this position: callers built against an older
                           header must be rebuilt */
  int64_t transposeWarps; /* FP8: V's transposer warps, 3 (warps 1 .. 3
                           of the producer warpgroup) or 4 (warp 0 too,
                           one fill behind its loads, as FlashAttention-3;
                           persistent kernels, and decoding kernels, whose
                           four warps also copy small pages); 0: the
                           table's (4 at head dim 256 and for decoding,
                           else 3). Appended likewise */
} Fa3HopperOptions;

MLIR_CAPI_EXPORTED Fa3HopperOptions fa3HopperOptionsDefault(void);

/* One attention variant. Batch, sequence lengths and head counts are
 * launch-time arguments of the kernel; only these fix the code.
 * fa3CompileHopperSpec checks every field first and refuses, naming the
 * field and its range, what the kernel cannot take. */
typedef struct Fa3AttentionSpec {
  const char *name;    /* kernel base name: a C identifier of 1 to 200
                          characters; NULL:
                          fa3_<fwd|bwd>_d<D>[v<Dv>]_<dtype>[_causal]
                          [_w<L>_<R>][_softcap][_varlen][_paged][_decode]
                          [_det],
                          an unbounded window side written "inf", v<Dv>
                          where Dv differs from D */
  const char *dtype;   /* "bf16" or "f16" (q, k, v and o), or "e4m3" (FP8:
                          q, k, v float8_e4m3fn with descales at launch, o
                          bf16; head dim 64, 128 or 256, a fixed-length
                          forward, or with decode 64 or 128: an FP8 KV
                          cache); NULL: bf16 */
  int64_t headDim;     /* of q and k: 64, 96, 128, 192 or 256 */
  bool causal;         /* needs windowRight 0 or -1 */
  int64_t windowLeft;  /* -1 = unbounded, else 0 to 2^31-1 */
  int64_t windowRight; /* -1 = unbounded, else 0 to 2^31-1 */
  float softcap;       /* 0 = off, else 1e-6 to 1e30 */
  bool hasScale;       /* false: 1/sqrt(headDim) is the facts' default */
  float scale;         /* with hasScale: > 0 and at most 1e30 */
  int64_t headDimV;    /* of v and o: 0 = headDim; 128 with headDim 192
                          (DeepSeek's) is the other pairing taken. Appended
                          in this position: callers built against an
                          older header must be rebuilt */
  bool varlen;         /* a packed variable-length batch (FlashAttention's
                          flash_attn_varlen_func: cu_seqlens_q/k and an
                          optional seqused_k at launch), name suffix
                          _varlen; no clusters whatever the options say.
                          Appended likewise */
  bool backward;       /* the backward kernel (dQ, dK, dV from dO; facts
                          `backward 1`, fa3rt_bwd), named fa3_bwd_...: head
                          dim 64, 128 or 256 with Dv = D, any mask and softcap,
                          no varlen. Appended likewise */
  bool decode;         /* the decoding kernel (FlashAttention's
                          flash_attn_with_kvcache): split-KV (facts
                          `split_kv 1`: the kv blocks of a tile split over
                          numSplits CTAs, merged by <kernel>_combine) and
                          GQA packing (facts `pack_gqa 1`: the q heads of a
                          kv head share one tile), one CTA per tile, O
                          stored directly; name suffix _decode; no varlen
                          or backward. Appended likewise */
  bool deterministic;  /* with backward: dq bitwise the same from run to
                          run (FlashAttention's deterministic=True: each
                          64-query tile's sums added in the order of the
                          kv blocks; facts `deterministic 1`, a larger
                          dq_accum workspace), name suffix _det; needs the
                          bulk dQ path (tmaStore). Appended likewise */
  bool pagedKv;        /* with varlen: k and v also through a launch-time
                          page table (a paged KV cache, FlashAttention's
                          flash_attn_with_kvcache with cu_seqlens_q and
                          page_table; facts `paged_kv 1`: the table's pages
                          in order are the packed rows of k and v), one CTA
                          per tile; name suffix _paged. Appended likewise */
} Fa3AttentionSpec;

MLIR_CAPI_EXPORTED Fa3AttentionSpec fa3AttentionSpecDefault(void);

/* The kernel base name of `spec` (its name, or the derived one; the spec is
 * not checked) into `buf` (NUL-terminated, truncated to `size`; buf NULL or
 * size 0: nothing written); returns the full length. A NULL spec: 0 (and ""
 * in buf), last error. */
MLIR_CAPI_EXPORTED size_t fa3AttentionSpecName(const Fa3AttentionSpec *spec,
                                               char *buf, size_t size);

/* The path of the ptxas a cubin would be assembled with (`toolkit` NULL:
 * $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, else PATH) into `buf`
 * (NUL-terminated, truncated to `size`); returns the full length, 0 when
 * there is none. */
MLIR_CAPI_EXPORTED size_t fa3FindPtxas(const char *toolkit, char *buf, size_t size);

/* The compiled kernels of a module. */
typedef struct Fa3KernelSet Fa3KernelSet;

typedef struct Fa3KernelBinary {
  const char *name;   /* kernel (gpu.func) name */
  const char *ptx;    /* PTX text, NUL-terminated */
  size_t ptxSize;
  const void *cubin;  /* sm_90a ELF (empty without emitCubin) */
  size_t cubinSize;
  const char *facts;  /* launch facts, "key value" lines (docs/runtime.md) */
} Fa3KernelBinary;

/* Compiles every attn.flash_attention of `module` (tensor or memref form;
 * the module is consumed: it holds gpu.binary ops afterwards). The module is
 * verified first. NULL options: fa3HopperOptionsDefault(). A null module,
 * or any error: NULL. */
MLIR_CAPI_EXPORTED Fa3KernelSet *
fa3CompileHopperModule(MlirModule module, const Fa3HopperOptions *options);

/* Checks `spec` (NULL: fa3AttentionSpecDefault()), builds its IR in `ctx`
 * (no IR text: the name cannot inject IR) and compiles it. Where the table
 * configures the variant differently for long sequences and the options
 * leave blockM, blockN, stages, qBuffers and minSeqlenQ at 0, the set
 * holds that kernel too:
 * <name>_long_kernel, its facts `min_seqlen_q N`, for calls with Sq >= N
 * (both compute the variant at any length). A null context: NULL (last
 * error only). */
MLIR_CAPI_EXPORTED Fa3KernelSet *
fa3CompileHopperSpec(MlirContext ctx, const Fa3AttentionSpec *spec,
                     const Fa3HopperOptions *options);

/* The pointers of a Fa3KernelBinary live as long as its set. A NULL or
 * destroyed set: Size 0 (a set is never empty), Get a zeroed binary,
 * Destroy nothing (Destroy(NULL) is a no-op); an index past the end: a
 * zeroed binary. Each sets the last error. */
MLIR_CAPI_EXPORTED size_t fa3KernelSetSize(const Fa3KernelSet *set);
MLIR_CAPI_EXPORTED Fa3KernelBinary fa3KernelSetGet(const Fa3KernelSet *set,
                                                   size_t index);
MLIR_CAPI_EXPORTED void fa3KernelSetDestroy(Fa3KernelSet *set);

#ifdef __cplusplus
}
#endif

#endif /* FA3_C_COMPILE_H */
