//===- Overlap.cpp - softmax of block t beside P V of block t - 1 ---------===//
//
// FA3's intra-warpgroup overlap as a software pipeline of two stages. A
// consumer's kv loop marked `hopper.overlap` computes, per block t,
//   stage 0: S_t = Q K_t^T, its softmax step, P_t, O *= alpha_t
//   stage 1: O += P_t V_t (the `hopper.wgmma.rs`, the descriptor arithmetic
//            only it needs, the V ring slot's wait and release)
// and carries O. The pipelined loop issues P_{t-1} V_{t-1} in the same
// wgmma window as S_t and waits for it only where block t first uses O
// (after the softmax), so the exponentials of block t run while the tensor
// cores compute P_{t-1} V_{t-1}:
//   prologue   stage 0 of block 0 (from the initial state: a stateless
//              softmax step, no rescale of the zero O)
//   loop t>=1  stage 0 of block t, with stage 1 of block t - 1 merged in
//   tail       stage 1 of the last block, at the first use of O
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPEROVERLAP
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {
using Fence = NVVM::WgmmaFenceAlignedOp;

/// The loop's body split into its two stages.
struct Stages {
  WgmmaRSOp mma;      // stage 1's product, O += P V
  Fence fence;        // the fence that opens its issue window
  WgmmaWaitOp wait;   // its wait, whose result the body yields as O
  unsigned accArg;    // O's iter arg
  /// Stage 1's other ops, in body order: the arithmetic only the product
  /// needs (its descriptor), the waits and releases of its ring slots.
  SmallVector<Operation *> address, ringWaits, releases;
  llvm::SmallPtrSet<Operation *, 16> stage1;
  /// Stage-0 values stage 1 reads, besides the accumulator: carried from
  /// the previous iteration, or (x + iv, x invariant) recomputed as v - step.
  SmallVector<Value> carried, shifted;
  /// Stage 0's issue window (its fence and last wgmma), which the product
  /// joins, and the stage-0 waits that then see one more group in flight.
  Fence window;
  Operation *windowEnd = nullptr;
  SmallVector<WgmmaWaitOp> bumped;
};

bool isIssue(Operation *op) { return isa<WgmmaSSOp, WgmmaRSOp>(op); }

/// `v` is x + iv with x defined outside the loop.
bool isShiftedIv(Value v, scf::ForOp loop) {
  auto add = v.getDefiningOp<arith::AddIOp>();
  if (!add || add->getParentOp() != loop)
    return false;
  Value iv = loop.getInductionVar();
  Value other = add.getLhs() == iv ? add.getRhs()
                : add.getRhs() == iv ? add.getLhs()
                                     : Value();
  return other && !loop->isAncestor(other.getParentBlock()->getParentOp());
}

/// The ancestor of `op` in `block`, or null.
Operation *inBlock(Operation *op, Block *block) {
  return block->findAncestorOpInBlock(*op);
}

FailureOr<Stages> analyze(scf::ForOp loop) {
  Block *body = loop.getBody();
  Stages s;
  auto fail = [&](const Twine &why) {
    return loop.emitOpError("cannot overlap this loop: ") << why;
  };
  // The P V product accumulates into O; an S = Q K^T with Q in registers
  // is a wgmma.rs too, but starts from hopper.zero.
  auto mmas = llvm::to_vector(llvm::make_filter_range(
      body->getOps<WgmmaRSOp>(), [](WgmmaRSOp op) {
        return !op.getC().getDefiningOp<FragmentZeroOp>();
      }));
  if (mmas.size() != 1)
    return fail("its body must hold one accumulating hopper.wgmma.rs (the "
                "P V product), has ")
           << mmas.size();
  s.mma = mmas.front();
  s.fence = dyn_cast_or_null<Fence>(s.mma->getPrevNode());
  if (!s.fence)
    return fail("the P V product must follow the nvvm.wgmma.fence.aligned "
                "that opens its window");
  Value d = s.mma.getD();
  s.wait = d.hasOneUse() ? dyn_cast<WgmmaWaitOp>(*d.user_begin()) : nullptr;
  if (!s.wait || s.wait->getBlock() != body || s.wait.getFragments().size() != 1 ||
      s.wait.getPending() != 0)
    return fail("the P V product must be waited for by one hopper.wgmma.wait "
                "0 of it alone");
  Value o = s.wait.getReady()[0];
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  if (!o.hasOneUse() || *o.user_begin() != yield.getOperation())
    return fail("O after the P V product must be yielded and used nowhere "
                "else");
  s.accArg = o.use_begin()->getOperandNumber();
  Value acc = s.mma.getC();
  if (!acc.getDefiningOp() || acc.getDefiningOp()->getBlock() != body)
    return fail("the P V product's accumulator must be computed in the body "
                "(O of the previous block, rescaled)");

  // Stage 1: the product, its fence and wait, the arithmetic only its
  // descriptor needs, and the ring slots that arithmetic addresses.
  s.stage1.insert({s.mma, s.fence, s.wait});
  SmallVector<Operation *> work;
  if (Operation *def = s.mma.getDescB().getDefiningOp())
    work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (op->getBlock() != body || s.stage1.contains(op) ||
        op->getNumRegions() != 0 ||
        !(isMemoryEffectFree(op) || isa<RingStageOp>(op)))
      continue;
    if (!llvm::all_of(op->getUsers(),
                      [&](Operation *u) { return s.stage1.contains(u); }))
      continue;
    s.stage1.insert(op);
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  SmallVector<std::pair<Value, Value>> slots;
  for (Operation &op : *body)
    if (s.stage1.contains(&op) && !isa<WgmmaRSOp, Fence, WgmmaWaitOp>(op)) {
      s.address.push_back(&op);
      if (auto st = dyn_cast<RingStageOp>(op))
        slots.push_back({st.getRing(), st.getSlot()});
    }
  auto isSlot = [&](Value ring, Value slot) {
    return llvm::is_contained(slots, std::make_pair(ring, slot));
  };
  for (Operation &op : *body) {
    if (auto w = dyn_cast<RingConsumerWaitOp>(op); w && isSlot(w.getRing(), w.getSlot())) {
      if (!w->isBeforeInBlock(s.fence))
        return fail("the wait for the P V product's ring slot must come "
                    "before its window");
      s.ringWaits.push_back(w);
    }
    if (auto r = dyn_cast<RingConsumerReleaseOp>(op); r && isSlot(r.getRing(), r.getSlot())) {
      if (!s.wait->isBeforeInBlock(r))
        return fail("the P V product's ring slot must be released after "
                    "its wait");
      s.releases.push_back(r);
    }
  }
  if (slots.empty())
    return fail("the P V product's descriptor must be computed from a ring "
                "slot (hopper.ring.stage) for it alone, whose wait and "
                "release move with it");
  if (s.ringWaits.size() != slots.size() || s.releases.size() != slots.size())
    return fail("each ring slot the P V product reads needs one "
                "hopper.ring.consumer_wait and one consumer_release");
  for (Operation *op : s.ringWaits)
    s.stage1.insert(op);
  for (Operation *op : s.releases)
    s.stage1.insert(op);

  // What stage 1 reads from stage 0 (of the same block).
  for (Operation &op : *body) {
    if (!s.stage1.contains(&op))
      continue;
    for (Value v : op.getOperands()) {
      if (v == acc || (v.getDefiningOp() && s.stage1.contains(v.getDefiningOp())))
        continue;
      if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == body)
        return fail("stage 1 (the P V product) may not read the loop's "
                    "induction variable or state directly");
      if (!v.getDefiningOp() || v.getDefiningOp()->getBlock() != body)
        continue; // defined outside the loop
      SmallVector<Value> &list = isShiftedIv(v, loop) ? s.shifted : s.carried;
      if (!llvm::is_contained(list, v))
        list.push_back(v);
    }
  }

  // Stage 0's issue window, which the product joins.
  for (Operation &op : *body) {
    auto f = dyn_cast<Fence>(op);
    if (!f || s.stage1.contains(f) || !f->getNextNode() ||
        !isIssue(f->getNextNode()))
      continue;
    s.window = f;
    for (Operation *n = f->getNextNode(); n && isIssue(n); n = n->getNextNode())
      s.windowEnd = n;
    break;
  }
  if (!s.window)
    return fail("stage 0 has no wgmma issue window (a fence followed by "
                "hopper.wgmma.ss/rs) for the P V product to join");
  // O's first use in the body: until then the product is in flight.
  Value accIn = loop.getRegionIterArg(s.accArg);
  Operation *firstUse = nullptr;
  for (Operation *u : accIn.getUsers()) {
    Operation *top = inBlock(u, body);
    if (s.stage1.contains(top))
      return fail("stage 1 may not read O's loop state");
    if (!firstUse || top->isBeforeInBlock(firstUse))
      firstUse = top;
  }
  if (!firstUse || firstUse->isBeforeInBlock(s.windowEnd))
    return fail("O must first be used after stage 0's wgmma window (where "
                "the previous block's P V product is waited for)");
  for (Operation *op = s.windowEnd->getNextNode(); op != firstUse;
       op = op->getNextNode()) {
    // The waits in between then see exactly one more group in flight.
    bool issues = false;
    op->walk([&](Operation *inner) {
      issues |= !s.stage1.contains(inner) && (isIssue(inner) || isa<Fence>(inner));
    });
    if (issues)
      return fail("stage 0 issues more wgmma before O's first use than its "
                  "first window; only that window can take the P V product");
    auto w = dyn_cast<WgmmaWaitOp>(op);
    if (!w || s.stage1.contains(w))
      continue;
    if (w.getPending() >= 7)
      return fail("a wgmma.wait would wait for more than 7 groups");
    s.bumped.push_back(w);
  }
  return s;
}

