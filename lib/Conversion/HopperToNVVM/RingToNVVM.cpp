//===- RingToNVVM.cpp - the pipeline ring to NVVM, one pattern per op -----===//
//
// A ring value becomes the base of dynamic shared memory; each op computes
// what it needs from its slot u: the stage u % stages, the phase
// (u / stages) & 1, the stage's barrier (base + full|empty + 8 stage) or
// data buffer (base + data + stage * stage_bytes), then the mbarrier or TMA
// op. Ops of one slot recompute the same arithmetic; LLVM folds the copies.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fa3::hopper;

namespace {
constexpr int64_t kBarrierBytes = 8;
/// try_wait.parity's time hint (ns) before it suspends and retries: the
/// loop around it spins until the phase completes either way.
constexpr int64_t kWaitHintNs = 10000000;


/// Slot `slot` of a ring whose (converted) value is the shared-memory base
/// `base`: the addresses of its stage. Each method emits its ops where it is
/// called, in the order the kernel text had them; slotOf computes the stage
/// index first.
struct RingSlot {
  OpBuilder &b;
  Location loc;
  RingType ring;
  Value base, slot;
  Value st = {};

  /// slot % stages (a constant 0 for one stage, made only when asked for).
  Value stage() {
    if (!st)
      st = i32Const(b, loc, 0);
    return st;
  }
  /// (slot / stages) & 1: the parity of the phase that fills this slot.
  Value phase() {
    Value one = i32Const(b, loc, 1);
    Value round = slot;
    if (ring.getStages() != 1) {
      Value n = i32Const(b, loc, ring.getStages());
      round = arith::DivUIOp::create(b, loc, slot, n);
    }
    return arith::AndIOp::create(b, loc, round, one);
  }
  /// base + byte offset, as the i8 GEP the kernel uses everywhere.
  Value at(int64_t offset) {
    Type ptr = base.getType();
    return LLVM::GEPOp::create(b, loc, ptr, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{int32_t(offset)});
  }
  Value at(Value offset) {
    Type ptr = base.getType();
    return LLVM::GEPOp::create(b, loc, ptr, b.getI8Type(), base,
                               ValueRange{offset});
  }
  /// The stage's barrier in the array at `first` (full or empty).
  Value barrier(int64_t first) {
    if (ring.getStages() == 1)
      return at(first);
    Value eight = i32Const(b, loc, kBarrierBytes);
    Value off = arith::MulIOp::create(b, loc, stage(), eight);
    Value firstC = i32Const(b, loc, first);
    off = arith::AddIOp::create(b, loc, off, firstC);
    return at(off);
  }
  /// Byte `offset` of the stage's data buffer; a constant offset is folded
  /// into the buffer's.
  Value data(Value offset) {
    APInt c;
    bool constant = matchPattern(offset, m_ConstantInt(&c));
    int64_t first = ring.getData();
    if (ring.getStages() == 1) {
      if (constant)
        return at(first + c.getSExtValue());
      Value firstC = i32Const(b, loc, first);
      return at(arith::AddIOp::create(b, loc, firstC, offset));
    }
    Value bytes = i32Const(b, loc, ring.getStageBytes());
    Value off = arith::MulIOp::create(b, loc, stage(), bytes);
    if (constant) {
      Value sum = i32Const(b, loc, first + c.getSExtValue());
      return at(arith::AddIOp::create(b, loc, off, sum));
    }
    Value firstC = i32Const(b, loc, first);
    off = arith::AddIOp::create(b, loc, off, firstC);
    return at(arith::AddIOp::create(b, loc, off, offset));
  }
  void wait(Value bar, Value parity) {
    Value hint = i32Const(b, loc, kWaitHintNs);
    NVVM::MBarrierTryWaitParityOp::create(b, loc, bar, parity, hint);
  }
};

template <typename Op>
RingSlot slotOf(Op op, typename Op::Adaptor adaptor, OpBuilder &b) {
  RingSlot r{b, op.getLoc(), op.getRing().getType(), adaptor.getRing(),
             adaptor.getSlot()};
  if (r.ring.getStages() != 1) {
    Value n = i32Const(b, r.loc, r.ring.getStages());
    r.st = arith::RemUIOp::create(b, r.loc, r.slot, n);
  }
  return r;
}

struct RingCreateLowering : OpConversionPattern<RingCreateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingCreateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getSmem());
    return success();
  }
};

