// convert-attn-to-hopper lowers the backward's tile program of attn-tile's
// form into the consumers' loop (TiledCell.cpp, matchTiledGradCell): its
// loops over the kv head's q heads and the range's m-blocks become the
// CTA's loop over steps, its index arithmetic i32 values, its step's
// masked and unmasked forms the step's mask. What the tiled IR says is what
// the kernel does (a step without the boundary split masks every m-block
// or none), and anything else in that program is refused by name.
// RUN: fa3-opt %s --split-input-file --convert-attn-to-hopper --verify-diagnostics | FileCheck %s

// attn-tile's form: the loops over q heads and m-blocks become one loop
// over the CTA's steps (the q head its quotient by the range's m-blocks,
// the m-block lo plus the remainder); the step's first row and the
// boundary split's condition are rebuilt in i32 from that m-block and
// attn.q_range's results; the mask stands on the split's masked side,
// a band of keys around each query (head dim 64: the table's
// hopper.band_mask), from the step's first row. dK's and dV's
// sums start from the fills' 0.
// CHECK-LABEL: gpu.func @split_kernel(
// CHECK: } consumers(
// CHECK: %[[R:.*]]:4 = func.call @split_kernel_q_range(
// CHECK: %[[NM:.*]] = arith.maxsi
// CHECK: hopper.zero : !hopper.frag<64x64xf32>
// CHECK: scf.for %[[IT:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: arith.divui %[[IT]], %[[NM]]
// CHECK-NEXT: %[[REM:.*]] = arith.remui %[[IT]], %[[NM]]
// CHECK-NEXT: %[[MB:.*]] = arith.addi %[[R]]#0, %[[REM]] : i32
// CHECK: %[[ROW:.*]] = arith.muli %[[MB]], %c64_i32 : i32
// CHECK: %[[BEFORE:.*]] = arith.cmpi slt, %[[MB]], %[[R]]#2 : i32
// CHECK-NEXT: %[[AFTER:.*]] = arith.cmpi sge, %[[MB]], %[[R]]#3 : i32
// CHECK-NEXT: %[[EDGE:.*]] = arith.ori %[[BEFORE]], %[[AFTER]] : i1
// CHECK-NEXT: scf.if %[[EDGE]]
// CHECK: hopper.band_mask %{{.*}} rows %{{.*}} cols %[[ROW]] keys %{{.*}} hi
// CHECK: hopper.grad_probs
!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @split(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        %before = arith.cmpi slt, %mb, %ilo : index
        %after = arith.cmpi sge, %mb, %ihi : index
        %edge = arith.ori %before, %after : i1
        scf.if %edge {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) masked {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        } else {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        }
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

// A masked step without the split: every m-block is masked.
// CHECK-LABEL: gpu.func @every_kernel(
// CHECK: } consumers(
// CHECK: scf.for
// CHECK-NOT: scf.if
// CHECK: hopper.band_mask
// CHECK-NEXT: hopper.grad_probs
!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @every(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) masked {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

// An unmasked step without the split: no m-block is masked.
// CHECK-LABEL: gpu.func @none_kernel(
// CHECK-NOT: hopper.mask
// CHECK: gpu.return
!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @none(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

// The split's condition is the IR's: here only the m-blocks from the
// interior's end are masked.
// CHECK-LABEL: gpu.func @after_only_kernel(
// CHECK: } consumers(
// CHECK: %[[R:.*]]:4 = func.call @after_only_kernel_q_range(
// CHECK: scf.for
// CHECK: %[[MB:.*]] = arith.addi %[[R]]#0, %{{.*}} : i32
// CHECK-NOT: arith.cmpi slt, %[[MB]]
// CHECK: %[[AFTER:.*]] = arith.cmpi sge, %[[MB]], %[[R]]#3 : i32
// CHECK-NEXT: scf.if %[[AFTER]]
// CHECK: hopper.band_mask
!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @after_only(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        %after = arith.cmpi sge, %mb, %ihi : index
        scf.if %after {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) masked {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        } else {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        }
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

// Anything else in the tile program is refused by name, not lowered wrong.
!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @extra_op(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        // expected-error @+1 {{the loop over m-blocks may hold only index arithmetic and one attn.tile_grad_update (or attn-tile's boundary split of it)}}
        memref.store %zero, %dka[%c0, %c0] : !acc
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @rows(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c128 : index
        // expected-error @+1 {{the step's first row must be the m-block times block_m (the rows the producer loads)}}
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @group(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    // expected-error @+1 {{the loop over q heads must run from 0 to the q heads of a kv head (q's heads / k's) in steps of 1, carrying no values}}
    scf.for %g = %c0 to %c1 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @fill_one(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    // expected-error @+1 {{the step's dK and dV sums may only be filled with 0 once before the loops, updated by the step and read by attn.tile_grad_finalize}}
    linalg.fill ins(%one : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @split_differs(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        %before = arith.cmpi slt, %mb, %ilo : index
        %after = arith.cmpi sge, %mb, %ihi : index
        %edge = arith.ori %before, %after : i1
        // expected-error @+1 {{a branch in the loop over m-blocks must be the boundary split: the masked attn.tile_grad_update in its then arm, the same step unmasked in its else arm}}
        scf.if %edge {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) masked {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 3.000000e+01 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        } else {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        }
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @cond_outside(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        %edge = arith.cmpi slt, %mb, %hk : index
        // expected-error @+1 {{the boundary split's condition must be index arithmetic of the m-block and attn.q_range}}
        scf.if %edge {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) masked {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        } else {
          attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %h, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
        }
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

// -----

!q = memref<?x2x?x64xbf16>
!kv = memref<?x1x?x64xbf16>
!lse = memref<?x2x?xf32>
!dqa = memref<?x2x?x64xf32>
!acc = memref<128x64xf32>
func.func @qhead(%q: !q, %k: !kv, %v: !kv, %do: !q, %lse: !lse, %delta: !lse, %dqa: !dqa, %dk: !kv, %dv: !kv) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %sq = memref.dim %q, %c2 : !q
  %skv = memref.dim %k, %c2 : !kv
  %nb = memref.dim %q, %c0 : !q
  %nn = arith.ceildivsi %skv, %c128 : index
  scf.parallel (%n, %hk, %b) = (%c0, %c0, %c0) to (%nn, %c1, %nb) step (%c1, %c1, %c1) {
    %dka = memref.alloc() : !acc
    %dva = memref.alloc() : !acc
    linalg.fill ins(%zero : f32) outs(%dka : !acc)
    linalg.fill ins(%zero : f32) outs(%dva : !acc)
    %col = arith.muli %n, %c128 : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col seq(%sq, %skv) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 64 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
    scf.for %g = %c0 to %c2 step %c1 {
      %first = arith.muli %hk, %c2 : index
      %h = arith.addi %first, %g : index
      scf.for %mb = %lo to %hi step %c1 {
        %row = arith.muli %mb, %c64 : index
        // expected-error @+1 {{the step's q head must be the kv head's first q head plus the loop's: kv head * 2 + g}}
        attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%b, %g, %hk] rows %row cols %col acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 128 : i64, scale = 1.250000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !q, !kv, !kv, !q, !lse, !lse, !dqa, !acc, !acc
      }
    }
    attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%b, %hk] cols %col {block_n = 128 : i64} : !acc, !acc, !kv, !kv
    memref.dealloc %dka : !acc
    memref.dealloc %dva : !acc
    scf.reduce
  }
  return
}

