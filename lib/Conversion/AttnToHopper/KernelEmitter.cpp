//===- KernelEmitter.cpp - the FA3-style Hopper kernel body ---------------===//
//
// The kernel is written as MLIR text in the hopper/gpu/nvvm/llvm/arith/scf
// dialects and parsed by the pass (issue 12 replaces this text with passes,
// step by step). The hopper ops carry the roles, the named barriers, the
// pipeline rings with their TMA loads, and the consumers' math on register
// fragments (wgmma, the online-softmax step, the row rescale), which
// convert-hopper-to-nvvm unrolls into registers; the tile scheduling and
// the epilogue are still NVVM here. The structure and every encoding were
// validated on an H200 (docs/hopper-prototype-notes.md): fragment layout,
// descriptors, phases.
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
    et = cfg.dtype;
    fragS = "!hopper.frag<64x" + std::to_string(cfg.blockN) + "xf32>";
    fragP = "!hopper.frag<64x" + std::to_string(cfg.blockN) + "x" + et + ">";
    fragO = "!hopper.frag<64x" + std::to_string(cfg.headDim) + "xf32>";
    fragRows = "!hopper.frag<64xf32>";
  }

  std::string module(const std::string &moduleName);

private:
  const KernelConfig &cfg;
  SmemLayout lay;
  int64_t nchunk;
  std::string et;
  // A consumer warpgroup's fragments: S (64 x block_n), P as the register A
  // operand of P V, O (64 x head dim), and one value per row.
  std::string fragS, fragP, fragO, fragRows;
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
  /// A float literal that MLIR's parser takes back exactly.
  static std::string f32Text(double v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << llvm::format("%.17g", v);
    if (s.find_first_of(".eEn") == std::string::npos)
      s += ".0";
    return s;
  }
  std::string f32(double v) { return cst(f32Text(v), "f32"); }
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




  std::string ext64(const std::string &v) {
    return op("arith.extui " + v + " : i32 to i64");
  }



  // The named barriers are hopper ops (a kind and a consumer index; their
  // ids are assigned by the dialect). Ping-pong's turns are a pass of their
  // own (hopper-pingpong).
  /// This consumer warpgroup's index.
  std::string consumer;
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
  struct Ring {
    std::string value, type; // the SSA value and its type alias
  };
  Ring qRing, kRing, vRing;
  /// `hopper.ring.<verb> %ring[u]<extra> : !type`.
  void ringOp(const char *verb, const Ring &r, const std::string &u,
              const std::string &extra = "") {
    e(std::string("hopper.ring.") + verb + " " + r.value + "[" + u + "]" +
      extra + " : " + r.type);
  }
  /// Slot u's stage index in ring r.
  std::string ringStage(const Ring &r, const std::string &u,
                        const std::string &hint = "st") {
    return op("hopper.ring.stage " + r.value + "[" + u + "] : " + r.type, hint);
  }
  /// One TMA box of `map` at `coords` into slot u's stage of r, `offset`
  /// bytes into the stage (and, with multicast, into the peer CTA's ring).
  void tmaLoad(const char *map, const Strs &coords, const Ring &r,
               const std::string &u, const std::string &offset,
               bool multicast) {
    e(std::string("hopper.tma_load ") + map + "[" + join(coords) + "] into " +
      r.value + "[" + u + "] at " + offset + (multicast ? " multicast 3" : "") +
      " : " + r.type);
  }
  /// The ring types, as aliases at the top of the module.
  std::string ringTypes() const {
    const int64_t consumerThreads = 128 * cfg.consumers();
    auto ring = [](const char *alias, int64_t stages, int64_t stageBytes,
                   int64_t data, int64_t full, int64_t empty, int64_t arrivals,
                   int64_t cluster) {
      return std::string(alias) + " = !hopper.ring<stages = " +
             std::to_string(stages) + ", stage_bytes = " +
             std::to_string(stageBytes) + ", data = " + std::to_string(data) +
             ", full = " + std::to_string(full) + ", empty = " +
             std::to_string(empty) + ", arrivals = " + std::to_string(arrivals) +
             ", cluster = " + std::to_string(cluster) + ">\n";
    };
    // Q is each CTA's own (no multicast): its consumers alone release it.
    return ring("!qring", cfg.qBuffers, lay.qBytes, lay.qOff, lay.qFull,
                lay.qEmpty, consumerThreads, 1) +
           ring("!kring", cfg.stages, lay.kvBytes, lay.kOff, lay.kFull,
                lay.kEmpty, kvEmptyCount(), cfg.clusterM) +
           ring("!vring", cfg.stages, lay.kvBytes, lay.vOff, lay.vFull,
                lay.vEmpty, kvEmptyCount(), cfg.clusterM);
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

  /// Tile k's use of the Q ring: slot k (buffer k % qBuffers; the ring ops
  /// take k itself), and what the kernel keeps per Q buffer beside the
  /// ring: the published-tile slot and, for the consumers' S = Q K^T
  /// descriptors (`withOffset`), the buffer's byte offset in the Q ring's
  /// data (stage * qBytes).
  struct QSlot {
    std::string k, slot, offBytes;
  };
  QSlot qSlot(const std::string &k, bool withOffset = false) {
    QSlot q;
    q.k = k;
    if (cfg.qBuffers == 1) {
      q.slot = tileSlotAddr;
      q.offBytes = i32(0);
      return q;
    }
    std::string b = ringStage(qRing, k, "qbuf");
    if (cfg.persistent)
      q.slot = bin("addi", tileSlotAddr, bin("muli", b, i32(16)), "i32", "slotaddr");
    if (withOffset)
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
      ringOp("consumer_wait", qRing, q.k);
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
    std::string c = fresh("coords");
    e(c + ":3 = hopper.tile_coords " + tile + " in " + numM + ", %Hq block_m " +
      std::to_string(cfg.blockM) + (cfg.longestFirst ? " longest_first" : ""));
    return TileCoords{c + "#0", c + "#1", c + "#2"};
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

  // --- kernel pieces --------------------------------------------------------
  std::string descBase(const std::string &smem, const std::string &offI32,
                       int64_t constPart);
  /// The wgmma descriptor of K or V (ring r, first stage's descriptor
  /// desc0) in slot u's stage.
  std::string stageDesc(const Ring &r, const std::string &u,
                        const std::string &desc0, const char *hint);
  /// Persistent CTAs reload Q into the buffer the O store reads: the
  /// consumers free Q only once that store has read it.
  bool qFreedAfterStore() const { return cfg.persistent && lay.oInQ; }
  /// A tile's epilogue in this consumer warpgroup, as hopper ops on the
  /// mainloop's fragments (SSA names): `m` and `l` the rows' running max
  /// and the thread's partial row sums (!hopper.frag<64xf32>), `o` the
  /// accumulator (!hopper.frag<64xDxf32>). `c` is the tile; `qK` this tile's
  /// Q ring slot, released after the O store where O is staged in Q's
  /// buffer (qFreedAfterStore). Uses `consumer` and `smemBase`.
  void epilogue(const std::string &m, const std::string &l,
                const std::string &o, const TileCoords &c,
                const std::string &qK);
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


std::string Emitter::descBase(const std::string &smem, const std::string &offI32,
                              int64_t constPart) {
  std::string a = op("llvm.ptrtoint " + smemPtr(smem, offI32) +
                     " : !llvm.ptr<3> to i32");
  a = bin("andi", a, i32(0x3FFFF));
  a = bin("shrui", a, i32(4));
  a = ext64(a);
  return bin("ori", a, i64(constPart), "i64", "desc");
}

std::string Emitter::stageDesc(const Ring &r, const std::string &u,
                               const std::string &desc0, const char *hint) {
  std::string st = ringStage(r, u);
  std::string sd = ext64(bin("muli", st, i32(lay.kvBytes >> 4)));
  return bin("addi", desc0, sd, "i64", hint);
}

void Emitter::epilogue(const std::string &m, const std::string &l,
                       const std::string &o, const TileCoords &c,
                       const std::string &qK) {
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
      ringOp("consumer_release", qRing, qK);
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
  comment("==== roles: warpgroup 0 = TMA producer, warpgroups 1.." +
          std::to_string(cfg.consumers()) + " = consumers ====");
  std::string smem = op("llvm.mlir.addressof @attn_smem : !llvm.ptr<3>", "smem");
  smemBase = smem;
  comment("the pipeline rings in shared memory (their types at the top of the module)");
  qRing = {op("hopper.ring.create " + smem + " : !qring", "qring"), "!qring"};
  kRing = {op("hopper.ring.create " + smem + " : !kring", "kring"), "!kring"};
  vRing = {op("hopper.ring.create " + smem + " : !vring", "vring"), "!vring"};
  std::string tid = op("nvvm.read.ptx.sreg.tid.x : i32", "tid");
  comment("work: tiles of (m-block, q head, batch); CTA c takes tiles c, c + "
          "gridDim.x, ... (a full grid runs one tile per CTA, a persistent "
          "grid loops)");
  std::string cta = op("nvvm.read.ptx.sreg.ctaid.x : i32", "cta");
  // The tile grid, computed in each role: a value computed before the
  // role split would live across the producer's setmaxnreg (24 registers)
  // and ptxas would spill it there. (The opaque copy of Sq keeps LLVM from
  // merging the two roles' copies back above the split.)
  std::string numM, tiles;
  auto tileGrid = [&] {
    std::string g = fresh("grid");
    e(g + ":2 = hopper.tile_grid %Sq, %Hq, %B block_m " +
      std::to_string(cfg.blockM) + (cfg.clusterM == 2 ? " pairs" : ""));
    numM = g + "#0";
    tiles = g + "#1";
  };

  comment("---- mbarrier init (one thread), then CTA barrier ----");
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
  for (const Ring *r : {&qRing, &kRing, &vRing})
    e("hopper.ring.init " + r->value + " : " + r->type);
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
    ringOp("producer_acquire", qRing, q.k);
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
    ringOp("producer_commit", qRing, q.k, " tx " + std::to_string(lay.qBytes));
    for (int64_t c = 0; c < nchunk; ++c)
      tmaLoad("%mapQ", {i32(c * kChunk), tl.head, tl.m0, tl.bidx}, qRing, q.k,
              i32(c * cfg.blockM * kSwizzleBytes), /*multicast=*/false);
    comment("K/V rings, continued across tiles: ring slot u = g + t for kv "
            "block t of the tile");
    // The loop runs over the ring slots themselves (g .. g + nblk): the
    // bound is then also the next tile's g, one value fewer to keep in the
    // producer's 24 registers.
    std::string gEnd = bin("addi", pG, tl.nblk, "i32", "gend");
    std::string blk0 = bin("subi", tl.lo, pG, "i32", "blk0");
    e("scf.for %pu = " + pG + " to " + gEnd + " step " + i32(1) + " : i32 {");
    ++ind;
    {
      std::string kvrow = bin("muli", bin("addi", blk0, "%pu"), i32(cfg.blockN));
      struct Load {
        const Ring *ring;
        const char *tm;
      } loads[2] = {{&kRing, "%mapK"}, {&vRing, "%mapV"}};
      for (const Load &ld : loads) {
        ringOp("producer_acquire", *ld.ring, "%pu");
        // The whole tile arrives here (with multicast, half from the peer).
        ringOp("producer_commit", *ld.ring, "%pu",
               " tx " + std::to_string(lay.kvBytes));
        if (cfg.clusterM == 1) {
          for (int64_t c = 0; c < nchunk; ++c)
            tmaLoad(ld.tm, {i32(c * kChunk), hkv, kvrow, tl.bidx}, *ld.ring,
                    "%pu", i32(c * cfg.blockN * kSwizzleBytes),
                    /*multicast=*/false);
          continue;
        }
        comment("boxes 2j + rank, multicast into both CTAs of the cluster");
        std::string rank = clusterRank();
        for (int64_t j = 0; j < nchunk / 2; ++j) {
          // (Each emitted op a local of its own: the emission order must
          // not depend on the order in which C++ evaluates arguments.)
          std::string c = bin("addi", rank, i32(2 * j));
          std::string box = bin("muli", c, i32(cfg.blockN * kSwizzleBytes));
          std::string col = bin("muli", c, i32(kChunk));
          tmaLoad(ld.tm, {col, hkv, kvrow, tl.bidx}, *ld.ring, "%pu", box,
                  /*multicast=*/true);
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
      next = op("hopper.tile_next " + pTile + " static", "next");
    } else if (cfg.persistent) {
      // Claimed once this tile's loads are issued, i.e. about when the CTA
      // can start it: claiming at the start of a tile would reserve work for
      // a CTA that is busy for the whole (causal: long) tile.
      comment("claim the next tile now that this one's loads are issued");
      next = op("hopper.tile_next " + pTile +
                    " dynamic counter %tileCounter : !llvm.ptr<1>",
                "next");
    }
    closeTileLoop(next, pK, gEnd);
  }
  if (cfg.persistent) {
    comment("no tile left: tell the consumers (id = tiles, no load)");
    std::string k = "%ploop#1";
    QSlot q = qSlot(k);
    ringOp("producer_acquire", qRing, q.k);
    storeWords4(q.slot, {tiles, i32(0), i32(0), i32(0)});
    ringOp("producer_commit", qRing, q.k, " tx 0");
  }
  if (cfg.persistent && cfg.clusterM == 1) {
    comment("the last CTA to finish fetching resets the counters for the next launch");
    e("hopper.tile_counter_reset %tileCounter : !llvm.ptr<1>");
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
  // Per tile (set inside the tile loop below; the helpers capture them).
  std::string m0, head, bidx, lo, ilo, ihi, nblk, wgRow0;
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
  // The scores of block `blk`: softcap, then the mask on boundary blocks
  // (the interior ones see every column).
  auto scoresOf = [&](const std::string &sacc, const std::string &blk) {
    std::string sc = sacc;
    if (cfg.softcap > 0)
      sc = op("hopper.softcap " + sc + ", " + pre + " : " + fragS, "s");
    std::string bnd = boundary(blk);
    std::string ms = fresh("msk");
    e(ms + " = scf.if " + bnd + " -> (" + fragS + ") {");
    ++ind;
    std::string col0 = bin("muli", blk, i32(cfg.blockN), "i32", "col0");
    std::string mk = op("hopper.mask " + sc + " rows " + wgRow0 + " cols " +
                            col0 + " visible @" + cfg.visibleColsFn +
                            "(%Sq, %Skv)" +
                            (cfg.leftBounded ? " left_bounded" : "") + " : " +
                            fragS,
                        "s");
    e("scf.yield " + mk + " : " + fragS);
    --ind;
    e("} else {");
    e("  scf.yield " + sc + " : " + fragS);
    e("}");
    return ms;
  };

  consumer = cw;
  tileGrid();
  auto [cTile, cK, cG] = openTileLoop(/*producer=*/false, cta, tiles);
  // this tile's Q ring slot, buffer and published slot
  QSlot cq = qSlot(cK, /*withOffset=*/true);
  {
    comment(cfg.persistent ? "this tile as the producer decoded it"
                           : "this CTA's tile");
    Tile tl = schedule(cfg.persistent ? readCoords(cq.slot) : coords(cTile, numM));
    m0 = tl.m0, head = tl.head, bidx = tl.bidx, lo = tl.lo, ilo = tl.ilo,
    ihi = tl.ihi, nblk = tl.nblk;
    wgRow0 = bin("addi", m0, bin("muli", cw, i32(64)), "i32", "wgrow");
  }
  if (!cfg.persistent) {
    comment("wait for this tile's Q");
    ringOp("consumer_wait", qRing, cq.k);
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
  // Mainloop state: row max m and the thread's partial row sums l (one
  // value per row), the O accumulator, and P of the last block (16-bit, the
  // register A operand of its P V product).
  std::string rt = fragRows + ", " + fragRows + ", " + fragO;
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
    ringOp("consumer_release", qRing, cq.k);
  };
  auto issueS = [&](const std::string &descK) {
    return op("hopper.wgmma.ss " + descQ + ", " + descK + " k " +
                  std::to_string(cfg.headDim) + " boxes " +
                  std::to_string(cfg.blockM * kSwizzleBytes) + ", " +
                  std::to_string(cfg.blockN * kSwizzleBytes) + " : " + et +
                  " -> " + fragS,
              "sacc");
  };
  auto issuePV = [&](const std::string &pa, const std::string &descV,
                     const std::string &oacc) {
    return op("hopper.wgmma.rs " + pa + ", " + descV + ", " + oacc + " : " +
                  fragP + ", " + fragO,
              "oacc");
  };
  auto wgmmaWait = [&](int pending, const std::string &frag,
                       const std::string &type) {
    return op("hopper.wgmma.wait " + std::to_string(pending) + ", " + frag +
                  " : " + type,
              "ready");
  };
  std::string res = fresh("res");
  std::string nz = cmpi("sgt", nblk, i32(0));
  e(res + ":" + (coordsThroughIf ? "6" : "3") + " = scf.if " + nz + " -> (" +
    rtIf + ") {");
  ++ind;
  comment("prologue: first visited block");
  std::string descK = stageDesc(kRing, cG, descK0, "descK");
  ringOp("consumer_wait", kRing, cG);
  e("nvvm.wgmma.fence.aligned");
  std::string sacc = issueS(descK);
  sacc = wgmmaWait(0, sacc, fragS);
  ringOp("consumer_release", kRing, cG);
  std::string sm0 = fresh("sm");
  e(sm0 + ":5 = hopper.softmax_step " + scoresOf(sacc, lo) + " scale " + sl2 +
    " : " + fragS + ", " + fragRows);
  std::string a0 = op("hopper.trunc " + sm0 + "#0 : " + fragS + " to " + fragP, "pa");
  std::string o0 = op("hopper.zero : " + fragO, "ozero");
  std::string lp = fresh("lp");
  e(lp + ":4 = scf.for %t = " + i32(1) + " to " + nblk + " step " + i32(1) +
    " iter_args(%m = " + sm0 + "#1, %l = " + sm0 + "#2, %acc = " + o0 +
    ", %pa = " + a0 + ") -> (" + rt + ", " + fragP + ") : i32 {");
  ++ind;
  {
    // K of slot u (block t), V of slot u - 1 (block t - 1).
    std::string u = bin("addi", cG, "%t", "i32", "slot");
    std::string descK = stageDesc(kRing, u, descK0, "descK");
    std::string uPrev = bin("subi", u, i32(1));
    std::string descV = stageDesc(vRing, uPrev, descV0, "descV");
    // Both waits before the fence: a branch inside the wgmma window makes
    // ptxas serialise it.
    ringOp("consumer_wait", kRing, u);
    ringOp("consumer_wait", vRing, uPrev);
    e("nvvm.wgmma.fence.aligned");
    std::string sa = issueS(descK);
    std::string o = issuePV("%pa", descV, "%acc");
    sa = wgmmaWait(1, sa, fragS);
    ringOp("consumer_release", kRing, u);
    std::string sm = fresh("sm");
    e(sm + ":5 = hopper.softmax_step " + scoresOf(sa, blockOf("%t")) +
      " scale " + sl2 + " state(%m, %l)" +
      (cfg.lazyRescale ? " threshold " + f32Text(cfg.rescaleThreshold) : "") +
      " : " + fragS + ", " + fragRows);
    // Rounded before the wait, beside the exponentials (the MUFU pipe is
    // the softmax's bottleneck: the conversions issue in its shadow).
    std::string a = op("hopper.trunc " + sm + "#0 : " + fragS + " to " + fragP, "pa");
    // Wait for P_{t-1} V_{t-1}, then O *= alpha. ptxas hoists a
    // wgmma.wait_group above independent arithmetic (it does not model the
    // stall), which would make the softmax wait for the P V wgmmas; a
    // branch is a boundary it does not schedule across, so with lazy
    // rescaling the wait sits in both arms of the rescale branch.
    auto rescaled = [&](const std::string &acc) {
      return op("hopper.scale_rows " + acc + ", " + sm + "#3 : " + fragO +
                    ", " + fragRows,
                "oacc");
    };
    std::string oacc;
    if (cfg.lazyRescale) {
      comment("O *= alpha only if a row of the warpgroup raised its max: "
              "after the first blocks, almost never");
      std::string any = warpgroupAny(sm + "#4");
      oacc = fresh("scaled");
      e(oacc + " = scf.if " + any + " -> (" + fragO + ") {");
      ++ind;
      e("scf.yield " + rescaled(wgmmaWait(0, o, fragO)) + " : " + fragO);
      --ind;
      e("} else {");
      ++ind;
      e("scf.yield " + wgmmaWait(0, o, fragO) + " : " + fragO);
      --ind;
      e("}");
    } else {
      comment("O *= alpha (after the P V wgmmas retired)");
      oacc = rescaled(wgmmaWait(0, o, fragO));
    }
    ringOp("consumer_release", vRing, uPrev);
    e("scf.yield " + sm + "#1, " + sm + "#2, " + oacc + ", " + a + " : " + rt +
      ", " + fragP);
  }
  --ind;
  e("}");
  std::string coordsNz, coordsZ;
  if (!qFreedAfterStore())
    comment("the last S of the tile has retired: Q may be overwritten");
  releaseQ(coordsNz);
  comment("tail: O += P_{n-1} V_{n-1}");
  {
    std::string last = bin("subi", bin("addi", cG, nblk), i32(1));
    std::string descV = stageDesc(vRing, last, descV0, "descV");
    ringOp("consumer_wait", vRing, last);
    e("nvvm.wgmma.fence.aligned");
    std::string o = issuePV(lp + "#3", descV, lp + "#2");
    o = wgmmaWait(0, o, fragO);
    ringOp("consumer_release", vRing, last);
    e("scf.yield " + lp + "#0, " + lp + "#1, " + o + coordsNz + " : " + rtIf);
  }
  --ind;
  e("} else {");
  ++ind;
  releaseQ(coordsZ);
  std::string mz = op("hopper.fill " + ninf + " : f32 to " + fragRows, "mzero");
  std::string lz = op("hopper.zero : " + fragRows, "lzero");
  std::string zo = op("hopper.zero : " + fragO, "ozero");
  e("scf.yield " + mz + ", " + lz + ", " + zo + coordsZ + " : " + rtIf);
  --ind;
  e("}");

  if (cfg.persistent) {
    // The tile's coordinates read again (not kept live in registers across
    // the mainloop), before Q's release or, if Q is released after the O
    // store, here.
    TileCoords c = coordsThroughIf
                       ? TileCoords{res + "#3", res + "#4", res + "#5"}
                       : readCoords(cq.slot);
    m0 = c.m0, head = c.head, bidx = c.bidx;
  }
  epilogue(res + "#0", res + "#1", res + "#2", TileCoords{m0, head, bidx}, cq.k);
  closeTileLoop("", cK, cfg.persistent ? bin("addi", cG, nblk) : "");
  if (cfg.tmaStore) {
    comment("shared memory must outlive the last O store's reads");
    e("scf.if " + cmpi("eq", ltid, i32(0)) + " {");
    e("  nvvm.cp.async.bulk.wait_group 0 {read}");
    e("}");
  }
  --ind;
  // With ping-pong, hopper-pingpong puts the two consumers' wgmma issue
  // windows in turns.
  e(cfg.pingpong ? "} {hopper.pingpong}" : "}");
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
  os << ringTypes();
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
