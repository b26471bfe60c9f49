// Passes that need the memref form say so instead of crashing.
// RUN: not fa3-opt %s --attn-lower-to-loops 2>&1 | FileCheck %s --check-prefix=LOOPS
// RUN: not fa3-opt %s --attn-tile 2>&1 | FileCheck %s --check-prefix=TILE

// LOOPS: error: 'attn.flash_attention' op attn-lower-to-loops needs the memref form: run --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" first, or a pipeline (--attn-cpu-tiled-pipeline, --attn-hopper-pipeline), which bufferizes
// TILE: error: 'attn.flash_attention' op attn-tile needs the memref form: run --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" first, or a pipeline
func.func @tensor(%q: tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32> {
  %r = attn.flash_attention ins(%q, %q, %q : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>)
         outs(%q : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return %r : tensor<1x1x8x8xf32>
}

// -----

// count-blocks counts into globals of the builtin.module: tile ops inside a
// gpu.module could not reference them (the pass produced invalid IR).
// RUN: not fa3-opt %s --split-input-file --attn-tile --attn-lower-tiles-to-loops=count-blocks=true 2>&1 | FileCheck %s --check-prefix=GPUMOD
// GPUMOD: error: attn-lower-tiles-to-loops{count-blocks} counts in globals of the builtin.module, which this op inside gpu.module cannot reach
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%q: memref<1x1x16x8xf32>, %o: memref<1x1x16x8xf32>) {
      attn.flash_attention ins(%q, %q, %q : memref<1x1x16x8xf32>, memref<1x1x16x8xf32>, memref<1x1x16x8xf32>) outs(%o : memref<1x1x16x8xf32>)
      gpu.return
    }
  }
}
