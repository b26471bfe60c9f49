// The FP8 kernel (e4m3 q, k, v with descales at launch, o bf16). Its
// configuration, checked as CONFIG, is 128 x 128 tiles, 2 stages and
// persistent CTAs with two Q buffers at head dim 128; at 256 persistent
// with one Q buffer, O stored directly (its staging buffer does not fit),
// the transposer in units of 128 keys. Its kernel
// with one CTA per tile, checked as KERNEL, has the producer warpgroup's
// warps 1 .. 3 transpose each V stage into a ring of its own (V's
// consumers, that ring's producer); the consumer warpgroups fold q's
// descale (per 128 query rows) and each kv block's k descale into the
// scores' scale, read P V's B from the transposed ring and scale O by v's
// descale.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config | FileCheck %s --check-prefix=CONFIG
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=persistent=off --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=KERNEL
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-producer-warp-transpose --hopper-overlap --hopper-pingpong --convert-hopper-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=persistent=on --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=PERSIST
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=persistent=on --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=PERSIST-WS
// With transpose-warps=4 warp 0 is the transposer's worker 0 (its program
// hopper-producer-warp-transpose's), warps 1 .. 3 workers 1 .. 3; V's
// slots then wait for 128 transposer threads. One CTA per tile refuses it
// (but in the decoding kernel, DECODE-WARPS below).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=transpose-warps=4 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-producer-warp-transpose | FileCheck %s --check-prefix=WARP0
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config="transpose-warps=4 persistent=off" 2>&1 | FileCheck %s --check-prefix=WARP0-TILES
// WARP0-TILES: error: cannot generate the Hopper kernel: unsupported transpose_warps 4 with one CTA per tile (warp 0 transposes V in a persistent FP8 kernel's producer program, and the four warps copying a decoding kernel's pages do: each block's slot after the next block's fill, a tile's last after its kv loop)
// The FP8 decoding kernel (an e4m3 KV cache): 64 x 128 tiles (one
// consumer warpgroup, q's descale one a kv head under GQA packing), two
// stages, two CTAs a SM, split-KV and GQA packing, one CTA per tile, V
// transposed by the four producer warps that also copy its small pages
// (their one program, each slot one fill behind its copies, the
// transposer's own loop gone); head dim 256 refused.
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=decode=true --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-warp-copy --hopper-copy-offsets --hopper-async-copy --hopper-producer-warp-transpose 2>/dev/null | FileCheck %s --check-prefix=DECODE-WARPS
// DECODE-WARPS-LABEL: gpu.func @d128_kernel(
// DECODE-WARPS: hopper.producer_warps(%[[W:.*]]) first 0 count 4 {
// DECODE-WARPS: hopper.copy_paged_tile {{.*}} warps 4 warp %[[W]]
// DECODE-WARPS: hopper.copy_paged_tile {{.*}} warps 4 warp %[[W]]
// DECODE-WARPS: hopper.transpose_stage {{.*}} worker %[[W]] of 4 rows 128 cols 128 unit_keys 128
// DECODE-WARPS: hopper.transpose_stage {{.*}} worker %[[W]] of 4 rows 128 cols 128 unit_keys 128
// DECODE-WARPS-NOT: first 1 count 3
// DECODE-WARPS-NOT: hopper.transpose_stage
// DECODE-WARPS: } consumers
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=decode=true 2>/dev/null | FileCheck %s --check-prefix=DECODE
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=decode=true 2>&1 >/dev/null | FileCheck %s --check-prefix=DECODE256
// DECODE-LABEL: func.func @d128
// DECODE: block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, {{.*}} pingpong = false, tma_store = false, split_kv = true, pack_gqa = true, ctas_per_sm = 2, transpose_warps = 4>
// DECODE256: error: cannot generate the Hopper kernel: unsupported FP8 split-KV at head dim 256 (the FP8 decoding kernel takes head dim 64 or 128

