/* Every fa3* entry point keeps the C API's error contract (fa3-c/Support.h,
 * docs/c-api.md) on the misuse that used to crash the host (issue 17): NULL
 * and null-wrapped handles, NULL strings, values of the wrong type, an index
 * past the end, invalid specs (the name is never pasted into IR), logs and
 * kernel sets destroyed twice or after their context. Each case checks here
 * that the call returned its failure value and set the last error, and
 * prints the last error for FileCheck; where a context is reachable, the
 * diagnostic must be in the context's log as well.
 *
 * RUN: fa3-capi-misuse 2>&1 | FileCheck %s
 *
 * CHECK: register/null: fa3RegisterAllDialects: the registry is null
 */
#include "fa3-c/Attn.h"
#include "fa3-c/Compile.h"
#include "fa3-c/Driver.h"
#include "fa3-c/Registration.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

/* The call `what` must have failed (`failed` true) with a last error;
 * prints it. */
static void expectFailure(const char *what, int failed) {
  const char *err = fa3LastError();
  if (!failed) {
    printf("FAIL %s: no failure value\n", what);
    ++failures;
  }
  if (!err || !*err) {
    printf("FAIL %s: no last error\n", what);
    ++failures;
  }
  printf("%s: %s\n", what, err ? err : "(null)");
}

static void expectSuccess(const char *what, int ok) {
  const char *err = fa3LastError();
  if (!ok || !err || *err) {
    printf("FAIL %s: ok=%d last error '%s'\n", what, ok, err ? err : "(null)");
    ++failures;
  }
}

/* The log must hold `text`; clears it. */
static void expectLogged(Fa3DiagnosticLog *log, const char *what,
                         const char *text) {
  const char *t = fa3DiagnosticLogText(log);
  if (!t || !strstr(t, text)) {
    printf("FAIL %s: log lacks '%s': %s\n", what, text, t ? t : "(null)");
    ++failures;
  }
  fa3DiagnosticLogClear(log);
}

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

/* The body block of the first func of `module`. */
static MlirBlock funcBody(MlirModule module) {
  MlirOperation func = mlirBlockGetFirstOperation(mlirModuleGetBody(module));
  return mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
}

/* `text` parsed, or a null module and a failure named `what`. */
static MlirModule parseOrFail(MlirContext ctx, const char *text, const char *what) {
  MlirModule module = mlirModuleCreateParse(ctx, str(text));
  if (mlirModuleIsNull(module)) {
    printf("FAIL: %s\n", what);
    ++failures;
  }
  return module;
}

static const char *kMemrefFunc =
    "func.func @f(%q: memref<1x2x64x64xbf16>, %k: memref<1x2x64x64xbf16>,\n"
    "             %v: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xbf16>,\n"
    "             %i: i32, %l: memref<1x2x64xf32>) {\n"
    "  return\n"
    "}\n";

static const char *kVarlenFunc =
    "func.func @f(%q: memref<64x2x64xbf16>, %cu: memref<3xi32>,\n"
    "             %lse: memref<2x64xf32>, %f: memref<3xf32>) {\n"
    "  return\n"
    "}\n";

/* The packed variable-length builder: null and misplaced values, and a
   valid op with and without its optional values. */
