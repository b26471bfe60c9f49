//===- FragmentToNVVM.cpp - fragments unrolled into registers -------------===//
//
// The one place where a !hopper.frag becomes registers: each pattern takes
// the struct of a thread's registers (Patterns.h) and writes the PTX of its
// op on them, fully unrolled, which is what wgmma and the register
// allocator need. The fragment layout (HopperFragmentOps.td) was validated
// on an H200 (docs/hopper-prototype-notes.md).
//
// (Each IR-building call stands in a statement of its own: the order of
// function arguments is unspecified, and GCC and clang differ, so the
// kernels would differ between the two builds.)
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Attn/Utils/OnlineSoftmax.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace fa3::hopper;

namespace {
constexpr int64_t kKStepBytes = 32;   // wgmma K: 16 16-bit or 32 8-bit
/// The k-step (wgmma's K) of operands of element type `t`.
int64_t kStepOf(mlir::Type t) {
  return kKStepBytes / (t.getIntOrFloatBitWidth() / 8);
}


LLVM::LLVMStructType registersType(FragmentType t) {
  MLIRContext *ctx = t.getContext();
  Type reg = t.isRowVector() || t.getElementType().isF32()
                 ? Type(Float32Type::get(ctx))
                 : Type(IntegerType::get(ctx, 32));
  return LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(t.getRegisters(), reg));
}

} // namespace

Value fa3::hopper::i32Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}
void fa3::hopper::fenceSharedForAsyncProxy(OpBuilder &b, Location loc) {
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
}
Value fa3::hopper::i64Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}
Value fa3::hopper::f32Const(OpBuilder &b, Location loc, double v) {
  return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                        APFloat(static_cast<float>(v)));
}

LLVM::InlineAsmOp fa3::hopper::inlineAsm(OpBuilder &b, Location loc,
                                         Type result, ValueRange operands,
                                         StringRef text, StringRef constraints,
                                         bool sideEffects) {
  return LLVM::InlineAsmOp::create(
      b, loc, result, operands, text, constraints, sideEffects,
      /*is_align_stack=*/false, LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
}

/// The registers of a converted fragment.
SmallVector<Value> fa3::hopper::unpack(OpBuilder &b, Location loc, Value regs) {
  auto st = cast<LLVM::LLVMStructType>(regs.getType());
  SmallVector<Value> out;
  for (int64_t i = 0, e = st.getBody().size(); i < e; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, regs, i));
  return out;
}

/// Registers back into a fragment's struct.
Value fa3::hopper::pack(OpBuilder &b, Location loc, Type structType,
                        ValueRange regs) {
  Value st = LLVM::UndefOp::create(b, loc, structType);
  for (auto [i, r] : llvm::enumerate(regs))
    st = LLVM::InsertValueOp::create(b, loc, st, r, i);
  return st;
}

namespace {

/// Which of the thread's two rows accumulator register `idx` belongs to
/// (register 4k + 2i + e: n8 block k, row i, column e).
int64_t rowOf(int64_t idx) { return (idx % 4) / 2; }


} // namespace

/// The thread's place in its warpgroup's fragment: warp, lane, the row of
/// its first register (16 warp + lane / 4) and its first column
/// (2 (lane % 4)).
Value fa3::hopper::quadReduce(OpBuilder &b, Location loc, Value v,
                              function_ref<Value(Value, Value)> combine) {
  for (int64_t off : {1, 2}) {
    Value all = i32Const(b, loc, -1);
    Value offset = i32Const(b, loc, off);
    Value clamp = i32Const(b, loc, 31);
    Value other = NVVM::ShflOp::create(b, loc, b.getF32Type(), all, v, offset,
                                       clamp, NVVM::ShflKind::bfly,
                                       UnitAttr());
    v = combine(v, other);
  }
  return v;
}

ThreadPlace fa3::hopper::threadPlace(OpBuilder &b, Location loc) {
  Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  Value c128 = i32Const(b, loc, kWarpgroupThreads);
  Value ltid = arith::RemUIOp::create(b, loc, tid, c128);
  Value c32 = i32Const(b, loc, 32);
  Value warp = arith::DivUIOp::create(b, loc, ltid, c32);
  Value lane = arith::RemUIOp::create(b, loc, ltid, c32);
  Value c4 = i32Const(b, loc, 4);
  Value quad = arith::DivUIOp::create(b, loc, lane, c4);
  Value tq = arith::RemUIOp::create(b, loc, lane, c4);
  Value c16 = i32Const(b, loc, 16);
  Value warpRow = arith::MulIOp::create(b, loc, warp, c16);
  Value row = arith::AddIOp::create(b, loc, warpRow, quad);
  Value c2 = i32Const(b, loc, 2);
  Value colbase = arith::MulIOp::create(b, loc, tq, c2);
  return {ltid, warp, lane, tq, row, colbase};
}

StmatrixLanes fa3::hopper::stmatrixLanes(OpBuilder &b, Location loc,
                                         Value lane) {
  Value c8 = i32Const(b, loc, 8);
  Value mat = arith::DivUIOp::create(b, loc, lane, c8);
  Value rin = arith::RemUIOp::create(b, loc, lane, c8);
  Value c1 = i32Const(b, loc, 1);
  Value half = arith::AndIOp::create(b, loc, mat, c1);
  Value blockHi = arith::ShRUIOp::create(b, loc, mat, c1);
  return {rin, half, blockHi};
}

