// The FP8 kernels' <kernel>_quantize (the GPU form of attn.quantize,
// fa3rt_quantize): generated beside every e4m3 attention kernel, for its
// head dim, and beside no other. At head dim 256: 512 threads, a row over
// 4 lanes, each lane 64 of its columns in 8 chunks of 8 (16-byte loads,
// clamped to row S - 1 and zeroed past it), bf16 or f16 widened by the
// launch's xIsF16; where signs are given, the Hadamard transform (6
// in-lane butterfly stages, 2 shuffle stages) and the signs / sqrt(256);
// the amax as an unsigned max of the bits, across the warp by redux.sync
// and across warps through shared memory; mode 1 stores it, modes 0 and 2
// the descale and the e4m3 row (8 bytes a chunk).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s
// A standalone attn.quantize has no kernel of its own on Hopper:
// RUN: not fa3-opt %S/Inputs/standalone-quantize.mlir --attn-hopper-pipeline=format=none 2>&1 | FileCheck %s --check-prefix=ALONE
// ALONE: standalone-quantize.mlir:2:10: error: 'attn.quantize' op has no Hopper kernel of its own: its GPU form is the <kernel>_quantize that every FP8 attention kernel carries (launched by fa3rt_quantize, fa3.quantize_fp8); its CPU form is attn-cpu-reference-pipeline

// CHECK-LABEL: gpu.module @d256_kernels
// CHECK: llvm.mlir.global internal @fa3_quantize_amax() {addr_space = 3 : i32, alignment = 4 : i64} : !llvm.array<32 x i32>
// CHECK: gpu.func @d256_kernel_quantize(%[[X:.*]]: !llvm.ptr<1>, %{{.*}}: i64, %[[XS:.*]]: i64, %{{.*}}: i64, %[[F16:.*]]: i32, %[[Y:.*]]: !llvm.ptr<1>, %{{.*}}: i64, %[[YS:.*]]: i64, %{{.*}}: i64, %[[DESCALE:.*]]: !llvm.ptr<1>, %[[SIGNS:.*]]: !llvm.ptr<1>, %[[AMAX:.*]]: !llvm.ptr<1>, %{{.*}}: i32, %[[S:.*]]: i32, %{{.*}}: i32, %[[MODE:.*]]: i32) kernel attributes {nvvm.maxntid = array<i32: 512, 1, 1>
// CHECK-DAG: %[[INVSQRT:.*]] = arith.constant 6.250000e-02 : f32
// CHECK-DAG: %[[AMAXMIN:.*]] = arith.constant 5.26621469E-36 : f32
// CHECK-DAG: %[[E4M3MAX:.*]] = arith.constant 4.480000e+02 : f32
// The lane's row (one of the warp's 8, lane / 4), clamped and checked
// against S; chunk c of lane l at column 32 c + 8 l.
// CHECK: %[[S64:.*]] = arith.extui %[[S]] : i32 to i64
// CHECK: %[[LAST:.*]] = arith.subi %[[S64]], %c1_i64 : i64
// CHECK: arith.divui %{{.*}}, %c4_i32 : i32
// CHECK: arith.remui %{{.*}}, %c4_i32 : i32
// CHECK: %[[COL:.*]] = arith.muli %{{.*}}, %c8_i64 : i64
// CHECK: arith.minui %{{.*}}, %[[LAST]] : i64
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xi16>
// CHECK: arith.addi %[[COL]], %c32_i64 : i64
// CHECK-COUNT-7: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xi16>
// CHECK: %[[ISF16:.*]] = arith.cmpi ne, %[[F16]], %c0_i32 : i32
// CHECK: scf.if %[[ISF16]] -> (vector<8xf32>, {{.*}}) {
// CHECK: arith.extf %{{.*}} : vector<8xf16> to vector<8xf32>
// CHECK: } else {
// CHECK: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK-COUNT-8: arith.select %{{.*}}, %{{.*}}#{{[0-7]}}, %{{.*}} : vector<8xf32>
// The rotation, where signs are given.
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr<1>
// CHECK: %[[ROT:.*]] = llvm.icmp "ne" %[[SIGNS]], %[[NULL]] : !llvm.ptr<1>
// CHECK: scf.if %[[ROT]] -> (f32, f32,
// CHECK: arith.addf
// CHECK: arith.subf
// CHECK-COUNT-64: nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c1_i32, %c31_i32 : f32 -> f32
// CHECK-COUNT-64: nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c2_i32, %c31_i32 : f32 -> f32
// CHECK-NOT: nvvm.shfl.sync
// CHECK: %[[SG4:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: %[[SG:.*]] = vector.extract %[[SG4]][0] : f32 from vector<4xf32>
// CHECK: arith.mulf %[[SG]], %[[INVSQRT]] : f32
// CHECK: } else {
// The amax: bits with the sign cleared, or (mode 2) the head's word.
// CHECK: %[[HEADPASS:.*]] = arith.cmpi eq, %[[MODE]], %c2_i32 : i32
// CHECK: arith.andi %{{.*}}, %c2147483647_i32 : i32
// CHECK: arith.maxui
// CHECK: scf.if %[[HEADPASS]] -> (i32) {
// CHECK: llvm.getelementptr %[[AMAX]]
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK: %[[WARPMAX:.*]] = nvvm.redux.sync  umax %{{.*}}, %c-1_i32 : i32 -> i32
// CHECK: llvm.mlir.addressof @fa3_quantize_amax : !llvm.ptr<3>
// CHECK: llvm.store %[[WARPMAX]], %{{.*}} : i32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-16: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK: %[[BITS:.*]] = arith.maxui
// CHECK: %[[AMAXF:.*]] = arith.bitcast %[[BITS]] : i32 to f32
// Mode 1: the block's amax maxed into its head's word, nothing else.
// CHECK: %[[AMAXPASS:.*]] = arith.cmpi eq, %[[MODE]], %c1_i32 : i32
// CHECK: llvm.getelementptr %[[AMAX]]
// CHECK: llvm.atomicrmw umax %{{.*}}, %[[BITS]] monotonic : !llvm.ptr<1>, i32
// CHECK: %[[QUANT:.*]] = arith.cmpi ne, %[[MODE]], %c1_i32 : i32
// CHECK: scf.if %[[QUANT]] {
// CHECK: %[[OK:.*]] = arith.cmpf oge, %[[AMAXF]], %[[AMAXMIN]] : f32
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[AMAXF]], %cst{{.*}} : f32
// CHECK: arith.divf %[[SAFE]], %[[E4M3MAX]] : f32
// CHECK: %[[SC:.*]] = arith.divf %[[E4M3MAX]], %[[SAFE]] : f32
// CHECK: %[[SCALE:.*]] = arith.select %[[OK]], %[[SC]], %cst{{.*}} : f32
// CHECK: llvm.getelementptr %[[DESCALE]]
// CHECK: %[[LO:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[HI:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: nvvm.convert.f32x2.to.f8x2 %[[HI]], %[[LO]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK: llvm.bitcast %{{.*}} : vector<4xi16> to i64
// CHECK: llvm.getelementptr %[[Y]]
// CHECK-COUNT-8: llvm.store %{{.*}} {alignment = 8 : i64} : i64, !llvm.ptr<1>
// CHECK: gpu.return
func.func @d256(%q: memref<1x2x256x256xf8E4M3FN>, %k: memref<1x2x256x256xf8E4M3FN>,
                %v: memref<1x2x256x256xf8E4M3FN>, %o: memref<1x2x256x256xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x2x256x256xf8E4M3FN>, memref<1x2x256x256xf8E4M3FN>, memref<1x2x256x256xf8E4M3FN>)
    outs(%o : memref<1x2x256x256xbf16>)
  return
}

