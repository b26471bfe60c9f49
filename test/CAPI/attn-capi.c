/* The attn C API, used from C the way an ML compiler embeds us: register the
 * dialect, build an attn.flash_attention through the builder, verify it, run
 * a pipeline with MLIR's own pass-manager C API, and print the results.
 *
 * RUN: fa3-capi-test 2>&1 | FileCheck %s
 */
#include "fa3-c/Attn.h"
#include "fa3-c/Compile.h"
#include "fa3-c/Registration.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void printToStdout(MlirStringRef s, void *user) {
  (void)user;
  fwrite(s.data, 1, s.length, stdout);
}

static void printToStderr(MlirStringRef s, void *user) {
  (void)user;
  fwrite(s.data, 1, s.length, stderr);
}

static MlirLogicalResult diagToStderr(MlirDiagnostic d, void *user) {
  (void)user;
  fprintf(stderr, "diagnostic: ");
  mlirDiagnosticPrint(d, printToStderr, NULL);
  fprintf(stderr, "\n");
  fflush(stderr);
  return mlirLogicalResultSuccess();
}

/* A func whose body is only `return %o`; the attention op goes in front. */
static const char *kTemplate =
    "func.func @attention(%%q: tensor<2x%dx128x64xbf16>, "
    "%%k: tensor<2x%dx256x64xbf16>, %%v: tensor<2x%dx256x64xbf16>, "
    "%%o: tensor<2x%dx128x64xbf16>) -> tensor<2x%dx128x64xbf16> "
    "attributes {llvm.emit_c_interface} {\n"
    "  return %%o : tensor<2x%dx128x64xbf16>\n}\n";

/* Builds the op with heads (hq, hkv); returns the module, or a null one
 * when the op is refused (fa3FlashAttentionCreate verifies it). */
static MlirModule buildAttention(MlirContext ctx, int hq, int hkv,
                                 Fa3FlashAttentionOptions opts) {
  char src[1024];
  snprintf(src, sizeof src, kTemplate, hq, hkv, hkv, hq, hq, hq);
  MlirModule module = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(src));
  if (mlirModuleIsNull(module))
    return module;
  MlirOperation func = mlirBlockGetFirstOperation(
      mlirModuleGetBody(module));
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirOperation ret = mlirBlockGetFirstOperation(body);
  MlirValue null = {NULL};
  MlirOperation attn = fa3FlashAttentionCreate(
      mlirLocationUnknownGet(ctx), mlirBlockGetArgument(body, 0),
      mlirBlockGetArgument(body, 1), mlirBlockGetArgument(body, 2),
      mlirBlockGetArgument(body, 3), null, opts);
  if (mlirOperationIsNull(attn)) {
    mlirModuleDestroy(module);
    return (MlirModule){NULL};
  }
  mlirBlockInsertOwnedOperationBefore(body, ret, attn);
  mlirOperationSetOperand(ret, 0, mlirOperationGetResult(attn, 0));
  return module;
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0); /* keep stdout and stderr in order */
  /* The dialect handle alone is enough to load attn into a bare context. */
  MlirContext bare = mlirContextCreate();
  MlirDialectHandle handle = mlirGetDialectHandle__attn__();
  MlirDialect attn = mlirDialectHandleLoadDialect(handle, bare);
  MlirStringRef ns = mlirDialectGetNamespace(attn);
  // CHECK: loaded dialect: attn
  printf("loaded dialect: %.*s\n", (int)ns.length, ns.data);
  mlirContextDestroy(bare);

  /* Everything our pipelines need. */
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  fa3RegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreate();
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirContextLoadAllAvailableDialects(ctx);
  mlirContextAttachDiagnosticHandler(ctx, diagToStderr, NULL, NULL);
  fa3RegisterAllPasses();

  Fa3FlashAttentionOptions opts = fa3FlashAttentionOptionsDefault();
  opts.causal = true;
  opts.softcap = 30.0f;
  opts.windowLeft = 64;
  MlirModule module = buildAttention(ctx, 8, 2, opts);
  if (mlirModuleIsNull(module))
    return 1;
  MlirOperation op = mlirModuleGetOperation(module);
  // CHECK: verified: 1
  printf("verified: %d\n", mlirOperationVerify(op));
  // CHECK: %[[R:.*]] = attn.flash_attention ins(%arg0, %arg1, %arg2 : tensor<2x8x128x64xbf16>, tensor<2x2x256x64xbf16>, tensor<2x2x256x64xbf16>) outs(%arg3 : tensor<2x8x128x64xbf16>) causal window(64, -1) softcap(3.000000e+01) -> tensor<2x8x128x64xbf16>
  // CHECK: return %[[R]]
  mlirOperationPrint(op, printToStdout, NULL);
  printf("\n");

  /* The tiled CPU pipeline through MLIR's pass-manager C API. */
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult parsed = mlirParsePassPipeline(
      opm, mlirStringRefCreateFromCString("builtin.module(attn-cpu-tiled-pipeline)"),
      printToStderr, NULL);
  MlirLogicalResult ran = mlirPassManagerRunOnOp(pm, op);
  // CHECK: pipeline parsed: 1 ran: 1
  printf("pipeline parsed: %d ran: %d\n", mlirLogicalResultIsSuccess(parsed),
         mlirLogicalResultIsSuccess(ran));
  // CHECK: llvm.func @attention(
  // CHECK: llvm.func @_mlir_ciface_attention(
  mlirOperationPrint(op, printToStdout, NULL);
  printf("\n");
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);

  /* A bad GQA ratio is caught by the verifier as the op is built: a
     message, and no op. */
  // CHECK: diagnostic: 'attn.flash_attention' op query heads (3) must be a multiple of kv heads (2) for GQA/MQA
  // CHECK: built: 0
  MlirModule bad = buildAttention(ctx, 3, 2, fa3FlashAttentionOptionsDefault());
  printf("built: %d\n", !mlirModuleIsNull(bad));
  fflush(stdout);
  mlirContextDestroy(ctx);

  /* A named toolkit without bin/ptxas has no ptxas (fa3-compile then writes
     PTX only). */
  // CHECK: ptxas in a missing toolkit: 0 ''
  char path[256] = "unchanged";
  size_t n = fa3FindPtxas("/nonexistent-cuda-toolkit", path, sizeof path);
  printf("ptxas in a missing toolkit: %zu '%s'\n", n, path);
  return 0;
}