/// Stage by stage: full with count 1, empty with the ring's arrivals.
struct RingInitLowering : OpConversionPattern<RingInitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingInitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RingType ring = op.getRing().getType();
    RingSlot r{rewriter, loc, ring, adaptor.getRing(), /*slot=*/Value()};
    for (int64_t s = 0; s < ring.getStages(); ++s) {
      Value full = r.at(ring.getFull() + kBarrierBytes * s);
      Value producers = i32Const(rewriter, loc, ring.getProducers());
      NVVM::MBarrierInitOp::create(rewriter, loc, full, producers, Value());
      Value empty = r.at(ring.getEmpty() + kBarrierBytes * s);
      Value count = i32Const(rewriter, loc, ring.getArrivals());
      NVVM::MBarrierInitOp::create(rewriter, loc, empty, count, Value());
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// try_wait.parity on the stage's empty barrier with the slot's phase
/// flipped: the phase before this slot's has completed.
struct ProducerAcquireLowering : OpConversionPattern<RingProducerAcquireOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingProducerAcquireOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RingSlot r = slotOf(op, adaptor, rewriter);
    Value ph = r.phase();
    Value empty = r.barrier(r.ring.getEmpty());
    Value one = i32Const(rewriter, op.getLoc(), 1);
    Value flipped = arith::XOrIOp::create(rewriter, op.getLoc(), ph, one);
    r.wait(empty, flipped);
    rewriter.eraseOp(op);
    return success();
  }
};

/// arrive.expect_tx on the stage's full barrier (a plain arrive for tx 0);
/// a commit of count n > 1 then arrives n - 1 more times (after the
/// expect, so that the phase cannot complete before the bytes land).
struct ProducerCommitLowering : OpConversionPattern<RingProducerCommitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingProducerCommitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RingSlot r = slotOf(op, adaptor, rewriter);
    Value full = r.barrier(r.ring.getFull());
    const int64_t count = static_cast<int64_t>(op.getCount());
    if (op.getTx() == 0) {
      Value n = count > 1 ? i32Const(rewriter, loc, count) : Value();
      NVVM::MBarrierArriveOp::create(rewriter, loc, Type(), full, n);
    } else {
      Value tx = i32Const(rewriter, loc, op.getTx());
      NVVM::MBarrierArriveExpectTxOp::create(rewriter, loc, Type(), full, tx,
                                             NVVM::MemScopeKind::CTA,
                                             /*relaxed=*/false, Value());
      if (count > 1) {
        Value rest = i32Const(rewriter, loc, count - 1);
        NVVM::MBarrierArriveOp::create(rewriter, loc, Type(), full, rest);
      }
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// try_wait.parity on the stage's full barrier with the slot's phase.
struct ConsumerWaitLowering : OpConversionPattern<RingConsumerWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingConsumerWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RingSlot r = slotOf(op, adaptor, rewriter);
    Value ph = r.phase();
    Value full = r.barrier(r.ring.getFull());
    r.wait(full, ph);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Arrive on the stage's empty barrier; in a 2-CTA ring, lane 0 of each
/// warp also on the peer CTA's (HopperRingOps.td says why it is predicated
/// in the asm and why .release.cta).
struct ConsumerReleaseLowering : OpConversionPattern<RingConsumerReleaseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingConsumerReleaseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RingSlot r = slotOf(op, adaptor, rewriter);
    Value empty = r.barrier(r.ring.getEmpty());
    NVVM::MBarrierArriveOp::create(rewriter, loc, Type(), empty, Value());
    if (r.ring.getCluster() == 1) {
      rewriter.eraseOp(op);
      return success();
    }
    Type i32 = rewriter.getI32Type();
    Value addr = LLVM::PtrToIntOp::create(rewriter, loc, i32, empty);
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, i32);
    Value warpSize = i32Const(rewriter, loc, 32);
    Value lane = arith::RemUIOp::create(rewriter, loc, tid, warpSize);
    Value rank = NVVM::ClusterId::create(rewriter, loc, i32);
    Value one = i32Const(rewriter, loc, 1);
    Value peer = arith::XOrIOp::create(rewriter, loc, rank, one);
    inlineAsm(rewriter, loc, Type(), ValueRange{addr, lane, peer},
              "{\n.reg .pred p;\n.reg .b32 r;\nsetp.eq.u32 p, $1, 0;\n"
              "mapa.shared::cluster.u32 r, $0, $2;\n"
              "@p mbarrier.arrive.shared::cluster.b64 _, [r];\n}",
              "r,r,r", /*sideEffects=*/true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// One st.shared per word (the op's description says why not a vector).
struct RingPublishLowering : OpConversionPattern<RingPublishOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingPublishOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    for (auto [i, w] : llvm::enumerate(adaptor.getWords()))
      inlineAsm(rewriter, op.getLoc(), Type(), ValueRange{adaptor.getAddr(), w},
                "st.shared.u32 [$0+" + std::to_string(4 * i) + "], $1;",
                "r,r", /*sideEffects=*/true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// ld.shared of the word; an asm with side effects, so that it stays
/// between the consumers' wait and release.
struct RingPublishedLowering : OpConversionPattern<RingPublishedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingPublishedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value addr = adaptor.getAddr();
    if (op.getWord() != 0) {
      Value off = i32Const(rewriter, loc, 4 * op.getWord());
      addr = arith::AddIOp::create(rewriter, loc, addr, off);
    }
    Type i32 = rewriter.getI32Type();
    rewriter.replaceOp(op, inlineAsm(rewriter, loc, i32, addr,
                                     "ld.shared.u32 $0, [$1];", "=r,r",
                                     /*sideEffects=*/true)
                               .getResults());
    return success();
  }
};

