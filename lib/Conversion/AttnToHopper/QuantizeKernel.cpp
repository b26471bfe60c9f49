//===- QuantizeKernel.cpp - FP8 quantization with a Hadamard rotation -----===//
//
// (QuantizeKernel.h.) Memory-bound: each element is read once (2 bytes) and
// written once (1 byte). A CTA holds its 128 rows in registers (64 values a
// thread at every head dim, 2 D threads), so the block's amax is known
// before any of its bytes are written, without a second read.
//
// A row is spread over G = D / min(64, D / 2) lanes (2 at head dims 64 and
// 128, 4 at 256; 32 or 64 values a lane), each holding 16-byte chunks of 8
// columns: chunk c of lane l is
// columns 8 G c + 8 l .. + 7, so that one load instruction reads G x 16
// contiguous bytes of each of its rows (whole 32-byte sectors). The
// rotation is the fast Walsh-Hadamard transform: x H_D is log2(D)
// butterfly stages, one per bit of the column index, in any order; the
// bits of l (log2 G of them: one or two) by shfl.bfly (the lane whose bit
// is set keeps partner - own, the other own + partner), the others inside
// the lane; then column j is multiplied by signs[j] / sqrt(D). Few lanes a
// row keep the shuffles few: they, not the adds, set the rotation's cost
// (the warp-wide shuffle is one instruction a clock on an SM). The amax is
// an unsigned max over the values' bits with the sign cleared (the order of
// non-negative floats; a NaN's bits exceed inf's, and a NaN amax gets
// descale 1 as in fa3.quantize): redux.sync across a warp, shared memory
// across warps. Rows past S are read clamped to row S - 1 and replaced by
// zeros (no branch around the loads), and are not stored. Per-head
// descales take two launches: mode 1 maxes each block's amax bits into its
// head's word of the (zeroed) workspace with one atomic a CTA, mode 2
// reads that word.
//
//===----------------------------------------------------------------------===//
#include "QuantizeKernel.h"

#include "BuilderBase.h"
#include "KernelBuilder.h" // the ABI: kQuantizeParams

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace fa3::hopper;

namespace {
/// e4m3's largest finite value, and the smallest amax given its own scale
/// (448 x float32's smallest normal: the descale amax / 448 stays normal,
/// the scale 448 / amax finite), as fa3/quantize.py.
constexpr double kE4M3Max = 448.0;
constexpr uint32_t kAmaxMinBits = 0x04E00000u; // 448 * 2^-126
constexpr char kReduceSmem[] = "fa3_quantize_amax";

class QuantizeBuilder : BuilderBase {
public:
  QuantizeBuilder(OpBuilder &b, Location loc, int64_t headDim)
      : BuilderBase(b, loc), d(headDim), perLane(std::min<int64_t>(64, headDim / 2)),
        lanesPerRow(headDim / perLane), rowsPerLane(64 / perLane),
        warps(headDim * kQuantizeThreadsPerCol / 32),
        rowsPerWarp(kQuantizeRows / warps) {
    assert((headDim == 64 || headDim == 128 || headDim == 256) &&
           "the FP8 kernels' head dims");
    assert(rowsPerWarp == rowsPerLane * (32 / lanesPerRow) &&
           "64 values a thread, 2 D threads");
    assert(warps <= 32 && "one shared word a warp, reduced by one thread");
  }

  void build(gpu::GPUModuleOp m, const std::string &name) {
    declareReduceSmem(m);
    gpu::GPUFuncOp fn =
        openKernel(m, name, kQuantizeParams, kQuantizeThreadsPerCol * d);
    // More CTAs an SM where their registers fit without spills, so that
    // one's loads overlap another's arithmetic: 4 of 128 threads (head dim
    // 64), 2 of 256 (128; 3 spill and measured 3 % slower with the
    // rotation, bench/NOTES.md); head dim 256's 512 threads fill the SM.
    const int64_t threads = kQuantizeThreadsPerCol * d;
    if (threads <= 256)
      fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  b.getI32IntegerAttr(threads <= 128 ? 4 : 2));
    tid = NVVM::ThreadIdXOp::create(b, loc, i32T);
    lane = bin<arith::AndIOp>(tid, i32(31));
    warp = bin<arith::ShRUIOp>(tid, i32(5));
    // Heads fastest: the CTAs that run at once read the same rows of
    // every head, contiguous memory in [B, S, H, D], not rows H * D apart
    Value head = NVVM::BlockIdXOp::create(b, loc, i32T);
    Value blk = NVVM::BlockIdYOp::create(b, loc, i32T);
    Value batch = NVVM::BlockIdZOp::create(b, loc, i32T);
    Value blocks = NVVM::GridDimYOp::create(b, loc, i32T);
    // this CTA's entry of the [B, H, blocks] arrays, and of [B, H]
    Value heads = ext64(param("H"));
    Value bh = bin<arith::MulIOp>(ext64(batch), heads);
    bh = bin<arith::AddIOp>(bh, ext64(head));
    Value firstBlock = bin<arith::MulIOp>(bh, ext64(blocks));
    Value blockEntry = bin<arith::AddIOp>(firstBlock, ext64(blk));

