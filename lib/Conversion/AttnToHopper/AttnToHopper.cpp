//===- AttnToHopper.cpp - convert-attn-to-hopper --------------------------===//
//
// From the tiled attention program (attn-tile) to a gpu.module holding the
// warp-specialised sm_90a kernel and its device helpers:
//   @<kernel>_kv_range  attn.kv_range of the tiled IR, expanded by the
//                       shared builder (the schedule);
//   @<kernel>_visible_cols  the keys a query row sees (shared visibility
//                       bounds, clamped to the Skv tail): the mask of
//                       boundary blocks.
// The kernel itself is built by KernelBuilder: its structure configured by
// the #attn.hopper_config that attn-hopper-config chose and attn-tile
// carried to the attn.kv_range, its per-tile math the tiled program
// (TiledCell.cpp) lowered; the backward's by GradKernelBuilder, from the
// configuration on attn.q_range and its tiled program likewise.
//
//===----------------------------------------------------------------------===//

#include "CacheAppendKernel.h"
#include "GradAuxKernels.h"
#include "GradKernelBuilder.h"
#include "HopperConfig.h"
#include "KernelBuilder.h"
#include "QuantizeKernel.h"
#include "SplitCombineKernel.h"
#include "TiledCell.h"
#include "fa3/Conversion/Passes.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Utils/LoweringUtils.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Support/InputLimits.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <optional>

namespace fa3 {
#define GEN_PASS_DEF_CONVERTATTNTOHOPPER
#include "fa3/Conversion/Passes.h.inc"
} // namespace fa3

using namespace mlir;
using namespace fa3;
using namespace fa3::attn;

