// Block sizes the kernel cannot use, and untiled input.
// RUN: not fa3-opt %s --attn-tile="block-m=64" --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=BM
// RUN: not fa3-opt %s --attn-tile="block-m=128 block-n=200" --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=BN
// RUN: not fa3-opt %s --attn-tile="block-m=128 block-n=256" --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not fa3-opt %s --attn-tile="block-m=192 block-n=64" --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=BM192
// RUN: not fa3-opt %s --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=UNTILED
// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=persistent=maybe 2>&1 | FileCheck %s --check-prefix=PERSIST
// RUN: not fa3-opt %s --attn-tile="block-m=128 block-n=64" --convert-attn-to-hopper=stages=-1 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not fa3-opt %s --attn-tile="block-m=128 block-n=80" --convert-attn-to-hopper=stages=3 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=lazy-rescale=sometimes 2>&1 | FileCheck %s --check-prefix=LAZY
// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=rescale-threshold=16 2>&1 | FileCheck %s --check-prefix=TAU
// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=rescale-threshold=-1 2>&1 | FileCheck %s --check-prefix=TAU

// BM: unsupported block-m 64 (the Hopper kernel uses 128 or 192: two or three consumer warpgroups of 64 rows)
// BN: unsupported block-n 200 (must be a multiple of 16 up to 256)
// SMEM: unsupported tiles 128x256 with head dim 256 need 589904 bytes of shared memory, more than the 232448 a Hopper CTA has
// BM192: unsupported block-m 192 at head dim 256 (three consumer warpgroups have 160 registers a thread: too few for S and an O accumulator of head dim 256; block-m 192 takes head dim 64)
// UNTILED: convert-attn-to-hopper needs the tiled form: run attn-tile first
// PERSIST: for the --persistent option: Cannot find option named 'maybe'!
// STAGES: convert-attn-to-hopper: stages must be 0 (per head dim) to 8, got -1
// LAZY: for the --lazy-rescale option: Cannot find option named 'sometimes'!
// TAU: convert-attn-to-hopper: rescale-threshold must be 0 to 15 (log2 units), got {{-?[0-9]+}}
// DEEP: unsupported tiles 128x80 with head dim 256 need {{[0-9]+}} bytes of shared memory, more than the 232448 a Hopper CTA has
func.func @attn(%q: memref<1x2x64x256xbf16>, %o: memref<1x2x64x256xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x256xbf16>, memref<1x2x64x256xbf16>, memref<1x2x64x256xbf16>) outs(%o : memref<1x2x64x256xbf16>)
  return
}

// RUN: not fa3-opt %S/Inputs/other-work.mlir --attn-tile=block-m=128 --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=LOST
// LOST: error: 'memref.store' op would be lost: convert-attn-to-hopper replaces @mixed by its attention kernels; keep other work out of that function

// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=kv-multicast=sometimes 2>&1 | FileCheck %s --check-prefix=MCAST
// MCAST: for the --kv-multicast option: Cannot find option named 'sometimes'!

// Values that used to hang or abort: a ring depth of 2^47 (memory grew
// without bound), pipeline options pasted into text, an empty chip.
// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=stages=140737488355328 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: convert-attn-to-hopper: stages must be 0 (per head dim) to 8, got 140737488355328
// RUN: not fa3-opt %s --attn-tile=block-m=128 --convert-attn-to-hopper=q-buffers=3 2>&1 | FileCheck %s --check-prefix=QBUF
// QBUF: convert-attn-to-hopper: q-buffers must be 0 (auto), 1 or 2, got 3
// RUN: not fa3-opt %s --attn-tile=block-m=-128 2>&1 | FileCheck %s --check-prefix=NEGM
// NEGM: attn-tile: block-m must be 0 (per head dim) to 1024, got -128