namespace {

/// The thread's registers of row i combined pairwise, as a balanced tree.
Value reduceRow(OpBuilder &b, Location loc, ArrayRef<Value> regs, int64_t i,
                function_ref<Value(Value, Value)> combine) {
  SmallVector<Value> vals;
  for (int64_t idx = 0, e = regs.size(); idx < e; ++idx)
    if (rowOf(idx) == i)
      vals.push_back(regs[idx]);
  while (vals.size() > 1) {
    SmallVector<Value> next;
    for (size_t t = 0; t + 1 < vals.size(); t += 2)
      next.push_back(combine(vals[t], vals[t + 1]));
    if (vals.size() % 2)
      next.push_back(vals.back());
    vals = next;
  }
  // (every row of a fragment has registers in every thread: rowOf)
  return vals.empty() ? Value() : vals.front();
}

/// The max of the thread's registers of row i, then of the row's quad
/// (the four threads holding the row): a tree, then two shuffles.
/// llvm.intr.maxnum rather than arith/math ops, which lower to libdevice
/// calls on NVVM: the kernel needs no libdevice.
Value rowMax(OpBuilder &b, Location loc, ArrayRef<Value> s, int64_t i) {
  auto maxnum = [&](Value x, Value y) -> Value {
    return LLVM::MaxNumOp::create(b, loc, x, y);
  };
  Value mx = reduceRow(b, loc, s, i, maxnum);
  return quadReduce(b, loc, mx, maxnum);
}

/// The sum of the thread's registers of row i (its partial row sum).
Value rowSum(OpBuilder &b, Location loc, ArrayRef<Value> p, int64_t i) {
  return reduceRow(b, loc, p, i, [&](Value x, Value y) -> Value {
    return arith::AddFOp::create(b, loc, x, y);
  });
}

StringRef wgmmaTypeName(Type t) {
  return isa<Float8E4M3FNType>(t) ? "e4m3" : t.isBF16() ? "bf16" : "f16";
}
NVVM::WGMMATypes wgmmaType(Type t) {
  if (isa<Float8E4M3FNType>(t))
    return NVVM::WGMMATypes::e4m3;
  return t.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
}

//===----------------------------------------------------------------------===//
// Warpgroup MMA
//===----------------------------------------------------------------------===//

/// The k-steps of A B^T, K-major in boxes of 64 columns: k-step kk reads
/// column 16 kk, i.e. box 16 kk / 64 at byte (16 kk % 64) x 2 of its rows;
/// an MN-major operand's k-step kk is its rows 16 kk .. (2048 kk bytes
/// on). Descriptors count 16-byte units. (wgmma's layout names: A K-major
/// is "row", B K-major "col".)
struct WgmmaSSLowering : OpConversionPattern<WgmmaSSOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WgmmaSSOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    FragmentType d = op.getD().getType();
    Type et = op.getOperandType();
    const int64_t elemBytes = et.getIntOrFloatBitWidth() / 8;
    const int64_t boxCols = kSwizzleBytes / elemBytes;
    Type accT = getTypeConverter()->convertType(d);
    // D = C + A B^T from the given accumulator, else from zero (scale-d 0
    // on the first k-step)
    const bool accumulate = bool(adaptor.getC());
    Value acc = accumulate ? adaptor.getC()
                           : LLVM::UndefOp::create(rewriter, loc, accT);
    MLIRContext *ctx = rewriter.getContext();
    const int64_t kStep = kStepOf(et);
    auto shape = NVVM::MMAShapeAttr::get(ctx, 64, d.getColumns(), kStep);
    const int64_t ksteps = static_cast<int64_t>(op.getK()) / kStep;
    for (int64_t kk = 0; kk < ksteps; ++kk) {
      int64_t col = kk * kStep;
      // K-major: column col of the boxes; MN-major: row col of 128 bytes.
      auto offset = [&](bool mnMajor, int64_t boxBytes) {
        return mnMajor ? col * kSwizzleBytes
                       : (col / boxCols) * boxBytes + (col % boxCols) * elemBytes;
      };
      int64_t aOff = offset(op.getAMnMajor(), op.getABoxBytes());
      int64_t bOff = offset(op.getBMnMajor(), op.getBBoxBytes());
      Value da = adaptor.getDescA(), db = adaptor.getDescB();
      if (aOff) {
        Value units = i64Const(rewriter, loc, aOff >> 4);
        da = arith::AddIOp::create(rewriter, loc, da, units);
      }
      if (bOff) {
        Value units = i64Const(rewriter, loc, bOff >> 4);
        db = arith::AddIOp::create(rewriter, loc, db, units);
      }
      acc = NVVM::WgmmaMmaAsyncOp::create(
          rewriter, loc, accT, acc, da, db, shape, wgmmaType(et), wgmmaType(et),
          NVVM::WGMMATypes::f32,
          kk == 0 && !accumulate ? NVVM::WGMMAScaleOut::zero
                                 : NVVM::WGMMAScaleOut::one,
          NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
          op.getAMnMajor() ? NVVM::MMALayout::col : NVVM::MMALayout::row,
          op.getBMnMajor() ? NVVM::MMALayout::row : NVVM::MMALayout::col,
          NVVM::MMAIntOverflowAttr());
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
    rewriter.replaceOp(op, acc);
    return success();
  }
};

/// wgmma m64nNk16 with A from registers and B transposed (N-major), as
/// inline PTX: neither nvvm.wgmma.mma_async nor nvgpu.warpgroup.mma has
/// the register-A form (llvm-project issue 133733), and nvvm.inline_ptx
/// does not tie read-write operands to results. Operands: the N / 2
/// accumulators (outputs tied to inputs), 4 A registers, the B descriptor,
/// the scale-d flag. FP8 (m64nNk32) has no transpose operand: its B is
/// K-major.
std::string rsWgmmaPtx(int64_t n, StringRef et, std::string &constraints) {
  const bool fp8 = et == "e4m3";
  const int64_t nacc = n / 2, a = 2 * nacc;
  std::string d, cons;
  for (int64_t i = 0; i < nacc; ++i)
    d += (i ? ", $" : "$") + std::to_string(i);
  std::string text =
      "{\n.reg .pred p;\nsetp.ne.b32 p, $" + std::to_string(a + 5) +
      ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
      (fp8 ? "k32" : "k16") + ".f32." + et.str() + "." + et.str() + " {" +
      d + "}, {$" + std::to_string(a) + ", $" + std::to_string(a + 1) +
      ", $" + std::to_string(a + 2) + ", $" + std::to_string(a + 3) + "}, $" +
      std::to_string(a + 4) + (fp8 ? ", p, 1, 1;\n}" : ", p, 1, 1, 1;\n}");
  SmallVector<std::string> c(nacc, "=f");
  for (int64_t i = 0; i < nacc; ++i)
    c.push_back(std::to_string(i));
  for (int i = 0; i < 4; ++i)
    c.push_back("r");
  c.push_back("l");
  c.push_back("n");
  constraints = llvm::join(c, ",");
  return text;
}

