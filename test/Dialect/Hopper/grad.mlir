// The backward's fragment ops (S^T and dP^T: rows keys, columns queries)
// print and parse back; their verifiers refuse what the lowering cannot do.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.stage_rows %{{.*}}[%{{.*}}] rows %{{.*}} bound %{{.*}} fill %{{.*}} to %{{.*}}[%{{.*}}] count 64
// CHECK: hopper.load_columns %{{.*}}[%{{.*}}] : !hopper.frag<64x64xf32>
// CHECK: hopper.mask %{{.*}} rows %{{.*}} cols %{{.*}} visible @vis(%{{.*}}, %{{.*}}) transposed : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_probs %{{.*}}, %{{.*}} scale %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_probs %{{.*}}, columns %{{.*}}[%{{.*}}] scale %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, columns %{{.*}}[%{{.*}}] : !hopper.frag<64x64xf32>
// CHECK: hopper.stage_rows %{{.*}}[%{{.*}}] rows %{{.*}} bound %{{.*}} fill %{{.*}} to %{{.*}}[%{{.*}}] count 64 neg_log2{{$}}
// CHECK: hopper.grad_probs %{{.*}}, columns %{{.*}}[%{{.*}}] scale %{{.*}} lse_neg_log2 : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_probs %{{.*}}, %{{.*}} scale %{{.*}} lse_neg_log2 : !hopper.frag<64x64xf32>
// CHECK: hopper.grad_softcap %{{.*}}, %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] box_bytes 0 : !hopper.frag<64x64xbf16>
// CHECK: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] column %{{.*}} box_bytes 0 : !hopper.frag<64x32xbf16>
// CHECK: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] box_bytes 0 stmatrix : !hopper.frag<64x64xbf16>
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} acc %{{.*}} k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.reduce_add %{{.*}} to %{{.*}} : !hopper.frag<64x128xf32>
// CHECK: hopper.reduce_add %{{.*}} to %{{.*}} columns 64 : !hopper.frag<64x128xf32>
// CHECK: hopper.stage_fragment %{{.*}} to %{{.*}}[%{{.*}}] : !hopper.frag<64x128xf32>
// CHECK: hopper.named_barrier.arrive reduce_full[%{{.*}}] of 2 threads 160
// CHECK: hopper.named_barrier.sync reduce_free[%{{.*}}] of 2 threads 160
// CHECK: hopper.reduce_add_bulk %{{.*}}[%{{.*}}] to %{{.*}} bytes 32768
// CHECK: hopper.wait_turn %{{.*}}, %{{.*}}{{$}}
// CHECK: hopper.pass_turn %{{.*}}{{$}}
func.func private @vis(i32, i32, i32) -> (i32, i32)
func.func @step(%da: i64, %db: i64, %s: !hopper.frag<64x64xf32>, %dp: !hopper.frag<64x64xf32>,
                %lse: !llvm.ptr<1>, %base: i64, %m0: i32, %sq: i32, %skv: i32, %inf: f32,
                %sl2: f32, %smem: !llvm.ptr<3>, %off: i32, %dq: !llvm.ptr<1>, %st: i64) {
  %q = hopper.wgmma.ss %da, %db k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
  hopper.stage_rows %lse [%base] rows %m0 bound %sq fill %inf to %smem[%off] count 64
  %l = hopper.load_columns %smem[%off] : !hopper.frag<64x64xf32>
  %m = hopper.mask %s rows %m0 cols %m0 visible @vis(%sq, %skv) transposed : !hopper.frag<64x64xf32>
  %p = hopper.grad_probs %m, %l scale %sl2 : !hopper.frag<64x64xf32>
  %ds = hopper.grad_scores %p, %dp, %l : !hopper.frag<64x64xf32>
  %pc = hopper.grad_probs %m, columns %smem[%off] scale %sl2 : !hopper.frag<64x64xf32>
  %dsc0 = hopper.grad_scores %pc, %dp, columns %smem[%off] : !hopper.frag<64x64xf32>
  hopper.stage_rows %lse [%base] rows %m0 bound %sq fill %inf to %smem[%off] count 64 neg_log2
  %pn = hopper.grad_probs %m, columns %smem[%off] scale %sl2 lse_neg_log2 : !hopper.frag<64x64xf32>
  %pf = hopper.grad_probs %m, %l scale %sl2 lse_neg_log2 : !hopper.frag<64x64xf32>
  %dsc = hopper.grad_softcap %ds, %s : !hopper.frag<64x64xf32>
  %h = hopper.trunc %ds : !hopper.frag<64x64xf32> to !hopper.frag<64x64xbf16>
  hopper.store_shared %h to %smem [%off] box_bytes 0 : !hopper.frag<64x64xbf16>
  %half = hopper.zero : !hopper.frag<64x32xbf16>
  hopper.store_shared %half to %smem [%off] column %m0 box_bytes 0 : !hopper.frag<64x32xbf16>
  hopper.store_shared %h to %smem [%off] box_bytes 0 stmatrix : !hopper.frag<64x64xbf16>
  %acc = hopper.wgmma.ss %da, %db acc %q k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
  hopper.reduce_add %q to %dq : !hopper.frag<64x128xf32>
  hopper.reduce_add %q to %dq columns 64 : !hopper.frag<64x128xf32>
  hopper.stage_fragment %q to %smem[%off] : !hopper.frag<64x128xf32>
  hopper.named_barrier.arrive reduce_full[%m0] of 2 threads 160
  hopper.named_barrier.sync reduce_free[%m0] of 2 threads 160
  hopper.reduce_add_bulk %smem[%off] to %dq bytes 32768
  hopper.wait_turn %dq, %m0
  hopper.pass_turn %dq
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

func.func @columns_f32(%smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{the result must be an f32 fragment}}
  %l = hopper.load_columns %smem[%off] : !hopper.frag<64x64xbf16>
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

func.func @stage_rows_partial_warp(%p: !llvm.ptr<1>, %b: i64, %r: i32, %f: f32, %smem: !llvm.ptr<3>) {
  // expected-error @+1 {{rows must be a positive multiple of 32 (the lanes of a warp), got 48}}
  hopper.stage_rows %p [%b] rows %r bound %r fill %f to %smem[%r] count 48
  return
}

// -----

func.func @reduce_bf16(%t: !hopper.frag<64x64xbf16>, %dq: !llvm.ptr<1>) {
  // expected-error @+1 {{takes an f32 tile (f32 reductions)}}
  hopper.reduce_add %t to %dq : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @reduce_columns(%t: !hopper.frag<64x64xf32>, %dq: !llvm.ptr<1>) {
  // expected-error @+1 {{columns must be a positive multiple of 8 below the tile's 64, got 64}}
  hopper.reduce_add %t to %dq columns 64 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @reduce_columns_partial(%t: !hopper.frag<64x64xf32>, %dq: !llvm.ptr<1>) {
  // expected-error @+1 {{columns must be a positive multiple of 8 below the tile's 64, got 12}}
  hopper.reduce_add %t to %dq columns 12 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @stage_bf16(%t: !hopper.frag<64x64xbf16>, %smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{takes an f32 tile (what hopper.reduce_add_bulk adds)}}
  hopper.stage_fragment %t to %smem[%off] : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @bulk_bytes(%dq: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{bytes must be a positive multiple of 16 within the 232448 bytes of a CTA's shared memory, got 8200}}
  hopper.reduce_add_bulk %smem[%off] to %dq bytes 8200
  return
}

// -----

func.func @reduce_barriers_three_consumers(%c: i32) {
  // expected-error @+1 {{barrier kind reduce_full with 3 consumer warpgroups needs barrier ids up to 18; the hardware has 0 to 15}}
  hopper.named_barrier.sync reduce_full[%c] of 3 threads 160
  return
}

// -----

func.func @column_whole_box(%t: !hopper.frag<64x64xbf16>, %smem: !llvm.ptr<3>, %off: i32, %c: i32) {
  // expected-error @+1 {{a tile stored at a column is part of one 64-column box: at most 48 columns wide}}
  hopper.store_shared %t to %smem [%off] column %c box_bytes 0 : !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @probs_both(%s: !hopper.frag<64x64xf32>, %l: !hopper.frag<64x64xf32>, %sl2: f32, %smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{takes lse as a fragment or as columns %smem[%off], not both}}
  %p = hopper.grad_probs %s, %l columns %smem[%off] scale %sl2 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @probs_neither(%s: !hopper.frag<64x64xf32>, %sl2: f32) {
  // expected-error @+1 {{takes lse as a fragment or as columns %smem[%off], got neither}}
  %p = hopper.grad_probs %s, scale %sl2 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @scores_neither(%p: !hopper.frag<64x64xf32>, %dp: !hopper.frag<64x64xf32>) {
  // expected-error @+1 {{takes delta as a fragment or as columns %smem[%off], got neither}}
  %ds = hopper.grad_scores %p, %dp, : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @scores_both(%p: !hopper.frag<64x64xf32>, %dp: !hopper.frag<64x64xf32>, %smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @+1 {{takes delta as a fragment or as columns %smem[%off], not both}}
  %ds = hopper.grad_scores %p, %dp, %dp columns %smem[%off] : !hopper.frag<64x64xf32>
  return
}

// (columns without its offset, or the other way round, cannot be written:
// the syntax takes them together; the verifier's check guards builders.)

// -----

// CHECK-LABEL: func.func @band_mask
// CHECK: hopper.band_mask %{{.*}} rows %{{.*}} cols %{{.*}} keys %{{.*}} hi %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.band_mask %{{.*}} rows %{{.*}} cols %{{.*}} keys %{{.*}} lo %{{.*}} hi %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.band_mask %{{.*}} rows %{{.*}} cols %{{.*}} keys %{{.*}} : !hopper.frag<64x64xf32>
func.func @band_mask(%s: !hopper.frag<64x64xf32>, %r: i32, %c: i32, %skv: i32, %lo: i64, %hi: i64) {
  %a = hopper.band_mask %s rows %r cols %c keys %skv hi %hi : !hopper.frag<64x64xf32>
  %b = hopper.band_mask %s rows %r cols %c keys %skv lo %lo hi %hi : !hopper.frag<64x64xf32>
  %d = hopper.band_mask %s rows %r cols %c keys %skv : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @band_mask_bf16(%s: !hopper.frag<64x64xbf16>, %r: i32, %c: i32, %skv: i32) {
  // expected-error @+1 {{the scores must be an f32 fragment}}
  %a = hopper.band_mask %s rows %r cols %c keys %skv : !hopper.frag<64x64xbf16>
  return
}
