//===- ProducerWarp.cpp - the producer program on whole warps ---------===//

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
/// every lane of the warp: a shuffle, so only where one warp runs the
/// program; `who` names the warps for the refusal).
LogicalResult markOneThreadRuns(Block &blk,
                                function_ref<bool(Operation *)> oneThread,
                                int64_t warps, StringRef who,
                                StringRef purpose) {
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
    if (!escaping.empty() && warps > 1)
      return escaping.front().getDefiningOp()->emitOpError(
                 "cannot run on every lane of ")
             << who << " (its program " << purpose
             << "): its value is one thread's, and a shuffle gives it to "
                "its own warp only";
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
  return success();
}

/// Why every lane of the warps `who` may not run `op`, or "".
std::string
whyNotWarpWide(Operation *op, StringRef who,
               function_ref<std::optional<std::string>(Operation *)> passRule) {
  if (readsThreadIndex(op))
    return ("it reads the thread's own index (every lane of " + who +
            " runs the program)")
        .str();
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
runOnWarps(ProducerThreadOp thread, int64_t warps,
           function_ref<bool(Operation *)> oneThreadLoad,
           function_ref<std::optional<std::string>(Operation *)> passRule,
           StringRef purpose) {
  auto oneThread = [&](Operation *op) {
    return isa<TileClaimOp, TileNextOp, TileCounterResetOp, RingPublishOp,
               RingProducerCommitOp>(op) ||
           oneThreadLoad(op);
  };
  const std::string who =
      warps == 1 ? std::string("warp 0")
                 : "warps 0 .. " + std::to_string(warps - 1);
  OpBuilder b(thread);
  auto role = ProducerWarpsOp::create(b, thread.getLoc(), uint64_t{0},
                                      static_cast<uint64_t>(warps));
  Block *body = b.createBlock(&role.getBody(), {}, {b.getI32Type()},
                              {thread.getLoc()});
  ProducerWarpsOp::ensureTerminator(role.getBody(), b, thread.getLoc());
  Block &from = thread.getBody().front();
  body->getOperations().splice(body->getTerminator()->getIterator(),
                               from.getOperations(), from.begin(),
                               std::prev(from.end()));
  thread.erase();
  WalkResult checked = role.walk([&](Operation *op) -> WalkResult {
    if (op == role.getOperation() || oneThread(op) ||
        op->getParentOfType<ProducerThreadOp>())
      return WalkResult::advance();
    std::string why = whyNotWarpWide(op, who, passRule);
    if (why.empty())
      return WalkResult::advance();
    op->emitOpError("cannot run on every lane of ")
        << who << " (its program " << purpose << "): " << why;
    return WalkResult::interrupt();
  });
  if (checked.wasInterrupted())
    return failure();
  SmallVector<Block *> blocks;
  role.walk([&](Block *blk) { blocks.push_back(blk); });
  for (Block *blk : blocks)
    if (failed(markOneThreadRuns(*blk, oneThread, warps, who, purpose)))
      return failure();
  return role;
}

TransposeStageOp joiningTransposer(ProducerWarpsOp role) {
  TransposeStageOp found;
  if (role.getFirst() != 1)
    return found;
  role.walk([&](TransposeStageOp t) {
    if (t.getWorkers() == role.getCount() + 1)
      found = t;
  });
  return found;
}

} // namespace fa3::hopper
