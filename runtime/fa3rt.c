/* fa3rt: launcher for FA3-MLIR's Hopper FlashAttention kernels (forward and
 * backward). C11 + CUDA driver API (libcuda) + pthreads. See include/fa3rt.h.
 *
 * Kernel ABI: the parameters are defined once, in include/fa3rt_abi.def
 * (the compiler emits them from the same list; checked against the cubin at
 * load time). The tile counters are zero at launch and the kernel leaves
 * them zero again (persistent kernels' tile scheduler).
 *   grid (ceil(Sq / block_m), Hq, B), block (threads, 1, 1), dynamic_smem bytes.
 * Tensor maps: 4-D, dims innermost-first (D, H, S, B) over the caller's tensor,
 * box (128 bytes of D, 1, rows, 1) with rows block_m (Q), block_n (K, V) or 64
 * (O: one consumer warpgroup's rows, written by TMA store), SWIZZLE_128B, L2
 * promotion 128B, OOB zero (loads) / clipped (stores): 64 bf16/f16 elements
 * of D a box, 128 of an e4m3 kernel's q, k, v (UINT8 maps; its o is bf16).
 * O and its strides are also passed as a pointer for kernels compiled with
 * tma-store=false. FP8 kernels (facts `dtype e4m3`) also take the f32
 * descale pointers and strides (fa3rt_fwd_args.q_descale ...); the others
 * get 0 for each.
 * The backward kernel (facts `backward 1`): its own parameter list
 * (FA3RT_BWD_KERNEL_PARAM), grid (ceil(Skv / block_n) * Hkv * B, 1, 1), maps
 * of Q and dO as the forward's Q map, of K and V as its K/V maps. Around it
 * its module's <kernel>_pre (delta, dQaccum zeroed) and <kernel>_post (dQ)
 * run: FA3RT_BWD_PRE_PARAM / FA3RT_BWD_POST_PARAM, grid (aux_grid, 1, 1)
 * for _pre and one CTA per 64 x 64 chunk of dQaccum for _post (launch_post),
 * block (FA3RT_BWD_AUX_THREADS, 1, 1), no dynamic shared memory. A
 * deterministic one (facts `deterministic 1`) launches the same way; only
 * its dQaccum is larger (its tiles' turn counters follow them).
 * Split-KV kernels (facts `split_kv 1`): the tile grid times numSplits CTAs;
 * with numSplits > 1 they write f32 partials to the caller's oAccum and
 * lseAccum and <kernel>_combine (FA3RT_FWD_COMBINE_PARAM, grid
 * (combine_grid, 1, 1), block (FA3RT_FWD_COMBINE_THREADS, 1, 1)) merges
 * them into O and LSE. GQA-packed kernels (facts `pack_gqa 1`): tiles of
 * (query, q head) rows of one kv head, Q's box (64, g, block_m / g, 1).
 * A split-KV launch that appends new keys and values to its cache runs
 * <kernel>_append (FA3RT_FWD_APPEND_PARAM, grid (append_grid, 1, 1),
 * block (FA3RT_FWD_APPEND_THREADS, 1, 1)) first, on the same stream; the
 * kernel then reads the counts it wrote (seqlens_out) as seqUsedK.
 */
#define _POSIX_C_SOURCE 200809L
#include "fa3rt.h"

#include <cuda.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMAPS 4 /* q, k, v, o */
/* Tile-counter pairs (2 x u32, zero between launches: the kernel's last CTA
 * zeroes them) per kernel object, read by the dynamic scheduler alone (a
 * persistent kernel of one CTA a cluster; the others get slot 0's,
 * untouched, and take no slot). Its launches on one stream share a pair; a
 * launch on another stream takes the next of NSLOTS, waiting (host side) for
 * the launch that last used it. A captured launch of a kernel with the
 * dynamic scheduler keeps a pair of its own, one of NCAPTURED, for the
 * kernel object's lifetime, as different graphs may replay on any stream
 * (two instances of one graph share it: replay them in one stream order). */
#define NSLOTS 16
#define NCAPTURED 1024
#define TMA_BOX_BYTES 128 /* bytes of D per TMA box: the swizzle span (64 bf16, 128 e4m3) */
#define DESCALE_ROWS 128 /* rows of q (k) that share a descale factor */
#define O_BOX_ROWS 64 /* rows per O store: one consumer warpgroup's */
#define LOG2E 1.4426950408889634
#define CUBIN_MAX_BYTES ((size_t)1 << 30) /* ours are ~100 KB */

/* A kernel's parameter names, blank-separated, and the byte size of each (the
 * cubin must agree), from the one definition of the ABI: the forward's list
 * (FA3RT_KERNEL_PARAM) and the backward's (FA3RT_BWD_KERNEL_PARAM). The
 * alignment of each parameter: a by-value one's from the ABI (cuda.h aligns
 * CUtensorMap to 64 bytes in CUDA 12, to 128 in 13). */
#define P_NAME(name, c_type, mlir_type, value_bytes, value_align, meaning) " " #name
#define P_SIZE(name, c_type, mlir_type, value_bytes, value_align, meaning) sizeof(c_type),
#define P_ALIGN(name, c_type, mlir_type, value_bytes, value_align, meaning)                    \
  (value_bytes) ? (value_align) : sizeof(c_type),