/// `cond` is ub > lb of `loop`: the loop runs at least once.
bool guardsOneIteration(Value cond, scf::ForOp loop) {
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return false;
  auto same = [](Value a, Value b) {
    APInt x, y;
    return a == b || (matchPattern(a, m_ConstantInt(&x)) &&
                      matchPattern(b, m_ConstantInt(&y)) && x == y);
  };
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound();
  using P = arith::CmpIPredicate;
  return (cmp.getPredicate() == P::sgt && same(cmp.getLhs(), ub) &&
          same(cmp.getRhs(), lb)) ||
         (cmp.getPredicate() == P::slt && same(cmp.getLhs(), lb) &&
          same(cmp.getRhs(), ub));
}

bool isZero(Value v) { return v.getDefiningOp<FragmentZeroOp>() != nullptr; }

bool isNegInfFill(Value v) {
  auto fill = v.getDefiningOp<FragmentFillOp>();
  FloatAttr f;
  return fill && matchPattern(fill.getValue(), m_Constant(&f)) &&
         f.getValue().isInfinity() && f.getValue().isNegative();
}

/// `c` is `acc` scaled by rows, or so in every arm of an scf.if: zero when
/// `acc` is zero.
bool isRescaleOf(Value c, Value acc) {
  if (c == acc)
    return true;
  if (auto sr = c.getDefiningOp<ScaleRowsOp>())
    return sr.getTile() == acc;
  auto ifOp = c.getDefiningOp<scf::IfOp>();
  if (!ifOp || ifOp->getNumResults() != 1 || ifOp.getElseRegion().empty())
    return false;
  for (Region *r : {&ifOp.getThenRegion(), &ifOp.getElseRegion()}) {
    Block &b = r->front();
    Value y = cast<scf::YieldOp>(b.getTerminator()).getOperand(0);
    if (!isRescaleOf(y, acc) || b.getOperations().size() > 2)
      return false;
  }
  return true;
}

