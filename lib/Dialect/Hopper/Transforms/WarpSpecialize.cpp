//===- WarpSpecialize.cpp - ring fills into the producer thread's program -===//
//
// The kernel pass writes what fills each ring slot where the consumers use
// it (hopper.ring.fill). This pass splits that single program into the two
// roles of hopper.warp_specialize: the producer thread gets the slice of
// the consumers' program that the fills need (their control flow and the
// arithmetic of their operands, recomputed) with each fill as the slot's
// acquire and loads; the consumers keep the rest.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERWARPSPECIALIZE
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {

/// Whether the producer thread may run `op` again for itself: arithmetic
/// and reads only. A write, a barrier or a warp-wide instruction (a
/// shuffle: one lane runs the producer thread) would change what the
/// kernel does. Calls are followed into their callee (`callees`: those
/// on the way, so that a recursive one ends the walk).
bool repeatable(Operation *root,
                SmallPtrSetImpl<Operation *> &callees) {
  WalkResult w = root->walk([&](Operation *op) -> WalkResult {
    if (isa<WarpUniformOp>(op))
      return WalkResult::advance(); // becomes its operand in the producer
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto f = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          op, call.getCalleeAttr());
      if (!f || f.isExternal() || !callees.insert(f).second)
        return WalkResult::interrupt();
      bool ok = repeatable(f, callees);
      callees.erase(f);
      return ok ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto a = dyn_cast<LLVM::InlineAsmOp>(op))
      return a.getHasSideEffects() ? WalkResult::interrupt()
                                   : WalkResult::advance();
    if (auto mem = dyn_cast<MemoryEffectOpInterface>(op)) {
      SmallVector<MemoryEffects::EffectInstance> effects;
      mem.getEffects(effects);
      for (const auto &e : effects)
        if (!isa<MemoryEffects::Read>(e.getEffect()))
          return WalkResult::interrupt();
      return WalkResult::advance();
    }
    // An op whose effects are those of its regions: the walk visits them.
    if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        isa<func::FuncOp>(op))
      return WalkResult::advance();
    return WalkResult::interrupt(); // effects unknown
  });
  return !w.wasInterrupted();
}

/// The producer thread's program for one hopper.warp_specialize.
class Splitter {
public:
  explicit Splitter(WarpSpecializeOp ws) : ws(ws) {}

  LogicalResult run() {
    Region &consumers = ws.getConsumer();
    consumers.walk([&](RingFillOp f) { fills.push_back(f); });
    if (fills.empty())
      return success();
    if (failed(collect()))
      return failure();
    build();
    cleanUp();
    return success();
  }

private:
  WarpSpecializeOp ws;
  SmallVector<RingFillOp> fills;
  /// Control flow around fills: rebuilt in the producer without results.
  DenseSet<Operation *> structure;
  /// Ops whose results the fills (or the structure) need: cloned whole.
  DenseSet<Operation *> compute;
  SmallVector<Operation *> computeInOrder;

  bool inConsumers(Operation *op) {
    return ws.getConsumer().isAncestor(op->getParentRegion());
  }

