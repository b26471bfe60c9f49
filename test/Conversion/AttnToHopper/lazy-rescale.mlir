// attn-hopper-config{lazy-rescale}: in the steady-state loop, a row's
// running max is raised only when the block's max exceeds it by more than
// rescale-threshold (log2 units), and O *= alpha runs behind a branch on
// the OR over the warpgroup's rows (hopper.warpgroup_any: the wgmma wait
// in the branch is .aligned, so all four warps must take the same arm;
// convert-hopper-to-nvvm's lowering is in its own test). The wait for the P V wgmmas sits in both
// arms of that branch: ptxas hoists a wgmma wait above independent
// arithmetic, but not across a branch, so the softmax stays beside the
// P V wgmmas (fa3.sass checks that in the SASS).
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 rescale-threshold=0" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=EXACT
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 lazy-rescale=off" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=OFF

// CHECK: lazy_rescale = true
// CHECK: %[[TAU:.*]] = arith.constant 8.000000e+00 : f32
// CHECK: scf.for %{{.*}} = %c1_i32 to %{{.*}} iter_args(%[[M0:[^ ]*]] = %{{[^,]*}}, %[[M1:[^ ]*]] = %{{[^,]*}},
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: %[[MX0:.*]] = arith.mulf %{{.*}}, %arg15 : f32
// CHECK-NEXT: %[[LIM0:.*]] = arith.addf %[[M0]], %[[TAU]] : f32
// CHECK-NEXT: %[[UP0:.*]] = arith.cmpf ogt, %[[MX0]], %[[LIM0]] : f32
// CHECK-NEXT: arith.select %[[UP0]], %[[MX0]], %[[M0]] : f32
// CHECK: %[[LIM1:.*]] = arith.addf %[[M1]], %[[TAU]] : f32
// CHECK-NEXT: %[[UP1:.*]] = arith.cmpf ogt, %{{.*}}, %[[LIM1]] : f32
// CHECK: %[[ANY:.*]] = arith.ori %[[UP0]], %[[UP1]] : i1
// The exponentials come before the branch, the wait inside it.
// CHECK: llvm.nvvm.ex2.approx.ftz.f
// CHECK-NOT: nvvm.wgmma.wait.group
// CHECK: %[[VOTE:.*]] = hopper.warpgroup_any %[[ANY]] in consumer[%{{.*}}] of 2
// CHECK: scf.if %[[VOTE]] -> (!llvm.struct
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: arith.mulf
// CHECK: } else {
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: arith.mulf
// CHECK: scf.yield
// CHECK-NEXT: }
// V's stage of the previous block is released after the wait.
// CHECK-NEXT: hopper.ring.consumer_release %{{.*}}[%{{.*}}] : !hopper.ring

// EXACT: %[[TAU:.*]] = arith.constant 0.000000e+00 : f32
// EXACT: arith.addf %{{.*}}, %[[TAU]] : f32
// EXACT: hopper.warpgroup_any

// OFF: lazy_rescale = false
// OFF-NOT: hopper.warpgroup_any
// OFF: nvvm.wgmma.wait.group.sync.aligned 1
// OFF: llvm.intr.maxnum(%arg
// OFF-NOT: scf.if
// OFF: nvvm.wgmma.wait.group.sync.aligned 0
// OFF-NOT: scf.if
// OFF: arith.mulf
// OFF-NOT: hopper.warpgroup_any
func.func @attn(%q: memref<?x4x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>)
  return
}
