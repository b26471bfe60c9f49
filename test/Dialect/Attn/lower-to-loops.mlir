// The reference lowering: a loop nest over (b, h, i), a max pass and a sum
// pass over the keys, natural exp/log, and the row guards for fully masked
// rows.
// RUN: fa3-opt %s --attn-lower-to-loops | FileCheck %s

// CHECK-LABEL: func @reference
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<16xf32>
// CHECK: scf.for %[[B:.*]] =
// CHECK: scf.for %[[H:.*]] =
// CHECK: scf.for %[[I:.*]] =
// CHECK: %[[HK:.*]] = arith.divui %[[H]], %{{.*}}
// CHECK: %[[MAX:.*]] = scf.for %[[J:.*]] = {{.*}} iter_args(%[[M:.*]] = %{{.*}}) -> (f32)
// CHECK:   math.fma
// CHECK:   math.tanh
// CHECK:   arith.maximumf
// CHECK:   arith.cmpi slt, %[[J]]
// CHECK:   arith.select
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32)
// CHECK:   math.exp
// CHECK: arith.cmpf ogt, %[[SUM]]
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: math.log %[[SUM]]
func.func @reference(%q: memref<1x4x10x8xbf16>, %k: memref<1x2x12x8xbf16>, %v: memref<1x2x12x16xbf16>,
                     %o: memref<1x4x10x16xbf16>, %lse: memref<1x4x10xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x4x10x8xbf16>, memref<1x2x12x8xbf16>, memref<1x2x12x16xbf16>)
    outs(%o, %lse : memref<1x4x10x16xbf16>, memref<1x4x10xf32>) causal softcap(5.0)
  return
}

