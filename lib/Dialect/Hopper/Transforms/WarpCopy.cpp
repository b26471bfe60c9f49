//===- WarpCopy.cpp - whole warps run the producer's program for copies --===//
//
// hopper.copy_paged_tile (pages of fewer rows than a kv tile, copied 16
// bytes a lane by cp.async, FlashAttention-3's path for such pages) takes
// every lane of the warps that run it: as many as its `warps` say (four,
// as FlashAttention-3, or warp 0 alone where warps 1 .. 3 transpose FP8's
// V; four where that transposer counts them all as its workers, whose step
// hopper-producer-warp-transpose then moves into their program). This
// pass gives the producer thread's program that holds one to
// warps 0 .. warps - 1, each copy its warp's index; the steps of one
// thread (tile loads, which hopper-async-copy then writes as TMA
// transfers, claims, words and commits) stay thread 0's.
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

/// Whether `role` is FP8's V transposer on warps 1 .. warps - 1 whose
/// workers are the copying warps 0 .. warps - 1.
bool joinsCopiers(ProducerWarpsOp role, uint64_t warps) {
  return role.getCount() + 1 == warps && joiningTransposer(role);
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
      if (failed(runCopies(thread)))
        return signalPassFailure();
  }

  /// The program on as many warps as its copies name (alike in all).
  LogicalResult runCopies(ProducerThreadOp thread) {
    SmallVector<CopyPagedTileOp> copies;
    thread.walk([&](CopyPagedTileOp c) { copies.push_back(c); });
    const uint64_t warps = copies.front().getWarps();
    for (CopyPagedTileOp c : copies)
      if (c.getWarps() != warps)
        return c.emitOpError("is copied by ")
               << c.getWarps() << " warp(s), another copy of the program by "
               << warps << ": one program runs on one set of warps";
    // warps of another role cannot also run this program, but for FP8's
    // V transposer on warps 1 .. 3 counting these warps as its workers:
    // hopper-producer-warp-transpose then gives its step to this program
    // and erases its loop
    for (Operation &op : thread->getBlock()->getOperations())
      if (auto other = dyn_cast<ProducerWarpsOp>(op);
          other && other.getFirst() < warps && !joinsCopiers(other, warps))
        return copies.front().emitOpError("is copied by ")
               << warps << " warp(s), but warps " << other.getFirst()
               << " .. " << other.getFirst() + other.getCount() - 1
               << " run another role";
    FailureOr<ProducerWarpsOp> role = runOnWarps(
        thread, warps, oneThreadLoad, passRule, "copies pages with every lane");
    if (failed(role))
      return failure();
    if (warps > 1)
      for (CopyPagedTileOp c : copies)
        c.getWarpMutable().assign(role->getBody().getArgument(0));
    return success();
  }
};

} // namespace
