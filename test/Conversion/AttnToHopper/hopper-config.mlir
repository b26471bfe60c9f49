// attn-hopper-config: the table's choice per head dim and mask, the
// options that override it, and every option it refuses, with the reason.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="persistent=off" | FileCheck %s --check-prefix=TILES
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="persistent=on kv-multicast=on" | FileCheck %s --check-prefix=PERSIST
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="kv-multicast=off q-buffers=1 lazy-rescale=off pingpong=false tma-store=false rescale-threshold=4.5" | FileCheck %s --check-prefix=OFF
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 stages=2 lazy-rescale=on" | FileCheck %s --check-prefix=SIZES

// The table (bench/NOTES.md, Defaults): 192 query rows only at head dim 64
// with a full mask (three consumer warpgroups, so no ping-pong); a 4-deep
// ring at head dim 64 with 128 rows; 64-row kv tiles at head dim 256;
// persistent CTAs with two Q buffers at head dim 64 and 128; lazy
// rescaling above head dim 64; K/V multicast for persistent kernels with a
// full mask at head dim 128 and 256.
// CHECK-LABEL: func @d64(
// CHECK: attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>
// CHECK-LABEL: func @d64_causal(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 4, persistent = true, q_buffers = 2, lazy_rescale = false, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>
// CHECK-LABEL: func @d128(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 2, pingpong = true, tma_store = true>
// CHECK-LABEL: func @d128_causal(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>
// CHECK-LABEL: func @d128_window(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>
// CHECK-LABEL: func @d256(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 64, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>
// CHECK-LABEL: func @d256_causal(
// CHECK: #attn.hopper_config<block_m = 128, block_n = 64, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>

// One CTA per tile: one Q buffer (a second one only serves the next tile)
// and no multicast (auto takes it for persistent kernels only).
// TILES-LABEL: func @d64(
// TILES: persistent = false, q_buffers = 1, {{.*}} cluster_m = 1,
// TILES-LABEL: func @d128(
// TILES: persistent = false, q_buffers = 1, {{.*}} cluster_m = 1,

// Persistent at head dim 256: O is staged in Q's buffer, so auto takes one
// Q buffer; multicast "on" applies where it can: a full mask at head dim
// 128 and 256, not head dim 64 (its boxes do not split in two) nor a mask.
// PERSIST-LABEL: func @d64(
// PERSIST: persistent = true, q_buffers = 2, {{.*}} cluster_m = 1,
// PERSIST-LABEL: func @d128(
// PERSIST: persistent = true, q_buffers = 2, {{.*}} cluster_m = 2,
// PERSIST-LABEL: func @d128_causal(
// PERSIST: persistent = true, q_buffers = 2, {{.*}} cluster_m = 1,
// PERSIST-LABEL: func @d128_window(
// PERSIST: persistent = true, q_buffers = 2, {{.*}} cluster_m = 1,
// PERSIST-LABEL: func @d256(
// PERSIST: block_n = 64, stages = 2, persistent = true, q_buffers = 1, {{.*}} cluster_m = 2,

// OFF-LABEL: func @d128(
// OFF: #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 1, lazy_rescale = false, rescale_threshold = 4.500000e+00, cluster_m = 1, pingpong = false, tma_store = false>

// Given tile sizes replace the table's; the ring depth then follows
// block-m (4 stages at head dim 64 only with 128-row tiles).
// SIZES-LABEL: func @d64(
// SIZES: #attn.hopper_config<block_m = 128, block_n = 64, stages = 2, {{.*}} lazy_rescale = true, {{.*}} pingpong = true,
// SIZES-LABEL: func @d256(
// SIZES: #attn.hopper_config<block_m = 128, block_n = 64, stages = 2,

// Options out of range, each refused where it enters the compiler.
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-m=-128 2>&1 | FileCheck %s --check-prefix=NEGM
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-n=1025 2>&1 | FileCheck %s --check-prefix=BIGN
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=stages=-1 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=stages=140737488355328 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=q-buffers=3 2>&1 | FileCheck %s --check-prefix=QBUF
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=rescale-threshold=16 2>&1 | FileCheck %s --check-prefix=TAU
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=rescale-threshold=-1 2>&1 | FileCheck %s --check-prefix=TAU
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=persistent=maybe 2>&1 | FileCheck %s --check-prefix=PERSISTV
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=lazy-rescale=sometimes 2>&1 | FileCheck %s --check-prefix=LAZYV
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=kv-multicast=sometimes 2>&1 | FileCheck %s --check-prefix=MCASTV
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=-1 2>&1 | FileCheck %s --check-prefix=MINQ
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=min-seqlen-q=2147483648 2>&1 | FileCheck %s --check-prefix=MINQ
// NEGM: error: attn-hopper-config: block-m must be 0 (per head dim) to 1024, got -128
// BIGN: error: attn-hopper-config: block-n must be 0 (per head dim) to 1024, got 1025
// STAGES: error: attn-hopper-config: stages must be 0 (per head dim) to 8, got -1
// HUGE: error: attn-hopper-config: stages must be 0 (per head dim) to 8, got 140737488355328
// QBUF: error: attn-hopper-config: q-buffers must be 0 (auto), 1 or 2, got 3
// TAU: error: attn-hopper-config: rescale-threshold must be 0 to 15 (log2 units), got {{-?[0-9]+}}
// PERSISTV: for the --persistent option: Cannot find option named 'maybe'!
// LAZYV: for the --lazy-rescale option: Cannot find option named 'sometimes'!
// MCASTV: for the --kv-multicast option: Cannot find option named 'sometimes'!
// MINQ: error: attn-hopper-config: min-seqlen-q must be 0 (any length) to 2147483647, got {{-1|2147483648}}