/// k-step kk of A B reads A's registers 4 kk .. 4 kk + 3 (its n8 blocks
/// 2 kk and 2 kk + 1) and B's rows 16 kk ..: 16 rows of 128 bytes further.
/// FP8: A's n8 blocks 4 kk .. 4 kk + 3, and B (K-major) byte 32 kk of its
/// rows: box 32 kk / 128 (b_box_bytes apart), byte 32 kk % 128 of it.
struct WgmmaRSLowering : OpConversionPattern<WgmmaRSOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WgmmaRSOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    FragmentType c = op.getC().getType();
    std::string constraints;
    std::string text =
        rsWgmmaPtx(c.getColumns(), wgmmaTypeName(op.getA().getType().getElementType()),
                   constraints);
    Type accT = adaptor.getC().getType();
    SmallVector<Value> a = unpack(rewriter, loc, adaptor.getA());
    Value acc = adaptor.getC();
    Type at = op.getA().getType().getElementType();
    const bool kMajorB = isa<Float8E4M3FNType>(at);
    const int64_t kStep = kStepOf(at);
    const int64_t boxBytes = static_cast<int64_t>(op.getBBoxBytes().value_or(0));
    // An accumulator that is hopper.zero starts the product with scale-d 0:
    // its registers are not read (undefined inputs, no moves of zeros).
    const bool fromZero = op.getC().getDefiningOp<FragmentZeroOp>() != nullptr;
    for (int64_t kk = 0; kk < op.getA().getType().getColumns() / kStep; ++kk) {
      const int64_t kByte = kk * kKStepBytes;
      int64_t off = kMajorB ? (kByte / kSwizzleBytes) * boxBytes +
                                  kByte % kSwizzleBytes
                            : kk * kStep * kSwizzleBytes;
      Value db = adaptor.getDescB();
      if (off) {
        Value units = i64Const(rewriter, loc, off >> 4);
        db = arith::AddIOp::create(rewriter, loc, db, units);
      }
      const bool zeroStart = fromZero && kk == 0;
      SmallVector<Value> operands;
      if (zeroStart)
        operands.assign(c.getRegisters(),
                        LLVM::UndefOp::create(rewriter, loc, rewriter.getF32Type()));
      else
        operands = unpack(rewriter, loc, acc);
      operands.append(a.begin() + 4 * kk, a.begin() + 4 * kk + 4);
      operands.push_back(db);
      operands.push_back(i32Const(rewriter, loc, zeroStart ? 0 : 1));
      acc = inlineAsm(rewriter, loc, accT, operands, text, constraints,
                      /*sideEffects=*/true)
                .getResult(0);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
    rewriter.replaceOp(op, acc);
    return success();
  }
};

/// wgmma.wait_group, then an empty asm that "redefines" every register of
/// each fragment, so that LLVM cannot move reads of the accumulators into
/// the asynchronous window.
struct WgmmaWaitLowering : OpConversionPattern<WgmmaWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WgmmaWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NVVM::WgmmaWaitGroupSyncOp::create(rewriter, loc, op.getPending());
    SmallVector<Value> ready;
    for (Value frag : adaptor.getFragments()) {
      SmallVector<Value> regs = unpack(rewriter, loc, frag);
      bool isF32 = regs.front().getType().isF32();
      SmallVector<std::string> cons(regs.size(), isF32 ? "=f" : "=r");
      for (size_t i = 0; i < regs.size(); ++i)
        cons.push_back(std::to_string(i));
      ready.push_back(inlineAsm(rewriter, loc, frag.getType(), regs, "",
                                llvm::join(cons, ","), /*sideEffects=*/true)
                          .getResult(0));
    }
    rewriter.replaceOp(op, ready);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The online softmax
//===----------------------------------------------------------------------===//

/// tanh(s * pre) for each score, tanh.approx.
struct SoftcapLowering : OpConversionPattern<SoftcapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftcapOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> out;
    for (Value x : unpack(rewriter, loc, adaptor.getScores())) {
      Value scaled = arith::MulFOp::create(rewriter, loc, x, adaptor.getPre());
      out.push_back(inlineAsm(rewriter, loc, rewriter.getF32Type(), scaled,
                              "tanh.approx.f32 $0, $1;", "=f,f",
                              /*sideEffects=*/false)
                        .getResult(0));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getScores().getType(), out));
    return success();
  }
};

/// Per row of the thread, the visible columns relative to the thread's
/// first one: register (k, e) sits at column col0 + colbase + 8k + e, a
/// constant offset, so each score costs one compare (two with a window's
/// lower bound) and a select.
struct MaskLowering : OpConversionPattern<MaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getTransposed())
      return lowerTransposed(op, adaptor, rewriter);
    Location loc = op.getLoc();
    ThreadPlace tp = threadPlace(rewriter, loc);
    Value cb = arith::AddIOp::create(rewriter, loc, adaptor.getCol0(), tp.colbase);
    Value row0 = arith::AddIOp::create(rewriter, loc, adaptor.getRow0(), tp.row);
    Type i32 = rewriter.getI32Type();
    SmallVector<Value, 2> loRel, hiRel;
    for (int64_t i = 0; i < 2; ++i) {
      Value row = row0;
      if (i) {
        Value eight = i32Const(rewriter, loc, 8);
        row = arith::AddIOp::create(rewriter, loc, row0, eight);
      }
      // GQA packing: the tile row's query row
      if (adaptor.getGroup())
        row = arith::DivUIOp::create(rewriter, loc, row, adaptor.getGroup());
      // The bounds are loop-invariant; computed from an opaque copy of the
      // row, they do not hold registers across the whole kv loop.
      Value opaque = inlineAsm(rewriter, loc, i32, row, "mov.b32 $0, $1;",
                               "=r,r", /*sideEffects=*/true)
                         .getResult(0);
      auto call = func::CallOp::create(
          rewriter, loc, op.getVisibleAttr(), TypeRange{i32, i32},
          ValueRange{opaque, adaptor.getSq(), adaptor.getSkv()});
      loRel.push_back(op.getLeftBounded()
                          ? arith::SubIOp::create(rewriter, loc,
                                                  call.getResult(0), cb)
                                .getResult()
                          : Value());
      hiRel.push_back(arith::SubIOp::create(rewriter, loc, call.getResult(1), cb));
    }
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    Value ninf = f32Const(rewriter, loc, -std::numeric_limits<double>::infinity());
    SmallVector<Value> out;
    for (int64_t idx = 0, e = s.size(); idx < e; ++idx) {
      int64_t k = idx / 4, i = rowOf(idx), ee = idx % 2;
      Value dc = i32Const(rewriter, loc, 8 * k + ee);
      Value vis = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sgt,
                                        hiRel[i], dc);
      if (loRel[i]) {
        Value above = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::sle, loRel[i], dc);
        vis = arith::AndIOp::create(rewriter, loc, vis, above);
      }
      out.push_back(arith::SelectOp::create(rewriter, loc, vis, s[idx], ninf));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getScores().getType(), out));
    return success();
  }

  /// S^T: rows are keys, columns queries. Per column of the thread (8k + e
  /// from its first), the query's visible keys; a score is kept iff its row
  /// is one of them.
  LogicalResult lowerTransposed(MaskOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const {
    Location loc = op.getLoc();
    ThreadPlace tp = threadPlace(rewriter, loc);
    Value cb = arith::AddIOp::create(rewriter, loc, adaptor.getCol0(), tp.colbase);
    Value row0 = arith::AddIOp::create(rewriter, loc, adaptor.getRow0(), tp.row);
    Value eight = i32Const(rewriter, loc, 8);
    Value row1 = arith::AddIOp::create(rewriter, loc, row0, eight);
    Value rows[] = {row0, row1};
    Type i32 = rewriter.getI32Type();
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    Value ninf = f32Const(rewriter, loc, -std::numeric_limits<double>::infinity());
    SmallVector<Value> out(s.size());
    const int64_t blocks = op.getScores().getType().getColumns() / 8;
    for (int64_t k = 0; k < blocks; ++k)
      for (int64_t e = 0; e < 2; ++e) {
        Value dc = i32Const(rewriter, loc, 8 * k + e);
        Value col = arith::AddIOp::create(rewriter, loc, cb, dc);
        auto call = func::CallOp::create(
            rewriter, loc, op.getVisibleAttr(), TypeRange{i32, i32},
            ValueRange{col, adaptor.getSq(), adaptor.getSkv()});
        for (int64_t i = 0; i < 2; ++i) {
          int64_t idx = 4 * k + 2 * i + e;
          Value vis = arith::CmpIOp::create(rewriter, loc,
                                            arith::CmpIPredicate::slt, rows[i],
                                            call.getResult(1));
          if (op.getLeftBounded()) {
            Value above = arith::CmpIOp::create(
                rewriter, loc, arith::CmpIPredicate::sge, rows[i],
                call.getResult(0));
            vis = arith::AndIOp::create(rewriter, loc, vis, above);
          }
          out[idx] = arith::SelectOp::create(rewriter, loc, vis, s[idx], ninf);
        }
      }
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getScores().getType(), out));
    return success();
  }
};

