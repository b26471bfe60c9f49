//===- Pipelines.cpp - named pass pipelines -------------------------------===//
//
// One flag per job, so users do not have to know the pass order:
//   attn-cpu-reference-pipeline  tensor/memref op -> reference loops -> LLVM
//   attn-cpu-tiled-pipeline      tensor/memref op -> attn-tile -> loops -> LLVM
//   attn-hopper-pipeline         tensor/memref op -> attn-hopper-config ->
//                                attn-tile -> convert-attn-to-hopper ->
//                                convert-hopper-to-nvvm -> NVVM ->
//                                attn-kernel-params-by-value -> PTX/cubin
//
// Passes that take options are created from their option structs. The
// fixed stretches (bufferization, the upstream lowerings to LLVM) are
// constant pipeline text: no value from a user ever enters it.
//
//===----------------------------------------------------------------------===//

#include "fa3/Pipelines/Pipelines.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"
#include "fa3/Pipelines/Ptxas.h"

#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
// Tensor programs are bufferized first; memref programs pass through.
constexpr const char *kBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map}";

// Host (CPU) lowering of loops over memrefs down to the LLVM dialect.
// arith-expand turns bf16 conversions into integer code: the JIT would
// otherwise call __truncsfbf2, which libgcc before GCC 13 lacks on CPUs
// without AVX512-BF16.
constexpr const char *kCpuToLLVM =
    "convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,"
    "lower-affine,arith-expand{include-bf16=true},convert-math-to-libm,"
    "convert-math-to-llvm,finalize-memref-to-llvm,convert-arith-to-llvm,"
    "convert-cf-to-llvm,convert-func-to-llvm,convert-index-to-llvm,"
    "reconcile-unrealized-casts";

// Lowering of the generated gpu.module to the NVVM/LLVM dialects.
constexpr const char *kDeviceToLLVM =
    "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=32},"
    "convert-arith-to-llvm{index-bitwidth=32},"
    "convert-math-to-llvm,convert-vector-to-llvm,convert-nvvm-to-llvm,"
    "canonicalize,cse,reconcile-unrealized-casts)";

/// Appends constant pipeline text; it is part of this file, so a failure to
/// parse it is a bug here, not a user error.
void addFixed(OpPassManager &pm, StringRef text) {
  std::string err;
  llvm::raw_string_ostream os(err);
  if (failed(parsePassPipeline(text, pm, os)))
    llvm::report_fatal_error(llvm::Twine("fixed pipeline text is malformed: ") +
                             err);
}

/// A pass that reports why the pipeline it stands in for cannot run: option
/// values and the anchor are only known while the pipeline is built, and a
/// pipeline builder cannot fail, so the diagnostic comes when it runs.
struct PipelineErrorPass
    : public PassWrapper<PipelineErrorPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PipelineErrorPass)
  explicit PipelineErrorPass(std::string message)
      : message(std::move(message)) {}
  StringRef getArgument() const override { return "attn-pipeline-error"; }
  void runOnOperation() override {
    // At the location alone: a dump of the whole input would bury it.
    mlir::emitError(getOperation()->getLoc(), message);
    signalPassFailure();
  }
  std::string message;
};

/// True if `pm` runs on builtin.module; otherwise adds the error and false.
/// Our pipelines bufferize function boundaries and create gpu.modules, so
/// they need the module.
bool anchoredOnModule(OpPassManager &pm, StringRef pipeline) {
  StringRef anchor = pm.getOpAnchorName();
  if (anchor == ModuleOp::getOperationName())
    return true;
  pm.addPass(std::make_unique<PipelineErrorPass>(
      (pipeline + " runs on builtin.module (it bufferizes function "
                  "boundaries and creates modules), not on " +
       anchor)
          .str()));
  return false;
}

