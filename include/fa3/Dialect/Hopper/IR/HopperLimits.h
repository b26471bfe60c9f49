//===- HopperLimits.h - hardware limits the hopper level checks -*- C++ -*-===//
//
// Plain constants (no MLIR), shared by the dialect's verifiers and the
// kernel builder's layout.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_DIALECT_HOPPER_IR_HOPPERLIMITS_H
#define FA3_DIALECT_HOPPER_IR_HOPPERLIMITS_H

#include <cstdint>

namespace fa3::hopper {
/// The largest dynamic shared memory a Hopper CTA may use (227 KiB).
inline constexpr int64_t kMaxDynamicSmem = 232448;
} // namespace fa3::hopper

#endif
