//===- GradKernelBuilder.cpp - the FA3-style Hopper backward kernel -------===//
//
// Builds the backward's main kernel with OpBuilder, in the same hopper ops
// as the forward (rings with load_tile, warp_specialize, wgmma on
// fragments, named barriers) and the backward's own fragment ops
// (HopperFragmentOps.td: stage_rows, load_columns, grad_probs, grad_scores,
// store_shared, the transposed mask; reduce_add). Each op is built in a
// statement of its own (BuilderBase.h).
//
//===----------------------------------------------------------------------===//

#include "GradKernelBuilder.h"
#include "BuilderBase.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <tuple>

using namespace mlir;
using namespace fa3::hopper;

namespace {
constexpr int64_t kElemBytes = 2; // bf16 / f16
constexpr int64_t kProducerRegs = 24;
constexpr int64_t kConsumerRegs = 240; // (512 - 24) / 2, as FA3
constexpr uint32_t kNegInfBits = 0xFF800000u;

class GradKernelBuilder : BuilderBase {
public:
  GradKernelBuilder(OpBuilder &b, Location loc, const GradKernelConfig &cfg,
                    const TiledGradCell &cell)
      : BuilderBase(b, loc), cfg(cfg), cell(cell),
        lay(computeGradSmemLayout(cfg)) {
    et = cfg.dtype == "bf16" ? Type(b.getBF16Type()) : Type(b.getF16Type());
    // Scores and their gradient: keys (the warpgroup's 64) by queries.
    // (sharedKeys: the warpgroup's half of the queries)
    const int64_t cols = cfg.sharedKeys() ? cfg.blockM / 2 : cfg.blockM;
    fragS = FragmentType::get(ctx, {64, cols}, f32T);
    fragP = FragmentType::get(ctx, {64, cols}, et);
    // dK and dV of a warpgroup's own 64 keys (keys by head dim): as wide
    // as the head dim, also at 96 (a wgmma's N may cross into the next box
    // from a box's start; the tile's padding columns are dQ's only): -4 to
    // -19 % of the main kernel's time and 56-92 -> 0-12 bytes of spills
    // against 128 columns (bench/NOTES.md, Log).
    fragD = FragmentType::get(ctx, {64, cfg.headDim}, f32T);
    fragRows = FragmentType::get(ctx, {64}, f32T);
  }

  gpu::GPUFuncOp build(gpu::GPUModuleOp m);

private:
  const GradKernelConfig &cfg;
  const TiledGradCell &cell;
  GradSmemLayout lay;
  Type et;
  FragmentType fragS, fragP, fragD, fragRows;
  Value smemBase, consumer;
  Value kRing, vRing, qRing, doRing, rowsRing;

  int64_t tileD() const { return cfg.tileD(); }

  template <typename OpT> void ringOp(Value r, Value u) {
    OpT::create(b, loc, r, u);
  }
  void loadTile(Value map, Value row, Value head, Value batch, Value r,
                Value u, int64_t rows) {
    LoadTileOp::create(b, loc, map, row, head, batch, r, u,
                       static_cast<uint64_t>(rows),
                       static_cast<uint64_t>(tileD()), et);
  }
  /// The descriptor of a ring's stage for slot u (desc0: stage 0's); with
  /// one stage, loop-invariant: re-derived from the step's zero (atStep).
  Value stageDesc(Value r, Value u, Value desc0, int64_t stageBytes) {
    if (cfg.stages == 1)
      return atStep(desc0);
    Value st = RingStageOp::create(b, loc, r, u);
    Value off = bin<arith::MulIOp>(st, i32(stageBytes >> 4));
    Value sd = ext64(off);
    return bin<arith::AddIOp>(desc0, sd);
  }

  /// A descriptor that does not change from step to step, re-derived in
  /// each step (opaqueZero): hoisted, K's, V's and K's for dQ (8 k-steps a
  /// product at head dim 128) outnumbered the 63 uniform registers and
  /// spilled 12 to 620 bytes.
  Value atStep(Value desc) { return bin<arith::AddIOp>(desc, stepZero); }
  Value stepZero; // opaqueZero of the consumers' step index

  /// This CTA's block of keys, kv head and batch (tiles numbered kv block
  /// fastest; deterministic, the last kv block first: the turns' order,
  /// tileTurn; causal, in L2 sections with the kv block slowest), and the
  /// m-blocks that see the block (attn.q_range).
  struct Work {
    Value col0, hkv, bidx, mLo, nm, iLo, iHi, group;
  };
  Work work(Value cta) {
    Work w;
    Value numN = bin<arith::AddIOp>(param("Skv"), i32(cfg.blockN - 1));
    numN = bin<arith::DivUIOp>(numN, i32(cfg.blockN));
    // Sections whose Q, dO and dQaccum fit in L2, so that the grid starts
    // on every head's longest tiles and ends on short ones
    // (FlashAttention-3's causal backward order).
    Value sectionPairs, pairs;
    if (cfg.l2Sections) {
      sectionPairs = l2SectionPairs();
      pairs = bin<arith::MulIOp>(param("Hkv"), param("B"));
    }
    auto c = TileCoordsOp::create(b, loc, cta, numN, param("Hkv"),
                                  sectionPairs, pairs,
                                  static_cast<uint64_t>(cfg.blockN),
                                  /*longest_first=*/cfg.deterministic);
    w.col0 = c.getM0();
    w.hkv = c.getHead();
    w.bidx = c.getBatch();
    Type four[] = {i32T, i32T, i32T, i32T};
    Value args[] = {w.col0, param("Sq"), param("Skv")};
    auto rng = func::CallOp::create(b, loc, cfg.qRangeFn, four, args);
    w.mLo = rng.getResult(0);
    Value nm = bin<arith::SubIOp>(rng.getResult(1), w.mLo);
    w.nm = bin<arith::MaxSIOp>(nm, i32(0));
    w.iLo = rng.getResult(2);
    w.iHi = rng.getResult(3);
    w.group = bin<arith::DivUIOp>(param("Hq"), param("Hkv"));
    return w;
  }
  /// The (kv head, batch) pairs of a causal section: as many as have the
  /// Q and dO of their group's q heads (2 (D + Dv) bytes a query) and its
  /// dQaccum (4 D) in kL2SectionBytes, at least one.
  Value l2SectionPairs() {
    // Q and dO (2-byte elements, Dv = D) and dQaccum (f32)
    const int64_t perQuery = 2 * 2 * cfg.headDim + 4 * cfg.headDim;
    Value one = i32(1);
    Value group = bin<arith::DivUIOp>(param("Hq"), param("Hkv"));
    Value rows = bin<arith::MulIOp>(param("Sq"), group);
    rows = bin<arith::MaxUIOp>(rows, one);
    Value budget = i32(kL2SectionBytes / perQuery);
    Value n = bin<arith::DivUIOp>(budget, rows);
    return bin<arith::MaxUIOp>(n, one);
  }
  /// Step `it` of the loop over (q head of the group, m-block): the q head
  /// and the m-block.
  std::pair<Value, Value> step(const Work &w, Value it) {
    Value g = bin<arith::DivUIOp>(it, w.nm);
    Value r = bin<arith::RemUIOp>(it, w.nm);
    Value mb = bin<arith::AddIOp>(w.mLo, r);
    Value first = bin<arith::MulIOp>(w.hkv, w.group);
    Value h = bin<arith::AddIOp>(first, g);
    return {h, mb};
  }

