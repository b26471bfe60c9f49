// Which kernels order their causal tiles in L2 sections (hopper.tile_coords
// `sections n of pairs`), and with which n: the (head, batch) pairs whose K
// and V fit 32 MiB (kL2SectionBytes) over Skv keys, 1 below 2048 keys
// (kSectionMinKeys). Causal fixed-length kernels only: not a full mask, not a
// sliding window (it reads fewer keys than Skv), not packed batches
// (varlen.mlir) or the decoding kernel (decode.mlir).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s

// Head dims 192 / 128 in bf16: 640 bytes a key, 52428 keys in 32 MiB; Skv is
// the kernel's %arg9, Hq x B (%arg10 x %arg7) the pairs.
// CHECK-LABEL: gpu.func @causal_192_128_kernel(
// CHECK: %[[FEW:.*]] = arith.cmpi ult, %arg9, %c2048_i32
// CHECK-NEXT: %[[KEYS:.*]] = arith.maxui %arg9, %c1_i32
// CHECK-NEXT: %[[FIT:.*]] = arith.divui %c52428_i32, %[[KEYS]]
// CHECK-NEXT: %[[FIT1:.*]] = arith.maxui %[[FIT]], %c1_i32
// CHECK-NEXT: %[[N:.*]] = arith.select %[[FEW]], %c1_i32, %[[FIT1]]
// CHECK-NEXT: %[[PAIRS:.*]] = arith.muli %arg10, %arg7
// CHECK-NEXT: hopper.tile_coords %{{.*}} in %{{.*}}, %arg10 block_m 128 longest_first sections %[[N]] of %[[PAIRS]]
func.func @causal_192_128(%q: memref<?x4x?x192xbf16>, %k: memref<?x4x?x192xbf16>,
                          %v: memref<?x4x?x128xbf16>, %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x192xbf16>, memref<?x4x?x192xbf16>, memref<?x4x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>) causal
  return
}

// -----

// A window bounded on both sides runs longest first, without sections.
// CHECK-LABEL: gpu.func @window_kernel(
// CHECK: hopper.tile_coords %{{.*}} block_m 128 longest_first{{$}}
// CHECK-NOT: sections
func.func @window(%q: memref<?x4x?x128xbf16>, %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x4x?x128xbf16>, memref<?x4x?x128xbf16>, memref<?x4x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>) window(256, 0)
  return
}

// -----

// A full mask: m-blocks in order, no sections.
// CHECK-LABEL: gpu.func @full_kernel(
// CHECK: hopper.tile_coords %{{.*}} block_m 128{{$}}
// CHECK-NOT: sections
func.func @full(%q: memref<?x4x?x128xbf16>, %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x4x?x128xbf16>, memref<?x4x?x128xbf16>, memref<?x4x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>)
  return
}
