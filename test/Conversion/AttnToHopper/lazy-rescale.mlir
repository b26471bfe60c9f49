// attn-hopper-config{lazy-rescale}: in the steady-state loop, a row's
// running max is raised only when the block's max exceeds it by more than
// rescale-threshold (log2 units), and O *= alpha runs behind a branch on
// the OR over the warpgroup's rows (hopper.warpgroup_any: the wgmma wait
// in the branch is .aligned, so all four warps must take the same arm;
// convert-hopper-to-nvvm's lowering is in its own test). The wait for the P V wgmmas sits in both
// arms of that branch: ptxas hoists a wgmma wait above independent
// arithmetic, but not across a branch, so the softmax stays beside the
// P V wgmmas (fa3.sass checks that in the SASS).
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper --hopper-overlap | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 rescale-threshold=0" --attn-tile --convert-attn-to-hopper --hopper-overlap | FileCheck %s --check-prefix=EXACT
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 lazy-rescale=off" --attn-tile --convert-attn-to-hopper --hopper-overlap | FileCheck %s --check-prefix=OFF

// CHECK: lazy_rescale = true
// CHECK: scf.for %{{.*}} iter_args(%[[M:[^ ]*]] = %{{[^,]*}}, %[[L:[^ ]*]] = %{{[^,]*}}, %{{[^ ]*}} = %{{[^,]*}}, %{{[^ ]*}} = %{{[^)]*}})
// CHECK: %[[O:.*]] = hopper.wgmma.rs
// CHECK: hopper.wgmma.wait 1
// The step raises a row's max only past the threshold (its arithmetic, the
// shared builder's, is checked in test/Conversion/HopperToNVVM/fragment.mlir).
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[ALPHA:[^ ]*]], %[[UP:[^ ]*]] = hopper.softmax_step %{{.*}} state(%[[M]], %[[L]]) threshold 8.000000e+00
// P is rounded before the branch, the wait is inside it.
// CHECK-NEXT: hopper.trunc
// CHECK-NOT: hopper.wgmma.wait
// CHECK: %[[VOTE:.*]] = hopper.warpgroup_any %[[UP]] in consumer[%{{.*}}] of 2
// CHECK-NEXT: scf.if %[[VOTE]] -> (!hopper.frag<64x128xf32>) {
// CHECK-NEXT: %[[W1:.*]] = hopper.wgmma.wait 0, %[[O]]
// CHECK-NEXT: hopper.scale_rows %[[W1]], %[[ALPHA]]
// CHECK: } else {
// CHECK-NEXT: %[[W0:.*]] = hopper.wgmma.wait 0, %[[O]]
// CHECK-NEXT: scf.yield %[[W0]]
// CHECK-NEXT: }
// V's stage of the previous block is released after the wait.
// CHECK-NEXT: hopper.ring.consumer_release %{{.*}}[%{{.*}}] : !hopper.ring

// Threshold 0 is exact: every block rescales O, no vote (the step's
// `raised` is never set at 0, so the lazy branch would never rescale).
// EXACT: lazy_rescale = false
// EXACT-NOT: hopper.warpgroup_any
// EXACT: hopper.softmax_step %{{.*}} state(%{{.*}}, %{{.*}}) :
// EXACT-NOT: hopper.warpgroup_any
// EXACT: hopper.scale_rows
// EXACT-NOT: hopper.warpgroup_any

// OFF: lazy_rescale = false
// OFF-NOT: hopper.warpgroup_any
// OFF: hopper.wgmma.wait 1
// OFF: %{{.*}}, %{{.*}}, %{{.*}}, %[[ALPHA:[^ ]*]], %{{.*}} = hopper.softmax_step %{{.*}} state(%{{.*}}, %{{.*}}) :
// OFF-NOT: scf.if
// OFF: %[[W:.*]] = hopper.wgmma.wait 0
// OFF-NEXT: hopper.scale_rows %[[W]], %[[ALPHA]]
// OFF-NOT: hopper.warpgroup_any
func.func @attn(%q: memref<?x4x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>)
  return
}