  /// b * Hq + h: the (batch, q head) index of LSE, D and dQaccum.
  Value batchHead(const Work &w, Value h) {
    Value bh = bin<arith::MulIOp>(w.bidx, param("Hq"));
    return bin<arith::AddIOp>(bh, h);
  }
  /// The dQaccum tile that consumer warpgroup c (i32) computes in the
  /// step at m-block mb: the step's (mb), or (dqByRows) the step's c-th
  /// 64-row tile, 2 mb + c. The second is there only where dqTiles()
  /// exceeds it (tile ceil(Sq / 64) is the next head's first, or past
  /// dQaccum's end): its writers check.
  Value consumerTile(Value mb, Value c) {
    if (!cfg.dqByRows())
      return mb;
    Value tile = bin<arith::MulIOp>(mb, i32(2));
    return bin<arith::AddIOp>(tile, c);
  }
  /// The byte offset of step it's dQ staging buffer from the first (i32),
  /// with two buffers (by the step's parity); else null.
  Value stagingBuffer(Value it) {
    if (cfg.dqBuffers == 1)
      return Value();
    Value parity = bin<arith::AndIOp>(it, i32(1));
    return bin<arith::MulIOp>(parity, i32(lay.dqBytes));
  }
  /// dQaccum's 64-row tiles of a (batch, head): ceil(Sq / 64), i32.
  Value dqTiles() {
    Value n = bin<arith::AddIOp>(param("Sq"), i32(kGradDqRows - 1));
    return bin<arith::DivUIOp>(n, i32(kGradDqRows));
  }
  /// The number of dQaccum's tile (batch, q head h, 64-row tile mb), i64,
  /// and the tiles a (batch, head) has.
  std::pair<Value, Value> dqTileIndex(const Work &w, Value h, Value mb) {
    Value bh = batchHead(w, h);
    Value nmb64 = ext64(dqTiles());
    Value bh64 = ext64(bh);
    Value tile = bin<arith::MulIOp>(bh64, nmb64);
    Value mb64 = ext64(mb);
    tile = bin<arith::AddIOp>(tile, mb64);
    return {tile, nmb64};
  }
  /// Where part p of warpgroup c (i32, 0 or 1) starts in a tile of
  /// 64-column boxes `box` units apart, `col` units a column inside a box
  /// (the dQ staging's and dQaccum's chunks, the MN-major operands' boxes,
  /// or plain columns with box 64 and col 1): base + c * step.
  Value partOffset(Value c, const GradKernelConfig::SplitPart &p,
                   int64_t box, int64_t col) {
    auto at = [&](int64_t x) { return x / 64 * box + x % 64 * col; };
    for (int64_t wg = 0; wg < 2; ++wg)
      assert((p.firstCol(wg) % 64 == 0 || p.firstCol(wg) % 64 + p.cols <= 64) &&
             "a part inside a box, or from a box's start");
    Value off = bin<arith::MulIOp>(c, i32(at(p.firstCol(1)) - at(p.base)));
    return p.base ? bin<arith::AddIOp>(off, i32(at(p.base))) : off;
  }
  /// dQaccum's floats for (batch, q head h, 64-row tile mb) and part `p`
  /// of warpgroup c: per (batch, head) the tiles of 64 x D floats in
  /// 64-column chunks, each chunk in accumulator order (hopper.reduce_add:
  /// its columns 32 .. 63 the second 2048 floats), so that one bulk
  /// reduction adds a part of a warpgroup's staged dQ; <kernel>_post reads
  /// it back. At head dim 96 the second half holds only its first 32
  /// columns (validCols): the first floats of a full half.
  Value dqTile(const Work &w, Value h, Value mb, Value c,
               const GradKernelConfig::SplitPart &p) {
    Value tile = dqTileIndex(w, h, mb).first;
    Value e = bin<arith::MulIOp>(tile, i64(kGradDqRows * cfg.headDim));
    Value part = partOffset(c, p, 64 * 64, 64);
    Value part64 = ext64(part);
    e = bin<arith::AddIOp>(e, part64);
    return globalAt(param("dQaccum"), e, 4);
  }
  /// fn(n) with n the head dim's columns of part p for warpgroup c: all of
  /// the part's, or (head dim 96) the second warpgroup's fewer, in a
  /// warpgroup-uniform branch (the epilogue's stores are collectives).
  template <typename Fn>
  void withValidCols(Value c, const GradKernelConfig::SplitPart &p, Fn fn) {
    assert(cfg.validCols(p, 0) == p.cols && "the first warpgroup's part is whole");
    const int64_t last = cfg.validCols(p, 1);
    if (last == p.cols) {
      fn(last);
      return;
    }
    Value isFirst = cmpi(CmpIPredicate::eq, c, i32(0));
    ifThenElse(isFirst, [&] { fn(p.cols); }, [&] { fn(last); });
  }
  /// Byte offset of part `p` in a warpgroup's dQ staging: the parts before
  /// it, 64 x cols floats each.
  static int64_t partStageBytes(llvm::ArrayRef<GradKernelConfig::SplitPart> parts,
                                size_t p) {
    int64_t bytes = 0;
    for (size_t q = 0; q < p; ++q)
      bytes += kGradDqRows * parts[q].cols * 4;
    return bytes;
  }
  /// The turn counter of dQ tile (h, mb) (deterministic): a u32 after
  /// dQaccum's B Hq ceil(Sq / 64) tiles, in their order (fa3rt_abi.def).
  /// mb is a 64-row tile, the step's m-block: the deterministic kernel
  /// takes 64-query steps only (checkGradSupported).
  Value turnCounter(const Work &w, Value h, Value mb) {
    auto [tile, nmb64] = dqTileIndex(w, h, mb);
    Value bs = ext64(param("B"));
    Value hs = ext64(param("Hq"));
    Value tiles = bin<arith::MulIOp>(bs, hs);
    tiles = bin<arith::MulIOp>(tiles, nmb64);
    Value e = bin<arith::MulIOp>(tiles, i64(kGradDqRows * cfg.headDim));
    e = bin<arith::AddIOp>(e, tile);
    return globalAt(param("dQaccum"), e, 4);
  }
  /// Kv block n's turn on m-block mb (deterministic). The kv blocks that
  /// see an m-block are consecutive, up to the last one its last row sees
  /// (attn.q_range's rows: the mask's right bound); they take their turns
  /// from that one down, the order in which the CTAs start (work()), so
  /// that a CTA only ever waits for one started before it, and under a
  /// causal mask for one that reached the m-block before it did (a higher
  /// kv block begins at a later m-block).
  Value tileTurn(Value kvBlock, Value mb) {
    Value last = bin<arith::MulIOp>(mb, i32(cfg.blockM));
    last = bin<arith::AddIOp>(last, i32(cfg.blockM - 1));
    Value lastRow = bin<arith::SubIOp>(param("Sq"), i32(1));
    last = bin<arith::MinUIOp>(last, lastRow);
    Type two[] = {i32T, i32T};
    Value args[] = {last, param("Sq"), param("Skv")};
    auto cols = func::CallOp::create(b, loc, cfg.visibleColsFn, two, args);
    Value top = bin<arith::SubIOp>(cols.getResult(1), i32(1));
    top = bin<arith::DivUIOp>(top, i32(cfg.blockN));
    return bin<arith::SubIOp>(top, kvBlock);
  }
  /// Row (b * Hq + h) * Sq of LSE and D, [B, Hq, Sq] (i64).
  Value rowsBase(const Work &w, Value h) {
    Value bh = batchHead(w, h);
    Value bh64 = ext64(bh);
    Value sq64 = ext64(param("Sq"));
    return bin<arith::MulIOp>(bh64, sq64);
  }
  /// Byte offset of slot `it`'s stage of the rows ring.
  Value rowsStage(Value it) {
    Value st = RingStageOp::create(b, loc, rowsRing, it);
    Value off = bin<arith::MulIOp>(st, i32(lay.rowsBytes));
    return bin<arith::AddIOp>(off, i32(lay.rowsOff));
  }

