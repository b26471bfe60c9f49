//===- WarpSpecialize.cpp - ring fills into the producer thread's program -===//
//
// The kernel pass writes what fills each ring slot where the consumers use
// it (hopper.ring.fill). This pass splits that single program into the two
// roles of hopper.warp_specialize: the producer thread gets the slice of
// the consumers' program that the fills need (their control flow with the
// values it carries, and the arithmetic of their operands, recomputed)
// with each fill as the slot's acquire and its body; where the program
// reads a word a fill publishes (hopper.ring.published), the producer
// takes the published value itself. The consumers keep the rest.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"
#include "ThreadIndependent.h"

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
  /// Control flow around fills: rebuilt in the producer with only the
  /// values it carries that the producer needs: `carried` lists them (an
  /// scf.for's iter args and results, an scf.if's results, an scf.while's
  /// before-region arguments); `carriedAfter` an scf.while's condition
  /// values (its after-region arguments and results).
  DenseSet<Operation *> structure;
  DenseMap<Operation *, llvm::SmallSetVector<unsigned, 4>> carried,
      carriedAfter;
  /// The producer's value of each word read that it needs: the word the
  /// fill before the read publishes.
  DenseMap<Operation *, Value> publishedSource;
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

  /// A value the producer's program needs, for `fill`, at `user`.
  struct Need {
    Value value;
    Operation *user;
    RingFillOp fill;
  };
  SmallVector<Need> work;
  void need(ValueRange vals, Operation *user, RingFillOp f) {
    for (Value v : vals)
      work.push_back({v, user, f});
  }

  /// Whether `op` lies in a fill's body (which the producer runs whole).
  bool insideFill(Operation *op) {
    for (Operation *p = op->getParentOp(); p && p != ws.getOperation();
         p = p->getParentOp())
      if (isa<RingFillOp>(p))
        return true;
    return false;
  }

  /// The producer's copy of structure op `op` carries its value `i` (see
  /// `carried`): what flows into it is needed too.
  void carry(Operation *op, unsigned i, const Need &n) {
    if (!carried[op].insert(i))
      return;
    // (each value needed at the op that passes it on)
    auto yielded = [&](Operation *terminator) {
      need(terminator->getOperand(i), terminator, n.fill);
    };
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      need(loop.getInitArgs()[i], op, n.fill);
      yielded(loop.getBody()->getTerminator());
    } else if (auto branch = dyn_cast<scf::IfOp>(op)) {
      yielded(branch.thenYield());
      yielded(branch.elseYield());
    } else {
      auto loop = cast<scf::WhileOp>(op);
      need(loop.getInits()[i], op, n.fill);
      yielded(loop.getYieldOp());
    }
  }
  /// scf.while `op`'s condition value `i` (after-region argument, result).
  void carryAfter(Operation *op, unsigned i, const Need &n) {
    if (!carriedAfter[op].insert(i))
      return;
    scf::ConditionOp cond = cast<scf::WhileOp>(op).getConditionOp();
    need(cond.getArgs()[i], cond, n.fill);
  }

  /// The word `read` names, as the last fill of its ring and slot before
  /// it publishes it (the read's address is where the consumers find the
  /// words, computed on their side). That fill must stand before the read
  /// in its block or an enclosing one, with no other fill of the ring
  /// between them inside control flow (whose path the producer could not
  /// tell).
  LogicalResult findPublished(RingPublishedOp read, Operation *user,
                              RingFillOp fill) {
    // the slot's fill, or control flow holding a fill of the ring
    Operation *found = findBefore(read, [&](Operation *op) {
      if (auto f = dyn_cast<RingFillOp>(op))
        return f.getRing() == read.getRing() && f.getSlot() == read.getSlot();
      bool nested = false;
      op->walk([&](RingFillOp inner) {
        nested |= inner.getRing() == read.getRing();
      });
      return nested;
    });
    if (found && !isa<RingFillOp>(found))
      return refuse(user, fill)
             << "needs a word read from a slot of a ring that control "
                "flow before the read also fills: which fill published it "
                "depends on the path";
    RingPublishOp p;
    if (auto f = dyn_cast_or_null<RingFillOp>(found)) {
      auto publishes = f.getBody().front().getOps<RingPublishOp>();
      if (!publishes.empty())
        p = *publishes.begin();
    }
    if (!p)
      return refuse(user, fill)
             << "needs a word read from a slot whose last fill before the "
                "read publishes none";
    if (read.getWord() >= p.getWords().size())
      return refuse(user, fill) << "reads word " << read.getWord() << " of "
                                << p.getWords().size() << " published";
    publishedSource[read] = p.getWords()[read.getWord()];
    return success();
  }

  LogicalResult collect() {
    for (RingFillOp f : fills) {
      for (Operation *p = f->getParentOp(); p != ws.getOperation();
           p = p->getParentOp()) {
        if (!isa<scf::ForOp, scf::IfOp, scf::WhileOp>(p))
          return f.emitOpError("lies inside '")
                 << p->getName()
                 << "': the producer's program follows scf.for, scf.if and "
                    "scf.while around fills";
        if (!structure.insert(p).second)
          continue;
        if (auto loop = dyn_cast<scf::ForOp>(p))
          need({loop.getLowerBound(), loop.getUpperBound(), loop.getStep()},
               p, f);
        else if (auto loop = dyn_cast<scf::WhileOp>(p))
          need(loop.getConditionOp().getCondition(), p, f);
        else
          need(cast<scf::IfOp>(p).getCondition(), p, f);
      }
      // its body: the slot's loads, its published words, what chooses
      // between them, run by the producer thread as they stand (with the
      // tile scheduler's claims, which only the producer makes)
      WalkResult body = f.getBody().walk([&](Operation *op) -> WalkResult {
        if (isa<LoadTileOp, LoadPagedTileOp, CopyPagedTileOp, RingPublishOp,
                RingProducerCommitOp, TileClaimOp, TileNextOp,
                TileCounterResetOp, scf::IfOp, scf::ForOp, scf::WhileOp,
                scf::YieldOp, scf::ConditionOp, gpu::YieldOp>(op))
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
        if (!ws->isAncestor(owner) || insideFill(owner))
          continue; // above the roles, or inside a fill moved whole
        if (structure.contains(owner)) {
          if (auto loop = dyn_cast<scf::ForOp>(owner)) {
            if (arg != loop.getInductionVar())
              carry(owner, arg.getArgNumber() - 1, n);
          } else if (arg.getParentRegion() ==
                     &cast<scf::WhileOp>(owner).getBefore()) {
            carry(owner, arg.getArgNumber(), n);
          } else {
            carryAfter(owner, arg.getArgNumber(), n);
          }
          continue;
        }
        if (!compute.contains(owner))
          return refuse(n.user, n.fill)
                 << "needs a value carried by '" << owner->getName()
                 << "', which the producer's program does not follow";
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
      if (compute.contains(def) || insideFill(def))
        continue;
      if (structure.contains(def)) {
        unsigned i = cast<OpResult>(v).getResultNumber();
        if (isa<scf::WhileOp>(def))
          carryAfter(def, i, n);
        else
          carry(def, i, n);
        continue;
      }
      if (auto read = dyn_cast<RingPublishedOp>(def)) {
        if (failed(findPublished(read, n.user, n.fill)))
          return failure();
        continue;
      }
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
        // The acquire after the body's tile claims, if it starts with
        // them: the claim's atomic then overlaps the wait for the stage
        // (the rest, the tile's decode, stays after it, which the 24
        // registers of the producer thread need).
        Block &body = f.getBody().front();
        Operation *acquireAt = &body.front();
        for (Operation &inner : body.without_terminator()) {
          if (touchesSlot(inner))
            break;
          if (isa<TileClaimOp, TileNextOp>(inner))
            acquireAt = inner.getNextNode();
        }
        for (Operation &inner : body.without_terminator()) {
          if (&inner == acquireAt)
            RingProducerAcquireOp::create(b, loc,
                                          map.lookupOrDefault(f.getRing()),
                                          map.lookupOrDefault(f.getSlot()));
          b.clone(inner, map);
        }
      } else if (auto loop = dyn_cast<scf::ForOp>(op);
                 loop && structure.contains(loop)) {
        cloneFor(loop, b, map);
      } else if (auto branch = dyn_cast<scf::IfOp>(op);
                 branch && structure.contains(branch)) {
        cloneIf(branch, b, map);
      } else if (auto loop = dyn_cast<scf::WhileOp>(op);
                 loop && structure.contains(loop)) {
        cloneWhile(loop, b, map);
      } else if (auto read = dyn_cast<RingPublishedOp>(op);
                 read && publishedSource.contains(read)) {
        map.map(read.getResult(),
                map.lookupOrDefault(publishedSource.lookup(read)));
      } else if (compute.contains(&op)) {
        b.clone(op, map);
      }
    }
  }

  /// Whether `op` writes its fill's slot or completes it (the verifier
  /// gives every fill one such op).
  static bool touchesSlot(Operation &op) {
    return op.walk([](Operation *in) {
               return arrivesOnSlot(in) || isa<RingPublishOp>(in)
                          ? WalkResult::interrupt()
                          : WalkResult::advance();
             })
        .wasInterrupted();
  }

  /// `vals` at positions `which`, mapped.
  static SmallVector<Value> pick(ValueRange vals,
                                 ArrayRef<unsigned> which, IRMapping &map) {
    SmallVector<Value> out;
    for (unsigned i : which)
      out.push_back(map.lookupOrDefault(vals[i]));
    return out;
  }
  /// Maps `from`'s values at positions `which` to `to`'s in order.
  static void mapPicked(ValueRange from, ArrayRef<unsigned> which,
                        ValueRange to, IRMapping &map) {
    for (auto [i, v] : llvm::zip(which, to))
      map.map(from[i], v);
  }
  /// The positions of `op`'s carried values, in order.
  static SmallVector<unsigned>
  sorted(const DenseMap<Operation *, llvm::SmallSetVector<unsigned, 4>> &m,
         Operation *op) {
    SmallVector<unsigned> v;
    auto it = m.find(op);
    if (it != m.end())
      v.assign(it->second.begin(), it->second.end());
    llvm::sort(v);
    return v;
  }

  void cloneFor(scf::ForOp loop, OpBuilder &b, IRMapping &map) {
    SmallVector<unsigned> c = sorted(carried, loop);
    auto copy = scf::ForOp::create(
        b, loop.getLoc(), map.lookupOrDefault(loop.getLowerBound()),
        map.lookupOrDefault(loop.getUpperBound()),
        map.lookupOrDefault(loop.getStep()),
        pick(loop.getInitArgs(), c, map));
    copy.setUnsignedCmp(loop.getUnsignedCmp());
    map.map(loop.getInductionVar(), copy.getInductionVar());
    mapPicked(loop.getRegionIterArgs(), c, copy.getRegionIterArgs(), map);
    {
      OpBuilder::InsertionGuard g(b);
      // (scf.for's builder yields for a loop without iter args only)
      Block *body = copy.getBody();
      const bool yields = !body->empty() && isa<scf::YieldOp>(body->back());
      if (yields)
        b.setInsertionPoint(body->getTerminator());
      else
        b.setInsertionPointToEnd(body);
      clone(*loop.getBody(), b, map);
      if (!yields)
        scf::YieldOp::create(
            b, loop.getLoc(),
            pick(loop.getBody()->getTerminator()->getOperands(), c, map));
    }
    mapPicked(loop.getResults(), c, copy.getResults(), map);
  }

  void cloneIf(scf::IfOp branch, OpBuilder &b, IRMapping &map) {
    SmallVector<unsigned> c = sorted(carried, branch);
    bool elseFills = false;
    if (!branch.getElseRegion().empty())
      branch.getElseRegion().walk([&](RingFillOp) { elseFills = true; });
    bool withElse = elseFills || !c.empty();
    SmallVector<Type> types;
    for (unsigned i : c)
      types.push_back(branch.getResult(i).getType());
    auto copy = scf::IfOp::create(b, branch.getLoc(), types,
                                  map.lookupOrDefault(branch.getCondition()),
                                  withElse);
    auto arm = [&](Block *from, Block *to) {
      OpBuilder::InsertionGuard g(b);
      if (c.empty())
        b.setInsertionPoint(to->getTerminator());
      else
        b.setInsertionPointToEnd(to);
      clone(*from, b, map);
      if (!c.empty())
        scf::YieldOp::create(
            b, branch.getLoc(),
            pick(from->getTerminator()->getOperands(), c, map));
    };
    arm(branch.thenBlock(), copy.thenBlock());
    if (withElse)
      arm(branch.elseBlock(), copy.elseBlock());
    mapPicked(branch.getResults(), c, copy.getResults(), map);
  }

  void cloneWhile(scf::WhileOp loop, OpBuilder &b, IRMapping &map) {
    SmallVector<unsigned> before = sorted(carried, loop);
    SmallVector<unsigned> after = sorted(carriedAfter, loop);
    Location loc = loop.getLoc();
    SmallVector<Type> afterTypes;
    for (unsigned i : after)
      afterTypes.push_back(loop.getResult(i).getType());
    SmallVector<Value> inits = pick(loop.getInits(), before, map);
    auto copy = scf::WhileOp::create(b, loc, afterTypes, inits);
    {
      OpBuilder::InsertionGuard g(b);
      SmallVector<Type> beforeTypes;
      for (Value v : inits)
        beforeTypes.push_back(v.getType());
      SmallVector<Location> locs(before.size(), loc);
      Block *top = b.createBlock(&copy.getBefore(), {}, beforeTypes, locs);
      mapPicked(loop.getBeforeArguments(), before, top->getArguments(), map);
      clone(*loop.getBeforeBody(), b, map);
      scf::ConditionOp cond = loop.getConditionOp();
      scf::ConditionOp::create(b, loc,
                               map.lookupOrDefault(cond.getCondition()),
                               pick(cond.getArgs(), after, map));
      SmallVector<Location> locsAfter(after.size(), loc);
      Block *rest =
          b.createBlock(&copy.getAfter(), {}, afterTypes, locsAfter);
      mapPicked(loop.getAfterArguments(), after, rest->getArguments(), map);
      clone(*loop.getAfterBody(), b, map);
      scf::YieldOp::create(b, loc,
                           pick(loop.getYieldOp().getOperands(), before, map));
    }
    mapPicked(loop.getResults(), after, copy.getResults(), map);
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
