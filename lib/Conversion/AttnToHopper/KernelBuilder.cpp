//===- KernelBuilder.cpp - the FA3-style Hopper kernel body ---------------===//
//
// Builds the kernel with OpBuilder, in the hopper/gpu/nvvm/llvm/arith/scf
// dialects, straight into the gpu.module. The hopper ops carry the roles,
// the named barriers, the pipeline rings with their TMA loads, the
// consumers' math on register fragments (wgmma, the online-softmax step,
// the row rescale), the tile scheduler and the epilogue, which
// convert-hopper-to-nvvm lowers. The structure and every encoding were
// validated on an H200 (docs/hopper-prototype-notes.md): fragment layout,
// descriptors, phases.
//
// The ops must come out in the same order whichever compiler builds this
// file (the kernels are compared byte for byte between a GCC and a clang
// build): every op is built in a statement of its own, never as one of two
// IR-building arguments of a call, whose evaluation order C++ leaves open.
// Constants are the exception: they are gathered at the top of the kernel
// in key order at the end (see `cst`), so the order in which they are first
// asked for does not matter.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "BuilderBase.h"
#include "fa3/Conversion/HopperSupport.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cassert>
#include <map>
#include <optional>
#include <tuple>

using namespace mlir;
using namespace fa3::hopper;
using arith::CmpIPredicate;

using fa3::attn::softcapLog2Scale;
using fa3::attn::softcapTanhFactor;

namespace {
/// FP8: warps 1 .. 3 of the producer warpgroup run the V transposer's loop
/// (warp 0's thread 0 issues the TMA loads); with transpose_warps 4 warp 0
/// is the transposer's worker 0 too, in its own program
/// (hopper-producer-warp-transpose), and these are workers 1 .. 3, or,
/// in the decoding kernel, whose warps 0 .. 3 copy its pages, that pass
/// gives the four copying warps the step and erases this loop.
constexpr int64_t kTransposeLoopWarps = 3;
/// The first of them (warp 0 is the producer thread's).
constexpr int64_t kTransposeFirstWarp = 1;
/// The transposer's unit (hopper.transpose_stage unit_keys): 128 keys (a
/// whole block) where there are at least as many such units as transposer
/// warps and the busiest warp gets no more groups of 16 keys than with
/// 64-key units, else 64. A unit's addresses are computed once, so larger
/// units take fewer instructions a group: head dim 256's 128-key units (3,
/// 3 and 2 of 8 groups a warp) ran 1.02-1.09x its 64-key ones (6, 5 and 5
/// of 4), whose warps were busy 95 % of the kernel, half of it on address
/// arithmetic (ncu source counters; bench/NOTES.md, FP8). Head dim 128
/// keeps 64 (3 units of 4 groups against 2 of 8); at 64 a 128-key unit
/// would leave a warp idle (2 units) and measured 0.97-1.02x.
/// FP8: the transposed V's boxes of 128 keys (128-byte swizzle rows).
int64_t vtKeyBoxes(const KernelConfig &cfg) {
  return (cfg.blockN + kSwizzleBytes - 1) / kSwizzleBytes;
}
/// A tile of 160 or 224 keys (FP8's wider tiles) takes 32-key units: the
/// largest power of two that divides it, so that no unit straddles the
/// transposed V's two boxes of 128 keys.
int64_t transposeUnitKeys(const KernelConfig &cfg) {
  if (cfg.blockN % 64 != 0)
    return cfg.blockN & -cfg.blockN;
  auto units = [&](int64_t keys) {
    return cfg.blockN / keys * (cfg.oCols() / kTransposeUnitCols);
  };
  const int64_t warps = cfg.transposeWarps;
  auto busiest = [&](int64_t keys) {
    return (units(keys) + warps - 1) / warps * (keys / 16);
  };
  const bool whole = cfg.blockN == 128 && units(128) >= warps &&
                     busiest(128) <= busiest(64);
  return whole ? 128 : 64;
}

/// Registers per producer thread after setmaxnreg: 24 for the TMA thread;
/// FP8's V transposer (the producer warpgroup's other warps) holds two
/// groups of 16 x 32 bytes and its lane's bases and selectors: 48, which
/// it fits without spilling, where the consumers then have enough (224 at
/// head dim 128). The ldmatrix transposer needs fewer: at head dim 128
/// with a full mask 32, whose consumers' 232 ran 4 % faster than 48 / 224
/// (no spill either way; 24 spills); with a causal mask 1-2 % slower, so
/// 48 there. At head dim 256 24, as FA3's producer warpgroup: O alone is
/// 128 of a consumer's registers, and with 232 (producer 40) ptxas
/// serialised the consumers' wgmmas for want of registers; with 240 it
/// does not (some spill stores remain, 48-56 bytes against 52-80), and
/// the kernels ran 1.04-1.08x faster (bench/NOTES.md, FP8). FP8's tiles
/// of more than 128 keys take FA3's split, 24 beside two consumer
/// warpgroups (240 each) and 32 beside three (160): S and P grow with
/// the keys, and with 48 ptxas serialised the consumers' wgmmas at head
/// dim 64 and 128; their transposer's 32-key units spill 4-8 bytes (ptxas
/// -v, bench/NOTES.md, FP8). The decoding kernels' producer warps copy
/// small pages too (below; a memory-bound kernel, whose one consumer
/// warpgroup keeps 192-200 registers); a paged packed batch's four copy
/// within the 24 (their passes interleaved, so that a lane's destinations
/// differ by constants: RingToNVVM.cpp).
int64_t producerRegs(const KernelConfig &cfg) {
  // The decoding kernel's producer warps also copy small pages by their
  // lanes (hopper.copy_paged_tile: each lane holds its rows' offsets and
  // its pieces' addresses): 56; FP8's (head dim 64 or 128,
  // checkSupported, always copies) 64, and 72 at FP8 head dim 64 (its
  // zero-filled pieces' sizes), the fewest without a spill when warp 0
  // copied alone (ptxas -v: 40 and 48 spilled 8 and 44 bytes, 64 at FP8
  // 64 4 bytes). Its four copying transposers, one entry a lane, fit 40
  // (32 spill 8 bytes), but the consumers' 24 more measured nothing
  // (0.99-1.01; at small pages 0.99: bench/NOTES.md, Log), so 64 stays.
  if (cfg.copiesSmallPages() && cfg.splitKv) {
    if (!cfg.isFp8())
      return 56;
    return cfg.tileD() > cfg.headDim ? 72 : 64;
  }
  if (!cfg.isFp8())
    return 24;
  if (cfg.blockN > 128)
    return cfg.consumers() == 2 ? 24 : 32;
  if (cfg.oCols() == 128 && !cfg.longestFirst)
    return 32;
  return cfg.tileDv() <= 128 ? 48 : 24;
}
/// Registers per consumer thread after setmaxnreg: the CTA's registers at
/// launch (launchRegistersPerThread) less the producer warpgroup's, split
/// over the consumer warpgroups (a multiple of 8, at most 240): 240 for
/// two, 160 for three (as FA3); 224 or 232 for two beside FP8's transposer;
/// 232 for one of a CTA two a SM (128 at launch).
int64_t consumerRegs(const KernelConfig &cfg) {
  const int64_t launch =
      launchRegistersPerThread(cfg.threads(), cfg.ctasPerSm);
  int64_t perThread =
      (launch * (1 + cfg.consumers()) - producerRegs(cfg)) / cfg.consumers();
  return std::min<int64_t>(240, perThread / 8 * 8);
}

class KernelBuilder : BuilderBase {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelConfig &cfg,
                const TiledCell &cell)
      : BuilderBase(b, loc), cfg(cfg), cell(cell) {
    // The pass switches ping-pong off unless there are two consumers.
    assert((!cfg.pingpong || cfg.consumers() == 2) &&
           "ping-pong alternates between two consumer warpgroups");
    lay = computeSmemLayout(cfg);
    if (cfg.isFp8())
      et = b.getType<Float8E4M3FNType>();
    else
      et = cfg.dtype == "bf16" ? Type(b.getBF16Type()) : Type(b.getF16Type());
    ot = cfg.isFp8() ? Type(b.getBF16Type()) : et;
    fragS = FragmentType::get(ctx, {64, cfg.blockN}, f32T);
    fragP = FragmentType::get(ctx, {64, cfg.blockN}, et);
    fragO = FragmentType::get(ctx, {64, cfg.oCols()}, f32T);
    fragRows = FragmentType::get(ctx, {64}, f32T);
  }

  /// The dynamic shared-memory global and the kernel, at the end of `m`.
  gpu::GPUFuncOp build(gpu::GPUModuleOp m);

private:
  const KernelConfig &cfg;
  /// The tile program the consumers' mainloop and epilogue lower.
  const TiledCell &cell;
  SmemLayout lay;
  /// q, k, v's element type and o's.
  Type et, ot;
  // A consumer warpgroup's fragments: S (64 x block_n), P as the register A
  // operand of P V, O (64 x the V tile's width), and one value per row. At
  // Dv 96 a 96-wide O (P V over 1.5 swizzle atoms of V, a partial last box
  // in the TMA store) is correct on the H200 but lost up to 10 % on short
  // causal tiles (bench/NOTES.md, Log: "96-wide O"), so O stays 128 wide.
  // (The direct store then writes only the tensor's columns.)
  FragmentType fragS, fragP, fragO, fragRows;

  // The named barriers are hopper ops (a kind and a consumer index; their
  // ids are assigned by the dialect). Ping-pong's turns are a pass of their
  // own (hopper-pingpong).
  /// This consumer warpgroup's index.
  Value consumer;
  /// OR of `pred` over the 128 threads of this consumer warpgroup: the
  /// wgmma wait in the rescale branch is .aligned, so every warp of the
  /// warpgroup must take the same arm.
  Value warpgroupAny(Value pred) {
    return WarpgroupAnyOp::create(b, loc, pred, consumer,
                                  static_cast<uint64_t>(cfg.consumers()));
  }

