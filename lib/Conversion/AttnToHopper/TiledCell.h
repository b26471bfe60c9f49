//===- TiledCell.h - the tile program the consumers lower -------*- C++ -*-===//
//
// Checks that one attention's tiled form (attn-tile) has the shape whose
// per-tile program KernelBuilder lowers into the consumers' mainloop and
// epilogue (hopper::TiledCell), or, for the backward, GradKernelBuilder
// into the consumers' loop over the q heads and m-blocks of a kv block
// (hopper::TiledGradCell), and says where it does not.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CONVERSION_ATTNTOHOPPER_TILEDCELL_H
#define FA3_LIB_CONVERSION_ATTNTOHOPPER_TILEDCELL_H

#include "GradKernelBuilder.h"
#include "KernelBuilder.h"

#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/Support/LogicalResult.h"

#include <string>

namespace fa3::hopper {

/// The tile program around `update` (one attn.tile_update of the
/// attention whose schedule is `range` and epilogue `finalize`), or
/// failure with `why` set and `where` the op it is about.
mlir::FailureOr<TiledCell> matchTiledCell(attn::KvRangeOp range,
                                          attn::TileUpdateOp update,
                                          attn::TileFinalizeOp finalize,
                                          std::string &why,
                                          mlir::Operation *&where);

/// The backward's tile program around `update` (one
/// attn.tile_grad_update of the backward whose schedule is `range` and
/// epilogue `finalize`), or failure with `why` and `where` set.
mlir::FailureOr<TiledGradCell>
matchTiledGradCell(attn::QRangeOp range, attn::TileGradUpdateOp update,
                   attn::TileGradFinalizeOp finalize, std::string &why,
                   mlir::Operation *&where);

} // namespace fa3::hopper

#endif