    loadRows(blk, head, batch);
    rotate();
    Value mode = param("mode");
    Value headPass = cmpi(CmpIPredicate::eq, mode, i32(2));
    Value own = ownAmaxBits();
    // mode 2: the head's amax, which mode 1's CTAs maxed into its word
    Value local = ifElse(headPass, TypeRange{i32T},
                         [&]() -> SmallVector<Value> {
                           Value p = globalAt(param("amax"), bh, 4);
                           return {LLVM::LoadOp::create(b, loc, i32T, p,
                                                        /*alignment=*/4)};
                         },
                         [&]() -> SmallVector<Value> { return {own}; })
                      .getResult(0);
    Value amaxBits = ctaMax(local);
    Value amax = arith::BitcastOp::create(b, loc, f32T, amaxBits);
    Value first = cmpi(CmpIPredicate::eq, tid, i32(0));
    Value amaxPass = cmpi(CmpIPredicate::eq, mode, i32(1));
    Value writeAmax = bin<arith::AndIOp>(amaxPass, first);
    ifThen(writeAmax, [&] {
      // (non-negative floats order as their bits; a NaN's exceed inf's)
      LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::umax,
                                globalAt(param("amax"), bh, 4), amaxBits,
                                LLVM::AtomicOrdering::monotonic);
    });
    Value quantizing = cmpi(CmpIPredicate::ne, mode, i32(1));
    ifThen(quantizing, [&] {
      Value scale = scales(amax, headPass, blk, bh, blockEntry);
      storeRows(scale, head, batch);
    });
    gpu::ReturnOp::create(b, loc);
    closeKernel(fn);
  }

