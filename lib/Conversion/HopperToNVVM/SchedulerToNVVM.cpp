//===- SchedulerToNVVM.cpp - the tile scheduler's arithmetic --------------===//
//
// (Each IR-building call stands in a statement of its own: GCC and clang
// evaluate function arguments in different orders, and the kernels must not
// depend on the compiler.)
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace fa3::hopper;

namespace {


struct TileGridLowering : OpConversionPattern<TileGridOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileGridOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    // The opaque copy keeps LLVM from merging the roles' grids back above
    // the role split.
    Value sq = inlineAsm(rewriter, loc, i32, adaptor.getSq(), "mov.b32 $0, $1;",
                     "=r,r", /*sideEffects=*/false)
                   .getResult(0);
    Value bmMinus1 = i32Const(rewriter, loc, op.getBlockM() - 1);
    Value padded = arith::AddIOp::create(rewriter, loc, sq, bmMinus1);
    Value bm = i32Const(rewriter, loc, op.getBlockM());
    Value numM = arith::DivUIOp::create(rewriter, loc, padded, bm);
    if (op.getPairs()) {
      Value one = i32Const(rewriter, loc, 1);
      Value up = arith::AddIOp::create(rewriter, loc, numM, one);
      Value even = i32Const(rewriter, loc, -2);
      numM = arith::AndIOp::create(rewriter, loc, up, even);
    }
    Value hb = arith::MulIOp::create(rewriter, loc, adaptor.getHq(),
                                     adaptor.getBatch());
    Value tiles = arith::MulIOp::create(rewriter, loc, numM, hb);
    rewriter.replaceOp(op, ValueRange{numM, tiles});
    return success();
  }
};

struct TileCoordsLowering : OpConversionPattern<TileCoordsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileCoordsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value numM = adaptor.getNumM();
    if (adaptor.getSectionPairs()) {
      lowerSections(op, adaptor, rewriter);
      return success();
    }
    Value mb = arith::RemUIOp::create(rewriter, loc, adaptor.getTile(), numM);
    if (op.getLongestFirst()) {
      Value one = i32Const(rewriter, loc, 1);
      Value last = arith::SubIOp::create(rewriter, loc, numM, one);
      mb = arith::SubIOp::create(rewriter, loc, last, mb);
    }
    Value rest = arith::DivUIOp::create(rewriter, loc, adaptor.getTile(), numM);
    Value head = arith::RemUIOp::create(rewriter, loc, rest, adaptor.getHq());
    Value batch = arith::DivUIOp::create(rewriter, loc, rest, adaptor.getHq());
    Value bm = i32Const(rewriter, loc, op.getBlockM());
    Value m0 = arith::MulIOp::create(rewriter, loc, mb, bm);
    rewriter.replaceOp(op, ValueRange{m0, head, batch});
    return success();
  }

  /// ceil(hb / n) sections of at most n (head, batch) pairs, as even as
  /// they divide: with q = hb / count and e = hb % count, the first e
  /// sections have q + 1 pairs, the rest q. Tile t's section starts at
  /// tile `base` (0 or the e large sections' tiles) and pair `first`;
  /// within a section of s pairs, tile r (from the section's first) is
  /// m-block numM - 1 - r / s (longest_first; else r / s) of pair first +
  /// r % s. (s is at least 1 for
  /// any hb; a tile past the grid decodes to a pair past hb, which the
  /// callers never use: they check the tile against the grid first.)
  static void lowerSections(TileCoordsOp op, OpAdaptor adaptor,
                            ConversionPatternRewriter &rewriter) {
    Location loc = op.getLoc();
    Value tile = adaptor.getTile(), numM = adaptor.getNumM();
    Value n = adaptor.getSectionPairs(), hb = adaptor.getPairs();
    Value zero = i32Const(rewriter, loc, 0);
    Value one = i32Const(rewriter, loc, 1);
    Value nLess1 = arith::SubIOp::create(rewriter, loc, n, one);
    Value padded = arith::AddIOp::create(rewriter, loc, hb, nLess1);
    Value count = arith::DivUIOp::create(rewriter, loc, padded, n);
    count = arith::MaxUIOp::create(rewriter, loc, count, one);
    Value small = arith::DivUIOp::create(rewriter, loc, hb, count);
    Value large = arith::AddIOp::create(rewriter, loc, small, one);
    Value extra = arith::RemUIOp::create(rewriter, loc, hb, count);
    Value largePairs = arith::MulIOp::create(rewriter, loc, extra, large);
    Value largeTiles = arith::MulIOp::create(rewriter, loc, largePairs, numM);
    Value inLarge = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                          tile, largeTiles);
    Value pairs = arith::SelectOp::create(rewriter, loc, inLarge, large, small);
    pairs = arith::MaxUIOp::create(rewriter, loc, pairs, one);
    Value base = arith::SelectOp::create(rewriter, loc, inLarge, zero, largeTiles);
    Value firstBase =
        arith::SelectOp::create(rewriter, loc, inLarge, zero, largePairs);
    Value fromBase = arith::SubIOp::create(rewriter, loc, tile, base);
    Value perSection = arith::MulIOp::create(rewriter, loc, pairs, numM);
    Value section = arith::DivUIOp::create(rewriter, loc, fromBase, perSection);
    Value r = arith::RemUIOp::create(rewriter, loc, fromBase, perSection);
    Value skipped = arith::MulIOp::create(rewriter, loc, section, pairs);
    Value first = arith::AddIOp::create(rewriter, loc, firstBase, skipped);
    Value fromLast = arith::DivUIOp::create(rewriter, loc, r, pairs);
    Value inSection = arith::RemUIOp::create(rewriter, loc, r, pairs);
    Value pair = arith::AddIOp::create(rewriter, loc, first, inSection);
    Value mb = fromLast;
    if (op.getLongestFirst()) {
      Value last = arith::SubIOp::create(rewriter, loc, numM, one);
      mb = arith::SubIOp::create(rewriter, loc, last, fromLast);
    }
    Value head = arith::RemUIOp::create(rewriter, loc, pair, adaptor.getHq());
    Value batch = arith::DivUIOp::create(rewriter, loc, pair, adaptor.getHq());
    Value bm = i32Const(rewriter, loc, op.getBlockM());
    Value m0 = arith::MulIOp::create(rewriter, loc, mb, bm);
    rewriter.replaceOp(op, ValueRange{m0, head, batch});
  }
};