static void varlenCases(MlirContext ctx, Fa3DiagnosticLog *log) {
  MlirModule module = parseOrFail(ctx, kVarlenFunc, "parse varlen");
  if (mlirModuleIsNull(module))
    return;
  MlirBlock body = funcBody(module);
  MlirValue q = mlirBlockGetArgument(body, 0), cu = mlirBlockGetArgument(body, 1),
            lse = mlirBlockGetArgument(body, 2), f = mlirBlockGetArgument(body, 3);
  MlirValue null = {NULL};
  MlirLocation loc = mlirLocationUnknownGet(ctx);
  Fa3FlashAttentionOptions opts = fa3FlashAttentionOptionsDefault();
  MlirOperation op =
      fa3FlashAttentionVarlenCreate(loc, q, q, q, null, cu, null, q, lse, opts);
  // CHECK: varlen/null-cu: fa3FlashAttentionVarlenCreate: cuSeqlensQ is a null MlirValue
  expectFailure("varlen/null-cu", mlirOperationIsNull(op));
  op = fa3FlashAttentionVarlenCreate(loc, q, q, q, cu, cu, null, null, lse, opts);
  // CHECK: varlen/null-o: fa3FlashAttentionVarlenCreate: o is a null MlirValue
  expectFailure("varlen/null-o", mlirOperationIsNull(op));
  op = fa3FlashAttentionVarlenCreate(loc, q, q, q, f, f, null, q, lse, opts);
  // CHECK: varlen/f32-cu: fa3FlashAttentionVarlenCreate: 'attn.flash_attention_varlen' op cu_seqlens_q element type must be i32 (as FlashAttention's), got 'f32'
  expectFailure("varlen/f32-cu", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);
  op = fa3FlashAttentionVarlenCreate(loc, q, q, q, cu, cu, null, q, null, opts);
  expectSuccess("varlen/valid", !mlirOperationIsNull(op) &&
                                    fa3OperationIsAFlashAttentionVarlen(op) &&
                                    !fa3OperationIsAFlashAttention(op));
  if (!mlirOperationIsNull(op))
    mlirOperationDestroy(op);
  MlirOperation nullOp = {NULL};
  // CHECK: isa-varlen/null: fa3OperationIsAFlashAttentionVarlen: the operation is null
  expectFailure("isa-varlen/null", !fa3OperationIsAFlashAttentionVarlen(nullOp));
  mlirModuleDestroy(module);
}

static const char *kFp8Func =
    "func.func @f(%x: memref<1x2x64x64xbf16>, %q: memref<1x2x64x64xf8E4M3FN>,\n"
    "             %d: memref<1x2x1xf32>, %o: memref<1x2x64x64xbf16>,\n"
    "             %vd: memref<1x2xf32>) {\n"
    "  return\n"
    "}\n";

/* The FP8 builders: null values, a negative block, null operations. */
static void fp8Cases(MlirContext ctx, Fa3DiagnosticLog *log) {
  MlirModule module = parseOrFail(ctx, kFp8Func, "parse fp8");
  if (mlirModuleIsNull(module))
    return;
  MlirBlock body = funcBody(module);
  MlirValue x = mlirBlockGetArgument(body, 0), q = mlirBlockGetArgument(body, 1),
            d = mlirBlockGetArgument(body, 2), o = mlirBlockGetArgument(body, 3),
            vd = mlirBlockGetArgument(body, 4);
  MlirValue null = {NULL};
  MlirLocation loc = mlirLocationUnknownGet(ctx);
  MlirLocation nullLoc = {NULL};
  Fa3FlashAttentionOptions opts = fa3FlashAttentionOptionsDefault();
  MlirOperation op = fa3FlashAttentionFp8Create(loc, q, q, q, d, null, d, o, null, opts);
  // CHECK: fp8/null-kd: fa3FlashAttentionFp8Create: kDescale is a null MlirValue
  expectFailure("fp8/null-kd", mlirOperationIsNull(op));
  op = fa3FlashAttentionFp8Create(nullLoc, q, q, q, d, d, d, o, null, opts);
  // CHECK: fp8/null-loc: fa3FlashAttentionFp8Create: the location is null
  expectFailure("fp8/null-loc", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);
  op = fa3FlashAttentionFp8Create(loc, q, q, q, d, d, vd, o, null, opts);
  expectSuccess("fp8/valid", !mlirOperationIsNull(op) && fa3OperationIsAFlashAttention(op));
  if (!mlirOperationIsNull(op))
    mlirOperationDestroy(op);
  op = fa3QuantizeCreate(loc, null, null, q, d, 64);
  // CHECK: quantize/null-x: fa3QuantizeCreate: x is a null MlirValue
  expectFailure("quantize/null-x", mlirOperationIsNull(op));
  op = fa3QuantizeCreate(loc, x, null, q, d, -5);
  // CHECK: quantize/negative-block: fa3QuantizeCreate: block is -5; 0 (one descale per head) or 1 to 2^31-1 rows
  expectFailure("quantize/negative-block", mlirOperationIsNull(op));
  op = fa3QuantizeCreate(loc, x, null, q, d, (int64_t)1 << 40);
  // CHECK: quantize/huge-block: fa3QuantizeCreate: block is 1099511627776; 0 (one descale per head) or 1 to 2^31-1 rows
  expectFailure("quantize/huge-block", mlirOperationIsNull(op));
  op = fa3QuantizeCreate(loc, x, null, x, d, 64);
  // CHECK: quantize/bf16-out: fa3QuantizeCreate: 'attn.quantize' op output must be f8E4M3FN, got 'bf16'
  expectFailure("quantize/bf16-out", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);
  op = fa3QuantizeCreate(loc, x, null, q, d, 64);
  expectSuccess("quantize/valid", !mlirOperationIsNull(op) && fa3OperationIsAQuantize(op) &&
                                      !fa3OperationIsAFlashAttention(op));
  if (!mlirOperationIsNull(op))
    mlirOperationDestroy(op);
  MlirOperation nullOp = {NULL};
  // CHECK: isa-quantize/null: fa3OperationIsAQuantize: the operation is null
  expectFailure("isa-quantize/null", !fa3OperationIsAQuantize(nullOp));
  mlirModuleDestroy(module);
}

