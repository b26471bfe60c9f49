//===- Pipelines.cpp - named pass pipelines -------------------------------===//
//
// One flag per job, so users do not have to know the pass order:
//   attn-cpu-reference-pipeline  tensor/memref op -> reference loops -> LLVM
//   attn-cpu-tiled-pipeline      tensor/memref op -> attn-tile -> loops -> LLVM
//   attn-hopper-pipeline         tensor/memref op -> attn-tile ->
//                                convert-attn-to-hopper -> NVVM -> PTX/cubin
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace {
// Tensor programs are bufferized first; memref programs pass through.
constexpr const char *kBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},";

// Host (CPU) lowering of loops over memrefs down to the LLVM dialect.
constexpr const char *kCpuToLLVM =
    "convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,"
    "lower-affine,convert-math-to-libm,convert-math-to-llvm,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts";

void addPipeline(OpPassManager &pm, const std::string &text) {
  std::string err;
  llvm::raw_string_ostream os(err);
  if (failed(parsePassPipeline(text, pm, os)))
    llvm::report_fatal_error(llvm::Twine("internal pipeline is malformed: ") +
                             err);
}

struct TiledPipelineOptions
    : public PassPipelineOptions<TiledPipelineOptions> {
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Rows of Q per tile (0: default)"),
                         llvm::cl::init(0)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("Rows of K/V per tile (0: default)"),
                         llvm::cl::init(0)};
  Option<bool> countBlocks{
      *this, "count-blocks",
      llvm::cl::desc("Count visited/masked tiles in @attn_tiles_* globals"),
      llvm::cl::init(false)};
};
struct HopperPipelineOptions
    : public PassPipelineOptions<HopperPipelineOptions> {
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Rows of Q per tile: 128 (two consumer "
                                        "warpgroups) or 192 (three, no "
                                        "ping-pong); 0: per head dim (192 "
                                        "for 64 with a full mask, else 128)"),
                         llvm::cl::init(0)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("Rows of K/V per tile (0: per head dim: "
                                        "128 up to head dim 128, 64 above)"),
                         llvm::cl::init(0)};
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("Depth of the K/V shared-memory ring "
                                        "(0: per head dim: 4 for 64 with "
                                        "128-row tiles, else 2)"),
                         llvm::cl::init(0)};
  Option<bool> pingpong{*this, "pingpong",
                        llvm::cl::desc("Consumer warpgroups take turns issuing "
                                       "their GEMMs (named barriers)"),
                        llvm::cl::init(true)};
  Option<std::string> persistent{
      *this, "persistent",
      llvm::cl::desc("CTAs loop over tiles: auto (where measured faster), on, "
                     "off"),
      llvm::cl::init("auto")};
  Option<bool> tmaStore{*this, "tma-store",
                        llvm::cl::desc("Stage O through shared memory and write "
                                       "it by TMA (false: 4-byte stores)"),
                        llvm::cl::init(true)};
  Option<int64_t> qBuffers{
      *this, "q-buffers",
      llvm::cl::desc("Q tiles in shared memory (0: 2 for persistent CTAs "
                     "where they fit, else 1)"),
      llvm::cl::init(0)};
  Option<std::string> lazyRescale{
      *this, "lazy-rescale",
      llvm::cl::desc("O *= alpha only in warpgroups where a row raised its "
                     "max: auto (head dim 128 and 256, where measured "
                     "faster), on, off"),
      llvm::cl::init("auto")};
  Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("With lazy rescaling, raise a row's max only when a "
                     "block exceeds it by more than this (log2 units, 0 to "
                     "15; 0: exact max)"),
      llvm::cl::init(8.0)};
  Option<std::string> kvMulticast{
      *this, "kv-multicast",
      llvm::cl::desc("2-CTA clusters sharing each K/V tile by TMA multicast "
                     "(full mask, head dim 128 and 256): auto (persistent "
                     "kernels, where measured faster), on, off"),
      llvm::cl::init("auto")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu-module-to-binary embeds: isa (PTX text), bin "
                     "(cubin, needs ptxas), fatbin, or none (stop at the "
                     "LLVM/NVVM dialect)"),
      llvm::cl::init("bin")};
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("Target GPU (wgmma and setmaxnreg "
                                          "need the 'a' variant)"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX ISA version feature"),
                               llvm::cl::init("+ptx80")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit holding bin/ptxas (default: $CUDA_HOME, "
                     "$CUDA_PATH, else /usr/local/cuda)"),
      llvm::cl::init("")};
};

/// The CUDA toolkit gpu-module-to-binary should take ptxas from.
std::string defaultToolkit() {
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v)
      return v;
  if (llvm::sys::fs::exists("/usr/local/cuda/bin/ptxas"))
    return "/usr/local/cuda";
  return "";
}

