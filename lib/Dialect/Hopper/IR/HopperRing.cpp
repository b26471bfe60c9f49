//===- HopperRing.cpp - the pipeline ring: type and op verifiers ----------===//
//
// What the hardware requires of a ring (HopperRingOps.td): its buffers where
// 128B-swizzled TMA boxes may land, its mbarriers 8-byte aligned with a count
// an mbarrier can hold, everything inside the CTA's shared memory and
// nothing overlapping; and of the ops on it: no commit expecting more bytes
// than a stage holds, multicast only into a ring that a cluster shares.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace fa3::hopper;

namespace {
constexpr int64_t kBarrierBytes = 8;    // an mbarrier object
constexpr int64_t kSwizzleAtom = 1024;  // 8 rows of 128 bytes (128B swizzle)
constexpr int64_t kTmaSmemAlign = 128;  // a TMA box's shared-memory address
constexpr int64_t kMaxArrivals = (int64_t(1) << 20) - 1; // mbarrier count

/// The bytes of `count` items of `size` bytes at `base`: [begin, end).
struct Span {
  const char *what;
  uint64_t begin, end;
};
Span span(const char *what, int64_t base, int64_t count, int64_t size) {
  // Saturating: a ring written by hand may hold any int64.
  bool overflow = false;
  uint64_t end = llvm::SaturatingMultiplyAdd(
      uint64_t(count), uint64_t(size), uint64_t(base), &overflow);
  return {what, uint64_t(base), end};
}
} // namespace

LogicalResult RingType::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t stages, int64_t stageBytes, int64_t data,
                               int64_t full, int64_t empty, int64_t arrivals,
                               int64_t cluster, int64_t producers) {
  if (producers < 1 || producers > kMaxArrivals)
    return emitError() << "producers must be 1 to " << kMaxArrivals
                       << " (an mbarrier's count), got " << producers;
  if (stages < 1)
    return emitError() << "a ring has at least one stage, got " << stages;
  if (stageBytes <= 0 || stageBytes % kSwizzleAtom != 0)
    return emitError() << "stage_bytes must be a positive multiple of "
                       << kSwizzleAtom
                       << " (each stage starts at a 128B-swizzle atom), got "
                       << stageBytes;
  if (data < 0 || data % kSwizzleAtom != 0)
    return emitError() << "data must be a non-negative multiple of "
                       << kSwizzleAtom << " (128B-swizzle atoms), got " << data;
  for (auto [name, off] : {std::pair<const char *, int64_t>{"full", full},
                           {"empty", empty}})
    if (off < 0 || off % kBarrierBytes != 0)
      return emitError() << name
                         << " must be a non-negative multiple of 8 (mbarriers "
                            "are 8 aligned bytes), got "
                         << off;
  if (arrivals < 1 || arrivals > kMaxArrivals)
    return emitError() << "arrivals must be 1 to " << kMaxArrivals
                       << " (an mbarrier's count), got " << arrivals;
  if (cluster != 1 && cluster != 2)
    return emitError() << "cluster must be 1, or 2 for a multicast pair, got "
                       << cluster;
  Span spans[] = {span("data buffers", data, stages, stageBytes),
                  span("full barriers", full, stages, kBarrierBytes),
                  span("empty barriers", empty, stages, kBarrierBytes)};
  for (const Span &r : spans)
    if (r.end > uint64_t(kMaxDynamicSmem))
      return emitError() << "the " << r.what << " end at byte " << r.end
                         << ", past the " << kMaxDynamicSmem
                         << " bytes of dynamic shared memory a Hopper CTA has";
  for (size_t i = 0; i < std::size(spans); ++i)
    for (size_t j = i + 1; j < std::size(spans); ++j) {
      const Span &a = spans[i], &b = spans[j];
      if (a.begin < b.end && b.begin < a.end)
        return emitError() << "the " << b.what << " [" << b.begin << ", "
                           << b.end << ") overlap the " << a.what << " ["
                           << a.begin << ", " << a.end << ")";
    }
  return success();
}

RingProducerCommitOp RingProducerCommitOp::createWhole(OpBuilder &b,
                                                       Location loc,
                                                       Value ring, Value slot,
                                                       uint64_t tx) {
  auto producers = cast<RingType>(ring.getType()).getProducers();
  return create(b, loc, ring, slot, tx, static_cast<uint64_t>(producers));
}

