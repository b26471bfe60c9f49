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
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
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

/// Whether `op` reads which thread runs it: the producer thread computing
/// it again would get its own index, not the consumers'.
bool readsThreadIndex(Operation *op) {
  if (isa<NVVM::ThreadIdXOp, NVVM::ThreadIdYOp, NVVM::ThreadIdZOp,
          NVVM::LaneIdOp, NVVM::WarpIdOp, gpu::ThreadIdOp, gpu::LaneIdOp>(op))
    return true;
  auto isFrag = [](Type t) { return isa<FragmentType>(t); };
  // a warpgroup's registers: each thread holds its own part
  return llvm::any_of(op->getOperandTypes(), isFrag) ||
         llvm::any_of(op->getResultTypes(), isFrag);
}

/// Why the producer thread may not run `root` again for itself, or "" if
/// it may: arithmetic, reads of global or constant memory (which no role
/// writes while the kernel runs), calls of functions that do only that.
/// Shared memory is the rings' (a read there would not wait for the
/// data); a write, a barrier or a warp-wide instruction (one lane runs the
/// producer thread) would change what the kernel does; so would a value of
/// the thread's own. `callees`: the functions on the way, so that a
/// recursive one ends the walk.
std::string whyNotRepeatable(Operation *root, bool inCallee,
                             SmallPtrSetImpl<Operation *> &callees) {
  std::string why;
  root->walk([&](Operation *op) -> WalkResult {
    if (readsThreadIndex(op)) {
      why = "'" + op->getName().getStringRef().str() +
            "' is the thread's own (the producer thread is another)";
      return WalkResult::interrupt();
    }
    if (isa<WarpUniformOp>(op)) {
      // dropped where the pass clones it; a callee keeps its shuffle
      if (inCallee)
        why = "a called function shuffles a warp (one lane runs the "
              "producer thread)";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto f = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          op, call.getCalleeAttr());
      if (!f || f.isExternal())
        why = "it calls a function without a body";
      else if (!callees.insert(f).second)
        why = "it calls a function that calls itself";
      else {
        why = whyNotRepeatable(f, /*inCallee=*/true, callees);
        callees.erase(f);
      }
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto load = dyn_cast<LLVM::LoadOp>(op)) {
      unsigned space =
          cast<LLVM::LLVMPointerType>(load.getAddr().getType())
              .getAddressSpace();
      if (space != 1 && space != 4)
        why = "'llvm.load' reads shared or generic memory (the consumers "
              "read it only after their waits)";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto a = dyn_cast<LLVM::InlineAsmOp>(op)) {
      if (a.getHasSideEffects())
        why = "'llvm.inline_asm' has side effects";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto mem = dyn_cast<MemoryEffectOpInterface>(op)) {
      if (!mem.hasNoEffect())
        why = "'" + op->getName().getStringRef().str() +
              "' touches memory or synchronizes";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    // an op whose effects are those of its regions: the walk visits them
    if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        isa<func::FuncOp>(op))
      return WalkResult::advance();
    why = "'" + op->getName().getStringRef().str() +
          "' may write memory, synchronize or need the whole warp";
    return WalkResult::interrupt();
  });
  return why;
}

std::string whyNotRepeatable(Operation *op) {
  SmallPtrSet<Operation *, 4> callees;
  return whyNotRepeatable(op, /*inCallee=*/false, callees);
}

/// The producer thread's program for one hopper.warp_specialize.
class Splitter {
public:
  explicit Splitter(WarpSpecializeOp ws) : ws(ws) {}

