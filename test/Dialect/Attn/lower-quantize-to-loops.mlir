// attn-lower-to-loops on attn.quantize: loops over batch, head and group
// of rows; per group the amax over its rows and columns (maximumf keeps a
// NaN), the descale and scale (1 where the amax is below 448 * 2^-126 or
// NaN), then each element scaled, clamped to +-448 and rounded to e4m3 in
// integer arithmetic (3 of f32's mantissa bits, rounded to nearest even;
// 2^-9 steps below 2^-6; NaN 0x7F) and stored through a bitcast. With
// `rotate`, an element is the sum over the row of x[k] (-1)^popcount(k & j)
// times signs[j] / sqrt(D).
// RUN: fa3-opt %s --split-input-file --attn-lower-to-loops | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-cpu-reference-pipeline | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[X:.*]]: memref<2x3x200x16xbf16>, %[[Y:.*]]: memref<2x3x200x16xf8E4M3FN>, %[[D:.*]]: memref<2x3x2xf32>)
// CHECK-DAG: %[[BLOCK:.*]] = arith.constant 128 : index
// CHECK-DAG: %[[MAX:.*]] = arith.constant 4.480000e+02 : f32
// CHECK-DAG: %[[NEGMAX:.*]] = arith.constant -4.480000e+02 : f32
// CHECK: scf.for %[[B:.*]] =
// CHECK: scf.for %[[H:.*]] =
// CHECK: scf.for %[[T:.*]] =
// CHECK: %[[R0:.*]] = arith.muli %[[T]], %[[BLOCK]] : index
// CHECK: %[[R1:.*]] = arith.addi %[[R0]], %[[BLOCK]] : index
// CHECK: %[[END:.*]] = arith.minui %[[R1]], %{{.*}} : index
// CHECK: %[[AMAX:.*]] = scf.for %[[I:.*]] = %[[R0]] to %[[END]]
// CHECK: memref.load %[[X]][%[[B]], %[[H]], %[[I]], %{{.*}}] : memref<2x3x200x16xbf16>
// CHECK: math.absf
// CHECK: arith.maximumf
// CHECK: %[[AMAXMIN:.*]] = arith.constant 5.26621469E-36 : f32
// CHECK: %[[OK:.*]] = arith.cmpf oge, %[[AMAX]], %[[AMAXMIN]] : f32
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[AMAX]], %{{.*}} : f32
// CHECK: arith.divf %[[SAFE]], %[[MAX]] : f32
// CHECK: arith.divf %[[MAX]], %[[SAFE]] : f32
// CHECK: memref.store %{{.*}}, %[[D]][%[[B]], %[[H]], %[[T]]] : memref<2x3x2xf32>
// CHECK: scf.for %[[I2:.*]] = %[[R0]] to %[[END]]
// CHECK: arith.maximumf %{{.*}}, %[[NEGMAX]] : f32
// CHECK: arith.minimumf %{{.*}}, %[[MAX]] : f32
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.cmpi ult, %{{.*}}, %c1015021568_i32 : i32
// CHECK: arith.cmpi ugt, %{{.*}}, %c2139095040_i32 : i32
// CHECK: %[[BITS:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK: %[[F8:.*]] = arith.bitcast %[[BITS]] : i8 to f8E4M3FN
// CHECK: memref.store %[[F8]], %[[Y]][%[[B]], %[[H]], %[[I2]], %{{.*}}] : memref<2x3x200x16xf8E4M3FN>
// LLVM-LABEL: llvm.func @block
// LLVM-NOT: attn.quantize
func.func @block(%x: memref<2x3x200x16xbf16>, %y: memref<2x3x200x16xf8E4M3FN>, %d: memref<2x3x2xf32>) {
  attn.quantize ins(%x : memref<2x3x200x16xbf16>) outs(%y, %d : memref<2x3x200x16xf8E4M3FN>, memref<2x3x2xf32>) block(128)
  return
}

// -----

// One descale per head, rotated: the row sum over k, its parity folded
// from k & j, times signs[j] / sqrt(16) = 0.25.
// CHECK-LABEL: func.func @head_rotated
// CHECK-SAME: (%[[X:.*]]: memref<1x2x?x16xf32>, %[[S:.*]]: memref<16xf32>, %[[Y:.*]]: memref<1x2x?x16xf8E4M3FN>, %[[D:.*]]: memref<1x2xf32>)
// CHECK: %[[ROWS:.*]] = memref.dim %[[X]], %c2{{.*}} : memref<1x2x?x16xf32>
// CHECK: scf.for %[[T:.*]] = %c0 to %c1 step %c1
// CHECK: arith.muli %[[T]], %[[ROWS]] : index
// CHECK: scf.for %[[K:.*]] = %c0 to %c16 step %c1 iter_args
// CHECK: arith.andi %{{.*}}, %{{.*}} : i64
// CHECK: arith.xori
// CHECK: arith.trunci %{{.*}} : i64 to i1
// CHECK: %[[SG:.*]] = memref.load %[[S]][%{{.*}}] : memref<16xf32>
// CHECK: arith.mulf %[[SG]], %cst{{.*}} : f32
// CHECK: memref.store %{{.*}}, %[[D]][%{{.*}}, %{{.*}}] : memref<1x2xf32>
func.func @head_rotated(%x: memref<1x2x?x16xf32>, %s: memref<16xf32>, %y: memref<1x2x?x16xf8E4M3FN>, %d: memref<1x2xf32>) {
  attn.quantize ins(%x : memref<1x2x?x16xf32>) rotate(%s : memref<16xf32>) outs(%y, %d : memref<1x2x?x16xf8E4M3FN>, memref<1x2xf32>)
  return
}