/* The size the compiler was told of a by-value parameter is its C type's. */
#define P_CHECK(name, c_type, mlir_type, value_bytes, value_align, meaning)                    \
  _Static_assert((value_bytes) == 0 || (value_bytes) == sizeof(c_type),                       \
                 "fa3rt_abi.def: " #name "'s value_bytes is not its C type's size");
static const char kFwdNames[] =
#define FA3RT_KERNEL_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kFwdSizes[] = {
#define FA3RT_KERNEL_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kFwdAligns[] = {
#define FA3RT_KERNEL_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_KERNEL_PARAM P_CHECK
#include "fa3rt_abi.def"
static const char kBwdNames[] =
#define FA3RT_BWD_KERNEL_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kBwdSizes[] = {
#define FA3RT_BWD_KERNEL_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kBwdAligns[] = {
#define FA3RT_BWD_KERNEL_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_BWD_KERNEL_PARAM P_CHECK
#include "fa3rt_abi.def"
/* the backward's helpers, <kernel>_pre and <kernel>_post */
static const char kPreNames[] =
#define FA3RT_BWD_PRE_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kPreSizes[] = {
#define FA3RT_BWD_PRE_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kPreAligns[] = {
#define FA3RT_BWD_PRE_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_BWD_PRE_PARAM P_CHECK
#include "fa3rt_abi.def"
static const char kPostNames[] =
#define FA3RT_BWD_POST_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kPostSizes[] = {
#define FA3RT_BWD_POST_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kPostAligns[] = {
#define FA3RT_BWD_POST_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_BWD_POST_PARAM P_CHECK
#include "fa3rt_abi.def"
/* the split-KV kernels' merge, <kernel>_combine */
static const char kCombineNames[] =
#define FA3RT_FWD_COMBINE_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kCombineSizes[] = {
#define FA3RT_FWD_COMBINE_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kCombineAligns[] = {
#define FA3RT_FWD_COMBINE_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_FWD_COMBINE_PARAM P_CHECK
#include "fa3rt_abi.def"
/* the decoding kernels' cache append, <kernel>_append */
static const char kAppendNames[] =
#define FA3RT_FWD_APPEND_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kAppendSizes[] = {
#define FA3RT_FWD_APPEND_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kAppendAligns[] = {
#define FA3RT_FWD_APPEND_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_FWD_APPEND_PARAM P_CHECK
#include "fa3rt_abi.def"
/* the FP8 kernels' quantization, <kernel>_quantize */
static const char kQuantizeNames[] =
#define FA3RT_FP8_QUANTIZE_PARAM P_NAME
#include "fa3rt_abi.def"
    ;
static const size_t kQuantizeSizes[] = {
#define FA3RT_FP8_QUANTIZE_PARAM P_SIZE
#include "fa3rt_abi.def"
};
static const size_t kQuantizeAligns[] = {
#define FA3RT_FP8_QUANTIZE_PARAM P_ALIGN
#include "fa3rt_abi.def"
};
#define FA3RT_FP8_QUANTIZE_PARAM P_CHECK
#include "fa3rt_abi.def"

/* One kernel ABI: names (blank-separated), sizes and alignments, in order. */
typedef struct abi {
  const char *kind;   /* "forward" / "backward", for messages */
  const char *names;
  const size_t *sizes, *aligns;
  size_t n;
} abi;
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
static const abi kFwdAbi = {"forward", kFwdNames + 1, kFwdSizes, kFwdAligns, COUNT(kFwdSizes)};
static const abi kBwdAbi = {"backward", kBwdNames + 1, kBwdSizes, kBwdAligns, COUNT(kBwdSizes)};
static const abi kPreAbi = {"backward's _pre", kPreNames + 1, kPreSizes, kPreAligns,
                            COUNT(kPreSizes)};
static const abi kPostAbi = {"backward's _post", kPostNames + 1, kPostSizes, kPostAligns,
                             COUNT(kPostSizes)};
static const abi kCombineAbi = {"split-KV _combine", kCombineNames + 1, kCombineSizes,
                                kCombineAligns, COUNT(kCombineSizes)};
static const abi kAppendAbi = {"split-KV _append", kAppendNames + 1, kAppendSizes,
                               kAppendAligns, COUNT(kAppendSizes)};
static const abi kQuantizeAbi = {"FP8 _quantize", kQuantizeNames + 1, kQuantizeSizes,
                                 kQuantizeAligns, COUNT(kQuantizeSizes)};
static const abi *abi_of(const fa3rt_facts *f) { return f->backward ? &kBwdAbi : &kFwdAbi; }

/* ------------------------------------------------------------------------ */
/* errors                                                                    */
/* ------------------------------------------------------------------------ */

static _Thread_local char g_err[2048];

const char *fa3rt_last_error(void) { return g_err; }
int fa3rt_version(void) { return FA3RT_VERSION_MAJOR * 1000 + FA3RT_VERSION_MINOR; }

static fa3rt_status fail(fa3rt_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static fa3rt_status fail(fa3rt_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
  return st;
}

static void clear_error(void) { g_err[0] = 0; }

const char *fa3rt_status_name(fa3rt_status s) {
  switch (s) {
  case FA3RT_OK: return "FA3RT_OK";
  case FA3RT_ERR_INVALID_ARGUMENT: return "FA3RT_ERR_INVALID_ARGUMENT";
  case FA3RT_ERR_FACTS: return "FA3RT_ERR_FACTS";
  case FA3RT_ERR_IO: return "FA3RT_ERR_IO";
  case FA3RT_ERR_UNSUPPORTED_DEVICE: return "FA3RT_ERR_UNSUPPORTED_DEVICE";
  case FA3RT_ERR_CUDA: return "FA3RT_ERR_CUDA";
  case FA3RT_ERR_OUT_OF_MEMORY: return "FA3RT_ERR_OUT_OF_MEMORY";
  }
  return "FA3RT_ERR_UNKNOWN";
}

const char *fa3rt_dtype_name(fa3rt_dtype d) {
  switch (d) {
  case FA3RT_BF16: return "bf16";
  case FA3RT_F16: return "f16";
  case FA3RT_E4M3: return "e4m3";
  default: return "invalid";
  }
}

/* "<call> failed: <name>: <string> (<where>)" */
static fa3rt_status cuda_fail(const char *call, CUresult r, const char *where) {
  const char *name = NULL, *str = NULL;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
  if (cuGetErrorString(r, &str) != CUDA_SUCCESS || !str) str = "unknown error";
  return fail(FA3RT_ERR_CUDA, "%s failed: %s: %s (%s)", call, name, str, where);
}

#define CU_TRY(call, where)                                                  \
  do {                                                                       \
    CUresult r_ = (call);                                                    \
    if (r_ != CUDA_SUCCESS) return cuda_fail(#call, r_, (where));            \
  } while (0)

/* ------------------------------------------------------------------------ */
/* facts                                                                     */
/* ------------------------------------------------------------------------ */

/* The grammar is in docs/runtime.md; python/fa3/facts.py follows it too (a
 * fuzz test checks that both accept the same files with the same values). */
static const char *const kHeader = "fa3-kernel-facts";

enum key_type { T_NAME, T_FILE, T_DTYPE, T_GRID, T_PARAMS, T_INT, T_REAL };

/* One key: where it goes in fa3rt_facts and its range (shared by the parser
 * and by fa3rt_fwd_plan's check of a caller's struct). */
typedef struct key_rule {
  const char *name;
  enum key_type type;
  int required;
  size_t off;           /* the field in fa3rt_facts */
  long long lo, hi, step; /* T_INT: lo..hi, a multiple of step */
  double rmax;          /* T_REAL: 0 <= v <= rmax (v > 0 with lo 1) */
  const char *range;    /* for messages */
} key_rule;

#define FIELD(f) offsetof(fa3rt_facts, f)
static const key_rule kKeys[] = {
#define FA3RT_FACTS_KEY(key, field, type, required, lo, hi, step, max, range) \
  {#key, T_##type, required, FIELD(field), lo, hi, step, max, range},
#include "fa3rt_abi.def"
};
#undef FIELD
#define NKEYS ((int)(sizeof kKeys / sizeof kKeys[0]))

static int is_blank(char c) { return c == ' ' || c == '\t'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* skips [0-9]+; 0 if there is no digit */
static int skip_digits(const char **p) {
  const char *s = *p;
  while (is_digit(**p)) (*p)++;
  return *p > s;
}

/* -?[0-9]+ (nothing else: no '+', blanks, hex or '_'); saturates far beyond
 * every range, so that a huge number is out of range, not wrapped. */
static int parse_int(const char *s, long long *out) {
  const char *p = s + (*s == '-');
  long long v = 0;
  if (!is_digit(*p)) return 0;
  for (; is_digit(*p); p++)
    if (v < (1LL << 40)) v = v * 10 + (*p - '0');
  if (*p) return 0;
  *out = *s == '-' ? -v : v;
  return 1;
}

/* -?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)? read as by strtod in the C locale
 * (the host program's locale may have another decimal point); correctly
 * rounded, like Python's float(). -0 is 0. */
static int parse_real(const char *s, double *out) {
  const char *p = s + (*s == '-');
  if (!skip_digits(&p)) return 0;
  if (*p == '.' && (p++, !skip_digits(&p))) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!skip_digits(&p)) return 0;
  }
  if (*p) return 0;
  locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  locale_t old = c ? uselocale(c) : (locale_t)0;
  double v = strtod(s, NULL); /* underflow to 0 or a subnormal is fine: no errno check */
  if (c) {
    uselocale(old);
    freelocale(c);
  }
  *out = v == 0 ? 0.0 : v;
  return 1;
}

static int int_ok(const key_rule *k, long long v) {
  return v >= k->lo && v <= k->hi && v % k->step == 0;
}

static int real_ok(const key_rule *k, double v) {
  return isfinite(v) && (k->lo ? v > 0 : v >= 0) && v <= k->rmax;
}

/* s (n bytes of a field, maybe not NUL-terminated) is a C identifier */
static int name_ok(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  if (len == 0 || len == n || is_digit(s[0])) return 0;
  for (size_t i = 0; i < len; i++)
    if (!(s[i] == '_' || is_digit(s[i]) || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= 'A' && s[i] <= 'Z')))
      return 0;
  return 1;
}

/* a file name in the facts file's directory: printable ASCII, no blank, no '/',
 * not "." or ".." (the facts must not point at another directory) */
static int file_ok(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  if (len == 0 || len == n || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] <= ' ' || s[i] > '~' || s[i] == '/') return 0;
  return 1;
}

/* the value's blank-separated words are the ABI's parameter names */
static int params_ok(const char *val, const abi *x) {
  const char *a = val, *b = x->names;
  for (;;) {
    while (is_blank(*a)) a++;
    size_t na = strcspn(a, " \t"), nb = strcspn(b, " ");
    if (na != nb || strncmp(a, b, na)) return 0;
    if (!na) return 1;
    a += na;
    b += nb + (b[nb] == ' ');
  }
}

/* The value of key k (text of facts line `lineno`) into *f; for `params`,
 * which ABI's list it is into *params (1 forward, 2 backward: checked against
 * the key `backward` once the whole text is read). */
static fa3rt_status parse_value(fa3rt_facts *f, const key_rule *k, const char *val, int lineno,
                                int *params) {
  char *field = (char *)f + k->off;
  long long v;
  double d;
  switch (k->type) {
  case T_INT:
    if (!parse_int(val, &v))
      return fail(FA3RT_ERR_FACTS, "facts line %d: %s: '%s' is not an integer (%s)", lineno,
                  k->name, val, k->range);
    if (!int_ok(k, v))
      return fail(FA3RT_ERR_FACTS, "facts line %d: %s: %s is out of range (%s)", lineno, k->name,
                  val, k->range);
    *(int *)(void *)field = (int)v;
    return FA3RT_OK;
  case T_REAL:
    if (!parse_real(val, &d))
      return fail(FA3RT_ERR_FACTS, "facts line %d: %s: '%s' is not a decimal number (%s)",
                  lineno, k->name, val, k->range);
    if (!real_ok(k, d))
      return fail(FA3RT_ERR_FACTS, "facts line %d: %s: %s is out of range (%s)", lineno, k->name,
                  val, k->range);
    *(double *)(void *)field = d;
    return FA3RT_OK;
  case T_NAME:
  case T_FILE:
    if (!(k->type == T_NAME ? name_ok(val, sizeof f->kernel) : file_ok(val, sizeof f->cubin)))
      return fail(FA3RT_ERR_FACTS, "facts line %d: %s: '%s' is not %s", lineno, k->name, val,
                  k->range);
    strcpy(field, val);
    return FA3RT_OK;
  case T_DTYPE:
    if (!strcmp(val, "bf16")) f->dtype = FA3RT_BF16;
    else if (!strcmp(val, "f16")) f->dtype = FA3RT_F16;
    else if (!strcmp(val, "e4m3")) f->dtype = FA3RT_E4M3;
    else
      return fail(FA3RT_ERR_FACTS, "facts line %d: dtype '%s' is not supported (bf16, f16 or "
                  "e4m3)", lineno, val);
    return FA3RT_OK;
  case T_GRID:
    if (!strcmp(val, "tiles")) f->persistent = 0;
    else if (!strcmp(val, "persistent")) f->persistent = 1;
    else
      return fail(FA3RT_ERR_FACTS, "facts line %d: grid '%s' is not one this runtime launches "
                  "(tiles or persistent)", lineno, val);
    return FA3RT_OK;
  case T_PARAMS:
    *params = params_ok(val, &kFwdAbi) ? 1 : params_ok(val, &kBwdAbi) ? 2 : 0;
    if (!*params)
      return fail(FA3RT_ERR_FACTS, "facts line %d: kernel parameter list '%s' is not the ABI "
                  "this runtime launches ('%s'; with backward 1: '%s')", lineno, val,
                  kFwdAbi.names, kBwdAbi.names);
    return FA3RT_OK;
  }
  return FA3RT_OK;
}

/* Every field of f in its range (f from the parser or from a caller); st is
 * the status of a failure. */
static fa3rt_status check_facts(const fa3rt_facts *f, fa3rt_status st) {
  if (f->version < 1 || f->version > FA3RT_FACTS_VERSION)
    return fail(st, "facts.version: %d is out of range (1 to %d)", f->version,
                FA3RT_FACTS_VERSION);
  for (int i = 0; i < NKEYS; i++) {
    const key_rule *k = &kKeys[i];
    const char *field = (const char *)f + k->off;
    int ok = 1;
    switch (k->type) {
    case T_INT: {
      int v = *(const int *)(const void *)field;
      if (!int_ok(k, v))
        return fail(st, "facts.%s: %d is out of range (%s)", k->name, v, k->range);
      break;
    }
    case T_REAL: {
      double v = *(const double *)(const void *)field;
      if (!real_ok(k, v))
        return fail(st, "facts.%s: %g is out of range (%s)", k->name, v, k->range);
      break;
    }
    case T_NAME: ok = name_ok(field, sizeof f->kernel); break;
    case T_FILE: ok = !field[0] || file_ok(field, sizeof f->cubin); break;
    case T_DTYPE:
      ok = f->dtype == FA3RT_BF16 || f->dtype == FA3RT_F16 || f->dtype == FA3RT_E4M3;
      break;
    case T_GRID: ok = f->persistent == 0 || f->persistent == 1; break;
    case T_PARAMS: break;
    }
    if (!ok)
      return fail(st, "facts.%s: not %s", k->name, k->range);
  }
  if (f->causal && f->window_right != 0)
    return fail(st, "facts of kernel '%s': causal 1 needs window_right 0, got %d", f->kernel,
                f->window_right);
  if (f->varlen && f->cluster_m != 1)
    return fail(st, "facts of kernel '%s': varlen 1 needs cluster_m 1 (no clusters)",
                f->kernel);
  if (f->backward && (f->varlen || f->cluster_m != 1 || f->persistent))
    return fail(st, "facts of kernel '%s': backward 1 needs %s (the backward kernel takes "
                "fixed-length batches, one CTA per kv block, head and batch)", f->kernel,
                f->varlen ? "varlen 0" : f->cluster_m != 1 ? "cluster_m 1" : "grid tiles");
  /* the forward kernels sum nothing across CTAs (a split kernel's merge has
     a fixed order): only the backward's dq has an order to fix */
  if (f->deterministic && !f->backward)
    return fail(st, "facts of kernel '%s': deterministic 1 needs backward 1 (the deterministic "
                "variant is the backward kernel's: its dq summed in a fixed order)", f->kernel);
  /* a decoding kernel's grid is its tiles times the splits, one CTA each,
     over fixed-length batches */
  if ((f->split_kv || f->pack_gqa) &&
      (f->backward || f->varlen || f->cluster_m != 1 || f->persistent))
    return fail(st, "facts of kernel '%s': %s 1 needs %s (a decoding kernel runs one CTA "
                "per tile and split over fixed-length batches)", f->kernel,
                f->split_kv ? "split_kv" : "pack_gqa",
                f->backward ? "backward 0" : f->varlen ? "varlen 0"
                : f->cluster_m != 1 ? "cluster_m 1" : "grid tiles");
  /* a paged packed batch's kernel: one CTA per tile over a varlen batch
     (with varlen 1, split_kv and pack_gqa are refused above) */
  if (f->paged_kv && (!f->varlen || f->persistent))
    return fail(st, "facts of kernel '%s': paged_kv 1 needs %s (a packed batch's kernel that "
                "reads its page table one CTA per tile)", f->kernel,
                !f->varlen ? "varlen 1" : "grid tiles");
  /* the producer warps' copies of small pages are paged kernels' */
  if (f->paged_copy && !f->split_kv && !f->paged_kv)
    return fail(st, "facts of kernel '%s': paged_copy 1 needs split_kv 1 or paged_kv 1 (the "
                "paged kernels' producer warps copy small pages)", f->kernel);
  if (f->copy_rows && !f->paged_copy)
    return fail(st, "facts of kernel '%s': copy_rows %d needs paged_copy 1 (the most rows "
                "of a page its producer warps copy)", f->kernel, f->copy_rows);
  /* FP8: the compiler builds the fixed-length forward and the decoding
     kernel (split_kv, pack_gqa; head dim 64 or 128) */
  if (f->dtype == FA3RT_E4M3 && (f->backward || f->varlen))
    return fail(st, "facts of kernel '%s': dtype e4m3 needs %s 0 (the compiler builds no FP8 "
                "%s yet)", f->kernel, f->backward ? "backward" : "varlen",
                f->backward ? "backward" : "varlen kernel");
  if (f->dtype == FA3RT_E4M3 && f->split_kv && f->head_dim > 128)
    return fail(st, "facts of kernel '%s': dtype e4m3 with split_kv 1 needs head_dim 64 or 128, "
                "got %d (the compiler builds FP8 decoding kernels of those head dims only)",
                f->kernel, f->head_dim);
  if (f->dtype == FA3RT_E4M3 &&
      ((f->head_dim != 64 && f->head_dim != 128 && f->head_dim != 256) ||
       (f->head_dim_v != 64 && f->head_dim_v != 128 && f->head_dim_v != 256)))
    return fail(st, "facts of kernel '%s': dtype e4m3 needs head_dim and head_dim_v 64, 128 or 256, "
                "got %d and %d (the compiler builds FP8 kernels of those head dims only)",
                f->kernel, f->head_dim, f->head_dim_v);
  if (f->dtype == FA3RT_E4M3 && f->head_dim != f->head_dim_v)
    return fail(st, "facts of kernel '%s': dtype e4m3 needs head_dim_v equal to head_dim, got "
                "%d and %d (the compiler builds FP8 kernels of equal head dims only)",
                f->kernel, f->head_dim, f->head_dim_v);
  /* FP8's descales are per 128-row block of q rows and per kv block (k):
     tiles of 128 rows by 128, 160, 192 or 224 keys (more than 128 at head
     dim 64 or 128: 256's shared memory has no room), or 192 rows (head dim
     64) by 128 or 160, each warpgroup's 64 rows inside one of q's blocks;
     no clusters (the compiler's tiles; with more keys than 128 the kernel
     scales each column by its key's 128-key block descale) */
  const int fp8_keys_ok = f->block_n % 32 == 0 && f->block_n >= 128 &&
                          f->block_n <= (f->block_m == 192 ? 160 : 224) &&
                          (f->block_n == 128 || f->head_dim <= 128);
  const int fp8_tile_ok =
      fp8_keys_ok && (f->block_m == 128 || (f->block_m == 192 && f->head_dim == 64) ||
                      (f->block_m == 64 && f->pack_gqa));
  if (f->dtype == FA3RT_E4M3 && (!fp8_tile_ok || f->cluster_m != 1)) {
    char got[200];
    if (!fp8_tile_ok)
      snprintf(got, sizeof got, "block_m 128 with block_n 128, 160, 192 or 224 (above 128 at "
               "head dim 64 or 128), or block_m 192 (head dim 64) with block_n 128 or 160, got %d "
               "and %d", f->block_m, f->block_n);
    else
      snprintf(got, sizeof got, "cluster_m 1, got %d", f->cluster_m);
    return fail(st, "facts of kernel '%s': dtype e4m3 needs %s (the kernel reads q's descale "
                "per 128-row block and k's per 128 keys, and the compiler builds e4m3 kernels "
                "only with those tiles and no cluster; another tile would read descales out "
                "of bounds)", f->kernel, got);
  }
  return FA3RT_OK;
}

fa3rt_status fa3rt_facts_parse(const char *text, size_t len, fa3rt_facts *out) {
  clear_error();
  if (!text || !out) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_facts_parse: NULL argument");
  if (len > FA3RT_FACTS_MAX_BYTES)
    return fail(FA3RT_ERR_FACTS, "facts text: %zu bytes is too long (at most %d)", len,
                FA3RT_FACTS_MAX_BYTES);
  fa3rt_facts f;
  memset(&f, 0, sizeof f);
  f.cluster_m = 1; /* optional keys' defaults (cubin "") */
  int seen[NKEYS] = {0};
  int have_header = 0;
  int params = 0, params_line = 0; /* which ABI's list `params` is, on which line */
  int lineno = 0;
  char line[FA3RT_FACTS_MAX_LINE + 1];
  for (size_t pos = 0; pos < len;) {
    size_t e = pos;
    while (e < len && text[e] != '\n') e++;
    size_t n = e - pos;
    lineno++;
    if (n > FA3RT_FACTS_MAX_LINE)
      return fail(FA3RT_ERR_FACTS, "facts line %d: %zu bytes is too long (at most %d)", lineno,
                  n, FA3RT_FACTS_MAX_LINE);
    memcpy(line, text + pos, n);
    pos = e + 1;
    if (n && line[n - 1] == '\r') n--; /* CRLF */
    line[n] = 0;
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)line[i];
      if (c != '\t' && (c < 0x20 || c > 0x7e))
        return fail(FA3RT_ERR_FACTS, "facts line %d: byte 0x%02x at column %zu is not "
                    "printable ASCII or a tab", lineno, c, i + 1);
    }
    /* comment, surrounding blanks, then "key [value]" */
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *key = line;
    while (is_blank(*key)) key++;
    size_t m = strlen(key);
    while (m && is_blank(key[m - 1])) key[--m] = 0;
    if (!*key) continue;
    char *val = key + strcspn(key, " \t");
    if (*val) {
      *val++ = 0;
      while (is_blank(*val)) val++;
    }
    if (!have_header) {
      long long v;
      if (strcmp(key, kHeader))
        return fail(FA3RT_ERR_FACTS,
                    "not a facts file: the first line must be 'fa3-kernel-facts <version>', "
                    "found '%s'", key);
      if (!parse_int(val, &v))
        return fail(FA3RT_ERR_FACTS, "facts line %d: version: '%s' is not an integer", lineno,
                    val);
      if (v > FA3RT_FACTS_VERSION)
        return fail(FA3RT_ERR_FACTS, "facts line %d: version %s is newer than this runtime "
                    "supports (%d): update libfa3rt", lineno, val, FA3RT_FACTS_VERSION);
      if (v < 1)
        return fail(FA3RT_ERR_FACTS, "facts line %d: version: %s is out of range (1 to %d)",
                    lineno, val, FA3RT_FACTS_VERSION);
      f.version = (int)v;
      have_header = 1;
      continue;
    }
    if (!strcmp(key, kHeader))
      return fail(FA3RT_ERR_FACTS, "facts line %d: duplicate key '%s'", lineno, key);
    int k = -1;
    for (int i = 0; i < NKEYS; i++)
      if (!strcmp(key, kKeys[i].name)) k = i;
    if (k < 0) continue; /* unknown key: forward compatible */
    if (seen[k]) return fail(FA3RT_ERR_FACTS, "facts line %d: duplicate key '%s'", lineno, key);
    seen[k] = 1;
    if (!*val) return fail(FA3RT_ERR_FACTS, "facts line %d: key '%s' has no value", lineno, key);
    fa3rt_status st = parse_value(&f, &kKeys[k], val, lineno, &params);
    if (st) return st;
    if (kKeys[k].type == T_PARAMS) params_line = lineno;
  }
  if (!have_header)
    return fail(FA3RT_ERR_FACTS, "not a facts file: no 'fa3-kernel-facts <version>' line");
  char missing[512] = "";
  for (int i = 0; i < NKEYS; i++)
    if (kKeys[i].required && !seen[i]) {
      if (missing[0]) strncat(missing, ", ", sizeof missing - strlen(missing) - 1);
      strncat(missing, kKeys[i].name, sizeof missing - strlen(missing) - 1);
    }
  if (missing[0])
    return fail(FA3RT_ERR_FACTS, "facts of kernel '%s' lack required key(s): %s",
                f.kernel[0] ? f.kernel : "?", missing);
  /* each value was checked on its line; this adds the rules across keys */
  if (params != (f.backward ? 2 : 1))
    return fail(FA3RT_ERR_FACTS, "facts line %d: params is the %s kernel's parameter list but "
                "the facts say backward %d, whose list is '%s'", params_line,
                params == 2 ? "backward" : "forward", f.backward, abi_of(&f)->names);
  fa3rt_status st = check_facts(&f, FA3RT_ERR_FACTS);
  if (st) return st;
  *out = f;
  return FA3RT_OK;
}

/* Reads at most max bytes (so that a device file or a FIFO cannot make it read
 * forever). */
static fa3rt_status read_file(const char *path, const char *what, size_t max, char **data,
                              size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return fail(FA3RT_ERR_IO, "cannot open %s '%s': %s", what, path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      if (n > max) {
        free(buf);
        fclose(fp);
        return fail(FA3RT_ERR_IO, "%s '%s' is larger than %zu bytes", what, path, max);
      }
      cap = cap ? 2 * cap : 1 << 16;
      char *nb = realloc(buf, cap + 1);
      if (!nb) { free(buf); fclose(fp); return fail(FA3RT_ERR_OUT_OF_MEMORY, "out of host memory reading '%s'", path); }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, fp);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(fp);
  fclose(fp);
  if (err) { free(buf); return fail(FA3RT_ERR_IO, "error reading %s '%s'", what, path); }
  if (n > max) {
    free(buf);
    return fail(FA3RT_ERR_IO, "%s '%s' is larger than %zu bytes", what, path, max);
  }
  buf[n] = 0;
  *data = buf;
  *size = n;
  return FA3RT_OK;
}

fa3rt_status fa3rt_facts_load(const char *path, fa3rt_facts *out) {
  clear_error();
  if (!path || !out) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_facts_load: NULL argument");
  char *text;
  size_t n;
  fa3rt_status st = read_file(path, "facts file", FA3RT_FACTS_MAX_BYTES, &text, &n);
  if (st) return st;
  st = fa3rt_facts_parse(text, n, out);
  free(text);
  if (st) {
    char msg[sizeof g_err];
    snprintf(msg, sizeof msg, "%s", g_err);
    return fail(st, "%s: %s", path, msg);
  }
  return FA3RT_OK;
}

/* ------------------------------------------------------------------------ */
/* argument validation                                                       */
/* ------------------------------------------------------------------------ */

static const char *const kDimNames[4] = {"B", "H", "S", "D"};
#define ADDR_END ((uint64_t)1 << 63) /* device memory lies below (pointers are i64 in kernels) */
#define TMA_STRIDE_END ((int64_t)1 << 40) /* TMA strides are below 2^40 bytes */

/* acc += a * b, 0 on signed overflow */
static int mul_add(int64_t *acc, int64_t a, int64_t b) {
  int64_t p;
  return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(*acc, p, acc);
}

/* The element index of a non-empty tensor's last element by the strides
 * eff (INT64_MAX where it overflows). */
static int64_t last_index(const fa3rt_tensor *t, const int64_t eff[4]) {
  int64_t last = 0;
  for (int i = 0; i < 4; i++)
    if (!mul_add(&last, t->shape[i] - 1, eff[i])) return INT64_MAX;
  return last;
}

/* Who reads a tensor that check_tensor checks, for its messages: TMA, or
 * the 16-byte row accesses of the backward's helper kernels (o, dq), of
 * its kernel's dK/dV copy-out (dk, dv), or of a decoding kernel's
 * <kernel>_append (k_new, v_new), by the same rules. */
enum { BY_HELPERS = 0, BY_TMA = 1, BY_APPEND = 2, BY_QUANTIZE = 3, BY_COPY_OUT = 4 };

/* Checks one tensor and sets eff[] to the strides used for it: a dim of extent 1
 * may carry any stride, replaced by one that spans the inner dims (it never fails
 * the alignment checks, and TMA sees a plain layout). tma: BY_TMA, or
 * BY_HELPERS / BY_APPEND: a tensor that only the backward's helper kernels
 * (o, dq) or the cache append (k_new, v_new) access, by the same 16-byte
 * rules, which the messages then give as theirs. */
