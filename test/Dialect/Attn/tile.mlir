// attn-tile: grid, kv loop bounds, and the mask only on boundary blocks.
// RUN: fa3-opt %s --attn-tile --canonicalize --cse | FileCheck %s
// RUN: fa3-opt %s --attn-tile="block-m=64 block-n=32 rescale-threshold=4.5" | FileCheck %s --check-prefix=OPTS
// RUN: sed -e 's/outs(%o : memref<1x1x1024x64xbf16>) causal/& {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 64, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 8.0, cluster_m = 1, pingpong = false, tma_store = true>}/' %s | fa3-opt --attn-tile | FileCheck %s --check-prefix=CONFIG
// RUN: sed -e 's/outs(%o : memref<1x1x1024x64xbf16>) causal/& {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 64, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 8.0, cluster_m = 1, pingpong = false, tma_store = true>}/' %s | not fa3-opt --attn-tile=block-m=64 2>&1 | FileCheck %s --check-prefix=CONFLICT
// RUN: sed -e 's/outs(%o : memref<1x1x1024x64xbf16>) causal/& {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 64, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 8.0, cluster_m = 1, pingpong = false, tma_store = true>}/' %s | not fa3-opt --attn-tile=rescale-threshold=4 2>&1 | FileCheck %s --check-prefix=CONFLICT-TAU
// RUN: sed -e 's/outs(%o : memref<1x1x1024x64xbf16>) causal/& {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 64, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 6.5, cluster_m = 1, pingpong = false, tma_store = true>}/' %s | fa3-opt --attn-tile | FileCheck %s --check-prefix=LAZY
// RUN: sed -e 's/outs(%o : memref<1x1x1024x64xbf16>) causal/& {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 64, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 0.0, cluster_m = 1, pingpong = false, tma_store = true>}/' %s | fa3-opt --attn-tile | FileCheck %s --check-prefix=LAZY0

// Causal, Sq = Skv = 1024, 128 x 128: m-block mb visits kv-blocks [0, mb] and
// only block mb (the diagonal) is masked: the unmasked range ends at
// floor((128 mb + 1) / 128) = mb.
// CHECK-LABEL: func @causal
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C1024:.*]] = arith.constant 1024 : index
// CHECK: scf.parallel (%[[MB:.*]]) = (%[[C0]]) to (%[[C8]]) step (%[[C1]])
// CHECK: %[[M:.*]] = memref.alloc() : memref<128xf32>
// CHECK: %[[L:.*]] = memref.alloc() : memref<128xf32>
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<128x64xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[M]]
// CHECK: %[[ROW0:.*]] = arith.muli %[[MB]], %[[C128]]
// CHECK: %[[LO:.*]], %[[HI:.*]], %[[ILO:.*]], %[[IHI:.*]] = attn.kv_range rows %[[ROW0]] seq(%[[C1024]], %[[C1024]]) {block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
// CHECK: scf.for %[[N:.*]] = %[[LO]] to %[[HI]] step %[[C1]] {
// CHECK:   %[[COL0:.*]] = arith.muli %[[N]], %[[C128]]
// CHECK:   %[[A:.*]] = arith.cmpi slt, %[[N]], %[[ILO]]
// CHECK:   %[[B:.*]] = arith.cmpi sge, %[[N]], %[[IHI]]
// CHECK:   %[[IS_BOUNDARY:.*]] = arith.ori %[[A]], %[[B]]
// CHECK:   scf.if %[[IS_BOUNDARY]] {
// CHECK:     attn.tile_update %arg0, %arg1, %arg2[%[[C0]], %[[C0]], %[[C0]]] rows %[[ROW0]] cols %[[COL0]] state(%[[M]], %[[L]], %[[ACC]]) masked {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 0.180336878 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>}
// CHECK:   } else {
// CHECK-NOT: masked
// CHECK:     attn.tile_update %arg0, %arg1, %arg2[%[[C0]], %[[C0]], %[[C0]]] rows %[[ROW0]] cols %[[COL0]] state(%[[M]], %[[L]], %[[ACC]]) {block_m = 128
// CHECK:   }
// CHECK: }
// CHECK: attn.tile_finalize state(%[[M]], %[[L]], %[[ACC]]) to %arg3[%[[C0]], %[[C0]]] rows %[[ROW0]] {block_m = 128 : i64}
// CHECK: memref.dealloc %[[ACC]]
func.func @causal(%q: memref<1x1x1024x64xbf16>, %k: memref<1x1x1024x64xbf16>,
                  %v: memref<1x1x1024x64xbf16>, %o: memref<1x1x1024x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x1x1024x64xbf16>, memref<1x1x1024x64xbf16>, memref<1x1x1024x64xbf16>)
    outs(%o : memref<1x1x1024x64xbf16>) causal
  return
}