/// Register 4k + 2i + e is key R + 8 i and query C + 8 k + e (R, C: the
/// thread's first row and column), so r - c = 8 i - 8 k - e - (C - R): a
/// bound b on r - c is the scalar b + C - R against the register's
/// constant. The scalar is formed in i64 (the offsets span i32) and clamped
/// to +-512, which keeps every comparison with |constant| < 512 as it was.
struct BandMaskLowering : OpConversionPattern<BandMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BandMaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ThreadPlace tp = threadPlace(rewriter, loc);
    Value r0 = arith::AddIOp::create(rewriter, loc, adaptor.getRow0(), tp.row);
    Value c0 = arith::AddIOp::create(rewriter, loc, adaptor.getCol0(), tp.colbase);
    Type i64 = rewriter.getI64Type(), i32 = rewriter.getI32Type();
    // (one op a statement: the same order under GCC and clang)
    Value c64 = arith::ExtSIOp::create(rewriter, loc, i64, c0);
    Value r64 = arith::ExtSIOp::create(rewriter, loc, i64, r0);
    Value d = arith::SubIOp::create(rewriter, loc, c64, r64);
    auto scalar = [&](Value bound) -> Value {
      if (!bound)
        return Value();
      Value x = arith::AddIOp::create(rewriter, loc, bound, d);
      x = arith::MaxSIOp::create(
          rewriter, loc, x, arith::ConstantIntOp::create(rewriter, loc, i64, -512));
      x = arith::MinSIOp::create(
          rewriter, loc, x, arith::ConstantIntOp::create(rewriter, loc, i64, 512));
      return arith::TruncIOp::create(rewriter, loc, i32, x);
    };
    Value lo = scalar(adaptor.getLo()), hi = scalar(adaptor.getHi());
    // A row past skv sees no query: its upper bound is -512 (or, with no
    // upper bound, the row's own predicate).
    Value inKeys[2], rowHi[2];
    for (int64_t i = 0; i < 2; ++i) {
      Value r = r0;
      if (i)
        r = arith::AddIOp::create(rewriter, loc, r0, i32Const(rewriter, loc, 8));
      inKeys[i] = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt,
                                        r, adaptor.getSkv());
      if (hi)
        rowHi[i] = arith::SelectOp::create(rewriter, loc, inKeys[i], hi,
                                           i32Const(rewriter, loc, -512));
    }
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    Value ninf = f32Const(rewriter, loc, -std::numeric_limits<double>::infinity());
    SmallVector<Value> out;
    for (int64_t idx = 0, e = s.size(); idx < e; ++idx) {
      const int64_t k = idx / 4, i = rowOf(idx);
      Value c = i32Const(rewriter, loc, 8 * i - 8 * k - idx % 2);
      Value vis = hi ? arith::CmpIOp::create(rewriter, loc,
                                             arith::CmpIPredicate::sgt,
                                             rowHi[i], c)
                           .getResult()
                     : inKeys[i];
      if (lo)
        vis = arith::AndIOp::create(
            rewriter, loc, vis,
            arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sle, lo, c));
      out.push_back(arith::SelectOp::create(rewriter, loc, vis, s[idx], ninf));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getScores().getType(), out));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The backward's math
//===----------------------------------------------------------------------===//

/// Byte `offset` + 4 colbase: the thread's first column of the per-query
/// vector at `offset` (hopper.load_columns' layout).
Value columnBase(OpBuilder &b, Location loc, const ThreadPlace &tp,
                 Value offset) {
  Value colBytes = arith::MulIOp::create(b, loc, tp.colbase, i32Const(b, loc, 4));
  return arith::AddIOp::create(b, loc, offset, colBytes);
}

/// The thread's pair of columns of n8 block k (8k + colbase + {0, 1}): one
/// 8-byte load at `base` (columnBase) + 32 k.
std::pair<Value, Value> loadColumnPair(OpBuilder &b, Location loc, Value smem,
                                       Value base, int64_t k) {
  Value at = base;
  if (k)
    at = arith::AddIOp::create(b, loc, base, i32Const(b, loc, 32 * k));
  auto smemT = cast<LLVM::LLVMPointerType>(smem.getType());
  Value p = LLVM::GEPOp::create(b, loc, smemT, b.getI8Type(), smem,
                                ValueRange{at});
  auto v2 = VectorType::get({2}, b.getF32Type());
  Value pair = LLVM::LoadOp::create(b, loc, v2, p, /*alignment=*/8);
  return {vector::ExtractOp::create(b, loc, pair, 0),
          vector::ExtractOp::create(b, loc, pair, 1)};
}

/// A per-query operand's registers (4k + 2i + e: column e of block k, both
/// rows i): the fragment's, or with `columns` each block's pair loaded just
/// before `use(k)` computes that block (the registers hold one pair at a
/// time).
void forEachColumnBlock(OpBuilder &b, Location loc, int64_t blocks,
                        Value frag, Value smem, Value offset,
                        function_ref<void(int64_t, ArrayRef<Value>)> use) {
  SmallVector<Value> all;
  Value base;
  if (frag)
    all = unpack(b, loc, frag);
  else
    base = columnBase(b, loc, threadPlace(b, loc), offset);
  for (int64_t k = 0; k < blocks; ++k) {
    if (frag) {
      use(k, ArrayRef<Value>(all).slice(4 * k, 4));
      continue;
    }
    auto [c0, c1] = loadColumnPair(b, loc, smem, base, k);
    Value regs[4] = {c0, c1, c0, c1};
    use(k, regs);
  }
}

