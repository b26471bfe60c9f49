// Head dims that are not whole 64-column boxes, and a value head dim that
// differs from the query's, added by configuration (KernelConfig's tileD /
// tileDv): the tiles are D and Dv rounded up to 64 columns.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config | FileCheck %s --check-prefix=CONFIG
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="tma-store=false" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s --check-prefix=TMA

// Head dim 96: the tiles of head dim 128 (the table keys on the head dim
// rounded to its tile), Q/K/V rings of 128-column stages (two 64-column
// boxes each; TMA fills columns 96-127 of the second with zeros). S = Q K^T
// issues the k-steps of 96 columns only; O is a 128-column accumulator,
// of which the direct store writes 96 columns.
// CONFIG-LABEL: func @d96(
// CONFIG: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 2, pingpong = true, tma_store = true>
// CHECK-LABEL: gpu.func @d96_kernel
// CHECK-SAME: head_dim = 96 : i64, head_dim_v = 96 : i64
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 0,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 131072,
// CHECK: hopper.tma_load %{{.*}}[%c0_i32, {{.*}} at %c0_i32
// CHECK-NEXT: hopper.tma_load %{{.*}}[%c64_i32, {{.*}} at %c16384_i32
// CHECK-NOT: hopper.tma_load %{{.*}}[%c128_i32
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 96 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>
// CHECK: hopper.store_o_direct {{.*}} {columns = 96 : i64} : !hopper.frag<64x128xf32> as bf16
// The TMA store writes whole 64-column boxes; TMA clips columns 96-127.
// TMA-LABEL: gpu.func @d96_kernel
// TMA: hopper.store_o_tma {{.*}} : !hopper.frag<64x128xf32> as bf16
func.func @d96(%q: memref<?x8x?x96xbf16>, %o: memref<?x8x?x96xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x8x?x96xbf16>, memref<?x8x?x96xbf16>, memref<?x8x?x96xbf16>) outs(%o, %lse : memref<?x8x?x96xbf16>, memref<?x8x?xf32>)
  return
}

// -----

// D = 192 for q and k, Dv = 128 for v and o (DeepSeek's): 128-row kv tiles
// (as FA3; O and S take the registers of head dim 128); K's stages hold
// three boxes (48 KiB), V's two (32 KiB); S = Q K^T runs 192 columns deep,
// O is 128 wide; O is staged in Q's buffer (it fits: 32 of 48 KiB).
// CONFIG-LABEL: func @d192v128(
// CONFIG: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>
// CHECK-LABEL: gpu.func @d192v128_kernel
// CHECK-SAME: head_dim = 192 : i64, head_dim_v = 128 : i64
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 49152, data = 0,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 49152, data = 49152,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 147456,
// CHECK: hopper.tma_load %{{.*}}[%c128_i32, {{.*}} at %c32768_i32
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 192 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>
// CHECK: hopper.store_o_direct
// CHECK-NOT: columns
// CHECK-SAME: : !hopper.frag<64x128xf32> as bf16
// TMA-LABEL: gpu.func @d192v128_kernel
// TMA-SAME: dynamic_smem = 213072
// TMA: hopper.store_o_tma {{.*}} staging %{{.*}}[0] {{.*}} : !hopper.frag<64x128xf32> as bf16
func.func @d192v128(%q: memref<?x8x?x192xbf16>, %v: memref<?x8x?x128xbf16>, %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %q, %v : memref<?x8x?x192xbf16>, memref<?x8x?x192xbf16>, memref<?x8x?x128xbf16>) outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) {causal}
  return
}