// Sliding window, dynamic lengths, GQA 4:1, softcap, LSE, head dim 256
// (the default tile, 128 x 128, for every head dim: attn-tile knows no
// target): the kv head is h / 4, the range op gets the dynamic lengths,
// softcap goes on the tile step.
// CHECK-LABEL: func @window_gqa
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[SQ:.*]] = memref.dim %arg0, %{{.*}}
// CHECK: %[[SKV:.*]] = memref.dim %arg1, %{{.*}}
// CHECK: %[[NM:.*]] = arith.ceildivsi %[[SQ]], %{{.*}}
// CHECK: scf.parallel (%[[MB:.*]], %[[H:.*]], %[[BI:.*]]) = {{.*}} to (%[[NM]], %{{.*}}, %{{.*}})
// CHECK: %[[HK:.*]] = arith.divui %[[H]], %[[C4]]
// CHECK: %[[ROW0:.*]] = arith.muli %[[MB]]
// CHECK: %[[LO:.*]], %[[HI:.*]], %{{.*}}, %{{.*}} = attn.kv_range rows %[[ROW0]] seq(%[[SQ]], %[[SKV]]) {block_m = 128 : i64, block_n = 128 : i64, window = array<i64: 100, 20>}
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]]
// CHECK: attn.tile_update {{.*}}[%[[BI]], %[[H]], %[[HK]]] {{.*}} masked {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 0.0901684388 : f32, softcap = 1.000000e+01 : f32, window = array<i64: 100, 20>}
// CHECK: attn.tile_finalize {{.*}} to %arg3, %arg4[%[[BI]], %[[H]]]
func.func @window_gqa(%q: memref<2x8x?x256xf16>, %k: memref<2x2x?x256xf16>,
                      %v: memref<2x2x?x256xf16>, %o: memref<2x8x?x256xf16>,
                      %lse: memref<2x8x?xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<2x8x?x256xf16>, memref<2x2x?x256xf16>, memref<2x2x?x256xf16>)
    outs(%o, %lse : memref<2x8x?x256xf16>, memref<2x8x?xf32>) window(100, 20) softcap(10.0)
  return
}

// Tile options override the defaults; the rescale threshold goes on every
// step (without it, none: CHECK's full attribute lists, the exact rule).
// OPTS-LABEL: func @causal
// OPTS: memref.alloc() : memref<64x64xf32>
// OPTS: attn.tile_update {{.*}} masked {block_m = 64 : i64, block_n = 32 : i64, rescale_threshold = 4.500000e+00 : f64,
// OPTS: attn.tile_update {{.*}} {block_m = 64 : i64, block_n = 32 : i64, rescale_threshold = 4.500000e+00 : f64,

// A configuration recorded on the op (attn-hopper-config) sets the tiles,
// and travels on the schedule to the kernel pass; options beside it are
// refused rather than ignored.
// CONFIG-LABEL: func @causal
// CONFIG: memref.alloc() : memref<192x64xf32>
// CONFIG: attn.kv_range {{.*}} {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 64, {{.*}}>, block_m = 192 : i64, block_n = 64 : i64, window = array<i64: -1, 0>}
// CONFIG: attn.tile_update {{.*}} masked {block_m = 192 : i64, block_n = 64 : i64
// CONFIG-NOT: rescale_threshold
// CONFIG-NOT: attn.hopper_config
// CONFIG-LABEL: func @window_gqa
// CONFIG-NOT: attn.hopper_config
// CONFLICT: error: 'attn.flash_attention' op attn-tile: the tiles of this op were chosen by attn-hopper-config (192 x 64); give block-m and block-n to that pass instead
// CONFLICT-TAU: error: 'attn.flash_attention' op attn-tile: the rescaling of this op was chosen by attn-hopper-config; give rescale-threshold (and lazy-rescale) to that pass instead

// A configuration with lazy rescaling gives its threshold to every step, so
// that the CPU expansion runs the kernel's rule.
// Lazy rescaling at threshold 0 is exact: the steps carry no threshold.
// LAZY0-LABEL: func @causal
// LAZY0-NOT: rescale_threshold = {{[^,]*}} : f64
// LAZY0: attn.tile_finalize
// LAZY-LABEL: func @causal
// LAZY: attn.tile_update {{.*}} masked {block_m = 192 : i64, block_n = 64 : i64, rescale_threshold = 6.500000e+00 : f64,
// LAZY: attn.tile_update {{.*}} {block_m = 192 : i64, block_n = 64 : i64, rescale_threshold = 6.500000e+00 : f64,
// LAZY-LABEL: func @window_gqa
// LAZY-NOT: rescale_threshold