/// Per column pair of the thread's n8 blocks one 8-byte shared load, its
/// two rows sharing the values.
struct LoadColumnsLowering : OpConversionPattern<LoadColumnsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LoadColumnsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value base = columnBase(rewriter, loc, threadPlace(rewriter, loc),
                            adaptor.getOffset());
    FragmentType t = op.getResult().getType();
    SmallVector<Value> out(t.getRegisters());
    for (int64_t k = 0; k < t.getColumns() / 8; ++k) {
      auto [c0, c1] = loadColumnPair(rewriter, loc, adaptor.getSmem(), base, k);
      out[4 * k] = out[4 * k + 2] = c0;
      out[4 * k + 1] = out[4 * k + 3] = c1;
    }
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(t), out));
    return success();
  }
};

/// -lse log2(e), or -inf for an infinite lse: the exponent offset of
/// p = exp2(s scale_log2 - lse log2(e)) that makes p 0 for a query that
/// saw no key (lse -inf) or lies past Sq (lse +inf).
static Value negLog2OrNegInf(OpBuilder &rewriter, Location loc, Value lse) {
  Value inf = f32Const(rewriter, loc, std::numeric_limits<double>::infinity());
  Value ninf = f32Const(rewriter, loc, -std::numeric_limits<double>::infinity());
  Value negLog2e = f32Const(rewriter, loc, -fa3::attn::kLog2e);
  // (not llvm.intr.fabs: the NVVM conversion takes it for libdevice's)
  Value pos = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OEQ, lse, inf);
  Value neg = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OEQ, lse, ninf);
  Value isInf = arith::OrIOp::create(rewriter, loc, pos, neg);
  Value negMu = arith::MulFOp::create(rewriter, loc, lse, negLog2e);
  return arith::SelectOp::create(rewriter, loc, isInf, ninf, negMu);
}

/// Lane l copies rows l, l + 32, ...: a predicated global load (the fill
/// past the bound), a 4-byte shared store (neg_log2: the
/// value transformed first).
struct StageRowsLowering : OpConversionPattern<StageRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StageRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type(), f32 = rewriter.getF32Type();
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, i32);
    Value c32 = i32Const(rewriter, loc, 32);
    Value lane = arith::RemUIOp::create(rewriter, loc, tid, c32);
    auto gptrT = cast<LLVM::LLVMPointerType>(adaptor.getPtr().getType());
    auto smemT = cast<LLVM::LLVMPointerType>(adaptor.getSmem().getType());
    const int64_t rows = static_cast<int64_t>(op.getRows());
    for (int64_t i = 0; i < rows; i += 32) {
      Value di = i32Const(rewriter, loc, i);
      Value idx = arith::AddIOp::create(rewriter, loc, lane, di);
      Value row = arith::AddIOp::create(rewriter, loc, adaptor.getRow0(), idx);
      Value in = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt,
                                       row, adaptor.getBound());
      Value inI32 = arith::ExtUIOp::create(rewriter, loc, i32, in);
      Value row64 = arith::ExtSIOp::create(rewriter, loc, rewriter.getI64Type(), row);
      Value e = arith::AddIOp::create(rewriter, loc, adaptor.getBase(), row64);
      Value p = LLVM::GEPOp::create(rewriter, loc, gptrT, f32, adaptor.getPtr(),
                                    ValueRange{e});
      Value v;
      if (op.getNegLog2()) {
        // -v log2(e), an infinite v -inf; the fill as given
        v = inlineAsm(rewriter, loc, f32, ValueRange{inI32, p},
                      "{\n.reg .pred p;\nsetp.ne.b32 p, $1, 0;\n"
                      "mov.f32 $0, 0f00000000;\n@p ld.global.nc.f32 $0, [$2];\n}",
                      "=f,r,l", /*sideEffects=*/false)
                .getResult(0);
        v = negLog2OrNegInf(rewriter, loc, v);
        v = arith::SelectOp::create(rewriter, loc, in, v, adaptor.getFill());
      } else {
        v = inlineAsm(rewriter, loc, f32,
                      ValueRange{inI32, adaptor.getFill(), p},
                      "{\n.reg .pred p;\nsetp.ne.b32 p, $1, 0;\n"
                      "mov.f32 $0, $2;\n@p ld.global.nc.f32 $0, [$3];\n}",
                      "=f,r,f,l", /*sideEffects=*/false)
                .getResult(0);
      }
      Value c4 = i32Const(rewriter, loc, 4);
      Value bytes = arith::MulIOp::create(rewriter, loc, idx, c4);
      Value at = arith::AddIOp::create(rewriter, loc, adaptor.getOffset(), bytes);
      Value q = LLVM::GEPOp::create(rewriter, loc, smemT, rewriter.getI8Type(),
                                    adaptor.getSmem(), ValueRange{at});
      LLVM::StoreOp::create(rewriter, loc, v, q, /*alignment=*/4);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// p = exp2(s scale_log2 - lse log2(e)) through the forward's builder
/// (fa3::attn::buildSoftmaxProb with -mu = -lse log2(e)); an infinite lse
/// gives -mu = -inf, so p = 0.
struct GradProbsLowering : OpConversionPattern<GradProbsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GradProbsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    SmallVector<Value> p;
    forEachColumnBlock(
        rewriter, loc, static_cast<int64_t>(s.size()) / 4, adaptor.getLse(),
        adaptor.getSmem(), adaptor.getOffset(),
        [&](int64_t k, ArrayRef<Value> lse) {
          for (int64_t r = 0; r < 4; ++r) {
            Value negMu = op.getLseNegLog2()
                              ? lse[r]
                              : negLog2OrNegInf(rewriter, loc, lse[r]);
            p.push_back(fa3::attn::buildSoftmaxProb(
                rewriter, loc, s[4 * k + r], adaptor.getScaleLog2(), negMu));
          }
        });
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getScores().getType(), p));
    return success();
  }
};

/// ds = p (dp - delta), register by register.
struct GradScoresLowering : OpConversionPattern<GradScoresOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GradScoresOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> p = unpack(rewriter, loc, adaptor.getP());
    SmallVector<Value> dp = unpack(rewriter, loc, adaptor.getDp());
    SmallVector<Value> ds;
    forEachColumnBlock(
        rewriter, loc, static_cast<int64_t>(p.size()) / 4, adaptor.getDelta(),
        adaptor.getSmem(), adaptor.getOffset(),
        [&](int64_t k, ArrayRef<Value> delta) {
          for (int64_t r = 0; r < 4; ++r) {
            int64_t idx = 4 * k + r;
            Value d = arith::SubFOp::create(rewriter, loc, dp[idx], delta[r]);
            ds.push_back(arith::MulFOp::create(rewriter, loc, p[idx], d));
          }
        });
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getP().getType(), ds));
    return success();
  }
};

