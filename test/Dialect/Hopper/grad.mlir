// The backward's fragment ops (S^T and dP^T: rows keys, columns queries)
// print and parse back; their verifiers refuse what the lowering cannot do.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.load_columns %{{.*}}[%{{.*}}] cols %{{.*}} bound %{{.*}} fill %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.mask %{{.*}} rows %{{.*}} cols %{{.*}} visible @vis(%{{.*}}, %{{.*}}) transposed : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_probs %{{.*}}, %{{.*}} scale %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] box_bytes 0 : !hopper.frag<64x64xbf16>
// CHECK: hopper.reduce_add %{{.*}} to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x128xf32>
// CHECK: hopper.reduce_add_bulk %{{.*}} to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} staging %{{.*}}[4096] consumer[%{{.*}}] of 2 : !hopper.frag<64x128xf32>
func.func private @vis(i32, i32, i32) -> (i32, i32)
func.func @step(%da: i64, %db: i64, %s: !hopper.frag<64x64xf32>, %dp: !hopper.frag<64x64xf32>,
                %lse: !llvm.ptr<1>, %base: i64, %m0: i32, %sq: i32, %skv: i32, %inf: f32,
                %sl2: f32, %smem: !llvm.ptr<3>, %off: i32, %dq: !llvm.ptr<1>, %st: i64) {
  %q = hopper.wgmma.ss %da, %db k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
  %l = hopper.load_columns %lse [%base] cols %m0 bound %sq fill %inf : !hopper.frag<64x64xf32>
  %m = hopper.mask %s rows %m0 cols %m0 visible @vis(%sq, %skv) transposed : !hopper.frag<64x64xf32>
  %p = hopper.grad_probs %m, %l scale %sl2 : !hopper.frag<64x64xf32>
  %ds = hopper.grad_scores %p, %dp, %l : !hopper.frag<64x64xf32>
  %h = hopper.trunc %ds : !hopper.frag<64x64xf32> to !hopper.frag<64x64xbf16>
  hopper.store_shared %h to %smem [%off] box_bytes 0 : !hopper.frag<64x64xbf16>
  hopper.reduce_add %q to %dq strides(%st, %st, %st) rows %m0 head %m0 batch %m0 bound %sq : !hopper.frag<64x128xf32>
  hopper.reduce_add_bulk %q to %dq strides(%st, %st, %st) rows %m0 head %m0 batch %m0 bound %sq staging %smem[4096] consumer[%m0] of 2 : !hopper.frag<64x128xf32>
  return
}

// -----

func.func @mn_major_box(%da: i64, %db: i64) {
  // expected-error @+1 {{an MN-major operand steps along its rows: A's box distance must be 0, got 8192}}
  %q = hopper.wgmma.ss %da, %db k 64 boxes 8192, 16384 {a_mn_major} : bf16 -> !hopper.frag<64x128xf32>
  return
}

// -----

func.func @k_major_box(%da: i64, %db: i64) {
  // expected-error @+1 {{box distances must be positive multiples of 16 bytes, got 0 for B}}
  %q = hopper.wgmma.ss %da, %db k 64 boxes 0, 0 {a_mn_major} : bf16 -> !hopper.frag<64x128xf32>
  return
}

// -----

func.func @columns_f32(%lse: !llvm.ptr<1>, %base: i64, %m0: i32, %inf: f32) {
  // expected-error @+1 {{the result must be an f32 fragment}}
  %l = hopper.load_columns %lse [%base] cols %m0 bound %m0 fill %inf : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @probs_f32(%s: !hopper.frag<64x64xbf16>, %sl2: f32) {
  // expected-error @+1 {{the scores must be an f32 fragment}}
  %p = hopper.grad_probs %s, %s scale %sl2 : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @scores_f32(%p: !hopper.frag<64x64xbf16>) {
  // expected-error @+1 {{p must be an f32 fragment}}
  %ds = hopper.grad_scores %p, %p, %p : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @stage_f32(%t: !hopper.frag<64x64xf32>, %smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{stores a bf16 or f16 tile (a wgmma operand)}}
  hopper.store_shared %t to %smem [%off] box_bytes 0 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @stage_boxes(%t: !hopper.frag<64x128xbf16>, %smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{a tile wider than 64 columns is stored as boxes at least 8192 bytes apart, on 1024-byte swizzle atoms; got box_bytes 4096}}
  hopper.store_shared %t to %smem [%off] box_bytes 4096 : !hopper.frag<64x128xbf16>
  return
}

// -----

func.func @reduce_bf16(%t: !hopper.frag<64x64xbf16>, %dq: !llvm.ptr<1>, %st: i64, %r: i32) {
  // expected-error @+1 {{adds an f32 tile (f32 reductions)}}
  hopper.reduce_add %t to %dq strides(%st, %st, %st) rows %r head %r batch %r bound %r : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @bulk_bf16(%t: !hopper.frag<64x64xbf16>, %dq: !llvm.ptr<1>, %st: i64, %r: i32, %smem: !llvm.ptr<3>) {
  // expected-error @+1 {{adds an f32 tile (cp.reduce.async.bulk .add.f32)}}
  hopper.reduce_add_bulk %t to %dq strides(%st, %st, %st) rows %r head %r batch %r bound %r staging %smem[0] consumer[%r] of 2 : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @bulk_misaligned(%t: !hopper.frag<64x64xf32>, %dq: !llvm.ptr<1>, %st: i64, %r: i32, %smem: !llvm.ptr<3>) {
  // expected-error @+1 {{the staging buffers (34816 bytes at offset 8) must start 16-byte aligned within the 232448 bytes of a CTA's shared memory}}
  hopper.reduce_add_bulk %t to %dq strides(%st, %st, %st) rows %r head %r batch %r bound %r staging %smem[8] consumer[%r] of 2 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @bulk_consumer(%t: !hopper.frag<64x64xf32>, %dq: !llvm.ptr<1>, %st: i64, %r: i32, %smem: !llvm.ptr<3>) {
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{consumer 2 is not one of the 2 consumer warpgroups}}
  hopper.reduce_add_bulk %t to %dq strides(%st, %st, %st) rows %r head %r batch %r bound %r staging %smem[0] consumer[%c2] of 2 : !hopper.frag<64x64xf32>
  return
}