// Combinations the kernel cannot take, refused at the attention they do
// not fit (block-m 192 and two Q buffers with persistent CTAs fit head dim
// 64, not 256).
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-m=64 2>&1 | FileCheck %s --check-prefix=BM
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-m=192 2>&1 | FileCheck %s --check-prefix=BM192
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-n=200 2>&1 | FileCheck %s --check-prefix=BN
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-n=256 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config="block-n=80 stages=3" 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=stages=1 2>&1 | FileCheck %s --check-prefix=SHALLOW
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config="persistent=off q-buffers=2" 2>&1 | FileCheck %s --check-prefix=Q2TILES
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config="persistent=on q-buffers=2" 2>&1 | FileCheck %s --check-prefix=Q2D256
// BM: error: cannot generate the Hopper kernel: unsupported block-m 64 (the Hopper kernel uses 128 or 192: two or three consumer warpgroups of 64 rows; 64, one, in the decoding kernel)
// BM192: error: cannot generate the Hopper kernel: unsupported block-m 192 at head dim 128 (three consumer warpgroups have at most 160 registers a thread: too few for S and an O accumulator of head dim 128; block-m 192 takes head dim 64)
// BN: error: cannot generate the Hopper kernel: unsupported block-n 200 (must be a multiple of 16 up to 256)
// SMEM: error: cannot generate the Hopper kernel: unsupported tiles 128x256 with head dim 256 need 589904 bytes of shared memory, more than the 232448 a Hopper CTA has
// DEEP: error: cannot generate the Hopper kernel: unsupported tiles 128x80 with head dim 256 need {{[0-9]+}} bytes of shared memory, more than the 232448 a Hopper CTA has
// SHALLOW: error: cannot generate the Hopper kernel: unsupported stages 1 (need at least 2)
// Q2TILES: error: cannot generate the Hopper kernel: unsupported two Q buffers (they need a persistent kernel whose O staging buffer fits beside them)
// Q2D256: error: cannot generate the Hopper kernel: unsupported two Q buffers (they need a persistent kernel whose O staging buffer fits beside them)

// The tensor form has no strides to check yet: bufferize first.
// RUN: not fa3-opt %S/Inputs/tensor-form.mlir --attn-hopper-config 2>&1 | FileCheck %s --check-prefix=TENSOR
// TENSOR: error: 'attn.flash_attention' op attn-hopper-config needs the memref form: run --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" first, or --attn-hopper-pipeline, which bufferizes

func.func @d64(%q: memref<1x2x?x64xbf16>, %o: memref<1x2x?x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>) outs(%o : memref<1x2x?x64xbf16>)
  return
}

// -----

func.func @d64_causal(%q: memref<1x2x?x64xbf16>, %o: memref<1x2x?x64xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>, memref<1x2x?x64xbf16>) outs(%o : memref<1x2x?x64xbf16>) causal
  return
}

// -----

func.func @d128(%q: memref<1x2x?x128xbf16>, %o: memref<1x2x?x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>) outs(%o : memref<1x2x?x128xbf16>)
  return
}

// -----

func.func @d128_causal(%q: memref<1x2x?x128xbf16>, %o: memref<1x2x?x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>) outs(%o : memref<1x2x?x128xbf16>) causal
  return
}

// -----

func.func @d128_window(%q: memref<1x2x?x128xbf16>, %o: memref<1x2x?x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>, memref<1x2x?x128xbf16>) outs(%o : memref<1x2x?x128xbf16>) window(256, -1)
  return
}

// -----

func.func @d256(%q: memref<1x2x?x256xf16>, %o: memref<1x2x?x256xf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x256xf16>, memref<1x2x?x256xf16>, memref<1x2x?x256xf16>) outs(%o : memref<1x2x?x256xf16>)
  return
}

// -----

func.func @d256_causal(%q: memref<1x2x?x256xf16>, %o: memref<1x2x?x256xf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x?x256xf16>, memref<1x2x?x256xf16>, memref<1x2x?x256xf16>) outs(%o : memref<1x2x?x256xf16>) causal
  return
}