namespace {
/// The facts' o_store: how O leaves the kernel (KernelConfig::oStore).
const char *oStoreName(const hopper::KernelConfig &cfg) {
  switch (cfg.oStore()) {
  case hopper::KernelConfig::OStore::direct:
    return "direct";
  case hopper::KernelConfig::OStore::tma:
    return "tma";
  case hopper::KernelConfig::OStore::staged:
    return "staged";
  }
  llvm_unreachable("an O store the facts cannot name");
}

/// What the tiled IR of one attention holds: its attn-tile grid, the
/// schedule op (attn.kv_range; the backward's attn.q_range), the step
/// (attn.tile_update / tile_grad_update) and the epilogue.
template <typename RangeOp, typename UpdateOp, typename FinalizeOp>
struct Tiled {
  scf::ParallelOp grid;
  RangeOp range;
  UpdateOp update;
  FinalizeOp finalize;
};
using TiledAttention = Tiled<KvRangeOp, TileUpdateOp, TileFinalizeOp>;
using TiledGrad = Tiled<QRangeOp, TileGradUpdateOp, TileGradFinalizeOp>;

/// The computation of kind T an attn-tile grid holds, or nothing if `grid`
/// is some other parallel loop.
template <typename T>
std::optional<T> matchTiled(scf::ParallelOp grid) {
  T t{grid, {}, {}, {}};
  grid.walk([&](Operation *op) {
    if (auto r = dyn_cast<decltype(t.range)>(op))
      t.range = r;
    else if (auto u = dyn_cast<decltype(t.update)>(op))
      t.update = t.update ? t.update : u;
    else if (auto f = dyn_cast<decltype(t.finalize)>(op))
      t.finalize = f;
  });
  if (!t.finalize || !t.range || !t.update)
    return std::nullopt;
  return t;
}

/// In the tiled form of attn.flash_attention_varlen, a tile op's tensor
/// is one sequence's view of a packed argument: the subview at row offset
/// `row` (q0 for q, o, lse; k0 for k, v) of `size` rows, all heads and
/// columns, of the argument's [1, H, T, D] ([1, H, T]) view
/// (expand_shape [[0, 1], ...] + transpose).
struct PackedView {
  BlockArgument arg;
  Value row, size;
};
std::optional<PackedView> matchPackedView(Value v, Block *entry) {
  auto sub = v ? v.getDefiningOp<memref::SubViewOp>() : nullptr;
  if (!sub)
    return std::nullopt;
  Value src = sub.getSource();
  int64_t rank = sub.getSourceType().getRank();
  if (rank == 4) {
    auto tr = src.getDefiningOp<memref::TransposeOp>();
    if (!tr || tr.getPermutation() !=
                   AffineMap::getPermutationMap(ArrayRef<unsigned>{0, 2, 1, 3},
                                                v.getContext()))
      return std::nullopt;
    src = tr.getIn();
  }
  auto ex = src.getDefiningOp<memref::ExpandShapeOp>();
  auto arg = ex ? dyn_cast<BlockArgument>(ex.getSrc()) : BlockArgument();
  if (!arg || arg.getOwner() != entry || ex.getResultType().getDimSize(0) != 1)
    return std::nullopt;
  // [T, H, D] -> [1, T, H, D] or [H, T] -> [1, H, T]: only the leading
  // unit dim is new.
  SmallVector<ReassociationIndices> re = ex.getReassociationIndices();
  if (re.empty() || re[0] != ReassociationIndices{0, 1})
    return std::nullopt;
  for (size_t i = 1; i < re.size(); ++i)
    if (re[i] != ReassociationIndices{static_cast<int64_t>(i) + 1})
      return std::nullopt;
  // Offsets [0, 0, row(, 0)], unit strides, the sizes of every dim but the
  // rows: the sequence's rows, whole.
  auto srcType = cast<MemRefType>(sub.getSource().getType());
  SmallVector<OpFoldResult> offsets = sub.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = sub.getMixedSizes();
  for (int64_t i = 0; i < rank; ++i) {
    if (i == 2)
      continue;
    if (getConstantIntValue(offsets[i]) != 0 ||
        getConstantIntValue(sizes[i]) != srcType.getDimSize(i))
      return std::nullopt;
  }
  for (OpFoldResult st : sub.getMixedStrides())
    if (getConstantIntValue(st) != 1)
      return std::nullopt;
  auto row = dyn_cast<Value>(offsets[2]);
  auto size = dyn_cast<Value>(sizes[2]);
  if (!row || !size)
    return std::nullopt;
  return PackedView{arg, row, size};
}

/// The element of a 1-D i32 array that `idx` is: index_cast(memref.load
/// %array[%i]) (buildSequenceBounds), or null.
memref::LoadOp arrayElement(Value idx) {
  auto cast = idx.getDefiningOp<arith::IndexCastOp>();
  auto load = cast ? cast.getIn().getDefiningOp<memref::LoadOp>() : nullptr;
  if (!load || load.getIndices().size() != 1 || !load.getType().isInteger(32))
    return nullptr;
  return load;
}

/// The i32 array argument that `idx` reads at `at`:
/// index_cast(memref.load %array[%at]).
BlockArgument loadedAt(Value idx, Value at, Block *entry) {
  memref::LoadOp load = arrayElement(idx);
  if (!load || load.getIndices()[0] != at)
    return BlockArgument();
  auto arg = dyn_cast<BlockArgument>(load.getMemRef());
  return arg && arg.getOwner() == entry ? arg : BlockArgument();
}

/// Whether `n` is array[s + 1] - first, where `first` is array[s]: a
/// sequence's length from its cumulative lengths (buildSequenceBounds).
bool isLengthAt(Value n, Value first, BlockArgument array, Value s,
                Block *entry) {
  auto sub = n.getDefiningOp<arith::SubIOp>();
  memref::LoadOp load = sub ? arrayElement(sub.getLhs()) : nullptr;
  auto next = load ? load.getIndices()[0].getDefiningOp<arith::AddIOp>()
                   : nullptr;
  return next && sub.getRhs() == first && next.getLhs() == s &&
         getConstantIntValue(next.getRhs()) == 1 &&
         loadedAt(sub.getLhs(), next, entry) == array;
}

/// Whether the tile ops of `t` read a packed variable-length batch
/// (attn-tile's form of attn.flash_attention_varlen: a grid over
/// (sequence, q head), each sequence's views of the packed arguments,
/// their rows and lengths from the i32 arrays cu_seqlens_q/k at the
/// sequence index, the key count possibly from seqused_k: what the kernel
/// reads at launch). Fails with `why` set when its views are only partly
/// that.
FailureOr<bool> matchVarlen(TiledAttention t, Block *entry,
                            std::string &why) {
  TileUpdateOp u = t.update;
  std::optional<PackedView> q = matchPackedView(u.getQuery(), entry);
  if (!q)
    return false;
  std::optional<PackedView> k = matchPackedView(u.getKey(), entry);
  std::optional<PackedView> v = matchPackedView(u.getValue(), entry);
  std::optional<PackedView> o = matchPackedView(t.finalize.getOut(), entry);
  std::optional<PackedView> lse =
      t.finalize.getLse() ? matchPackedView(t.finalize.getLse(), entry)
                          : std::optional<PackedView>(PackedView{});
  Value s = t.grid.getNumLoops() == 2 ? t.grid.getInductionVars()[0] : Value();
  why = "its tensors are views of a packed variable-length batch in a form "
        "the kernel does not take (the form attn-tile gives "
        "attn.flash_attention_varlen: a grid over (sequence, q head), each "
        "sequence's rows of the packed arguments at cu_seqlens_q[s] and "
        "cu_seqlens_k[s], as many as their lengths or seqused_k[s])";
  if (!k || !v || !o || !lse || !s)
    return failure();
  if (o->row != q->row || o->size != q->size ||
      (lse->arg && (lse->row != q->row || lse->size != q->size)) ||
      v->row != k->row || v->size != k->size)
    return failure();
  BlockArgument cuQ = loadedAt(q->row, s, entry);
  BlockArgument cuK = loadedAt(k->row, s, entry);
  if (!cuQ || !cuK || !isLengthAt(q->size, q->row, cuQ, s, entry))
    return failure();
  // The keys: cu_seqlens_k[s + 1] - k0, or seqused_k[s], an array of its
  // own (the kernel reads seqused_k where the launch gives it).
  BlockArgument used = loadedAt(k->size, s, entry);
  if (!isLengthAt(k->size, k->row, cuK, s, entry) &&
      (!used || used == cuQ || used == cuK))
    return failure();
  why.clear();
  return true;
}

Value toIndex(OpBuilder &b, Location loc, Value v) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}
Value toI32(OpBuilder &b, Location loc, Value v) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
}

