//===- TiledCell.cpp - the tile programs the consumers lower --------------===//
//
// attn-tile writes one tile's program as: the state buffers allocated and
// filled (row max -inf, row sums 0, accumulator 0), attn.kv_range, an
// scf.for over its blocks whose body computes the block's first column and
// whether it needs the mask and takes one step (attn.tile_update, masked
// and unmasked in the two arms of an scf.if), and attn.tile_finalize.
// KernelBuilder lowers exactly that: the loop into the consumers' mainloop
// over the tile's blocks, the index arithmetic into i32, the step into
// the block's products and softmax (the mask under the scf.if's
// condition), the state into fragments carried by the loop, the finalize
// into the epilogue. The backward's program (matchTiledGradCell) is the
// same idea around attn.q_range: dK's and dV's sums filled with 0, an
// scf.for over the kv head's q heads around an scf.for over the range's
// m-blocks, one attn.tile_grad_update a block (or the boundary split), and
// attn.tile_grad_finalize; GradKernelBuilder lowers the two loops into
// the consumers' loop over steps. Anything else in either program is
// refused here, by name, rather than lowered wrong.
//
//===----------------------------------------------------------------------===//

#include "TiledCell.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

using namespace mlir;
using namespace fa3;
using namespace fa3::attn;

std::optional<double> fa3::hopper::lazyThreshold(Operation *tileUpdate) {
  std::optional<APFloat> t = cast<TileUpdateOp>(tileUpdate).getRescaleThreshold();
  if (!t || t->convertToDouble() <= 0)
    return std::nullopt;
  return t->convertToDouble();
}

namespace {
bool isIndexOrI1(Type t) { return t.isIndex() || t.isInteger(1); }

/// An op the lowering rebuilds in i32 with the same meaning for values in
/// i32's range: signed arithmetic, compares, selects and bit logic on
/// index and i1, a constant that fits 32 bits (not casts, shifts or
/// unsigned division, which 32 bits change).
bool isIndexArith(Operation *op) {
  if (!isa<arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
           arith::DivSIOp, arith::RemSIOp, arith::MinSIOp, arith::MaxSIOp,
           arith::CmpIOp, arith::SelectOp, arith::AndIOp, arith::OrIOp,
           arith::XOrIOp>(op) ||
      op->getNumResults() != 1 || !isIndexOrI1(op->getResult(0).getType()) ||
      !llvm::all_of(op->getOperandTypes(), isIndexOrI1))
    return false;
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto v = dyn_cast<IntegerAttr>(c.getValue());
    return v && v.getValue().getSExtValue() >=
                    std::numeric_limits<int32_t>::min() &&
           v.getValue().getSExtValue() <= std::numeric_limits<int32_t>::max();
  }
  return true;
}

/// The two steps of a boundary split agree but for `masked`.
template <typename StepOp> bool sameStep(StepOp a, StepOp b) {
  if (a->getOperands() != b->getOperands())
    return false;
  NamedAttrList x(a->getAttrDictionary()), y(b->getAttrDictionary());
  x.erase(a.getMaskedAttrName());
  y.erase(b.getMaskedAttrName());
  return x.getDictionary(a->getContext()) == y.getDictionary(b->getContext());
}

/// The one step of an scf.if arm, with nothing else in it.
template <typename StepOp> StepOp onlyStep(Region &r) {
  if (r.empty() || !r.hasOneBlock())
    return {};
  Block &blk = r.front();
  if (blk.getOperations().size() != 2)
    return {};
  return dyn_cast<StepOp>(blk.front());
}

/// `v` is `x * c` (either operand order) for the constant c.
bool isProductWith(Value v, Value x, int64_t c) {
  auto mul = v.getDefiningOp<arith::MulIOp>();
  if (!mul)
    return false;
  Value a = mul.getLhs(), k = mul.getRhs();
  if (a != x)
    std::swap(a, k);
  return a == x && getConstantIntValue(k) == c;
}

