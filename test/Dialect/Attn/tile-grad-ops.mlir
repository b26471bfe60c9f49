// The backward's tile ops print and parse back, and their verifiers name
// the operand that does not fit: f32 sums of the right shape, rank-4
// tensors, positive scale, the forward's window and softcap rules.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @ops
// CHECK: attn.grad_preprocess %{{.*}}, %{{.*}} to %{{.*}}, %{{.*}} : memref<1x2x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?x16xf32>
// CHECK: attn.tile_grad_update {{.*}} rows %{{.*}} cols %{{.*}} acc(%{{.*}}, %{{.*}}, %{{.*}}) masked {block_m = 64 : i64, block_n = 32 : i64, scale = 2.500000e-01 : f32, softcap = 0.000000e+00 : f32, window = array<i64: -1, 0>}
// CHECK: attn.tile_grad_finalize acc(%{{.*}}, %{{.*}}) to %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] cols %{{.*}} {block_n = 32 : i64}
// CHECK: attn.grad_postprocess %{{.*}} to %{{.*}} : memref<1x2x?x16xf32>, memref<1x2x?x16xf16>
func.func @ops(%q: memref<1x2x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x8xf16>,
               %o: memref<1x2x?x8xf16>, %do: memref<1x2x?x8xf16>, %lse: memref<1x2x?xf32>,
               %delta: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf32>, %dka: memref<32x16xf32>,
               %dva: memref<32x8xf32>, %dq: memref<1x2x?x16xf16>, %dk: memref<1x1x?x16xf16>,
               %dv: memref<1x1x?x8xf16>, %i: index) {
  attn.grad_preprocess %o, %do to %delta, %dqa : memref<1x2x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?x16xf32>
  attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%i, %i, %i] rows %i cols %i acc(%dqa, %dka, %dva) masked {block_m = 64 : i64, block_n = 32 : i64, scale = 0.25 : f32, softcap = 0.0 : f32, window = array<i64: -1, 0>} : memref<1x2x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?xf32>, memref<1x2x?x16xf32>, memref<32x16xf32>, memref<32x8xf32>
  attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%i, %i] cols %i {block_n = 32 : i64} : memref<32x16xf32>, memref<32x8xf32>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>
  attn.grad_postprocess %dqa to %dq : memref<1x2x?x16xf32>, memref<1x2x?x16xf16>
  return
}

// -----

func.func @delta_shape(%o: memref<1x2x?x8xf16>, %delta: memref<1x3x?xf32>, %dqa: memref<1x2x?x16xf32>) {
  // expected-error @below {{delta must be an f32 buffer like memref<1x2x?xf32>, got 'memref<1x3x?xf32>'}}
  attn.grad_preprocess %o, %o to %delta, %dqa : memref<1x2x?x8xf16>, memref<1x2x?x8xf16>, memref<1x3x?xf32>, memref<1x2x?x16xf32>
  return
}

// -----

func.func @dq_acc_type(%o: memref<1x2x?x8xf16>, %delta: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf16>) {
  // expected-error @below {{dq_acc must be an f32 buffer like memref<1x2x?x?xf32>, got 'memref<1x2x?x16xf16>'}}
  attn.grad_preprocess %o, %o to %delta, %dqa : memref<1x2x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?x16xf16>
  return
}

// -----

func.func @dk_acc_rows(%q: memref<1x2x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x8xf16>,
                       %do: memref<1x2x?x8xf16>, %lse: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf32>,
                       %dka: memref<64x16xf32>, %dva: memref<32x8xf32>, %i: index) {
  // expected-error @below {{dk_acc must be an f32 buffer like memref<32x16xf32>, got 'memref<64x16xf32>'}}
  attn.tile_grad_update %q, %k, %v, %do, %lse, %lse[%i, %i, %i] rows %i cols %i acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 32 : i64, scale = 0.25 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x2x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?xf32>, memref<1x2x?x16xf32>, memref<64x16xf32>, memref<32x8xf32>
  return
}

// -----

func.func @scale(%q: memref<1x2x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x8xf16>,
                 %do: memref<1x2x?x8xf16>, %lse: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf32>,
                 %dka: memref<32x16xf32>, %dva: memref<32x8xf32>, %i: index) {
  // expected-error @below {{scale must be finite and positive, got -1}}
  attn.tile_grad_update %q, %k, %v, %do, %lse, %lse[%i, %i, %i] rows %i cols %i acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 32 : i64, scale = -1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x2x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?xf32>, memref<1x2x?x16xf32>, memref<32x16xf32>, memref<32x8xf32>
  return
}

