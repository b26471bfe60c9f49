/* An out-of-tree user of the installed FA3-MLIR C API (find_package(FA3MLIR),
 * target FA3MLIR::CAPI): compiles causal attention with head dim 128 to an
 * sm_90a kernel twice and writes, per kernel, OUTDIR/<kernel>.ptx,
 * OUTDIR/<kernel>.cubin (when ptxas is found: $CUDA_HOME, $CUDA_PATH,
 * /usr/local/cuda or PATH) and OUTDIR/<kernel>.facts:
 *
 *   1. the way an ML compiler embeds us: it builds the IR itself through
 *      MLIR's C API, a func.func whose body is one attn.flash_attention made
 *      by fa3FlashAttentionCreate, and compiles the module
 *      (fa3CompileHopperModule);
 *   2. the one-call way: an attention spec (fa3CompileHopperSpec).
 *
 * Every call that can fail is checked; the reason is the thread's last error
 * (fa3LastError, fa3-c/Support.h) and the context's diagnostics, collected
 * by a Fa3DiagnosticLog.
 *
 * Usage: fa3-consumer OUTDIR
 */
#define _POSIX_C_SOURCE 200809L /* mkdir */

#include "fa3-c/Attn.h"
#include "fa3-c/Compile.h"
#include "fa3-c/Registration.h"
#include "fa3-c/Support.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/IR.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static MlirStringRef str(const char *s) {
  return mlirStringRefCreateFromCString(s);
}

/* Prints why `what` failed: the last error and what the log collected. */
static int failed(const char *what, Fa3DiagnosticLog *log) {
  fprintf(stderr, "fa3-consumer: %s failed: %s\n", what, fa3LastError());
  const char *text = log ? fa3DiagnosticLogText(log) : NULL;
  if (text && *text)
    fprintf(stderr, "diagnostics:\n%s", text);
  if (log)
    fa3DiagnosticLogClear(log);
  return 1;
}

/* func.func @<name>(%q, %k, %v, %o: memref<?x1x?x128xbf16>,
 *                   %lse: memref<?x1x?xf32>) {
 *   attn.flash_attention ins(%q, %k, %v) outs(%o, %lse) causal
 *   return
 * }
 * built op by op. Batch and sequence lengths are dynamic; the op wants
 * static head counts, but the kernel takes batch, heads and sequence
 * lengths at launch, so one head stands for any number. A null module if
 * the attention op is refused (the reason is the last error). */
static MlirModule buildModule(MlirContext ctx, const char *name) {
  MlirLocation loc = mlirLocationNameGet(ctx, str(name), mlirLocationUnknownGet(ctx));
  int64_t dyn = mlirShapedTypeGetDynamicSize();
  int64_t shape[4] = {dyn, 1, dyn, 128};
  MlirType t = mlirMemRefTypeContiguousGet(mlirBF16TypeGet(ctx), 4, shape,
                                           mlirAttributeGetNull());
  MlirType lseType = mlirMemRefTypeContiguousGet(mlirF32TypeGet(ctx), 3, shape,
                                                 mlirAttributeGetNull());
  MlirType args[5] = {t, t, t, t, lseType};
  MlirLocation argLocs[5] = {loc, loc, loc, loc, loc};

  MlirOperationState fnState = mlirOperationStateGet(str("func.func"), loc);
  MlirNamedAttribute attrs[2] = {
      mlirNamedAttributeGet(mlirIdentifierGet(ctx, str("sym_name")),
                            mlirStringAttrGet(ctx, str(name))),
      mlirNamedAttributeGet(
          mlirIdentifierGet(ctx, str("function_type")),
          mlirTypeAttrGet(mlirFunctionTypeGet(ctx, 5, args, 0, NULL)))};
  mlirOperationStateAddAttributes(&fnState, 2, attrs);
  MlirRegion region = mlirRegionCreate();
  MlirBlock body = mlirBlockCreate(5, args, argLocs);
  mlirRegionAppendOwnedBlock(region, body);
  mlirOperationStateAddOwnedRegions(&fnState, 1, &region);
  MlirOperation fn = mlirOperationCreate(&fnState);

  Fa3FlashAttentionOptions opts = fa3FlashAttentionOptionsDefault();
  opts.causal = true;
  MlirOperation attn = fa3FlashAttentionCreate(
      loc, mlirBlockGetArgument(body, 0), mlirBlockGetArgument(body, 1),
      mlirBlockGetArgument(body, 2), mlirBlockGetArgument(body, 3),
      mlirBlockGetArgument(body, 4), opts);
  if (mlirOperationIsNull(attn)) {
    mlirOperationDestroy(fn);
    return (MlirModule){NULL};
  }
  mlirBlockAppendOwnedOperation(body, attn);
  MlirOperationState retState = mlirOperationStateGet(str("func.return"), loc);
  mlirBlockAppendOwnedOperation(body, mlirOperationCreate(&retState));

  MlirModule module = mlirModuleCreateEmpty(loc);
  mlirBlockAppendOwnedOperation(mlirModuleGetBody(module), fn);
  return module;
}

