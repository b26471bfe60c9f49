//===- SplitCombineKernel.cpp - split-KV's merge of partial outputs -------===//
//
// (SplitCombineKernel.h.) Memory-bound and small beside the decoding kernel
// (it reads numSplits x the output in f32): a thread's 4 columns of a split
// are one 16-byte load; the row's LSEs, which the row's Dv / 4 threads all
// read, come from L1. Two passes over the splits (their max, then the
// weighted sum) keep the arithmetic exact to the reference's order of
// operations; the splits are few (at most 128).
//
//===----------------------------------------------------------------------===//
#include "SplitCombineKernel.h"

#include "BuilderBase.h"
#include "KernelBuilder.h" // the ABI: kSplitCombineParams
#include "fa3/Dialect/Attn/Utils/LoweringUtils.h" // kLog2e

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace fa3::hopper;

using fa3::attn::kLog2e;

namespace {
constexpr double kLn2 = 0.6931471805599453;
constexpr uint32_t kNegInfBits = 0xFF800000u;

class SplitCombineBuilder : BuilderBase {
public:
  SplitCombineBuilder(OpBuilder &b, Location loc, const std::string &dtype,
                      int64_t headDimV)
      : BuilderBase(b, loc), headDimV(headDimV) {
    assert(headDimV % 4 == 0 && "4 columns a thread");
    et = dtype == "f16" ? Type(b.getF16Type()) : Type(b.getBF16Type());
  }

  void build(gpu::GPUModuleOp m, const std::string &name) {
    gpu::GPUFuncOp fn =
        openKernel(m, name, kSplitCombineParams, kSplitCombineThreads);
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    Value bid = NVVM::BlockIdXOp::create(b, loc, i32T);
    Value nb = NVVM::GridDimXOp::create(b, loc, i32T);
    const int64_t perRow = headDimV / 4;
    Value hq = ext64(param("Hq")), sq = ext64(param("Sq"));
    Value rows = bin<arith::MulIOp>(ext64(param("B")), hq);
    rows = bin<arith::MulIOp>(rows, sq);
    Value items = bin<arith::MulIOp>(rows, i64(perRow));
    Value start = bin<arith::MulIOp>(ext64(bid), i64(kSplitCombineThreads));
    start = bin<arith::AddIOp>(start, ext64(tid));
    Value stride = bin<arith::MulIOp>(ext64(nb), i64(kSplitCombineThreads));
    Value splits = param("numSplits");
    auto loop = scf::ForOp::create(b, loc, start, items, stride);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      Value item = loop.getInductionVar();
      // row (b * Hq + h) * Sq + s of lseAccum's [B, Hq, Sq] per split
      Value row = bin<arith::DivUIOp>(item, i64(perRow));
      Value chunk = bin<arith::RemUIOp>(item, i64(perRow));
      combineRow(row, chunk, rows, splits, hq, sq);
    }
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

private:
  int64_t headDimV;
  Type et;

  Value exp2(Value x) {
    return inlineAsm(f32T, ValueRange{x}, "ex2.approx.ftz.f32 $0, $1;",
                     "=f,f");
  }
  Value log2(Value x) {
    return inlineAsm(f32T, ValueRange{x}, "lg2.approx.ftz.f32 $0, $1;",
                     "=f,f");
  }
  /// Split i's LSE of `row`.
  Value lseOf(Value i, Value row, Value rows) {
    Value e = bin<arith::MulIOp>(ext64(i), rows);
    e = bin<arith::AddIOp>(e, row);
    Value p = globalAt(param("lseAccum"), e, 4);
    return LLVM::LoadOp::create(b, loc, f32T, p, /*alignment=*/4);
  }

