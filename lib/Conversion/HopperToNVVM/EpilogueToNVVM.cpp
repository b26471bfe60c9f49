//===- EpilogueToNVVM.cpp - a tile's epilogue on the thread's registers ---===//
//
// The epilogue ops (HopperEpilogueOps.td) on the struct of a thread's
// registers (Patterns.h): the quad's row sums, 1 / l and the LSE, the LSE
// store, and O / l stored straight from the registers or staged by
// stmatrix for a TMA store. The arithmetic and the order of the PTX are
// the kernel's as validated on an H200 (docs/hopper-prototype-notes.md).
//
// (Each IR-building call stands in a statement of its own: the order of
// function arguments is unspecified, and GCC and clang differ, so the
// kernels would differ between the two builds.)
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace fa3::hopper;

namespace {
constexpr double kLn2 = 0.6931471805599453;
constexpr int64_t kBoxCols = kSwizzleBytes / 2; // 16-bit columns of a box row


/// An f32 -> f32 NVVM intrinsic (approximate math without libdevice).
Value intrinsic(OpBuilder &b, Location loc, StringRef name, Value x) {
  return LLVM::CallIntrinsicOp::create(b, loc, b.getF32Type(),
                                       b.getStringAttr(name), ValueRange{x})
      .getResult(0);
}

/// The thread's two rows: row0 + 16 warp + lane / 4, and 8 below it.
std::array<Value, 2> threadRows(OpBuilder &b, Location loc, Value row0,
                                const ThreadPlace &tp) {
  Value first = arith::AddIOp::create(b, loc, row0, tp.row);
  Value eight = i32Const(b, loc, 8);
  Value second = arith::AddIOp::create(b, loc, first, eight);
  return {first, second};
}

/// Register `idx` of a converted f32 fragment.
Value reg(OpBuilder &b, Location loc, Value regs, int64_t idx) {
  return LLVM::ExtractValueOp::create(b, loc, regs, idx);
}

/// O / l of registers `idx` and `idx + 1` (columns e = 0, 1 of one row)
/// rounded to a pair of 16-bit floats (`et` f32: not rounded).
Value roundedPair(OpBuilder &b, Location loc, Value o, int64_t idx, Value inv,
                  Type et) {
  Value lo = reg(b, loc, o, idx);
  lo = arith::MulFOp::create(b, loc, lo, inv);
  Value hi = reg(b, loc, o, idx + 1);
  hi = arith::MulFOp::create(b, loc, hi, inv);
  auto v2f32 = VectorType::get({2}, b.getF32Type());
  Value v = vector::FromElementsOp::create(b, loc, v2f32, ValueRange{lo, hi});
  if (et.isF32())
    return v;
  return arith::TruncFOp::create(b, loc, VectorType::get({2}, et), v);
}

/// The batch's part of an element's offset in a global tile addressed by
/// batch, row and head strides (elements): b sB. Adaptor: of an op with
/// ptr, stride_batch/row/head, head and batch.
template <typename Adaptor>
Value batchOffset(OpBuilder &b, Location loc, Adaptor a) {
  Value b64 = arith::ExtSIOp::create(b, loc, b.getI64Type(), a.getBatch());
  return arith::MulIOp::create(b, loc, b64, a.getStrideBatch());
}

/// Element (row, head, col) of that tile, unit column stride:
/// ptr + (batchOff + row sS + head sH + col) elemBytes.
template <typename Adaptor>
Value elementPointer(OpBuilder &b, Location loc, Adaptor a, Value batchOff,
                     Value row, Value head, Value col, int64_t elemBytes) {
  Type i64 = b.getI64Type();
  Value r64 = arith::ExtSIOp::create(b, loc, i64, row);
  Value rs = arith::MulIOp::create(b, loc, r64, a.getStrideRow());
  Value t = arith::AddIOp::create(b, loc, batchOff, rs);
  Value h64 = arith::ExtSIOp::create(b, loc, i64, head);
  Value hs = arith::MulIOp::create(b, loc, h64, a.getStrideHead());
  t = arith::AddIOp::create(b, loc, t, hs);
  Value c64 = arith::ExtUIOp::create(b, loc, i64, col);
  t = arith::AddIOp::create(b, loc, t, c64);
  Value eb = i64Const(b, loc, elemBytes);
  t = arith::MulIOp::create(b, loc, t, eb);
  return LLVM::GEPOp::create(b, loc, a.getPtr().getType(), b.getI8Type(),
                             a.getPtr(), ValueRange{t});
}

/// The thread's first element of `row` in that tile (its column colbase).
template <typename Adaptor>
Value rowPointer(OpBuilder &b, Location loc, Adaptor a, Value row, Value head,
                 const ThreadPlace &tp, int64_t elemBytes) {
  Value batchOff = batchOffset(b, loc, a);
  return elementPointer(b, loc, a, batchOff, row, head, tp.colbase,
                        elemBytes);
}

/// A tile row's query row and head: the row itself and `head`, or with GQA
/// packing (`group` g) query row / g of head `head` + row % g.
std::pair<Value, Value> packedPlace(OpBuilder &b, Location loc, Value row,
                                    Value head, Value group) {
  if (!group)
    return {row, head};
  Value q = arith::DivUIOp::create(b, loc, row, group);
  Value h = arith::RemUIOp::create(b, loc, row, group);
  h = arith::AddIOp::create(b, loc, head, h);
  return {q, h};
}

/// A new scf.if on `cond` (no results, no else); the builder's insertion
/// point moves into its then-block (callers hold an InsertionGuard).
void openIf(OpBuilder &b, Location loc, Value cond) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                /*withElseRegion=*/false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
}