static void attnCases(MlirContext ctx, Fa3DiagnosticLog *log) {
  MlirModule module = parseOrFail(ctx, kMemrefFunc, "parse");
  if (mlirModuleIsNull(module))
    return;
  MlirBlock body = funcBody(module);
  MlirValue q = mlirBlockGetArgument(body, 0), k = mlirBlockGetArgument(body, 1),
            v = mlirBlockGetArgument(body, 2), o = mlirBlockGetArgument(body, 3),
            i = mlirBlockGetArgument(body, 4);
  MlirValue null = {NULL};
  MlirLocation loc = mlirLocationUnknownGet(ctx);
  MlirLocation nullLoc = {NULL};
  Fa3FlashAttentionOptions opts = fa3FlashAttentionOptionsDefault();

  MlirOperation op = fa3FlashAttentionCreate(nullLoc, q, k, v, o, null, opts);
  // CHECK: create/null-loc: fa3FlashAttentionCreate: the location is null
  expectFailure("create/null-loc", mlirOperationIsNull(op));

  op = fa3FlashAttentionCreate(loc, null, k, v, o, null, opts);
  // CHECK: create/null-q: fa3FlashAttentionCreate: q is a null MlirValue
  expectFailure("create/null-q", mlirOperationIsNull(op));
  expectLogged(log, "create/null-q", "error: fa3FlashAttentionCreate: q is a null MlirValue");
  op = fa3FlashAttentionCreate(loc, q, k, v, null, null, opts);
  // CHECK: create/null-o: fa3FlashAttentionCreate: o is a null MlirValue
  expectFailure("create/null-o", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);

  /* Values of the wrong type: the verifier's reason, and no op. */
  op = fa3FlashAttentionCreate(loc, i, k, v, o, null, opts);
  // CHECK: create/i32-q: fa3FlashAttentionCreate: 'attn.flash_attention' op operand #0 must be
  expectFailure("create/i32-q", mlirOperationIsNull(op));
  expectLogged(log, "create/i32-q", "'attn.flash_attention' op operand #0");
  op = fa3FlashAttentionCreate(loc, q, k, v, o, i, opts);
  // CHECK: create/i32-lse: fa3FlashAttentionCreate: 'attn.flash_attention' op
  expectFailure("create/i32-lse", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);

  /* Options the verifier refuses. */
  Fa3FlashAttentionOptions bad = opts;
  bad.hasScale = true;
  bad.scale = -1.0f;
  op = fa3FlashAttentionCreate(loc, q, k, v, o, null, bad);
  // CHECK: create/scale: fa3FlashAttentionCreate: 'attn.flash_attention' op scale must be
  expectFailure("create/scale", mlirOperationIsNull(op));
  bad = opts;
  bad.windowLeft = -7;
  op = fa3FlashAttentionCreate(loc, q, k, v, o, null, bad);
  // CHECK: create/window: fa3FlashAttentionCreate: 'attn.flash_attention' op window
  expectFailure("create/window", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);

  /* Values of another context. */
  MlirContext other = fa3ContextCreate();
  op = fa3FlashAttentionCreate(mlirLocationUnknownGet(other), q, k, v, o, null, opts);
  // CHECK: create/other-context: fa3FlashAttentionCreate: q belongs to another context than loc
  expectFailure("create/other-context", mlirOperationIsNull(op));
  mlirContextDestroy(other);

  /* A valid op still comes out (and clears the last error). */
  op = fa3FlashAttentionCreate(loc, q, k, v, o, null, opts);
  expectSuccess("create/valid", !mlirOperationIsNull(op));
  expectSuccess("isa/valid", fa3OperationIsAFlashAttention(op));
  char *text = fa3OperationToString(op, false);
  expectSuccess("to-string/valid", text && strstr(text, "attn.flash_attention"));
  fa3StringDestroy(text);
  mlirOperationDestroy(op);

  MlirOperation nullOp = {NULL};
  // CHECK: isa/null: fa3OperationIsAFlashAttention: the operation is null
  expectFailure("isa/null", !fa3OperationIsAFlashAttention(nullOp));

  /* The backward's builder: the same checks, and a valid op (q, k, v and o
     share one shape, so they double as dO and the gradients). */
  MlirValue l = mlirBlockGetArgument(body, 5);
  op = fa3FlashAttentionGradCreate(loc, q, k, v, o, null, l, q, k, v, opts);
  // CHECK: grad/null-do: fa3FlashAttentionGradCreate: dO is a null MlirValue
  expectFailure("grad/null-do", mlirOperationIsNull(op));
  op = fa3FlashAttentionGradCreate(loc, q, k, v, o, o, l, q, k, null, opts);
  // CHECK: grad/null-dv: fa3FlashAttentionGradCreate: dv is a null MlirValue
  expectFailure("grad/null-dv", mlirOperationIsNull(op));
  op = fa3FlashAttentionGradCreate(nullLoc, q, k, v, o, o, l, q, k, v, opts);
  // CHECK: grad/null-loc: fa3FlashAttentionGradCreate: the location is null
  expectFailure("grad/null-loc", mlirOperationIsNull(op));
  op = fa3FlashAttentionGradCreate(loc, q, k, v, o, o, o, q, k, v, opts);
  // CHECK: grad/lse-rank: fa3FlashAttentionGradCreate: 'attn.flash_attention_grad' op lse must have rank 3 [B, Hq, Sq], got rank 4
  expectFailure("grad/lse-rank", mlirOperationIsNull(op));
  fa3DiagnosticLogClear(log);
  op = fa3FlashAttentionGradCreate(loc, q, k, v, o, o, l, q, k, v, opts);
  expectSuccess("grad/valid", !mlirOperationIsNull(op));
  expectSuccess("isa/grad", fa3OperationIsAFlashAttentionGrad(op) &&
                                !fa3OperationIsAFlashAttention(op));
  /* deterministic is set as Attn.h says: the op's inherent unit attribute */
  text = fa3OperationToString(op, false);
  expectSuccess("grad/plain", text && !strstr(text, "deterministic"));
  fa3StringDestroy(text);
  mlirOperationSetInherentAttributeByName(
      op, mlirStringRefCreateFromCString("deterministic"), mlirUnitAttrGet(ctx));
  text = fa3OperationToString(op, false);
  expectSuccess("grad/deterministic", text && strstr(text, ") deterministic") != NULL);
  expectSuccess("grad/deterministic-verifies", mlirOperationVerify(op));
  fa3StringDestroy(text);
  mlirOperationDestroy(op);
  // CHECK: isa-grad/null: fa3OperationIsAFlashAttentionGrad: the operation is null
  expectFailure("isa-grad/null", !fa3OperationIsAFlashAttentionGrad(nullOp));
  // CHECK: to-string/null: fa3OperationToString: the operation is null
  expectFailure("to-string/null", fa3OperationToString(nullOp, true) == NULL);
  fa3StringDestroy(NULL);

  MlirLogicalResult r = fa3RunPassPipeline(nullOp, "canonicalize");
  // CHECK: pipeline/null-op: fa3RunPassPipeline: the operation is null
  expectFailure("pipeline/null-op", mlirLogicalResultIsFailure(r));
  MlirOperation modOp = mlirModuleGetOperation(module);
  r = fa3RunPassPipeline(modOp, NULL);
  // CHECK: pipeline/null-text: fa3RunPassPipeline: the pipeline is NULL
  expectFailure("pipeline/null-text", mlirLogicalResultIsFailure(r));
  expectLogged(log, "pipeline/null-text", "error: fa3RunPassPipeline: the pipeline is NULL");
  r = fa3RunPassPipeline(modOp, "no-such-pass");
  // CHECK: pipeline/bogus: fa3RunPassPipeline: invalid pass pipeline 'no-such-pass'
  expectFailure("pipeline/bogus", mlirLogicalResultIsFailure(r));
  expectLogged(log, "pipeline/bogus", "invalid pass pipeline");
  r = fa3RunPassPipeline(modOp, "canonicalize");
  expectSuccess("pipeline/valid", mlirLogicalResultIsSuccess(r));
  /* Our pipelines need the module; on a function they report it (this
   * aborted in OpPassManager::addPass). */
  MlirOperation fn = mlirBlockGetFirstOperation(mlirModuleGetBody(module));
  const char *pipelines[] = {"attn-cpu-reference-pipeline",
                             "attn-cpu-tiled-pipeline", "attn-hopper-pipeline"};
  for (int i = 0; i < 3; ++i) {
    r = fa3RunPassPipeline(fn, pipelines[i]);
    // CHECK: pipeline/on-func: {{.*}}attn-cpu-reference-pipeline runs on builtin.module (it bufferizes function boundaries and creates modules), not on func.func
    // CHECK: pipeline/on-func: {{.*}}attn-cpu-tiled-pipeline runs on builtin.module
    // CHECK: pipeline/on-func: {{.*}}attn-hopper-pipeline runs on builtin.module
    expectFailure("pipeline/on-func", mlirLogicalResultIsFailure(r));
  }
  mlirModuleDestroy(module);
}