  void combineRow(Value row, Value chunk, Value rows, Value splits, Value hq,
                  Value sq) {
    Value ninf = f32Bits(kNegInfBits);
    // the splits' largest LSE
    auto maxLoop = scf::ForOp::create(b, loc, i32(0), splits, i32(1),
                                      ValueRange{ninf});
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(maxLoop.getBody());
      Value l = lseOf(maxLoop.getInductionVar(), row, rows);
      Value mx = bin<arith::MaxNumFOp>(maxLoop.getRegionIterArg(0), l);
      scf::YieldOp::create(b, loc, mx);
    }
    Value mx = maxLoop.getResult(0);
    // No split saw a key: every weight exp2(-inf) = 0, o = 0, lse = -inf.
    Value none =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mx, ninf);
    Value m = arith::SelectOp::create(b, loc, none, f32(0.0), mx);
    // W = sum_i w_i and sum_i w_i o_i over this thread's 4 columns
    auto v4 = VectorType::get({4}, f32T);
    Value zero4 = LLVM::ZeroOp::create(b, loc, v4);
    Value inits[] = {f32(0.0), zero4};
    auto sumLoop = scf::ForOp::create(b, loc, i32(0), splits, i32(1), inits);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(sumLoop.getBody());
      Value i = sumLoop.getInductionVar();
      Value l = lseOf(i, row, rows);
      Value d = bin<arith::SubFOp>(l, m);
      d = bin<arith::MulFOp>(d, f32(kLog2e));
      Value w = exp2(d);
      Value wsum = bin<arith::AddFOp>(sumLoop.getRegionIterArg(0), w);
      Value e = bin<arith::MulIOp>(ext64(i), rows);
      e = bin<arith::AddIOp>(e, row);
      e = bin<arith::MulIOp>(e, i64(headDimV));
      Value col = bin<arith::MulIOp>(chunk, i64(4));
      e = bin<arith::AddIOp>(e, col);
      Value p = globalAt(param("oAccum"), e, 4);
      Value o = LLVM::LoadOp::create(b, loc, v4, p, /*alignment=*/16);
      Value wv = vector::BroadcastOp::create(b, loc, v4, w);
      Value acc = LLVM::FMAOp::create(b, loc, wv, o,
                                           sumLoop.getRegionIterArg(1));
      Value yields[] = {wsum, acc};
      scf::YieldOp::create(b, loc, yields);
    }
    Value wsum = sumLoop.getResult(0);
    Value inv = bin<arith::DivFOp>(f32(1.0), wsum);
    inv = arith::SelectOp::create(b, loc, none, f32(0.0), inv);
    Value invv = vector::BroadcastOp::create(b, loc, v4, inv);
    Value out = bin<arith::MulFOp>(sumLoop.getResult(1), invv);
    Value out16 = arith::TruncFOp::create(b, loc, VectorType::get({4}, et), out);
    // o[b, s, h, 4 chunk ..] at the caller's strides
    Value hs = bin<arith::MulIOp>(hq, sq);
    Value bi = bin<arith::DivUIOp>(row, hs);
    Value si = bin<arith::RemUIOp>(row, sq);
    Value hi = bin<arith::DivUIOp>(row, sq);
    hi = bin<arith::RemUIOp>(hi, hq);
    Value oe = bin<arith::MulIOp>(bi, param("oStrideB"));
    Value os = bin<arith::MulIOp>(si, param("oStrideS"));
    oe = bin<arith::AddIOp>(oe, os);
    Value oh = bin<arith::MulIOp>(hi, param("oStrideH"));
    oe = bin<arith::AddIOp>(oe, oh);
    Value ocol = bin<arith::MulIOp>(chunk, i64(4));
    oe = bin<arith::AddIOp>(oe, ocol);
    Value op = globalAt(param("O"), oe, 2);
    LLVM::StoreOp::create(b, loc, out16, op, /*alignment=*/8);
    // lse = m + ln W (natural log), by the row's first thread
    Value lg = log2(wsum);
    Value lse = LLVM::FMAOp::create(b, loc, lg, f32(kLn2), m);
    lse = arith::SelectOp::create(b, loc, none, ninf, lse);
    Value given = isGiven(param("LSE"));
    Value first = cmpi(CmpIPredicate::eq, chunk, i64(0));
    Value writer = bin<arith::AndIOp>(given, first);
    ifThen(writer, [&] {
      Value lp = globalAt(param("LSE"), row, 4);
      LLVM::StoreOp::create(b, loc, lse, lp, /*alignment=*/4);
    });
  }
};

} // namespace

void fa3::hopper::buildSplitCombineKernel(OpBuilder &b, Location loc,
                                          gpu::GPUModuleOp module,
                                          const std::string &name,
                                          const std::string &dtype,
                                          int64_t headDimV) {
  OpBuilder::InsertionGuard g(b);
  SplitCombineBuilder combine(b, loc, dtype, headDimV);
  combine.build(module, name);
}