static fa3rt_status check_tensor(const char *name, const fa3rt_tensor *t, int64_t elem,
                                 int64_t eff[4], int tma) {
  const char *why_ptr = tma == BY_TMA ? "TMA needs 16-byte aligned tensors"
                        : tma == BY_QUANTIZE ? "fa3rt_quantize's lanes access whole 16-byte "
                                               "aligned rows"
                        : tma == BY_APPEND ? "the cache append (<kernel>_append) copies its "
                                             "rows 16 bytes at a time"
                        : tma == BY_COPY_OUT ? "the backward kernel copies dK and dV out 16 "
                                               "bytes at a time"
                                           : "fa3rt_bwd's helper kernels access its rows 16 "
                                             "bytes at a time";
  const char *why_stride = tma == BY_TMA ? "TMA"
                           : tma == BY_QUANTIZE ? "16-byte aligned rows for fa3rt_quantize"
                           : tma == BY_APPEND ? "16-byte aligned rows for the cache append "
                                                "(<kernel>_append)"
                           : tma == BY_COPY_OUT ? "16-byte aligned rows for the backward "
                                                  "kernel's dK/dV copy-out"
                                              : "16-byte aligned rows for fa3rt_bwd's helper "
                                                "kernels";
  for (int i = 0; i < 4; i++) {
    eff[i] = t->strides[i];
    if (t->shape[i] < 0 || t->shape[i] > INT32_MAX) /* the kernel takes i32 extents */
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s.shape[%d] (%s): %lld is out of range "
                  "(0 to 2^31-1)", name, i, kDimNames[i], (long long)t->shape[i]);
  }
  if (t->shape[0] == 0 || t->shape[1] == 0 || t->shape[2] == 0) return FA3RT_OK; /* empty */
  if (!t->ptr) return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer is NULL", name);
  if (t->ptr % 16)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer 0x%llx is not 16-byte aligned (%s)",
                name, (unsigned long long)t->ptr, why_ptr);
  if (t->ptr >= ADDR_END)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer: 0x%llx is out of range (below 2^63: "
                "a device address)", name, (unsigned long long)t->ptr);
  if (t->strides[3] != 1 && t->shape[3] != 1)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "%s stride of the head dim (D) is %lld elements; it must be 1 (contiguous rows)",
                name, (long long)t->strides[3]);
  eff[3] = 1;
  for (int i = 2; i >= 0; i--) {
    const char *dim = kDimNames[i];
    int64_t s = t->strides[i];
    if (t->shape[i] == 1) { /* the largest extent * stride of the inner dims */
      s = 1;
      for (int j = i + 1; j < 4; j++) {
        int64_t e = 0;
        if (!mul_add(&e, t->shape[j], eff[j]) || e >= TMA_STRIDE_END / elem)
          return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s dims inside %s (extent 1) span 2^40 bytes "
                      "or more (%s)", name, dim,
                      tma == BY_TMA ? "TMA takes strides below 2^40 bytes"
                      : "fa3rt takes strides below 2^40 bytes, TMA's limit, for every tensor");
        if (e > s) s = e;
      }
    } else if (s <= 0 || s >= TMA_STRIDE_END / elem) {
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s.strides[%d] (%s): %lld is out of range "
                  "(1 to %lld elements: %s)", name, i, dim, (long long)s,
                  (long long)(TMA_STRIDE_END / elem - 1),
                  tma == BY_TMA ? "TMA takes strides below 2^40 bytes"
                      : "fa3rt takes strides below 2^40 bytes, TMA's limit, for every tensor");
    }
    if ((s * elem) % 16)
      return fail(FA3RT_ERR_INVALID_ARGUMENT,
                  "%s stride of dim %s is %lld elements = %lld bytes; it must be a multiple of "
                  "16 bytes (%s)", name, dim, (long long)s, (long long)(s * elem), why_stride);
    eff[i] = s;
  }
  /* the last element's byte offset: all of the tensor below 2^63, so that no
     address or offset computed from it overflows */
  const int64_t last = last_index(t, eff);
  if (last > (int64_t)((ADDR_END - t->ptr) / (uint64_t)elem) - 1)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s at 0x%llx with shape [%lld,%lld,%lld,%lld] and "
                "strides [%lld,%lld,%lld,%lld] reaches past 2^63 bytes", name,
                (unsigned long long)t->ptr, (long long)t->shape[0], (long long)t->shape[1],
                (long long)t->shape[2], (long long)t->shape[3], (long long)t->strides[0],
                (long long)t->strides[1], (long long)t->strides[2], (long long)t->strides[3]);
  return FA3RT_OK;
}

/* The rows a packed batch's tile grid covers: max_seqlen_q, which no
 * sequence can exceed the packed tensor's Tq rows by (an over-estimate, which
 * FlashAttention takes, would only add empty tiles). The kernel gets the same
 * value (maxSeqlenQ), so the grid and its tile numbering agree. */
static int32_t varlen_grid_rows(const fa3rt_fwd_args *a, int64_t tq) {
  return a->max_seqlen_q < tq ? a->max_seqlen_q : (int32_t)tq;
}

/* The packed variable-length fields of a against the kernel: given exactly
 * for a varlen kernel, q, k, v, o as batches of one. A split-KV kernel takes
 * seqused_k alone (each batch's valid keys of its cache: check_seqused_k). */
static fa3rt_status check_varlen(const fa3rt_facts *f, const fa3rt_fwd_args *a) {
  if (!f->varlen) {
    if (a->cu_seqlens_q || a->cu_seqlens_k || a->varlen_batch || a->max_seqlen_q)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s takes fixed-length batches (facts "
                  "varlen 0) but cu_seqlens_q/k, %svarlen_batch or max_seqlen_q is set: use "
                  "a varlen kernel%s", f->kernel, f->split_kv ? "" : "seqused_k, ",
                  f->split_kv ? " (a decoding kernel takes seqused_k alone: each batch's "
                  "valid keys of its cache)" : "");
    if (a->seqused_k && !f->split_kv)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s takes fixed-length batches (facts "
                  "varlen 0) but seqused_k is set: use a varlen kernel, or a decoding kernel "
                  "(facts split_kv 1: fa3-compile --decode) for a cache's valid keys per "
                  "batch", f->kernel);
    return FA3RT_OK;
  }
  if (a->varlen_batch < 0 || a->max_seqlen_q < 0)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "varlen_batch %d and max_seqlen_q %d must be 0 "
                "to 2^31-1", (int)a->varlen_batch, (int)a->max_seqlen_q);
  const struct { const char *name; uint64_t ptr; int optional; } arrays[] = {
      {"cu_seqlens_q", a->cu_seqlens_q, 0},
      {"cu_seqlens_k", a->cu_seqlens_k, 0},
      {"seqused_k", a->seqused_k, 1}};
  for (int i = 0; i < 3; i++) {
    uint64_t p = arrays[i].ptr;
    if (!p && arrays[i].optional) continue;
    if (!p)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer is NULL (kernel %s takes a packed "
                  "variable-length batch)", arrays[i].name, f->kernel);
    const uint64_t n = (uint64_t)a->varlen_batch + 1 - (uint64_t)arrays[i].optional;
    if (p % 4 || p >= ADDR_END - 4 * n)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer 0x%llx is not a 4-byte aligned "
                  "device address of %llu int32 below 2^63", arrays[i].name,
                  (unsigned long long)p, (unsigned long long)n);
  }
  /* (with a page table k and v are the page pool: check_paged) */
  const fa3rt_tensor *ts[4] = {&a->q, &a->o, &a->k, &a->v};
  const char *names[4] = {"q", "o", "k", "v"};
  for (int i = 0; i < (a->page_table ? 2 : 4); i++)
    if (ts[i]->shape[0] != 1)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s.shape[0] is %lld; a packed batch's tensors "
                  "are [1, H, T, D] (FlashAttention's [T, H, D])", names[i],
                  (long long)ts[i]->shape[0]);
  return FA3RT_OK;
}

/* A split-KV kernel's seqused_k (FlashAttention's cache_seqlens): 0, or
 * int32 [B] on the device, 4-byte aligned (varlen's rule), all of it below
 * 2^63. Its values, 0 to Skv, are read on the GPU only: the caller's
 * contract, as varlen's lengths are. */
static fa3rt_status check_seqused_k(const fa3rt_facts *f, const fa3rt_fwd_args *a, int64_t B) {
  const uint64_t p = a->seqused_k;
  if (!f->split_kv || !p) return FA3RT_OK;
  if (p % 4 || p >= ADDR_END - 4 * (uint64_t)B)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "seqused_k pointer 0x%llx is not a 4-byte aligned "
                "device address of %lld int32 (one per batch) below 2^63",
                (unsigned long long)p, (long long)B);
  return FA3RT_OK;
}

/* A paged cache (FlashAttention's page_table): the three fields all 0
 * (k and v are the caches themselves, *skv their rows), or, for a split_kv
 * kernel, a page table over the page pool k and v (check_qkv with paged),
 * whose page size (k.shape[2]) the kernel's block_n loads whole pages of or
 * whole blocks in: *skv becomes the logical key length. The entries are
 * read on the GPU only: the caller's contract. */
static fa3rt_status check_paged(const fa3rt_facts *f, const fa3rt_fwd_args *a, int64_t B,
                                int64_t *skv) {
  const uint64_t p = a->page_table;
  if (!p) {
    if (a->page_table_stride || a->paged_seqlen_k)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "page_table_stride %d and paged_seqlen_k %d must "
                  "be 0 without a page_table (a contiguous cache: k and v are [B, Hkv, Skv, D])",
                  (int)a->page_table_stride, (int)a->paged_seqlen_k);
    return FA3RT_OK;
  }
  if (!f->split_kv && !f->paged_kv)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s takes no page table (facts split_kv 0, "
                "paged_kv 0): a paged KV cache needs a decoding kernel (facts split_kv 1: "
                "fa3-compile --decode, Fa3AttentionSpec.decode) or, for a packed batch, a "
                "paged varlen kernel (facts paged_kv 1: fa3-compile --varlen --paged, "
                "Fa3AttentionSpec.pagedKv)", f->kernel);
  const int64_t ps = a->k.shape[2], pages = a->k.shape[0], bn = f->block_n;
  if (ps < 1 || (bn % ps && ps % bn))
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "page size %lld (k.shape[2]: the rows of a page of "
                "the pool [num_pages, Hkv, page_size, D]) must divide block_n %lld or be a "
                "multiple of it: kernel %s loads each block of %lld keys as pages of "
                "min(page_size, %lld) rows (1 to 256 powers of two divide or are divided by a "
                "power-of-two block_n)", (long long)ps, (long long)bn, f->kernel, (long long)bn,
                (long long)bn);
  if (pages == 0)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "k and v have no pages (k.shape[0] = 0): a page "
                "table needs a pool of at least one page");
  const int64_t stride = a->page_table_stride;
  if (stride < 1)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "page_table_stride: %lld is out of range (1 to "
                "2^31-1: the entries from one batch's row of the page table to the next)",
                (long long)stride);
  const int64_t most = stride * ps; /* below 2^31 * 2^31 */
  /* a packed batch: the table's varlen_batch rows of pages are one list,
     whose rows (the packed rows of k and v) the kernel counts in i32 */
  if (f->varlen && a->paged_seqlen_k)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "paged_seqlen_k: %d must be 0 for a packed batch "
                "(kernel %s: its sequences' keys are cu_seqlens_k / seqused_k's)",
                (int)a->paged_seqlen_k, f->kernel);
  if (f->varlen && (double)B * (double)most > (double)INT32_MAX)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "varlen_batch %lld * page_table_stride %lld * "
                "page_size %lld rows of pages is out of range (at most 2^31-1: the kernel's "
                "i32 row index)", (long long)B, (long long)stride, (long long)ps);
  int64_t n = a->paged_seqlen_k;
  if (n < 0 || n > most || n > INT32_MAX)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "paged_seqlen_k: %lld is out of range (0: "
                "page_table_stride %lld * page_size %lld; else 1 to that and to 2^31-1: a row "
                "of the page table holds ceil(paged_seqlen_k / page_size) pages)", (long long)n,
                (long long)stride, (long long)ps);
  if (n == 0 && most > INT32_MAX)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "page_table_stride %lld * page_size %lld = %lld keys "
                "is out of range (the kernel's Skv is at most 2^31-1): set paged_seqlen_k to the "
                "caches' logical length", (long long)stride, (long long)ps, (long long)most);
  if (n == 0) n = most;
  const uint64_t entries = (uint64_t)B * (uint64_t)stride; /* below 2^62 */
  if (p % 4 || p >= ADDR_END || entries > (ADDR_END - p) / 4)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "page_table pointer 0x%llx is not a 4-byte aligned "
                "device address of B %lld * page_table_stride %lld int32 below 2^63",
                (unsigned long long)p, (long long)B, (long long)stride);
  /* (a packed batch's Skv: its packed rows, Tk) */
  *skv = f->varlen ? B * most : n;
  return FA3RT_OK;
}

/* Bytes of an element of q, k, v (and k_new, v_new) of a kernel of dtype d;
 * o's type (out_dtype): the same, but bf16 for an FP8 kernel. */
static int64_t elem_bytes(fa3rt_dtype d) { return d == FA3RT_E4M3 ? 1 : 2; }
static fa3rt_dtype out_dtype(fa3rt_dtype d) { return d == FA3RT_E4M3 ? FA3RT_BF16 : d; }

/* The checks every launch starts with: the facts (a caller may fill them),
 * the kernel's kind (fa3rt_fwd and fa3rt_bwd each take their own) and the
 * dtype. */
static fa3rt_status check_kind(const fa3rt_facts *f, int backward, fa3rt_dtype dtype) {
  fa3rt_status st = check_facts(f, FA3RT_ERR_INVALID_ARGUMENT);
  if (st) return st;
  if (f->backward && !backward)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s is a backward kernel (facts backward 1): "
                "launch it with fa3rt_bwd", f->kernel);
  if (!f->backward && backward)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s is a forward kernel (facts backward 0): "
                "fa3rt_bwd launches backward kernels (facts backward 1: fa3-compile "
                "--backward)", f->kernel);
  if (dtype != FA3RT_BF16 && dtype != FA3RT_F16 && dtype != FA3RT_E4M3)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "invalid dtype %d (expected FA3RT_BF16, FA3RT_F16 "
                "or FA3RT_E4M3)", (int)dtype);
  if (backward && dtype == FA3RT_E4M3)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "dtype e4m3: fa3rt_bwd takes bf16 or f16 (the "
                "compiler builds no FP8 backward yet; kernel %s is %s)", f->kernel,
                fa3rt_dtype_name(f->dtype));
  if (dtype != f->dtype)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "dtype %s does not match kernel %s (dtype %s)",
                fa3rt_dtype_name(dtype), f->kernel, fa3rt_dtype_name(f->dtype));
  return FA3RT_OK;
}

/* q, k, v (each through check_tensor) against each other and the kernel.
 * paged: k and v are a page pool [num_pages, Hkv, page_size, D], whose
 * pages are not q's batches (check_paged checks the rest). */
static fa3rt_status check_qkv(const fa3rt_facts *f, const fa3rt_tensor *q, const fa3rt_tensor *k,
                              const fa3rt_tensor *v, int paged) {
  const char *kn = f->kernel;
  /* each below 2^31 (check_tensor) */
  const int64_t B = q->shape[0], Hq = q->shape[1];
  const int64_t Hkv = k->shape[1], Skv = k->shape[2];
  if (q->shape[3] != f->head_dim)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "q head dim (shape[3]) is %lld but kernel %s has head_dim %d",
                (long long)q->shape[3], kn, f->head_dim);
  if (k->shape[3] != f->head_dim)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "k head dim (shape[3]) is %lld but kernel %s has head_dim %d",
                (long long)k->shape[3], kn, f->head_dim);
  if (v->shape[3] != f->head_dim_v)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "v head dim (shape[3]) is %lld but kernel %s has head_dim_v %d",
                (long long)v->shape[3], kn, f->head_dim_v);
  if (paged && (v->shape[0] != k->shape[0] || v->shape[1] != Hkv || v->shape[2] != Skv))
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "k and v page pools differ: k has %lld pages of %lld rows and Hkv=%lld; v has "
                "%lld pages of %lld rows and Hkv=%lld (a paged cache's [num_pages, Hkv, "
                "page_size, D])", (long long)k->shape[0], (long long)Skv, (long long)Hkv,
                (long long)v->shape[0], (long long)v->shape[2], (long long)v->shape[1]);
  if (!paged && (k->shape[0] != B || v->shape[0] != B))
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "batch sizes differ: q %lld, k %lld, v %lld",
                (long long)B, (long long)k->shape[0], (long long)v->shape[0]);
  if (v->shape[1] != Hkv || v->shape[2] != Skv)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "k and v differ: k has Hkv=%lld, Skv=%lld; v has %lld, %lld", (long long)Hkv,
                (long long)Skv, (long long)v->shape[1], (long long)v->shape[2]);
  if (Hkv == 0 && Hq > 0)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "k and v have no heads (Hkv = 0) but q has %lld",
                (long long)Hq);
  if (Hkv > 0 && Hq % Hkv)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "Hq = %lld is not a multiple of Hkv = %lld (GQA/MQA needs Hq %% Hkv == 0)",
                (long long)Hq, (long long)Hkv);
  return FA3RT_OK;
}

/* t (o, dout, dk, dv) has the shape [B, H, S, D]. */
static fa3rt_status check_shape(const char *name, const fa3rt_tensor *t, int64_t B, int64_t H,
                                int64_t S, int64_t D) {
  if (t->shape[0] != B || t->shape[1] != H || t->shape[2] != S || t->shape[3] != D)
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "%s shape [B,H,S,D] = [%lld,%lld,%lld,%lld] but must be [%lld,%lld,%lld,%lld]",
                name, (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2],
                (long long)t->shape[3], (long long)B, (long long)H, (long long)S, (long long)D);
  return FA3RT_OK;
}

/* The strides of fa3rt_fwd's tensors (check_tensor's eff), in this order. */
enum { FQ, FK, FV, FO, FKNEW, FVNEW, NFWD };

static int tensor_is_zero(const fa3rt_tensor *t) {
  if (t->ptr) return 0;
  for (int i = 0; i < 4; i++)
    if (t->shape[i] || t->strides[i]) return 0;
  return 1;
}

/* [p, p + pn) and [q, q + qn) (byte ranges below 2^63) share a byte */
static int overlaps(uint64_t p, uint64_t pn, uint64_t q, uint64_t qn) {
  return pn && qn && p < q + qn && q < p + pn;
}

/* A left-padded cache (FlashAttention's cache_leftpad): 0, or, for a
 * split_kv kernel, int32 [B] on the device, 4-byte aligned, below 2^63,
 * apart from seqlens_out (which the append writes while the attention reads
 * both). Batch b's keys are then rows leftpad_k[b] .. seqused_k[b] - 1 of
 * its cache: an offset of the kernel's K/V rows, which a paged cache's
 * pages would have to be aligned to, so with a page table only where every
 * batch's keys lie in its first page (paged_seqlen_k at most the page size:
 * FlashAttention's cache_batch_idx, a page of the whole cache a batch).
 * The values, 0 to seqused_k[b], are read on the GPU only (the caller's
 * contract; the kernel clamps them into it). */