LogicalResult RingProducerCommitOp::verify() {
  int64_t stageBytes = getRing().getType().getStageBytes();
  if (static_cast<int64_t>(getTx()) > stageBytes)
    return emitOpError("tx ") << getTx() << " is more than a stage holds ("
                              << stageBytes << " bytes)";
  int64_t producers = getRing().getType().getProducers();
  if (static_cast<int64_t>(getCount()) > producers)
    return emitOpError("arrives ")
           << getCount() << " times, but the ring's full barrier counts "
           << producers << " producers a stage";
  return success();
}

LogicalResult TmaLoadOp::verify() {
  size_t rank = getCoords().size();
  if (rank < 1 || rank > 5)
    return emitOpError("a TMA box has 1 to 5 coordinates, got ") << rank;
  RingType ring = getRing().getType();
  if (std::optional<uint64_t> mask = getMulticast()) {
    if (ring.getCluster() == 1)
      return emitOpError("multicast needs a ring shared by a 2-CTA cluster "
                         "(cluster = 2), not cluster = 1");
    if (*mask >= (uint64_t(1) << ring.getCluster()))
      return emitOpError("multicast mask ")
             << *mask << " names a CTA outside the ring's cluster of "
             << ring.getCluster();
  }
  APInt off;
  if (matchPattern(getOffset(), m_ConstantInt(&off))) {
    int64_t o = off.getSExtValue();
    if (o < 0 || o >= ring.getStageBytes())
      return emitOpError("offset ")
             << o << " is outside the stage's " << ring.getStageBytes()
             << " bytes";
    if (o % kTmaSmemAlign != 0)
      return emitOpError("offset ")
             << o << " is not a multiple of " << kTmaSmemAlign
             << " (TMA writes shared memory from 128-byte aligned addresses)";
  }
  return success();
}

int64_t LoadTileOp::getElementBytes() {
  return getElement().getIntOrFloatBitWidth() / 8;
}

int64_t LoadTileOp::getBoxCols() { return kSwizzleBytes / getElementBytes(); }

/// What both tile loads check: whole boxes of whole swizzle atoms that fit
/// the ring's stages (and split between a cluster's CTAs).
template <typename OpT> static LogicalResult verifyTileLoad(OpT op) {
  RingType ring = op.getRing().getType();
  if (op.getCols() % op.getBoxCols() != 0)
    return op.emitOpError("cols must be a multiple of ")
           << op.getBoxCols() << " (one 128-byte swizzle row of "
           << op.getElement() << " per TMA box), got " << op.getCols();
  if (op.getRows() > kMaxTmaBoxRows)
    return op.emitOpError("rows must be at most ")
           << kMaxTmaBoxRows << " (a TMA box dimension), got " << op.getRows();
  // A box of the 128B swizzle spans whole 8-row atoms (1024 bytes), so the
  // next box starts atom-aligned.
  if (op.getRows() % 8 != 0)
    return op.emitOpError("rows must be a multiple of 8 (a 128B-swizzle atom "
                          "is 8 rows), got ")
           << op.getRows();
  // The columns' bytes first: the tile's bytes are then a product that
  // cannot overflow (rows <= 256).
  uint64_t stage = static_cast<uint64_t>(ring.getStageBytes());
  bool rowFits =
      op.getCols() * static_cast<uint64_t>(op.getElementBytes()) <= stage;
  if (!rowFits || static_cast<uint64_t>(op.getTileBytes()) > stage) {
    InFlightDiagnostic d = op.emitOpError("a ");
    d << op.getRows() << "x" << op.getCols() << " tile ";
    if (rowFits)
      d << "(" << op.getTileBytes() << " bytes) ";
    return d << "does not fit the ring's " << ring.getStageBytes()
             << "-byte stages";
  }
  if (ring.getCluster() == 2 && op.getBoxes() % 2 != 0)
    return op.emitOpError("a ring shared by a 2-CTA cluster takes tiles of "
                          "an even number of boxes (each CTA loads half), got ")
           << op.getBoxes();
  return success();
}

LogicalResult LoadTileOp::verify() { return verifyTileLoad(*this); }

/// What both paged loads check: a tile load's rules, into a ring of one
/// CTA (each page comes from the loader's own table load: no multicast of
/// another CTA's pages).
template <typename OpT> static LogicalResult verifyPagedTileLoad(OpT op) {
  if (failed(verifyTileLoad(op)))
    return failure();
  if (op.getRing().getType().getCluster() != 1)
    return op.emitOpError("a paged tile loads into a ring of one CTA "
                          "(cluster = 1), got cluster ")
           << op.getRing().getType().getCluster();
  return success();
}

LogicalResult LoadPagedTileOp::verify() { return verifyPagedTileLoad(*this); }