/// bar.sync on consumer `consumer`'s epilogue barrier, 128 threads: the
/// lowering of `hopper.named_barrier.sync epilogue[consumer]`.
void epilogueBarrier(OpBuilder &b, Location loc, int64_t consumers,
                     Value consumer) {
  Value id = namedBarrierId(b, loc, BarrierKind::epilogue, consumers, consumer);
  Value n = i32Const(b, loc, kWarpgroupThreads);
  NVVM::BarrierOp::create(b, loc, Type(), id, n, NVVM::BarrierReductionAttr(),
                          Value());
}

/// cp.async.bulk.wait_group.read 0: the bulk stores this thread committed
/// have read their shared-memory source.
void waitBulkReads(OpBuilder &b, Location loc) {
  NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, b.getUnitAttr());
}

/// An O store through the staging buffer (StoreOTmaOp, StoreOStagedOp):
/// the buffer, its box layout, the warpgroup's fragment and the thread's
/// place in it.
struct Staging {
  Type et;                       // O's element type in the buffer
  Value smem;                    // the CTA's shared memory
  LLVM::LLVMPointerType smemT;
  int64_t consumers, blockM;     // warpgroups; rows of a staged box
  int64_t offset;                // the buffer's byte offset in smem
  int64_t regs;                  // f32 registers of O's fragment
  Value o, cw;                   // the fragment; the consumer warpgroup
  ThreadPlace tp;
  SmallVector<Value> inv;        // 1 / l of the thread's two rows
};

template <typename OpT, typename AdaptorT>
Staging stagingOf(OpBuilder &b, Location loc, OpT op, AdaptorT adaptor) {
  Staging st;
  st.et = op.getOutType();
  st.smem = adaptor.getSmem();
  st.smemT = cast<LLVM::LLVMPointerType>(st.smem.getType());
  st.consumers = op.getConsumers();
  st.blockM = 64 * st.consumers;
  st.offset = op.getStagingOffset();
  st.regs = op.getO().getType().getRegisters();
  st.o = adaptor.getO();
  st.cw = adaptor.getConsumer();
  st.tp = threadPlace(b, loc);
  st.inv = unpack(b, loc, adaptor.getInv());
  return st;
}