  // The pipeline rings (hopper.ring, HopperRingOps.td): the producer
  // acquires a slot's stage, commits the bytes its TMA loads will bring, the
  // consumers wait for the slot and release it; the ops derive stage, phase
  // and barrier addresses from the slot number. Q has one stage per Q
  // buffer (slot = the tile count k); K and V have rings of their own
  // (their own buffers and barriers) with the same slot numbers u.
  //
  // K/V multicast (clusterM 2): the two CTAs of a cluster take m-blocks
  // 2i and 2i + 1 of one head, which read the same K/V blocks; each CTA's
  // producer loads half of every K/V tile's 64-column boxes and multicasts
  // them into both CTAs' ring, so each tile leaves L2 once per pair. A ring
  // stage is then written by both producers: it may be refilled only when
  // the consumers of both CTAs have released it (the K/V rings have cluster
  // 2, and their consumer_release also arrives on the peer's stage).
  Value qRing, kRing, vRing;
  /// FP8: V transposed, a ring beside V's with the same slots. The
  /// transposer warps are V's consumers and this ring's producer: they
  /// wait for V's slot and this one's stage, transpose, release V's and
  /// commit this one, which the consumer warpgroups wait for and release.
  Value vtRing;
  /// A ring op on slot u of ring r (acquire, wait, release).
  template <typename OpT> void ringOp(Value r, Value u) {
    OpT::create(b, loc, r, u);
  }
  void producerCommit(Value r, Value u, int64_t tx) {
    RingProducerCommitOp::createWhole(b, loc, r, u, static_cast<uint64_t>(tx));
  }
  /// Slot u's stage index in ring r.
  Value ringStage(Value r, Value u) { return RingStageOp::create(b, loc, r, u); }
  /// The `rows` x `cols` tile at (row, head, batch) of `map` as the payload
  /// of slot u of ring r, which the producer has acquired.
  void loadTile(Value map, Value row, Value head, Value batch, Value r,
                Value u, int64_t rows, int64_t cols) {
    LoadTileOp::create(b, loc, map, row, head, batch, r, u,
                       static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                       et);
  }
  /// The ring types: a full barrier counting one producer (TMA's thread),
  /// or `producers` arrivals a stage.
  RingType ringType(int64_t stages, int64_t stageBytes, int64_t data,
                    int64_t full, int64_t empty, int64_t arrivals,
                    int64_t cluster, int64_t producers = 1) const {
    return RingType::get(ctx, stages, stageBytes, data, full, empty, arrivals,
                         cluster, producers);
  }
  /// K's and V's producers: where small pages are copied, every copying
  /// lane commits its own copies (`cp.async.mbarrier.arrive.noinc`), so
  /// the full barrier counts those lanes and TMA's one thread arrives for
  /// all of them (a ring of one producer, whose lanes arrive through warp
  /// 0's lane 0, synccheck reports as a missing wait: bench/NOTES.md, Log).
  int64_t kvProducers() const {
    return cfg.copiesSmallPages() ? 32 * cfg.copyWarps() : 1;
  }
  /// The K/V empty barriers' count: every consumer thread of this CTA and,
  /// in a cluster, lane 0 of each of the peer's consumer warps.
  int64_t kvEmptyCount() const {
    int64_t threads = 128 * cfg.consumers();
    return cfg.clusterM == 1 ? threads : threads + threads / 32;
  }
  /// All threads of the cluster: after the mbarrier init (the peer's
  /// multicast signals this CTA's barriers) and before exit (the peer may
  /// still arrive on this CTA's barriers).
  void clusterSync() {
    NVVM::ClusterArriveOp::create(b, loc, UnitAttr());
    NVVM::ClusterWaitOp::create(b, loc, UnitAttr());
  }

  // Persistent CTAs take tiles from a dynamic scheduler (as FA3): a CTA's
  // first tile is its ctaid.x, the next ones come from a global counter
  // (atomic add, + gridDim.x), so that CTAs given short (causal) tiles take
  // more of them. The producer thread fetches; the tile id reaches the
  // consumers through a shared-memory word written before the Q load's
  // mbarrier arrive (release) and read after its wait (acquire). A tile id
  // >= the tile count ends the loop: the producer then arrives on Q full
  // without a load. The counter resets itself: the last CTA to finish
  // fetching (a second counter) zeroes both for the next launch.
  //
  // The producer also publishes the tile's coordinates {tile, m0, head,
  // batch} (the runtime integer divisions) and, in a packed batch, its
  // sequence's bounds {q0, sq, k0, skv} (cu_seqlens loads), so that they
  // do not sit on the consumers' path between two tiles: one slot per Q
  // buffer, rewritten once the consumers released that buffer's Q, so they
  // read it after the Q full wait and, for the epilogue, the coordinates
  // again before they release Q (the bounds stay in registers).
  Value tileSlotAddr; // shared-memory address (i32) of slot 0
  Value smemBase;     // the dynamic shared memory (!llvm.ptr<3>)

  /// Tile k's use of the Q ring: slot k (buffer k % qBuffers; the ring ops
  /// take k itself), and what the kernel keeps per Q buffer beside the
  /// ring: the published-tile slot and, for the consumers' S = Q K^T
  /// descriptors (`withOffset`), the buffer's byte offset in the Q ring's
  /// data (stage * qBytes).
  struct QSlot {
    Value k, slot, offBytes;
  };
  QSlot qSlot(Value k, bool withOffset = false) {
    QSlot q;
    q.k = k;
    if (cfg.qBuffers == 1) {
      q.slot = tileSlotAddr;
      q.offBytes = i32(0);
      return q;
    }
    Value st = ringStage(qRing, k);
    if (cfg.persistent) {
      Value off = bin<arith::MulIOp>(st, i32(lay.tileSlotBytes));
      q.slot = bin<arith::AddIOp>(tileSlotAddr, off);
    }
    if (withOffset)
      q.offBytes = bin<arith::MulIOp>(st, i32(lay.qBytes));
    return q;
  }
  /// FP8 persistent: the end flag of V's slot u (SmemLayout::vEnd),
  /// published with the slot that carries no tile (endOfTiles()).
  Value vEndAddr(Value u) {
    Value st = ringStage(vRing, u);
    Value off = bin<arith::MulIOp>(st, i32(4));
    Value base = ptrToI32(smemPtr(smemBase, lay.vEnd));
    return bin<arith::AddIOp>(base, off);
  }
  /// Word `word` of the tile words published with Q's slot k at `slot`.
  Value publishedWord(Value k, Value slot, int64_t word) {
    Value w = RingPublishedOp::create(b, loc, qRing, k, slot,
                                      static_cast<uint64_t>(word));
    if (cfg.qBuffers == 1)
      return w;
    // Lane 0's value, so that ptxas knows it is warp-uniform: loaded from a
    // slot chosen by tile parity, it cannot tell otherwise, and the ring-slot
    // and wgmma-descriptor math derived from it would move to per-thread
    // registers (an R2UR before every wgmma).
    return laneZero(w);
  }

