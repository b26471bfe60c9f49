// Round trip: print, re-parse, print again; both forms, every attribute, and
// defaults (scale, window, softcap) elided.
// RUN: fa3-opt %s | fa3-opt | FileCheck %s
// RUN: fa3-opt %s --mlir-print-op-generic | fa3-opt | FileCheck %s

// CHECK-LABEL: func @tensor_form
func.func @tensor_form(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x2x256x64xbf16>,
                       %v: tensor<2x2x256x64xbf16>, %o: tensor<2x8x128x64xbf16>,
                       %l: tensor<2x8x128xf32>) -> (tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>) {
  // CHECK: %{{.*}}:2 = attn.flash_attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x128x64xbf16>, tensor<2x2x256x64xbf16>, tensor<2x2x256x64xbf16>) outs(%{{.*}}, %{{.*}} : tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>) scale(1.250000e-01) causal window(128, 0) softcap(3.000000e+01) -> tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
  %r:2 = attn.flash_attention ins(%q, %k, %v : tensor<2x8x128x64xbf16>, tensor<2x2x256x64xbf16>, tensor<2x2x256x64xbf16>)
           outs(%o, %l : tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>)
           scale(0.125) causal window(128, 0) softcap(30.0) -> tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
  return %r#0, %r#1 : tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
}

// CHECK-LABEL: func @defaults_elided
func.func @defaults_elided(%q: tensor<1x4x?x128xf16>, %k: tensor<1x4x?x128xf16>,
                           %v: tensor<1x4x?x128xf16>, %o: tensor<1x4x?x128xf32>) -> tensor<1x4x?x128xf32> {
  // CHECK: attn.flash_attention ins({{.*}}) outs(%{{.*}} : tensor<1x4x?x128xf32>) -> tensor<1x4x?x128xf32>
  %r = attn.flash_attention ins(%q, %k, %v : tensor<1x4x?x128xf16>, tensor<1x4x?x128xf16>, tensor<1x4x?x128xf16>)
         outs(%o : tensor<1x4x?x128xf32>) window(-1, -1) softcap(0.0) -> tensor<1x4x?x128xf32>
  return %r : tensor<1x4x?x128xf32>
}

// BSHD storage described by strides: [B, S, H, D] memory viewed as [B, H, S, D].
// CHECK-LABEL: func @memref_form_bshd
func.func @memref_form_bshd(%q: memref<2x4x100x64xbf16, strided<[25600, 64, 256, 1]>>,
                            %k: memref<2x1x300x64xbf16, strided<[19200, 64, 64, 1]>>,
                            %v: memref<2x1x300x32xbf16, strided<[9600, 32, 32, 1]>>,
                            %o: memref<2x4x100x32xbf16>, %l: memref<2x4x100xf32>) {
  // CHECK: attn.flash_attention ins({{.*}}) outs(%{{.*}}, %{{.*}} : memref<2x4x100x32xbf16>, memref<2x4x100xf32>) window(256, -1){{$}}
  attn.flash_attention ins(%q, %k, %v : memref<2x4x100x64xbf16, strided<[25600, 64, 256, 1]>>, memref<2x1x300x64xbf16, strided<[19200, 64, 64, 1]>>, memref<2x1x300x32xbf16, strided<[9600, 32, 32, 1]>>)
    outs(%o, %l : memref<2x4x100x32xbf16>, memref<2x4x100xf32>) window(256, -1)
  return
}