/// O / l of consumer `cw`'s rows, rounded to `et`, into the staging
/// buffer at byte `offset` of `smem` in the TMA boxes' layout
/// ([boxes][64 x consumers rows][128 bytes], 128B swizzle), by stmatrix.
void stageO(OpBuilder &b, Location loc, const Staging &st) {
  MLIRContext *ctx = b.getContext();
  Type i8 = b.getI8Type();
  const ThreadPlace &tp = st.tp;
  // stmatrix .x4: matrix j holds rows 8 (j % 2).. of the warp's 16 and
  // columns 8 (k + j / 2).. -- exactly the accumulator's n8 blocks k, k + 1.
  StmatrixLanes sl = stmatrixLanes(b, loc, tp.lane);
  Value rin = sl.rowIn, half = sl.half, khi = sl.blockHi;
  Value c8 = i32Const(b, loc, 8);
  Value c64 = i32Const(b, loc, 64);
  Value rowWg = arith::MulIOp::create(b, loc, st.cw, c64);
  Value c16 = i32Const(b, loc, 16);
  Value rowWarp = arith::MulIOp::create(b, loc, tp.warp, c16);
  Value row = arith::AddIOp::create(b, loc, rowWg, rowWarp);
  Value halfRow = arith::MulIOp::create(b, loc, half, c8);
  Value inWarp = arith::AddIOp::create(b, loc, halfRow, rin);
  row = arith::AddIOp::create(b, loc, row, inWarp);
  Value rowBytes = i32Const(b, loc, kSwizzleBytes);
  Value rowByte = arith::MulIOp::create(b, loc, row, rowBytes);
  Value base = i32Const(b, loc, st.offset);
  rowByte = arith::AddIOp::create(b, loc, rowByte, base);
  auto shape = NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8);
  // n8 blocks k, k + 1 per stmatrix; box k / 8 (8 blocks of 16 bytes
  // make a 128-byte row).
  for (int64_t k = 0; k < st.regs / 4; k += 2) {
    int64_t box = k / 8;
    Value unit = khi;
    if (k % 8) {
      Value kc = i32Const(b, loc, k % 8);
      unit = arith::AddIOp::create(b, loc, khi, kc);
    }
    // 128B swizzle: unit u of row r at u ^ (r % 8).
    unit = arith::XOrIOp::create(b, loc, unit, rin);
    Value unitBytes = arith::MulIOp::create(b, loc, unit, c16);
    Value boxOff = i32Const(b, loc, box * st.blockM * kSwizzleBytes);
    Value inRow = arith::AddIOp::create(b, loc, unitBytes, boxOff);
    Value off = arith::AddIOp::create(b, loc, rowByte, inRow);
    SmallVector<Value, 4> pairs;
    for (int64_t j = 0; j < 4; ++j) {
      int64_t i = j % 2, kj = k + j / 2;
      Value h = roundedPair(b, loc, st.o, 4 * kj + 2 * i, st.inv[i], st.et);
      pairs.push_back(
          LLVM::BitcastOp::create(b, loc, b.getI32Type(), h));
    }
    Value p = LLVM::GEPOp::create(b, loc, st.smemT, i8, st.smem,
                                  ValueRange{off});
    NVVM::StMatrixOp::create(b, loc, p, pairs, NVVM::MMALayout::row,
                             shape, NVVM::LdStMatrixEltType::B16);
  }
}

//===----------------------------------------------------------------------===//
// 1 / l and the LSE
//===----------------------------------------------------------------------===//

