//===- Patterns.h - the pieces of convert-hopper-to-nvvm --------*- C++ -*-===//
//
// One file per concept of the hopper dialect, each adding its ops'
// lowering patterns (one pattern per op) to the pass.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_HOPPERTONVVM_PATTERNS_H
#define FA3_LIB_CONVERSION_HOPPERTONVVM_PATTERNS_H

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/DialectConversion.h"

namespace fa3::hopper {

/// !hopper.frag becomes the registers a thread holds, as an LLVM struct:
/// N / 2 f32 for a 64xNxf32 tile, N / 4 i32 (two 16-bit floats each) for a
/// 16-bit one, 2 f32 for a row vector (the thread's two rows).
void addFragmentTypeConversion(mlir::TypeConverter &converter);

/// What must not survive the pass: casts from a fragment to its registers
/// and, in kernels (a gpu.module), the f32 math.exp2 and math.fma that the
/// shared online-softmax builder makes (they become ex2.approx.ftz and
/// llvm.intr.fma).
void addFragmentLegality(mlir::ConversionTarget &target);

/// Warpgroup MMA, the online softmax step and the row math on fragments
/// (FragmentToNVVM.cpp).
void populateFragmentToNVVMPatterns(const mlir::TypeConverter &converter,
                                    mlir::RewritePatternSet &patterns);

/// The pipeline ring (RingToNVVM.cpp): adds to `converter` the conversion of
/// `!hopper.ring` to the `!llvm.ptr<3>` base of dynamic shared memory (the
/// ring's facts are static: its ops lower to offsets from that base), and
/// to `patterns` one pattern per ring op and `hopper.tma_load`, which take
/// their ring operands converted.
void populateRingToNVVMPatterns(mlir::TypeConverter &converter,
                                mlir::RewritePatternSet &patterns);

/// The tile scheduler's arithmetic (SchedulerToNVVM.cpp).
void populateSchedulerToNVVMPatterns(mlir::RewritePatternSet &patterns);

/// The epilogue: 1 / l and the LSE, the O and LSE stores
/// (EpilogueToNVVM.cpp).
void populateEpilogueToNVVMPatterns(const mlir::TypeConverter &converter,
                                    mlir::RewritePatternSet &patterns);

// Helpers the patterns share (FragmentToNVVM.cpp, HopperToNVVM.cpp).

/// Constants (one definition for every pattern file).
mlir::Value i32Const(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
/// fence.proxy.async.shared::cta: this thread's shared-memory writes become
/// visible to the async proxy (a TMA store, a bulk copy, a wgmma operand).
void fenceSharedForAsyncProxy(mlir::OpBuilder &b, mlir::Location loc);
mlir::Value i64Const(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value f32Const(mlir::OpBuilder &b, mlir::Location loc, double v);

/// Inline PTX in AT&T dialect, for what NVVM has no op for (the register-A
/// wgmma, the register fences, opaque copies, predicated cluster arrives).
mlir::LLVM::InlineAsmOp inlineAsm(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Type result, mlir::ValueRange operands,
                                  llvm::StringRef text,
                                  llvm::StringRef constraints,
                                  bool sideEffects);

/// The registers of a converted fragment (its struct's fields, in order).
llvm::SmallVector<mlir::Value> unpack(mlir::OpBuilder &b, mlir::Location loc,
                                      mlir::Value regs);
/// Registers back into a fragment's struct.
mlir::Value pack(mlir::OpBuilder &b, mlir::Location loc,
                 mlir::Type structType, mlir::ValueRange regs);

/// The thread's place in its warpgroup's fragment, from tid.x: its index in
/// the warpgroup (ltid), warp and lane, its lane in the row's quad
/// (lane % 4), the row of its first register (16 warp + lane / 4; the
/// second is 8 below) and its first column (2 (lane % 4)).
struct ThreadPlace {
  mlir::Value ltid, warp, lane, quadLane, row, colbase;
};
ThreadPlace threadPlace(mlir::OpBuilder &b, mlir::Location loc);

/// stmatrix .x4: lane l gives the address of row l % 8 (`rowIn`) of matrix
/// l / 8, which holds rows 8 (l / 8 % 2) (`half`) .. of the warp's 16 and
/// the accumulator's n8 block k + l / 16 (`blockHi`) of the pair k, k + 1
/// the instruction stores.
struct StmatrixLanes {
  mlir::Value rowIn, half, blockHi;
};
StmatrixLanes stmatrixLanes(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value lane);

/// A value combined over the four threads of its row's quad (adjacent
/// lanes: butterfly shuffles 1 and 2).
mlir::Value quadReduce(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                       llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)>
                           combine);

/// The hardware id of consumer `consumer`'s named barrier of `kind`: the
/// kind's base (the dialect's assignment) plus the consumer index.
mlir::Value namedBarrierId(mlir::OpBuilder &b, mlir::Location loc,
                           BarrierKind kind, int64_t consumers,
                           mlir::Value consumer);

} // namespace fa3::hopper

#endif