// FP8 with descales (FA3's [B, Hkv] for q, per-tensor k, per kv head v; and
// the block form).
// CHECK-LABEL: func @fp8_descales
func.func @fp8_descales(%q: memref<2x8x300x64xf8E4M3FN>, %k: memref<2x2x300x64xf8E4M3FN>,
                        %qd: memref<2x2xf32>, %kd: memref<f32>, %vd: memref<2x2xf32>,
                        %qb: memref<2x8x3xf32>, %kb: memref<2x2x3xf32>,
                        %o: memref<2x8x300x64xbf16>) {
  // CHECK: attn.flash_attention ins({{.*}}) descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x2xf32>, memref<f32>, memref<2x2xf32>) outs(%{{.*}} : memref<2x8x300x64xbf16>) causal
  attn.flash_attention ins(%q, %k, %k : memref<2x8x300x64xf8E4M3FN>, memref<2x2x300x64xf8E4M3FN>, memref<2x2x300x64xf8E4M3FN>)
    descale(%qd, %kd, %vd : memref<2x2xf32>, memref<f32>, memref<2x2xf32>) outs(%o : memref<2x8x300x64xbf16>) causal
  // CHECK: descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x8x3xf32>, memref<2x2x3xf32>, memref<2x2xf32>)
  attn.flash_attention ins(%q, %k, %k : memref<2x8x300x64xf8E4M3FN>, memref<2x2x300x64xf8E4M3FN>, memref<2x2x300x64xf8E4M3FN>)
    descale(%qb, %kb, %vd : memref<2x8x3xf32>, memref<2x2x3xf32>, memref<2x2xf32>) outs(%o : memref<2x8x300x64xbf16>)
  return
}

// No query rows: q's block descale has no blocks.
// CHECK-LABEL: func @fp8_no_rows
func.func @fp8_no_rows(%q: memref<1x2x0x64xf8E4M3FN>, %k: memref<1x2x9x64xf8E4M3FN>,
                       %qb: memref<1x2x0xf32>, %kb: memref<1x2x1xf32>, %vd: memref<f32>,
                       %o: memref<1x2x0x64xbf16>) {
  // CHECK: descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<1x2x0xf32>, memref<1x2x1xf32>, memref<f32>)
  attn.flash_attention ins(%q, %k, %k : memref<1x2x0x64xf8E4M3FN>, memref<1x2x9x64xf8E4M3FN>, memref<1x2x9x64xf8E4M3FN>)
    descale(%qb, %kb, %vd : memref<1x2x0xf32>, memref<1x2x1xf32>, memref<f32>) outs(%o : memref<1x2x0x64xbf16>)
  return
}

// CHECK-LABEL: func @fp8_inputs
func.func @fp8_inputs(%q: memref<1x2x64x64xf8E4M3FN>, %k: memref<1x2x64x64xf8E4M3FN>,
                      %v: memref<1x2x64x64xf8E4M3FN>, %o: memref<1x2x64x64xbf16>) {
  // CHECK: attn.flash_attention ins({{.*}} : memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>)
  attn.flash_attention ins(%q, %k, %v : memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>)
    outs(%o : memref<1x2x64x64xbf16>)
  return
}

// CHECK-LABEL: func @tile_ops
func.func @tile_ops(%q: memref<1x2x100x64xf16>, %k: memref<1x1x90x64xf16>, %v: memref<1x1x90x64xf16>,
                    %o: memref<1x2x100x64xf16>, %lse: memref<1x2x100xf32>, %i: index) {
  %m = memref.alloca() : memref<64xf32>
  %l = memref.alloca() : memref<64xf32>
  %acc = memref.alloca() : memref<64x64xf32>
  // CHECK: attn.tile_update %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] rows %{{.*}} cols %{{.*}} state(%{{.*}}, %{{.*}}, %{{.*}}) masked {block_m = 64 : i64, block_n = 32 : i64, rescale_threshold = 8.000000e+00 : f64, scale_log2
  attn.tile_update %q, %k, %v [%i, %i, %i] rows %i cols %i state(%m, %l, %acc) masked
    {block_m = 64 : i64, block_n = 32 : i64, rescale_threshold = 8.0 : f64, scale_log2 = 0.18 : f32, softcap = 0.0 : f32, window = array<i64: -1, 0>}
    : memref<1x2x100x64xf16>, memref<1x1x90x64xf16>, memref<1x1x90x64xf16>, memref<64xf32>, memref<64xf32>, memref<64x64xf32>
  // CHECK: attn.tile_finalize state(%{{.*}}, %{{.*}}, %{{.*}}) to %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] rows %{{.*}} {block_m = 64 : i64}
  attn.tile_finalize state(%m, %l, %acc) to %o, %lse [%i, %i] rows %i {block_m = 64 : i64}
    : memref<64xf32>, memref<64xf32>, memref<64x64xf32>, memref<1x2x100x64xf16>, memref<1x2x100xf32>
  return
}