struct RingStageLowering : OpConversionPattern<RingStageOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RingStageOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RingSlot r = slotOf(op, adaptor, rewriter);
    rewriter.replaceOp(op, r.stage());
    return success();
  }
};

/// cp.async.bulk.tensor into the stage's buffer (a shared::cluster address,
/// as the instruction takes it), completing on the stage's full barrier.
struct TmaLoadLowering : OpConversionPattern<TmaLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TmaLoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RingSlot r = slotOf(op, adaptor, rewriter);
    Value local = r.data(adaptor.getOffset());
    Type clusterPtr = LLVM::LLVMPointerType::get(rewriter.getContext(), 7);
    Value dst = LLVM::AddrSpaceCastOp::create(rewriter, loc, clusterPtr, local);
    Value full = r.barrier(r.ring.getFull());
    Value mask;
    if (std::optional<uint64_t> m = op.getMulticast())
      mask = arith::ConstantIntOp::create(rewriter, loc, *m, 16);
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        rewriter, loc, dst, adaptor.getMap(), adaptor.getCoords(), full,
        /*im2colOffsets=*/ValueRange{}, mask, /*l2CacheHint=*/Value(),
        NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, /*group=*/nullptr,
        /*predicate=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

/// A paged copy's rows over its warps and passes: with one warp, its row i
/// is the tile's row i; with several, their passes interleave
/// (FlashAttention-3's thread layout): the warp's row i is the tile's (i /
/// perPass) x warps x perPass + w x perPass + i % perPass, so that where
/// warps x perPass rows are a multiple of 8, a lane's rows differ by
/// multiples of 8, share their swizzle, and its destinations differ by
/// constants (held in no register: ptxas spilled the per-pass destinations
/// of 32 contiguous rows a warp at 24 registers).
struct CopyRows {
  int64_t perPass, warps, perWarp;
  /// (several warps) this warp's first row, w x perPass
  Value lead;
  /// The rows of a copy (or its offsets) of `warps` warps, `warp` the
  /// index of this one (read only where there are several; a copy that
  /// hopper-warp-copy did not give one is lowered as one warp's rows).
  static CopyRows of(OpBuilder &b, Location loc, int64_t perPass,
                     int64_t warps, int64_t perWarp, Value warp) {
    Value lead;
    if (warps > 1 && warp) {
      Value passRows = i32Const(b, loc, perPass);
      lead = arith::MulIOp::create(b, loc, warp, passRows);
    }
    return {perPass, warps, perWarp, lead};
  }
  Value tileRow(OpBuilder &b, Location loc, Value i) const {
    if (!lead)
      return i;
    Value byPass = i32Const(b, loc, llvm::Log2_64(perPass));
    Value pass = arith::ShRUIOp::create(b, loc, i, byPass);
    Value groupRows = i32Const(b, loc, warps * perPass);
    Value group = arith::MulIOp::create(b, loc, pass, groupRows);
    Value inPassMask = i32Const(b, loc, perPass - 1);
    Value inPass = arith::AndIOp::create(b, loc, i, inPassMask);
    Value within = arith::AddIOp::create(b, loc, lead, inPass);
    return arith::AddIOp::create(b, loc, group, within);
  }
};

/// Each lane's page entries (as loaded) and rows within their pages of its
/// warp's rows i = lane + 32 j, the rows clamped to the sequence's last.
struct PageEntries {
  SmallVector<Value> pages, inPage;
};
PageEntries pageEntries(OpBuilder &b, Location loc, const CopyRows &rows,
                        Value lane, Value row, Value pages, Value pageSize,
                        Value bound) {
  Type i32 = b.getI32Type();
  Value one = i32Const(b, loc, 1);
  Value last = arith::SubIOp::create(b, loc, bound, one);
  PageEntries e;
  for (int64_t j = 0; j * 32 < rows.perWarp; ++j) {
    Value batch = i32Const(b, loc, 32 * j);
    Value i = arith::AddIOp::create(b, loc, lane, batch);
    Value t = rows.tileRow(b, loc, i);
    Value r = arith::AddIOp::create(b, loc, row, t);
    r = arith::MinUIOp::create(b, loc, r, last);
    Value entry = arith::DivUIOp::create(b, loc, r, pageSize);
    e.inPage.push_back(arith::RemUIOp::create(b, loc, r, pageSize));
    Value ep = LLVM::GEPOp::create(b, loc, pages.getType(), i32, pages,
                                   ValueRange{entry});
    e.pages.push_back(LLVM::LoadOp::create(b, loc, i32, ep));
  }
  return e;
}

/// The offsets in the pool, in 16-byte units, of rows given by their page
/// entries (clamped into the pool) and rows within the pages (the launch
/// gives a pool of at most 2^32 units, 64 GiB).
SmallVector<Value> pagedRowOffsets(OpBuilder &b, Location loc,
                                   const PageEntries &e, Value poolPages,
                                   Value stridePage, Value strideRow) {
  Type i32 = b.getI32Type();
  auto units = [&](Value bytes) -> Value {
    Value four = i64Const(b, loc, 4);
    Value u = arith::ShRUIOp::create(b, loc, bytes, four);
    return arith::TruncIOp::create(b, loc, i32, u);
  };
  Value one = i32Const(b, loc, 1);
  Value lastPage = arith::SubIOp::create(b, loc, poolPages, one);
  Value pageUnits = units(stridePage);
  Value rowUnits = units(strideRow);
  SmallVector<Value> offsets;
  for (auto [entry, inPage] : llvm::zip(e.pages, e.inPage)) {
    Value page = arith::MinUIOp::create(b, loc, entry, lastPage);
    Value pageOff = arith::MulIOp::create(b, loc, page, pageUnits);
    Value rowOff = arith::MulIOp::create(b, loc, inPage, rowUnits);
    offsets.push_back(arith::AddIOp::create(b, loc, pageOff, rowOff));
  }
  return offsets;
}

/// hopper.paged_offsets: pageEntries where the page table is given, the
/// sequence has rows and (with `for`) a copy's base is given, else zeros
/// (nothing read: a contiguous cache at the launch, a launch that boxes
/// its pages, or offsets loaded ahead of a loop that runs no iteration).
struct PagedOffsetsLowering : OpConversionPattern<PagedOffsetsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PagedOffsetsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value pages = adaptor.getPages();
    Value null = LLVM::ZeroOp::create(b, loc, pages.getType());
    Value table = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                       pages, null);
    Value none = i32Const(b, loc, 0);
    Value rows = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                       adaptor.getBound(), none);
    Value given = arith::AndIOp::create(b, loc, table, rows);
    Value copies;
    for (Value base : adaptor.getBases()) {
      Value set = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, base,
                                       null);
      copies = copies ? arith::OrIOp::create(b, loc, copies, set).getResult()
                      : set;
    }
    if (copies)
      given = arith::AndIOp::create(b, loc, given, copies);
    auto branch = scf::IfOp::create(b, loc, op.getResultTypes(), given,
                                    /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(branch.thenBlock());
      Value lane = NVVM::LaneIdOp::create(b, loc, b.getI32Type());
      CopyRows rows = CopyRows::of(b, loc, op.getPerPass(), op.getWarps(),
                                   op.getRowsPerWarp(), adaptor.getWarp());
      PageEntries e =
          pageEntries(b, loc, rows, lane, adaptor.getRow(), pages,
                      adaptor.getPageSize(), adaptor.getBound());
      SmallVector<Value> entries(e.pages);
      entries.append(e.inPage);
      scf::YieldOp::create(b, loc, entries);
      b.setInsertionPointToStart(branch.elseBlock());
      Value zero = i32Const(b, loc, 0);
      SmallVector<Value> zeros(op.getNumResults(), zero);
      scf::YieldOp::create(b, loc, zeros);
    }
    b.replaceOp(op, branch.getResults());
    return success();
  }
};

/// Each lane: its rows' offsets (hopper.paged_offsets's, given or loaded
/// here), then one cp.async of 16 bytes a pass, the warp's row p x perPass
/// + q of pass p (q = lane / pieces, the tile's row by CopyRows), piece
/// lane % pieces, its offset shuffled from the lane that loaded that row's
/// page. The stage's layout is TMA's: piece p of row r at byte (p / 8)
/// rows 128 + 128 r + 16 ((p % 8) ^ (r % 8)) (the 128-byte swizzle by
/// address). Then the slot's commit. In a ring counting every copying
/// lane: each lane's cp.async.mbarrier.arrive.noinc, its arrival once its
/// copies land (PTX ISA, cp.async.mbarrier.arrive: .noinc does not raise
/// the pending count, so the arrival is one the barrier counts). In a ring
/// of one producer: each lane's cp.async.mbarrier.arrive without .noinc
/// (the pending count rises by one until the lane's copies land, so the
/// phase waits for them and still expects the arrivals it counts), the
/// warps' barrier (every lane's arrive before the last one; the `copy`
/// named barrier, not .aligned, where several warps copy) and warp 0's
/// lane 0's arrive, so the ring keeps TMA's count of one; synccheck
/// reports those lanes' arrivals as a missing wait, the .noinc form not
/// (bench/NOTES.md, Log).
/// (One op-building call a statement where two would be arguments of one
/// call: C++ leaves their order to the compiler, and GCC's and clang's
/// kernels must be the same.)
struct CopyPagedTileLowering : OpConversionPattern<CopyPagedTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CopyPagedTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    RingSlot slot = slotOf(op, adaptor, b);
    Type i32 = b.getI32Type(), i8 = b.getI8Type();
    auto c32 = [&](int64_t v) { return i32Const(b, loc, v); };
    auto add = [&](Value x, Value y) -> Value {
      return arith::AddIOp::create(b, loc, x, y);
    };
    auto mul = [&](Value x, Value y) -> Value {
      return arith::MulIOp::create(b, loc, x, y);
    };
    auto andc = [&](Value x, int64_t m) -> Value {
      Value mask = c32(m);
      return arith::AndIOp::create(b, loc, x, mask);
    };
    auto shr = [&](Value x, int64_t n) -> Value {
      Value by = c32(n);
      return arith::ShRUIOp::create(b, loc, x, by);
    };
    auto ext = [&](Value x) -> Value {
      return arith::ExtUIOp::create(b, loc, b.getI64Type(), x);
    };
    const int64_t pieces = op.getPiecesPerRow(), perPass = op.getRowsPerPass(),
                  warps = op.getWarps(), perWarp = op.getRowsPerWarp();
    Value lane = NVVM::LaneIdOp::create(b, loc, i32);
    Value piece = andc(lane, pieces - 1);
    Value q = shr(lane, llvm::Log2_64(pieces));
    // several warps: a lane's rows in its passes are w perPass + q onward
    // (`rows.lead`), by warps perPass rows a pass
    Value warp = warps > 1 ? adaptor.getWarp() : Value();
    CopyRows rows = CopyRows::of(b, loc, perPass, warps, perWarp, warp);
    Type gptr = adaptor.getBase().getType();
    PageEntries e;
    if (ValueRange given = adaptor.getOffsets(); !given.empty()) {
      // each entry through an opaque copy (volatile, so after the slot's
      // wait): LLVM hoisted the clamp to the load, ahead of the wait
      const size_t n = given.size() / 2;
      for (Value entry : given.take_front(n))
        e.pages.push_back(inlineAsm(b, loc, i32, entry, "mov.b32 $0, $1;",
                                    "=r,r", /*sideEffects=*/true)
                              .getResult(0));
      e.inPage.assign(given.begin() + n, given.end());
    } else {
      e = pageEntries(b, loc, rows, lane, adaptor.getRow(), adaptor.getPages(),
                      adaptor.getPageSize(), adaptor.getBound());
    }
    SmallVector<Value> offsets =
        pagedRowOffsets(b, loc, e, adaptor.getPoolPages(),
                        adaptor.getStridePage(), adaptor.getStrideRow());
    // this lane's piece of its head's row, and of the stage's rows
    Value headOff = mul(ext(adaptor.getHead()), adaptor.getStrideHead());
    Value pieceOff = ext(arith::ShLIOp::create(b, loc, piece, c32(4)));
    Value lead = add(headOff, pieceOff);
    Value laneBase = LLVM::GEPOp::create(b, loc, gptr, i8, adaptor.getBase(),
                                         ValueRange{lead});
    // pieces past the tensor's row read nothing and land as zeros
    Value size;
    if (op.getValidPieces() < pieces) {
      Value inRow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          piece, c32(op.getValidPieces()));
      Value full16 = c32(16);
      Value none = c32(0);
      size = arith::SelectOp::create(b, loc, inRow, full16, none);
    }
    Value box = arith::ShRUIOp::create(b, loc, piece, c32(3));
    Value unit = arith::AndIOp::create(b, loc, piece, c32(7));
    Value boxAt = mul(box, c32(op.getRows() * kSwizzleBytes));
    Value laneDst = slot.data(boxAt);
    // a lane's swizzle, where its rows share it: its first row's
    auto swizzled = [&](Value r) -> Value {
      Value swz = arith::XOrIOp::create(b, loc, unit, andc(r, 7));
      Value rowAt = mul(r, c32(kSwizzleBytes));
      Value unitAt = arith::ShLIOp::create(b, loc, swz, c32(4));
      return add(rowAt, unitAt);
    };
    const bool sharedSwizzle = rows.lead && warps * perPass % 8 == 0;
    if (sharedSwizzle) {
      Value firstAt = swizzled(add(rows.lead, q));
      laneDst = LLVM::GEPOp::create(b, loc, laneDst.getType(), i8, laneDst,
                                    ValueRange{firstAt});
    }
    Value all = c32(-1), clamp = c32(31);
    auto shfl = [&](Value v, Value from) -> Value {
      return NVVM::ShflOp::create(b, loc, i32, all, v, from, clamp,
                                  NVVM::ShflKind::idx, UnitAttr());
    };
    // per 32 of the warp's rows (lane + 32 j's offsets), a loop over its
    // passes: an unrolled copy of all of them holds more addresses than
    // the producer's registers
    for (int64_t j = 0; j * 32 < perWarp; ++j) {
      Value zero = c32(0);
      Value end = c32(std::min<int64_t>(32, perWarp - 32 * j) / perPass);
      Value one = c32(1);
      auto passes = scf::ForOp::create(b, loc, zero, end, one);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(passes.getBody()->getTerminator());
      Value from = add(mul(passes.getInductionVar(), c32(perPass)), q);
      Value units16 = ext(shfl(offsets[j], from));
      Value four = i64Const(b, loc, 4);
      Value off = arith::ShLIOp::create(b, loc, units16, four);
      Value src = LLVM::GEPOp::create(b, loc, gptr, i8, laneBase,
                                      ValueRange{off});
      Value at;
      if (sharedSwizzle) {
        // pass p of batch j: warps perPass (32 j / perPass + p) rows on
        Value p = add(passes.getInductionVar(), c32(32 * j / perPass));
        at = mul(p, c32(warps * perPass * kSwizzleBytes));
      } else {
        Value batch = add(from, c32(32 * j));
        at = swizzled(rows.tileRow(b, loc, batch));
      }
      Value dst = LLVM::GEPOp::create(b, loc, laneDst.getType(), i8, laneDst,
                                      ValueRange{at});
      NVVM::CpAsyncOp::create(b, loc, dst, src, uint32_t{16},
                              NVVM::LoadCacheModifierKind::CG, size);
    }
    Value full = slot.barrier(slot.ring.getFull());
    const bool laneCommits = slot.ring.getProducers() != 1;
    NVVM::CpAsyncMBarrierArriveOp::create(b, loc, full, laneCommits);
    if (laneCommits) {
      // (the verifier: one arrival a copying lane)
      b.eraseOp(op);
      return success();
    }
    Value arriver = lane;
    if (!warp) {
      NVVM::SyncWarpOp::create(b, loc, all);
    } else {
      // the warps' `copy` barrier, diverged: the warps' lanes all come
      // here, but warp 0's lane 0 may have run one-thread steps apart
      Value none = c32(0);
      auto meet = NamedBarrierSyncOp::create(
          b, loc, none, BarrierKind::copy, uint64_t{1},
          static_cast<uint64_t>(32 * warps));
      meet.setDiverged(true);
      arriver = arith::OrIOp::create(b, loc, lane, warp);
    }
    Value addr = LLVM::PtrToIntOp::create(b, loc, i32, full);
    inlineAsm(b, loc, Type(), ValueRange{addr, arriver},
              "{\n.reg .pred p;\nsetp.eq.u32 p, $1, 0;\n"
              "@p mbarrier.arrive.shared::cta.b64 _, [$0];\n}",
              "r,r", /*sideEffects=*/true);
    b.eraseOp(op);
    return success();
  }
};

