//===- Patterns.h - convert-hopper-to-nvvm's pattern sets -------*- C++ -*-===//
//
// Private to the pass: the patterns of each group of hopper ops, in files of
// their own, gathered by HopperToNVVM.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_HOPPERTONVVM_PATTERNS_H
#define FA3_LIB_CONVERSION_HOPPERTONVVM_PATTERNS_H

namespace mlir {
class RewritePatternSet;
class TypeConverter;
} // namespace mlir

namespace fa3::hopper {
/// The pipeline ring (RingToNVVM.cpp): adds to `converter` the conversion of
/// `!hopper.ring` to the `!llvm.ptr<3>` base of dynamic shared memory (the
/// ring's facts are static: its ops lower to offsets from that base), and
/// to `patterns` one pattern per ring op and `hopper.tma_load`, which take
/// their ring operands converted.
void populateRingToNVVMPatterns(mlir::TypeConverter &converter,
                                mlir::RewritePatternSet &patterns);
} // namespace fa3::hopper

#endif