// CONFIG-LABEL: func.func @d128
// CONFIG: attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>

// Persistent CTAs (as an option): two Q buffers; the consumers' tile loop
// claims each tile in Q's fill (as bf16's); after it, V's next slot u
// carries no tile but the end flag of u's stage (a word per stage, zeroed
// by thread 0 at the start), published in that slot's fill, since the
// transposer does not follow the tile loop: it follows V's ring until a
// slot whose flag is set. hopper-warp-specialize gives the end slot's fill
// to the producer thread, after its copy of the tile loop, checked as
// PERSIST-WS. (One word for all stages would be written while the
// transposer still reads it for earlier slots: racecheck's hazard. A
// stage's flag is read before the stage is released and written after it
// is acquired again.)
// PERSIST: %[[Q:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 0,
// PERSIST: %[[V:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, {{.*}} arrivals = 96
// PERSIST: %[[VT:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 98304,
// PERSIST: nvvm.prefetch tensormap
// PERSIST: %[[F0:.*]] = llvm.getelementptr %{{.*}}[164000]
// PERSIST-NEXT: llvm.store %c0_i32, %[[F0]]
// PERSIST-NEXT: %[[F1:.*]] = llvm.getelementptr %{{.*}}[164004]
// PERSIST-NEXT: llvm.store %c0_i32, %[[F1]]
// PERSIST-NEXT: }
// PERSIST: hopper.warp_specialize producer regs 48 {
// PERSIST-NEXT: hopper.producer_warps(%{{.*}}) first 1 count 3 {
// PERSIST-NEXT: scf.while (%[[U:.*]] = %c0_i32) : (i32) -> i32 {
// PERSIST-NEXT: hopper.ring.consumer_wait %[[V]][%[[U]]]
// PERSIST-NEXT: %[[ST:.*]] = hopper.ring.stage %[[V]][%[[U]]]
// PERSIST: %[[FLAGS:.*]] = llvm.getelementptr %{{.*}}[164000]
// PERSIST: %[[FLAG:.*]] = hopper.ring.published %[[V]][%[[U]]] word 0 at
// PERSIST-NEXT: %[[MORE:.*]] = arith.cmpi eq, %[[FLAG]], %c0_i32
// PERSIST-NEXT: scf.condition(%[[MORE]]) %[[U]]
// PERSIST: ^bb0(%[[UA:.*]]: i32):
// PERSIST-NEXT: hopper.ring.producer_acquire %[[VT]][%[[UA]]]
// PERSIST-NEXT: hopper.transpose_stage %[[V]][%[[UA]]] to %[[VT]]
// PERSIST-NEXT: hopper.ring.consumer_release %[[V]][%[[UA]]]
// PERSIST: hopper.ring.producer_commit %[[VT]][%[[UA]]] tx 0
// PERSIST: arith.addi %[[UA]], %c1_i32
// PERSIST: } consumers(
// PERSIST: %[[TILES:.*]]:2 = scf.while
// PERSIST-NEXT: hopper.ring.stage %[[Q]]
// PERSIST: hopper.ring.fill %[[Q]]
// PERSIST: hopper.tile_claim
// PERSIST: } do {
// PERSIST-NEXT: ^bb0(%{{.*}}: i32, %{{.*}}: i32):
// PERSIST-NEXT: arith.addi
// PERSIST-NEXT: scf.yield
// PERSIST-NEXT: }
// PERSIST-NEXT: hopper.ring.fill %[[V]][%[[TILES]]#1]
// PERSIST: hopper.ring.publish %c1_i32 at %{{.*}} to %[[V]][%[[TILES]]#1]
// PERSIST-NEXT: hopper.ring.producer_commit %[[V]][%[[TILES]]#1] tx 0
// PERSIST-WS: hopper.warp_specialize producer regs 48 {
// PERSIST-WS-NEXT: hopper.producer_thread {
// PERSIST-WS: %[[PT:.*]]:2 = scf.while
// PERSIST-WS: hopper.tile_claim
// PERSIST-WS: } do {
// PERSIST-WS-NEXT: ^bb0(%{{.*}}: i32, %{{.*}}: i32):
// PERSIST-WS-NEXT: arith.addi
// PERSIST-WS-NEXT: scf.yield
// PERSIST-WS-NEXT: }
// PERSIST-WS-NEXT: hopper.ring.producer_acquire %[[V:.*]][%[[PT]]#1]
// PERSIST-WS: hopper.ring.publish %c1_i32 at %{{.*}} to %[[V]][%[[PT]]#1]
// PERSIST-WS-NEXT: hopper.ring.producer_commit %[[V]][%[[PT]]#1] tx 0
// PERSIST-WS-NEXT: }
// PERSIST-WS-NEXT: hopper.producer_warps
// PERSIST-WS: } consumers(
// PERSIST-WS-NOT: hopper.ring.fill
// PERSIST-WS-NOT: hopper.ring.publish {{.*}} to
// PERSIST-WS: gpu.return

