// The backward's reference lowering: f32 sums for dq, dk, dv zeroed, one
// loop over the keys per (b, h, i) with p from the forward's lse (0 for
// invisible keys and for rows whose lse is -inf), D_i = dot(dO_i, o_i),
// dS through softcap's derivative, then the sums converted into the outputs
// and freed. The Hopper passes name what their backward cannot take here
// (value head dim 8 with 16; the kernel: test/Conversion/AttnToHopper/grad.mlir).
// RUN: fa3-opt %s --attn-lower-to-loops | FileCheck %s
// RUN: not fa3-opt %s --attn-hopper-config 2>&1 | FileCheck %s --check-prefix=HOPPER
// RUN: not fa3-opt %s --attn-hopper-pipeline 2>&1 | FileCheck %s --check-prefix=HOPPER

// HOPPER: error: cannot generate the Hopper kernel: unsupported value head dim 8 with head dim 16 in the backward (the Hopper backward takes Dv = D)

// CHECK-LABEL: func @grad(
// CHECK-SAME: %[[Q:[^:]*]]: memref<2x4x?x16xbf16>, %[[K:[^:]*]]: memref<2x2x?x16xbf16>, %[[V:[^:]*]]: memref<2x2x?x8xbf16>, %[[O:[^:]*]]: memref<2x4x?x8xbf16>, %[[DO:[^:]*]]: memref<2x4x?x8xbf16>, %[[LSE:[^:]*]]: memref<2x4x?xf32>, %[[DQ:[^:]*]]: memref<2x4x?x16xbf16>, %[[DK:[^:]*]]: memref<2x2x?x16xbf16>, %[[DV:[^:]*]]: memref<2x2x?x8xbf16>)
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[DQ32:.*]] = memref.alloc(%{{.*}}) : memref<2x4x?x16xf32>
// CHECK: %[[DK32:.*]] = memref.alloc(%{{.*}}) : memref<2x2x?x16xf32>
// CHECK: %[[DV32:.*]] = memref.alloc(%{{.*}}) : memref<2x2x?x8xf32>
// CHECK: memref.store %[[ZERO]], %[[DQ32]]
// CHECK: memref.store %[[ZERO]], %[[DK32]]
// CHECK: memref.store %[[ZERO]], %[[DV32]]
// CHECK: scf.for %[[B:[a-z0-9_]+]] =
// CHECK: scf.for %[[H:[a-z0-9_]+]] =
// CHECK: scf.for %[[I:[a-z0-9_]+]] =
// CHECK: %[[HK:[0-9]+]] = arith.divui %[[H]], %{{.*}}
// CHECK: %[[L:[0-9]+]] = memref.load %[[LSE]][%[[B]], %[[H]], %[[I]]]
// CHECK: %[[LIVE:[0-9]+]] = arith.cmpf ogt, %[[L]], %[[NEGINF]]
// D_i = dot(dO_i, o_i)
// CHECK: memref.load %[[DO]][%[[B]], %[[H]], %[[I]], %{{.*}}]
// CHECK: memref.load %[[O]][%[[B]], %[[H]], %[[I]], %{{.*}}]
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %{{[a-z0-9_]+}} step %{{[a-z0-9_]+}} {
// CHECK:   %[[KEEP:.*]] = arith.andi %[[LIVE]], %{{.*}} : i1
// CHECK:   math.tanh
// CHECK:   %[[E:.*]] = math.exp
// CHECK:   %[[P:.*]] = arith.select %[[KEEP]], %[[E]], %{{.*}}
// CHECK:   arith.subf %{{.*}}, %{{.*}} : f32
// CHECK:   %[[DS0:.*]] = arith.mulf %[[P]], %{{.*}} : f32
// softcap's derivative: 1 - (s / softcap)^2
// CHECK:   arith.divf
// CHECK:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:   arith.subf %[[ONE]], %{{.*}} : f32
// CHECK:   scf.for
// CHECK:     memref.load %[[DQ32]][%[[B]], %[[H]], %[[I]], %{{.*}}]
// CHECK:   scf.for
// CHECK:     memref.load %[[DK32]][%[[B]], %[[HK]], %[[J]], %{{.*}}]
// CHECK:   scf.for
// CHECK:     memref.load %[[DV32]][%[[B]], %[[HK]], %[[J]], %{{.*}}]
// CHECK: memref.load %[[DQ32]]
// CHECK: memref.store %{{.*}}, %[[DQ]]
// CHECK: memref.dealloc %[[DQ32]]
// CHECK: memref.dealloc %[[DK32]]
// CHECK: memref.dealloc %[[DV32]]
// CHECK-NOT: attn.flash_attention_grad
func.func @grad(%q: memref<2x4x?x16xbf16>, %k: memref<2x2x?x16xbf16>, %v: memref<2x2x?x8xbf16>,
                %o: memref<2x4x?x8xbf16>, %do: memref<2x4x?x8xbf16>, %lse: memref<2x4x?xf32>,
                %dq: memref<2x4x?x16xbf16>, %dk: memref<2x2x?x16xbf16>, %dv: memref<2x2x?x8xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<2x4x?x16xbf16>, memref<2x2x?x16xbf16>, memref<2x2x?x8xbf16>, memref<2x4x?x8xbf16>, memref<2x4x?x8xbf16>, memref<2x4x?xf32>)
      outs(%dq, %dk, %dv : memref<2x4x?x16xbf16>, memref<2x2x?x16xbf16>, memref<2x2x?x8xbf16>) causal softcap(4.0)
  return
}