  /// The persistent tile loop (scf.while) that openClaimLoop opened.
  scf::WhileOp tileLoop;
  /// The branch of claimLoop's body that runs a claimed tile.
  scf::IfOp claimedTile;
  /// A persistent CTA's loop over the tiles it claims, written as the
  /// consumers' program: each turn fills Q's slot k with the k-th tile's Q
  /// and its published words (claimQ), waits for it and runs the tile
  /// while its id is below `tiles` (carrying k and the K/V ring slot g;
  /// one region, so that every read of the published words stands after
  /// the fill that publishes them). Returns (k, g) in the tile's branch;
  /// closeClaimLoop closes it.
  std::pair<Value, Value> openClaimLoop(Value cta, Value tiles, Value numM) {
    Type two[] = {i32T, i32T};
    Value inits[] = {i32(0), i32(0)};
    tileLoop = scf::WhileOp::create(b, loc, TypeRange(two), inits);
    Location locs[] = {loc, loc};
    Block *before = b.createBlock(&tileLoop.getBefore(), {}, two, locs);
    Value k = before->getArgument(0);
    QSlot q = qSlot(k);
    fill(qRing, k, [&] { claimQ(q, cta, tiles, numM); });
    ringOp<RingConsumerWaitOp>(qRing, k);
    Value t = publishedWord(k, q.slot, 0);
    Value more = cmpi(CmpIPredicate::slt, t, tiles);
    claimedTile = scf::IfOp::create(b, loc, TypeRange{i32T}, more,
                                    /*withElseRegion=*/true);
    b.setInsertionPointToStart(claimedTile.elseBlock());
    scf::YieldOp::create(b, loc, before->getArgument(1));
    b.setInsertionPointToStart(claimedTile.thenBlock());
    return {k, before->getArgument(1)};
  }
  /// Closes openClaimLoop's loop: g1 is the next tile's first K/V slot.
  void closeClaimLoop(Value g1) {
    scf::YieldOp::create(b, loc, g1);
    b.setInsertionPointAfter(claimedTile);
    Block *before = tileLoop.getBeforeBody();
    Value carried[] = {before->getArgument(0), claimedTile.getResult(0)};
    scf::ConditionOp::create(b, loc, claimedTile.getCondition(), carried);
    Type two[] = {i32T, i32T};
    Location locs[] = {loc, loc};
    Block *after = b.createBlock(&tileLoop.getAfter(), {}, two, locs);
    Value k1 = bin<arith::AddIOp>(after->getArgument(0), i32(1));
    Value next[] = {k1, after->getArgument(1)};
    scf::YieldOp::create(b, loc, next);
    b.setInsertionPointAfter(tileLoop);
  }
  /// FP8 persistent: V's slot u after the last tile's carries no tile but
  /// its stage's end flag, which stops the transposer warps (V's
  /// consumers; they follow V's ring, not the tile loop).
  void endOfTiles(Value u) {
    fill(vRing, u, [&] {
      Value one[] = {i32(1)};
      RingPublishOp::create(b, loc, vRing, u, vEndAddr(u), one);
      producerCommit(vRing, u, 0);
    });
  }
  /// The body of Q's fill for slot q.k (the producer thread's): claim the
  /// CTA's k-th tile, past empty ones in a packed batch; publish {tile,
  /// m0, head, batch} (a tile id >= tiles: none left); then the tile's Q,
  /// or for none a plain commit, and the tile counters' reset.
  void claimQ(const QSlot &q, Value cta, Value tiles, Value numM) {
    // Static in a cluster: its two CTAs must take the two m-blocks of a
    // pair in step (grid and m-block count are even, so tile and tile +
    // gridDim.x keep their parity); every full-mask tile costs the same.
    // Else dynamic, claimed when the producer turns to this slot, i.e.
    // once the last tile's K/V loads are issued, about when the CTA can
    // start it: claiming earlier would reserve work for a CTA busy with a
    // long (causal) tile. (hopper-warp-specialize issues the claim before
    // the slot's acquire, so its atomic overlaps that wait.)
    const bool dynamic = cfg.clusterM == 1;
    Value counter = dynamic ? param("tileCounter") : Value();
    Value t = TileClaimOp::create(
        b, loc, q.k, cta,
        dynamic ? TileSchedule::dynamic : TileSchedule::static_stride,
        counter);
    t = liveTile(t, tiles, numM);
    Value in = cmpi(CmpIPredicate::slt, t, tiles);
    // Decoded after the acquire: the producer thread has 24 registers, too
    // few to hold a decoded tile across the wait.
    // (a packed batch's tile also its sequence's bounds, published)
    SmallVector<Type> decoded(cfg.varlen ? 8 : 4, i32T);
    auto tile = ifElse(
        in, decoded,
        [&]() -> SmallVector<Value> {
          Tile tl = schedule(coords(t, numM), /*warpUniform=*/false);
          // (GQA packing: Q's tensor map has a box of group heads x
          // block_m / group queries, the tile's packed rows in order)
          Value qrow = packedRow(tl.q0, firstQuery(tl));
          SmallVector<Value> r = {tl.m0, tl.head, tl.bidx, qrow};
          if (cfg.varlen)
            r.append({tl.q0, tl.sq, tl.k0, tl.skv});
          return r;
        },
        [&]() -> SmallVector<Value> {
          Value z = i32(0);
          return SmallVector<Value>(cfg.varlen ? 8 : 4, z);
        });
    TileCoords pc{tile.getResult(0), tile.getResult(1), tile.getResult(2),
                  Value()};
    SmallVector<Value> words = {t, pc.m0, pc.head, pc.bidx};
    if (cfg.varlen)
      words.append(tile.getResults().begin() + 4, tile.getResults().end());
    RingPublishOp::create(b, loc, qRing, q.k, q.slot, words);
    auto load = scf::IfOp::create(b, loc, TypeRange{}, in,
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(load.thenBlock()->getTerminator());
    Value qhead = firstHead(pc);
    Value batch = packedBatch(pc.bidx);
    loadTile(param("mapQ"), tile.getResult(3), qhead, batch, qRing, q.k,
             cfg.blockM, cfg.tileD());
    b.setInsertionPoint(load.elseBlock()->getTerminator());
    producerCommit(qRing, q.k, 0);
    // the last CTA to finish claiming resets the counters for the next
    // launch
    if (dynamic)
      TileCounterResetOp::create(b, loc, counter);
  }

  /// Where a tile sits: its first row, head and batch, and with split-KV
  /// its split (null otherwise). With GQA packing the rows are packed
  /// (query, q head) rows and the head is the kv head.
  struct TileCoords {
    Value m0, head, bidx, split;
  };
  TileCoords coords(Value tile, Value numM) {
    Value sectionPairs, pairs;
    if (cfg.longestFirst && !cfg.leftBounded && !cfg.splitKv && !cfg.varlen) {
      sectionPairs = l2SectionPairs();
      Value batches = gridBatches();
      pairs = bin<arith::MulIOp>(gridHeads(), batches);
    }
    auto c = TileCoordsOp::create(b, loc, tile, numM, gridHeads(), sectionPairs,
                                  pairs, static_cast<uint64_t>(cfg.blockM),
                                  cfg.longestFirst);
    TileCoords t{c.getM0(), c.getHead(), c.getBatch(), Value()};
    if (cfg.splitKv) {
      // the grid's batches are (split, batch) pairs, batch fastest
      t.split = bin<arith::DivUIOp>(t.bidx, param("B"));
      t.bidx = bin<arith::RemUIOp>(t.bidx, param("B"));
    }
    return t;
  }
  /// The (head, batch) pairs of a causal section (hopper.tile_coords): as
  /// many as have their K and V in kL2SectionBytes (each q head counted
  /// with a K and V of its own: with GQA a section could hold more), at
  /// least one; one (each head's m-blocks in turn, the order before
  /// sections) below kSectionMinKeys keys. Not for sliding windows (a
  /// window reads fewer keys than Skv; not measured) nor for a packed
  /// batch, whose keys per sequence are known only at its tile (with its
  /// longest query sequence standing in, its head dim 64 producer spilled
  /// 8 bytes).
  Value l2SectionPairs() {
    const int64_t perKey = (cfg.headDim + cfg.headDimV) * cfg.elemBytes();
    Value keys = param("Skv");
    Value one = i32(1);
    Value fewKeys = i32(kSectionMinKeys);
    Value short_ = cmpi(CmpIPredicate::ult, keys, fewKeys);
    keys = bin<arith::MaxUIOp>(keys, one);
    Value budget = i32(kL2SectionBytes / perKey);
    Value heads = bin<arith::DivUIOp>(budget, keys);
    heads = bin<arith::MaxUIOp>(heads, one);
    return arith::SelectOp::create(b, loc, short_, one, heads);
  }
  /// GQA packing's group: the q heads of a kv head.
  Value group() { return bin<arith::DivUIOp>(param("Hq"), param("Hkv")); }
  /// The kv head of q head `head` (GQA: head / group).
  Value kvHead(Value head) { return bin<arith::DivUIOp>(head, group()); }
  /// The tile grid: rows (packed rows with GQA packing: Sq * group), heads
  /// (kv heads with GQA packing) and batches (x numSplits with split-KV).
  Value gridHeads() { return param(cfg.packGqa ? "Hkv" : "Hq"); }
  Value gridBatches() {
    if (!cfg.splitKv)
      return param("B");
    return bin<arith::MulIOp>(param("B"), param("numSplits"));
  }
  TileGridOp tileGrid() {
    // one IR-building call a statement (the header's rule)
    Value rows = gridRows();
    Value batches = gridBatches();
    return TileGridOp::create(b, loc, rows, gridHeads(), batches,
                              static_cast<uint64_t>(cfg.blockM),
                              cfg.clusterM == 2);
  }
  /// A tile's first query row and first q head: with GQA packing, packed
  /// row m0 is query m0 / group of q head kv head * group (m0 is a
  /// multiple of the group: the runtime requires it to divide block_m).
  Value firstQuery(const TileCoords &c) {
    return cfg.packGqa ? bin<arith::DivUIOp>(c.m0, group()) : c.m0;
  }
  Value firstHead(const TileCoords &c) {
    return cfg.packGqa ? bin<arith::MulIOp>(c.head, group()) : c.head;
  }

  /// One tile of work: its coordinates and kv-block schedule, and the
  /// problem it is a tile of: sq query rows and skv keys (the parameters;
  /// in a packed batch its sequence's, which starts at row q0 of q and o
  /// and at row k0 of k and v: null otherwise).
  struct Tile : TileCoords {
    Value lo, ilo, ihi, nblk;
    Value sq, skv, q0, k0;
  };
  /// Sequence `s` of a packed batch: the shared builder (attn's tiled form
  /// reads the same arrays with it) on i32 loads of cu_seqlens_q/k; the
  /// key count from seqused_k where the caller gave it. `warpUniform`
  /// (the consumers): each value is lane 0's, so that ptxas knows it is
  /// warp-uniform; from a load it cannot tell, and the ring-slot and
  /// wgmma-descriptor math that derives from the key count would move to
  /// per-thread registers (an R2UR before every wgmma: fa3.sass). Not in
  /// the producer, whose loads one thread runs.
  fa3::attn::SequenceBounds sequence(Value s, bool warpUniform) {
    auto gptrT = LLVM::LLVMPointerType::get(ctx, 1);
    auto load = [&](fa3::attn::SeqlensArray a, Value i) -> Value {
      // (hasUsed false: seqused_k is usedKeys')
      Value base = param(a == fa3::attn::SeqlensArray::CuQ ? "cuSeqlensQ"
                                                           : "cuSeqlensK");
      Value p = LLVM::GEPOp::create(b, loc, gptrT, i32T, base,
                                    ArrayRef<LLVM::GEPArg>{i});
      Value x = LLVM::LoadOp::create(b, loc, i32T, p);
      return warpUniform ? laneZero(x) : x;
    };
    fa3::attn::SequenceBounds seq =
        fa3::attn::buildSequenceBounds(b, loc, load, /*hasUsed=*/false, s);
    seq.skv = usedKeys(s, seq.skv, warpUniform);
    return seq;
  }
  /// Sequence (batch) b's keys: seqUsedK[b] where the launch gives the
  /// array, else `otherwise`, the keys it has; a count outside 0 ..
  /// `otherwise` is clamped, so that no tile reads past the keys (a cache's
  /// fill is the caller's to keep in range, as in FlashAttention; the
  /// clamp keeps a wrong one inside the cache). `warpUniform`: see
  /// sequence.
  Value usedKeys(Value bidx, Value otherwise, bool warpUniform) {
    Value n = loadOptional(
        "seqUsedK", i32T, [&] { return bidx; }, otherwise, warpUniform);
    return fa3::attn::clampUsedKeys(b, loc, n, otherwise);
  }
  /// Element index() (built only where the array is given) of the `type`
  /// array that parameter `name` points to, or `otherwise` where the launch
  /// passes NULL: the optional arrays (seqused_k, FP8's descales).
  /// `warpUniform`: see sequence.
  template <typename IndexFn>
  Value loadOptional(const char *name, Type type, IndexFn index,
                     Value otherwise, bool warpUniform) {
    auto gptrT = LLVM::LLVMPointerType::get(ctx, 1);
    Value given = isGiven(param(name));
    auto r = ifElse(
        given, TypeRange{type},
        [&]() -> SmallVector<Value> {
          Value i = index();
          Value p = LLVM::GEPOp::create(b, loc, gptrT, type, param(name),
                                        ValueRange{i});
          Value x = LLVM::LoadOp::create(b, loc, type, p);
          return {warpUniform ? laneZero(x) : x};
        },
        [&]() -> SmallVector<Value> { return {otherwise}; });
    return r.getResult(0);
  }
  /// Batch b's row of the page table (i32 page indices, pageTableStride
  /// apart), or null where the launch gives no page table.
  Value pageTableRow(Value bidx) {
    auto gptrT = LLVM::LLVMPointerType::get(ctx, 1);
    Value b64 = ext64(bidx);
    Value off = bin<arith::MulIOp>(b64, ext64(param("pageTableStride")));
    Value row = LLVM::GEPOp::create(b, loc, gptrT, i32T, param("pageTable"),
                                    ValueRange{off});
    Value null = LLVM::ZeroOp::create(b, loc, gptrT);
    Value given = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                       param("pageTable"), null);
    return LLVM::SelectOp::create(b, loc, given, row, null);
  }
  /// A K or V block of block_n rows from `row` into slot u of ring r: from
  /// a paged cache where `pages` (the batch's page-table row) is not null
  /// (hopper.load_paged_tile: the map is over pages; rows past `bound`,
  /// the batch's keys, read its last row's page), else a tile of the map.
  /// A paged kernel copies pages smaller than its tiles by the producer
  /// warps' lanes where the launch gives `copyBase`
  /// (hopper.copy_paged_tile; the parameter pagedK or pagedV), the
  /// tensor's `tensorCols` columns of the tile's `cols`.
  void loadKv(Value map, Value row, Value head, Value batch, Value r, Value u,
              int64_t cols, int64_t tensorCols, Value pages, Value bound,
              Value copyBase) {
    if (!pages) {
      loadTile(map, row, head, batch, r, u, cfg.blockN, cols);
      return;
    }
    auto boxes = [&] {
      LoadPagedTileOp::create(b, loc, map, row, head, pages,
                              param("pageSize"), bound, r, u,
                              static_cast<uint64_t>(cfg.blockN),
                              static_cast<uint64_t>(cols), et);
    };
    auto paged = [&] {
      if (!copyBase)
        return boxes();
      ifThenElse(
          isGiven(copyBase),
          [&] {
            // (head dim 96's 128-column tile, FP8 head dim 64's box of
            // 128: the pieces past the tensor's row are zero-filled)
            IntegerAttr valid;
            if (tensorCols < cols)
              valid = b.getI64IntegerAttr(tensorCols);
            CopyPagedTileOp::create(
                b, loc, copyBase, param("pagedStridePage"),
                param("pagedStrideRow"), param("pagedStrideHead"), row, head,
                pages, param("pageSize"), param("pagedPages"), bound, r, u,
                /*warp=*/Value(), /*offsets=*/ValueRange(),
                b.getI64IntegerAttr(cfg.blockN),
                b.getI64IntegerAttr(cols), valid,
                b.getI64IntegerAttr(cfg.copyWarps()), TypeAttr::get(et));
          },
          boxes);
    };
    ifThenElse(isGiven(pages), paged, [&] {
      loadTile(map, row, head, batch, r, u, cfg.blockN, cols);
    });
  }
  /// `warpUniform`: see sequence. `published`: a packed batch's sequence
  /// bounds where the producer published them with the tile (else read
  /// from cu_seqlens here).
  Tile schedule(const TileCoords &c, bool warpUniform,
                std::optional<fa3::attn::SequenceBounds> published = {}) {
    Tile t;
    static_cast<TileCoords &>(t) = c;
    t.sq = param("Sq");
    t.skv = param("Skv");
    if (cfg.varlen) {
      fa3::attn::SequenceBounds seq =
          published ? *published : sequence(c.bidx, warpUniform);
      t.sq = seq.sq, t.skv = seq.skv, t.q0 = seq.q0, t.k0 = seq.k0;
    } else if (cfg.splitKv) {
      // The decoding kernel reads a KV cache filled to seqused_k[b] of its
      // Skv rows where the launch gives one (FlashAttention's
      // cache_seqlens), from row leftPadK[b] where given (its
      // cache_leftpad; clamped into 0 .. the fill, as the fill is into the
      // cache); masks and the schedule then see the keys between.
      Value used = usedKeys(c.bidx, param("Skv"), warpUniform);
      Value pad = loadOptional(
          "leftPadK", i32T, [&] { return c.bidx; }, i32(0), warpUniform);
      t.k0 = fa3::attn::clampUsedKeys(b, loc, pad, used);
      t.skv = bin<arith::SubIOp>(used, t.k0);
    }
    // the schedule of this m-block (attn.kv_range). With GQA packing the
    // tile's queries m0 / g .. (m0 + block_m - 1) / g lie inside the
    // block_m rows from m0 / g: their range covers the tile's (and its
    // interior blocks are interior to the tile's rows too).
    Type four[] = {i32T, i32T, i32T, i32T};
    Value args[] = {firstQuery(c), t.sq, t.skv};
    auto rng = func::CallOp::create(b, loc, cfg.kvRangeFn, four, args);
    t.lo = rng.getResult(0);
    t.ilo = rng.getResult(2);
    t.ihi = rng.getResult(3);
    t.nblk = bin<arith::SubIOp>(rng.getResult(1), t.lo);
    if (cfg.splitKv) {
      // split s takes the s-th run of ceil(nblk / numSplits) blocks
      // (possibly none); the mask's interior range stays the tile's
      Value ns = param("numSplits");
      Value per = bin<arith::AddIOp>(t.nblk, ns);
      per = bin<arith::SubIOp>(per, i32(1));
      per = bin<arith::DivUIOp>(per, ns);
      Value start = bin<arith::MulIOp>(c.split, per);
      t.lo = bin<arith::AddIOp>(t.lo, start);
      Value left = bin<arith::SubIOp>(t.nblk, start);
      left = bin<arith::MinSIOp>(left, per);
      t.nblk = bin<arith::MaxSIOp>(left, i32(0));
    }
    return t;
  }

