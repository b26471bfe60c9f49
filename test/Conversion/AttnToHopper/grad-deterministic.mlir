// The deterministic backward (attn.flash_attention_grad ... deterministic,
// FlashAttention's deterministic=True): the kernel of grad.mlir, but the
// dQ writer adds each dQ tile in its kv block's turn. The CTAs start each
// (kv head, batch)'s kv blocks from the last one down (hopper.tile_coords
// longest_first); a tile's turns go the same way, from the last kv block
// its last row sees (visible_cols), so a CTA only waits for one started
// before it. Per step, lane 0 waits until the tile's turn counter (a u32
// after dQaccum's tiles, at float B Hq ceil(Sq / 64) 64 D + tile) is its
// turn, adds both warpgroups' halves, and passes the turn once the
// reductions are done. <kernel>_pre zeroes the counters with dQaccum
// (rounded up to 16 bytes); the facts say `deterministic`, so the
// launcher sizes dQaccum. The consumers' atomics (tma-store=false) have
// no order to keep: refused.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile | FileCheck %s --check-prefix=TILED
// RUN: fa3-opt %s --split-input-file --attn-hopper-config | FileCheck %s --check-prefix=CONFIG
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: not fa3-opt %s --split-input-file --attn-hopper-config=tma-store=false --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=ATOMIC

// TILED: attn.tile_grad_update {{.*}} deterministic
// TILED: attn.tile_grad_update {{.*}} deterministic

// CHECK-LABEL: gpu.module @det_kernels
// CHECK: gpu.func @det_kernel(
// CHECK-SAME: attn.launch = {backward = true, {{.*}}causal = true, deterministic = true,
// The CTA's tile: the kv blocks last to first (kv block n = blocks - 1 -
// (ctaid mod blocks)) in every role.
// CHECK: hopper.warp_specialize producer
// CHECK: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128 longest_first{{$}}
// The writer: its kv block, col0 / 128.
// CHECK: %[[M0:.*]], %{{.*}}, %{{.*}} = hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128 longest_first{{$}}
// CHECK: %[[KVB:.*]] = arith.divui %[[M0]], %c128_i32 : i32
// CHECK: hopper.named_barrier.arrive reduce_free[%c0_i32]
// CHECK: scf.for
// Counter: B Hq ceil(Sq / 64) tiles of 8192 floats, then the tile's index.
// CHECK: %[[TILE:.*]] = arith.addi %{{.*}}, %{{.*}} : i64
// CHECK: %[[WORDS:.*]] = arith.muli %{{.*}}, %c8192_i64 : i64
// CHECK: %[[AT:.*]] = arith.addi %[[WORDS]], %[[TILE]] : i64
// CHECK: %[[BYTE:.*]] = arith.muli %[[AT]], %c4_i64 : i64
// CHECK: %[[CTR:.*]] = llvm.getelementptr %{{.*}}[%[[BYTE]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// Its turn: the last kv block that the m-block's last row (below Sq) sees,
// minus its own.
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c63_i32 : i32
// CHECK: %[[SQ1:.*]] = arith.subi %{{.*}}, %c1_i32 : i32
// CHECK: %[[LAST:.*]] = arith.minui %[[END]], %[[SQ1]] : i32
// CHECK: %[[COLS:.*]]:2 = func.call @det_kernel_visible_cols(%[[LAST]], %{{.*}}, %{{.*}})
// CHECK: %[[HI1:.*]] = arith.subi %[[COLS]]#1, %c1_i32 : i32
// CHECK: %[[TOP:.*]] = arith.divui %[[HI1]], %c128_i32 : i32
// CHECK: %[[TURN:.*]] = arith.subi %[[TOP]], %[[KVB]] : i32
// CHECK: hopper.named_barrier.sync reduce_full[%c0_i32]
// CHECK: scf.if
// CHECK-NEXT: hopper.wait_turn %[[CTR]], %[[TURN]]
// CHECK: nvvm.bar.warp.sync
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c163840_i32]
// CHECK: hopper.named_barrier.sync reduce_full[%c1_i32]
// CHECK-NOT: hopper.wait_turn
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c180224_i32]
// CHECK: scf.if
// CHECK-NEXT: hopper.pass_turn %[[CTR]]
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK: } consumers(
// CHECK: hopper.tile_coords %{{.*}} longest_first{{$}}
// _pre: dQaccum's words, plus B Hq ceil(Sq / 64) counters rounded up to 4.
// CHECK: gpu.func @det_kernel_pre(
// CHECK: %[[ACCW:.*]] = arith.muli %{{.*}}, %c8192_i64 : i64
// CHECK: %[[C3:.*]] = arith.addi %{{.*}}, %c3_i64 : i64
// CHECK: %[[C4:.*]] = arith.andi %[[C3]], %c-4_i64 : i64
// CHECK: %[[ALL:.*]] = arith.addi %[[ACCW]], %[[C4]] : i64
// CHECK: arith.divui %[[ALL]], %c4_i64 : i64
// _post reads the tiles only (chunks of 4096 floats of dQaccum's tiles).
// CHECK: gpu.func @det_kernel_post(
// CHECK: %[[PW:.*]] = arith.muli %{{.*}}, %c8192_i64 : i64
// CHECK-NEXT: arith.divui %[[PW]], %c4096_i64 : i64

// NVVM-LABEL: gpu.module @det_kernels
// NVVM: ld.acquire.gpu.global.b32
// NVVM: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// NVVM: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// NVVM: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// NVVM: nvvm.cp.async.bulk.wait_group 0{{$}}
// NVVM-NEXT: red.release.gpu.global.add.u32

// ATOMIC: error: cannot generate the Hopper kernel: unsupported deterministic backward with tma-store=false (fa3-compile --no-tma-store): the consumers{{.}} atomics add dQ in no fixed order
func.func @det(%q: memref<?x1x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x128xbf16>,
               %o: memref<?x1x?x128xbf16>, %do: memref<?x1x?x128xbf16>, %lse: memref<?x1x?xf32>,
               %dq: memref<?x1x?x128xbf16>, %dk: memref<?x1x?x128xbf16>, %dv: memref<?x1x?x128xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>) causal deterministic
  return
}

// -----

// Deterministic at head dim 192: the dQ staging fits beside two stages
// (256 takes one); the writer adds each warpgroup's two parts by a bulk
// reduction each (64 x 64 and 64 x 32 floats), waiting for the groups of
// the consumers before it.
// CONFIG-LABEL: func.func @bwd192_det
// CONFIG: attn.flash_attention_grad {{.*}} {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 64, stages = 2, {{.*}} tma_store = true>}

// CHECK-LABEL: gpu.module @bwd192_det_kernels
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c180224_i32] to %{{.*}} bytes 16384
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c196608_i32] to %{{.*}} bytes 8192
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c204800_i32] to %{{.*}} bytes 16384
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c221184_i32] to %{{.*}} bytes 8192
// CHECK: hopper.pass_turn
// CHECK: nvvm.cp.async.bulk.wait_group 2 {read}
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
func.func @bwd192_det(%q: memref<?x1x?x192xbf16>, %k: memref<?x1x?x192xbf16>, %v: memref<?x1x?x192xbf16>,
                      %o: memref<?x1x?x192xbf16>, %do: memref<?x1x?x192xbf16>, %lse: memref<?x1x?xf32>,
                      %dq: memref<?x1x?x192xbf16>, %dk: memref<?x1x?x192xbf16>, %dv: memref<?x1x?x192xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>) deterministic
  return
}