// KERNEL-LABEL: gpu.func @d128_kernel(
// KERNEL-SAME: dtype = "e4m3"
// The rings: Q, K, V (released by the 96 transposer threads), V transposed
// (by the 256 consumer threads).
// KERNEL: %[[Q:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 16384, data = 0,
// KERNEL: %[[K:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, {{.*}} arrivals = 256, cluster = 1>
// KERNEL: %[[V:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, {{.*}} arrivals = 96, cluster = 1>
// KERNEL: %[[VT:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 81920, {{.*}} arrivals = 256, cluster = 1>
// KERNEL: hopper.warp_specialize producer regs 48 {
// KERNEL-NEXT: hopper.producer_thread {
// KERNEL: hopper.load_tile %arg0[{{.*}}] into %[[Q]][{{.*}}] rows 128 cols 128 : f8E4M3FN
// KERNEL: hopper.load_tile %arg1[{{.*}}] into %[[K]][{{.*}}] rows 128 cols 128 : f8E4M3FN
// KERNEL: hopper.load_tile %arg2[{{.*}}] into %[[V]][{{.*}}] rows 128 cols 128 : f8E4M3FN
// The transposer: warps 1 .. 3 of the producer warpgroup (a role op;
// hopper.producer_thread runs the TMA loads), over the tile's kv blocks.
// KERNEL: hopper.producer_warps(%[[WORKER:.*]]) first 1 count 3 {
// KERNEL: %[[RNG:.*]]:4 = func.call @d128_kernel_kv_range(
// KERNEL: %[[NB:.*]] = arith.subi %[[RNG]]#1, %[[RNG]]#0 : i32
// KERNEL: scf.for %[[U:.*]] = %c0_i32 to %[[NB]] step %c1_i32 : i32 {
// KERNEL-NEXT: hopper.ring.consumer_wait %[[V]][%[[U]]]
// KERNEL-NEXT: hopper.ring.producer_acquire %[[VT]][%[[U]]]
// KERNEL-NEXT: hopper.transpose_stage %[[V]][%[[U]]] to %[[VT]] worker %[[WORKER]] of 3 rows 128 cols 128 :
// KERNEL-NEXT: hopper.ring.consumer_release %[[V]][%[[U]]]
// KERNEL-NEXT: hopper.named_barrier.sync transpose[%c0_i32] of 2 threads 96
// One of them commits the slot: thread 32 (warp 1's lane 0).
// KERNEL-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// KERNEL-NEXT: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %c32_i32 : i32
// KERNEL-NEXT: scf.if %[[FIRST]] {
// KERNEL-NEXT: hopper.ring.producer_commit %[[VT]][%[[U]]] tx 0
// KERNEL: } consumers(%[[CW2:.*]] of 2) regs 224 {
// q's descale: qDescale[b sB + h sH + (min(r0, Sq - 1) / 128) sM], r0 =
// m0 + 64 c the warpgroup's first row (rows past Sq read the last block:
// the array has ceil(Sq / 128)); 1 without the array.
// KERNEL: %[[R0OFF:.*]] = arith.muli %[[CW2]], %c64_i32 : i32
// KERNEL: %[[R0:.*]] = arith.addi %m0, %[[R0OFF]] : i32
// KERNEL: %[[LASTROW:.*]] = arith.subi %arg8, %c1_i32 : i32
// KERNEL: %[[ROW:.*]] = arith.minui %[[R0]], %[[LASTROW]] : i32
// KERNEL: %[[MB:.*]] = arith.divui %[[ROW]], %c128_i32 : i32
// KERNEL: %[[QGIVEN:.*]] = llvm.icmp "ne" %arg26, %{{.*}} : !llvm.ptr<1>
// KERNEL: %[[QD:.*]] = scf.if %[[QGIVEN]] -> (f32) {
// KERNEL: arith.muli %batch, %arg29 : i32
// KERNEL: arith.muli %head, %arg30 : i32
// KERNEL: arith.muli %[[MB]], %arg31 : i32
// KERNEL: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// KERNEL: } else {
// KERNEL-NEXT: scf.yield %cst{{.*}} : f32
// KERNEL: %[[QS:.*]] = arith.mulf %arg15, %[[QD]] : f32
// v's, per kv head.
// KERNEL: %[[VD:.*]] = scf.if %{{.*}} -> (f32) {
// KERNEL: llvm.getelementptr %arg28[
// Q as S's register A operand (KernelConfig::qInRegisters): this
// warpgroup's 64 rows of Q's buffer, loaded once a tile.
// KERNEL: %[[QA:.*]] = hopper.load_shared %{{.*}}[%{{.*}}] box_bytes 16384 : !hopper.frag<64x128xf8E4M3FN>
// Each kv block's k descale times q's, the scores' scale.
// KERNEL: scf.for %[[T:.*]] = %c0_i32 to
// KERNEL: %[[BLK:.*]] = arith.addi %{{.*}}#0, %[[T]] : i32
// KERNEL: %[[KD:.*]] = scf.if %{{.*}} -> (f32) {
// KERNEL: arith.muli %[[BLK]], %arg34 : i32
// KERNEL: llvm.getelementptr %arg27[
// KERNEL: %[[SCALE:.*]] = arith.mulf %[[QS]], %[[KD]] : f32
// Each kv block's S = Q K^T: a wgmma.rs from zero.
// KERNEL: %[[ZS:.*]] = hopper.zero : !hopper.frag<64x128xf32>
// KERNEL-NEXT: nvvm.wgmma.fence.aligned
// KERNEL-NEXT: hopper.wgmma.rs %[[QA]], %{{.*}}, %[[ZS]] : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
// KERNEL: hopper.softmax_step %{{.*}} scale %[[SCALE]]
// P rounded to e4m3 after the lazy rescale's branch, whose arms wait for
// the previous P V (two consumer warpgroups: straight into P's registers).
// KERNEL-NEXT: hopper.warpgroup_any %raised
// KERNEL-NEXT: scf.if
// KERNEL-NEXT: hopper.scale_rows
// KERNEL: %[[P:.*]] = hopper.trunc %p : !hopper.frag<64x128xf32> to !hopper.frag<64x128xf8E4M3FN>
// KERNEL: hopper.ring.consumer_wait %[[VT]][
// KERNEL: hopper.wgmma.rs %[[P]], %{{.*}}, %{{.*}} : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
// KERNEL: hopper.ring.consumer_release %[[VT]][
// O times v's descale, stored as bf16.
// KERNEL: %[[VF:.*]] = hopper.fill %[[VD]] : f32 to !hopper.frag<64xf32>
// KERNEL: %[[O:.*]] = hopper.scale_rows %{{.*}}, %[[VF]]
// KERNEL: hopper.store_o %[[O]], %{{.*}} tma {{.*}} : !hopper.frag<64x128xf32> as bf16