/// prmt.b32: the bytes of {a, c} (a's 0-3, c's 4-7) picked by the
/// selector's nibbles.
Value prmt(OpBuilder &b, Location loc, Value a, Value c, Value sel) {
  auto mode = NVVM::PermuteModeAttr::get(b.getContext(),
                                         NVVM::PermuteMode::DEFAULT);
  return NVVM::PermuteOp::create(b, loc, b.getI32Type(), a, c, sel, mode);
}

/// The workers' units in turn, each unit_keys keys x 32 columns: groups of
/// 16 keys, each one ldmatrix.x4.trans, four prmt and one stmatrix.x4 a
/// lane (FlashAttention-3's LDSM.T / STSM transpose).
///
/// ldmatrix reads 8 x 8 matrices of 16-bit elements, a row being 16 bytes
/// at the address one lane gives (lane l: row l % 8 of matrix l / 8); with
/// .trans, thread t receives elements (rows 2 (t % 4) and + 1, column t / 4)
/// of each matrix. For a group, matrices 0 and 1 are keys 0-7 and 8-15 of
/// the unit's first 16 columns, 2 and 3 of its next 16: thread t = 4 b + a
/// then holds, per 16 columns, the bytes of keys 2a, 2a + 1 (matrix 0) and
/// 8 + 2a, 9 + 2a (matrix 1) in columns 2b and 2b + 1. Two prmt make the
/// word of each column, keys (2a, 2a + 1, 8 + 2a, 9 + 2a): exactly bytes 4a
/// .. 4a + 3 of the transposed row's group (the key order of the op's
/// description), which stmatrix writes from thread t to row t / 4 of a
/// matrix, bytes 4 (t % 4). So matrix 0 of the store takes the even
/// columns 2b of threads b < 4 and the odd ones 2b + 1 of b >= 4, matrix 1
/// the others: each 8-row phase then touches eight distinct swizzled
/// 16-byte units (columns 0, 2, 4, 6, 9, 11, 13, 15 are distinct mod 8),
/// as the loads' eight consecutive keys do: no bank conflicts either way.
/// Within a unit the addresses are the lane's bases plus constants: a
/// load's key row is 2048 bytes further per group, and a store's swizzled
/// unit G ^ (column % 8) is the unit's first group's XOR the group's offset
/// in it (G = G0 + g, G0 a multiple of the unit's groups and g below it:
/// no carry). Keys from 128 on (rows > 128) are stored in the second box
/// of 128-byte rows, G0's box G0 / 8 and its unit G0 % 8 there.
struct TransposeStageLowering : OpConversionPattern<TransposeStageOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeStageOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    MLIRContext *ctx = b.getContext();
    RingType src = op.getSrc().getType(), dst = op.getDst().getType();
    Type i32 = b.getI32Type();
    auto c32 = [&](int64_t v) { return i32Const(b, loc, v); };
    auto add = [&](Value x, Value y) -> Value {
      return arith::AddIOp::create(b, loc, x, y);
    };
    auto addc = [&](Value x, int64_t k) -> Value {
      return k ? add(x, c32(k)) : x;
    };
    auto mul = [&](Value x, int64_t k) -> Value {
      return arith::MulIOp::create(b, loc, x, c32(k));
    };
    auto andc = [&](Value x, int64_t k) -> Value {
      return arith::AndIOp::create(b, loc, x, c32(k));
    };
    auto xorv = [&](Value x, Value y) -> Value {
      return arith::XOrIOp::create(b, loc, x, y);
    };
    auto orv = [&](Value x, Value y) -> Value {
      return arith::OrIOp::create(b, loc, x, y);
    };
    auto shl = [&](Value x, int64_t k) -> Value {
      return arith::ShLIOp::create(b, loc, x, c32(k));
    };
    auto shr = [&](Value x, int64_t k) -> Value {
      return arith::ShRUIOp::create(b, loc, x, c32(k));
    };
    // The slot's stage in both rings (one slot count, as many stages).
    Value stage = src.getStages() == 1
                      ? c32(0)
                      : arith::RemUIOp::create(b, loc, adaptor.getSlot(),
                                               c32(src.getStages()))
                            .getResult();
    // (one op-building call a statement: the kernels are compared byte for
    // byte between a GCC and a clang build, which order arguments apart)
    Value srcOff = mul(stage, src.getStageBytes());
    srcOff = addc(srcOff, src.getData());
    Value dstOff = mul(stage, dst.getStageBytes());
    dstOff = addc(dstOff, dst.getData());
    Value base = adaptor.getSrc();
    auto at = [&](Value off) -> Value {
      return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base,
                                 ValueRange{off});
    };
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32);
    Value lane = andc(tid, 31);
    // The rows this lane addresses: row rho of matrix m = 2 chunk + half.
    Value rho = andc(lane, 7);
    Value half = andc(shr(lane, 3), 1);
    Value chunk = shr(lane, 4);
    // load: key (half ? 8 : 0) + rho of the group, 16-byte column unit
    // (the unit's first + chunk) ^ (key % 8) = ... ^ rho
    Value keyRow = mul(andc(lane, 15), kSwizzleBytes);
    // store: column 16 chunk + 2 rho + ((rho >= 4) ^ half) of the unit
    Value oddCol = xorv(shr(rho, 2), half);
    Value colInChunk = add(shl(rho, 1), oddCol);
    Value colLane = add(shl(chunk, 4), colInChunk);
    Value colSwz = andc(colInChunk, 7);
    // this thread's words: store matrix 0 the even column for threads
    // t / 4 < 4, else the odd one; matrix 1 the other
    Value low = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane,
                                      c32(16));
    Value even = c32(0x6420), odd = c32(0x7531);
    Value sel0 = arith::SelectOp::create(b, loc, low, even, odd);
    Value sel1 = arith::SelectOp::create(b, loc, low, odd, even);
    const int64_t rows = op.getRows(), cols = op.getCols();
    const int64_t groupsPerUnit = static_cast<int64_t>(op.getUnitKeys()) / 16;
    const int64_t unitsPerCol = rows / 16 / groupsPerUnit;
    const int64_t units = unitsPerCol * (cols / kTransposeUnitCols);
    Value end = c32(units);
    Value step = c32(op.getWorkers());
    auto loop = scf::ForOp::create(b, loc, adaptor.getWorker(), end, step);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value un = loop.getInductionVar();
    Value colBlk = arith::DivUIOp::create(b, loc, un, c32(unitsPerCol));
    Value g0 = mul(arith::RemUIOp::create(b, loc, un, c32(unitsPerCol)),
                   groupsPerUnit);
    // source: the unit's box (128 columns) and first 16-byte column unit
    Value box = shr(colBlk, 2);
    Value srcBox = add(srcOff, mul(box, rows * kSwizzleBytes));
    srcBox = add(srcBox, shl(g0, 11)); // 16 keys of 128 bytes a group
    Value cu = orv(shl(andc(colBlk, 3), 1), chunk);
    Value srcIn = shl(xorv(cu, rho), 4);
    Value srcBase = add(add(srcBox, keyRow), srcIn);
    // destination: the column's row (in the unit's box of 128 keys, cols
    // rows of 128 bytes each, where rows exceeds one), its group's
    // swizzled 16-byte unit
    Value col = add(shl(colBlk, 5), colLane);
    Value dstRow = add(dstOff, mul(col, kSwizzleBytes));
    Value g0InBox = g0;
    if (rows > kSwizzleBytes) {
      dstRow = add(dstRow, mul(shr(g0, 3), cols * kSwizzleBytes));
      g0InBox = andc(g0, 7);
    }
    Value dstBase = add(dstRow, shl(xorv(g0InBox, colSwz), 4));
    auto shape = NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8);
    Type four = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
    for (int64_t gi = 0; gi < groupsPerUnit; ++gi) {
      Value from = at(addc(srcBase, gi * 16 * kSwizzleBytes));
      Value m = NVVM::LdMatrixOp::create(b, loc, four, from, 4,
                                         NVVM::MMALayout::col, shape,
                                         NVVM::LdStMatrixEltType::B16);
      Value r[4];
      for (int64_t j = 0; j < 4; ++j)
        r[j] = LLVM::ExtractValueOp::create(b, loc, m, ArrayRef<int64_t>{j});
      Value w[4];
      for (int64_t c = 0; c < 2; ++c) {
        w[2 * c] = prmt(b, loc, r[2 * c], r[2 * c + 1], sel0);
        w[2 * c + 1] = prmt(b, loc, r[2 * c], r[2 * c + 1], sel1);
      }
      Value to = dstBase;
      if (gi)
        to = xorv(to, c32(gi << 4));
      NVVM::StMatrixOp::create(b, loc, at(to), ValueRange(w),
                               NVVM::MMALayout::row, shape,
                               NVVM::LdStMatrixEltType::B16);
    }
    b.setInsertionPointAfter(loop);
    fenceSharedForAsyncProxy(b, loc);
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void fa3::hopper::populateRingToNVVMPatterns(TypeConverter &converter,
                                             RewritePatternSet &patterns) {
  converter.addConversion([](RingType ring) -> Type {
    return LLVM::LLVMPointerType::get(ring.getContext(), 3);
  });
  patterns.add<RingCreateLowering, RingInitLowering, ProducerAcquireLowering,
               ProducerCommitLowering, ConsumerWaitLowering,
               ConsumerReleaseLowering, RingPublishLowering,
               RingPublishedLowering, RingStageLowering, TmaLoadLowering,
               PagedOffsetsLowering, CopyPagedTileLowering,
               TransposeStageLowering>(
      converter, patterns.getContext());
}