/// Whether the lowering can rebuild `v` in i32: the loop's variable, the
/// schedule op's results, constants, and pure index arithmetic of the
/// loop's body on them (each value checked once).
class Lowerable {
public:
  Lowerable(scf::ForOp loop, Operation *range) : loop(loop), range(range) {}
  bool operator()(Value v) {
    if (v == loop.getInductionVar() || v.getDefiningOp() == range)
      return true;
    auto it = seen.find(v);
    if (it != seen.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    bool ok = def && isIndexArith(def) &&
              (isa<arith::ConstantOp>(def) ||
               (def->getBlock() == loop.getBody() &&
                llvm::all_of(def->getOperands(),
                             [&](Value x) { return (*this)(x); })));
    seen[v] = ok;
    return ok;
  }

private:
  scf::ForOp loop;
  Operation *range;
  DenseMap<Value, bool> seen;
};

/// The one step of a tile program's loop over blocks (`blocks`: "kv
/// blocks" or "m-blocks", `block` one of them, `rangeName` the schedule
/// op's name): index arithmetic and one StepOp, or attn-tile's boundary
/// split of it (its condition lowerable); `masked` / `unmasked` its forms,
/// `out` them and the split's condition for the lowering.
template <typename StepOp>
LogicalResult matchStep(scf::ForOp loop, Lowerable &lowerable,
                        StringRef blocks, StringRef block, StringRef rangeName,
                        StepOp &masked, StepOp &unmasked, hopper::TiledStep &out,
                        std::string &why, Operation *&where) {
  auto fail = [&](Operation *op, const Twine &what) {
    where = op;
    why = what.str();
    return failure();
  };
  StringRef stepName = StepOp::getOperationName();
  Operation *step = nullptr;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (isIndexArith(&op))
      continue;
    if (!isa<StepOp, scf::IfOp>(op))
      return fail(&op, "the loop over " + blocks +
                           " may hold only index arithmetic and one " +
                           stepName + " (or attn-tile's boundary split of it)");
    if (step)
      return fail(&op, "the loop over " + blocks + " takes one step a block");
    step = &op;
    if (auto u = dyn_cast<StepOp>(op)) {
      (u.getMasked() ? masked : unmasked) = u;
      continue;
    }
    auto ifOp = cast<scf::IfOp>(op);
    masked = onlyStep<StepOp>(ifOp.getThenRegion());
    unmasked = onlyStep<StepOp>(ifOp.getElseRegion());
    if (ifOp.getNumResults() || !masked || !unmasked || !masked.getMasked() ||
        unmasked.getMasked() || !sameStep(masked, unmasked))
      return fail(&op, "a branch in the loop over " + blocks +
                           " must be the boundary split: the masked " +
                           stepName + " in its then arm, the same step "
                           "unmasked in its else arm");
    if (!lowerable(ifOp.getCondition()))
      return fail(&op, "the boundary split's condition must be index "
                       "arithmetic of the " + block + " and " + rangeName);
    out.boundary = ifOp.getCondition();
  }
  out.masked = masked;
  out.unmasked = unmasked;
  return success();
}
} // namespace

FailureOr<hopper::TiledCell>
fa3::hopper::matchTiledCell(KvRangeOp range, TileUpdateOp update,
                            TileFinalizeOp finalize, std::string &why,
                            Operation *&where) {
  auto fail = [&](Operation *op, const Twine &what) {
    where = op;
    why = what.str();
    return failure();
  };
  TiledCell cell;
  cell.range = range;
  cell.finalize = finalize;
  Block *tile = range->getBlock();

  // The loop over the range's kv blocks, in the tile's block.
  auto loop = update->getParentOfType<scf::ForOp>();
  if (!loop || loop->getBlock() != tile)
    return fail(update, "the step must stand in an scf.for over the kv "
                        "blocks, in the block of its attn.kv_range");
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (loop.getLowerBound() != range.getLo() ||
      loop.getUpperBound() != range.getHi() || step != 1 ||
      !loop.getInitArgs().empty())
    return fail(loop, "the loop over kv blocks must run from attn.kv_range's "
                      "lo to its hi in steps of 1, carrying no values");
  if (finalize->getBlock() != tile || !loop->isBeforeInBlock(finalize))
    return fail(finalize, "attn.tile_finalize must follow the loop over kv "
                          "blocks in its block");
  cell.kvLoop = loop;

  // The body: index arithmetic and one step, which the lowering rebuilds
  // in i32 (Lowerable).
  Lowerable lowerable(loop, range);
  TileUpdateOp masked, unmasked;
  if (failed(matchStep(loop, lowerable, "kv blocks", "kv block",
                       KvRangeOp::getOperationName(), masked, unmasked,
                       cell.step, why, where)))
    return failure();
  TileUpdateOp any = masked ? masked : unmasked;
  if (!any || (update != masked && update != unmasked))
    return fail(loop, "the loop over kv blocks must hold the attention's "
                      "attn.tile_update");
  if (!lowerable(any.getCol0()))
    return fail(any, "the step's first column must be index arithmetic of "
                     "the kv block and attn.kv_range");
  if (any.getRow0() != range.getRow0() || finalize.getRow0() != range.getRow0())
    return fail(any, "the step and attn.tile_finalize must take the rows "
                     "of the attn.kv_range");
  // The kernel's tiles and mask are the range's (whose tiles the
  // configuration's are, by its verifier).
  if (any.getBlockM() != range.getBlockM() ||
      any.getBlockN() != range.getBlockN() ||
      finalize.getBlockM() != range.getBlockM() ||
      any.getWindow() != range.getWindow())
    return fail(any, "the step's tiles and window must be its "
                     "attn.kv_range's");

  // The state: allocated in the tile, filled with a constant before the
  // loop, read and written only by the step and the finalize.
  Value state[] = {any.getRowMax(), any.getRowSum(), any.getAcc()};
  if (state[0] == state[1] || state[0] == state[2] || state[1] == state[2])
    return fail(any, "the step's row max, row sums and accumulator must be "
                     "three buffers");
  Value finalState[] = {finalize.getRowMax(), finalize.getRowSum(),
                        finalize.getAcc()};
  for (auto [i, buf] : llvm::enumerate(state)) {
    if (buf != finalState[i])
      return fail(finalize, "attn.tile_finalize must take the step's state");
    auto alloc = buf.getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != tile)
      return fail(any, "the step's state must be buffers allocated in its "
                       "tile");
    // -inf, 0, 0: the kernel keeps each thread's partial row sums (a
    // quad's four add up at the end) and scales FP8's O after the loop,
    // so other starting values would not mean the same there.
    const char *rule = "the step's state may only be filled once before the "
                       "loop (row max -inf, row sums and accumulator 0), "
                       "updated by the step and read by attn.tile_finalize";
    for (Operation *user : buf.getUsers()) {
      bool fillBefore = isa<linalg::FillOp>(user) &&
                        user->getBlock() == tile &&
                        user->isBeforeInBlock(loop);
      if (!fillBefore && user != masked && user != unmasked &&
          user != finalize && !isa<memref::DeallocOp>(user))
        return fail(user, rule);
    }
    // Its fill, the one before the loop (in the block's order).
    bool filled = false;
    for (Operation &op : tile->getOperations()) {
      auto fill = dyn_cast<linalg::FillOp>(op);
      if (!fill || !llvm::is_contained(fill.getOutputs(), buf))
        continue;
      auto value = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
      auto f = value ? dyn_cast<FloatAttr>(value.getValue()) : FloatAttr();
      if (!f || !f.getType().isF32() || filled ||
          static_cast<uint32_t>(f.getValue().bitcastToAPInt().getZExtValue()) !=
              cell.stateInit[i])
        return fail(fill, rule);
      filled = true;
    }
    if (!filled)
      return fail(any, "the step's state must be filled before the loop");
  }
  return cell;
}