// The whole pipeline lowers it: e4m3 wgmma, the f8 conversions, the
// transposer's ldmatrix and byte permutes.
// NVVM-LABEL: gpu.func @d128_kernel(
// NVVM: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>
// NVVM: nvvm.prmt
// Q by ldmatrix (not transposed), S and P V as register-A wgmmas.
// NVVM: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>
// NVVM: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// NVVM: nvvm.convert.f32x2.to.f8x2
// NVVM: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
func.func @d128(%q: memref<?x8x?x128xf8E4M3FN>, %k: memref<?x2x?x128xf8E4M3FN>, %v: memref<?x2x?x128xf8E4M3FN>,
                %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>)
    outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) causal
  return
}

// -----

// CONFIG-LABEL: func.func @d256
// CONFIG: attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = false, transpose_warps = 4>
// KERNEL-LABEL: gpu.func @d256_kernel(
// The producer warpgroup gives up all but 24 registers, as FA3's: with
// 232 a consumer thread (producer 40) ptxas serialised the wgmmas for want
// of registers (O alone is 128 of them).
// KERNEL: hopper.warp_specialize producer regs 24 {
// Units of 128 keys: 8 for 3 warps (3, 3, 2 of 8 groups of 16 keys) are
// no more for the busiest than 16 of 64 keys (6, 5, 5 of 4), and take one
// address computation where those take two.
// KERNEL: hopper.transpose_stage %{{.*}} of 3 rows 128 cols 256 unit_keys 128 :
// KERNEL: } consumers(%{{.*}} of 2) regs 240 {
// KERNEL: hopper.wgmma.ss %{{.*}}, %{{.*}} k 256 boxes 16384, 16384 : f8E4M3FN
// KERNEL: hopper.store_o %{{.*}} bound %{{[a-z0-9_]+}} : !hopper.frag
// WARP0-LABEL: gpu.func @d256_kernel(
// WARP0: %[[V:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 98304, full = {{[0-9]+}}, empty = {{[0-9]+}}, arrivals = 128, cluster = 1>
// WARP0: hopper.warp_specialize producer regs 24 {
// WARP0-NEXT: hopper.producer_warps(%{{.*}}) first 0 count 1 {
// Worker 0's steps: the previous block's in the kv loop, the tile's last
// after it (before the next tile's claim).
// WARP0: scf.for
// WARP0: hopper.transpose_stage %[[V]][%{{.*}}] to %{{.*}} worker %{{.*}} of 4 rows 128 cols 256 unit_keys 128 :
// WARP0: arith.cmpi slt
// WARP0-NEXT: scf.if
// WARP0: hopper.transpose_stage %[[V]][%{{.*}}] to %{{.*}} worker %{{.*}} of 4 rows 128 cols 256 unit_keys 128 :
// WARP0: scf.condition
// WARP0: hopper.producer_warps(%[[W:.*]]) first 1 count 3 {
// WARP0-NEXT: %[[W1:.*]] = arith.addi %[[W]], %c1_i32
// WARP0: hopper.transpose_stage %[[V]][%{{.*}}] to %{{.*}} worker %[[W1]] of 4 rows 128 cols 256 unit_keys 128 :
// WARP0: hopper.named_barrier.sync transpose[%{{.*}}] of 2 threads 128
// WARP0: } consumers(%{{.*}} of 2) regs 240 {
func.func @d256(%q: memref<?x8x?x256xf8E4M3FN>, %k: memref<?x8x?x256xf8E4M3FN>, %v: memref<?x8x?x256xf8E4M3FN>,
                %o: memref<?x8x?x256xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x256xf8E4M3FN>, memref<?x8x?x256xf8E4M3FN>, memref<?x8x?x256xf8E4M3FN>)
    outs(%o : memref<?x8x?x256xbf16>)
  return
}

