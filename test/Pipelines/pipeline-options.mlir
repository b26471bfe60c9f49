// The named pipelines take their options as values, never as pipeline text:
// hostile values are diagnostics (they used to abort with "internal
// pipeline is malformed" or crash in the NVVM target).
// RUN: not fa3-opt %s "--attn-hopper-pipeline=chip=''" 2>&1 | FileCheck %s --check-prefix=EMPTYCHIP
// RUN: not fa3-opt %s "--attn-hopper-pipeline=chip='sm_90a x'" 2>&1 | FileCheck %s --check-prefix=SPACECHIP
// RUN: not fa3-opt %s "--attn-hopper-pipeline=features='+ptx80}'" 2>&1 | FileCheck %s --check-prefix=FEATURES
// RUN: not fa3-opt %s "--attn-hopper-pipeline=features=+ptx80" 2>&1 | FileCheck %s --check-prefix=OLDPTX
// RUN: not fa3-opt %s "--attn-hopper-pipeline=format=bogus" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not fa3-opt %s "--attn-hopper-pipeline=persistent='on x'" 2>&1 | FileCheck %s --check-prefix=PERSIST
// RUN: not fa3-opt %s "--attn-hopper-pipeline=stages=140737488355328 format=none" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not fa3-opt %s "--attn-cpu-tiled-pipeline=block-n=-1" 2>&1 | FileCheck %s --check-prefix=BLOCKN
// RUN: not fa3-opt %s "--attn-cpu-tiled-pipeline=rescale-threshold=16" 2>&1 | FileCheck %s --check-prefix=TAU16
// RUN: not fa3-opt %s "--attn-cpu-tiled-pipeline=rescale-threshold=nan" 2>&1 | FileCheck %s --check-prefix=TAUNAN

// EMPTYCHIP: error: attn-hopper-pipeline: chip must be sm_90a (the kernel uses wgmma and setmaxnreg), got ''
// SPACECHIP: error: attn-hopper-pipeline: chip must be sm_90a (the kernel uses wgmma and setmaxnreg), got 'sm_90a x'
// FEATURES: error: attn-hopper-pipeline: features must be one PTX ISA version from +ptx81 to +ptx88 or +ptx90 (wgmma and TMA need 8.0, the backward's vector reductions 8.1), got '+ptx80}'
// OLDPTX: error: attn-hopper-pipeline: features must be one PTX ISA version {{.*}}, got '+ptx80'
// FORMAT: for the --format option: Cannot find option named 'bogus'!
// PERSIST: for the --persistent option: Cannot find option named 'on x'!
// STAGES: error: attn-hopper-config: stages must be 0 (per head dim) to 8, got 140737488355328
// BLOCKN: error: attn-tile: block-n must be 0 (default) to 1024, got -1
// TAU16: error: attn-tile: rescale-threshold must be 0 (exact) to 15 (log2 units), got 16
// TAUNAN: error: attn-tile: rescale-threshold must be 0 (exact) to 15 (log2 units), got nan

// RUN: not fa3-opt %s "--attn-hopper-pipeline=transpose-warps=2 format=none" 2>&1 | FileCheck %s --check-prefix=TWARPS
// TWARPS: error: attn-hopper-config: transpose-warps must be 0 (the table), 3 or 4, got 2

// RUN: not fa3-opt %s "--attn-hopper-pipeline=features=+ptx89" 2>&1 | FileCheck %s --check-prefix=PTX89
// RUN: not fa3-opt %s "--attn-hopper-pipeline=features=+ptx95" 2>&1 | FileCheck %s --check-prefix=PTX95
// PTX89: error: attn-hopper-pipeline: features must be one PTX ISA version {{.*}}, got '+ptx89'
// PTX95: error: attn-hopper-pipeline: features must be one PTX ISA version {{.*}}, got '+ptx95'

// A toolkit path with spaces is just a path; one that does not exist is
// an error (gpu-module-to-binary printed it and exited 0).
// RUN: mkdir -p "%t/a b" && fa3-opt %s "--attn-hopper-pipeline=toolkit='%t/a b' format=none" | FileCheck %s --check-prefix=TOOLKIT
// TOOLKIT: gpu.module @attn_kernels
// RUN: not fa3-opt %s "--attn-hopper-pipeline=toolkit=/nonexistent format=isa" 2>&1 | FileCheck %s --check-prefix=NOTOOLKIT
// NOTOOLKIT: error: attn-hopper-pipeline: toolkit '/nonexistent' is not a directory

// Pipelines nested under a function: they bufferize function boundaries
// and create gpu.modules, so they need the module (this used to abort:
// "Can't add pass 'OneShotBufferizePass' restricted to 'builtin.module'").
// RUN: not fa3-opt %s --pass-pipeline='builtin.module(func.func(attn-cpu-reference-pipeline))' 2>&1 | FileCheck %s --check-prefix=ANCHOR-REF
// RUN: not fa3-opt %s --pass-pipeline='builtin.module(func.func(attn-cpu-tiled-pipeline))' 2>&1 | FileCheck %s --check-prefix=ANCHOR-TILED
// RUN: not fa3-opt %s --pass-pipeline='builtin.module(func.func(attn-hopper-pipeline))' 2>&1 | FileCheck %s --check-prefix=ANCHOR-HOPPER
// RUN: not fa3-opt %s --pass-pipeline='builtin.module(gpu.module(attn-hopper-pipeline))' 2>&1 | FileCheck %s --check-prefix=ANCHOR-GPU
// ANCHOR-REF: error: attn-cpu-reference-pipeline runs on builtin.module (it bufferizes function boundaries and creates modules), not on func.func
// ANCHOR-TILED: error: attn-cpu-tiled-pipeline runs on builtin.module {{.*}}, not on func.func
// ANCHOR-HOPPER: error: attn-hopper-pipeline runs on builtin.module {{.*}}, not on func.func
// ANCHOR-GPU: error: attn-hopper-pipeline runs on builtin.module {{.*}}, not on gpu.module

func.func @attn(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>)
  return
}
gpu.module @g {
}
