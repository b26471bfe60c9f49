// FP8's hopper ops print and parse back: 8-bit fragments (k-steps of 32
// columns), wgmma on e4m3 operands, the f32 -> e4m3 rounding of P, and V
// transposed from one ring's stage into another's (in two boxes of keys for
// tiles of more than 128); the verifiers refuse
// what FP8 wgmma and the transposer cannot take.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>

// CHECK-LABEL: func.func @fp8_step
// CHECK: %[[S:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} k 128 boxes 16384, 16384 : f8E4M3FN -> !hopper.frag<64x128xf32>
// CHECK: %[[P:.*]] = hopper.trunc %[[S]] : !hopper.frag<64x128xf32> to !hopper.frag<64x128xf8E4M3FN>
// CHECK: hopper.wgmma.rs %[[P]], %{{.*}}, %{{.*}} : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
// CHECK: hopper.transpose_stage %{{.*}}[%{{.*}}] to %{{.*}} worker %{{.*}} of 3 rows 128 cols 128 : !hopper.ring<{{.*}}>, !hopper.ring<{{.*}}>
// CHECK: hopper.transpose_stage %{{.*}}[%{{.*}}] to %{{.*}} worker %{{.*}} of 3 rows 128 cols 128 unit_keys 128 : !hopper.ring<{{.*}}>, !hopper.ring<{{.*}}>
// CHECK-LABEL: func.func @wide_step
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 128 boxes 16384, 28672 : f8E4M3FN -> !hopper.frag<64x224xf32>
// CHECK: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} b_box_bytes 16384 : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
// CHECK: hopper.transpose_stage %{{.*}}[%{{.*}}] to %{{.*}} worker %{{.*}} of 3 rows 224 cols 128 unit_keys 32 : !hopper.ring<{{.*}}>, !hopper.ring<{{.*}}>
// CHECK: hopper.scale_key_blocks %{{.*}} first %{{.*}} by %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x224xf32>
func.func @fp8_step(%dq: i64, %dk: i64, %dv: i64, %o: !hopper.frag<64x128xf32>,
                    %smem: !llvm.ptr<3>, %u: i32, %w: i32) -> !hopper.frag<64x128xf32> {
  %s = hopper.wgmma.ss %dq, %dk k 128 boxes 16384, 16384 : f8E4M3FN -> !hopper.frag<64x128xf32>
  %p = hopper.trunc %s : !hopper.frag<64x128xf32> to !hopper.frag<64x128xf8E4M3FN>
  %o1 = hopper.wgmma.rs %p, %dv, %o : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 : !v, !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 unit_keys 128 : !v, !vt
  return %o1 : !hopper.frag<64x128xf32>
}

// FA3's 224-key tile at head dim 128: the transposed V in two boxes of 128
// keys (the second 96 used), 16384 bytes apart
!v224 = !hopper.ring<stages = 2, stage_bytes = 28672, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt224 = !hopper.ring<stages = 2, stage_bytes = 32768, data = 98304, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @wide_step(%dq: i64, %dk: i64, %dv: i64, %o: !hopper.frag<64x128xf32>,
                     %smem: !llvm.ptr<3>, %u: i32, %w: i32) -> !hopper.frag<64x128xf32> {
  %s = hopper.wgmma.ss %dq, %dk k 128 boxes 16384, 28672 : f8E4M3FN -> !hopper.frag<64x224xf32>
  %p = hopper.trunc %s : !hopper.frag<64x224xf32> to !hopper.frag<64x224xf8E4M3FN>
  %o1 = hopper.wgmma.rs %p, %dv, %o b_box_bytes 16384 : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
  %v = hopper.ring.create %smem : !v224
  %vt = hopper.ring.create %smem : !vt224
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 224 cols 128 unit_keys 32 : !v224, !vt224
  // k's block scales (one per 128 keys) over the tile's columns
  %f = arith.constant 1.0 : f32
  %s2 = hopper.scale_key_blocks %s first %u by %f, %f, %f : !hopper.frag<64x224xf32>
  return %o1 : !hopper.frag<64x128xf32>
}

// -----

func.func @scale_key_blocks_count(%s: !hopper.frag<64x224xf32>, %k0: i32, %f: f32) {
  // expected-error @below {{a tile of 224 columns needs 3 factors (the 128-key blocks its keys can reach), got 2}}
  %s2 = hopper.scale_key_blocks %s first %k0 by %f, %f : !hopper.frag<64x224xf32>
  return
}

// -----

// expected-error @below {{a 64xN fragment of 'f8E4M3FN' needs N a multiple of 32 up to 256, got 48}}
func.func private @ksteps(!hopper.frag<64x48xf8E4M3FN>)

// -----

