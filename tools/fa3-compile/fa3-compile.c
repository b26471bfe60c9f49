/*===- fa3-compile.c - compile attention to Hopper kernels ---------------===*\
|*                                                                            *|
|* Writes <kernel>.ptx, <kernel>.cubin and <kernel>.facts for each attention *|
|* in an IR file, for one variant described on the command line, or for the  *|
|* standard set of variants. Uses only the C API (include/fa3-c).            *|
\*===----------------------------------------------------------------------===*/
/* POSIX: clock_gettime, fileno, mkdir (also under -std=c11). */
#define _POSIX_C_SOURCE 200809L

#include "fa3-c/Compile.h"
#include "fa3-c/Registration.h"
#include "mlir-c/IR.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *kUsage =
    "usage: fa3-compile [options] [input.mlir] -o DIR\n"
    "\n"
    "Compiles attention to FlashAttention-3-style sm_90a kernels and writes,\n"
    "per kernel, DIR/<kernel>.ptx, DIR/<kernel>.cubin (needs ptxas) and\n"
    "DIR/<kernel>.facts (the launch facts the runtime reads).\n"
    "\n"
    "Input (one of):\n"
    "  input.mlir           every attn.flash_attention(_varlen, _grad) in the\n"
    "                       file\n"
    "  --head-dim N ...     one variant from the options below\n"
    "  --all                the standard set: head dim 64/96/128/192/256 and\n"
    "                       192 with value head dim 128 x causal or not x\n"
    "                       bf16/f16 (24 kernels, and head dim 64 causal's\n"
    "                       two long-sequence kernels); with --varlen, their\n"
    "                       packed variable-length forms (26 likewise); with\n"
    "                       --backward,\n"
    "                       the backward's (head dim 64, 96, 128, 192 and\n"
    "                       256: 20 kernels);\n"
    "                       with --fp8, the FP8 forward's (e4m3, head dim\n"
    "                       64, 128 and 256 x causal or not: 6 kernels,\n"
    "                       and head dim 128's two long-sequence kernels),\n"
    "                       with --fp8 --decode the FP8 decoding kernels\n"
    "                       (head dim 64 and 128 x causal or not)\n"
    "  --fp8                with --all: the FP8 forward set (for one\n"
    "                       variant, --dtype e4m3)\n"
    "\n"
    "Variant options (with --head-dim only):\n"
    "  --head-dim N         of q and k: 64, 96, 128, 192 or 256\n"
    "  --head-dim-v N       of v and o (default: the head dim); 128 with head\n"
    "                       dim 192 (DeepSeek's) is the other pairing taken\n"
    "  --dtype T            bf16 (default), f16, or e4m3 (FP8: q, k, v\n"
    "                       float8_e4m3fn with descales given at launch, o\n"
    "                       bf16; head dim 64, 128 or 256, a fixed-length\n"
    "                       forward, or with --decode 64 or 128 (an FP8 KV\n"
    "                       cache); its cubin also holds <kernel>_quantize,\n"
    "                       bf16/f16 to e4m3 with block scales and the\n"
    "                       Hadamard rotation: fa3rt_quantize)\n"

    "  --causal             bottom-right aligned causal mask\n"
    "  --window L,R         sliding window, each side -1 (unbounded) to\n"
    "                       2147483647\n"
    "  --softcap X          softcap: 0 (off, the default) or 1e-6 to 1e30\n"
    "  --scale X            default softmax scale recorded in the facts,\n"
    "                       > 0 and at most 1e30 (default: 1/sqrt(head dim))\n"
    "  --varlen             a packed variable-length batch (FlashAttention's\n"
    "                       flash_attn_varlen_func: cu_seqlens at launch);\n"
    "                       no clusters (also with --all)\n"
    "  --paged              with --varlen: k and v also through a page table\n"
    "                       given at launch (a paged KV cache:\n"
    "                       flash_attn_with_kvcache with cu_seqlens_q and\n"
    "                       page_table), one CTA per tile; name suffix\n"
    "                       _paged (also with --all --varlen)\n"
    "  --backward           the backward (dQ, dK, dV from dO: FlashAttention's\n"
    "                       training step; fa3rt_bwd): head dim 64, 96, 128,\n"
    "                       192 or 256 (value head dim the same), with the\n"
    "                       variant's mask and softcap (also with --all: full\n"
    "                       and causal); its module also holds\n"
    "                       <kernel>_pre (delta) and <kernel>_post (dQ),\n"
    "                       launched around it\n"
    "  --deterministic      with --backward (also with --all): dq bitwise the\n"
    "                       same from run to run (FlashAttention's\n"
    "                       deterministic=True: the kv blocks add each dQ\n"
    "                       tile in turn, at some cost in speed); name\n"
    "                       suffix _det, facts `deterministic 1`\n"
    "  --decode             the decoding kernel (flash_attn_with_kvcache):\n"
    "                       the q heads of a kv head share a tile (GQA\n"
    "                       packing) and a tile's kv blocks split over a\n"
    "                       launch-time number of CTAs, merged by\n"
    "                       <kernel>_combine in the same module (also with\n"
    "                       --all; not with --varlen or --backward)\n"
    "  --name NAME          kernel base name, a C identifier of at most 200\n"
    "                       characters (default: derived from the variant)\n"
    "\n"
    "Compilation options:\n"
    "  --block-m N          Q rows per tile: 128 (two consumer warpgroups\n"
    "                       taking turns) or 192 (three; default 0: 192 for\n"
    "                       head dim 64 with a full mask, and for FP8 head\n"
    "                       dim 64 with any mask, and for head dim 64 causal\n"
    "                       from --min-seqlen-q 6144, else 128); with --decode\n"
    "                       also 64 (one; its default)\n"
    "  --min-seqlen-q N     configure the forward for calls with at least N\n"
    "                       query rows (default 0: any length): the table's\n"
    "                       entries for long sequences (head dim 64 causal:\n"
    "                       192 rows from 6144; FP8 head dim 128 full or\n"
    "                       causal: 192 keys from 8192), facts min_seqlen_q.\n"
    "                       With 0 and the tile left to the table\n"
    "                       (--block-m, --block-n, --stages, --q-buffers 0),\n"
    "                       such a variant also gets <name>_long_kernel\n"
    "                       (--all too), which fa3.torch_api takes from that\n"
    "                       length (FP8: not with k descales per 128 keys)\n"
    "  --transpose-warps N  FP8: V's transposer warps, 3 (warps 1 .. 3 of the\n"
    "                       producer warpgroup) or 4 (warp 0 too, one fill\n"
    "                       behind its loads, as FA3; persistent kernels,\n"
    "                       and decoding kernels, whose four warps then also\n"
    "                       copy small pages); default 0: 4 at head dim 256\n"
    "                       and with --decode (measured faster), else 3\n"
    "  --block-n N          K/V rows per tile, 16 to 256 (default 0: 128, or\n"
    "                       112 / 96 causal at head dim 192 (128 with value\n"
    "                       head dim 128), 64 at 256; with --decode and 64\n"
    "                       rows, 64 up to head dim 128, built for two CTAs\n"
    "                       a SM where three stages fit, and 128 in FP8 with\n"
    "                       two stages); FP8 128 (default;\n"
    "                       192 at head dim 128 from --min-seqlen-q 8192),\n"
    "                       160, 192 or 224 with 128 rows, 128 or 160 with\n"
    "                       192, head dim 64 or 128 (FA3's 224 at 128, 160\n"
    "                       at 64)\n"
    "  --stages N           depth of the K/V shared-memory ring, 1 to 8\n"
    "                       (default 0: 4 for head dim 64 with 128-row\n"
    "                       tiles, else 2; FP8: 3 at head dim 64, where two\n"
    "                       Q buffers fit beside them, else 2); with\n"
    "                       --backward, of the Q/dO rings, 1 to 4 (default\n"
    "                       2; 1 at head dim 256, where two do not fit\n"
    "                       beside dQ's staging, 2 there with\n"
    "                       --no-tma-store);\n"
    "                       the backward's block-m is 64, or 128 at head\n"
    "                       dim 64 (the default there, but not with\n"
    "                       --deterministic, softcap or --no-tma-store, nor\n"
    "                       with a --block-n or --stages it cannot take);\n"
    "                       block-n 128, 64\n"
    "                       keys a consumer warpgroup, or 64, both\n"
    "                       warpgroups on the same keys, the only choice at\n"
    "                       head dim 256; the other options below tune\n"
    "                       the forward)\n"
    "  --no-pingpong        consumer warpgroups do not take turns\n"
    "  --persistent         CTAs loop over tiles (the runtime launches one\n"
    "                       CTA per SM, a dynamic scheduler hands out\n"
    "                       tiles); default: where measured faster (head\n"
    "                       dim 64 and 128, and every FP8 kernel)\n"
    "  --no-persistent      one CTA per tile\n"
    "  --no-tma-store       write O with 4-byte stores from registers instead\n"
    "                       of staging it in shared memory for a TMA store\n"
    "                       (a persistent varlen kernel's threads copy it\n"
    "                       out of shared memory);\n"
    "                       backward: add dQ by the consumers' atomics instead\n"
    "                       of the producer's bulk reductions\n"
    "  --q-buffers N        Q tiles in shared memory, 1 or 2: 2 lets a\n"
    "                       persistent CTA load the next tile's Q during the\n"
    "                       current one (default 0: 2 where it fits, head\n"
    "                       dim 64 and 128, but 1 in the packed 192-row\n"
    "                       causal kernel, where 2 spill; FP8: 2 at head\n"
    "                       dim 128, else 1)\n"
    "  --lazy-rescale       O *= alpha only in warpgroups where a row raised\n"
    "                       its running max (default: where measured\n"
    "                       faster, head dim 128 and 256)\n"
    "  --no-lazy-rescale    rescale O after every kv block\n"
    "  --rescale-threshold X  with lazy rescaling, raise a row's max only when\n"
    "                       a kv block exceeds it by more than X (log2 units,\n"
    "                       0 to 15, default 8; 0: exact, O rescaled after\n"
    "                       every kv block)\n"
    "  --kv-multicast       2-CTA clusters: neighbouring m-blocks of a head\n"
    "                       share each K/V tile, each CTA loading half and\n"
    "                       multicasting it (where it applies: full mask,\n"
    "                       head dim 128 and 256; default: where measured\n"
    "                       faster, persistent kernels = head dim 128)\n"
    "  --no-kv-multicast    one CTA per cluster\n"
    "  --ptx-only           write PTX and facts, no cubin (also the fallback,\n"
    "                       with a warning, when ptxas cannot be found)\n"
    "  --ptxas-timeout S    stop ptxas after S seconds, 1 to 86400\n"
    "                       (default 600)\n"
    "  -o DIR               output directory (created if missing)\n"
    "  -h, --help           this text\n"
    "\n"
    "An option's value follows it (--stages 2) or is joined by '=' (--stages=2).\n";