  /// In a packed batch, an m-block at or past its sequence's end has no
  /// work: with one tile per CTA, the rest of the role is built inside
  /// `if (m0 < sq)` (the CTA then exits); a persistent producer skips such
  /// tiles itself (liveTile). Returns the guard to close, or null.
  scf::IfOp openSequenceGuard(const Tile &t) {
    if (!cfg.varlen || cfg.persistent)
      return nullptr;
    Value live = cmpi(CmpIPredicate::slt, t.m0, t.sq);
    auto guard = scf::IfOp::create(b, loc, TypeRange{}, live,
                                   /*withElseRegion=*/false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    return guard;
  }
  void closeSequenceGuard(scf::IfOp guard) {
    if (guard)
      b.setInsertionPointAfter(guard);
  }
  /// The rows of q, k, v and o are those of the tile's sequence in a
  /// packed batch (a batch of one): its row `row` is row q0 / k0 + row.
  Value packedRow(Value base, Value row) {
    return base ? bin<arith::AddIOp>(base, row) : row;
  }
  Value packedBatch(Value bidx) { return cfg.varlen ? i32(0) : bidx; }
  /// The m-blocks of the tile grid: of the longest sequence in a packed
  /// batch; of Sq x group packed rows with GQA packing.
  Value gridRows() {
    if (cfg.packGqa)
      return bin<arith::MulIOp>(param("Sq"), group());
    return param(cfg.varlen ? "maxSeqlenQ" : "Sq");
  }
  /// A persistent producer's first tile from `t` on that has work in a
  /// packed batch (its m-block starts inside its sequence), claiming more
  /// from the dynamic scheduler past the empty ones; a tile >= `tiles`
  /// when none is left. The consumers then see only tiles with work, and
  /// the ring slots stay in step without a branch on their side.
  Value liveTile(Value t, Value tiles, Value numM) {
    if (!cfg.varlen || !cfg.persistent)
      return t;
    auto loop = scf::WhileOp::create(b, loc, TypeRange{i32T}, ValueRange{t});
    Block *before = b.createBlock(&loop.getBefore(), {}, {i32T}, {loc});
    Value cur = before->getArgument(0);
    Value inRange = cmpi(CmpIPredicate::slt, cur, tiles);
    auto empty = ifElse(
        inRange, TypeRange{i1T},
        [&]() -> SmallVector<Value> {
          // Decoded here and again, for a live tile, in the tile loop's
          // body: carrying the decoded tile across the loop would hold it
          // in the producer's 24 registers (see claimQ()).
          TileCoords c = coords(cur, numM);
          fa3::attn::SequenceBounds seq = sequence(c.bidx, /*warpUniform=*/false);
          Value none = cmpi(CmpIPredicate::sge, c.m0, seq.sq);
          return {none};
        },
        [&]() -> SmallVector<Value> {
          return {i1(false)};
        });
    scf::ConditionOp::create(b, loc, empty.getResult(0), ValueRange{cur});
    Block *after = b.createBlock(&loop.getAfter(), {}, {i32T}, {loc});
    Value n = TileNextOp::create(b, loc, after->getArgument(0),
                                 TileSchedule::dynamic, param("tileCounter"));
    scf::YieldOp::create(b, loc, n);
    b.setInsertionPointAfter(loop);
    return loop.getResult(0);
  }

  /// The published tile (persistent consumers): words {tile, m0, head,
  /// batch} published with Q's slot k at `slot`.
  TileCoords readCoords(Value k, Value slot) {
    // Scalar loads: ptxas keeps their values (and the ring-slot arithmetic
    // derived from them) in uniform registers; from a vector load it did
    // not, and every wgmma waited for an R2UR of its descriptor.
    TileCoords c;
    c.m0 = publishedWord(k, slot, 1);
    c.head = publishedWord(k, slot, 2);
    c.bidx = publishedWord(k, slot, 3);
    return c;
  }
  /// A packed batch's published tile: its sequence's bounds, words {q0,
  /// sq, k0, skv} after the tile's.
  fa3::attn::SequenceBounds readSequence(Value k, Value slot) {
    fa3::attn::SequenceBounds s;
    s.q0 = publishedWord(k, slot, 4);
    s.sq = publishedWord(k, slot, 5);
    s.k0 = publishedWord(k, slot, 6);
    s.skv = publishedWord(k, slot, 7);
    return s;
  }

  // --- kernel pieces --------------------------------------------------------
  /// The wgmma descriptor of K or V (ring r of `stageBytes` stages, first
  /// stage's descriptor desc0) in slot u's stage.
  Value stageDesc(Value r, Value u, Value desc0, int64_t stageBytes);
  /// Persistent CTAs reload Q into the buffer the O store reads: the
  /// consumers free Q only once that store has read it.
  bool qFreedAfterStore() const { return cfg.persistent && lay.oInQ; }
  /// A tile's epilogue in this consumer warpgroup, as hopper ops on the
  /// mainloop's fragments: `m` and `l` the rows' running max and the
  /// thread's partial row sums (!hopper.frag<64xf32>), `o` the accumulator
  /// (!hopper.frag<64 x tileDv x f32>). `c` is the tile, `sq` its
  /// problem's query rows; `qK` this tile's Q ring
  /// slot, released after the O store where O is staged in Q's buffer
  /// (qFreedAfterStore). Uses `consumer` and `smemBase`.
  void epilogue(Value m, Value l, Value o, const TileCoords &c, Value sq,
                Value qK);
  /// The tile's sequence's first row of q and of k in a packed batch (null
  /// otherwise).
  Value seqQ0, seqK0;
  /// FP8: warp `worker` of the producer warpgroup's transposer warps.
  void transposer(Value cta, Value worker);
  void consumers(Value tid, Value cta);
  /// FP8: the descale factor at `index` of array `name` (f32), 1 where the
  /// launch gives none. `index` is b sB + h sH (+ blk sBlk) with the
  /// strides the parameters `strides` name (fa3rt_abi.def).
  Value descale(const char *name, Value bidx, Value head, Value blk,
                std::array<const char *, 3> strides);
  void body();
};
} // namespace

SmemLayout fa3::hopper::computeSmemLayout(const KernelConfig &cfg) {
  SmemLayout l;
  const int64_t eb = cfg.elemBytes();
  l.qBytes = cfg.blockM * cfg.tileD() * eb;
  l.kBytes = cfg.blockN * cfg.tileD() * eb;
  l.vBytes = cfg.blockN * cfg.tileDv() * eb;
  l.oBytes = cfg.tmaStore ? cfg.blockM * cfg.oCols() * cfg.outBytes() : 0;
  // FP8's transposed V: Dv rows of block_n bytes in boxes of 128 keys (a
  // 128-byte swizzle row each; the second of a 160- or 224-key tile partly
  // used), one per stage
  l.vtBytes = cfg.isFp8() ? cfg.oCols() * vtKeyBoxes(cfg) * kSwizzleBytes : 0;
  const int64_t nq = cfg.qBuffers;
  if (cfg.persistent)
    l.tileSlotBytes = cfg.varlen ? 32 : 16;
  l.qOff = 0;
  l.kOff = l.qOff + nq * l.qBytes;
  l.vOff = l.kOff + cfg.stages * l.kBytes;
  l.vtOff = l.vOff + cfg.stages * l.vBytes;
  int64_t end = l.vtOff + cfg.stages * l.vtBytes;
  // mbarriers (Q full/empty per Q buffer, K/V full/empty per stage), then
  // the published-tile slots, one per Q buffer (persistent), then FP8's
  // transposed-V full/empty barriers per stage and, persistent, V's end
  // flags (a word per stage)
  const int64_t tail = 8 * (2 * nq + 4 * cfg.stages) +
                       l.tileSlotBytes * nq +
                       (cfg.isFp8() ? 16 * cfg.stages : 0) +
                       (cfg.isFp8() && cfg.persistent
                            ? (4 * cfg.stages + 7) / 8 * 8
                            : 0);
  l.oInQ = cfg.tmaStore && l.oBytes <= l.qBytes &&
           end + l.oBytes + tail > kMaxDynamicSmem;
  l.oOff = l.oInQ ? l.qOff : end;
  if (cfg.tmaStore && !l.oInQ)
    end += l.oBytes;
  l.qFull = end;
  l.qEmpty = l.qFull + 8 * nq;
  l.kFull = l.qEmpty + 8 * nq;
  l.vFull = l.kFull + 8 * cfg.stages;
  l.kEmpty = l.vFull + 8 * cfg.stages;
  l.vEmpty = l.kEmpty + 8 * cfg.stages;
  l.tileSlots = l.vEmpty + 8 * cfg.stages;
  if (cfg.isFp8()) {
    l.vtFull = l.tileSlots + l.tileSlotBytes * nq;
    l.vtEmpty = l.vtFull + 8 * cfg.stages;
    if (cfg.persistent)
      l.vEnd = l.vtEmpty + 8 * cfg.stages;
  }
  l.total = l.qFull + tail;
  return l;
}

