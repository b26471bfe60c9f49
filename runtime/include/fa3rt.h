/* fa3rt: launcher for the FlashAttention kernels that FA3-MLIR compiles for
 * Hopper (sm_90a), forward (fa3rt_fwd) and backward (fa3rt_bwd). C11, CUDA
 * driver API only (no cudart, no MLIR).
 *
 * A kernel is a cubin plus its "launch facts" text file (<kernel>.facts), both
 * written by the compiler. Typical use:
 *
 *   fa3rt_kernel *k;
 *   if (fa3rt_kernel_load("fa3_fwd_d128_bf16.cubin", "fa3_fwd_d128_bf16.facts", &k))
 *     fprintf(stderr, "%s\n", fa3rt_last_error());
 *   fa3rt_fwd_args a = {0};
 *   a.dtype = FA3RT_BF16;
 *   a.q = (fa3rt_tensor){q_ptr, {B, Hq, Sq, D}, {Sq*Hq*D, D, Hq*D, 1}};  // BSHD storage
 *   ...
 *   a.softmax_scale = 0;            // 0 or NaN: the kernel's default scale
 *   if (fa3rt_fwd(k, &a, stream)) fprintf(stderr, "%s\n", fa3rt_last_error());
 *   fa3rt_kernel_destroy(k);
 *
 * Every function returns FA3RT_OK (0) or an error status and never aborts; the
 * message of the last error on the calling thread is fa3rt_last_error().
 *
 * The header does not include cuda.h: streams are passed as void* (a CUstream,
 * which is also what torch.cuda.Stream.cuda_stream holds) and device pointers as
 * uint64_t (a CUdeviceptr).
 */
