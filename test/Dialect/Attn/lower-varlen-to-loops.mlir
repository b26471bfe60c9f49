// The packed form's reference lowering: a loop over the sequences, whose
// bounds come from cu_seqlens (and seqused_k), each evaluated as the
// forward's reference rows on [1, H, T, D] views of the packed tensors
// (keys cu_k[b] + j, visibility by the row's place in its sequence).
// (Its tiled form: tile-varlen.mlir; its Hopper kernel, for bf16 and f16:
// test/Conversion/AttnToHopper/varlen.mlir.)
// RUN: fa3-opt %s --attn-lower-to-loops | FileCheck %s
// RUN: not fa3-opt %s --attn-hopper-config 2>&1 | FileCheck %s --check-prefix=HOPPER

// HOPPER: error: cannot generate the Hopper kernel: the Hopper kernel takes bf16, f16 or f8E4M3FN q, k and v, got f32

// CHECK-LABEL: func @varlen(
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x4x16xf32>, %[[K:[^:]*]]: memref<?x2x16xf32>, %[[V:[^:]*]]: memref<?x2x8xf32>, %[[CQ:[^:]*]]: memref<?xi32>, %[[CK:[^:]*]]: memref<?xi32>, %[[U:[^:]*]]: memref<?xi32>, %[[O:[^:]*]]: memref<?x4x8xf32>, %[[L:[^:]*]]: memref<4x?xf32>)
// CHECK: %[[QE:.*]] = memref.expand_shape %[[Q]] {{\[}}[0, 1], [2], [3]]
// CHECK: %[[QV:.*]] = memref.transpose %[[QE]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK: memref.expand_shape %[[L]] {{\[}}[0, 1], [2]]
// CHECK: scf.for %[[S:[a-z0-9_]+]] =
// CHECK:   %[[S1:[0-9]+]] = arith.addi %[[S]], %{{.*}} : index
// CHECK:   memref.load %[[CQ]][%[[S]]]
// CHECK:   memref.load %[[CQ]][%[[S1]]]
// CHECK:   memref.load %[[CK]][%[[S]]]
// CHECK-NEXT: %[[K0:[0-9]+]] = arith.index_cast %{{.*}} : i32 to index
// The sequence's keys (cu_seqlens_k), and seqused_k clamped to them.
// CHECK-NEXT: memref.load %[[CK]][%[[S1]]]
// CHECK-NEXT: %[[K1:[0-9]+]] = arith.index_cast %{{.*}} : i32 to index
// CHECK-NEXT: %[[NK:[0-9]+]] = arith.subi %[[K1]], %[[K0]] : index
// CHECK-NEXT: memref.load %[[U]][%[[S]]]
// CHECK-NEXT: %[[USED:[0-9]+]] = arith.index_cast %{{.*}} : i32 to index
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[USED0:[0-9]+]] = arith.maxsi %[[USED]], %[[Z]] : index
// CHECK-NEXT: arith.minsi %[[USED0]], %[[NK]] : index
// CHECK:   scf.for %[[H:[a-z0-9_]+]] =
// CHECK:     scf.for %[[I:[a-z0-9_]+]] =
// CHECK:       %[[ROW:[0-9]+]] = arith.addi %{{.*}}, %[[I]] : index
// CHECK:       scf.for %[[J:[a-z0-9_]+]] =
// CHECK:         %[[KEY:[0-9]+]] = arith.addi %[[K0]], %[[J]] : index
// CHECK:         memref.load %[[QV]][%{{.*}}, %[[H]], %[[ROW]], %{{.*}}]
// CHECK:         arith.cmpi slt, %[[J]]
// CHECK-NOT: attn.flash_attention_varlen
func.func @varlen(%q: memref<?x4x16xf32>, %k: memref<?x2x16xf32>, %v: memref<?x2x8xf32>,
                  %cq: memref<?xi32>, %ck: memref<?xi32>, %used: memref<?xi32>,
                  %o: memref<?x4x8xf32>, %lse: memref<4x?xf32>) {
  attn.flash_attention_varlen ins(%q, %k, %v : memref<?x4x16xf32>, memref<?x2x16xf32>, memref<?x2x8xf32>)
      seqlens(%cq, %ck, %used : memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x4x8xf32>, memref<4x?xf32>) causal
  return
}
