//===- AttnOps.cpp - the attn dialect: ops and verifiers ------------------===//

#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <cstdint>

using namespace mlir;
using namespace fa3::attn;

#include "fa3/Dialect/Attn/IR/AttnOpsDialect.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fa3/Dialect/Attn/IR/AttnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fa3/Dialect/Attn/IR/AttnOpsAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// flash_attention
//===----------------------------------------------------------------------===//

// Largest head dim any pipeline supports (FA3 goes up to 256).
static constexpr int64_t kMaxHeadDim = 256;
// Window sides beyond this are refused: launch facts and the kernel's index
// math are 32-bit (a side at least Skv is the same as unbounded anyway).
static constexpr int64_t kMaxWindow = (int64_t(1) << 31) - 1;
// Scale and softcap are folded into f32 constants (scale * log2 e,
// scale / softcap, softcap * log2 e): these bounds (said as 1e30 and 1e-6
// in the messages) keep every one finite.
static constexpr double kMaxScale = 1e30;
static constexpr double kMinSoftcap = 1e-6, kMaxSoftcap = 1e30;

/// The scale in effect: the attribute, or 1/sqrt(D) with D dim `dimAxis`
/// of q (the same rule for every attention op).
static float effectiveScale(FloatAttr scale, Value q, unsigned dimAxis) {
  if (scale)
    return scale.getValueAsDouble();
  int64_t d = cast<ShapedType>(q.getType()).getDimSize(dimAxis);
  return 1.0f / std::sqrt(static_cast<float>(d));
}

/// The window's right bound in effect: causal folds in as 0.
static int64_t windowRight(bool causal, ArrayRef<int64_t> window) {
  return causal ? 0 : window[1];
}

float FlashAttentionOp::getEffectiveScale() {
  return effectiveScale(getScaleAttr(), getQuery(), 3);
}

int64_t FlashAttentionOp::getWindowLeft() { return getWindow()[0]; }

int64_t FlashAttentionOp::getWindowRight() {
  return windowRight(getCausal(), getWindow());
}

static bool isInputElementType(Type t) {
  return t.isF16() || t.isBF16() || t.isF32() || isa<Float8E4M3FNType>(t);
}
static bool isOutputElementType(Type t) {
  return t.isF16() || t.isBF16() || t.isF32();
}

namespace {
/// Checks that dimension `dim` of operands agrees where both are static.
struct DimChecker {
  Operation *op;
  LogicalResult equal(StringRef what, Value a, unsigned ad, StringRef an,
                      Value b, unsigned bd, StringRef bn) {
    int64_t x = cast<ShapedType>(a.getType()).getDimSize(ad);
    int64_t y = cast<ShapedType>(b.getType()).getDimSize(bd);
    if (!ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y)
      return op->emitOpError() << what << " mismatch: " << an << " has " << x
                               << " but " << bn << " has " << y;
    return success();
  }
};
} // namespace

/// [left, right], each -1 (unbounded) or 0 .. kMaxWindow.
static LogicalResult verifyWindow(Operation *op, ArrayRef<int64_t> w) {
  if (w.size() != 2)
    return op->emitOpError("window must have two entries [left, right], got ")
           << w.size();
  if (w[0] < -1 || w[1] < -1 || w[0] > kMaxWindow || w[1] > kMaxWindow)
    return op->emitOpError("window entries must be -1 (unbounded) or 0 to ")
           << kMaxWindow << ", got [" << w[0] << ", " << w[1] << "]";
  return success();
}

static LogicalResult verifySoftcap(Operation *op, double sc) {
  if (sc != 0 && !(sc >= kMinSoftcap && sc <= kMaxSoftcap))
    return op->emitOpError("softcap must be 0 (off) or 1e-6 to 1e30, got ")
           << sc;
  return success();
}

/// Tile sides of the tile ops: positive and at most what attn-tile makes.
static LogicalResult verifyBlocks(Operation *op, int64_t m, int64_t n) {
  if (m <= 0 || n <= 0 || m > kMaxBlock || n > kMaxBlock)
    return op->emitOpError("block sizes must be 1 to ")
           << kMaxBlock << ", got " << m << " x " << n;
  return success();
}

namespace {
/// An operand and the name messages give it.
struct Named {
  StringRef name;
  Value val;
};
} // namespace

/// One form for every operand (tensor or memref, as the first); the memref
/// form has no results, the tensor form one per output, of its type.
static LogicalResult verifyForm(Operation *op, ArrayRef<Named> operands,
                                ValueRange outputs, ValueRange results) {
  bool isMemref = isa<MemRefType>(operands[0].val.getType());
  for (const Named &n : operands.drop_front()) {
    if (n.val && isa<MemRefType>(n.val.getType()) != isMemref)
      return op->emitOpError("mixes tensor and memref operands: ")
             << operands[0].name << " is a "
             << (isMemref ? "memref" : "tensor") << " but " << n.name
             << " is not";
  }
  if (isMemref && !results.empty())
    return op->emitOpError("memref form has no results, got ")
           << results.size();
  if (!isMemref) {
    if (results.size() != outputs.size())
      return op->emitOpError(
                 "tensor form needs one result per output operand (")
             << outputs.size() << "), got " << results.size();
    for (auto [res, out] : llvm::zip(results, outputs))
      if (res.getType() != out.getType())
        return op->emitOpError("result type ")
               << res.getType() << " differs from its output operand type "
               << out.getType();
  }
  return success();
}

/// Rank of an operand, with the logical shape in the message.
static LogicalResult verifyRank(Operation *op, Value val, StringRef name,
                                int64_t rank, StringRef dims) {
  auto t = cast<ShapedType>(val.getType());
  if (t.getRank() != rank)
    return op->emitOpError() << name << " must have rank " << rank << " "
                             << dims << ", got rank " << t.getRank();
  return success();
}