// -----

// Head dim 64: 128 threads (4 CTAs an SM), a row over 2 lanes (32 columns
// a lane), 2 rows a lane, one shuffle stage, 1/8; a bf16 kernel has none.
// CHECK-LABEL: gpu.func @d64_kernel_quantize(
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 4 : i32
// CHECK-DAG: arith.constant 1.250000e-01 : f32
// CHECK-COUNT-8: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xi16>
// CHECK-COUNT-64: nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c1_i32, %c31_i32 : f32 -> f32
// CHECK-NOT: nvvm.shfl.sync
// CHECK: llvm.store %{{.*}} {alignment = 8 : i64} : i64, !llvm.ptr<1>
// CHECK-LABEL: gpu.module @bf16_kernels
// CHECK-NOT: _quantize
func.func @d64(%q: memref<1x2x256x64xf8E4M3FN>, %k: memref<1x2x256x64xf8E4M3FN>,
               %v: memref<1x2x256x64xf8E4M3FN>, %o: memref<1x2x256x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x2x256x64xf8E4M3FN>, memref<1x2x256x64xf8E4M3FN>, memref<1x2x256x64xf8E4M3FN>)
    outs(%o : memref<1x2x256x64xbf16>)
  return
}
func.func @bf16(%q: memref<1x2x256x64xbf16>, %k: memref<1x2x256x64xbf16>,
                %v: memref<1x2x256x64xbf16>, %o: memref<1x2x256x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<1x2x256x64xbf16>, memref<1x2x256x64xbf16>, memref<1x2x256x64xbf16>)
    outs(%o : memref<1x2x256x64xbf16>)
  return
}
