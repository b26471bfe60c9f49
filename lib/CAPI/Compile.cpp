//===- Compile.cpp - one-call compilation to Hopper kernels ---------------===//
//
// Runs attn-hopper-pipeline up to the NVVM/LLVM dialect, reads the launch
// facts off each kernel, then serialises the gpu.modules twice: once to PTX
// (format=isa, on a clone) and once to a cubin (format=bin, ptxas).
//
//===----------------------------------------------------------------------===//

#include "fa3-c/Compile.h"
#include "fa3-c/Registration.h"
#include "fa3/Conversion/HopperSupport.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Pipelines/Pipelines.h"
#include "fa3/Pipelines/Ptxas.h"
#include "fa3/Support/InputLimits.h"

#include "Errors.h"

#include "mlir/CAPI/IR.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

using namespace mlir;
using namespace fa3::capi;

struct Fa3KernelSet {
  struct Kernel {
    std::string name, ptx, cubin, facts;
  };
  std::vector<Kernel> kernels;
};

Fa3HopperOptions fa3HopperOptionsDefault(void) {
  Fa3HopperOptions o;
  o.blockN = 0;
  o.stages = 0;
  o.pingpong = true;
  o.persistent = 0;
  o.tmaStore = true;
  o.chip = "sm_90a";
  o.features = "+ptx81";
  o.toolkit = NULL;
  o.emitCubin = true;
  o.qBuffers = 0;
  o.lazyRescale = 0;
  o.rescaleThreshold = 8.0;
  o.kvMulticast = 0;
  o.blockM = 0;
  o.ptxasTimeoutSeconds = 0;
  o.minSeqlenQ = 0;
  o.transposeWarps = 0;
  return o;
}

Fa3AttentionSpec fa3AttentionSpecDefault(void) {
  Fa3AttentionSpec s;
  s.name = NULL;
  s.dtype = "bf16";
  s.headDim = 128;
  s.causal = false;
  s.windowLeft = -1;
  s.windowRight = -1;
  s.softcap = 0.0f;
  s.hasScale = false;
  s.scale = 0.0f;
  s.headDimV = 0;
  s.varlen = false;
  s.backward = false;
  s.decode = false;
  s.deterministic = false;
  s.pagedKv = false;
  return s;
}

/// The launch facts as "key value" lines (format: docs/runtime.md), with the
/// lowest version whose readers launch the kernel right (fa3rt.h,
/// FA3RT_FACTS_VERSION): 4 for a decoding kernel (split_kv), whose
/// <kernel>_append takes numPages and Skv, which older runtimes do not
/// pass; 2 for a deterministic backward kernel, whose dQ workspace is
/// larger than a version-1 reader (one that skips the key) would make it;
/// 1 for the rest.
static std::string factsText(DictionaryAttr d) {
  auto det = d.getAs<BoolAttr>("deterministic");
  auto split = d.getAs<BoolAttr>("split_kv");
  std::string out = split && split.getValue() ? "fa3-kernel-facts 4\n"
                    : det && det.getValue()   ? "fa3-kernel-facts 2\n"
                                              : "fa3-kernel-facts 1\n";
  llvm::raw_string_ostream os(out);
  for (NamedAttribute a : d) {
    os << a.getName().getValue() << " ";
    Attribute v = a.getValue();
    if (auto s = dyn_cast<StringAttr>(v)) {
      os << s.getValue();
    } else if (auto b = dyn_cast<BoolAttr>(v)) {
      os << (b.getValue() ? 1 : 0);
    } else if (auto i = dyn_cast<IntegerAttr>(v)) {
      os << i.getInt();
    } else if (auto f = dyn_cast<FloatAttr>(v)) {
      char buf[64];
      snprintf(buf, sizeof buf, "%.17g", f.getValueAsDouble());
      os << buf;
    } else if (auto arr = dyn_cast<ArrayAttr>(v)) {
      llvm::interleave(
          arr, os, [&](Attribute e) { os << cast<StringAttr>(e).getValue(); },
          " ");
    }
    os << "\n";
  }
  return out;
}

/// The compiler's choice for a C API tri-state (1 on, -1 off, 0 auto).
static fa3::Toggle toggle(int v) {
  return v > 0 ? fa3::Toggle::On : v < 0 ? fa3::Toggle::Off : fa3::Toggle::Auto;
}