/// A paged copy's warps and passes (hopper.copy_paged_tile and its
/// offsets alike).
template <typename OpT>
static LogicalResult verifyCopyWarps(OpT op, int64_t rows, int64_t perPass) {
  const int64_t warps = op.getWarps();
  if (warps != 1 && warps != 2 && warps != 4)
    return op.emitOpError("warps must be 1, 2 or 4 (of the producer "
                          "warpgroup's four), got ")
           << warps;
  if (rows % (warps * perPass) != 0)
    return op.emitOpError("rows must split into whole passes of ")
           << perPass << " rows over " << warps
           << " warp(s) (a pass copies whole rows), got " << rows;
  if (op.getWarp() && warps == 1)
    return op.emitOpError("names a warp index with one warp");
  return success();
}

LogicalResult PagedOffsetsOp::verify() {
  const int64_t perPass = getPerPass();
  if (perPass > 32 || !llvm::isPowerOf2_64(perPass))
    return emitOpError("per_pass must be a power of two up to 32 (a pass "
                       "of the warp's lanes copies whole rows), got ")
           << perPass;
  if (failed(verifyCopyWarps(*this, getRows(), perPass)))
    return failure();
  // (a copy names its warp once hopper-warp-copy runs its program on the
  // warps; these offsets exist only there, made from such a copy)
  if (getWarps() > 1 && !getWarp())
    return emitOpError("loads the rows of ")
           << getWarps() << " warps, so it needs its warp's index (`warp`)";
  const int64_t want = resultsFor(getRowsPerWarp());
  if (static_cast<int64_t>(getOffsets().size()) != want)
    return emitOpError("gives a page entry and a row in its page per 32 of a "
                       "warp's ")
           << getRowsPerWarp() << " rows (" << want << "), got "
           << getOffsets().size();
  return success();
}

LogicalResult CopyPagedTileOp::verify() {
  if (failed(verifyPagedTileLoad(*this)))
    return failure();
  // (cols is a multiple of a 128-byte box: whole 16-byte pieces)
  const int64_t pieces = getPiecesPerRow();
  if (pieces > 32 || !llvm::isPowerOf2_64(pieces))
    return emitOpError("a row's 16-byte pieces must be a power of two up "
                       "to 32 (one pass of the warp's lanes copies whole "
                       "rows), got ")
           << pieces;
  // the producer warpgroup's warps, each of them whole passes of rows
  if (failed(verifyCopyWarps(*this, getRows(), getRowsPerPass())))
    return failure();
  if (!getOffsets().empty()) {
    const int64_t want = PagedOffsetsOp::resultsFor(getRowsPerWarp());
    if (static_cast<int64_t>(getOffsets().size()) != want)
      return emitOpError("takes a page entry and a row in its page per 32 of "
                         "a warp's ")
             << getRowsPerWarp() << " rows (" << want << "), got "
             << getOffsets().size();
    // offsets of another layout would copy the wrong rows
    if (auto from = getOffsets().front().getDefiningOp<PagedOffsetsOp>();
        from && (from.getRows() != getRows() ||
                 static_cast<int64_t>(from.getPerPass()) != getRowsPerPass() ||
                 from.getWarps() != getWarps()))
      return emitOpError("takes the offsets of ")
             << from.getRows() << " rows in passes of " << from.getPerPass()
             << " over " << from.getWarps() << " warp(s), but copies "
             << getRows() << " in passes of " << getRowsPerPass() << " over "
             << getWarps();
  }
  if (std::optional<uint64_t> valid = getValid();
      valid && (*valid > getCols() || *valid * getElementBytes() % 16 != 0))
    return emitOpError("valid columns must be whole 16-byte pieces of the "
                       "tile's ")
           << getCols() << ", got " << *valid;
  // lane 0's one arrive, or each copying lane's
  const int64_t producers = getRing().getType().getProducers();
  const int64_t lanes = kWarpLanes * static_cast<int64_t>(getWarps());
  if (producers != 1 && producers != lanes)
    return emitOpError("completes its slot by lane 0's arrive (a ring of 1 "
                       "producer) or by each of its ")
           << lanes
           << " lanes' (a ring of that many), but the ring's full barrier "
              "counts "
           << producers << " producers";
  return success();
}

