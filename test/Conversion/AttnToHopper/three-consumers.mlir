// Head dim 64 with a full mask: attn-hopper-config's default is 192 query
// rows (FA3's tile there), i.e. three consumer warpgroups of 64 rows: 512
// threads, setmaxnreg 160 for the consumers (64K registers less the
// producer's, over three), barriers counting 384 consumer threads, no
// ping-pong (the turns alternate between two), epilogue barrier 3 + c
// (checked after convert-hopper-to-nvvm, which assigns the ids).
// Causal keeps 128 rows.
// RUN: fa3-opt %s --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config=lazy-rescale=on --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s --check-prefix=VOTE
// RUN: sed -e 's/outs(%o : memref<?x4x?x64xbf16>)/& causal/' %s | fa3-opt --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s --check-prefix=CAUSAL

// CHECK: block_m = 192 : i64
// CHECK-SAME: pingpong = false
// CHECK-SAME: stages = 2 : i64
// CHECK-SAME: threads = 512 : i64
// CHECK-SAME: nvvm.maxntid = array<i32: 512, 1, 1>
// CHECK: nvvm.mbarrier.init %{{.*}}, %c384_i32
// CHECK: nvvm.setmaxregister decrease 24
// CHECK: arith.divui %{{.*}}, %c192_i32 : i32
// CHECK: nvvm.setmaxregister increase 160
// CHECK-NOT: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: %[[EPI:.*]] = arith.addi %{{.*}}, %c3_i32{{.*}} : i32
// CHECK: nvvm.barrier id = %[[EPI]] number_of_threads = %c128_i32
// CHECK-NOT: number_of_threads = %c256_i32

// The lazy-rescale vote takes the barriers after the three epilogue ones.
// VOTE: %[[VB:.*]] = arith.addi %{{.*}}, %c6_i32{{.*}} : i32
// VOTE: bar.red.or.pred p, $2, 128, q;{{.*}}%[[VB]] : (i32, i32) -> i32

// CAUSAL: block_m = 128 : i64
// CAUSAL-SAME: pingpong = true
// CAUSAL-SAME: stages = 4 : i64
// CAUSAL-SAME: threads = 384 : i64
// CAUSAL: } consumers(%{{.*}} of 2) regs 240 {
func.func @attn(%q: memref<?x4x?x64xbf16>, %k: memref<?x2x?x64xbf16>, %v: memref<?x2x?x64xbf16>,
                %o: memref<?x4x?x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16>)
    outs(%o : memref<?x4x?x64xbf16>)
  return
}
