//===- ProducerWarp.h - the producer program on whole warps -*- C++ -*-===//
//
// Shared by hopper-producer-warp-transpose and hopper-warp-copy, which both
// give whole warps the producer thread's program: the first warp 0, for
// the V transposer's worker 0, the second the warps that copy a paged tile
// with every lane; and which transposer counts those warps as workers.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_DIALECT_HOPPER_TRANSFORMS_PRODUCERWARP_H
#define FA3_DIALECT_HOPPER_TRANSFORMS_PRODUCERWARP_H

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace fa3::hopper {

/// The producer thread's program `thread` run by every lane of warps 0 ..
/// `warps` - 1: a hopper.producer_warps first 0 count `warps` takes its
/// place and body, in which each run of consecutive steps of one thread
/// (in any block) becomes a hopper.producer_thread again, its results
/// shared with the warp (one warp only: a shuffle from lane 0; with more,
/// a result is refused): the tile scheduler's claims and reset, a slot's
/// words and commit, and the loads that `oneThreadLoad` names (tile loads
/// before hopper-async-copy, TMA transfers after it). Every other op must
/// be one every lane may run: control flow, the waits for slots, what any
/// thread may compute again for itself (hopper-warp-specialize's rule),
/// and what `passRule` allows (""); it refuses, with a reason, what the
/// pass must not find. Else "cannot run on every lane of warp 0 (its
/// program <purpose>): <why>" (warps 0 .. N for several).
mlir::FailureOr<ProducerWarpsOp> runOnWarps(
    ProducerThreadOp thread, int64_t warps,
    llvm::function_ref<bool(mlir::Operation *)> oneThreadLoad,
    llvm::function_ref<std::optional<std::string>(mlir::Operation *)>
        passRule,
    llvm::StringRef purpose);

/// FP8's V transposer on warps 1 .. 3 that counts one worker more than
/// its warps (transpose_warps 4): its hopper.transpose_stage, whose worker
/// 0 the warps filling V are to join (hopper-producer-warp-transpose; the
/// copying warps 0 .. 3 are then all its workers, which hopper-warp-copy
/// lets share warps 1 .. 3). Else null.
TransposeStageOp joiningTransposer(ProducerWarpsOp role);

} // namespace fa3::hopper

#endif
