//===- CopyOffsets.cpp - a paged copy's page loads before its slot's wait -===//
//
// hopper.copy_paged_tile stands right after its slot's acquire (its fill,
// as hopper-warp-specialize wrote it), so its page-table loads wait for the
// empty slot and the copies then wait for them: ncu put a quarter of the
// decoding kernel's warp samples at pages of one row on the first use of a
// loaded entry. This pass splits each copy into hopper.paged_offsets and
// the copy of those offsets, moves the offsets before the acquire where
// their operands allow, and lets a block's V take its K's offsets (the
// same rows of the same page table, under the same strides).
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/IR/Dominance.h"

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
  void runOnOperation() override {
    SmallVector<CopyPagedTileOp> copies;
    getOperation()->walk([&](CopyPagedTileOp c) {
      if (c.getOffsets().empty() && c->getParentOfType<ProducerWarpsOp>())
        copies.push_back(c);
    });
    for (CopyPagedTileOp c : copies)
      split(c);
  }

  void split(CopyPagedTileOp copy) {
    auto role = copy->getParentOfType<ProducerWarpsOp>();
    OpBuilder b(copy);
    SmallVector<Type> types(PagedOffsetsOp::offsetsFor(copy.getRowsPerWarp()),
                            b.getI32Type());
    auto offsets = PagedOffsetsOp::create(
        b, copy.getLoc(), types, copy.getPages(), copy.getRow(),
        copy.getPageSize(), copy.getPoolPages(), copy.getBound(),
        copy.getStridePage(), copy.getStrideRow(), copy.getWarp(),
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