/// The pipeline options for the C API's (every field passed as a value:
/// nothing is turned into pipeline text).
static fa3::HopperPipelineOptions pipelineOptions(const Fa3HopperOptions &o) {
  fa3::HopperPipelineOptions c;
  c.config.blockM = o.blockM;
  c.config.blockN = o.blockN;
  c.config.stages = o.stages;
  c.config.pingpong = o.pingpong;
  c.config.persistent = toggle(o.persistent);
  c.config.tmaStore = o.tmaStore;
  c.config.qBuffers = o.qBuffers;
  c.config.lazyRescale = toggle(o.lazyRescale);
  c.config.rescaleThreshold = o.rescaleThreshold;
  c.config.kvMulticast = toggle(o.kvMulticast);
  c.config.minSeqlenQ = o.minSeqlenQ;
  c.config.transposeWarps = o.transposeWarps;
  c.format = fa3::BinaryFormat::None; // PTX and cubins are made below
  if (o.chip)
    c.chip = o.chip;
  if (o.features)
    c.features = o.features;
  return c;
}

/// ptxas gets this long per kernel unless the options say otherwise.
constexpr int64_t kDefaultPtxasTimeout = 600;

/// fa3CompileHopperModule without the error contract (compileChecked).
static Fa3KernelSet *compileHopperModule(MlirModule cmod,
                                         const Fa3HopperOptions *options,
                                         bool decode, bool pagedKv) {
  fa3RegisterAllPasses();
  ModuleOp module = unwrap(cmod);
  Fa3HopperOptions o = options ? *options : fa3HopperOptionsDefault();
  if (o.ptxasTimeoutSeconds < 0 || o.ptxasTimeoutSeconds > 86400) {
    emitError(module.getLoc())
        << "ptxasTimeoutSeconds must be 0 (default) to 86400, got "
        << o.ptxasTimeoutSeconds;
    return nullptr;
  }
  if (o.minSeqlenQ < 0 || o.minSeqlenQ > INT32_MAX) {
    emitError(module.getLoc())
        << "minSeqlenQ must be 0 (any length) to " << INT32_MAX << ", got "
        << o.minSeqlenQ;
    return nullptr;
  }
  if (o.transposeWarps != 0 && o.transposeWarps != 3 && o.transposeWarps != 4) {
    emitError(module.getLoc())
        << "transposeWarps must be 0 (the table), 3 or 4, got " << o.transposeWarps;
    return nullptr;
  }
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  fa3::HopperPipelineOptions po = pipelineOptions(o);
  po.config.decode = decode; // a spec's variants, not tuning options
  po.config.pagedKv = pagedKv;
  fa3::addHopperPipeline(pm, po);
  if (failed(pm.run(module)))
    return nullptr;

  auto set = std::make_unique<Fa3KernelSet>();
  llvm::StringMap<size_t> byModule; // gpu.module name -> kernel index
  for (auto gm : module.getOps<gpu::GPUModuleOp>())
    for (auto fn : gm.getOps<LLVM::LLVMFuncOp>())
      if (auto facts = fn->getAttrOfType<DictionaryAttr>("attn.launch")) {
        byModule[gm.getName()] = set->kernels.size();
        set->kernels.push_back({fn.getName().str(), "", "", factsText(facts)});
      }
  if (set->kernels.empty()) {
    emitError(module.getLoc()) << "no attn.flash_attention to compile";
    return nullptr;
  }
  PassManager isa(module.getContext(), ModuleOp::getOperationName());
  fa3::addHopperBinaryStep(isa, fa3::BinaryFormat::Isa);
  if (failed(isa.run(module)))
    return nullptr;
  for (auto bin : module.getOps<gpu::BinaryOp>()) {
    auto it = byModule.find(bin.getName());
    if (it == byModule.end() || bin.getObjects().size() != 1)
      continue;
    auto obj = cast<gpu::ObjectAttr>(bin.getObjects()[0]);
    set->kernels[it->second].ptx = obj.getObject().getValue().str();
  }
  if (!o.emitCubin)
    return set.release();
  std::string ptxas = fa3::findPtxas(o.toolkit ? o.toolkit : "");
  if (ptxas.empty()) {
    emitError(module.getLoc())
        << "no ptxas found (toolkit: "
        << (o.toolkit ? std::string(o.toolkit)
                      : "$CUDA_HOME, $CUDA_PATH, /usr/local/cuda or PATH")
        << "); compile with emitCubin = false for PTX only";
    return nullptr;
  }
  unsigned timeout = o.ptxasTimeoutSeconds ? o.ptxasTimeoutSeconds
                                           : kDefaultPtxasTimeout;
  std::string chip = pipelineOptions(o).chip;
  for (auto &k : set->kernels) {
    std::string error;
    if (!fa3::assembleCubin(ptxas, k.ptx, chip, timeout, k.cubin, error)) {
      emitError(module.getLoc()) << "kernel " << k.name << ": " << error;
      return nullptr;
    }
  }
  return set.release();
}

