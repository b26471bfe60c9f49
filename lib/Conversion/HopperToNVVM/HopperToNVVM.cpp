//===- HopperToNVVM.cpp - hopper ops to NVVM, one pattern per op ----------===//

#include "Patterns.h"
#include "fa3/Conversion/Passes.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <type_traits>

namespace fa3 {
#define GEN_PASS_DEF_CONVERTHOPPERTONVVM
#include "fa3/Conversion/Passes.h.inc"
} // namespace fa3

using namespace mlir;
using namespace fa3::hopper;

namespace {

} // namespace

Value fa3::hopper::namedBarrierId(OpBuilder &b, Location loc, BarrierKind kind,
                                  int64_t consumers, Value consumer) {
  Value base = i32Const(b, loc, namedBarrierBase(kind, consumers));
  return arith::AddIOp::create(b, loc, consumer, base);
}

namespace {

/// A named barrier: its hardware id and thread count, then bar.sync or
/// bar.arrive.
template <typename Op>
struct NamedBarrierLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value id = namedBarrierId(rewriter, loc, op.getKind(), op.getConsumers(),
                              adaptor.getConsumer());
    Value n = i32Const(rewriter, loc, op.getThreads());
    constexpr bool sync = std::is_same_v<Op, NamedBarrierSyncOp>;
    if (op.getDiverged()) {
      // (nvvm.barrier and nvvm.barrier.arrive are the .aligned forms)
      LLVM::CallIntrinsicOp::create(
          rewriter, loc,
          rewriter.getStringAttr(sync ? "llvm.nvvm.barrier.cta.sync.count"
                                      : "llvm.nvvm.barrier.cta.arrive.count"),
          ValueRange{id, n});
    } else if constexpr (sync) {
      NVVM::BarrierOp::create(rewriter, loc, Type(), id, n,
                              NVVM::BarrierReductionAttr(), Value());
    } else {
      NVVM::BarrierArriveOp::create(rewriter, loc, id, n);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct WarpgroupAnyLowering : OpConversionPattern<WarpgroupAnyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WarpgroupAnyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Value in = arith::ExtUIOp::create(rewriter, loc, i32, adaptor.getPred());
    Value bar = namedBarrierId(rewriter, loc, BarrierKind::vote,
                               op.getConsumers(), adaptor.getConsumer());
    // bar.red.or over the warpgroup's 128 threads; NVVM has no op for the
    // predicate form of the reduction.
    auto asmOp = inlineAsm(
        rewriter, loc, i32, ValueRange{in, bar},
        "{\n.reg .pred p, q;\nsetp.ne.b32 q, $1, 0;\nbar.red.or.pred p, $2, "
        "128, q;\nselp.b32 $0, 1, 0, p;\n}",
        "=r,r,r", /*sideEffects=*/true);
    Value zero = i32Const(rewriter, loc, 0);
    Value ne = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ne,
                                     asmOp.getResult(0), zero);
    Value mask = i32Const(rewriter, loc, -1);
    Value any = NVVM::VoteSyncOp::create(rewriter, loc, rewriter.getI1Type(),
                                         mask, ne, NVVM::VoteSyncKind::any);
    rewriter.replaceOp(op, any);
    return success();
  }
};

/// Lane 0's value in every lane (shfl.sync.idx, full warp).
/// Lane 0's i32 `v` in every lane of the warp (shfl.sync.idx, all lanes).
Value fromLaneZero(OpBuilder &b, Location loc, Value v) {
  Value all = i32Const(b, loc, -1);
  Value lane0 = i32Const(b, loc, 0);
  Value clamp = i32Const(b, loc, 31);
  return NVVM::ShflOp::create(b, loc, b.getI32Type(), all, v, lane0, clamp,
                              NVVM::ShflKind::idx, UnitAttr());
}

struct WarpUniformLowering : OpConversionPattern<WarpUniformOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WarpUniformOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       fromLaneZero(rewriter, op.getLoc(), adaptor.getValue()));
    return success();
  }
};

/// A role region's single block (its gpu.yield dropped) moved to the end
/// of `arm`, an scf.if arm, its arguments replaced by `args`.
void inlineRegion(ConversionPatternRewriter &rewriter, Region &region,
                  Block *arm, ValueRange args = {}) {
  Block &body = region.front();
  rewriter.eraseOp(body.getTerminator());
  rewriter.inlineBlockBefore(&body, arm->getTerminator(), args);
}

