//===- Patterns.h - the pieces of convert-hopper-to-nvvm --------*- C++ -*-===//
//
// One file per concept of the hopper dialect, each adding its ops'
// lowering patterns (one pattern per op) to the pass.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_HOPPERTONVVM_PATTERNS_H
#define FA3_LIB_CONVERSION_HOPPERTONVVM_PATTERNS_H

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
} // namespace fa3::hopper

#endif