StringRef formatName(fa3::BinaryFormat f) {
  switch (f) {
  case fa3::BinaryFormat::Isa: return "isa";
  case fa3::BinaryFormat::Bin: return "bin";
  case fa3::BinaryFormat::Fatbin: return "fatbin";
  case fa3::BinaryFormat::None: return "none";
  }
  llvm_unreachable("unknown binary format");
}
} // namespace

std::string fa3::checkTarget(StringRef chip, StringRef features) {
  // The kernel uses wgmma and setmaxnreg: sm_90a only.
  if (chip != "sm_90a")
    return ("chip must be sm_90a (the kernel uses wgmma and setmaxnreg), "
            "got '" + chip + "'")
        .str();
  // The PTX ISA versions LLVM 22's NVPTX backend knows from 8.1 on (wgmma
  // and TMA need 8.0, the backward's vector reductions 8.1; there is no
  // 8.9); others were ignored with a warning or, below 8.0, aborted the
  // backend.
  static constexpr StringRef kVersions[] = {"+ptx81", "+ptx82", "+ptx83",
                                            "+ptx84", "+ptx85", "+ptx86",
                                            "+ptx87", "+ptx88", "+ptx90"};
  if (!llvm::is_contained(kVersions, features))
    return ("features must be one PTX ISA version from +ptx81 to +ptx88 or "
            "+ptx90 (wgmma and TMA need 8.0, the backward's vector "
            "reductions 8.1), got '" + features + "'")
        .str();
  return "";
}

void fa3::addHopperBinaryStep(OpPassManager &pm, BinaryFormat format,
                              StringRef toolkit) {
  GpuModuleToBinaryPassOptions o;
  o.compilationTarget = formatName(format).str();
  o.toolkitPath = toolkit.empty() ? defaultToolkit() : toolkit.str();
  pm.addPass(createGpuModuleToBinaryPass(o));
}

void fa3::addHopperPipeline(OpPassManager &pm, const HopperPipelineOptions &o) {
  if (!anchoredOnModule(pm, "attn-hopper-pipeline"))
    return;
  std::string why = checkTarget(o.chip, o.features);
  // gpu-module-to-binary reports a missing toolkit but does not fail.
  if (why.empty() && !o.toolkit.empty() && !llvm::sys::fs::is_directory(o.toolkit))
    why = "toolkit '" + o.toolkit + "' is not a directory";
  if (!why.empty()) {
    pm.addPass(std::make_unique<PipelineErrorPass>("attn-hopper-pipeline: " + why));
    return;
  }
  addFixed(pm, kBufferize);
  pm.addPass(createAttnHopperConfig(o.config));
  // Tiles by the recorded configuration, carrying it to the kernel pass.
  pm.addPass(attn::createAttnTile());
  pm.addPass(createConvertAttnToHopper());
  pm.addPass(hopper::createHopperWarpSpecialize());
  pm.addPass(hopper::createHopperWarpCopy());
  pm.addPass(hopper::createHopperCopyOffsets());
  pm.addPass(hopper::createHopperAsyncCopy());
  pm.addPass(hopper::createHopperProducerWarpTranspose());
  pm.addPass(hopper::createHopperOverlap());
  pm.addPass(hopper::createHopperPingPong());
  pm.addPass(createConvertHopperToNVVM());
  GpuNVVMAttachTargetOptions target;
  target.chip = o.chip;
  target.features = o.features;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  addFixed(pm, kDeviceToLLVM);
  pm.addNestedPass<gpu::GPUModuleOp>(createAttnKernelParamsByValue());
  if (o.format != BinaryFormat::None)
    addHopperBinaryStep(pm, o.format, o.toolkit);
}

void fa3::addCpuReferencePipeline(OpPassManager &pm) {
  if (!anchoredOnModule(pm, "attn-cpu-reference-pipeline"))
    return;
  addFixed(pm, kBufferize);
  pm.addPass(attn::createAttnLowerToLoops());
  addFixed(pm, kCpuToLLVM);
}

