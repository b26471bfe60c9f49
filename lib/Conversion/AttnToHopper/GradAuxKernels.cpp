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
                 int64_t headDim, bool deterministic)
      : BuilderBase(b, loc), headDim(headDim), deterministic(deterministic) {
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
    });
    // dQaccum, its padding rows (and turn counters) included: 16 bytes a
    // thread and step
    Value words = workspaceWords();
    Value units = bin<arith::DivUIOp>(words, i64(4));
    forEachUnit(units, [&](Value u) {
      auto v4 = VectorType::get({4}, f32T);
      Value zero = LLVM::ZeroOp::create(b, loc, v4);
      Value e = bin<arith::MulIOp>(u, i64(4));
      Value p = globalAt(param("dQaccum"), e, 4);
      LLVM::StoreOp::create(b, loc, zero, p, /*alignment=*/16);
    });
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

  /// dQaccum is in the main kernel's order (GradKernelBuilder's dqTile):
  /// per (batch, head) the m-blocks of kGradDqRows x D floats, each two
  /// warpgroups' halves of D / 2 columns in accumulator order (thread t's
  /// registers 4j .. 4j + 3 at float 4 (128 j + t): rows r, r + 8 with
  /// r = 16 (t / 32) + (t mod 32) / 4, columns 8j + 2 (t mod 4) + {0, 1}).
  /// A unit of 16 floats, four consecutive threads' quadruples j, is
  /// then 8 columns of rows r and r + 8: each thread reads one unit (64
  /// contiguous bytes) and writes two 16-byte pieces of dQ. The grid walks
  /// the tiles in dQ's order, (batch, m-block, head) with the head fastest,
  /// so that the CTAs running at once write one run of dQ's [B, S, H, D]
  /// rows; in dQaccum's own order (the head slowest) they wrote a head's
  /// 2 D bytes of every row of a long sequence at once, and the kernel
  /// slowed with the sequence (bench/NOTES.md, Backward).
  void buildPost(gpu::GPUModuleOp m, const std::string &name) {
    gpu::GPUFuncOp fn = openKernel(m, name, kGradPostParams, kGradAuxThreads);
    Value scale = param("scale");
    const int64_t quads = headDim / 16; // quadruples of a half's thread
    const int64_t tileUnits = kGradDqRows * headDim / 16;
    Value units = bin<arith::DivUIOp>(accWords(), i64(16));
    Value hq = ext64(param("Hq")), sq = ext64(param("Sq"));
    Value nmb = mBlocks();
    forEachUnit(units, [&](Value v) {
      // the v-th unit in dQ's order: tile (bi, mb, h), and its place u in
      // dQaccum's (tiles (bi, h, mb))
      Value order = bin<arith::DivUIOp>(v, i64(tileUnits));
      Value inTile = bin<arith::RemUIOp>(v, i64(tileUnits));
      Value h = bin<arith::RemUIOp>(order, hq);
      Value bm = bin<arith::DivUIOp>(order, hq);
      Value mb = bin<arith::RemUIOp>(bm, nmb);
      Value bi = bin<arith::DivUIOp>(bm, nmb);
      Value tileIdx = bin<arith::MulIOp>(bi, hq);
      tileIdx = bin<arith::AddIOp>(tileIdx, h);
      tileIdx = bin<arith::MulIOp>(tileIdx, nmb);
      tileIdx = bin<arith::AddIOp>(tileIdx, mb);
      Value u = bin<arith::MulIOp>(tileIdx, i64(tileUnits));
      u = bin<arith::AddIOp>(u, inTile);
      Value g = bin<arith::RemUIOp>(inTile, i64(32));
      Value hj = bin<arith::DivUIOp>(inTile, i64(32));
      Value j = bin<arith::RemUIOp>(hj, i64(quads));
      Value half = bin<arith::DivUIOp>(hj, i64(quads));
      Value warp = bin<arith::DivUIOp>(g, i64(8));
      Value r = bin<arith::MulIOp>(warp, i64(16));
      Value quad = bin<arith::RemUIOp>(g, i64(8));
      r = bin<arith::AddIOp>(r, quad);
      Value col = bin<arith::MulIOp>(half, i64(headDim / 2));
      Value jc = bin<arith::MulIOp>(j, i64(8));
      col = bin<arith::AddIOp>(col, jc);
      Value s0 = bin<arith::MulIOp>(mb, i64(kGradDqRows));
      s0 = bin<arith::AddIOp>(s0, r);
      auto v4 = VectorType::get({4}, f32T);
      SmallVector<Value> acc;
      for (int64_t k = 0; k < 4; ++k) {
        Value e = bin<arith::MulIOp>(u, i64(16));
        e = bin<arith::AddIOp>(e, i64(4 * k));
        Value p = globalAt(param("dQaccum"), e, 4);
        acc.push_back(LLVM::LoadOp::create(b, loc, v4, p, /*alignment=*/16));
      }
      for (int64_t i = 0; i < 2; ++i) {
        Value s = bin<arith::AddIOp>(s0, i64(8 * i));
        Value valid = cmpi(CmpIPredicate::ult, s, sq);
        ifThen(valid, [&] {
          // row i's columns 2k, 2k + 1 are elements 2i, 2i + 1 of unit k
          SmallVector<Value> words;
          for (int64_t k = 0; k < 4; ++k)
            words.push_back(scaledPair(acc[k], 2 * i, scale));
          auto v4i = VectorType::get({4}, i32T);
          Value out = vector::FromElementsOp::create(b, loc, v4i, words);
          Value e = rowStart(bi, s, h, "dqStride");
          e = bin<arith::AddIOp>(e, col);
          Value p = globalAt(param("dQ"), e, 2);
          LLVM::StoreOp::create(b, loc, out, p, /*alignment=*/16);
        });
      }
    });
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

private:
  int64_t headDim;
  bool deterministic;
  Type et, gptrT;

  int64_t lanesPerRow() const { return headDim * 2 / 16; }

  /// ceil(Sq / kGradDqRows), i64.
  Value mBlocks() {
    Value sq = ext64(param("Sq"));
    Value n = bin<arith::AddIOp>(sq, i64(kGradDqRows - 1));
    return bin<arith::DivUIOp>(n, i64(kGradDqRows));
  }
  /// dQaccum's floats: B Hq ceil(Sq / kGradDqRows) kGradDqRows D.
  Value accWords() {
    Value bs = ext64(param("B"));
    Value hs = ext64(param("Hq"));
    Value w = bin<arith::MulIOp>(bs, hs);
    Value nmb = mBlocks();
    w = bin<arith::MulIOp>(w, nmb);
    return bin<arith::MulIOp>(w, i64(kGradDqRows * headDim));
  }
  /// The whole workspace: dQaccum's floats, then (deterministic) a u32
  /// turn counter per tile, rounded up to whole 16-byte units
  /// (fa3rt_abi.def).
  Value workspaceWords() {
    Value words = accWords();
    if (!deterministic)
      return words;
    Value bs = ext64(param("B"));
    Value hs = ext64(param("Hq"));
    Value tiles = bin<arith::MulIOp>(bs, hs);
    Value nmb = mBlocks();
    tiles = bin<arith::MulIOp>(tiles, nmb);
    tiles = bin<arith::AddIOp>(tiles, i64(3));
    tiles = bin<arith::AndIOp>(tiles, i64(~int64_t(3)));
    return bin<arith::AddIOp>(words, tiles);
  }
  /// Elements e, e + 1 of `acc` times `scale`, rounded to et, as one word.
  Value scaledPair(Value acc, int64_t e, Value scale) {
    auto v2 = VectorType::get({2}, f32T);
    auto v2h = VectorType::get({2}, et);
    Value lo = vector::ExtractOp::create(b, loc, acc, e);
    lo = bin<arith::MulFOp>(lo, scale);
    Value hi = vector::ExtractOp::create(b, loc, acc, e + 1);
    hi = bin<arith::MulFOp>(hi, scale);
    Value pair = vector::FromElementsOp::create(b, loc, v2, ValueRange{lo, hi});
    Value h = arith::TruncFOp::create(b, loc, v2h, pair);
    return LLVM::BitcastOp::create(b, loc, i32T, h);
  }
  /// Units 0 .. n - 1 (i64) over the grid's threads, the grid's stride.
  template <typename Fn> void forEachUnit(Value n, Fn body) {
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    Value bid = NVVM::BlockIdXOp::create(b, loc, i32T);
    Value nb = NVVM::GridDimXOp::create(b, loc, i32T);
    Value start = bin<arith::MulIOp>(ext64(bid), i64(kGradAuxThreads));
    start = bin<arith::AddIOp>(start, ext64(tid));
    Value stride = bin<arith::MulIOp>(ext64(nb), i64(kGradAuxThreads));
    auto loop = scf::ForOp::create(b, loc, start, n, stride);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }
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

  /// Element offset of row (bi, s, h) of a [B, S, H, D] tensor with the
  /// element strides <prefix>B, <prefix>S, <prefix>H (i64 indices).
  Value rowStart(Value bi, Value s, Value h, const std::string &prefix) {
    Value e = bin<arith::MulIOp>(bi, param(prefix + "B"));
    Value es = bin<arith::MulIOp>(s, param(prefix + "S"));
    e = bin<arith::AddIOp>(e, es);
    Value eh = bin<arith::MulIOp>(h, param(prefix + "H"));
    return bin<arith::AddIOp>(e, eh);
  }
  /// The thread's 16 bytes of row `r` of a [B, S, H, D] 16-bit tensor with
  /// the element strides <prefix>B, <prefix>S, <prefix>H.
  Value rowPointer(Value base, const Row &r, const std::string &prefix) {
    Value e = rowStart(r.b, r.s, r.h, prefix);
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
};

} // namespace

void fa3::hopper::buildGradAuxKernels(OpBuilder &b, Location loc,
                                      gpu::GPUModuleOp module,
                                      const std::string &kernel,
                                      const std::string &dtype,
                                      int64_t headDim, bool deterministic) {
  OpBuilder::InsertionGuard g(b);
  {
    GradAuxBuilder pre(b, loc, dtype, headDim, deterministic);
    pre.buildPre(module, kernel + "_pre");
  }
  GradAuxBuilder post(b, loc, dtype, headDim, deterministic);
  post.buildPost(module, kernel + "_post");
}
