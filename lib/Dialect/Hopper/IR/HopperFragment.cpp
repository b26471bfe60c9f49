//===- HopperFragment.cpp - register fragments and their math -------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include <tuple>

using namespace mlir;
using namespace fa3::hopper;

//===----------------------------------------------------------------------===//
// FragmentType
//===----------------------------------------------------------------------===//

// !hopper.frag<64x128xf32>, !hopper.frag<64x128xbf16>, !hopper.frag<64xf32>
Type FragmentType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/false) ||
      parser.parseType(elementType) || parser.parseGreater())
    return Type();
  return parser.getChecked<FragmentType>(
      parser.getContext(), ArrayRef<int64_t>(shape), elementType);
}

void FragmentType::print(AsmPrinter &printer) const {
  printer << "<";
  for (int64_t d : getShape())
    printer << d << "x";
  printer << getElementType() << ">";
}

LogicalResult
FragmentType::verify(function_ref<InFlightDiagnostic()> emitError,
                     ArrayRef<int64_t> shape, Type elementType) {
  // The wgmma accumulator layout covers 64 rows (m64nNk16): a warpgroup.
  if (shape.empty() || shape.size() > 2 || shape[0] != 64)
    return emitError() << "a fragment is 64 rows (a warpgroup's wgmma tile), "
                          "as 64xN or 64 (one value per row)";
  if (shape.size() == 1) {
    if (!elementType.isF32())
      return emitError() << "a row vector fragment holds f32, not "
                         << elementType;
    return success();
  }
  const bool fp8 = isa<Float8E4M3FNType>(elementType);
  if (!elementType.isF32() && !elementType.isBF16() && !elementType.isF16() &&
      !fp8)
    return emitError() << "fragment element type must be f32, bf16, f16 or "
                          "f8E4M3FN, not "
                       << elementType;
  // Columns come in n8 blocks (f32); a 16-bit (8-bit) tile is a wgmma A
  // operand, whose k-steps are 16 (32) columns.
  int64_t quantum = elementType.isF32() ? 8 : fp8 ? 32 : 16;
  if (shape[1] < quantum || shape[1] > 256 || shape[1] % quantum != 0)
    return emitError() << "a 64xN fragment of " << elementType
                       << " needs N a multiple of " << quantum
                       << " up to 256, got " << shape[1];
  return success();
}

