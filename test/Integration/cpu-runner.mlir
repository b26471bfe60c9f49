// End to end on the CPU with mlir-runner, on inputs whose answer is known in
// closed form: with every key equal, softmax is uniform over the visible keys,
// so with v[j, :] = j the output row i is the mean of the visible j. Causal,
// Sq = Skv = 6: o[i, :] = i / 2; lse[i] = log(i + 1) + s with
// s = q.k * scale = (8 * 0.5 * 0.25) * 0.5 = 0.5. Both lowerings must print
// the same.
// RUN: fa3-opt %s --attn-cpu-reference-pipeline | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: fa3-opt %s --attn-cpu-tiled-pipeline="block-m=4 block-n=4" | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// CHECK: {{\[}}[0,   0,   0,   0,   0,   0,   0,   0],
// CHECK-NEXT: [0.5,   0.5,   0.5,   0.5,   0.5,   0.5,   0.5,   0.5],
// CHECK-NEXT: [1,   1,   1,   1,   1,   1,   1,   1],
// CHECK-NEXT: [1.5,   1.5,   1.5,   1.5,   1.5,   1.5,   1.5,   1.5],
// CHECK-NEXT: [2,   2,   2,   2,   2,   2,   2,   2],
// CHECK-NEXT: [2.5,   2.5,   2.5,   2.5,   2.5,   2.5,   2.5,   2.5]]
// CHECK: [0.5,  1.19315,  1.59861,  1.88629,  2.10944,  2.29176]

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %half = arith.constant 0.5 : f32
  %quarter = arith.constant 0.25 : f32
  %q = memref.alloc() : memref<1x1x6x8xf32>
  %k = memref.alloc() : memref<1x1x6x8xf32>
  %v = memref.alloc() : memref<1x1x6x8xf32>
  %o = memref.alloc() : memref<1x1x6x8xf32>
  %lse = memref.alloc() : memref<1x1x6xf32>
  scf.for %i = %c0 to %c6 step %c1 {
    scf.for %d = %c0 to %c8 step %c1 {
      memref.store %half, %q[%c0, %c0, %i, %d] : memref<1x1x6x8xf32>
      memref.store %quarter, %k[%c0, %c0, %i, %d] : memref<1x1x6x8xf32>
    }
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    scf.for %d = %c0 to %c8 step %c1 {
      memref.store %fi, %v[%c0, %c0, %i, %d] : memref<1x1x6x8xf32>
    }
  }
  attn.flash_attention ins(%q, %k, %v : memref<1x1x6x8xf32>, memref<1x1x6x8xf32>, memref<1x1x6x8xf32>)
    outs(%o, %lse : memref<1x1x6x8xf32>, memref<1x1x6xf32>) scale(0.5) causal
  %oc = memref.collapse_shape %o [[0, 1, 2], [3]] : memref<1x1x6x8xf32> into memref<6x8xf32>
  %lc = memref.collapse_shape %lse [[0, 1, 2]] : memref<1x1x6xf32> into memref<6xf32>
  %ou = memref.cast %oc : memref<6x8xf32> to memref<*xf32>
  %lu = memref.cast %lc : memref<6xf32> to memref<*xf32>
  call @printMemrefF32(%ou) : (memref<*xf32>) -> ()
  call @printMemrefF32(%lu) : (memref<*xf32>) -> ()
  return
}