/// Memref operands: every lowering computes addresses from strides and
/// offset in the default (host or global) memory space; anything else used
/// to fail late, in upstream passes that printed an error and exited 0.
static LogicalResult verifyMemrefs(Operation *op, ArrayRef<Named> operands) {
  for (const Named &n : operands) {
    auto mt = n.val ? dyn_cast<MemRefType>(n.val.getType()) : MemRefType();
    if (!mt)
      continue;
    if (mt.getMemorySpace())
      return op->emitOpError() << n.name
                               << " must be in the default memory space, got "
                               << mt.getMemorySpace();
    if (!mt.isStrided())
      return op->emitOpError() << n.name
                               << " must have a strided layout (identity or "
                                  "strided<...>), got "
                               << mt.getLayout();
  }
  return success();
}

static Type elementOf(Value val) {
  return cast<ShapedType>(val.getType()).getElementType();
}

/// Heads (axis `headAxis`) and head dims (axis `dimAxis`) of q, k, v: static
/// (they fix the kernel's structure; batch and lengths may be dynamic), Hq a
/// multiple of Hkv, head dims multiples of 8 up to kMaxHeadDim.
static LogicalResult verifyHeads(Operation *op, Value q, Value k, Value v,
                                 unsigned headAxis, unsigned dimAxis) {
  auto qt = cast<ShapedType>(q.getType());
  auto kt = cast<ShapedType>(k.getType());
  auto vt = cast<ShapedType>(v.getType());
  const std::string h = std::to_string(headAxis), d = std::to_string(dimAxis);
  const std::string staticNames[] = {
      "query heads (dim " + h + " of query)", "kv heads (dim " + h + " of key)",
      "head dim (dim " + d + " of query)",
      "value head dim (dim " + d + " of value)"};
  const ShapedType staticTypes[] = {qt, kt, qt, vt};
  const unsigned staticDims[] = {headAxis, headAxis, dimAxis, dimAxis};
  for (auto [name, t, x] : llvm::zip(staticNames, staticTypes, staticDims))
    if (t.isDynamicDim(x))
      return op->emitOpError() << name << " must be static";
  int64_t hq = qt.getDimSize(headAxis), hkv = kt.getDimSize(headAxis);
  if (hkv <= 0 || hq % hkv != 0)
    return op->emitOpError("query heads (")
           << hq << ") must be a multiple of kv heads (" << hkv
           << ") for GQA/MQA";
  const StringRef dimNames[] = {"head dim", "value head dim"};
  const int64_t headDims[] = {qt.getDimSize(dimAxis), vt.getDimSize(dimAxis)};
  for (auto [name, x] : llvm::zip(dimNames, headDims))
    if (x <= 0 || x > kMaxHeadDim || x % 8 != 0)
      return op->emitOpError() << name << " " << x
                               << " is unsupported: it must be a multiple of "
                                  "8 between 8 and "
                               << kMaxHeadDim;
  return success();
}

/// Element types of q, k, v (one input type), o (an output type) and lse
/// (f32; may be null).
static LogicalResult verifyElementTypes(Operation *op, Value q, Value k,
                                        Value v, Value o, Value lse) {
  if (!isInputElementType(elementOf(q)))
    return op->emitOpError("query element type must be f16, bf16, f32 or "
                           "f8E4M3FN, got ")
           << elementOf(q);
  if (elementOf(k) != elementOf(q) || elementOf(v) != elementOf(q))
    return op->emitOpError(
               "query, key and value must have one element type, got ")
           << elementOf(q) << ", " << elementOf(k) << ", " << elementOf(v);
  if (!isOutputElementType(elementOf(o)))
    return op->emitOpError("o element type must be f16, bf16 or f32, got ")
           << elementOf(o);
  if (lse && !elementOf(lse).isF32())
    return op->emitOpError("lse element type must be f32, got ")
           << elementOf(lse);
  return success();
}

/// What the forward and the backward share about q, k, v, o and lse (lse
/// may be null): ranks, memref layouts, element types, shapes, the static
/// heads and head dims, GQA. `extra` are the op's other operands, checked
/// for their memref layout here too.
static LogicalResult verifyAttention(Operation *op, Value q, Value k, Value v,
                                     Value o, Value lse,
                                     ArrayRef<Named> extra) {
  if (failed(verifyRank(op, q, "query", 4, "[B, Hq, Sq, D]")) ||
      failed(verifyRank(op, k, "key", 4, "[B, Hkv, Skv, D]")) ||
      failed(verifyRank(op, v, "value", 4, "[B, Hkv, Skv, Dv]")) ||
      failed(verifyRank(op, o, "o", 4, "[B, Hq, Sq, Dv]")) ||
      (lse && failed(verifyRank(op, lse, "lse", 3, "[B, Hq, Sq]"))))
    return failure();

  SmallVector<Named> all = {
      {"query", q}, {"key", k}, {"value", v}, {"o", o}, {"lse", lse}};
  all.append(extra.begin(), extra.end());
  if (failed(verifyMemrefs(op, all)))
    return failure();

  if (failed(verifyElementTypes(op, q, k, v, o, lse)))
    return failure();

  // Shapes.
  DimChecker dc{op};
  if (failed(dc.equal("batch", q, 0, "query", k, 0, "key")) ||
      failed(dc.equal("batch", q, 0, "query", v, 0, "value")) ||
      failed(dc.equal("batch", q, 0, "query", o, 0, "o")) ||
      failed(dc.equal("kv heads", k, 1, "key", v, 1, "value")) ||
      failed(dc.equal("query heads", q, 1, "query", o, 1, "o")) ||
      failed(dc.equal("query length", q, 2, "query", o, 2, "o")) ||
      failed(dc.equal("kv length", k, 2, "key", v, 2, "value")) ||
      failed(dc.equal("head dim", q, 3, "query", k, 3, "key")) ||
      failed(dc.equal("value head dim", v, 3, "value", o, 3, "o")))
    return failure();
  if (lse && (failed(dc.equal("batch", q, 0, "query", lse, 0, "lse")) ||
              failed(dc.equal("query heads", q, 1, "query", lse, 1, "lse")) ||
              failed(dc.equal("query length", q, 2, "query", lse, 2, "lse"))))
    return failure();

  return verifyHeads(op, q, k, v, /*headAxis=*/1, /*dimAxis=*/3);
}