/// "192", or "192/128" where the value head dim differs, for messages.
static std::string headDimsOf(const KernelConfig &cfg) {
  std::string s = std::to_string(cfg.headDim);
  if (cfg.headDimV != cfg.headDim)
    s += "/" + std::to_string(cfg.headDimV);
  return s;
}

/// The pairings of head dim and value head dim checked on the GPU: equal
/// ones, and DeepSeek's 192 with 128 (bench/NOTES.md, Head dim 96 and
/// D != Dv). Others build from the same tiles but have not been run.
static bool isCheckedPairing(int64_t d, int64_t dv) {
  return d == dv || (d == 192 && dv == 128);
}

std::string fa3::hopper::checkSupported(const KernelConfig &cfg) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (cfg.dtype != "bf16" && cfg.dtype != "f16" && !cfg.isFp8())
    os << "element type " << cfg.dtype
       << " (the Hopper kernel takes bf16, f16 or e4m3)";
  else if (cfg.isFp8() && ((cfg.headDim != 64 && cfg.headDim != 128 &&
                            cfg.headDim != 256) ||
                           cfg.headDimV != cfg.headDim))
    os << "head dim " << headDimsOf(cfg)
       << " in FP8 (the e4m3 kernel takes head dim 64, 128 or 256, value head "
          "dim equal)";
  else if (cfg.isFp8() && ((cfg.blockM != 128 && cfg.blockM != 192 &&
                            !(cfg.blockM == 64 && cfg.packGqa)) ||
                           cfg.blockN % 32 != 0 || cfg.blockN < 128 ||
                           cfg.blockN > (cfg.blockM == 192 ? 160 : 224) ||
                           (cfg.blockN != 128 && cfg.headDim > 128)))
    os << "tiles " << cfg.blockM << "x" << cfg.blockN << " at head dim "
       << cfg.headDim
       << " in FP8 (the e4m3 kernel uses 128 rows by 128, 160, 192 or 224 "
          "keys, more than 128 at head dim 64 or 128 only (256's shared "
          "memory has no room for them), or 192 rows by 128 or 160: a "
          "warpgroup's rows lie in one "
          "of the q descales' 128-row blocks, a key tile in at most two of "
          "the transposed V's 128-key boxes, P's k-steps are 32 keys, and "
          "three consumer warpgroups' 160 registers hold S and P of 160 "
          "keys at most; the GQA-packed decoding kernel also 64 rows by 128, "
          "its q descale one a kv head)";
  else if (cfg.isFp8() && cfg.lazyRescale && cfg.rescaleThreshold > 8.0)
    os << "rescale threshold " << llvm::format("%g", cfg.rescaleThreshold)
       << " in FP8 (with lazy rescaling P reaches 2^threshold, and e4m3 "
          "saturates at 448: at most 8)";
  else if (cfg.isFp8() && cfg.splitKv && cfg.tileDv() > 128)
    os << "FP8 split-KV at head dim " << headDimsOf(cfg)
       << " (the FP8 decoding kernel takes head dim 64 or 128: at 256 its "
          "consumers' O and its producer's page walk do not fit the "
          "registers, ptxas spilling 100-128 bytes)";
  else if (cfg.isFp8() && (cfg.clusterM != 1 || cfg.varlen))
    os << "FP8 with "
       << (cfg.clusterM != 1 ? "K/V multicast"
                             : "a packed variable-length batch")
       << " (the e4m3 kernels take a fixed-length batch, no cluster: the V "
          "transposer is one CTA's)";
  else if (!isSupportedHeadDim(cfg.headDim))
    os << "head dim " << cfg.headDim << " (the Hopper kernel takes "
       << headDimsText() << ")";
  else if (!isSupportedHeadDim(cfg.headDimV))
    os << "value head dim " << cfg.headDimV << " (the Hopper kernel takes "
       << headDimsText() << ")";
  else if (!isCheckedPairing(cfg.headDim, cfg.headDimV))
    os << "value head dim " << cfg.headDimV << " with head dim "
       << cfg.headDim
       << " (the Hopper kernel takes a value head dim equal to the head dim, "
          "or 128 with 192: the pairings checked on the GPU)";
  else if (cfg.blockM != 128 && cfg.blockM != 192 &&
           !(cfg.blockM == 64 && cfg.splitKv))
    os << "block-m " << cfg.blockM
       << " (the Hopper kernel uses 128 or 192: two or three consumer "
          "warpgroups of 64 rows; 64, one, in the decoding kernel)";
  else if (cfg.blockM == 192 && (cfg.headDim != 64 || cfg.headDimV != 64))
    os << "block-m 192 at head dim " << headDimsOf(cfg)
       << " (three consumer warpgroups have at most 160 registers a thread: "
          "too few for S and an O accumulator of head dim "
       << cfg.headDimV << "; block-m 192 takes head dim 64)";
  else if (cfg.pingpong && cfg.consumers() != 2)
    os << "ping-pong with block-m " << cfg.blockM
       << " (the turns alternate between two consumer warpgroups: block-m "
          "128)";
  else if (cfg.blockN % 16 != 0 || cfg.blockN < 16 || cfg.blockN > 256)
    os << "block-n " << cfg.blockN << " (must be a multiple of 16 up to 256)";
  else if (cfg.stages < 2)
    os << "stages " << cfg.stages << " (need at least 2)";
  else if (cfg.qBuffers != 1 && cfg.qBuffers != 2)
    os << "q-buffers " << cfg.qBuffers << " (1 or 2)";
  else if (cfg.qBuffers == 2 && (!cfg.persistent || computeSmemLayout(cfg).oInQ))
    os << "two Q buffers (they need a persistent kernel whose O staging "
          "buffer fits beside them)";
  else if (cfg.clusterM != 1 && cfg.clusterM != 2)
    os << "cluster size " << cfg.clusterM << " (1, or 2 for K/V multicast)";
  else if (cfg.clusterM == 2 && (cfg.leftBounded || cfg.longestFirst))
    os << "K/V multicast with a causal or window mask (the two CTAs of a "
          "cluster share each K/V tile, so they must visit the same kv "
          "blocks: only a full mask guarantees that)";
  else if (cfg.clusterM == 2 &&
           ((cfg.tileD() / cfg.boxCols()) % 2 != 0 ||
            (cfg.tileDv() / cfg.boxCols()) % 2 != 0))
    os << "K/V multicast at head dim " << headDimsOf(cfg)
       << " (the two CTAs of a cluster each load half of a K/V tile's "
          "64-column boxes: head dim 96, 128 or 256)";
  else if (cfg.varlen && cfg.clusterM != 1)
    os << "a packed variable-length batch with K/V multicast (the two CTAs "
          "of a cluster would take m-blocks of sequences of different "
          "lengths)";
  else if ((cfg.splitKv || cfg.packGqa) &&
           (cfg.varlen || cfg.persistent || cfg.clusterM != 1 || cfg.tmaStore))
    os << "split-KV or GQA packing with "
       << (cfg.varlen       ? "a packed variable-length batch"
           : cfg.persistent ? "persistent CTAs"
           : cfg.clusterM != 1 ? "K/V multicast"
                               : "the TMA O store")
       << " (the decoding kernel takes a fixed-length batch, one CTA per "
          "tile, no cluster, and stores O directly)";
  else if (cfg.ctasPerSm != 1 && cfg.ctasPerSm != 2)
    os << "ctas_per_sm " << cfg.ctasPerSm << " (1 or 2)";
  else if (cfg.transposeWarps != 3 && cfg.transposeWarps != 4)
    os << "transpose_warps " << cfg.transposeWarps << " (3 or 4)";
  else if (cfg.transposeWarps == 4 &&
           !(cfg.isFp8() &&
             (cfg.persistent || (cfg.splitKv && cfg.copiesSmallPages()))))
    os << "transpose_warps 4 "
       << (cfg.isFp8() ? "with one CTA per tile" : "without FP8")
       << " (warp 0 transposes V in a persistent FP8 kernel's producer "
          "program, and the four warps copying a decoding kernel's pages "
          "do: each block's slot after the next block's fill, a tile's "
          "last after its kv loop)";
  else if (cfg.ctasPerSm == 2 && cfg.consumers() != 1)
    os << "two CTAs a SM with block-m " << cfg.blockM << " ("
       << cfg.threads() << " threads then have "
       << launchRegistersPerThread(cfg.threads(), 2)
       << " registers each at launch, " << consumerRegs(cfg)
       << " for a consumer thread: two CTAs a SM take one consumer "
          "warpgroup, block-m 64)";
  else if (computeSmemLayout(cfg).total > maxDynamicSmem(cfg.ctasPerSm))
    os << "tiles " << cfg.blockM << "x" << cfg.blockN << " with head dim "
       << headDimsOf(cfg) << " need " << computeSmemLayout(cfg).total
       << " bytes of shared memory, more than the "
       << maxDynamicSmem(cfg.ctasPerSm) << " a Hopper CTA has"
       << (cfg.ctasPerSm > 1
               ? " two a SM (stages " + std::to_string(cfg.stages) + ")"
               : std::string());
  return why;
}




Value KernelBuilder::stageDesc(Value r, Value u, Value desc0,
                               int64_t stageBytes) {
  Value st = ringStage(r, u);
  Value off = bin<arith::MulIOp>(st, i32(stageBytes >> 4));
  Value sd = ext64(off);
  return bin<arith::AddIOp>(desc0, sd);
}