  /// `body(it, h, mb)` for each step of the CTA, inside an scf.for.
  template <typename Fn> void forEachStep(const Work &w, Fn body) {
    Value steps = bin<arith::MulIOp>(w.group, w.nm);
    auto loop = scf::ForOp::create(b, loc, i32(0), steps, i32(1));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value it = loop.getInductionVar();
    auto [h, mb] = step(w, it);
    body(it, h, mb);
  }

  void rowsProducer(Value cta);
  void dqWriter(Value cta);
  void consumers(Value cta);
  void body();
};
} // namespace

GradSmemLayout fa3::hopper::computeGradSmemLayout(const GradKernelConfig &cfg) {
  // (gradTable and gradConfig give two only with the bulk reductions, not
  // deterministic)
  assert((cfg.dqBuffers == 1 ||
          (cfg.dqBuffers == 2 && cfg.dqBulk && !cfg.deterministic)) &&
         "one dQ staging buffer, or two for the bulk reductions");
  GradSmemLayout l;
  const int64_t d = cfg.tileD();
  l.kBytes = cfg.blockN * d * kElemBytes;
  l.vBytes = l.kBytes;
  l.qBytes = cfg.blockM * d * kElemBytes;
  l.doBytes = l.qBytes;
  l.dsBytes = cfg.blockN * cfg.blockM * kElemBytes;
  // P^T too where both warpgroups read it (sharedKeys: dV += P^T dO from
  // shared memory)
  l.pBytes = cfg.sharedKeys() ? l.dsBytes : 0;
  // two dS^T (P^T) buffers, one per step parity: a step's dQ wgmma may
  // still read one while a warp of the next step writes the other (a
  // warp's wgmma wait does not cover the other warps' reads of the same
  // tile)
  const int64_t dsBuffers = 2;
  l.kOff = 0;
  l.vOff = l.kOff + l.kBytes;
  l.qOff = l.vOff + l.vBytes;
  l.doOff = l.qOff + cfg.stages * l.qBytes;
  l.dsOff = l.doOff + cfg.stages * l.doBytes;
  l.pOff = l.dsOff + dsBuffers * l.dsBytes;
  // dQ staging: each warpgroup's part of the step's dQ in f32, in
  // accumulator order (hopper.stage_fragment), in each of cfg.dqBuffers
  // buffers
  l.dqOff = l.pOff + dsBuffers * l.pBytes;
  l.dqBytes = cfg.dqBulk ? cfg.blockM * d * 4 : 0;
  // a step's LSE and D (blockM f32 each) in a stage of the rows ring (a
  // ring's stages are 1024-aligned)
  l.rowsOff = l.dqOff + cfg.dqBuffers * l.dqBytes;
  l.rowsBytes = 1024;
  assert(2 * cfg.blockM * 4 <= l.rowsBytes && "LSE and D fit a rows stage");
  int64_t end = l.rowsOff + cfg.stages * l.rowsBytes;
  l.kFull = end;
  l.kEmpty = l.kFull + 8;
  l.vFull = l.kEmpty + 8;
  l.vEmpty = l.vFull + 8;
  l.qFull = l.vEmpty + 8;
  l.qEmpty = l.qFull + 8 * cfg.stages;
  l.doFull = l.qEmpty + 8 * cfg.stages;
  l.doEmpty = l.doFull + 8 * cfg.stages;
  l.rowsFull = l.doEmpty + 8 * cfg.stages;
  l.rowsEmpty = l.rowsFull + 8 * cfg.stages;
  l.total = l.rowsEmpty + 8 * cfg.stages;
  return l;
}

std::string fa3::hopper::checkGradSupported(const GradKernelConfig &cfg) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (cfg.dtype != "bf16" && cfg.dtype != "f16")
    os << "element type " << cfg.dtype
       << " (the Hopper backward takes bf16 or f16)";
  else if (cfg.headDim != 64 && cfg.headDim != 96 && cfg.headDim != 128 &&
           cfg.headDim != 192 && cfg.headDim != 256)
    os << "head dim " << cfg.headDim
       << " for the backward (the Hopper backward takes 64, 96, 128, 192 or "
          "256)";
  else if (cfg.blockM != kGradDqRows &&
           !(cfg.blockM == 2 * kGradDqRows && cfg.headDim == 64 &&
             cfg.blockN == 128 && !cfg.deterministic))
    os << "block-m " << cfg.blockM << " for the backward (" << kGradDqRows
       << ": the queries of dQaccum's tiles; " << 2 * kGradDqRows
       << " at head dim 64 with block-n 128, not deterministic)";
  else if (cfg.blockN != 128 && cfg.blockN != 64)
    os << "block-n " << cfg.blockN
       << " for the backward (128: 64 keys for each of two consumer "
          "warpgroups; 64: both warpgroups see the 64 keys)";
  else if (cfg.headDim > 128 && cfg.blockN != 64)
    os << "block-n " << cfg.blockN << " at head dim " << cfg.headDim
       << " in the backward (64: a warpgroup of 64 keys would hold 64 x "
       << cfg.headDim << " of dK and of dV, " << cfg.headDim
       << " registers a thread)";
  else if (cfg.stages < 1 || cfg.stages > 4)
    os << "stages " << cfg.stages << " for the backward (1 to 4)";
  else if (cfg.deterministic && !cfg.dqBulk)
    os << "deterministic backward with tma-store=false (fa3-compile "
          "--no-tma-store): the consumers' atomics add dQ in no fixed "
          "order; the dQ writer's bulk reductions, the default, take their "
          "turns";
  else if (computeGradSmemLayout(cfg).total > kMaxDynamicSmem)
    os << "stages " << cfg.stages << " at head dim " << cfg.headDim
       << ": the backward needs " << computeGradSmemLayout(cfg).total
       << " bytes of shared memory, more than the " << kMaxDynamicSmem
       << " a Hopper CTA has";
  return why;
}