/// func.func private @name(first, Sq, Skv : i32) -> (lo, hi, ilo, ihi :
/// i32): a schedule op expanded by its shared builder `build` (attn.kv_range
/// by buildKvRange, `first` the m-block's row0; the backward's attn.q_range
/// by buildQRange, `first` the kv-block's col0).
template <typename RangeOp>
void buildRangeFn(OpBuilder &b, Location loc, StringRef name, RangeOp r,
                  decltype(&buildKvRange) build) {
  Type i32 = b.getI32Type();
  auto fn = func::FuncOp::create(
      b, loc, name, b.getFunctionType({i32, i32, i32}, {i32, i32, i32, i32}));
  fn.setPrivate();
  Block *body = fn.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockBegin(body);
  Value first = toIndex(fb, loc, body->getArgument(0));
  Value sq = toIndex(fb, loc, body->getArgument(1));
  Value skv = toIndex(fb, loc, body->getArgument(2));
  KvRange k = build(fb, loc, first, sq, skv, r.getBlockM(), r.getBlockN(),
                    r.getWindow()[0], r.getWindow()[1]);
  func::ReturnOp::create(fb, loc,
                         ValueRange{toI32(fb, loc, k.lo), toI32(fb, loc, k.hi),
                                    toI32(fb, loc, k.interiorLo),
                                    toI32(fb, loc, k.interiorHi)});
}

/// func.func private @name(row, Sq, Skv : i32) -> (lo, hi : i32): query
/// `row` sees the existing keys lo <= col < hi (the shared visibility
/// bounds, clamped to [0, Skv)). The kernel compares each score's column
/// against these two per-row values, a compare and a select per element.
void buildVisibleColsFn(OpBuilder &b, Location loc, StringRef name,
                        ArrayRef<int64_t> window) {
  Type i32 = b.getI32Type();
  auto fn = func::FuncOp::create(
      b, loc, name, b.getFunctionType({i32, i32, i32}, {i32, i32}));
  fn.setPrivate();
  Block *body = fn.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockBegin(body);
  Value row = toIndex(fb, loc, body->getArgument(0));
  Value sq = toIndex(fb, loc, body->getArgument(1));
  Value skv = toIndex(fb, loc, body->getArgument(2));
  Value offset = arith::SubIOp::create(fb, loc, skv, sq);
  VisibleCols c = buildVisibleCols(fb, loc, row, offset, window[0], window[1]);
  Value zero = indexConst(fb, loc, 0);
  Value lo = c.lo ? arith::MaxSIOp::create(fb, loc, c.lo, zero).getResult() : zero;
  Value hi = c.hi ? arith::MinSIOp::create(fb, loc, c.hi, skv).getResult() : skv;
  func::ReturnOp::create(fb, loc, ValueRange{toI32(fb, loc, lo), toI32(fb, loc, hi)});
}

/// The kernel is a PTX symbol named after the function: refused where the
/// function's name is not a C identifier.
LogicalResult checkKernelName(func::FuncOp func,
                              function_ref<InFlightDiagnostic(const Twine &)> fail) {
  if (isCIdentifier(func.getName()))
    return success();
  return fail("its kernel is named after @\"" + func.getName().str() +
              "\", which is not a C identifier (letters, digits and '_', "
              "not starting with a digit) as PTX symbols must be: rename "
              "the function");
}

