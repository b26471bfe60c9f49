//===- HopperEpilogue.cpp - a tile's epilogue on fragments ----------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/IR/HopperLimits.h"

using namespace mlir;
using namespace fa3::hopper;

namespace {
/// What the TMA O store checks: an f32 accumulator, stored as 16-bit floats
/// (the direct store also takes f32: StoreODirectOp::verify).
LogicalResult verifyOStore(Operation *op, FragmentType o, Type out) {
  if (!o.getElementType().isF32())
    return op->emitOpError("O must be an f32 fragment (the accumulator), got ")
           << o;
  if (!out.isBF16() && !out.isF16())
    return op->emitOpError("O is stored as bf16 or f16, not ") << out;
  return success();
}
} // namespace

/// What the direct O store checks (StoreODirectOp, and StoreOOp, which
/// may become one).
static LogicalResult verifyDirectStore(Operation *op, FragmentType o,
                                       Type out, IntegerAttr columns) {
  if (!o.getElementType().isF32())
    return op->emitOpError("O must be an f32 fragment (the accumulator), got ")
           << o;
  // f32 too: a split-KV kernel's partial O, unrounded.
  if (!out.isBF16() && !out.isF16() && !out.isF32())
    return op->emitOpError("O is stored as bf16, f16 or f32 (a split's "
                           "partial O, unrounded), not ")
           << out;
  // Whole 8-column blocks of the accumulator layout, inside the fragment.
  if (columns) {
    int64_t c = columns.getInt(), n = o.getColumns();
    if (c <= 0 || c % 8 != 0 || c > n)
      return op->emitOpError("columns must be a positive multiple of 8 up "
                             "to O's width ")
             << n << ", got " << c;
  }
  return success();
}

LogicalResult StoreODirectOp::verify() {
  return verifyDirectStore(*this, getO().getType(), getOutType(),
                           getColumnsAttr());
}

/// The accumulator order is of f32 registers (whole n8 blocks: the
/// fragment type's own rule).
static LogicalResult verifyAccumulatorOrder(Operation *op, FragmentType t,
                                            StringRef why) {
  if (!t.getElementType().isF32())
    return op->emitOpError("takes an f32 tile (") << why << "), got " << t;
  return success();
}

LogicalResult ReduceAddOp::verify() {
  if (failed(verifyAccumulatorOrder(*this, getTile().getType(),
                                    "f32 reductions")))
    return failure();
  if (std::optional<int64_t> c = getColumns()) {
    int64_t n = getTile().getType().getColumns();
    if (*c <= 0 || *c % 8 != 0 || *c >= n)
      return emitOpError("columns must be a positive multiple of 8 below the "
                         "tile's ")
             << n << ", got " << *c;
  }
  return success();
}

LogicalResult StageFragmentOp::verify() {
  return verifyAccumulatorOrder(*this, getTile().getType(),
                                "what hopper.reduce_add_bulk adds");
}

LogicalResult ReduceAddBulkOp::verify() {
  // Bulk copies move 16-byte units.
  int64_t bytes = getBytes();
  if (bytes <= 0 || bytes % 16 != 0 || bytes > kMaxDynamicSmem)
    return emitOpError("bytes must be a positive multiple of 16 within the ")
           << kMaxDynamicSmem << " bytes of a CTA's shared memory, got "
           << bytes;
  return success();
}

/// What O staged for a TMA store or a copy-out checks (StoreOTmaOp,
/// StoreOStagedOp, and StoreOOp with staging).
static LogicalResult verifyStagedStore(Operation *op, FragmentType o,
                                       Type out, int64_t off,
                                       int64_t consumers, Value consumer) {
  if (failed(verifyOStore(op, o, out)))
    return failure();
  // One stmatrix .x4 stages two n8 blocks; a TMA box row is 64 16-bit
  // columns (the 128 bytes of the swizzle span): a last box of fewer
  // columns is staged in part, the tensor map clipping the rest.
  if (o.getColumns() % 16 != 0)
    return op->emitOpError("stmatrix stages O in pairs of 8-column blocks: "
                           "O's width must be a multiple of 16, got ")
           << o.getColumns();
  // The 128B swizzle permutes 16-byte units by address bits 7-9: a box
  // must start on a 1024-byte boundary for the layout stmatrix writes to
  // be the one the TMA unit reads.
  if (off < 0 || off % 1024 != 0)
    return op->emitOpError("the staging buffer must start on a 1024-byte "
                           "boundary (128B swizzle atoms), got offset ")
           << off;
  // [ceil(D / 64) boxes][64 x consumers rows][128 bytes] inside the CTA's shared
  // memory (sm_90: at most 227 KiB of dynamic shared memory a CTA); the
  // lowering's 32-bit offsets stay far from overflow.
  int64_t bytes = (o.getColumns() + 63) / 64 * 64 * consumers * 128;
  if (off > kMaxDynamicSmem - bytes)
    return op->emitOpError("the staging buffer (")
           << bytes << " bytes at offset " << off << ") must lie within the "
           << kMaxDynamicSmem << " bytes of a CTA's shared memory";
  return verifyConsumerIndex(op, consumer, consumers);
}

LogicalResult StoreOTmaOp::verify() {
  return verifyStagedStore(*this, getO().getType(), getOutType(),
                           getStagingOffset(), getConsumers(), getConsumer());
}

LogicalResult StoreOOp::verify() {
  // The direct store is the op without staging, and a packed batch's
  // fallback beside the TMA store.
  if (failed(verifyDirectStore(*this, getO().getType(), getOutType(),
                               getColumnsAttr())))
    return failure();
  bool stagingParts[] = {static_cast<bool>(getSmem()),
                         static_cast<bool>(getConsumer()),
                         static_cast<bool>(getStagingOffsetAttr()),
                         static_cast<bool>(getConsumersAttr())};
  if (llvm::is_contained(stagingParts, true) &&
      llvm::is_contained(stagingParts, false))
    return emitOpError("staging needs all of the buffer, its offset, the "
                       "consumer and the consumers");
  if (static_cast<bool>(getMap()) != static_cast<bool>(getTileRow()) ||
      static_cast<bool>(getMap()) != static_cast<bool>(getTileHead()))
    return emitOpError("tma needs the tensor map and the tile's row and head");
  if (static_cast<bool>(getSeqRow0()) != static_cast<bool>(getSeqLen()))
    return emitOpError("within needs both the warpgroup's first row in its "
                       "sequence and the sequence's length");
  if (isTma() && !isStaged())
    return emitOpError("tma stores the staged boxes: it needs staging");
  if (getSeqRow0() && !isTma())
    return emitOpError("within bounds the TMA store: it needs tma");
  if ((getWaitPrevious() || getDrain()) && !isStaged())
    return emitOpError("wait_previous and drain are for the staging "
                       "buffer: they need staging");
  if (getGroup() && isTma())
    return emitOpError("group (GQA-packed rows) cannot go with tma: the "
                       "TMA store's box is the tile's rows");
  if (!isStaged())
    return success();
  return verifyStagedStore(*this, getO().getType(), getOutType(),
                           *getStagingOffset(), *getConsumers(),
                           getConsumer());
}

LogicalResult StoreOStagedOp::verify() {
  // Staged as the TMA store stages it; copied out in 16-byte units (whole
  // 8-column blocks, which the direct store's columns rule gives).
  if (failed(verifyDirectStore(*this, getO().getType(), getOutType(),
                               getColumnsAttr())))
    return failure();
  return verifyStagedStore(*this, getO().getType(), getOutType(),
                           getStagingOffset(), getConsumers(), getConsumer());
}