static fa3rt_status check_leftpad_k(const fa3rt_facts *f, const fa3rt_fwd_args *a, int64_t B,
                                    int64_t skv) {
  const uint64_t p = a->leftpad_k;
  if (!p) return FA3RT_OK;
  if (!f->split_kv)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s takes no leftpad_k (facts split_kv 0): "
                "a left-padded KV cache needs a decoding kernel (facts split_kv 1: fa3-compile "
                "--decode, Fa3AttentionSpec.decode)", f->kernel);
  if (p % 4 || p >= ADDR_END - 4 * (uint64_t)B)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "leftpad_k pointer 0x%llx is not a 4-byte aligned "
                "device address of %lld int32 (one per batch) below 2^63",
                (unsigned long long)p, (long long)B);
  if (a->page_table && skv > a->k.shape[2])
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "leftpad_k with a page table whose batches span "
                "pages (logical Skv %lld > page_size %lld): a left-padded cache's blocks of "
                "keys start at any row, which only one page a batch holds whole (as "
                "FlashAttention-3, which takes no cache_leftpad with a paged cache); give a "
                "contiguous cache, or pages of the whole cache", (long long)skv,
                (long long)a->k.shape[2]);
  if (a->seqlens_out && overlaps(p, 4 * (uint64_t)B, a->seqlens_out, 4 * (uint64_t)B))
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "leftpad_k (0x%llx) overlaps seqlens_out (0x%llx), "
                "which the append writes while the attention reads leftpad_k; give it memory of "
                "its own", (unsigned long long)p, (unsigned long long)a->seqlens_out);
  return FA3RT_OK;
}

/* New keys and values to append (k_new, v_new, seqlens_out: all zero, no
 * append; FlashAttention's flash_attn_with_kvcache(k=, v=)): for a split_kv
 * kernel (whose cubin holds <kernel>_append), k_new [B, Hkv, Snew, D] and
 * v_new [B, Hkv, Snew, Dv] by the 16-byte row rules (check_tensor, their
 * strides into eff), Snew at most the logical Skv, seqused_k given (where
 * the rows go) and seqlens_out where rows are appended: int32 [B], 4-byte
 * aligned, below 2^63, apart from seqused_k and the page table (the
 * append reads those while it writes seqlens_out). *snew: Snew (0 without
 * an append). The lengths are read on the GPU only. */
static fa3rt_status check_append(const fa3rt_facts *f, const fa3rt_fwd_args *a, int64_t B,
                                 int64_t Hkv, int64_t Skv, int64_t eff[NFWD][4],
                                 int64_t *snew) {
  *snew = 0;
  if (tensor_is_zero(&a->k_new) && tensor_is_zero(&a->v_new) && !a->seqlens_out)
    return FA3RT_OK;
  if (!f->split_kv)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s appends no new keys to a cache (facts "
                "split_kv 0) but k_new, v_new or seqlens_out is set: appending to a KV cache "
                "needs a decoding kernel (facts split_kv 1: fa3-compile --decode, "
                "Fa3AttentionSpec.decode), whose cubin holds %s_append", f->kernel, f->kernel);
  fa3rt_status st;
  const int64_t elem = elem_bytes(f->dtype); /* the cache's */
  if ((st = check_tensor("k_new", &a->k_new, elem, eff[FKNEW], BY_APPEND)) ||
      (st = check_tensor("v_new", &a->v_new, elem, eff[FVNEW], BY_APPEND)))
    return st;
  const int64_t n = a->k_new.shape[2];
  if (a->k_new.shape[0] != B || a->k_new.shape[1] != Hkv || a->k_new.shape[3] != f->head_dim)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "k_new shape [B,H,S,D] = [%lld,%lld,%lld,%lld] but "
                "must be [B, Hkv, Snew, D] = [%lld,%lld,Snew,%d] (q's B, the cache's Hkv, the "
                "kernel's head_dim)", (long long)a->k_new.shape[0], (long long)a->k_new.shape[1],
                (long long)n, (long long)a->k_new.shape[3], (long long)B, (long long)Hkv,
                f->head_dim);
  if ((st = check_shape("v_new", &a->v_new, B, Hkv, n, f->head_dim_v))) return st;
  if (!a->seqused_k)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "appending k_new and v_new needs seqused_k: each "
                "batch's rows before the append, where its new rows go (FlashAttention's "
                "cache_seqlens, which it requires with new keys too)");
  if (n > Skv)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "k_new has Snew = %lld rows a batch but the cache "
                "holds Skv = %lld keys (its logical length): seqused_k[b] + Snew <= Skv is the "
                "caller's contract", (long long)n, (long long)Skv);
  const int runs = B > 0 && n > 0 && Hkv > 0;
  const uint64_t p = a->seqlens_out, bytes = 4 * (uint64_t)B;
  if (runs && !p)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "seqlens_out pointer is NULL: appending %lld rows a "
                "batch writes each batch's key count after the append, seqused_k[b] + Snew, "
                "into it (int32 [B] of device memory, 4-byte aligned), which the attention "
                "reads", (long long)n);
  if (p) {
    if (p % 4 || p >= ADDR_END - bytes)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "seqlens_out pointer 0x%llx is not a 4-byte "
                  "aligned device address of %lld int32 (one per batch) below 2^63",
                  (unsigned long long)p, (long long)B);
    if (overlaps(p, bytes, a->seqused_k, bytes))
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "seqlens_out (0x%llx, %lld int32) overlaps "
                  "seqused_k (0x%llx): the append reads each batch's rows before it from "
                  "seqused_k while it writes seqlens_out; give it memory of its own",
                  (unsigned long long)p, (long long)B, (unsigned long long)a->seqused_k);
    if (a->page_table && overlaps(p, bytes, a->page_table,
                                  4 * (uint64_t)B * (uint64_t)a->page_table_stride))
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "seqlens_out (0x%llx, %lld int32) overlaps the "
                  "page table (0x%llx, B %lld * page_table_stride %d int32), which the append "
                  "reads while it writes seqlens_out; give it memory of its own",
                  (unsigned long long)p, (long long)B, (unsigned long long)a->page_table,
                  (long long)B, (int)a->page_table_stride);
  }
  *snew = n;
  return FA3RT_OK;
}

/* The softmax scale of a launch: 0 or NaN the facts', else in range. */
static fa3rt_status check_scale(const fa3rt_facts *f, double given, double *scale) {
  *scale = given;
  if (isnan(given) || given == 0)
    *scale = f->scale;
  else if (!(given > 0 && given <= FA3RT_SCALE_MAX))
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "softmax_scale: %g is out of range (0 < scale <= "
                "1e30; 0 or NaN: the kernel's scale)", given);
  return FA3RT_OK;
}

/* n f32 words of device memory at p (n < 0: a count past int64), 16-byte
 * aligned and below 2^63; NULL only where not required. */
static fa3rt_status check_f32(const char *name, uint64_t p, int64_t n, int required) {
  if (!p) {
    if (required) return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer is NULL", name);
    return FA3RT_OK;
  }
  if (p % 16)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer 0x%llx is not 16-byte aligned", name,
                (unsigned long long)p);
  if (n < 0 || p >= ADDR_END || (uint64_t)n > (ADDR_END - p) / 4)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer: 0x%llx is out of range (its %lld "
                "floats below 2^63: a device address)", name, (unsigned long long)p,
                (long long)n);
  return FA3RT_OK;
}

/* a * b * c * d of extents (each 0 to 2^31-1; a product of them counts as
 * one), or -1 past int64 */
static int64_t product(int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t p;
  if (a < 0 || __builtin_mul_overflow(a, b, &p) || __builtin_mul_overflow(p, c, &p) ||
      __builtin_mul_overflow(p, d, &p))
    return -1;
  return p;
}

int32_t fa3rt_num_splits_heuristic(int64_t tiles, int64_t kv_blocks, int32_t num_sms) {
  if (tiles < 1 || kv_blocks < 1 || num_sms < 1) return 1;
  /* nearly a wave without splits: splitting would only add the merge */
  if ((double)tiles >= 0.8 * num_sms) return 1;
  int64_t most = FA3RT_MAX_SPLITS;
  if (most > num_sms) most = num_sms;
  if (most > kv_blocks) most = kv_blocks;
  /* eff[s] < 0: s gives each split as many blocks as s - 1 splits do (more
     CTAs, no shorter one) */
  double eff[FA3RT_MAX_SPLITS + 1], best = 0;
  for (int64_t s = 1; s <= most; s++) {
    eff[s] = -1;
    if (s > 1 && (kv_blocks - 1) / s == (kv_blocks - 1) / (s - 1)) continue; /* the ceils */
    /* waves / ceil(waves), in integers for the ceil (tiles < 0.8 * 2^31 and
       s <= 128: exact); no libm, which the shared library does not link */
    const int64_t ctas = tiles * s;
    const int64_t whole = (ctas + num_sms - 1) / num_sms;
    eff[s] = (double)ctas / ((double)whole * num_sms);
    if (eff[s] > best) best = eff[s];
  }
  /* FlashAttention takes the smallest s within 85 % of the best; a
     decoding step streams K and V, whose bandwidth grows with the SMs that
     read them, and the merge is small beside it: within 95 % (B = 1, 8 kv
     heads, 64k keys: 16 splits 3.96 TB/s, 85 %'s 14 3.76; bench/NOTES.md,
     Decoding) */
  for (int64_t s = 1; s <= most; s++)
    if (eff[s] >= 0 && eff[s] >= 0.95 * best) return (int32_t)s;
  return 1;
}

/* Whether a forward launch runs one CTA a SM (fa3rt_fwd_args.ctas_per_sm):
   asked for (1), or the default's choice (0) for a split-KV kernel that two
   CTAs could share an SM with, where each CTA streams at least
   FA3RT_ONE_CTA_KEYS keys; 2, or a kernel already taking more than half an
   SM, as many as fit. */
static int one_cta_a_sm(const fa3rt_facts *f, const fa3rt_fwd_args *a, int64_t Skv,
                        int64_t splits) {
  if (f->dynamic_smem >= FA3RT_WHOLE_SM_SMEM || a->ctas_per_sm == 2) return 0;
  if (a->ctas_per_sm == 1) return 1;
  return f->split_kv && 2 * (int64_t)f->dynamic_smem <= FA3RT_WHOLE_SM_SMEM &&
         Skv / (splits > 0 ? splits : 1) >= FA3RT_ONE_CTA_KEYS;
}

/* The split-KV fields of a against the kernel: num_splits 0 or 1 for kernels
 * that do not split, 0 to FA3RT_MAX_SPLITS for those that do; num_sms >= 0. */
static fa3rt_status check_split_args(const fa3rt_facts *f, const fa3rt_fwd_args *a) {
  if (a->num_sms < 0)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "num_sms: %d is out of range (0: the device's "
                "SMs, else 1 to 2^31-1)", (int)a->num_sms);
  if (!f->split_kv && a->num_splits != 0 && a->num_splits != 1)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s does not split the kv sequence (facts "
                "split_kv 0): num_splits must be 0 or 1, got %d (split-KV decoding needs a "
                "decoding kernel: fa3-compile --decode, Fa3AttentionSpec.decode)", f->kernel,
                (int)a->num_splits);
  if (a->num_splits < 0 || a->num_splits > FA3RT_MAX_SPLITS)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "num_splits: %d is out of range (0: the heuristic, "
                "else 1 to %d)", (int)a->num_splits, FA3RT_MAX_SPLITS);
  return FA3RT_OK;
}

/* The caller's o_dtype: 0 (the kernel's) or the kernel's output type. */
static fa3rt_status check_o_dtype(const fa3rt_facts *f, fa3rt_dtype given) {
  const fa3rt_dtype want = out_dtype(f->dtype);
  if (given == FA3RT_DTYPE_INVALID || given == want) return FA3RT_OK;
  if (given != FA3RT_BF16 && given != FA3RT_F16 && given != FA3RT_E4M3)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "invalid o_dtype %d (0: the kernel's output type, "
                "else that type: %s for kernel %s)", (int)given, fa3rt_dtype_name(want),
                f->kernel);
  return fail(FA3RT_ERR_INVALID_ARGUMENT, "o_dtype %s does not match kernel %s, whose o is %s%s",
              fa3rt_dtype_name(given), f->kernel, fa3rt_dtype_name(want),
              f->dtype == FA3RT_E4M3 ? " (an FP8 kernel's q, k, v are e4m3, its o bf16)" : "");
}

/* FP8 descale factors (fa3rt_fwd_args.q_descale ...): for an e4m3 kernel,
 * each pointer 0 (1.0; strides 0) or f32 on the device, 4-byte aligned,
 * with strides 0 to 2^31-1 and its last element read (each index at its
 * extent - 1: batch, head, 128-row block) at most 2^31-1 (the kernel's i32
 * index) and below 2^63 bytes; every field 0 for the other kernels (a
 * descale they would ignore is refused). Skv: the logical key length. */
static fa3rt_status check_descale(const fa3rt_facts *f, const fa3rt_fwd_args *a, int64_t B,
                                  int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Skv) {
  /* a GQA-packed tile holds the g q heads of one kv head, its 128-row
     blocks mixing them: q's descale is per (batch, kv head), FA3's form */
  if (f->dtype == FA3RT_E4M3 && f->pack_gqa) {
    if (a->q_descale_stride_m)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "q_descale_stride_m is %lld but kernel %s packs "
                  "the q heads of each kv head into its tiles (facts pack_gqa 1): its q descale "
                  "is one per (batch, kv head), FlashAttention-3's [B, Hkv] (stride_h 1 for kv "
                  "head hkv), so stride_m must be 0", (long long)a->q_descale_stride_m,
                  f->kernel);
    Hq = Hkv;
    Sq = 1;
  }
  /* a left-padded batch's kv blocks count from its first key, leftpad_k[b],
     not from row 0 of the cache: per-128-key k descales would be read for
     the wrong rows */
  if (f->dtype == FA3RT_E4M3 && f->split_kv && a->k_descale_stride_n && a->leftpad_k)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "k_descale_stride_n is %lld (k descales per 128 "
                "keys) with leftpad_k: kernel %s counts a left-padded batch's kv blocks from "
                "its first key, not from the cache's row 0, so its k descales must be one per "
                "(batch, kv head) (stride_n 0)", (long long)a->k_descale_stride_n, f->kernel);
  const struct {
    const char *name;
    uint64_t ptr;
    int n;                /* strides */
    const char *sname[3];
    int64_t stride[3], ext[3];
  } d[3] = {
      {"q_descale", a->q_descale, 3,
       {"q_descale_stride_b", "q_descale_stride_h", "q_descale_stride_m"},
       {a->q_descale_stride_b, a->q_descale_stride_h, a->q_descale_stride_m},
       {B, Hq, (Sq + DESCALE_ROWS - 1) / DESCALE_ROWS}},
      {"k_descale", a->k_descale, 3,
       {"k_descale_stride_b", "k_descale_stride_h", "k_descale_stride_n"},
       {a->k_descale_stride_b, a->k_descale_stride_h, a->k_descale_stride_n},
       {B, Hkv, (Skv + DESCALE_ROWS - 1) / DESCALE_ROWS}},
      {"v_descale", a->v_descale, 2,
       {"v_descale_stride_b", "v_descale_stride_h", NULL},
       {a->v_descale_stride_b, a->v_descale_stride_h, 0},
       {B, Hkv, 1}}};
  for (int i = 0; i < 3; i++) {
    if (f->dtype != FA3RT_E4M3) {
      if (d[i].ptr)
        return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s is set (0x%llx) but kernel %s (facts dtype "
                    "%s) takes no descale factors, which it would ignore: descales are for FP8 "
                    "kernels (facts dtype e4m3)", d[i].name, (unsigned long long)d[i].ptr,
                    f->kernel, fa3rt_dtype_name(f->dtype));
      for (int j = 0; j < d[i].n; j++)
        if (d[i].stride[j])
          return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s is %lld but kernel %s (facts dtype %s) "
                      "takes no descale factors: it must be 0 (descales are for FP8 kernels, "
                      "facts dtype e4m3)", d[i].sname[j], (long long)d[i].stride[j], f->kernel,
                      fa3rt_dtype_name(f->dtype));
      continue;
    }
    for (int j = 0; j < d[i].n; j++) {
      const int64_t s = d[i].stride[j];
      if (s < 0 || s > INT32_MAX)
        return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s: %lld is out of range (0 to 2^31-1 "
                    "elements: the kernel's i32 stride; 0 broadcasts)", d[i].sname[j],
                    (long long)s);
      if (s && !d[i].ptr)
        return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s is %lld but %s is 0 (a descale of 1.0): "
                    "the strides of an absent descale must be 0", d[i].sname[j], (long long)s,
                    d[i].name);
    }
    const uint64_t p = d[i].ptr;
    if (!p) continue;
    if (p % 4 || p >= ADDR_END)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer 0x%llx is not a 4-byte aligned device "
                  "address below 2^63 (f32 descale factors)", d[i].name, (unsigned long long)p);
    /* the sum of the terms (each below 2^62) saturates */
    int64_t last = 0, none = 0;
    for (int j = 0; j < d[i].n; j++) {
      if (d[i].ext[j] <= 0) none = 1;
      else if (!mul_add(&last, d[i].ext[j] - 1, d[i].stride[j])) last = INT64_MAX;
    }
    if (none) continue; /* nothing read */
    if (last > INT32_MAX)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s: the last element read, index %lld (%s), is "
                  "out of range (at most 2^31-1: the kernel's i32 index)", d[i].name,
                  (long long)last,
                  i == 0 ? "b B-1, h Hq-1, block ceil(Sq/128)-1 by the strides"
                  : i == 1 ? "b B-1, h Hkv-1, block ceil(Skv/128)-1 by the strides"
                           : "b B-1, h Hkv-1 by the strides");
    if ((uint64_t)last >= (ADDR_END - p) / 4)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer: 0x%llx is out of range (its element "
                  "%lld below 2^63: a device address)", d[i].name, (unsigned long long)p,
                  (long long)last);
  }
  return FA3RT_OK;
}

