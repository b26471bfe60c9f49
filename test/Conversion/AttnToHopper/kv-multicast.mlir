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
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 kv-multicast=off" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=OFF
// auto leaves one-CTA-per-tile kernels alone (measured slower), on does not
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=OFF
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off kv-multicast=on" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=TILES
// A causal mask: the two m-blocks of a pair see different kv blocks.
// RUN: sed -e 's/outs(%o : memref<?x4x?x128xbf16>)/& causal/' %s | fa3-opt --attn-hopper-config="block-m=128 kv-multicast=on" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=OFF

// CHECK: cluster_m = 2 : i64
// CHECK-SAME: grid = "persistent"
// CHECK-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// Q barriers count 256 consumer threads, K/V empty ones also 8 peer warps.
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c264_i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// The producer: m-blocks rounded up to pairs.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK: %[[NM:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK-NEXT: %[[NM1:.*]] = arith.addi %[[NM]], %c1_i32 : i32
// CHECK-NEXT: %[[NUMM:.*]] = arith.andi %[[NM1]], %c-2_i32 : i32
// CHECK: %[[NTILES:.*]] = arith.muli %[[NUMM]],
// CHECK: scf.while (%[[T0:.*]] = %{{.*}}, %{{.*}} = %c0_i32, %{{.*}} = %c0_i32)
// CHECK: ^bb0(%[[TILE:[^:]*]]: i32,
// Q is this CTA's own (no multicast) ...
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}} box[%c0_i32, {{.*}}] : !llvm.ptr<7>, !llvm.ptr
// ... K and V: box 'rank' of two, into both CTAs; the barrier expects the
// whole tile (half of it comes from the peer).
// CHECK: scf.for
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[KF:.*]], %c32768_i32
// CHECK-NEXT: %[[RANK:.*]] = llvm.inline_asm has_side_effects {{.*}}"mov.u32 $0, %cluster_ctarank;"
// CHECK-NEXT: %[[C:.*]] = arith.addi %[[RANK]], %c0_i32 : i32
// CHECK: %[[COL:.*]] = arith.muli %[[C]], %c64_i32 : i32
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %[[KF]], box[%[[COL]], {{.*}}] multicast_mask = %c3_i16
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2, %{{.*}} multicast_mask = %c3_i16
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: }
// The next tile: static, no tile counter.
// CHECK-NEXT: %{{.*}} = arith.addi %[[TILE]], %{{.*}} : i32
// CHECK-NOT: llvm.atomicrmw
// CHECK-NOT: atom.acq_rel
// CHECK: } consumers(%{{.*}} of 2) regs 240 {
// CHECK: %[[PEER:.*]] = arith.xori %{{.*}}, %c1_i32 : i32
// Every release of K or V: the local arrive, then lane 0's on the peer.
// CHECK-COUNT-4: mapa.shared::cluster.u32 r, $0, $2;\0A@p mbarrier.arrive.shared::cluster.b64 _, [r];{{.*}}%[[PEER]] : (i32, i32, i32) -> ()
// CHECK-NOT: mapa
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: gpu.return

// OFF: cluster_m = 1 : i64
// OFF-NOT: nvvm.cluster_dim
// OFF-NOT: nvvm.cluster.
// OFF-NOT: multicast_mask
// OFF-NOT: mapa

// TILES: cluster_m = 2 : i64
// TILES-SAME: grid = "tiles"
// TILES: nvvm.cluster.wait
// TILES: multicast_mask = %c3_i16
// TILES-NOT: llvm.atomicrmw
func.func @attn(%q: memref<?x4x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>)
  return
}