  LogicalResult collect() {
    SmallVector<std::pair<Value, Operation *>> work; // value, who needs it
    auto need = [&](ValueRange vals, Operation *user) {
      for (Value v : vals)
        work.push_back({v, user});
    };
    for (RingFillOp f : fills) {
      for (Operation *p = f->getParentOp(); p != ws.getOperation();
           p = p->getParentOp()) {
        if (!isa<scf::ForOp, scf::IfOp>(p))
          return f.emitOpError("lies inside '")
                 << p->getName()
                 << "': the producer's program follows scf.for and scf.if "
                    "around fills";
        if (!structure.insert(p).second)
          continue;
        if (auto loop = dyn_cast<scf::ForOp>(p))
          need({loop.getLowerBound(), loop.getUpperBound(), loop.getStep()},
               p);
        else
          need(cast<scf::IfOp>(p).getCondition(), p);
      }
      need({f.getRing(), f.getSlot()}, f);
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(f.getBody(), above);
      need(above.getArrayRef(), f);
    }
    while (!work.empty()) {
      auto [v, user] = work.pop_back_val();
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        Operation *owner = arg.getOwner()->getParentOp();
        if (owner == ws.getOperation())
          return user->emitOpError("needs the consumer index, which the "
                                   "producer thread does not have");
        if (!ws->isAncestor(owner))
          continue; // defined above the roles: visible to both
        auto loop = dyn_cast<scf::ForOp>(owner);
        if (loop && structure.contains(owner) &&
            arg == loop.getInductionVar())
          continue;
        if (structure.contains(owner) || !compute.contains(owner))
          return user->emitOpError("needs a value carried by '")
                 << owner->getName()
                 << "' (the producer recomputes what fills need; it "
                    "cannot recompute loop-carried values)";
        continue; // a region argument inside an op cloned whole
      }
      Operation *def = v.getDefiningOp();
      if (!inConsumers(def) || compute.contains(def))
        continue;
      if (structure.contains(def))
        return user->emitOpError("needs a result of '")
               << def->getName() << "', which holds ring fills";
      SmallPtrSet<Operation *, 4> callees;
      if (!repeatable(def, callees))
        return user->emitOpError("needs '")
               << def->getName()
               << "', which the producer thread cannot run again for itself "
                  "(it writes memory, synchronizes or is warp-wide)";
      compute.insert(def);
      need(def->getOperands(), def);
      llvm::SetVector<Value> above;
      for (Region &r : def->getRegions())
        getUsedValuesDefinedAbove(r, above);
      need(above.getArrayRef(), def);
    }
    ws.getConsumer().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (compute.contains(op))
        computeInOrder.push_back(op);
    });
    return success();
  }

  /// Block `from` of the consumers, sliced into `b`'s insertion point.
  void clone(Block &from, OpBuilder &b, IRMapping &map) {
    for (Operation &op : from.without_terminator()) {
      Location loc = op.getLoc();
      if (auto f = dyn_cast<RingFillOp>(op)) {
        RingProducerAcquireOp::create(b, loc, map.lookupOrDefault(f.getRing()),
                                      map.lookupOrDefault(f.getSlot()));
        for (Operation &inner : f.getBody().front().without_terminator())
          b.clone(inner, map);
      } else if (auto loop = dyn_cast<scf::ForOp>(op);
                 loop && structure.contains(loop)) {
        auto copy = scf::ForOp::create(
            b, loc, map.lookupOrDefault(loop.getLowerBound()),
            map.lookupOrDefault(loop.getUpperBound()),
            map.lookupOrDefault(loop.getStep()));
        map.map(loop.getInductionVar(), copy.getInductionVar());
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(copy.getBody()->getTerminator());
        clone(*loop.getBody(), b, map);
      } else if (auto branch = dyn_cast<scf::IfOp>(op);
                 branch && structure.contains(branch)) {
        bool elseFills = false;
        if (!branch.getElseRegion().empty())
          branch.getElseRegion().walk([&](RingFillOp) { elseFills = true; });
        auto copy = scf::IfOp::create(
            b, loc, TypeRange{}, map.lookupOrDefault(branch.getCondition()),
            elseFills);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(copy.thenBlock()->getTerminator());
        clone(*branch.thenBlock(), b, map);
        if (elseFills) {
          b.setInsertionPoint(copy.elseBlock()->getTerminator());
          clone(*branch.elseBlock(), b, map);
        }
      } else if (compute.contains(&op)) {
        b.clone(op, map);
      }
    }
  }

  void build() {
    Block &producer = ws.getProducer().front();
    OpBuilder b(ws.getContext());
    b.setInsertionPointToStart(&producer);
    auto role = ProducerThreadOp::create(b, ws.getLoc());
    b.createBlock(&role.getBody());
    ProducerThreadOp::ensureTerminator(role.getBody(), b, ws.getLoc());
    b.setInsertionPoint(role.getBody().front().getTerminator());
    IRMapping map;
    clone(ws.getConsumer().front(), b, map);
    // One lane runs the producer thread: a value is trivially its own.
    role.walk([](WarpUniformOp u) {
      u.getResult().replaceAllUsesWith(u.getValue());
      u.erase();
    });
  }

  /// The consumers without the fills and what only the fills needed.
  void cleanUp() {
    for (RingFillOp f : fills)
      f.erase();
    for (Operation *op : llvm::reverse(computeInOrder))
      if (op->use_empty() && (isOpTriviallyDead(op) || isa<WarpUniformOp>(op)))
        op->erase();
  }
};

struct HopperWarpSpecializePass
    : public fa3::hopper::impl::HopperWarpSpecializeBase<
          HopperWarpSpecializePass> {
  void runOnOperation() override {
    SmallVector<WarpSpecializeOp> all;
    getOperation()->walk([&](WarpSpecializeOp ws) { all.push_back(ws); });
    for (WarpSpecializeOp ws : all)
      if (failed(Splitter(ws).run()))
        return signalPassFailure();
  }
};

} // namespace