/* Prints `s` with control characters escaped (\n, \xNN): values echoed in
 * messages come from the command line and may hold anything. */
static void putEscaped(FILE *out, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
    if (*p == '\n')
      fputs("\\n", out);
    else if (*p == '\t')
      fputs("\\t", out);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(out, "\\x%02x", *p);
    else
      fputc(*p, out);
  }
}

static int fail(const char *msg, const char *arg) {
  fprintf(stderr, "fa3-compile: %s", msg);
  if (arg) {
    fputs(": ", stderr);
    putEscaped(stderr, arg);
  }
  fputc('\n', stderr);
  return 1;
}

/* "OPTION must be RANGE, got: VALUE" for a value that does not parse or is
 * out of its range. */
static int failValue(const char *option, const char *range, const char *value) {
  fprintf(stderr, "fa3-compile: %s must be %s, got: ", option, range);
  putEscaped(stderr, value);
  fputc('\n', stderr);
  return 1;
}

/* `path` can be opened for reading and is not a directory; else errno says
 * why. The parser then reads it by name, so that diagnostics carry it. */
static bool readable(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  struct stat st;
  bool ok = fstat(fileno(f), &st) == 0;
  if (ok && S_ISDIR(st.st_mode)) {
    ok = false;
    errno = EISDIR;
  }
  int e = errno;
  fclose(f);
  errno = e;
  return ok;
}