/// The kernel's launch takes the function's arguments as its tensors: an
/// operand computed in the function would be lost with the function.
/// `exception` (a packed batch's views) is added to the message.
LogicalResult checkTensorsAreArguments(
    func::FuncOp func, ArrayRef<Value> tensors, StringRef exception,
    function_ref<InFlightDiagnostic(const Twine &)> fail) {
  Block *entry = &func.getBody().front();
  for (Value v : tensors) {
    auto arg = dyn_cast_or_null<BlockArgument>(v);
    if (v && !(arg && arg.getOwner() == entry))
      return fail("its tensors must be arguments of @" + func.getName().str() +
                  ", which the kernel's launch takes; one is computed in the "
                  "function" + exception);
  }
  return success();
}

/// The gpu.module @<base>_kernels that holds one attention's kernel, at
/// the end of `module` (`mb`'s insertion point); refused where the symbol
/// is taken.
FailureOr<gpu::GPUModuleOp>
kernelModule(OpBuilder &mb, ModuleOp module, const std::string &base,
             Location loc,
             function_ref<InFlightDiagnostic(const Twine &)> fail) {
  std::string name = base + "_kernels";
  if (module.lookupSymbol(name)) {
    fail("symbol @" + name + " already exists");
    return failure();
  }
  return gpu::GPUModuleOp::create(mb, loc, name);
}

/// A kernel's parameter names in launch order (the facts' `params`).
template <typename Param, size_t N>
ArrayAttr paramNames(OpBuilder &b, const Param (&list)[N]) {
  SmallVector<StringRef> names;
  for (const Param &p : list)
    names.push_back(p.name);
  return b.getStrArrayAttr(names);
}

/// Adds the launch facts `facts` to `kernel`, once they hold every key the
/// runtime requires (fa3rt_abi.def).
LogicalResult setLaunchFacts(OpBuilder &b, gpu::GPUFuncOp kernel,
                             ArrayRef<NamedAttribute> facts,
                             function_ref<InFlightDiagnostic(const Twine &)> fail) {
  DictionaryAttr launch = b.getDictionaryAttr(facts);
  for (const hopper::FactsKey &k : hopper::kFactsKeys)
    if (k.required && !launch.get(k.key))
      return fail(Twine("internal error: the launch facts lack '") + k.key +
                  "', which the runtime requires (fa3rt_abi.def)");
  kernel->setAttr("attn.launch", launch);
  return success();
}