FailureOr<hopper::TiledGradCell>
fa3::hopper::matchTiledGradCell(QRangeOp range, TileGradUpdateOp update,
                                TileGradFinalizeOp finalize, std::string &why,
                                Operation *&where) {
  auto fail = [&](Operation *op, const Twine &what) {
    where = op;
    why = what.str();
    return failure();
  };
  TiledGradCell cell;
  cell.range = range;
  cell.finalize = finalize;
  Block *tile = range->getBlock();
  auto grid = dyn_cast<scf::ParallelOp>(range->getParentOp());
  if (!grid || grid.getNumLoops() != 3)
    return fail(range, "attn.q_range must stand in attn-tile's grid over "
                       "(kv block, kv head, batch)");
  Value nIv = grid.getInductionVars()[0], hkIv = grid.getInductionVars()[1],
        bIv = grid.getInductionVars()[2];
  if (!isProductWith(range.getCol0(), nIv, update.getBlockN()))
    return fail(range, "attn.q_range's first column must be the kv block "
                       "times block_n (the keys the CTA loads)");

  // The loop over the range's m-blocks, in the loop over the kv head's q
  // heads, in the tile's block.
  auto mLoop = update->getParentOfType<scf::ForOp>();
  auto headLoop = mLoop ? mLoop->getParentOfType<scf::ForOp>() : scf::ForOp();
  if (!headLoop || headLoop->getBlock() != tile ||
      mLoop->getBlock() != headLoop.getBody())
    return fail(update, "the step must stand in an scf.for over the m-blocks "
                        "of attn.q_range, in an scf.for over the kv head's q "
                        "heads, in the block of the attn.q_range");
  auto qType = cast<MemRefType>(update.getQuery().getType());
  auto kType = cast<MemRefType>(update.getKey().getType());
  int64_t hq = qType.getDimSize(1), hkv = kType.getDimSize(1);
  std::optional<int64_t> group = getConstantIntValue(headLoop.getUpperBound());
  if (getConstantIntValue(headLoop.getLowerBound()) != 0 || !group ||
      ShapedType::isDynamic(hq) || ShapedType::isDynamic(hkv) || hkv == 0 ||
      *group != hq / hkv ||
      getConstantIntValue(headLoop.getStep()) != 1 ||
      !headLoop.getInitArgs().empty())
    return fail(headLoop, "the loop over q heads must run from 0 to the q "
                          "heads of a kv head (q's heads / k's) in steps of "
                          "1, carrying no values");
  std::optional<int64_t> mStep = getConstantIntValue(mLoop.getStep());
  if (mLoop.getLowerBound() != range.getLo() ||
      mLoop.getUpperBound() != range.getHi() || mStep != 1 ||
      !mLoop.getInitArgs().empty())
    return fail(mLoop, "the loop over m-blocks must run from attn.q_range's "
                       "lo to its hi in steps of 1, carrying no values");
  if (finalize->getBlock() != tile || !headLoop->isBeforeInBlock(finalize))
    return fail(finalize, "attn.tile_grad_finalize must follow the loop over "
                          "q heads in its block");
  for (Operation &op : headLoop.getBody()->without_terminator())
    if (&op != mLoop && !isIndexArith(&op))
      return fail(&op, "the loop over q heads may hold only index arithmetic "
                       "and the loop over m-blocks");
  cell.headLoop = headLoop;
  cell.mLoop = mLoop;

  // The body: index arithmetic and one step, which the lowering rebuilds
  // in i32 (Lowerable).
  Value mb = mLoop.getInductionVar();
  Lowerable lowerable(mLoop, range);
  TileGradUpdateOp masked, unmasked;
  if (failed(matchStep(mLoop, lowerable, "m-blocks", "m-block",
                       QRangeOp::getOperationName(), masked, unmasked,
                       cell.step, why, where)))
    return failure();
  TileGradUpdateOp any = masked ? masked : unmasked;
  if (!any || (update != masked && update != unmasked))
    return fail(mLoop, "the loop over m-blocks must hold the backward's "
                       "attn.tile_grad_update");

  // Its tile: the kernel's CTA (kv block, kv head, batch) and the q head
  // and rows its loops walk, whose Q and dO the producer loads.
  if (any.getBatch() != bIv || any.getKvhead() != hkIv ||
      any.getCol0() != range.getCol0() || finalize.getBatch() != bIv ||
      finalize.getKvhead() != hkIv || finalize.getCol0() != range.getCol0())
    return fail(any, "the step and attn.tile_grad_finalize must take the "
                     "grid's batch and kv head and the attn.q_range's "
                     "first column");
  auto head = any.getQhead().getDefiningOp<arith::AddIOp>();
  Value g = headLoop.getInductionVar();
  if (!head || head->getBlock() != headLoop.getBody() ||
      !((head.getLhs() == g && isProductWith(head.getRhs(), hkIv, *group)) ||
        (head.getRhs() == g && isProductWith(head.getLhs(), hkIv, *group))))
    return fail(any, "the step's q head must be the kv head's first q head "
                     "plus the loop's: kv head * " +
                         Twine(*group) + " + g");
  if (!isProductWith(any.getRow0(), mb, any.getBlockM()))
    return fail(any, "the step's first row must be the m-block times "
                     "block_m (the rows the producer loads)");
  if (any.getBlockM() != range.getBlockM() ||
      any.getBlockN() != range.getBlockN() ||
      finalize.getBlockN() != range.getBlockN() ||
      any.getWindow() != range.getWindow())
    return fail(any, "the step's tiles and window must be its "
                     "attn.q_range's");

  // The state: dK's and dV's sums, allocated in the tile, filled with 0
  // before the loops, read and written only by the step and the finalize.
  Value state[] = {any.getDkAcc(), any.getDvAcc()};
  if (state[0] == state[1])
    return fail(any, "the step's dK and dV sums must be two buffers");
  Value finalState[] = {finalize.getDkAcc(), finalize.getDvAcc()};
  const char *rule = "the step's dK and dV sums may only be filled with 0 "
                     "once before the loops, updated by the step and read "
                     "by attn.tile_grad_finalize";
  for (auto [i, buf] : llvm::enumerate(state)) {
    if (buf != finalState[i])
      return fail(finalize, "attn.tile_grad_finalize must take the step's "
                            "dK and dV sums");
    auto alloc = buf.getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != tile)
      return fail(any, "the step's dK and dV sums must be buffers allocated "
                       "in its tile");
    bool filled = false;
    for (Operation *user : buf.getUsers()) {
      if (user == masked || user == unmasked || user == finalize ||
          isa<memref::DeallocOp>(user))
        continue;
      auto fill = dyn_cast<linalg::FillOp>(user);
      auto value = fill ? fill.getInputs()[0].getDefiningOp<arith::ConstantOp>()
                        : arith::ConstantOp();
      auto f = value ? dyn_cast<FloatAttr>(value.getValue()) : FloatAttr();
      if (!f || !f.getValue().isPosZero() || filled ||
          fill->getBlock() != tile || !fill->isBeforeInBlock(headLoop))
        return fail(user, rule);
      filled = true;
    }
    if (!filled)
      return fail(any, "the step's dK and dV sums must be filled with 0 "
                       "before the loops");
  }
  return cell;
}