#ifndef FA3RT_H
#define FA3RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0.5: fa3rt_bwd_args gains o and dq (before: the caller computed delta and
 * dq itself); fa3rt_bwd launches <kernel>_pre, the kernel, <kernel>_post
 * (backward cubins need those helpers); fa3rt_bwd_launch gains the helpers'
 * grid and the strides of o, dout and dq at its end.
 * 0.6: split-KV decoding (facts split_kv, pack_gqa; docs/runtime.md,
 * Split-KV decoding): the forward kernel takes numSplits, oAccum and
 * lseAccum last (fa3rt_abi.def); fa3rt_facts gains split_kv and pack_gqa,
 * fa3rt_fwd_args num_splits, o_accum, lse_accum and num_sms, and
 * fa3rt_fwd_launch num_splits, pack_group, the workspace's bytes and the
 * combine kernel's grid, each at its end; fa3rt_fwd launches
 * <kernel>_combine after a split kernel (split_kv cubins need it);
 * fa3rt_num_splits_heuristic; a split_kv kernel takes seqused_k (each
 * batch's valid keys of its cache: FlashAttention's cache_seqlens) and a
 * paged cache (FlashAttention's page_table): the kernel takes pageTable,
 * pageTableStride and pageSize last (fa3rt_abi.def), fa3rt_fwd_args gains
 * page_table, page_table_stride and paged_seqlen_k, fa3rt_fwd_launch
 * page_size and kv_box_rows, each at its end; a split_kv kernel also
 * appends new keys and values to its cache before the attention
 * (FlashAttention's flash_attn_with_kvcache(k=, v=); docs/runtime.md,
 * Appending to the cache): fa3rt_fwd_args gains k_new, v_new and
 * seqlens_out, fa3rt_fwd_launch snew, append_grid and append_block, each
 * at its end; fa3rt_fwd launches <kernel>_append (FA3RT_FWD_APPEND_PARAM,
 * split_kv cubins need it) before the kernel, which then reads seqlens_out
 * as its seqUsedK.
 * 0.7: FP8 forward kernels (facts `dtype e4m3`; docs/runtime.md, FP8):
 * fa3rt_dtype gains FA3RT_E4M3 (q, k, v float8_e4m3fn, o bf16); the
 * forward kernel takes qDescale, kDescale, vDescale and their eight i32
 * strides last (fa3rt_abi.def; facts `params` lists them: older facts and
 * cubins are refused); fa3rt_fwd_args gains o_dtype, q_descale,
 * k_descale, v_descale and their strides, each at its end.
 * 0.8: fa3rt_quantize (FP8 kernels' <kernel>_quantize: bf16/f16 to e4m3
 * with block or head descales, optionally Hadamard-rotated; e4m3 cubins
 * need it).
 * 0.9: deterministic backward kernels (facts `deterministic 1`):
 * fa3rt_facts gains deterministic at its end; their dq_accum holds a turn
 * counter per dQ tile after the tiles (fa3rt_bwd_launch.dq_accum_words).
 * 0.10: a decoding kernel's <kernel>_append takes Skv last and writes no
 * row at or past it; the attention kernels clamp seqUsedK to 0 .. the
 * keys. Decoding kernels' facts are version 3 (older runtimes refuse
 * them); this runtime refuses append kernels built before (their
 * parameters, cuFuncGetParamInfo).
 * 0.11: <kernel>_append takes numPages after pageSize (the pool's page
 * count: a row whose page-table entry is at or past it, or negative, is
 * not written). Decoding kernels' facts are version 4.
 * 0.12: fa3rt_facts gains min_seqlen_q at its end (facts `min_seqlen_q`:
 * the query length the compiler chose the kernel's configuration for; a
 * launcher's pick among kernels of one attention).
 * 0.13: fa3rt_fwd_args gains ctas_per_sm at its end (0: as many CTAs a SM
 * as fit; 1: one, the launch given FA3RT_WHOLE_SM_SMEM bytes of dynamic
 * shared memory).
 * 0.14: ctas_per_sm 0 is the runtime's choice (one a SM for long split-KV
 * runs, FA3RT_ONE_CTA_KEYS), 2 as many as fit.
 * 0.15: a left-padded cache (FlashAttention's cache_leftpad): the forward
 * kernel takes leftPadK last (fa3rt_abi.def; facts `params` lists it:
 * older facts and cubins are refused), fa3rt_fwd_args gains leftpad_k at
 * its end.
 * 0.16: paged packed batches (facts `paged_kv 1`: flash_attn_with_kvcache's
 * cu_seqlens_q with a page table): fa3rt_facts gains paged_kv at its end;
 * such a varlen kernel takes page_table (docs/runtime.md, Paged packed
 * batches).
 * 0.17: small pages (of at most FA3RT_COPY_ROWS rows) are copied
 * by a paged kernel's producer warps (cp.async; the decoding kernel's,
 * and a paged packed batch's): the forward kernel takes pagedK, pagedV,
 * their three byte strides and pagedPages last (fa3rt_abi.def; facts
 * `params` lists them: older facts and cubins are refused); fa3rt_facts
 * gains paged_copy at its end (facts `paged_copy 1`: the kernels that
 * copy; the runtime passes the copy's parameters to those only). */
/* 0.18: fa3rt_facts gains copy_rows at its end (facts `copy_rows N`: a
 * copying kernel's own page-size limit in place of FA3RT_COPY_ROWS; an
 * older runtime skips the key and keeps its 16 rows). */
#define FA3RT_VERSION_MAJOR 0
#define FA3RT_VERSION_MINOR 18
/* Highest version of the facts file format this runtime reads. Version 2:
 * a deterministic backward kernel's (`deterministic 1`), whose dq_accum is
 * larger: a version-1 reader, which skips keys it does not know, must
 * refuse it rather than launch it on a workspace without its turn
 * counters. Version 3: a decoding kernel's (`split_kv 1`), whose
 * <kernel>_append takes Skv last: an older runtime would launch it one
 * parameter short; version 4 likewise for its numPages. Every other kernel
 * is written as version 1. */
#define FA3RT_FACTS_VERSION 4
/* Largest softmax scale taken (facts `scale`, fa3rt_fwd_args.softmax_scale),
 * the compiler's limit too: scale * log2(e), the kernel's f32 parameter, stays
 * finite with room for the scores it multiplies (1e300 would be inf: NaN). */
#define FA3RT_SCALE_MAX 1e30
/* Largest facts text (bytes) and facts line (bytes, without the newline). */
#define FA3RT_FACTS_MAX_BYTES 65536
#define FA3RT_FACTS_MAX_LINE 1023
/* Most kv splits of a split_kv launch (fa3rt_fwd_args.num_splits). */
#define FA3RT_MAX_SPLITS 128
/* The SM count fa3rt_fwd_plan's split heuristic assumes where
 * fa3rt_fwd_args.num_sms is 0 (an H100/H200 SXM's); fa3rt_fwd takes the
 * kernel's device's. */
#define FA3RT_DEFAULT_SMS 132
/* The dynamic shared memory of a launch with fa3rt_fwd_args.ctas_per_sm 1:
 * the most a block may have on sm_90 (227 KiB, the device's
 * CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), more than half of
 * an SM's 228 KiB, so that no second CTA fits beside it. The kernel uses
 * its facts' dynamic_smem bytes of it; fa3rt_fwd gives it the device's
 * opt-in limit less the kernel's static shared memory. */
#define FA3RT_WHOLE_SM_SMEM 232448
/* ctas_per_sm 0 launches a split-KV kernel one CTA a SM where each CTA
 * streams at least this many keys (Skv / splits): on the H200 one a SM read
 * 2-3 % faster than two from 16k keys a CTA at B 64 and 128 (the same at
 * B 16 and at 4k), and 5 % slower at 1k (bench/NOTES.md, Decoding). Skv is
 * the cache's capacity: a cache filled far less than that (cache_seqlens)
 * still takes one a SM. */
#define FA3RT_ONE_CTA_KEYS 16384
/* A paged kernel built to copy small pages by its producer warps (facts
 * paged_copy 1) copies those of at most this many rows (and fewer than its
 * block_n) unless its facts say otherwise (`copy_rows`); larger pages go
 * by TMA boxes, as fast or faster there: H100, B
 * 16 x 16k keys decoding (bf16 block_n 64, four warps copying, the page
 * entries loaded a kv block ahead) pages of 1-8 / 16 rows copied at
 * 0.95-0.96 / 0.96-0.97 of the contiguous cache, boxed at 0.08-0.49 /
 * 0.81-0.84, 32 / 64 rows boxed 0.97-0.98 (e4m3 with warp 0 copying, 1-16
 * 0.62-0.65, boxed 16 0.56, 32 0.69 against the boxes' 0.88-0.90; with
 * its four warps copying and transposing, facts copy_rows 64, 1-16 0.93-0.94,
 * 32 / 64 copied 0.96 / 0.97 against boxes' 0.71 / 0.92); a paged
 * packed-batch prefill (block_n 128) at 16 / 32 / 64 copied 0.67-0.78 /
 * 0.68-0.78 / 0.69-0.79 of the contiguous varlen kernel, boxed 0.56-0.61
 * / 0.70-0.83 / 0.75-0.94 (bench/NOTES.md, Log, "four producer warps"). */
#define FA3RT_COPY_ROWS 16

typedef enum fa3rt_status {
  FA3RT_OK = 0,
  FA3RT_ERR_INVALID_ARGUMENT = 1, /* bad shapes, strides, pointers, dtype, ... */
  FA3RT_ERR_FACTS = 2,            /* facts text missing a key, malformed, unsupported */
  FA3RT_ERR_IO = 3,               /* a file could not be read */
  FA3RT_ERR_UNSUPPORTED_DEVICE = 4, /* no context, or not compute capability 9.0 */
  FA3RT_ERR_CUDA = 5,             /* a CUDA driver call failed */
  FA3RT_ERR_OUT_OF_MEMORY = 6     /* host allocation failed */
} fa3rt_status;

/* A kernel's element type (facts `dtype`). FA3RT_E4M3: q, k and v are
 * float8_e4m3fn (1 byte: torch.float8_e4m3fn), o is bf16; forward kernels
 * only (no backward, varlen or decoding FP8 kernel: their facts are
 * refused), head dims 128 and 256. */
typedef enum fa3rt_dtype {
  FA3RT_DTYPE_INVALID = 0,
  FA3RT_BF16 = 1,
  FA3RT_F16 = 2,
  FA3RT_E4M3 = 3
} fa3rt_dtype;

/* The launch facts of one kernel (parsed from its .facts file; the ranges are
 * those of the facts grammar, docs/runtime.md, and fa3rt_fwd_plan checks them
 * again on a struct filled by the caller). */
typedef struct fa3rt_facts {
  int version;            /* "fa3-kernel-facts N", 1 to FA3RT_FACTS_VERSION */
  char kernel[256];       /* function name in the cubin: a C identifier */
  fa3rt_dtype dtype;      /* element type of q, k, v and o (FA3RT_E4M3: of
                             q, k, v; o is bf16; needs backward, varlen,
                             split_kv and pack_gqa 0, head_dim and
                             head_dim_v 64, 128 or 256) */
  int head_dim;           /* D of q and k: 8 to 256, a multiple of 8 */
  int head_dim_v;         /* D of v and o: likewise */
  int block_m, block_n;   /* rows of Q per CTA, rows of K/V per TMA box: 1 to 256 */
  int threads;            /* block size (x): 1 to 1024 */
  int dynamic_smem;       /* bytes of dynamic shared memory: 0 to 2^20 */
  int causal;             /* 0 / 1 */
  int window_left, window_right; /* -1 (unbounded) to 2^31-1; causal has window_right 0 */
  double softcap;         /* finite, >= 0 (0 = off); compiled into the kernel */
  double scale;           /* default softmax scale: 0 < scale <= FA3RT_SCALE_MAX */
  int persistent;         /* grid: 0 "tiles" (one CTA per tile), 1 "persistent"
                             (CTAs loop over tiles; launch <= one per SM) */
  int cluster_m;          /* CTAs per cluster along x (optional key, 1): with
                             2, m-block pairs share K/V by TMA multicast and
                             the tile count is rounded up to whole pairs */
  char cubin[256];        /* optional key `cubin`: the cubin's file name in the
                             facts file's directory (no '/', not . or ..);
                             "" = absent (the facts file's name with .cubin) */
  int varlen;             /* optional key (0): 1 = the kernel takes a packed
                             variable-length batch (fa3rt_fwd_args, varlen) */
  int backward;           /* optional key (0): 1 = the backward kernel (dQ, dK,
                             dV; fa3rt_bwd): its params are the backward ABI's,
                             and it has varlen 0, cluster_m 1, grid tiles */
  int split_kv;           /* optional key (0): 1 = a tile's kv blocks split over
                             num_splits CTAs, merged by <kernel>_combine
                             (flash-decoding); needs backward 0, varlen 0,
                             cluster_m 1, grid tiles */
  int pack_gqa;           /* optional key (0): 1 = a tile's rows are (query, q
                             head) pairs of one kv head (GQA packing); the
                             same needs as split_kv */
  int deterministic;      /* optional key (0): 1 = a backward kernel whose dq
                             is bitwise the same from run to run (each dQ
                             tile's sums added in the order of the kv
                             blocks); needs backward 1; its dq_accum is
                             larger (fa3rt_bwd_launch.dq_accum_words) */
  int min_seqlen_q;       /* optional key (0): the compiler's table chose this
                             kernel's configuration for calls with at least
                             this many query rows (0: any length). It computes
                             every length; a launcher holding kernels of one
                             attention takes, for a call, the one with the
                             largest min_seqlen_q <= Sq, for a packed batch
                             its mean query length (fa3.torch_api does) */
  int paged_kv;           /* optional key (0): 1 = a varlen kernel that also
                             reads k and v through fa3rt_fwd_args.page_table
                             (a paged KV cache: the table's pages in order
                             are the packed rows); needs varlen 1, split_kv 0,
                             grid tiles */
  int paged_copy;         /* optional key (0): 1 = a paged kernel whose
                             producer warps can copy pages of fewer rows
                             than block_n by cp.async (fa3rt_abi.def's
                             pagedK ... pagedPages; fa3rt_fwd gives them
                             for pages of at most FA3RT_COPY_ROWS rows,
                             fewer than block_n); 0 = TMA boxes of every
                             page's rows. Needs split_kv 1 or paged_kv 1 */
  int copy_rows;          /* optional key (0): with paged_copy 1, the most
                             rows a page may have for fa3rt_fwd to copy it
                             (still fewer than block_n); 0 = FA3RT_COPY_ROWS.
                             The compiler writes it where its copies beat
                             boxes of larger pages (FP8 decoding, whose four
                             producer warps copy and transpose: 64) */
} fa3rt_facts;

/* A tensor in device memory: 4 dims in LOGICAL order [B, H, S, D], strides in
 * elements for each of those dims (any storage order: BSHD, BHSD, ...).
 * Shapes 0 to 2^31-1; ptr 16-byte aligned and the tensor's bytes below 2^63;
 * strides of dims of extent > 1: D 1, the others 1 to 2^40 bytes, multiples of
 * 16 bytes (a dim of extent 1 may carry any stride). Bytes count the
 * element's: 2 (bf16, f16), 1 for an e4m3 kernel's q, k and v (whose o is
 * bf16: 2). */
typedef struct fa3rt_tensor {
  uint64_t ptr;           /* CUdeviceptr */
  int64_t shape[4];
  int64_t strides[4];
} fa3rt_tensor;

typedef struct fa3rt_fwd_args {
  fa3rt_tensor q;         /* [B, Hq, Sq, D] */
  fa3rt_tensor k;         /* [B, Hkv, Skv, D] (with page_table: the page
                             pool, [num_pages, Hkv, page_size, D]) */
  fa3rt_tensor v;         /* [B, Hkv, Skv, Dv] (likewise) */
  fa3rt_tensor o;         /* [B, Hq, Sq, Dv], written */
  uint64_t lse;           /* f32 [B, Hq, Sq] contiguous (natural log), or 0: not written */
  double softmax_scale;   /* 0 or NaN: the kernel's facts scale; else
                             0 < softmax_scale <= FA3RT_SCALE_MAX */
  fa3rt_dtype dtype;      /* element type of q, k, v, o: the kernel's facts
                             dtype (FA3RT_E4M3: q, k, v e4m3, o bf16; see
                             o_dtype) */
  uint64_t tile_counter;  /* 0, or 8 bytes of device memory, 4-byte aligned and
                             zero, for the persistent kernels' tile scheduler
                             (the kernel leaves them zero); launches that share
                             them must be stream-ordered. 0: the kernel
                             object's own (see fa3rt_fwd) */
  /* A packed variable-length batch (FlashAttention's flash_attn_varlen_func),
   * for kernels whose facts say `varlen 1`; all 0 for the others. q, k, v and
   * o are the packed [T, H, D] tensors as [1, H, T, D]; sequence s has the
   * query rows cu_seqlens_q[s] .. cu_seqlens_q[s + 1] of q and o and the key
   * rows from cu_seqlens_k[s], seqused_k[s] of them when seqused_k is given,
   * else up to cu_seqlens_k[s + 1]; causal and window masks are bottom-right
   * aligned per sequence; lse is f32 [Hq, Tq]. The arrays are not read on the
   * host: offsets past the tensors are the caller's error, as in
   * FlashAttention. Rows of o that no sequence owns are not written. */
  uint64_t cu_seqlens_q;  /* int32 [varlen_batch + 1], device, non-decreasing */
  uint64_t cu_seqlens_k;  /* int32 [varlen_batch + 1], device */
  uint64_t seqused_k;     /* int32 [varlen_batch], device, or 0; 4-byte
                             aligned. Also taken, alone, by split_kv kernels
                             (fixed-length batches, none of the other varlen
                             fields): int32 [B], batch b attends keys 0 ..
                             seqused_k[b] - 1 of its Skv rows of k and v
                             (FlashAttention's cache_seqlens; causal and
                             window masks bottom-right aligned to
                             seqused_k[b]; 0: o = 0, lse = -inf). Values 0
                             to Skv are the caller's contract (read on the
                             GPU only); the split count still comes from
                             Skv, the cache's capacity */
  int32_t varlen_batch;   /* sequences: 0 to 2^31-1 */
  int32_t max_seqlen_q;   /* at least every sequence's query rows (the grid):
                             0 to 2^31-1 */
  /* Split-KV decoding (kernels whose facts say `split_kv 1`; docs/runtime.md,
   * Split-KV decoding). The workspace is the caller's: plan first
   * (fa3rt_fwd_plan reports the resolved split count and the bytes), then
   * allocate and launch with num_splits set to the resolved count (left 0,
   * fa3rt_fwd resolves it again, for the kernel's device where num_sms is
   * 0, and may want more splits than the workspace was sized for: the
   * runtime cannot see an allocation's size). */
  int32_t num_splits;     /* split_kv kernels: 0 = fa3rt_num_splits_heuristic,
                             else 1 to FA3RT_MAX_SPLITS; other kernels: 0 or 1 */
  uint64_t o_accum;       /* f32 [num_splits, B, Hq, Sq, Dv] contiguous, 16-byte
                             aligned: each split's o; needed where the
                             resolved count is > 1 (fa3rt_fwd_plan takes 0 and
                             reports the size), else ignored */
  uint64_t lse_accum;     /* f32 [num_splits, B, Hq, Sq] contiguous, 16-byte
                             aligned: each split's lse; likewise */
  int32_t num_sms;        /* SMs the heuristic fills: 0 = fa3rt_fwd: the
                             kernel's device's, fa3rt_fwd_plan:
                             FA3RT_DEFAULT_SMS; else 1 to 2^31-1 */
  /* A paged KV cache (FlashAttention's page_table), for split_kv kernels
   * and paged_kv varlen kernels (docs/runtime.md, Paged KV cache; a packed
   * batch's below). With page_table set, k and v
   * are the page pool, FlashAttention's [num_pages, page_size, Hkv, D] as
   * the logical [B, H, S, D] = [num_pages, Hkv, page_size, D] (their shape[0]
   * is the pool's pages, not q's B; shape[2] the page size: a multiple of
   * 8 that divides the kernel's block_n or that block_n divides), and
   * batch b's key r is row r % page_size of page
   * page_table[b * page_table_stride + r / page_size]. The logical key
   * length Skv (the caches' capacity: seqused_k's bound where given, else
   * every batch's length; the split heuristic's) is paged_seqlen_k, or
   * page_table_stride * page_size where that is 0 (FlashAttention's
   * max_pages_per_seq * page_size). The entries (0 to num_pages - 1) are
   * the caller's contract, read on the GPU only, and only those of a
   * batch's first ceil(seqused_k[b] / page_size) pages (all
   * ceil(Skv / page_size) without seqused_k); all three fields 0: k and v
   * are the usual [B, Hkv, Skv, D] caches. A paged_kv varlen kernel reads
   * the packed rows of k and v through the table read as one list of
   * varlen_batch * page_table_stride pages: packed row r is row
   * r % page_size of page page_table[r / page_size], so that sequence s's
   * keys, from row cu_seqlens_k[s] (seqused_k[s] of them, or up to
   * cu_seqlens_k[s + 1]), are its row of the table where cu_seqlens_k[s] =
   * s * page_table_stride * page_size (FlashAttention's layout); each
   * cu_seqlens_k[s] a multiple of min(page_size, block_n) (a block of keys
   * then lies in whole pages) and below varlen_batch * page_table_stride *
   * page_size, which must fit in 2^31-1 (the caller's contract for the
   * values, read on the GPU only); paged_seqlen_k 0. */
  uint64_t page_table;       /* int32 [B, page_table_stride] on the device,
                                4-byte aligned (B * page_table_stride int32
                                below 2^63), or 0 */
  int32_t page_table_stride; /* with page_table: entries from one batch's row
                                to the next, 1 to 2^31-1, at least
                                ceil(Skv / page_size); else 0 */
  int32_t paged_seqlen_k;    /* with page_table: the logical Skv, 1 to
                                page_table_stride * page_size (and 2^31-1),
                                or 0: page_table_stride * page_size; else 0 */
  /* New keys and values appended to the cache in the same call
   * (FlashAttention's flash_attn_with_kvcache(k=, v=)), for split_kv
   * kernels only (docs/runtime.md, Appending to the cache). All three
   * zero (every field of k_new and v_new, and seqlens_out): nothing is
   * appended. Else, on the stream and before the attention, the cubin's
   * <kernel>_append copies k_new and v_new into the cache k and v (or their
   * page pool, through the page table) at rows seqused_k[b] ..
   * seqused_k[b] + Snew - 1 of each batch b, and writes seqused_k[b] +
   * Snew into seqlens_out, which the attention reads as each batch's key
   * count: it covers the cache's old rows and the new ones. seqused_k is
   * required (each batch's rows before the append, FlashAttention's
   * cache_seqlens; not modified: the caller advances it), and
   * seqused_k[b] + Snew <= Skv (the logical length) is the caller's
   * contract, read on the GPU only. k_new and v_new: the tensor rules
   * above (contiguous last dim, pointer and strides multiples of 16
   * bytes: the append copies rows 16 bytes at a time), q's B, the cache's
   * Hkv, the kernel's head dims, one Snew of 0 to Skv; Snew 0 (or B 0):
   * nothing is appended or written and the attention reads seqused_k. */
  fa3rt_tensor k_new;     /* [B, Hkv, Snew, D], read */
  fa3rt_tensor v_new;     /* [B, Hkv, Snew, Dv], read */
  uint64_t seqlens_out;   /* int32 [B] on the device, 4-byte aligned, below
                             2^63, overlapping neither seqused_k nor the
                             page table: a workspace, written with
                             seqused_k[b] + Snew (needed where rows are
                             appended), or 0 */
  /* FP8 (kernels whose facts say `dtype e4m3`; docs/runtime.md, FP8).
   * o_dtype: o's element type, 0 for the kernel's (its dtype; bf16 for
   * e4m3), else it must be that one (a caller's statement, checked). The
   * kernel computes S = (Q K^T) * qd * kd and O = (P V) * vd with f32
   * descale factors read from device memory: q_descale[b * stride_b + hq *
   * stride_h + (m / 128) * stride_m] for query row m of q head hq,
   * k_descale[b * stride_b + hkv * stride_h + (n / 128) * stride_n] for
   * key row n, v_descale[b * stride_b + hkv * stride_h]. A GQA-packed
   * (decoding) kernel's q descale is per (batch, kv head), FA3's form:
   * q_descale[b * stride_b + hkv * stride_h], stride_m 0 (its 128-row
   * blocks mix the g q heads of a kv head). Each pointer 0:
   * 1.0 (its strides must then be 0); else f32 on the device, 4-byte
   * aligned, below 2^63. Strides in elements, 0 to 2^31-1 (0 broadcasts:
   * FlashAttention-3's (B, Hkv) descale is stride_b Hkv, stride_h 1,
   * stride_n 0; a per-tensor scale all 0), and the last element read
   * (each index at its extent - 1: B, the heads, ceil(Sq / 128) or
   * ceil(Skv / 128) blocks) at most 2^31-1 (the kernel's i32 index). The
   * values are read on the GPU only, so the runtime cannot check them: each
   * must be positive and finite (the kernel's online softmax takes the
   * score scale softmax_scale * qd * kd to be positive; a zero, negative,
   * NaN or infinite descale gives wrong or non-finite o and lse, with no
   * error). Kernels of another dtype take none:
   * every field 0 (o_dtype 0 or their dtype); a descale given to them is
   * refused, not ignored. */
  fa3rt_dtype o_dtype;    /* 0, or the kernel's o type (bf16 for e4m3) */
  uint64_t q_descale;     /* f32 [B, Hq, ceil(Sq / 128)] by the strides, or 0 */
  uint64_t k_descale;     /* f32 [B, Hkv, ceil(Skv / 128)], or 0 */
  uint64_t v_descale;     /* f32 [B, Hkv], or 0 */
  int64_t q_descale_stride_b, q_descale_stride_h, q_descale_stride_m;
  int64_t k_descale_stride_b, k_descale_stride_h, k_descale_stride_n;
  int64_t v_descale_stride_b, v_descale_stride_h;
  /* CTAs of the kernel an SM runs at once (docs/runtime.md, CTAs a SM):
   * 0 = the runtime's choice: one where a split-KV kernel that two CTAs
   * could share an SM with streams at least FA3RT_ONE_CTA_KEYS keys a CTA
   * (Skv / splits), else as many as fit;
   * 1 = one: launched with FA3RT_WHOLE_SM_SMEM bytes of dynamic shared
   * memory (fa3rt_fwd_launch.dynamic_smem), so that each CTA has its SM to
   * itself;
   * 2 = as many as the kernel's registers and shared memory let fit (a
   * decoding kernel compiled for two, facts `ctas_per_sm 2`, runs two).
   * Other values are refused. The result is the same bit for bit. */
  int32_t ctas_per_sm;
  /* A left-padded KV cache (FlashAttention's cache_leftpad), for split_kv
   * kernels: int32 [B] on the device, 4-byte aligned, below 2^63, or 0.
   * Batch b attends rows leftpad_k[b] .. seqused_k[b] - 1 of its cache
   * (seqused_k absent: .. Skv - 1; with appended rows, .. seqused_k[b] +
   * Snew - 1, the append writing at seqused_k[b] as without it): its
   * key count is the difference, to which causal and window masks are
   * bottom-right aligned. Values 0 to seqused_k[b] are the caller's
   * contract, read on the GPU only (the kernel clamps one outside into
   * it). With a page table only where the logical Skv is at most the page
   * size (every batch's keys in its first page: FlashAttention's
   * cache_batch_idx); FlashAttention-3 takes none with a paged cache. */
  uint64_t leftpad_k;
} fa3rt_fwd_args;

/* What fa3rt_fwd_plan() derived from valid arguments. */
typedef struct fa3rt_fwd_launch {
  int empty;              /* 1: B, Sq or Hq is 0 (varlen: the batch, max_seqlen_q,
                             Tq or Hq): nothing to do */
  int fill_only;          /* 1: Skv is 0: o is set to 0 and lse to -inf, no kernel */
  int32_t B, Sq, Skv, Hq, Hkv; /* varlen: sequences, Tq, Tk */
  unsigned grid[3], block[3];
  unsigned dynamic_smem;  /* the facts' bytes; FA3RT_WHOLE_SM_SMEM where the
                             launch runs one CTA a SM (ctas_per_sm 1, or 0's
                             choice; fa3rt_fwd: the device's opt-in limit
                             less the kernel's static shared memory) */
  int64_t o_stride_b, o_stride_s, o_stride_h; /* elements */
  double scale;           /* the softmax scale used */
  float scale_log2;       /* scale * log2(e), the kernel parameter */
  int32_t num_splits;     /* the resolved split count (1: not split; always 1
                             for kernels without split_kv) */
  int32_t pack_group;     /* pack_gqa: g = Hq / Hkv q heads share a tile's
                             rows (Q's TMA box {64, g, block_m / g, 1});
                             else 1 */
  uint64_t o_accum_bytes;   /* what o_accum must hold: num_splits * B * Hq *
                               Sq * Dv * 4 where num_splits > 1 and a kernel
                               runs, else 0 */
  uint64_t lse_accum_bytes; /* num_splits * B * Hq * Sq * 4, likewise */
  /* <kernel>_combine, launched after a split kernel where num_splits > 1:
     1-D grid of ceil(B*Hq*Sq*(Dv/4) / 256) blocks (at most 2^31-1: it
     strides over the rest), block FA3RT_FWD_COMBINE_THREADS = 256, no
     dynamic shared memory; both 0 where it does not run */
  unsigned combine_grid, combine_block;
  int32_t page_size;      /* a paged cache's rows a page (k.shape[2]); 0:
                             a contiguous cache (Skv above is the logical
                             key length either way) */
  int32_t kv_box_rows;    /* the rows of K's and V's TMA box: block_n, or
                             min(page_size, block_n) for a paged cache (a
                             K/V block is loaded a page at a time) */
  int32_t snew;           /* rows appended a batch (k_new.shape[2]); 0: none */
  /* <kernel>_append, launched before the kernel where rows are appended
     (Snew, B and Hkv > 0; also where B, Sq or Hq leave the attention
     nothing to do): 1-D grid of ceil(max(B*Snew*Hkv*D, B*Snew*Hkv*Dv) / 8 /
     256) blocks (at most 2^31-1: it strides over the rest), block
     FA3RT_FWD_APPEND_THREADS = 256, no dynamic shared memory; both 0
     where it does not run */
  unsigned append_grid, append_block;
} fa3rt_fwd_launch;

/* The backward pass (docs/runtime.md, Backward), for kernels whose facts say
 * `backward 1`. Tensors as in fa3rt_fwd_args ([B, H, S, D] logical order,
 * element strides, the same rules); q, k, v, dout are read by TMA, dout, o
 * and dq by the helper kernels in 16-byte vectors (the same 16-byte rules).
 * delta and dq_accum are workspaces: fa3rt_bwd fills delta = rowsum(dout *
 * o), zeroes dq_accum, sums into it and writes dq = softmax_scale *
 * dq_accum, all on the stream. */
typedef struct fa3rt_bwd_args {
  fa3rt_tensor q;         /* [B, Hq, Sq, D] */
  fa3rt_tensor k;         /* [B, Hkv, Skv, D] */
  fa3rt_tensor v;         /* [B, Hkv, Skv, Dv] */
  fa3rt_tensor dout;      /* [B, Hq, Sq, Dv]: dL/do */
  fa3rt_tensor o;         /* [B, Hq, Sq, Dv]: the forward's output */
  uint64_t lse;           /* f32 [B, Hq, Sq] contiguous: the forward's lse
                             (natural log), 16-byte aligned */
  uint64_t delta;         /* f32 [B, Hq, Sq] contiguous, 16-byte aligned: a
                             workspace, filled with rowsum(dout * o) */
  uint64_t dq_accum;      /* f32, fa3rt_bwd_launch.dq_accum_words words
                             (B * Hq * ceil(Sq / 64) * 64 * D, plus the
                             turn counters of a deterministic kernel),
                             16-byte aligned: a workspace in the kernel's
                             tile order (fa3rt_abi.def, FA3RT_BWD_DQ_ROWS),
                             zeroed, then sum_j dS_ij K_j by bulk or atomic
                             adds: the order of the sum, and so dq's last
                             bits, may change from launch to launch, except
                             with facts deterministic 1, where it is fixed
                             (the kv blocks' order) */
  fa3rt_tensor dq;        /* [B, Hq, Sq, D], written: softmax_scale *
                             dq_accum, rounded once to dtype */
  fa3rt_tensor dk;        /* [B, Hkv, Skv, D], written */
  fa3rt_tensor dv;        /* [B, Hkv, Skv, Dv], written; the strides of dk
                             (the kernel takes one set for both) */
  double softmax_scale;   /* 0 or NaN: the kernel's facts scale; else
                             0 < softmax_scale <= FA3RT_SCALE_MAX */
  fa3rt_dtype dtype;      /* element type of q, k, v, dout, o, dq, dk, dv:
                             bf16 or f16 (no FP8 backward) */
} fa3rt_bwd_args;

/* What fa3rt_bwd_plan() derived from valid arguments. */
typedef struct fa3rt_bwd_launch {
  int empty;              /* 1: B, Sq or Hq is 0: nothing to do */
  int zero_only;          /* 1: Skv is 0 (B, Sq, Hq > 0): no backward kernel;
                             the helpers still run (dq = 0; dk, dv have no
                             rows) */
  int32_t B, Sq, Skv, Hq, Hkv;
  unsigned grid[3], block[3]; /* grid ceil(Skv / block_n) * Hkv * B CTAs */
  unsigned dynamic_smem;
  int64_t dkv_stride_b, dkv_stride_s, dkv_stride_h; /* elements, dk's and dv's */
  uint64_t dq_accum_words; /* f32 words of dq_accum (_pre zeroes them):
                              B * Hq * ceil(Sq / 64) * 64 * D, and with
                              facts deterministic 1 one u32 turn counter
                              per 64-row tile after them, B * Hq *
                              ceil(Sq / 64) rounded up to a multiple of 4 */
  double scale;           /* the softmax scale used */
  float scale_log2;       /* scale * log2(e), the kernel parameter */
  /* the helper kernels <kernel>_pre and <kernel>_post: block aux_block =
     256 threads (fa3rt_abi.def: FA3RT_BWD_AUX_THREADS), no dynamic shared
     memory; _pre's 1-D grid of ceil(B*Sq*Hq / rows a block) blocks (at
     most 2^31-1: they stride over the rest), _post one block a 64 x 64
     chunk of dQaccum (fa3rt_bwd sizes it) */
  unsigned aux_grid, aux_block;
  int64_t o_stride_b, o_stride_s, o_stride_h;          /* elements */
  int64_t dout_stride_b, dout_stride_s, dout_stride_h; /* elements */
  int64_t dq_stride_b, dq_stride_s, dq_stride_h;       /* elements */
} fa3rt_bwd_launch;

typedef struct fa3rt_kernel fa3rt_kernel;

/* ---- errors ---- */
/* Message of the last error on this thread ("" if none). Valid until the next
 * fa3rt call on this thread. */
const char *fa3rt_last_error(void);
/* FA3RT_VERSION_MAJOR * 1000 + FA3RT_VERSION_MINOR of the library itself:
 * the argument structs' layouts change with the version, so a binding that
 * mirrors this header (python/fa3/runtime.py) refuses another library. */
int fa3rt_version(void);
const char *fa3rt_status_name(fa3rt_status status);
const char *fa3rt_dtype_name(fa3rt_dtype dtype);

/* ---- facts (no GPU needed) ---- */
/* Parses facts text (len bytes; need not be NUL-terminated) by the grammar of
 * docs/runtime.md (the same as python/fa3/facts.py). Unknown keys are ignored;
 * a missing required key, a malformed or out-of-range value, a duplicate key or
 * a newer version is FA3RT_ERR_FACTS. */
fa3rt_status fa3rt_facts_parse(const char *text, size_t len, fa3rt_facts *out);
fa3rt_status fa3rt_facts_load(const char *path, fa3rt_facts *out);

/* ---- validation (no GPU needed) ---- */
/* Checks the facts (every field in its range: they may come from the caller
 * rather than the parser) and args against them, and fills *launch (may be
 * NULL). Messages: "<where>: <what> (<range>)". */
fa3rt_status fa3rt_fwd_plan(const fa3rt_facts *facts, const fa3rt_fwd_args *args,
                            fa3rt_fwd_launch *launch);
/* The same for the backward: facts with `backward 1` and fa3rt_bwd_args. */
fa3rt_status fa3rt_bwd_plan(const fa3rt_facts *facts, const fa3rt_bwd_args *args,
                            fa3rt_bwd_launch *launch);
/* The kv splits a split_kv launch gets with num_splits 0 (FlashAttention's
 * num_splits_heuristic, with a 95 % margin instead of its 85 %): `tiles` CTAs without splits (m-blocks * heads * B,
 * as the kernel packs them), `kv_blocks` = ceil(Skv / block_n), `num_sms`
 * SMs. 1 where the tiles nearly fill the SMs (tiles >= 0.8 * num_sms);
 * else, over the split counts s = 1 .. min(FA3RT_MAX_SPLITS, num_sms,
 * kv_blocks) that change a split's blocks (ceil(kv_blocks / s) !=
 * ceil(kv_blocks / (s - 1)); s = 1 always counts), the wave efficiency
 * w / ceil(w) with w = tiles * s / num_sms: the smallest s within 95% of
 * the best (fewer splits write and merge less; a decoding step's bandwidth
 * grows with the SMs reading K and V). Any argument below 1: 1.
 * No GPU needed. */
int32_t fa3rt_num_splits_heuristic(int64_t tiles, int64_t kv_blocks, int32_t num_sms);

/* ---- kernels (need a current CUDA context of compute capability 9.0) ---- */
/* Loads into the calling thread's current context (e.g. PyTorch's primary
 * context of the current device). The kernel may be used only while that
 * context is current. */
fa3rt_status fa3rt_kernel_load(const char *cubin_path, const char *facts_path,
                               fa3rt_kernel **out);
fa3rt_status fa3rt_kernel_load_data(const void *cubin, size_t cubin_size,
                                    const char *facts_text, size_t facts_len,
                                    fa3rt_kernel **out);
void fa3rt_kernel_destroy(fa3rt_kernel *kernel);
const fa3rt_facts *fa3rt_kernel_facts(const fa3rt_kernel *kernel);

/* Validates, encodes the tensor maps and launches on `stream` (asynchronously),
 * the maps in the launch's parameters. Thread-safe. May be captured in a CUDA
 * graph: nothing is copied from host memory and the host does not wait. Load
 * the kernel before capturing (loading allocates). The persistent kernels'
 * tile counters: args->tile_counter if given; else, in a captured launch, a
 * pair the kernel object keeps for that launch (1024 per kernel object); else
 * one per stream (switching among more than 16 streams waits on the host for
 * the launch that used the pair last). */
fa3rt_status fa3rt_fwd(fa3rt_kernel *kernel, const fa3rt_fwd_args *args, void *stream);
/* (A split_kv kernel, facts `split_kv 1`: the kernel writes the splits'
 * partial o and lse into args->o_accum / lse_accum and fa3rt_fwd then
 * launches <kernel>_combine on the same stream, which merges them into o
 * and lse; with one split, or Skv 0, only what a kernel without splits
 * does. With k_new / v_new, <kernel>_append runs first on the stream: the
 * new rows into the cache, seqlens_out; the kernel then reads
 * seqlens_out. A refused call launches nothing.) */

/* The backward (facts `backward 1`): validates (fa3rt_bwd_plan), then
 * launches on `stream` (asynchronously; may be captured in a CUDA graph)
 * three kernels of the cubin: <kernel>_pre (delta = rowsum(dout * o) in f32,
 * dq_accum zeroed), the kernel (tensor maps of q, dout with box block_m
 * rows, k and v with block_n rows; dk, dv, dq_accum) and <kernel>_post (dq =
 * softmax_scale * dq_accum). B, Sq or Hq 0: nothing is done. Skv 0: pre and
 * post only (dq = 0; dk and dv have no rows). dk and dv are the kernel's to
 * write whole; with Sq = 0 they are not written (their gradient is 0: the
 * caller's to fill). Each kind of kernel refuses the other's call by name. */
fa3rt_status fa3rt_bwd(fa3rt_kernel *kernel, const fa3rt_bwd_args *args, void *stream);

/* FP8 quantization (docs/runtime.md, FP8): x to e4m3 for an FP8 kernel's
 * q, k or v, with the descales fa3rt_fwd_args takes. y = e4m3(x' * scale),
 * rounded to nearest even and saturated at 448, where x' = x, or x H_D
 * diag(signs) / sqrt(D) (the random-sign Hadamard rotation of
 * FlashAttention-3's section 3.3: give q and k the same signs, v none),
 * and descale = amax / 448 (~ 1 / scale) of the rows that share it (1 where
 * the amax is 0, below 448 * 2^-126 or NaN; those rows are cast unscaled).
 * The same arithmetic as fa3.quantize_fp8 (bit for bit without the
 * rotation). */
typedef struct fa3rt_quantize_args {
  fa3rt_tensor x;         /* [B, H, S, D] (BSHD storage by strides, as q),
                             D the kernel's head dim; contiguous rows,
                             16-byte aligned (pointer and strides) */
  fa3rt_dtype x_dtype;    /* FA3RT_BF16 or FA3RT_F16 */
  fa3rt_tensor y;         /* [B, H, S, D] e4m3, x's shape, written; rows
                             16-byte aligned; not overlapping x */
  uint64_t descale;       /* f32, written: [B, H, ceil(S / 128)] contiguous
                             (per_head 0: q's and k's block descales), or
                             [B, H] (per_head 1: v's) */
  uint64_t signs;         /* f32 [D] (the rotation's signs, +-1), 16-byte
                             aligned, or 0: no rotation */
  int per_head;           /* 0: one descale per 128 rows of a head (the last
                             block shorter); 1: one per (batch, head), in
                             two launches through `workspace` */
  uint64_t workspace;     /* per_head: 4-byte [B, H] scratch (4-byte
                             aligned; zeroed by the call, then the heads'
                             amaxes); otherwise ignored */
} fa3rt_quantize_args;

/* Launches the FP8 kernel's <kernel>_quantize on `stream` (once; twice with
 * per_head), asynchronously; may be captured in a CUDA graph. Grid (H,
 * ceil(S / FA3RT_FP8_QUANTIZE_ROWS), B): the blocks of rows and B at most
 * 65535. B, H or
 * S 0: nothing to quantize (per_head with S 0: descale filled with 1).
 * Refused by name on a kernel that is not e4m3, and for every argument it
 * cannot take. */
fa3rt_status fa3rt_quantize(fa3rt_kernel *kernel, const fa3rt_quantize_args *args,
                            void *stream);

#ifdef __cplusplus
}
#endif
#endif /* FA3RT_H */