  LogicalResult run() {
    ws.getConsumer().walk([&](RingFillOp f) { fills.push_back(f); });
    if (fills.empty())
      return success();
    if (!ws.getProducer().front().getOps<ProducerThreadOp>().empty())
      return ws.emitOpError("has ring fills and a hopper.producer_thread: "
                            "the fills' program would be a second one on "
                            "the same thread");
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
  /// Values defined above the roles, found alike in every thread.
  DenseSet<Value> uniformAbove;

  bool inConsumers(Operation *op) {
    return ws.getConsumer().isAncestor(op->getParentRegion());
  }

  /// An error at `user`, which `fill` needs.
  InFlightDiagnostic refuse(Operation *user, RingFillOp fill) {
    InFlightDiagnostic d = user->emitOpError();
    if (user != fill.getOperation())
      d.attachNote(fill.getLoc()) << "needed by this ring fill";
    return d;
  }

  /// Whether a value defined above the roles is the same in every thread
  /// (the producer thread computed its own copy of it before the split).
  bool sameInEveryThread(Value v) {
    SmallVector<Value> work = {v};
    DenseSet<Value> seen;
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (uniformAbove.contains(x) || !seen.insert(x).second)
        continue;
      Operation *def = x.getDefiningOp();
      if (!def)
        continue; // a kernel parameter
      bool own = false;
      def->walk([&](Operation *op) {
        if (readsThreadIndex(op))
          own = true;
      });
      if (own)
        return false;
      work.append(def->operand_begin(), def->operand_end());
      llvm::SetVector<Value> above;
      for (Region &r : def->getRegions())
        getUsedValuesDefinedAbove(r, above);
      work.append(above.begin(), above.end());
    }
    uniformAbove.insert(seen.begin(), seen.end());
    return true;
  }

  LogicalResult collect() {
    struct Need {
      Value value;
      Operation *user;
      RingFillOp fill;
    };
    SmallVector<Need> work;
    auto need = [&](ValueRange vals, Operation *user, RingFillOp f) {
      for (Value v : vals)
        work.push_back({v, user, f});
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
               p, f);
        else
          need(cast<scf::IfOp>(p).getCondition(), p, f);
      }
      // its body: the slot's loads and what chooses between them, run by
      // the producer thread as they stand
      WalkResult body = f.getBody().walk([&](Operation *op) -> WalkResult {
        if (isa<LoadTileOp, LoadPagedTileOp, scf::IfOp, scf::YieldOp,
                gpu::YieldOp>(op))
          return WalkResult::advance();
        std::string why = whyNotRepeatable(op);
        if (why.empty())
          return WalkResult::advance();
        f.emitOpError("holds '")
            << op->getName() << "', which the producer thread cannot run: "
            << why;
        return WalkResult::interrupt();
      });
      if (body.wasInterrupted())
        return failure();
      need({f.getRing(), f.getSlot()}, f, f);
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(f.getBody(), above);
      need(above.getArrayRef(), f, f);
    }
    while (!work.empty()) {
      Need n = work.pop_back_val();
      Value v = n.value;
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        Operation *owner = arg.getOwner()->getParentOp();
        if (owner == ws.getOperation())
          return refuse(n.user, n.fill)
                 << "needs the consumer index, which the producer thread "
                    "does not have";
        if (!ws->isAncestor(owner))
          continue; // a kernel parameter or a block argument above the roles
        auto loop = dyn_cast<scf::ForOp>(owner);
        if (loop && structure.contains(owner) &&
            arg == loop.getInductionVar())
          continue;
        if (structure.contains(owner) || !compute.contains(owner))
          return refuse(n.user, n.fill)
                 << "needs a value carried by '" << owner->getName()
                 << "' (the producer recomputes what fills need; it cannot "
                    "recompute loop-carried values)";
        continue; // a region argument inside an op cloned whole
      }
      Operation *def = v.getDefiningOp();
      if (!inConsumers(def)) {
        if (!sameInEveryThread(v))
          return refuse(n.user, n.fill)
                 << "needs a value defined above the roles from the "
                    "thread's own index (the producer thread's would "
                    "differ)";
        continue;
      }
      if (compute.contains(def))
        continue;
      if (structure.contains(def))
        return refuse(n.user, n.fill)
               << "needs a result of '" << def->getName()
               << "', which holds ring fills";
      std::string why = whyNotRepeatable(def);
      if (!why.empty())
        return refuse(n.user, n.fill)
               << "needs '" << def->getName()
               << "', which the producer thread cannot run again for "
                  "itself: "
               << why;
      compute.insert(def);
      need(def->getOperands(), def, n.fill);
      llvm::SetVector<Value> above;
      for (Region &r : def->getRegions())
        getUsedValuesDefinedAbove(r, above);
      need(above.getArrayRef(), def, n.fill);
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
        copy.setUnsignedCmp(loop.getUnsignedCmp());
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

  /// The consumers without the fills and what only the fills needed (each
  /// of those ops was found free of effects beyond reads of global memory).
  void cleanUp() {
    for (RingFillOp f : fills)
      f.erase();
    for (Operation *op : llvm::reverse(computeInOrder))
      if (op->use_empty())
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