int64_t FragmentType::getRegisters() const {
  if (isRowVector())
    return 2;
  if (getElementType().isF32())
    return getColumns() / 2;
  return isa<Float8E4M3FNType>(getElementType()) ? getColumns() / 8
                                                 : getColumns() / 4;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

namespace {
bool is16Bit(Type t) { return t.isBF16() || t.isF16(); }
bool isFp8(Type t) { return isa<Float8E4M3FNType>(t); }

LogicalResult verifyF32Tile(Operation *op, FragmentType t, StringRef what) {
  if (!t.getElementType().isF32())
    return op->emitOpError() << what << " must be an f32 fragment, got " << t;
  return success();
}
} // namespace

LogicalResult WgmmaSSOp::verify() {
  FragmentType d = getD().getType();
  Type ab = getOperandType();
  if (!is16Bit(ab) && !isFp8(ab))
    return emitOpError("operands must be bf16 or f16 (k-steps of 16) or "
                       "f8E4M3FN (k-steps of 32), got ")
           << ab;
  if (failed(verifyF32Tile(*this, d, "the result")))
    return failure();
  const int64_t kStep = isFp8(ab) ? 32 : 16;
  if (getK() % kStep != 0)
    return emitOpError("k must be a multiple of ")
           << kStep << " (the k-step of " << ab << "), got " << getK();
  if (isFp8(ab) && (getAMnMajor() || getBMnMajor()))
    return emitOpError("8-bit operands must both be K-major (wgmma has no "
                       "transposed FP8 form)");
  // Descriptors address 16-byte units: boxes must be whole units apart.
  // An MN-major operand's k-steps stay in its box (rows of 128 bytes):
  // its box distance is the descriptor's, and must be 0 here.
  for (auto [name, bytes, mnMajor] :
       {std::tuple<const char *, int64_t, bool>{"A", getABoxBytes(),
                                                getAMnMajor()},
        {"B", getBBoxBytes(), getBMnMajor()}}) {
    if (mnMajor && bytes != 0)
      return emitOpError() << "an MN-major operand steps along its rows: "
                           << name << "'s box distance must be 0, got "
                           << bytes;
    if (!mnMajor && (bytes % 16 != 0 || bytes <= 0))
      return emitOpError() << "box distances must be positive multiples of "
                              "16 bytes, got "
                           << bytes << " for " << name;
  }
  return success();
}

LogicalResult WgmmaRSOp::verify() {
  FragmentType a = getA().getType(), c = getC().getType();
  if (!is16Bit(a.getElementType()) && !isFp8(a.getElementType()))
    return emitOpError("the register A operand must be a bf16, f16 or "
                       "f8E4M3FN fragment, got ")
           << a;
  if (failed(verifyF32Tile(*this, c, "the accumulator")))
    return failure();
  // An 8-bit A's K-major B: 128-byte swizzle rows of K, in boxes of N
  // rows, b_box_bytes apart where K spans more than one; each box starts
  // on a 1024-byte swizzle atom and holds its N rows.
  const bool fp8 = isFp8(a.getElementType());
  std::optional<uint64_t> box = getBBoxBytes();
  if (box && !fp8)
    return emitOpError("b_box_bytes is an 8-bit A's (a 16-bit A's B is "
                       "N-major: its k-steps advance along the rows)");
  if (fp8 && a.getColumns() > kSwizzleBytes && !box)
    return emitOpError("an 8-bit A with K ")
           << a.getColumns()
           << " needs b_box_bytes (B's K-major rows are 128-byte boxes; K "
              "spans more than one)";
  if (box && (*box % 1024 != 0 ||
              *box < static_cast<uint64_t>(c.getColumns()) * kSwizzleBytes))
    return emitOpError("b_box_bytes must be a multiple of 1024 (a swizzle "
                       "atom) of at least N rows of 128 bytes (")
           << c.getColumns() * kSwizzleBytes << "), got " << *box;
  // wgmma's N is 8..256 in steps of 8 (f32 accumulate, 16-bit inputs).
  if (c.getColumns() % 8 != 0)
    return emitOpError("N must be a multiple of 8, got ") << c.getColumns();
  return success();
}

LogicalResult WgmmaWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  llvm::append_range(inferred, operands.getTypes());
  return success();
}

LogicalResult WgmmaWaitOp::verify() {
  if (getFragments().getTypes() != getReady().getTypes())
    return emitOpError("results must have the types of the operands");
  return success();
}

LogicalResult SoftcapOp::verify() {
  return verifyF32Tile(*this, getScores().getType(), "the scores");
}

LogicalResult MaskOp::verify() {
  if (getGroup() && getTransposed())
    return emitOpError("GQA packing (group) is a forward mask's: the rows of "
                       "a transposed tile are keys");
  return verifyF32Tile(*this, getScores().getType(), "the scores");
}

LogicalResult BandMaskOp::verify() {
  return verifyF32Tile(*this, getScores().getType(), "the scores");
}

LogicalResult LoadColumnsOp::verify() {
  return verifyF32Tile(*this, getResult().getType(), "the result");
}

LogicalResult StageRowsOp::verify() {
  // one or more rows per lane
  if (getRows() <= 0 || getRows() % 32 != 0)
    return emitOpError("rows must be a positive multiple of 32 (the lanes of "
                       "a warp), got ")
           << getRows();
  return success();
}

/// A per-query vector operand: a fragment (of the tile's type: the op's
/// trait), or `columns %smem[%off]` (both parts), not both.
static LogicalResult verifyColumnsOperand(Operation *op, StringRef name,
                                          Value frag, Value smem,
                                          Value offset) {
  if (bool(smem) != bool(offset))
    return op->emitOpError("columns takes a shared memory pointer and a byte "
                           "offset together");
  if (bool(frag) == bool(smem))
    return op->emitOpError("takes ")
           << name << " as a fragment or as columns %smem[%off], "
           << (frag ? "not both" : "got neither");
  return success();
}