/// Warp 2 of the producer warpgroup stages each step's LSE and D (the
/// queries past Sq: p = 0 from the staged -inf, and D = 0) into the rows ring,
/// which the consumers read instead of global memory inside their loop
/// (their global loads stood at about 10 % of the consumers' stall
/// samples: bench/NOTES.md, Backward). FA3 loads them by TMA with Q and dO
/// from padded copies; plain loads of the caller's arrays need no padding.
void GradKernelBuilder::rowsProducer(Value cta) {
  Work w = work(cta);
  forEachStep(w, [&](Value it, Value h, Value mb) {
    Value q0 = bin<arith::MulIOp>(mb, i32(cfg.blockM));
    Value base = rowsBase(w, h);
    ringOp<RingProducerAcquireOp>(rowsRing, it);
    Value off = rowsStage(it);
    Value dOff = bin<arith::AddIOp>(off, i32(cfg.blockM * 4));
    const uint64_t rows = static_cast<uint64_t>(cfg.blockM);
    // LSE as -lse log2(e), once a query here rather than in every
    // consumer thread that reads it (3 instructions a value there: 48 of a
    // step's 444 at head dim 128); past Sq -inf (p = 0)
    StageRowsOp::create(b, loc, param("LSE"), base, q0, param("Sq"),
                        f32Bits(kNegInfBits), smemBase, off, rows,
                        /*neg_log2=*/true);
    StageRowsOp::create(b, loc, param("delta"), base, q0, param("Sq"),
                        f32(0.0), smemBase, dOff, rows);
    // each lane's arrive releases its own stores (the ring counts 32)
    RingProducerCommitOp::create(b, loc, rowsRing, it, 0u);
  });
}

/// The dQ writer (warp 1 of the producer warpgroup; FA3's scheme): per step
/// and consumer, once the warpgroup has staged its dQ (reduce_full), lane 0
/// adds it into dQaccum by one bulk reduction; once the reductions have
/// read the buffers, the warp frees them (reduce_free) for the next step.
/// Each barrier meets once per step: the first free is given before the
/// loop, none after the last step. Deterministic, lane 0 adds a tile's
/// halves in its kv block's turn (tileTurn).
void GradKernelBuilder::dqWriter(Value cta) {
  Work w = work(cta);
  Value kvBlock;
  if (cfg.deterministic)
    kvBlock = bin<arith::DivUIOp>(w.col0, i32(cfg.blockN));
  const int64_t n = cfg.consumers();
  const uint64_t threads = kWarpgroupThreads + 32;
  const int64_t wgBytes = lay.dqBytes / n;
  const bool byRows = cfg.dqByRows();
  const auto parts = cfg.splitParts();
  // (the turns are per 64-row tile: checkGradSupported refuses the rest)
  assert((!cfg.deterministic || !byRows) && "deterministic: 64 queries");
  Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
  Value lane = bin<arith::RemUIOp>(tid, i32(32));
  Value leader = cmpi(CmpIPredicate::eq, lane, i32(0));
  Value steps = bin<arith::MulIOp>(w.group, w.nm);
  Value any = cmpi(CmpIPredicate::sgt, steps, i32(0));
  auto free = [&](int64_t c) {
    NamedBarrierArriveOp::create(b, loc, i32(c), BarrierKind::reduce_free,
                                 static_cast<uint64_t>(n), threads);
  };
  ifThen(any, [&] {
    for (int64_t c = 0; c < n; ++c)
      free(c);
  });
  auto loop = scf::ForOp::create(b, loc, i32(0), steps, i32(1));
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value it = loop.getInductionVar();
    auto [h, mb] = step(w, it);
    Value counter, turn;
    if (cfg.deterministic) {
      counter = turnCounter(w, h, mb);
      turn = tileTurn(kvBlock, mb);
    }
    // the step's staging buffer (two: by the step's parity)
    Value buffer = stagingBuffer(it);
    for (int64_t c = 0; c < n; ++c) {
      NamedBarrierSyncOp::create(b, loc, i32(c), BarrierKind::reduce_full,
                                 static_cast<uint64_t>(n), threads);
      // the consumer's tile (the second of a step by rows only where it
      // is there: consumerTile), a reduction a split part, of the floats
      // of the head dim's columns (the first in accumulator order: dqTile)
      Value tile = consumerTile(mb, i32(c));
      Value there, go = leader;
      if (byRows && c > 0) {
        there = cmpi(CmpIPredicate::ult, tile, dqTiles());
        if (!buffer)
          go = bin<arith::AndIOp>(leader, there);
      }
      for (size_t p = 0; p < parts.size(); ++p) {
        Value dst = dqTile(w, h, tile, i32(c), parts[p]);
        if (cfg.deterministic && c == 0 && p == 0) {
          ifThen(leader, [&] { WaitTurnOp::create(b, loc, counter, turn); });
          NVVM::SyncWarpOp::create(b, loc, i32(-1));
        }
        Value src = i32(lay.dqOff + c * wgBytes + partStageBytes(parts, p));
        if (buffer)
          src = bin<arith::AddIOp>(buffer, src);
        const int64_t bytes = kGradDqRows * cfg.validCols(parts[p], c) * 4;
        auto reduce = [&] {
          ReduceAddBulkOp::create(b, loc, smemBase, src, dst,
                                  static_cast<uint64_t>(bytes));
        };
        if (!there || !buffer) {
          ifThen(go, reduce);
        } else {
          // a skipped tile commits an empty group, so that every step
          // commits the same number (the waits below count them)
          ifThen(leader, [&] {
            ifThenElse(there, reduce, [&] {
              NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
            });
          });
        }
      }
    }
    // (the reductions complete here, so the waits for their reads below
    // return at once)
    if (cfg.deterministic)
      ifThen(leader, [&] { PassTurnOp::create(b, loc, counter); });
    Value next = bin<arith::AddIOp>(it, i32(1));
    Value more = cmpi(CmpIPredicate::slt, next, steps);
    const int64_t perConsumer = static_cast<int64_t>(parts.size());
    for (int64_t c = 0; c < n; ++c) {
      // consumer c's groups (one a part) and those before it have read
      // their buffers (by rows, the second tile's possibly skipped: all of
      // them, once); with two buffers, those of the step before (this
      // step's n groups a consumer may still read the other buffer)
      if (buffer || !byRows || c == 0) {
        const int64_t later = (n - 1 - c) * perConsumer;
        const int64_t pending = buffer   ? later + n * perConsumer
                                : byRows ? 0
                                         : later;
        ifThen(leader, [&] {
          NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, pending,
                                               b.getUnitAttr());
        });
        NVVM::SyncWarpOp::create(b, loc, i32(-1));
      }
      ifThen(more, [&] { free(c); });
    }
  }
  // the reductions done before the CTA's shared memory goes
  ifThen(leader, [&] {
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, UnitAttr());
  });
}