void KernelBuilder::epilogue(Value m, Value l, Value o, const TileCoords &c,
                             Value sq, Value qK) {
  // ---- epilogue: quad-reduce l, O / l, LSE = (m + log2 l) ln 2 ----
  auto fin = FinalizeRowsOp::create(b, loc, m, l);
  Value inv = fin.getInv(), lse = fin.getLse();
  // This warpgroup's first row of the tile.
  Value row0 = bin<arith::MulIOp>(consumer, i32(64));
  row0 = bin<arith::AddIOp>(c.m0, row0);
  // Rows are stored below the problem's sq; in a packed batch, below its
  // sequence's end, at the sequence's rows of o and lse ([Hq, Tq]: the
  // head's stride is the parameter Sq, the packed rows).
  Value localRow0 = row0;
  row0 = packedRow(seqQ0, row0);
  Value bound = packedRow(seqQ0, sq);
  Value batch = packedBatch(c.bidx);
  Value lseStride = cfg.varlen ? param("Sq") : Value();
  Value tileRow = packedRow(seqQ0, c.m0);
  // GQA packing: the rows are (query, q head) pairs from the tile's first
  // q head
  Value grp = cfg.packGqa ? group() : Value();
  Value head = firstHead(c);
  IntegerAttr columns;
  if (cfg.headDimV != cfg.oCols())
    columns = b.getI64IntegerAttr(cfg.headDimV);
  TypeAttr outType = TypeAttr::get(ot);
  // O's rows to the caller's tensor; hopper-async-copy writes the transfer.
  auto storeO = [&] {
    // Staged in shared memory unless direct. A persistent CTA stages the
    // next tile's O in the same buffer: its own buffer must have been read
    // by the previous store (wait_previous); Q's buffer must be read
    // before Q is released to the producer (drain). By TMA from there,
    // except in a persistent packed batch's kernel (KernelConfig::oStore);
    // in a packed batch a TMA box past the sequence's end would write the
    // next sequence's rows: only where this warpgroup's 64 rows lie within
    // it.
    const KernelConfig::OStore how = cfg.oStore();
    const bool staged = how != KernelConfig::OStore::direct;
    const bool tma = how == KernelConfig::OStore::tma;
    Value smem, cw, map, tRow, tHead, seqRow0, seqLen;
    IntegerAttr offset, consumers;
    UnitAttr waitPrevious, drain;
    if (staged) {
      smem = smemBase;
      cw = consumer;
      offset = b.getI64IntegerAttr(lay.oOff);
      consumers = b.getI64IntegerAttr(cfg.consumers());
      if (cfg.persistent && !lay.oInQ)
        waitPrevious = b.getUnitAttr();
      if (qFreedAfterStore())
        drain = b.getUnitAttr();
    }
    if (tma) {
      map = param("mapO");
      tRow = tileRow;
      tHead = c.head;
    }
    if (tma && cfg.varlen) {
      seqRow0 = localRow0;
      seqLen = sq;
    }
    StoreOOp::create(b, loc, o, inv, param("O"), param("oStrideB"),
                     param("oStrideS"), param("oStrideH"), row0, grp, head,
                     batch, bound, smem, cw, map, tRow, tHead, seqRow0, seqLen,
                     offset, consumers, waitPrevious, drain, outType, columns);
  };
  auto storeLse = [&] {
    StoreLseOp::create(b, loc, lse, param("LSE"), row0, grp, head, batch,
                       param("Hq"), bound, lseStride);
  };
  if (cfg.splitKv) {
    // numSplits > 1: this split's O / l (f32) and LSE, at (split, batch,
    // head, query) of oAccum [numSplits, B, Hq, Sq, Dv] and lseAccum
    // [numSplits, B, Hq, Sq], for <kernel>_combine; else O and LSE as
    // without splits. (A split without blocks stores O = 0 and LSE = -inf.)
    Value many = cmpi(CmpIPredicate::sgt, param("numSplits"), i32(1));
    auto which = scf::IfOp::create(b, loc, TypeRange{}, many,
                                   /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(which.thenBlock()->getTerminator());
    Value sb = bin<arith::MulIOp>(c.split, param("B"));
    sb = bin<arith::AddIOp>(sb, c.bidx);
    Value dv = i64(cfg.headDimV);
    Value strideH = bin<arith::MulIOp>(ext64(sq), dv);
    Value strideB = bin<arith::MulIOp>(strideH, ext64(param("Hq")));
    StoreOOp::create(b, loc, o, inv, param("oAccum"), strideB, dv, strideH,
                     row0, grp, head, sb, bound, f32T, columns);
    StoreLseOp::create(b, loc, lse, param("lseAccum"), row0, grp, head, sb,
                       param("Hq"), bound, Value());
    b.setInsertionPoint(which.elseBlock()->getTerminator());
    storeO(); // direct: split-KV takes no staging (checkSupported)
    storeLse();
    return;
  }
  storeO();
  if (qFreedAfterStore()) {
    // O has left Q's buffer: the producer may load the next Q
    ringOp<RingConsumerReleaseOp>(qRing, qK);
  }
  storeLse();
}

/// The transposer warps transpose V's slots in ring order: slot u into the
/// transposed ring's slot u; each thread releases V's once it has read it,
/// and one commits the transposed slot once all have written it. With one
/// tile per CTA they follow the tile's kv blocks as the consumers do; in a
/// persistent kernel they follow the ring itself until a slot whose end
/// flag is published (endOfTiles(): the tiles are the consumers' loop's,
/// claimed by the producer thread).
void KernelBuilder::transposer(Value cta, Value worker) {
  auto transposeSlot = [&](Value u) {
    ringOp<RingProducerAcquireOp>(vtRing, u);
    TransposeStageOp::create(b, loc, vRing, u, vtRing, worker,
                             static_cast<uint64_t>(cfg.transposeWarps),
                             static_cast<uint64_t>(cfg.blockN),
                             static_cast<uint64_t>(cfg.oCols()),
                             static_cast<uint64_t>(transposeUnitKeys(cfg)));
    ringOp<RingConsumerReleaseOp>(vRing, u);
    NamedBarrierSyncOp::create(b, loc, i32(0), BarrierKind::transpose,
                               static_cast<uint64_t>(cfg.consumers()),
                               static_cast<uint64_t>(32 * cfg.transposeWarps));
    // the first transposer warp's lane 0 commits
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    Value first = cmpi(CmpIPredicate::eq, tid, i32(32 * kTransposeFirstWarp));
    ifThen(first, [&] { producerCommit(vtRing, u, 0); });
  };
  if (cfg.persistent) {
    auto loop = scf::WhileOp::create(b, loc, TypeRange{i32T},
                                     ValueRange{i32(0)});
    OpBuilder::InsertionGuard g(b);
    Block *before = b.createBlock(&loop.getBefore(), {}, {i32T}, {loc});
    Value u = before->getArgument(0);
    ringOp<RingConsumerWaitOp>(vRing, u);
    Value flag = RingPublishedOp::create(b, loc, vRing, u, vEndAddr(u), 0);
    Value more = cmpi(CmpIPredicate::eq, flag, i32(0));
    scf::ConditionOp::create(b, loc, more, ValueRange{u});
    Block *after = b.createBlock(&loop.getAfter(), {}, {i32T}, {loc});
    Value ua = after->getArgument(0);
    transposeSlot(ua);
    Value next = bin<arith::AddIOp>(ua, i32(1));
    scf::YieldOp::create(b, loc, next);
    return;
  }
  auto grid = tileGrid();
  Value numM = grid.getNumM();
  TileCoords c = coords(cta, numM);
  Tile tl = schedule(c, /*warpUniform=*/true);
  auto loop = scf::ForOp::create(b, loc, i32(0), tl.nblk, i32(1));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value u = loop.getInductionVar();
  ringOp<RingConsumerWaitOp>(vRing, u);
  transposeSlot(u);
}

Value KernelBuilder::descale(const char *name, Value bidx, Value head,
                             Value blk, std::array<const char *, 3> strides) {
  auto index = [&]() -> Value {
    Value idx = bin<arith::MulIOp>(bidx, param(strides[0]));
    Value h = bin<arith::MulIOp>(head, param(strides[1]));
    idx = bin<arith::AddIOp>(idx, h);
    if (blk) {
      Value k = bin<arith::MulIOp>(blk, param(strides[2]));
      idx = bin<arith::AddIOp>(idx, k);
    }
    return ext64(idx);
  };
  return loadOptional(name, f32T, index, f32(1.0), /*warpUniform=*/false);
}

void KernelBuilder::consumers(Value tid, Value cta) {
  Value cw = consumer;
  Value ltid = bin<arith::RemUIOp>(tid, i32(128));
  // Scores reach the softmax in the log2 domain: s * sl2.
  Value sl2 = param("scaleLog2"), pre;
  if (cfg.softcap > 0) {
    pre = bin<arith::MulFOp>(param("scaleLog2"),
                             f32(softcapTanhFactor(cfg.softcap)));
    sl2 = f32(softcapLog2Scale(cfg.softcap));
  }

  // wgmma smem descriptors: start address >> 4 in bits 0-13, constants in
  // the rest
  Value wgOff = bin<arith::MulIOp>(cw, i32(64 * kSwizzleBytes));
  Value descQ0 = descBase(smemBase, wgOff, descConst(16, 1024));
  Value descK0 = descBase(smemBase, i32(lay.kOff), descConst(16, 1024));
  // (FP8: V transposed, K-major as K is)
  Value descV0 =
      cfg.isFp8()
          ? descBase(smemBase, i32(lay.vtOff), descConst(16, 1024))
          : descBase(smemBase, i32(lay.vOff),
                     descConst(cfg.blockN * kSwizzleBytes, 1024));
  // The ring the P V product waits for and its stage bytes.
  Value pvRing = cfg.isFp8() ? vtRing : vRing;
  const int64_t pvBytes = cfg.isFp8() ? lay.vtBytes : lay.vBytes;

  // Per tile (set inside the tile loop below; the helpers capture them).
  Value m0, head, bidx, split, lo, ilo, ihi, nblk, wgRow0, sq, skv;
  // The mainloop's iteration t (set inside it): the tile's block lo + t.
  Value kvIter;
  auto blockOf = [&](Value t) { return bin<arith::AddIOp>(lo, t); };

  // The tile program of attn-tile's form (TiledCell): its loop over kv
  // blocks becomes the mainloop, its step each block's products and
  // softmax: its forms and the condition that picks the masked one, as
  // matchTiledCell found them.
  auto kvLoop = cast<scf::ForOp>(cell.kvLoop);
  auto range = cast<fa3::attn::KvRangeOp>(cell.range);
  auto maskedStep =
      cast_or_null<fa3::attn::TileUpdateOp>(cell.step.masked);
  Value boundaryCond = cell.step.boundary;
  auto step = cast<fa3::attn::TileUpdateOp>(cell.step.any());
  // Lazy rescaling where the step has a threshold above 0 (0 is exact: the
  // step's `raised` is then never set, and the lazy branch would skip
  // O *= alpha).
  std::optional<double> threshold = lazyThreshold(step);
  // The loop's index arithmetic rebuilt in i32 where its value is used
  // (each value once a use: what it builds dominates only there): the
  // loop's block is lo + t, attn.kv_range's results this tile's schedule
  // (a split's own run of blocks when the kv blocks are split).
  auto leaf = [&](Value v) -> Value {
    if (v == kvLoop.getInductionVar())
      return blockOf(kvIter);
    if (v == range.getLo())
      return lo;
    if (v == range.getHi())
      return bin<arith::AddIOp>(lo, nblk);
    if (v == range.getInteriorLo())
      return ilo;
    if (v == range.getInteriorHi())
      return ihi;
    return Value();
  };
  auto lowerIndex = [&](Value v) {
    DenseMap<Value, Value> done;
    return rebuildIndex(v, leaf, done);
  };
  // The scores of the block: softcap, then the step's mask (on the
  // boundary split's masked side only: an interior block sees every
  // column).
  // FP8 with kv tiles other than 128 keys: k's block scales (one per 128
  // keys: kDescaleStrideN != 0) do not line up with the kv blocks, so each
  // column takes its key's factor (hopper.scale_key_blocks) before the
  // softmax, a warp-uniform branch at launch; per (batch, kv head) or per
  // tensor descales fold into the scores' scale as at 128 keys. Set per kv
  // block by setBlockScale: the block's first key and the factors of the
  // three 128-key blocks it can reach.
  constexpr int64_t descaleBlock = fa3::attn::FlashAttentionOp::kDescaleBlock;
  static_assert(descaleBlock == kScaleKeyBlock,
                "hopper.scale_key_blocks scales the op's k descale blocks");
  const bool keyBlockScales = cfg.isFp8() && cfg.blockN != descaleBlock;
  Value kBlocked, blockKey0;
  SmallVector<Value, 3> kdCols;
  auto scoresOf = [&](Value sacc) -> Value {
    Value sc = sacc;
    if (keyBlockScales) {
      auto perColumn = ifElse(
          kBlocked, TypeRange{fragS},
          [&]() -> SmallVector<Value> {
            return {ScaleKeyBlocksOp::create(b, loc, sc, blockKey0, kdCols)};
          },
          [&]() -> SmallVector<Value> { return {sc}; });
      sc = perColumn.getResult(0);
    }
    if (cfg.softcap > 0)
      sc = SoftcapOp::create(b, loc, sc, pre);
    if (!maskedStep)
      return sc;
    auto masked = [&]() -> SmallVector<Value> {
      Value col0 = lowerIndex(maskedStep.getCol0());
      Value grp = cfg.packGqa ? group() : Value();
      Value mk = MaskOp::create(b, loc, sc, wgRow0, grp, col0,
                                cfg.visibleColsFn, sq, skv, cfg.leftBounded);
      return {mk};
    };
    if (!boundaryCond)
      return masked().front();
    Value bnd = lowerIndex(boundaryCond);
    auto ms = ifElse(bnd, TypeRange{fragS}, masked,
                     [&]() -> SmallVector<Value> { return {sc}; });
    return ms.getResult(0);
  };

  // The tile grid inside the role, so that the producer thread computes
  // its own copy: a value computed above the role split would live across
  // the producer's setmaxnreg (24 registers), where ptxas would spill it.
  // The opaque copy of Sq keeps LLVM from merging the two roles' copies
  // back above the split.
  auto grid = tileGrid();
  Value numM = grid.getNumM(), tiles = grid.getTiles();
  // One tile per CTA: the CTA's own (Q's and K/V's ring slots from 0).
  // Persistent: the loop over the tiles the CTA claims, each with its Q
  // through the Q ring.
  Value cK = i32(0), cG = i32(0);
  if (cfg.persistent)
    std::tie(cK, cG) = openClaimLoop(cta, tiles, numM);
  // this tile's Q ring slot, buffer and published slot
  QSlot cq = qSlot(cK, /*withOffset=*/true);
  scf::IfOp live;
  {
    // persistent: this tile as the producer decoded it; else this CTA's tile
    TileCoords c =
        cfg.persistent ? readCoords(cq.k, cq.slot) : coords(cta, numM);
    std::optional<fa3::attn::SequenceBounds> published;
    if (cfg.persistent && cfg.varlen)
      published = readSequence(cq.k, cq.slot);
    Tile tl = schedule(c, /*warpUniform=*/true, published);
    m0 = tl.m0, head = tl.head, bidx = tl.bidx, split = tl.split,
    lo = tl.lo, ilo = tl.ilo,
    ihi = tl.ihi, nblk = tl.nblk, sq = tl.sq, skv = tl.skv;
    seqQ0 = tl.q0;
    seqK0 = tl.k0;
    live = openSequenceGuard(tl);
    Value wgRows = bin<arith::MulIOp>(cw, i32(64));
    wgRow0 = bin<arith::AddIOp>(m0, wgRows);
  }
  // FP8: the q descale of this warpgroup's 64 rows (they lie in one of
  // the descales' 128-row blocks, whether the tile has 128 or 192 rows)
  // folded into the scores' scale, k's per kv block below; v's multiplies
  // O. A warpgroup whose rows all lie past Sq (a 192-row tile's last ones)
  // reads the last block's: the array has ceil(Sq / 128) blocks.
  // The tile's kv head (GQA packing: the tile's head itself).
  Value tileHkv = cfg.packGqa ? head : kvHead(head);
  Value qScaleLog2, vDescale;
  if (cfg.isFp8()) {
    Value lastRow = bin<arith::SubIOp>(sq, i32(1));
    Value row = bin<arith::MinUIOp>(wgRow0, lastRow);
    Value mblk = bin<arith::DivUIOp>(row, i32(128));
    Value qd = descale("qDescale", bidx, head, mblk,
                       {"qDescaleStrideB", "qDescaleStrideH", "qDescaleStrideM"});
    qScaleLog2 = bin<arith::MulFOp>(param("scaleLog2"), qd);
    vDescale = descale("vDescale", bidx, tileHkv, Value(),
                       {"vDescaleStrideB", "vDescaleStrideH", nullptr});
  }
  // Block `blk`'s scale of the scores (FP8: q's descale times the block's
  // k descale), into sl2 and, with softcap, pre.
  const std::array<const char *, 3> kStrides = {
      "kDescaleStrideB", "kDescaleStrideH", "kDescaleStrideN"};
  if (keyBlockScales)
    kBlocked = cmpi(CmpIPredicate::ne, param("kDescaleStrideN"), i32(0));
  auto setBlockScale = [&](Value blk) {
    Value kd;
    if (keyBlockScales) {
      // the 128-key blocks of keys blk * block_n ..., the last one
      // ceil(Skv / 128) - 1 at most (read in range; with a stride of 0 all
      // three are the head's one descale)
      blockKey0 = bin<arith::MulIOp>(blk, i32(cfg.blockN));
      Value first = bin<arith::DivUIOp>(blockKey0, i32(descaleBlock));
      Value blocks = bin<arith::AddIOp>(skv, i32(descaleBlock - 1));
      blocks = bin<arith::DivUIOp>(blocks, i32(descaleBlock));
      Value last = bin<arith::SubIOp>(blocks, i32(1));
      kdCols.clear();
      for (int64_t x = 0; x < 3; ++x) {
        Value kb = bin<arith::AddIOp>(first, i32(x));
        kb = bin<arith::MinUIOp>(kb, last);
        kdCols.push_back(descale("kDescale", bidx, tileHkv, kb, kStrides));
      }
      // per column where k has block scales, else folded as at 128 keys
      kd = arith::SelectOp::create(b, loc, kBlocked, f32(1.0), kdCols[0]);
    } else {
      kd = descale("kDescale", bidx, tileHkv, blk, kStrides);
    }
    Value s = bin<arith::MulFOp>(qScaleLog2, kd);
    if (cfg.softcap > 0)
      pre = bin<arith::MulFOp>(s, f32(softcapTanhFactor(cfg.softcap)));
    else
      sl2 = s;
  };
  // The tile's loads stand where the consumers use them (hopper.ring.fill);
  // hopper-warp-specialize gives them to the producer thread.
  Value tileBatch = packedBatch(bidx);
  // A paged cache: the decoding kernel's batch row of the page table; a
  // paged packed batch's whole table, whose pages in order are the packed
  // rows of k and v (sequence s's from cu_seqlens_k[s]).
  Value tilePages = cfg.splitKv   ? pageTableRow(bidx)
                    : cfg.pagedKv ? param("pageTable")
                                  : Value();
  // a paged cache's rows end at the tile's last key (its row in the cache)
  Value kvBound = tilePages ? packedRow(seqK0, skv) : skv;
  if (!cfg.persistent) {
    fill(qRing, cq.k, [&] {
      TileCoords tc{m0, head, bidx, split};
      Value qrow = packedRow(seqQ0, firstQuery(tc));
      Value qhead = firstHead(tc);
      loadTile(param("mapQ"), qrow, qhead, tileBatch, qRing, cq.k, cfg.blockM,
               cfg.tileD());
    });
    // wait for this tile's Q
    ringOp<RingConsumerWaitOp>(qRing, cq.k);
  }
  // The step's K and V (rows from its first column) into ring slot u.
  auto fillKv = [&](Value u) {
    Value kvrow = lowerIndex(step.getCol0());
    kvrow = packedRow(seqK0, kvrow);
    fill(kRing, u, [&] {
      loadKv(param("mapK"), kvrow, tileHkv, tileBatch, kRing, u, cfg.tileD(),
             cfg.headDim, tilePages, kvBound,
             cfg.copiesSmallPages() ? param("pagedK") : Value());
    });
    fill(vRing, u, [&] {
      loadKv(param("mapV"), kvrow, tileHkv, tileBatch, vRing, u,
             cfg.tileDv(), cfg.headDimV, tilePages, kvBound,
             cfg.copiesSmallPages() ? param("pagedV") : Value());
    });
  };
  // This tile's Q buffer for the S = Q K^T descriptors.
  Value descQ = descQ0;
  if (cfg.qBuffers != 1) {
    Value off = bin<arith::ShRUIOp>(cq.offBytes, i32(4));
    Value off64 = ext64(off);
    descQ = bin<arith::AddIOp>(descQ0, off64);
  }
  // The tile's kv blocks one after another, block t: S = Q K_t^T, the
  // softmax step, O *= alpha, O += P V_t. hopper-overlap software-pipelines
  // this loop (FA3's intra-warpgroup overlap: the softmax of block t runs
  // while the P V wgmmas of block t - 1 do).
  (void)f32(0.0);
  // Mainloop state: row max m and the thread's partial row sums l (one
  // value per row), the O accumulator, and P of the last block (16-bit, the
  // register A operand of its P V product).
  SmallVector<Type> rt = {fragRows, fragRows, fragO};
  // Persistent: the epilogue's tile coordinates, read from the published
  // slot before Q is released (the producer then rewrites the slot), are
  // results of this scf.if too.
  const bool coordsThroughIf = cfg.persistent && !qFreedAfterStore();
  SmallVector<Type> rtIf = rt;
  if (coordsThroughIf)
    rtIf.append({i32T, i32T, i32T});
  auto releaseQ = [&](SmallVector<Value> &coordsOut) {
    if (qFreedAfterStore())
      return;
    if (coordsThroughIf) {
      TileCoords c = readCoords(cq.k, cq.slot);
      coordsOut.append({c.m0, c.head, c.bidx});
    }
    ringOp<RingConsumerReleaseOp>(qRing, cq.k);
  };
  // Q as S's register A operand (KernelConfig::qInRegisters), loaded at
  // the tile's start.
  Value qa;
  auto issueS = [&](Value descK, Value zeroS) -> Value {
    if (qa)
      return WgmmaRSOp::create(b, loc, qa, descK, zeroS);
    return WgmmaSSOp::create(b, loc, fragS, descQ, descK, /*c=*/Value(),
                             static_cast<uint64_t>(cfg.headDim),
                             static_cast<uint64_t>(cfg.blockM * kSwizzleBytes),
                             static_cast<uint64_t>(cfg.blockN * kSwizzleBytes),
                             et);
  };
  // (FP8 with more than 128 keys: the transposed V's second box of keys)
  IntegerAttr pvBoxBytes;
  if (cfg.isFp8() && vtKeyBoxes(cfg) > 1)
    pvBoxBytes = b.getI64IntegerAttr(cfg.oCols() * kSwizzleBytes);
  auto issuePV = [&](Value pa, Value descV, Value oacc) -> Value {
    return WgmmaRSOp::create(b, loc, pa, descV, oacc, pvBoxBytes);
  };
  auto wgmmaWait = [&](int pending, Value frag) -> Value {
    return WgmmaWaitOp::create(b, loc, static_cast<uint64_t>(pending),
                               ValueRange{frag})
        .getResult(0);
  };
  auto softmaxStep = [&](Value scores, Value m, Value l, double threshold) {
    Type types[] = {fragS, fragRows, fragRows, fragRows, i1T};
    return SoftmaxStepOp::create(b, loc, types, scores, sl2, m, l,
                                 b.getF64FloatAttr(threshold));
  };
  // The state the tile program fills its buffers with (m = -inf, l = 0,
  // O = 0 as attn-tile writes it), as fragments: state `i` of type `type`.
  auto stateInit = [&](int i, Type type) -> Value {
    if (cell.stateInit[i] == 0)
      return FragmentZeroOp::create(b, loc, type);
    Value x = f32Bits(cell.stateInit[i]);
    return FragmentFillOp::create(b, loc, type, x);
  };
  Value nz = cmpi(CmpIPredicate::sgt, nblk, i32(0));
  auto res = ifElse(
      nz, rtIf,
      [&]() -> SmallVector<Value> {
        // The state before the first block.
        Value mInit = stateInit(0, fragRows);
        Value lInit = stateInit(1, fragRows);
        Value oInit = stateInit(2, fragO);
        if (cfg.qInRegisters()) {
          Value off = bin<arith::AddIOp>(i32(lay.qOff),
                                         bin<arith::AddIOp>(cq.offBytes, wgOff));
          auto fragQ = FragmentType::get(b.getContext(), {64, cfg.headDim}, et);
          qa = LoadSharedOp::create(b, loc, fragQ, smemBase, off,
                                    static_cast<uint64_t>(cfg.blockM * kSwizzleBytes));
        }
        Value inits[] = {mInit, lInit, oInit};
        auto lp = scf::ForOp::create(b, loc, i32(0), nblk, i32(1), inits);
        lp->setAttr(kOverlapAttr, b.getUnitAttr());
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(lp.getBody());
          Value t = lp.getInductionVar();
          kvIter = t;
          Value m = lp.getRegionIterArg(0), l = lp.getRegionIterArg(1),
                acc = lp.getRegionIterArg(2);
          // K and V of block t are ring slot u.
          Value u = bin<arith::AddIOp>(cG, t);
          fillKv(u);
          if (cfg.isFp8()) {
            Value blk0 = lowerIndex(kvLoop.getInductionVar());
            setBlockScale(blk0);
          }
          Value descK = stageDesc(kRing, u, descK0, lay.kBytes);
          ringOp<RingConsumerWaitOp>(kRing, u);
          Value zeroS = qa ? FragmentZeroOp::create(b, loc, fragS) : Value();
          NVVM::WgmmaFenceAlignedOp::create(b, loc);
          Value sa = issueS(descK, zeroS);
          sa = wgmmaWait(0, sa);
          ringOp<RingConsumerReleaseOp>(kRing, u);
          Value scores = scoresOf(sa);
          auto sm = softmaxStep(
              scores, m, l, threshold ? *threshold : 0.0);
          // Rounded right after the exponentials (the conversions issue
          // in their latency's shadow); FP8's with two consumer
          // warpgroups after the previous P V's wait, straight into P's
          // registers, which that wgmma reads until then (rounded before,
          // the e4m3 pairs are packed into them after the wait: 16 PRMT a
          // 128-key block). With three (160 registers a thread) P's f32
          // values live too long: 160-key tiles spill.
          const bool truncAfterWait = cfg.isFp8() && cfg.consumers() == 2;
          auto truncP = [&]() -> Value {
            return TruncOp::create(b, loc, fragP, sm.getP());
          };
          Value a = truncAfterWait ? Value() : truncP();
          auto rescaled = [&]() -> Value {
            return ScaleRowsOp::create(b, loc, acc, sm.getAlpha());
          };
          Value oacc;
          if (threshold) {
            // O *= alpha only if a row of the warpgroup raised its max:
            // after the first blocks, almost never. The branch matters to
            // the pipelined loop too: ptxas hoists a wgmma.wait_group above
            // independent arithmetic (it does not model the stall) but not
            // across a branch, so the wait for the previous block's P V,
            // which hopper-overlap puts at O's first use in each arm, stays
            // after the softmax.
            Value any = warpgroupAny(sm.getRaised());
            oacc = ifElse(
                       any, TypeRange{fragO},
                       [&]() -> SmallVector<Value> { return {rescaled()}; },
                       [&]() -> SmallVector<Value> { return {acc}; })
                       .getResult(0);
          } else {
            oacc = rescaled();
          }
          if (truncAfterWait)
            a = truncP();
          Value descV = stageDesc(pvRing, u, descV0, pvBytes);
          ringOp<RingConsumerWaitOp>(pvRing, u);
          NVVM::WgmmaFenceAlignedOp::create(b, loc);
          Value o = issuePV(a, descV, oacc);
          o = wgmmaWait(0, o);
          ringOp<RingConsumerReleaseOp>(pvRing, u);
          Value yields[] = {sm.getMNew(), sm.getLNew(), o};
          scf::YieldOp::create(b, loc, yields);
        }
        // The last S of the tile has retired: Q may be overwritten
        // (hopper-overlap puts the last block's P V after this, at O's
        // first use: it does not read Q).
        SmallVector<Value> yields = {lp.getResult(0), lp.getResult(1),
                                     lp.getResult(2)};
        releaseQ(yields);
        return yields;
      },
      [&]() -> SmallVector<Value> {
        SmallVector<Value> coordsZ;
        releaseQ(coordsZ);
        // No block: the state as filled.
        Value mz = stateInit(0, fragRows);
        Value lz = stateInit(1, fragRows);
        Value zo = stateInit(2, fragO);
        SmallVector<Value> yields = {mz, lz, zo};
        yields.append(coordsZ);
        return yields;
      });

  if (cfg.persistent) {
    // The tile's coordinates read again (not kept live in registers across
    // the mainloop), before Q's release or, if Q is released after the O
    // store, here.
    TileCoords c = coordsThroughIf ? TileCoords{res.getResult(3),
                                                res.getResult(4),
                                                res.getResult(5), Value()}
                                   : readCoords(cq.k, cq.slot);
    m0 = c.m0, head = c.head, bidx = c.bidx;
  }
  Value oFinal = res.getResult(2);
  if (cfg.isFp8()) {
    Value vd = FragmentFillOp::create(b, loc, fragRows, vDescale);
    oFinal = ScaleRowsOp::create(b, loc, oFinal, vd);
  }
  epilogue(res.getResult(0), res.getResult(1), oFinal,
           TileCoords{m0, head, bidx, split}, sq, cq.k);
  if (cfg.persistent) {
    closeClaimLoop(bin<arith::AddIOp>(cG, nblk));
    if (cfg.isFp8())
      endOfTiles(tileLoop.getResult(1));
  }
  closeSequenceGuard(live);
  if (cfg.oStore() == KernelConfig::OStore::tma)
    drainBulkReads(ltid); // the last O store's
}

