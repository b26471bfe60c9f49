/*===- fa3-compile.c - compile attention to Hopper kernels ---------------===*\
|*                                                                            *|
|* Writes <kernel>.ptx, <kernel>.cubin and <kernel>.facts for each attention *|
|* in an IR file, for one variant described on the command line, or for the  *|
|* standard set of variants. Uses only the C API (include/fa3-c).            *|
\*===----------------------------------------------------------------------===*/
#include "fa3-c/Compile.h"
#include "fa3-c/Registration.h"
#include "mlir-c/IR.h"

#include <errno.h>
#include <math.h>
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
    "  input.mlir           every attn.flash_attention in the file\n"
    "  --head-dim N ...     one variant from the options below\n"
    "  --all                the standard set: head dim 64/128/256 x causal or\n"
    "                       not x bf16/f16 (12 kernels)\n"
    "\n"
    "Variant options:\n"
    "  --head-dim N         64, 128 or 256\n"
    "  --dtype T            bf16 (default) or f16\n"
    "  --causal             bottom-right aligned causal mask\n"
    "  --window L,R         sliding window (-1 = unbounded)\n"
    "  --softcap X          softcap (0 = off)\n"
    "  --scale X            default softmax scale recorded in the facts\n"
    "  --name NAME          kernel base name (default: derived from the variant)\n"
    "\n"
    "Compilation options:\n"
    "  --block-m N          Q rows per tile: 128 (two consumer warpgroups\n"
    "                       taking turns) or 192 (three; default: 192 for\n"
    "                       head dim 64 with a full mask, else 128)\n"
    "  --block-n N          K/V rows per tile (default: 128, or 64 for head dim 256)\n"
    "  --stages N           depth of the K/V shared-memory ring (default: 4 for\n"
    "                       head dim 64 with 128-row tiles, else 2)\n"
    "  --no-pingpong        consumer warpgroups do not take turns\n"
    "  --persistent         CTAs loop over tiles (the runtime launches one\n"
    "                       CTA per SM, a dynamic scheduler hands out\n"
    "                       tiles); default: where measured faster (head\n"
    "                       dim 64 and 128)\n"
    "  --no-persistent      one CTA per tile\n"
    "  --no-tma-store       write O with 4-byte stores from registers instead\n"
    "                       of staging it in shared memory for a TMA store\n"
    "  --q-buffers N        Q tiles in shared memory: 2 lets a persistent CTA\n"
    "                       load the next tile's Q during the current one\n"
    "                       (default: 2 where it fits, head dim 64 and 128)\n"
    "  --lazy-rescale       O *= alpha only in warpgroups where a row raised\n"
    "                       its running max (default: where measured\n"
    "                       faster, head dim 128 and 256)\n"
    "  --no-lazy-rescale    rescale O after every kv block\n"
    "  --rescale-threshold X  with lazy rescaling, raise a row's max only when\n"
    "                       a kv block exceeds it by more than X (log2 units,\n"
    "                       0 to 15, default 8; 0 keeps the exact max)\n"
    "  --kv-multicast       2-CTA clusters: neighbouring m-blocks of a head\n"
    "                       share each K/V tile, each CTA loading half and\n"
    "                       multicasting it (where it applies: full mask,\n"
    "                       head dim 128 and 256; default: where measured\n"
    "                       faster, persistent kernels = head dim 128)\n"
    "  --no-kv-multicast    one CTA per cluster\n"
    "  --ptx-only           write PTX and facts, no cubin (also the fallback,\n"
    "                       with a warning, when ptxas cannot be found)\n"
    "  -o DIR               output directory (created if missing)\n"
    "  -h, --help           this text\n";

static int fail(const char *msg, const char *arg) {
  fprintf(stderr, "fa3-compile: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
  return 1;
}

static char *readFile(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf)
    buf[n] = 0;
  fclose(f);
  return buf;
}

static int writeFile(const char *dir, const char *name, const char *ext,
                     const void *data, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size) {
    fprintf(stderr, "fa3-compile: cannot write %s: %s\n", path, strerror(errno));
    if (f)
      fclose(f);
    return 1;
  }
  fclose(f);
  return 0;
}

static int writeSet(Fa3KernelSet *set, const char *dir, double seconds) {
  int rc = 0;
  for (size_t i = 0; i < fa3KernelSetSize(set); ++i) {
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

static int failValue(const char *option, const char *what, const char *value) {
  fprintf(stderr, "fa3-compile: %s takes %s: %s\n", option, what, value);
  return 1;
}

/// A whole decimal integer, or false (atoll would read "12x" or "abc" as
/// 12 or 0, and 0 means "per head dim" for several options).
static bool parseInt(const char *v, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end || errno)
    return false;
  *out = x;
  return true;
}

/// A finite decimal number, or false.
static bool parseNumber(const char *v, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno || !isfinite(x))
    return false;
  *out = x;
  return true;
}

