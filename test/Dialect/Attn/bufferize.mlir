// one-shot-bufferize turns the tensor form into the memref form, writing the
// results into the `outs` buffers.
// RUN: fa3-opt %s --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// CHECK-LABEL: func @attention(
// CHECK-SAME: %[[Q:[^:]*]]: memref<2x8x128x64xbf16, {{.*}}>, %[[K:[^:]*]]: memref<2x2x256x64xbf16, {{.*}}>, %[[V:[^:]*]]: memref<2x2x256x64xbf16, {{.*}}>, %[[O:[^:]*]]: memref<2x8x128x64xbf16, {{.*}}>, %[[L:[^:]*]]: memref<2x8x128xf32, {{.*}}>)
// CHECK-NEXT: attn.flash_attention ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) outs(%[[O]], %[[L]] : {{.*}}) causal{{$}}
// CHECK-NEXT: return %[[O]], %[[L]]
func.func @attention(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x2x256x64xbf16>,
                     %v: tensor<2x2x256x64xbf16>, %o: tensor<2x8x128x64xbf16>,
                     %l: tensor<2x8x128xf32>) -> (tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>) {
  %r:2 = attn.flash_attention ins(%q, %k, %v : tensor<2x8x128x64xbf16>, tensor<2x2x256x64xbf16>, tensor<2x2x256x64xbf16>)
           outs(%o, %l : tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>) causal -> tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
  return %r#0, %r#1 : tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
}

// An `outs` made by tensor.empty becomes a fresh allocation.
// CHECK-LABEL: func @fresh_output(
// CHECK: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x4x64x32xf32>
// CHECK: attn.flash_attention ins({{.*}}) outs(%[[ALLOC]] : memref<1x4x64x32xf32>)
func.func @fresh_output(%q: tensor<1x4x64x32xf32>, %k: tensor<1x4x64x32xf32>,
                        %v: tensor<1x4x64x32xf32>) -> tensor<1x4x64x32xf32> {
  %e = tensor.empty() : tensor<1x4x64x32xf32>
  %r = attn.flash_attention ins(%q, %k, %v : tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>)
         outs(%e : tensor<1x4x64x32xf32>) -> tensor<1x4x64x32xf32>
  return %r : tensor<1x4x64x32xf32>
}