/// The role split: scf.if on the warpgroup index, each arm starting with
/// its setmaxnreg, the consumers' with their index (warpgroup - 1).
struct WarpSpecializeLowering : OpConversionPattern<WarpSpecializeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WarpSpecializeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, rewriter.getI32Type());
    Value wgSize = i32Const(rewriter, loc, kWarpgroupThreads);
    Value wg = arith::DivUIOp::create(rewriter, loc, tid, wgSize);
    Value zero = i32Const(rewriter, loc, 0);
    Value isProducer = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq, wg, zero);
    auto roles = scf::IfOp::create(rewriter, loc, TypeRange{}, isProducer,
                                   /*withElseRegion=*/true);

    rewriter.setInsertionPointToStart(roles.thenBlock());
    NVVM::SetMaxRegisterOp::create(rewriter, loc, op.getProducerRegs(),
                                   NVVM::SetMaxRegisterAction::decrease);
    inlineRegion(rewriter, op.getProducer(), roles.thenBlock());

    rewriter.setInsertionPointToStart(roles.elseBlock());
    NVVM::SetMaxRegisterOp::create(rewriter, loc, op.getConsumerRegs(),
                                   NVVM::SetMaxRegisterAction::increase);
    Value one = i32Const(rewriter, loc, 1);
    Value consumer = arith::SubIOp::create(rewriter, loc, wg, one);
    inlineRegion(rewriter, op.getConsumer(), roles.elseBlock(),
                 ValueRange{consumer});
    rewriter.eraseOp(op);
    return success();
  }
};

/// A role's region inlined into `scf.if (cond)` at the op, its block
/// arguments replaced by `args` (built inside the if).
template <typename RoleOp>
void inlineRole(RoleOp op, Value cond, ConversionPatternRewriter &rewriter,
                function_ref<SmallVector<Value>()> args) {
  Location loc = op.getLoc();
  auto role = scf::IfOp::create(rewriter, loc, TypeRange{}, cond,
                                /*withElseRegion=*/false);
  rewriter.setInsertionPointToStart(role.thenBlock());
  SmallVector<Value> a = args();
  inlineRegion(rewriter, op.getBody(), role.thenBlock(), a);
  rewriter.eraseOp(op);
}

/// The producer warpgroup's thread 0: scf.if (tid == 0); with results,
/// the scf.if yields thread 0's values (poison in the other lanes), which
/// a shuffle from lane 0 gives the whole warp.
struct ProducerThreadLowering : OpConversionPattern<ProducerThreadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ProducerThreadOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, i32);
    Value zero = i32Const(rewriter, loc, 0);
    Value isT0 = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                       tid, zero);
    if (op.getNumResults() == 0) {
      inlineRole(op, isT0, rewriter, [] { return SmallVector<Value>(); });
      return success();
    }
    auto role = scf::IfOp::create(rewriter, loc, op.getResultTypes(), isT0,
                                  /*withElseRegion=*/true);
    Block &body = op.getBody().front();
    auto yield = cast<gpu::YieldOp>(body.getTerminator());
    SmallVector<Value> values(yield.getOperands());
    rewriter.setInsertionPointToEnd(role.thenBlock());
    auto thenYield = scf::YieldOp::create(rewriter, loc, values);
    rewriter.eraseOp(yield);
    rewriter.inlineBlockBefore(&body, thenYield);
    rewriter.setInsertionPointToEnd(role.elseBlock());
    SmallVector<Value> poison;
    for (Type t : op.getResultTypes())
      poison.push_back(LLVM::PoisonOp::create(rewriter, loc, t));
    scf::YieldOp::create(rewriter, loc, poison);
    rewriter.setInsertionPointAfter(role);
    SmallVector<Value> shared;
    for (Value v : role.getResults())
      shared.push_back(fromLaneZero(rewriter, loc, v));
    rewriter.replaceOp(op, shared);
    return success();
  }
};

/// Warps first .. first + count - 1 of the producer warpgroup: scf.if on
/// the warp index (tid / 32; the producer warpgroup is threads 0 .. 127),
/// the role's warp index warp - first.
struct ProducerWarpsLowering : OpConversionPattern<ProducerWarpsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ProducerWarpsOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    const int64_t first = op.getFirst(), count = op.getCount();
    const int64_t warps = kWarpgroupThreads / 32;
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, rewriter.getI32Type());
    Value warpSize = i32Const(rewriter, loc, 32);
    Value warp = arith::DivUIOp::create(rewriter, loc, tid, warpSize);
    Value lo = i32Const(rewriter, loc, first);
    auto cmp = [&](arith::CmpIPredicate p, Value bound) -> Value {
      return arith::CmpIOp::create(rewriter, loc, p, warp, bound);
    };
    Value in;
    if (count == 1) {
      in = cmp(arith::CmpIPredicate::eq, lo);
    } else {
      in = cmp(arith::CmpIPredicate::uge, lo);
      if (first + count < warps) {
        Value hi = i32Const(rewriter, loc, first + count);
        Value below = cmp(arith::CmpIPredicate::ult, hi);
        in = arith::AndIOp::create(rewriter, loc, in, below);
      }
    }
    inlineRole(op, in, rewriter, [&] {
      Value index = warp;
      if (first != 0) {
        Value f = i32Const(rewriter, loc, first);
        index = arith::SubIOp::create(rewriter, loc, warp, f);
      }
      return SmallVector<Value>{index};
    });
    return success();
  }
};

