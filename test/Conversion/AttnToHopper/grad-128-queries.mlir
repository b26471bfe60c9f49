// The backward's steps of 128 queries (`--attn-hopper-config=block-m=128`,
// fa3-compile --backward --block-m 128; head dim 64 with 128 keys, not
// deterministic; the table's choice at head dim 64): S^T and dP^T 64 keys
// x 128 queries a warpgroup, dV and dK over 128 queries from registers,
// dS^T in two 64-query boxes the block's keys apart, and dQ by rows: each
// warpgroup one of the step's two 64-row tiles of dQaccum over all 64
// columns (its layout unchanged: <kernel>_post as before), the second
// warpgroup's added only where Sq reaches it. Refusals:
// grad-128-queries-errors.mlir.
// RUN: fa3-opt %s --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 tma-store=false" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=ATOMIC
// RUN: not fa3-opt %s --attn-hopper-config="block-m=128 block-n=64" --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=N64

// With 64 keys (both warpgroups on the same keys) it is refused by name.
// N64: error: cannot generate the Hopper kernel: unsupported block-m 128 for the backward (64: the queries of dQaccum's tiles; 128 at head dim 64 with block-n 128, not deterministic)

// CHECK-LABEL: gpu.module @bwd64_m128_kernels
// CHECK: attn.launch = {backward = true, block_m = 128 : i64, block_n = 128 : i64, causal = true, {{.*}}dynamic_smem = 231552 : i64
// Q and dO: 128 rows (16 KiB) a stage.
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536,
// The dQ writer: per consumer its tile, one reduction of 64 x 64 floats
// from the step's staging buffer (two, by the step's parity: 32 KiB
// apart); consumer 1's (2 mb + 1) only where it is below ceil(Sq / 64),
// else an empty group, so that each step commits two; then it frees each
// consumer's buffer of the step before (its group and the two of this
// step may be pending).
// CHECK: %[[PAR:.*]] = arith.andi %{{.*}}, %c1_i32 : i32
// CHECK-NEXT: %[[BUF:.*]] = arith.muli %[[PAR]], %c32768_i32 : i32
// CHECK-NEXT: hopper.named_barrier.sync reduce_full[%c0_i32] of 2 threads 160
// CHECK: %[[T0:.*]] = arith.muli %{{.*}}, %c2_i32 : i32
// CHECK: %[[SRC0:.*]] = arith.addi %[[BUF]], %c163840_i32 : i32
// CHECK-NEXT: scf.if
// CHECK-NEXT: hopper.reduce_add_bulk %{{.*}}[%[[SRC0]]] to %{{.*}} bytes 16384
// CHECK: hopper.named_barrier.sync reduce_full[%c1_i32] of 2 threads 160
// CHECK: %[[T1:.*]] = arith.muli %{{.*}}, %c2_i32 : i32
// CHECK-NEXT: %[[T1B:.*]] = arith.addi %[[T1]], %c1_i32 : i32
// CHECK: %[[THERE:.*]] = arith.cmpi ult, %[[T1B]], %{{.*}} : i32
// CHECK: %[[SRC1:.*]] = arith.addi %[[BUF]], %c180224_i32 : i32
// CHECK-NEXT: scf.if
// CHECK-NEXT: scf.if %[[THERE]] {
// CHECK-NEXT: hopper.reduce_add_bulk %{{.*}}[%[[SRC1]]] to %{{.*}} bytes 16384
// CHECK-NEXT: } else {
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.cp.async.bulk.wait_group 3 {read}
// CHECK: hopper.named_barrier.arrive reduce_free[%c0_i32] of 2 threads 160
// CHECK: nvvm.cp.async.bulk.wait_group 2 {read}
// CHECK: hopper.named_barrier.arrive reduce_free[%c1_i32] of 2 threads 160
// CHECK: nvvm.cp.async.bulk.wait_group 0
// LSE and D: 128 rows a step.
// CHECK: hopper.stage_rows %{{.*}} count 128
// CHECK: hopper.stage_rows %{{.*}} count 128
// The consumers: dQ's A operand starts at this warpgroup's box of dS^T
// (16 KiB a warpgroup).
// CHECK: %[[ROWS:.*]] = arith.muli %[[CW:.*]], %c16384_i32 : i32
// CHECK-NEXT: arith.addi %[[ROWS]], %c98304_i32 : i32
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
// CHECK: hopper.band_mask %{{.*}} hi %{{.*}} : !hopper.frag<64x128xf32>
// CHECK: hopper.grad_probs %{{.*}}, columns %{{.*}}[%[[LOFF:.*]]] scale %{{.*}} : !hopper.frag<64x128xf32>
// CHECK: %[[DOFF:.*]] = arith.addi %[[LOFF]], %c512_i32
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, columns %{{.*}}[%[[DOFF]]] : !hopper.frag<64x128xf32>
// CHECK: %[[DV:.*]] = hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xbf16>, !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] box_bytes 16384 stmatrix : !hopper.frag<64x128xbf16>
// CHECK-NEXT: hopper.named_barrier.sync stage[%{{.*}}] of 2 threads 256
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[DQ:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} k 128 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x64xf32>
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[DK:.*]] = hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xbf16>, !hopper.frag<64x64xf32>
// CHECK-NEXT: %[[W:.*]]:2 = hopper.wgmma.wait 1, %[[DV]], %[[DQ]]
// CHECK-NEXT: hopper.named_barrier.sync reduce_free[%[[CW]]] of 2 threads 160
// CHECK-NEXT: %[[SPAR:.*]] = arith.andi %{{.*}}, %c1_i32 : i32
// CHECK-NEXT: %[[SBUF:.*]] = arith.muli %[[SPAR]], %c32768_i32 : i32
// CHECK-NEXT: %[[AT:.*]] = arith.addi %{{.*}}, %[[SBUF]] : i32
// CHECK-NEXT: hopper.stage_fragment %[[W]]#1 to %{{.*}}[%[[AT]]] : !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.named_barrier.arrive reduce_full[%[[CW]]] of 2 threads 160
// CHECK-NEXT: hopper.wgmma.wait 0, %[[DK]]
// The consumers' atomics: this warpgroup's tile (mb * 2 + its index),
// only where it is there.
// ATOMIC-LABEL: gpu.module @bwd64_m128_kernels
// ATOMIC: %[[W:.*]]:2 = hopper.wgmma.wait 1
// ATOMIC-NEXT: %[[MB2:.*]] = arith.muli %{{.*}}, %c2_i32 : i32
// ATOMIC-NEXT: %[[T:.*]] = arith.addi %[[MB2]], %{{.*}} : i32
// ATOMIC: %[[IN:.*]] = arith.cmpi ult, %[[T]], %{{.*}} : i32
// ATOMIC-NEXT: scf.if %[[IN]] {
// ATOMIC: hopper.reduce_add %[[W]]#1 to %{{.*}} : !hopper.frag<64x64xf32>
// ATOMIC-NOT: hopper.reduce_add
func.func @bwd64_m128(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
                      %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
                      %dq: memref<?x1x?x64xbf16>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) causal
  return
}

