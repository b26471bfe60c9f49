// attn-hopper-config min-seqlen-q: the table's entries for calls with at
// least that many query rows (longSequenceFrom: head dim 64 causal takes
// 192 rows from 6144, FP8 head dim 128 full or causal 192-key tiles from
// 8192), recorded as hopper_config's min_seqlen_q and carried
// into the launch facts; everywhere else, and below the entry's length, the
// configuration of any length, without the key.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=6144 | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=16384 | FileCheck %s --check-prefix=LONGER
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=6143 | FileCheck %s --check-prefix=SHORT
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="min-seqlen-q=6144 block-m=128" | FileCheck %s --check-prefix=ROWS
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=6144 --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=FACTS
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config="min-seqlen-q=6144 decode=true" 2>/dev/null | FileCheck %s --check-prefix=DECODE

// CHECK-LABEL: func @d64_causal(
// CHECK: #attn.hopper_config<block_m = 192, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = false, tma_store = true, min_seqlen_q = 6144>
// CHECK-LABEL: func @d64_causal_f16(
// CHECK: #attn.hopper_config<block_m = 192, {{.*}}, min_seqlen_q = 6144>
// CHECK-LABEL: func @d64(
// CHECK: #attn.hopper_config<block_m = 192, {{.*}}tma_store = true>}
// CHECK-LABEL: func @d64_window(
// CHECK: #attn.hopper_config<block_m = 128, {{.*}}tma_store = true>}
// CHECK-LABEL: func @d128_causal(
// CHECK: #attn.hopper_config<block_m = 128, {{.*}}tma_store = true>}
// Softcap takes the entry as without, a packed batch too (its launcher's
// length the batch's mean; one Q buffer: two spill); FP8 (192 rows at
// every length already) and the backward have none.
// CHECK-LABEL: func @d64_causal_softcap(
// CHECK: #attn.hopper_config<block_m = 192, {{.*}}, min_seqlen_q = 6144>
// CHECK-LABEL: func @d64_causal_varlen(
// CHECK: #attn.hopper_config<block_m = 192, {{.*}}q_buffers = 1, {{.*}}tma_store = true, min_seqlen_q = 6144>}
// CHECK-LABEL: func @d64_causal_fp8(
// CHECK: #attn.hopper_config<block_m = 192, {{.*}}tma_store = true>}
// CHECK-LABEL: func @d64_causal_grad(
// CHECK: #attn.hopper_config<block_m = 128, {{.*}}tma_store = true>}
// FP8 head dim 128's entry starts at 8192: none at 6144.
// CHECK-LABEL: func @d128_fp8(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, {{.*}}tma_store = true>}
// CHECK-LABEL: func @d128_causal_fp8(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, {{.*}}tma_store = true>}
// CHECK-LABEL: func @d128_window_fp8(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, {{.*}}tma_store = true>}

// The decoding kernel has none either (its option beside this one; the
// packed batch and FP8 are refused with it, hence `not`).
// DECODE-LABEL: func @d64_causal(
// DECODE: #attn.hopper_config<block_m = 64, {{.*}}pack_gqa = true{{.*}}>}
// DECODE-NOT: min_seqlen_q

// The option's length is what the facts record (a kernel chosen for 16k
// and longer).
// LONGER-LABEL: func @d64_causal(
// LONGER: #attn.hopper_config<block_m = 192, {{.*}}, min_seqlen_q = 16384>
// From 8192, FP8 head dim 128 full or causal: 192 keys, two stages, two
// Q buffers; a window keeps the kernel of any length.
// LONGER-LABEL: func @d128_fp8(
// LONGER: #attn.hopper_config<block_m = 128, block_n = 192, stages = 2, persistent = true, q_buffers = 2, {{.*}}min_seqlen_q = 16384>
// LONGER-LABEL: func @d128_causal_fp8(
// LONGER: #attn.hopper_config<block_m = 128, block_n = 192, stages = 2, persistent = true, q_buffers = 2, {{.*}}min_seqlen_q = 16384>
// LONGER-LABEL: func @d128_window_fp8(
// LONGER: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, {{.*}}tma_store = true>}

// Below the entry's length: the configuration of any length.
// SHORT-LABEL: func @d64_causal(
// SHORT: #attn.hopper_config<block_m = 128, block_n = 128, stages = 4, {{.*}}pingpong = true, tma_store = true>}

