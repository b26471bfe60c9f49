//===- ProducerWarpTranspose.cpp - V's fillers transpose V too -------------===//
//
// FP8's V transposer runs on warps 1 .. 3 of the producer warpgroup while
// warp 0's thread 0 issues the loads. FlashAttention-3 transposes on all
// four warps, each slot one fill behind the loads. Where the kernel asks
// for that (a transposer loop on warps 1 .. 3 whose transpose_stage counts
// four workers), this pass gives the warps of the program that fills V the
// transposer's step: the previous block's slot after each fill of V but
// the first, the last block's after the loop (so that a tile's slots are
// all transposed before the next tile's Q, which waits for the consumers
// to finish this one).
//
// - The producer thread's program (TMA loads): warp 0 runs it as a whole
//   warp (the steps one thread must take on thread 0, the tiles it claims
//   shared with the warp) and is worker 0; warps 1 .. 3 keep their loop.
// - The program of warps 0 .. 3 that copy small pages (hopper-warp-copy):
//   its four warps are the four workers, each its own warp's index, and
//   the transposed slot's commit (warp 1's lane 0) goes with the step; the
//   loop of warps 1 .. 3 is erased.
//
// A fill is where V's slot is filled in the kv loop's body, or in a branch
// of it (the decoding kernel's paths: copied pages, a box a page, the
// contiguous cache): the step follows the loop body's op that holds it.
// The transposers' named barrier is marked `diverged` in the programs:
// warp 0 may meet warps 1 .. 3 at another instruction, and its lane 0 may
// still be in the producer thread's steps when its other lanes reach it.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"
#include "ProducerWarp.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERPRODUCERWARPTRANSPOSE
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {

/// The loads of the producer thread's program that one thread takes: the
/// TMA transfers (the pass runs after hopper-async-copy).
bool oneThreadLoad(Operation *op) { return isa<TmaLoadOp>(op); }

/// This pass's op of the producer thread's program: a tile load still to
/// be written as TMA transfers (the pass runs after hopper-async-copy).
std::optional<std::string> passRule(Operation *op) {
  if (isa<LoadTileOp, LoadPagedTileOp>(op))
    return std::string("a tile load not yet turned into TMA transfers (run "
                       "hopper-async-copy first)");
  return std::nullopt;
}

class Merger {
public:
  explicit Merger(WarpSpecializeOp ws) : ws(ws) {}

  LogicalResult run() {
    Block &producer = ws.getProducer().front();
    ProducerThreadOp thread;
    ProducerWarpsOp copier; // warps 0 .. n - 1 copying pages (warp-copy)
    for (Operation &op : producer) {
      if (auto t = dyn_cast<ProducerThreadOp>(op))
        thread = t;
      auto warps = dyn_cast<ProducerWarpsOp>(op);
      if (warps && warps.getFirst() == 0)
        copier = warps;
      if (TransposeStageOp t = warps ? joiningTransposer(warps) : nullptr)
        transpose = t, transposer = warps;
    }
    if (!transpose)
      return success(); // warp 0 has no part in the transposer
    // a second run would add the steps again
    bool joined = false;
    ws.getProducer().walk([&](TransposeStageOp t) {
      joined |= t.getSrc() == transpose.getSrc() &&
                !transposer->isAncestor(t);
    });
    if (joined)
      return transposer.emitOpError(
          "counts workers whose step another program already runs (the "
          "pass ran before)");
    // the program that fills V, and whether its warps are all the workers
    ProducerWarpsOp program;
    if (copier) {
      if (copier.getCount() != 1 &&
          copier.getCount() != transpose.getWorkers())
        return transposer.emitOpError("transposes V on ")
               << transpose.getWorkers() << " workers, but warps 0 .. "
               << copier.getCount() - 1
               << " fill it: warp 0 alone joins the transposer as worker 0, "
                  "or the fillers are all its workers";
      program = copier;
      allWorkers = copier.getCount() != 1;
    } else if (!thread) {
      return transposer.emitOpError(
          "leaves worker 0 of its transpose to warp 0, but the producer "
          "region has no hopper.producer_thread for it to join");
    }
    if (failed(findStep()))
      return failure();
    // (before warp 0's copies are cloned from them)
    for (Operation *op : stepOps)
      markDiverged(op);
    if (!program) {
      // warp 0: the producer thread's program, run by the whole warp
      FailureOr<ProducerWarpsOp> warp0 = runOnWarps(
          thread, 1, oneThreadLoad, passRule, "joins the V transposer");
      if (failed(warp0))
        return failure();
      program = *warp0;
    }
    worker = allWorkers ? program.getBody().getArgument(0) : Value();
    // the steps after V's fills: those that carry bytes (a words-only fill,
    // the end of the tiles, none), TMA's commits and the warps' copies
    SmallVector<std::pair<Operation *, Value>> fills;
    program.walk([&](Operation *op) {
      if (auto c = dyn_cast<RingProducerCommitOp>(op);
          c && c.getRing() == transpose.getSrc() && c.getTx() != 0)
        fills.push_back({op, c.getSlot()});
      if (auto c = dyn_cast<CopyPagedTileOp>(op);
          c && c.getRing() == transpose.getSrc())
        fills.push_back({op, c.getSlot()});
    });
    // one step a fill site: the op of the kv loop's body (or of the
    // program's body, outside loops) that holds the fill: the fill itself,
    // a producer_thread, or a branch each of whose paths fills V (one
    // slot), one site a loop body (two would transpose each slot twice)
    llvm::MapVector<Block *, std::pair<Operation *, Value>> sites;
    for (auto [fill, slot] : fills) {
      auto loop = fill->getParentOfType<LoopLikeOpInterface>();
      const bool inLoop = loop && program->isAncestor(loop);
      if (inLoop && !isa<scf::ForOp>(loop.getOperation()))
        return fill->emitOpError(
            "fills V in a loop other than an scf.for, whose iterations the "
            "transposer's step cannot follow one behind");
      Block *blk = inLoop ? cast<scf::ForOp>(loop.getOperation()).getBody()
                          : &program.getBody().front();
      Operation *site = blk->findAncestorOpInBlock(*fill);
      if (failed(checkSite(site, fill, fills)))
        return failure();
      auto [it, fresh] = sites.insert({blk, {site, slot}});
      if (!fresh && it->second.first != site)
        return fill->emitOpError(
            "fills V at a second place of one loop body (or of the "
            "program): a step after each would transpose its slot twice");
      if (!fresh && it->second.second != slot)
        return fill->emitOpError(
            "fills another slot of V than a fill beside it (another path "
            "of the same op), whose one step follows both");
    }
    if (sites.empty())
      return transposer.emitOpError(
          "transposes V, but the program of the warps that would join it "
          "holds no fill of V (a commit carrying bytes, or a copy of pages) "
          "for its step to follow");
    for (auto &[blk, at] : sites)
      if (failed(placeSteps(at.first, at.second)))
        return failure();
    if (allWorkers)
      transposer.erase();
    return success();
  }

private:
  WarpSpecializeOp ws;
  TransposeStageOp transpose;
  ProducerWarpsOp transposer;
  /// The transposer loop's step for one slot: its wait for V's slot (an
  /// scf.while's, in its condition region) and the ops of its body.
  RingConsumerWaitOp wait;
  Value slotArg;           // the body's slot (scf.while: its argument)
  Value waitSlotArg;       // the wait's slot (scf.while: the before arg)
  SmallVector<Operation *> stepOps;
  Block *stepBody = nullptr; // the loop body holding the transpose
  /// The program's warps are all the workers (the copying warps 0 .. 3):
  /// each its own warp's index, the transposed slot's commit in the step,
  /// the transposer's loop erased. Else warp 0 is worker 0.
  bool allWorkers = false;
  Value worker; // with allWorkers, the program's warp index

  /// A fill site holds the fill on every path: the fill itself, a
  /// producer_thread, or an scf.if with an else whose regions each hold a
  /// fill of V (the decoding kernel's copied pages, boxes, contiguous
  /// cache).
  LogicalResult
  checkSite(Operation *site, Operation *fill,
            ArrayRef<std::pair<Operation *, Value>> fills) {
    if (site == fill || isa<ProducerThreadOp>(site))
      return success();
    auto branch = dyn_cast<scf::IfOp>(site);
    auto holdsFill = [&](Region &r) {
      return llvm::any_of(fills, [&](auto f) {
        return r.isAncestor(f.first->getParentRegion());
      });
    };
    if (branch && !branch.getElseRegion().empty() &&
        holdsFill(branch.getThenRegion()) && holdsFill(branch.getElseRegion()))
      return success();
    return fill->emitOpError("fills V inside a ")
           << site->getName()
           << " that does not fill it on every path (a fill, a "
              "hopper.producer_thread, or an scf.if each of whose branches "
              "fills V): one step after it would wait for a slot not filled";
  }

  LogicalResult findStep() {
    Operation *loop = transpose->getParentOp();
    stepBody = transpose->getBlock();
    if (auto w = dyn_cast<scf::WhileOp>(loop)) {
      for (Operation &op : w.getBeforeBody()->without_terminator())
        if (auto cw = dyn_cast<RingConsumerWaitOp>(op);
            cw && cw.getRing() == transpose.getSrc())
          wait = cw;
      if (!wait || wait.getSlot() != w.getBeforeArguments().front() ||
          transpose.getSlot() != w.getAfterArguments().front())
        return transpose.emitOpError(
            "stands in a loop whose first argument is not the slot it and "
            "its wait for V take");
      waitSlotArg = w.getBeforeArguments().front();
      slotArg = w.getAfterArguments().front();
    } else if (auto f = dyn_cast<scf::ForOp>(loop)) {
      slotArg = f.getInductionVar();
      if (transpose.getSlot() != slotArg)
        return transpose.emitOpError(
            "stands in a loop whose induction variable is not its slot");
    } else {
      return transpose.emitOpError(
          "is not in an scf.while or scf.for over the slots, which warp 0's "
          "program would follow");
    }
    Operation *terminator = stepBody->getTerminator();
    for (Operation &op : stepBody->without_terminator()) {
      // (the next slot's index only feeds the loop)
      bool onlyNext = isPure(&op) && !op.use_empty() &&
                      llvm::all_of(op.getUsers(), [&](Operation *u) {
                        return u == terminator;
                      });
      // (the transposed slot's commit is one thread's of warps 1 .. 3)
      bool commit = false;
      if (auto branch = dyn_cast<scf::IfOp>(op))
        branch.walk([&](RingProducerCommitOp c) {
          commit |= c.getRing() == transpose.getDst();
        });
      if (!onlyNext && (!commit || allWorkers))
        stepOps.push_back(&op);
    }
    // what the step reads of the transposer warps' own is refused here,
    // not as a dominance error later
    for (Operation *op : stepOps) {
      llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
      for (Region &r : op->getRegions())
        getUsedValuesDefinedAbove(r, used);
      for (Value v : used) {
        Operation *def = v.getDefiningOp();
        if (def && def->getBlock() == stepBody)
          continue; // another op of the step, cloned with it
        if (ownValue(v))
          return transpose.emitOpError(
              "has a step that reads a value of the transposer warps' own "
              "(their index, a loop value or a result with effects), which "
              "warp 0 does not have");
      }
    }
    return success();
  }

  /// Whether `v` is the transposer warps' own: their index or another
  /// argument of their region or loop (not the slot), or computed from one
  /// or by an op with effects. The worker index is replaced, not read.
  bool ownValue(Value v) {
    if (v == transpose.getWorker() || v == slotArg || v == waitSlotArg)
      return false;
    Operation *def = v.getDefiningOp();
    if (!def)
      return transposer->isAncestor(v.getParentRegion()->getParentOp());
    if (!transposer->isAncestor(def))
      return false;
    if (!isPure(def) || def->getNumRegions() != 0)
      return true;
    return llvm::any_of(def->getOperands(),
                        [&](Value o) { return ownValue(o); });
  }

  /// A value the cloned step uses: mapped, defined outside the transposer
  /// (the rings, constants above the roles), or a pure op of the
  /// transposer above its loop, cloned.
  Value materialize(OpBuilder &b, Value v, IRMapping &map) {
    if (Value m = map.lookupOrNull(v))
      return m;
    Operation *def = v.getDefiningOp();
    if (!def || !transposer->isAncestor(def))
      return v;
    for (Value o : def->getOperands())
      materialize(b, o, map);
    Operation *c = b.clone(*def, map);
    return c->getResult(cast<OpResult>(v).getResultNumber());
  }

  void emitStep(OpBuilder &b, Value slot) {
    IRMapping map;
    // worker 0, or the copying warp's index (the loop warps' index + 1 is
    // not cloned)
    map.map(transpose.getWorker(),
            worker ? worker
                   : arith::ConstantIntOp::create(b, transpose.getLoc(), 0,
                                                  32)
                         .getResult());
    map.map(slotArg, slot);
    auto cloneWithOperands = [&](Operation *op) {
      llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
      for (Region &r : op->getRegions())
        getUsedValuesDefinedAbove(r, used);
      for (Value v : used)
        materialize(b, v, map);
      b.clone(*op, map);
    };
    if (wait) {
      map.map(waitSlotArg, slot);
      cloneWithOperands(wait);
    }
    for (Operation *op : stepOps)
      cloneWithOperands(op);
  }

  /// The transposers' meeting without .aligned, in each copy of the step
  /// (warp 0's and warps 1 .. 3's, or the copying warps'): an .aligned
  /// barrier needs every thread that takes part to execute the same
  /// instruction (PTX ISA, barrier),
  /// and warp 0's is another one, which its lanes may also reach apart
  /// (they part at the producer thread's steps). compute-sanitizer
  /// synccheck reports either as "divergent thread(s) in block".
  static void markDiverged(Operation *root) {
    root->walk([](Operation *o) {
      if (auto s = dyn_cast<NamedBarrierSyncOp>(o))
        s.setDiverged(true);
      else if (auto a = dyn_cast<NamedBarrierArriveOp>(o))
        a.setDiverged(true);
    });
  }

  /// The steps for the slots `u` that the fill site `site` fills.
  LogicalResult placeSteps(Operation *site, Value u) {
    Location loc = site->getLoc();
    OpBuilder b(site->getContext());
    b.setInsertionPointAfter(site);
    auto loop = dyn_cast<scf::ForOp>(site->getParentOp());
    if (!loop) {
      emitStep(b, u);
      return success();
    }
    // One behind needs consecutive slots, one a fill of every iteration:
    // u = iv + (a value of before the loop), step 1, the fill in the
    // loop's body itself.
    auto isIv = [&](Value v) { return v == loop.getInductionVar(); };
    auto before = [&](Value v) {
      return !loop->isAncestor(v.getParentRegion()->getParentOp());
    };
    auto add = u.getDefiningOp<arith::AddIOp>();
    bool consecutive =
        isIv(u) || (add && add->getBlock() == loop.getBody() &&
                    ((isIv(add.getLhs()) && before(add.getRhs())) ||
                     (isIv(add.getRhs()) && before(add.getLhs()))));
    std::optional<int64_t> step = getConstantIntValue(loop.getStep());
    if (!step || *step != 1 || !consecutive)
      return site->emitOpError(
          "fills V in a loop whose iterations the transposer's step cannot "
          "follow one behind: it needs step 1 and the slot the induction "
          "variable plus a value from before the loop");
    // the previous iteration's slot, after every fill but the first
    Value notFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                           loop.getInductionVar(),
                                           loop.getLowerBound());
    auto later = scf::IfOp::create(b, loc, TypeRange{}, notFirst,
                                   /*withElseRegion=*/false);
    b.setInsertionPoint(later.thenBlock()->getTerminator());
    Value one = arith::ConstantIntOp::create(b, loc, 1, 32);
    emitStep(b, arith::SubIOp::create(b, loc, u, one));
    // the last iteration's, after the loop: the slot's arithmetic again
    // with the induction variable at upper bound - step (the loop runs
    // at least once where ub > lb)
    b.setInsertionPointAfter(loop);
    Value ran = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      loop.getLowerBound(),
                                      loop.getUpperBound());
    auto after = scf::IfOp::create(b, loc, TypeRange{}, ran,
                                   /*withElseRegion=*/false);
    b.setInsertionPoint(after.thenBlock()->getTerminator());
    IRMapping map;
    map.map(loop.getInductionVar(),
            arith::SubIOp::create(b, loc, loop.getUpperBound(),
                                  loop.getStep()));
    FailureOr<Value> last = recompute(b, u, loop, map);
    if (failed(last))
      return site->emitOpError(
          "fills a slot of V whose index the transposer's step cannot "
          "compute again after its loop (it is not arithmetic of the "
          "induction variable and values defined before the loop)");
    emitStep(b, *last);
    return success();
  }

  /// `v` (defined in `loop`'s body) computed again after the loop from
  /// `map`'s induction variable: pure ops of the body whose other operands
  /// are defined before the loop.
  FailureOr<Value> recompute(OpBuilder &b, Value v, scf::ForOp loop,
                             IRMapping &map) {
    if (Value m = map.lookupOrNull(v))
      return m;
    if (!loop->isProperAncestor(v.getParentRegion()->getParentOp()) &&
        v.getParentRegion() != &loop.getRegion())
      return v; // defined before the loop
    Operation *def = v.getDefiningOp();
    if (!def || !isPure(def) || def->getNumRegions() != 0 ||
        def->getBlock() != loop.getBody())
      return failure();
    for (Value o : def->getOperands())
      if (failed(recompute(b, o, loop, map)))
        return failure();
    Operation *copy = b.clone(*def, map);
    return copy->getResult(cast<OpResult>(v).getResultNumber());
  }
};

struct HopperProducerWarpTransposePass
    : public fa3::hopper::impl::HopperProducerWarpTransposeBase<
          HopperProducerWarpTransposePass> {
  void runOnOperation() override {
    SmallVector<WarpSpecializeOp> all;
    getOperation()->walk([&](WarpSpecializeOp ws) { all.push_back(ws); });
    for (WarpSpecializeOp ws : all)
      if (failed(Merger(ws).run()))
        return signalPassFailure();
  }
};

} // namespace
