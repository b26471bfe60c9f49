//===- KernelBuilder.h - the FA3-style Hopper kernel body -------*- C++ -*-===//
//
// Builds the hopper-level body of a warp-specialised FlashAttention forward
// kernel (gpu.func) for one configuration. The structure follows FA3:
//
//   warpgroup 0   producer: setmaxnreg down; one thread issues TMA loads of Q
//                 once per tile (two Q buffers for persistent CTAs where they
//                 fit: the next tile's Q loads during this one) and of K/V
//                 blocks into `stages`-deep shared-memory rings guarded by
//                 mbarrier full/empty pairs (phase bits): hopper.ring ops,
//                 whose lowering derives stages, phases and addresses;
//   warpgroups 1+ consumers (64 query rows each): setmaxnreg up; S = Q K^T by
//                 wgmma (SS), online softmax on the accumulator fragment
//                 (quad shuffles, exp2), P kept in registers, O += P V by
//                 wgmma with A from registers (RS, inline PTX); S of block j
//                 is in flight with P V of block j-1 (intra-warpgroup
//                 overlap); epilogue O / l and LSE, O staged through
//                 shared memory (stmatrix) and written by a TMA store.
//
// The structure is the configuration's; the consumers' per-block math is
// the tile program of attn-tile's form lowered (TiledCell: its loop over
// kv blocks, index arithmetic, step, state and finalize). The schedule
// (kv-block range, boundary blocks) and the mask bounds are not re-derived
// here: the kernel calls device functions that the pass builds from
// attn.kv_range and the shared visibility builder.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_KERNELBUILDER_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_KERNELBUILDER_H

#include "fa3/Dialect/Hopper/IR/HopperLimits.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace fa3::hopper {

struct KernelConfig {
  std::string name;        // gpu.func symbol
  std::string dtype;       // "bf16" or "f16": q, k, v and o; "e4m3": q, k,
                           // v f8E4M3FN with descales, o bf16
  int64_t headDim = 128;   // D of q and k
  int64_t headDimV = 128;  // Dv of v and o
  int64_t blockM = 128;    // query rows per CTA (64 per consumer warpgroup)
  int64_t blockN = 128;    // kv rows per pipeline stage
  int64_t stages = 2;      // depth of the K/V ring
  double softcap = 0.0;    // 0 = off
  bool pingpong = true;    // named-barrier turns between consumer warpgroups
  bool longestFirst = false; // launch m-blocks in reverse: set exactly for
                             // right-bounded (causal) masks
  bool persistent = false; // CTAs loop over tiles from a dynamic scheduler
  int64_t qBuffers = 1;    // Q tiles in shared memory: 2 lets a persistent
                           // CTA load the next tile's Q during this tile
  bool tmaStore = true;    // O via shared memory (oStore), else 4-byte stores
  bool lazyRescale = true; // O *= alpha only in warpgroups where a row
                           // raised its max (a branch); else every kv block
  double rescaleThreshold = 8.0; // log2 units: with lazyRescale a row's max is
                           // raised only when a block exceeds it by more
  std::string kvRangeFn;   // device func: (row0, Sq, Skv) -> (lo, hi, ilo, ihi)
  std::string visibleColsFn; // device func: (row, Sq, Skv) -> (lo, hi), the
                             // visible columns lo <= col < hi
  bool leftBounded = false;  // the mask has a lower column bound (window)
  int64_t clusterM = 1;      // CTAs per cluster: 2 = m-block pairs sharing
                             // each K/V tile by TMA multicast (full mask only)
  bool varlen = false;       // a packed variable-length batch: tiles are
                             // (m-block, q head, sequence), each sequence's
                             // rows read from cu_seqlens (checkSupported:
                             // no cluster)
  bool splitKv = false;      // flash-decoding: numSplits CTAs per tile, each
                             // a run of its kv blocks; with numSplits > 1
                             // they store f32 partial O and LSE, which
                             // <name>_combine merges (fa3rt_abi.def)
  bool packGqa = false;      // a tile's rows are (query, q head) pairs of
                             // one kv head, query-major: a decoding step
                             // reads each kv head's K and V once
  int64_t ctasPerSm = 1;     // CTAs resident on an SM together (2: each
                             // has half the registers and shared memory;
                             // checkSupported: one consumer warpgroup)
  int64_t minSeqlenQ = 0;    // chosen for calls with at least this many
                             // query rows (0: any); a launch fact only
  int64_t transposeWarps = 3; // FP8: V's transposer warps (4: warp 0 too,
                             // hopper-producer-warp-transpose)
  bool pagedKv = false;      // a packed batch's k and v also through a
                             // launch-time page table (its pages in order
                             // are the packed rows); one CTA per tile

