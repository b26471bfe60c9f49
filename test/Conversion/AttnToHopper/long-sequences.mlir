// attn-hopper-config min-seqlen-q: the table's entries for calls with at
// least that many query rows (longSequenceFrom: head dim 64 causal takes
// 192 rows from 6144), recorded as hopper_config's min_seqlen_q and carried
// into the launch facts; everywhere else, and below the entry's length, the
// configuration of any length, without the key.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=6144 | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=16384 | FileCheck %s --check-prefix=LONGER
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=6143 | FileCheck %s --check-prefix=SHORT
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="min-seqlen-q=6144 block-m=128" | FileCheck %s --check-prefix=ROWS
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=6144 --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=FACTS

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

// The option's length is what the facts record (a kernel chosen for 16k
// and longer).
// LONGER-LABEL: func @d64_causal(
// LONGER: #attn.hopper_config<block_m = 192, {{.*}}, min_seqlen_q = 16384>

// Below the entry's length: the configuration of any length.
// SHORT-LABEL: func @d64_causal(
// SHORT: #attn.hopper_config<block_m = 128, block_n = 128, stages = 4, {{.*}}pingpong = true, tma_store = true>}

// Rows given: the option's, and the length recorded beside them.
// ROWS-LABEL: func @d64_causal(
// ROWS: #attn.hopper_config<block_m = 128, block_n = 128, stages = 4, {{.*}}tma_store = true, min_seqlen_q = 6144>

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