LogicalResult TransposeStageOp::verify() {
  RingType src = getSrc().getType(), dst = getDst().getType();
  if (getRows() % 16 != 0 || getRows() > 2 * kSwizzleBytes)
    return emitOpError("rows must be a multiple of 16 up to ")
           << 2 * kSwizzleBytes
           << " (groups of 16 keys; a transposed row is one or two 128-byte "
              "swizzle boxes), got "
           << getRows();
  if (getCols() % kTransposeUnitCols != 0)
    return emitOpError("cols must be a multiple of ")
           << kTransposeUnitCols << " (the transposer's units), got "
           << getCols();
  // A unit's groups of 16 keys find their swizzled store column by XOR with
  // the group's index within the unit (no carry into the unit's first):
  // a power of two of them, at most the 8 of a 128-byte row; the units
  // tile the rows, so none straddles a box of 128 keys.
  const uint64_t unitKeys = getUnitKeys();
  if (unitKeys < 16 || unitKeys > kSwizzleBytes ||
      !llvm::isPowerOf2_64(unitKeys) || getRows() % unitKeys != 0)
    return emitOpError("unit_keys must be a power of two from 16 to ")
           << kSwizzleBytes << " that divides rows (" << getRows()
           << "), got " << unitKeys;
  // rows is at most 256 and cols at most a stage's bytes: the products
  // cannot overflow once cols is checked against the stage. The source
  // holds the columns' whole TMA boxes (128 columns each), the destination
  // whole boxes of 128 keys.
  const int64_t bytes =
      static_cast<int64_t>(llvm::alignTo(getRows(), kSwizzleBytes)) *
      static_cast<int64_t>(getCols());
  const int64_t srcBytes =
      getRows() * llvm::alignTo(getCols(), kSwizzleBytes);
  if (getCols() > static_cast<uint64_t>(src.getStageBytes()) ||
      srcBytes > src.getStageBytes() ||
      bytes > dst.getStageBytes())
    return emitOpError("a ")
           << getRows() << "x" << getCols()
           << " tile does not fit the rings' stages (" << src.getStageBytes()
           << " and " << dst.getStageBytes() << " bytes)";
  if (src.getStages() != dst.getStages())
    return emitOpError("source and destination rings must have as many "
                       "stages (one slot names both), got ")
           << src.getStages() << " and " << dst.getStages();
  if (src.getCluster() != 1 || dst.getCluster() != 1)
    return emitOpError("transposes rings of one CTA (cluster = 1)");
  return success();
}

//===----------------------------------------------------------------------===//
// hopper.ring.fill
//===----------------------------------------------------------------------===//

LogicalResult fa3::hopper::refuseUnmovedFills(Operation *root,
                                              StringRef why) {
  WalkResult w = root->walk([&](RingFillOp f) {
    f.emitOpError(why);
    return WalkResult::interrupt();
  });
  return failure(w.wasInterrupted());
}

bool fa3::hopper::arrivesOnSlot(Operation *op) {
  return isa<LoadTileOp, LoadPagedTileOp, CopyPagedTileOp,
             RingProducerCommitOp>(op);
}

/// The arrives on a fill's slot (each load's commit, or a plain `tx 0`
/// commit) on every path through `block`, or -1 if paths differ or an
/// arrive stands in a loop.
static int64_t arrivesOnEveryPath(Block &block) {
  int64_t n = 0;
  for (Operation &op : block) {
    if (arrivesOnSlot(&op)) {
      ++n;
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      int64_t t = arrivesOnEveryPath(*branch.thenBlock());
      int64_t e = branch.elseBlock() ? arrivesOnEveryPath(*branch.elseBlock())
                                     : 0;
      if (t < 0 || t != e)
        return -1;
      n += t;
      continue;
    }
    bool inside = false;
    op.walk([&](Operation *in) { inside |= arrivesOnSlot(in); });
    if (inside)
      return -1;
  }
  return n;
}

