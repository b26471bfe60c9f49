// convert-attn-to-hopper{persistent}: CTAs loop over tiles. The producer
// loads a tile's Q only after the consumers released the last one (Q empty
// barrier), and the K/V ring slot g continues across tiles.
// RUN: fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=persistent=on | FileCheck %s

// CHECK: gpu.func @attn_kernel(
// CHECK-SAME: grid = "persistent"
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: %[[NCTA:.*]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK: %[[HB:.*]] = arith.muli %arg9, %arg6 : i32
// CHECK: %[[TILES:.*]] = arith.muli %{{.*}}, %[[HB]] : i32
// Producer: one loop over this CTA's tiles, carrying the tile count and the ring slot.
// CHECK: nvvm.setmaxregister decrease 24
// CHECK: scf.for %[[PT:.*]] = %[[CTA]] to %[[TILES]] step %[[NCTA]] iter_args(%[[PK:.*]] = %{{.*}}, %[[PG:.*]] = %{{.*}}) -> (i32, i32) : i32 {
// CHECK:   %[[QPH:.*]] = arith.andi %[[PK]], %c1_i32 : i32
// CHECK:   %[[FLIP:.*]] = arith.xori %[[QPH]], %c1_i32 : i32
// CHECK:   nvvm.mbarrier.try_wait.parity %{{.*}}, %[[FLIP]]
// CHECK:   nvvm.mbarrier.arrive.expect_tx
// CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK:   scf.for %[[T:.*]] =
// CHECK:     arith.addi %[[PG]], %[[T]] : i32
// CHECK:   scf.yield
// Consumers: the same loop; wait for the tile's Q with the tile parity, and
// release Q once the tile's last S has retired.
// CHECK: nvvm.setmaxregister increase 240
// CHECK: scf.for %[[CT:.*]] = %[[CTA]] to %[[TILES]] step %[[NCTA]] iter_args(%[[CK:.*]] = %{{.*}}, %[[CG:.*]] = %{{.*}}) -> (i32, i32) : i32 {
// CHECK:   %[[CPH:.*]] = arith.andi %[[CK]], %c1_i32 : i32
// CHECK:   nvvm.mbarrier.try_wait.parity %{{.*}}, %[[CPH]]
// CHECK:   nvvm.mbarrier.arrive %[[QEMPTY:.*]] : !llvm.ptr<3>
// CHECK:   } else {
// CHECK:     nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK:   scf.yield
func.func @attn(%q: memref<?x4x?x64xbf16>, %k: memref<?x2x?x64xbf16>, %v: memref<?x2x?x64xbf16>,
                %o: memref<?x4x?x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16>)
    outs(%o : memref<?x4x?x64xbf16>) causal
  return
}