void GradKernelBuilder::consumers(Value cta) {
  Work w = work(cta);
  // (warp-uniform: the descriptors that derive from it can stay in
  // uniform registers)
  Value cw = laneZero(consumer);
  const bool shared = cfg.sharedKeys();
  const int64_t rowBytes = 64 * kSwizzleBytes; // a warpgroup's 64 rows
  const int64_t kBox = cfg.blockN * kSwizzleBytes, qBox = cfg.blockM * kSwizzleBytes;
  // This warpgroup's 64 keys (sharedKeys: the block's, both warpgroups')
  // and, sharedKeys, its half of the step's queries.
  Value wgOff = shared ? i32(0) : bin<arith::MulIOp>(cw, i32(rowBytes));
  const int64_t qCols = shared ? cfg.blockM / 2 : cfg.blockM;
  Value qColOff = shared ? bin<arith::MulIOp>(cw, i32(qCols)) : i32(0);
  // K-major A operands: the keys of K and V.
  Value kOff = bin<arith::AddIOp>(wgOff, i32(lay.kOff));
  Value vOff = bin<arith::AddIOp>(wgOff, i32(lay.vOff));
  Value descK = descBase(smemBase, kOff, descConst(16, 1024));
  Value descV = descBase(smemBase, vOff, descConst(16, 1024));
  // K-major B operands (S^T = K Q^T, dP^T = V dO^T): Q and dO of stage 0,
  // from the warpgroup's first query (rows of 128 bytes).
  Value qRowOff = bin<arith::MulIOp>(qColOff, i32(kSwizzleBytes));
  Value descQ0 = descBase(smemBase, bin<arith::AddIOp>(qRowOff, i32(lay.qOff)),
                          descConst(16, 1024));
  Value descDO0 = descBase(
      smemBase, bin<arith::AddIOp>(qRowOff, i32(lay.doOff)), descConst(16, 1024));
  // dQ (and, sharedKeys, dK and dV) split the head dim between the
  // warpgroups: dQ = dS K over all the block's keys, each warpgroup half of
  // the columns, reading dS^T from shared memory (two buffers, one barrier
  // of both a step): every dQ element is added once per CTA (a split of
  // the keys would add each twice; dQ's atomics bound the kernel,
  // bench/NOTES.md "Backward"). Half of 64 columns starts 64 bytes into
  // K's swizzled rows, as a k-step does in a K-major operand; at head dim
  // 192 each warpgroup's 96 columns are two parts (splitParts); with
  // 128-query steps each takes 64 of the rows instead (dqByRows).
  const auto parts = cfg.splitParts();
  // MN-major B operands (dK += dS^T Q, dV += P^T dO): 64-column boxes one
  // stage's rows apart (the descriptor's leading byte offset); sharedKeys,
  // from each of the warpgroup's parts of the columns.
  // dK and dV: the warpgroup's whole tile, or (sharedKeys) the parts
  const size_t accParts = shared ? parts.size() : 1;
  SmallVector<Value, 2> descQT0, descDOT0;
  for (size_t p = 0; p < accParts; ++p) {
    Value qtOff = shared ? partOffset(cw, parts[p], qBox, kElemBytes) : i32(0);
    descQT0.push_back(descBase(smemBase,
                               bin<arith::AddIOp>(qtOff, i32(lay.qOff)),
                               descConst(qBox, 1024)));
    descDOT0.push_back(descBase(smemBase,
                                bin<arith::AddIOp>(qtOff, i32(lay.doOff)),
                                descConst(qBox, 1024)));
  }
  Value dsOff = bin<arith::AddIOp>(wgOff, i32(lay.dsOff));
  // dQ's A operand: dS of the step's queries, or (dqByRows) of this
  // warpgroup's 64 of them, the second of dS^T's two 64-column boxes (the
  // block's keys apart)
  const int64_t dsBoxBytes = cfg.dqByRows() ? kBox : 0;
  Value dsRows = i32(lay.dsOff);
  if (cfg.dqByRows())
    dsRows = bin<arith::AddIOp>(bin<arith::MulIOp>(cw, i32(dsBoxBytes)), dsRows);
  Value descDS0 = descBase(smemBase, dsRows, descConst(qBox, 1024));
  // sharedKeys: P^T and dS^T as K-major A operands of dV and dK
  Value descP0, descDSA0;
  if (shared) {
    descP0 = descBase(smemBase, i32(lay.pOff), descConst(16, 1024));
    descDSA0 = descBase(smemBase, i32(lay.dsOff), descConst(16, 1024));
  }
  SmallVector<Value, 2> descKT;
  SmallVector<FragmentType, 2> fragQ;
  for (const auto &part : parts) {
    Value kColOff = partOffset(cw, part, kBox, kElemBytes);
    kColOff = bin<arith::AddIOp>(kColOff, i32(lay.kOff));
    descKT.push_back(descBase(smemBase, kColOff, descConst(kBox, 1024)));
    fragQ.push_back(FragmentType::get(ctx, {64, part.cols}, f32T));
  }
  // this warpgroup's dQ staging buffer (dqBulk)
  Value dqStage = bin<arith::MulIOp>(cw, i32(lay.dqBytes / cfg.consumers()));
  dqStage = bin<arith::AddIOp>(dqStage, i32(lay.dqOff));

  Value sl2 = param("scaleLog2");
  Value scale = bin<arith::MulFOp>(sl2, f32(1.0 / fa3::attn::kLog2e));
  // softcap: t = tanh(x scale / cap), then p = exp2(t cap log2 e - lse
  // log2 e), as the forward
  Value pre, probScale = sl2;
  if (cfg.softcap > 0) {
    pre = bin<arith::MulFOp>(sl2,
                             f32(fa3::attn::softcapTanhFactor(cfg.softcap)));
    probScale = f32(fa3::attn::softcapLog2Scale(cfg.softcap));
  }
  Value sq = param("Sq");
  Value kvRow0 = w.col0;
  if (!shared) {
    Value wgRow = bin<arith::MulIOp>(cw, i32(64));
    kvRow0 = bin<arith::AddIOp>(w.col0, wgRow);
  }

  // The loads stand where their slots are used (hopper.ring.fill):
  // hopper-warp-specialize gives them to the producer thread. K and V of
  // the block, once.
  fill(kRing, i32(0), [&] {
    loadTile(param("mapK"), w.col0, w.hkv, w.bidx, kRing, i32(0), cfg.blockN);
  });
  fill(vRing, i32(0), [&] {
    loadTile(param("mapV"), w.col0, w.hkv, w.bidx, vRing, i32(0), cfg.blockN);
  });
  ringOp<RingConsumerWaitOp>(kRing, i32(0));
  ringOp<RingConsumerWaitOp>(vRing, i32(0));
  // The tile program (TiledGradCell): its two loops become the loop over
  // the CTA's steps, its step's index arithmetic i32 values of the step's
  // m-block and attn.q_range's results, and its masked and unmasked forms
  // (the boundary split's condition between them, as matchTiledGradCell
  // found them) the step's mask.
  auto mLoop = cast<scf::ForOp>(cell.mLoop);
  auto range = cast<fa3::attn::QRangeOp>(cell.range);
  Value boundaryCond = cell.step.boundary;
  auto stepOp = cast<fa3::attn::TileGradUpdateOp>(cell.step.any());
  const bool masks = hasMask(stepOp.getWindow());

  Value steps = bin<arith::MulIOp>(w.group, w.nm);
  // the loop carries dK's parts, then dV's
  SmallVector<FragmentType, 2> fragAcc;
  for (size_t p = 0; p < accParts; ++p)
    fragAcc.push_back(shared ? fragQ[p] : fragD);
  SmallVector<Value, 4> inits;
  for (int64_t m = 0; m < 2; ++m)
    for (size_t p = 0; p < accParts; ++p)
      inits.push_back(FragmentZeroOp::create(b, loc, fragAcc[p]));
  auto loop = scf::ForOp::create(b, loc, i32(0), steps, i32(1), inits);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    ValueRange dk = carried.take_front(accParts);
    ValueRange dv = carried.drop_front(accParts);
    Value h, mb;
    std::tie(h, mb) = step(w, it);
    auto leaf = [&](Value v) -> Value {
      if (v == mLoop.getInductionVar())
        return mb;
      if (v == range.getLo())
        return w.mLo;
      if (v == range.getHi())
        return bin<arith::AddIOp>(w.mLo, w.nm);
      if (v == range.getInteriorLo())
        return w.iLo;
      if (v == range.getInteriorHi())
        return w.iHi;
      return Value();
    };
    // (built at the loop body's top level: they dominate all of it)
    DenseMap<Value, Value> lowered;
    Value q0 = rebuildIndex(stepOp.getRow0(), leaf, lowered);
    stepZero = opaqueZero(it);
    Value descKStep = atStep(descK), descVStep = atStep(descV);
    SmallVector<Value, 2> descKTStep;
    for (Value d : descKT)
      descKTStep.push_back(atStep(d));
    Value descQ = stageDesc(qRing, it, descQ0, lay.qBytes);
    Value descDO = stageDesc(doRing, it, descDO0, lay.doBytes);
    SmallVector<Value, 2> descQT, descDOT;
    for (size_t p = 0; p < accParts; ++p) {
      descQT.push_back(stageDesc(qRing, it, descQT0[p], lay.qBytes));
      descDOT.push_back(stageDesc(doRing, it, descDOT0[p], lay.doBytes));
    }
    // S^T = K Q^T and dP^T = V dO^T (Q and dO of the step: ring slot =
    // step)
    Value qHead = h;
    fill(qRing, it, [&] {
      loadTile(param("mapQ"), q0, qHead, w.bidx, qRing, it, cfg.blockM);
    });
    ringOp<RingConsumerWaitOp>(qRing, it);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    Value s = WgmmaSSOp::create(b, loc, fragS, descKStep, descQ, /*c=*/Value(),
                                static_cast<uint64_t>(cfg.headDim),
                                static_cast<uint64_t>(kBox),
                                static_cast<uint64_t>(qBox), et);
    fill(doRing, it, [&] {
      loadTile(param("mapdO"), q0, qHead, w.bidx, doRing, it, cfg.blockM);
    });
    ringOp<RingConsumerWaitOp>(doRing, it);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    Value dp = WgmmaSSOp::create(b, loc, fragS, descVStep, descDO, /*c=*/Value(),
                                 static_cast<uint64_t>(cfg.headDim),
                                 static_cast<uint64_t>(kBox),
                                 static_cast<uint64_t>(qBox), et);
    // The queries' LSE and D, staged by the producer's warp 2: LSE read
    // while the products run, or (lseAtUse) where grad_probs uses each
    // block of it, as -lse log2(e) (past Sq -inf: p = 0).
    ringOp<RingConsumerWaitOp>(rowsRing, it);
    Value rowsOff = rowsStage(it);
    Value colsOff = rowsOff;
    if (shared)
      colsOff = bin<arith::AddIOp>(rowsOff, bin<arith::MulIOp>(qColOff, i32(4)));
    Value lse;
    if (!cfg.lseAtUse)
      lse = LoadColumnsOp::create(b, loc, fragS, smemBase, colsOff);
    s = WgmmaWaitOp::create(b, loc, 1u, ValueRange{s}).getResult(0);
    // softcap's tanh, kept (unmasked: finite) for dS's 1 - t^2
    Value tanh;
    if (cfg.softcap > 0) {
      tanh = SoftcapOp::create(b, loc, s, pre);
      s = tanh;
    }
    // The step's mask: on the boundary split's masked side (attn.q_range's
    // interior sees every key), on every step or none without the split.
    auto masked = [&]() -> SmallVector<Value> {
      Value col0 = shared ? bin<arith::AddIOp>(q0, qColOff) : q0;
      if (cfg.bandMask) {
        // the window's band of r - c: [off - left, off + right + 1)
        ArrayRef<int64_t> win = stepOp.getWindow();
        // (one op a statement: the same order under GCC and clang)
        Value skv64 = ext64(param("Skv"));
        Value sq64 = ext64(sq);
        Value off = bin<arith::SubIOp>(skv64, sq64);
        Value lo, hi;
        if (win[0] >= 0)
          lo = bin<arith::SubIOp>(off, i64(win[0]));
        if (win[1] >= 0)
          hi = bin<arith::AddIOp>(off, i64(win[1] + 1));
        return {BandMaskOp::create(b, loc, s, kvRow0, col0, param("Skv"), lo,
                                   hi)};
      }
      Value mk = MaskOp::create(b, loc, s, kvRow0, /*group=*/Value(), col0,
                                cfg.visibleColsFn, sq, param("Skv"),
                                cfg.leftBounded, /*transposed=*/true);
      return {mk};
    };
    if (boundaryCond) {
      Value boundary = rebuildIndex(boundaryCond, leaf, lowered);
      s = ifElse(boundary, TypeRange{fragS}, masked,
                 [&]() -> SmallVector<Value> { return {s}; })
              .getResult(0);
    } else if (cell.step.masked) {
      s = masked().front();
    }
    Value p = cfg.lseAtUse ? GradProbsOp::create(b, loc, s, smemBase, colsOff,
                                                 probScale, /*lseNegLog2=*/true)
                           : GradProbsOp::create(b, loc, s, lse, probScale,
                                                 /*lseNegLog2=*/true);
    // D once lse is dead (or, deltaAtUse, where grad_scores uses each
    // block of it); dS before P V's and dS Q's register operands exist (at
    // head dim 128, dK and dV hold 128 of the 240 registers). The rows'
    // stage is released after its last read.
    Value dOff = bin<arith::AddIOp>(colsOff, i32(cfg.blockM * 4));
    Value ds;
    if (cfg.deltaAtUse) {
      dp = WgmmaWaitOp::create(b, loc, 0u, ValueRange{dp}).getResult(0);
      ds = GradScoresOp::create(b, loc, p, dp, smemBase, dOff);
      ringOp<RingConsumerReleaseOp>(rowsRing, it);
    } else {
      Value delta = LoadColumnsOp::create(b, loc, fragS, smemBase, dOff);
      ringOp<RingConsumerReleaseOp>(rowsRing, it);
      dp = WgmmaWaitOp::create(b, loc, 0u, ValueRange{dp}).getResult(0);
      ds = GradScoresOp::create(b, loc, p, dp, delta);
    }
    if (cfg.softcap > 0)
      ds = GradSoftcapOp::create(b, loc, ds, tanh);
    Value pa = TruncOp::create(b, loc, fragP, p);
    Value dsa = TruncOp::create(b, loc, fragP, ds);
    // dS^T (sharedKeys: P^T too, the warpgroup's columns of each) into
    // this step's buffer; its readers (both warpgroups) meet on consumer
    // 0's barrier before reading it, which also orders the previous step's
    // reads of the other buffer before the next step's writes
    Value buf = bin<arith::AndIOp>(it, i32(1));
    Value bufOff = bin<arith::MulIOp>(buf, i32(lay.dsBytes));
    Value dsAt = bin<arith::AddIOp>(dsOff, bufOff);
    Value bufUnits = bin<arith::ShRUIOp>(bufOff, i32(4));
    Value bufUnits64 = ext64(bufUnits);
    Value descDS = bin<arith::AddIOp>(descDS0, bufUnits64);
    Value column = shared ? qColOff : Value();
    // 128 keys: dV += P^T dO (P^T is in registers, keys as rows) before
    // dQ, so that the tensor pipe runs it while the warpgroups meet: issued
    // before dS^T's stores, or (dvAfterDs) after them, its issue covering
    // theirs before the fence (bench/NOTES.md, Backward).
    SmallVector<Value, 4> dk1(dk.begin(), dk.end()), dv1(dv.begin(), dv.end());
    auto issueDv = [&] {
      NVVM::WgmmaFenceAlignedOp::create(b, loc);
      dv1[0] = WgmmaRSOp::create(b, loc, pa, descDOT[0], dv[0]);
    };
    if (!shared && !cfg.dvAfterDs)
      issueDv();
    // 128 queries: two 64-column boxes of dS^T, the block's keys apart
    StoreSharedOp::create(b, loc, dsa, smemBase, dsAt, column,
                          static_cast<uint64_t>(dsBoxBytes), cfg.dsStmatrix);
    if (shared) {
      Value pAt = bin<arith::AddIOp>(bufOff, i32(lay.pOff));
      StoreSharedOp::create(b, loc, pa, smemBase, pAt, column, 0u,
                            cfg.dsStmatrix);
    }
    if (!shared && cfg.dvAfterDs)
      issueDv();
    NamedBarrierSyncOp::create(b, loc, i32(0), BarrierKind::stage,
                               static_cast<uint64_t>(cfg.consumers()),
                               static_cast<uint64_t>(128 * cfg.consumers()));
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    // dQ = dS K (both MN-major), part p of the warpgroup's 64 queries
    // (dQaccum's tile consumerTile)
    auto dqProduct = [&](size_t p) -> Value {
      return WgmmaSSOp::create(b, loc, fragQ[p], descDS, descKTStep[p],
                               /*c=*/Value(),
                               static_cast<uint64_t>(cfg.blockN), 0u, 0u, et,
                               /*a_mn_major=*/true, /*b_mn_major=*/true);
    };
    // dQ (a fragment a part) to the dQ writer's staging buffer once it
    // has read the one staged there before (dqBulk: the previous step's,
    // or with two buffers the one before that), else added by this
    // warpgroup's atomics (by rows, the second tile only where Sq reaches
    // it: consumerTile)
    auto dqOut = [&](ValueRange dqs) {
      if (cfg.dqBulk) {
        const uint64_t n = static_cast<uint64_t>(cfg.consumers());
        const uint64_t threads = kWarpgroupThreads + 32;
        NamedBarrierSyncOp::create(b, loc, cw, BarrierKind::reduce_free, n,
                                   threads);
        Value stage = dqStage;
        if (Value buffer = stagingBuffer(it))
          stage = bin<arith::AddIOp>(stage, buffer);
        for (size_t p = 0; p < parts.size(); ++p) {
          const int64_t off = partStageBytes(parts, p);
          Value at = off ? bin<arith::AddIOp>(stage, i32(off)) : stage;
          StageFragmentOp::create(b, loc, dqs[p], smemBase, at);
        }
        NamedBarrierArriveOp::create(b, loc, cw, BarrierKind::reduce_full, n,
                                     threads);
        return;
      }
      // (the head dim's columns of the part: all of them but at head dim
      // 96, whose second warpgroup has 32, in a warpgroup-uniform branch)
      auto reduceAdd = [&](Value dq, Value tile, size_t p) {
        Value at = dqTile(w, h, tile, cw, parts[p]);
        withValidCols(cw, parts[p], [&](int64_t n) {
          ReduceAddOp::create(b, loc, dq, at,
                              n == parts[p].cols ? IntegerAttr()
                                                 : b.getI64IntegerAttr(n));
        });
      };
      Value dqTileHere = consumerTile(mb, cw);
      for (size_t p = 0; p < parts.size(); ++p) {
        if (!cfg.dqByRows()) {
          reduceAdd(dqs[p], dqTileHere, p);
          continue;
        }
        Value there = cmpi(CmpIPredicate::ult, dqTileHere, dqTiles());
        ifThen(there, [&] { reduceAdd(dqs[p], dqTileHere, p); });
      }
    };
    if (!shared) {
      // dQ, then dK += dS^T Q; dQ leaves while dK runs. Same call, against
      // dV and dK then dQ with a wait between: head dim 128 -4 to -6 % of
      // the main kernel's time, 64 -3 % (full) or equal (causal).
      SmallVector<Value> first = {dv1[0]};
      for (size_t p = 0; p < parts.size(); ++p)
        first.push_back(dqProduct(p));
      NVVM::WgmmaFenceAlignedOp::create(b, loc);
      dk1[0] = WgmmaRSOp::create(b, loc, dsa, descQT[0], dk[0]);
      auto retired = WgmmaWaitOp::create(b, loc, 1u, ValueRange(first));
      dv1[0] = retired.getResult(0);
      dqOut(retired.getResults().drop_front());
      dk1[0] =
          WgmmaWaitOp::create(b, loc, 0u, ValueRange{dk1[0]}).getResult(0);
      ringOp<RingConsumerReleaseOp>(doRing, it);
      ringOp<RingConsumerReleaseOp>(qRing, it);
    } else {
      // dV += P^T dO, dK += dS^T Q with both A operands from shared memory
      // (the whole step's queries), this warpgroup's parts of dO's and Q's
      // columns
      Value descP = bin<arith::AddIOp>(descP0, bufUnits64);
      Value descDSA = bin<arith::AddIOp>(descDSA0, bufUnits64);
      auto accumulate = [&](Value descA, Value descB, Value acc,
                            size_t p) -> Value {
        return WgmmaSSOp::create(b, loc, fragAcc[p], descA, descB, acc,
                                 static_cast<uint64_t>(cfg.blockM),
                                 static_cast<uint64_t>(lay.dsBytes), 0u, et,
                                 /*a_mn_major=*/false, /*b_mn_major=*/true);
      };
      for (size_t p = 0; p < accParts; ++p)
        dv1[p] = accumulate(descP, descDOT[p], dv[p], p);
      for (size_t p = 0; p < accParts; ++p)
        dk1[p] = accumulate(descDSA, descQT[p], dk[p], p);
      // Under a mask, dQ = dS K goes right behind them, no wait between
      // (same call, against a wait for dV and dK first: causal -3 to -5 %
      // of the main kernel's time; without a mask +1 % from 8k: not taken)
      SmallVector<Value, 2> dq;
      if (masks) {
        for (size_t p = 0; p < parts.size(); ++p)
          dq.push_back(dqProduct(p));
      }
      SmallVector<Value, 4> acc(dv1);
      acc.append(dk1);
      auto done = WgmmaWaitOp::create(
          b, loc, masks ? static_cast<uint64_t>(parts.size()) : 0u,
          ValueRange(acc));
      for (size_t p = 0; p < accParts; ++p) {
        dv1[p] = done.getResult(p);
        dk1[p] = done.getResult(accParts + p);
      }
      // Q and dO are read (dQ reads K and dS^T): the next step's loads
      // overlap dQ. (The 128-key kernels release them after dK: an early
      // release there measured 0.95-0.97 at head dim 64, equal at 128, in
      // the order before FA3's: bench/NOTES.md.)
      ringOp<RingConsumerReleaseOp>(qRing, it);
      ringOp<RingConsumerReleaseOp>(doRing, it);
      if (!masks) {
        NVVM::WgmmaFenceAlignedOp::create(b, loc);
        for (size_t p = 0; p < parts.size(); ++p)
          dq.push_back(dqProduct(p));
      }
      dqOut(WgmmaWaitOp::create(b, loc, 0u, ValueRange(dq)).getResults());
    }
    SmallVector<Value, 4> yields(dk1);
    yields.append(dv1);
    scf::YieldOp::create(b, loc, yields);
  }
  // dK * scale and dV, keys below Skv (sharedKeys: the warpgroup's half of
  // the columns), staged in shared memory and copied out in 16-byte units
  // by each warpgroup (hopper.store_o_staged: whole rows a warp): 4-byte
  // stores straight from the fragments took 13-21 % of the kernel at 512
  // queries (bench/NOTES.md, Backward). The staging buffer is the Q and dO
  // rings, free once both warpgroups have left the loop (every load of
  // them consumed, every read of them waited for); dV's staging waits
  // until the warpgroup has copied dK out.
  // (sharedKeys: dK's and dV's pointers at each part's first column)
  SmallVector<Value, 2> dK, dV;
  for (size_t p = 0; p < accParts; ++p) {
    dK.push_back(param("dK"));
    dV.push_back(param("dV"));
    if (!shared)
      continue;
    Value first = ext64(partOffset(cw, parts[p], 64, 1));
    dK[p] = globalAt(dK[p], first, kElemBytes);
    dV[p] = globalAt(dV[p], first, kElemBytes);
  }
  const int64_t n = cfg.consumers();
  auto accCols = [&](size_t p) { return shared ? parts[p].cols : fragD.getColumns(); };
  for (size_t p = 0; p < accParts; ++p)
    assert((accCols(p) + 63) / 64 * 64 * n * kSwizzleBytes <=
               lay.doOff + cfg.stages * lay.doBytes - lay.qOff &&
           "dK's staging fits in the Q and dO rings");
  NamedBarrierSyncOp::create(b, loc, i32(0), BarrierKind::stage,
                             static_cast<uint64_t>(n),
                             static_cast<uint64_t>(128 * n));
  Value scaleRows = FragmentFillOp::create(b, loc, fragRows, scale);
  Value oneRows = FragmentFillOp::create(b, loc, fragRows, f32(1.0));
  IntegerAttr stagingAt = b.getI64IntegerAttr(lay.qOff);
  IntegerAttr staged = b.getI64IntegerAttr(n);
  // part p's head-dim columns `valid` of dK and dV (all of the part's but
  // at head dim 96), each store's staging after the previous one's copy
  auto store = [&](size_t p, int64_t valid) {
    IntegerAttr columns =
        valid == accCols(p) ? IntegerAttr() : b.getI64IntegerAttr(valid);
    StoreOOp::create(b, loc, loop.getResult(p), scaleRows, dK[p],
                     param("dkvStrideB"), param("dkvStrideS"),
                     param("dkvStrideH"), kvRow0, /*group=*/Value(), w.hkv,
                     w.bidx, param("Skv"), smemBase, cw, /*map=*/Value(),
                     Value(), Value(), Value(), Value(), stagingAt, staged,
                     /*wait_previous=*/p > 0 ? b.getUnitAttr() : UnitAttr(),
                     UnitAttr(), TypeAttr::get(et), columns);
    StoreOOp::create(b, loc, loop.getResult(accParts + p), oneRows, dV[p],
                     param("dkvStrideB"), param("dkvStrideS"),
                     param("dkvStrideH"), kvRow0, /*group=*/Value(), w.hkv,
                     w.bidx, param("Skv"), smemBase, cw, /*map=*/Value(),
                     Value(), Value(), Value(), Value(), stagingAt, staged,
                     /*wait_previous=*/b.getUnitAttr(), UnitAttr(),
                     TypeAttr::get(et), columns);
  };
  if (!shared) {
    store(0, cfg.headDim);
    return;
  }
  // sharedKeys: the second warpgroup's columns at head dim 96 in a
  // warpgroup-uniform branch (the stores are warpgroup collectives)
  for (size_t p = 0; p < accParts; ++p)
    withValidCols(cw, parts[p], [&](int64_t n) { store(p, n); });
}