/// The `columns` form reads shared memory through its pointer operand; the
/// fragment form is pure (and speculatable).
static void readsColumns(
    MutableOperandRange smem,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  if (!smem.empty())
    effects.emplace_back(MemoryEffects::Read::get(), &smem[0],
                         SideEffects::DefaultResource::get());
}

LogicalResult GradProbsOp::verify() {
  if (failed(verifyF32Tile(*this, getScores().getType(), "the scores")))
    return failure();
  return verifyColumnsOperand(*this, "lse", getLse(), getSmem(), getOffset());
}

void GradProbsOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  readsColumns(getSmemMutable(), effects);
}

Speculation::Speculatability GradProbsOp::getSpeculatability() {
  return getSmem() ? Speculation::NotSpeculatable : Speculation::Speculatable;
}

LogicalResult GradScoresOp::verify() {
  if (failed(verifyF32Tile(*this, getP().getType(), "p")))
    return failure();
  return verifyColumnsOperand(*this, "delta", getDelta(), getSmem(),
                              getOffset());
}

void GradScoresOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  readsColumns(getSmemMutable(), effects);
}

Speculation::Speculatability GradScoresOp::getSpeculatability() {
  return getSmem() ? Speculation::NotSpeculatable : Speculation::Speculatable;
}

LogicalResult GradSoftcapOp::verify() {
  return verifyF32Tile(*this, getDs().getType(), "ds");
}

LogicalResult StoreSharedOp::verify() {
  FragmentType t = getTile().getType();
  if (!is16Bit(t.getElementType()))
    return emitOpError("stores a bf16 or f16 tile (a wgmma operand), got ")
           << t;
  // Part of a box's rows: the tile lies inside the one box.
  if (getColumn() && t.getColumns() >= 64)
    return emitOpError("a tile stored at a column is part of one 64-column "
                       "box: at most 48 columns wide, got ")
           << t;
  // Boxes of 64 rows x 128 bytes; a second box must not overlap the first.
  if (t.getColumns() > 64 && (getBoxBytes() < 64 * 128 || getBoxBytes() % 1024 != 0))
    return emitOpError("a tile wider than 64 columns is stored as boxes at "
                       "least 8192 bytes apart, on 1024-byte swizzle atoms; "
                       "got box_bytes ")
           << getBoxBytes();
  return success();
}

LogicalResult LoadSharedOp::verify() {
  FragmentType t = getTile().getType();
  Type et = t.getElementType();
  if (!is16Bit(et) && !isFp8(et))
    return emitOpError("loads a bf16, f16 or f8E4M3FN tile (a wgmma A "
                       "operand), got ")
           << t;
  // (The type's N makes whole 32-byte k-steps, one ldmatrix.x4 each.)
  // Boxes of 64 rows x 128 bytes.
  const int64_t rowBytes = t.getColumns() * et.getIntOrFloatBitWidth() / 8;
  if (rowBytes > 128 && (getBoxBytes() < 64 * 128 || getBoxBytes() % 1024 != 0))
    return emitOpError("a tile wider than 128 bytes lies in boxes at least "
                       "8192 bytes apart, on 1024-byte swizzle atoms; got "
                       "box_bytes ")
           << getBoxBytes();
  return success();
}

LogicalResult SoftmaxStepOp::verify() {
  FragmentType s = getScores().getType();
  if (failed(verifyF32Tile(*this, s, "the scores")))
    return failure();
  if (getP().getType() != s)
    return emitOpError("p must have the scores' type ") << s;
  if (bool(getMOld()) != bool(getLOld()))
    return emitOpError("the state is m_old and l_old together, or neither "
                       "(the row's first block)");
  // The kernel's threshold is in log2 units; exp2 of more than 2^15 would
  // leave too little headroom in the f32 sums (attn-tile's range too).
  double tau = getRescaleThreshold().convertToDouble();
  if (!(tau >= 0.0 && tau <= 15.0))
    return emitOpError("rescale_threshold must be within [0, 15] (log2 "
                       "units), got ")
           << tau;
  return success();
}