/// Per row: the quad's partial sums added (the row's four threads are
/// adjacent lanes: butterflies 1 and 2), then 1 / l by rcp.approx.ftz and
/// (m + lg2.approx l) ln 2, with l == 0 (no visible key) giving 0 and -inf.
struct FinalizeRowsLowering : OpConversionPattern<FinalizeRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FinalizeRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> m = unpack(rewriter, loc, adaptor.getM());
    SmallVector<Value> l = unpack(rewriter, loc, adaptor.getL());
    for (Value &v : l)
      v = quadReduce(rewriter, loc, v, [&](Value x, Value y) -> Value {
        return arith::AddFOp::create(rewriter, loc, x, y);
      });
    Value zero = f32Const(rewriter, loc, 0.0);
    SmallVector<Value, 2> empty, inv, lse;
    for (Value v : l) {
      empty.push_back(arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OEQ, v, zero));
      // rcp.approx (1 ulp) rather than a correctly rounded division: the
      // quotient is rounded to 16 bits right after, and div.rn is a long
      // sequence on each tile's serial epilogue.
      Value r = intrinsic(rewriter, loc, "llvm.nvvm.rcp.approx.ftz.f", v);
      inv.push_back(arith::SelectOp::create(rewriter, loc, empty.back(), zero, r));
    }
    Value ln2 = f32Const(rewriter, loc, kLn2);
    Value ninf = f32Const(rewriter, loc, -std::numeric_limits<double>::infinity());
    for (int64_t i = 0; i < 2; ++i) {
      // The log2 domain of the softmax back to natural-log units.
      Value lg = intrinsic(rewriter, loc, "llvm.nvvm.lg2.approx.f", l[i]);
      Value s = arith::AddFOp::create(rewriter, loc, m[i], lg);
      s = arith::MulFOp::create(rewriter, loc, s, ln2);
      lse.push_back(arith::SelectOp::create(rewriter, loc, empty[i], ninf, s));
    }
    Type rowsT = adaptor.getM().getType();
    Value invRegs = pack(rewriter, loc, rowsT, inv);
    Value lseRegs = pack(rewriter, loc, rowsT, lse);
    rewriter.replaceOp(op, ValueRange{invRegs, lseRegs});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The stores
//===----------------------------------------------------------------------===//

/// One f32 store per row of the thread, from the lane holding the row's
/// columns 0 and 1 (after finalize_rows' butterflies every thread of the
/// quad has the row's value; one of them writes it), for rows below the
/// bound and a non-null LSE pointer.
struct StoreLseLowering : OpConversionPattern<StoreLseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StoreLseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value ptr = adaptor.getPtr();
    auto ptrT = cast<LLVM::LLVMPointerType>(ptr.getType());
    Type i64 = rewriter.getI64Type();
    ThreadPlace tp = threadPlace(rewriter, loc);
    SmallVector<Value> lse = unpack(rewriter, loc, adaptor.getLse());
    std::array<Value, 2> rows = threadRows(rewriter, loc, adaptor.getRow0(), tp);
    Value null = LLVM::ZeroOp::create(rewriter, loc, ptrT);
    Value hasLse = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::ne,
                                        ptr, null);
    Value c0 = i32Const(rewriter, loc, 0);
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        tp.quadLane, c0);
    Value writer = arith::AndIOp::create(rewriter, loc, first, hasLse);
    for (int64_t i = 0; i < 2; ++i) {
      auto [row, head] = packedPlace(rewriter, loc, rows[i], adaptor.getHead(),
                                     adaptor.getGroup());
      Value inBounds = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::slt, row, adaptor.getBound());
      Value valid = arith::AndIOp::create(rewriter, loc, writer, inBounds);
      OpBuilder::InsertionGuard guard(rewriter);
      openIf(rewriter, loc, valid);
      // byte offset ((batch * heads + head) * stride + row) * 4
      Value u = arith::MulIOp::create(rewriter, loc, adaptor.getBatch(),
                                      adaptor.getHeads());
      u = arith::AddIOp::create(rewriter, loc, u, head);
      Value u64 = arith::ExtUIOp::create(rewriter, loc, i64, u);
      Value stride =
          adaptor.getStride() ? adaptor.getStride() : adaptor.getBound();
      Value sq64 = arith::ExtUIOp::create(rewriter, loc, i64, stride);
      u = arith::MulIOp::create(rewriter, loc, u64, sq64);
      Value row64 = arith::ExtUIOp::create(rewriter, loc, i64, row);
      u = arith::AddIOp::create(rewriter, loc, u, row64);
      Value four = i64Const(rewriter, loc, 4);
      u = arith::MulIOp::create(rewriter, loc, u, four);
      Value p = LLVM::GEPOp::create(rewriter, loc, ptrT, rewriter.getI8Type(),
                                    ptr, ValueRange{u});
      LLVM::StoreOp::create(rewriter, loc, lse[i], p);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Per row of the thread (below the bound): the row's address at the