/// scale, window (causal folded in) and softcap.
static LogicalResult verifyAttentionAttrs(Operation *op, FloatAttr scale,
                                          bool causal, ArrayRef<int64_t> w,
                                          double softcap) {
  if (scale) {
    double sv = scale.getValueAsDouble();
    if (!(sv > 0 && sv <= kMaxScale))
      return op->emitOpError("scale must be > 0 and at most 1e30, got ") << sv;
  }
  if (failed(verifyWindow(op, w)))
    return failure();
  if (causal && w[1] > 0)
    return op->emitOpError("causal attention has window right = 0; got "
                           "window right = ")
           << w[1] << " (drop `causal` or set right to 0 or -1)";
  return verifySoftcap(op, softcap);
}

/// Memref form: inputs are read, outputs (the DPS inits) written.
static void dpsEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (op.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

/// FP8 descale factors: three f32 operands, each of one of the forms the
/// op's description lists (per tensor, per (batch, head), per block of
/// kDescaleBlock rows for q and k), on f8E4M3FN inputs.
static LogicalResult verifyDescales(FlashAttentionOp op) {
  ValueRange d = op.getDescales();
  if (d.empty())
    return success();
  if (d.size() != 3)
    return op.emitOpError("expects descale(q_descale, k_descale, v_descale), "
                          "got ")
           << d.size() << " operands";
  Value q = op.getQuery(), k = op.getKey();
  if (!isa<Float8E4M3FNType>(elementOf(q)))
    return op.emitOpError("descale factors belong to f8E4M3FN (FP8) inputs, "
                          "got ")
           << elementOf(q);
  auto qt = cast<ShapedType>(q.getType()), kt = cast<ShapedType>(k.getType());
  const int64_t hq = qt.getDimSize(1), hkv = kt.getDimSize(1);
  const int64_t blk = FlashAttentionOp::kDescaleBlock;
  auto blocks = [&](ShapedType t) {
    return t.isDynamicDim(2) ? ShapedType::kDynamic
                             : (t.getDimSize(2) + blk - 1) / blk;
  };
  struct Form {
    const char *name;
    Value val;
    SmallVector<int64_t> heads; // per (batch, head): the head counts taken
    bool blockForm;             // one per block of rows taken
    int64_t blocks;             // their count (dynamic: not known)
    const char *forms;
  };
  Form forms[] = {
      {"q_descale", d[0], {hq, hkv}, true, blocks(qt),
       "[], [B, Hq], [B, Hkv] or [B, Hq, ceil(Sq / 128)]"},
      {"k_descale", d[1], {hkv}, true, blocks(kt),
       "[], [B, Hkv] or [B, Hkv, ceil(Skv / 128)]"},
      {"v_descale", d[2], {hkv}, false, 0, "[] or [B, Hkv]"}};
  for (const Form &f : forms) {
    auto t = cast<ShapedType>(f.val.getType());
    if (!t.getElementType().isF32())
      return op.emitOpError() << f.name << " must be f32, got "
                              << t.getElementType();
    auto bad = [&]() {
      return op.emitOpError() << f.name << " must be " << f.forms << ", got "
                              << t;
    };
    auto fits = [](int64_t got, int64_t want) {
      return ShapedType::isDynamic(got) || ShapedType::isDynamic(want) ||
             got == want;
    };
    if (t.getRank() == 0)
      continue;
    if (t.getRank() == 1 || t.getRank() > 3 ||
        (t.getRank() == 3 && !f.blockForm))
      return bad();
    if (!fits(t.getDimSize(0), qt.getDimSize(0)))
      return bad();
    int64_t h = t.getDimSize(1);
    if (t.getRank() == 2 && !llvm::is_contained(f.heads, h))
      return bad();
    if (t.getRank() == 3 &&
        (h != f.heads[0] || !fits(t.getDimSize(2), f.blocks)))
      return bad();
  }
  return success();
}

LogicalResult FlashAttentionOp::verify() {
  Value q = getQuery(), k = getKey(), v = getValue();
  if (getOutputs().empty() || getOutputs().size() > 2)
    return emitOpError("expects outs(o) or outs(o, lse), got ")
           << getOutputs().size() << " output operands";
  Value o = getOut(), lse = getLse();
  SmallVector<Named> operands = {
      {"query", q}, {"key", k}, {"value", v}, {"o", o}, {"lse", lse}};
  SmallVector<Named> descales;
  static const char *const descaleNames[] = {"q_descale", "k_descale",
                                             "v_descale"};
  for (auto [i, dv] : llvm::enumerate(getDescales()))
    descales.push_back({i < 3 ? descaleNames[i] : "descale", dv});
  operands.append(descales.begin(), descales.end());
  if (failed(verifyForm(*this, operands, getOutputs(), getResults())) ||
      failed(verifyAttention(*this, q, k, v, o, lse, descales)) ||
      failed(verifyDescales(*this)))
    return failure();
  return verifyAttentionAttrs(*this, getScaleAttr(), getCausal(), getWindow(),
                              getSoftcap().convertToDouble());
}

void FlashAttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (hasBufferSemantics())
    dpsEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// quantize
//===----------------------------------------------------------------------===//

// Rows a quantize group may have (the kernels count rows in i32).
static constexpr int64_t kMaxBlockRows = (int64_t(1) << 31) - 1;

LogicalResult QuantizeOp::verify() {
  if (getOutputs().size() != 2)
    return emitOpError("expects outs(output, descale), got ")
           << getOutputs().size() << " output operands";
  Value x = getInput(), signs = getSigns(), y = getOutput(),
        d = getDescale();
  const Named operands[] = {
      {"input", x}, {"signs", signs}, {"output", y}, {"descale", d}};
  if (failed(verifyForm(*this, operands, getOutputs(), getResults())) ||
      failed(verifyMemrefs(*this, operands)) ||
      failed(verifyRank(*this, x, "input", 4, "[B, H, S, D]")) ||
      failed(verifyRank(*this, y, "output", 4, "[B, H, S, D]")))
    return failure();
  Type et = elementOf(x);
  if (!(et.isF16() || et.isBF16() || et.isF32()))
    return emitOpError("input must be f16, bf16 or f32, got ") << et;
  if (!isa<Float8E4M3FNType>(elementOf(y)))
    return emitOpError("output must be f8E4M3FN, got ") << elementOf(y);
  if (!elementOf(d).isF32())
    return emitOpError("descale must be f32, got ") << elementOf(d);
  DimChecker dims{*this};
  static const char *const names[] = {"batch", "heads", "rows", "head dim"};
  for (unsigned i = 0; i < 4; ++i)
    if (failed(dims.equal(names[i], x, i, "input", y, i, "output")))
      return failure();
  std::optional<int64_t> block;
  if (getBlockAttr()) {
    block = getBlockAttr().getInt();
    if (*block < 1 || *block > kMaxBlockRows)
      return emitOpError("block must be 1 to ")
             << kMaxBlockRows << " rows, got " << *block;
  }
  if (failed(verifyRank(*this, d, "descale", block ? 3 : 2,
                        block ? "[B, H, ceil(S / block)] (with block)"
                              : "[B, H] (one per head, without block)")))
    return failure();
  for (unsigned i = 0; i < 2; ++i)
    if (failed(dims.equal(names[i], x, i, "input", d, i, "descale")))
      return failure();
  auto xt = cast<ShapedType>(x.getType());
  auto dt = cast<ShapedType>(d.getType());
  if (block && !xt.isDynamicDim(2) && !dt.isDynamicDim(2)) {
    int64_t want = (xt.getDimSize(2) + *block - 1) / *block;
    if (dt.getDimSize(2) != want)
      return emitOpError("descale has ")
             << dt.getDimSize(2) << " blocks but input's " << xt.getDimSize(2)
             << " rows in blocks of " << *block << " make " << want;
  }
  if (signs) {
    if (failed(verifyRank(*this, signs, "signs", 1, "[D]")))
      return failure();
    if (!elementOf(signs).isF32())
      return emitOpError("signs must be f32, got ") << elementOf(signs);
    int64_t dd = xt.getDimSize(3);
    if (ShapedType::isDynamic(dd) || dd < 1 || (dd & (dd - 1)))
      return emitOpError("rotate needs a static head dim that is a power of "
                         "two (a Sylvester Hadamard matrix), got ")
             << (ShapedType::isDynamic(dd) ? std::string("?")
                                           : std::to_string(dd));
    if (failed(dims.equal("head dim", x, 3, "input", signs, 0, "signs")))
      return failure();
  }
  return success();
}

void QuantizeOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (hasBufferSemantics())
    dpsEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// flash_attention_varlen
//===----------------------------------------------------------------------===//

float FlashAttentionVarlenOp::getEffectiveScale() {
  return effectiveScale(getScaleAttr(), getQuery(), 2);
}

int64_t FlashAttentionVarlenOp::getWindowLeft() { return getWindow()[0]; }

int64_t FlashAttentionVarlenOp::getWindowRight() {
  return windowRight(getCausal(), getWindow());
}

LogicalResult FlashAttentionVarlenOp::verify() {
  if (getOutputs().empty() || getOutputs().size() > 2)
    return emitOpError("expects outs(o) or outs(o, lse), got ")
           << getOutputs().size() << " output operands";
  Value q = getQuery(), k = getKey(), v = getValue(), o = getOut(),
        lse = getLse();
  Value cuQ = getCuSeqlensQ(), cuK = getCuSeqlensK(), used = getSequsedK();
  const Named operands[] = {{"query", q},         {"key", k},
                            {"value", v},         {"cu_seqlens_q", cuQ},
                            {"cu_seqlens_k", cuK}, {"seqused_k", used},
                            {"o", o},             {"lse", lse}};
  if (failed(verifyForm(*this, operands, getOutputs(), getResults())))
    return failure();
  if (failed(verifyRank(*this, q, "query", 3, "[Tq, Hq, D]")) ||
      failed(verifyRank(*this, k, "key", 3, "[Tk, Hkv, D]")) ||
      failed(verifyRank(*this, v, "value", 3, "[Tk, Hkv, Dv]")) ||
      failed(verifyRank(*this, o, "o", 3, "[Tq, Hq, Dv]")) ||
      (lse && failed(verifyRank(*this, lse, "lse", 2, "[Hq, Tq]"))) ||
      failed(verifyRank(*this, cuQ, "cu_seqlens_q", 1, "[B + 1]")) ||
      failed(verifyRank(*this, cuK, "cu_seqlens_k", 1, "[B + 1]")) ||
      (used && failed(verifyRank(*this, used, "seqused_k", 1, "[B]"))))
    return failure();
  if (failed(verifyMemrefs(*this, operands)))
    return failure();

  if (failed(verifyElementTypes(*this, q, k, v, o, lse)))
    return failure();
  const Named lengths[] = {
      {"cu_seqlens_q", cuQ}, {"cu_seqlens_k", cuK}, {"seqused_k", used}};
  for (const Named &n : lengths)
    if (n.val && !elementOf(n.val).isSignlessInteger(32))
      return emitOpError() << n.name
                           << " element type must be i32 (as FlashAttention's), got "
                           << elementOf(n.val);

  // Shapes.
  DimChecker dc{*this};
  if (failed(dc.equal("query tokens", q, 0, "query", o, 0, "o")) ||
      failed(dc.equal("query heads", q, 1, "query", o, 1, "o")) ||
      failed(dc.equal("kv tokens", k, 0, "key", v, 0, "value")) ||
      failed(dc.equal("kv heads", k, 1, "key", v, 1, "value")) ||
      failed(dc.equal("head dim", q, 2, "query", k, 2, "key")) ||
      failed(dc.equal("value head dim", v, 2, "value", o, 2, "o")) ||
      failed(dc.equal("sequence count + 1", cuQ, 0, "cu_seqlens_q", cuK, 0,
                      "cu_seqlens_k")))
    return failure();
  if (lse && (failed(dc.equal("query heads", q, 1, "query", lse, 0, "lse")) ||
              failed(dc.equal("query tokens", q, 0, "query", lse, 1, "lse"))))
    return failure();
  int64_t n = cast<ShapedType>(cuQ.getType()).getDimSize(0);
  if (n == 0)
    return emitOpError("cu_seqlens_q must have B + 1 >= 1 entries, got 0");
  if (used) {
    int64_t b = cast<ShapedType>(used.getType()).getDimSize(0);
    if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(b) && b != n - 1)
      return emitOpError("seqused_k must have B = ")
             << n - 1 << " entries (one fewer than cu_seqlens_q), got " << b;
  }
  if (failed(verifyHeads(*this, q, k, v, /*headAxis=*/1, /*dimAxis=*/2)))
    return failure();
  return verifyAttentionAttrs(*this, getScaleAttr(), getCausal(), getWindow(),
                              getSoftcap().convertToDouble());
}

void FlashAttentionVarlenOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (hasBufferSemantics())
    dpsEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// flash_attention_grad
//===----------------------------------------------------------------------===//

float FlashAttentionGradOp::getEffectiveScale() {
  return effectiveScale(getScaleAttr(), getQuery(), 3);
}

int64_t FlashAttentionGradOp::getWindowLeft() { return getWindow()[0]; }

int64_t FlashAttentionGradOp::getWindowRight() {
  return windowRight(getCausal(), getWindow());
}

LogicalResult FlashAttentionGradOp::verify() {
  if (getOutputs().size() != 3)
    return emitOpError("expects outs(dq, dk, dv), got ")
           << getOutputs().size() << " output operands";
  Value q = getQuery(), k = getKey(), v = getValue(), o = getOut(),
        dO = getGradOut(), lse = getLse();
  Value dq = getGradQuery(), dk = getGradKey(), dv = getGradValue();
  const Named operands[] = {{"query", q},     {"key", k},    {"value", v},
                            {"o", o},         {"grad_out", dO}, {"lse", lse},
                            {"dq", dq},       {"dk", dk},    {"dv", dv}};
  if (failed(verifyForm(*this, operands, getOutputs(), getResults())))
    return failure();
  // The backward's own operands first (ranks), then what it shares with
  // the forward, then how each gradient matches its operand.
  if (failed(verifyRank(*this, dO, "grad_out", 4, "[B, Hq, Sq, Dv]")) ||
      failed(verifyRank(*this, dq, "dq", 4, "[B, Hq, Sq, D]")) ||
      failed(verifyRank(*this, dk, "dk", 4, "[B, Hkv, Skv, D]")) ||
      failed(verifyRank(*this, dv, "dv", 4, "[B, Hkv, Skv, Dv]")))
    return failure();
  const Named extra[] = {{"grad_out", dO}, {"dq", dq}, {"dk", dk}, {"dv", dv}};
  if (failed(verifyAttention(*this, q, k, v, o, lse, extra)))
    return failure();
  if (isa<Float8E4M3FNType>(elementOf(q)))
    return emitOpError("has no f8E4M3FN form (FP8 attention is inference "
                       "only): give f16, bf16 or f32 inputs");
  if (elementOf(o) != elementOf(q) || elementOf(dO) != elementOf(q))
    return emitOpError("o and grad_out must have the element type of query (")
           << elementOf(q) << "), got " << elementOf(o) << " and "
           << elementOf(dO);
  const Named grads[] = {{"dq", dq}, {"dk", dk}, {"dv", dv}};
  for (const Named &g : grads)
    if (!isOutputElementType(elementOf(g.val)))
      return emitOpError() << g.name
                           << " element type must be f16, bf16 or f32, got "
                           << elementOf(g.val);
  // Each gradient has the shape of its operand; grad_out that of o.
  DimChecker dc{*this};
  struct Same {
    Named a, g;
    const char *dims[4];
  };
  const Same same[] = {
      {{"o", o},
       {"grad_out", dO},
       {"batch", "query heads", "query length", "value head dim"}},
      {{"query", q},
       {"dq", dq},
       {"batch", "query heads", "query length", "head dim"}},
      {{"key", k}, {"dk", dk}, {"batch", "kv heads", "kv length", "head dim"}},
      {{"value", v},
       {"dv", dv},
       {"batch", "kv heads", "kv length", "value head dim"}}};
  for (const Same &s : same)
    for (unsigned d = 0; d < 4; ++d)
      if (failed(dc.equal(s.dims[d], s.a.val, d, s.a.name, s.g.val, d,
                          s.g.name)))
        return failure();
  return verifyAttentionAttrs(*this, getScaleAttr(), getCausal(), getWindow(),
                              getSoftcap().convertToDouble());
}

void FlashAttentionGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (hasBufferSemantics())
    dpsEffects(*this, effects);
}

/// `window(left, right)`: the two bounds of the sliding window.
static ParseResult parseWindow(OpAsmParser &parser, DenseI64ArrayAttr &window) {
  int64_t left = 0, right = 0;
  if (parser.parseInteger(left) || parser.parseComma() ||
      parser.parseInteger(right))
    return failure();
  window = parser.getBuilder().getDenseI64ArrayAttr({left, right});
  return success();
}
static void printWindow(OpAsmPrinter &p, Operation *, DenseI64ArrayAttr window) {
  llvm::interleaveComma(window.asArrayRef(), p);
}

//===----------------------------------------------------------------------===//
// tile ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyState(Operation *op, Value m, Value l, Value acc,
                                 int64_t blockM) {
  auto mt = cast<MemRefType>(m.getType()), lt = cast<MemRefType>(l.getType()),
       at = cast<MemRefType>(acc.getType());
  if (mt.getRank() != 1 || lt.getRank() != 1 || at.getRank() != 2 ||
      !mt.getElementType().isF32() || !lt.getElementType().isF32() ||
      !at.getElementType().isF32())
    return op->emitOpError("state must be f32 buffers [block_m], [block_m], "
                           "[block_m, Dv]");
  if (mt.getDimSize(0) != blockM || lt.getDimSize(0) != blockM ||
      at.getDimSize(0) != blockM)
    return op->emitOpError("state buffers must have block_m = ")
           << blockM << " rows";
  return success();
}

