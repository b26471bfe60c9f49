//===- WarpCopy.cpp - warp 0 runs the producer's program for warp copies ---===//
//
// hopper.copy_paged_tile (pages of fewer rows than a kv tile, copied 16
// bytes a lane by cp.async, FlashAttention-3's path for such pages) takes
// every lane of the warp that runs it. This pass gives the producer
// thread's program that holds one to the whole of warp 0; the steps of one
// thread (tile loads, which hopper-async-copy then writes as TMA
// transfers, claims, words and commits) stay lane 0's.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"
#include "ProducerWarp.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERWARPCOPY
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {

/// The loads one thread takes: the tile loads (one thread's TMA transfers
/// once hopper-async-copy has written them).
bool oneThreadLoad(Operation *op) {
  return isa<LoadTileOp, LoadPagedTileOp>(op);
}

/// This pass's ops of the program: its copies (every lane's), and a TMA
/// transfer already written (one thread's, and a sign the passes ran out
/// of order).
std::optional<std::string> passRule(Operation *op) {
  if (isa<CopyPagedTileOp>(op))
    return std::string();
  if (isa<TmaLoadOp>(op))
    return std::string(
        "a TMA transfer already written (run hopper-warp-copy before "
        "hopper-async-copy, which writes tile loads as one thread's "
        "transfers)");
  return std::nullopt;
}

struct HopperWarpCopyPass
    : public fa3::hopper::impl::HopperWarpCopyBase<HopperWarpCopyPass> {
  void runOnOperation() override {
    SmallVector<ProducerThreadOp> programs;
    getOperation()->walk([&](WarpSpecializeOp ws) {
      for (Operation &op : ws.getProducer().front()) {
        auto thread = dyn_cast<ProducerThreadOp>(op);
        if (!thread)
          continue;
        bool copies = false;
        thread.walk([&](CopyPagedTileOp) { copies = true; });
        if (copies)
          programs.push_back(thread);
      }
    });
    for (ProducerThreadOp thread : programs)
      if (failed(runOnWarpZero(thread, oneThreadLoad, passRule,
                               "copies pages with every lane")))
        return signalPassFailure();
  }
};

} // namespace