/* fa3rt_fwd_plan, plus the strides to use for q, k, v, o, k_new, v_new
 * (check_tensor's eff; those of k_new and v_new where they are appended).
 * default_sms: the heuristic's SMs where num_sms is 0; need_workspace: a
 * split launch's o_accum and lse_accum must be given (fa3rt_fwd), not only
 * valid where given (fa3rt_fwd_plan, which reports their sizes). */
static fa3rt_status plan(const fa3rt_facts *f, const fa3rt_fwd_args *a, fa3rt_fwd_launch *launch,
                         int64_t eff[NFWD][4], int32_t default_sms, int need_workspace) {
  memset(eff, 0, NFWD * sizeof eff[0]);
  fa3rt_status st = check_kind(f, 0, a->dtype);
  if (st) return st;
  if ((st = check_o_dtype(f, a->o_dtype))) return st;
  /* bytes an element: q, k, v (and new rows for them) the kernel's dtype,
     o its output type (bf16 for e4m3) */
  const int64_t elem = elem_bytes(f->dtype), oelem = elem_bytes(out_dtype(f->dtype));
  const fa3rt_tensor *q = &a->q, *k = &a->k, *v = &a->v, *o = &a->o;
  if ((st = check_varlen(f, a))) return st;
  if ((st = check_split_args(f, a))) return st;
  if (a->ctas_per_sm < 0 || a->ctas_per_sm > 2)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "ctas_per_sm: %d is out of range (0: the runtime's "
                "choice, 1: one CTA a SM, 2: as many as fit)", (int)a->ctas_per_sm);
  if ((st = check_tensor("q", q, elem, eff[FQ], BY_TMA)) ||
      (st = check_tensor("k", k, elem, eff[FK], BY_TMA)) ||
      (st = check_tensor("v", v, elem, eff[FV], BY_TMA)) ||
      (st = check_tensor("o", o, oelem, eff[FO], BY_TMA)))
    return st;
  const int paged = a->page_table != 0;
  if ((st = check_qkv(f, q, k, v, paged))) return st;
  const int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2];
  const int64_t Hkv = k->shape[1];
  if ((st = check_shape("o", o, B, Hq, Sq, f->head_dim_v))) return st;
  if ((st = check_seqused_k(f, a, B))) return st;
  /* the logical key length: k's rows, or a paged cache's declared one */
  int64_t Skv = k->shape[2];
  if ((st = check_paged(f, a, f->varlen ? a->varlen_batch : B, &Skv))) return st;
  if ((st = check_leftpad_k(f, a, B, Skv))) return st;
  /* new keys and values for the cache (its rows, in the same call) */
  int64_t snew = 0;
  if ((st = check_append(f, a, B, Hkv, Skv, eff, &snew))) return st;
  /* FP8 descale factors (e4m3 kernels; refused by the others) */
  if ((st = check_descale(f, a, B, Hq, Hkv, Sq, Skv))) return st;
  /* GQA packing: a tile's rows are whole groups of g q heads (Q's box
     {64, g, block_m / g, 1}); check_qkv made Hkv > 0 where Hq > 0 */
  const int64_t g = f->pack_gqa && Hkv > 0 ? Hq / Hkv : 1;
  if (f->pack_gqa && Hq > 0 && f->block_m % g)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s packs the q heads of each kv head into "
                "its tiles (facts pack_gqa 1): g = Hq / Hkv = %lld / %lld = %lld must divide "
                "block_m %d (a tile holds block_m / g queries of all g heads; fa3-compile "
                "--decode --block-m 128 makes tiles of 128 rows)", f->kernel,
                (long long)Hq, (long long)Hkv, (long long)g, f->block_m);
  /* the grid is 1-D: x at most 2^31-1 (CUDA's limit, and the kernel's i32 tile
     index); a cluster kernel rounds its m-blocks up to whole clusters. A
     packed batch's grid covers the longest sequence in every sequence. A
     GQA-packed kernel's m-blocks run over Sq * g rows of each kv head. */
  const int64_t cm = f->cluster_m;
  const int64_t gridB = f->varlen ? a->varlen_batch : B;
  const int64_t gridS = f->varlen ? varlen_grid_rows(a, Sq) : Sq;
  const int64_t mrows = gridS * (g > 0 ? g : 1); /* below 2^31 * 256 */
  /* the kernel counts packed rows (and the last tile's end) in i32 */
  if (f->pack_gqa && mrows + f->block_m - 1 > INT32_MAX)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s packs the q heads of each kv head into "
                "its tiles (facts pack_gqa 1): Sq %lld * g %lld = %lld packed rows is out of "
                "range (at most 2^31 - block_m %d: the kernel's i32 row index)", f->kernel,
                (long long)gridS, (long long)g, (long long)mrows, f->block_m);
  const int64_t mblocks = ((mrows + f->block_m - 1) / f->block_m + cm - 1) / cm * cm;
  const int64_t heads = f->pack_gqa ? Hkv : Hq;
  /* a persistent kernel's scheduler counts past the last tile (a claim is
     the counter + the grid size, both i32 in the kernel) */
  const int64_t max_tiles = f->persistent ? INT32_MAX - (1 << 20) : INT32_MAX;
  int64_t tiles = 0;
  if (!mul_add(&tiles, mblocks * heads, gridB) || tiles > max_tiles)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "tiles: %lld m-blocks of %d rows * %s %lld * %s %lld "
                "is out of range (at most %s)", (long long)mblocks, f->block_m,
                f->pack_gqa ? "Hkv" : "Hq", (long long)heads,
                f->varlen ? "sequences" : "B", (long long)gridB,
                f->persistent ? "2^31-2^20: a persistent kernel's scheduler counts past the "
                                "last tile in i32"
                              : "2^31-1: CUDA's grid.x");
  /* split-KV: numSplits CTAs a tile, the count given or the heuristic's */
  int64_t splits = 1;
  if (f->split_kv) {
    const int64_t kv_blocks = (Skv + f->block_n - 1) / f->block_n;
    splits = a->num_splits ? a->num_splits
                           : fa3rt_num_splits_heuristic(tiles, kv_blocks,
                                                        a->num_sms ? a->num_sms : default_sms);
    int64_t ctas = 0;
    if (!mul_add(&ctas, tiles, splits) || ctas > INT32_MAX)
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "tiles: %lld tiles * %lld kv splits (num_splits) "
                  "is out of range (at most 2^31-1: CUDA's grid.x)", (long long)tiles,
                  (long long)splits);
    tiles = ctas;
  }
  /* lse: f32 [B, Hq, Sq] (varlen: [Hq, Tq], B = 1), below 2^63 like the
     tensors */
  const int64_t rows = Sq * Hq * B;
  if (a->lse % 4)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "lse pointer 0x%llx is not 4-byte aligned",
                (unsigned long long)a->lse);
  if (a->tile_counter % 4 || a->tile_counter >= ADDR_END - 8)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "tile_counter pointer 0x%llx is not a 4-byte aligned "
                "device address below 2^63 - 8", (unsigned long long)a->tile_counter);
  if (a->lse >= ADDR_END - (uint64_t)(4 * rows))
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "lse pointer: 0x%llx is out of range (its %lld "
                "floats below 2^63: a device address)", (unsigned long long)a->lse,
                (long long)rows);

  double scale;
  if ((st = check_scale(f, a->softmax_scale, &scale))) return st;

  fa3rt_fwd_launch L;
  memset(&L, 0, sizeof L);
  L.B = (int32_t)gridB; L.Sq = (int32_t)Sq; L.Skv = (int32_t)Skv;
  L.Hq = (int32_t)Hq; L.Hkv = (int32_t)Hkv;
  L.empty = gridB == 0 || gridS == 0 || Sq == 0 || Hq == 0;
  L.fill_only = !L.empty && Skv == 0;
  if (L.fill_only && f->varlen)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "k and v have no rows (Tk = 0) in a packed batch "
                "with query rows: every sequence has no keys; set its rows of o to 0 and of "
                "lse to -inf without the kernel (the runtime does not read cu_seqlens_q)");
  L.o_stride_b = eff[FO][0];
  L.o_stride_h = eff[FO][1];
  L.o_stride_s = eff[FO][2];
  L.scale = scale;
  L.scale_log2 = (float)(scale * LOG2E);
  L.num_splits = (int32_t)splits;
  L.pack_group = g > 0 ? (int32_t)g : 1;
  /* a paged cache: K and V load a page (or a block within one) a box */
  L.page_size = paged ? (int32_t)k->shape[2] : 0;
  L.kv_box_rows = paged && k->shape[2] < f->block_n ? (int32_t)k->shape[2] : f->block_n;
  L.snew = (int32_t)snew;
  if (snew > 0 && B > 0 && Hkv > 0) {
    /* the append: a thread a 16-byte chunk of a new row, the blocks
       striding over what 2^31-1 of them do not cover (and over the B
       lengths, fewer than the chunks); the copies of k_new and of v_new
       each i64 in the kernel, far below 2^62 */
    const int64_t dmax = f->head_dim > f->head_dim_v ? f->head_dim : f->head_dim_v;
    const int64_t chunks = product(B, snew, Hkv, dmax / 8);
    if (chunks < 0 || chunks >= ((int64_t)1 << 58))
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "k_new: B %lld * Snew %lld * Hkv %lld rows of %lld "
                  "16-byte chunks is out of range (below 2^58)", (long long)B, (long long)snew,
                  (long long)Hkv, (long long)(dmax / 8));
    const int64_t blocks = (chunks + FA3RT_FWD_APPEND_THREADS - 1) / FA3RT_FWD_APPEND_THREADS;
    L.append_grid = (unsigned)(blocks < INT32_MAX ? blocks : INT32_MAX);
    L.append_block = FA3RT_FWD_APPEND_THREADS;
  }
  if (splits > 1 && !L.empty && !L.fill_only) {
    /* the caller's workspace: f32 [splits, B, Hq, Sq, Dv] and [splits, B,
       Hq, Sq], contiguous (varlen kernels do not split) */
    const int64_t lse_words = product(splits, B, Hq, Sq);
    const int64_t o_words = product(lse_words, f->head_dim_v, 1, 1);
    if (o_words < 0 || o_words >= (int64_t)(ADDR_END / 4))
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "o_accum: %lld splits * B %lld * Hq %lld * Sq "
                  "%lld * Dv %d f32 words is out of range (below 2^63 bytes)", (long long)splits,
                  (long long)B, (long long)Hq, (long long)Sq, f->head_dim_v);
    if (need_workspace && (!a->o_accum || !a->lse_accum))
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "%s pointer is NULL: kernel %s splits the kv "
                  "sequence %lld ways (num_splits %d%s) and needs f32 workspaces of %lld bytes "
                  "(o_accum) and %lld bytes (lse_accum); fa3rt_fwd_plan reports them "
                  "(o_accum_bytes, lse_accum_bytes)", a->o_accum ? "lse_accum" : "o_accum",
                  f->kernel, (long long)splits, (int)a->num_splits,
                  a->num_splits ? "" : ": the heuristic's count", (long long)(4 * o_words),
                  (long long)(4 * lse_words));
    if ((st = check_f32("o_accum", a->o_accum, o_words, 0)) ||
        (st = check_f32("lse_accum", a->lse_accum, lse_words, 0)))
      return st;
    L.o_accum_bytes = 4 * (uint64_t)o_words;
    L.lse_accum_bytes = 4 * (uint64_t)lse_words;
    /* the merge: Dv / 4 threads a row of (b, h, s), 4 columns each; the
       blocks stride over what 2^31-1 of them do not cover */
    const int64_t threads = o_words / splits / 4;
    const int64_t blocks = (threads + FA3RT_FWD_COMBINE_THREADS - 1) / FA3RT_FWD_COMBINE_THREADS;
    L.combine_grid = (unsigned)(blocks < INT32_MAX ? blocks : INT32_MAX);
    L.combine_block = FA3RT_FWD_COMBINE_THREADS;
  }
  if (!L.empty) {
    /* 1-D grid over (m-block, head, batch[, split]) tiles; a persistent
       kernel is launched with at most one CTA per SM by fa3rt_fwd. */
    L.grid[0] = (unsigned)tiles;
    L.grid[1] = 1;
    L.grid[2] = 1;
    L.block[0] = (unsigned)f->threads;
    L.block[1] = L.block[2] = 1;
    /* one CTA a SM: more shared memory than two CTAs could share (the
       kernel's own bytes are below it: fa3rt_load checks them) */
    L.dynamic_smem = (unsigned)(one_cta_a_sm(f, a, Skv, splits) ? FA3RT_WHOLE_SM_SMEM
                                                                 : f->dynamic_smem);
  }
  if (launch) *launch = L;
  return FA3RT_OK;
}

fa3rt_status fa3rt_fwd_plan(const fa3rt_facts *f, const fa3rt_fwd_args *a,
                            fa3rt_fwd_launch *launch) {
  clear_error();
  if (!f || !a) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_fwd_plan: NULL argument");
  int64_t eff[NFWD][4];
  return plan(f, a, launch, eff, FA3RT_DEFAULT_SMS, 0);
}

/* The strides of fa3rt_bwd's tensors (check_tensor's eff), in this order. */
enum { BQ, BK, BV, BDOUT, BDK, BDV, BO, BDQ, NBWD };

/* fa3rt_bwd_plan, plus the strides to use for its tensors */
static fa3rt_status plan_bwd(const fa3rt_facts *f, const fa3rt_bwd_args *a,
                             fa3rt_bwd_launch *launch, int64_t eff[NBWD][4]) {
  fa3rt_status st = check_kind(f, 1, a->dtype);
  if (st) return st;
  /* one row length for the helpers and for dQaccum's rows (the compiler
     builds no other backward) */
  if (f->head_dim != f->head_dim_v)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "kernel %s has head_dim %d and head_dim_v %d; the "
                "backward takes head_dim_v = head_dim", f->kernel, f->head_dim, f->head_dim_v);
  const int64_t elem = 2;
  const fa3rt_tensor *q = &a->q, *k = &a->k, *v = &a->v, *dout = &a->dout, *o = &a->o,
                     *dq = &a->dq, *dk = &a->dk, *dv = &a->dv;
  if ((st = check_tensor("q", q, elem, eff[BQ], BY_TMA)) ||
      (st = check_tensor("k", k, elem, eff[BK], BY_TMA)) ||
      (st = check_tensor("v", v, elem, eff[BV], BY_TMA)) ||
      (st = check_tensor("dout", dout, elem, eff[BDOUT], BY_TMA)) ||
      (st = check_tensor("o", o, elem, eff[BO], BY_HELPERS)) ||
      (st = check_tensor("dq", dq, elem, eff[BDQ], BY_HELPERS)) ||
      (st = check_tensor("dk", dk, elem, eff[BDK], BY_COPY_OUT)) ||
      (st = check_tensor("dv", dv, elem, eff[BDV], BY_COPY_OUT)))
    return st;
  if ((st = check_qkv(f, q, k, v, 0))) return st;
  const int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2];
  const int64_t Hkv = k->shape[1], Skv = k->shape[2];
  if ((st = check_shape("dout", dout, B, Hq, Sq, f->head_dim_v)) ||
      (st = check_shape("o", o, B, Hq, Sq, f->head_dim_v)) ||
      (st = check_shape("dq", dq, B, Hq, Sq, f->head_dim)) ||
      (st = check_shape("dk", dk, B, Hkv, Skv, f->head_dim)) ||
      (st = check_shape("dv", dv, B, Hkv, Skv, f->head_dim_v)))
    return st;
  /* the kernel addresses dK and dV with one set of strides (a dim of
     extent 1 is never stepped along) */
  for (int i = 0; i < 3 && B && Hkv && Skv; i++)
    if (dk->shape[i] > 1 && eff[BDK][i] != eff[BDV][i])
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "dk and dv strides differ in dim %s (%lld and "
                  "%lld elements): the kernel takes one set of strides for both",
                  kDimNames[i], (long long)eff[BDK][i], (long long)eff[BDV][i]);
  /* 1-D grid: one CTA per (kv block, kv head, batch), at most 2^31-1 */
  const int64_t nblocks = (Skv + f->block_n - 1) / f->block_n;
  int64_t tiles = 0;
  if (!mul_add(&tiles, nblocks * Hkv, B) || tiles > INT32_MAX)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "tiles: %lld kv blocks of %d rows * Hkv %lld * B "
                "%lld is out of range (at most 2^31-1: CUDA's grid.x)", (long long)nblocks,
                f->block_n, (long long)Hkv, (long long)B);
  fa3rt_bwd_launch L;
  memset(&L, 0, sizeof L);
  L.empty = B == 0 || Hq == 0 || Sq == 0;
  L.zero_only = !L.empty && Skv == 0;
  /* dq_accum: B * Hq * ceil(Sq / 64) * 64 * D f32 in the kernel's order
     (fa3rt.h), then a deterministic kernel's u32 turn counter per tile, a
     multiple of 4 words (_pre zeroes 16 bytes a thread); lse and delta f32
     [B, Hq, Sq], contiguous; _pre writes delta and zeroes dq_accum even
     without keys */
  const int64_t sq_padded = (Sq + FA3RT_BWD_DQ_ROWS - 1) / FA3RT_BWD_DQ_ROWS * FA3RT_BWD_DQ_ROWS;
  int64_t words = product(B, Hq, sq_padded, f->head_dim);
  const int64_t rows = product(B, Hq, Sq, 1);
  if (f->deterministic && words >= 0) {
    /* fewer than the tiles' words: no overflow before the sum */
    const int64_t counters = product(B, Hq, sq_padded / FA3RT_BWD_DQ_ROWS, 1);
    if (!mul_add(&words, (counters + 3) / 4, 4)) words = -1;
  }
  if ((st = check_f32("dq_accum", a->dq_accum, words, !L.empty)) ||
      (st = check_f32("lse", a->lse, rows, !L.empty && !L.zero_only)) ||
      (st = check_f32("delta", a->delta, rows, !L.empty)))
    return st;
  double scale;
  if ((st = check_scale(f, a->softmax_scale, &scale))) return st;

  L.B = (int32_t)B; L.Sq = (int32_t)Sq; L.Skv = (int32_t)Skv;
  L.Hq = (int32_t)Hq; L.Hkv = (int32_t)Hkv;
  L.dkv_stride_b = eff[BDK][0];
  L.dkv_stride_h = eff[BDK][1];
  L.dkv_stride_s = eff[BDK][2];
  L.o_stride_b = eff[BO][0];
  L.o_stride_h = eff[BO][1];
  L.o_stride_s = eff[BO][2];
  L.dout_stride_b = eff[BDOUT][0];
  L.dout_stride_h = eff[BDOUT][1];
  L.dout_stride_s = eff[BDOUT][2];
  L.dq_stride_b = eff[BDQ][0];
  L.dq_stride_h = eff[BDQ][1];
  L.dq_stride_s = eff[BDQ][2];
  L.dq_accum_words = L.empty ? 0 : (uint64_t)words;
  L.scale = scale;
  L.scale_log2 = (float)(scale * LOG2E);
  if (!L.empty) {
    /* the helpers: Dv * 2 / 16 threads a row (16 bytes each) rounded up to
       a power of two (96: 16, 192: 32), the grid's stride over the rows
       past 2^31-1 blocks (rows fits: dq_accum's words were counted above) */
    int64_t lanes = 1;
    while (lanes < f->head_dim_v * 2 / 16) lanes *= 2;
    const int64_t per_block = FA3RT_BWD_AUX_THREADS / lanes;
    const int64_t blocks = (rows + per_block - 1) / per_block;
    L.aux_grid = (unsigned)(blocks < INT32_MAX ? blocks : INT32_MAX);
    L.aux_block = FA3RT_BWD_AUX_THREADS;
  }
  if (!L.empty && !L.zero_only) {
    L.grid[0] = (unsigned)tiles;
    L.grid[1] = L.grid[2] = 1;
    L.block[0] = (unsigned)f->threads;
    L.block[1] = L.block[2] = 1;
    L.dynamic_smem = (unsigned)f->dynamic_smem;
  }
  if (launch) *launch = L;
  return FA3RT_OK;
}

