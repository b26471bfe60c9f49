//===- BuilderBase.h - what the Hopper kernel builders share ---*- C++ -*-===//
//
// The forward's and the backward's kernel builders build with OpBuilder
// into a gpu.func: both need its parameters by name, constants gathered
// at the top in key order, arithmetic, structured control flow and wgmma
// shared-memory descriptors. Header-only, included by the builders of this
// directory (the forward's, the backward's and its element-wise kernels').
//
// The ops must come out in the same order whichever compiler builds a
// builder (the kernels are compared byte for byte between a GCC and a clang
// build): every op is built in a statement of its own, never as one of two
// IR-building arguments of a call, whose evaluation order C++ leaves open.
// Constants are the exception: they are gathered at the top of the kernel
// in key order at the end (see `cst`), so the order in which they are first
// asked for does not matter.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_BUILDERBASE_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_BUILDERBASE_H

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <map>
#include <string>

namespace fa3::hopper {
// A private header of this directory's builders, which build in the
// MLIR namespace throughout.
using namespace mlir;

/// wgmma shared-memory descriptor constant part: LBO, SBO, 128B swizzle.
inline int64_t descConst(int64_t lbo, int64_t sbo) {
  uint64_t v = (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
               (uint64_t(1) << 62);
  return static_cast<int64_t>(v);
}

/// A double as %.17g (exact), the key of an f32 constant.
inline std::string f32Key(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.17g", v);
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

class BuilderBase {
protected:
  using CmpIPredicate = arith::CmpIPredicate;

  BuilderBase(mlir::OpBuilder &b, mlir::Location loc)
      : b(b), loc(loc), ctx(b.getContext()) {
    i1T = b.getI1Type();
    i32T = b.getI32Type();
    i64T = b.getI64Type();
    f32T = b.getF32Type();
    smemPtrT = mlir::LLVM::LLVMPointerType::get(ctx, 3);
  }

  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::MLIRContext *ctx;
  Type i1T, i32T, i64T, f32T, smemPtrT;

  /// The kernel's entry block and its parameters by name.
  mlir::Block *entry = nullptr;
  llvm::StringMap<Value> params;
  Value param(llvm::StringRef name) {
    Value v = params.lookup(name);
    assert(v && "no such kernel parameter");
    return v;
  }

  // --- constants and arithmetic ---------------------------------------------
  // Constants are keyed by type and value and gathered at the top of the
  // kernel in key order (hoistConstants), so the order in which the builder
  // first asks for them (which can differ between compilers where two
  // requests share one expression) does not change the IR.
  std::map<std::string, Operation *> consts;
  Value cst(const std::string &key, TypedAttr value) {
    auto it = consts.find(key);
    if (it != consts.end())
      return it->second->getResult(0);
    OpBuilder cb = OpBuilder::atBlockBegin(entry);
    Operation *c = arith::ConstantOp::create(cb, loc, value);
    consts[key] = c;
    return c->getResult(0);
  }
  void hoistConstants() {
    Operation *prev = nullptr;
    for (auto &[key, c] : consts) {
      if (prev)
        c->moveAfter(prev);
      else
        c->moveBefore(entry, entry->begin());
      prev = c;
    }
  }
  Value i1(bool v) {
    return cst(v ? "i1:1" : "i1:0", b.getBoolAttr(v));
  }
  Value i32(int64_t v) {
    return cst("i32:" + std::to_string(v), b.getI32IntegerAttr(v));
  }
  Value i64(int64_t v) {
    return cst("i64:" + std::to_string(v), b.getI64IntegerAttr(v));
  }
  Value f32(double v) {
    return cst("f32:" + f32Key(v), b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value f32Bits(uint32_t bits) {
    std::string key;
    llvm::raw_string_ostream os(key);
    os << "f32:0x" << llvm::format_hex_no_prefix(bits, 8, /*Upper=*/true);
    APFloat v(APFloat::IEEEsingle(), APInt(32, bits));
    return cst(key, FloatAttr::get(f32T, v));
  }
  template <typename OpT> Value bin(Value x, Value y) {
    return OpT::create(b, loc, x, y);
  }
  Value cmpi(CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  }
  Value ext64(Value v) { return arith::ExtUIOp::create(b, loc, i64T, v); }

  /// A tile program's index arithmetic (TiledCell.cpp's isIndexArith:
  /// index and i1 values) rebuilt in i32 at the insertion point. `leaf`
  /// gives the lowered value of the program's loop variables and schedule
  /// results (null for any other value); each other value is built once
  /// per `done`, whose ops dominate only where they are built.
  Value rebuildIndex(Value v, llvm::function_ref<Value(Value)> leaf,
                     llvm::DenseMap<Value, Value> &done) {
    if (Value l = leaf(v))
      return l;
    auto it = done.find(v);
    if (it != done.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    Value r;
    if (auto c = dyn_cast<arith::ConstantOp>(def)) {
      int64_t x = cast<IntegerAttr>(c.getValue()).getValue().getSExtValue();
      r = c.getType().isInteger(1) ? i1(x != 0) : i32(x);
    } else {
      SmallVector<Value> operands;
      for (Value operand : def->getOperands()) {
        Value lowered = rebuildIndex(operand, leaf, done);
        operands.push_back(lowered);
      }
      OperationState st(loc, def->getName());
      st.addOperands(operands);
      st.addAttributes(def->getAttrs());
      Type rt = def->getResult(0).getType();
      st.addTypes(rt.isIndex() ? Type(i32T) : rt);
      r = b.create(st)->getResult(0);
    }
    done[v] = r;
    return r;
  }

  // --- shared memory ----------------------------------------------------------
  Value smemPtr(Value base, int64_t off) {
    return LLVM::GEPOp::create(b, loc, smemPtrT, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(off)});
  }
  Value smemPtr(Value base, Value off) {
    return LLVM::GEPOp::create(b, loc, smemPtrT, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{off});
  }
  Value ptrToI32(Value p) { return LLVM::PtrToIntOp::create(b, loc, i32T, p); }
  /// Global pointer `base` + `elems` (i64) elements of `bytes` bytes each.
  Value globalAt(Value base, Value elems, int64_t bytes) {
    Value off = bin<arith::MulIOp>(elems, i64(bytes));
    return LLVM::GEPOp::create(b, loc, LLVM::LLVMPointerType::get(ctx, 1),
                               b.getI8Type(), base, ValueRange{off});
  }
  /// Zero as an i64 that neither LLVM nor ptxas folds: the top bit of a
  /// loop's index (non-negative i32), through an asm. Added in the loop
  /// body to a wgmma descriptor that does not change from iteration to
  /// iteration, it keeps ptxas from hoisting the descriptor's k-steps out
  /// of the loop: ptxas forms each in uniform registers where its wgmma
  /// issues instead of holding them all in registers across the loop
  /// (bench/NOTES.md, Log, "Descriptors formed at use").
  Value opaqueZero(Value index) {
    return ext64(inlineAsm(i32T, ValueRange{index}, "shr.u32 $0, $1, 31;",
                           "=r,r"));
  }
  /// `asm volatile` in AT&T dialect; `res` null for none.
  Value inlineAsm(Type res, ValueRange operands, llvm::StringRef text,
                  llvm::StringRef constraints) {
    auto op = LLVM::InlineAsmOp::create(
        b, loc, res, operands, text, constraints, /*has_side_effects=*/true,
        /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
        LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
        /*operand_attrs=*/ArrayAttr());
    return res ? op.getResult(0) : Value();
  }

  /// Whether global pointer `p` is not null: an optional array the launch
  /// gives (NULL where it gives none).
  Value isGiven(Value p) {
    Value null =
        LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(ctx, 1));
    return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, p, null);
  }

  // --- structured control flow ------------------------------------------------
  /// scf.if without results: builds `then` into its block.
  template <typename Fn> void ifThen(Value cond, Fn then) {
    auto op = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
  }
  /// scf.if without results and with an else: builds each arm into its
  /// block.
  template <typename Then, typename Else>
  void ifThenElse(Value cond, Then then, Else otherwise) {
    auto op = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
    b.setInsertionPoint(op.elseBlock()->getTerminator());
    otherwise();
  }
  /// scf.if with results: each arm returns the values it yields.
  template <typename Then, typename Else>
  scf::IfOp ifElse(Value cond, TypeRange types, Then then, Else otherwise) {
    auto op = scf::IfOp::create(b, loc, types, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(op.thenBlock());
    SmallVector<Value> t = then();
    scf::YieldOp::create(b, loc, t);
    b.setInsertionPointToEnd(op.elseBlock());
    SmallVector<Value> e = otherwise();
    scf::YieldOp::create(b, loc, e);
    return op;
  }

  /// `v`, computed alike in every lane, as lane 0's (hopper.warp_uniform:
  /// shfl.sync.idx in a role of whole warps, `v` in the producer thread).
  Value laneZero(Value v) { return WarpUniformOp::create(b, loc, i32T, v); }

  // --- the kernel -------------------------------------------------------------
  /// At the end of `m`: the dynamic shared memory @attn_smem (1024-aligned:
  /// 128B swizzle atoms; once per module) and the kernel `name` taking `list`'s parameters
  /// (each with a name and an MLIR type, from fa3rt_abi.def) for `threads`
  /// threads; the builder then builds into its entry block, where `param`
  /// finds the parameters by name.
  template <typename Param, size_t N>
  gpu::GPUFuncOp openKernel(gpu::GPUModuleOp m, llvm::StringRef name,
                            const Param (&list)[N], int64_t threads,
                            int64_t ctasPerSm = 1) {
    b.setInsertionPointToEnd(m.getBody());
    if (!m.lookupSymbol("attn_smem")) { // once per module
      auto smem = LLVM::GlobalOp::create(
          b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), 0),
          /*isConstant=*/false, LLVM::Linkage::External, "attn_smem",
          Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
      smem.setUnnamedAddr(LLVM::UnnamedAddr::None); // as the parser sets it
    }
    llvm::SmallVector<Type> argTypes;
    for (const Param &p : list) {
      Type t = parseType(p.mlirType, ctx);
      assert(t && "a kernel parameter type of fa3rt_abi.def does not parse");
      argTypes.push_back(t);
    }
    auto fn = gpu::GPUFuncOp::create(b, loc, name,
                                     b.getFunctionType(argTypes, {}));
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(), b.getDenseI32ArrayAttr(
                                    {static_cast<int32_t>(threads), 1, 1}));
    fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                b.getI32IntegerAttr(static_cast<int32_t>(ctasPerSm)));
    entry = &fn.front();
    for (size_t i = 0; i < N; ++i)
      params[list[i].name] = entry->getArgument(i);
    b.setInsertionPointToEnd(entry);
    return fn;
  }
  /// After the body: the constants gathered at the top, the builder after
  /// the kernel.
  void closeKernel(gpu::GPUFuncOp fn) {
    hoistConstants();
    b.setInsertionPointAfter(fn);
  }
  /// A trap unless the dynamic shared memory starts 1024-aligned (128B
  /// swizzle atoms), then the rings' barriers initialised and made visible
  /// to the async proxy, and the tensor maps `maps` prefetched: one thread's
  /// setup (the caller guards it and then meets the CTA at a barrier).
  void setUp(Value smem, llvm::ArrayRef<Value> rings,
             llvm::ArrayRef<const char *> maps) {
    Value sa = ptrToI32(smem);
    Value low = bin<arith::AndIOp>(sa, i32(1023));
    Value bad = cmpi(CmpIPredicate::ne, low, i32(0));
    ifThen(bad, [&] { inlineAsm(Type(), ValueRange{}, "trap;", ""); });
    for (Value r : rings)
      RingInitOp::create(b, loc, r);
    NVVM::FenceMbarrierInitOp::create(b, loc);
    for (const char *tm : maps)
      NVVM::PrefetchOp::create(b, loc, NVVM::PrefetchCacheLevelAttr(),
                               NVVM::CacheEvictionPriorityAttr(), param(tm),
                               /*predicate=*/Value(), /*tensormap=*/true);
  }

  /// The fill of slot u of ring r in the consumers' program: `loads`
  /// builds the slot's loads (hopper.ring.fill, placed before the
  /// consumers' wait for the slot; hopper-warp-specialize moves it into
  /// the producer thread).
  void fill(Value r, Value u, llvm::function_ref<void()> loads) {
    auto f = RingFillOp::create(b, loc, r, u);
    OpBuilder::InsertionGuard g(b);
    b.createBlock(&f.getBody());
    loads();
    RingFillOp::ensureTerminator(f.getBody(), b, loc);
  }
  /// `body` on the producer warpgroup's thread 0 (hopper.producer_thread).
  void onProducerThread(llvm::function_ref<void()> body) {
    auto role = ProducerThreadOp::create(b, loc);
    OpBuilder::InsertionGuard g(b);
    b.createBlock(&role.getBody());
    body();
    ProducerThreadOp::ensureTerminator(role.getBody(), b, loc);
  }
  /// `body(warp)` on warps first .. first + count - 1 of the producer
  /// warpgroup, `warp` the index among them (hopper.producer_warps).
  void onProducerWarps(int64_t first, int64_t count,
                       llvm::function_ref<void(Value)> body) {
    auto role = ProducerWarpsOp::create(b, loc, static_cast<uint64_t>(first),
                                        static_cast<uint64_t>(count));
    OpBuilder::InsertionGuard g(b);
    Block *blk = b.createBlock(&role.getBody(), {}, {b.getI32Type()}, {loc});
    body(blk->getArgument(0));
    ProducerWarpsOp::ensureTerminator(role.getBody(), b, loc);
  }

  /// Thread 0 of a warpgroup (`ltid` its thread index in it) waits until
  /// the bulk stores it committed have read their shared memory: before
  /// the CTA exits, which frees it.
  void drainBulkReads(Value ltid) {
    Value first = cmpi(CmpIPredicate::eq, ltid, i32(0));
    ifThen(first, [&] {
      NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0u, b.getUnitAttr());
    });
  }

  /// A wgmma shared-memory descriptor: the address of `offI32` bytes into
  /// `smem` (>> 4, 14 bits) with the constant fields `constPart`
  /// (descConst).
  Value descBase(Value smem, Value offI32, int64_t constPart) {
    Value p = smemPtr(smem, offI32);
    Value a = ptrToI32(p);
    a = bin<arith::AndIOp>(a, i32(0x3FFFF));
    a = bin<arith::ShRUIOp>(a, i32(4));
    a = ext64(a);
    return bin<arith::OrIOp>(a, i64(constPart));
  }

};

} // namespace fa3::hopper

#endif
