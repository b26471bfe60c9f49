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

  /* FP8: q, k, v quantized by attn.quantize (q and k rotated by the same
     signs, block descales; v one descale a head), then the attention with
     the descales; the CPU reference pipeline runs the whole function. */
  const char *fp8Src =
      "func.func @fp8(%x: memref<1x2x100x64xbf16>, %s: memref<64xf32>, "
      "%q8: memref<1x2x100x64xf8E4M3FN>, %k8: memref<1x2x100x64xf8E4M3FN>, "
      "%v8: memref<1x2x100x64xf8E4M3FN>, %qd: memref<1x2x1xf32>, %kd: memref<1x2x1xf32>, "
      "%vd: memref<1x2xf32>, %o: memref<1x2x100x64xbf16>) "
      "attributes {llvm.emit_c_interface} {\n  return\n}\n";
  MlirModule fp8 = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(fp8Src));
  MlirOperation fp8Func = mlirBlockGetFirstOperation(mlirModuleGetBody(fp8));
  MlirBlock fb = mlirRegionGetFirstBlock(mlirOperationGetRegion(fp8Func, 0));
  MlirOperation fret = mlirBlockGetFirstOperation(fb);
  MlirLocation unk = mlirLocationUnknownGet(ctx);
  MlirValue a[9];
  for (int i = 0; i < 9; i++)
    a[i] = mlirBlockGetArgument(fb, i);
  MlirValue noSigns = {NULL};
  MlirOperation ops[4] = {
      fa3QuantizeCreate(unk, a[0], a[1], a[2], a[5], 128),
      fa3QuantizeCreate(unk, a[0], a[1], a[3], a[6], 128),
      fa3QuantizeCreate(unk, a[0], noSigns, a[4], a[7], 0),
      fa3FlashAttentionFp8Create(unk, a[2], a[3], a[4], a[5], a[6], a[7], a[8], noSigns,
                                 fa3FlashAttentionOptionsDefault())};
  for (int i = 0; i < 4; i++) {
    if (mlirOperationIsNull(ops[i])) {
      printf("fp8 op %d refused: %s\n", i, fa3LastError());
      return 1;
    }
    mlirBlockInsertOwnedOperationBefore(fb, fret, ops[i]);
  }
  // CHECK: quantize ops: 1 1 1 0; attention: 1
  printf("quantize ops: %d %d %d %d; attention: %d\n", fa3OperationIsAQuantize(ops[0]),
         fa3OperationIsAQuantize(ops[1]), fa3OperationIsAQuantize(ops[2]),
         fa3OperationIsAQuantize(ops[3]), fa3OperationIsAFlashAttention(ops[3]));
  // CHECK: attn.quantize ins(%arg0 : memref<1x2x100x64xbf16>) rotate(%arg1 : memref<64xf32>) outs(%arg2, %arg5 : memref<1x2x100x64xf8E4M3FN>, memref<1x2x1xf32>) block(128)
  // CHECK: attn.quantize ins(%arg0 : memref<1x2x100x64xbf16>) outs(%arg4, %arg7 : memref<1x2x100x64xf8E4M3FN>, memref<1x2xf32>){{$}}
  // CHECK: attn.flash_attention ins(%arg2, %arg3, %arg4 : {{.*}}) descale(%arg5, %arg6, %arg7 : memref<1x2x1xf32>, memref<1x2x1xf32>, memref<1x2xf32>) outs(%arg8 : memref<1x2x100x64xbf16>)
  MlirOperation fp8Op = mlirModuleGetOperation(fp8);
  mlirOperationPrint(fp8Op, printToStdout, NULL);
  printf("\n");
  MlirPassManager pm8 = mlirPassManagerCreate(ctx);
  MlirLogicalResult parsed8 = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm8),
      mlirStringRefCreateFromCString("builtin.module(attn-cpu-reference-pipeline)"),
      printToStderr, NULL);
  // CHECK: fp8 pipeline parsed: 1 ran: 1
  printf("fp8 pipeline parsed: %d ran: %d\n", mlirLogicalResultIsSuccess(parsed8),
         mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm8, fp8Op)));
  mlirPassManagerDestroy(pm8);
  mlirModuleDestroy(fp8);

  /* A descale without FP8 inputs, a negative block: refused by name. */
  // CHECK: diagnostic: 'attn.flash_attention' op descale factors belong to f8E4M3FN (FP8) inputs, got 'bf16'
  // CHECK: bf16 with descales built: 0
  {
    MlirModule m = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(fp8Src));
    MlirOperation f = mlirBlockGetFirstOperation(mlirModuleGetBody(m));
    MlirBlock bb = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
    MlirValue x = mlirBlockGetArgument(bb, 0), vd = mlirBlockGetArgument(bb, 7);
    MlirOperation op16 = fa3FlashAttentionFp8Create(
        unk, x, x, x, vd, vd, vd, mlirBlockGetArgument(bb, 8), noSigns,
        fa3FlashAttentionOptionsDefault());
    printf("bf16 with descales built: %d\n", !mlirOperationIsNull(op16));
    // CHECK: diagnostic: fa3QuantizeCreate: block is -1; 0 (one descale per head) or 1 to 2^31-1 rows
    // CHECK: negative block built: 0
    MlirOperation neg = fa3QuantizeCreate(unk, x, noSigns, mlirBlockGetArgument(bb, 2),
                                          mlirBlockGetArgument(bb, 5), -1);
    printf("negative block built: %d\n", !mlirOperationIsNull(neg));
    mlirModuleDestroy(m);
  }
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