func.func @ss_k(%a: i64, %b: i64) {
  // expected-error @below {{k must be a multiple of 32 (the k-step of 'f8E4M3FN'), got 48}}
  %s = hopper.wgmma.ss %a, %b k 48 boxes 8192, 8192 : f8E4M3FN -> !hopper.frag<64x64xf32>
  return
}

// -----

func.func @ss_mn_major(%a: i64, %b: i64) {
  // expected-error @below {{8-bit operands must both be K-major (wgmma has no transposed FP8 form)}}
  %s = hopper.wgmma.ss %a, %b k 64 boxes 8192, 0 {b_mn_major} : f8E4M3FN -> !hopper.frag<64x64xf32>
  return
}

// -----

// (FP8 attention takes e4m3 only)
func.func @trunc_to_e5m2(%s: !hopper.frag<64x64xf32>) {
  // expected-error @below {{fragment element type must be f32, bf16, f16 or f8E4M3FN, not 'f8E5M2'}}
  %p = hopper.trunc %s : !hopper.frag<64x64xf32> to !hopper.frag<64x64xf8E5M2>
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 8192, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_rows(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{rows must be a multiple of 16 up to 256 (groups of 16 keys; a transposed row is one or two 128-byte swizzle boxes), got 72}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 72 cols 128 : !v, !vt
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_cols(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{cols must be a multiple of 32 (the transposer's units), got 80}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 80 : !v, !vt
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_unit(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{unit_keys must be a power of two from 16 to 128 that divides rows (128), got 96}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 unit_keys 96 : !v, !vt
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_unit_rows(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{unit_keys must be a power of two from 16 to 128 that divides rows (128), got 256}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 unit_keys 256 : !v, !vt
  return
}

// -----

// (a unit of 64 keys would straddle the 224-key tile's two boxes)
!v = !hopper.ring<stages = 2, stage_bytes = 28672, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 32768, data = 98304, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_unit_straddles(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{unit_keys must be a power of two from 16 to 128 that divides rows (224), got 64}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 224 cols 128 unit_keys 64 : !v, !vt
  return
}

// -----

// (the destination holds whole boxes of 128 keys: 2 x 128 x 128 bytes)
!v = !hopper.ring<stages = 2, stage_bytes = 28672, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 28672, data = 98304, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_wide_fit(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{a 224x128 tile does not fit the rings' stages (28672 and 28672 bytes)}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 224 cols 128 unit_keys 32 : !v, !vt
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 32768, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 98304, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_fit(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{a 128x256 tile does not fit the rings' stages (32768 and 16384 bytes)}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 256 : !v, !vt
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 3, stage_bytes = 16384, data = 65536, full = 229408, empty = 229432, arrivals = 256, cluster = 1>
func.func @transpose_stages(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{source and destination rings must have as many stages (one slot names both), got 2 and 3}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 : !v, !vt
  return
}

// -----

func.func @rs_k256(%p: !hopper.frag<64x256xf8E4M3FN>, %d: i64, %o: !hopper.frag<64x64xf32>) {
  // expected-error @below {{an 8-bit A with K 256 needs b_box_bytes (B's K-major rows are 128-byte boxes; K spans more than one)}}
  %o1 = hopper.wgmma.rs %p, %d, %o : !hopper.frag<64x256xf8E4M3FN>, !hopper.frag<64x64xf32>
  return
}

// -----

func.func @rs_box_small(%p: !hopper.frag<64x224xf8E4M3FN>, %d: i64, %o: !hopper.frag<64x128xf32>) {
  // expected-error @below {{b_box_bytes must be a multiple of 1024 (a swizzle atom) of at least N rows of 128 bytes (16384), got 8192}}
  %o1 = hopper.wgmma.rs %p, %d, %o b_box_bytes 8192 : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
  return
}

// -----

func.func @rs_box_unaligned(%p: !hopper.frag<64x224xf8E4M3FN>, %d: i64, %o: !hopper.frag<64x128xf32>) {
  // expected-error @below {{b_box_bytes must be a multiple of 1024 (a swizzle atom) of at least N rows of 128 bytes (16384), got 16400}}
  %o1 = hopper.wgmma.rs %p, %d, %o b_box_bytes 16400 : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
  return
}

// -----

func.func @rs_box_16bit(%p: !hopper.frag<64x64xbf16>, %d: i64, %o: !hopper.frag<64x128xf32>) {
  // expected-error @below {{b_box_bytes is an 8-bit A's (a 16-bit A's B is N-major: its k-steps advance along the rows)}}
  %o1 = hopper.wgmma.rs %p, %d, %o b_box_bytes 16384 : !hopper.frag<64x64xbf16>, !hopper.frag<64x128xf32>
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 2>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
func.func @transpose_cluster(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  // expected-error @below {{transposes rings of one CTA (cluster = 1)}}
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 : !v, !vt
  return
}
