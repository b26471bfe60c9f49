//===- AsyncCopy.cpp - tile loads into TMA transfers of a ring slot -------===//
//
// hopper.load_tile says which tile a ring slot carries; this pass writes
// the transfer: the producer's commit of the tile's bytes on the slot's
// full barrier, and the TMA boxes (one per 128-byte swizzle row of
// columns), split between the two CTAs of a cluster and multicast when the
// ring is shared by both. hopper.load_paged_tile likewise, its boxes per
// page of the tile's rows, each page read from the page table. And
// hopper.store_o (a warpgroup's O rows and where they go) becomes the
// direct store, the staged copy-out or the TMA store, as its clauses say.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace fa3::hopper {
#define GEN_PASS_DEF_HOPPERASYNCCOPY
#include "fa3/Dialect/Hopper/Transforms/Passes.h.inc"
} // namespace fa3::hopper

using namespace mlir;
using namespace fa3::hopper;

namespace {
/// Both CTAs of a cluster receive every box loaded by either.
constexpr int64_t kBothCtas = 3;

/// This CTA's rank in its cluster. An asm with side effects, which LLVM
/// neither hoists nor keeps live: read where it is used, it costs the
/// producer (24 registers) no register across its loop.
Value clusterRank(OpBuilder &b, Location loc) {
  auto op = LLVM::InlineAsmOp::create(
      b, loc, b.getI32Type(), ValueRange{}, "mov.u32 $0, %cluster_ctarank;",
      "=r", /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  return op.getResult(0);
}

/// i32 constants at the top of the kernel (as the kernel builder keeps
/// them), one per value.
class Constants {
public:
  explicit Constants(Operation *inside) {
    auto fn = inside->getParentOfType<FunctionOpInterface>();
    entry = fn ? &fn.getFunctionBody().front() : inside->getBlock();
    for (auto c : entry->getOps<arith::ConstantIntOp>())
      if (c.getType().isInteger(32))
        known.try_emplace(c.value(), c);
  }
  Value i32(int64_t v) {
    auto [it, fresh] = known.try_emplace(v, nullptr);
    if (fresh) {
      OpBuilder b = OpBuilder::atBlockBegin(entry);
      it->second = arith::ConstantIntOp::create(b, entry->getParentOp()->getLoc(), v, 32);
    }
    return it->second;
  }

private:
  Block *entry;
  llvm::DenseMap<int64_t, Value> known;
};

void lower(LoadTileOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Constants cst(op);
  auto i32 = [&](OpBuilder &, Location, int64_t v) { return cst.i32(v); };
  Value ring = op.getRing(), slot = op.getSlot();
  // The whole tile completes the slot, in a cluster half of it from the
  // peer's multicast.
  RingProducerCommitOp::createWhole(b, loc, ring, slot,
                                    static_cast<uint64_t>(op.getTileBytes()));
  auto box = [&](Value col, Value offset, bool multicast) {
    Value coords[] = {col, op.getHead(), op.getRow(), op.getBatch()};
    TmaLoadOp::create(b, loc, op.getMap(), coords, ring, slot, offset,
                      multicast ? b.getI64IntegerAttr(kBothCtas)
                                : IntegerAttr());
  };
  if (op.getRing().getType().getCluster() == 1) {
    for (int64_t c = 0; c < op.getBoxes(); ++c) {
      Value col = i32(b, loc, c * op.getBoxCols());
      Value offset = i32(b, loc, c * op.getBoxBytes());
      box(col, offset, /*multicast=*/false);
    }
  } else {
    // boxes 2j + rank, multicast into both CTAs of the cluster
    Value rank = clusterRank(b, loc);
    for (int64_t j = 0; j < op.getBoxes() / 2; ++j) {
      Value step = i32(b, loc, 2 * j);
      Value c = arith::AddIOp::create(b, loc, rank, step);
      Value boxBytes = i32(b, loc, op.getBoxBytes());
      Value offset = arith::MulIOp::create(b, loc, c, boxBytes);
      Value boxCols = i32(b, loc, op.getBoxCols());
      Value col = arith::MulIOp::create(b, loc, c, boxCols);
      box(col, offset, /*multicast=*/true);
    }
  }
  op.erase();
}

/// A paged tile: per chunk of min(page_size, rows) rows (one page's), the
/// page from the table and one box per swizzle row of columns.
void lower(LoadPagedTileOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Constants cst(op);
  Value ring = op.getRing(), slot = op.getSlot();
  RingProducerCommitOp::createWhole(b, loc, ring, slot,
                                    static_cast<uint64_t>(op.getTileBytes()));
  Value rows = cst.i32(op.getRows());
  Value ps = op.getPageSize();
  Value chunk = arith::MinUIOp::create(b, loc, ps, rows);
  Value chunks = arith::DivUIOp::create(b, loc, rows, chunk);
  Value zero = cst.i32(0), one = cst.i32(1);
  auto loop = scf::ForOp::create(b, loc, zero, chunks, one);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value i = loop.getInductionVar();
  Value first = arith::MulIOp::create(b, loc, i, chunk);
  Value r = arith::AddIOp::create(b, loc, op.getRow(), first);
  // rows past the sequence read the page of its last row
  Value last = arith::SubIOp::create(b, loc, op.getBound(), one);
  Value rc = arith::MinUIOp::create(b, loc, r, last);
  Value entry = arith::DivUIOp::create(b, loc, rc, ps);
  auto gptrT = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Type i32T = b.getI32Type();
  Value ep = LLVM::GEPOp::create(b, loc, gptrT, i32T, op.getPages(),
                                 ArrayRef<LLVM::GEPArg>{entry});
  Value page = LLVM::LoadOp::create(b, loc, i32T, ep);
  Value inPage = arith::RemUIOp::create(b, loc, r, ps);
  Value swz = cst.i32(kSwizzleBytes);
  Value chunkOff = arith::MulIOp::create(b, loc, first, swz);
  for (int64_t c = 0; c < op.getBoxes(); ++c) {
    Value col = cst.i32(c * op.getBoxCols());
    Value boxOff = cst.i32(c * op.getBoxBytes());
    Value offset = arith::AddIOp::create(b, loc, boxOff, chunkOff);
    Value coords[] = {col, op.getHead(), inPage, page};
    TmaLoadOp::create(b, loc, op.getMap(), coords, ring, slot, offset,
                      IntegerAttr());
  }
  op.erase();
}

/// An O tile: directly, staged and copied out by the threads, or staged
/// and stored by TMA (in a packed batch only where the warpgroup's rows lie
/// inside their sequence, else directly).
void lower(StoreOOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto tma = [&] {
    StoreOTmaOp::create(b, loc, op.getO(), op.getInv(), op.getMap(),
                        op.getTileRow(), op.getTileHead(), op.getBatch(),
                        op.getSmem(), *op.getStagingOffset(),
                        op.getConsumer(), *op.getConsumers(),
                        op.getWaitPrevious(), op.getDrain(), op.getOutType());
  };
  auto direct = [&] {
    StoreODirectOp::create(b, loc, op.getO(), op.getInv(), op.getPtr(),
                           op.getStrideBatch(), op.getStrideRow(),
                           op.getStrideHead(), op.getRow0(), op.getGroup(),
                           op.getHead(), op.getBatch(), op.getBound(),
                           op.getOutType(), op.getColumnsAttr());
  };
  if (!op.isStaged()) {
    direct();
  } else if (!op.isTma()) {
    StoreOStagedOp::create(b, loc, op.getO(), op.getInv(), op.getPtr(),
                           op.getStrideBatch(), op.getStrideRow(),
                           op.getStrideHead(), op.getRow0(), op.getGroup(),
                           op.getHead(), op.getBatch(), op.getBound(),
                           op.getSmem(), *op.getStagingOffset(),
                           op.getConsumer(), *op.getConsumers(),
                           op.getWaitPrevious(), op.getDrain(),
                           op.getOutType(), op.getColumnsAttr());
  } else if (!op.getSeqRow0()) {
    tma();
  } else {
    Constants cst(op);
    Value end = arith::AddIOp::create(b, loc, op.getSeqRow0(), cst.i32(64));
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                         end, op.getSeqLen());
    auto which = scf::IfOp::create(b, loc, TypeRange{}, inside,
                                   /*withElseRegion=*/true);
    b.setInsertionPoint(which.thenBlock()->getTerminator());
    tma();
    b.setInsertionPoint(which.elseBlock()->getTerminator());
    direct();
  }
  op.erase();
}

struct HopperAsyncCopyPass
    : public fa3::hopper::impl::HopperAsyncCopyBase<HopperAsyncCopyPass> {
  void runOnOperation() override {
    // A fill's loads are the producer's once hopper-warp-specialize moved
    // them there; their transfers would not belong in the consumers.
    if (failed(refuseUnmovedFills(
            getOperation(), "is still in the consumers' program: run "
                            "hopper-warp-specialize before hopper-async-copy")))
      return signalPassFailure();
    SmallVector<LoadTileOp> loads;
    getOperation()->walk([&](LoadTileOp op) { loads.push_back(op); });
    for (LoadTileOp op : loads)
      lower(op);
    SmallVector<LoadPagedTileOp> paged;
    getOperation()->walk([&](LoadPagedTileOp op) { paged.push_back(op); });
    for (LoadPagedTileOp op : paged)
      lower(op);
    SmallVector<StoreOOp> stores;
    getOperation()->walk([&](StoreOOp op) { stores.push_back(op); });
    for (StoreOOp op : stores)
      lower(op);
  }
};
} // namespace