LogicalResult KvRangeOp::verify() {
  if (failed(verifyBlocks(*this, getBlockM(), getBlockN())))
    return failure();
  return verifyWindow(*this, getWindow());
}

LogicalResult QRangeOp::verify() {
  if (failed(verifyBlocks(*this, getBlockM(), getBlockN())))
    return failure();
  return verifyWindow(*this, getWindow());
}

LogicalResult TileUpdateOp::verify() {
  if (failed(verifyBlocks(*this, getBlockM(), getBlockN())))
    return failure();
  for (Value v : {getQuery(), getKey(), getValue()})
    if (cast<MemRefType>(v.getType()).getRank() != 4)
      return emitOpError("query, key and value must be rank-4 memrefs");
  // FP8: q's, k's and v's descales, each f32 of rank 0, 2 or 3 (the
  // attention's checked shapes)
  if (!getDescales().empty()) {
    if (getDescales().size() != 3)
      return emitOpError("takes three descales (q, k, v) or none, got ")
             << getDescales().size();
    for (Value d : getDescales()) {
      auto t = cast<MemRefType>(d.getType());
      if (!t.getElementType().isF32() || t.getRank() == 1 || t.getRank() > 3)
        return emitOpError("descales must be f32 memrefs of rank 0, 2 or 3, "
                           "got ")
               << t;
    }
  }
  if (failed(verifyWindow(*this, getWindow())) ||
      failed(verifySoftcap(*this, getSoftcap().convertToDouble())))
    return failure();
  // Positive: the lowerings scale a row's max instead of every score.
  double s2 = getScaleLog2().convertToDouble();
  if (!std::isfinite(s2) || s2 <= 0)
    return emitOpError("scale_log2 must be finite and positive, got ") << s2;
  if (std::optional<APFloat> t = getRescaleThreshold()) {
    // The kernel's bound (HopperConfigAttr): p <= 2^threshold fits f16.
    double tau = t->convertToDouble();
    if (!(tau >= 0.0 && tau <= HopperConfigAttr::kMaxRescaleThreshold)) {
      std::string range;
      llvm::raw_string_ostream(range)
          << llvm::format("0 to %g (log2 units), got %g",
                          HopperConfigAttr::kMaxRescaleThreshold, tau);
      return emitOpError("rescale_threshold must be ") << range;
    }
  }
  return verifyState(*this, getRowMax(), getRowSum(), getAcc(), getBlockM());
}

void TileUpdateOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand *o : {&getQueryMutable(), &getKeyMutable(), &getValueMutable()})
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
  for (OpOperand &o : getDescalesMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &o,
                         SideEffects::DefaultResource::get());
  for (OpOperand *o : {&getRowMaxMutable(), &getRowSumMutable(), &getAccMutable()}) {
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
    effects.emplace_back(MemoryEffects::Write::get(), o,
                         SideEffects::DefaultResource::get());
  }
}

LogicalResult TileFinalizeOp::verify() {
  if (getBlockM() <= 0 || getBlockM() > kMaxBlock)
    return emitOpError("block_m must be 1 to ") << kMaxBlock;
  if (cast<MemRefType>(getOut().getType()).getRank() != 4)
    return emitOpError("o must be a rank-4 memref");
  if (getLse() && cast<MemRefType>(getLse().getType()).getRank() != 3)
    return emitOpError("lse must be a rank-3 memref");
  return verifyState(*this, getRowMax(), getRowSum(), getAcc(), getBlockM());
}

void TileFinalizeOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand *o : {&getRowMaxMutable(), &getRowSumMutable(), &getAccMutable()})
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &getOutMutable(),
                       SideEffects::DefaultResource::get());
  if (getLse())
    effects.emplace_back(MemoryEffects::Write::get(), &getLseMutable()[0],
                         SideEffects::DefaultResource::get());
}

//===----------------------------------------------------------------------===//
// The backward's tile level
//===----------------------------------------------------------------------===//

/// Dimension sizes that may still be equal (dynamic ones always may).
static bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// `v` is an f32 memref of `dims` (kDynamic: any size), named `name`.
static LogicalResult verifyF32Buffer(Operation *op, StringRef name, Value v,
                                     ArrayRef<int64_t> dims) {
  auto t = cast<MemRefType>(v.getType());
  bool ok = t.getElementType().isF32() &&
            t.getRank() == static_cast<int64_t>(dims.size());
  for (size_t i = 0; ok && i < dims.size(); ++i)
    ok = compatible(t.getDimSize(i), dims[i]);
  if (ok)
    return success();
  std::string want;
  llvm::raw_string_ostream os(want);
  os << "memref<";
  for (int64_t d : dims)
    os << (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d))
       << "x";
  os << "f32>";
  return op->emitOpError(name) << " must be an f32 buffer like " << want
                               << ", got " << t;
}