int main(int argc, char **argv) {
  const char *input = NULL, *outDir = NULL, *name = NULL;
  Fa3AttentionSpec spec = fa3AttentionSpecDefault();
  Fa3HopperOptions opts = fa3HopperOptionsDefault();
  int haveSpec = 0, all = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                           \
  do {                                                                         \
    if (!v)                                                                    \
      return fail("missing value for", a);                                     \
    ++i;                                                                       \
  } while (0)
#define INT_VALUE(dst)                                                         \
  do {                                                                         \
    NEED_VALUE();                                                              \
    if (!parseInt(v, &(dst)))                                                  \
      return failValue(a, "an integer", v);                                    \
  } while (0)
#define NUMBER_VALUE(dst)                                                      \
  do {                                                                         \
    NEED_VALUE();                                                              \
    double x_;                                                                 \
    if (!parseNumber(v, &x_))                                                  \
      return failValue(a, "a number", v);                                      \
    (dst) = x_;                                                                \
  } while (0)
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(kUsage, stdout);
      return 0;
    } else if (!strcmp(a, "-o")) {
      NEED_VALUE();
      outDir = v;
    } else if (!strcmp(a, "--all")) {
      all = 1;
    } else if (!strcmp(a, "--head-dim")) {
      INT_VALUE(spec.headDim);
      haveSpec = 1;
    } else if (!strcmp(a, "--dtype")) {
      NEED_VALUE();
      if (strcmp(v, "bf16") && strcmp(v, "f16"))
        return fail("--dtype must be bf16 or f16, got", v);
      spec.dtype = v;
    } else if (!strcmp(a, "--causal")) {
      spec.causal = true;
    } else if (!strcmp(a, "--window")) {
      NEED_VALUE();
      long long l, r;
      if (sscanf(v, "%lld,%lld", &l, &r) != 2)
        return fail("--window takes LEFT,RIGHT, got", v);
      spec.windowLeft = l;
      spec.windowRight = r;
    } else if (!strcmp(a, "--softcap")) {
      NUMBER_VALUE(spec.softcap);
    } else if (!strcmp(a, "--scale")) {
      NUMBER_VALUE(spec.scale);
      spec.hasScale = true;
    } else if (!strcmp(a, "--name")) {
      NEED_VALUE();
      name = v;
    } else if (!strcmp(a, "--block-m")) {
      INT_VALUE(opts.blockM);
    } else if (!strcmp(a, "--block-n")) {
      INT_VALUE(opts.blockN);
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
      INT_VALUE(opts.qBuffers);
    } else if (!strcmp(a, "--lazy-rescale")) {
      opts.lazyRescale = 1;
    } else if (!strcmp(a, "--no-lazy-rescale")) {
      opts.lazyRescale = -1;
    } else if (!strcmp(a, "--kv-multicast")) {
      opts.kvMulticast = 1;
    } else if (!strcmp(a, "--no-kv-multicast")) {
      opts.kvMulticast = -1;
    } else if (!strcmp(a, "--rescale-threshold")) {
      NUMBER_VALUE(opts.rescaleThreshold);
    } else if (!strcmp(a, "--stages")) {
      INT_VALUE(opts.stages);
    } else if (a[0] == '-') {
      return fail("unknown option (see --help)", a);
    } else if (!input) {
      input = a;
    } else {
      return fail("more than one input file", a);
    }
  }
  if (!outDir)
    return fail("no output directory (-o DIR); see --help", NULL);
  if ((input != NULL) + haveSpec + all != 1)
    return fail("give exactly one of: an input file, --head-dim N, --all", NULL);
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
    char *text = readFile(input);
    if (!text)
      return fail("cannot read", input);
    double t0 = now();
    MlirModule module = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(text));
    free(text);
    Fa3KernelSet *set =
        mlirModuleIsNull(module) ? NULL : fa3CompileHopperModule(module, &opts);
    if (!set) {
      fprintf(stderr, "%s", fa3DiagnosticLogText(log));
      rc = 1;
    } else {
      rc = writeSet(set, outDir, now() - t0);
      fa3KernelSetDestroy(set);
    }
    if (!mlirModuleIsNull(module))
      mlirModuleDestroy(module);
  } else {
    const int64_t dims[] = {64, 128, 256};
    const char *types[] = {"bf16", "f16"};
    int n = all ? 12 : 1;
    for (int i = 0; i < n; ++i) {
      Fa3AttentionSpec s = spec;
      if (all) {
        s = fa3AttentionSpecDefault();
        s.headDim = dims[i / 4];
        s.dtype = types[(i / 2) % 2];
        s.causal = i % 2;
      }
      s.name = all ? NULL : name; /* NULL: the C API derives the name */
      double t0 = now();
      Fa3KernelSet *set = fa3CompileHopperSpec(ctx, &s, &opts);
      if (!set) {
        char vname[256];
        fa3AttentionSpecName(&s, vname, sizeof vname);
        fprintf(stderr, "fa3-compile: %s failed:\n%s", vname,
                fa3DiagnosticLogText(log));
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
  return rc;
}