fa3rt_status fa3rt_bwd_plan(const fa3rt_facts *f, const fa3rt_bwd_args *a,
                            fa3rt_bwd_launch *launch) {
  clear_error();
  if (!f || !a) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_bwd_plan: NULL argument");
  int64_t eff[NBWD][4];
  return plan_bwd(f, a, launch, eff);
}

/* ------------------------------------------------------------------------ */
/* kernels                                                                   */
/* ------------------------------------------------------------------------ */

struct fa3rt_kernel {
  fa3rt_facts facts;
  CUcontext ctx;
  CUdevice dev;
  CUmodule mod;
  CUfunction fn;
  CUfunction fn_pre, fn_post; /* backward: <kernel>_pre and <kernel>_post */
  CUfunction fn_combine;  /* split_kv: <kernel>_combine */
  CUfunction fn_append;   /* split_kv: <kernel>_append */
  CUfunction fn_quantize; /* e4m3: <kernel>_quantize */
  int sms;                /* the device's SMs (the split heuristic's default) */
  int whole_sm_smem;      /* a launch's dynamic shared memory with ctas_per_sm
                             1: the device's opt-in limit less the static */
  int whole_sm_allowed;   /* the function's limit raised to it (at the first
                             such launch: the other launches keep the facts'
                             limit) */
  int max_ctas;           /* a persistent grid's size: one CTA per SM, or
                             cluster_m x the clusters that fit at once */
  CUdeviceptr counters_dev; /* (NSLOTS + NCAPTURED) x 2 u32, zeroed at load */
  CUevent slot_done[NSLOTS];
  int slot_used[NSLOTS];
  int captured;           /* pairs given to captured launches */
  int next_slot, last_slot;
  CUstream last_stream;
  pthread_mutex_t mu;
};

const fa3rt_facts *fa3rt_kernel_facts(const fa3rt_kernel *k) { return k ? &k->facts : NULL; }

static void kernel_free(fa3rt_kernel *k) {
  if (!k) return;
  /* best effort: the context may already be gone at process exit */
  CUcontext cur = NULL;
  int swapped = 0;
  if (k->ctx && cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != k->ctx &&
      cuCtxPushCurrent(k->ctx) == CUDA_SUCCESS)
    swapped = 1;
  for (int i = 0; i < NSLOTS; i++)
    if (k->slot_done[i]) {
      if (k->slot_used[i]) cuEventSynchronize(k->slot_done[i]);
      cuEventDestroy(k->slot_done[i]);
    }
  if (k->counters_dev) cuMemFree(k->counters_dev);
  if (k->mod) cuModuleUnload(k->mod);
  if (swapped) { CUcontext dummy; cuCtxPopCurrent(&dummy); }
  pthread_mutex_destroy(&k->mu);
  free(k);
}

void fa3rt_kernel_destroy(fa3rt_kernel *k) { kernel_free(k); }

/* ABI check of the cubin's function `name`: offset and size of each parameter
 * (cuFuncGetParamInfo, CUDA >= 12.4; skipped where the driver lacks it).
 * Only the ABI's parameters are queried: asking past the last one would be a
 * CUDA API error, which compute-sanitizer reports in every user's program.
 * Offsets count from the first parameter's: the driver reports them in the
 * constant bank, where 64-byte aligned parameters start past a padding. */
static fa3rt_status check_params(CUfunction fn, const char *name, const abi *x,
                                 const char *where) {
  size_t want_off = 0, base = 0;
  for (size_t i = 0; i < x->n; i++) {
    size_t off = 0, size = 0;
    want_off = (want_off + x->aligns[i] - 1) / x->aligns[i] * x->aligns[i];
    CUresult r = cuFuncGetParamInfo(fn, i, &off, &size);
    if (r == CUDA_ERROR_NOT_SUPPORTED) return FA3RT_OK;
    if (r == CUDA_ERROR_INVALID_VALUE)
      return fail(FA3RT_ERR_FACTS, "kernel %s takes %zu parameters; the %s ABI '%s' has %zu",
                  name, i, x->kind, x->names, x->n);
    if (r != CUDA_SUCCESS) return cuda_fail("cuFuncGetParamInfo", r, where);
    if (i == 0) base = off;
    if (size != x->sizes[i] || off < base || off - base != want_off)
      return fail(FA3RT_ERR_FACTS, "kernel %s parameter %zu is %zu bytes at offset %lld (from "
                  "the first's); the %s ABI '%s' needs %zu bytes at offset %zu", name, i, size,
                  (long long)off - (long long)base, x->kind, x->names, x->sizes[i], want_off);
    want_off += x->sizes[i];
  }
  return FA3RT_OK;
}

fa3rt_status fa3rt_kernel_load_data(const void *cubin, size_t cubin_size, const char *facts_text,
                                    size_t facts_len, fa3rt_kernel **out) {
  clear_error();
  if (!out) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_kernel_load_data: out is NULL");
  *out = NULL;
  if (!cubin || cubin_size == 0)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_kernel_load_data: empty cubin");
  fa3rt_facts f;
  fa3rt_status st = fa3rt_facts_parse(facts_text, facts_len, &f);
  if (st) return st;
  char where[512];
  snprintf(where, sizeof where, "kernel %s", f.kernel);

  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return cuda_fail("cuInit(0)", r, where);
  CUcontext ctx = NULL;
  CU_TRY(cuCtxGetCurrent(&ctx), where);
  if (!ctx)
    return fail(FA3RT_ERR_UNSUPPORTED_DEVICE,
                "no current CUDA context on this thread (kernel %s): make one current first "
                "(e.g. PyTorch: torch.cuda.set_device / any CUDA tensor op; driver API: "
                "cuDevicePrimaryCtxRetain + cuCtxSetCurrent)", f.kernel);
  CUdevice dev;
  CU_TRY(cuCtxGetDevice(&dev), where);
  int major = 0, minor = 0;
  CU_TRY(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), where);
  CU_TRY(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), where);
  char devname[256] = "?";
  cuDeviceGetName(devname, sizeof devname, dev);
  if (major != 9 || minor != 0)
    return fail(FA3RT_ERR_UNSUPPORTED_DEVICE,
                "device %d (%s) has compute capability %d.%d; kernel %s is built for sm_90a "
                "and runs only on compute capability 9.0 (H100/H200)",
                (int)dev, devname, major, minor, f.kernel);
  int optin = 0, sms = 0;
  CU_TRY(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
         where);
  CU_TRY(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), where);

  fa3rt_kernel *k = calloc(1, sizeof *k);
  if (!k) return fail(FA3RT_ERR_OUT_OF_MEMORY, "out of host memory (kernel %s)", f.kernel);
  pthread_mutex_init(&k->mu, NULL);
  k->facts = f;
  k->ctx = ctx;
  k->dev = dev;
  k->max_ctas = sms > 0 ? sms : 1;
  k->sms = k->max_ctas;
  k->last_slot = -1;

#define LOAD_TRY(call)                                                       \
  do {                                                                       \
    CUresult r_ = (call);                                                    \
    if (r_ != CUDA_SUCCESS) {                                                \
      st = cuda_fail(#call, r_, where);                                      \
      goto error;                                                            \
    }                                                                        \
  } while (0)

  LOAD_TRY(cuModuleLoadData(&k->mod, cubin));
  r = cuModuleGetFunction(&k->fn, k->mod, f.kernel);
  if (r == CUDA_ERROR_NOT_FOUND) {
    st = fail(FA3RT_ERR_FACTS, "the cubin has no kernel named '%s' (the facts file's 'kernel' "
              "line); facts and cubin do not belong together", f.kernel);
    goto error;
  }
  LOAD_TRY(r);
  if ((st = check_params(k->fn, f.kernel, abi_of(&f), where))) goto error;
  if (f.backward) {
    /* the helpers fa3rt_bwd launches around the kernel, from its module */
    static const char *const suffix[2] = {"_pre", "_post"};
    CUfunction *fns[2] = {&k->fn_pre, &k->fn_post};
    const abi *abis[2] = {&kPreAbi, &kPostAbi};
    for (int i = 0; i < 2; i++) {
      char name[sizeof f.kernel + 8];
      snprintf(name, sizeof name, "%s%s", f.kernel, suffix[i]);
      r = cuModuleGetFunction(fns[i], k->mod, name);
      if (r == CUDA_ERROR_NOT_FOUND) {
        st = fail(FA3RT_ERR_FACTS, "the cubin of backward kernel '%s' has no kernel named '%s': "
                  "it lacks the backward's helper kernels (%s_pre and %s_post, which fa3rt_bwd "
                  "launches around it); recompile it with this fa3-compile", f.kernel, name,
                  f.kernel, f.kernel);
        goto error;
      }
      LOAD_TRY(r);
      if ((st = check_params(*fns[i], name, abis[i], where))) goto error;
      int most = 0;
      LOAD_TRY(cuFuncGetAttribute(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, *fns[i]));
      if (most < FA3RT_BWD_AUX_THREADS) {
        st = fail(FA3RT_ERR_FACTS, "kernel %s allows at most %d threads a block; fa3rt_bwd "
                  "launches it with %d", name, most, FA3RT_BWD_AUX_THREADS);
        goto error;
      }
    }
  }
  if (f.split_kv) {
    /* from its module: the merge fa3rt_fwd launches after a split launch,
       and the cache append it launches before one that appends */
    static const char *const suffix[2] = {"_combine", "_append"};
    static const char *const what[2] = {"the merge of the splits", "the cache append"};
    static const char *const when[2] = {
        "which fa3rt_fwd launches after it",
        "which fa3rt_fwd launches before it where new keys and values are given"};
    CUfunction *fns[2] = {&k->fn_combine, &k->fn_append};
    const abi *abis[2] = {&kCombineAbi, &kAppendAbi};
    const int threads[2] = {FA3RT_FWD_COMBINE_THREADS, FA3RT_FWD_APPEND_THREADS};
    for (int i = 0; i < 2; i++) {
      char name[sizeof f.kernel + 16];
      snprintf(name, sizeof name, "%s%s", f.kernel, suffix[i]);
      r = cuModuleGetFunction(fns[i], k->mod, name);
      if (r == CUDA_ERROR_NOT_FOUND) {
        st = fail(FA3RT_ERR_FACTS, "the cubin of split-KV kernel '%s' (facts split_kv 1) has no "
                  "kernel named '%s': it lacks %s (%s, %s); recompile it with this "
                  "fa3-compile", f.kernel, name, what[i], name, when[i]);
        goto error;
      }
      LOAD_TRY(r);
      if ((st = check_params(*fns[i], name, abis[i], where))) goto error;
      int most = 0;
      LOAD_TRY(cuFuncGetAttribute(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, *fns[i]));
      if (most < threads[i]) {
        st = fail(FA3RT_ERR_FACTS, "kernel %s allows at most %d threads a block; fa3rt_fwd "
                  "launches it with %d", name, most, threads[i]);
        goto error;
      }
    }
  }
  if (f.dtype == FA3RT_E4M3) {
    /* from its module: the quantization that feeds it (fa3rt_quantize) */
    char name[sizeof f.kernel + 16];
    snprintf(name, sizeof name, "%s_quantize", f.kernel);
    r = cuModuleGetFunction(&k->fn_quantize, k->mod, name);
    if (r == CUDA_ERROR_NOT_FOUND) {
      st = fail(FA3RT_ERR_FACTS, "the cubin of FP8 kernel '%s' (facts dtype e4m3) has no kernel "
                "named '%s': it lacks the quantization fa3rt_quantize launches; recompile it "
                "with this fa3-compile", f.kernel, name);
      goto error;
    }
    LOAD_TRY(r);
    if ((st = check_params(k->fn_quantize, name, &kQuantizeAbi, where))) goto error;
    int most = 0;
    LOAD_TRY(cuFuncGetAttribute(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn_quantize));
    if (most < FA3RT_FP8_QUANTIZE_THREADS_PER_COL * f.head_dim) {
      st = fail(FA3RT_ERR_FACTS, "kernel %s allows at most %d threads a block; fa3rt_quantize "
                "launches it with %d", name, most,
                FA3RT_FP8_QUANTIZE_THREADS_PER_COL * f.head_dim);
      goto error;
    }
  }
  int static_smem = 0, max_threads = 0;
  LOAD_TRY(cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn));
  LOAD_TRY(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn));
  if (f.threads > max_threads) {
    st = fail(FA3RT_ERR_FACTS, "kernel %s: facts say %d threads but the cubin allows at most %d",
              f.kernel, f.threads, max_threads);
    goto error;
  }
  if (static_smem + f.dynamic_smem > optin) {
    st = fail(FA3RT_ERR_UNSUPPORTED_DEVICE,
              "kernel %s needs %d + %d bytes of shared memory; device %d (%s) allows %d per block",
              f.kernel, static_smem, f.dynamic_smem, (int)dev, devname, optin);
    goto error;
  }
  LOAD_TRY(cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              f.dynamic_smem));
  k->whole_sm_smem = optin - static_smem;
  {
    /* The cluster shape is compiled into the cubin; launched with another
       grid rounding (or, for cluster_m 1, as clusters) the kernel would
       pair the wrong CTAs. 0 = no compile-time cluster. */
    int width = 0;
    LOAD_TRY(cuFuncGetAttribute(&width, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, k->fn));
    if ((width > 1 ? width : 1) != f.cluster_m) {
      st = fail(FA3RT_ERR_FACTS, "kernel %s: facts say cluster_m %d but the cubin's clusters "
                "are %d CTA(s) wide; facts and cubin do not belong together", f.kernel,
                f.cluster_m, width > 1 ? width : 1);
      goto error;
    }
  }
  if (f.cluster_m > 1) {
    /* Not every SM pairs up into a cluster (the GPCs' SM counts): a
       persistent grid larger than the co-resident clusters would run a
       second, nearly empty wave. The cluster shape is in the cubin. */
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = (unsigned)(f.cluster_m * k->max_ctas);
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = (unsigned)f.threads;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = (unsigned)f.dynamic_smem;
    int clusters = 0;
    LOAD_TRY(cuOccupancyMaxActiveClusters(&clusters, k->fn, &cfg));
    if (clusters < 1) {
      st = fail(FA3RT_ERR_UNSUPPORTED_DEVICE, "kernel %s: no cluster of %d CTAs with %d bytes "
                "of shared memory each fits on device %d (%s)", f.kernel, f.cluster_m,
                f.dynamic_smem, (int)dev, devname);
      goto error;
    }
    k->max_ctas = clusters * f.cluster_m;
  }
  LOAD_TRY(cuMemAlloc(&k->counters_dev, (NSLOTS + NCAPTURED) * 2 * sizeof(uint32_t)));
  LOAD_TRY(cuMemsetD32(k->counters_dev, 0, (NSLOTS + NCAPTURED) * 2));
  for (int i = 0; i < NSLOTS; i++)
    LOAD_TRY(cuEventCreate(&k->slot_done[i], CU_EVENT_DISABLE_TIMING));
#undef LOAD_TRY
  *out = k;
  return FA3RT_OK;
error:;
  char msg[sizeof g_err];
  snprintf(msg, sizeof msg, "%s", g_err);
  kernel_free(k);
  snprintf(g_err, sizeof g_err, "%s", msg);
  return st;
}

fa3rt_status fa3rt_kernel_load(const char *cubin_path, const char *facts_path,
                               fa3rt_kernel **out) {
  clear_error();
  if (!cubin_path || !facts_path || !out)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_kernel_load: NULL argument");
  *out = NULL;
  char *facts = NULL, *cubin = NULL;
  size_t nf = 0, nc = 0;
  fa3rt_status st = read_file(facts_path, "facts file", FA3RT_FACTS_MAX_BYTES, &facts, &nf);
  if (st) return st;
  if ((st = read_file(cubin_path, "cubin", CUBIN_MAX_BYTES, &cubin, &nc))) { free(facts); return st; }
  st = fa3rt_kernel_load_data(cubin, nc, facts, nf, out);
  free(facts);
  free(cubin);
  if (st) {
    char msg[sizeof g_err];
    snprintf(msg, sizeof msg, "%s", g_err);
    return fail(st, "%s (loading %s with %s)", msg, cubin_path, facts_path);
  }
  return FA3RT_OK;
}