LogicalResult convert(ModuleOp module, func::FuncOp func, TiledAttention t,
                      unsigned index) {
  TileUpdateOp u = t.update;
  // At the attention's location: a dump of the tiled grid would bury it.
  auto fail = [&](const Twine &why) {
    return mlir::emitError(t.grid.getLoc(), "cannot generate the Hopper kernel: ")
           << why;
  };
  if (failed(checkKernelName(func, fail)))
    return failure();
  // The tensors are the function's arguments, except a packed
  // variable-length batch's per-sequence views, whose rows the kernel reads
  // from the same cu_seqlens arrays.
  Block *entry = &func.getBody().front();
  std::string why;
  FailureOr<bool> varlen = matchVarlen(t, entry, why);
  if (failed(varlen))
    return fail(why);
  Value tensors[] = {u.getQuery(), u.getKey(), u.getValue(),
                     t.finalize.getOut(), t.finalize.getLse()};
  if (!*varlen &&
      failed(checkTensorsAreArguments(
          func, tensors,
          " (of views, the kernel takes only those of a packed "
          "variable-length batch)",
          fail)))
    return failure();
  auto recorded =
      t.range->getAttrOfType<HopperConfigAttr>(HopperConfigAttr::kAttrName);
  if (!recorded)
    return fail("its tiles carry no configuration (attn.hopper_config on "
                "attn.kv_range): run attn-hopper-config before attn-tile");
  // attn-hopper-config has checked these; tiled IR written by hand has not.
  why = hopper::checkOperands(u.getQuery(), u.getKey(),
                                          u.getValue(), t.finalize.getOut());
  if (!why.empty())
    return fail(why);

  // The tile program the consumers' mainloop is lowered from.
  Operation *where = nullptr;
  FailureOr<hopper::TiledCell> cell =
      hopper::matchTiledCell(t.range, u, t.finalize, why, where);
  if (failed(cell))
    return mlir::emitError(where->getLoc(),
                           "cannot generate the Hopper kernel: ")
           << why;

  ArrayRef<int64_t> window = u.getWindow();
  hopper::KernelConfig cfg = hopper::attentionFacts(
      cast<MemRefType>(u.getQuery().getType()),
      cast<MemRefType>(u.getValue().getType()), window[0], window[1]);
  hopper::applyConfig(recorded, cfg);
  std::string base = func.getName().str() + (index ? "_" + std::to_string(index) : "");
  cfg.name = base + "_kernel";
  // The step's own arithmetic (the kernel lowers it, the facts record it).
  cfg.softcap = u.getSoftcap().convertToDouble();
  std::optional<double> tau = hopper::lazyThreshold(u);
  cfg.lazyRescale = tau.has_value();
  if (tau)
    cfg.rescaleThreshold = *tau;
  cfg.varlen = *varlen;
  cfg.kvRangeFn = cfg.name + "_kv_range";
  cfg.visibleColsFn = cfg.name + "_visible_cols";
  why = hopper::checkSupported(cfg);
  if (!why.empty())
    return fail("unsupported " + why);

  Location loc = t.grid.getLoc();
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  FailureOr<gpu::GPUModuleOp> created = kernelModule(mb, module, base, loc, fail);
  if (failed(created))
    return failure();
  gpu::GPUModuleOp gpuModule = *created;
  // Verified after the device functions it calls are added.
  gpu::GPUFuncOp kernel = hopper::buildKernel(mb, loc, gpuModule, cfg, *cell);
  if (cfg.splitKv) {
    hopper::buildSplitCombineKernel(mb, loc, gpuModule, cfg.name + "_combine",
                                    cfg.dtype, cfg.headDimV);
    hopper::buildCacheAppendKernel(mb, loc, gpuModule, cfg.name + "_append",
                                   cfg.headDim, cfg.headDimV,
                                   cfg.isFp8() ? 1 : 2);
  }
  // FP8 kernels carry the quantization that feeds them (attn.quantize's
  // GPU form): launched through the same loaded kernel, whose head dim it
  // takes.
  if (cfg.dtype == "e4m3")
    hopper::buildQuantizeKernel(mb, loc, gpuModule, cfg.name + "_quantize",
                                cfg.headDim);

  OpBuilder b = OpBuilder::atBlockBegin(gpuModule.getBody());
  buildRangeFn(b, loc, cfg.kvRangeFn, t.range, buildKvRange);
  buildVisibleColsFn(b, loc, cfg.visibleColsFn, u.getWindow());

  // Launch facts: everything a launcher needs besides the PTX/cubin.
  hopper::SmemLayout lay = hopper::computeSmemLayout(cfg);
  NamedAttribute facts[] = {
      b.getNamedAttr("kernel", b.getStringAttr(cfg.name)),
      b.getNamedAttr("source_func", b.getStringAttr(func.getName())),
      b.getNamedAttr("dtype", b.getStringAttr(cfg.dtype)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(cfg.headDim)),
      b.getNamedAttr("head_dim_v", b.getI64IntegerAttr(cfg.headDimV)),
      b.getNamedAttr("block_m", b.getI64IntegerAttr(cfg.blockM)),
      b.getNamedAttr("block_n", b.getI64IntegerAttr(cfg.blockN)),
      b.getNamedAttr("stages", b.getI64IntegerAttr(cfg.stages)),
      b.getNamedAttr("pingpong", b.getBoolAttr(cfg.pingpong)),
      b.getNamedAttr("lazy_rescale", b.getBoolAttr(cfg.lazyRescale)),
      // CTAs per cluster (launched as clusters of this many along x; the
      // kernel rounds the m-block count up to a multiple of it).
      b.getNamedAttr("cluster_m", b.getI64IntegerAttr(cfg.clusterM)),
      b.getNamedAttr("o_store", b.getStringAttr(oStoreName(cfg))),
      // 1-D grid over (m-block, head, batch) tiles: one per CTA ("tiles"),
      // or any grid size, the kernel striding by gridDim.x ("persistent").
      b.getNamedAttr("grid", b.getStringAttr(cfg.persistent ? "persistent"
                                                            : "tiles")),
      b.getNamedAttr("threads", b.getI64IntegerAttr(cfg.threads())),
      b.getNamedAttr("dynamic_smem", b.getI64IntegerAttr(lay.total)),
      b.getNamedAttr("causal", b.getBoolAttr(window[1] == 0 && window[0] < 0)),
      b.getNamedAttr("window_left", b.getI64IntegerAttr(window[0])),
      b.getNamedAttr("window_right", b.getI64IntegerAttr(window[1])),
      b.getNamedAttr("softcap", b.getF64FloatAttr(cfg.softcap)),
      b.getNamedAttr("scale", b.getF64FloatAttr(
                                  u.getScaleLog2().convertToDouble() / kLog2e)),
      b.getNamedAttr("params", paramNames(b, hopper::kKernelParams)),
  };
  SmallVector<NamedAttribute> all(std::begin(facts), std::end(facts));
  // Optional keys (0 when absent): a packed variable-length batch's
  // kernel; the decoding kernel's split-KV (with <kernel>_combine beside
  // it) and GQA packing; a packed batch's page table; the small pages'
  // copies; CTAs resident a SM (1 when absent).
  if (cfg.varlen)
    all.push_back(b.getNamedAttr("varlen", b.getBoolAttr(true)));
  if (cfg.splitKv)
    all.push_back(b.getNamedAttr("split_kv", b.getBoolAttr(true)));
  if (cfg.packGqa)
    all.push_back(b.getNamedAttr("pack_gqa", b.getBoolAttr(true)));
  if (cfg.pagedKv)
    all.push_back(b.getNamedAttr("paged_kv", b.getBoolAttr(true)));
  // A paged kernel whose producer warps can copy pages of fewer rows than
  // block_n (the runtime passes pagedK ... pagedPages to it only, for the
  // pages it copies: fa3rt.h, FA3RT_COPY_ROWS).
  if (cfg.copiesSmallPages())
    all.push_back(b.getNamedAttr("paged_copy", b.getBoolAttr(true)));
  // ... and the most rows of a page it copies, where not the runtime's 16
  if (int64_t rows = cfg.copyRows())
    all.push_back(b.getNamedAttr("copy_rows", b.getI64IntegerAttr(rows)));
  if (cfg.ctasPerSm != 1)
    all.push_back(b.getNamedAttr("ctas_per_sm",
                                 b.getI64IntegerAttr(cfg.ctasPerSm)));
  // The query length the configuration was chosen for (0 when absent: any):
  // a launcher holding kernels of one attention picks by it.
  if (cfg.minSeqlenQ != 0)
    all.push_back(b.getNamedAttr("min_seqlen_q",
                                 b.getI64IntegerAttr(cfg.minSeqlenQ)));
  if (failed(setLaunchFacts(b, kernel, all, fail)))
    return failure();
  if (failed(verify(gpuModule)))
    return fail("internal error: the generated kernel does not verify");
  return success();
}