void fa3::addCpuTiledPipeline(OpPassManager &pm,
                              const attn::AttnTileOptions &tile,
                              bool countBlocks) {
  if (!anchoredOnModule(pm, "attn-cpu-tiled-pipeline"))
    return;
  addFixed(pm, kBufferize);
  pm.addPass(attn::createAttnTile(tile));
  attn::AttnLowerTilesToLoopsOptions expand;
  expand.countBlocks = countBlocks;
  pm.addPass(attn::createAttnLowerTilesToLoops(expand));
  addFixed(pm, kCpuToLLVM);
}

namespace {
/// auto | on | off, as in the pass options.
auto toggleValues() {
  return llvm::cl::values(
      clEnumValN(fa3::Toggle::Auto, "auto", "where measured faster"),
      clEnumValN(fa3::Toggle::On, "on", "always (where it applies)"),
      clEnumValN(fa3::Toggle::Off, "off", "never"));
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
  Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("Lazy rescaling of the online softmax, as the Hopper "
                     "kernel's: raise a row's max only when a block's "
                     "exceeds it by more than this (log2 units, 0 to 15; "
                     "0: exact)"),
      llvm::cl::init(0.0)};
};

struct HopperPipelineCLOptions
    : public PassPipelineOptions<HopperPipelineCLOptions> {
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Rows of Q per tile: 128 (two consumer "
                                        "warpgroups) or 192 (three, no "
                                        "ping-pong); 0: per head dim (192 "
                                        "for 64 with a full mask, else 128)"),
                         llvm::cl::init(0)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("Rows of K/V per tile (0: per head dim: "
                                        "128 up to head dim 128, 112 at 192 "
                                        "(96 with a mask), 64 at 256)"),
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
  Option<fa3::Toggle> persistent{
      *this, "persistent",
      llvm::cl::desc("CTAs loop over tiles: auto (where measured faster), on, "
                     "off"),
      llvm::cl::init(fa3::Toggle::Auto), toggleValues()};
  Option<bool> tmaStore{*this, "tma-store",
                        llvm::cl::desc("Stage O through shared memory and write "
                                       "it by TMA (false: 4-byte stores); the "
                                       "backward's dQ by bulk reductions "
                                       "(false: atomics)"),
                        llvm::cl::init(true)};
  Option<int64_t> qBuffers{
      *this, "q-buffers",
      llvm::cl::desc("Q tiles in shared memory (0: 2 for persistent CTAs "
                     "where they fit, else 1)"),
      llvm::cl::init(0)};
  Option<fa3::Toggle> lazyRescale{
      *this, "lazy-rescale",
      llvm::cl::desc("O *= alpha only in warpgroups where a row raised its "
                     "max: auto (head dim 128 and 256, where measured "
                     "faster), on, off"),
      llvm::cl::init(fa3::Toggle::Auto), toggleValues()};
  Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("With lazy rescaling, raise a row's max only when a "
                     "block exceeds it by more than this (log2 units, 0 to "
                     "15; 0: exact max)"),
      llvm::cl::init(8.0)};
  Option<fa3::Toggle> kvMulticast{
      *this, "kv-multicast",
      llvm::cl::desc("2-CTA clusters sharing each K/V tile by TMA multicast "
                     "(full mask, head dim 128 and 256): auto (persistent "
                     "kernels, where measured faster), on, off"),
      llvm::cl::init(fa3::Toggle::Auto), toggleValues()};
  Option<bool> decode{
      *this, "decode",
      llvm::cl::desc("The decoding kernel: split-KV and GQA packing (one CTA "
                     "per tile, O stored directly; fixed-length forward)"),
      llvm::cl::init(false)};
  Option<bool> pagedKv{
      *this, "paged-kv",
      llvm::cl::desc("A packed variable-length batch's kernel that also "
                     "reads k and v through a launch-time page table (one "
                     "CTA per tile; variable-length forward)"),
      llvm::cl::init(false)};
  Option<int64_t> minSeqlenQ{
      *this, "min-seqlen-q",
      llvm::cl::desc("Configure the forward for calls with at least this "
                     "many query rows (0: any length): the table's "
                     "long-sequence entries (head dim 64 causal: 192 rows "
                     "from 6144), recorded as the facts' min_seqlen_q"),
      llvm::cl::init(0)};
  Option<int64_t> transposeWarps{
      *this, "transpose-warps",
      llvm::cl::desc("FP8: V's transposer warps, 3 (warps 1 .. 3) or 4 "
                     "(warp 0 too, one fill behind its loads; persistent "
                     "and decoding kernels); 0: 4 at head dim 256 "
                     "(persistent) and for decoding, else 3"),
      llvm::cl::init(0)};
  Option<fa3::BinaryFormat> format{
      *this, "format",
      llvm::cl::desc("What gpu-module-to-binary embeds"),
      llvm::cl::init(fa3::BinaryFormat::Bin),
      llvm::cl::values(
          clEnumValN(fa3::BinaryFormat::Isa, "isa", "PTX text"),
          clEnumValN(fa3::BinaryFormat::Bin, "bin", "cubin (needs ptxas)"),
          clEnumValN(fa3::BinaryFormat::Fatbin, "fatbin", "fatbin"),
          clEnumValN(fa3::BinaryFormat::None, "none",
                     "stop at the LLVM/NVVM dialect"))};
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("Target GPU (wgmma and setmaxnreg "
                                          "need sm_90a)"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX ISA version (+ptx81 or "
                                              "later)"),
                               llvm::cl::init("+ptx81")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit holding bin/ptxas (default: $CUDA_HOME, "
                     "$CUDA_PATH, else /usr/local/cuda)"),
      llvm::cl::init("")};

  fa3::HopperPipelineOptions toOptions() const {
    fa3::HopperPipelineOptions o;
    o.config.blockM = blockM;
    o.config.blockN = blockN;
    o.config.stages = stages;
    o.config.pingpong = pingpong;
    o.config.persistent = persistent;
    o.config.tmaStore = tmaStore;
    o.config.qBuffers = qBuffers;
    o.config.lazyRescale = lazyRescale;
    o.config.rescaleThreshold = rescaleThreshold;
    o.config.kvMulticast = kvMulticast;
    o.config.decode = decode;
    o.config.pagedKv = pagedKv;
    o.config.minSeqlenQ = minSeqlenQ;
    o.config.transposeWarps = transposeWarps;
    o.format = format;
    o.chip = chip;
    o.features = features;
    o.toolkit = toolkit;
    return o;
  }
};
} // namespace