/* 4-D map over a [B, H, S, D] tensor: dims innermost-first (D, H, S, B);
 * a box of box_heads heads x box_rows rows (a GQA-packed Q: g heads of
 * block_m / g queries, the tile's packed rows). */
static fa3rt_status encode_map(CUtensorMap *m, fa3rt_dtype dt, const fa3rt_tensor *t,
                               const int64_t eff[4], int box_heads, int box_rows,
                               const char *name, const char *where) {
  /* the tensor's element type (an FP8 kernel's e4m3 as bytes: TMA copies
     them, the kernel's wgmma reads them as e4m3) and size; a box row is
     the swizzle span, 128 bytes of D */
  const CUtensorMapDataType type = dt == FA3RT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : dt == FA3RT_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                     : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const cuuint64_t elem = (cuuint64_t)elem_bytes(dt);
  cuuint64_t dims[4] = {(cuuint64_t)t->shape[3], (cuuint64_t)t->shape[1], (cuuint64_t)t->shape[2],
                        (cuuint64_t)t->shape[0]};
  cuuint64_t strides[3] = {(cuuint64_t)eff[1] * elem, (cuuint64_t)eff[2] * elem,
                           (cuuint64_t)eff[0] * elem};
  cuuint32_t box[4] = {(cuuint32_t)(TMA_BOX_BYTES / elem), (cuuint32_t)box_heads,
                       (cuuint32_t)box_rows, 1};
  cuuint32_t estr[4] = {1, 1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(
      m, type, 4, (void *)(uintptr_t)t->ptr, dims, strides, box, estr,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    char call[128];
    snprintf(call, sizeof call, "cuTensorMapEncodeTiled(%s)", name);
    return cuda_fail(call, r, where);
  }
  return FA3RT_OK;
}

/* Skv == 0: every query row sees no key: o = 0, lse = -inf (the op's semantics). */
static fa3rt_status fill_empty_rows(const fa3rt_fwd_args *a, const fa3rt_fwd_launch *L,
                                    CUstream st, const char *where) {
  const int64_t dv = a->o.shape[3];
  /* the longest of (B, Sq, Hq) is the 2-D memset's height; loop over the other two */
  int64_t ext[3] = {L->B, L->Sq, L->Hq};
  int64_t str[3] = {L->o_stride_b, L->o_stride_s, L->o_stride_h};
  int h = 0;
  for (int i = 1; i < 3; i++)
    if (ext[i] > ext[h]) h = i;
  int i0 = (h + 1) % 3, i1 = (h + 2) % 3;
  for (int64_t x = 0; x < ext[i0]; x++)
    for (int64_t y = 0; y < ext[i1]; y++) {
      CUdeviceptr p = (CUdeviceptr)(a->o.ptr + 2 * (uint64_t)(x * str[i0] + y * str[i1]));
      if (ext[h] == 1 || str[h] < dv)
        for (int64_t z = 0; z < ext[h]; z++)
          CU_TRY(cuMemsetD16Async(p + 2 * (uint64_t)(z * str[h]), 0, (size_t)dv, st), where);
      else
        CU_TRY(cuMemsetD2D16Async(p, (size_t)(2 * str[h]), 0, (size_t)dv, (size_t)ext[h], st),
               where);
    }
  if (a->lse)
    CU_TRY(cuMemsetD32Async((CUdeviceptr)a->lse, 0xFF800000u,
                            (size_t)L->B * (size_t)L->Hq * (size_t)L->Sq, st), where);
  return FA3RT_OK;
}

/* "<call> (kernel K): " before the last error (a plan's) */
static fa3rt_status in_call(fa3rt_status st, const char *call, const fa3rt_facts *f) {
  char msg[sizeof g_err];
  snprintf(msg, sizeof msg, "%s", g_err);
  return fail(st, "%s (kernel %s): %s", call, f->kernel, msg);
}

/* The launch's description in CUDA error messages, into where[512]. */
static void describe(char *where, const fa3rt_facts *f, int B, int Sq, int Skv, int Hq,
                     int Hkv) {
  snprintf(where, 512, "kernel %s, B=%d, Sq=%d, Skv=%d, Hq=%d, Hkv=%d, D=%d, Dv=%d", f->kernel,
           B, Sq, Skv, Hq, Hkv, f->head_dim, f->head_dim_v);
}

/* A kernel launches only in the context it was loaded in. */
static fa3rt_status check_context(const fa3rt_kernel *k, const char *where) {
  CUcontext cur = NULL;
  CU_TRY(cuCtxGetCurrent(&cur), where);
  if (cur != k->ctx) {
    CUdevice d = -1;
    if (cur) cuCtxGetDevice(&d);
    return fail(FA3RT_ERR_INVALID_ARGUMENT,
                "kernel %s was loaded in the context of device %d but the current context is %s"
                "%d: load the kernel once per device/context", k->facts.kernel, (int)k->dev,
                cur ? "that of device " : "none, device ", (int)d);
  }
  return FA3RT_OK;
}

/* <kernel>_combine after a split launch (num_splits > 1), in stream order:
 * o and lse from the splits' partials; nothing otherwise. */
static fa3rt_status launch_combine(const fa3rt_kernel *k, const fa3rt_fwd_args *a,
                                   const fa3rt_fwd_launch *L, CUstream cs, const char *where) {
  if (L->num_splits <= 1) return FA3RT_OK;
#define FA3RT_FWD_COMBINE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning)    \
  c_type name;
#include "fa3rt_abi.def"
  oAccum = (CUdeviceptr)a->o_accum;
  lseAccum = (CUdeviceptr)a->lse_accum;
  O = (CUdeviceptr)a->o.ptr;
  oStrideB = L->o_stride_b;
  oStrideS = L->o_stride_s;
  oStrideH = L->o_stride_h;
  LSE = (CUdeviceptr)a->lse;
  B = L->B;
  Sq = L->Sq;
  Hq = L->Hq;
  numSplits = L->num_splits;
  void *params[] = {
#define FA3RT_FWD_COMBINE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  CUresult r = cuLaunchKernel(k->fn_combine, L->combine_grid, 1, 1, L->combine_block, 1, 1, 0,
                              cs, params, NULL);
  return r == CUDA_SUCCESS ? FA3RT_OK : cuda_fail("cuLaunchKernel(_combine)", r, where);
}

/* <kernel>_append before the attention where rows are appended, in stream
 * order: k_new and v_new into the cache (or its page pool) at rows
 * seqused_k[b] + s, seqlens_out[b] = seqused_k[b] + Snew; nothing
 * otherwise. */
/* A page pool's page count (k [num_pages, Hkv, page_size, D]) as the
   kernels' i32 parameters take it (numPages, pagedPages): entries at or
   past it read or write no page of the pool. */
static int32_t pool_pages(const fa3rt_fwd_args *a) {
  return (int32_t)(a->k.shape[0] < INT32_MAX ? a->k.shape[0] : INT32_MAX);
}

static fa3rt_status launch_append(const fa3rt_kernel *k, const fa3rt_fwd_args *a,
                                  const fa3rt_fwd_launch *L, const int64_t eff[NFWD][4],
                                  CUstream cs, const char *where) {
  if (!L->append_grid) return FA3RT_OK;
#define FA3RT_FWD_APPEND_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning)     \
  c_type name;
#include "fa3rt_abi.def"
  /* the strides of [B, H, S, D] tensors: batch (a pool's page), row, head */
  kNew = (CUdeviceptr)a->k_new.ptr;
  kNewStrideB = eff[FKNEW][0];
  kNewStrideS = eff[FKNEW][2];
  kNewStrideH = eff[FKNEW][1];
  vNew = (CUdeviceptr)a->v_new.ptr;
  vNewStrideB = eff[FVNEW][0];
  vNewStrideS = eff[FVNEW][2];
  vNewStrideH = eff[FVNEW][1];
  kCache = (CUdeviceptr)a->k.ptr;
  kCacheStrideB = eff[FK][0];
  kCacheStrideS = eff[FK][2];
  kCacheStrideH = eff[FK][1];
  vCache = (CUdeviceptr)a->v.ptr;
  vCacheStrideB = eff[FV][0];
  vCacheStrideS = eff[FV][2];
  vCacheStrideH = eff[FV][1];
  pageTable = (CUdeviceptr)a->page_table;
  pageTableStride = a->page_table ? a->page_table_stride : 0;
  pageSize = L->page_size;
  /* the pool's pages (k [num_pages, Hkv, page_size, D]); a contiguous
     cache ignores it */
  numPages = a->page_table ? pool_pages(a) : 0;
  cacheSeqlens = (CUdeviceptr)a->seqused_k;
  seqlensOut = (CUdeviceptr)a->seqlens_out;
  B = L->B;
  Snew = L->snew;
  Hkv = L->Hkv;
  Skv = L->Skv;
  void *params[] = {
#define FA3RT_FWD_APPEND_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  CUresult r = cuLaunchKernel(k->fn_append, L->append_grid, 1, 1, L->append_block, 1, 1, 0, cs,
                              params, NULL);
  return r == CUDA_SUCCESS ? FA3RT_OK : cuda_fail("cuLaunchKernel(_append)", r, where);
}

/* Pages of at most FA3RT_COPY_ROWS rows (the kernel's facts copy_rows where
 * given), fewer than the kernel's kv tile:
 * a kernel built to (facts paged_copy 1) has its producer warps copy their
 * rows 16 bytes a lane (cp.async, FlashAttention-3's path for such pages)
 * where K's and V's pools share their strides and span at most 2^36 bytes
 * (the kernel holds a row's offset in 16-byte units); else TMA boxes of
 * each page's rows, which stream at full speed from 32 rows a box and
 * slowly below (fa3rt.h). Fills the byte strides (page, row, head) and
 * returns 1 where the kernel copies. */
static int paged_copy(const fa3rt_facts *f, const fa3rt_fwd_args *a, const fa3rt_fwd_launch *L,
                      int64_t eff[NFWD][4], int64_t strides[3]) {
  const int rows = f->copy_rows ? f->copy_rows : FA3RT_COPY_ROWS;
  if (!f->paged_copy || !a->page_table || L->page_size > rows || L->page_size >= f->block_n)
    return 0;
  const int64_t *ks = eff[FK], *vs = eff[FV];
  if (ks[0] != vs[0] || ks[1] != vs[1] || ks[2] != vs[2]) return 0;
  const uint64_t e = (uint64_t)elem_bytes(f->dtype);
  const uint64_t d = (uint64_t)(a->k.shape[3] > a->v.shape[3] ? a->k.shape[3] : a->v.shape[3]);
  /* (plan checked the shapes and strides: each product below 2^62) */
  const uint64_t last = (uint64_t)(a->k.shape[0] - 1) * (uint64_t)ks[0] +
                        (uint64_t)(a->k.shape[1] - 1) * (uint64_t)ks[1] +
                        (uint64_t)(L->page_size - 1) * (uint64_t)ks[2] + d;
  if (last * e > ((uint64_t)1 << 36)) return 0;
  strides[0] = ks[0] * (int64_t)e;
  strides[1] = ks[2] * (int64_t)e;
  strides[2] = ks[1] * (int64_t)e;
  return 1;
}

fa3rt_status fa3rt_fwd(fa3rt_kernel *k, const fa3rt_fwd_args *a, void *stream) {
  clear_error();
  if (!k || !a) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_fwd: NULL kernel or args");
  const fa3rt_facts *f = &k->facts;
  fa3rt_fwd_launch L;
  int64_t eff[NFWD][4];
  fa3rt_status st = plan(f, a, &L, eff, k->sms, 1);
  if (st) return in_call(st, "fa3rt_fwd", f);
  const int one_cta = one_cta_a_sm(f, a, L.Skv, L.num_splits);
  if (one_cta) L.dynamic_smem = (unsigned)k->whole_sm_smem;
  if (L.empty && !L.append_grid) return FA3RT_OK;
  char where[512];
  describe(where, f, L.B, L.Sq, L.Skv, L.Hq, L.Hkv);
  if (f->split_kv) {
    const size_t n = strlen(where);
    snprintf(where + n, 512 - n, ", splits=%d", (int)L.num_splits);
    if (L.page_size) {
      const size_t m = strlen(where);
      snprintf(where + m, 512 - m, ", paged: %lld pages of %d", (long long)a->k.shape[0],
               (int)L.page_size);
    }
    if (L.append_grid) {
      const size_t m = strlen(where);
      snprintf(where + m, 512 - m, ", appending Snew=%d", (int)L.snew);
    }
  }
  CUstream cs = (CUstream)stream;
  if ((st = check_context(k, where))) return st;
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_TRY(cuStreamIsCapturing(cs, &cap), where);
  const int capturing = cap != CU_STREAM_CAPTURE_STATUS_NONE;

  /* no attention (B, Sq or Hq 0), only the new rows; Skv 0 appends none
     (Snew <= Skv) */
  if (L.empty) return launch_append(k, a, &L, eff, cs, where);
  if (L.fill_only) return fill_empty_rows(a, &L, cs, where);
  if (one_cta) {
    /* (a host call, allowed while the stream is captured) */
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&k->mu);
    if (!k->whole_sm_allowed)
      r = cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             k->whole_sm_smem);
    if (r == CUDA_SUCCESS) k->whole_sm_allowed = 1;
    pthread_mutex_unlock(&k->mu);
    if (r != CUDA_SUCCESS) return cuda_fail("cuFuncSetAttribute(one CTA a SM)", r, where);
  }

  /* One local per kernel parameter, named and typed as fa3rt_abi.def says. */
#define FA3RT_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) c_type name;
#include "fa3rt_abi.def"
  /* The tensor maps travel in the launch's parameters (by value). */
  /* GQA packing: Q's box is g heads x block_m / g queries (plan checked
     that g divides block_m) */
  const int g = L.pack_group;
  /* q, k, v of the kernel's dtype, o of its output type (FP8: bf16) */
  const fa3rt_dtype dt = f->dtype, odt = out_dtype(f->dtype);
  if ((st = encode_map(&mapQ, dt, &a->q, eff[FQ], g, f->block_m / g, "q", where)) ||
      (st = encode_map(&mapK, dt, &a->k, eff[FK], 1, L.kv_box_rows, "k", where)) ||
      (st = encode_map(&mapV, dt, &a->v, eff[FV], 1, L.kv_box_rows, "v", where)) ||
      (st = encode_map(&mapO, odt, &a->o, eff[FO], 1, O_BOX_ROWS, "o", where)))
    return st;
  O = (CUdeviceptr)a->o.ptr;
  LSE = (CUdeviceptr)a->lse;
  B = L.B;
  Sq = L.Sq;
  Skv = L.Skv;
  Hq = L.Hq;
  Hkv = L.Hkv;
  oStrideB = L.o_stride_b;
  oStrideS = L.o_stride_s;
  oStrideH = L.o_stride_h;
  scaleLog2 = L.scale_log2;
  cuSeqlensQ = (CUdeviceptr)a->cu_seqlens_q;
  cuSeqlensK = (CUdeviceptr)a->cu_seqlens_k;
  /* after an append, the counts it wrote (the old rows and the new) */
  seqUsedK = (CUdeviceptr)(L.append_grid ? a->seqlens_out : a->seqused_k);
  maxSeqlenQ = f->varlen ? varlen_grid_rows(a, L.Sq) : 0;
  /* one split: the kernel stores O and LSE itself */
  numSplits = L.num_splits;
  oAccum = L.num_splits > 1 ? (CUdeviceptr)a->o_accum : 0;
  lseAccum = L.num_splits > 1 ? (CUdeviceptr)a->lse_accum : 0;
  /* a paged cache (mapK and mapV over its pool), or 0, 0, 0: a
     contiguous one */
  pageTable = (CUdeviceptr)a->page_table;
  pageTableStride = a->page_table ? a->page_table_stride : 0;
  pageSize = L.page_size;
  /* FP8 descale factors (plan: 0 for the other kernels; strides 0 to
     2^31-1) */
  qDescale = (CUdeviceptr)a->q_descale;
  kDescale = (CUdeviceptr)a->k_descale;
  vDescale = (CUdeviceptr)a->v_descale;
  qDescaleStrideB = (int32_t)a->q_descale_stride_b;
  qDescaleStrideH = (int32_t)a->q_descale_stride_h;
  qDescaleStrideM = (int32_t)a->q_descale_stride_m;
  kDescaleStrideB = (int32_t)a->k_descale_stride_b;
  kDescaleStrideH = (int32_t)a->k_descale_stride_h;
  kDescaleStrideN = (int32_t)a->k_descale_stride_n;
  vDescaleStrideB = (int32_t)a->v_descale_stride_b;
  vDescaleStrideH = (int32_t)a->v_descale_stride_h;
  /* a left-padded cache's first rows (plan: split_kv kernels only) */
  leftPadK = (CUdeviceptr)a->leftpad_k;
  /* small pages: copied by the producer warp's lanes (paged_copy) */
  int64_t copy_strides[3] = {0, 0, 0};
  const int copies = paged_copy(f, a, &L, eff, copy_strides);
  pagedK = copies ? (CUdeviceptr)a->k.ptr : 0;
  pagedV = copies ? (CUdeviceptr)a->v.ptr : 0;
  pagedStridePage = copy_strides[0];
  pagedStrideRow = copy_strides[1];
  pagedStrideHead = copy_strides[2];
  pagedPages = copies ? pool_pages(a) : 0;
  void *params[] = {
#define FA3RT_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  /* A persistent kernel strides over the tiles: one CTA per SM (the shared
     memory of a CTA fills an SM), in whole clusters. */
  if (k->facts.persistent && L.grid[0] > (unsigned)k->max_ctas)
    L.grid[0] = (unsigned)k->max_ctas;