/// fa3_<fwd|bwd>_d<D>[v<Dv>]_<dtype>[_causal][_w<L>_<R>][_softcap][_varlen]
/// [_paged][_decode][_det]:
/// the name a spec without one gets (an unbounded side of a window is
/// "inf"; v<Dv> where the value head dim differs).
static std::string variantName(const Fa3AttentionSpec &s, const std::string &et) {
  std::string n = (s.backward ? "fa3_bwd_d" : "fa3_fwd_d") +
                  std::to_string(s.headDim);
  if (s.headDimV != 0 && s.headDimV != s.headDim)
    n += "v" + std::to_string(s.headDimV);
  n += "_" + et;
  if (s.causal)
    n += "_causal";
  auto side = [](int64_t w) { return w < 0 ? std::string("inf") : std::to_string(w); };
  if (s.windowLeft >= 0 || s.windowRight >= 0)
    n += "_w" + side(s.windowLeft) + "_" + side(s.windowRight);
  if (s.softcap > 0)
    n += "_softcap";
  if (s.varlen)
    n += "_varlen";
  if (s.pagedKv)
    n += "_paged";
  if (s.decode)
    n += "_decode";
  if (s.deterministic)
    n += "_det";
  return n;
}

/// `s` into buf (NUL-terminated, truncated to size); returns its length.
static size_t copyOut(const std::string &s, char *buf, size_t size) {
  if (buf && size) {
    size_t k = std::min(size - 1, s.size());
    std::memcpy(buf, s.data(), k);
    buf[k] = 0;
  }
  return s.size();
}

size_t fa3FindPtxas(const char *toolkit, char *buf, size_t size) {
  return copyOut(fa3::findPtxas(toolkit ? toolkit : ""), buf, size);
}

/// The kernel base name of a spec: its own, or the derived one.
static std::string specName(const Fa3AttentionSpec &s) {
  return s.name ? s.name : variantName(s, s.dtype ? s.dtype : "bf16");
}

size_t fa3AttentionSpecName(const Fa3AttentionSpec *spec, char *buf,
                            size_t size) {
  clearLastError();
  if (!spec) {
    misuse(__func__, "the spec is NULL");
    return copyOut("", buf, size);
  }
  return copyOut(specName(*spec), buf, size);
}

/// Never destroyed, like the registry of logs (Registration.cpp).
static LiveSet<Fa3KernelSet> &liveSets() {
  static auto *sets = new LiveSet<Fa3KernelSet>;
  return *sets;
}

/// Whether `set` may be used; sets the last error if not.
static bool checkSet(const char *fn, const Fa3KernelSet *set) {
  if (!set) {
    misuse(fn, "the kernel set is NULL");
    return false;
  }
  if (!liveSets().contains(set)) {
    misuse(fn, "not a live Fa3KernelSet (destroyed already?)");
    return false;
  }
  return true;
}

/// compileHopperModule under the error contract: `fn` names the entry point
/// in the last error, and the set is registered as live.
static Fa3KernelSet *compileChecked(const char *fn, ModuleOp module,
                                    const Fa3HopperOptions *options,
                                    bool decode = false, bool pagedKv = false) {
  FirstError firstError(module.getContext());
  // The passes assume verified input; IR built through the C API may not be.
  Fa3KernelSet *set =
      succeeded(verify(module))
          ? compileHopperModule(wrap(module), options, decode, pagedKv)
          : nullptr;
  if (!set) {
    firstError.failed(fn);
    return nullptr;
  }
  liveSets().add(set);
  return set;
}

Fa3KernelSet *fa3CompileHopperModule(MlirModule module,
                                     const Fa3HopperOptions *options) {
  clearLastError();
  if (mlirModuleIsNull(module)) {
    misuse(__func__, "the module is null");
    return nullptr;
  }
  return compileChecked(__func__, unwrap(module), options);
}

