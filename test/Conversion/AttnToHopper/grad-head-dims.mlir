// The backward at head dims 96 and 192, where the warpgroups' halves of
// the head dim are not whole 64-column boxes of the MN-major operands (a
// wgmma's N may start inside a box only if it stays inside it). 96: tiles
// of 128 columns (GradKernelConfig::tileD), Q, K, V and dO loaded in two
// boxes (the second half past the tensor, zero-filled by TMA), S^T and
// dP^T over the head dim only, dK and dV 96 columns wide; dQ's columns
// past 96 computed and dropped: the second warpgroup adds only its 32. 192: each warpgroup's 96 columns in two parts (splitParts), a whole
// box and half of the middle one, each its own accumulator. dQaccum's
// tiles are 64 x D floats either way. <kernel>_pre gives a row 16 or 32
// lanes (a power of two for the butterflies), the last quarter idle;
// <kernel>_post converts half a chunk at head dim 96.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config | FileCheck %s --check-prefix=CONFIG
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=tma-store=false --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=ATOMIC
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=block-n=64 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=BN64
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=tma-store=false --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s --check-prefix=NVVM

// Head dim 96: head dim 128's blocks (64 queries x 128 keys, two stages).
// CONFIG-LABEL: func.func @bwd96
// CONFIG: attn.flash_attention_grad {{.*}} causal {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2,