/* A module that does not verify (two terminators): refused before any pass
 * runs on it. */
static void invalidModuleCase(MlirContext ctx, Fa3DiagnosticLog *log) {
  MlirModule module = mlirModuleCreateParse(ctx, str("func.func @g() {\n  return\n}\n"));
  MlirBlock body = funcBody(module);
  MlirOperationState st =
      mlirOperationStateGet(str("func.return"), mlirLocationUnknownGet(ctx));
  MlirOperation ret = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperation(body, 0, ret);
  Fa3KernelSet *set = fa3CompileHopperModule(module, NULL);
  // CHECK: compile-module/invalid: fa3CompileHopperModule: 'func.return' op must be the last operation in the parent block
  expectFailure("compile-module/invalid", set == NULL);
  expectLogged(log, "compile-module/invalid", "must be the last operation");
  mlirModuleDestroy(module);
}

/* Specs that must be refused before any IR exists, naming the field. */
static void specCases(MlirContext ctx, Fa3DiagnosticLog *log) {
  Fa3HopperOptions ptxOnly = fa3HopperOptionsDefault();
  ptxOnly.emitCubin = false;
  char longName[260];
  memset(longName, 'a', 201);
  longName[201] = 0;
  struct {
    const char *what;
    Fa3AttentionSpec spec;
  } cases[32];
  int n = 0;
#define SPEC_CASE(label, field, value)                                         \
  do {                                                                         \
    cases[n].what = label;                                                     \
    cases[n].spec = fa3AttentionSpecDefault();                                 \
    cases[n].spec.field = value;                                               \
    ++n;                                                                       \
  } while (0)
  SPEC_CASE("spec/inject", name, "x(%q: i32) { return } func.func @y");
  SPEC_CASE("spec/digit", name, "1abc");
  SPEC_CASE("spec/empty", name, "");
  SPEC_CASE("spec/long", name, longName);
  SPEC_CASE("spec/dtype", dtype, "f32");
  SPEC_CASE("spec/head-dim", headDim, 80);
  SPEC_CASE("spec/head-dim-v", headDimV, 72);
  SPEC_CASE("spec/head-dim-v-neg", headDimV, -1);
  SPEC_CASE("spec/window-left", windowLeft, -2);
  SPEC_CASE("spec/window-right", windowRight, (int64_t)1 << 31);
  SPEC_CASE("spec/softcap-nan", softcap, NAN);
  SPEC_CASE("spec/softcap-neg", softcap, -1.0f);
  SPEC_CASE("spec/softcap-tiny", softcap, 1e-7f);
  SPEC_CASE("spec/scale-zero", scale, 0.0f);
  cases[n - 1].spec.hasScale = true;
  SPEC_CASE("spec/scale-inf", scale, INFINITY);
  cases[n - 1].spec.hasScale = true;
  SPEC_CASE("spec/scale-huge", scale, 3e38f);
  cases[n - 1].spec.hasScale = true;
  SPEC_CASE("spec/causal-window", causal, true);
  cases[n - 1].spec.windowRight = 5;
  SPEC_CASE("spec/fp8-backward", dtype, "e4m3");
  cases[n - 1].spec.backward = true;
  SPEC_CASE("spec/fp8-decode-256", dtype, "e4m3");
  cases[n - 1].spec.decode = true;
  cases[n - 1].spec.headDim = 256;
  SPEC_CASE("spec/fp8-head-dim", dtype, "e4m3");
  cases[n - 1].spec.headDim = 96;
  SPEC_CASE("spec/fp8-head-dim-v", dtype, "e4m3");
  cases[n - 1].spec.headDimV = 192;
  SPEC_CASE("spec/deterministic-forward", deterministic, true);
#undef SPEC_CASE
  // CHECK: spec/inject: fa3CompileHopperSpec: invalid attention spec: name: "x(%q: i32) { return } func.func @y" is not a C identifier (1 to 200 letters, digits and '_', not starting with a digit)
  // CHECK: spec/digit: fa3CompileHopperSpec: invalid attention spec: name: "1abc" is not a C identifier
  // CHECK: spec/empty: fa3CompileHopperSpec: invalid attention spec: name: "" is not a C identifier
  // CHECK: spec/long: fa3CompileHopperSpec: invalid attention spec: name: "{{a+}}..." is not a C identifier
  // CHECK: spec/dtype: fa3CompileHopperSpec: invalid attention spec: dtype: "f32" is not supported (bf16, f16 or e4m3)
  // CHECK: spec/head-dim: fa3CompileHopperSpec: invalid attention spec: headDim: unsupported head dim 80 (the Hopper kernel takes 64, 96, 128, 192 or 256)
  // CHECK: spec/head-dim-v: fa3CompileHopperSpec: invalid attention spec: headDimV: unsupported value head dim 72 (0 = headDim, or 64, 96, 128, 192 or 256)
  // CHECK: spec/head-dim-v-neg: fa3CompileHopperSpec: invalid attention spec: headDimV: unsupported value head dim -1
  // CHECK: spec/window-left: fa3CompileHopperSpec: invalid attention spec: windowLeft: -2 is out of range (-1 = unbounded, or 0 to 2147483647)
  // CHECK: spec/window-right: fa3CompileHopperSpec: invalid attention spec: windowRight: 2147483648 is out of range (-1 = unbounded, or 0 to 2147483647)
  // CHECK: spec/softcap-nan: fa3CompileHopperSpec: invalid attention spec: softcap: nan is out of range (0 = off, or 1e-6 to 1e30)
  // CHECK: spec/softcap-neg: fa3CompileHopperSpec: invalid attention spec: softcap: -1 is out of range
  // CHECK: spec/softcap-tiny: fa3CompileHopperSpec: invalid attention spec: softcap: 1e-07 is out of range
  // CHECK: spec/scale-zero: fa3CompileHopperSpec: invalid attention spec: scale: 0 is out of range (> 0 and at most 1e30; hasScale false: 1/sqrt(headDim))
  // CHECK: spec/scale-inf: fa3CompileHopperSpec: invalid attention spec: scale: inf is out of range
  // CHECK: spec/scale-huge: fa3CompileHopperSpec: invalid attention spec: scale: 3e+38 is out of range
  // CHECK: spec/causal-window: fa3CompileHopperSpec: invalid attention spec: windowRight: 5 with causal (causal attention has windowRight 0; give 0 or -1)
  // CHECK: spec/fp8-backward: fa3CompileHopperSpec: invalid attention spec: dtype: e4m3 with backward (the FP8 kernels are the fixed-length forward and the decoding kernel)
  // CHECK: spec/fp8-decode-256: fa3CompileHopperSpec: invalid attention spec: headDim: 256 in the FP8 decoding kernel (dtype e4m3 with decode takes head dim 64 or 128)
  // CHECK: spec/fp8-head-dim: fa3CompileHopperSpec: invalid attention spec: headDim: 96 in FP8 (dtype e4m3 takes head dim 64, 128 or 256, headDimV 0 or equal)
  // CHECK: spec/fp8-head-dim-v: fa3CompileHopperSpec: invalid attention spec: headDim: 128 with headDimV 192 in FP8
  // CHECK: spec/deterministic-forward: fa3CompileHopperSpec: invalid attention spec: deterministic: only with backward
  for (int c = 0; c < n; ++c) {
    Fa3KernelSet *set = fa3CompileHopperSpec(ctx, &cases[c].spec, &ptxOnly);
    expectFailure(cases[c].what, set == NULL);
    expectLogged(log, cases[c].what, "error: fa3CompileHopperSpec: invalid attention spec: ");
    fa3KernelSetDestroy(set);
  }

  Fa3AttentionSpec spec = fa3AttentionSpecDefault();
  MlirContext nullCtx = {NULL};
  // CHECK: spec/null-context: fa3CompileHopperSpec: the context is null
  expectFailure("spec/null-context", fa3CompileHopperSpec(nullCtx, &spec, &ptxOnly) == NULL);
  MlirModule nullModule = {NULL};
  // CHECK: compile-module/null: fa3CompileHopperModule: the module is null
  expectFailure("compile-module/null", fa3CompileHopperModule(nullModule, &ptxOnly) == NULL);

  char buf[64] = "untouched";
  // CHECK: spec-name/null: fa3AttentionSpecName: the spec is NULL
  expectFailure("spec-name/null", fa3AttentionSpecName(NULL, buf, sizeof buf) == 0);
  if (buf[0] != 0) {
    printf("FAIL spec-name/null: buffer not emptied\n");
    ++failures;
  }
  spec.headDim = 64;
  expectSuccess("spec-name/valid",
                fa3AttentionSpecName(&spec, buf, sizeof buf) == strlen("fa3_fwd_d64_bf16") &&
                    !strcmp(buf, "fa3_fwd_d64_bf16"));

  /* Kernel sets: NULL, an index past the end, destroyed twice. */
  // CHECK: set-size/null: fa3KernelSetSize: the kernel set is NULL
  expectFailure("set-size/null", fa3KernelSetSize(NULL) == 0);
  Fa3KernelBinary b = fa3KernelSetGet(NULL, 0);
  // CHECK: set-get/null: fa3KernelSetGet: the kernel set is NULL
  expectFailure("set-get/null", b.name == NULL && b.ptx == NULL && b.ptxSize == 0);
  fa3KernelSetDestroy(NULL);
  expectSuccess("set-destroy/null", 1);

  Fa3KernelSet *set = fa3CompileHopperSpec(ctx, &spec, &ptxOnly);
  expectSuccess("spec/valid", set != NULL);
  if (!set) {
    printf("log: %s\n", fa3DiagnosticLogText(log));
    return;
  }
  expectSuccess("set-size/valid", fa3KernelSetSize(set) == 1);
  b = fa3KernelSetGet(set, 0);
  expectSuccess("set-get/valid", b.name && b.ptxSize > 0 && b.facts);
  b = fa3KernelSetGet(set, 99);
  // CHECK: set-get/99: fa3KernelSetGet: index 99 is out of range (size 1)
  expectFailure("set-get/99",
                b.name == NULL && b.ptx == NULL && b.ptxSize == 0 && b.cubin == NULL &&
                    b.cubinSize == 0 && b.facts == NULL);
  fa3KernelSetDestroy(set);
  expectSuccess("set-destroy/valid", 1);
  fa3KernelSetDestroy(set);
  // CHECK: set-destroy/twice: fa3KernelSetDestroy: not a live Fa3KernelSet (destroyed twice?)
  expectFailure("set-destroy/twice", 1);
  // CHECK: set-size/destroyed: fa3KernelSetSize: not a live Fa3KernelSet (destroyed already?)
  expectFailure("set-size/destroyed", fa3KernelSetSize(set) == 0);
}

