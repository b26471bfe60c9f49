// attn-tile on attn.flash_attention_varlen: a grid over (sequence, q head);
// each cell reads the sequence's bounds from cu_seqlens (the key count from
// seqused_k when given), views its rows and keys of the packed tensors as a
// [1, H, S, D] problem (expand_shape + transpose, then a subview: no copy)
// and walks its m-blocks with the forward's cell (state, attn.kv_range on the
// sequence's own Sq and Skv, so masks are bottom-right aligned per sequence,
// attn.tile_update, attn.tile_finalize). attn-lower-tiles-to-loops expands
// it (numerics: python/tests/test_varlen_numerics.py); convert-attn-to-hopper
// makes its kernel (test/Conversion/AttnToHopper/varlen.mlir).
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" | FileCheck %s
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops | FileCheck %s --check-prefix=LOOPS

// CHECK-LABEL: func.func @varlen(
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x4x16xf32>, %[[K:[^:]*]]: memref<?x2x16xf32>, %[[V:[^:]*]]: memref<?x2x8xf32>, %[[CQ:[^:]*]]: memref<?xi32>, %[[CK:[^:]*]]: memref<?xi32>, %[[USED:[^:]*]]: memref<?xi32>, %[[O:[^:]*]]: memref<?x4x8xf32>, %[[LSE:[^:]*]]: memref<4x?xf32>)
// CHECK: %[[QE:.*]] = memref.expand_shape %[[Q]]
// CHECK: %[[Q1:.*]] = memref.transpose %[[QE]]
// CHECK: %[[LSE1:.*]] = memref.expand_shape %[[LSE]] {{\[\[}}0, 1], [2]]
// CHECK: scf.parallel (%[[S:.*]], %[[H:.*]]) = (%{{.*}}, %{{.*}}) to (%{{.*}}, %c4{{.*}})
// CHECK: %[[S1:.*]] = arith.addi %[[S]], %c1
// CHECK: memref.load %[[CQ]][%[[S]]]
// CHECK: %[[Q0:.*]] = arith.index_cast
// CHECK: memref.load %[[CQ]][%[[S1]]]
// CHECK: %[[QEND:.*]] = arith.index_cast
// CHECK: memref.load %[[CK]][%[[S]]]
// CHECK: %[[K0:.*]] = arith.index_cast
// CHECK: memref.load %[[CK]][%[[S1]]]
// CHECK: %[[K1:.*]] = arith.index_cast
// CHECK: %[[NK:.*]] = arith.subi %[[K1]], %[[K0]]
// CHECK: memref.load %[[USED]][%[[S]]]
// CHECK: %[[U:.*]] = arith.index_cast
// seqused_k clamped to the sequence's keys
// CHECK: %[[U0:.*]] = arith.maxsi %[[U]],
// CHECK: %[[SKV:.*]] = arith.minsi %[[U0]], %[[NK]]
// CHECK: %[[SQ:.*]] = arith.subi %[[QEND]], %[[Q0]]
// CHECK: %[[QS:.*]] = memref.subview %[[Q1]][0, 0, %[[Q0]], 0] [1, 4, %[[SQ]], 16] [1, 1, 1, 1]
// CHECK: %[[KS:.*]] = memref.subview %{{.*}}[0, 0, %[[K0]], 0] [1, 2, %[[SKV]], 16] [1, 1, 1, 1]
// CHECK: %[[VS:.*]] = memref.subview %{{.*}}[0, 0, %[[K0]], 0] [1, 2, %[[SKV]], 8] [1, 1, 1, 1]
// CHECK: %[[OS:.*]] = memref.subview %{{.*}}[0, 0, %[[Q0]], 0] [1, 4, %[[SQ]], 8] [1, 1, 1, 1]
// CHECK: %[[LS:.*]] = memref.subview %[[LSE1]][0, 0, %[[Q0]]] [1, 4, %[[SQ]]] [1, 1, 1]
// CHECK: %[[NM:.*]] = arith.ceildivsi %[[SQ]], %c32
// CHECK: scf.for %[[MB:.*]] = %{{.*}} to %[[NM]] step
// CHECK: attn.kv_range rows %{{.*}} seq(%[[SQ]], %[[SKV]]) {block_m = 32 : i64, block_n = 16 : i64, window = array<i64: -1, 0>}
// CHECK: attn.tile_update %[[QS]], %[[KS]], %[[VS]][%{{.*}}, %[[H]], %{{.*}}] {{.*}} masked
// CHECK: attn.tile_finalize {{.*}} to %[[OS]], %[[LS]]
// CHECK-NOT: attn.flash_attention_varlen

// LOOPS-LABEL: func.func @varlen(
// LOOPS-NOT: attn.
// LOOPS: math.exp2
// LOOPS-NOT: attn.

func.func @varlen(%q: memref<?x4x16xf32>, %k: memref<?x2x16xf32>, %v: memref<?x2x8xf32>,
                  %cq: memref<?xi32>, %ck: memref<?xi32>, %used: memref<?xi32>,
                  %o: memref<?x4x8xf32>, %lse: memref<4x?xf32>) {
  attn.flash_attention_varlen ins(%q, %k, %v : memref<?x4x16xf32>, memref<?x2x16xf32>, memref<?x2x8xf32>)
      seqlens(%cq, %ck, %used : memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x4x8xf32>, memref<4x?xf32>) causal
  return
}
