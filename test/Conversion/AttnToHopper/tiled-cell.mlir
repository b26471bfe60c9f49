// convert-attn-to-hopper lowers the tile program of attn-tile's form into
// the consumers' mainloop and epilogue (TiledCell.cpp): the loop over kv
// blocks becomes the loop over the tile's blocks, its index arithmetic i32
// values, its step the block's products and softmax with the step's own
// mask and rescaling, its state fragments. What the tiled IR says is what
// the kernel does (a step without the boundary split masks every block or
// none; one without rescale_threshold rescales every block), and anything
// else in that program is refused by name.
// RUN: fa3-opt %s --split-input-file --convert-attn-to-hopper --verify-diagnostics | FileCheck %s

// attn-tile's form: the mask under the boundary split's condition, rebuilt
// in i32 from the loop's block (lo + t) and attn.kv_range's interior
// bounds; the K/V rows from the step's first column; lazy rescaling. The
// state starts from the fills' constants.
// CHECK-LABEL: gpu.func @split_kernel(
// CHECK: %[[KV:.*]]:4 = func.call @split_kernel_kv_range(
// CHECK: hopper.fill %{{.*}} : f32 to !hopper.frag<64xf32>
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[B:.*]] = arith.addi %[[KV]]#0, %[[T]] : i32
// CHECK-NEXT: %[[COL:.*]] = arith.muli %[[B]], %c128_i32 : i32
// CHECK: hopper.load_tile %{{.*}}[%[[COL]],
// CHECK: hopper.wgmma.ss
// CHECK: %[[B2:.*]] = arith.addi %[[KV]]#0, %[[T]] : i32
// CHECK-NEXT: %[[BEFORE:.*]] = arith.cmpi slt, %[[B2]], %[[KV]]#2 : i32
// CHECK-NEXT: %[[B3:.*]] = arith.addi %[[KV]]#0, %[[T]] : i32
// CHECK-NEXT: %[[AFTER:.*]] = arith.cmpi sge, %[[B3]], %[[KV]]#3 : i32
// CHECK-NEXT: %[[EDGE:.*]] = arith.ori %[[BEFORE]], %[[AFTER]] : i1
// CHECK-NEXT: scf.if %[[EDGE]]
// CHECK: hopper.mask
// CHECK: hopper.softmax_step {{.*}} threshold 8.000000e+00
// CHECK: hopper.warpgroup_any
!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @split(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %before = arith.cmpi slt, %n, %ilo : index
        %after = arith.cmpi sge, %n, %ihi : index
        %edge = arith.ori %before, %after : i1
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

// A step without the mask: no block is masked.
// CHECK-LABEL: gpu.func @unmasked_kernel(
// CHECK-NOT: hopper.mask
// CHECK: gpu.return
!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @unmasked(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

// A masked step without the split: every block is masked, no branch.
// CHECK-LABEL: gpu.func @masked_kernel(
// CHECK: hopper.wgmma.ss
// CHECK-NOT: scf.if
// CHECK: hopper.mask
// CHECK: hopper.softmax_step
!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @masked(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

// A step without rescale_threshold: every block rescales O, no vote; the
// launch facts say so.
// CHECK-LABEL: gpu.func @exact_kernel(
// CHECK-SAME: lazy_rescale = false
// CHECK: hopper.softmax_step %{{.*}} scale %{{.*}} state(%{{.*}}, %{{.*}}) :
// CHECK-NOT: hopper.warpgroup_any
// CHECK: hopper.scale_rows
!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @exact(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %before = arith.cmpi slt, %n, %ilo : index
        %after = arith.cmpi sge, %n, %ihi : index
        %edge = arith.ori %before, %after : i1
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

// A threshold of 0 is exact too.
// CHECK-LABEL: gpu.func @tau0_kernel(
// CHECK-SAME: lazy_rescale = false
// CHECK-NOT: hopper.warpgroup_any
// CHECK: hopper.scale_rows
!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @tau0(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %before = arith.cmpi slt, %n, %ilo : index
        %after = arith.cmpi sge, %n, %ihi : index
        %edge = arith.ori %before, %after : i1
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 0.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 0.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @store_in_loop(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %before = arith.cmpi slt, %n, %ilo : index
        %after = arith.cmpi sge, %n, %ihi : index
        %edge = arith.ori %before, %after : i1
        // expected-error @+1 {{cannot generate the Hopper kernel: the loop over kv blocks may hold only index arithmetic and one attn.tile_update}}
        memref.store %zero, %m[%c0] : !row
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @two_steps(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        // expected-error @+1 {{the loop over kv blocks takes one step a block}}
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @both_masked(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %edge = arith.cmpi slt, %n, %ilo : index
        // expected-error @+1 {{must be the boundary split: the masked attn.tile_update in its then arm, the same step unmasked in its else arm}}
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @step_two(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      // expected-error @+1 {{the loop over kv blocks must run from attn.kv_range's lo to its hi in steps of 1}}
      scf.for %n = %lo to %hi step %c2 {
        %col = arith.muli %n, %c128 : index
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @cond_not_index(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %flag = arith.cmpi eq, %h, %c0 : index
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %before = arith.cmpi slt, %n, %ilo : index
        %edge = arith.xori %before, %flag : i1
        // expected-error @+1 {{the boundary split's condition must be index arithmetic of the kv block and attn.kv_range}}
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @filled_twice(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      // expected-error @+1 {{the step's state may only be filled once before the loop}}
      linalg.fill ins(%ninf : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @fill_one(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      %one = arith.constant 1.0 : f32
      // expected-error @+1 {{the step's state may only be filled once before the loop (row max -inf, row sums and accumulator 0)}}
      linalg.fill ins(%one : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @cast_cond(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        %before = arith.cmpi slt, %n, %ilo : index
        // expected-error @+1 {{may hold only index arithmetic}}
        %wide = arith.index_cast %before : i1 to index
        %edge = arith.cmpi ne, %wide, %c0 : index
        scf.if %edge {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) masked {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        } else {
          attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
        }
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}

// -----

!t = memref<1x2x256x128xbf16>
!row = memref<128xf32>
!acc = memref<128x128xf32>
func.func @other_tiles(%q: !t, %k: !t, %v: !t, %o: !t) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  scf.parallel (%mb, %h) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
      %m = memref.alloc() : !row
      %l = memref.alloc() : !row
      %acc = memref.alloc() : !acc
      linalg.fill ins(%ninf : f32) outs(%m : !row)
      linalg.fill ins(%zero : f32) outs(%l : !row)
      linalg.fill ins(%zero : f32) outs(%acc : !acc)
      %row = arith.muli %mb, %c128 : index
      %lo, %hi, %ilo, %ihi = attn.kv_range rows %row seq(%c256, %c256) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, 0>}
      scf.for %n = %lo to %hi step %c1 {
        %col = arith.muli %n, %c128 : index
        // expected-error @+1 {{the step's tiles and window must be its attn.kv_range's}}
        attn.tile_update %q, %k, %v[%c0, %h, %h] rows %row cols %col state(%m, %l, %acc) {block_m = 128 : i64, block_n = 64 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2 = 0.127517432 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>} : !t, !t, !t, !row, !row, !acc
      }
      attn.tile_finalize state(%m, %l, %acc) to %o[%c0, %h] rows %row {block_m = 128 : i64} : !row, !row, !acc, !t
      memref.dealloc %m : !row
      memref.dealloc %l : !row
      memref.dealloc %acc : !acc
      scf.reduce
  }
  return
}
