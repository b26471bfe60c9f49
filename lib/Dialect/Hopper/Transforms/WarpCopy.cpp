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
#include "ThreadIndependent.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERWARPCOPY
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {

/// The producer's steps that one thread takes: the tile scheduler's claims
/// and reset, the words and commits of a slot, the tile loads (one
/// thread's TMA transfers once hopper-async-copy has written them).
bool oneThread(Operation *op) {
  return isa<TileClaimOp, TileNextOp, TileCounterResetOp, RingPublishOp,
             RingProducerCommitOp, LoadTileOp, LoadPagedTileOp>(op);
}

/// Why every lane of warp 0 may not run `op`, or "".
std::string whyNotWarpWide(Operation *op) {
  if (readsThreadIndex(op))
    return "it reads the thread's own index (every lane of warp 0 runs the "
           "program)";
  if (isa<RingProducerAcquireOp, CopyPagedTileOp, scf::IfOp, scf::ForOp,
          scf::WhileOp, scf::YieldOp, scf::ConditionOp>(op))
    return "";
  if (isa<TmaLoadOp>(op))
    return "a TMA transfer already written (run hopper-warp-copy before "
           "hopper-async-copy, which writes tile loads as one thread's "
           "transfers)";
  std::string why = whyNotRepeatable(op);
  if (why.empty() || isa<func::CallOp>(op))
    return why;
  return "it may write memory or synchronize, and is not a step the pass "
         "gives lane 0";
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
      if (failed(runOnWarpZero(thread, oneThread, whyNotWarpWide,
                               "copies pages with every lane")))
        return signalPassFailure();
  }
};

} // namespace