struct HopperOverlapPass
    : public fa3::hopper::impl::HopperOverlapBase<HopperOverlapPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation()->walk([&](scf::ForOp loop) {
      if (loop->hasAttr(kOverlapAttr))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops)
      if (failed(pipeline(loop)))
        return signalPassFailure();
  }

  LogicalResult pipeline(scf::ForOp loop);
};

LogicalResult HopperOverlapPass::pipeline(scf::ForOp loop) {
  auto guard = dyn_cast<scf::IfOp>(loop->getParentOp());
  if (!guard || loop->getParentRegion() != &guard.getThenRegion() ||
      !guardsOneIteration(guard.getCondition(), loop))
    return loop.emitOpError("cannot overlap this loop: its first block is "
                            "peeled, so it must run at least once (put it in "
                            "an scf.if on ub > lb)");
  if (!matchPattern(loop.getStep(), m_One()))
    return loop.emitOpError("cannot overlap this loop: its step must be 1 "
                            "(the tail is the iteration ub - 1)");
  FailureOr<Stages> st = analyze(loop);
  if (failed(st))
    return failure();
  Stages &s = *st;
  Block *body = loop.getBody();
  Value iv = loop.getInductionVar(), step = loop.getStep();
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound();
  Value acc = s.mma.getC();
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto stage0 = [&](Operation &op) {
    return !s.stage1.contains(&op) && !isa<scf::YieldOp>(op);
  };
  auto initOf = [&](Value iterArg) {
    return loop.getInits()[cast<BlockArgument>(iterArg).getArgNumber() - 1];
  };

  // ---- prologue: stage 0 of the first block, from the initial state ----
  IRMapping pro;
  pro.map(iv, lb);
  for (auto [arg, init] : llvm::zip(loop.getRegionIterArgs(), loop.getInits()))
    pro.map(arg, init);
  bool lbZero = matchPattern(lb, m_Zero());
  // O starts at zero, which the rows' rescale leaves zero: the prologue
  // skips it (and the vote that guards it).
  Value accIn = loop.getRegionIterArg(s.accArg);
  llvm::SmallPtrSet<Operation *, 4> skip;
  if (isZero(initOf(accIn)) && isRescaleOf(acc, accIn) && acc != accIn) {
    skip.insert(acc.getDefiningOp());
    bool grew = true;
    while (grew) {
      grew = false;
      for (Operation &op : *body)
        if (stage0(op) && !skip.contains(&op) && !op.use_empty() &&
            llvm::all_of(op.getUsers(), [&](Operation *u) {
              return skip.contains(inBlock(u, body));
            })) {
          skip.insert(&op);
          grew = true;
        }
    }
    pro.map(acc, initOf(accIn));
  }
  for (Operation &op : *body) {
    if (!stage0(op) || skip.contains(&op))
      continue;
    if (auto add = dyn_cast<arith::AddIOp>(op); add && lbZero &&
        isShiftedIv(add.getResult(), loop)) {
      // x + 0
      Value x = add.getLhs() == iv ? add.getRhs() : add.getLhs();
      pro.map(add.getResult(), x);
      continue;
    }
    auto sm = dyn_cast<SoftmaxStepOp>(op);
    if (sm && sm.getMOld() && isa<BlockArgument>(sm.getMOld()) &&
        isa<BlockArgument>(sm.getLOld()) &&
        cast<BlockArgument>(sm.getMOld()).getOwner() == body &&
        cast<BlockArgument>(sm.getLOld()).getOwner() == body &&
        isNegInfFill(initOf(sm.getMOld())) && isZero(initOf(sm.getLOld()))) {
      // The row's first block: m = -inf and l = 0 are the stateless step.
      auto first = SoftmaxStepOp::create(
          b, sm.getLoc(), sm->getResultTypes(), pro.lookupOrDefault(sm.getScores()),
          pro.lookupOrDefault(sm.getScale()), Value(), Value(), b.getF64FloatAttr(0.0));
      pro.map(sm->getResults(), first->getResults());
      continue;
    }
    b.clone(op, pro);
  }

  // ---- the loop from the second block: stage 0 of t, stage 1 of t - 1 ----
  SmallVector<Value> inits;
  auto oldYield = cast<scf::YieldOp>(body->getTerminator());
  for (auto [i, y] : llvm::enumerate(oldYield.getOperands()))
    inits.push_back(pro.lookupOrDefault(i == s.accArg ? acc : y));
  for (Value v : s.carried)
    inits.push_back(pro.lookupOrDefault(v));
  Value lb1 = lbZero ? step : arith::AddIOp::create(b, loc, lb, step).getResult();
  auto lp = scf::ForOp::create(b, loc, lb1, ub, step, inits);
  for (NamedAttribute a : loop->getDiscardableAttrs())
    if (a.getName() != kOverlapAttr)
      lp->setAttr(a.getName(), a.getValue());
  lp.setUnsignedCmp(loop.getUnsignedCmp());
  Block *nb = lp.getBody();
  unsigned nOld = loop.getNumRegionIterArgs();
  IRMapping m0, m1;
  m0.map(iv, lp.getInductionVar());
  for (unsigned i = 0; i < nOld; ++i)
    if (i != s.accArg)
      m0.map(loop.getRegionIterArg(i), lp.getRegionIterArg(i));
  m1.map(acc, lp.getRegionIterArg(s.accArg));
  for (auto [j, v] : llvm::enumerate(s.carried))
    m1.map(v, lp.getRegionIterArg(nOld + j));
  b.setInsertionPointToEnd(nb);
  if (nb->mightHaveTerminator())
    b.setInsertionPoint(nb->getTerminator());
  bool addressDone = false;
  auto emitAddress = [&]() -> LogicalResult {
    addressDone = true;
    for (Value v : s.shifted) {
      if (!m0.contains(v))
        return loop.emitOpError("cannot overlap this loop: ")
               << "a slot of stage 1 is computed after stage 0's first ring "
                  "wait";
      Value prev = arith::SubIOp::create(b, loc, m0.lookupOrDefault(v), step);
      m1.map(v, prev);
    }
    for (Operation *op : s.address)
      b.clone(*op, m1);
    return success();
  };
  Value oRaw;
  for (Operation &op : *body) {
    if (!stage0(op))
      continue;
    if (!addressDone && (isa<RingConsumerWaitOp>(op) || &op == s.window))
      if (failed(emitAddress()))
        return failure();
    if (&op == s.window)
      for (Operation *w : s.ringWaits)
        b.clone(*w, m1);
    Operation *c = b.clone(op, m0);
    if (auto w = dyn_cast<WgmmaWaitOp>(op); w && llvm::is_contained(s.bumped, w))
      cast<WgmmaWaitOp>(c).setPending(w.getPending() + 1);
    if (&op == s.windowEnd) {
      // P_{t-1} V_{t-1} in stage 0's window; O of block t is its result.
      oRaw = b.clone(*s.mma, m1)->getResult(0);
      m0.map(accIn, oRaw);
    }
  }
  for (Operation *op : s.releases)
    b.clone(*op, m1);
  SmallVector<Value> yields;
  for (auto [i, y] : llvm::enumerate(oldYield.getOperands()))
    yields.push_back(m0.lookupOrDefault(i == s.accArg ? acc : y));
  for (Value v : s.carried)
    yields.push_back(m0.lookupOrDefault(v));
  if (nb->mightHaveTerminator())
    nb->getTerminator()->erase();
  b.setInsertionPointToEnd(nb);
  scf::YieldOp::create(b, loc, yields);
  // The wait for P_{t-1} V_{t-1} at O's first use in each block (in both
  // arms of a rescale branch: ptxas does not hoist it across the branch).
  llvm::MapVector<Block *, SmallVector<OpOperand *>> uses;
  for (OpOperand &u : oRaw.getUses())
    if (u.getOwner() != oRaw.getDefiningOp())
      uses[u.getOwner()->getBlock()].push_back(&u);
  for (auto &[blk, list] : uses) {
    Operation *first = list.front()->getOwner();
    for (OpOperand *u : list)
      if (u->getOwner()->isBeforeInBlock(first))
        first = u->getOwner();
    b.setInsertionPoint(first);
    auto w = WgmmaWaitOp::create(b, s.wait.getLoc(), s.wait.getPending(),
                                 ValueRange{oRaw});
    for (OpOperand *u : list)
      u->set(w.getReady()[0]);
  }

  // ---- tail: stage 1 of the last block, where O is first used ----
  Value oldO = loop.getResult(s.accArg);
  Operation *at = nullptr;
  for (Operation *u : oldO.getUsers()) {
    Operation *top = inBlock(u, loop->getBlock());
    if (top && (!at || top->isBeforeInBlock(at)))
      at = top;
  }
  if (at)
    b.setInsertionPoint(at);
  else
    b.setInsertionPointAfter(lp);
  IRMapping m2;
  m2.map(iv, ub);
  m2.map(acc, lp.getResult(s.accArg));
  for (auto [j, v] : llvm::enumerate(s.carried))
    m2.map(v, lp.getResult(nOld + j));
  for (Value v : s.shifted) {
    Operation *end = b.clone(*v.getDefiningOp(), m2);
    Value last = arith::SubIOp::create(b, loc, end->getResult(0), step);
    m2.map(v, last);
  }
  for (Operation &op : *body)
    if (s.stage1.contains(&op))
      b.clone(op, m2);
  Value tailO = m2.lookupOrDefault(s.wait.getReady()[0]);

  for (unsigned i = 0; i < nOld; ++i)
    loop.getResult(i).replaceAllUsesWith(i == s.accArg ? tailO
                                                       : lp.getResult(i));
  llvm::SetVector<Operation *> initDefs;
  for (Value v : loop.getInits())
    if (Operation *def = v.getDefiningOp())
      initDefs.insert(def);
  loop.erase();
  // Initial state the peeled block made redundant (m = -inf, l = 0).
  for (Operation *def : initDefs)
    if (def->use_empty() && isMemoryEffectFree(def))
      def->erase();
  return success();
}
} // namespace