/* Logs: NULL, destroyed twice, destroyed after their context. */
static void logCases(void) {
  MlirContext nullCtx = {NULL};
  // CHECK: log-attach/null: fa3DiagnosticLogAttach: the context is null
  expectFailure("log-attach/null", fa3DiagnosticLogAttach(nullCtx) == NULL);
  // CHECK: log-text/null: fa3DiagnosticLogText: the log is NULL
  expectFailure("log-text/null", fa3DiagnosticLogText(NULL) == NULL);
  fa3DiagnosticLogClear(NULL);
  // CHECK: log-clear/null: fa3DiagnosticLogClear: the log is NULL
  expectFailure("log-clear/null", 1);
  fa3DiagnosticLogDestroy(NULL);
  expectSuccess("log-destroy/null", 1);

  /* Destroyed twice, its context alive. */
  MlirContext ctx = fa3ContextCreate();
  Fa3DiagnosticLog *log = fa3DiagnosticLogAttach(ctx);
  fa3DiagnosticLogDestroy(log);
  expectSuccess("log-destroy/once", 1);
  fa3DiagnosticLogDestroy(log);
  // CHECK: log-destroy/twice: fa3DiagnosticLogDestroy: not a live Fa3DiagnosticLog (destroyed twice?)
  expectFailure("log-destroy/twice", 1);
  // CHECK: log-text/destroyed: fa3DiagnosticLogText: not a live Fa3DiagnosticLog (destroyed already?)
  expectFailure("log-text/destroyed", fa3DiagnosticLogText(log) == NULL);
  /* The context still works and no longer writes into the log. */
  MlirModule m = mlirModuleCreateParse(ctx, str("module {}"));
  fa3RunPassPipeline(mlirModuleGetOperation(m), "no-such-pass");
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);

  /* Destroyed after its context: the text survives, then it goes once. */
  ctx = fa3ContextCreate();
  log = fa3DiagnosticLogAttach(ctx);
  Fa3DiagnosticLog *second = fa3DiagnosticLogAttach(ctx);
  m = mlirModuleCreateParse(ctx, str("module {}"));
  fa3RunPassPipeline(mlirModuleGetOperation(m), "no-such-pass");
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);
  /* The latest log gets the diagnostics (MLIR asks the newest handler). */
  const char *text = fa3DiagnosticLogText(second);
  expectSuccess("log-text/after-context", text && strstr(text, "no-such-pass"));
  fa3DiagnosticLogClear(second);
  expectSuccess("log-clear/after-context", 1);
  fa3DiagnosticLogDestroy(second);
  expectSuccess("log-destroy/after-context", 1);
  fa3DiagnosticLogDestroy(second);
  // CHECK: log-destroy/after-context-twice: fa3DiagnosticLogDestroy: not a live Fa3DiagnosticLog
  expectFailure("log-destroy/after-context-twice", 1);
  text = fa3DiagnosticLogText(log);
  expectSuccess("log-text/first", text && !*text);
  fa3DiagnosticLogDestroy(log);
  expectSuccess("log-destroy/first", 1);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  MlirDialectRegistry nullRegistry = {NULL};
  fa3RegisterAllDialects(nullRegistry);
  expectFailure("register/null", 1);

  MlirContext ctx = fa3ContextCreate();
  Fa3DiagnosticLog *log = fa3DiagnosticLogAttach(ctx);
  varlenCases(ctx, log); /* first: its CHECK lines come first */
  fp8Cases(ctx, log);
  attnCases(ctx, log);
  invalidModuleCase(ctx, log);
  specCases(ctx, log);
  fa3DiagnosticLogDestroy(log);
  mlirContextDestroy(ctx);
  logCases();

  // CHECK: misuse cases failed: 0
  printf("misuse cases failed: %d\n", failures);
  return failures != 0;
}