void GradKernelBuilder::body() {
  Value smem = LLVM::AddressOfOp::create(b, loc, smemPtrT, "attn_smem");
  smemBase = smem;
  const int64_t consumerThreads = 128 * cfg.consumers();
  auto ring = [&](int64_t stages, int64_t bytes, int64_t data, int64_t full,
                  int64_t empty, int64_t producers = 1) {
    return RingType::get(ctx, stages, bytes, data, full, empty,
                         consumerThreads, 1, producers);
  };
  RingType kT = ring(1, lay.kBytes, lay.kOff, lay.kFull, lay.kEmpty);
  RingType vT = ring(1, lay.vBytes, lay.vOff, lay.vFull, lay.vEmpty);
  RingType qT = ring(cfg.stages, lay.qBytes, lay.qOff, lay.qFull, lay.qEmpty);
  RingType doT =
      ring(cfg.stages, lay.doBytes, lay.doOff, lay.doFull, lay.doEmpty);
  // committed by each lane of the producer's warp 2 (its own writes)
  RingType rowsT = ring(cfg.stages, lay.rowsBytes, lay.rowsOff, lay.rowsFull,
                        lay.rowsEmpty, /*producers=*/32);
  kRing = RingCreateOp::create(b, loc, kT, smem);
  vRing = RingCreateOp::create(b, loc, vT, smem);
  qRing = RingCreateOp::create(b, loc, qT, smem);
  doRing = RingCreateOp::create(b, loc, doT, smem);
  rowsRing = RingCreateOp::create(b, loc, rowsT, smem);
  Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
  Value cta = NVVM::BlockIdXOp::create(b, loc, i32T);
  Value isT0 = cmpi(CmpIPredicate::eq, tid, i32(0));
  ifThen(isT0, [&] {
    setUp(smem, {kRing, vRing, qRing, doRing, rowsRing},
          {"mapQ", "mapK", "mapV", "mapdO"});
  });
  NVVM::Barrier0Op::create(b, loc);
  auto ws = WarpSpecializeOp::create(b, loc,
                                     static_cast<uint64_t>(kProducerRegs),
                                     static_cast<uint64_t>(kConsumerRegs),
                                     static_cast<uint64_t>(cfg.consumers()));
  {
    OpBuilder::InsertionGuard g(b);
    b.createBlock(&ws.getProducer());
    // (the producer thread: hopper-warp-specialize, from the consumers'
    // ring fills)
    if (cfg.dqBulk)
      onProducerWarps(1, 1, [&](Value) { dqWriter(cta); });
    onProducerWarps(2, 1, [&](Value) { rowsProducer(cta); });
    WarpSpecializeOp::ensureTerminator(ws.getProducer(), b, loc);
    Block *cb = b.createBlock(&ws.getConsumer(), {}, {i32T}, {loc});
    consumer = cb->getArgument(0);
    consumers(cta);
    WarpSpecializeOp::ensureTerminator(ws.getConsumer(), b, loc);
  }
  gpu::ReturnOp::create(b, loc);
}

gpu::GPUFuncOp GradKernelBuilder::build(gpu::GPUModuleOp m) {
  gpu::GPUFuncOp fn =
      openKernel(m, cfg.name, kGradKernelParams, cfg.threads());
  body();
  closeKernel(fn);
  return fn;
}

gpu::GPUFuncOp fa3::hopper::buildGradKernel(OpBuilder &b, Location loc,
                                            gpu::GPUModuleOp module,
                                            const GradKernelConfig &cfg,
                                            const TiledGradCell &cell) {
  OpBuilder::InsertionGuard g(b);
  GradKernelBuilder kb(b, loc, cfg, cell);
  return kb.build(module);
}
