//===- KernelEmitter.cpp - the FA3-style Hopper kernel body ---------------===//
//
// The kernel is written as MLIR text in the gpu/nvvm/llvm/arith/scf dialects
// and parsed by the pass. The fragment code is fully unrolled (one SSA value
// per accumulator register), which is what the register allocator and the
// wgmma instructions need; text keeps that unrolled code readable here.
// The structure and every encoding below were validated on an H200
// (docs/hopper-prototype-notes.md): fragment layout, descriptors, phases.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"
#include "fa3/Conversion/HopperSupport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cctype>
#include <map>
#include <tuple>
#include <vector>

using namespace fa3::hopper;

namespace {
constexpr double kLog2e = 1.4426950408889634;
constexpr const char *kNegInf = "0xFF800000";
constexpr int64_t kSwizzleBytes = 128; // 128B swizzle: a box row is 128 bytes
constexpr int64_t kElemBytes = 2;      // bf16 / f16
constexpr int64_t kChunk = kSwizzleBytes / kElemBytes; // 64 elements per box
constexpr int64_t kKStep = 16;                          // wgmma K for 16-bit
constexpr int64_t kProducerRegs = 24;
/// Registers per consumer thread after setmaxnreg: the CTA's 64K registers
/// less the producer's, split over the consumer warpgroups (a multiple of
/// 8): 240 for two, 160 for three (as FA3).
int64_t consumerRegs(const KernelConfig &cfg) {
  int64_t perThread = (65536 / 128 - kProducerRegs) / cfg.consumers();
  return std::min<int64_t>(240, perThread / 8 * 8);
}

using Strs = std::vector<std::string>;

std::string join(const Strs &v, const char *sep = ", ") {
  return llvm::join(v, sep);
}
std::string repeat(const std::string &s, int64_t n, const char *sep = ", ") {
  return join(Strs(n, s), sep);
}

/// wgmma shared-memory descriptor constant part: LBO, SBO, 128B swizzle.
int64_t descConst(int64_t lbo, int64_t sbo) {
  uint64_t v = (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
               (uint64_t(1) << 62);
  return static_cast<int64_t>(v);
}

class Emitter {
public:
  explicit Emitter(const KernelConfig &cfg) : cfg(cfg) {
    // The pass switches ping-pong off unless there are two consumers.
    assert((!cfg.pingpong || cfg.consumers() == 2) &&
           "ping-pong alternates between two consumer warpgroups");
    lay = computeSmemLayout(cfg);
    nchunk = cfg.headDim / kChunk;
    nacc = cfg.blockN / 2;
    naccO = cfg.headDim / 2;
    accT = "!f32x" + std::to_string(nacc);
    accOT = "!f32x" + std::to_string(naccO);
    et = cfg.dtype;
  }

  std::string module(const std::string &moduleName);

private:
  const KernelConfig &cfg;
  SmemLayout lay;
  int64_t nchunk, nacc, naccO;
  std::string accT, accOT, et;
  Strs lines;
  struct Constant {
    std::string name, line;
  };
  std::map<std::string, Constant> consts; // by type:literal
  int n = 0, ind = 2;

  // --- text helpers -------------------------------------------------------
  std::string fresh(const std::string &hint = "v") {
    return "%" + hint + std::to_string(++n);
  }
  void e(const std::string &s) { lines.push_back(std::string(2 * ind, ' ') + s); }
  void comment(const std::string &s) { e("// " + s); }
  std::string op(const std::string &rhs, const std::string &hint = "v") {
    std::string r = fresh(hint);
    e(r + " = " + rhs);
    return r;
  }
  // Constants are named after their value and printed in key order at the
  // top of the kernel, so the order in which the emitter first asks for
  // them (which can differ between compilers where two requests share one
  // expression) does not change the IR.
  std::string cst(const std::string &lit, const std::string &ty) {
    std::string key = ty + ":" + lit;
    auto it = consts.find(key);
    if (it != consts.end())
      return it->second.name;
    std::string name = "%c_" + ty + "_";
    for (char ch : lit)
      name += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ||
                      ch == '-'
                  ? ch
                  : '_';
    consts[key] = {name, name + " = arith.constant " + lit + " : " + ty};
    return name;
  }
  std::string i32(int64_t v) { return cst(std::to_string(v), "i32"); }
  std::string i64(int64_t v) { return cst(std::to_string(v), "i64"); }
  std::string f32(double v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << llvm::format("%.17g", v);
    if (s.find_first_of(".eEn") == std::string::npos)
      s += ".0";
    return cst(s, "f32");
  }
  std::string f32lit(const char *hex) { return cst(hex, "f32"); }
  std::string bin(const std::string &opn, const std::string &a,
                  const std::string &b, const std::string &ty = "i32",
                  const std::string &hint = "v") {
    return op("arith." + opn + " " + a + ", " + b + " : " + ty, hint);
  }
  std::string cmpi(const std::string &pred, const std::string &a,
                   const std::string &b, const std::string &ty = "i32") {
    return op("arith.cmpi " + pred + ", " + a + ", " + b + " : " + ty, "p");
  }
  std::string cmpf(const std::string &pred, const std::string &a,
                   const std::string &b) {
    return op("arith.cmpf " + pred + ", " + a + ", " + b + " : f32", "p");
  }
  std::string select(const std::string &c, const std::string &a,
                     const std::string &b, const std::string &ty) {
    return op("arith.select " + c + ", " + a + ", " + b + " : " + ty);
  }
  std::string smemPtr(const std::string &base, int64_t off) {
    return op("llvm.getelementptr " + base + "[" + std::to_string(off) +
                  "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8",
              "sp");
  }
  std::string smemPtr(const std::string &base, const std::string &off) {
    return op("llvm.getelementptr " + base + "[" + off +
                  "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
              "sp");
  }
  std::string gptr(const std::string &base, const std::string &off64) {
    return op("llvm.getelementptr " + base + "[" + off64 +
                  "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8",
              "gp");
  }
  std::string ex2(const std::string &x) {
    // ex2.approx.ftz.f32 (math.exp2 would give the non-ftz variant).
    return op("llvm.call_intrinsic \"llvm.nvvm.ex2.approx.ftz.f\"(" + x +
                  ") : (f32) -> f32",
              "x");
  }
  // LLVM intrinsics rather than arith/math ops: those lower to libdevice
  // calls on NVVM, and the kernel should not need libdevice.
  std::string maxf(const std::string &a, const std::string &b) {
    return op("llvm.intr.maxnum(" + a + ", " + b + ") : (f32, f32) -> f32", "mx");
  }
  std::string fma(const std::string &a, const std::string &b,
                  const std::string &c) {
    return op("llvm.intr.fma(" + a + ", " + b + ", " + c +
                  ") : (f32, f32, f32) -> f32",
              "fma");
  }
  std::string tanhApprox(const std::string &x) {
    return op("llvm.inline_asm asm_dialect = att \"tanh.approx.f32 $0, $1;\", "
              "\"=f,f\" " + x + " : (f32) -> f32",
              "th");
  }
  std::string shflXor(const std::string &x, int64_t off) {
    return op("nvvm.shfl.sync bfly " + i32(-1) + ", " + x + ", " + i32(off) +
                  ", " + i32(31) + " : f32 -> f32",
              "sh");
  }
  void mbarWait(const std::string &bar, const std::string &parity) {
    e("nvvm.mbarrier.try_wait.parity " + bar + ", " + parity + ", " +
      i32(10000000) + " : !llvm.ptr<3>, i32, i32");
  }
  std::string extract(const std::string &st, int64_t i, const std::string &ty,
                      const std::string &hint = "x") {
    return op("llvm.extractvalue " + st + "[" + std::to_string(i) + "] : " + ty,
              hint);
  }
  std::string ext64(const std::string &v) {
    return op("arith.extui " + v + " : i32 to i64");
  }
  std::string sext64(const std::string &v) {
    return op("arith.extsi " + v + " : i32 to i64");
  }
  /// Two f32 -> one i32 holding {lo, hi} as 16-bit floats.
  std::string pack2(const std::string &a, const std::string &b) {
    std::string v = op("vector.from_elements " + a + ", " + b + " : vector<2xf32>");
    std::string h = op("arith.truncf " + v + " : vector<2xf32> to vector<2x" +
                       et + ">");
    return op("llvm.bitcast " + h + " : vector<2x" + et + "> to i32", "a");
  }

  // Ping-pong between the two consumer warpgroups (FA3's warp scheduler
  // barriers): a warpgroup issues its wgmmas only after the other one has
  // issued its own, so one's softmax runs while the other's GEMMs do. The
  // named barriers are hopper ops (a kind and a consumer index; their ids
  // are assigned by the dialect): a turn has 256 threads, 128 syncing and
  // 128 arriving.
  /// This consumer warpgroup's index and, with ping-pong, the other's.
  std::string consumer, otherConsumer;
  std::string namedBarrier(const char *verb, const char *kind,
                           const std::string &who, int64_t threads) {
    return std::string("hopper.named_barrier.") + verb + " " + kind + "[" +
           who + "] of " + std::to_string(cfg.consumers()) + " threads " +
           std::to_string(threads);
  }
  /// OR of `pred` over the 128 threads of this consumer warpgroup: the
  /// wgmma wait in the rescale branch is .aligned, so every warp of the
  /// warpgroup must take the same arm.
  std::string warpgroupAny(const std::string &pred) {
    return op("hopper.warpgroup_any " + pred + " in consumer[" + consumer +
                  "] of " + std::to_string(cfg.consumers()),
              "p");
  }
  void turnBegin() {
    if (cfg.pingpong)
      e(namedBarrier("sync", "turn", consumer, 256));
  }
  void turnEnd() {
    if (cfg.pingpong)
      e(namedBarrier("arrive", "turn", otherConsumer, 256));
  }

  // K/V multicast (clusterM 2): the two CTAs of a cluster take m-blocks
  // 2i and 2i + 1 of one head, which read the same K/V blocks; each CTA's
  // producer loads half of every K/V tile's 64-column boxes and multicasts
  // them into both CTAs' ring, so each tile leaves L2 once per pair. A ring
  // stage is then written by both producers: it may be refilled only when
  // the consumers of both CTAs have released it.
  std::string consumerLane, peerRank;
  /// A consumer's release of a K/V ring stage: every consumer thread
  /// arrives on its own CTA's barrier and, in a cluster, lane 0 of each warp
  /// also on the peer CTA's (the empty barriers count consumer threads +
  /// consumer warps). Predicated in the asm, not a branch: the release of K
  /// sits inside the P V wgmma window, which a branch would serialise. The
  /// remote arrive keeps mbarrier.arrive's default .release.cta (as
  /// CUTLASS's cluster barriers do): .release.cluster costs a MEMBAR.GPU.
  void releaseKV(const std::string &bar) {
    e("nvvm.mbarrier.arrive " + bar + " : !llvm.ptr<3>");
    if (cfg.clusterM == 1)
      return;
    std::string a = op("llvm.ptrtoint " + bar + " : !llvm.ptr<3> to i32");
    e("llvm.inline_asm has_side_effects asm_dialect = att \"{\\0A.reg .pred "
      "p;\\0A.reg .b32 r;\\0Asetp.eq.u32 p, $1, 0;\\0Amapa.shared::cluster.u32 "
      "r, $0, $2;\\0A@p mbarrier.arrive.shared::cluster.b64 _, "
      "[r];\\0A}\", \"r,r,r\" " + a + ", " + consumerLane + ", " + peerRank +
      " : (i32, i32, i32) -> ()");
  }
  int64_t kvEmptyCount() const {
    int64_t threads = 128 * cfg.consumers();
    return cfg.clusterM == 1 ? threads : threads + threads / 32;
  }
  /// All threads of the cluster: after the mbarrier init (the peer's
  /// multicast signals this CTA's barriers) and before exit (the peer may
  /// still arrive on this CTA's barriers).
  void clusterSync() {
    e("nvvm.cluster.arrive");
    e("nvvm.cluster.wait");
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
  // batch} (the runtime integer divisions), so that they do not sit on the
  // consumers' path between two tiles: one slot per Q buffer, rewritten
  // once the consumers released that buffer's Q, so they read it after the
  // Q full wait and, for the epilogue, again before they release Q.
  std::string tileSlotAddr; // shared-memory address (i32) of slot 0
  std::string smemBase;     // the dynamic shared memory (!llvm.ptr<3>)

  /// Tile k's Q buffer (k & 1 with two buffers), its barriers, their phase,
  /// and its published-tile slot. With two buffers, each serves every other
  /// tile, so the phase flips every second tile.
  struct QSlot {
    std::string full, empty, ph, slot, offBytes;
  };
  QSlot qSlot(const std::string &k) {
    QSlot q;
    if (cfg.qBuffers == 1) {
      q.full = smemPtr(smemBase, lay.qFull);
      q.empty = smemPtr(smemBase, lay.qEmpty);
      q.ph = bin("andi", k, i32(1), "i32", "qph");
      q.slot = tileSlotAddr;
      q.offBytes = i32(0);
      return q;
    }
    std::string b = bin("andi", k, i32(1), "i32", "qbuf");
    std::string b8 = bin("muli", b, i32(8));
    q.full = smemPtr(smemBase, bin("addi", b8, i32(lay.qFull)));
    q.empty = smemPtr(smemBase, bin("addi", b8, i32(lay.qEmpty)));
    q.ph = bin("andi", bin("shrui", k, i32(1)), i32(1), "i32", "qph");
    if (cfg.persistent)
      q.slot = bin("addi", tileSlotAddr, bin("muli", b, i32(16)), "i32", "slotaddr");
    q.offBytes = bin("muli", b, i32(lay.qBytes), "i32", "qoff");
    return q;
  }
  void storeWords4(const std::string &addr, const Strs &w) {
    // Four scalar stores: a vector store would want four consecutive
    // registers, which the producer's 24 cannot spare.
    for (int q = 0; q < 4; ++q)
      e("llvm.inline_asm has_side_effects asm_dialect = att \"st.shared.u32 "
        "[$0+" + std::to_string(4 * q) + "], $1;\", \"r,r\" " + addr + ", " +
        w[q] + " : (i32, i32) -> ()");
  }
  std::string loadWord(const std::string &addr) {
    std::string w = op("llvm.inline_asm has_side_effects asm_dialect = att "
                       "\"ld.shared.u32 $0, [$1];\", \"=r,r\" " + addr +
                           " : (i32) -> i32",
                       "tile");
    if (cfg.qBuffers == 1)
      return w;
    // Lane 0's value, so that ptxas knows it is warp-uniform: loaded from a
    // slot chosen by tile parity, it cannot tell otherwise, and the ring-slot
    // and wgmma-descriptor math derived from it would move to per-thread
    // registers (an R2UR before every wgmma).
    return op("nvvm.shfl.sync idx " + i32(-1) + ", " + w + ", " + i32(0) + ", " +
                  i32(31) + " : i32 -> i32",
              "tile");
  }

  /// Opens the loop over this CTA's tiles when persistent (carrying the tile
  /// count k, for the Q barriers' phase, and the K/V ring slot g); otherwise
  /// the CTA's one tile is ctaid.x with k = g = 0. Returns (tile, k, g).
  /// Consumers wait for the tile's Q (and with it its id) in the loop
  /// condition.
  std::tuple<std::string, std::string, std::string>
  openTileLoop(bool producer, const std::string &cta, const std::string &tiles) {
    if (!cfg.persistent)
      return {cta, i32(0), i32(0)};
    std::string p = producer ? "%p" : "%c";
    if (producer) {
      e(p + "loop:3 = scf.while (" + p + "t0 = " + cta + ", " + p + "k0 = " +
        i32(0) + ", " + p + "g0 = " + i32(0) +
        ") : (i32, i32, i32) -> (i32, i32, i32) {");
      ++ind;
      e("scf.condition(" + cmpi("slt", p + "t0", tiles) + ") " + p + "t0, " +
        p + "k0, " + p + "g0 : i32, i32, i32");
    } else {
      e(p + "loop:3 = scf.while (" + p + "k0 = " + i32(0) + ", " + p +
        "g0 = " + i32(0) + ") : (i32, i32) -> (i32, i32, i32) {");
      ++ind;
      comment("this tile's Q and id (the producer writes an id >= tiles to stop)");
      QSlot q = qSlot(p + "k0");
      mbarWait(q.full, q.ph);
      std::string t = loadWord(q.slot);
      e("scf.condition(" + cmpi("slt", t, tiles) + ") " + t + ", " + p +
        "k0, " + p + "g0 : i32, i32, i32");
    }
    --ind;
    e("} do {");
    e("^bb0(" + p + "tile: i32, " + p + "k: i32, " + p + "g: i32):");
    ++ind;
    return {p + "tile", p + "k", p + "g"};
  }
  /// Closes openTileLoop's loop: the next tile (producer), its k and ring slot.
  void closeTileLoop(const std::string &next, const std::string &k,
                     const std::string &g1) {
    if (!cfg.persistent)
      return;
    std::string k1 = bin("addi", k, i32(1));
    if (next.empty())
      e("scf.yield " + k1 + ", " + g1 + " : i32, i32");
    else
      e("scf.yield " + next + ", " + k1 + ", " + g1 + " : i32, i32, i32");
    --ind;
    e("}");
  }

  /// Where a tile sits: its first query row, q head and batch.
  struct TileCoords {
    std::string m0, head, bidx;
  };
  TileCoords coords(const std::string &tile, const std::string &numM) {
    TileCoords c;
    // m-blocks fastest: the CTAs running at one time work on the same head,
    // so that head's K/V stays in L2 (heads fastest measured 5-15 % slower:
    // every CTA then streams a different head's K/V). With a right-bounded
    // mask the last m-blocks see the most keys: they come first.
    std::string mb = bin("remui", tile, numM, "i32", "mb");
    if (cfg.longestFirst)
      mb = bin("subi", bin("subi", numM, i32(1)), mb, "i32", "mb");
    std::string rem = bin("divui", tile, numM);
    c.head = bin("remui", rem, "%Hq", "i32", "head");
    c.bidx = bin("divui", rem, "%Hq", "i32", "batch");
    c.m0 = bin("muli", mb, i32(cfg.blockM), "i32", "m0");
    return c;
  }

  /// One tile of work: its coordinates and kv-block schedule.
  struct Tile : TileCoords {
    std::string lo, ilo, ihi, nblk;
  };
  Tile schedule(const TileCoords &c) {
    Tile t;
    static_cast<TileCoords &>(t) = c;
    comment("the schedule of this m-block (attn.kv_range)");
    std::string rng = fresh("range");
    e(rng + ":4 = func.call @" + cfg.kvRangeFn + "(" + t.m0 +
      ", %Sq, %Skv) : (i32, i32, i32) -> (i32, i32, i32, i32)");
    t.lo = rng + "#0";
    t.ilo = rng + "#2";
    t.ihi = rng + "#3";
    t.nblk = bin("subi", rng + "#1", t.lo, "i32", "nblk");
    return t;
  }

  /// The published tile (persistent consumers): words {tile, m0, head,
  /// batch} of the slot at `slot`.
  TileCoords readCoords(const std::string &slot) {
    // Scalar loads: ptxas keeps their values (and the ring-slot arithmetic
    // derived from them) in uniform registers; from a vector load it did
    // not, and every wgmma waited for an R2UR of its descriptor.
    return TileCoords{loadWord(bin("addi", slot, i32(4))),
                      loadWord(bin("addi", slot, i32(8))),
                      loadWord(bin("addi", slot, i32(12)))};
  }

  /// Balances the turns of a tile: consumer 1 opens consumer 0's first
  /// turn (arrive on consumer 0's turn barrier); after the last one,
  /// consumer 0 takes the turn consumer 1 handed over (sync on it).
  void pingpongEdge(const std::string &cw, bool opening) {
    if (!cfg.pingpong)
      return;
    comment(opening ? "ping-pong: consumer 0 issues first (consumer 1 opens its turn)"
                    : "ping-pong: consumer 0 takes the turn consumer 1 handed over last");
    e("scf.if " + cmpi("eq", cw, i32(opening ? 1 : 0)) + " {");
    e("  " + namedBarrier(opening ? "arrive" : "sync", "turn", i32(0), 256));
    e("}");
  }

  // --- kernel pieces --------------------------------------------------------
  std::string rsWgmmaAsm(std::string &constraints);
  std::string descBase(const std::string &smem, const std::string &offI32,
                       int64_t constPart);
  /// K/V ring slot u: stage u % stages (its index), phase (u / stages) & 1,
  /// and the stage's barriers.
  struct Slot {
    std::string index, ph, kfull, vfull, kempty, vempty;
  };
  Slot ringSlot(const std::string &smem, const std::string &u);
  /// A consumer's view of a slot: also the wgmma descriptors of its K and V.
  struct Stage : Slot {
    std::string descK, descV;
  };
  Stage stage(const std::string &smem, const std::string &t,
              const std::string &descK0, const std::string &descV0);
  std::string issueS(const std::string &descQ, const std::string &descK);
  std::string issuePV(std::string oacc, const std::vector<Strs> &a,
                       const std::string &descV);
  std::string fenceStruct(const std::string &st, int64_t n,
                          const std::string &ty);
  Strs maskScores(const Strs &s, const std::string &block,
                  const std::string &isBoundary, const Strs &rows,
                  const std::string &colbase);
  Strs softcapScores(const Strs &s, const std::string &pre);
  struct Softmax {
    Strs m, alpha, p, rowsum;
    std::string raised; // i1: one of this thread's rows raised its max
  };
  Softmax softmax(const Strs &s, const Strs *mold, const std::string &sl2);
  std::vector<Strs> pack(const Strs &p);
  /// Persistent CTAs reload Q into the buffer the O store reads: the
  /// consumers free Q only once that store has read it.
  bool qFreedAfterStore() const { return cfg.persistent && lay.oInQ; }
  /// A tile's epilogue in this consumer warpgroup, as hopper ops on the
  /// mainloop's fragments (SSA names): `m` and `l` the rows' running max
  /// and the thread's partial row sums (!hopper.frag<64xf32>), `o` the
  /// accumulator (!hopper.frag<64xDxf32>). `c` is the tile; `qEmpty` Q's
  /// empty barrier, arrived on after the O store where O is staged in Q's
  /// buffer (qFreedAfterStore). Uses `consumer` and `smemBase`.
  void epilogue(const std::string &m, const std::string &l,
                const std::string &o, const TileCoords &c,
                const std::string &qEmpty);
  std::string body();
};
} // namespace

SmemLayout fa3::hopper::computeSmemLayout(const KernelConfig &cfg) {
  SmemLayout l;
  l.qBytes = cfg.blockM * cfg.headDim * kElemBytes;
  l.kvBytes = cfg.blockN * cfg.headDim * kElemBytes;
  l.oBytes = cfg.tmaStore ? l.qBytes : 0;
  const int64_t nq = cfg.qBuffers;
  l.qOff = 0;
  l.kOff = l.qOff + nq * l.qBytes;
  l.vOff = l.kOff + cfg.stages * l.kvBytes;
  int64_t end = l.vOff + cfg.stages * l.kvBytes;
  // mbarriers (Q full/empty per Q buffer, K/V full/empty per stage), then
  // the published-tile slots, one per Q buffer (persistent)
  const int64_t tail =
      8 * (2 * nq + 4 * cfg.stages) + (cfg.persistent ? 16 * nq : 0);
  l.oInQ = cfg.tmaStore && end + l.oBytes + tail > kMaxDynamicSmem;
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
  l.total = l.qFull + tail;
  return l;
}

std::string fa3::hopper::checkSupported(const KernelConfig &cfg) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (cfg.dtype != "bf16" && cfg.dtype != "f16")
    os << "element type " << cfg.dtype << " (the Hopper kernel takes bf16 or f16)";
  else if (!isSupportedHeadDim(cfg.headDim))
    os << "head dim " << cfg.headDim << " (the Hopper kernel takes "
       << headDimsText() << ")";
  else if (cfg.blockM != 128 && cfg.blockM != 192)
    os << "block-m " << cfg.blockM
       << " (the Hopper kernel uses 128 or 192: two or three consumer "
          "warpgroups of 64 rows)";
  else if (cfg.blockM == 192 && cfg.headDim != 64)
    os << "block-m 192 at head dim " << cfg.headDim
       << " (three consumer warpgroups have 160 registers a thread: too few "
          "for S and an O accumulator of head dim "
       << cfg.headDim << "; block-m 192 takes head dim 64)";
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
  else if (cfg.clusterM == 2 && (cfg.headDim / kChunk) % 2 != 0)
    os << "K/V multicast at head dim " << cfg.headDim
       << " (the two CTAs of a cluster each load half of a K/V tile's "
          "64-column boxes: head dim 128 or 256)";
  else if (computeSmemLayout(cfg).total > kMaxDynamicSmem)
    os << "tiles " << cfg.blockM << "x" << cfg.blockN << " with head dim "
       << cfg.headDim << " need " << computeSmemLayout(cfg).total
       << " bytes of shared memory, more than the " << kMaxDynamicSmem
       << " a Hopper CTA has";
  return why;
}

std::string Emitter::rsWgmmaAsm(std::string &constraints) {
  // wgmma m64nDk16, f32 += {bf16|f16}(registers) * (smem descriptor), B
  // transposed (V is MN-major). Operands: naccO outputs tied to naccO
  // inputs, 4 A registers, the B descriptor, the scale-d flag.
  int64_t a = 2 * naccO;
  Strs d;
  for (int64_t i = 0; i < naccO; ++i)
    d.push_back("$" + std::to_string(i));
  std::string asmText =
      "{\\0A.reg .pred p;\\0Asetp.ne.b32 p, $" + std::to_string(a + 5) +
      ", 0;\\0Awgmma.mma_async.sync.aligned.m64n" +
      std::to_string(cfg.headDim) + "k16.f32." + et + "." + et + " {" +
      join(d) + "}, {$" + std::to_string(a) + ", $" + std::to_string(a + 1) +
      ", $" + std::to_string(a + 2) + ", $" + std::to_string(a + 3) + "}, $" +
      std::to_string(a + 4) + ", p, 1, 1, 1;\\0A}";
  Strs cons(naccO, "=f");
  for (int64_t i = 0; i < naccO; ++i)
    cons.push_back(std::to_string(i));
  for (int i = 0; i < 4; ++i)
    cons.push_back("r");
  cons.push_back("l");
  cons.push_back("n");
  constraints = join(cons, ",");
  return asmText;
}

std::string Emitter::descBase(const std::string &smem, const std::string &offI32,
                              int64_t constPart) {
  std::string a = op("llvm.ptrtoint " + smemPtr(smem, offI32) +
                     " : !llvm.ptr<3> to i32");
  a = bin("andi", a, i32(0x3FFFF));
  a = bin("shrui", a, i32(4));
  a = ext64(a);
  return bin("ori", a, i64(constPart), "i64", "desc");
}

Emitter::Slot Emitter::ringSlot(const std::string &smem, const std::string &u) {
  Slot sl;
  sl.index = bin("remui", u, i32(cfg.stages), "i32", "st");
  sl.ph = bin("andi", bin("divui", u, i32(cfg.stages)), i32(1), "i32", "ph");
  std::string s8 = bin("muli", sl.index, i32(8));
  sl.kfull = smemPtr(smem, bin("addi", s8, i32(lay.kFull)));
  sl.vfull = smemPtr(smem, bin("addi", s8, i32(lay.vFull)));
  sl.kempty = smemPtr(smem, bin("addi", s8, i32(lay.kEmpty)));
  sl.vempty = smemPtr(smem, bin("addi", s8, i32(lay.vEmpty)));
  return sl;
}

Emitter::Stage Emitter::stage(const std::string &smem, const std::string &t,
                              const std::string &descK0,
                              const std::string &descV0) {
  Stage st;
  static_cast<Slot &>(st) = ringSlot(smem, t);
  std::string sd = ext64(bin("muli", st.index, i32(lay.kvBytes >> 4)));
  st.descK = bin("addi", descK0, sd, "i64", "descK");
  st.descV = bin("addi", descV0, sd, "i64", "descV");
  return st;
}

std::string Emitter::issueS(const std::string &descQ, const std::string &descK) {
  std::string acc = op("llvm.mlir.undef : " + accT, "sacc");
  for (int64_t kk = 0; kk < cfg.headDim / kKStep; ++kk) {
    int64_t col = kk * kKStep;
    int64_t qa = (col / kChunk) * (cfg.blockM * kSwizzleBytes) +
                 (col % kChunk) * kElemBytes;
    int64_t kb = (col / kChunk) * (cfg.blockN * kSwizzleBytes) +
                 (col % kChunk) * kElemBytes;
    std::string da = qa ? bin("addi", descQ, i64(qa >> 4), "i64") : descQ;
    std::string db = kb ? bin("addi", descK, i64(kb >> 4), "i64") : descK;
    acc = op("nvvm.wgmma.mma_async " + da + ", " + db + ", " + acc +
                 ", #nvvm.shape<m = 64, n = " + std::to_string(cfg.blockN) +
                 ", k = 16>, D [<f32>, #nvvm.wgmma_scale_out<" +
                 (kk == 0 ? "zero" : "one") + ">], A [<" + et +
                 ">, #nvvm.wgmma_scale_in<one>, <row>], B [<" + et +
                 ">, #nvvm.wgmma_scale_in<one>, <col>] : " + accT + " -> " +
                 accT,
             "sacc");
  }
  e("nvvm.wgmma.commit.group.sync.aligned");
  return acc;
}

std::string Emitter::issuePV(std::string oacc, const std::vector<Strs> &a,
                             const std::string &descV) {
  std::string cons;
  std::string asmText = rsWgmmaAsm(cons);
  Strs types(naccO, "f32");
  for (int64_t kk = 0; kk < cfg.blockN / kKStep; ++kk) {
    int64_t vb = kk * kKStep * kSwizzleBytes;
    std::string db = vb ? bin("addi", descV, i64(vb >> 4), "i64") : descV;
    Strs ins;
    for (int64_t i = 0; i < naccO; ++i)
      ins.push_back(extract(oacc, i, accOT, "oi"));
    oacc = op("llvm.inline_asm has_side_effects asm_dialect = att \"" +
                  asmText + "\", \"" + cons + "\" " + join(ins) + ", " +
                  join(a[kk]) + ", " + db + ", " + i32(1) + " : (" +
                  join(types) + ", i32, i32, i32, i32, i64, i32) -> " + accOT,
              "oacc");
  }
  e("nvvm.wgmma.commit.group.sync.aligned");
  return oacc;
}

std::string Emitter::fenceStruct(const std::string &st, int64_t cnt,
                                 const std::string &ty) {
  // An empty asm that "redefines" every register after wgmma.wait_group, so
  // LLVM cannot move reads of the accumulators into the async window.
  Strs vals, cons(cnt, "=f");
  for (int64_t i = 0; i < cnt; ++i) {
    vals.push_back(extract(st, i, ty, "fv"));
    cons.push_back(std::to_string(i));
  }
  return op("llvm.inline_asm has_side_effects asm_dialect = att \"\", \"" +
                join(cons, ",") + "\" " + join(vals) + " : (" +
                repeat("f32", cnt) + ") -> " + ty,
            "fenced");
}

Strs Emitter::softcapScores(const Strs &s, const std::string &pre) {
  // s = tanh(qk * scale / softcap); the softcap factor (and log2 e) is
  // applied with the softmax scale afterwards.
  Strs out;
  for (const std::string &x : s)
    out.push_back(tanhApprox(bin("mulf", x, pre, "f32")));
  return out;
}

Strs Emitter::maskScores(const Strs &s, const std::string &block,
                         const std::string &isBoundary, const Strs &rows,
                         const std::string &colbase) {
  std::string ms = fresh("msk");
  Strs f32s(nacc, "f32");
  e(ms + ":" + std::to_string(nacc) + " = scf.if " + isBoundary + " -> (" +
    join(f32s) + ") {");
  ++ind;
  // Per row, the visible columns relative to this thread's first one:
  // element (k, e) sits at column cb + 8k + e, a constant offset, so each
  // element costs one compare (two with a window's lower bound) and a select.
  std::string cb = bin("addi", bin("muli", block, i32(cfg.blockN)), colbase);
  Strs loRel, hiRel;
  for (int i = 0; i < 2; ++i) {
    // The bounds are loop-invariant; computed here from an opaque copy of
    // the row, they do not hold registers across the whole mainloop.
    std::string row = op("llvm.inline_asm has_side_effects asm_dialect = att "
                         "\"mov.b32 $0, $1;\", \"=r,r\" " + rows[i] +
                             " : (i32) -> i32", "row");
    std::string b = fresh("cols");
    e(b + ":2 = func.call @" + cfg.visibleColsFn + "(" + row +
      ", %Sq, %Skv) : (i32, i32, i32) -> (i32, i32)");
    loRel.push_back(cfg.leftBounded ? bin("subi", b + "#0", cb) : "");
    hiRel.push_back(bin("subi", b + "#1", cb));
  }
  Strs out;
  for (int64_t idx = 0; idx < nacc; ++idx) {
    int64_t k = idx / 4, i = (idx % 4) / 2, ee = idx % 2;
    std::string dc = i32(8 * k + ee);
    std::string vis = cmpi("sgt", hiRel[i], dc);
    if (cfg.leftBounded)
      vis = op("arith.andi " + vis + ", " + cmpi("sle", loRel[i], dc) + " : i1", "vis");
    out.push_back(select(vis, s[idx], f32lit(kNegInf), "f32"));
  }
  e("scf.yield " + join(out) + " : " + join(f32s));
  --ind;
  e("} else {");
  e("  scf.yield " + join(s) + " : " + join(f32s));
  e("}");
  Strs res;
  for (int64_t i = 0; i < nacc; ++i)
    res.push_back(ms + "#" + std::to_string(i));
  return res;
}

Emitter::Softmax Emitter::softmax(const Strs &s, const Strs *mold,
                                  const std::string &sl2) {
  Softmax r;
  std::string zero = f32(0.0), ninf = f32lit(kNegInf);
  Strs muse, raises;
  for (int i = 0; i < 2; ++i) {
    Strs vals;
    for (int64_t idx = 0; idx < nacc; ++idx)
      if ((idx % 4) / 2 == i)
        vals.push_back(s[idx]);
    while (vals.size() > 1) {
      Strs next;
      for (size_t t = 0; t + 1 < vals.size(); t += 2)
        next.push_back(maxf(vals[t], vals[t + 1]));
      if (vals.size() % 2)
        next.push_back(vals.back());
      vals = next;
    }
    std::string mx = vals[0];
    mx = maxf(mx, shflXor(mx, 1));
    mx = maxf(mx, shflXor(mx, 2));
    std::string mxs = bin("mulf", mx, sl2, "f32");
    std::string mn = mxs, raise;
    if (mold && cfg.lazyRescale) {
      // The reference max only has to bound the scores closely enough
      // that exp2(s - m) <= 2^threshold stays finite in P and the sums;
      // O and l share it, so the result is the same.
      raise = cmpf("ogt", mxs,
                   bin("addf", (*mold)[i], f32(cfg.rescaleThreshold), "f32"));
      mn = select(raise, mxs, (*mold)[i], "f32");
    } else if (mold) {
      mn = maxf((*mold)[i], mxs);
    }
    // A row with no visible key so far keeps m = -inf: exponentiate
    // against 0 then, so that exp2(-inf - -inf) never makes a NaN.
    std::string mu = select(cmpf("oeq", mn, ninf), zero, mn, "f32");
    std::string alpha;
    if (mold) {
      alpha = ex2(bin("subf", (*mold)[i], mu, "f32"));
      if (!raise.empty())
        alpha = select(raise, alpha, f32(1.0), "f32");
    }
    r.alpha.push_back(alpha);
    r.m.push_back(mn);
    muse.push_back(mu);
    raises.push_back(raise);
  }
  if (mold && cfg.lazyRescale)
    r.raised = op("arith.ori " + raises[0] + ", " + raises[1] + " : i1", "p");
  Strs negm = {op("arith.negf " + muse[0] + " : f32"),
               op("arith.negf " + muse[1] + " : f32")};
  for (int64_t idx = 0; idx < nacc; ++idx)
    r.p.push_back(ex2(fma(s[idx], sl2, negm[(idx % 4) / 2])));
  for (int i = 0; i < 2; ++i) {
    Strs vals;
    for (int64_t idx = 0; idx < nacc; ++idx)
      if ((idx % 4) / 2 == i)
        vals.push_back(r.p[idx]);
    while (vals.size() > 1) {
      Strs next;
      for (size_t t = 0; t + 1 < vals.size(); t += 2)
        next.push_back(bin("addf", vals[t], vals[t + 1], "f32"));
      if (vals.size() % 2)
        next.push_back(vals.back());
      vals = next;
    }
    r.rowsum.push_back(vals[0]);
  }
  return r;
}

std::vector<Strs> Emitter::pack(const Strs &p) {
  // The S accumulator layout is the A-from-registers layout of the P V
  // wgmma: k-step kk takes accumulator n8-blocks 2kk and 2kk+1.
  std::vector<Strs> a;
  for (int64_t kk = 0; kk < cfg.blockN / kKStep; ++kk) {
    Strs regs;
    const int64_t blks[4][2] = {{2 * kk, 0}, {2 * kk, 1}, {2 * kk + 1, 0},
                                {2 * kk + 1, 1}};
    for (auto &bi : blks) {
      int64_t base = 4 * bi[0] + 2 * bi[1];
      regs.push_back(pack2(p[base], p[base + 1]));
    }
    a.push_back(regs);
  }
  return a;
}

void Emitter::epilogue(const std::string &m, const std::string &l,
                       const std::string &o, const TileCoords &c,
                       const std::string &qEmpty) {
  comment("---- epilogue: quad-reduce l, O / l, LSE = (m + log2 l) ln 2 ----");
  const std::string rows = "!hopper.frag<64xf32>";
  const std::string fragO =
      "!hopper.frag<64x" + std::to_string(cfg.headDim) + "xf32>";
  std::string fin = fresh("fin");
  e(fin + ":2 = hopper.finalize_rows " + m + ", " + l + " : " + rows);
  const std::string inv = fin + "#0", lse = fin + "#1";
  // This warpgroup's first row of the tile.
  std::string row0 = bin("muli", consumer, i32(64));
  row0 = bin("addi", c.m0, row0, "i32", "row0");
  if (cfg.tmaStore) {
    // A persistent CTA stages the next tile's O in the same buffer: its own
    // buffer must have been read by the previous store (wait_previous); Q's
    // buffer must be read before Q is released to the producer (drain).
    std::string flags;
    if (cfg.persistent && !lay.oInQ)
      flags += " wait_previous";
    if (qFreedAfterStore())
      flags += " drain";
    e("hopper.store_o_tma " + o + ", " + inv + " to %mapO tile(" + c.m0 +
      ", " + c.head + ", " + c.bidx + ") staging " + smemBase + "[" +
      std::to_string(lay.oOff) + "] consumer[" + consumer + "] of " +
      std::to_string(cfg.consumers()) + flags + " : " + fragO + " as " + et);
    if (qFreedAfterStore()) {
      comment("O has left Q's buffer: the producer may load the next Q");
      e("nvvm.mbarrier.arrive " + qEmpty + " : !llvm.ptr<3>");
    }
  } else {
    e("hopper.store_o_direct " + o + ", " + inv +
      " to %O strides(%oStrideB, %oStrideS, %oStrideH) rows " + row0 +
      " head " + c.head + " batch " + c.bidx + " bound %Sq : " + fragO +
      " as " + et);
  }
  e("hopper.store_lse " + lse + " to %LSE rows " + row0 + " head " + c.head +
    " batch " + c.bidx + " heads %Hq bound %Sq : " + rows);
}

std::string Emitter::body() {
  const int64_t consumerThreads = 128 * cfg.consumers();
  comment("==== roles: warpgroup 0 = TMA producer, warpgroups 1.." +
          std::to_string(cfg.consumers()) + " = consumers ====");
  std::string smem = op("llvm.mlir.addressof @attn_smem : !llvm.ptr<3>", "smem");
  std::string tid = op("nvvm.read.ptx.sreg.tid.x : i32", "tid");
  comment("work: tiles of (m-block, q head, batch); CTA c takes tiles c, c + "
          "gridDim.x, ... (a full grid runs one tile per CTA, a persistent "
          "grid loops)");
  std::string cta = op("nvvm.read.ptx.sreg.ctaid.x : i32", "cta");
  std::string ncta = op("nvvm.read.ptx.sreg.nctaid.x : i32", "ncta");
  // The tile grid, computed in each role: a value computed before the
  // role split would live across the producer's setmaxnreg (24 registers)
  // and ptxas would spill it there. (The opaque copy of Sq keeps LLVM from
  // merging the two roles' copies back above the split.)
  std::string numM, tiles;
  auto tileGrid = [&] {
    std::string sq = op("llvm.inline_asm asm_dialect = att \"mov.b32 $0, $1;\", "
                        "\"=r,r\" %Sq : (i32) -> i32", "sq");
    numM = bin("divui", bin("addi", sq, i32(cfg.blockM - 1)), i32(cfg.blockM),
               "i32", "numm");
    if (cfg.clusterM == 2) // pairs of m-blocks; an odd count gets one past Sq
      numM = bin("andi", bin("addi", numM, i32(1)), i32(-2), "i32", "numm");
    tiles = bin("muli", numM, bin("muli", "%Hq", "%B", "i32", "hb"), "i32", "tiles");
  };

  comment("---- mbarrier init (one thread), then CTA barrier ----");
  smemBase = smem;
  if (cfg.persistent)
    tileSlotAddr = op("llvm.ptrtoint " + smemPtr(smem, lay.tileSlots) +
                          " : !llvm.ptr<3> to i32",
                      "tileslot");
  std::string isT0 = cmpi("eq", tid, i32(0));
  e("scf.if " + isT0 + " {");
  ++ind;
  comment("dynamic shared memory must start 1024-aligned (128B swizzle atoms)");
  std::string sa = op("llvm.ptrtoint " + smem + " : !llvm.ptr<3> to i32");
  std::string bad = cmpi("ne", bin("andi", sa, i32(1023)), i32(0));
  e("scf.if " + bad + " {");
  e("  llvm.inline_asm has_side_effects asm_dialect = att \"trap;\", \"\"  : () -> ()");
  e("}");
  for (int64_t b = 0; b < cfg.qBuffers; ++b) {
    e("nvvm.mbarrier.init " + smemPtr(smem, lay.qFull + 8 * b) + ", " + i32(1) +
      " : !llvm.ptr<3>, i32");
    e("nvvm.mbarrier.init " + smemPtr(smem, lay.qEmpty + 8 * b) + ", " +
      i32(consumerThreads) + " : !llvm.ptr<3>, i32");
  }
  for (int64_t s = 0; s < cfg.stages; ++s) {
    e("nvvm.mbarrier.init " + smemPtr(smem, lay.kFull + 8 * s) + ", " + i32(1) +
      " : !llvm.ptr<3>, i32");
    e("nvvm.mbarrier.init " + smemPtr(smem, lay.vFull + 8 * s) + ", " + i32(1) +
      " : !llvm.ptr<3>, i32");
    e("nvvm.mbarrier.init " + smemPtr(smem, lay.kEmpty + 8 * s) + ", " +
      i32(kvEmptyCount()) + " : !llvm.ptr<3>, i32");
    e("nvvm.mbarrier.init " + smemPtr(smem, lay.vEmpty + 8 * s) + ", " +
      i32(kvEmptyCount()) + " : !llvm.ptr<3>, i32");
  }
  e("nvvm.fence.mbarrier.init");
  for (const char *tm : {"%mapQ", "%mapK", "%mapV", "%mapO"})
    e(std::string("nvvm.prefetch tensormap, ") + tm + " : !llvm.ptr");
  --ind;
  e("}");
  if (cfg.clusterM == 2)
    clusterSync();
  else
    e("nvvm.barrier0");

  comment("================= producer warpgroup =================");
  e("hopper.warp_specialize producer regs " + std::to_string(kProducerRegs) +
    " {");
  ++ind;
  e("scf.if " + isT0 + " {");
  ++ind;
  tileGrid();
  std::string grp = bin("divui", "%Hq", "%Hkv", "i32", "grp");
  // The cluster rank is read where it is used (an asm with side effects,
  // which LLVM does not hoist): held across the producer loop, it would be
  // one register more than the producer's 24.
  auto clusterRank = [&] {
    return op("llvm.inline_asm has_side_effects asm_dialect = att \"mov.u32 "
              "$0, %cluster_ctarank;\", \"=r\"  : () -> i32",
              "rank");
  };
  auto [pTile, pK, pG] = openTileLoop(/*producer=*/true, cta, tiles);
  {
    comment(cfg.qBuffers == 2
                ? "Q of this tile into buffer k & 1 once the consumers are done "
                  "with tile k - 2 (they may still be on tile k - 1)"
                : "Q of this tile once the consumers are done with the last one's");
    QSlot q = qSlot(pK);
    mbarWait(q.empty, bin("xori", q.ph, i32(1)));
    // Decoded after the wait: the producer thread has 24 registers, too few
    // to hold the decoded tile across it. The consumers are in the last
    // tile's tail and epilogue meanwhile.
    TileCoords pc = coords(pTile, numM);
    comment("GQA: kv head = q head / (Hq / Hkv)");
    std::string hkv = bin("divui", pc.head, grp, "i32", "hkv");
    Tile tl = schedule(pc);
    if (cfg.persistent)
      storeWords4(q.slot, {pTile, tl.m0, tl.head, tl.bidx});
    comment("Q tile: boxes of [block_m rows][64 cols], coords (d, head, row, batch)");
    e("nvvm.mbarrier.arrive.expect_tx " + q.full + ", " + i32(lay.qBytes) +
      " : !llvm.ptr<3>, i32");
    for (int64_t c = 0; c < nchunk; ++c) {
      std::string dst = op(
          "llvm.addrspacecast " +
              smemPtr(smem, bin("addi", q.offBytes,
                                i32(lay.qOff + c * cfg.blockM * kSwizzleBytes))) +
              " : !llvm.ptr<3> to !llvm.ptr<7>");
      e("nvvm.cp.async.bulk.tensor.shared.cluster.global " + dst + ", %mapQ, " +
        q.full + ", box[" + i32(c * kChunk) + ", " + tl.head + ", " + tl.m0 +
        ", " + tl.bidx + "] : !llvm.ptr<7>, !llvm.ptr");
    }
    comment("K/V ring, continued across tiles: ring slot u = g + t for kv "
            "block t of the tile, stage u % stages, phase (u / stages) & 1; "
            "the producer waits 'empty' with the phase flipped");
    // The loop runs over the ring slots themselves (g .. g + nblk): the
    // bound is then also the next tile's g, one value fewer to keep in the
    // producer's 24 registers.
    std::string gEnd = bin("addi", pG, tl.nblk, "i32", "gend");
    std::string blk0 = bin("subi", tl.lo, pG, "i32", "blk0");
    e("scf.for %pu = " + pG + " to " + gEnd + " step " + i32(1) + " : i32 {");
    ++ind;
    {
      Slot sl = ringSlot(smem, "%pu");
      std::string phx = bin("xori", sl.ph, i32(1));
      std::string kvrow = bin("muli", bin("addi", blk0, "%pu"), i32(cfg.blockN));
      std::string soff = bin("muli", sl.index, i32(lay.kvBytes));
      struct Load {
        std::string empty, full;
        int64_t tileOff;
        const char *tm;
      } loads[2] = {{sl.kempty, sl.kfull, lay.kOff, "%mapK"},
                    {sl.vempty, sl.vfull, lay.vOff, "%mapV"}};
      // One 64-column box of K or V into the ring (and, with multicast,
      // into the peer CTA's ring at the same offset).
      // `col` emits the box's first column after the destination address.
      auto copyBox = [&](const Load &ld, const std::string &off,
                         llvm::function_ref<std::string()> col,
                         const std::string &mcast) {
        std::string dst = op("llvm.addrspacecast " + smemPtr(smem, off) +
                             " : !llvm.ptr<3> to !llvm.ptr<7>");
        e("nvvm.cp.async.bulk.tensor.shared.cluster.global " + dst + ", " +
          ld.tm + ", " + ld.full + ", box[" + col() + ", " + hkv + ", " + kvrow +
          ", " + tl.bidx + "]" + mcast + " : !llvm.ptr<7>, !llvm.ptr");
      };
      for (const Load &ld : loads) {
        mbarWait(ld.empty, phx);
        // The whole tile arrives here (with multicast, half from the peer).
        e("nvvm.mbarrier.arrive.expect_tx " + ld.full + ", " + i32(lay.kvBytes) +
          " : !llvm.ptr<3>, i32");
        // (Offsets as locals: the emission order must not depend on the
        // order in which C++ evaluates arguments.)
        if (cfg.clusterM == 1) {
          for (int64_t c = 0; c < nchunk; ++c) {
            std::string off = bin(
                "addi", soff, i32(ld.tileOff + c * cfg.blockN * kSwizzleBytes));
            copyBox(ld, off, [&] { return i32(c * kChunk); }, "");
          }
          continue;
        }
        comment("boxes 2j + rank, multicast into both CTAs of the cluster");
        std::string rank = clusterRank();
        for (int64_t j = 0; j < nchunk / 2; ++j) {
          std::string c = bin("addi", rank, i32(2 * j));
          std::string tile = bin("addi", soff, i32(ld.tileOff));
          std::string box = bin("muli", c, i32(cfg.blockN * kSwizzleBytes));
          std::string off = bin("addi", tile, box);
          copyBox(ld, off, [&] { return bin("muli", c, i32(kChunk)); },
                  " multicast_mask = " + cst("3", "i16"));
        }
      }
    }
    --ind;
    e("}");
    std::string next;
    if (cfg.persistent && cfg.clusterM == 2) {
      // Static: the two CTAs of a cluster must take the two m-blocks of a
      // pair in step (grid and m-block count are even, so tile and tile +
      // gridDim.x keep their parity). Every full-mask tile costs the same.
      next = bin("addi", pTile, ncta, "i32", "next");
    } else if (cfg.persistent) {
      // Claimed once this tile's loads are issued, i.e. about when the CTA
      // can start it: claiming at the start of a tile would reserve work for
      // a CTA that is busy for the whole (causal: long) tile.
      comment("claim the next tile now that this one's loads are issued");
      std::string got = op("llvm.atomicrmw add %tileCounter, " + i32(1) +
                               " monotonic : !llvm.ptr<1>, i32",
                           "fetched");
      next = bin("addi", got, ncta, "i32", "next");
    }
    closeTileLoop(next, pK, gEnd);
  }
  if (cfg.persistent) {
    comment("no tile left: tell the consumers (id = tiles, no load)");
    std::string k = "%ploop#1";
    QSlot q = qSlot(k);
    mbarWait(q.empty, bin("xori", q.ph, i32(1)));
    storeWords4(q.slot, {tiles, i32(0), i32(0), i32(0)});
    e("nvvm.mbarrier.arrive " + q.full + " : !llvm.ptr<3>");
  }
  if (cfg.persistent && cfg.clusterM == 1) {
    comment("the last CTA to finish fetching resets the counters for the next launch");
    std::string done = op("llvm.getelementptr %tileCounter[1] : (!llvm.ptr<1>) "
                          "-> !llvm.ptr<1>, i32", "done");
    // acq_rel: every CTA's last fetch happens before the reset (LLVM's
    // atomicrmw acq_rel loses the ordering on NVPTX, hence the asm).
    std::string before = op(
        "llvm.inline_asm has_side_effects asm_dialect = att "
        "\"atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;\", \"=r,l,~{memory}\" " +
            done + " : (!llvm.ptr<1>) -> i32",
        "finished");
    e("scf.if " + cmpi("eq", before, bin("subi", ncta, i32(1))) + " {");
    e("  llvm.store " + i32(0) + ", %tileCounter : i32, !llvm.ptr<1>");
    e("  llvm.store " + i32(0) + ", " + done + " : i32, !llvm.ptr<1>");
    e("}");
  }
  --ind;
  e("}");
  --ind;
  comment("================= consumer warpgroups =================");
  std::string cw = "%consumer";
  e("} consumers(" + cw + " of " + std::to_string(cfg.consumers()) +
    ") regs " + std::to_string(consumerRegs(cfg)) + " {");
  ++ind;
  std::string ltid = bin("remui", tid, i32(128), "i32", "ltid");
  std::string warp = bin("divui", ltid, i32(32), "i32", "warp");
  std::string lane = bin("remui", ltid, i32(32), "i32", "lane");
  if (cfg.clusterM == 2) {
    consumerLane = lane;
    peerRank = bin("xori", op("nvvm.read.ptx.sreg.cluster.ctarank : i32", "rank"),
                   i32(1), "i32", "peer");
  }
  std::string quad = bin("divui", lane, i32(4));
  std::string tq = bin("remui", lane, i32(4));
  std::string colbase = bin("muli", tq, i32(2), "i32", "colbase");
  comment("accumulator fragment: rows 16*warp + lane/4 (+8) of the warpgroup's 64, "
          "columns 8k + 2*(lane%4) + {0,1}; register 4k + 2i + e");
  std::string r = bin("muli", cw, i32(64));
  r = bin("addi", r, bin("muli", warp, i32(16)));
  r = bin("addi", r, quad);
  // Per tile (set inside the tile loop below; the helpers capture them).
  std::string m0, head, bidx, lo, ilo, ihi, nblk;
  Strs qrows;
  // Scores reach the softmax in the log2 domain: s * sl2.
  std::string sl2 = "%scaleLog2", pre;
  if (cfg.softcap > 0) {
    pre = bin("mulf", "%scaleLog2", f32(1.0 / (kLog2e * cfg.softcap)), "f32", "pre");
    sl2 = f32(cfg.softcap * kLog2e);
  }

  comment("wgmma smem descriptors: start address >> 4 in bits 0-13, constants in the rest");
  std::string descQ0 = descBase(smem, bin("muli", cw, i32(64 * kSwizzleBytes)),
                               descConst(16, 1024));
  std::string descK0 = descBase(smem, i32(lay.kOff), descConst(16, 1024));
  std::string descV0 =
      descBase(smem, i32(lay.vOff), descConst(cfg.blockN * kSwizzleBytes, 1024));

  auto blockOf = [&](const std::string &t) { return bin("addi", lo, t, "i32", "blk"); };
  auto boundary = [&](const std::string &blk) {
    std::string before = cmpi("slt", blk, ilo);
    std::string after = cmpi("sge", blk, ihi);
    return op("arith.ori " + before + ", " + after + " : i1", "bnd");
  };
  auto scoresOf = [&](const std::string &sacc, const std::string &blk) {
    Strs s;
    for (int64_t i = 0; i < nacc; ++i)
      s.push_back(extract(sacc, i, accT, "s"));
    if (cfg.softcap > 0)
      s = softcapScores(s, pre);
    return maskScores(s, blk, boundary(blk), qrows, colbase);
  };

  consumer = cw;
  if (cfg.pingpong)
    otherConsumer = bin("subi", i32(1), cw, "i32", "othercw");
  tileGrid();
  // Persistent CTAs pass the ping-pong turn on across tiles: each consumer
  // takes as many turns per tile, so consumer 1's last turn of a tile opens
  // consumer 0's first of the next. The turn edges then sit outside the
  // tile loop, and consumer 0 starts its epilogue without waiting for
  // consumer 1's last turn.
  if (cfg.persistent)
    pingpongEdge(cw, /*opening=*/true);
  auto [cTile, cK, cG] = openTileLoop(/*producer=*/false, cta, tiles);
  QSlot cq = qSlot(cK); // this tile's Q buffer, barriers and published slot
  {
    comment(cfg.persistent ? "this tile as the producer decoded it"
                           : "this CTA's tile");
    Tile tl = schedule(cfg.persistent ? readCoords(cq.slot) : coords(cTile, numM));
    m0 = tl.m0, head = tl.head, bidx = tl.bidx, lo = tl.lo, ilo = tl.ilo,
    ihi = tl.ihi, nblk = tl.nblk;
    std::string qrow0 = bin("addi", m0, r, "i32", "qrow");
    qrows = {qrow0, bin("addi", qrow0, i32(8), "i32", "qrow")};
  }
  if (!cfg.persistent)
    pingpongEdge(cw, /*opening=*/true);
  if (!cfg.persistent) {
    comment("wait for this tile's Q");
    mbarWait(cq.full, cq.ph);
  }
  // This tile's Q buffer for the S = Q K^T descriptors.
  std::string descQ = cfg.qBuffers == 1
                          ? descQ0
                          : bin("addi", descQ0,
                                ext64(bin("shrui", cq.offBytes, i32(4))), "i64",
                                "descQ");
  // FA3 intra-warpgroup overlap, software-pipelined by one kv block:
  //   prologue : S_0 = Q K_0^T; softmax(S_0) -> P_0
  //   iter t>=1: issue S_t; issue O += P_{t-1} V_{t-1}; wait(1) -> S_t ready;
  //              release K_t; softmax(S_t) -> P_t, alpha_t (overlaps P V);
  //              wait(0); release V_{t-1}; O *= alpha_t
  //   tail     : O += P_{n-1} V_{n-1}; wait(0); release V_{n-1}
  std::string zero = f32(0.0), ninf = f32lit(kNegInf);
  int64_t na = (cfg.blockN / kKStep) * 4;
  std::string rt = "f32, f32, f32, f32, " + accOT;
  // Persistent: the epilogue's tile coordinates, read from the published
  // slot before Q is released (the producer then rewrites the slot), are
  // results of this scf.if too.
  const bool coordsThroughIf = cfg.persistent && !qFreedAfterStore();
  std::string rtIf = rt + (coordsThroughIf ? ", i32, i32, i32" : "");
  auto releaseQ = [&](std::string &coordsOut) {
    if (qFreedAfterStore())
      return;
    if (coordsThroughIf) {
      TileCoords c = readCoords(cq.slot);
      coordsOut = ", " + c.m0 + ", " + c.head + ", " + c.bidx;
    }
    e("nvvm.mbarrier.arrive " + cq.empty + " : !llvm.ptr<3>");
  };
  std::string res = fresh("res");
  std::string nz = cmpi("sgt", nblk, i32(0));
  e(res + ":" + (coordsThroughIf ? "8" : "5") + " = scf.if " + nz + " -> (" +
    rtIf + ") {");
  ++ind;
  comment("prologue: first visited block");
  Stage st0 = stage(smem, cG, descK0, descV0);
  mbarWait(st0.kfull, st0.ph);
  turnBegin();
  e("nvvm.wgmma.fence.aligned");
  std::string sacc = issueS(descQ, st0.descK);
  turnEnd();
  e("nvvm.wgmma.wait.group.sync.aligned 0");
  sacc = fenceStruct(sacc, nacc, accT);
  releaseKV(st0.kempty);
  Softmax sm0 = softmax(scoresOf(sacc, lo), nullptr, sl2);
  std::vector<Strs> a0 = pack(sm0.p);
  std::string o0 = op("llvm.mlir.zero : " + accOT, "ozero");
  std::string lp = fresh("lp");
  Strs aargs;
  for (int64_t i = 0; i < na; ++i)
    aargs.push_back("%pa" + std::to_string(i) + " = " + a0[i / 4][i % 4]);
  e(lp + ":" + std::to_string(5 + na) + " = scf.for %t = " + i32(1) + " to " +
    nblk + " step " + i32(1) + " iter_args(%m0 = " + sm0.m[0] + ", %m1 = " +
    sm0.m[1] + ", %l0 = " + sm0.rowsum[0] + ", %l1 = " + sm0.rowsum[1] +
    ", %acc = " + o0 + ", " + join(aargs) + ") -> (" + rt + ", " +
    repeat("i32", na) + ") : i32 {");
  ++ind;
  {
    std::string u = bin("addi", cG, "%t", "i32", "slot");
    Stage cur = stage(smem, u, descK0, descV0);
    Stage prv = stage(smem, bin("subi", u, i32(1)), descK0, descV0);
    // Both waits before the fence: a branch inside the wgmma window makes
    // ptxas serialise it.
    mbarWait(cur.kfull, cur.ph);
    mbarWait(prv.vfull, prv.ph);
    turnBegin();
    e("nvvm.wgmma.fence.aligned");
    std::string s = issueS(descQ, cur.descK);
    std::vector<Strs> ain;
    for (int64_t kk = 0; kk < cfg.blockN / kKStep; ++kk) {
      Strs regs;
      for (int rr = 0; rr < 4; ++rr)
        regs.push_back("%pa" + std::to_string(4 * kk + rr));
      ain.push_back(regs);
    }
    std::string o = issuePV("%acc", ain, prv.descV);
    turnEnd();
    e("nvvm.wgmma.wait.group.sync.aligned 1");
    s = fenceStruct(s, nacc, accT);
    releaseKV(cur.kempty);
    Strs mold = {"%m0", "%m1"};
    Softmax sm = softmax(scoresOf(s, blockOf("%t")), &mold, sl2);
    // Packed before the wait, beside the exponentials (the MUFU pipe is the
    // softmax's bottleneck: the conversions issue in its shadow).
    std::vector<Strs> a = pack(sm.p);
    // Wait for P_{t-1} V_{t-1}, then O *= alpha. ptxas hoists a
    // wgmma.wait_group above independent arithmetic (it does not model the
    // stall), which would make the softmax wait for the P V wgmmas; a
    // branch is a boundary it does not schedule across, so with lazy
    // rescaling the wait sits in both arms of the rescale branch.
    auto waitPV = [&] {
      e("nvvm.wgmma.wait.group.sync.aligned 0");
      return fenceStruct(o, naccO, accOT);
    };
    auto rescaled = [&](const std::string &acc) {
      std::string r = op("llvm.mlir.undef : " + accOT, "oacc");
      for (int64_t idx = 0; idx < naccO; ++idx) {
        std::string v = extract(acc, idx, accOT, "o");
        v = bin("mulf", v, sm.alpha[(idx % 4) / 2], "f32");
        r = op("llvm.insertvalue " + v + ", " + r + "[" +
                   std::to_string(idx) + "] : " + accOT,
               "oacc");
      }
      return r;
    };
    std::string oacc;
    if (cfg.lazyRescale) {
      comment("O *= alpha only if a row of the warpgroup raised its max: "
              "after the first blocks, almost never");
      std::string any = warpgroupAny(sm.raised);
      oacc = fresh("scaled");
      e(oacc + " = scf.if " + any + " -> (" + accOT + ") {");
      ++ind;
      e("scf.yield " + rescaled(waitPV()) + " : " + accOT);
      --ind;
      e("} else {");
      ++ind;
      e("scf.yield " + waitPV() + " : " + accOT);
      --ind;
      e("}");
    } else {
      comment("O *= alpha (after the P V wgmmas retired)");
      oacc = rescaled(waitPV());
    }
    releaseKV(prv.vempty);
    Strs ln = {fma("%l0", sm.alpha[0], sm.rowsum[0]),
               fma("%l1", sm.alpha[1], sm.rowsum[1])};
    Strs ys;
    for (int64_t i = 0; i < na; ++i)
      ys.push_back(a[i / 4][i % 4]);
    e("scf.yield " + sm.m[0] + ", " + sm.m[1] + ", " + ln[0] + ", " + ln[1] +
      ", " + oacc + ", " + join(ys) + " : " + rt + ", " + repeat("i32", na));
  }
  --ind;
  e("}");
  std::string coordsNz, coordsZ;
  if (!qFreedAfterStore())
    comment("the last S of the tile has retired: Q may be overwritten");
  releaseQ(coordsNz);
  comment("tail: O += P_{n-1} V_{n-1}");
  {
    Stage last = stage(smem, bin("subi", bin("addi", cG, nblk), i32(1)),
                       descK0, descV0);
    mbarWait(last.vfull, last.ph);
    turnBegin();
    e("nvvm.wgmma.fence.aligned");
    std::vector<Strs> ain;
    for (int64_t kk = 0; kk < cfg.blockN / kKStep; ++kk) {
      Strs regs;
      for (int rr = 0; rr < 4; ++rr)
        regs.push_back(lp + "#" + std::to_string(5 + 4 * kk + rr));
      ain.push_back(regs);
    }
    std::string o = issuePV(lp + "#4", ain, last.descV);
    turnEnd();
    e("nvvm.wgmma.wait.group.sync.aligned 0");
    o = fenceStruct(o, naccO, accOT);
    releaseKV(last.vempty);
    e("scf.yield " + lp + "#0, " + lp + "#1, " + lp + "#2, " + lp + "#3, " +
      o + coordsNz + " : " + rtIf);
  }
  --ind;
  e("} else {");
  ++ind;
  releaseQ(coordsZ);
  std::string zo = op("llvm.mlir.zero : " + accOT, "ozero");
  e("scf.yield " + ninf + ", " + ninf + ", " + zero + ", " + zero + ", " + zo +
    coordsZ + " : " + rtIf);
  --ind;
  e("}");

  if (!cfg.persistent)
    pingpongEdge(cw, /*opening=*/false);
  if (cfg.persistent) {
    // The tile's coordinates read again (not kept live in registers across
    // the mainloop), before Q's release or, if Q is released after the O
    // store, here.
    TileCoords c = coordsThroughIf
                       ? TileCoords{res + "#5", res + "#6", res + "#7"}
                       : readCoords(cq.slot);
    m0 = c.m0, head = c.head, bidx = c.bidx;
  }
  {
    // Until the mainloop yields fragments: its scalars as the fragments'
    // registers (convert-hopper-to-nvvm cancels these casts against its
    // own).
    auto rowsOf = [&](const std::string &r0, const std::string &r1) {
      const std::string st = "!llvm.struct<(f32, f32)>";
      std::string v = op("llvm.mlir.undef : " + st, "rows");
      v = op("llvm.insertvalue " + r0 + ", " + v + "[0] : " + st, "rows");
      v = op("llvm.insertvalue " + r1 + ", " + v + "[1] : " + st, "rows");
      return op("builtin.unrealized_conversion_cast " + v + " : " + st +
                    " to !hopper.frag<64xf32>",
                "rows");
    };
    std::string mf = rowsOf(res + "#0", res + "#1");
    std::string lf = rowsOf(res + "#2", res + "#3");
    std::string of = op("builtin.unrealized_conversion_cast " + res + "#4 : " +
                            accOT + " to !hopper.frag<64x" +
                            std::to_string(cfg.headDim) + "xf32>",
                        "ofrag");
    epilogue(mf, lf, of, TileCoords{m0, head, bidx}, cq.empty);
  }
  closeTileLoop("", cK, cfg.persistent ? bin("addi", cG, nblk) : "");
  if (cfg.persistent)
    pingpongEdge(cw, /*opening=*/false);
  if (cfg.tmaStore) {
    comment("shared memory must outlive the last O store's reads");
    e("scf.if " + cmpi("eq", ltid, i32(0)) + " {");
    e("  nvvm.cp.async.bulk.wait_group 0 {read}");
    e("}");
  }
  --ind;
  e("}");
  if (cfg.clusterM == 2)
    clusterSync();
  e("gpu.return");

  std::string out;
  llvm::raw_string_ostream os(out);
  SmemLayout l = lay;
  os << "  // " << cfg.name << ": FlashAttention forward, " << et
     << " in / f32 accumulate / " << et << " out + f32 LSE, head dim "
     << cfg.headDim << ",\n  //   tiles " << cfg.blockM << " x " << cfg.blockN
     << ", " << cfg.stages << "-stage K/V ring, " << cfg.threads()
     << " threads (1 producer + " << cfg.consumers()
     << " consumer warpgroups); dynamic shared memory " << l.total
     << " bytes.\n";
  os << "  gpu.func @" << cfg.name << "(";
  llvm::interleaveComma(kKernelParams, os, [&](const KernelParam &p) {
    os << "%" << p.name << ": " << p.mlirType;
  });
  os << ") kernel\n"
     << "      attributes {nvvm.maxntid = array<i32: " << cfg.threads()
     << ", 1, 1>, nvvm.minctasm = 1 : i32";
  if (cfg.clusterM == 2)
    os << ", nvvm.cluster_dim = array<i32: 2, 1, 1>";
  os << "} {\n";
  for (const auto &[key, c] : consts)
    os << "    " << c.line << "\n";
  for (const std::string &ln : lines)
    os << ln << "\n";
  os << "  }\n";
  return out;
}

std::string Emitter::module(const std::string &moduleName) {
  std::string func = body();
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "!f32x" << nacc << " = !llvm.struct<(" << repeat("f32", nacc) << ")>\n";
  if (naccO != nacc)
    os << "!f32x" << naccO << " = !llvm.struct<(" << repeat("f32", naccO)
       << ")>\n";
  os << "gpu.module @" << moduleName << " {\n"
     << "  // dynamic shared memory, 1024-aligned (128B swizzle atoms)\n"
     << "  llvm.mlir.global external @attn_smem() {addr_space = 3 : i32, "
        "alignment = 1024 : i64} : !llvm.array<0 x i8>\n"
     << func << "}\n";
  return out;
}

std::string fa3::hopper::emitKernelModule(const KernelConfig &cfg,
                                          const std::string &moduleName) {
  Emitter em(cfg);
  return em.module(moduleName);
}
