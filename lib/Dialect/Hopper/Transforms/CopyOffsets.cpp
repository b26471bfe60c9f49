//===- CopyOffsets.cpp - a paged copy's page loads before its slot's wait -===//
//
// hopper.copy_paged_tile stands right after its slot's acquire (its fill,
// as hopper-warp-specialize wrote it), so its page-table loads wait for the
// empty slot and the copies then wait for them: ncu put a quarter of the
// decoding kernel's warp samples at pages of one row on the first use of a
// loaded entry. This pass splits each copy into hopper.paged_offsets and
// the copy of those offsets, moves the offsets before the acquire where
// their operands allow, and lets a block's V take its K's offsets (the
// same rows of the same page table, under the same strides). Before the
// wait alone gained nothing (the slot is mostly free: the load's latency
// still stood before the copy); one block ahead (the default) lifted bf16
// decoding at pages of 1-8 rows from 0.87-0.88 to 0.95-0.96 of the
// contiguous cache (bench/NOTES.md, Log). Only copies whose lanes each
// load one entry are split: FP8's copies by warp 0 alone (four entries a
// lane) spilled 64 bytes in its producer with them carried and ran at 0.47
// of the contiguous cache against 0.62.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERCOPYOFFSETS
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {

/// The acquire of `copy`'s ring and slot before it: in its block or an
/// enclosing one inside `role`, the nearest such acquire before the copy
/// or before the op that holds it.
RingProducerAcquireOp acquireBefore(CopyPagedTileOp copy, Operation *role) {
  for (Operation *at = copy; at && at != role; at = at->getParentOp())
    for (Operation *p = at->getPrevNode(); p; p = p->getPrevNode())
      if (auto a = dyn_cast<RingProducerAcquireOp>(p);
          a && a.getRing() == copy.getRing() && a.getSlot() == copy.getSlot())
        return a;
  return {};
}

/// Whether two offsets ops compute the same values.
bool sameOffsets(PagedOffsetsOp a, PagedOffsetsOp b) {
  return a->getOperands() == b->getOperands() &&
         a->getAttrDictionary() == b->getAttrDictionary() &&
         a.getNumResults() == b.getNumResults();
}

struct HopperCopyOffsetsPass
    : public fa3::hopper::impl::HopperCopyOffsetsBase<HopperCopyOffsetsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<CopyPagedTileOp> copies;
    getOperation()->walk([&](CopyPagedTileOp c) {
      if (c.getOffsets().empty() && c->getParentOfType<ProducerWarpsOp>() &&
          PagedOffsetsOp::entriesFor(c.getRowsPerWarp()) == 1)
        copies.push_back(c);
    });
    for (CopyPagedTileOp c : copies)
      split(c);
    if (!ahead)
      return;
    SmallVector<PagedOffsetsOp> offsets;
    getOperation()->walk([&](PagedOffsetsOp o) { offsets.push_back(o); });
    for (PagedOffsetsOp o : offsets)
      loadAhead(o);
  }

  /// The ops of `loop`'s body that compute `v` from its induction variable
  /// and values defined outside it, in order; none if another value (a
  /// loop-carried one, an op with effects or regions) enters.
  static bool sliceOf(scf::ForOp loop, Value v,
                      llvm::SetVector<Operation *> &slice) {
    if (loop.isDefinedOutsideOfLoop(v) || v == loop.getInductionVar())
      return true;
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != loop.getBody() ||
        def->getNumRegions() != 0 || !isMemoryEffectFree(def))
      return false;
    if (slice.contains(def))
      return true;
    for (Value operand : def->getOperands())
      if (!sliceOf(loop, operand, slice))
        return false;
    slice.insert(def);
    return true;
  }

  /// Offsets in a loop's body, from its induction variable: the next
  /// iteration's loaded where this one's were, carried into it, and the
  /// first iteration's before the loop (a loop-carried value a lane).
  void loadAhead(PagedOffsetsOp offsets) {
    auto loop = dyn_cast<scf::ForOp>(offsets->getParentOp());
    if (!loop)
      return;
    llvm::SetVector<Operation *> slice;
    for (OpOperand &operand : offsets->getOpOperands())
      if (operand.get() != offsets.getRow() &&
          !loop.isDefinedOutsideOfLoop(operand.get()))
        return;
    if (!sliceOf(loop, offsets.getRow(), slice))
      return;
    // the first iteration's, before the loop
    OpBuilder b(loop);
    IRMapping first;
    first.map(loop.getInductionVar(), loop.getLowerBound());
    for (Operation *op : slice)
      b.clone(*op, first);
    Operation *firstOffsets = b.clone(*offsets, first);
    IRRewriter rewriter(loop.getContext());
    FailureOr<LoopLikeOpInterface> carried = loop.replaceWithAdditionalYields(
        rewriter, firstOffsets->getResults(),
        /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &, Location loc,
            ArrayRef<BlockArgument> args) -> SmallVector<Value> {
          // the next iteration's, where this one's stood
          OpBuilder at(offsets);
          auto body = cast<scf::ForOp>(offsets->getParentOp());
          Value next = arith::AddIOp::create(at, loc, body.getInductionVar(),
                                             body.getStep());
          IRMapping toNext;
          toNext.map(body.getInductionVar(), next);
          for (Operation *op : slice)
            at.clone(*op, toNext);
          Operation *nextOffsets = at.clone(*offsets, toNext);
          for (auto [old, arg] : llvm::zip(offsets->getResults(), args))
            old.replaceAllUsesWith(arg);
          return SmallVector<Value>(nextOffsets->getResults());
        });
    if (succeeded(carried))
      offsets->erase();
  }

  /// The bases of the copies of `role`'s program, where each comes from
  /// above it (a kernel parameter): with only-when-copying the offsets
  /// read the page table only where the launch gives one (else it runs no
  /// copy: it boxes its pages, or its cache is contiguous, and a boxing
  /// producer loading the copies' entries on every fill's path ran the
  /// paged packed batch's kernel 1-7 % slower with pages of 256 rows;
  /// bench/NOTES.md, Log). All of them, in the program's order, so that
  /// K's and V's offsets stay alike (and merge).
  static SmallVector<Value> basesOf(ProducerWarpsOp role) {
    llvm::SetVector<Value> bases;
    role.walk([&](CopyPagedTileOp c) { bases.insert(c.getBase()); });
    if (llvm::any_of(bases, [&](Value v) {
          return role->isAncestor(v.getParentBlock()->getParentOp());
        }))
      return {};
    return SmallVector<Value>(bases.begin(), bases.end());
  }

  void split(CopyPagedTileOp copy) {
    auto role = copy->getParentOfType<ProducerWarpsOp>();
    OpBuilder b(copy);
    SmallVector<Type> types(PagedOffsetsOp::resultsFor(copy.getRowsPerWarp()),
                            b.getI32Type());
    auto offsets = PagedOffsetsOp::create(
        b, copy.getLoc(), types, copy.getPages(), copy.getRow(),
        copy.getPageSize(), copy.getPoolPages(), copy.getBound(),
        copy.getStridePage(), copy.getStrideRow(), copy.getWarp(),
        onlyWhenCopying ? basesOf(role) : SmallVector<Value>(),
        copy.getRows(), copy.getRowsPerPass(), copy.getWarps());
    copy.getOffsetsMutable().assign(offsets.getResults());
    RingProducerAcquireOp acquire = acquireBefore(copy, role);
    if (!acquire)
      return;
    DominanceInfo dom(role);
    for (Value v : offsets->getOperands())
      if (!dom.properlyDominates(v, acquire))
        return;
    offsets->moveBefore(acquire);
    for (Operation *p = offsets->getPrevNode(); p; p = p->getPrevNode())
      if (auto earlier = dyn_cast<PagedOffsetsOp>(p);
          earlier && sameOffsets(earlier, offsets)) {
        offsets->replaceAllUsesWith(earlier.getResults());
        offsets->erase();
        return;
      }
  }
};

} // namespace
