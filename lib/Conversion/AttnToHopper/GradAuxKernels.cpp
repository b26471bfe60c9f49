//===- GradAuxKernels.cpp - the backward's element-wise kernels -----------===//
//
// (GradAuxKernels.h.) Memory-bound: each row is read once with 16-byte
// loads by its D * 2 / 16 threads; the row sum is combined over those
// lanes by butterfly shuffles, in the same order every launch.
//
//===----------------------------------------------------------------------===//
#include "GradAuxKernels.h"

#include "BuilderBase.h"
#include "KernelBuilder.h" // the ABI: kGradPreParams, kGradPostParams

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace fa3::hopper;

namespace {

class GradAuxBuilder : BuilderBase {
public:
  GradAuxBuilder(OpBuilder &b, Location loc, const std::string &dtype,
                 int64_t headDim)
      : BuilderBase(b, loc), headDim(headDim) {
    assert(headDim % 8 == 0 && llvm::isPowerOf2_64(headDim / 8) &&
           headDim / 8 <= 32 && "D / 8 lanes a row: a power of two up to 32");
    et = dtype == "f16" ? Type(b.getF16Type()) : Type(b.getBF16Type());
    gptrT = LLVM::LLVMPointerType::get(ctx, 1);
  }

  void buildPre(gpu::GPUModuleOp m, const std::string &name) {
    gpu::GPUFuncOp fn = openKernel(m, name, kGradPreParams, kGradAuxThreads);
    forEachRow([&](const Row &r) {
      // sum_d dO * o in f32 (zero past the rows: every lane shuffles)
      Value part =
          ifElse(r.valid, TypeRange{f32T},
                 [&]() -> SmallVector<Value> {
                   Value o = loadRow16(param("O"), r, "oStride");
                   Value d = loadRow16(param("dO"), r, "doStride");
                   Value prod = bin<arith::MulFOp>(o, d);
                   Value sum = vector::ExtractOp::create(b, loc, prod, 0);
                   for (int64_t i = 1; i < 8; ++i) {
                     Value e = vector::ExtractOp::create(b, loc, prod, i);
                     sum = bin<arith::AddFOp>(sum, e);
                   }
                   return {sum};
                 },
                 [&]() -> SmallVector<Value> { return {f32(0.0)}; })
              .getResult(0);
      // (the butterflies of fa3::hopper::quadReduce, over a row's lanes)
      for (int64_t off = lanesPerRow() / 2; off >= 1; off /= 2) {
        Value other = NVVM::ShflOp::create(b, loc, f32T, i32(-1), part,
                                           i32(off), i32(31),
                                           NVVM::ShflKind::bfly, UnitAttr());
        part = bin<arith::AddFOp>(part, other);
      }
      Value first = cmpi(CmpIPredicate::eq, r.sub, i32(0));
      Value writer = bin<arith::AndIOp>(r.valid, first);
      ifThen(writer, [&] {
        Value p = globalAt(param("delta"), r.bhs, 4);
        LLVM::StoreOp::create(b, loc, part, p, /*alignment=*/4);
      });
      ifThen(r.valid, [&] {
        auto v4 = VectorType::get({4}, f32T);
        Value zero = LLVM::ZeroOp::create(b, loc, v4);
        for (int64_t half = 0; half < 2; ++half) {
          Value p = accPointer(r, half);
          LLVM::StoreOp::create(b, loc, zero, p, /*alignment=*/16);
        }
      });
    });
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

  void buildPost(gpu::GPUModuleOp m, const std::string &name) {
    gpu::GPUFuncOp fn = openKernel(m, name, kGradPostParams, kGradAuxThreads);
    Value scale = param("scale");
    forEachRow([&](const Row &r) {
      ifThen(r.valid, [&] {
        auto v4 = VectorType::get({4}, f32T);
        auto v2 = VectorType::get({2}, f32T);
        auto v2h = VectorType::get({2}, et);
        SmallVector<Value> words;
        for (int64_t half = 0; half < 2; ++half) {
          Value p = accPointer(r, half);
          Value acc = LLVM::LoadOp::create(b, loc, v4, p, /*alignment=*/16);
          for (int64_t i = 0; i < 4; i += 2) {
            Value lo = vector::ExtractOp::create(b, loc, acc, i);
            lo = bin<arith::MulFOp>(lo, scale);
            Value hi = vector::ExtractOp::create(b, loc, acc, i + 1);
            hi = bin<arith::MulFOp>(hi, scale);
            Value pair = vector::FromElementsOp::create(b, loc, v2,
                                                        ValueRange{lo, hi});
            Value h = arith::TruncFOp::create(b, loc, v2h, pair);
            words.push_back(LLVM::BitcastOp::create(b, loc, i32T, h));
          }
        }
        auto v4i = VectorType::get({4}, i32T);
        Value out = vector::FromElementsOp::create(b, loc, v4i, words);
        Value p = rowPointer(param("dQ"), r, "dqStride");
        LLVM::StoreOp::create(b, loc, out, p, /*alignment=*/16);
      });
    });
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

private:
  int64_t headDim;
  Type et, gptrT;

  int64_t lanesPerRow() const { return headDim * 2 / 16; }
  int64_t rowsPerBlock() const { return kGradAuxThreads / lanesPerRow(); }

  /// A thread's row of one step: whether it exists, its place, its lane
  /// among the row's, and (b * Hq + h) * Sq + s, the row of delta and
  /// dQaccum.
  struct Row {
    Value valid, b, s, h, sub, bhs;
  };

  /// Blocks step over the rows B * Sq * Hq (query head fastest) with the
  /// grid's stride, every thread of a block the same number of steps.
  template <typename Fn> void forEachRow(Fn body) {
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    Value bid = NVVM::BlockIdXOp::create(b, loc, i32T);
    Value nb = NVVM::GridDimXOp::create(b, loc, i32T);
    Value sub = bin<arith::RemUIOp>(tid, i32(lanesPerRow()));
    Value rib = bin<arith::DivUIOp>(tid, i32(lanesPerRow()));
    Value hq = ext64(param("Hq")), sq = ext64(param("Sq"));
    Value rows = bin<arith::MulIOp>(ext64(param("B")), sq);
    rows = bin<arith::MulIOp>(rows, hq);
    Value start = bin<arith::MulIOp>(ext64(bid), i64(rowsPerBlock()));
    Value stride = bin<arith::MulIOp>(ext64(nb), i64(rowsPerBlock()));
    Value rib64 = ext64(rib);
    auto loop = scf::ForOp::create(b, loc, start, rows, stride);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Row r;
    Value row = bin<arith::AddIOp>(loop.getInductionVar(), rib64);
    r.valid = cmpi(CmpIPredicate::ult, row, rows);
    r.h = bin<arith::RemUIOp>(row, hq);
    Value t = bin<arith::DivUIOp>(row, hq);
    r.s = bin<arith::RemUIOp>(t, sq);
    r.b = bin<arith::DivUIOp>(t, sq);
    r.sub = sub;
    Value bh = bin<arith::MulIOp>(r.b, hq);
    bh = bin<arith::AddIOp>(bh, r.h);
    Value bhs = bin<arith::MulIOp>(bh, sq);
    r.bhs = bin<arith::AddIOp>(bhs, r.s);
    body(r);
  }

  /// The thread's 16 bytes of row `r` of a [B, S, H, D] 16-bit tensor with
  /// the element strides <prefix>B, <prefix>S, <prefix>H.
  Value rowPointer(Value base, const Row &r, const std::string &prefix) {
    Value e = bin<arith::MulIOp>(r.b, param(prefix + "B"));
    Value es = bin<arith::MulIOp>(r.s, param(prefix + "S"));
    e = bin<arith::AddIOp>(e, es);
    Value eh = bin<arith::MulIOp>(r.h, param(prefix + "H"));
    e = bin<arith::AddIOp>(e, eh);
    Value col = bin<arith::MulIOp>(ext64(r.sub), i64(8));
    e = bin<arith::AddIOp>(e, col);
    return globalAt(base, e, 2);
  }
  /// Those 16 bytes as 8 f32.
  Value loadRow16(Value base, const Row &r, const std::string &prefix) {
    Value p = rowPointer(base, r, prefix);
    auto v8 = VectorType::get({8}, et);
    Value v = LLVM::LoadOp::create(b, loc, v8, p, /*alignment=*/16);
    return arith::ExtFOp::create(b, loc, VectorType::get({8}, f32T), v);
  }
  /// The thread's `half` (16 bytes) of its 32 bytes of dQaccum's row.
  Value accPointer(const Row &r, int64_t half) {
    Value e = bin<arith::MulIOp>(r.bhs, i64(headDim));
    Value col = bin<arith::MulIOp>(ext64(r.sub), i64(8));
    e = bin<arith::AddIOp>(e, col);
    e = bin<arith::AddIOp>(e, i64(4 * half));
    return globalAt(param("dQaccum"), e, 4);
  }
};

} // namespace

void fa3::hopper::buildGradAuxKernels(OpBuilder &b, Location loc,
                                      gpu::GPUModuleOp module,
                                      const std::string &kernel,
                                      const std::string &dtype,
                                      int64_t headDim) {
  OpBuilder::InsertionGuard g(b);
  {
    GradAuxBuilder pre(b, loc, dtype, headDim);
    pre.buildPre(module, kernel + "_pre");
  }
  GradAuxBuilder post(b, loc, dtype, headDim);
  post.buildPost(module, kernel + "_post");
}