/// A pass-option value that parses back to the same double.
std::string formatDouble(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.17g", v);
  return s;
}

// Lowering of the generated gpu.module to the NVVM/LLVM dialects.
constexpr const char *kDeviceToLLVM =
    "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=32},"
    "convert-arith-to-llvm{index-bitwidth=32},"
    "convert-math-to-llvm,convert-vector-to-llvm,convert-nvvm-to-llvm,"
    "canonicalize,cse,reconcile-unrealized-casts)";
} // namespace

void fa3::attn::addHopperPipeline(OpPassManager &pm,
                                  const HopperPipelineConfig &c) {
  std::string p = std::string(kBufferize) + "attn-tile{block-m=" +
                  std::to_string(c.blockM) + " block-n=" +
                  std::to_string(c.blockN) + "}," +
                  "convert-attn-to-hopper{stages=" + std::to_string(c.stages) +
                  " pingpong=" + (c.pingpong ? "true" : "false") +
                  " persistent=" + c.persistent +
                  " tma-store=" + (c.tmaStore ? "true" : "false") +
                  " q-buffers=" + std::to_string(c.qBuffers) +
                  " lazy-rescale=" + c.lazyRescale +
                  " rescale-threshold=" + formatDouble(c.rescaleThreshold) +
                  " kv-multicast=" + c.kvMulticast +
                  "},nvvm-attach-target{chip=" + c.chip +
                  " features=" + c.features + " O=3}," + kDeviceToLLVM;
  addPipeline(pm, p);
  if (c.format != "none")
    addHopperBinaryStep(pm, c.format, c.toolkit);
}

std::string fa3::attn::findPtxas(StringRef toolkit) {
  std::string tk = toolkit.empty() ? defaultToolkit() : toolkit.str();
  if (!tk.empty()) {
    std::string path = tk + "/bin/ptxas";
    return llvm::sys::fs::can_execute(path) ? path : "";
  }
  if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName("ptxas"))
    return *p;
  return "";
}

void fa3::attn::addHopperBinaryStep(OpPassManager &pm, StringRef format,
                                    StringRef toolkit) {
  std::string tk = toolkit.empty() ? defaultToolkit() : toolkit.str();
  addPipeline(pm, "gpu-module-to-binary{format=" + format.str() +
                      (tk.empty() ? "" : " toolkit=" + tk) + "}");
}

void fa3::attn::registerAttnPipelines() {
  PassPipelineRegistration<HopperPipelineOptions>(
      "attn-hopper-pipeline",
      "Compile attn.flash_attention to a warp-specialised sm_90a kernel "
      "(TMA + mbarrier pipeline, wgmma): bufferize, attn-tile, "
      "convert-attn-to-hopper, NVVM lowering, gpu-module-to-binary",
      [](OpPassManager &pm, const HopperPipelineOptions &o) {
        HopperPipelineConfig c;
        c.blockM = o.blockM;
        c.blockN = o.blockN;
        c.stages = o.stages;
        c.pingpong = o.pingpong;
        c.persistent = o.persistent;
        c.tmaStore = o.tmaStore;
        c.qBuffers = o.qBuffers;
        c.lazyRescale = o.lazyRescale;
        c.rescaleThreshold = o.rescaleThreshold;
        c.kvMulticast = o.kvMulticast;
        c.format = o.format;
        c.chip = o.chip;
        c.features = o.features;
        c.toolkit = o.toolkit;
        addHopperPipeline(pm, c);
      });
  PassPipelineRegistration<>(
      "attn-cpu-reference-pipeline",
      "Bufferize, lower attn.flash_attention to reference loops, then to the "
      "LLVM dialect for the CPU (the numerical oracle)",
      [](OpPassManager &pm) {
        addPipeline(pm, std::string(kBufferize) + "attn-lower-to-loops," +
                            kCpuToLLVM);
      });
  PassPipelineRegistration<TiledPipelineOptions>(
      "attn-cpu-tiled-pipeline",
      "Bufferize, tile attn.flash_attention into the FlashAttention "
      "algorithm (attn-tile), expand the tiles to loops and lower to the "
      "LLVM dialect for the CPU",
      [](OpPassManager &pm, const TiledPipelineOptions &opts) {
        std::string tile = "attn-tile{block-m=" + std::to_string(opts.blockM) +
                           " block-n=" + std::to_string(opts.blockN) + "},";
        std::string expand = std::string("attn-lower-tiles-to-loops{count-blocks=") +
                             (opts.countBlocks ? "true" : "false") + "},";
        addPipeline(pm, std::string(kBufferize) + tile + expand + kCpuToLLVM);
      });
}
