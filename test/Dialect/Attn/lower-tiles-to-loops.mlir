// The CPU expansion of the tile ops: the kernel's online softmax
// (buildOnlineSoftmaxStep: the row max scaled once, p = exp2(fma(s, sl2, -mu)),
// the -inf guard, exact or lazy rescaling), the mask only in masked tiles,
// and the optional tile counters.
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops | FileCheck %s
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops | FileCheck %s --check-prefix=EXACT
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16 rescale-threshold=8" --attn-lower-tiles-to-loops | FileCheck %s --check-prefix=LAZY
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops="count-blocks=true" | FileCheck %s --check-prefix=COUNT

// CHECK-LABEL: func @causal
// CHECK-NOT: attn.tile_update
// CHECK: scf.if
// Masked branch: the visibility test of the causal band (j < i + off + 1),
// then the unscaled score is stored and enters the row max.
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c1{{.*}} : index
// CHECK-NEXT: %[[VIS:.*]] = arith.cmpi slt, %{{.*}}, %[[END]] : index
// CHECK-NEXT: %[[S:.*]] = arith.select %[[VIS]]
// CHECK-NEXT: memref.store %[[S]]
// CHECK-NEXT: arith.maxnumf %{{.*}}, %[[S]] : f32
// Exact rule: m' = max(m, rowmax * sl2), no compare against a threshold.
// CHECK: %[[MOLD:[0-9]+]] = memref.load {{.*}} : memref<32xf32>
// CHECK-NEXT: %[[MXS:.*]] = arith.mulf %{{.*}}, %[[SL2:.*]] : f32
// CHECK-NEXT: %[[MNEW:.*]] = arith.maxnumf %[[MOLD]], %[[MXS]] : f32
// CHECK-NOT: arith.cmpf ogt
// CHECK: %[[NINF:.*]] = arith.cmpf oeq, %[[MNEW]], %{{.*}} : f32
// CHECK: %[[MU:.*]] = arith.select %[[NINF]], %{{.*}}, %[[MNEW]] : f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[MOLD]], %[[MU]] : f32
// CHECK-NEXT: %[[ALPHA:.*]] = math.exp2 %[[D]] : f32
// CHECK-NEXT: %[[NEGMU:.*]] = arith.negf %[[MU]] : f32
// CHECK: %[[X:.*]] = math.fma %{{.*}}, %[[SL2]], %[[NEGMU]] : f32
// CHECK-NEXT: math.exp2 %[[X]]
// l = fma(l, alpha, rowsum); m stored; acc * alpha.
// CHECK: math.fma %{{.*}}, %[[ALPHA]], %{{.*}} : f32
// CHECK: memref.store %[[MNEW]]
// CHECK: arith.mulf %{{.*}}, %[[ALPHA]] : f32
// CHECK: } else {
// Unmasked branch: the dot product straight into the store, no visibility
// test.
// CHECK-NOT: arith.select
// CHECK: memref.store %[[DOT:[0-9]+]]
// CHECK-NEXT: arith.maxnumf %{{.*}}, %[[DOT]] : f32
// CHECK: math.exp2
// CHECK: }
// Finalize: lse = (m + log2 l) * ln 2.
// CHECK: math.log2
// CHECK: arith.constant 0.693147182 : f32
// CHECK-NOT: attn.tile_finalize

// Without a threshold, neither tile step (each ends by freeing its score
// row) compares against one.
// EXACT-LABEL: func @causal
// EXACT-NOT: arith.cmpf ogt
// EXACT: memref.dealloc {{.*}} : memref<16xf32>
// EXACT-NOT: arith.cmpf ogt
// EXACT: memref.dealloc {{.*}} : memref<16xf32>

// Lazy rule (threshold 8): m rises only past m + 8, alpha is 1 where it
// did not.
// LAZY-LABEL: func @causal
// LAZY: %[[MOLD:[0-9]+]] = memref.load {{.*}} : memref<32xf32>
// LAZY-NEXT: %[[MXS:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// LAZY-NEXT: %[[TAU:.*]] = arith.constant 8.000000e+00 : f32
// LAZY-NEXT: %[[BOUND:.*]] = arith.addf %[[MOLD]], %[[TAU]] : f32
// LAZY-NEXT: %[[RAISE:.*]] = arith.cmpf ogt, %[[MXS]], %[[BOUND]] : f32
// LAZY-NEXT: %[[MNEW:.*]] = arith.select %[[RAISE]], %[[MXS]], %[[MOLD]] : f32
// LAZY-NOT: arith.maxnumf
// LAZY: %[[MU:.*]] = arith.select %{{.*}}, %{{.*}}, %[[MNEW]] : f32
// LAZY-NEXT: %[[D:.*]] = arith.subf %[[MOLD]], %[[MU]] : f32
// LAZY-NEXT: %[[E:.*]] = math.exp2 %[[D]] : f32
// LAZY-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// LAZY-NEXT: %[[ALPHA:.*]] = arith.select %[[RAISE]], %[[E]], %[[ONE]] : f32
// LAZY: math.fma %{{.*}}, %[[ALPHA]], %{{.*}} : f32
// LAZY: memref.store %[[MNEW]]
// LAZY: arith.mulf %{{.*}}, %[[ALPHA]] : f32
// LAZY: } else {
// LAZY: arith.cmpf ogt
func.func @causal(%q: memref<1x1x100x8xf32>, %k: memref<1x1x100x8xf32>, %v: memref<1x1x100x8xf32>,
                  %o: memref<1x1x100x8xf32>, %lse: memref<1x1x100xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x1x100x8xf32>, memref<1x1x100x8xf32>, memref<1x1x100x8xf32>)
    outs(%o, %lse : memref<1x1x100x8xf32>, memref<1x1x100xf32>) causal
  return
}

// COUNT: memref.global "private" @attn_tiles_masked : memref<i64> = dense<0>
// COUNT: memref.global "private" @attn_tiles_visited : memref<i64> = dense<0>
// COUNT: func.func @attn_tile_counters(%{{.*}}: memref<2xi64>) attributes {llvm.emit_c_interface}