/// Every V transposer is run by as many warps as it counts workers (a
/// barrier of 32 x workers threads, and V's slots wait for as many
/// releases): a transposer left short of warp 0 would hang.
LogicalResult checkTransposerWarps(Operation *root) {
  WalkResult r = root->walk([&](WarpSpecializeOp ws) -> WalkResult {
    // per source ring: the roles that transpose it
    llvm::MapVector<Value, llvm::SmallSetVector<ProducerWarpsOp, 2>> roles;
    SmallVector<TransposeStageOp> first;
    ws.getProducer().walk([&](TransposeStageOp t) {
      auto role = t->getParentOfType<ProducerWarpsOp>();
      if (!roles.count(t.getSrc()))
        first.push_back(t);
      if (role)
        roles[t.getSrc()].insert(role);
      else
        roles[t.getSrc()];
    });
    for (TransposeStageOp t : first) {
      int64_t warps = 0;
      for (ProducerWarpsOp role : roles[t.getSrc()])
        warps += role.getCount();
      if (warps != static_cast<int64_t>(t.getWorkers())) {
        t.emitOpError("counts ")
            << t.getWorkers() << " workers but " << warps
            << " warp(s) run it: with one worker more than warps 1 .. 3, "
               "run hopper-producer-warp-transpose first (warp 0 is worker "
               "0)";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

/// A paged tile copied by warps' lanes takes the whole of its warps (its
/// last step is their barrier): the program of warps 0 .. warps - 1, which
/// hopper-warp-copy gives them, not one thread's, each copy knowing its
/// warp's index where several share it.
LogicalResult checkWarpCopies(Operation *root) {
  WalkResult r = root->walk([&](Operation *op) -> WalkResult {
    uint64_t n;
    bool indexed;
    if (auto c = dyn_cast<CopyPagedTileOp>(op)) {
      n = c.getWarps();
      indexed = c.getWarp() != nullptr;
    } else if (auto o = dyn_cast<PagedOffsetsOp>(op)) {
      n = o.getWarps();
      indexed = o.getWarp() != nullptr;
    } else {
      return WalkResult::advance();
    }
    auto warp = op->getParentOfType<ProducerWarpsOp>();
    if (warp && warp.getFirst() == 0 && warp.getCount() == n &&
        !op->getParentOfType<ProducerThreadOp>() && (n == 1 || indexed))
      return WalkResult::advance();
    InFlightDiagnostic d = op->emitOpError("is run by every lane of ")
                           << n << " warp(s), but stands in ";
    if (op->getParentOfType<ProducerThreadOp>())
      d << "one thread's program";
    else if (!warp || warp.getFirst() != 0 || warp.getCount() != n)
      d << "no program of warps 0 .. " << n - 1;
    else
      d << "their program without its warp's index";
    d << ": run hopper-warp-copy first (warps 0 .. " << n - 1
      << " then run the producer's program)";
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

struct ConvertHopperToNVVMPass
    : public fa3::impl::ConvertHopperToNVVMBase<ConvertHopperToNVVMPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    if (failed(refuseUnmovedFills(getOperation(),
                                  "has no NVVM form: hopper-warp-specialize "
                                  "moves it into the producer thread")) ||
        failed(checkTransposerWarps(getOperation())) ||
        failed(checkWarpCopies(getOperation())))
      return signalPassFailure();
    TypeConverter converter;
    converter.addConversion([](Type t) { return t; });
    addFragmentTypeConversion(converter);
    ConversionTarget target(*ctx);
    target.addIllegalDialect<HopperDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    addFragmentLegality(target);
    RewritePatternSet patterns(ctx);
    // Fragments cross scf.for / scf.if / scf.while as loop-carried values
    // and results: those ops are legal once their types are converted.
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    // ... and functions (code split into functions, the lit tests).
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp f) {
      return converter.isSignatureLegal(f.getFunctionType());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return converter.isLegal(op); });
    patterns.add<WarpSpecializeLowering, ProducerThreadLowering,
                 ProducerWarpsLowering,
                 NamedBarrierLowering<NamedBarrierSyncOp>,
                 NamedBarrierLowering<NamedBarrierArriveOp>,
                 WarpgroupAnyLowering, WarpUniformLowering>(ctx);
    populateFragmentToNVVMPatterns(converter, patterns);
    populateRingToNVVMPatterns(converter, patterns);
    populateSchedulerToNVVMPatterns(patterns);
    populateEpilogueToNVVMPatterns(converter, patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns)))) {
      signalPassFailure();
      return;
    }
    // Casts between a fragment and its registers that cancel out (those
    // the conversion made, and the kernel's own until its mainloop yields
    // fragments).
    SmallVector<UnrealizedConversionCastOp> casts;
    getOperation()->walk(
        [&](UnrealizedConversionCastOp c) { casts.push_back(c); });
    reconcileUnrealizedCasts(casts);
  }
};
} // namespace