struct TileNextLowering : OpConversionPattern<TileNextOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileNextOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value base = adaptor.getTile();
    if (op.getSchedule() == TileSchedule::dynamic) {
      Value one = i32Const(rewriter, loc, 1);
      base = LLVM::AtomicRMWOp::create(rewriter, loc, LLVM::AtomicBinOp::add,
                                       adaptor.getCounter(), one,
                                       LLVM::AtomicOrdering::monotonic);
    }
    Value ncta = NVVM::GridDimXOp::create(rewriter, loc, rewriter.getI32Type());
    rewriter.replaceOpWithNewOp<arith::AddIOp>(op, base, ncta);
    return success();
  }
};

/// static: first + k gridDim.x; dynamic: first for k = 0, else the
/// counter's next (as TileNextLowering takes it).
struct TileClaimLowering : OpConversionPattern<TileClaimOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileClaimOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Value k = adaptor.getK(), first = adaptor.getFirst();
    if (op.getSchedule() == TileSchedule::static_stride) {
      Value ncta = NVVM::GridDimXOp::create(rewriter, loc, i32);
      Value stride = arith::MulIOp::create(rewriter, loc, k, ncta);
      rewriter.replaceOpWithNewOp<arith::AddIOp>(op, first, stride);
      return success();
    }
    Value zero = i32Const(rewriter, loc, 0);
    Value isFirst =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, k, zero);
    auto ifOp = scf::IfOp::create(rewriter, loc, TypeRange{i32}, isFirst,
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(rewriter);
      rewriter.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(rewriter, loc, first);
      rewriter.setInsertionPointToStart(ifOp.elseBlock());
      Value one = i32Const(rewriter, loc, 1);
      Value base = LLVM::AtomicRMWOp::create(
          rewriter, loc, LLVM::AtomicBinOp::add, adaptor.getCounter(), one,
          LLVM::AtomicOrdering::monotonic);
      Value ncta = NVVM::GridDimXOp::create(rewriter, loc, i32);
      Value next = arith::AddIOp::create(rewriter, loc, base, ncta);
      scf::YieldOp::create(rewriter, loc, next);
    }
    rewriter.replaceOp(op, ifOp.getResults());
    return success();
  }
};

struct TileCounterResetLowering : OpConversionPattern<TileCounterResetOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileCounterResetOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Value counter = adaptor.getCounter();
    auto ptrT = counter.getType();
    // The second counter addressed inside the asm and the last CTA found
    // as before + 1 = gridDim.x: where the reset stands in the producer's
    // tile loop (a persistent kernel's last claim), values LLVM could
    // hoist out of it would hold registers of the producer's 24 through
    // the whole loop.
    Value before = inlineAsm(rewriter, loc, i32, counter,
                             "atom.acq_rel.gpu.global.add.u32 $0, [$1+4], 1;",
                             "=r,l,~{memory}", /*sideEffects=*/true)
                       .getResult(0);
    Value ncta = NVVM::GridDimXOp::create(rewriter, loc, i32);
    Value one = i32Const(rewriter, loc, 1);
    Value count = arith::AddIOp::create(rewriter, loc, before, one);
    Value isLast = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                         count, ncta);
    auto ifOp = scf::IfOp::create(rewriter, loc, TypeRange{}, isLast,
                                  /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifOp.thenBlock());
    Value zero = i32Const(rewriter, loc, 0);
    LLVM::StoreOp::create(rewriter, loc, zero, counter);
    Value done = LLVM::GEPOp::create(rewriter, loc, ptrT, i32, counter,
                                     ArrayRef<LLVM::GEPArg>{1});
    LLVM::StoreOp::create(rewriter, loc, zero, done);
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void fa3::hopper::populateSchedulerToNVVMPatterns(RewritePatternSet &patterns) {
  patterns.add<TileGridLowering, TileCoordsLowering, TileNextLowering,
               TileClaimLowering, TileCounterResetLowering>(patterns.getContext());
}