/// The backward's kernels for its tiled form `t` in `func`: the main one,
/// and beside it <kernel>_pre (attn.grad_preprocess: D = rowsum(dO o), the
/// dQ sums zeroed) and <kernel>_post (attn.grad_postprocess: dQ = scale dQ
/// sums), which the launcher runs before and after it (fa3rt_abi.def).
LogicalResult convertGrad(ModuleOp module, func::FuncOp func, TiledGrad t,
                          unsigned index) {
  TileGradUpdateOp u = t.update;
  auto fail = [&](const Twine &why) {
    return mlir::emitError(t.grid.getLoc(),
                           "cannot generate the Hopper kernel: ")
           << why;
  };
  if (failed(checkKernelName(func, fail)))
    return failure();
  Value tensors[] = {u.getQuery(), u.getKey(), u.getValue(), u.getGradOut(),
                     u.getLse(), t.finalize.getGradKey(),
                     t.finalize.getGradValue()};
  if (failed(checkTensorsAreArguments(func, tensors, "", fail)))
    return failure();
  auto recorded =
      t.range->getAttrOfType<HopperConfigAttr>(HopperConfigAttr::kAttrName);
  if (!recorded)
    return fail("its tiles carry no configuration (attn.hopper_config on "
                "attn.q_range): run attn-hopper-config before attn-tile");
  if (static_cast<int64_t>(u.getBlockM()) != recorded.getBlockM() ||
      static_cast<int64_t>(u.getBlockN()) != recorded.getBlockN())
    return fail("its tiles (" + Twine(u.getBlockM()) + " x " +
                Twine(u.getBlockN()) +
                ") are not those of its configuration");
  // The tile program the consumers' loop is lowered from.
  std::string why;
  Operation *where = nullptr;
  FailureOr<hopper::TiledGradCell> cell =
      hopper::matchTiledGradCell(t.range, u, t.finalize, why, where);
  if (failed(cell))
    return mlir::emitError(where->getLoc(),
                           "cannot generate the Hopper kernel: ")
           << why;
  FailureOr<hopper::GradKernelConfig> picked = hopper::gradConfig(
      u.getQuery(), u.getKey(), u.getValue(), u.getGradOut(),
      t.finalize.getGradKey(), t.finalize.getGradValue(), u.getWindow(),
      u.getSoftcap().convertToDouble(), u.getDeterministic(), recorded, why);
  if (failed(picked))
    return fail((why.rfind("the ", 0) == 0 ? "" : "unsupported ") + why);
  hopper::GradKernelConfig cfg = *picked;
  std::string base =
      func.getName().str() + (index ? "_" + std::to_string(index) : "");
  cfg.name = base + "_kernel";
  cfg.qRangeFn = cfg.name + "_q_range";
  cfg.visibleColsFn = cfg.name + "_visible_cols";
  Location loc = t.grid.getLoc();
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  FailureOr<gpu::GPUModuleOp> created = kernelModule(mb, module, base, loc, fail);
  if (failed(created))
    return failure();
  gpu::GPUModuleOp gpuModule = *created;
  gpu::GPUFuncOp kernel = hopper::buildGradKernel(mb, loc, gpuModule, cfg, *cell);
  hopper::buildGradAuxKernels(mb, loc, gpuModule, cfg.name, cfg.dtype,
                              cfg.headDim, cfg.deterministic);
  OpBuilder b = OpBuilder::atBlockBegin(gpuModule.getBody());
  buildRangeFn(b, loc, cfg.qRangeFn, t.range, buildQRange);
  buildVisibleColsFn(b, loc, cfg.visibleColsFn, u.getWindow());

  ArrayRef<int64_t> window = u.getWindow();
  hopper::GradSmemLayout lay = hopper::computeGradSmemLayout(cfg);
  SmallVector<NamedAttribute> facts = {
      b.getNamedAttr("kernel", b.getStringAttr(cfg.name)),
      b.getNamedAttr("source_func", b.getStringAttr(func.getName())),
      b.getNamedAttr("backward", b.getBoolAttr(true)),
      b.getNamedAttr("dtype", b.getStringAttr(cfg.dtype)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(cfg.headDim)),
      b.getNamedAttr("head_dim_v", b.getI64IntegerAttr(cfg.headDim)),
      b.getNamedAttr("block_m", b.getI64IntegerAttr(cfg.blockM)),
      b.getNamedAttr("block_n", b.getI64IntegerAttr(cfg.blockN)),
      b.getNamedAttr("stages", b.getI64IntegerAttr(cfg.stages)),
      // One CTA per (kv block, kv head, batch), numbered kv block fastest.
      b.getNamedAttr("grid", b.getStringAttr("tiles")),
      b.getNamedAttr("threads", b.getI64IntegerAttr(cfg.threads())),
      b.getNamedAttr("dynamic_smem", b.getI64IntegerAttr(lay.total)),
      b.getNamedAttr("causal", b.getBoolAttr(window[1] == 0 && window[0] < 0)),
      b.getNamedAttr("window_left", b.getI64IntegerAttr(window[0])),
      b.getNamedAttr("window_right", b.getI64IntegerAttr(window[1])),
      b.getNamedAttr("softcap", b.getF64FloatAttr(cfg.softcap)),
      b.getNamedAttr("scale", b.getF64FloatAttr(
                                  u.getScale().convertToDouble())),
      b.getNamedAttr("params", paramNames(b, hopper::kGradKernelParams)),
  };
  // a larger dQ workspace (its turn counters): the launcher must know
  if (cfg.deterministic)
    facts.push_back(b.getNamedAttr("deterministic", b.getBoolAttr(true)));
  if (failed(setLaunchFacts(b, kernel, facts, fail)))
    return failure();
  if (failed(verify(gpuModule)))
    return fail("internal error: the generated kernel does not verify");
  return success();
}

