// Attention the pass cannot turn into independent kernels is an error, not
// silently dropped work (both used to exit 0).
// RUN: not fa3-opt %s --split-input-file --attn-hopper-pipeline=format=none 2>&1 | FileCheck %s

// Inside a gpu.func: the op was left unconverted.
// CHECK: error: 'attn.kv_range' is not converted: convert-attn-to-hopper turns host functions (func.func) holding attention into kernels, not attention in gpu.func
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%q: memref<1x1x128x64xbf16>, %o: memref<1x1x128x64xbf16>) kernel {
      attn.flash_attention ins(%q, %q, %q : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>) outs(%o : memref<1x1x128x64xbf16>)
      gpu.return
    }
  }
}

// -----

// One attention reads the other's output: two kernels launched on their
// own would lose the order.
// CHECK: unconverted.mlir:[[# @LINE + 3]]:8: error: cannot generate the Hopper kernel: this attention shares a buffer with another in the same function that writes it
func.func @chain(%q: tensor<1x1x128x64xbf16>, %o: tensor<1x1x128x64xbf16>, %o2: tensor<1x1x128x64xbf16>) -> tensor<1x1x128x64xbf16> {
  %a = attn.flash_attention ins(%q, %q, %q : tensor<1x1x128x64xbf16>, tensor<1x1x128x64xbf16>, tensor<1x1x128x64xbf16>) outs(%o : tensor<1x1x128x64xbf16>) -> tensor<1x1x128x64xbf16>
  %b = attn.flash_attention ins(%a, %q, %q : tensor<1x1x128x64xbf16>, tensor<1x1x128x64xbf16>, tensor<1x1x128x64xbf16>) outs(%o2 : tensor<1x1x128x64xbf16>) -> tensor<1x1x128x64xbf16>
  return %b : tensor<1x1x128x64xbf16>
}

// -----

// The second overwrites the first one's input (through a subview).
// CHECK: error: cannot generate the Hopper kernel: this attention shares a buffer with another in the same function that writes it
func.func @overwrite(%q: memref<2x1x128x64xbf16>, %o: memref<1x1x128x64xbf16>) {
  %q0 = memref.subview %q[0, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : memref<2x1x128x64xbf16> to memref<1x1x128x64xbf16, strided<[8192, 8192, 64, 1]>>
  attn.flash_attention ins(%q0, %q0, %q0 : memref<1x1x128x64xbf16, strided<[8192, 8192, 64, 1]>>, memref<1x1x128x64xbf16, strided<[8192, 8192, 64, 1]>>, memref<1x1x128x64xbf16, strided<[8192, 8192, 64, 1]>>) outs(%o : memref<1x1x128x64xbf16>)
  attn.flash_attention ins(%o, %o, %o : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>) outs(%q0 : memref<1x1x128x64xbf16, strided<[8192, 8192, 64, 1]>>)
  return
}