/* A C identifier: letters, digits and '_', not starting with a digit, of 1
 * to `maxLen` characters. Kernel names become file names, PTX symbols and
 * the facts' kernel key, so nothing else is let through. */
static bool isIdentifier(const char *s, size_t maxLen) {
  size_t n = 0;
  for (const char *p = s; *p; ++p, ++n) {
    char c = *p;
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && n > 0))
      return false;
  }
  return n >= 1 && n <= maxLen;
}

static int writeFile(const char *dir, const char *name, const char *ext,
                     const void *data, size_t size) {
  char path[4096];
  int len = snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  if (len < 0 || (size_t)len >= sizeof path) {
    fprintf(stderr, "fa3-compile: output path too long: %s/%s.%s\n", dir, name,
            ext);
    return 1;
  }
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(data, 1, size, f) == size;
  if (f && fclose(f) != 0)
    ok = false;
  if (!ok) {
    fprintf(stderr, "fa3-compile: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

/* Kernel names the runtime can load (fa3rt's facts keep up to 255
 * characters) and that stay inside the output directory. */
#define MAX_KERNEL_NAME 255

static int writeSet(Fa3KernelSet *set, const char *dir, double seconds) {
  size_t n = fa3KernelSetSize(set);
  for (size_t i = 0; i < n; ++i) {
    Fa3KernelBinary k = fa3KernelSetGet(set, i);
    if (!k.name || !isIdentifier(k.name, MAX_KERNEL_NAME)) {
      fprintf(stderr, "fa3-compile: kernel name is not a C identifier of at "
                      "most %d characters (rename its function): ",
              MAX_KERNEL_NAME);
      putEscaped(stderr, k.name ? k.name : "(null)");
      fputc('\n', stderr);
      return 1;
    }
  }
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    Fa3KernelBinary k = fa3KernelSetGet(set, i);
    rc |= writeFile(dir, k.name, "ptx", k.ptx, k.ptxSize);
    if (k.cubinSize)
      rc |= writeFile(dir, k.name, "cubin", k.cubin, k.cubinSize);
    rc |= writeFile(dir, k.name, "facts", k.facts, strlen(k.facts));
    if (k.cubinSize)
      printf("%s/%s.{ptx,cubin,facts}  (ptx %zu bytes, cubin %zu bytes, %.2f s)\n",
             dir, k.name, k.ptxSize, k.cubinSize, seconds);
    else
      printf("%s/%s.{ptx,facts}  (ptx %zu bytes, no cubin, %.2f s)\n", dir,
             k.name, k.ptxSize, seconds);
  }
  return rc;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* mkdir -p: creates `path` and any missing parent. */
static bool makeDirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, path, n + 1);
  for (char *p = buf + 1; *p; ++p) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return false;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    return false;
  struct stat st;
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A whole decimal integer in [lo, hi]: an optional '-' and digits, nothing
 * else (atoll would read "12x" or "abc" as 12 or 0, and 0 means "per head
 * dim" for several options; strtoll alone would also take " 12", "+12"). */
static bool parseInt(const char *v, int64_t lo, int64_t hi, int64_t *out) {
  const char *d = v + (*v == '-');
  if (*d < '0' || *d > '9')
    return false;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (*end || errno || x < lo || x > hi)
    return false;
  *out = x;
  return true;
}

/* A decimal number (strtod's syntax, no leading space) that is 0 when
 * `zero` allows it, or else lies in [lo, hi]. */
static bool parseNumber(const char *v, bool zero, double lo, double hi,
                        double *out) {
  if (!*v || *v == ' ' || *v == '\t' || *v == '\n')
    return false;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (*end || !isfinite(x))
    return false;
  if (!(x == 0 ? zero : x >= lo && x <= hi))
    return false;
  *out = x;
  return true;
}

/* LEFT,RIGHT: two whole numbers, each -1 (unbounded) to 2^31-1 (what the
 * facts parsers accept). */
static bool parseWindow(const char *v, int64_t *left, int64_t *right) {
  const char *comma = strchr(v, ',');
  if (!comma || (size_t)(comma - v) >= 32)
    return false;
  char l[32];
  memcpy(l, v, (size_t)(comma - v));
  l[comma - v] = 0;
  return parseInt(l, -1, INT32_MAX, left) &&
         parseInt(comma + 1, -1, INT32_MAX, right);
}

#define WINDOW_RANGE                                                           \
  "LEFT,RIGHT, each a whole number from -1 (unbounded) to 2147483647"
#define NAME_RANGE                                                             \
  "a C identifier (letters, digits and '_', not starting with a digit) of "    \
  "at most 200 characters"
#define MAX_NAME 200

int main(int argc, char **argv) {
  const char *input = NULL, *outDir = NULL, *name = NULL;
  Fa3AttentionSpec spec = fa3AttentionSpecDefault();
  Fa3HopperOptions opts = fa3HopperOptionsDefault();
  int haveSpec = 0, all = 0;
  bool fp8Set = false;
  const char *variantOption = NULL; /* first option that needs --head-dim */
  /* Options that take a value, each given at most once, and flags. */
  static const char *const kValued[] = {
      "-o",          "--head-dim",         "--dtype",   "--window",
      "--head-dim-v",
      "--softcap",   "--scale",            "--name",    "--block-m",
      "--block-n",   "--stages",           "--q-buffers",
      "--rescale-threshold", "--ptxas-timeout", "--min-seqlen-q",
      "--transpose-warps"};
  static const char *const kFlags[] = {
      "--help",           "--all",          "--causal",
      "--persistent",     "--no-persistent", "--no-tma-store",
      "--ptx-only",       "--no-pingpong",  "--lazy-rescale",
      "--no-lazy-rescale", "--kv-multicast", "--no-kv-multicast",
      "--varlen",         "--backward",     "--decode",
      "--fp8",            "--deterministic", "--paged"};
  enum { kNumValued = sizeof kValued / sizeof kValued[0] };
  enum { kNumFlags = sizeof kFlags / sizeof kFlags[0] };
  bool given[kNumValued] = {false};
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    /* --option=value: split at the first '='. */
    char opt[64];
    const char *a = arg, *joined = NULL;
    const char *eq = strchr(arg, '=');
    if (arg[0] == '-' && arg[1] == '-' && eq) {
      size_t n = (size_t)(eq - arg);
      if (n >= sizeof opt)
        return fail("unknown option (see --help)", arg);
      memcpy(opt, arg, n);
      opt[n] = 0;
      a = opt;
      joined = eq + 1;
    }
    int valued = -1;
    for (int j = 0; j < kNumValued; ++j)
      if (!strcmp(a, kValued[j]))
        valued = j;
    const char *v = NULL;
    if (valued >= 0) {
      if (given[valued])
        return fail("option given twice", a);
      given[valued] = true;
      if (joined)
        v = joined;
      else if (i + 1 < argc)
        v = argv[++i];
      else {
        fprintf(stderr, "fa3-compile: %s needs a value (see --help)\n", a);
        return 1;
      }
    } else if (joined) {
      bool flag = false;
      for (int j = 0; j < kNumFlags; ++j)
        flag |= !strcmp(a, kFlags[j]);
      if (!flag)
        return fail("unknown option (see --help)", arg);
      fprintf(stderr, "fa3-compile: %s takes no value, got: ", a);
      putEscaped(stderr, joined);
      fputc('\n', stderr);
      return 1;
    }
/* A branch of an option that takes a value: kValued must list it. */
#define HAVE_VALUE()                                                           \
  do {                                                                         \
    if (!v)                                                                    \
      return fail("internal error: option missing from kValued", a);         \
  } while (0)
#define INT_OPTION(dst, lo, hi, range)                                         \
  do {                                                                         \
    int64_t x_;                                                                \
    HAVE_VALUE();                                                              \
    if (!parseInt(v, (lo), (hi), &x_))                                         \
      return failValue(a, (range), v);                                         \
    (dst) = x_;                                                                \
  } while (0)
#define NUMBER_OPTION(dst, zero, lo, hi, range)                                \
  do {                                                                         \
    double x_;                                                                 \
    HAVE_VALUE();                                                              \
    if (!parseNumber(v, (zero), (lo), (hi), &x_))                              \
      return failValue(a, (range), v);                                        \
    (dst) = x_;                                                                \
  } while (0)
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(kUsage, stdout);
      return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    } else if (!strcmp(a, "-o")) {
      HAVE_VALUE();
      if (!*v)
        return fail("-o takes a directory, got an empty name", NULL);
      outDir = v;
    } else if (!strcmp(a, "--all")) {
      all = 1;
    } else if (!strcmp(a, "--head-dim")) {
      INT_OPTION(spec.headDim, 1, INT64_MAX,
                 "a positive whole number (the kernel takes 64, 96, 128, 192 or 256)");
      haveSpec = 1;
    } else if (!strcmp(a, "--head-dim-v")) {
      INT_OPTION(spec.headDimV, 1, INT64_MAX,
                 "a positive whole number (the kernel takes 64, 96, 128, 192 or 256)");
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--dtype")) {
      HAVE_VALUE();
      if (strcmp(v, "bf16") && strcmp(v, "f16") && strcmp(v, "e4m3"))
        return failValue(a, "bf16, f16 or e4m3", v);
      spec.dtype = v;
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--fp8")) {
      fp8Set = true;
    } else if (!strcmp(a, "--varlen")) {
      spec.varlen = true; /* a variant option that --all takes too */
    } else if (!strcmp(a, "--backward")) {
      spec.backward = true; /* likewise */
    } else if (!strcmp(a, "--decode")) {
      spec.decode = true; /* likewise */
    } else if (!strcmp(a, "--deterministic")) {
      spec.deterministic = true; /* likewise */
    } else if (!strcmp(a, "--paged")) {
      spec.pagedKv = true; /* likewise */
    } else if (!strcmp(a, "--causal")) {
      spec.causal = true;
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--window")) {
      HAVE_VALUE();
      if (!parseWindow(v, &spec.windowLeft, &spec.windowRight))
        return failValue(a, WINDOW_RANGE, v);
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--softcap")) {
      NUMBER_OPTION(spec.softcap, true, 1e-6, 1e30,
                    "0 (off) or a number from 1e-6 to 1e30");
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--scale")) {
      /* (the spec holds a float: the least positive one, not 0) */
      NUMBER_OPTION(spec.scale, false, FLT_TRUE_MIN, 1e30,
                    "a number > 0 and at most 1e30");
      spec.hasScale = true;
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--name")) {
      HAVE_VALUE();
      if (!isIdentifier(v, MAX_NAME))
        return failValue(a, NAME_RANGE, v);
      name = v;
      variantOption = variantOption ? variantOption : a;
    } else if (!strcmp(a, "--block-m")) {
      INT_OPTION(opts.blockM, 0, 192, "0 (per head dim), 64, 128 or 192");
      if (opts.blockM != 0 && opts.blockM != 64 && opts.blockM != 128 &&
          opts.blockM != 192)
        return failValue(a, "0 (per head dim), 64, 128 or 192", v);
    } else if (!strcmp(a, "--block-n")) {
      INT_OPTION(opts.blockN, 0, 256,
                 "0 (per head dim) or a whole number from 16 to 256");
      if (opts.blockN > 0 && opts.blockN < 16)
        return failValue(a, "0 (per head dim) or a whole number from 16 to 256",
                         v);
    } else if (!strcmp(a, "--persistent")) {
      opts.persistent = 1;
    } else if (!strcmp(a, "--no-persistent")) {
      opts.persistent = -1;
    } else if (!strcmp(a, "--no-tma-store")) {
      opts.tmaStore = false;
    } else if (!strcmp(a, "--ptx-only")) {
      opts.emitCubin = false;
    } else if (!strcmp(a, "--no-pingpong")) {
      opts.pingpong = false;
    } else if (!strcmp(a, "--q-buffers")) {
      INT_OPTION(opts.qBuffers, 0, 2, "0 (per head dim), 1 or 2");
    } else if (!strcmp(a, "--lazy-rescale")) {
      opts.lazyRescale = 1;
    } else if (!strcmp(a, "--no-lazy-rescale")) {
      opts.lazyRescale = -1;
    } else if (!strcmp(a, "--kv-multicast")) {
      opts.kvMulticast = 1;
    } else if (!strcmp(a, "--no-kv-multicast")) {
      opts.kvMulticast = -1;
    } else if (!strcmp(a, "--rescale-threshold")) {
      NUMBER_OPTION(opts.rescaleThreshold, true, 0, 15, "a number from 0 to 15");
    } else if (!strcmp(a, "--stages")) {
      INT_OPTION(opts.stages, 0, 8,
                 "0 (per head dim) or a whole number from 1 to 8");
    } else if (!strcmp(a, "--min-seqlen-q")) {
      INT_OPTION(opts.minSeqlenQ, 0, 2147483647,
                 "0 (any length) or a whole number up to 2^31-1");
    } else if (!strcmp(a, "--transpose-warps")) {
      INT_OPTION(opts.transposeWarps, 0, 4, "0 (the table), 3 or 4");
      if (opts.transposeWarps == 1 || opts.transposeWarps == 2)
        return failValue(a, "0 (the table), 3 or 4", v);
    } else if (!strcmp(a, "--ptxas-timeout")) {
      INT_OPTION(opts.ptxasTimeoutSeconds, 1, 86400,
                 "a whole number of seconds from 1 to 86400");
    } else if (a[0] == '-') {
      return fail("unknown option (see --help)", a);
    } else if (!input) {
      input = a;
    } else {
      return fail("more than one input file", a);
    }
#undef HAVE_VALUE
#undef INT_OPTION
#undef NUMBER_OPTION
  }
  if (!outDir)
    return fail("no output directory (-o DIR); see --help", NULL);
  if ((input != NULL) + haveSpec + all != 1)
    return fail("give exactly one of: an input file, --head-dim N, --all", NULL);
  if (variantOption && !haveSpec) {
    fprintf(stderr, "fa3-compile: %s describes one variant: it needs "
                    "--head-dim (an input file or --all brings its own)\n",
            variantOption);
    return 1;
  }
  if (input && spec.varlen)
    return fail("--varlen describes a variant; an input file brings its own "
                "(attn.flash_attention_varlen)", NULL);
  if (input && spec.backward)
    return fail("--backward describes a variant; an input file brings its "
                "own (attn.flash_attention_grad)", NULL);
  if (input && spec.decode)
    return fail("--decode describes a variant; for an input file run "
                "fa3-opt --attn-hopper-pipeline=\"decode=true\"", NULL);
  if (input && spec.deterministic)
    return fail("--deterministic describes a variant; an input file brings "
                "its own (attn.flash_attention_grad ... deterministic)", NULL);
  if (spec.deterministic && !spec.backward)
    return fail("--deterministic is the backward's: give --backward too",
                NULL);
  if (input && spec.pagedKv)
    return fail("--paged describes a variant; for an input file run "
                "fa3-opt --attn-hopper-pipeline=\"paged-kv=true\"", NULL);
  if (spec.pagedKv && !spec.varlen)
    return fail("--paged is a packed batch's page table: give --varlen too "
                "(the decoding kernel, --decode, takes one by itself)", NULL);
  if (fp8Set && !all)
    return fail("--fp8 selects the FP8 set of --all; for one variant give "
                "--dtype e4m3", NULL);
  if (fp8Set && (spec.backward || spec.varlen))
    return fail("--fp8 is the fixed-length forward or (with --decode) the "
                "decoding kernel: not with --backward or --varlen", NULL);
  if (all && spec.backward && spec.varlen)
    return fail("--backward takes fixed-length batches, not --varlen", NULL);
  if (all && spec.decode && (spec.backward || spec.varlen))
    return fail("--decode is a fixed-length forward: not with --backward or "
                "--varlen", NULL);
  if (input && !readable(input)) {
    fprintf(stderr, "fa3-compile: cannot read: ");
    putEscaped(stderr, input);
    fprintf(stderr, " (%s)\n", strerror(errno));
    return 1;
  }
  if (!makeDirs(outDir))
    return fail("cannot create output directory", outDir);
  if (opts.emitCubin && fa3FindPtxas(opts.toolkit, NULL, 0) == 0) {
    fprintf(stderr, "fa3-compile: warning: ptxas not found ($CUDA_HOME, "
                    "$CUDA_PATH, /usr/local/cuda or PATH): writing PTX and facts "
                    "only; the runtime needs the cubin\n");
    opts.emitCubin = false;
  }

  MlirContext ctx = fa3ContextCreate();
  Fa3DiagnosticLog *log = fa3DiagnosticLogAttach(ctx);
  int rc = 0;
  if (input) {
    double t0 = now();
    MlirModule module = mlirModuleCreateParseFromFile(
        ctx, mlirStringRefCreateFromCString(input));
    Fa3KernelSet *set =
        mlirModuleIsNull(module) ? NULL : fa3CompileHopperModule(module, &opts);
    if (!set) {
      const char *text = fa3DiagnosticLogText(log);
      if (text && *text)
        fprintf(stderr, "%s", text);
      else
        fail("cannot compile (no diagnostic)", input);
      rc = 1;
    } else {
      rc = writeSet(set, outDir, now() - t0);
      fa3KernelSetDestroy(set);
    }
    if (!mlirModuleIsNull(module))
      mlirModuleDestroy(module);
  } else {
    /* fa3::hopper::kHeadDims (include/fa3/Conversion/HopperSupport.h, C++),
       each with its own value head dim, and DeepSeek's 192 with 128 */
    const int64_t dims[][2] = {{64, 64},   {96, 96},   {128, 128},
                               {192, 192}, {192, 128}, {256, 256}};
    /* the backward's: head dims 64, 96, 128, 192 and 256 */
    const int64_t gradDims[][2] = {
        {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}};
    /* the FP8 forward's: head dims 64, 128 and 256 */
    const int64_t fp8Dims[][2] = {{64, 64}, {128, 128}, {256, 256}};
    const char *types[] = {"bf16", "f16"};
    /* the FP8 decoding kernel's: head dims 64 and 128 */
    const int nFp8Dims = spec.decode ? 2 : (int)(sizeof fp8Dims / sizeof fp8Dims[0]);
    int n = !all ? 1
            : fp8Set ? 2 * nFp8Dims
            : spec.backward ? 4 * (int)(sizeof gradDims / sizeof gradDims[0])
                            : 4 * (int)(sizeof dims / sizeof dims[0]);
    for (int i = 0; i < n; ++i) {
      Fa3AttentionSpec s = spec;
      if (all && fp8Set) {
        s = fa3AttentionSpecDefault();
        s.headDim = s.headDimV = fp8Dims[i / 2][0];
        s.dtype = "e4m3";
        s.causal = i % 2;
        s.decode = spec.decode;
      } else if (all) {
        const int64_t *d = spec.backward ? gradDims[i / 4] : dims[i / 4];
        s = fa3AttentionSpecDefault();
        s.headDim = d[0];
        s.headDimV = d[1];
        s.dtype = types[(i / 2) % 2];
        s.causal = i % 2;
        s.varlen = spec.varlen;
        s.backward = spec.backward;
        s.decode = spec.decode;
        s.deterministic = spec.deterministic;
        s.pagedKv = spec.pagedKv;
      }
      s.name = all ? NULL : name; /* NULL: the C API derives the name */
      double t0 = now();
      Fa3KernelSet *set = fa3CompileHopperSpec(ctx, &s, &opts);
      if (!set) {
        char vname[256];
        fa3AttentionSpecName(&s, vname, sizeof vname);
        const char *text = fa3DiagnosticLogText(log);
        fprintf(stderr, "fa3-compile: %s failed:\n%s", vname,
                text && *text ? text : "(no diagnostic)\n");
        fa3DiagnosticLogClear(log);
        rc = 1;
        continue;
      }
      rc |= writeSet(set, outDir, now() - t0);
      fa3KernelSetDestroy(set);
    }
  }
  fa3DiagnosticLogDestroy(log);
  mlirContextDestroy(ctx);
  /* A full disk or closed stdout must not end in exit status 0. */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "fa3-compile: cannot write to standard output\n");
    rc = 1;
  }
  return rc;
}
