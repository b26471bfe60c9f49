//===- ProducerWarp.cpp - the producer thread's program on warp 0 ---------===//

#include "ProducerWarp.h"
#include "ThreadIndependent.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace fa3::hopper {
namespace {

/// Runs of consecutive one-thread steps in `blk` each become a
/// hopper.producer_thread, yielding the values used after the run (to
/// every lane of the warp).
void markOneThreadRuns(Block &blk, function_ref<bool(Operation *)> oneThread) {
  SmallVector<SmallVector<Operation *>> runs;
  SmallVector<Operation *> cur;
  for (Operation &op : blk) {
    if (oneThread(&op)) {
      cur.push_back(&op);
      continue;
    }
    if (!cur.empty())
      runs.push_back(cur), cur.clear();
  }
  if (!cur.empty())
    runs.push_back(cur);
  for (ArrayRef<Operation *> run : runs) {
    llvm::SmallPtrSet<Operation *, 8> in(run.begin(), run.end());
    SmallVector<Value> escaping;
    for (Operation *op : run)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(),
                         [&](Operation *u) { return !in.contains(u); }))
          escaping.push_back(r);
    SmallVector<Type> types;
    for (Value v : escaping)
      types.push_back(v.getType());
    OpBuilder b(run.front());
    Location loc = run.front()->getLoc();
    auto role = ProducerThreadOp::create(b, loc, types);
    Block *body = b.createBlock(&role.getBody());
    for (Operation *op : run)
      op->moveBefore(body, body->end());
    b.setInsertionPointToEnd(body);
    gpu::YieldOp::create(b, loc, escaping);
    for (auto [v, r] : llvm::zip(escaping, role.getResults()))
      v.replaceUsesWithIf(r, [&](OpOperand &use) {
        return !role->isAncestor(use.getOwner());
      });
  }
}

/// Why every lane of warp 0 may not run `op`, or "".
std::string
whyNotWarpWide(Operation *op,
               function_ref<std::optional<std::string>(Operation *)> passRule) {
  if (readsThreadIndex(op))
    return "it reads the thread's own index (every lane of warp 0 runs the "
           "program)";
  if (isa<RingProducerAcquireOp, scf::IfOp, scf::ForOp, scf::WhileOp,
          scf::YieldOp, scf::ConditionOp>(op))
    return "";
  if (std::optional<std::string> why = passRule(op))
    return *why;
  std::string why = whyNotRepeatable(op);
  if (why.empty() || isa<func::CallOp>(op))
    return why;
  return "it may write memory or synchronize, and is not a step the pass "
         "gives thread 0";
}

} // namespace

FailureOr<ProducerWarpsOp>
runOnWarpZero(ProducerThreadOp thread,
              function_ref<bool(Operation *)> oneThreadLoad,
              function_ref<std::optional<std::string>(Operation *)> passRule,
              StringRef purpose) {
  auto oneThread = [&](Operation *op) {
    return isa<TileClaimOp, TileNextOp, TileCounterResetOp, RingPublishOp,
               RingProducerCommitOp>(op) ||
           oneThreadLoad(op);
  };
  OpBuilder b(thread);
  auto warp0 = ProducerWarpsOp::create(b, thread.getLoc(), uint64_t{0},
                                       uint64_t{1});
  Block *body = b.createBlock(&warp0.getBody(), {}, {b.getI32Type()},
                              {thread.getLoc()});
  ProducerWarpsOp::ensureTerminator(warp0.getBody(), b, thread.getLoc());
  Block &from = thread.getBody().front();
  body->getOperations().splice(body->getTerminator()->getIterator(),
                               from.getOperations(), from.begin(),
                               std::prev(from.end()));
  thread.erase();
  WalkResult checked = warp0.walk([&](Operation *op) -> WalkResult {
    if (op == warp0.getOperation() || oneThread(op) ||
        op->getParentOfType<ProducerThreadOp>())
      return WalkResult::advance();
    std::string why = whyNotWarpWide(op, passRule);
    if (why.empty())
      return WalkResult::advance();
    op->emitOpError("cannot run on every lane of warp 0 (its program ")
        << purpose << "): " << why;
    return WalkResult::interrupt();
  });
  if (checked.wasInterrupted())
    return failure();
  SmallVector<Block *> blocks;
  warp0.walk([&](Block *blk) { blocks.push_back(blk); });
  for (Block *blk : blocks)
    markOneThreadRuns(*blk, oneThread);
  return warp0;
}

} // namespace fa3::hopper
