/* A call-sequence fuzzer for the fa3 C API: a fixed-seed PRNG picks entry
 * points and gives them valid, NULL, destroyed (logs, kernel sets) or
 * out-of-range arguments, in any order: logs outliving their context, sets
 * destroyed twice, specs with every field out of range, pipelines that do
 * not parse. The contract (fa3-c/Support.h) is that none of it crashes and
 * that every refused call leaves a last error. MLIR handles are only ever
 * valid or null: a dangling one is outside the contract (docs/c-api.md).
 *
 * usage: fa3-capi-fuzz SEED COUNT   (prints the number of calls made)
 *
 * RUN: fa3-capi-fuzz 1 300 | FileCheck %s
 * RUN: fa3-capi-fuzz 2 300 | FileCheck %s
 * CHECK: calls: {{[0-9]+}}, refused: {{[0-9]+}}, compiled: {{[0-9]+}}
 */
#include "fa3-c/Attn.h"
#include "fa3-c/Compile.h"
#include "fa3-c/Driver.h"
#include "fa3-c/Registration.h"
#include "mlir-c/IR.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CTX 3
#define N_MOD 6
#define N_LOG 6
#define N_SET 4

static uint64_t rng;
static uint64_t next(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}
static unsigned pick(unsigned n) { return (unsigned)(next() % n); }
static int chance(unsigned percent) { return pick(100) < percent; }
#define PICK(array) (array[pick(sizeof(array) / sizeof(array[0]))])

static long calls, refused, compiled;

/* After each call: a failure value must come with a last error. */
static void after(const char *what, int failed) {
  ++calls;
  const char *err = fa3LastError();
  if (!err) {
    printf("FAIL %s: fa3LastError returned NULL\n", what);
    exit(1);
  }
  if (failed) {
    ++refused;
    if (!*err) {
      printf("FAIL %s: failed without a last error\n", what);
      exit(1);
    }
  }
}

static MlirContext ctxs[N_CTX];
static struct {
  MlirModule module;
  int ctx;
} mods[N_MOD];
/* Logs and sets keep their pointers after destruction on purpose: using
 * them again must be refused. */
static Fa3DiagnosticLog *logs[N_LOG];
static Fa3KernelSet *sets[N_SET];

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static const char *kSources[] = {
    /* memref form with an attention op: compiles */
    "func.func @a(%q: memref<?x2x?x64xbf16>, %k: memref<?x1x?x64xbf16>,"
    " %v: memref<?x1x?x64xbf16>, %o: memref<?x2x?x64xbf16>,"
    " %l: memref<?x2x?xf32>) {\n"
    "  attn.flash_attention ins(%q, %k, %v : memref<?x2x?x64xbf16>,"
    " memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) outs(%o, %l :"
    " memref<?x2x?x64xbf16>, memref<?x2x?xf32>) causal\n"
    "  return\n}\n",
    /* arguments only: material for fa3FlashAttentionCreate */
    "func.func @b(%q: memref<1x2x64x64xbf16>, %k: memref<1x2x64x64xbf16>,"
    " %v: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xbf16>,"
    " %l: memref<1x2x64xf32>, %i: i32, %t: tensor<1x2x64x64xbf16>,"
    " %f: memref<1x2x64x64xf32>) {\n  return\n}\n",
    "func.func @c(%q: tensor<1x4x32x128xf16>, %k: tensor<1x2x32x128xf16>,"
    " %v: tensor<1x2x32x128xf16>, %o: tensor<1x4x32x128xf16>,"
    " %l: tensor<1x4x32xf32>) {\n  return\n}\n",
    "module {}",
    "func.func @broken(", /* does not parse: a null module */
};

/* Pipelines that parse or fail to parse, none of which may abort. */
static const char *kPipelines[] = {
    NULL, "", "canonicalize", "cse", "builtin.module(canonicalize)",
    "func.func(canonicalize)", "builtin.module(func.func(cse))",
    "no-such-pass", "canonicalize{", "builtin.module(", ")(", "canonicalize{max-iterations=x}",
    "\x01\xff", "attn-tile{block-m=-1}",
};

static const char *kNames[] = {
    NULL, NULL, NULL, "k", "_x1", "1x", "", "x(%q: i32) { return } func.func @y",
    "a-b", "kernel\n", "fa3_fwd_custom",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};
