//===- HopperSupport.h - what the Hopper kernel takes -----------*- C++ -*-===//
//
// The head dims the generated kernel supports, in one place for the kernel
// pass and the C API's spec check.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_CONVERSION_HOPPERSUPPORT_H
#define FA3_CONVERSION_HOPPERSUPPORT_H

#include "llvm/ADT/STLExtras.h"

#include <cstdint>
#include <string>

namespace fa3::hopper {
/// Head dims (of q and k, and of v and o: equal, or 192 with 128, the
/// pairings checkSupported takes) whose O accumulator fits the consumers'
/// registers beside S. Tiles are whole 64-column TMA boxes (128-byte swizzle rows of 16-bit
/// elements): 96 is computed in a 128-column tile.
inline constexpr int64_t kHeadDims[] = {64, 96, 128, 192, 256};

inline bool isSupportedHeadDim(int64_t d) {
  return llvm::is_contained(kHeadDims, d);
}

/// "64, 96, 128, 192 or 256", for messages.
inline std::string headDimsText() {
  std::string s;
  for (size_t i = 0; i < std::size(kHeadDims); ++i)
    s += (i == 0 ? "" : i + 1 == std::size(kHeadDims) ? " or " : ", ") +
         std::to_string(kHeadDims[i]);
  return s;
}

/// The query length from which attn-hopper-config's table configures a
/// forward attention differently (its option min-seqlen-q), 0 where one
/// configuration serves every length: the kernel a launcher picks for
/// calls with Sq at or past it. For the C API's spec compile, which then
/// adds that kernel beside the one for any length; defined beside the
/// table (HopperConfig.cpp). `dtype`: "bf16", "f16" or "e4m3"; a window
/// side -1 is unbounded. A packed variable-length batch's kernel takes the
/// same entries, its launcher's length the batch's mean.
int64_t longSequenceFrom(const std::string &dtype, int64_t headDim,
                         int64_t headDimV, int64_t windowLeft,
                         int64_t windowRight, bool decode);
} // namespace fa3::hopper

#endif