// CHECK-LABEL: gpu.module @bwd96_kernels
// CHECK: gpu.func @bwd96_kernel(
// CHECK-SAME: head_dim = 96 : i64, head_dim_v = 96 : i64
// Rings of 128-column tiles.
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 32768, data = 0,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536,
// CHECK: hopper.load_tile %{{.*}} rows 128 cols 128 :
// CHECK: hopper.load_tile %{{.*}} rows 64 cols 128 :
// The dQ writer adds the first warpgroup's 64 x 64 floats, then the
// second's 64 x 32, into dQaccum's tiles of 64 x 96 floats.
// CHECK: arith.muli %{{.*}}, %c6144_i64 : i64
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c163840_i32] to %{{.*}} bytes 16384
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c180224_i32] to %{{.*}} bytes 8192
// CHECK: } consumers(
// S^T and dP^T over the head dim's 96 columns.
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 96 boxes 16384, 8192 : bf16 -> !hopper.frag<64x64xf32>
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 96 boxes 16384, 8192 : bf16 -> !hopper.frag<64x64xf32>
// dV and dK 64 x 96 (N = 96 from a box's start), dQ's halves 64 x 64.
// CHECK: hopper.wgmma.rs {{.*}} : !hopper.frag<64x64xbf16>, !hopper.frag<64x96xf32>
// CHECK: hopper.wgmma.ss {{.*}} {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x64xf32>
// CHECK: hopper.stage_fragment %{{.*}} : !hopper.frag<64x64xf32>
// dK and dV: their 96 columns.
// CHECK: hopper.store_o {{.*}} consumer[%{{.*}}] of 2 : !hopper.frag<64x96xf32> as bf16
// CHECK: hopper.store_o {{.*}} consumer[%{{.*}}] of 2 wait_previous : !hopper.frag<64x96xf32> as bf16
// _pre: 16 lanes a row (16 rows a block), the lanes past 12 reading nothing.
// CHECK: gpu.func @bwd96_kernel_pre(
// CHECK: %[[SUB:.*]] = arith.remui %{{.*}}, %c16_i32 : i32
// CHECK: %[[MINE:.*]] = arith.cmpi ult, %[[SUB]], %c12_i32 : i32
// CHECK: arith.andi %{{.*}}, %[[MINE]] : i1
// CHECK-COUNT-4: nvvm.shfl.sync bfly
// CHECK-NOT: nvvm.shfl.sync
// CHECK: gpu.return
// _post: two chunks a tile of 6144 floats, the second half a chunk: its
// loads of floats 2048 .. 4095 skipped, its columns past 96 not written.
// CHECK: gpu.func @bwd96_kernel_post(
// CHECK: %[[T:.*]] = arith.divui %{{.*}}, %c6144_i64 : i64
// CHECK: arith.muli %[[T]], %c2_i64 : i64
// CHECK: %[[WHOLE:.*]] = arith.cmpi ne, %{{.*}}, %c1_i64 : i64
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: scf.if %[[WHOLE]] {
// CHECK-NEXT: arith.addi %{{.*}}, %c512_i32 : i32
// CHECK: scf.if %[[WHOLE]] {
// CHECK-NEXT: arith.addi %{{.*}}, %c768_i32 : i32
// CHECK: arith.cmpi ult, %{{.*}}, %c96_i64 : i64

// Without the bulk path: the second warpgroup's atomics add its 32 columns.
// ATOMIC-LABEL: gpu.func @bwd96_kernel(
// ATOMIC: arith.muli %{{.*}}, %c6144_i64 : i64
// ATOMIC-NEXT: %[[H96:.*]] = arith.muli %{{.*}}, %c4096_i32 : i32
// ATOMIC-NEXT: arith.extui %[[H96]] : i32 to i64
// ATOMIC: hopper.reduce_add %[[DQ:.*]] to %[[AT:.*]] : !hopper.frag<64x64xf32>
// ATOMIC-NEXT: } else {
// ATOMIC-NEXT: hopper.reduce_add %[[DQ]] to %[[AT]] columns 32 : !hopper.frag<64x64xf32>

// Head dim 192 by atomics: the box part at float 8192 c of dQaccum's
// tile, the half-box part at 4096 + 2048 c (the middle chunk's halves, in
// accumulator order).
// ATOMIC-LABEL: gpu.func @bwd192_kernel(
// ATOMIC: arith.muli %{{.*}}, %c12288_i64 : i64
// ATOMIC-NEXT: %[[A:.*]] = arith.muli %{{.*}}, %c8192_i32 : i32
// ATOMIC-NEXT: arith.extui %[[A]] : i32 to i64
// ATOMIC: hopper.reduce_add %{{.*}} : !hopper.frag<64x64xf32>
// ATOMIC: arith.muli %{{.*}}, %c12288_i64 : i64
// ATOMIC-NEXT: %[[B:.*]] = arith.muli %{{.*}}, %c2048_i32 : i32
// ATOMIC-NEXT: arith.addi %[[B]], %c4096_i32 : i32
// ATOMIC: hopper.reduce_add %{{.*}} : !hopper.frag<64x32xf32>

// Lowered: 8 vector reductions (a thread's quadruples) for the first
// warpgroup, the first 4 for the second.
// NVVM-LABEL: gpu.func @bwd96_kernel(
// NVVM-COUNT-8: red.global.add.v4.f32
// NVVM-NEXT: } else {
// NVVM-COUNT-4: red.global.add.v4.f32
// NVVM-NOT: red.global.add.v4.f32
// NVVM: gpu.func @bwd96_kernel_pre(
// Head dim 96 with block-n 64 (both warpgroups on the block's 64 keys):
// dK's and dV's columns split too, the second warpgroup's from column 64,
// its 32 of the head dim stored in a warpgroup-uniform branch.
// BN64-LABEL: gpu.func @bwd96_kernel(
// BN64: hopper.reduce_add_bulk %{{.*}} bytes 16384
// BN64: hopper.reduce_add_bulk %{{.*}} bytes 8192
// BN64: } consumers(
// BN64: hopper.named_barrier.arrive reduce_full
// BN64-NEXT: scf.yield
// BN64-NEXT: }
// BN64-NEXT: %[[COL:.*]] = arith.muli %{{.*}}, %c64_i32 : i32
// BN64-NEXT: %[[COL64:.*]] = arith.extui %[[COL]] : i32 to i64
// BN64-NEXT: %[[COLB:.*]] = arith.muli %[[COL64]], %c2_i64 : i64
// BN64-NEXT: llvm.getelementptr %{{.*}}[%[[COLB]]]
// BN64: scf.if
// BN64-NEXT: hopper.store_o {{.*}} of 2 : !hopper.frag<64x64xf32> as bf16
// BN64-NEXT: hopper.store_o {{.*}} of 2 wait_previous : !hopper.frag<64x64xf32> as bf16
// BN64-NEXT: } else {
// BN64-NEXT: hopper.store_o {{.*}} of 2 {columns = 32 : i64} : !hopper.frag<64x64xf32> as bf16
// BN64-NEXT: hopper.store_o {{.*}} of 2 wait_previous {columns = 32 : i64} : !hopper.frag<64x64xf32> as bf16
func.func @bwd96(%q: memref<?x1x?x96xbf16>, %k: memref<?x1x?x96xbf16>, %v: memref<?x1x?x96xbf16>,
                 %o: memref<?x1x?x96xbf16>, %do: memref<?x1x?x96xbf16>, %lse: memref<?x1x?xf32>,
                 %dq: memref<?x1x?x96xbf16>, %dk: memref<?x1x?x96xbf16>, %dv: memref<?x1x?x96xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>) causal
  return
}