/// dx = ds (1 - t^2), 1 - t^2 as fma(-t, t, 1).
struct GradSoftcapLowering : OpConversionPattern<GradSoftcapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GradSoftcapOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> ds = unpack(rewriter, loc, adaptor.getDs());
    SmallVector<Value> t = unpack(rewriter, loc, adaptor.getTanh());
    Value one = f32Const(rewriter, loc, 1.0);
    SmallVector<Value> dx;
    for (size_t idx = 0; idx < ds.size(); ++idx) {
      Value nt = arith::NegFOp::create(rewriter, loc, t[idx]);
      Value dtanh = math::FmaOp::create(rewriter, loc, nt, t[idx], one);
      dx.push_back(arith::MulFOp::create(rewriter, loc, ds[idx], dtanh));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, adaptor.getDs().getType(), dx));
    return success();
  }
};

/// With 4-byte stores: 16-bit register 2k + i holds row i's columns 8k +
/// colbase + {0, 1}: 4 bytes at byte 16 (k % 8) + 2 colbase of the row in
/// box k / 8, whose 16-byte unit k % 8 the swizzle moves to (k % 8) ^
/// (row % 8); the row (16 warp + lane / 4 + 8 i) is lane / 4 modulo 8.
void storeSharedByWords(OpBuilder &b, Location loc, StoreSharedOp op,
                        ArrayRef<Value> regs, Value smem, Value offset,
                        Value column) {
  ThreadPlace tp = threadPlace(b, loc);
  Value c128 = i32Const(b, loc, kSwizzleBytes);
  Value rowBytes = arith::MulIOp::create(b, loc, tp.row, c128);
  Value c2 = i32Const(b, loc, 2);
  Value within = arith::MulIOp::create(b, loc, tp.colbase, c2);
  Value base = arith::AddIOp::create(b, loc, offset, rowBytes);
  base = arith::AddIOp::create(b, loc, base, within);
  Value c4 = i32Const(b, loc, 4);
  Value phase = arith::DivUIOp::create(b, loc, tp.lane, c4);
  auto smemT = cast<LLVM::LLVMPointerType>(smem.getType());
  const int64_t blocks = op.getTile().getType().getColumns() / 8;
  // at a column: the tile's units start at column / 8 of the box's row
  Value firstUnit;
  if (column) {
    Value c8 = i32Const(b, loc, 8);
    firstUnit = arith::DivUIOp::create(b, loc, column, c8);
  }
  for (int64_t k = 0; k < blocks; ++k) {
    Value unit = i32Const(b, loc, k % 8);
    if (firstUnit)
      unit = arith::AddIOp::create(b, loc, unit, firstUnit);
    Value swz = arith::XOrIOp::create(b, loc, unit, phase);
    Value c16 = i32Const(b, loc, 16);
    Value unitBytes = arith::MulIOp::create(b, loc, swz, c16);
    Value off = arith::AddIOp::create(b, loc, base, unitBytes);
    for (int64_t i = 0; i < 2; ++i) {
      int64_t fixed = (k / 8) * op.getBoxBytes() + i * 8 * kSwizzleBytes;
      Value o = off;
      if (fixed) {
        Value f = i32Const(b, loc, fixed);
        o = arith::AddIOp::create(b, loc, off, f);
      }
      Value p = LLVM::GEPOp::create(b, loc, smemT, b.getI8Type(), smem,
                                    ValueRange{o});
      LLVM::StoreOp::create(b, loc, regs[2 * k + i], p, /*alignment=*/4);
    }
  }
}

/// Where a lane of an ldmatrix / stmatrix .x4 over a warpgroup's 64-row
/// tile of 128-byte rows (128B swizzle, `offset` a multiple of 1024) points:
/// lane l gives the address of row l % 8 of matrix l / 8, matrix j being
/// rows 8 (j % 2) .. of the warp's 16 (the warpgroup's row 16 w + 8 (j % 2)
/// + l % 8) and 16-byte unit firstUnit + j / 2 of the pair the instruction
/// takes. Pair u (units u, u + 1) is unit u % 8 of the row in box u / 8
/// (`boxBytes` apart), moved by the swizzle to unit ^ (row % 8).
struct MatrixLaneAddress {
  Value smem, base, firstUnit, rowIn, c16;

  /// `column` (a multiple of 8, optional): the 16-bit tile starts that many
  /// columns into its box.
  MatrixLaneAddress(OpBuilder &b, Location loc, Value smem, Value offset,
                    Value column = Value())
      : smem(smem) {
    ThreadPlace tp = threadPlace(b, loc);
    StmatrixLanes sl = stmatrixLanes(b, loc, tp.lane);
    Value c8 = i32Const(b, loc, 8);
    c16 = i32Const(b, loc, 16);
    Value row = arith::MulIOp::create(b, loc, tp.warp, c16);
    row = arith::AddIOp::create(b, loc, row, arith::MulIOp::create(b, loc, sl.half, c8));
    row = arith::AddIOp::create(b, loc, row, sl.rowIn);
    base = arith::MulIOp::create(b, loc, row, i32Const(b, loc, kSwizzleBytes));
    base = arith::AddIOp::create(b, loc, offset, base);
    rowIn = sl.rowIn;
    firstUnit = sl.blockHi;
    if (column) {
      Value first = arith::DivUIOp::create(b, loc, column, c8);
      firstUnit = arith::AddIOp::create(b, loc, first, sl.blockHi);
    }
  }

  Value at(OpBuilder &b, Location loc, int64_t u, int64_t boxBytes) const {
    constexpr int64_t unitsPerBox = kSwizzleBytes / 16;
    Value unit = firstUnit;
    if (u % unitsPerBox)
      unit = arith::AddIOp::create(b, loc, unit, i32Const(b, loc, u % unitsPerBox));
    Value swz = arith::XOrIOp::create(b, loc, unit, rowIn);
    Value off = arith::AddIOp::create(b, loc, base,
                                      arith::MulIOp::create(b, loc, swz, c16));
    if (int64_t box = (u / unitsPerBox) * boxBytes)
      off = arith::AddIOp::create(b, loc, off, i32Const(b, loc, box));
    auto smemT = cast<LLVM::LLVMPointerType>(smem.getType());
    return LLVM::GEPOp::create(b, loc, smemT, b.getI8Type(), smem, ValueRange{off});
  }
};

/// With stmatrix: n8 blocks k, k + 1 (16-byte units k, k + 1) by one
/// stmatrix.x4 (FA3's copy of dS and P^T); matrix j's register is
/// 2 (k + j / 2) + j % 2, the thread's part of it.
void storeSharedByStmatrix(OpBuilder &b, Location loc, StoreSharedOp op,
                           ArrayRef<Value> regs, Value smem, Value offset,
                           Value column) {
  MatrixLaneAddress addr(b, loc, smem, offset, column);
  auto shape = NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8);
  const int64_t blocks = op.getTile().getType().getColumns() / 8;
  for (int64_t k = 0; k < blocks; k += 2)
    NVVM::StMatrixOp::create(b, loc,
                             addr.at(b, loc, k, static_cast<int64_t>(op.getBoxBytes())),
                             regs.slice(2 * k, 4), NVVM::MMALayout::row, shape,
                             NVVM::LdStMatrixEltType::B16);
}