/// Rank-4 memrefs (q, k, v, dO, dq, ...) of f32, bf16 or f16 with a static
/// head dim (the lowerings unroll it), each named.
static LogicalResult verifyRank4(Operation *op,
                                 ArrayRef<std::pair<StringRef, Value>> vs) {
  for (auto [name, v] : vs) {
    auto t = cast<MemRefType>(v.getType());
    if (t.getRank() != 4)
      return op->emitOpError(name) << " must be a rank-4 memref";
    Type e = t.getElementType();
    if (!e.isF32() && !e.isBF16() && !e.isF16())
      return op->emitOpError(name) << " must hold f32, bf16 or f16, got " << e;
    if (t.isDynamicDim(3))
      return op->emitOpError(name) << " must have a static head dim";
  }
  return success();
}

/// Dimension `d` of `a` and `b` may be equal, else an error naming both.
static LogicalResult verifySameDim(Operation *op, StringRef an, Value a,
                                   StringRef bn, Value b, unsigned d,
                                   StringRef what) {
  int64_t x = cast<MemRefType>(a.getType()).getDimSize(d);
  int64_t y = cast<MemRefType>(b.getType()).getDimSize(d);
  if (compatible(x, y))
    return success();
  return op->emitOpError(an) << " and " << bn << " must have one " << what
                             << ", got " << x << " and " << y;
}

/// [B, H, S] of a rank-4 memref.
static SmallVector<int64_t> rowsOf(Value v) {
  ArrayRef<int64_t> s = cast<MemRefType>(v.getType()).getShape();
  return {s[0], s[1], s[2]};
}

LogicalResult GradPreprocessOp::verify() {
  if (failed(verifyRank4(*this, {{"o", getOut()}, {"dO", getGradOut()}})))
    return failure();
  ArrayRef<int64_t> o = cast<MemRefType>(getOut().getType()).getShape();
  ArrayRef<int64_t> g = cast<MemRefType>(getGradOut().getType()).getShape();
  for (int i = 0; i < 4; ++i)
    if (!compatible(o[i], g[i]))
      return emitOpError("o and dO must have one shape");
  SmallVector<int64_t> rows = rowsOf(getOut());
  if (failed(verifyF32Buffer(*this, "delta", getDelta(), rows)))
    return failure();
  rows.push_back(ShapedType::kDynamic);
  return verifyF32Buffer(*this, "dq_acc", getDqAcc(), rows);
}

void GradPreprocessOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand *o : {&getOutMutable(), &getGradOutMutable()})
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
  for (OpOperand *o : {&getDeltaMutable(), &getDqAccMutable()})
    effects.emplace_back(MemoryEffects::Write::get(), o,
                         SideEffects::DefaultResource::get());
}

LogicalResult TileGradUpdateOp::verify() {
  if (failed(verifyBlocks(*this, getBlockM(), getBlockN())) ||
      failed(verifyRank4(*this, {{"query", getQuery()},
                                 {"key", getKey()},
                                 {"value", getValue()},
                                 {"dO", getGradOut()}})) ||
      failed(verifyWindow(*this, getWindow())) ||
      failed(verifySoftcap(*this, getSoftcap().convertToDouble())))
    return failure();
  double scale = getScale().convertToDouble();
  if (!std::isfinite(scale) || scale <= 0)
    return emitOpError("scale must be finite and positive, got ") << scale;
  Value q = getQuery(), k = getKey(), v = getValue(), dO = getGradOut();
  if (failed(verifySameDim(*this, "query", q, "key", k, 3, "head dim")) ||
      failed(verifySameDim(*this, "key", k, "value", v, 2, "length")) ||
      failed(verifySameDim(*this, "dO", dO, "value", v, 3, "value head dim")))
    return failure();
  for (unsigned d = 0; d < 3; ++d)
    if (failed(verifySameDim(*this, "query", q, "dO", dO, d,
                             d == 0 ? "batch" : d == 1 ? "head count"
                                                       : "length")))
      return failure();
  SmallVector<int64_t> rows = rowsOf(getQuery());
  int64_t bn = getBlockN();
  auto qt = cast<MemRefType>(getQuery().getType());
  int64_t d = qt.getDimSize(3);
  int64_t dv = cast<MemRefType>(getValue().getType()).getDimSize(3);
  if (failed(verifyF32Buffer(*this, "lse", getLse(), rows)) ||
      failed(verifyF32Buffer(*this, "delta", getDelta(), rows)) ||
      failed(verifyF32Buffer(*this, "dq_acc", getDqAcc(), qt.getShape())) ||
      failed(verifyF32Buffer(*this, "dk_acc", getDkAcc(), {bn, d})))
    return failure();
  return verifyF32Buffer(*this, "dv_acc", getDvAcc(), {bn, dv});
}

void TileGradUpdateOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand *o : {&getQueryMutable(), &getKeyMutable(), &getValueMutable(),
                       &getGradOutMutable(), &getLseMutable(), &getDeltaMutable()})
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
  for (OpOperand *o : {&getDqAccMutable(), &getDkAccMutable(), &getDvAccMutable()}) {
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
    effects.emplace_back(MemoryEffects::Write::get(), o,
                         SideEffects::DefaultResource::get());
  }
}

LogicalResult TileGradFinalizeOp::verify() {
  if (getBlockN() <= 0 || getBlockN() > kMaxBlock)
    return emitOpError("block_n must be 1 to ") << kMaxBlock;
  if (failed(verifyRank4(*this, {{"dk", getGradKey()}, {"dv", getGradValue()}})))
    return failure();
  int64_t d = cast<MemRefType>(getGradKey().getType()).getDimSize(3);
  int64_t dv = cast<MemRefType>(getGradValue().getType()).getDimSize(3);
  int64_t bn = getBlockN();
  if (failed(verifyF32Buffer(*this, "dk_acc", getDkAcc(), {bn, d})))
    return failure();
  return verifyF32Buffer(*this, "dv_acc", getDvAcc(), {bn, dv});
}

void TileGradFinalizeOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand *o : {&getDkAccMutable(), &getDvAccMutable()})
    effects.emplace_back(MemoryEffects::Read::get(), o,
                         SideEffects::DefaultResource::get());
  for (OpOperand *o : {&getGradKeyMutable(), &getGradValueMutable()})
    effects.emplace_back(MemoryEffects::Write::get(), o,
                         SideEffects::DefaultResource::get());
}

LogicalResult GradPostprocessOp::verify() {
  if (failed(verifyRank4(*this, {{"dq", getGradQuery()}})))
    return failure();
  return verifyF32Buffer(
      *this, "dq_acc", getDqAcc(),
      cast<MemRefType>(getGradQuery().getType()).getShape());
}

void GradPostprocessOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), &getDqAccMutable(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &getGradQueryMutable(),
                       SideEffects::DefaultResource::get());
}

#define GET_OP_CLASSES
#include "fa3/Dialect/Attn/IR/AttnOps.cpp.inc"

//===----------------------------------------------------------------------===//
// #attn.hopper_config
//===----------------------------------------------------------------------===//

namespace fa3::attn {
/// `true` or `false` (the parameter parser of the flags).
static FailureOr<bool> parseBoolKeyword(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}

/// A float literal (8.0, not 8) as an f64.
static FailureOr<APFloat> parseF64(AsmParser &parser) {
  double value;
  if (failed(parser.parseFloat(value)))
    return failure();
  return APFloat(value);
}
} // namespace fa3::attn

#define GET_ATTRDEF_CLASSES
#include "fa3/Dialect/Attn/IR/AttnOpsAttrs.cpp.inc"

LogicalResult
HopperConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t blockM, int64_t blockN, int64_t stages,
                         bool persistent, int64_t qBuffers, bool lazyRescale,
                         APFloat rescaleThreshold, int64_t clusterM,
                         bool pingpong, bool tmaStore, bool splitKv,
                         bool packGqa, int64_t ctasPerSm,
                         int64_t minSeqlenQ, int64_t transposeWarps,
                         bool pagedKv) {
  if (blockM <= 0 || blockN <= 0 || blockM > kMaxBlock || blockN > kMaxBlock)
    return emitError() << "hopper_config: block sizes must be 1 to "
                       << kMaxBlock << ", got " << blockM << " x " << blockN;
  if (stages < 1 || stages > kMaxStages)
    return emitError() << "hopper_config: stages must be 1 to " << kMaxStages
                       << ", got " << stages;
  if (qBuffers != 1 && qBuffers != 2)
    return emitError() << "hopper_config: q_buffers must be 1 or 2, got "
                       << qBuffers;
  if (clusterM != 1 && clusterM != 2)
    return emitError() << "hopper_config: cluster_m must be 1 or 2, got "
                       << clusterM;
  if (ctasPerSm != 1 && ctasPerSm != 2)
    return emitError() << "hopper_config: ctas_per_sm must be 1 or 2, got "
                       << ctasPerSm;
  if (transposeWarps != 3 && transposeWarps != 4)
    return emitError() << "hopper_config: transpose_warps must be 3 or 4, got "
                       << transposeWarps;
  if (minSeqlenQ < 0 || minSeqlenQ > INT32_MAX)
    return emitError() << "hopper_config: min_seqlen_q must be 0 to "
                       << INT32_MAX << ", got " << minSeqlenQ;
  if ((splitKv || packGqa) && (persistent || clusterM != 1))
    return emitError() << "hopper_config: split_kv and pack_gqa take one CTA "
                          "per tile (persistent = false, cluster_m = 1)";
  if (pagedKv && (persistent || clusterM != 1 || splitKv || packGqa))
    return emitError() << "hopper_config: paged_kv takes one CTA per tile "
                          "(persistent = false, cluster_m = 1) and no "
                          "split_kv or pack_gqa (the decoding kernel reads "
                          "its page table without it)";
  double threshold = rescaleThreshold.convertToDouble();
  if (!(threshold >= 0.0 && threshold <= kMaxRescaleThreshold)) {
    std::string range;
    llvm::raw_string_ostream(range)
        << llvm::format("0 to %g (log2 units), got %g", kMaxRescaleThreshold,
                        threshold);
    return emitError() << "hopper_config: rescale_threshold must be " << range;
  }
  return success();
}

/// `attn.hopper_config` is chosen for an attention (attn.flash_attention)
/// and carried to its schedule (attn.kv_range), whose tiles it must match.
/// (The other attn.* attribute, the launch facts, is checked where it is
/// written.)
LogicalResult AttnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() != HopperConfigAttr::kAttrName)
    return success();
  auto config = dyn_cast<HopperConfigAttr>(attr.getValue());
  if (!config)
    return op->emitError("'")
           << HopperConfigAttr::kAttrName
           << "' must be a #attn.hopper_config, got " << attr.getValue();
  auto checkTiles = [&](int64_t blockM, int64_t blockN) -> LogicalResult {
    if (blockM != config.getBlockM() || blockN != config.getBlockN())
      return op->emitOpError("tiles ")
             << blockM << " x " << blockN
             << " differ from its attn.hopper_config's " << config.getBlockM()
             << " x " << config.getBlockN();
    return success();
  };
  if (auto range = dyn_cast<KvRangeOp>(op))
    return checkTiles(range.getBlockM(), range.getBlockN());
  if (auto range = dyn_cast<QRangeOp>(op))
    return checkTiles(range.getBlockM(), range.getBlockN());
  if (!isa<FlashAttentionOp, FlashAttentionVarlenOp, FlashAttentionGradOp>(op))
    return op->emitError("'")
           << HopperConfigAttr::kAttrName
           << "' belongs on attn.flash_attention(_varlen, _grad), "
              "attn.kv_range or attn.q_range, not on '"
           << op->getName() << "'";
  return success();
}