// -----

// Head dim 64: V's 8-bit TMA box is 128 columns (64 of them TMA's zeros),
// but O and V transposed are 64 wide: the transposer does 64 columns, P V
// is N = 64, O's staging is one 64-column box; three stages (room for a
// second Q buffer, persistent); 192 query rows,
// three consumer warpgroups (no ping-pong), each reading the q descale of
// the 128-row block its 64 rows lie in: min(m0 + 64 c, Sq - 1) / 128.
// CONFIG-LABEL: func.func @d64
// CONFIG: attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 128, stages = 3, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>
// KERNEL-LABEL: gpu.func @d64_kernel(
// KERNEL: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 24576, data = 0,
// KERNEL: %[[V:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 3, stage_bytes = 16384, data = 73728,
// KERNEL: %[[VT:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 3, stage_bytes = 8192, data = 122880,
// KERNEL: hopper.load_tile %arg2[{{.*}}] into %[[V]][{{.*}}] rows 128 cols 128 : f8E4M3FN
// KERNEL: hopper.transpose_stage %[[V]][{{.*}}] to %[[VT]] worker %{{.*}} of 3 rows 128 cols 64 :
// KERNEL: consumers(%[[CW:.*]] of 3) regs 152
// KERNEL: %[[WGROWS:.*]] = arith.muli %[[CW]], %c64_i32
// KERNEL: %[[WGROW0:.*]] = arith.addi %m0, %[[WGROWS]]
// KERNEL: %[[ROW64:.*]] = arith.minui %[[WGROW0]],
// KERNEL-NEXT: arith.divui %[[ROW64]], %c128_i32
// KERNEL: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x64xf32>
// KERNEL: hopper.store_o {{.*}} tma {{.*}} : !hopper.frag<64x64xf32> as bf16
// NVVM-LABEL: gpu.func @d64_kernel(
// NVVM: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
func.func @d64(%q: memref<?x8x?x64xf8E4M3FN>, %k: memref<?x8x?x64xf8E4M3FN>, %v: memref<?x8x?x64xf8E4M3FN>,
                %o: memref<?x8x?x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x64xf8E4M3FN>, memref<?x8x?x64xf8E4M3FN>, memref<?x8x?x64xf8E4M3FN>)
    outs(%o : memref<?x8x?x64xbf16>)
  return
}

