// attn-hopper-config{kv-multicast}: 2-CTA clusters. The CTAs of a
// cluster take m-blocks 2i and 2i + 1 of one head (tile parity = cluster
// rank: the grid and the m-block count are even), so both read the same K/V
// blocks; each producer loads half of every K/V tile's 64-column boxes
// (boxes rank, rank + 2, ...) and multicasts them into both CTAs' ring. A
// stage is refilled only once the consumers of both CTAs released it: the
// empty barriers count the 256 local consumer threads plus one remote
// arrive per consumer warp of the peer (lane 0, mapa + mbarrier.arrive on
// the shared::cluster address). Cluster barriers after the mbarrier init
// and before exit; the persistent tile loop is static (tile + gridDim.x).
// auto: on for persistent kernels with a full mask (head dim 128 here).
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap --convert-hopper-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 kv-multicast=off" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap | FileCheck %s --check-prefix=OFF
// auto leaves one-CTA-per-tile kernels alone (measured slower), on does not
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap | FileCheck %s --check-prefix=OFF
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off kv-multicast=on" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap | FileCheck %s --check-prefix=TILES
// A causal mask: the two m-blocks of a pair see different kv blocks.
// RUN: sed -e 's/outs(%o : memref<?x4x?x128xbf16>)/& causal/' %s | fa3-opt --attn-hopper-config="block-m=128 kv-multicast=on" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap | FileCheck %s --check-prefix=OFF

// CHECK: cluster_m = 2 : i64
// CHECK-SAME: grid = "persistent"
// CHECK-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// Q is each CTA's own: its ring's empty barriers count the 256 consumer
// threads; the K/V rings are shared by the cluster (cluster = 2), their
// empty barriers count also the peer's 8 consumer warps.
// CHECK: %[[QR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
// CHECK-NEXT: %[[KR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
// CHECK-NEXT: %[[VR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 131072, full = 229424, empty = 229456, arrivals = 264, cluster = 2>
// CHECK: hopper.ring.init %[[VR]]
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// The producer: m-blocks rounded up to pairs.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK: hopper.tile_grid %arg8, %arg10, %arg7 block_m 128 pairs
// CHECK: scf.while (%[[K:[^ ]*]] = %c0_i32,
// The CTA's k-th tile: static, ctaid.x + k gridDim.x, no tile counter.
// CHECK: hopper.tile_claim %[[K]] first %{{.*}} static
// CHECK-NOT: hopper.tile_counter_reset
// Q is this CTA's own (no multicast) ...
// CHECK: hopper.tma_load %arg0[%c0_i32, {{.*}}] into %[[QR]][%{{.*}}] at %c0_i32 : !hopper.ring
// ... K and V: box 'rank' of two (bytes 16384 * rank into the stage), into
// both CTAs; the full barrier expects the whole tile (half of it comes
// from the peer).
// CHECK: scf.for
// CHECK: hopper.ring.producer_commit %[[KR]][%[[U:[0-9]+]]] tx 32768
// CHECK-NEXT: %[[RANK:.*]] = llvm.inline_asm has_side_effects {{.*}}"mov.u32 $0, %cluster_ctarank;"
// CHECK-NEXT: %[[C:.*]] = arith.addi %[[RANK]], %c0_i32 : i32
// CHECK-NEXT: %[[BOX:.*]] = arith.muli %[[C]], %c16384_i32 : i32
// CHECK-NEXT: %[[COL:.*]] = arith.muli %[[C]], %c64_i32 : i32
// CHECK-NEXT: hopper.tma_load %arg1[%[[COL]], {{.*}}] into %[[KR]][%[[U]]] at %[[BOX]] multicast 3 :
// CHECK-NOT: hopper.tma_load
// CHECK: hopper.ring.producer_commit %[[VR]][%[[U]]] tx 32768
// CHECK: hopper.tma_load %arg2[{{.*}}] into %[[VR]][%[[U]]] at %{{.*}} multicast 3 :
// CHECK-NOT: hopper.tma_load
// CHECK-NOT: hopper.tile_counter_reset
// CHECK: } consumers(%{{.*}} of 2) regs 240 {
// The consumers release K and V in the cluster's rings (prologue K, loop K
// and V, tail V), Q in the CTA's own.
// CHECK: hopper.ring.consumer_release %[[KR]]
// CHECK: hopper.ring.consumer_release %[[KR]]
// CHECK: hopper.ring.consumer_release %[[VR]]
// CHECK: hopper.ring.consumer_release %[[QR]]
// CHECK: hopper.ring.consumer_release %[[VR]]
// CHECK: hopper.ring.consumer_release %[[QR]]
// CHECK-NOT: hopper.ring.consumer_release
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: gpu.return

// Lowered, every release of K or V is the local arrive, then lane 0's on
// the peer (cluster rank ^ 1), predicated in the asm; Q's is local alone.
// NVVM: nvvm.setmaxregister increase 240
// NVVM-COUNT-4: mapa.shared::cluster.u32 r, $0, $2;\0A@p mbarrier.arrive.shared::cluster.b64 _, [r];{{.*}} : (i32, i32, i32) -> ()
// NVVM-NOT: mapa
// NVVM: nvvm.cluster.arrive

// OFF: cluster_m = 1 : i64
// OFF-NOT: nvvm.cluster_dim
// OFF-NOT: nvvm.cluster.
// OFF-NOT: multicast
// OFF-NOT: cluster = 2

// TILES: cluster_m = 2 : i64
// TILES-SAME: grid = "tiles"
// TILES: nvvm.cluster.wait
// TILES: hopper.tma_load {{.*}} multicast 3 : !hopper.ring<{{.*}}cluster = 2>
// TILES-NOT: hopper.tile_next
func.func @attn(%q: memref<?x4x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>)
  return
}