/// One ldmatrix.x4 a warp per 32-byte k-step (16-byte units 2 kk, 2 kk + 1),
/// at the addresses storeSharedByStmatrix stores to: matrices 0 .. 3 are
/// rows 0-7 and 8-15 of unit 2 kk, then of unit 2 kk + 1, the k-step's A
/// operand registers in order.
struct LoadSharedLowering : OpConversionPattern<LoadSharedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LoadSharedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    MatrixLaneAddress addr(b, loc, adaptor.getSmem(), adaptor.getOffset());
    FragmentType t = op.getTile().getType();
    const int64_t rowBytes =
        t.getColumns() * t.getElementType().getIntOrFloatBitWidth() / 8;
    auto shape = NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8);
    Type i32 = b.getI32Type();
    Type four = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32, i32});
    SmallVector<Value> regs;
    for (int64_t u = 0; u < rowBytes / 16; u += 2) {
      Value p = addr.at(b, loc, u, static_cast<int64_t>(op.getBoxBytes()));
      Value m = NVVM::LdMatrixOp::create(b, loc, four, p, 4, NVVM::MMALayout::row,
                                         shape, NVVM::LdStMatrixEltType::B16);
      for (int64_t j = 0; j < 4; ++j)
        regs.push_back(LLVM::ExtractValueOp::create(b, loc, m, ArrayRef<int64_t>{j}));
    }
    rewriter.replaceOp(op, pack(b, loc, getTypeConverter()->convertType(t), regs));
    return success();
  }
};

struct StoreSharedLowering : OpConversionPattern<StoreSharedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StoreSharedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> regs = unpack(rewriter, loc, adaptor.getTile());
    if (op.getStmatrix())
      storeSharedByStmatrix(rewriter, loc, op, regs, adaptor.getSmem(),
                            adaptor.getOffset(), adaptor.getColumn());
    else
      storeSharedByWords(rewriter, loc, op, regs, adaptor.getSmem(),
                         adaptor.getOffset(), adaptor.getColumn());
    fenceSharedForAsyncProxy(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Per row: the row max (registers, then the quad), the shared step
/// (fa3::attn::buildOnlineSoftmaxStep: the arithmetic the CPU lowering of
/// attn.tile_update runs), p = exp2(s sl2 - mu) for each score, and the
/// thread's partial row sum folded into l.
struct SoftmaxStepLowering : OpConversionPattern<SoftmaxStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxStepOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    SmallVector<Value> mOld, lOld;
    if (adaptor.getMOld()) {
      mOld = unpack(rewriter, loc, adaptor.getMOld());
      lOld = unpack(rewriter, loc, adaptor.getLOld());
    }
    double tau = op.getRescaleThreshold().convertToDouble();
    Value sl2 = adaptor.getScale();
    SmallVector<fa3::attn::OnlineSoftmaxStep, 2> step;
    for (int64_t i = 0; i < 2; ++i) {
      Value mx = rowMax(rewriter, loc, s, i);
      step.push_back(fa3::attn::buildOnlineSoftmaxStep(
          rewriter, loc, mOld.empty() ? Value() : mOld[i], mx, sl2, tau));
    }
    Value raised;
    if (step[0].raised)
      raised = arith::OrIOp::create(rewriter, loc, step[0].raised, step[1].raised);
    else
      raised = arith::ConstantIntOp::create(rewriter, loc, 0, 1);
    SmallVector<Value> p;
    for (int64_t idx = 0, e = s.size(); idx < e; ++idx)
      p.push_back(fa3::attn::buildSoftmaxProb(rewriter, loc, s[idx], sl2,
                                              step[rowOf(idx)].negMu));
    SmallVector<Value, 2> m, l, alpha;
    for (int64_t i = 0; i < 2; ++i) {
      Value sum = rowSum(rewriter, loc, p, i);
      m.push_back(step[i].mNew);
      if (lOld.empty()) {
        l.push_back(sum);
        // No O yet: its factor is exp2(-inf) = 0.
        alpha.push_back(f32Const(rewriter, loc, 0.0));
      } else {
        l.push_back(fa3::attn::buildRescaledSum(rewriter, loc, lOld[i],
                                                step[i].alpha, sum));
        alpha.push_back(step[i].alpha);
      }
    }
    const TypeConverter *tc = getTypeConverter();
    Type rowsT = tc->convertType(op.getMNew().getType());
    Value pRegs = pack(rewriter, loc, adaptor.getScores().getType(), p);
    Value mRegs = pack(rewriter, loc, rowsT, m);
    Value lRegs = pack(rewriter, loc, rowsT, l);
    Value aRegs = pack(rewriter, loc, rowsT, alpha);
    rewriter.replaceOp(op, ValueRange{pRegs, mRegs, lRegs, aRegs, raised});
    return success();
  }
};