// -----

// Descale operands on the op: the kernel reads the factors at launch
// (qDescale, kDescale, vDescale), so it is the one without them; the tiles
// carry them (TILED), for the CPU tile lowering, which the kernel ignores.
// RUN: fa3-opt %s --split-input-file --attn-tile 2>&1 | FileCheck %s --check-prefix=TILED
// TILED-LABEL: func.func @descales
// TILED: attn.tile_update {{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x2xf32>, memref<?x2x?xf32>, memref<?x2xf32>)
// CONFIG-LABEL: func.func @descales
// CONFIG: descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x2xf32>, memref<?x2x?xf32>, memref<?x2xf32>)
// KERNEL-LABEL: gpu.func @descales_kernel(
// KERNEL-SAME: dtype = "e4m3"
// KERNEL: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xf8E4M3FN>, !hopper.frag<64x128xf32>
func.func @descales(%q: memref<?x8x?x128xf8E4M3FN>, %k: memref<?x2x?x128xf8E4M3FN>, %v: memref<?x2x?x128xf8E4M3FN>,
                    %qd: memref<?x2xf32>, %kd: memref<?x2x?xf32>, %vd: memref<?x2xf32>,
                    %o: memref<?x8x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>, memref<?x2x?x128xf8E4M3FN>)
    descale(%qd, %kd, %vd : memref<?x2xf32>, memref<?x2x?xf32>, memref<?x2xf32>)
    outs(%o : memref<?x8x?x128xbf16>)
  return
}
