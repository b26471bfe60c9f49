// Passes that need the memref form say so instead of crashing.
// RUN: not fa3-opt %s --attn-lower-to-loops 2>&1 | FileCheck %s --check-prefix=LOOPS
// RUN: not fa3-opt %s --attn-tile 2>&1 | FileCheck %s --check-prefix=TILE

// LOOPS: error: 'attn.flash_attention' op attn-lower-to-loops needs the memref form; run one-shot-bufferize first
// TILE: error: 'attn.flash_attention' op attn-tile needs the memref form; run one-shot-bufferize first
func.func @tensor(%q: tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32> {
  %r = attn.flash_attention ins(%q, %q, %q : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>)
         outs(%q : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return %r : tensor<1x1x8x8xf32>
}