  int64_t consumers() const { return blockM / 64; }
  /// FP8 head dim 128: S = Q K^T takes Q as its register A operand, loaded
  /// once a tile (hopper.load_shared), instead of reading Q's 8 KiB from
  /// shared memory again for each kv block (bench/NOTES.md, Log, "Q in
  /// registers"): 16 registers a thread. Not at 256 (32 beside O's 128),
  /// nor with kv tiles of 224 keys (12 spill instructions in the loop);
  /// at 64 it measured equal (0.99-1.01).
  bool qInRegisters() const { return isFp8() && headDim == 128 && blockN <= 192; }
  /// How O leaves the kernel: 4-byte stores from the registers, or staged
  /// in shared memory (tmaStore) and stored from there by TMA, or, in a
  /// persistent packed batch's kernel, copied out by the consumers' threads
  /// in 16-byte units: a TMA box could cross a sequence's end, and the
  /// branch between a TMA store and direct stores for a sequence's last
  /// rows broke that kernel's steady-state wgmma batch (chooseConfig,
  /// bench/NOTES.md, Variable lengths).
  enum class OStore { direct, tma, staged };
  OStore oStore() const {
    if (!tmaStore)
      return OStore::direct;
    return varlen && persistent ? OStore::staged : OStore::tma;
  }
  /// FP8: q, k, v are e4m3, o bf16. V is transposed in shared memory by
  /// the producer warpgroup's other warps (FP8 wgmma reads both operands
  /// K-major), into a ring of its own.
  bool isFp8() const { return dtype == "e4m3"; }
  /// Bytes of one q/k/v element; of one o element.
  int64_t elemBytes() const { return isFp8() ? 1 : 2; }
  int64_t outBytes() const { return 2; }
  /// Columns of one TMA box of q/k/v: a 128-byte swizzle row.
  int64_t boxCols() const { return 128 / elemBytes(); }
  /// The widths of the tiles in shared memory and registers: D and Dv
  /// rounded up to whole 64-column TMA boxes (128-byte swizzle rows). Head
  /// dim 96 is a 128-column tile whose last 32 columns TMA fills with zeros
  /// on load and clips on store: S = Q K^T issues only the k-steps of
  /// the first 96 columns; P V computes 128 columns (bench/NOTES.md, Head
  /// dim 96).
  /// (FP8: whole 128-column boxes.)
  int64_t tileD() const { return (headDim + boxCols() - 1) / boxCols() * boxCols(); }
  int64_t tileDv() const { return (headDimV + boxCols() - 1) / boxCols() * boxCols(); }
  /// The width of O (its fragment and staging buffer) and, in FP8, of V
  /// transposed: the value tile's (tileDv), except that FP8 needs only
  /// Dv rounded up to 64 columns (a bf16 TMA box of O) where V's 8-bit
  /// box is 128 wide. At head dim 64 the transposer and P V then skip the
  /// 64 columns that TMA filled with zeros.
  int64_t oCols() const {
    return isFp8() ? (headDimV + 63) / 64 * 64 : tileDv();
  }
  int64_t threads() const { return 128 * (1 + consumers()); }
  /// Whether a paged kernel's producer warps (the decoding kernel's, a
  /// paged packed batch's) copy pages of fewer rows than a tile
  /// (hopper.copy_paged_tile): its passes of 32 lanes copy whole rows, so
  /// a K and a V row are a power of two of 16-byte pieces up to 32 (not
  /// head dim 192's 24: TMA boxes there) and block_n is whole 32-row
  /// groups.
  bool copiesSmallPages() const {
    auto rowFits = [&](int64_t cols) {
      const int64_t pieces = cols * elemBytes() / 16;
      return pieces <= 32 && llvm::isPowerOf2_64(pieces);
    };
    return (splitKv || pagedKv) && blockN % 32 == 0 && rowFits(tileD()) &&
           rowFits(tileDv());
  }
  /// The producer warps that copy small pages: all four, as
  /// FlashAttention-3 (a warp's lanes fetch about 2 TB/s, bench/NOTES.md),
  /// FP8's too where they are also V's four transposers (each slot one
  /// fill behind their copies: hopper-producer-warp-transpose), else warp
  /// 0 alone beside the transposer's warps 1 .. 3.
  int64_t copyWarps() const {
    return isFp8() && transposeWarps != 4 ? 1 : 4;
  }
  /// The most rows of a page the runtime should copy rather than box (facts
  /// `copy_rows`; 0: its default, 16). FP8 decoding with four copying
  /// warps: every page smaller than the tile, since its transposers wait
  /// behind each fill's page walk where pages go by boxes (H100, B 16 x 16k
  /// keys: pages of 32 / 64 rows copied 0.96 / 0.97 of the contiguous
  /// cache, boxed 0.71 / 0.92; bench/NOTES.md, Log).
  int64_t copyRows() const {
    return copiesSmallPages() && isFp8() && copyWarps() == 4 ? blockN / 2 : 0;
  }
};