struct ScaleRowsLowering : OpConversionPattern<ScaleRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScaleRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> f = unpack(rewriter, loc, adaptor.getFactors());
    Value out = LLVM::UndefOp::create(rewriter, loc, adaptor.getTile().getType());
    for (int64_t idx = 0, e = op.getTile().getType().getRegisters(); idx < e; ++idx) {
      Value v = LLVM::ExtractValueOp::create(rewriter, loc, adaptor.getTile(), idx);
      v = arith::MulFOp::create(rewriter, loc, v, f[rowOf(idx)]);
      out = LLVM::InsertValueOp::create(rewriter, loc, out, v, idx);
    }
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// n8 block j of a thread's registers (4 j .. 4 j + 3: rows i, columns e)
/// holds columns 8 j .. 8 j + 7 of the tile, keys first + 8 j ..: one
/// descale block, (first % 128 + 8 j) / 128, for the whole block (first a
/// multiple of 8), picked from the factors by selects on that uniform
/// index.
struct ScaleKeyBlocksLowering : OpConversionPattern<ScaleKeyBlocksOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScaleKeyBlocksOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    ValueRange f = adaptor.getFactors();
    Value inBlock = arith::AndIOp::create(b, loc, adaptor.getFirst(),
                                          i32Const(b, loc, kScaleKeyBlock - 1));
    Value out = LLVM::UndefOp::create(b, loc, adaptor.getTile().getType());
    const int64_t regs = op.getTile().getType().getRegisters();
    for (int64_t j = 0; 4 * j < regs; ++j) {
      Value col = j == 0 ? inBlock
                         : arith::AddIOp::create(b, loc, inBlock,
                                                 i32Const(b, loc, 8 * j))
                               .getResult();
      static_assert(kScaleKeyBlock == 1 << 7, "a shift by log2 of the block");
      Value idx = arith::ShRUIOp::create(b, loc, col, i32Const(b, loc, 7));
      // the last factor unless an earlier one's index matches
      Value factor = f.back();
      for (int64_t x = static_cast<int64_t>(f.size()) - 2; x >= 0; --x) {
        Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, idx,
                                         i32Const(b, loc, x));
        factor = arith::SelectOp::create(b, loc, is, f[x], factor);
      }
      for (int64_t r = 4 * j; r < 4 * j + 4; ++r) {
        Value v = LLVM::ExtractValueOp::create(b, loc, adaptor.getTile(), r);
        v = arith::MulFOp::create(b, loc, v, factor);
        out = LLVM::InsertValueOp::create(b, loc, out, v, r);
      }
    }
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// 16-bit register r holds f32 registers 2r and 2r + 1 (columns e = 0, 1
/// of one row): the f32 layout of S is the register-A layout of P V.
struct TruncLowering : OpConversionPattern<TruncOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TruncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type et = op.getResult().getType().getElementType();
    if (isa<Float8E4M3FNType>(et)) {
      // Register 4c + 2h + i: row i's columns e = 0, 1 of n8 blocks 4c +
      // 2h and 4c + 2h + 1 (f32 registers 4k + 2i + e), lowest byte first
      // (cvt.rn.satfinite.e4m3x2 puts its first source in the high byte).
      SmallVector<Value> f = unpack(rewriter, loc, adaptor.getTile());
      SmallVector<Value> out;
      auto v2i16 = VectorType::get({2}, rewriter.getI16Type());
      auto pair = [&](Value lo, Value hi) -> Value {
        return NVVM::ConvertF32x2ToF8x2Op::create(
            rewriter, loc, rewriter.getI16Type(), hi, lo,
            NVVM::FPRoundingMode::RN, NVVM::SaturationMode::SATFINITE,
            /*relu=*/false, et);
      };
      for (size_t blk = 0; 4 * blk + 7 < f.size(); blk += 2)
        for (size_t i = 0; i < 2; ++i) {
          Value lo = pair(f[4 * blk + 2 * i], f[4 * blk + 2 * i + 1]);
          Value hi = pair(f[4 * blk + 4 + 2 * i], f[4 * blk + 4 + 2 * i + 1]);
          Value both = vector::FromElementsOp::create(rewriter, loc, v2i16,
                                                      ValueRange{lo, hi});
          out.push_back(LLVM::BitcastOp::create(rewriter, loc,
                                                rewriter.getI32Type(), both));
        }
      Type t = getTypeConverter()->convertType(op.getResult().getType());
      rewriter.replaceOp(op, pack(rewriter, loc, t, out));
      return success();
    }
    auto v2f32 = VectorType::get({2}, rewriter.getF32Type());
    auto v2h = VectorType::get({2}, et);
    SmallVector<Value> p = unpack(rewriter, loc, adaptor.getTile());
    SmallVector<Value> out;
    for (size_t r = 0; 2 * r + 1 < p.size(); ++r) {
      Value v = vector::FromElementsOp::create(rewriter, loc, v2f32,
                                               ValueRange{p[2 * r], p[2 * r + 1]});
      Value h = arith::TruncFOp::create(rewriter, loc, v2h, v);
      out.push_back(LLVM::BitcastOp::create(rewriter, loc, rewriter.getI32Type(), h));
    }
    Type t = getTypeConverter()->convertType(op.getResult().getType());
    rewriter.replaceOp(op, pack(rewriter, loc, t, out));
    return success();
  }
};

struct ZeroLowering : OpConversionPattern<FragmentZeroOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FragmentZeroOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type t = getTypeConverter()->convertType(op.getResult().getType());
    rewriter.replaceOpWithNewOp<LLVM::ZeroOp>(op, t);
    return success();
  }
};

struct FillLowering : OpConversionPattern<FragmentFillOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FragmentFillOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FragmentType ft = op.getResult().getType();
    if (!ft.isRowVector() && !ft.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "fill of a 16-bit tile");
    Type t = getTypeConverter()->convertType(ft);
    SmallVector<Value> regs(ft.getRegisters(), adaptor.getValue());
    rewriter.replaceOp(op, pack(rewriter, op.getLoc(), t, regs));
    return success();
  }
};

/// The softmax's exp2 is ex2.approx.ftz (math.exp2 would become a
/// libdevice call, or the non-ftz instruction); its fma llvm.intr.fma.
struct Exp2Lowering : OpConversionPattern<math::Exp2Op> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(math::Exp2Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
        op, rewriter.getF32Type(),
        rewriter.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"),
        ValueRange{adaptor.getOperand()});
    return success();
  }
};
struct FmaLowering : OpConversionPattern<math::FmaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(math::FmaOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<LLVM::FMAOp>(op, adaptor.getA(), adaptor.getB(),
                                             adaptor.getC());
    return success();
  }
};
/// A cast from a fragment to its registers (code that reads the registers
/// directly) is the converted fragment itself.
struct FragmentCastLowering : OpConversionPattern<UnrealizedConversionCastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(UnrealizedConversionCastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getNumOperands() != 1 || op.getNumResults() != 1 ||
        adaptor.getOperands()[0].getType() != op.getResult(0).getType())
      return rewriter.notifyMatchFailure(op, "not a fragment's registers");
    rewriter.replaceOp(op, adaptor.getOperands()[0]);
    return success();
  }
};
} // namespace

void fa3::hopper::addFragmentTypeConversion(TypeConverter &converter) {
  converter.addConversion(
      [](FragmentType t) -> Type { return registersType(t); });
}

void fa3::hopper::addFragmentLegality(ConversionTarget &target) {
  target.addDynamicallyLegalOp<UnrealizedConversionCastOp>(
      [](UnrealizedConversionCastOp op) {
        return !llvm::any_of(op.getOperandTypes(),
                             [](Type t) { return isa<FragmentType>(t); });
      });
  // Only the f32 math of kernels (inside a gpu.module): a host function's
  // exp2 keeps its exact lowering.
  auto onHost = [](Operation *op) {
    return !op->getParentOfType<gpu::GPUModuleOp>() ||
           !op->getResult(0).getType().isF32();
  };
  target.addDynamicallyLegalOp<math::Exp2Op, math::FmaOp>(onHost);
}

void fa3::hopper::populateFragmentToNVVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WgmmaSSLowering, WgmmaRSLowering, WgmmaWaitLowering,
               SoftcapLowering, MaskLowering, SoftmaxStepLowering,
               ScaleRowsLowering, ScaleKeyBlocksLowering, TruncLowering, ZeroLowering, FillLowering,
               LoadColumnsLowering, StageRowsLowering,
               GradProbsLowering, GradScoresLowering, GradSoftcapLowering,
               StoreSharedLowering, LoadSharedLowering, Exp2Lowering, FmaLowering, BandMaskLowering,
               FragmentCastLowering>(converter, patterns.getContext());
}
