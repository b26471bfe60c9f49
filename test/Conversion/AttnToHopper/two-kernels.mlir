// Two attention ops in one function: one gpu.module and kernel each.
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper | FileCheck %s
// CHECK-NOT: func.func @two
// CHECK: gpu.module @two_kernels
// CHECK: gpu.func @two_kernel(
// CHECK-SAME: causal = false
// CHECK: gpu.module @two_1_kernels
// CHECK: gpu.func @two_1_kernel(
// CHECK-SAME: causal = true
func.func @two(%q: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xbf16>, %o2: memref<1x2x64x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) outs(%o : memref<1x2x64x64xbf16>)
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) outs(%o2 : memref<1x2x64x64xbf16>) causal
  return
}
