// A configuration of two CTAs a SM (hopper_config ctas_per_sm = 2, which
// attn-hopper-config chooses for the decoding kernel): the kernel is built
// for it (nvvm.minctasm 2, the consumers' registers of a CTA's 128 a
// thread at launch, the launch facts' ctas_per_sm), and refused where a
// CTA's half of the SM cannot hold it, and by the backward.
// RUN: fa3-opt %s --split-input-file --attn-tile --convert-attn-to-hopper --verify-diagnostics | FileCheck %s

// CHECK: gpu.func @attn_kernel(
// CHECK-SAME: ctas_per_sm = 2
// CHECK-SAME: dynamic_smem = 114800
// CHECK-SAME: nvvm.minctasm = 2 : i32
// CHECK: hopper.warp_specialize producer regs 56 {
// CHECK: } consumers(%{{.*}} of 1) regs 200 {
func.func @attn(%q: memref<?x8x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
      outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 64, stages = 3, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = false, tma_store = false, split_kv = true, pack_gqa = true, ctas_per_sm = 2>}
  return
}

// -----

// 128 rows are two consumer warpgroups: 80 registers a thread at launch
// (384 threads, two a SM) leave them 88 each beside the decoding
// producer's 56.
func.func @attn(%q: memref<?x8x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{two CTAs a SM with block-m 128 (384 threads then have 80 registers each at launch, 88 for a consumer thread: two CTAs a SM take one consumer warpgroup, block-m 64)}}
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
      outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 64, stages = 3, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = false, split_kv = true, pack_gqa = true, ctas_per_sm = 2>}
  return
}

// -----

// Three stages of 128 keys (208 KiB) are more than half an SM's shared memory.
func.func @attn(%q: memref<?x8x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{tiles 64x128 with head dim 128 need 213104 bytes of shared memory, more than the 115712 a Hopper CTA has two a SM (stages 3)}}
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
      outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 3, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = false, tma_store = false, split_kv = true, pack_gqa = true, ctas_per_sm = 2>}
  return
}

// -----

func.func @grad(%q: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>) {
  // expected-error @+1 {{unsupported ctas_per_sm 2 for the backward (one CTA a SM: its consumers hold dK and dV in 240 registers a thread)}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%q, %q, %q : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.0, cluster_m = 1, pingpong = false, tma_store = true, ctas_per_sm = 2>}
  return
}