/// The buffer `v` views (through subviews, casts and reshapes).
Value rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Each attention becomes a kernel of its own, which the runtime launches
/// independently: two that share a buffer one of them writes (one reads the
/// other's output, or overwrites its input) would lose their order.
LogicalResult checkIndependent(MutableArrayRef<TiledAttention> found) {
  auto buffers = [](TiledAttention &t, bool writes) {
    SmallVector<Value> vs;
    if (writes) {
      vs.push_back(t.finalize.getOut());
      if (Value lse = t.finalize.getLse())
        vs.push_back(lse);
    } else {
      vs = {t.update.getQuery(), t.update.getKey(), t.update.getValue()};
    }
    for (Value &v : vs)
      v = rootBuffer(v);
    return vs;
  };
  for (auto [i, a] : llvm::enumerate(found))
    for (auto [j, b] : llvm::enumerate(found)) {
      if (i == j)
        continue;
      SmallVector<Value> written = buffers(a, true);
      SmallVector<Value> touched = buffers(b, false);
      llvm::append_range(touched, buffers(b, true));
      for (Value w : written)
        if (llvm::is_contained(touched, w))
          return mlir::emitError(b.grid.getLoc(),
                                 "cannot generate the Hopper kernel: this "
                                  "attention shares a buffer with another "
                                  "in the same function that writes it; each "
                                  "becomes a kernel launched on its own, so "
                                  "their order would be lost (put dependent "
                                  "attention in separate functions)");
    }
  return success();
}