// hopper.softmax_step %s scale %sl2 [state(%m, %l)] [threshold T]
//   [attr-dict] : !hopper.frag<64xNxf32>, !hopper.frag<64xf32>
ParseResult SoftmaxStepOp::parse(OpAsmParser &parser, OperationState &state) {
  OpAsmParser::UnresolvedOperand scores, scale, mOld, lOld;
  bool hasState = false;
  double threshold = 0.0;
  Type scoresType, rowsType;
  Builder &b = parser.getBuilder();
  if (parser.parseOperand(scores) || parser.parseKeyword("scale") ||
      parser.parseOperand(scale))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("state"))) {
    hasState = true;
    if (parser.parseLParen() || parser.parseOperand(mOld) ||
        parser.parseComma() || parser.parseOperand(lOld) ||
        parser.parseRParen())
      return failure();
  }
  if (succeeded(parser.parseOptionalKeyword("threshold")) &&
      parser.parseFloat(threshold))
    return failure();
  if (parser.parseOptionalAttrDict(state.attributes) || parser.parseColon() ||
      parser.parseType(scoresType) || parser.parseComma() ||
      parser.parseType(rowsType))
    return failure();
  if (parser.resolveOperand(scores, scoresType, state.operands) ||
      parser.resolveOperand(scale, b.getF32Type(), state.operands))
    return failure();
  if (hasState &&
      (parser.resolveOperand(mOld, rowsType, state.operands) ||
       parser.resolveOperand(lOld, rowsType, state.operands)))
    return failure();
  state.addAttribute(getRescaleThresholdAttrName(state.name),
                     b.getF64FloatAttr(threshold));
  state.addAttribute(getOperandSegmentSizesAttrName(state.name),
                     b.getDenseI32ArrayAttr({1, 1, hasState, hasState}));
  state.addTypes({scoresType, rowsType, rowsType, rowsType, b.getI1Type()});
  return success();
}

void SoftmaxStepOp::print(OpAsmPrinter &p) {
  p << " " << getScores() << " scale " << getScale();
  if (getMOld())
    p << " state(" << getMOld() << ", " << getLOld() << ")";
  if (getRescaleThreshold().convertToDouble() != 0.0)
    p << " threshold " << getRescaleThreshold();
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getRescaleThresholdAttrName(),
                           getOperandSegmentSizesAttrName()});
  p << " : " << getScores().getType() << ", " << getMNew().getType();
}

LogicalResult ScaleRowsOp::verify() {
  return verifyF32Tile(*this, getTile().getType(), "the tile");
}

LogicalResult ScaleKeyBlocksOp::verify() {
  FragmentType t = getTile().getType();
  if (failed(verifyF32Tile(*this, t, "the tile")))
    return failure();
  // Column c < N of a tile whose first key is k0 % 128 <= 120 lies in block
  // (k0 % 128 + c) / 128 <= (120 + N - 1) / 128; counted for any k0 % 128
  // below 128 as (126 + N) / 128 (128: kScaleKeyBlock).
  const int64_t need = (kScaleKeyBlock - 2 + t.getColumns()) / kScaleKeyBlock + 1;
  if (static_cast<int64_t>(getFactors().size()) != need)
    return emitOpError("a tile of ")
           << t.getColumns() << " columns needs " << need
           << " factors (the 128-key blocks its keys can reach), got "
           << getFactors().size();
  return success();
}

LogicalResult TruncOp::verify() {
  FragmentType in = getTile().getType(), out = getResult().getType();
  if (!in.getElementType().isF32() ||
      (!is16Bit(out.getElementType()) && !isFp8(out.getElementType())) ||
      in.getShape() != out.getShape())
    return emitOpError("rounds an f32 tile to a bf16, f16 or f8E4M3FN tile "
                       "of the same shape, not ")
           << in << " to " << out;
  return success();
}

LogicalResult FragmentFillOp::verify() {
  if (getValue().getType() != getResult().getType().getElementType())
    return emitOpError("the value's type must be the fragment's element type");
  return success();
}
