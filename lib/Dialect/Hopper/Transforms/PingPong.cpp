//===- PingPong.cpp - the two consumers take turns to issue wgmma ---------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERPINGPONG
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {
constexpr int64_t kTurnThreads = 256; // 128 syncing + 128 arriving

bool isIssue(Operation *op) { return isa<WgmmaSSOp, WgmmaRSOp>(op); }

struct HopperPingPongPass
    : public fa3::hopper::impl::HopperPingPongBase<HopperPingPongPass> {
  void runOnOperation() override {
    getOperation()->walk([&](WarpSpecializeOp ws) {
      if (!ws->hasAttr(kPingPongAttr))
        return;
      ws->removeAttr(kPingPongAttr);
      if (failed(order(ws)))
        signalPassFailure();
    });
  }

  LogicalResult order(WarpSpecializeOp ws) {
    if (ws.getConsumers() != 2)
      return ws.emitOpError("ping-pong alternates two consumer warpgroups, "
                            "not ")
             << ws.getConsumers();
    Block &body = ws.getConsumer().front();
    Value cw = body.getArgument(0);
    Location loc = ws.getLoc();
    OpBuilder b(ws.getContext());
    b.setInsertionPointToStart(&body);
    Value one = arith::ConstantIntOp::create(b, loc, 1, 32);
    Value zero = arith::ConstantIntOp::create(b, loc, 0, 32);
    Value other = arith::SubIOp::create(b, loc, one, cw);
    auto turn = [&](bool sync, Value who) {
      if (sync)
        NamedBarrierSyncOp::create(b, loc, who, BarrierKind::turn, 2,
                                   kTurnThreads);
      else
        NamedBarrierArriveOp::create(b, loc, who, BarrierKind::turn, 2,
                                     kTurnThreads);
    };
    // The edges: consumer 1 opens consumer 0's first turn; consumer 0 takes
    // the turn consumer 1 hands over after its last window.
    auto edge = [&](int64_t who, bool sync) {
      Value isWho = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::eq, cw, who ? one : zero);
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, isWho,
                                    /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      turn(sync, zero);
    };
    edge(/*who=*/1, /*sync=*/false);

    SmallVector<NVVM::WgmmaFenceAlignedOp> fences;
    body.walk([&](NVVM::WgmmaFenceAlignedOp f) { fences.push_back(f); });
    for (NVVM::WgmmaFenceAlignedOp fence : fences) {
      Operation *last = nullptr;
      for (Operation *op = fence->getNextNode(); op && isIssue(op);
           op = op->getNextNode())
        last = op;
      if (!last)
        return fence.emitOpError("starts no wgmma issue window (no "
                                 "hopper.wgmma.ss/rs after it)");
      b.setInsertionPoint(fence);
      turn(/*sync=*/true, cw);
      b.setInsertionPointAfter(last);
      turn(/*sync=*/false, other);
    }

    b.setInsertionPoint(body.getTerminator());
    edge(/*who=*/0, /*sync=*/true);
    return success();
  }
};
} // namespace