/// A spec's name becomes a symbol and file names (<name>_kernel.cubin):
/// 200 keeps those under the usual 255-byte file name limit.
constexpr size_t kMaxSpecName = 200;
/// The attn.flash_attention verifier's bounds (AttnOps.cpp: they keep the
/// f32 constants scale * log2 e, scale / softcap, softcap * log2 e finite),
/// checked here too so that the message names the spec's field.
constexpr double kMaxScale = 1e30;
constexpr double kMinSoftcap = 1e-6, kMaxSoftcap = 1e30;

/// Why `s` cannot be compiled, naming the field and its range; "" if it can.
/// (The IR is built from these values, so they are checked before it is.)
static std::string checkSpec(const Fa3AttentionSpec &s) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (s.name) {
    size_t n = strnlen(s.name, kMaxSpecName + 1);
    StringRef name(s.name, n);
    bool ident = n <= kMaxSpecName && fa3::isCIdentifier(name);
    if (!ident) {
      os << "name: \"";
      llvm::printEscapedString(name.take_front(64), os);
      os << (n > 64 ? "...\"" : "\"") << " is not a C identifier (1 to "
         << kMaxSpecName
         << " letters, digits and '_', not starting with a digit)";
      return why;
    }
  }
  const bool fp8 = s.dtype && strcmp(s.dtype, "e4m3") == 0;
  if (s.dtype && strcmp(s.dtype, "bf16") != 0 && strcmp(s.dtype, "f16") != 0 &&
      !fp8) {
    os << "dtype: \"";
    llvm::printEscapedString(StringRef(s.dtype, strnlen(s.dtype, 64)), os);
    os << "\" is not supported (bf16, f16 or e4m3)";
  } else if (fp8 && s.decode && s.headDim > 128) {
    os << "headDim: " << s.headDim
       << " in the FP8 decoding kernel (dtype e4m3 with decode takes head "
          "dim 64 or 128)";
  } else if (fp8 && (s.backward || s.varlen)) {
    os << "dtype: e4m3 with " << (s.backward ? "backward" : "varlen")
       << " (the FP8 kernels are the fixed-length forward and the decoding "
          "kernel)";
  } else if (fp8 && ((s.headDim != 64 && s.headDim != 128 &&
                      s.headDim != 256) ||
                     (s.headDimV != 0 && s.headDimV != s.headDim))) {
    os << "headDim: " << s.headDim;
    if (s.headDimV != 0 && s.headDimV != s.headDim)
      os << " with headDimV " << s.headDimV;
    os << " in FP8 (dtype e4m3 takes head dim 64, 128 or 256, headDimV 0 or "
          "equal)";
  } else if (!fa3::hopper::isSupportedHeadDim(s.headDim)) {
    os << "headDim: unsupported head dim " << s.headDim
       << " (the Hopper kernel takes " << fa3::hopper::headDimsText() << ")";
  } else if (s.headDimV != 0 && !fa3::hopper::isSupportedHeadDim(s.headDimV)) {
    os << "headDimV: unsupported value head dim " << s.headDimV
       << " (0 = headDim, or " << fa3::hopper::headDimsText() << ")";
  } else if (s.windowLeft < -1 || s.windowLeft > INT32_MAX) {
    os << "windowLeft: " << s.windowLeft
       << " is out of range (-1 = unbounded, or 0 to " << INT32_MAX << ")";
  } else if (s.windowRight < -1 || s.windowRight > INT32_MAX) {
    os << "windowRight: " << s.windowRight
       << " is out of range (-1 = unbounded, or 0 to " << INT32_MAX << ")";
  } else if (s.causal && s.windowRight > 0) {
    os << "windowRight: " << s.windowRight
       << " with causal (causal attention has windowRight 0; give 0 or -1)";
  } else if (s.softcap != 0.0f &&
             !(s.softcap >= kMinSoftcap && s.softcap <= kMaxSoftcap)) {
    os << "softcap: " << llvm::format("%g", s.softcap)
       << " is out of range (0 = off, or 1e-6 to 1e30)";
  } else if (s.hasScale && !(s.scale > 0 && s.scale <= kMaxScale)) {
    os << "scale: " << llvm::format("%g", s.scale)
       << " is out of range (> 0 and at most 1e30; hasScale false: "
          "1/sqrt(headDim))";
  } else if (s.backward && s.varlen) {
    os << "backward: not with varlen (the Hopper backward takes "
          "fixed-length batches)";
  } else if (s.decode && (s.backward || s.varlen)) {
    os << "decode: not with " << (s.backward ? "backward" : "varlen")
       << " (the decoding kernel is a fixed-length forward)";
  } else if (s.pagedKv && !s.varlen) {
    os << "pagedKv: only with varlen (a packed batch's page table; the "
          "decoding kernel, decode, takes one by itself)";
  } else if (s.deterministic && !s.backward) {
    os << "deterministic: only with backward (the forward kernels sum in a "
          "fixed order already; the backward's dq is what needs it)";
  }
  // The backward's own limits (head dims, masks, softcap) are its
  // configuration's to name: attn-hopper-config reports them.
  return why;
}

