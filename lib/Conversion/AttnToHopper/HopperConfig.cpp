//===- HopperConfig.cpp - attn-hopper-config ------------------------------===//
//
// Chooses each attention's Hopper kernel configuration in one table
// (chooseConfig: the measured defaults and the user's overrides) and records
// it on the op as #attn.hopper_config. attn-tile tiles by it and carries it
// to the attn.kv_range of the tiled grid; convert-attn-to-hopper builds the
// kernel and its launch facts from it. Beside the pass: the helpers both
// passes share (HopperConfig.h).
//
//===----------------------------------------------------------------------===//

#include "HopperConfig.h"
#include "fa3/Conversion/HopperSupport.h"
#include "fa3/Conversion/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace fa3 {
#define GEN_PASS_DEF_ATTNHOPPERCONFIG
#include "fa3/Conversion/Passes.h.inc"
} // namespace fa3

using namespace mlir;
using namespace fa3;
using namespace fa3::attn;
using namespace fa3::hopper;

static std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// The innermost (head-dim) stride of a memref must be 1 for TMA.
static bool hasUnitInnerStride(Value memref) {
  auto t = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(t.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

std::string fa3::hopper::checkOperands(Value q, Value k, Value v, Value o) {
  auto qt = cast<MemRefType>(q.getType());
  auto ot = cast<MemRefType>(o.getType());
  Type et = qt.getElementType();
  // The input type first: advice about o would be wrong for an input type
  // the kernel does not take (f8 with a bf16 o used to be told to match).
  if (!et.isBF16() && !et.isF16() && !isa<Float8E4M3FNType>(et))
    return "the Hopper kernel takes bf16, f16 or f8E4M3FN q, k and v, got " +
           typeName(et);
  // FP8 attention writes bf16 (as FlashAttention-3's).
  if (isa<Float8E4M3FNType>(et) && !ot.getElementType().isBF16())
    return "the FP8 kernel writes o in bf16; o is " +
           typeName(ot.getElementType());
  if (!isa<Float8E4M3FNType>(et) && ot.getElementType() != et)
    return "the kernel writes o in the input element type; o is " +
           typeName(ot.getElementType()) + " but q is " + typeName(et);
  for (Value m : {q, k, v, o})
    if (!hasUnitInnerStride(m))
      return "the head dim of every operand must be contiguous (stride 1), "
             "as TMA requires";
  return "";
}

KernelConfig fa3::hopper::attentionFacts(MemRefType q, MemRefType v,
                                         int64_t windowLeft,
                                         int64_t windowRight) {
  KernelConfig cfg;
  Type et = q.getElementType();
  cfg.dtype = isa<Float8E4M3FNType>(et) ? "e4m3" : et.isBF16() ? "bf16" : "f16";
  cfg.headDim = q.getShape().back();
  cfg.headDimV = v.getShape().back();
  cfg.leftBounded = windowLeft >= 0;
  cfg.longestFirst = windowRight >= 0;
  return cfg;
}

void fa3::hopper::applyConfig(HopperConfigAttr config, KernelConfig &cfg) {
  cfg.blockM = config.getBlockM();
  cfg.blockN = config.getBlockN();
  cfg.stages = config.getStages();
  cfg.persistent = config.getPersistent();
  cfg.qBuffers = config.getQBuffers();
  cfg.lazyRescale = config.getLazyRescale();
  cfg.rescaleThreshold = config.getRescaleThreshold().convertToDouble();
  cfg.clusterM = config.getClusterM();
  cfg.pingpong = config.getPingpong();
  cfg.tmaStore = config.getTmaStore();
  cfg.splitKv = config.getSplitKv();
  cfg.packGqa = config.getPackGqa();
  cfg.ctasPerSm = config.getCtasPerSm();
  cfg.minSeqlenQ = config.getMinSeqlenQ();
  cfg.transposeWarps = config.getTransposeWarps();
  cfg.pagedKv = config.getPagedKv();
}

HopperConfigAttr fa3::hopper::recordConfig(MLIRContext *ctx,
                                           const KernelConfig &cfg) {
  return HopperConfigAttr::get(
      ctx, cfg.blockM, cfg.blockN, cfg.stages, cfg.persistent, cfg.qBuffers,
      cfg.lazyRescale, llvm::APFloat(cfg.rescaleThreshold), cfg.clusterM,
      cfg.pingpong, cfg.tmaStore, cfg.splitKv, cfg.packGqa, cfg.ctasPerSm,
      cfg.minSeqlenQ, cfg.transposeWarps, cfg.pagedKv);
}

FailureOr<GradKernelConfig>
fa3::hopper::gradConfig(Value q, Value k, Value v, Value dO, Value dk,
                        Value dv, ArrayRef<int64_t> window, double softcap,
                        bool deterministic, HopperConfigAttr config,
                        std::string &why) {
  // dO stands where the forward has o: of the inputs' type, contiguous.
  why = checkOperands(q, k, v, dO);
  if (why.empty() &&
      isa<Float8E4M3FNType>(cast<MemRefType>(q.getType()).getElementType()))
    why = "FP8 in the backward (the FP8 kernel is a forward)";
  if (why.empty()) {
    Type et = cast<MemRefType>(q.getType()).getElementType();
    for (Value m : {dk, dv})
      if (cast<MemRefType>(m.getType()).getElementType() != et)
        why = "the backward writes dK and dV in the inputs' element type " +
              typeName(et);
      else if (!hasUnitInnerStride(m))
        why = "the head dim of every operand must be contiguous (stride 1), "
              "as TMA requires";
  }
  if (!why.empty())
    return failure();
  auto qt = cast<MemRefType>(q.getType());
  GradKernelConfig cfg =
      gradTable(qt.getShape().back(), hasMask(window), deterministic,
                softcap > 0);
  cfg.dtype = qt.getElementType().isBF16() ? "bf16" : "f16";
  cfg.headDim = qt.getShape().back();
  int64_t dvDim = cast<MemRefType>(v.getType()).getShape().back();
  cfg.leftBounded = window[0] >= 0;
  cfg.softcap = softcap;
  cfg.deterministic = deterministic;
  if (dvDim != cfg.headDim)
    why = "value head dim " + std::to_string(dvDim) + " with head dim " +
          std::to_string(cfg.headDim) +
          " in the backward (the Hopper backward takes Dv = D)";
  if (!why.empty())
    return failure();
  if (config) {
    cfg.blockM = config.getBlockM();
    cfg.blockN = config.getBlockN();
    cfg.stages = config.getStages();
    cfg.dqBulk = config.getTmaStore();
    if (config.getCtasPerSm() != 1) {
      why = "ctas_per_sm " + std::to_string(config.getCtasPerSm()) +
            " for the backward (one CTA a SM: its consumers hold dK and "
            "dV in 240 registers a thread)";
      return failure();
    }
  }
  gradStepForms(cfg, window);
  why = checkGradSupported(cfg);
  if (!why.empty())
    return failure();
  return cfg;
}

GradKernelConfig fa3::hopper::gradTable(int64_t headDim, bool masked,
                                        bool deterministic, bool softcap,
                                        bool dqBulk) {
  GradKernelConfig cfg;
  cfg.deterministic = deterministic;
  // tma-store=false: the consumers' atomics instead of the bulk reductions
  cfg.dqBulk = dqBulk;
  // LSE and D read where used, dS^T by stmatrix: each kernel measured
  // against the other forms, same GPU call, main kernel (bench/NOTES.md,
  // Log, "LSE and D at use, dS^T by stmatrix"). Both vectors at use and
  // stmatrix: head dim 64 (-3 to -9 %; deterministic full -6 to -9 %), 96
  // full (-4 to -9 %), 128 full (0 to -3 %; deterministic -2 to -3 %).
  // LSE at use and stmatrix: 128 masked (-2 to -5 %; deterministic to
  // -8 %; D at use too was +4 to +5 %). Neither: 96 masked, 192 and 256
  // (96 masked -0.5 to +4 % with either, 256 masked +1 to +7 %, 192 -2 to
  // +2 %), and the deterministic 96 full (+2 to +4 %) and 64 masked (-0.5
  // to +2 %).
  const bool allAtUse = headDim == 64   ? !(deterministic && masked)
                        : headDim == 96 ? !masked && !deterministic
                                        : headDim == 128 && !masked;
  if (allAtUse)
    cfg.lseAtUse = cfg.deltaAtUse = cfg.dsStmatrix = true;
  else if (headDim == 128)
    cfg.lseAtUse = cfg.dsStmatrix = true;
  // The mask as a band (hopper.band_mask) at head dims 64 and 192: causal
  // main kernel -2 to -5 % at 192, 0 to -4 % at 64, measured twice; at 96
  // and 128 it was +1.5 to +7 % (with fewer spills: 12 -> 0 and 108 -> 72
  // bytes), at 256 within 1 %, and in the deterministic kernels at 64 and
  // 192 causal +2 to +6 % (bench/NOTES.md, Log, "S^T's mask as a band").
  cfg.bandMask = !deterministic && (headDim == 64 || headDim == 192);
  // Head dim 64: steps of 128 queries (FA3's 128 x 128), with dQ's bulk
  // reductions (as measured), not deterministic (its dQ turns are per
  // 64-row tile) nor with softcap (its tanh kept across dP's wait: 580-596
  // bytes of spills). With the descriptors formed
  // at use they spill nothing in the loop (136 bytes causal before) and
  // issue 12-13 % fewer loop instructions a query: main kernel -2 to -4 %
  // against 64-query steps, full and causal, 1k-16k, in two calls
  // (bench/NOTES.md, Log, "128-query steps at head dim 64, again"). Their
  // dQ by rows (GradKernelConfig::dqByRows) against 32-column halves, same
  // call: main kernel -4 to -8 % full and -5 to -14 % causal at 1k-16k
  // (bench/NOTES.md, Log, "dQ by rows").
  if (headDim == 64 && !deterministic && !softcap && cfg.dqBulk)
    cfg.blockM = 128;
  // Head dims 192 and 256: both warpgroups see 64 keys (64 x D of dK and
  // dV each would be D registers a thread). At 256 the dQ staging fits
  // beside one Q / dO stage only (two stages: 231552 bytes without it), and
  // one stage with the dQ writer's bulk reductions beat two with the
  // consumers' atomics by 10-21 % (main kernel, full and causal, 1k-16k;
  // deterministic, one stage either way, -29 to -43 %) once its
  // loop-invariant descriptors no longer spilled (bench/NOTES.md, Log,
  // "Head dim 256 on one stage with the bulk dQ reductions"). At 192 the
  // staging fits beside two stages, and the bulk reductions measured -12
  // to -21 % against the atomics (bench/NOTES.md, Log).
  if (headDim > 128) {
    cfg.blockN = 64;
    GradKernelConfig bulk = cfg;
    bulk.headDim = headDim;
    bulk.stages = 2;
    bulk.dqBulk = true;
    const bool stagingFits =
        computeGradSmemLayout(bulk).total <= kMaxDynamicSmem;
    // (the atomics need no staging: two stages)
    cfg.stages = stagingFits || !cfg.dqBulk ? 2 : 1;
  }
  return cfg;
}

void fa3::hopper::gradStepForms(GradKernelConfig &cfg,
                                ArrayRef<int64_t> window) {
  const bool masked = hasMask(window);
  const bool causal = window[0] < 0 && window[1] >= 0;
  // A causal kernel's tiles in L2 sections, kv block slowest (FA3's
  // SingleTileBwdLPTScheduler), where measured ahead: main kernel at
  // 2k / 4k / 16k, head dim 128 -4.1 / -4.1 / +1.3 %, 256 -2.2 / -1.4 /
  // +1.3 %; not at 64 (+0.9 / -0.4 / +0.8 %, and again +3.9 / +0.2 / +0.6
  // % with dQ by rows), 96 (-0.3 / -2.4 / +4.6 %) or 192 (+0.8 / -2.0 /
  // +0.6 %) (bench/NOTES.md, Log, "causal backward in L2 sections", "two
  // dQ staging buffers").
  cfg.l2Sections = !cfg.deterministic && causal &&
                   (cfg.headDim == 128 || cfg.headDim == 256);
  // 128-query steps (head dim 64) without a mask: dV issued after dS^T's
  // stores (FA3's order), covering them before the fence, where ours had
  // waited more than FA3's (ncu stall samples, full 4k: 8.3 k against
  // 4.7 k). Same call, main kernel at 1k / 2k / 4k / 16k: full -4.0 / -5.2
  // / -8.1 / -1.0 %, causal +3.0 / +3.9 / +5.9 / +3.2 % (its spill 20 ->
  // 28 bytes), so not there; at 96 and 128 (64-query steps) +1 to +6 %;
  // softcap not measured (bench/NOTES.md, Log, "dV after dS^T's stores").
  cfg.dvAfterDs = cfg.blockM == 128 && !masked && cfg.softcap == 0.0;
  // Two dQ staging buffers a consumer warpgroup, so that it stages a
  // step's dQ while the writer's reduction of the step before still reads
  // the other (ncu: ours waited there, head dim 64 causal 4k), where they
  // fit beside the stages and measured ahead. Same call, main kernel at
  // 2k / 4k / 16k: head dim 64 (128-query steps) full -1.4 / -1.2 / -2.8
  // %, causal -1.3 / -3.5 / +0.5 %; 96 full -2.2 / -2.5 / -1.2 %; not 96
  // causal (-0.4 / +1.6 / -1.2 %) nor 128 (full 0.0 / +2.2 / -2.1 %,
  // causal within 0.1 %); 192 and 256 have no room; softcap not measured
  // (bench/NOTES.md, Log, "two dQ staging buffers").
  cfg.dqBuffers = 1;
  if (cfg.dqBulk && !cfg.deterministic && cfg.softcap == 0.0 &&
      ((cfg.headDim == 64 && cfg.blockM == 128) ||
       (cfg.headDim == 96 && !masked))) {
    GradKernelConfig two = cfg;
    two.dqBuffers = 2;
    if (computeGradSmemLayout(two).total <= kMaxDynamicSmem)
      cfg.dqBuffers = 2;
  }
}

HopperConfigAttr fa3::hopper::recordGradConfig(MLIRContext *ctx,
                                               const GradKernelConfig &cfg) {
  // One CTA per kv block; no persistence, Q buffers, rescaling, cluster or
  // ping-pong in the backward. tma_store records dQ's path: through shared
  // memory by the producer's bulk reductions (the default), or vector
  // reductions from the consumers' registers.
  return HopperConfigAttr::get(ctx, cfg.blockM, cfg.blockN, cfg.stages,
                               /*persistent=*/false, /*q_buffers=*/1,
                               /*lazy_rescale=*/false,
                               /*rescale_threshold=*/llvm::APFloat(0.0),
                               /*cluster_m=*/1, /*pingpong=*/false,
                               /*tma_store=*/cfg.dqBulk, /*split_kv=*/false,
                               /*pack_gqa=*/false, /*ctas_per_sm=*/1,
                               /*min_seqlen_q=*/0, /*transpose_warps=*/3,
                               /*paged_kv=*/false);
}

int64_t fa3::hopper::longSequenceFrom(const std::string &dtype,
                                      int64_t headDim, int64_t headDimV,
                                      int64_t windowLeft, int64_t windowRight,
                                      bool decode) {
  // Head dim 64, causal, bf16 or f16: 192 query rows (three consumer
  // warpgroups, FA3's 192 x 128 there) from 6144. Same call against 128
  // rows, on the kernels with the L2 sections: 0.87 / 0.85 / 0.98 / 0.99
  // / 1.05 / 1.05 at 512 ... 16k ("192-row tiles again"); 0.98-1.01 at
  // 2k and 4k (partial last m-blocks: 4096 is 21 1/3 tiles of 192),
  // 1.03 at 3k, 1.06-1.07 at 6k and 8k, twice ("Kernels by length";
  // bench/NOTES.md, Log). Softcap takes it as without (its kernels are
  // those kernels with tanh on the scores). A packed batch takes it from
  // the same mean length (its launcher's Sq: tokens / sequences), or its
  // kernel would fall behind the fixed-length one there (issue 15's
  // varlen >= 0.95 x fixed; bench/NOTES.md, Variable lengths). Windows and
  // decoding steps were not measured with it; FP8 takes 192 rows at head
  // dim 64 at every length already.
  // FP8 head dim 128, full or causal: 192-key tiles from 8192 (two
  // stages, two Q buffers; chooseConfig). Same call against the 128-key
  // kernel, per-head descales: full 1.06 / 1.01-1.03, causal 1.04-1.06 /
  // 1.06-1.07 at 8k / 16k (an H100; bench/NOTES.md, Log, "FP8 head dim 128
  // on the branches"), and +5-9 % in the merged launcher's A/B (both then
  // against three stages; against today's two, +2-8 %); autotune put 192
  // keys at -6-10 % at 1k, hence the length. With per-128-key k descales
  // its tiles straddle the descale blocks (S scaled column by column):
  // 0.93-0.99, so launchers pass it over there (fa3.facts.by_length's
  // k_block_descales).
  const bool causal = windowLeft < 0 && windowRight == 0;
  const bool fullMask = windowLeft < 0 && windowRight < 0;
  if (dtype != "e4m3" && headDim == 64 && headDimV == 64 && causal && !decode)
    return 6144;
  if (dtype == "e4m3" && headDim == 128 && headDimV == 128 &&
      (causal || fullMask) && !decode)
    return 8192;
  return 0;
}

namespace {
/// `t` decides, or `isAuto` where the choice is left to the compiler.
bool decide(Toggle t, bool isAuto) {
  return t == Toggle::On || (t == Toggle::Auto && isAuto);
}

/// The table: the configuration of one attention, whose facts `cfg` holds
/// (attentionFacts), from the options, each 0 or auto taking what measured
/// fastest on the H200 (bench/NOTES.md, Defaults).
/// The deepest K/V ring, from `deepest` down to 2 stages, that the kernel
/// can take (shared memory): a decoding step and the FP8 kernel stream K
/// and V, and more stages keep more of them in flight.
void deepestFittingStages(KernelConfig &cfg, int64_t deepest) {
  cfg.stages = deepest;
  while (cfg.stages > 2 && !checkSupported(cfg).empty())
    --cfg.stages;
}
/// Two Q buffers where the kernel can take them (persistent, shared memory
/// beside the stages: checkSupported says why not), else one.
void qBuffersThatFit(KernelConfig &cfg) {
  cfg.qBuffers = 2;
  if (!checkSupported(cfg).empty())
    cfg.qBuffers = 1;
}
/// Two CTAs a SM where the kernel can take them (one consumer warpgroup,
/// half an SM's shared memory: checkSupported says why not), else one.
void ctasPerSmThatFit(KernelConfig &cfg) {
  cfg.ctasPerSm = 2;
  if (!checkSupported(cfg).empty())
    cfg.ctasPerSm = 1;
}

void chooseConfig(KernelConfig &cfg, int64_t windowLeft, int64_t windowRight,
                  const AttnHopperConfigOptions &o) {
  const bool fullMask = windowLeft < 0 && windowRight < 0;
  // The rules key on the larger head dim (the O accumulator's registers
  // and the tiles' shared memory grow with either); where D = Dv, it is
  // the head dim.
  const int64_t hd = std::max(cfg.headDim, cfg.headDimV);
  // The long-sequence entries (longSequenceFrom) where the options ask
  // for calls that long.
  const int64_t longFrom = longSequenceFrom(
      cfg.dtype, cfg.headDim, cfg.headDimV, windowLeft, windowRight, o.decode);
  const bool longRows = longFrom > 0 && o.minSeqlenQ >= longFrom;
  cfg.minSeqlenQ = longRows ? o.minSeqlenQ : 0;
  // Head dim 64 with a full mask takes 192 query rows (three consumer
  // warpgroups, as FA3): +3-9 % from 2k, -2-3 % at 512-1k where a third of
  // the last m-block is past Sq; causal lost 11-15 % at 512-1k for +2-4 %
  // at 8k-16k, so it keeps 128 below 6k and takes 192 from there
  // (longRows; bench/NOTES.md, Defaults: block-m).
  cfg.blockM = o.blockM != 0                        ? o.blockM
                : hd == 64 && (fullMask || longRows) ? 192
                                                : 128;
  // Head dim 256 takes 64-row kv tiles: with the softmax overlapping the
  // P V wgmmas, 80 spills (O alone is 128 registers a thread), and 64
  // measured 1-8 % faster than 80 on the H200
  // (bench/NOTES.md, Defaults: block-n).
  // Head dim 192 takes 112 rows with a full mask and 96 causal, as FA3:
  // +4-11 % over 64 from 1k on, and each of them within 2 % of the other
  // on the other mask (bench/NOTES.md, Defaults: block-n).
  // D = 192 with Dv = 128 (DeepSeek's) takes 128, as FA3: O and S then
  // take the registers they take at head dim 128.
  cfg.blockN = o.blockN != 0                                 ? o.blockN
               : hd <= 128                                   ? 128
               : cfg.headDim == 192 && cfg.headDimV <= 128   ? 128
               : hd == 192                                   ? (fullMask ? 112 : 96)
                                                             : 64;
  // At head dim 64 a 4-deep ring lets the producer run further into the
  // next tile (+0-2 %); larger head dims have no shared memory for more.
  // With 192-row tiles 2 and 4 stages measured alike
  // (bench/NOTES.md, Defaults: stages).
  cfg.stages = o.stages != 0 ? o.stages
                             : hd == 64 && cfg.blockM == 128 ? 4 : 2;
  // The turns alternate between two consumer warpgroups; with three
  // (block-m 192) each issues freely, as in FA3.
  cfg.pingpong = o.pingpong && cfg.consumers() == 2;
  // With the dynamic tile scheduler, persistent CTAs win up to 19 % at head
  // dim 64 and 128 (short sequences, causal or not) and are within 3 % at
  // 16k; at head dim 256, O is staged in Q's buffer, so the next tile's Q
  // waits for the O store: 0-4 % slower everywhere
  // (bench/NOTES.md, Defaults: persistent).
  // A paged packed batch's kernel runs one CTA per tile: the persistent
  // producer thread's 24 registers spill 44-84 bytes beside the page walk
  // (ptxas -v), which one tile's producer holds (as the decoding kernel's).
  cfg.persistent = !o.pagedKv && decide(o.persistent, hd <= 128);
  cfg.pagedKv = o.pagedKv;
  // A packed variable-length batch's kernel cannot store a whole TMA box
  // where it crosses its sequence's end (it would write the next
  // sequence's rows). With one CTA per tile (head dim 192, 256) it stores
  // by TMA the rows inside their sequence and a sequence's last partial
  // rows directly: 0.98-1.03x the fixed-length kernel where direct stores
  // alone gave 0.85-0.99x. In a persistent kernel that branch broke the
  // steady-state wgmma batch (fa3.sass: 16 HGMMA in 108 instructions
  // instead of 43; 2-5 % slower from 4k): there the consumers copy O out
  // of the staging buffer themselves, 16 bytes a thread, as
  // FlashAttention-3's varlen epilogue (KernelConfig::oStore): at head dim
  // 128 1.09-1.12x the direct stores at 512, 1.06-1.08x at 1k, 1.01-1.04x
  // at 4k, its SASS batch intact; at head dim 64 0.97x at 4k and +-1 % at
  // 512-1k, so the persistent one of two consumer warpgroups there keeps
  // direct stores (its causal kernel: 0.95-0.96x at 512 copied out, same
  // call). With three (head dim 64, full mask, 192 rows) copying out
  // measured 1.02-1.03x at 512-1k and 0.98-0.99x at 8k-16k: taken, for
  // the short sequences varlen batches mostly hold (and by the causal
  // kernel for long sequences, 192 rows too). Three without
  // persistence store directly: the TMA store's branch is built and
  // measured for two consumer warpgroups only (bench/NOTES.md, Variable
  // lengths).
  const bool directO =
      cfg.varlen && (cfg.consumers() == 3 ? !cfg.persistent
                                          : cfg.persistent && hd <= 64);
  cfg.tmaStore = o.tmaStore && !directO;
  // Persistent CTAs double-buffer Q where shared memory allows (head dim
  // 64 and 128): the next tile's Q then loads during this tile instead of
  // after it. ncu put the consumers' wait for Q at 15 % of all stall
  // samples (head dim 64, causal, 512); two buffers measured +18-20 % at
  // 512 and +1 % at 16k (bench/NOTES.md, Defaults: q-buffers).
  // Where they do not fit, checkSupported says why; auto then takes one.
  cfg.qBuffers = o.qBuffers;
  if (o.qBuffers == 0)
    qBuffersThatFit(cfg);
  // A packed batch's kernel for long sequences (192 rows, causal) spills 8
  // bytes with two Q buffers and none with one (ptxas -v); its tiles are
  // long, where the second buffer is worth 1 %.
  if (o.qBuffers == 0 && cfg.varlen && longRows && cfg.blockM == 192)
    cfg.qBuffers = 1;
  // The rescale branch is +1-8 % at head dim 128 and 256 (its wait keeps
  // the softmax beside the P V wgmmas), but -2-5 % at head dim 64, where
  // the softmax's instructions, not the GEMMs, set the pace
  // (bench/NOTES.md, Defaults: lazy-rescale).
  cfg.lazyRescale = decide(o.lazyRescale, hd > 64);
  cfg.rescaleThreshold = o.rescaleThreshold;
  // K/V multicast: +1-2 % with persistent CTAs (head dim 128, 650 vs 637
  // TFLOP/s at 16k), -1 to -4 % with one CTA per tile (head dim 256: a
  // cluster's CTAs start and end together)
  // (bench/NOTES.md, Defaults: kv-multicast). "on" applies where it can,
  // so that one setting serves a whole variant set: checkSupported refuses
  // it with a causal or window mask and where the 64-column boxes do not
  // split evenly between the two CTAs (head dim 64 and 192); the facts'
  // cluster_m says where it did.
  // A packed variable-length batch takes none, whatever the options say:
  // the CTAs of a pair would take m-blocks of sequences of different
  // lengths.
  cfg.clusterM = !cfg.varlen && decide(o.kvMulticast, cfg.persistent) ? 2 : 1;
  if (cfg.clusterM == 2 && !checkSupported(cfg).empty())
    cfg.clusterM = 1;
  // The decoding kernel (flash-decoding, as FA3's split and pack_gqa
  // kernels): a decoding step has a handful of query rows per kv head, so
  // the q heads of a kv head share a tile (K and V read once, not once per
  // q head) and the kv blocks split over CTAs (numSplits, chosen at launch)
  // to fill the GPU. One CTA per tile of 64 packed rows by default (one
  // consumer warpgroup: most of a tile's rows are empty in a decoding
  // step, whose g q heads x queries fit 64; half the wgmma work of 128
  // rows, which short contexts wait for: 1.04-1.14x at 1k-4k and with
  // B = 1, 0.98-0.99x where B >= 64 reads 16k-64k keys, where two
  // warpgroups' turns hide the softmax better; g must divide it, so
  // g = 128 needs --block-m 128) (bench/NOTES.md, Decoding); O stored
  // directly, which the partial outputs need anyway; no cluster.
  // A decoding step streams K and V once: a third ring stage, where shared
  // memory has room for it (head dim up to 128), keeps more of them in
  // flight per SM (bench/NOTES.md, Decoding). Up to head dim 128, tiles of
  // 64 keys and two CTAs a SM (each 113 KiB of shared memory with three
  // stages, 128 registers a thread at launch, 232 for its consumers): one
  // CTA's start and end overlap the other's stream, where one CTA a SM of
  // 128 keys left the SM idle (B 64-128 at 1k keys: 0.98 of SDPA's time ->
  // 1.00; 16k-64k: 0.99 -> 1.00-1.01; B 1-16 +1-5 %); with two stages of
  // 64 keys two a SM streamed 3-7 % slower at B <= 16 (bench/NOTES.md,
  // Decoding).
  // FP8 (e4m3): tiles of 128 keys (the transposed V is one 128-byte
  // swizzle row of keys wide; FA3's 160 to 224, in two such boxes, are an
  // option until measured: bench/NOTES.md, FP8), no clusters
  // (checkSupported). Persistent
  // CTAs at every head dim: 1.07-1.45x one CTA per tile at 512-2k (head
  // dim 128; 1.01-1.11x at 64), within 1-2 % from 8k; at 256, once its
  // transposer took 128-key units, 1.06-1.13x at 512-2k and 1.00-1.03x
  // from 4k (bf16's 256 stages O in Q's buffer, which the next tile's Q
  // then waits for; FP8's stores O directly) (bench/NOTES.md, FP8). 128 query rows, or 192 (three
  // consumer warpgroups, as FA3) at head dim 64, whatever the mask, where
  // the softmax's exponentials set the pace and a third warpgroup hides
  // more of them: 1.19-1.27x from 2k, 0.97-1.06x at 512 (bench/NOTES.md,
  // FP8). A warpgroup's 64 rows lie in one of the q descales' 128-row
  // blocks either way.
  // Three K/V stages at head dim 64, which leave room for a second Q
  // buffer beside the 192-row Q (four filled shared memory with one:
  // three measured 1.18-1.20x at 512, 1.09-1.13x at 1k, 1.05-1.11x at 2k,
  // 0.99-1.04x from 8k, twice in one call on an H100); two at 128 and 256
  // (at 128 two measured 1.02-1.04x three, full and causal, but 0.97-0.99x
  // at full 8k, where the long kernel serves; 256 fits no more)
  // (bench/NOTES.md, Log, "FP8 K/V stages again"). (More stages where the
  // kernel cannot take them are refused: checkSupported)
  if (o.transposeWarps != 0)
    cfg.transposeWarps = o.transposeWarps;
  if (cfg.isFp8()) {
    // Options the FP8 kernel cannot take are refused, not overridden
    // (checkSupported names them); the rest take the FP8 defaults.
    cfg.blockM = o.blockM != 0 ? o.blockM : hd == 64 ? 192 : 128;
    // (192 keys for long sequences at head dim 128: longSequenceFrom)
    cfg.blockN = o.blockN != 0 ? o.blockN : longRows ? 192 : 128;
    cfg.pingpong = o.pingpong && cfg.consumers() == 2;
    cfg.persistent = decide(o.persistent, true);
    // V transposed on all four producer warps (warp 0 one fill behind its
    // loads, as FA3) at head dim 256, where the transposer sets the pace:
    // 1.00-1.05x from 1k on the H200 and 0.99-1.05x on an H100 (a causal
    // 1k cell at 0.77 once, 1.01 in the call before); at 64 and 128 within
    // 0.95-1.05, 0.79 at 128 full 512: three (bench/NOTES.md, Log, "four
    // transposer warps").
    if (o.transposeWarps == 0)
      cfg.transposeWarps = hd == 256 && cfg.persistent ? 4 : 3;
    cfg.qBuffers = o.qBuffers != 0 ? o.qBuffers : 1;
    cfg.clusterM = o.kvMulticast == Toggle::On ? 2 : 1;
    cfg.lazyRescale = decide(o.lazyRescale, true);
    // (the long kernel's 192-key tiles: two stages too, autotune's winner,
    // bench/NOTES.md, Log, "FP8 head dim 128's tiles again by autotune")
    if (o.stages == 0)
      deepestFittingStages(cfg, cfg.oCols() <= 64 ? 3 : 2);
    // The stages first, then a second Q buffer where it fits beside them
    // (head dim 64 and 128; not 256).
    if (o.qBuffers == 0)
      qBuffersThatFit(cfg);
    // Head dim 256: Q, two stages of K, V and V transposed (224 KiB) leave
    // no room for O's bf16 staging buffer (64 KiB), nor is Q's large
    // enough: O is stored directly.
    if (!checkSupported(cfg).empty())
      cfg.tmaStore = false;
  }
  if (o.decode) {
    cfg.splitKv = cfg.packGqa = true;
    // One consumer warpgroup of 64 rows (a decoding step's few packed
    // rows). bf16 and f16: 64 keys to head dim 128, three stages, two CTAs
    // a SM where they fit. FP8 (an e4m3 KV cache): 128 keys (P's k-steps,
    // the V transposer's 128-key boxes; its q descale is per kv head, one
    // for all the tile's rows) and two stages, which two CTAs a SM fit:
    // 1.03-1.16x the 128 x 128 tile of three stages, one CTA a SM
    // (bench/NOTES.md, Log, "FP8 decoding with 64-row tiles").
    cfg.blockM = o.blockM != 0 ? o.blockM : 64;
    cfg.pingpong = o.pingpong && cfg.consumers() == 2;
    cfg.persistent = false;
    cfg.qBuffers = 1;
    cfg.clusterM = 1;
    cfg.tmaStore = false;
    if (cfg.isFp8() && o.blockN == 0)
      cfg.blockN = 128;
    else if (o.blockN == 0 && hd <= 128 && cfg.blockM == 64)
      cfg.blockN = 64;
    // FP8: V transposed by the four producer warps that copy small pages
    // (FA3's way, each slot one fill behind their copies), where warp 0
    // alone copied beside three transposers at 0.62-0.64x the contiguous
    // cache (bench/NOTES.md, Log, "FP8 decoding's four copying warps").
    if (cfg.isFp8() && o.transposeWarps == 0)
      cfg.transposeWarps = 4;
    const bool fp8Rows64 = cfg.isFp8() && cfg.blockM == 64;
    if (o.stages == 0)
      deepestFittingStages(cfg, fp8Rows64 ? 2 : 3);
    if (hd <= 128 && (cfg.stages >= 3 || fp8Rows64))
      ctasPerSmThatFit(cfg);
  }
}

struct AttnHopperConfigPass
    : public fa3::impl::AttnHopperConfigBase<AttnHopperConfigPass> {
  using AttnHopperConfigBase::AttnHopperConfigBase;

  /// The options' ranges, checked where the numbers enter the compiler
  /// (the kernel is unrolled over stages and Q buffers).
  LogicalResult checkOptions() {
    constexpr int64_t maxStages = HopperConfigAttr::kMaxStages;
    constexpr double maxThreshold = HopperConfigAttr::kMaxRescaleThreshold;
    auto refuse = [&](StringRef name, const Twine &range, const Twine &value) {
      mlir::emitError(getOperation()->getLoc(), "attn-hopper-config: ")
          << name << " must be " << range << ", got " << value;
      return failure();
    };
    for (auto [name, value] : {std::pair<StringRef, int64_t>{"block-m", blockM},
                               {"block-n", blockN}})
      if (value < 0 || value > kMaxBlock)
        return refuse(name, "0 (per head dim) to " + Twine(kMaxBlock),
                      Twine(value));
    if (stages < 0 || stages > maxStages)
      return refuse("stages", "0 (per head dim) to " + Twine(maxStages),
                    Twine(stages));
    if (qBuffers < 0 || qBuffers > 2)
      return refuse("q-buffers", "0 (auto), 1 or 2", Twine(qBuffers));
    if (!(rescaleThreshold >= 0.0 && rescaleThreshold <= maxThreshold))
      return refuse("rescale-threshold",
                    llvm::formatv("0 to {0} (log2 units)",
                                  llvm::format("%g", maxThreshold)),
                    llvm::formatv("{0}", llvm::format(
                                             "%g", rescaleThreshold.getValue())));
    if (minSeqlenQ < 0 || minSeqlenQ > INT32_MAX)
      return refuse("min-seqlen-q", "0 (any length) to " + Twine(INT32_MAX),
                    Twine(minSeqlenQ));
    if (transposeWarps != 0 && transposeWarps != 3 && transposeWarps != 4)
      return refuse("transpose-warps", "0 (the table), 3 or 4", Twine(transposeWarps));
    return success();
  }

  void runOnOperation() override {
    if (failed(checkOptions()))
      return signalPassFailure();
    AttnHopperConfigOptions opts;
    opts.blockM = blockM;
    opts.blockN = blockN;
    opts.stages = stages;
    opts.pingpong = pingpong;
    opts.persistent = persistent;
    opts.tmaStore = tmaStore;
    opts.qBuffers = qBuffers;
    opts.lazyRescale = lazyRescale;
    opts.kvMulticast = kvMulticast;
    opts.rescaleThreshold = rescaleThreshold;
    opts.decode = decode;
    opts.pagedKv = pagedKv;
    opts.minSeqlenQ = minSeqlenQ;
    opts.transposeWarps = transposeWarps;
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (auto fixed = dyn_cast<FlashAttentionOp>(op))
        return configure(fixed, opts);
      if (auto packed = dyn_cast<FlashAttentionVarlenOp>(op))
        return configure(packed, opts);
      if (auto grad = dyn_cast<FlashAttentionGradOp>(op))
        return configureGrad(grad, opts);
      if (isa<QuantizeOp>(op)) {
        op->emitOpError(
            "has no Hopper kernel of its own: its GPU form is the "
            "<kernel>_quantize that every FP8 attention kernel carries "
            "(launched by fa3rt_quantize, fa3.quantize_fp8); its CPU form "
            "is attn-cpu-reference-pipeline");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// Records the backward's configuration: its own table, with block-m,
  /// block-n and stages where the options give them (checked like the
  /// rest); the other options tune the forward's kernel.
  WalkResult configureGrad(FlashAttentionGradOp op,
                           const AttnHopperConfigOptions &opts) {
    if (!op.hasBufferSemantics()) {
      op.emitOpError("attn-hopper-config needs the memref form: run "
                     "--one-shot-bufferize=\"bufferize-function-boundaries "
                     "function-boundary-type-conversion=identity-layout-map\" "
                     "first, or --attn-hopper-pipeline, which bufferizes");
      return WalkResult::interrupt();
    }
    std::string why;
    int64_t window[] = {op.getWindowLeft(), op.getWindowRight()};
    // the table, then the options that apply
    GradKernelConfig wanted =
        gradTable(cast<MemRefType>(op.getQuery().getType()).getShape().back(),
                  hasMask(window), op.getDeterministic(),
                  op.getSoftcap().convertToDouble() > 0, opts.tmaStore);
    if (opts.blockM)
      wanted.blockM = opts.blockM;
    if (opts.blockN)
      wanted.blockN = opts.blockN;
    if (opts.stages)
      wanted.stages = opts.stages;
    auto tryConfig = [&](const GradKernelConfig &c) {
      why.clear();
      return gradConfig(op.getQuery(), op.getKey(), op.getValue(),
                        op.getGradOut(), op.getGradKey(), op.getGradValue(),
                        window, op.getSoftcap().convertToDouble(),
                        op.getDeterministic(),
                        recordGradConfig(op.getContext(), c), why);
    };
    FailureOr<GradKernelConfig> cfg = tryConfig(wanted);
    // The table's 128-query steps (head dim 64) take 128 keys and two
    // stages only; a block-n or stage count asked for without block-m gets
    // the 64-query steps that allow it, not a refusal of a block-m nobody
    // asked for.
    const int64_t defaultBlockM = GradKernelConfig().blockM;
    if (failed(cfg) && !opts.blockM && wanted.blockM != defaultBlockM &&
        (opts.blockN || opts.stages)) {
      GradKernelConfig narrower = wanted;
      narrower.blockM = defaultBlockM;
      cfg = tryConfig(narrower);
    }
    if (failed(cfg)) {
      mlir::emitError(op.getLoc(), "cannot generate the Hopper kernel: ")
          << (why.rfind("the ", 0) == 0 ? "" : "unsupported ") << why;
      return WalkResult::interrupt();
    }
    op->setAttr(HopperConfigAttr::kAttrName,
                recordGradConfig(op.getContext(), *cfg));
    return WalkResult::advance();
  }

  /// Records the configuration of one attention (either form).
  template <typename OpT>
  WalkResult configure(OpT op, const AttnHopperConfigOptions &opts) {
    if (!op.hasBufferSemantics()) {
      op.emitOpError("attn-hopper-config needs the memref form: run "
                     "--one-shot-bufferize=\"bufferize-function-boundaries "
                     "function-boundary-type-conversion=identity-layout-map\" "
                     "first, or --attn-hopper-pipeline, which bufferizes");
      return WalkResult::interrupt();
    }
    // At the attention's location, as convert-attn-to-hopper reports.
    auto fail = [&](const Twine &why) {
      mlir::emitError(op.getLoc(), "cannot generate the Hopper kernel: ")
          << why;
      return WalkResult::interrupt();
    };
    std::string why = checkOperands(op.getQuery(), op.getKey(),
                                    op.getValue(), op.getOut());
    if (!why.empty())
      return fail(why);
    int64_t left = op.getWindowLeft(), right = op.getWindowRight();
    KernelConfig cfg = attentionFacts(
        cast<MemRefType>(op.getQuery().getType()),
        cast<MemRefType>(op.getValue().getType()), left, right);
    cfg.varlen = isa<FlashAttentionVarlenOp>(op.getOperation());
    if (opts.decode && cfg.varlen)
      return fail("unsupported decode with a packed variable-length batch "
                  "(the decoding kernel takes a fixed-length batch)");
    if (opts.pagedKv && !cfg.varlen)
      return fail("unsupported paged-kv with a fixed-length batch (an "
                  "option of packed variable-length batches; the decoding "
                  "kernel, decode=true, takes a page table by itself)");
    if (opts.pagedKv && opts.persistent == Toggle::On)
      return fail("unsupported paged-kv with persistent=on (a paged packed "
                  "batch's kernel runs one CTA per tile)");
    chooseConfig(cfg, left, right, opts);
    why = checkSupported(cfg);
    if (!why.empty())
      return fail("unsupported " + why);
    op->setAttr(HopperConfigAttr::kAttrName,
                recordConfig(op.getContext(), cfg));
    return WalkResult::advance();
  }
};
} // namespace