static const char *kDtypes[] = {NULL, "bf16", "f16", "bf16", "f32", "", "f16 "};
static const int64_t kDims[] = {64, 128, 256, 64, 0, 8, 96, 512, -64, INT64_MAX};
static const int64_t kWindows[] = {-1, -1, -1, 0, 1, 128, -2, 2147483647,
                                   2147483648LL, INT64_MIN, INT64_MAX};
static const float kFloats[] = {0.0f, 0.0f, 0.125f, 1.0f, 30.0f, -0.0f, -1.0f,
                                1e-7f, 1e-6f, 1e30f, 3e38f, 1e-40f};

static float randomFloat(void) {
  unsigned k = pick(14);
  if (k == 12)
    return NAN;
  if (k == 13)
    return INFINITY;
  return kFloats[k];
}

static MlirContext randomContext(void) {
  MlirContext c = {NULL};
  return chance(85) ? ctxs[pick(N_CTX)] : c; /* slots may be null too */
}

/* The first func.func of a live module, or a null op. */
static MlirOperation firstFunc(int m) {
  MlirOperation none = {NULL};
  if (mlirModuleIsNull(mods[m].module))
    return none;
  MlirOperation op = mlirBlockGetFirstOperation(mlirModuleGetBody(mods[m].module));
  for (; !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    MlirIdentifier name = mlirOperationGetName(op);
    MlirStringRef s = mlirIdentifierStr(name);
    if (s.length == 9 && !memcmp(s.data, "func.func", 9) &&
        mlirOperationGetNumRegions(op) == 1 &&
        !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))))
      return op;
  }
  return none;
}

/* A random op: null, a module, a func or an op inside one. */
static MlirOperation randomOp(void) {
  MlirOperation none = {NULL};
  int m = (int)pick(N_MOD);
  if (chance(15) || mlirModuleIsNull(mods[m].module))
    return none;
  if (chance(40))
    return mlirModuleGetOperation(mods[m].module);
  MlirOperation f = firstFunc(m);
  if (mlirOperationIsNull(f) || chance(50))
    return f;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
  return mlirBlockGetFirstOperation(body);
}

/* A random argument of module m's func, or a null value. */
static MlirValue valueFrom(int m) {
  MlirValue none = {NULL};
  MlirOperation f = firstFunc(m);
  if (mlirOperationIsNull(f) || chance(8))
    return none;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
  intptr_t n = mlirBlockGetNumArguments(body);
  if (n == 0)
    return none;
  return mlirBlockGetArgument(body, pick((unsigned)n));
}

static void destroyModule(int m) {
  if (!mlirModuleIsNull(mods[m].module))
    mlirModuleDestroy(mods[m].module);
  mods[m].module.ptr = NULL;
}

static void destroyContext(int c) {
  if (mlirContextIsNull(ctxs[c]))
    return;
  /* Its modules first (MLIR's rule); its logs stay: they must survive it. */
  for (int m = 0; m < N_MOD; ++m)
    if (mods[m].ctx == c)
      destroyModule(m);
  mlirContextDestroy(ctxs[c]);
  ctxs[c].ptr = NULL;
}

static Fa3AttentionSpec randomSpec(void) {
  Fa3AttentionSpec s = fa3AttentionSpecDefault();
  s.headDim = 64;
  /* Mostly one field off at a time, so that each check is reached. */
  switch (pick(9)) {
  case 0: s.name = PICK(kNames); break;
  case 1: s.dtype = PICK(kDtypes); break;
  case 2: s.headDim = PICK(kDims); break;
  case 3: s.windowLeft = PICK(kWindows); s.windowRight = PICK(kWindows); break;
  case 4: s.softcap = randomFloat(); break;
  case 5: s.hasScale = true; s.scale = randomFloat(); break;
  case 6: s.causal = true; s.windowRight = PICK(kWindows); break;
  case 7: /* everything at once */
    s.name = PICK(kNames);
    s.dtype = PICK(kDtypes);
    s.headDim = PICK(kDims);
    s.causal = chance(50);
    s.windowLeft = PICK(kWindows);
    s.windowRight = PICK(kWindows);
    s.softcap = randomFloat();
    s.hasScale = chance(50);
    s.scale = randomFloat();
    break;
  default: break; /* valid */
  }
  return s;
}