/// The IR of a checked spec, built op by op (no IR text: nothing the caller
/// wrote can change its structure):
///   func.func @<name>(q, k: memref<?x1x?xDxT>, v, o: memref<?x1x?xDvxT>,
///                     lse: memref<?x1x?xf32>)
///     attn.flash_attention ins(q, k, v) outs(o, lse) <attributes>
/// or, backward, with dO, dq, dk, dv after lse:
///     attn.flash_attention_grad ins(q, k, v, o, dO, lse) outs(dq, dk, dv)
/// or, varlen, the packed form (q, k: memref<?x1xDxT>, ..., lse:
/// memref<1x?xf32>, cu_seqlens_q/k: memref<?xi32>; seqused_k is the
/// kernel's to read or not at launch):
///     attn.flash_attention_varlen ins(q, k, v) seqlens(cuq, cuk) outs(o, lse)
static OwningOpRef<ModuleOp> buildSpecModule(MLIRContext *ctx,
                                             const Fa3AttentionSpec &s,
                                             StringRef name) {
  ctx->getOrLoadDialect<func::FuncDialect>();
  ctx->getOrLoadDialect<fa3::attn::AttnDialect>();
  OpBuilder b(ctx);
  Location loc = NameLoc::get(b.getStringAttr(name));
  // e4m3: q, k, v f8E4M3FN, o bf16 (FP8 attention writes bf16)
  const bool fp8 = s.dtype && StringRef(s.dtype) == "e4m3";
  Type ot = s.dtype && StringRef(s.dtype) == "f16" ? b.getF16Type()
                                                   : b.getBF16Type();
  Type et = fp8 ? Type(b.getType<Float8E4M3FNType>()) : ot;
  // Heads are nominal here (the kernel takes B, H and S at launch).
  int64_t dyn = ShapedType::kDynamic;
  const int64_t dv = s.headDimV ? s.headDimV : s.headDim;
  auto t = s.varlen ? MemRefType::get({dyn, 1, s.headDim}, et)
                    : MemRefType::get({dyn, 1, dyn, s.headDim}, et);
  auto tv = s.varlen ? MemRefType::get({dyn, 1, dv}, et)
                     : MemRefType::get({dyn, 1, dyn, dv}, et);
  auto to = s.varlen ? MemRefType::get({dyn, 1, dv}, ot)
                     : MemRefType::get({dyn, 1, dyn, dv}, ot);
  auto lseType = s.varlen ? MemRefType::get({1, dyn}, b.getF32Type())
                          : MemRefType::get({dyn, 1, dyn}, b.getF32Type());
  auto seqlens = MemRefType::get({dyn}, b.getI32Type());
  SmallVector<Type> args = {t, t, tv, to, lseType};
  if (s.varlen)
    args.append({seqlens, seqlens});
  if (s.backward) // q, k, v, o, lse, then dO, dq, dk, dv
    args.append({tv, t, t, tv});
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(args, {}));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);
  // Attributes at their defaults are left out, as the parser would.
  FloatAttr scale = s.hasScale ? b.getF32FloatAttr(s.scale) : FloatAttr();
  UnitAttr causal = s.causal ? b.getUnitAttr() : UnitAttr();
  DenseI64ArrayAttr window =
      s.windowLeft != -1 || s.windowRight != -1
          ? b.getDenseI64ArrayAttr({s.windowLeft, s.windowRight})
          : DenseI64ArrayAttr();
  FloatAttr softcap =
      s.softcap != 0.0f ? b.getF32FloatAttr(s.softcap) : FloatAttr();
  SmallVector<Value> outs = {body->getArgument(3), body->getArgument(4)};
  if (s.backward) {
    Value gradOuts[] = {body->getArgument(6), body->getArgument(7),
                        body->getArgument(8)};
    fa3::attn::FlashAttentionGradOp::create(
        b, loc, TypeRange{}, body->getArgument(0), body->getArgument(1),
        body->getArgument(2), body->getArgument(3), body->getArgument(5),
        body->getArgument(4), gradOuts, scale, causal, window, softcap,
        s.deterministic ? b.getUnitAttr() : UnitAttr());
  } else if (s.varlen)
    fa3::attn::FlashAttentionVarlenOp::create(
        b, loc, TypeRange{}, body->getArgument(0), body->getArgument(1),
        body->getArgument(2), body->getArgument(5), body->getArgument(6),
        Value(), outs, scale, causal, window, softcap);
  else
    fa3::attn::FlashAttentionOp::create(
        b, loc, TypeRange{}, body->getArgument(0), body->getArgument(1),
        body->getArgument(2), ValueRange{}, outs, scale, causal, window,
        softcap);
  func::ReturnOp::create(b, loc);
  return module;
}

