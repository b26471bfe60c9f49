//===- CacheAppendKernel.cpp - new keys and values into a KV cache --------===//
//
// (CacheAppendKernel.h.) A copy: each thread moves 16 bytes (8 elements of
// a 16-bit row, 16 of an e4m3 row) per step, blocks striding over the rows
// of k_new, then v_new, then the lengths. The destination row of batch b's
// new row s is cache_seqlens[b] + s; with a page table, row r lives in page
// table[b][r / page_size] at row r % page_size. A row past the cache, or
// in a page the pool does not have (an entry at or past numPages, or
// negative), is not written: a bad length or table entry, read on the GPU
// only, must not become a write outside the caller's tensors. (The
// attention's reads of such a page are the tensor map's: out of its
// bounds, TMA fills zeros.)
//
//===----------------------------------------------------------------------===//
#include "CacheAppendKernel.h"

#include "BuilderBase.h"
#include "KernelBuilder.h" // the ABI: kCacheAppendParams

using namespace mlir;
using namespace fa3::hopper;

namespace {

class CacheAppendBuilder : BuilderBase {
public:
  CacheAppendBuilder(OpBuilder &b, Location loc) : BuilderBase(b, loc) {}

  void build(gpu::GPUModuleOp m, const std::string &name, int64_t headDim,
             int64_t headDimV, int64_t elemBytes) {
    elem = elemBytes;
    gpu::GPUFuncOp fn =
        openKernel(m, name, kCacheAppendParams, kCacheAppendThreads);
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    Value bid = NVVM::BlockIdXOp::create(b, loc, i32T);
    Value nb = NVVM::GridDimXOp::create(b, loc, i32T);
    start = bin<arith::MulIOp>(ext64(bid), i64(kCacheAppendThreads));
    start = bin<arith::AddIOp>(start, ext64(tid));
    stride = bin<arith::MulIOp>(ext64(nb), i64(kCacheAppendThreads));
    copyRows("kNew", "kCache", headDim);
    copyRows("vNew", "vCache", headDimV);
    // the key counts after the append, for the attention's seqUsedK
    auto loop = scf::ForOp::create(b, loc, start, ext64(param("B")), stride);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      Value i = loop.getInductionVar();
      Value n = LLVM::LoadOp::create(b, loc, i32T, globalAt(param("cacheSeqlens"), i, 4),
                                     /*alignment=*/4);
      Value total = bin<arith::AddIOp>(n, param("Snew"));
      LLVM::StoreOp::create(b, loc, total, globalAt(param("seqlensOut"), i, 4),
                            /*alignment=*/4);
    }
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

private:
  Value start, stride;
  int64_t elem = 2; // bytes of an element of the caches


  /// <src>[b, s, h, :] into <dst> at batch b's row cache_seqlens[b] + s.
  void copyRows(const std::string &src, const std::string &dst, int64_t dim) {
    const int64_t per = dim * elem / 16; // 16-byte chunks a row
    Value hkv = ext64(param("Hkv")), snew = ext64(param("Snew"));
    Value items = bin<arith::MulIOp>(ext64(param("B")), snew);
    items = bin<arith::MulIOp>(items, hkv);
    items = bin<arith::MulIOp>(items, i64(per));
    auto loop = scf::ForOp::create(b, loc, start, items, stride);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value item = loop.getInductionVar();
    Value chunk = bin<arith::RemUIOp>(item, i64(per));
    Value t = bin<arith::DivUIOp>(item, i64(per));
    Value h = bin<arith::RemUIOp>(t, hkv);
    t = bin<arith::DivUIOp>(t, hkv);
    Value s = bin<arith::RemUIOp>(t, snew);
    Value bi = bin<arith::DivUIOp>(t, snew);
    Value col = bin<arith::MulIOp>(chunk, i64(16 / elem));
    // the source row
    Value e = bin<arith::MulIOp>(bi, param(src + "StrideB"));
    Value es = bin<arith::MulIOp>(s, param(src + "StrideS"));
    e = bin<arith::AddIOp>(e, es);
    Value eh = bin<arith::MulIOp>(h, param(src + "StrideH"));
    e = bin<arith::AddIOp>(e, eh);
    e = bin<arith::AddIOp>(e, col);
    auto v4 = VectorType::get({4}, i32T);
    Value data = LLVM::LoadOp::create(b, loc, v4, globalAt(param(src), e, elem),
                                      /*alignment=*/16);
    // the destination row: cache_seqlens[b] + s, through the page table
    Value n = LLVM::LoadOp::create(b, loc, i32T,
                                   globalAt(param("cacheSeqlens"), bi, 4),
                                   /*alignment=*/4);
    Value row = bin<arith::AddIOp>(ext64(n), s);
    // Rows past the cache are not written (a count beyond the cache, or a
    // negative one, which reads as a large unsigned one).
    Value inCache = cmpi(CmpIPredicate::ult, row, ext64(param("Skv")));
    OpBuilder::InsertionGuard inside(b);
    auto guard = scf::IfOp::create(b, loc, TypeRange{}, inCache,
                                   /*withElseRegion=*/false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    Value paged = isGiven(param("pageTable"));
    auto place = ifElse(
        paged, TypeRange{i64T, i64T, i1T},
        [&]() -> SmallVector<Value> {
          Value ps = ext64(param("pageSize"));
          Value entry = bin<arith::MulIOp>(bi, ext64(param("pageTableStride")));
          Value slot = bin<arith::DivUIOp>(row, ps);
          entry = bin<arith::AddIOp>(entry, slot);
          Value page = LLVM::LoadOp::create(b, loc, i32T,
                                            globalAt(param("pageTable"), entry, 4),
                                            /*alignment=*/4);
          Value inPage = bin<arith::RemUIOp>(row, ps);
          Value inPool = cmpi(CmpIPredicate::ult, page, param("numPages"));
          return {ext64(page), inPage, inPool};
        },
        [&]() -> SmallVector<Value> {
          return {bi, row, i1(true)};
        });
    auto pageGuard = scf::IfOp::create(b, loc, TypeRange{},
                                       place.getResult(2),
                                       /*withElseRegion=*/false);
    b.setInsertionPoint(pageGuard.thenBlock()->getTerminator());
    Value d = bin<arith::MulIOp>(place.getResult(0), param(dst + "StrideB"));
    Value ds = bin<arith::MulIOp>(place.getResult(1), param(dst + "StrideS"));
    d = bin<arith::AddIOp>(d, ds);
    Value dh = bin<arith::MulIOp>(h, param(dst + "StrideH"));
    d = bin<arith::AddIOp>(d, dh);
    d = bin<arith::AddIOp>(d, col);
    LLVM::StoreOp::create(b, loc, data, globalAt(param(dst), d, elem),
                          /*alignment=*/16);
  }
};

} // namespace

void fa3::hopper::buildCacheAppendKernel(OpBuilder &b, Location loc,
                                         gpu::GPUModuleOp module,
                                         const std::string &name,
                                         int64_t headDim, int64_t headDimV,
                                         int64_t elemBytes) {
  OpBuilder::InsertionGuard g(b);
  CacheAppendBuilder append(b, loc);
  append.build(module, name, headDim, headDimV, elemBytes);
}
