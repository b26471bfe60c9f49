//===- Pipelines.cpp - named pass pipelines -------------------------------===//
//
// One flag per job, so users do not have to know the pass order:
//   attn-cpu-reference-pipeline  tensor/memref op -> reference loops -> LLVM
//   attn-cpu-tiled-pipeline      tensor/memref op -> attn-tile -> loops -> LLVM
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

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
} // namespace

void fa3::attn::registerAttnPipelines() {
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