// -----

func.func @lse_rank(%q: memref<1x2x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x8xf16>,
                    %do: memref<1x2x?x8xf16>, %lse: memref<1x2xf32>, %delta: memref<1x2x?xf32>,
                    %dqa: memref<1x2x?x16xf32>, %dka: memref<32x16xf32>, %dva: memref<32x8xf32>, %i: index) {
  // expected-error @below {{lse must be an f32 buffer like memref<1x2x?xf32>, got 'memref<1x2xf32>'}}
  attn.tile_grad_update %q, %k, %v, %do, %lse, %delta[%i, %i, %i] rows %i cols %i acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 32 : i64, scale = 0.25 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x2x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2xf32>, memref<1x2x?xf32>, memref<1x2x?x16xf32>, memref<32x16xf32>, memref<32x8xf32>
  return
}

// -----

func.func @window(%q: memref<1x2x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x8xf16>,
                  %do: memref<1x2x?x8xf16>, %lse: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf32>,
                  %dka: memref<32x16xf32>, %dva: memref<32x8xf32>, %i: index) {
  // expected-error @below {{window entries must be -1 (unbounded) or 0 to 2147483647, got [-5, 0]}}
  attn.tile_grad_update %q, %k, %v, %do, %lse, %lse[%i, %i, %i] rows %i cols %i acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 32 : i64, scale = 0.25 : f32, softcap = 0.0 : f32, window = array<i64: -5, 0>} : memref<1x2x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?xf32>, memref<1x2x?x16xf32>, memref<32x16xf32>, memref<32x8xf32>
  return
}

// -----

func.func @finalize_width(%dka: memref<32x16xf32>, %dva: memref<32x4xf32>, %dk: memref<1x1x?x16xf16>, %dv: memref<1x1x?x8xf16>, %i: index) {
  // expected-error @below {{dv_acc must be an f32 buffer like memref<32x8xf32>, got 'memref<32x4xf32>'}}
  attn.tile_grad_finalize acc(%dka, %dva) to %dk, %dv[%i, %i] cols %i {block_n = 32 : i64} : memref<32x16xf32>, memref<32x4xf32>, memref<1x1x?x16xf16>, memref<1x1x?x8xf16>
  return
}

// -----

func.func @postprocess_shape(%dqa: memref<1x2x?x8xf32>, %dq: memref<1x2x?x16xf16>) {
  // expected-error @below {{dq_acc must be an f32 buffer like memref<1x2x?x16xf32>, got 'memref<1x2x?x8xf32>'}}
  attn.grad_postprocess %dqa to %dq : memref<1x2x?x8xf32>, memref<1x2x?x16xf16>
  return
}

// -----

func.func @postprocess_rank(%dqa: memref<2x8xf32>, %dq: memref<2x8xf16>) {
  // expected-error @below {{dq must be a rank-4 memref}}
  attn.grad_postprocess %dqa to %dq : memref<2x8xf32>, memref<2x8xf16>
  return
}

// -----

func.func @head_dims(%q: memref<1x2x?x16xf16>, %k: memref<1x1x?x32xf16>, %v: memref<1x1x?x8xf16>,
                     %do: memref<1x2x?x8xf16>, %lse: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf32>,
                     %dka: memref<32x16xf32>, %dva: memref<32x8xf32>, %i: index) {
  // expected-error @below {{query and key must have one head dim, got 16 and 32}}
  attn.tile_grad_update %q, %k, %v, %do, %lse, %lse[%i, %i, %i] rows %i cols %i acc(%dqa, %dka, %dva) {block_m = 64 : i64, block_n = 32 : i64, scale = 0.25 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x2x?x16xf16>, memref<1x1x?x32xf16>, memref<1x1x?x8xf16>, memref<1x2x?x8xf16>, memref<1x2x?xf32>, memref<1x2x?xf32>, memref<1x2x?x16xf32>, memref<32x16xf32>, memref<32x8xf32>
  return
}

// -----

func.func @element_type(%o: memref<1x2x?x8xi8>, %delta: memref<1x2x?xf32>, %dqa: memref<1x2x?x16xf32>) {
  // expected-error @below {{o must hold f32, bf16 or f16, got 'i8'}}
  attn.grad_preprocess %o, %o to %delta, %dqa : memref<1x2x?x8xi8>, memref<1x2x?x8xi8>, memref<1x2x?xf32>, memref<1x2x?x16xf32>
  return
}