static void step(void) {
  Fa3HopperOptions ptxOnly = fa3HopperOptionsDefault();
  ptxOnly.emitCubin = false;
  switch (pick(17)) {
  case 0: { /* a context into an empty slot, or destroy one */
    int c = (int)pick(N_CTX);
    if (mlirContextIsNull(ctxs[c]))
      ctxs[c] = fa3ContextCreate();
    else if (chance(30))
      destroyContext(c);
    break;
  }
  case 1: { /* attach a log */
    int l = (int)pick(N_LOG);
    Fa3DiagnosticLog *log = fa3DiagnosticLogAttach(randomContext());
    after("fa3DiagnosticLogAttach", log == NULL);
    if (log)
      logs[l] = log; /* the old one (if any) is leaked or already gone */
    break;
  }
  case 2: { /* use or destroy a log: live, destroyed or NULL */
    Fa3DiagnosticLog *log = chance(10) ? NULL : logs[pick(N_LOG)];
    switch (pick(3)) {
    case 0: {
      const char *t = fa3DiagnosticLogText(log);
      after("fa3DiagnosticLogText", t == NULL);
      if (t)
        (void)strlen(t);
      break;
    }
    case 1:
      fa3DiagnosticLogClear(log);
      after("fa3DiagnosticLogClear", *fa3LastError() != 0);
      break;
    default:
      fa3DiagnosticLogDestroy(log);
      after("fa3DiagnosticLogDestroy", *fa3LastError() != 0);
      break;
    }
    break;
  }
  case 3: { /* parse a module into a slot */
    int c = (int)pick(N_CTX), m = (int)pick(N_MOD);
    if (mlirContextIsNull(ctxs[c]))
      break;
    destroyModule(m);
    mods[m].module = mlirModuleCreateParse(ctxs[c], str(PICK(kSources)));
    mods[m].ctx = c;
    break;
  }
  case 4:
  case 5: { /* build an attention op from random values and options */
    /* Often all from one module, so that some verify. */
    int one = chance(50), m = (int)pick(N_MOD);
#define SOME_VALUE() valueFrom(one ? m : (int)pick(N_MOD))
    MlirValue q = SOME_VALUE(), k = SOME_VALUE(), v = SOME_VALUE(),
              o = SOME_VALUE(), l = SOME_VALUE();
#undef SOME_VALUE
    if (chance(50)) /* most attention has no lse */
      l.ptr = NULL;
    MlirContext c = randomContext();
    MlirLocation loc = {NULL};
    if (!mlirContextIsNull(c))
      loc = mlirLocationUnknownGet(c);
    Fa3FlashAttentionOptions opts = fa3FlashAttentionOptionsDefault();
    opts.hasScale = chance(30);
    opts.scale = randomFloat();
    opts.causal = chance(30);
    if (chance(30)) {
      opts.windowLeft = PICK(kWindows);
      opts.windowRight = PICK(kWindows);
    }
    if (chance(20))
      opts.softcap = randomFloat();
    MlirOperation op = fa3FlashAttentionCreate(loc, q, k, v, o, l, opts);
    after("fa3FlashAttentionCreate", mlirOperationIsNull(op));
    if (mlirOperationIsNull(op))
      break;
    int isa = fa3OperationIsAFlashAttention(op);
    after("fa3OperationIsAFlashAttention", !isa);
    char *text = fa3OperationToString(op, chance(50));
    after("fa3OperationToString", text == NULL);
    fa3StringDestroy(text);
    /* Insert it where all its operands are visible (they are arguments of
     * one block), else drop it. */
    MlirBlock owner = mlirBlockArgumentGetOwner(q); /* q is not null here */
    int oneBlock = 1;
    MlirValue operands[] = {k, v, o, l};
    for (int i = 0; i < 4; ++i)
      if (!mlirValueIsNull(operands[i]) &&
          !mlirBlockEqual(mlirBlockArgumentGetOwner(operands[i]), owner))
        oneBlock = 0;
    if (oneBlock && chance(70))
      mlirBlockInsertOwnedOperationBefore(owner, mlirBlockGetTerminator(owner), op);
    else
      mlirOperationDestroy(op);
    break;
  }
  case 6: {
    MlirOperation op = randomOp();
    int isa = fa3OperationIsAFlashAttention(op);
    after("fa3OperationIsAFlashAttention", mlirOperationIsNull(op) && !isa);
    char *text = fa3OperationToString(op, chance(50));
    after("fa3OperationToString", text == NULL);
    fa3StringDestroy(text);
    break;
  }
  case 7:
  case 8: {
    MlirOperation op = randomOp();
    MlirLogicalResult r = fa3RunPassPipeline(op, PICK(kPipelines));
    after("fa3RunPassPipeline", mlirLogicalResultIsFailure(r));
    break;
  }
  case 9:
  case 10: { /* compile a spec: mostly refused, now and then compiled */
    Fa3AttentionSpec s = randomSpec();
    MlirContext c = randomContext();
    const Fa3AttentionSpec *sp = chance(5) ? NULL : &s;
    Fa3KernelSet *set = fa3CompileHopperSpec(c, sp, &ptxOnly);
    after("fa3CompileHopperSpec", set == NULL);
    char buf[32];
    const Fa3AttentionSpec *named = chance(10) ? NULL : &s;
    fa3AttentionSpecName(named, chance(20) ? NULL : buf, chance(20) ? 0 : sizeof buf);
    after("fa3AttentionSpecName", named == NULL);
    if (set) {
      ++compiled;
      int i = (int)pick(N_SET);
      fa3KernelSetDestroy(sets[i]); /* live, destroyed already, or NULL */
      after("fa3KernelSetDestroy", *fa3LastError() != 0);
      sets[i] = set;
    }
    break;
  }
  case 11: { /* compile a module (consumes it) */
    int m = (int)pick(N_MOD);
    MlirModule mod = chance(10) ? (MlirModule){NULL} : mods[m].module;
    Fa3KernelSet *set = fa3CompileHopperModule(mod, chance(10) ? NULL : &ptxOnly);
    after("fa3CompileHopperModule", set == NULL);
    if (set) {
      ++compiled;
      int i = (int)pick(N_SET);
      fa3KernelSetDestroy(sets[i]);
      after("fa3KernelSetDestroy", *fa3LastError() != 0);
      sets[i] = set;
    }
    break;
  }
  case 12:
  case 13: { /* read or destroy a set: live, destroyed or NULL */
    Fa3KernelSet *set = chance(10) ? NULL : sets[pick(N_SET)];
    size_t n = fa3KernelSetSize(set);
    after("fa3KernelSetSize", n == 0);
    const size_t idx[] = {0, 1, 99, (size_t)-1};
    size_t i = PICK(idx);
    Fa3KernelBinary b = fa3KernelSetGet(set, i);
    after("fa3KernelSetGet", b.name == NULL);
    if (b.name && (strlen(b.name) == 0 || strlen(b.ptx) != b.ptxSize || !b.facts)) {
      printf("FAIL fa3KernelSetGet: inconsistent binary\n");
      exit(1);
    }
    if (chance(25)) {
      fa3KernelSetDestroy(set);
      after("fa3KernelSetDestroy", *fa3LastError() != 0);
    }
    break;
  }
  case 14: {
    MlirDialectRegistry r = {NULL};
    if (chance(30))
      r = mlirDialectRegistryCreate();
    fa3RegisterAllDialects(r);
    after("fa3RegisterAllDialects", mlirDialectRegistryIsNull(r));
    if (!mlirDialectRegistryIsNull(r))
      mlirDialectRegistryDestroy(r);
    break;
  }
  case 15: { /* a module slot emptied */
    destroyModule((int)pick(N_MOD));
    break;
  }
  default: { /* a context destroyed, whatever hangs on it */
    if (chance(30))
      destroyContext((int)pick(N_CTX));
    break;
  }
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: fa3-capi-fuzz SEED COUNT\n");
    return 2;
  }
  rng = strtoull(argv[1], NULL, 10) * 0x9E3779B97F4A7C15ull + 1;
  long count = strtol(argv[2], NULL, 10);
  for (int c = 0; c < N_CTX; ++c)
    ctxs[c] = fa3ContextCreate();
  for (long i = 0; i < count; ++i)
    step();
  for (int c = 0; c < N_CTX; ++c)
    destroyContext(c);
  for (int l = 0; l < N_LOG; ++l)
    fa3DiagnosticLogDestroy(logs[l]); /* live or refused: both fine */
  for (int s = 0; s < N_SET; ++s)
    fa3KernelSetDestroy(sets[s]);
  printf("calls: %ld, refused: %ld, compiled: %ld\n", calls, refused, compiled);
  return 0;
}