void KernelBuilder::body() {
  // ==== roles: warpgroup 0 = TMA producer, warpgroups 1.. = consumers ====
  Value smem = LLVM::AddressOfOp::create(b, loc, smemPtrT, "attn_smem");
  smemBase = smem;
  // the pipeline rings in shared memory. Q is each CTA's own (no
  // multicast): its consumers alone release it.
  const int64_t consumerThreads = 128 * cfg.consumers();
  RingType qT = ringType(cfg.qBuffers, lay.qBytes, lay.qOff, lay.qFull,
                         lay.qEmpty, consumerThreads, 1);
  RingType kT = ringType(cfg.stages, lay.kBytes, lay.kOff, lay.kFull,
                         lay.kEmpty, kvEmptyCount(), cfg.clusterM,
                         kvProducers());
  // (FP8: V's consumers are the transposer warps)
  const int64_t vArrivals =
      cfg.isFp8() ? 32 * cfg.transposeWarps : kvEmptyCount();
  RingType vT = ringType(cfg.stages, lay.vBytes, lay.vOff, lay.vFull,
                         lay.vEmpty, vArrivals, cfg.clusterM, kvProducers());
  qRing = RingCreateOp::create(b, loc, qT, smem);
  kRing = RingCreateOp::create(b, loc, kT, smem);
  vRing = RingCreateOp::create(b, loc, vT, smem);
  SmallVector<Value> rings = {qRing, kRing, vRing};
  if (cfg.isFp8()) {
    RingType vtT = ringType(cfg.stages, lay.vtBytes, lay.vtOff, lay.vtFull,
                            lay.vtEmpty, kvEmptyCount(), 1);
    vtRing = RingCreateOp::create(b, loc, vtT, smem);
    rings.push_back(vtRing);
  }
  Value tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
  // work: tiles of (m-block, q head, batch); CTA c takes tiles c, c +
  // gridDim.x, ... (a full grid runs one tile per CTA, a persistent grid
  // loops)
  Value cta = NVVM::BlockIdXOp::create(b, loc, i32T);

  // ---- mbarrier init (one thread), then CTA barrier ----
  if (cfg.persistent) {
    Value p = smemPtr(smem, lay.tileSlots);
    tileSlotAddr = ptrToI32(p);
  }
  Value isT0 = cmpi(CmpIPredicate::eq, tid, i32(0));
  ifThen(isT0, [&] {
    setUp(smem, rings, {"mapQ", "mapK", "mapV", "mapO"});
    if (cfg.isFp8() && cfg.persistent)
      for (int64_t st = 0; st < cfg.stages; ++st)
        LLVM::StoreOp::create(b, loc, i32(0),
                              smemPtr(smem, lay.vEnd + 4 * st));
  });
  if (cfg.clusterM == 2)
    clusterSync();
  else
    NVVM::Barrier0Op::create(b, loc);

  auto ws = WarpSpecializeOp::create(
      b, loc, static_cast<uint64_t>(producerRegs(cfg)),
      static_cast<uint64_t>(consumerRegs(cfg)),
      static_cast<uint64_t>(cfg.consumers()));
  {
    OpBuilder::InsertionGuard g(b);
    // ================= producer warpgroup =================
    b.createBlock(&ws.getProducer());
    // (hopper-warp-specialize builds the producer thread from the
    // consumers' ring fills)
    if (cfg.isFp8())
      onProducerWarps(kTransposeFirstWarp, kTransposeLoopWarps,
                      [&](Value warp) {
                        // (warp 0, when it transposes, is worker 0)
                        Value worker = warp;
                        if (cfg.transposeWarps > kTransposeLoopWarps)
                          worker = bin<arith::AddIOp>(warp, i32(1));
                        transposer(cta, worker);
                      });
    WarpSpecializeOp::ensureTerminator(ws.getProducer(), b, loc);
    // ================= consumer warpgroups =================
    Block *cb = b.createBlock(&ws.getConsumer(), {}, {i32T}, {loc});
    consumer = cb->getArgument(0);
    consumers(tid, cta);
    WarpSpecializeOp::ensureTerminator(ws.getConsumer(), b, loc);
  }
  // With ping-pong, hopper-pingpong puts the two consumers' wgmma issue
  // windows in turns.
  if (cfg.pingpong)
    ws->setAttr(kPingPongAttr, b.getUnitAttr());
  if (cfg.clusterM == 2)
    clusterSync();
  gpu::ReturnOp::create(b, loc);
}

gpu::GPUFuncOp KernelBuilder::build(gpu::GPUModuleOp m) {
  // The parameters as the ABI spells them (runtime/include/fa3rt_abi.def).
  gpu::GPUFuncOp fn =
      openKernel(m, cfg.name, kKernelParams, cfg.threads(), cfg.ctasPerSm);
  if (cfg.clusterM == 2)
    fn->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                b.getDenseI32ArrayAttr({2, 1, 1}));
  body();
  closeKernel(fn);
  return fn;
}

gpu::GPUFuncOp fa3::hopper::buildKernel(OpBuilder &b, Location loc,
                                        gpu::GPUModuleOp module,
                                        const KernelConfig &cfg,
                                        const TiledCell &cell) {
  OpBuilder::InsertionGuard g(b);
  KernelBuilder kb(b, loc, cfg, cell);
  return kb.build(module);
}