#define LAUNCH()                                                                              \
  cuLaunchKernel(k->fn, L.grid[0], L.grid[1], L.grid[2], L.block[0], L.block[1], L.block[2], \
                 L.dynamic_smem, cs, params, NULL)

  /* the new rows first, in stream order (the maps are encoded: a refusal
     has launched nothing) */
  if ((st = launch_append(k, a, &L, eff, cs, where))) return st;

  /* The caller's counters, or a captured launch's own: no bookkeeping. Only
     the dynamic scheduler (persistent, one CTA per cluster) reads them; the
     other kernels get the first slot's, untouched, and no event (a
     cuEventRecord a launch, for nothing they read). */
  const int dynamic = f->persistent && f->cluster_m == 1;
  if (a->tile_counter || capturing || !dynamic) {
    int taken = -1;
    if (a->tile_counter) {
      tileCounter = (CUdeviceptr)a->tile_counter;
    } else if (!dynamic) {
      tileCounter = k->counters_dev;
    } else {
      pthread_mutex_lock(&k->mu);
      taken = k->captured < NCAPTURED ? k->captured++ : -1;
      pthread_mutex_unlock(&k->mu);
      if (taken < 0)
        return fail(FA3RT_ERR_INVALID_ARGUMENT,
                    "fa3rt_fwd (%s): this kernel object has been captured in %d CUDA-graph "
                    "launches, each keeping tile counters of its own; pass args.tile_counter "
                    "(8 zeroed bytes) to capture more", where, NCAPTURED);
      tileCounter = k->counters_dev + (NSLOTS + (size_t)taken) * 2 * sizeof(uint32_t);
    }
    CUresult r = LAUNCH();
    if (r != CUDA_SUCCESS && taken >= 0) {
      pthread_mutex_lock(&k->mu); /* give the pair back if it was the last taken */
      if (k->captured == taken + 1) k->captured = taken;
      pthread_mutex_unlock(&k->mu);
    }
    if (r != CUDA_SUCCESS) return cuda_fail("cuLaunchKernel", r, where);
    return launch_combine(k, a, &L, cs, where);
  }

  pthread_mutex_lock(&k->mu);
  int slot;
  CUresult r;
  if (k->last_slot >= 0 && k->last_stream == cs) {
    slot = k->last_slot; /* stream order serialises the launches */
  } else {
    slot = k->next_slot;
    k->next_slot = (slot + 1) % NSLOTS;
    if (k->slot_used[slot]) {
      /* the launch that last used this slot's counters must be done */
      r = cuEventSynchronize(k->slot_done[slot]);
      if (r != CUDA_SUCCESS) { k->last_slot = -1; pthread_mutex_unlock(&k->mu); return cuda_fail("cuEventSynchronize", r, where); }
    }
  }
  tileCounter = k->counters_dev + (size_t)slot * 2 * sizeof(uint32_t);
  r = LAUNCH();
#undef LAUNCH
  const char *failed_call = "cuLaunchKernel";
  if (r == CUDA_SUCCESS) {
    failed_call = "cuEventRecord";
    r = cuEventRecord(k->slot_done[slot], cs);
  }
  if (r != CUDA_SUCCESS) {
    /* the slot's counters may be in use: let the next launch wait for the stream */
    k->last_slot = -1;
    k->slot_used[slot] = 0;
    pthread_mutex_unlock(&k->mu);
    cuStreamSynchronize(cs);
    return cuda_fail(failed_call, r, where);
  }
  k->slot_used[slot] = 1;
  k->last_slot = slot;
  k->last_stream = cs;
  pthread_mutex_unlock(&k->mu);
  return launch_combine(k, a, &L, cs, where);
}

/* <kernel>_pre: delta = rowsum(dO * O) in f32, dQaccum zeroed. The helpers
 * each have a function of their own: their parameter lists share names
 * (B, Sq, Hq, dQaccum) with the kernel's. */
static fa3rt_status launch_pre(const fa3rt_kernel *k, const fa3rt_bwd_args *a,
                               const fa3rt_bwd_launch *L, CUstream cs, const char *where) {
#define FA3RT_BWD_PRE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) c_type name;
#include "fa3rt_abi.def"
  O = (CUdeviceptr)a->o.ptr;
  dO = (CUdeviceptr)a->dout.ptr;
  oStrideB = L->o_stride_b;
  oStrideS = L->o_stride_s;
  oStrideH = L->o_stride_h;
  doStrideB = L->dout_stride_b;
  doStrideS = L->dout_stride_s;
  doStrideH = L->dout_stride_h;
  delta = (CUdeviceptr)a->delta;
  dQaccum = (CUdeviceptr)a->dq_accum;
  B = L->B;
  Sq = L->Sq;
  Hq = L->Hq;
  void *params[] = {
#define FA3RT_BWD_PRE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  CUresult r = cuLaunchKernel(k->fn_pre, L->aux_grid, 1, 1, L->aux_block, 1, 1, 0, cs, params,
                              NULL);
  return r == CUDA_SUCCESS ? FA3RT_OK : cuda_fail("cuLaunchKernel(_pre)", r, where);
}

/* The backward kernel itself: dK, dV, and dQ / scale summed into dQaccum. */
/* The backward kernel's tensor maps (Q, K, V, dO), encoded before anything
 * is launched: a refusal then leaves nothing on the stream. */
static fa3rt_status encode_grad_maps(const fa3rt_kernel *k, const fa3rt_bwd_args *a,
                                     const int64_t eff[NBWD][4], CUtensorMap maps[4],
                                     const char *where) {
  const fa3rt_facts *f = &k->facts;
  fa3rt_status st;
  const fa3rt_dtype dt = f->dtype; /* bf16 or f16: no FP8 backward */
  if ((st = encode_map(&maps[0], dt, &a->q, eff[BQ], 1, f->block_m, "q", where)) ||
      (st = encode_map(&maps[1], dt, &a->k, eff[BK], 1, f->block_n, "k", where)) ||
      (st = encode_map(&maps[2], dt, &a->v, eff[BV], 1, f->block_n, "v", where)) ||
      (st = encode_map(&maps[3], dt, &a->dout, eff[BDOUT], 1, f->block_m, "dout", where)))
    return st;
  return FA3RT_OK;
}

static fa3rt_status launch_grad(const fa3rt_kernel *k, const fa3rt_bwd_args *a,
                                const fa3rt_bwd_launch *L, const CUtensorMap maps[4],
                                CUstream cs, const char *where) {
  /* One local per kernel parameter, named and typed as fa3rt_abi.def says. */
#define FA3RT_BWD_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning)     \
  c_type name;
#include "fa3rt_abi.def"
  mapQ = maps[0];
  mapK = maps[1];
  mapV = maps[2];
  mapdO = maps[3];
  dQaccum = (CUdeviceptr)a->dq_accum;
  dK = (CUdeviceptr)a->dk.ptr;
  dV = (CUdeviceptr)a->dv.ptr;
  LSE = (CUdeviceptr)a->lse;
  delta = (CUdeviceptr)a->delta;
  B = L->B;
  Sq = L->Sq;
  Skv = L->Skv;
  Hq = L->Hq;
  Hkv = L->Hkv;
  dkvStrideB = L->dkv_stride_b;
  dkvStrideS = L->dkv_stride_s;
  dkvStrideH = L->dkv_stride_h;
  scaleLog2 = L->scale_log2;
  void *params[] = {
#define FA3RT_BWD_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  CUresult r = cuLaunchKernel(k->fn, L->grid[0], L->grid[1], L->grid[2], L->block[0],
                              L->block[1], L->block[2], L->dynamic_smem, cs, params, NULL);
  return r == CUDA_SUCCESS ? FA3RT_OK : cuda_fail("cuLaunchKernel", r, where);
}

/* <kernel>_post: dQ = scale * dQaccum, rounded once to dQ's dtype. */
static fa3rt_status launch_post(const fa3rt_kernel *k, const fa3rt_bwd_args *a,
                                const fa3rt_bwd_launch *L, CUstream cs, const char *where) {
#define FA3RT_BWD_POST_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) c_type name;
#include "fa3rt_abi.def"
  dQaccum = (CUdeviceptr)a->dq_accum;
  dQ = (CUdeviceptr)a->dq.ptr;
  dqStrideB = L->dq_stride_b;
  dqStrideS = L->dq_stride_s;
  dqStrideH = L->dq_stride_h;
  B = L->B;
  Sq = L->Sq;
  Hq = L->Hq;
  scale = (float)L->scale;
  void *params[] = {
#define FA3RT_BWD_POST_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  /* One CTA a chunk, a 64 x 64 block of dQaccum (GradAuxKernels.cpp,
     buildPost: FA3RT_BWD_DQ_ROWS-row tiles of ceil(D / 64) chunks); the
     kernel strides by the grid. (aux_grid, sized for _pre's rows, is twice
     the chunks: half its CTAs had nothing to do.) */
  const uint64_t mblocks = ((uint64_t)L->Sq + FA3RT_BWD_DQ_ROWS - 1) / FA3RT_BWD_DQ_ROWS;
  const uint64_t chunks = (uint64_t)L->B * (uint64_t)L->Hq * mblocks *
                          (uint64_t)((k->facts.head_dim + 63) / 64);
  const unsigned post_grid = (unsigned)(chunks < INT32_MAX ? (chunks ? chunks : 1) : INT32_MAX);
  CUresult r = cuLaunchKernel(k->fn_post, post_grid, 1, 1, L->aux_block, 1, 1, 0, cs, params,
                              NULL);
  return r == CUDA_SUCCESS ? FA3RT_OK : cuda_fail("cuLaunchKernel(_post)", r, where);
}

fa3rt_status fa3rt_bwd(fa3rt_kernel *k, const fa3rt_bwd_args *a, void *stream) {
  clear_error();
  if (!k || !a) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_bwd: NULL kernel or args");
  const fa3rt_facts *f = &k->facts;
  fa3rt_bwd_launch L;
  int64_t eff[NBWD][4];
  fa3rt_status st = plan_bwd(f, a, &L, eff);
  if (st) return in_call(st, "fa3rt_bwd", f);
  if (L.empty) return FA3RT_OK;
  char where[512];
  describe(where, f, L.B, L.Sq, L.Skv, L.Hq, L.Hkv);
  CUstream cs = (CUstream)stream;
  if ((st = check_context(k, where))) return st;
  /* in stream order: the kernel adds into the zeroed dQaccum and reads
     delta; post reads the sums. Without keys (zero_only) post turns the
     zeroed dQaccum into dq = 0. */
  CUtensorMap maps[4];
  memset(maps, 0, sizeof maps);
  if (!L.zero_only && (st = encode_grad_maps(k, a, eff, maps, where))) return st;
  if ((st = launch_pre(k, a, &L, cs, where))) return st;
  if (!L.zero_only && (st = launch_grad(k, a, &L, maps, cs, where))) return st;
  return launch_post(k, a, &L, cs, where);
}

/* ------------------------------------------------------------------------ */
/* FP8 quantization                                                          */
/* ------------------------------------------------------------------------ */

/* The bytes from a checked, non-empty tensor's first element past its last
 * (check_tensor bounds them below 2^63). */
static uint64_t span_bytes(const fa3rt_tensor *t, const int64_t eff[4], int64_t elem) {
  return (uint64_t)(last_index(t, eff) + 1) * (uint64_t)elem;
}

/* An f32 array of n elements at p (written or read by fa3rt_quantize):
 * given, `align`-byte aligned, below 2^63. */
static fa3rt_status check_f32_array(const char *name, uint64_t p, int64_t n, int align) {
  if (!p) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: %s is NULL", name);
  if (p % (uint64_t)align)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: %s 0x%llx is not %d-byte aligned "
                "(%s)", name, (unsigned long long)p, align,
                align == 4 ? "f32" : "read 4 floats at a time");
  if (p >= ADDR_END || (uint64_t)n > (ADDR_END - p) / 4)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: %s at 0x%llx with %lld elements "
                "reaches past 2^63 bytes", name, (unsigned long long)p, (long long)n);
  return FA3RT_OK;
}

fa3rt_status fa3rt_quantize(fa3rt_kernel *k, const fa3rt_quantize_args *a, void *stream) {
  clear_error();
  if (!k || !a) return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: NULL kernel or args");
  const fa3rt_facts *f = &k->facts;
  if (f->dtype != FA3RT_E4M3)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: kernel %s is %s; the quantization "
                "is part of the FP8 kernels (facts dtype e4m3), for the q, k and v they read",
                f->kernel, fa3rt_dtype_name(f->dtype));
  if (a->x_dtype != FA3RT_BF16 && a->x_dtype != FA3RT_F16)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: x_dtype %d (%s) is not taken: x "
                "is bf16 or f16", (int)a->x_dtype, fa3rt_dtype_name(a->x_dtype));
  if (a->per_head != 0 && a->per_head != 1)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: per_head is %d; 0 (a descale per "
                "128 rows) or 1 (per batch and head)", a->per_head);
  int64_t ex[4], ey[4];
  fa3rt_status st;
  if ((st = check_tensor("x", &a->x, 2, ex, BY_QUANTIZE)) ||
      (st = check_tensor("y", &a->y, 1, ey, BY_QUANTIZE)))
    return in_call(st, "fa3rt_quantize", f);
  for (int i = 0; i < 4; i++)
    if (a->y.shape[i] != a->x.shape[i])
      return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: y.shape[%d] (%s) is %lld, x's "
                  "%lld: y is x's shape", i, kDimNames[i], (long long)a->y.shape[i],
                  (long long)a->x.shape[i]);
  const int64_t nB = a->x.shape[0], nH = a->x.shape[1], nS = a->x.shape[2],
                nD = a->x.shape[3];
  if (nD != f->head_dim)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: x's head dim is %lld; kernel %s "
                "quantizes head dim %d", (long long)nD, f->kernel, f->head_dim);
  const int64_t blocks = (nS + FA3RT_FP8_QUANTIZE_ROWS - 1) / FA3RT_FP8_QUANTIZE_ROWS;
  if (blocks > 65535 || nB > 65535)
    return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: %s = %lld is more than %s (the "
                "grid's %s extent)", blocks > 65535 ? "S" : "B",
                (long long)(blocks > 65535 ? nS : nB),
                blocks > 65535 ? "65535 blocks of 128 rows" : "65535",
                blocks > 65535 ? "y" : "z");
  const int64_t n_descale = a->per_head ? nB * nH : nB * nH * blocks;
  /* nothing to write: no heads, or no rows with a descale per block */
  if (nB == 0 || nH == 0 || (nS == 0 && !a->per_head)) return FA3RT_OK;
  if ((st = check_f32_array("descale", a->descale, n_descale, 4))) return st;
  if (a->signs && (st = check_f32_array("signs", a->signs, nD, 16))) return st;
  if (a->per_head && nS && (st = check_f32_array("workspace", a->workspace, nB * nH, 4)))
    return st;
  if (nS) {
    /* no array the kernel writes may share a byte with another it reads
       or writes (other CTAs would read it half written) */
    const char *names[4] = {"x", "y", "descale", "workspace"};
    const uint64_t at[4] = {a->x.ptr, a->y.ptr, a->descale, a->per_head ? a->workspace : 0};
    const uint64_t len[4] = {span_bytes(&a->x, ex, 2), span_bytes(&a->y, ey, 1),
                             (uint64_t)n_descale * 4,
                             a->per_head ? (uint64_t)(nB * nH) * 4 : 0};
    for (int i = 1; i < 4; i++)
      for (int j = 0; j < i; j++)
        if (overlaps(at[i], len[i], at[j], len[j]))
          return fail(FA3RT_ERR_INVALID_ARGUMENT, "fa3rt_quantize: %s (0x%llx) overlaps %s "
                      "(0x%llx): the kernel writes %s while it reads or writes %s", names[i],
                      (unsigned long long)at[i], names[j], (unsigned long long)at[j],
                      names[i], names[j]);
  }
  char where[512];
  snprintf(where, sizeof where, "fa3rt_quantize of kernel %s: B=%lld, H=%lld, S=%lld, D=%lld%s%s",
           f->kernel, (long long)nB, (long long)nH, (long long)nS, (long long)nD,
           a->per_head ? ", per head" : "", a->signs ? ", rotated" : "");
  if ((st = check_context(k, where))) return st;
  CUstream cs = (CUstream)stream;
  if (nS == 0) { /* per head: no rows, descale 1 (fa3.quantize_fp8's) */
    if (!a->per_head) return FA3RT_OK;
    const unsigned one = 0x3F800000u;
    CU_TRY(cuMemsetD32Async((CUdeviceptr)a->descale, one, (size_t)n_descale, cs), where);
    return FA3RT_OK;
  }
#define FA3RT_FP8_QUANTIZE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning)   \
  c_type name;
#include "fa3rt_abi.def"
  X = (CUdeviceptr)a->x.ptr;
  xStrideB = ex[0];
  xStrideS = ex[2];
  xStrideH = ex[1];
  xIsF16 = a->x_dtype == FA3RT_F16;
  Y = (CUdeviceptr)a->y.ptr;
  yStrideB = ey[0];
  yStrideS = ey[2];
  yStrideH = ey[1];
  descale = (CUdeviceptr)a->descale;
  signs = (CUdeviceptr)a->signs;
  amax = a->per_head ? (CUdeviceptr)a->workspace : 0;
  B = (int32_t)a->x.shape[0];
  S = (int32_t)a->x.shape[2];
  H = (int32_t)a->x.shape[1];
  void *params[] = {
#define FA3RT_FP8_QUANTIZE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) &name,
#include "fa3rt_abi.def"
  };
  const unsigned threads = (unsigned)(FA3RT_FP8_QUANTIZE_THREADS_PER_COL * f->head_dim);
  /* per head: the heads' amax words start at 0 (mode 1 maxes into them) */
  if (a->per_head)
    CU_TRY(cuMemsetD32Async((CUdeviceptr)a->workspace, 0, (size_t)(nB * nH), cs), where);
  const int modes[2][2] = {{0, -1}, {1, 2}};
  for (int i = 0; i < 2 && modes[a->per_head][i] >= 0; i++) {
    mode = modes[a->per_head][i];
    CUresult r = cuLaunchKernel(k->fn_quantize, (unsigned)a->x.shape[1], (unsigned)blocks,
                                (unsigned)a->x.shape[0], threads, 1, 1, 0, cs, params, NULL);
    if (r != CUDA_SUCCESS) return cuda_fail("cuLaunchKernel(_quantize)", r, where);
  }
  return FA3RT_OK;
}