Fa3KernelSet *fa3CompileHopperSpec(MlirContext ctx, const Fa3AttentionSpec *spec,
                                   const Fa3HopperOptions *options) {
  const char *fn = __func__;
  clearLastError();
  if (mlirContextIsNull(ctx)) {
    misuse(fn, "the context is null");
    return nullptr;
  }
  MLIRContext *c = unwrap(ctx);
  Fa3AttentionSpec s = spec ? *spec : fa3AttentionSpecDefault();
  std::string why = checkSpec(s);
  if (!why.empty()) {
    misuseAt(fn, UnknownLoc::get(c), "invalid attention spec: " + why);
    return nullptr;
  }
  OwningOpRef<ModuleOp> module = buildSpecModule(c, s, specName(s));
  // The caller wrote no IR here: a diagnostic's dump of the generated op
  // ("see current operation", dozens of lines) would only bury the reason.
  bool printOp = c->shouldPrintOpOnDiagnostic();
  c->printOpOnDiagnostic(false);
  Fa3KernelSet *set = compileChecked(fn, *module, options, s.decode, s.pagedKv);
  // The table's kernel for long sequences beside it, unless the options
  // fixed the tile (rows, keys, ring, Q buffers: a ring that fits 128 rows
  // may not fit 192) or the length themselves.
  Fa3HopperOptions o = options ? *options : fa3HopperOptionsDefault();
  const int64_t longFrom = fa3::hopper::longSequenceFrom(
      s.dtype ? s.dtype : "bf16", s.headDim, s.headDimV ? s.headDimV : s.headDim,
      s.windowLeft, s.causal ? 0 : s.windowRight, s.decode);
  const bool tableTile = o.blockM == 0 && o.blockN == 0 && o.stages == 0 &&
                         o.qBuffers == 0 && o.minSeqlenQ == 0;
  // (not for a paged packed batch: its one kernel runs one CTA per tile)
  if (set && !s.backward && !s.pagedKv && longFrom > 0 && tableTile) {
    o.minSeqlenQ = longFrom;
    OwningOpRef<ModuleOp> longModule =
        buildSpecModule(c, s, specName(s) + "_long");
    Fa3KernelSet *longSet = compileChecked(fn, *longModule, &o, s.decode);
    // (the sets are dropped here, not through fa3KernelSetDestroy, which
    // would clear the long compile's error)
    if (longSet) {
      for (auto &k : longSet->kernels)
        set->kernels.push_back(std::move(k));
      liveSets().remove(longSet);
      delete longSet;
    } else {
      liveSets().remove(set);
      delete set;
      set = nullptr;
    }
  }
  c->printOpOnDiagnostic(printOp);
  return set;
}

size_t fa3KernelSetSize(const Fa3KernelSet *set) {
  clearLastError();
  return checkSet(__func__, set) ? set->kernels.size() : 0;
}

Fa3KernelBinary fa3KernelSetGet(const Fa3KernelSet *set, size_t index) {
  clearLastError();
  Fa3KernelBinary b = {};
  if (!checkSet(__func__, set))
    return b;
  if (index >= set->kernels.size()) {
    setLastError(__func__, "index " + llvm::Twine(index) +
                               " is out of range (size " +
                               llvm::Twine(set->kernels.size()) + ")");
    return b;
  }
  const auto &k = set->kernels[index];
  b.name = k.name.c_str();
  b.ptx = k.ptx.c_str();
  b.ptxSize = k.ptx.size();
  b.cubin = k.cubin.data();
  b.cubinSize = k.cubin.size();
  b.facts = k.facts.c_str();
  return b;
}

void fa3KernelSetDestroy(Fa3KernelSet *set) {
  clearLastError();
  if (!set)
    return;
  if (!liveSets().remove(set))
    return misuse(__func__, "not a live Fa3KernelSet (destroyed twice?)");
  delete set;
}