private:
  /// Values a lane holds of a row, lanes a row, rows a lane.
  int64_t d, perLane, lanesPerRow, rowsPerLane, warps, rowsPerWarp;
  Value tid, lane, warp, laneCol;
  /// Per row of the lane: its index (i64) and whether it is below S.
  SmallVector<Value> rowIndex, rowValid;
  /// rowsPerLane x perLane values, row-major.
  SmallVector<Value> vals;

  /// The column (i64) of value `v` of a lane's row: chunk v / 8, element
  /// v % 8 of it.
  Value column(int64_t v) {
    return bin<arith::AddIOp>(laneCol, i64(8 * lanesPerRow * (v / 8) + v % 8));
  }

  void declareReduceSmem(gpu::GPUModuleOp m) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(m.getBody());
    if (m.lookupSymbol(kReduceSmem))
      return;
    auto words = LLVM::LLVMArrayType::get(i32T, 32);
    LLVM::GlobalOp::create(b, loc, words, /*isConstant=*/false,
                           LLVM::Linkage::Internal, kReduceSmem, Attribute(),
                           /*alignment=*/4, /*addrSpace=*/3);
  }

  /// The lane's rows of x as f32, rows past S zero: row r of the lane is
  /// the warp's row r * (32 / lanesPerRow) + lane / lanesPerRow.
  void loadRows(Value blk, Value head, Value batch) {
    Value s = ext64(param("S"));
    Value last = bin<arith::SubIOp>(s, i64(1));
    Value row0 = bin<arith::MulIOp>(ext64(blk), i64(kQuantizeRows));
    Value wrow = bin<arith::MulIOp>(ext64(warp), i64(rowsPerWarp));
    row0 = bin<arith::AddIOp>(row0, wrow);
    Value group = bin<arith::DivUIOp>(lane, i32(lanesPerRow));
    row0 = bin<arith::AddIOp>(row0, ext64(group));
    Value laneInRow = bin<arith::RemUIOp>(lane, i32(lanesPerRow));
    laneCol = bin<arith::MulIOp>(ext64(laneInRow), i64(8));
    Value base = bin<arith::MulIOp>(ext64(batch), param("xStrideB"));
    Value hoff = bin<arith::MulIOp>(ext64(head), param("xStrideH"));
    base = bin<arith::AddIOp>(base, hoff);
    auto chunkT = VectorType::get({8}, b.getI16Type());
    SmallVector<Value> raw; // rowsPerLane x chunks
    for (int64_t r = 0; r < rowsPerLane; ++r) {
      Value row = bin<arith::AddIOp>(row0, i64(r * (32 / lanesPerRow)));
      rowIndex.push_back(row);
      rowValid.push_back(cmpi(CmpIPredicate::ult, row, s));
      Value clamped = bin<arith::MinUIOp>(row, last);
      Value rowOff = bin<arith::MulIOp>(clamped, param("xStrideS"));
      rowOff = bin<arith::AddIOp>(base, rowOff);
      for (int64_t v = 0; v < perLane; v += 8) {
        Value off = bin<arith::AddIOp>(rowOff, column(v));
        raw.push_back(LLVM::LoadOp::create(b, loc, chunkT,
                                           globalAt(param("X"), off, 2),
                                           /*alignment=*/16));
      }
    }
    auto f32v = VectorType::get({8}, f32T);
    SmallVector<Type> types(raw.size(), f32v);
    auto widen = [&](Type half) -> SmallVector<Value> {
      SmallVector<Value> out;
      auto halfT = VectorType::get({8}, half);
      for (Value v : raw) {
        Value h = LLVM::BitcastOp::create(b, loc, halfT, v);
        out.push_back(arith::ExtFOp::create(b, loc, f32v, h));
      }
      return out;
    };
    Value isF16 = cmpi(CmpIPredicate::ne, param("xIsF16"), i32(0));
    auto wide = ifElse(
        isF16, types, [&] { return widen(b.getF16Type()); },
        [&] { return widen(b.getBF16Type()); });
    Value zero = LLVM::ZeroOp::create(b, loc, f32v);
    const int64_t chunks = perLane / 8;
    for (int64_t r = 0; r < rowsPerLane; ++r)
      for (int64_t c = 0; c < chunks; ++c) {
        Value v = arith::SelectOp::create(b, loc, rowValid[r],
                                          wide.getResult(r * chunks + c), zero);
        for (int64_t e = 0; e < 8; ++e)
          vals.push_back(vector::ExtractOp::create(b, loc, v, e));
      }
  }

  Value &at(SmallVector<Value> &v, int64_t r, int64_t e) {
    return v[r * perLane + e];
  }

  /// vals = vals H_D diag(signs) / sqrt(D) where signs is given.
  void rotate() {
    Value given = isGiven(param("signs"));
    SmallVector<Type> types(vals.size(), f32T);
    auto op = ifElse(
        given, types,
        [&]() -> SmallVector<Value> {
          SmallVector<Value> v = vals;
          // the column bits inside the lane (of the value's index there)
          for (int64_t bit = 1; bit < perLane; bit *= 2)
            for (int64_t r = 0; r < rowsPerLane; ++r)
              for (int64_t e = 0; e < perLane; ++e) {
                if (e & bit)
                  continue;
                Value lo = at(v, r, e), hi = at(v, r, e | bit);
                at(v, r, e) = bin<arith::AddFOp>(lo, hi);
                at(v, r, e | bit) = bin<arith::SubFOp>(lo, hi);
              }
          // the lane bits
          for (int64_t bit = 1; bit < lanesPerRow; bit *= 2) {
            Value mine = bin<arith::AndIOp>(lane, i32(bit));
            Value upper = cmpi(CmpIPredicate::ne, mine, i32(0));
            Value sign =
                arith::SelectOp::create(b, loc, upper, f32(-1.0), f32(1.0));
            for (Value &x : v) {
              Value other = NVVM::ShflOp::create(
                  b, loc, f32T, i32(-1), x, i32(bit), i32(31),
                  NVVM::ShflKind::bfly, UnitAttr());
              x = LLVM::FMAOp::create(b, loc, sign, x, other);
            }
          }
          auto f32x4 = VectorType::get({4}, f32T);
          for (int64_t e = 0; e < perLane; e += 4) {
            Value sg4 = LLVM::LoadOp::create(
                b, loc, f32x4, globalAt(param("signs"), column(e), 4),
                /*alignment=*/16);
            for (int64_t k = 0; k < 4; ++k) {
              Value sg = vector::ExtractOp::create(b, loc, sg4, k);
              Value c = bin<arith::MulFOp>(sg, f32(1.0 / std::sqrt(double(d))));
              for (int64_t r = 0; r < rowsPerLane; ++r)
                at(v, r, e + k) = bin<arith::MulFOp>(at(v, r, e + k), c);
            }
          }
          return v;
        },
        [&]() -> SmallVector<Value> { return vals; });
    for (size_t i = 0; i < vals.size(); ++i)
      vals[i] = op.getResult(i);
  }

  /// max |v| over this thread's values, as the bits of a non-negative f32.
  Value ownAmaxBits() {
    Value m = i32(0);
    for (Value x : vals) {
      Value bits = arith::BitcastOp::create(b, loc, i32T, x);
      bits = bin<arith::AndIOp>(bits, i32(0x7FFFFFFF));
      m = bin<arith::MaxUIOp>(m, bits);
    }
    return m;
  }

  /// The CTA's max of `bits` in every thread.
  Value ctaMax(Value bits) {
    Value w = NVVM::ReduxOp::create(b, loc, i32T, bits, NVVM::ReduxKind::UMAX,
                                    i32(-1));
    Value words = LLVM::AddressOfOp::create(b, loc, smemPtrT, kReduceSmem);
    Value leader = cmpi(CmpIPredicate::eq, lane, i32(0));
    ifThen(leader, [&] {
      Value off = bin<arith::MulIOp>(warp, i32(4));
      LLVM::StoreOp::create(b, loc, w, smemPtr(words, off), /*alignment=*/4);
    });
    NVVM::Barrier0Op::create(b, loc);
    Value m = i32(0);
    for (int64_t i = 0; i < warps; ++i) {
      Value x = LLVM::LoadOp::create(b, loc, i32T, smemPtr(words, 4 * i),
                                     /*alignment=*/4);
      m = bin<arith::MaxUIOp>(m, x);
    }
    return m;
  }

  /// The scale to multiply by; thread 0 writes the descale (mode 0: the
  /// block's, mode 2: the head's, by its first block's CTA).
  Value scales(Value amax, Value headPass, Value blk, Value bh,
               Value blockEntry) {
    Value ok = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, amax,
                                     f32Bits(kAmaxMinBits));
    Value safe = arith::SelectOp::create(b, loc, ok, amax, f32(1.0));
    Value descale = bin<arith::DivFOp>(safe, f32(kE4M3Max));
    descale = arith::SelectOp::create(b, loc, ok, descale, f32(1.0));
    Value scale = bin<arith::DivFOp>(f32(kE4M3Max), safe);
    scale = arith::SelectOp::create(b, loc, ok, scale, f32(1.0));
    Value first = cmpi(CmpIPredicate::eq, tid, i32(0));
    Value firstBlk = cmpi(CmpIPredicate::eq, blk, i32(0));
    Value headWriter = bin<arith::AndIOp>(headPass, firstBlk);
    Value notHead =
        bin<arith::XOrIOp>(headPass, i1(true));
    Value writes = bin<arith::OrIOp>(headWriter, notHead);
    writes = bin<arith::AndIOp>(writes, first);
    ifThen(writes, [&] {
      Value entry = arith::SelectOp::create(b, loc, headPass, bh, blockEntry);
      LLVM::StoreOp::create(b, loc, descale,
                            globalAt(param("descale"), entry, 4),
                            /*alignment=*/4);
    });
    return scale;
  }

  /// y = e4m3(vals * scale) (round to nearest even, saturating at 448) for
  /// the lane's rows below S: 8 bytes a chunk.
  void storeRows(Value scale, Value head, Value batch) {
    Type et = b.getType<Float8E4M3FNType>();
    Value base = bin<arith::MulIOp>(ext64(batch), param("yStrideB"));
    Value hoff = bin<arith::MulIOp>(ext64(head), param("yStrideH"));
    base = bin<arith::AddIOp>(base, hoff);
    auto pairsT = VectorType::get({4}, b.getI16Type());
    for (int64_t r = 0; r < rowsPerLane; ++r) {
      SmallVector<Value> words;
      for (int64_t v = 0; v < perLane; v += 8) {
        SmallVector<Value> pairs;
        for (int64_t e = v; e < v + 8; e += 2) {
          Value lo = bin<arith::MulFOp>(at(vals, r, e), scale);
          Value hi = bin<arith::MulFOp>(at(vals, r, e + 1), scale);
          // (the first source goes to the high byte)
          pairs.push_back(NVVM::ConvertF32x2ToF8x2Op::create(
              b, loc, b.getI16Type(), hi, lo, NVVM::FPRoundingMode::RN,
              NVVM::SaturationMode::SATFINITE, /*relu=*/false, et));
        }
        Value packed = vector::FromElementsOp::create(b, loc, pairsT, pairs);
        words.push_back(LLVM::BitcastOp::create(b, loc, i64T, packed));
      }
      ifThen(rowValid[r], [&] {
        Value rowOff = bin<arith::MulIOp>(rowIndex[r], param("yStrideS"));
        rowOff = bin<arith::AddIOp>(base, rowOff);
        for (int64_t v = 0; v < perLane; v += 8) {
          Value off = bin<arith::AddIOp>(rowOff, column(v));
          LLVM::StoreOp::create(b, loc, words[v / 8], globalAt(param("Y"), off, 1),
                                /*alignment=*/8);
        }
      });
    }
  }
};

} // namespace

void fa3::hopper::buildQuantizeKernel(OpBuilder &b, Location loc,
                                      gpu::GPUModuleOp module,
                                      const std::string &name,
                                      int64_t headDim) {
  OpBuilder::InsertionGuard g(b);
  QuantizeBuilder quantize(b, loc, headDim);
  quantize.build(module, name);
}