/// caller's strides, then one 4-byte store per n8 block k (columns
/// colbase + 8k + {0, 1}).
struct StoreODirectLowering : OpConversionPattern<StoreODirectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StoreODirectOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type et = op.getOutType();
    const int64_t elemBytes = et.getIntOrFloatBitWidth() / 8;
    auto ptrT = cast<LLVM::LLVMPointerType>(adaptor.getPtr().getType());
    ThreadPlace tp = threadPlace(rewriter, loc);
    SmallVector<Value> inv = unpack(rewriter, loc, adaptor.getInv());
    std::array<Value, 2> rows = threadRows(rewriter, loc, adaptor.getRow0(), tp);
    Value o = adaptor.getO();
    // 8-column blocks of the accumulator layout that the tensor has
    const int64_t blocks =
        op.getColumns().value_or(op.getO().getType().getColumns()) / 8;
    for (int64_t i = 0; i < 2; ++i) {
      auto [row, head] = packedPlace(rewriter, loc, rows[i], adaptor.getHead(),
                                     adaptor.getGroup());
      Value inBounds = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::slt, row, adaptor.getBound());
      OpBuilder::InsertionGuard guard(rewriter);
      openIf(rewriter, loc, inBounds);
      Value prow = rowPointer(rewriter, loc, adaptor, row, head, tp, elemBytes);
      for (int64_t k = 0; k < blocks; ++k) {
        Value v = roundedPair(rewriter, loc, o, 4 * k + 2 * i, inv[i], et);
        Value p = prow;
        if (k)
          p = LLVM::GEPOp::create(
              rewriter, loc, ptrT, rewriter.getI8Type(), prow,
              ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(k * 8 * elemBytes)});
        LLVM::StoreOp::create(rewriter, loc, v, p, /*alignment=*/2 * elemBytes);
      }
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// The accumulator order (HopperEpilogueOps.td, hopper.reduce_add): the
/// byte offset of the thread's register quadruple j from the tile's start
/// is 16 (128 j + ltid); this is 16 ltid, the rest constants.
static Value quadrupleBase(OpBuilder &b, Location loc) {
  Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  Value wg = i32Const(b, loc, kWarpgroupThreads);
  Value ltid = arith::RemUIOp::create(b, loc, tid, wg);
  Value c16 = i32Const(b, loc, 16);
  return arith::MulIOp::create(b, loc, ltid, c16);
}
static constexpr int64_t kQuadrupleStride = 16 * 128;

/// One red.global.add.v4.f32 per register quadruple.
struct ReduceAddLowering : OpConversionPattern<ReduceAddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceAddOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto ptrT = cast<LLVM::LLVMPointerType>(adaptor.getPtr().getType());
    Type i8 = rewriter.getI8Type();
    Value mine = quadrupleBase(rewriter, loc);
    Value base = LLVM::GEPOp::create(rewriter, loc, ptrT, i8, adaptor.getPtr(),
                                     ValueRange{mine});
    Value t = adaptor.getTile();
    const int64_t quads =
        op.getColumns().value_or(op.getTile().getType().getColumns()) / 8;
    for (int64_t j = 0; j < quads; ++j) {
      Value p = base;
      if (j)
        p = LLVM::GEPOp::create(
            rewriter, loc, ptrT, i8, base,
            ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(j * kQuadrupleStride)});
      SmallVector<Value, 5> args = {p};
      for (int64_t i = 0; i < 4; ++i)
        args.push_back(reg(rewriter, loc, t, 4 * j + i));
      inlineAsm(rewriter, loc, Type(), args,
                "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f",
                /*sideEffects=*/true);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// One 16-byte shared store per register quadruple, then the async-proxy
