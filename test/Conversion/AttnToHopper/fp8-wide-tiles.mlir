// FP8 kernels with FlashAttention-3's wider kv tiles (`block-n`): 224 keys
// at head dim 128 (128 query rows), 160 at 64 (192 rows). K and V come in
// tiles of block_n rows; the transposed V holds them in two boxes of 128
// keys (128-byte swizzle rows, Dv x 128 bytes each, the second partly
// used), which P V's wgmma steps through (b_box_bytes); k's block scales
// (one per 128 keys) scale each column (hopper.scale_key_blocks); the transposer's
// units are 32 keys, so that none straddles the boxes; the producer
// warpgroup keeps 24 registers beside two consumer warpgroups (240 each)
// and 32 beside three (160), as FA3. A key tile wider than three consumer
// warpgroups' registers hold is refused.
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-n=224 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize 2>/dev/null | FileCheck %s --check-prefix=W224
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=block-n=224 --attn-tile --convert-attn-to-hopper 2>&1 >/dev/null | FileCheck %s --check-prefix=W224-ERR
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=block-n=160 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=W160
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=block-n=160 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap --hopper-pingpong --convert-hopper-to-nvvm | FileCheck %s --check-prefix=NVVM

// W224-LABEL: gpu.func @d128_kernel(
// W224: %[[K:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 28672, data = 16384,
// W224: %[[V:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 28672, data = 73728,
// W224: %[[VT:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 131072,
// W224: hopper.warp_specialize producer regs 24 {
// W224: hopper.load_tile %arg1[{{.*}}] into %[[K]][{{.*}}] rows 224 cols 128 : f8E4M3FN
// W224: hopper.load_tile %arg2[{{.*}}] into %[[V]][{{.*}}] rows 224 cols 128 : f8E4M3FN
// W224: hopper.transpose_stage %[[V]][{{.*}}] to %[[VT]] worker %{{.*}} of 3 rows 224 cols 128 unit_keys 32 :
// W224: consumers(%{{.*}} of 2) regs 240
// k's descale: where it has block scales (kDescaleStrideN, %arg34, not 0),
// the three 128-key blocks a kv block of 224 keys can reach, the last
// ceil(Skv / 128) - 1 at most, scale the columns; else folded into the
// scores' scale.
// W224: %[[BLOCKED:.*]] = arith.cmpi ne, %arg34, %c0_i32 : i32
// W224: %[[K0:.*]] = arith.muli %{{.*}}, %c224_i32 : i32
// W224: arith.minui
// W224: arith.minui
// W224: arith.minui
// W224: arith.select %[[BLOCKED]], %cst{{.*}}, %{{.*}} : f32
// W224: hopper.wgmma.ss %{{.*}}, %{{.*}} k 128 boxes 16384, 28672 : f8E4M3FN -> !hopper.frag<64x224xf32>
// W224: scf.if %[[BLOCKED]] -> (!hopper.frag<64x224xf32>) {
// W224-NEXT: hopper.scale_key_blocks %{{.*}} first %[[K0]] by %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x224xf32>
// W224: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} b_box_bytes 16384 : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
// NVVM-LABEL: gpu.func @d128_kernel(
// (S from Q in registers at head dim 128: KernelConfig::qInRegisters.)
// NVVM: wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3
// NVVM: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// W160-LABEL: gpu.func @d128_kernel(
// W160: hopper.transpose_stage {{.*}} of 3 rows 160 cols 128 unit_keys 32 :
// W160: consumers(%{{.*}} of 2) regs 240
// W160: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} b_box_bytes 16384 : !hopper.frag<64x160xf8E4M3FN>, !hopper.frag<64x128xf32>
func.func @d128(%q: memref<?x8x?x128xf8E4M3FN>, %k: memref<?x2x?x128xf8E4M3FN>, %v: memref<?x2x?x128xf8E4M3FN>,
                %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>)
    outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) causal
  return
}

// -----

// W224-ERR: error: cannot generate the Hopper kernel: unsupported tiles 192x224 at head dim 64 in FP8 (the e4m3 kernel uses 128 rows by 128, 160, 192 or 224 keys, {{.*}} three consumer warpgroups' 160 registers hold S and P of 160 keys at most; the GQA-packed decoding kernel also 64 rows by 128, its q descale one a kv head)
// W160-LABEL: gpu.func @d64_kernel(
// W160: %[[VT:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 3, stage_bytes = 16384,
// W160: hopper.warp_specialize producer regs 32 {
// W160: hopper.transpose_stage %{{.*}}[{{.*}}] to %[[VT]] worker %{{.*}} of 3 rows 160 cols 64 unit_keys 32 :
// W160: consumers(%{{.*}} of 3) regs 160
// W160: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} b_box_bytes 8192 : !hopper.frag<64x160xf8E4M3FN>, !hopper.frag<64x64xf32>
// NVVM-LABEL: gpu.func @d64_kernel(
// NVVM: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 160, k = 32>
// NVVM: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
func.func @d64(%q: memref<?x8x?x64xf8E4M3FN>, %k: memref<?x2x?x64xf8E4M3FN>, %v: memref<?x2x?x64xf8E4M3FN>,
               %o: memref<?x8x?x64xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x64xf8E4M3FN>, memref<?x2x?x64xf8E4M3FN>, memref<?x2x?x64xf8E4M3FN>)
    outs(%o, %lse : memref<?x8x?x64xbf16>, memref<?x8x?xf32>)
  return
}
