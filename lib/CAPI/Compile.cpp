//===- Compile.cpp - one-call compilation to Hopper kernels ---------------===//
//
// Runs attn-hopper-pipeline up to the NVVM/LLVM dialect, reads the launch
// facts off each kernel, then serialises the gpu.modules twice: once to PTX
// (format=isa, on a clone) and once to a cubin (format=bin, ptxas).
//
//===----------------------------------------------------------------------===//

#include "fa3-c/Compile.h"
#include "fa3-c/Registration.h"
#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

using namespace mlir;

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
  o.features = "+ptx80";
  o.toolkit = NULL;
  o.emitCubin = true;
  o.qBuffers = 0;
  o.lazyRescale = 0;
  o.rescaleThreshold = 8.0;
  o.kvMulticast = 0;
  o.blockM = 0;
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
  return s;
}

/// The launch facts as "key value" lines (format: docs/runtime.md).
static std::string factsText(DictionaryAttr d) {
  std::string out = "fa3-kernel-facts 1\n";
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

/// The pipeline's auto|on|off for a C API tri-state (1 on, -1 off, 0 auto).
static const char *autoOnOff(int v) { return v > 0 ? "on" : v < 0 ? "off" : "auto"; }

Fa3KernelSet *fa3CompileHopperModule(MlirModule cmod,
                                     const Fa3HopperOptions *options) {
  fa3RegisterAllPasses();
  ModuleOp module = unwrap(cmod);
  Fa3HopperOptions o = options ? *options : fa3HopperOptionsDefault();
  PassManager pm(module.getContext());
  fa3::attn::HopperPipelineConfig c;
  c.blockM = o.blockM;
  c.blockN = o.blockN;
  c.stages = o.stages;
  c.pingpong = o.pingpong;
  c.persistent = autoOnOff(o.persistent);
  c.tmaStore = o.tmaStore;
  c.qBuffers = o.qBuffers;
  c.lazyRescale = autoOnOff(o.lazyRescale);
  c.rescaleThreshold = o.rescaleThreshold;
  c.kvMulticast = autoOnOff(o.kvMulticast);
  c.format = "none";
  if (o.chip)
    c.chip = o.chip;
  if (o.features)
    c.features = o.features;
  fa3::attn::addHopperPipeline(pm, c);
  if (failed(pm.run(module)))
    return nullptr;

  auto set = std::make_unique<Fa3KernelSet>();
  for (auto gm : module.getOps<gpu::GPUModuleOp>())
    for (auto fn : gm.getOps<LLVM::LLVMFuncOp>())
      if (auto facts = fn->getAttrOfType<DictionaryAttr>("attn.launch"))
        set->kernels.push_back({fn.getName().str(), "", "", factsText(facts)});
  if (set->kernels.empty()) {
    emitError(module.getLoc()) << "no attn.flash_attention to compile";
    return nullptr;
  }
  // PTX from a clone, the cubin from the module itself.
  OwningOpRef<ModuleOp> clone = module.clone();
  PassManager isa(module.getContext());
  fa3::attn::addHopperBinaryStep(isa, "isa");
  if (failed(isa.run(*clone)))
    return nullptr;
  if (o.emitCubin) {
    PassManager bin(module.getContext());
    fa3::attn::addHopperBinaryStep(bin, "bin", o.toolkit ? o.toolkit : "");
    if (failed(bin.run(module)))
      return nullptr;
  }
  auto collect = [&](ModuleOp m, bool ptx) {
    size_t i = 0;
    for (auto bin : m.getOps<gpu::BinaryOp>())
      for (Attribute a : bin.getObjects()) {
        auto obj = cast<gpu::ObjectAttr>(a);
        if (i < set->kernels.size()) {
          std::string bytes = obj.getObject().getValue().str();
          (ptx ? set->kernels[i].ptx : set->kernels[i].cubin) = bytes;
        }
        ++i;
      }
  };
  collect(*clone, true);
  if (o.emitCubin)
    collect(module, false);
  return set.release();
}

/// fa3_fwd_d<D>_<dtype>[_causal][_w<L>_<R>][_softcap]: the name a spec
/// without one gets (an unbounded side of a window is "inf").
static std::string variantName(const Fa3AttentionSpec &s, const std::string &et) {
  std::string n = "fa3_fwd_d" + std::to_string(s.headDim) + "_" + et;
  if (s.causal)
    n += "_causal";
  auto side = [](int64_t w) { return w < 0 ? std::string("inf") : std::to_string(w); };
  if (s.windowLeft >= 0 || s.windowRight >= 0)
    n += "_w" + side(s.windowLeft) + "_" + side(s.windowRight);
  if (s.softcap > 0)
    n += "_softcap";
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
  return copyOut(fa3::attn::findPtxas(toolkit ? toolkit : ""), buf, size);
}

/// The kernel base name of a spec: its own, or the derived one.
static std::string specName(const Fa3AttentionSpec &s) {
  return s.name ? s.name : variantName(s, s.dtype ? s.dtype : "bf16");
}

size_t fa3AttentionSpecName(const Fa3AttentionSpec *spec, char *buf,
                            size_t size) {
  return copyOut(specName(*spec), buf, size);
}

Fa3KernelSet *fa3CompileHopperSpec(MlirContext ctx, const Fa3AttentionSpec *spec,
                                   const Fa3HopperOptions *options) {
  Fa3AttentionSpec s = spec ? *spec : fa3AttentionSpecDefault();
  std::string et = s.dtype ? s.dtype : "bf16";
  std::string name = specName(s);
  // Heads are nominal here (the kernel takes B, H and S at launch).
  std::string t = llvm::formatv("memref<?x1x?x{0}x{1}>", s.headDim, et).str();
  std::string attrs;
  if (s.hasScale)
    attrs += llvm::formatv(" scale({0:e})", s.scale).str();
  if (s.causal)
    attrs += " causal";
  if (s.windowLeft != -1 || s.windowRight != -1)
    attrs += llvm::formatv(" window({0}, {1})", s.windowLeft, s.windowRight).str();
  if (s.softcap != 0.0f)
    attrs += llvm::formatv(" softcap({0:e})", s.softcap).str();
  std::string text = llvm::formatv(
      "func.func @{0}(%q: {1}, %k: {1}, %v: {1}, %o: {1}, %lse: memref<?x1x?xf32>) {{\n"
      "  attn.flash_attention ins(%q, %k, %v : {1}, {1}, {1}) outs(%o, %lse : {1}, "
      "memref<?x1x?xf32>){2}\n  return\n}\n",
      name, t, attrs);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, unwrap(ctx));
  if (!module)
    return nullptr;
  // The caller wrote no IR here: a diagnostic's dump of the generated op
  // ("see current operation", dozens of lines) would only bury the reason.
  MLIRContext *c = unwrap(ctx);
  bool printOp = c->shouldPrintOpOnDiagnostic();
  c->printOpOnDiagnostic(false);
  Fa3KernelSet *set = fa3CompileHopperModule(wrap(*module), options);
  c->printOpOnDiagnostic(printOp);
  return set;
}

size_t fa3KernelSetSize(const Fa3KernelSet *set) { return set->kernels.size(); }

Fa3KernelBinary fa3KernelSetGet(const Fa3KernelSet *set, size_t index) {
  const auto &k = set->kernels.at(index);
  Fa3KernelBinary b;
  b.name = k.name.c_str();
  b.ptx = k.ptx.c_str();
  b.ptxSize = k.ptx.size();
  b.cubin = k.cubin.data();
  b.cubinSize = k.cubin.size();
  b.facts = k.facts.c_str();
  return b;
}

void fa3KernelSetDestroy(Fa3KernelSet *set) { delete set; }