/// fence.
struct StageFragmentLowering : OpConversionPattern<StageFragmentOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StageFragmentOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto smemT = cast<LLVM::LLVMPointerType>(adaptor.getSmem().getType());
    Type i8 = rewriter.getI8Type();
    Value mine = quadrupleBase(rewriter, loc);
    mine = arith::AddIOp::create(rewriter, loc, mine, adaptor.getOffset());
    Value t = adaptor.getTile();
    auto v4 = VectorType::get({4}, rewriter.getF32Type());
    const int64_t quads = op.getTile().getType().getColumns() / 8;
    for (int64_t j = 0; j < quads; ++j) {
      SmallVector<Value, 4> q;
      for (int64_t i = 0; i < 4; ++i)
        q.push_back(reg(rewriter, loc, t, 4 * j + i));
      Value v = vector::FromElementsOp::create(rewriter, loc, v4, q);
      Value off = i32Const(rewriter, loc, j * kQuadrupleStride);
      Value at = arith::AddIOp::create(rewriter, loc, mine, off);
      Value p = LLVM::GEPOp::create(rewriter, loc, smemT, i8,
                                    adaptor.getSmem(), ValueRange{at});
      LLVM::StoreOp::create(rewriter, loc, v, p, /*alignment=*/16);
    }
    fenceSharedForAsyncProxy(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

/// cp.reduce.async.bulk .add.f32 and its commit.
struct ReduceAddBulkLowering : OpConversionPattern<ReduceAddBulkOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceAddBulkOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto smemT = cast<LLVM::LLVMPointerType>(adaptor.getSmem().getType());
    Value src = LLVM::GEPOp::create(rewriter, loc, smemT, rewriter.getI8Type(),
                                    adaptor.getSmem(),
                                    ValueRange{adaptor.getOffset()});
    Value bytes = i32Const(rewriter, loc, op.getBytes());
    inlineAsm(rewriter, loc, Type(), ValueRange{adaptor.getPtr(), src, bytes},
              "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 "
              "[$0], [$1], $2;",
              "l,r,r", /*sideEffects=*/true);
    NVVM::CpAsyncBulkCommitGroupOp::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

/// A spin on ld.acquire.gpu (the label is local to the braces, so the loop
/// can be inlined more than once), then fence.proxy.async.global.
struct WaitTurnLowering : OpConversionPattern<WaitTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WaitTurnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    inlineAsm(rewriter, loc, Type(),
              ValueRange{adaptor.getCounter(), adaptor.getTurn()},
              "{\n.reg .pred p;\n.reg .b32 v;\nwait_turn:\n"
              "ld.acquire.gpu.global.b32 v, [$0];\n"
              "setp.ne.b32 p, v, $1;\n@p bra wait_turn;\n}",
              "l,r", /*sideEffects=*/true);
    NVVM::FenceProxyOp::create(rewriter, loc, NVVM::ProxyKind::async_global,
                               NVVM::SharedSpaceAttr());
    rewriter.eraseOp(op);
    return success();
  }
};