/// One kernel parameter: its name (also the SSA name in the kernel), MLIR
/// type, and, for one passed by value, its bytes and alignment (0: a scalar
/// or pointer), in launch order, from the single definition of the ABI that
/// the runtime and the Python package read too (runtime/include/fa3rt_abi.def).
struct KernelParam {
  const char *name;
  const char *mlirType;
  int64_t valueBytes;
  int64_t valueAlign;
};
inline constexpr KernelParam kKernelParams[] = {
#define FA3RT_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align,  \
                           meaning)                                            \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};

/// The backward kernel's parameters, likewise (FA3RT_BWD_KERNEL_PARAM).
inline constexpr KernelParam kGradKernelParams[] = {
#define FA3RT_BWD_KERNEL_PARAM(name, c_type, mlir_type, value_bytes,          \
                               value_align, meaning)                           \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};

/// The backward's element-wise kernels' parameters, likewise
/// (FA3RT_BWD_PRE_PARAM, FA3RT_BWD_POST_PARAM).
inline constexpr KernelParam kGradPreParams[] = {
#define FA3RT_BWD_PRE_PARAM(name, c_type, mlir_type, value_bytes, value_align, \
                            meaning)                                           \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};
inline constexpr KernelParam kGradPostParams[] = {
#define FA3RT_BWD_POST_PARAM(name, c_type, mlir_type, value_bytes,            \
                             value_align, meaning)                             \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};
/// Their block size.
inline constexpr int64_t kGradAuxThreads = FA3RT_BWD_AUX_THREADS;
/// dQaccum's tiles: the backward's queries a step (fa3rt_abi.def).
inline constexpr int64_t kGradDqRows = FA3RT_BWD_DQ_ROWS;

/// The decoding kernel's <kernel>_combine (FA3RT_FWD_COMBINE_PARAM) and its
/// block size.
inline constexpr KernelParam kSplitCombineParams[] = {
#define FA3RT_FWD_COMBINE_PARAM(name, c_type, mlir_type, value_bytes,         \
                                value_align, meaning)                          \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};
inline constexpr int64_t kSplitCombineThreads = FA3RT_FWD_COMBINE_THREADS;

/// Its <kernel>_append (FA3RT_FWD_APPEND_PARAM) and block size.
inline constexpr KernelParam kCacheAppendParams[] = {
#define FA3RT_FWD_APPEND_PARAM(name, c_type, mlir_type, value_bytes,          \
                               value_align, meaning)                           \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};
inline constexpr int64_t kCacheAppendThreads = FA3RT_FWD_APPEND_THREADS;

/// The FP8 kernels' <kernel>_quantize (FA3RT_FP8_QUANTIZE_PARAM), its rows
/// a CTA and threads a column.
inline constexpr KernelParam kQuantizeParams[] = {
#define FA3RT_FP8_QUANTIZE_PARAM(name, c_type, mlir_type, value_bytes,        \
                                 value_align, meaning)                         \
  {#name, mlir_type, value_bytes, value_align},
#include "fa3rt_abi.def"
};
inline constexpr int64_t kQuantizeRows = FA3RT_FP8_QUANTIZE_ROWS;
inline constexpr int64_t kQuantizeThreadsPerCol =
    FA3RT_FP8_QUANTIZE_THREADS_PER_COL;

