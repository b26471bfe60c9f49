// hopper-overlap: FA3's intra-warpgroup overlap as a two-stage software
// pipeline of a consumer's kv loop. Stage 1 is the P V product (its fence,
// wait, descriptor arithmetic and V ring slot); the pipelined loop issues
// P V of block t - 1 in the wgmma window of S of block t and waits for it at
// O's first use, after the softmax. The first block is peeled (from the
// initial state: a stateless softmax step, no rescale of a zero O), the last
// block's P V is the tail.
// RUN: fa3-opt %s --split-input-file --hopper-overlap --verify-diagnostics | FileCheck %s

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// CHECK-LABEL: func.func @sequential
// CHECK-SAME: %[[DQ:arg1]]: i64, %[[DK0:arg2]]: i64, %[[DV0:arg3]]: i64, %[[N:arg4]]: i32, %[[G:arg5]]: i32, %[[SL2:arg6]]: f32
// CHECK: %[[K:.*]] = hopper.ring.create
// CHECK: %[[V:.*]] = hopper.ring.create
// CHECK: scf.if %{{.*}} -> (!hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64x64xf32>) {
// ... m = -inf and l = 0 are gone with the stateless first step; O's zero stays ...
// CHECK-NEXT: %[[OZ:.*]] = hopper.zero : !hopper.frag<64x64xf32>
// ... prologue: block 0's stage 0, slot g + 0 = g ...
// CHECK-NEXT: %[[KS0:.*]] = hopper.ring.stage %[[K]][%[[G]]]
// CHECK-NEXT: arith.muli %[[KS0]]
// CHECK-NEXT: arith.extui
// CHECK-NEXT: %[[DK:.*]] = arith.addi %[[DK0]]
// CHECK-NEXT: hopper.ring.consumer_wait %[[K]][%[[G]]]
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[S0:.*]] = hopper.wgmma.ss %[[DQ]], %[[DK]]
// CHECK-NEXT: %[[S0R:.*]] = hopper.wgmma.wait 0, %[[S0]]
// CHECK-NEXT: hopper.ring.consumer_release %[[K]][%[[G]]]
// CHECK-NEXT: %[[P0:.*]], %[[M0:.*]], %[[L0:.*]], %{{.*}}, %{{.*}} = hopper.softmax_step %[[S0R]] scale %[[SL2]] : !hopper.frag<64x64xf32>, !hopper.frag<64xf32>
// CHECK-NEXT: %[[PA0:.*]] = hopper.trunc %[[P0]]
// ... the loop from block 1 carries O before its last P V, and that P ...
// CHECK-NEXT: %[[R:.*]]:4 = scf.for %[[T:.*]] = %c1_i32 to %[[N]] step %c1_i32 iter_args(%[[M:.*]] = %[[M0]], %[[L:.*]] = %[[L0]], %[[ACC:.*]] = %[[OZ]], %[[PA:.*]] = %[[PA0]])
// CHECK-NEXT: %[[U:.*]] = arith.addi %[[G]], %[[T]] : i32
// CHECK-NEXT: hopper.ring.stage %[[K]][%[[U]]]
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.extui
// CHECK-NEXT: %[[DKT:.*]] = arith.addi %[[DK0]]
// ... block t - 1's V: slot u - 1, its descriptor, then both waits before the fence ...
// CHECK-NEXT: %[[UP:.*]] = arith.subi %[[U]], %c1_i32 : i32
// CHECK-NEXT: hopper.ring.stage %[[V]][%[[UP]]]
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.extui
// CHECK-NEXT: %[[DVT:.*]] = arith.addi %[[DV0]]
// CHECK-NEXT: hopper.ring.consumer_wait %[[K]][%[[U]]]
// CHECK-NEXT: hopper.ring.consumer_wait %[[V]][%[[UP]]]
// ... one window: S of block t, P V of block t - 1; S ready with P V in flight ...
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[S:.*]] = hopper.wgmma.ss %[[DQ]], %[[DKT]]
// CHECK-NEXT: %[[O:.*]] = hopper.wgmma.rs %[[PA]], %[[DVT]], %[[ACC]]
// CHECK-NEXT: %[[SR:.*]] = hopper.wgmma.wait 1, %[[S]]
// CHECK-NEXT: hopper.ring.consumer_release %[[K]][%[[U]]]
// CHECK-NEXT: %[[P:.*]], %[[M1:.*]], %[[L1:.*]], %[[ALPHA:.*]], %{{.*}} = hopper.softmax_step %[[SR]] scale %[[SL2]] state(%[[M]], %[[L]])
// CHECK-NEXT: %[[PAT:.*]] = hopper.trunc %[[P]]
// ... P V waited for at O's first use, after the softmax ...
// CHECK-NEXT: %[[OR:.*]] = hopper.wgmma.wait 0, %[[O]]
// CHECK-NEXT: %[[OS:.*]] = hopper.scale_rows %[[OR]], %[[ALPHA]]
// CHECK-NEXT: hopper.ring.consumer_release %[[V]][%[[UP]]]
// CHECK-NEXT: scf.yield %[[M1]], %[[L1]], %[[OS]], %[[PAT]]
// ... the marker is gone (the pipelined loop's closing brace has no attribute)
// CHECK-NEXT: }{{$}}
// ... tail: the last block's P V, slot g + n - 1 ...
// CHECK: %[[END:.*]] = arith.addi %[[G]], %[[N]] : i32
// CHECK-NEXT: %[[LAST:.*]] = arith.subi %[[END]], %c1_i32 : i32
// CHECK-NEXT: hopper.ring.stage %[[V]][%[[LAST]]]
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.extui
// CHECK-NEXT: %[[DVL:.*]] = arith.addi %[[DV0]]
// CHECK-NEXT: hopper.ring.consumer_wait %[[V]][%[[LAST]]]
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[OT:.*]] = hopper.wgmma.rs %[[R]]#3, %[[DVL]], %[[R]]#2
// CHECK-NEXT: %[[OTR:.*]] = hopper.wgmma.wait 0, %[[OT]]
// CHECK-NEXT: hopper.ring.consumer_release %[[V]][%[[LAST]]]
// CHECK-NEXT: scf.yield %[[R]]#0, %[[R]]#1, %[[OTR]]
func.func @sequential(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// With lazy rescaling, O *= alpha sits behind the warpgroup's vote: the
// wait for the previous P V goes into both arms (ptxas does not hoist it
// across the branch, so the softmax stays beside the P V wgmmas). The first
// block has no vote: its O is zero.
// CHECK-LABEL: func.func @lazy
// CHECK: %[[OZ:.*]] = hopper.zero : !hopper.frag<64x64xf32>
// CHECK-NOT: hopper.warpgroup_any
// CHECK: hopper.softmax_step %{{.*}} scale %{{.*}} : !hopper.frag<64x64xf32>
// CHECK-NOT: hopper.warpgroup_any
// CHECK: scf.for
// CHECK: %[[O:.*]] = hopper.wgmma.rs
// CHECK-NEXT: hopper.wgmma.wait 1
// CHECK: %[[P:.*]], %{{.*}}, %{{.*}}, %[[ALPHA:.*]], %[[UP:.*]] = hopper.softmax_step %{{.*}} state(%{{.*}}) threshold 8.000000e+00
// CHECK-NEXT: hopper.trunc %[[P]]
// CHECK-NEXT: %[[ANY:.*]] = hopper.warpgroup_any %[[UP]]
// CHECK-NEXT: %[[OA:.*]] = scf.if %[[ANY]] -> (!hopper.frag<64x64xf32>) {
// CHECK-NEXT: %[[W1:.*]] = hopper.wgmma.wait 0, %[[O]]
// CHECK-NEXT: %[[SC:.*]] = hopper.scale_rows %[[W1]], %[[ALPHA]]
// CHECK-NEXT: scf.yield %[[SC]]
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[W2:.*]] = hopper.wgmma.wait 0, %[[O]]
// CHECK-NEXT: scf.yield %[[W2]]
// CHECK-NEXT: }
// CHECK-NEXT: hopper.ring.consumer_release
// CHECK-NEXT: scf.yield %{{.*}}, %{{.*}}, %[[OA]], %{{.*}}
func.func @lazy(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32, %cw: i32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) threshold 8.0 : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %any = hopper.warpgroup_any %up in consumer[%cw] of 2
      %oa = scf.if %any -> (!s) {
        %sc = hopper.scale_rows %o, %alpha : !s, !r
        scf.yield %sc : !s
      } else {
        scf.yield %o : !s
      }
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// A state that is not the initial one (m = -inf, l = 0, O = 0) is kept:
// the prologue's step has it, and O is rescaled.
// CHECK-LABEL: func.func @given_state
// CHECK-SAME: %[[MI:arg7]]: !hopper.frag<64xf32>, %[[LI:arg8]]: !hopper.frag<64xf32>, %[[OI:arg9]]: !hopper.frag<64x64xf32>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[ALPHA:.*]], %{{.*}} = hopper.softmax_step %{{.*}} scale %{{.*}} state(%[[MI]], %[[LI]])
// CHECK-NEXT: hopper.trunc
// CHECK-NEXT: %[[OS:.*]] = hopper.scale_rows %[[OI]], %[[ALPHA]]
// CHECK-NEXT: scf.for %{{.*}} iter_args(%{{.*}}, %{{.*}}, %{{.*}} = %[[OS]], %{{.*}})
func.func @given_state(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32, %mi: !r, %li: !r, %oi: !s) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %mi, %l = %li, %o = %oi) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// The loop must run at least once: its first block is peeled.
func.func @unguarded(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sge, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: its first block is peeled, so it must run at least once (put it in an scf.if on ub > lb)}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// Stage 1 reads block t - 1's slot, derived from a value of stage 0.
func.func @stage1_reads_iv(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: stage 1 (the P V product) may not read the loop's induction variable or state directly}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%t] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%t] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%t] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// The product opens its own window.
func.func @no_fence(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: the P V product must follow the nvvm.wgmma.fence.aligned that opens its window}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// O is in flight until stage 0's window has issued.
func.func @o_before_window(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: O must first be used after stage 0's wgmma window (where the previous block's P V product is waited for)}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %early = hopper.scale_rows %o, %m : !s, !r
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// A V slot without a release would never be refilled.
func.func @no_release(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: each ring slot the P V product reads needs one hopper.ring.consumer_wait and one consumer_release}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// The tail is the iteration ub - 1: the step must be 1.
func.func @step_two(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: its step must be 1 (the tail is the iteration ub - 1)}}
    %f:3 = scf.for %t = %c0 to %n step %c2 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// A second wgmma window of stage 0 before O's first use: the waits after