/// Beside the backward's grid, its function may hold only what its other
/// two kernels do (convertGrad): D and the zeroed dQ sums
/// (attn.grad_preprocess) into the grid's buffers, dQ from the sums
/// (attn.grad_postprocess), and their buffers.
LogicalResult checkGradFunction(func::FuncOp func, TiledGrad &t) {
  for (Operation &op : func.getBody().getOps()) {
    if (&op == t.grid.getOperation() ||
        isa<func::ReturnOp, memref::AllocOp, memref::DeallocOp>(op) ||
        isMemoryEffectFree(&op))
      continue;
    if (auto pre = dyn_cast<GradPreprocessOp>(op)) {
      if (pre.getDelta() == t.update.getDelta() &&
          pre.getDqAcc() == t.update.getDqAcc())
        continue;
    } else if (auto post = dyn_cast<GradPostprocessOp>(op)) {
      if (post.getDqAcc() == t.update.getDqAcc())
        continue;
    }
    return op.emitOpError("would be lost: convert-attn-to-hopper replaces @")
           << func.getName()
           << " by its backward kernels, which compute D and dQ "
              "(attn.grad_preprocess and attn.grad_postprocess of the "
              "grid's buffers) and nothing else; keep other work out of "
              "that function";
  }
  return success();
}

struct ConvertAttnToHopperPass
    : public fa3::impl::ConvertAttnToHopperBase<ConvertAttnToHopperPass> {
  using ConvertAttnToHopperBase::ConvertAttnToHopperBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> done;
    bool bad = false;
    module.walk([&](Operation *op) {
      if (!isa<FlashAttentionOp, FlashAttentionVarlenOp>(op))
        return;
      op->emitOpError("convert-attn-to-hopper needs the tiled form: run "
                      "attn-hopper-config and attn-tile first");
      bad = true;
    });
    module.walk([&](FlashAttentionGradOp op) {
      op->emitOpError("convert-attn-to-hopper needs the tiled form: run "
                      "attn-hopper-config and attn-tile first");
      bad = true;
    });
    if (bad)
      return signalPassFailure();
    for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      SmallVector<TiledAttention> found;
      SmallVector<TiledGrad> grads;
      func.walk([&](scf::ParallelOp grid) {
        if (std::optional<TiledAttention> t = matchTiled<TiledAttention>(grid))
          found.push_back(*t);
        else if (std::optional<TiledGrad> g = matchTiled<TiledGrad>(grid))
          grads.push_back(*g);
        return WalkResult::skip();
      });
      if (found.empty() && grads.empty())
        continue;
      if (!grads.empty() && (grads.size() > 1 || !found.empty())) {
        mlir::emitError(grads.front().grid.getLoc(),
                        "cannot generate the Hopper kernel: a backward must "
                        "be alone in its function (put each attention in a "
                        "function of its own)");
        return signalPassFailure();
      }
      if (!grads.empty()) {
        if (failed(checkGradFunction(func, grads.front())) ||
            failed(convertGrad(module, func, grads.front(), 0)))
          return signalPassFailure();
        done.push_back(func);
        continue;
      }
      // The host function is replaced by its kernels: anything else it does
      // would be lost, so only index math, allocations and the grids may
      // stand beside the attention.
      for (Operation &op : func.getBody().getOps()) {
        bool isGrid = llvm::any_of(found, [&](TiledAttention &t) {
          return t.grid.getOperation() == &op;
        });
        if (isGrid || isa<func::ReturnOp, memref::AllocOp, memref::DeallocOp>(op) ||
            isMemoryEffectFree(&op))
          continue;
        op.emitOpError("would be lost: convert-attn-to-hopper replaces @")
            << func.getName()
            << " by its attention kernels; keep other work out of that "
               "function";
        return signalPassFailure();
      }
      if (failed(checkIndependent(found)))
        return signalPassFailure();
      for (auto [i, t] : llvm::enumerate(found))
        if (failed(convert(module, func, t, i)))
          return signalPassFailure();
      done.push_back(func);
    }
    // The kernels replace the host functions that held the computations.
    for (func::FuncOp f : done)
      f.erase();
    // Attention anywhere else (a gpu.func, another op's region) would be
    // left behind unconverted.
    WalkResult left = module.walk([&](Operation *op) {
      if (!isa<FlashAttentionOp, FlashAttentionVarlenOp, KvRangeOp,
               TileUpdateOp, TileFinalizeOp, QRangeOp, TileGradUpdateOp,
               TileGradFinalizeOp>(op))
        return WalkResult::advance();
      Operation *fn = op->getParentOfType<FunctionOpInterface>();
      if (!fn)
        fn = op->getParentOp();
      mlir::emitError(op->getLoc(), "'")
          << op->getName()
          << "' is not converted: convert-attn-to-hopper turns host functions "
             "(func.func) holding attention into kernels, not attention in "
          << fn->getName();
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      return signalPassFailure();
    if (!done.empty())
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      UnitAttr::get(module.getContext()));
  }
};
} // namespace
