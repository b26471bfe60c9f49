// hopper-pingpong: the two consumers of a warp_specialize marked
// hopper.pingpong take turns to issue their wgmmas: each issue window (the
// fence and the wgmma.ss / wgmma.rs right after it) is preceded by a sync on
// the consumer's own turn barrier and followed by an arrive on the other's;
// consumer 1 opens consumer 0's first turn at the start, consumer 0 takes
// the last turn at the end. Unmarked ops are left alone.
// RUN: fa3-opt %s --split-input-file --hopper-pingpong --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @turns
// CHECK: } consumers(%[[CW:.*]] of 2) regs 240 {
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: %[[OTHER:.*]] = arith.subi %[[ONE]], %[[CW]] : i32
// CHECK: %[[IS1:.*]] = arith.cmpi eq, %[[CW]], %[[ONE]] : i32
// CHECK: scf.if %[[IS1]] {
// CHECK-NEXT: hopper.named_barrier.arrive turn[%[[ZERO]]] of 2 threads 256
// CHECK: scf.for
// CHECK-NEXT: hopper.named_barrier.sync turn[%[[CW]]] of 2 threads 256
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: hopper.wgmma.ss
// CHECK-NEXT: hopper.wgmma.rs
// CHECK-NEXT: hopper.named_barrier.arrive turn[%[[OTHER]]] of 2 threads 256
// CHECK-NEXT: hopper.wgmma.wait
// CHECK: }
// CHECK: %[[IS0:.*]] = arith.cmpi eq, %[[CW]], %[[ZERO]] : i32
// CHECK: scf.if %[[IS0]] {
// CHECK-NEXT: hopper.named_barrier.sync turn[%[[ZERO]]] of 2 threads 256
// CHECK-NOT: hopper.pingpong
func.func @turns(%dq: i64, %dk: i64, %dv: i64, %n: index) {
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 2) regs 240 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = hopper.zero : !hopper.frag<64x64xbf16>
    %o = hopper.zero : !hopper.frag<64x64xf32>
    scf.for %i = %c0 to %n step %c1 {
      nvvm.wgmma.fence.aligned
      %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !hopper.frag<64x64xf32>
      %o1 = hopper.wgmma.rs %p, %dv, %o : !hopper.frag<64x64xbf16>, !hopper.frag<64x64xf32>
      %r:2 = hopper.wgmma.wait 0, %s, %o1 : !hopper.frag<64x64xf32>, !hopper.frag<64x64xf32>
    }
  } {hopper.pingpong}
  return
}

// -----

// Without the marker nothing changes.
// CHECK-LABEL: func.func @unmarked
// CHECK-NOT: hopper.named_barrier
func.func @unmarked(%dq: i64, %dk: i64) {
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 2) regs 240 {
    nvvm.wgmma.fence.aligned
    %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !hopper.frag<64x64xf32>
  }
  return
}

// -----

func.func @three(%dq: i64, %dk: i64) {
  // expected-error @below {{ping-pong alternates two consumer warpgroups, not 3}}
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 3) regs 160 {
    nvvm.wgmma.fence.aligned
    %s = hopper.wgmma.ss %dq, %dk k 64 boxes 8192, 8192 : bf16 -> !hopper.frag<64x64xf32>
  } {hopper.pingpong}
  return
}

// -----

func.func @no_window() {
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 2) regs 240 {
    // expected-error @below {{starts no wgmma issue window (no hopper.wgmma.ss/rs after it)}}
    nvvm.wgmma.fence.aligned
  } {hopper.pingpong}
  return
}