// Rows given: the option's, and the length recorded beside them; a packed
// batch's 128-row kernel keeps its two Q buffers (one only at 192 rows).
// ROWS-LABEL: func @d64_causal(
// ROWS: #attn.hopper_config<block_m = 128, block_n = 128, stages = 4, {{.*}}tma_store = true, min_seqlen_q = 6144>
// ROWS-LABEL: func @d64_causal_varlen(
// ROWS: #attn.hopper_config<block_m = 128, {{.*}}q_buffers = 2, {{.*}}min_seqlen_q = 6144>

// FACTS-LABEL: gpu.func @d64_causal_kernel(
// FACTS-SAME: block_m = 192
// FACTS-SAME: min_seqlen_q = 6144
// FACTS-LABEL: gpu.func @d64_window_kernel(
// FACTS-NOT: min_seqlen_q
// FACTS-LABEL: gpu.func @d128_causal_kernel(

func.func @d64_causal(%q: memref<1x2x?x64xbf16>, %o: memref<1x2x?x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>) outs(%o : memref<1x2x?x64xbf16>) causal
  return
}

// -----

func.func @d64_causal_f16(%q: memref<1x2x?x64xf16>, %o: memref<1x2x?x64xf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>) outs(%o : memref<1x2x?x64xf16>) causal
  return
}

// -----

func.func @d64(%q: memref<1x2x?x64xbf16>, %o: memref<1x2x?x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>) outs(%o : memref<1x2x?x64xbf16>)
  return
}

// -----

func.func @d64_window(%q: memref<1x2x?x64xbf16>, %o: memref<1x2x?x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>) outs(%o : memref<1x2x?x64xbf16>) window(256, 0)
  return
}

// -----

func.func @d128_causal(%q: memref<1x2x?x128xbf16>, %o: memref<1x2x?x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>) outs(%o : memref<1x2x?x128xbf16>) causal
  return
}

// -----

func.func @d64_causal_softcap(%q: memref<1x2x?x64xbf16>, %o: memref<1x2x?x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>) outs(%o : memref<1x2x?x64xbf16>) causal softcap(30.0)
  return
}

// -----

func.func @d64_causal_varlen(%q: memref<?x2x64xbf16>, %cq: memref<?xi32>, %o: memref<?x2x64xbf16>, %lse: memref<2x?xf32>) {
  attn.flash_attention_varlen ins(%q, %q, %q : memref<?x2x64xbf16>, memref<?x2x64xbf16>, memref<?x2x64xbf16>)
      seqlens(%cq, %cq : memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x2x64xbf16>, memref<2x?xf32>) causal
  return
}

// -----

func.func @d64_causal_fp8(%q: memref<?x2x?x64xf8E4M3FN>, %o: memref<?x2x?x64xbf16>, %lse: memref<?x2x?xf32>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x2x?x64xf8E4M3FN>, memref<?x2x?x64xf8E4M3FN>, memref<?x2x?x64xf8E4M3FN>)
    outs(%o, %lse : memref<?x2x?x64xbf16>, memref<?x2x?xf32>) causal
  return
}

// -----

func.func @d64_causal_grad(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
    %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) causal
  return
}

// -----

func.func @d128_fp8(%q: memref<?x2x?x128xf8E4M3FN>, %o: memref<?x2x?x128xbf16>, %lse: memref<?x2x?xf32>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>)
    outs(%o, %lse : memref<?x2x?x128xbf16>, memref<?x2x?xf32>)
  return
}

// -----

func.func @d128_causal_fp8(%q: memref<?x2x?x128xf8E4M3FN>, %o: memref<?x2x?x128xbf16>, %lse: memref<?x2x?xf32>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>)
    outs(%o, %lse : memref<?x2x?x128xbf16>, memref<?x2x?xf32>) causal
  return
}

// -----

func.func @d128_window_fp8(%q: memref<?x2x?x128xf8E4M3FN>, %o: memref<?x2x?x128xbf16>, %lse: memref<?x2x?xf32>) {
  attn.flash_attention ins(%q, %q, %q : memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>)
    outs(%o, %lse : memref<?x2x?x128xbf16>, memref<?x2x?xf32>) window(256, 0)
  return
}
