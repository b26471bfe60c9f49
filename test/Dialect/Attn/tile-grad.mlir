// attn-tile on attn.flash_attention_grad: FlashAttention's backward
// schedule. The preprocess (D = rowsum(dO o), dQ's f32 sums zeroed), then a
// grid over (kv-block, kv head, batch) whose cell keeps the kv-block's dK and
// dV sums, walks attn.q_range's m-blocks for each q head of the kv head
// (GQA: the group's heads add into the same sums), the boundary blocks
// masked; its epilogue writes dK and dV; the postprocess converts dQ.
// attn-lower-tiles-to-loops expands every op (their numerics:
// python/tests/test_backward_numerics.py, equal to the oracle bit for bit);
// the Hopper kernel pass refuses tiles that attn-hopper-config did not
// choose (its kernel: test/Conversion/AttnToHopper/grad.mlir).
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" | FileCheck %s
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops | FileCheck %s --check-prefix=LOOPS
// RUN: not fa3-opt %s --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=HOPPER

// CHECK-LABEL: func.func @grad(
// CHECK-SAME: %[[Q:[^:]*]]: memref<2x4x?x16xbf16>, %[[K:[^:]*]]: memref<2x2x?x16xbf16>, %[[V:[^:]*]]: memref<2x2x?x8xbf16>, %[[O:[^:]*]]: memref<2x4x?x8xbf16>, %[[DO:[^:]*]]: memref<2x4x?x8xbf16>, %[[LSE:[^:]*]]: memref<2x4x?xf32>, %[[DQ:[^:]*]]: memref<2x4x?x16xbf16>, %[[DK:[^:]*]]: memref<2x2x?x16xbf16>, %[[DV:[^:]*]]: memref<2x2x?x8xbf16>)
// CHECK: %[[SQ:.*]] = memref.dim %[[Q]], %{{.*}} : memref<2x4x?x16xbf16>
// CHECK: %[[SKV:.*]] = memref.dim %[[K]], %{{.*}} : memref<2x2x?x16xbf16>
// CHECK: %[[DELTA:.*]] = memref.alloc(%{{.*}}) : memref<2x4x?xf32>
// CHECK: %[[DQACC:.*]] = memref.alloc(%{{.*}}) : memref<2x4x?x16xf32>
// CHECK: attn.grad_preprocess %[[O]], %[[DO]] to %[[DELTA]], %[[DQACC]]
// CHECK: %[[NN:.*]] = arith.ceildivsi %[[SKV]], %c16
// CHECK: scf.parallel (%[[N:.*]], %[[HK:.*]], %[[B:.*]]) = (%{{.*}}, %{{.*}}, %{{.*}}) to (%[[NN]], %c2{{.*}}, %c2{{.*}})
// CHECK: %[[DKACC:.*]] = memref.alloc() : memref<16x16xf32>
// CHECK: %[[DVACC:.*]] = memref.alloc() : memref<16x8xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DKACC]]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DVACC]]
// CHECK: %[[COL0:.*]] = arith.muli %[[N]], %c16
// CHECK: %[[LO:.*]], %[[HI:.*]], %[[ILO:.*]], %[[IHI:.*]] = attn.q_range cols %[[COL0]] seq(%[[SQ]], %[[SKV]]) {block_m = 32 : i64, block_n = 16 : i64, window = array<i64: -1, 0>}
// ... the two q heads of kv head hk: 2 hk + g ...
// CHECK: scf.for %[[G:.*]] = %{{.*}} to %c2{{.*}} step
// CHECK: %[[FIRST:.*]] = arith.muli %[[HK]], %c2
// CHECK: %[[H:.*]] = arith.addi %[[FIRST]], %[[G]]
// CHECK: scf.for %[[MB:.*]] = %[[LO]] to %[[HI]] step
// CHECK: %[[ROW0:.*]] = arith.muli %[[MB]], %c32
// CHECK: %[[BEFORE:.*]] = arith.cmpi slt, %[[MB]], %[[ILO]]
// CHECK: %[[AFTER:.*]] = arith.cmpi sge, %[[MB]], %[[IHI]]
// CHECK: %[[EDGE:.*]] = arith.ori %[[BEFORE]], %[[AFTER]]
// CHECK: scf.if %[[EDGE]] {
// CHECK: attn.tile_grad_update %[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[DELTA]][%[[B]], %[[H]], %[[HK]]] rows %[[ROW0]] cols %[[COL0]] acc(%[[DQACC]], %[[DKACC]], %[[DVACC]]) masked {block_m = 32 : i64, block_n = 16 : i64, scale = 2.500000e-01 : f32, softcap = 4.000000e+00 : f32, window = array<i64: -1, 0>}
// CHECK: } else {
// CHECK: attn.tile_grad_update %[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[DELTA]][%[[B]], %[[H]], %[[HK]]] rows %[[ROW0]] cols %[[COL0]] acc(%[[DQACC]], %[[DKACC]], %[[DVACC]]) {block_m
// CHECK: attn.tile_grad_finalize acc(%[[DKACC]], %[[DVACC]]) to %[[DK]], %[[DV]][%[[B]], %[[HK]]] cols %[[COL0]] {block_n = 16 : i64}
// CHECK: memref.dealloc %[[DKACC]]
// CHECK: memref.dealloc %[[DVACC]]
// CHECK: scf.reduce
// CHECK: attn.grad_postprocess %[[DQACC]] to %[[DQ]]
// CHECK: memref.dealloc %[[DELTA]]
// CHECK: memref.dealloc %[[DQACC]]
// CHECK-NOT: attn.flash_attention_grad

// LOOPS-LABEL: func.func @grad(
// LOOPS-NOT: attn.
// LOOPS: math.exp
// LOOPS-NOT: attn.

// HOPPER: error: cannot generate the Hopper kernel: its tiles carry no configuration (attn.hopper_config on attn.q_range): run attn-hopper-config before attn-tile
func.func @grad(%q: memref<2x4x?x16xbf16>, %k: memref<2x2x?x16xbf16>, %v: memref<2x2x?x8xbf16>,
                %o: memref<2x4x?x8xbf16>, %do: memref<2x4x?x8xbf16>, %lse: memref<2x4x?xf32>,
                %dq: memref<2x4x?x16xbf16>, %dk: memref<2x2x?x16xbf16>, %dv: memref<2x2x?x8xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<2x4x?x16xbf16>, memref<2x2x?x16xbf16>, memref<2x2x?x8xbf16>, memref<2x4x?x8xbf16>, memref<2x4x?x8xbf16>, memref<2x4x?xf32>)
      outs(%dq, %dk, %dv : memref<2x4x?x16xbf16>, memref<2x2x?x16xbf16>, memref<2x2x?x8xbf16>) causal softcap(4.0)
  return
}