LogicalResult RingFillOp::verify() {
  // Before warp specialization: a fill says where the consumers use a slot.
  Region *role = enclosingRole(*this);
  if (!role ||
      role != &cast<WarpSpecializeOp>(role->getParentOp()).getConsumer())
    return emitOpError("must be inside the consumers region of "
                       "hopper.warp_specialize (hopper-warp-specialize moves "
                       "it into the producer)");
  int64_t loads = 0;
  RingPublishOp publish;
  bool commits = false;
  // the first tx-0 commit whose arrivals are not all the stage counts
  RingType rt = getRing().getType();
  RingProducerCommitOp partial;
  WalkResult w = getBody().walk([&](Operation *op) -> WalkResult {
    Value ring, slot;
    if (auto l = dyn_cast<LoadTileOp>(op))
      ring = l.getRing(), slot = l.getSlot();
    else if (auto l = dyn_cast<LoadPagedTileOp>(op))
      ring = l.getRing(), slot = l.getSlot();
    else if (auto l = dyn_cast<CopyPagedTileOp>(op))
      ring = l.getRing(), slot = l.getSlot();
    else if (auto c = dyn_cast<RingProducerCommitOp>(op)) {
      // a path that loads nothing still completes the slot: the producer
      // arrives itself (its published words are then the payload)
      if (c.getRing() != getRing() || c.getSlot() != getSlot() ||
          c.getTx() != 0)
        return emitOpError("holds a commit that is not its own slot's "
                           "'tx 0' (hopper-async-copy writes the commits "
                           "of loads)");
      commits = true;
      if (!partial && static_cast<int64_t>(c.getCount()) != rt.getProducers())
        partial = c;
      return WalkResult::advance();
    } else if (auto p = dyn_cast<RingPublishOp>(op)) {
      // (its own verifier keeps it at the top level: the words are then
      // the same on every path)
      if (publish)
        return emitOpError("holds two hopper.ring.publish");
      publish = p;
      return WalkResult::advance();
    } else if (isa<RingProducerAcquireOp, RingConsumerWaitOp,
                   RingConsumerReleaseOp, TmaLoadOp, RingFillOp>(op))
      return emitOpError("holds the slot's loads only; '")
             << op->getName()
             << "' is not one (hopper-warp-specialize adds the acquire, "
                "hopper-async-copy the commit and transfers)";
    if (!ring)
      return WalkResult::advance();
    if (ring != getRing() || slot != getSlot())
      return emitOpError("holds a load into another ring or slot than its "
                         "own (the load must name the fill's ring and slot "
                         "values)");
    ++loads;
    return WalkResult::advance();
  });
  if (w.wasInterrupted())
    return failure();
  // The words go before the slot's arrive (a load's commit or the plain
  // one), which releases them.
  if (publish)
    for (Operation *op = publish->getPrevNode(); op; op = op->getPrevNode()) {
      bool arrives = false;
      op->walk([&](Operation *in) { arrives |= arrivesOnSlot(in); });
      if (arrives)
        return emitOpError("publishes after the slot is committed (the "
                           "words must precede the loads and commits)");
    }
  // A slot without a load carries words only (e.g. an end-of-work flag):
  // the producer publishes them and completes the slot itself.
  if (loads == 0 && !publish)
    return emitOpError("holds no load of its slot (hopper.load_tile, "
                       "hopper.load_paged_tile or hopper.copy_paged_tile) "
                       "and publishes nothing");
  if (loads == 0 && !commits)
    return emitOpError("loads nothing and never commits its slot (a "
                       "'producer_commit ... tx 0' completes it)");
  // The full barrier counts one producer arrive a phase: one on every path
  // (a path without it would leave the consumers waiting; a second would
  // complete the next phase).
  if (arrivesOnEveryPath(getBody().front()) != 1)
    return emitOpError("must arrive on its slot once on every path: one "
                       "load, or where it loads nothing a 'producer_commit "
                       "... tx 0', outside loops");
  // A plain arrive completes the phase only where it makes all of the
  // stage's arrivals (a cluster ring's stage also waits for the peer's).
  if (commits && (rt.getCluster() != 1 || partial)) {
    uint64_t count = partial ? partial.getCount() : rt.getProducers();
    return emitOpError("commits 'tx 0' with ")
           << count << " arrival(s) into a ring of " << rt.getCluster()
           << " CTA(s) and " << rt.getProducers()
           << " producers a stage: a plain arrive completes only a ring of "
              "one CTA, arriving for all of its producers";
  }
  return success();
}

LogicalResult RingPublishedOp::verify() {
  // In the roles, the read follows the slot's wait, which acquires what
  // the producer's commit released (outside them: lowering tests).
  if (!enclosingRole(*this) || findBefore(*this, [&](Operation *op) {
        auto wait = dyn_cast<RingConsumerWaitOp>(op);
        return wait && wait.getRing() == getRing() &&
               wait.getSlot() == getSlot();
      }))
    return success();
  return emitOpError("must follow its slot's 'hopper.ring.consumer_wait' "
                     "(the same ring and slot, before it in its block or an "
                     "enclosing one): the words are valid once the wait has "
                     "seen the slot's commit");
}

LogicalResult RingPublishOp::verify() {
  // Before warp specialization in the fill of its slot, after it in the
  // producer thread (between the slot's acquire and commit).
  auto fill = dyn_cast<RingFillOp>(getOperation()->getParentOp());
  bool inFill =
      fill && fill.getRing() == getRing() && fill.getSlot() == getSlot();
  if (!inFill && !(*this)->getParentOfType<ProducerThreadOp>())
    return emitOpError("must stand in the hopper.ring.fill of its ring and "
                       "slot (its words travel with that slot) or in "
                       "hopper.producer_thread");
  if (getWords().empty())
    return emitOpError("publishes no word");
  return success();
}
