//===- ThreadIndependent.h - what another thread may compute again -*- C++ -*-===//
//
// Shared by hopper-warp-specialize, hopper-producer-warp-transpose and
// hopper-warp-copy.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_DIALECT_HOPPER_TRANSFORMS_THREADINDEPENDENT_H
#define FA3_DIALECT_HOPPER_TRANSFORMS_THREADINDEPENDENT_H

#include "mlir/IR/Operation.h"

#include <string>

namespace fa3::hopper {

/// Whether `op` reads which thread runs it (its index, or a warpgroup's
/// register fragment): another thread computing it again gets its own.
bool readsThreadIndex(mlir::Operation *op);

/// Why another thread may not run `op` again for itself, or "" if it may:
/// arithmetic, reads of global or constant memory (which no role writes
/// while the kernel runs), calls of functions that do only that.
std::string whyNotRepeatable(mlir::Operation *op);

} // namespace fa3::hopper

#endif