// -----

// Head dim 192: both warpgroups on the block's 64 keys (as 256), two
// stages; tiles of 192 columns, so that the dQ staging fits beside them
// (256: atomics).
// CONFIG-LABEL: func.func @bwd192
// CONFIG: attn.flash_attention_grad {{.*}} {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 64, stages = 2, {{.*}} tma_store = true>}

// CHECK-LABEL: gpu.module @bwd192_kernels
// CHECK: gpu.func @bwd192_kernel(
// CHECK-SAME: head_dim = 192 : i64, head_dim_v = 192 : i64
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 24576, data = 0,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 24576, data = 49152,
// CHECK: hopper.load_tile %{{.*}} rows 64 cols 192 :
// CHECK: hopper.load_tile %{{.*}} rows 64 cols 192 :
// The dQ writer adds each warpgroup's parts, 64 x 64 and 64 x 32 floats,
// by a bulk reduction each, into dQaccum's tiles of 64 x 192 floats; a
// warpgroup's buffer is free once its groups and those before them have
// been read.
// CHECK: arith.muli %{{.*}}, %c12288_i64 : i64
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c180224_i32] to %{{.*}} bytes 16384
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c196608_i32] to %{{.*}} bytes 8192
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c204800_i32] to %{{.*}} bytes 16384
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c221184_i32] to %{{.*}} bytes 8192
// CHECK: nvvm.cp.async.bulk.wait_group 2 {read}
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: } consumers(
// Each warpgroup's 96 columns in two parts: a whole box (Q^T's, dO^T's
// and K's columns at byte 2 x 8192 c: boxes of 64 rows) and half of the
// middle box (byte 8192 + 64 c).
// CHECK: %[[KA:.*]] = arith.muli %{{.*}}, %c16384_i32 : i32
// CHECK: %[[KB:.*]] = arith.muli %{{.*}}, %c64_i32 : i32
// CHECK-NEXT: arith.addi %[[KB]], %c8192_i32 : i32
// dK and dV carried in their parts: 64 x 64 and 64 x 32 each.
// CHECK: scf.for {{.*}} -> (!hopper.frag<64x64xf32>, !hopper.frag<64x32xf32>, !hopper.frag<64x64xf32>, !hopper.frag<64x32xf32>)
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 192 boxes 8192, 8192 : bf16 -> !hopper.frag<64x32xf32>
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 192 boxes 8192, 8192 : bf16 -> !hopper.frag<64x32xf32>
// CHECK: hopper.wgmma.ss {{.*}} acc {{.*}} {b_mn_major} : bf16 -> !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.wgmma.ss {{.*}} acc {{.*}} {b_mn_major} : bf16 -> !hopper.frag<64x32xf32>
// CHECK-NEXT: hopper.wgmma.ss {{.*}} acc {{.*}} {b_mn_major} : bf16 -> !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.wgmma.ss {{.*}} acc {{.*}} {b_mn_major} : bf16 -> !hopper.frag<64x32xf32>
// CHECK: hopper.wgmma.ss {{.*}} {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.wgmma.ss {{.*}} {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x32xf32>
// CHECK: hopper.stage_fragment %{{.*}} : !hopper.frag<64x64xf32>
// CHECK: hopper.stage_fragment %{{.*}} : !hopper.frag<64x32xf32>
// dK and dV of each part, each store after the previous one's copy.
// CHECK: hopper.store_o {{.*}} of 2 : !hopper.frag<64x64xf32> as bf16
// CHECK-NEXT: hopper.store_o {{.*}} of 2 wait_previous : !hopper.frag<64x64xf32> as bf16
// CHECK-NEXT: hopper.store_o {{.*}} of 2 wait_previous : !hopper.frag<64x32xf32> as bf16
// CHECK-NEXT: hopper.store_o {{.*}} of 2 wait_previous : !hopper.frag<64x32xf32> as bf16
// _pre: 32 lanes a row, 24 reading; _post: three whole chunks a tile.
// CHECK: gpu.func @bwd192_kernel_pre(
// CHECK: arith.cmpi ult, %{{.*}}, %c24_i32 : i32
// CHECK-COUNT-5: nvvm.shfl.sync bfly
// CHECK: gpu.func @bwd192_kernel_post(
// CHECK: arith.divui %{{.*}}, %c4096_i64 : i64
// CHECK-NOT: scf.if
// CHECK: nvvm.barrier0
func.func @bwd192(%q: memref<?x1x?x192xbf16>, %k: memref<?x1x?x192xbf16>, %v: memref<?x1x?x192xbf16>,
                  %o: memref<?x1x?x192xbf16>, %do: memref<?x1x?x192xbf16>, %lse: memref<?x1x?xf32>,
                  %dq: memref<?x1x?x192xbf16>, %dk: memref<?x1x?x192xbf16>, %dv: memref<?x1x?x192xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>)
  return
}