static int writeFile(const char *dir, const char *name, const char *ext,
                     const void *data, size_t size) {
  char path[4096];
  int len = snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  if (len < 0 || (size_t)len >= sizeof path) {
    fprintf(stderr, "fa3-consumer: path too long: %s/%s.%s\n", dir, name, ext);
    return 1;
  }
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(data, 1, size, f) == size;
  if (f && fclose(f) != 0)
    ok = false;
  if (!ok) {
    fprintf(stderr, "fa3-consumer: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  printf("  %s (%zu bytes)\n", path, size);
  return 0;
}

/* Writes every kernel of `set` and destroys it. */
static int writeSet(Fa3KernelSet *set, const char *dir, Fa3DiagnosticLog *log) {
  size_t n = fa3KernelSetSize(set);
  if (n == 0)
    return failed("fa3KernelSetSize", log);
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    Fa3KernelBinary k = fa3KernelSetGet(set, i);
    if (!k.name)
      return failed("fa3KernelSetGet", log);
    printf("kernel %s\n", k.name);
    rc |= writeFile(dir, k.name, "ptx", k.ptx, k.ptxSize);
    if (k.cubinSize)
      rc |= writeFile(dir, k.name, "cubin", k.cubin, k.cubinSize);
    rc |= writeFile(dir, k.name, "facts", k.facts, strlen(k.facts));
  }
  fa3KernelSetDestroy(set);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fa3-consumer OUTDIR\n");
    return 2;
  }
  const char *dir = argv[1];
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "fa3-consumer: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }

  Fa3HopperOptions options = fa3HopperOptionsDefault();
  char ptxas[4096];
  if (fa3FindPtxas(NULL, ptxas, sizeof ptxas) == 0) {
    printf("no ptxas ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, PATH): PTX "
           "and facts only\n");
    options.emitCubin = false;
  } else {
    printf("ptxas: %s\n", ptxas);
  }

  /* A context with every dialect our pipelines use, and a log of its
     diagnostics. */
  MlirContext ctx = fa3ContextCreate();
  Fa3DiagnosticLog *log = fa3DiagnosticLogAttach(ctx);
  if (!log) {
    failed("fa3DiagnosticLogAttach", NULL);
    mlirContextDestroy(ctx);
    return 1;
  }
  int rc = 0;

  /* 1. IR built through the C API, compiled as a module (consumed). */
  MlirModule module = buildModule(ctx, "consumer_d128_causal");
  if (mlirModuleIsNull(module)) {
    rc = failed("fa3FlashAttentionCreate", log);
  } else {
    Fa3KernelSet *set = fa3CompileHopperModule(module, &options);
    rc |= set ? writeSet(set, dir, log) : failed("fa3CompileHopperModule", log);
    mlirModuleDestroy(module);
  }

  /* 2. The same variant from a spec; NULL name: fa3_fwd_d128_bf16_causal. */
  Fa3AttentionSpec spec = fa3AttentionSpecDefault();
  spec.headDim = 128;
  spec.causal = true;
  Fa3KernelSet *set = fa3CompileHopperSpec(ctx, &spec, &options);
  rc |= set ? writeSet(set, dir, log) : failed("fa3CompileHopperSpec", log);

  fa3DiagnosticLogDestroy(log);
  mlirContextDestroy(ctx);
  return rc;
}