void fa3::registerAttnPipelines() {
  PassPipelineRegistration<HopperPipelineCLOptions>(
      "attn-hopper-pipeline",
      "Compile attn.flash_attention to a warp-specialised sm_90a kernel "
      "(TMA + mbarrier pipeline, wgmma): bufferize, attn-hopper-config, "
      "attn-tile, convert-attn-to-hopper, NVVM lowering, gpu-module-to-binary",
      [](OpPassManager &pm, const HopperPipelineCLOptions &o) {
        addHopperPipeline(pm, o.toOptions());
      });
  PassPipelineRegistration<>(
      "attn-cpu-reference-pipeline",
      "Bufferize, lower attn.flash_attention to reference loops, then to the "
      "LLVM dialect for the CPU (the numerical oracle)",
      [](OpPassManager &pm) { addCpuReferencePipeline(pm); });
  PassPipelineRegistration<TiledPipelineOptions>(
      "attn-cpu-tiled-pipeline",
      "Bufferize, tile attn.flash_attention into the FlashAttention "
      "algorithm (attn-tile), expand the tiles to loops and lower to the "
      "LLVM dialect for the CPU",
      [](OpPassManager &pm, const TiledPipelineOptions &o) {
        attn::AttnTileOptions tile;
        tile.blockM = o.blockM;
        tile.blockN = o.blockN;
        tile.rescaleThreshold = o.rescaleThreshold;
        addCpuTiledPipeline(pm, tile, o.countBlocks);
      });
}
