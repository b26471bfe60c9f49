// The CPU expansion of the tile ops: exp2 in the log2 domain, the -inf guard,
// the mask only in masked tiles, and the optional tile counters.
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops | FileCheck %s
// RUN: fa3-opt %s --attn-tile="block-m=32 block-n=16" --attn-lower-tiles-to-loops="count-blocks=true" | FileCheck %s --check-prefix=COUNT

// CHECK-LABEL: func @causal
// CHECK-NOT: attn.tile_update
// CHECK: scf.if
// Masked branch: the visibility test of the causal band (j < i + off + 1).
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c1{{.*}} : index
// CHECK-NEXT: %[[VIS:.*]] = arith.cmpi slt, %{{.*}}, %[[END]] : index
// CHECK-NEXT: arith.select %[[VIS]]
// CHECK-NEXT: memref.store
// CHECK: math.exp2
// CHECK: } else {
// Unmasked branch: scores straight into the store, no visibility test.
// CHECK: arith.mulf
// CHECK-NEXT: memref.store
// CHECK: math.exp2
// CHECK: }
// Finalize: lse = (m + log2 l) * ln 2.
// CHECK: math.log2
// CHECK: arith.constant 0.693147182 : f32
// CHECK-NOT: attn.tile_finalize
func.func @causal(%q: memref<1x1x100x8xf32>, %k: memref<1x1x100x8xf32>, %v: memref<1x1x100x8xf32>,
                  %o: memref<1x1x100x8xf32>, %lse: memref<1x1x100xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x1x100x8xf32>, memref<1x1x100x8xf32>, memref<1x1x100x8xf32>)
    outs(%o, %lse : memref<1x1x100x8xf32>, memref<1x1x100xf32>) causal
  return
}

// COUNT: memref.global "private" @attn_tiles_masked : memref<i64> = dense<0>
// COUNT: memref.global "private" @attn_tiles_visited : memref<i64> = dense<0>
// COUNT: func.func @attn_tile_counters(%{{.*}}: memref<2xi64>) attributes {llvm.emit_c_interface}