// The Hopper configuration attn-hopper-config records, with the schedule
// that carries it (the verifier keeps their tiles equal).
// CHECK-LABEL: func @hopper_config
func.func @hopper_config(%q: memref<1x2x?x128xbf16>, %o: memref<1x2x?x128xbf16>, %i: index) {
  // CHECK: attn.flash_attention {{.*}} {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 64, stages = 3, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 4.500000e+00, cluster_m = 2, pingpong = true, tma_store = false>}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>) outs(%o : memref<1x2x?x128xbf16>)
    {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 64, stages = 3, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 4.5, cluster_m = 2, pingpong = true, tma_store = false>}
  // Parameters in any order.
  // CHECK: attn.kv_range {{.*}} {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>, block_m = 192 : i64, block_n = 128 : i64
  %lo, %hi, %ilo, %ihi = attn.kv_range rows %i seq(%i, %i) {attn.hopper_config = #attn.hopper_config<tma_store = true, pingpong = false, cluster_m = 1, rescale_threshold = 0.0, lazy_rescale = true, q_buffers = 1, persistent = false, stages = 2, block_n = 128, block_m = 192>, block_m = 192 : i64, block_n = 128 : i64, window = array<i64: -1, -1>}
  return
}

// attn.quantize: both forms, with and without rotation and block.
// CHECK-LABEL: func @quantize_forms
func.func @quantize_forms(%x: memref<2x4x100x64xbf16, strided<[25600, 64, 256, 1]>>, %s: memref<64xf32>,
                          %y: memref<2x4x100x64xf8E4M3FN>, %d: memref<2x4x1xf32>,
                          %t: tensor<1x2x?x128xf16>, %ty: tensor<1x2x?x128xf8E4M3FN>, %td: tensor<1x2xf32>) -> (tensor<1x2x?x128xf8E4M3FN>, tensor<1x2xf32>) {
  // CHECK: attn.quantize ins(%{{.*}} : memref<2x4x100x64xbf16, strided<[25600, 64, 256, 1]>>) rotate(%{{.*}} : memref<64xf32>) outs(%{{.*}}, %{{.*}} : memref<2x4x100x64xf8E4M3FN>, memref<2x4x1xf32>) block(128){{$}}
  attn.quantize ins(%x : memref<2x4x100x64xbf16, strided<[25600, 64, 256, 1]>>) rotate(%s : memref<64xf32>) outs(%y, %d : memref<2x4x100x64xf8E4M3FN>, memref<2x4x1xf32>) block(128)
  // CHECK: %{{.*}}:2 = attn.quantize ins(%{{.*}} : tensor<1x2x?x128xf16>) outs(%{{.*}}, %{{.*}} : tensor<1x2x?x128xf8E4M3FN>, tensor<1x2xf32>) -> tensor<1x2x?x128xf8E4M3FN>, tensor<1x2xf32>
  %r:2 = attn.quantize ins(%t : tensor<1x2x?x128xf16>) outs(%ty, %td : tensor<1x2x?x128xf8E4M3FN>, tensor<1x2xf32>) -> tensor<1x2x?x128xf8E4M3FN>, tensor<1x2xf32>
  return %r#0, %r#1 : tensor<1x2x?x128xf8E4M3FN>, tensor<1x2xf32>
}