// -----

// Head dim 96 without a mask: two dQ staging buffers a warpgroup
// (GradKernelConfig::dqBuffers; the causal kernel above has one), 32 KiB
// apart, taken by the step's parity; the writer frees a warpgroup's buffer
// once the reduction of the step before has read it (its group, the other
// warpgroup's after it and this step's two may be pending).
// CONFIG-LABEL: func.func @bwd96_full
// CHECK-LABEL: gpu.module @bwd96_full_kernels
// CHECK: dynamic_smem = 231552 : i64
// CHECK: %[[PAR:.*]] = arith.andi %{{.*}}, %c1_i32 : i32
// CHECK-NEXT: %[[BUF:.*]] = arith.muli %[[PAR]], %c32768_i32 : i32
// CHECK-NEXT: hopper.named_barrier.sync reduce_full[%c0_i32] of 2 threads 160
// CHECK: %[[SRC0:.*]] = arith.addi %[[BUF]], %c163840_i32 : i32
// CHECK: hopper.reduce_add_bulk %{{.*}}[%[[SRC0]]] to %{{.*}} bytes 16384
// CHECK: hopper.named_barrier.sync reduce_full[%c1_i32] of 2 threads 160
// CHECK: %[[SRC1:.*]] = arith.addi %[[BUF]], %c180224_i32 : i32
// CHECK: hopper.reduce_add_bulk %{{.*}}[%[[SRC1]]] to %{{.*}} bytes 8192
// CHECK: nvvm.cp.async.bulk.wait_group 3 {read}
// CHECK: hopper.named_barrier.arrive reduce_free[%c0_i32] of 2 threads 160
// CHECK: nvvm.cp.async.bulk.wait_group 2 {read}
// CHECK: hopper.named_barrier.arrive reduce_free[%c1_i32] of 2 threads 160
// CHECK: } consumers(
// CHECK: hopper.named_barrier.sync reduce_free[%[[CW:.*]]] of 2 threads 160
// CHECK-NEXT: %[[SPAR:.*]] = arith.andi %{{.*}}, %c1_i32 : i32
// CHECK-NEXT: %[[SBUF:.*]] = arith.muli %[[SPAR]], %c32768_i32 : i32
// CHECK-NEXT: %[[AT:.*]] = arith.addi %{{.*}}, %[[SBUF]] : i32
// CHECK-NEXT: hopper.stage_fragment %{{.*}} to %{{.*}}[%[[AT]]] : !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.named_barrier.arrive reduce_full[%[[CW]]] of 2 threads 160
// With the consumers' atomics (tma-store=false) there is no staging.
// ATOMIC-LABEL: gpu.module @bwd96_full_kernels
// ATOMIC: dynamic_smem = 166016 : i64
func.func @bwd96_full(%q: memref<?x1x?x96xbf16>, %k: memref<?x1x?x96xbf16>, %v: memref<?x1x?x96xbf16>,
                      %o: memref<?x1x?x96xbf16>, %do: memref<?x1x?x96xbf16>, %lse: memref<?x1x?xf32>,
                      %dq: memref<?x1x?x96xbf16>, %dk: memref<?x1x?x96xbf16>, %dv: memref<?x1x?x96xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>)
  return
}