// it would not see the product's group where they expect it.
func.func @second_window(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: stage 0 issues more wgmma before O's first use than its first window; only that window can take the P V product}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s2 = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %s2r = hopper.wgmma.wait 0, %s2 : !s
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c512 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

!ring = !hopper.ring<stages = 2, stage_bytes = 8192, data = 0, full = 32768, empty = 32784, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x64xf32>
!p = !hopper.frag<64x64xbf16>
!r = !hopper.frag<64xf32>
// A descriptor that is not computed from a ring slot for the product alone
// leaves no slot whose wait and release could move with it.
func.func @no_slot(%smem: !llvm.ptr<3>, %dq: i64, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c512 = arith.constant 512 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    // expected-error @+1 {{cannot overlap this loop: the P V product's descriptor must be computed from a ring slot (hopper.ring.stage) for it alone, whose wait and release move with it}}
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c512 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !p
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv0, %oa : !p, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}

// -----

// S = Q K^T with Q in registers (FP8 head dim 128) is a wgmma.rs too, from
// hopper.zero: the P V product is the one that accumulates, and it joins
// S's window as before.
!ring = !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 65536, empty = 65552, arrivals = 128, cluster = 1>
!s = !hopper.frag<64x128xf32>
!q = !hopper.frag<64x128xf8E4M3FN>
!r = !hopper.frag<64xf32>
// CHECK-LABEL: func.func @s_from_registers
// CHECK: scf.for
// CHECK: %[[Z:.*]] = hopper.zero : !hopper.frag<64x128xf32>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[S:.*]] = hopper.wgmma.rs %{{.*}}, %{{.*}}, %[[Z]] : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
// CHECK-NEXT: %[[O:.*]] = hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
// CHECK-NEXT: hopper.wgmma.wait 1, %[[S]]
// CHECK: hopper.wgmma.wait 0, %[[O]]
func.func @s_from_registers(%smem: !llvm.ptr<3>, %qa: !q, %dk0: i64, %dv0: i64, %n: i32, %g: i32, %sl2: f32) -> (!r, !r, !s) {
  %k = hopper.ring.create %smem : !ring
  %v = hopper.ring.create %smem : !ring
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c1024 = arith.constant 1024 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %nz = arith.cmpi sgt, %n, %c0 : i32
  %res:3 = scf.if %nz -> (!r, !r, !s) {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    %f:3 = scf.for %t = %c0 to %n step %c1 iter_args(%m = %m0, %l = %l0, %o = %o0) -> (!r, !r, !s) : i32 {
      %u = arith.addi %g, %t : i32
      %ks = hopper.ring.stage %k[%u] : !ring
      %ko = arith.muli %ks, %c1024 : i32
      %ko64 = arith.extui %ko : i32 to i64
      %dk = arith.addi %dk0, %ko64 : i64
      hopper.ring.consumer_wait %k[%u] : !ring
      %zs = hopper.zero : !s
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.rs %qa, %dk, %zs : !q, !s
      %sr = hopper.wgmma.wait 0, %s : !s
      hopper.ring.consumer_release %k[%u] : !ring
      %p, %m1, %l1, %alpha, %up = hopper.softmax_step %sr scale %sl2 state(%m, %l) : !s, !r
      %pa = hopper.trunc %p : !s to !q
      %oa = hopper.scale_rows %o, %alpha : !s, !r
      %vs = hopper.ring.stage %v[%u] : !ring
      %vo = arith.muli %vs, %c1024 : i32
      %vo64 = arith.extui %vo : i32 to i64
      %dv = arith.addi %dv0, %vo64 : i64
      hopper.ring.consumer_wait %v[%u] : !ring
      nvvm.wgmma.fence.aligned
      %o1 = hopper.wgmma.rs %pa, %dv, %oa : !q, !s
      %o2 = hopper.wgmma.wait 0, %o1 : !s
      hopper.ring.consumer_release %v[%u] : !ring
      scf.yield %m1, %l1, %o2 : !r, !r, !s
    } {hopper.overlap}
    scf.yield %f#0, %f#1, %f#2 : !r, !r, !s
  } else {
    %m0 = hopper.fill %ninf : f32 to !r
    %l0 = hopper.zero : !r
    %o0 = hopper.zero : !s
    scf.yield %m0, %l0, %o0 : !r, !r, !s
  }
  return %res#0, %res#1, %res#2 : !r, !r, !s
}