/// The launch-facts keys the runtime reads, and whether it requires them
/// (the same definition).
struct FactsKey {
  const char *key;
  bool required;
};
inline constexpr FactsKey kFactsKeys[] = {
#define FA3RT_FACTS_KEY(key, field, type, required, lo, hi, step, max, range)   \
  {#key, required != 0},
#include "fa3rt_abi.def"
};

/// Shared-memory layout of a configuration (bytes from a 1024-aligned base).
struct SmemLayout {
  int64_t qOff, kOff, vOff, oOff, total;
  int64_t qBytes, kBytes, vBytes, oBytes;
  // FP8: V transposed (Dv rows of block_n bytes), one per K/V stage, and
  // its full barriers (the transposer's arrive)
  int64_t vtOff = 0, vtBytes = 0, vtFull = 0, vtEmpty = 0;
  // O staging buffer: its own region where it fits, else Q's (a tile's Q is
  // dead once its last S = Q K^T has retired).
  bool oInQ;
  // mbarriers (8 bytes each): Q full/empty per Q buffer, then per stage K/V
  // full/empty.
  int64_t qFull, qEmpty, kFull, vFull, kEmpty, vEmpty;
  // persistent: per Q buffer, the words the producer publishes with the
  // tile's Q (tileSlotBytes each): the decoded tile {tile, m0, head,
  // batch}; in a packed batch also its sequence's bounds {q0, sq, k0, skv},
  // so that the consumers start a tile without reading cu_seqlens
  int64_t tileSlots;
  int64_t tileSlotBytes = 0;
  // FP8 persistent: the producer's end flags for the V transposer, a word
  // per stage of V's ring: 1 once the stage's next slot carries no tile.
  // One per stage, not one word, so that writing it is ordered after every
  // read of it (the transposer reads a stage's flag before it releases the
  // stage, the producer writes it after acquiring the stage again).
  int64_t vEnd = 0;
};
SmemLayout computeSmemLayout(const KernelConfig &cfg);


/// Returns an empty string if the configuration is supported, else why not.
std::string checkSupported(const KernelConfig &cfg);

/// A tile program's step as its matcher found it (TiledCell.h): the step's
/// masked and unmasked forms (attn.tile_update / attn.tile_grad_update;
/// one of them absent without attn-tile's boundary split) and the split's
/// condition, which picks the masked one (null without the split).
struct TiledStep {
  mlir::Operation *masked = nullptr;
  mlir::Operation *unmasked = nullptr;
  mlir::Value boundary;
  /// The step's attributes and operands (both forms agree on them).
  mlir::Operation *any() const { return unmasked ? unmasked : masked; }
};

/// One tile's program in attn-tile's form, from which the consumers'
/// mainloop and epilogue are lowered (matchTiledCell, TiledCell.h, checks
/// this shape): the state buffers (row max, row sum, accumulator)
/// filled with constants, the scf.for over the kv blocks [lo, hi) of
/// attn.kv_range, whose body is index arithmetic and one step per block
/// (an attn.tile_update, or attn-tile's boundary split: an scf.if between
/// the step's masked and unmasked forms), and attn.tile_finalize.
struct TiledCell {
  mlir::Operation *range = nullptr;    // attn.kv_range
  mlir::Operation *kvLoop = nullptr;   // scf.for over its blocks
  TiledStep step;                      // attn.tile_update's forms
  mlir::Operation *finalize = nullptr; // attn.tile_finalize
  /// The bits of the f32 constants that the row max, the row sums and the
  /// accumulator start from: -inf, 0, 0 (as attn-tile writes them; the
  /// matcher takes no other, the kernel's row sums being partial per
  /// thread and FP8's O scaled after the loop).
  std::array<uint32_t, 3> stateInit = {0xFF800000u, 0, 0};
};

/// The lazy-rescale threshold of an attn.tile_update: its rescale_threshold
/// where above 0, else none (exact).
std::optional<double> lazyThreshold(mlir::Operation *tileUpdate);

/// Builds the kernel into `module` (at its end, with `b`'s builder state
/// restored): the dynamic shared-memory global @attn_smem and the gpu.func,
/// whose ops carry `loc`. The kernel's structure (roles, rings, scheduler,
/// stores) is the configuration's; its per-tile math is `cell` lowered.
/// The device functions named in the config are added to that gpu.module
/// by the caller.
mlir::gpu::GPUFuncOp buildKernel(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::gpu::GPUModuleOp module,
                                 const KernelConfig &cfg,
                                 const TiledCell &cell);

} // namespace fa3::hopper

#endif