/// cp.async.bulk.wait_group 0 (writes done, not only reads), then the
/// release add.
struct PassTurnLowering : OpConversionPattern<PassTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PassTurnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NVVM::CpAsyncBulkWaitGroupOp::create(rewriter, loc, 0, UnitAttr());
    inlineAsm(rewriter, loc, Type(), ValueRange{adaptor.getCounter()},
              "red.release.gpu.global.add.u32 [$0], 1;", "l",
              /*sideEffects=*/true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Stage by stmatrix in the TMA box layout, fence, barrier, one thread's
/// TMA stores (HopperEpilogueOps.td has the why of each step).
struct StoreOTmaLowering : OpConversionPattern<StoreOTmaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StoreOTmaOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i8 = rewriter.getI8Type();
    // a last box of fewer than 64 columns: the tensor map clips the rest
    const int64_t boxes =
        (op.getO().getType().getColumns() + kBoxCols - 1) / kBoxCols;
    Staging st = stagingOf(rewriter, loc, op, adaptor);
    Value c0 = i32Const(rewriter, loc, 0);
    // The leader: the one thread of the warpgroup that issues its bulk
    // stores and waits for them (a TMA store moves the whole box).
    Value leader = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                         st.tp.ltid, c0);
    if (op.getWaitPrevious()) {
      // The previous tile's O store must have read the buffer.
      {
        OpBuilder::InsertionGuard guard(rewriter);
        openIf(rewriter, loc, leader);
        waitBulkReads(rewriter, loc);
      }
      epilogueBarrier(rewriter, loc, st.consumers, st.cw);
    }

    stageO(rewriter, loc, st);
    Value c64 = i32Const(rewriter, loc, 64);
    // The generic-proxy writes become visible to the TMA (async proxy).
    fenceSharedForAsyncProxy(rewriter, loc);
    epilogueBarrier(rewriter, loc, st.consumers, st.cw);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      openIf(rewriter, loc, leader);
      // Rows past Sq are clipped by the TMA unit.
      Value wgRows = arith::MulIOp::create(rewriter, loc, st.cw, c64);
      Value orow = arith::AddIOp::create(rewriter, loc, adaptor.getM0(), wgRows);
      Value wgBytes = i32Const(rewriter, loc, 64 * kSwizzleBytes);
      Value wgOff = arith::MulIOp::create(rewriter, loc, st.cw, wgBytes);
      for (int64_t b = 0; b < boxes; ++b) {
        Value boxOff =
            i32Const(rewriter, loc, st.offset + b * st.blockM * kSwizzleBytes);
        Value off = arith::AddIOp::create(rewriter, loc, wgOff, boxOff);
        Value src = LLVM::GEPOp::create(rewriter, loc, st.smemT, i8, st.smem,
                                        ValueRange{off});
        Value col = i32Const(rewriter, loc, b * kBoxCols);
        NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
            rewriter, loc, adaptor.getMap(), src,
            ValueRange{col, adaptor.getHead(), orow, adaptor.getBatch()},
            /*l2CacheHint=*/Value(), NVVM::TMAStoreMode::TILE,
            /*predicate=*/Value());
      }
      NVVM::CpAsyncBulkCommitGroupOp::create(rewriter, loc);
      if (op.getDrain())
        waitBulkReads(rewriter, loc);
    }
    // The leader's wait covers the warpgroup only after a barrier: then no
    // thread of it goes on before the store has read the buffer.
    if (op.getDrain())
      epilogueBarrier(rewriter, loc, st.consumers, st.cw);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Staged as for the TMA store, then copied out by the warpgroup's threads:
/// unit idx = ltid + 128 i of the 64 x (cols / 8) 16-byte units, row idx /
/// units-per-row and unit idx % units-per-row, read from its swizzled place
/// and stored to the row's place in global memory.
struct StoreOStagedLowering : OpConversionPattern<StoreOStagedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StoreOStagedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i8 = rewriter.getI8Type();
    Staging st = stagingOf(rewriter, loc, op, adaptor);
    const int64_t elemBytes = st.et.getIntOrFloatBitWidth() / 8;
    const int64_t cols =
        op.getColumns().value_or(op.getO().getType().getColumns());
    const int64_t unitsPerRow = cols * elemBytes / 16;
    const int64_t units = 64 * unitsPerRow;
    // Every thread has copied out the previous tile's rows.
    if (op.getWaitPrevious())
      epilogueBarrier(rewriter, loc, st.consumers, st.cw);
    stageO(rewriter, loc, st);
    epilogueBarrier(rewriter, loc, st.consumers, st.cw);
    Type i32 = rewriter.getI32Type();
    Value perRow = i32Const(rewriter, loc, unitsPerRow);
    Value c8 = i32Const(rewriter, loc, 8);
    Value c16 = i32Const(rewriter, loc, 16);
    Value rowBytes = i32Const(rewriter, loc, kSwizzleBytes);
    Value c64 = i32Const(rewriter, loc, 64);
    Value wgRow = arith::MulIOp::create(rewriter, loc, st.cw, c64);
    auto v4i32 = VectorType::get({4}, i32);
    // the batch's part of the address, once
    Value batchOff = batchOffset(rewriter, loc, adaptor);
    for (int64_t i = 0; i * 128 < units; ++i) {
      OpBuilder::InsertionGuard guard(rewriter);
      Value idx = st.tp.ltid;
      if (i) {
        Value step = i32Const(rewriter, loc, 128 * i);
        idx = arith::AddIOp::create(rewriter, loc, idx, step);
      }
      if ((i + 1) * 128 > units) {
        Value total = i32Const(rewriter, loc, units);
        Value inside = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::ult, idx, total);
        openIf(rewriter, loc, inside);
      }
      Value r = arith::DivUIOp::create(rewriter, loc, idx, perRow);
      Value u = arith::RemUIOp::create(rewriter, loc, idx, perRow);
      Value tileRow = arith::AddIOp::create(rewriter, loc, adaptor.getRow0(), r);
      auto [q, head] = packedPlace(rewriter, loc, tileRow, adaptor.getHead(),
                                   adaptor.getGroup());
      Value inBounds = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::slt, q, adaptor.getBound());
      openIf(rewriter, loc, inBounds);
      // shared: box u / 8, row 64 st.cw + r, unit (u % 8) ^ (r % 8)
      Value box = arith::DivUIOp::create(rewriter, loc, u, c8);
      Value boxBytes = i32Const(rewriter, loc, st.blockM * kSwizzleBytes);
      Value off = arith::MulIOp::create(rewriter, loc, box, boxBytes);
      Value srow = arith::AddIOp::create(rewriter, loc, wgRow, r);
      Value srowOff = arith::MulIOp::create(rewriter, loc, srow, rowBytes);
      off = arith::AddIOp::create(rewriter, loc, off, srowOff);
      Value inBox = arith::RemUIOp::create(rewriter, loc, u, c8);
      Value rmod = arith::RemUIOp::create(rewriter, loc, r, c8);
      Value swz = arith::XOrIOp::create(rewriter, loc, inBox, rmod);
      Value swzOff = arith::MulIOp::create(rewriter, loc, swz, c16);
      off = arith::AddIOp::create(rewriter, loc, off, swzOff);
      Value base = i32Const(rewriter, loc, st.offset);
      off = arith::AddIOp::create(rewriter, loc, off, base);
      Value src = LLVM::GEPOp::create(rewriter, loc, st.smemT, i8, st.smem,
                                      ValueRange{off});
      Value v = LLVM::LoadOp::create(rewriter, loc, v4i32, src,
                                     /*alignment=*/16);
      // global: element (q, head, 8 u)
      Value col = arith::MulIOp::create(rewriter, loc, u, c8);
      Value dst = elementPointer(rewriter, loc, adaptor, batchOff, q, head,
                                 col, elemBytes);
      LLVM::StoreOp::create(rewriter, loc, v, dst, /*alignment=*/16);
    }
    // Q's buffer, for the producer's TMA loads next: this thread's
    // generic-proxy accesses before them.
    if (op.getDrain())
      fenceSharedForAsyncProxy(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void fa3::hopper::populateEpilogueToNVVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<FinalizeRowsLowering, StoreLseLowering, StoreODirectLowering,
               ReduceAddLowering, StageFragmentLowering, ReduceAddBulkLowering,
               WaitTurnLowering, PassTurnLowering, StoreOTmaLowering,
               StoreOStagedLowering>(converter,
                                                     patterns.getContext());
}
