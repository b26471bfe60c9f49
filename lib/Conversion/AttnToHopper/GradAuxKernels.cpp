//===- GradAuxKernels.cpp - the backward's element-wise kernels -----------===//
//
// (GradAuxKernels.h.) Memory-bound: in _pre each row is read once with
// 16-byte loads by its D * 2 / 16 threads, the row sum combined over
// those lanes by butterfly shuffles in the same order every launch; _post
// goes through shared memory for whole-sector reads and writes.
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
    assert(headDim % 32 == 0 && headDim / 8 <= 32 &&
           "D / 8 lanes a row, up to 32; whole or half 64-column chunks");
    et = dtype == "f16" ? Type(b.getF16Type()) : Type(b.getBF16Type());
    gptrT = LLVM::LLVMPointerType::get(ctx, 1);
  }

  void buildPre(gpu::GPUModuleOp m, const std::string &name) {
    gpu::GPUFuncOp fn = openKernel(m, name, kGradPreParams, kGradAuxThreads);
    forEachRow([&](const Row &r) {
      // sum_d dO * o in f32 (zero past the rows and the head dim: every
      // lane shuffles)
      Value mine = r.valid;
      if (lanesPerRow() * 8 != headDim)
        mine = bin<arith::AndIOp>(
            mine, cmpi(CmpIPredicate::ult, r.sub, i32(headDim / 8)));
      Value part =
          ifElse(mine, TypeRange{f32T},
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
  /// per (batch, head) the m-blocks of kGradDqRows x D floats, each in
  /// 64-column chunks in accumulator order (head dim 96: the last chunk
  /// its columns 64 .. 95 only, half a chunk) (thread t's
  /// registers 4j .. 4j + 3 at float 4 (128 j + t): rows r, r + 8 with
  /// r = 16 (t / 32) + (t mod 32) / 4, columns 8j + 2 (t mod 4) + {0, 1}).
  /// So a unit of 16 floats, four consecutive threads' quadruples j, is
  /// 8 columns of rows r and r + 8 (quadruple k: columns 2k, 2k + 1 of row
  /// r, then of row r + 8), and a chunk of 256 units (16 KiB) is a 64 x 64
  /// block of dQ: units 32 c + g hold its columns 8c .. 8c + 7.
  ///
  /// A CTA converts a chunk at a time through shared memory, so that every
  /// global access is whole sectors (ncu: reading a unit a lane and writing
  /// 16 bytes in each of 32 rows a warp bound the kernel by L2 requests,
  /// bench/NOTES.md): its threads load the chunk 16 bytes each,
  /// consecutive threads on consecutive bytes, into shared memory (each
  /// 2 KiB run of 32 units 16 bytes apart, so that the reads below fall in
  /// distinct banks), then each writes 16 bytes (8 columns) of two of the
  /// block's rows, 8 threads a row. The chunks go in dQ's order, (batch,
  /// m-block, head) with the head fastest, so that the CTAs running at once
  /// write one run of dQ's [B, S, H, D] rows (in dQaccum's order the
  /// kernel slowed with the sequence).
  void buildPost(gpu::GPUModuleOp m, const std::string &name) {
    // the staging buffer: 8 runs of 2 KiB, 16 bytes apart
    const std::string stage = name + "_stage";
    const int64_t runBytes = 32 * 64 + 16;
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToEnd(m.getBody());
      LLVM::GlobalOp::create(
          b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), 8 * runBytes),
          /*isConstant=*/false, LLVM::Linkage::Internal, stage, Attribute(),
          /*alignment=*/16, /*addrSpace=*/3);
    }
    gpu::GPUFuncOp fn = openKernel(m, name, kGradPostParams, kGradAuxThreads);
    static_assert(kGradAuxThreads == 256, "a chunk is 256 units: one a thread");
    Value scale = param("scale");
    const int64_t tileUnits = kGradDqRows * headDim / 16;
    // D / 64, the last one half a chunk at head dim 96 (its columns 64 ..
    // 95: the first 2048 floats of the chunk in accumulator order)
    const int64_t chunksPerTile = (headDim + 63) / 64;
    const bool halfChunk = headDim % 64 != 0;
    Value chunks;
    if (halfChunk) {
      chunks = bin<arith::DivUIOp>(accWords(), i64(kGradDqRows * headDim));
      chunks = bin<arith::MulIOp>(chunks, i64(chunksPerTile));
    } else {
      chunks = bin<arith::DivUIOp>(accWords(), i64(256 * 16));
    }
    Value hq = ext64(param("Hq")), sq = ext64(param("Sq"));
    Value nmb = mBlocks();
    Value smem = LLVM::AddressOfOp::create(b, loc, smemPtrT, stage);
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    Value bid = NVVM::BlockIdXOp::create(b, loc, i32T);
    Value nb = NVVM::GridDimXOp::create(b, loc, i32T);
    Value start = ext64(bid);
    Value stride = ext64(nb);
    auto loop = scf::ForOp::create(b, loc, start, chunks, stride);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value c = loop.getInductionVar();
    // the chunk's tile (bi, mb, h) in dQ's order, its place in dQaccum's
    // (tiles (bi, h, mb)) and its first unit column group hj0
    Value order = bin<arith::DivUIOp>(c, i64(chunksPerTile));
    Value inTile = bin<arith::RemUIOp>(c, i64(chunksPerTile));
    Value h = bin<arith::RemUIOp>(order, hq);
    Value bm = bin<arith::DivUIOp>(order, hq);
    Value mb = bin<arith::RemUIOp>(bm, nmb);
    Value bi = bin<arith::DivUIOp>(bm, nmb);
    Value tileIdx = bin<arith::MulIOp>(bi, hq);
    tileIdx = bin<arith::AddIOp>(tileIdx, h);
    tileIdx = bin<arith::MulIOp>(tileIdx, nmb);
    tileIdx = bin<arith::AddIOp>(tileIdx, mb);
    Value first = bin<arith::MulIOp>(tileIdx, i64(tileUnits * 16));
    Value chunk0 = bin<arith::MulIOp>(inTile, i64(256 * 16));
    first = bin<arith::AddIOp>(first, chunk0);
    auto v4 = VectorType::get({4}, f32T);
    Value whole;
    if (halfChunk)
      whole = cmpi(CmpIPredicate::ne, inTile, i64(chunksPerTile - 1));
    // in: float 4 (tid + 256 i) of the chunk, to byte 16 (tid + 256 i) +
    // 16 (its run of 128 quadruples); of a half chunk, the first half
    auto stageUnit = [&](int64_t i) {
      Value q = bin<arith::AddIOp>(tid, i32(256 * i));
      Value q64 = ext64(q);
      Value e = bin<arith::MulIOp>(q64, i64(4));
      e = bin<arith::AddIOp>(first, e);
      Value p = globalAt(param("dQaccum"), e, 4);
      Value x = LLVM::LoadOp::create(b, loc, v4, p, /*alignment=*/16);
      Value run = bin<arith::ShRUIOp>(q, i32(7));
      Value at = bin<arith::MulIOp>(q, i32(16));
      Value pad = bin<arith::MulIOp>(run, i32(16));
      at = bin<arith::AddIOp>(at, pad);
      Value sp = smemPtr(smem, at);
      LLVM::StoreOp::create(b, loc, x, sp, /*alignment=*/16);
    };
    for (int64_t i = 0; i < 4; ++i) {
      if (halfChunk && i >= 2)
        ifThen(whole, [&] { stageUnit(i); });
      else
        stageUnit(i);
    }
    NVVM::Barrier0Op::create(b, loc);
    // out: columns 8 col8 .. + 7 of rows R = tid / 8 + 32 p
    Value col8 = bin<arith::RemUIOp>(tid, i32(8));
    Value row8 = bin<arith::DivUIOp>(tid, i32(8));
    Value hj0 = bin<arith::MulIOp>(inTile, i64(8));
    Value col8x = ext64(col8);
    Value col = bin<arith::AddIOp>(hj0, col8x);
    col = bin<arith::MulIOp>(col, i64(8));
    auto v2 = VectorType::get({2}, f32T);
    for (int64_t p = 0; p < 2; ++p) {
      Value r = bin<arith::AddIOp>(row8, i32(32 * p));
      // unit 32 col8 + g, g = 8 (R / 16) + R mod 8, its half R / 8 mod 2
      Value g16 = bin<arith::ShRUIOp>(r, i32(4));
      Value gg = bin<arith::MulIOp>(g16, i32(8));
      Value r8 = bin<arith::RemUIOp>(r, i32(8));
      gg = bin<arith::AddIOp>(gg, r8);
      Value half = bin<arith::ShRUIOp>(r, i32(3));
      half = bin<arith::AndIOp>(half, i32(1));
      Value u = bin<arith::MulIOp>(col8, i32(32));
      u = bin<arith::AddIOp>(u, gg);
      // byte 64 u + 16 col8 (the run's pad) + 8 half, then + 16 k
      Value at = bin<arith::MulIOp>(u, i32(64));
      Value pad = bin<arith::MulIOp>(col8, i32(16));
      at = bin<arith::AddIOp>(at, pad);
      Value hb = bin<arith::MulIOp>(half, i32(8));
      at = bin<arith::AddIOp>(at, hb);
      SmallVector<Value> words;
      for (int64_t k = 0; k < 4; ++k) {
        Value ak = bin<arith::AddIOp>(at, i32(16 * k));
        Value sp = smemPtr(smem, ak);
        Value pair = LLVM::LoadOp::create(b, loc, v2, sp, /*alignment=*/8);
        words.push_back(scaledPair(pair, scale));
      }
      Value s = bin<arith::MulIOp>(mb, i64(kGradDqRows));
      Value r64 = ext64(r);
      s = bin<arith::AddIOp>(s, r64);
      Value valid = cmpi(CmpIPredicate::ult, s, sq);
      if (halfChunk)
        valid = bin<arith::AndIOp>(valid,
                                   cmpi(CmpIPredicate::ult, col, i64(headDim)));
      ifThen(valid, [&] {
        auto v4i = VectorType::get({4}, i32T);
        Value out = vector::FromElementsOp::create(b, loc, v4i, words);
        Value e = rowStart(bi, s, h, "dqStride");
        e = bin<arith::AddIOp>(e, col);
        Value gp = globalAt(param("dQ"), e, 2);
        LLVM::StoreOp::create(b, loc, out, gp, /*alignment=*/16);
      });
    }
    // the chunk's reads done before the next one's writes
    NVVM::Barrier0Op::create(b, loc);
    b.setInsertionPointAfter(loop);
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

private:
  int64_t headDim;
  bool deterministic;
  Type et, gptrT;

  /// A row's lanes: D * 2 / 16 rounded up to a power of two (the
  /// butterflies'); at head dims 96 and 192 the last quarter reads nothing.
  int64_t lanesPerRow() const { return llvm::PowerOf2Ceil(headDim / 8); }

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
  /// A pair of floats (vector<2xf32>) times `scale`, rounded to et, as one
  /// word.
  Value scaledPair(Value acc, Value scale) {
    auto v2 = VectorType::get({2}, f32T);
    auto v2h = VectorType::get({2}, et);
    Value lo = vector::ExtractOp::create(b, loc, acc, 0);
    lo = bin<arith::MulFOp>(lo, scale);
    Value hi = vector::ExtractOp::create(b, loc, acc, 1);
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
