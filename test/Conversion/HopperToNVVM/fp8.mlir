// convert-hopper-to-nvvm on FP8's ops. P rounds to e4m3 two columns at a
// time (cvt's first source is the high byte): register 4c + 2h + i holds
// row i's columns {0, 1} of n8 blocks 4c + 2h and 4c + 2h + 1. wgmma on
// e4m3 takes k-steps of 32 (32 bytes, as 16-bit k-steps of 16); the
// register-A form has no transpose operand, its K-major B steps 32 bytes
// (2 descriptor units) along its rows. The transposer's warps take units
// of 64 keys (or unit_keys) x 32 columns in turn (from their index, by the
// warp count):
// per group of 16 keys one ldmatrix.x4.trans (lane l: key l % 16 of the
// group, 16-byte column unit l / 16 of the unit's two), two byte permutes
// per pair of its matrices, one stmatrix.x4; then the async-proxy fence.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --convert-hopper-to-nvvm | FileCheck %s

// CHECK-LABEL: func.func @trunc(
// CHECK-SAME: %[[S:[^:]*]]: !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-COUNT-16: llvm.extractvalue %[[S]]
// CHECK: %[[A0:.*]] = nvvm.convert.f32x2.to.f8x2 %1, %0 {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK-NEXT: %[[A1:.*]] = nvvm.convert.f32x2.to.f8x2 %5, %4 {{.*}} : i16(f8E4M3FN)
// CHECK-NEXT: %[[V:.*]] = vector.from_elements %[[A0]], %[[A1]] : vector<2xi16>
// CHECK-NEXT: %[[R0:.*]] = llvm.bitcast %[[V]] : vector<2xi16> to i32
// CHECK-NEXT: nvvm.convert.f32x2.to.f8x2 %3, %2
// CHECK-NEXT: nvvm.convert.f32x2.to.f8x2 %7, %6
// CHECK: nvvm.convert.f32x2.to.f8x2 %9, %8
// CHECK-NEXT: nvvm.convert.f32x2.to.f8x2 %13, %12
// CHECK: nvvm.convert.f32x2.to.f8x2 %11, %10
// CHECK-NEXT: nvvm.convert.f32x2.to.f8x2 %15, %14
// CHECK: llvm.insertvalue %[[R0]], %{{.*}}[0] : !llvm.struct<(i32, i32, i32, i32)>
func.func @trunc(%s: !hopper.frag<64x32xf32>) -> !hopper.frag<64x32xf8E4M3FN> {
  %p = hopper.trunc %s : !hopper.frag<64x32xf32> to !hopper.frag<64x32xf8E4M3FN>
  return %p : !hopper.frag<64x32xf8E4M3FN>
}

// -----

// CHECK-LABEL: func.func @rs(
// CHECK-SAME: %{{[^:]*}}: !llvm.struct<(i32, i32, i32, i32, i32, i32, i32, i32)>, %[[D:[^:]*]]: i64
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {$0, $1, $2, $3, $4, $5, $6, $7}, {$16, $17, $18, $19}, $20, p, 1, 1;{{.*}} %{{.*}}, %0, %1, %2, %3, %[[D]],
// CHECK: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[D1:.*]] = arith.addi %[[D]], %[[C2]] : i64
// CHECK: llvm.inline_asm has_side_effects {{.*}}m64n16k32.f32.e4m3.e4m3{{.*}} %4, %5, %6, %7, %[[D1]],
// CHECK: nvvm.wgmma.commit.group.sync.aligned
func.func @rs(%p: !hopper.frag<64x64xf8E4M3FN>, %d: i64, %o: !hopper.frag<64x16xf32>) -> !hopper.frag<64x16xf32> {
  %o1 = hopper.wgmma.rs %p, %d, %o : !hopper.frag<64x64xf8E4M3FN>, !hopper.frag<64x16xf32>
  return %o1 : !hopper.frag<64x16xf32>
}

// -----

// S = Q K^T with Q in registers: the accumulator is hopper.zero, so the
// first k-step takes undefined inputs and scale-d 0 ($21 = 0), the next
// accumulates (1).
// CHECK-LABEL: func.func @rs_from_zero(
// CHECK-SAME: %[[D:[^:]*]]: i64
// CHECK: %[[U:.*]] = llvm.mlir.undef : f32
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[S0:.*]] = llvm.inline_asm has_side_effects {{.*}}setp.ne.b32 p, $21, 0;{{.*}}m64n16k32.f32.e4m3.e4m3{{.*}} %[[U]], %[[U]], %[[U]], %[[U]], %[[U]], %[[U]], %[[U]], %[[U]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %[[Z]] :
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}m64n16k32.f32.e4m3.e4m3{{.*}}, %[[ONE]] :
// CHECK: nvvm.wgmma.commit.group.sync.aligned
func.func @rs_from_zero(%q: !hopper.frag<64x64xf8E4M3FN>, %d: i64) -> !hopper.frag<64x16xf32> {
  %z = hopper.zero : !hopper.frag<64x16xf32>
  %s = hopper.wgmma.rs %q, %d, %z : !hopper.frag<64x64xf8E4M3FN>, !hopper.frag<64x16xf32>
  return %s : !hopper.frag<64x16xf32>
}

// -----

// Q loaded as S's A operand: one ldmatrix.x4 (not transposed) a 32-byte
// k-step; lane l addresses row 16 w + 8 (l / 8 % 2) + l % 8 (128 bytes a
// row) and 16-byte unit 2 kk + l / 16, swizzled by the row's l % 8.
// CHECK-LABEL: func.func @load_shared(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[OFF:[^:]*]]: i32
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c32_i32 : i32
// CHECK: %[[R8:.*]] = arith.remui %[[LANE]], %c8_i32 : i32
// CHECK: %[[HI:.*]] = arith.shrui %{{.*}}, %c1_i32 : i32
// CHECK: %[[ROW:.*]] = arith.addi %{{.*}}, %[[R8]] : i32
// CHECK: %[[RB:.*]] = arith.muli %[[ROW]], %c128_i32{{.*}} : i32
// CHECK-NEXT: %[[BASE:.*]] = arith.addi %[[OFF]], %[[RB]] : i32
// CHECK: %[[X0:.*]] = arith.xori %[[HI]], %[[R8]] : i32
// CHECK-NEXT: %[[B0:.*]] = arith.muli %[[X0]], %c16_i32{{.*}} : i32
// CHECK-NEXT: %[[A0:.*]] = arith.addi %[[BASE]], %[[B0]] : i32
// CHECK-NEXT: %[[P0:.*]] = llvm.getelementptr %[[SMEM]][%[[A0]]]
// CHECK-NEXT: nvvm.ldmatrix %[[P0]] {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK: %[[U1:.*]] = arith.addi %[[HI]], %c2_i32{{.*}} : i32
// CHECK-NEXT: %[[X1:.*]] = arith.xori %[[U1]], %[[R8]] : i32
// CHECK: nvvm.ldmatrix
// CHECK-NOT: nvvm.ldmatrix
func.func @load_shared(%smem: !llvm.ptr<3>, %off: i32) -> !hopper.frag<64x64xf8E4M3FN> {
  %q = hopper.load_shared %smem [%off] box_bytes 0 : !hopper.frag<64x64xf8E4M3FN>
  return %q : !hopper.frag<64x64xf8E4M3FN>
}

// -----

// K = 224 (FA3's 224-key tile): k-steps 0 .. 3 step 32 bytes along B's
// first box, 4 .. 6 along its second, b_box_bytes (16384 = 1024 units) on.
// CHECK-LABEL: func.func @rs_two_boxes(
// CHECK-SAME: %[[D:[^:]*]]: i64
// CHECK: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3{{.*}} %[[D]],
// CHECK: arith.constant 2 : i64
// CHECK: arith.constant 4 : i64
// CHECK: arith.constant 6 : i64
// CHECK: %[[B1:.*]] = arith.constant 1024 : i64
// CHECK-NEXT: %[[D4:.*]] = arith.addi %[[D]], %[[B1]] : i64
// CHECK: m64n128k32{{.*}} %[[D4]],
// CHECK: arith.constant 1026 : i64
// CHECK: %[[B3:.*]] = arith.constant 1028 : i64
// CHECK-NEXT: %[[D6:.*]] = arith.addi %[[D]], %[[B3]] : i64
// CHECK: m64n128k32{{.*}} %[[D6]],
// CHECK-NOT: m64n128k32
// CHECK: nvvm.wgmma.commit.group.sync.aligned
func.func @rs_two_boxes(%p: !hopper.frag<64x224xf8E4M3FN>, %d: i64, %o: !hopper.frag<64x128xf32>) -> !hopper.frag<64x128xf32> {
  %o1 = hopper.wgmma.rs %p, %d, %o b_box_bytes 16384 : !hopper.frag<64x224xf8E4M3FN>, !hopper.frag<64x128xf32>
  return %o1 : !hopper.frag<64x128xf32>
}

// -----

// k's block scales over a tile's columns: n8 block j (registers 4 j ..
// 4 j + 3) takes factor (first % 128 + 8 j) / 128, one index for all four
// of its registers.
// CHECK-LABEL: func.func @scale_key_blocks(
// CHECK-SAME: %{{[^:]*}}: !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>, %[[K0:[^:]*]]: i32, %[[F0:[^:]*]]: f32, %[[F1:[^:]*]]: f32)
// CHECK: %[[IN:.*]] = arith.andi %[[K0]], %c127_i32 : i32
// CHECK: %[[IDX:.*]] = arith.shrui %[[IN]], %c7_i32 : i32
// CHECK: %[[IS0:.*]] = arith.cmpi eq, %[[IDX]], %c0_i32{{[_0-9]*}} : i32
// CHECK: %[[F:.*]] = arith.select %[[IS0]], %[[F0]], %[[F1]] : f32
// CHECK-COUNT-4: arith.mulf %{{.*}}, %[[F]] : f32
// CHECK: %[[C8:.*]] = arith.constant 8 : i32
// CHECK: arith.addi %[[IN]], %[[C8]] : i32
// CHECK: arith.select
// CHECK-COUNT-4: arith.mulf
// CHECK-NOT: arith.mulf
func.func @scale_key_blocks(%s: !hopper.frag<64x16xf32>, %k0: i32, %f0: f32, %f1: f32) -> !hopper.frag<64x16xf32> {
  %s2 = hopper.scale_key_blocks %s first %k0 by %f0, %f1 : !hopper.frag<64x16xf32>
  return %s2 : !hopper.frag<64x16xf32>
}

// -----

// Columns 0 .. 255 in boxes of 128 (8192 and 2048 bytes apart): k-step 4
// starts A's second box (+512 units) and B's (+128).
// CHECK-LABEL: func.func @ss(
// CHECK: nvvm.wgmma.mma_async %arg0, %arg1, %{{.*}}, <m = 64, n = 16, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK: arith.constant 2 : i64
// CHECK: arith.constant 2 : i64
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<e4m3>
// CHECK: %[[A4:.*]] = arith.constant 512 : i64
// CHECK-NEXT: arith.addi %arg0, %[[A4]]
// CHECK-NEXT: %[[B4:.*]] = arith.constant 128 : i64
// CHECK-NEXT: arith.addi %arg1, %[[B4]]
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
func.func @ss(%a: i64, %b: i64) -> !hopper.frag<64x16xf32> {
  %s = hopper.wgmma.ss %a, %b k 256 boxes 8192, 2048 : f8E4M3FN -> !hopper.frag<64x16xf32>
  return %s : !hopper.frag<64x16xf32>
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[U:[^:]*]]: i32, %[[W:[^:]*]]: i32)
// The slot's stage in both rings: data + stage * stage_bytes.
// CHECK: %[[ST:.*]] = arith.remui %[[U]], %{{.*}} : i32
// CHECK: %[[SRC0:.*]] = arith.muli %[[ST]], %{{.*}} : i32
// CHECK: arith.addi %[[SRC0]], %c32768_i32 : i32
// CHECK: %[[DST0:.*]] = arith.muli %[[ST]], %{{.*}} : i32
// CHECK: arith.addi %[[DST0]], %c65536_i32 : i32
// CHECK: nvvm.read.ptx.sreg.tid.x
// The lane's rows: key l % 16 (128 bytes each); the store's column
// 16 (l / 16) + 2 rho + ((rho >= 4) ^ half), rho = l % 8, half = (l / 8) % 2.
// CHECK: %[[LANE:.*]] = arith.andi %{{.*}}, %c31_i32 : i32
// CHECK: %[[RHO:.*]] = arith.andi %[[LANE]], %c7_i32 : i32
// CHECK: %[[KEY:.*]] = arith.andi %[[LANE]], %c15_i32 : i32
// CHECK: %[[KROW:.*]] = arith.muli %[[KEY]], %c128_i32 : i32
// The selectors: threads t / 4 < 4 store the even column's word (bytes
// 0, 2, 4, 6 of the two matrices: 0x6420) in matrix 0, the others the odd
// one's (0x7531).
// CHECK: %[[LOW:.*]] = arith.cmpi ult, %[[LANE]], %c16_i32 : i32
// CHECK: %[[S0:.*]] = arith.select %[[LOW]], %c25632_i32, %c30001_i32 : i32
// CHECK: %[[S1:.*]] = arith.select %[[LOW]], %c30001_i32, %c25632_i32 : i32
// Units of 64 keys x 32 columns: 2 x 4 of them, W, W + 3, ... < 8
// CHECK: %[[N:.*]] = arith.constant 8 : i32
// CHECK: %[[STEP:.*]] = arith.constant 3 : i32
// CHECK: scf.for %{{.*}} = %[[W]] to %[[N]] step %[[STEP]] : i32 {
// The unit's first group (4 per unit, 2048 bytes each) ...
// CHECK: %[[G0:.*]] = arith.muli %{{.*}}, %c4_i32{{.*}} : i32
// CHECK: arith.shli %[[G0]], %c11_i32 : i32
// ... the 16-byte unit XOR the key's row in its 8-row atom
// CHECK: %[[CU:.*]] = arith.xori %{{.*}}, %[[RHO]] : i32
// CHECK: %[[SRCIN:.*]] = arith.shli %[[CU]], %c4_i32{{.*}} : i32
// CHECK: %[[SRC:.*]] = arith.addi %{{.*}}, %[[KROW]] : i32
// CHECK: %[[SRC1:.*]] = arith.addi %[[SRC]], %[[SRCIN]] : i32
// Per group: the transposing load, four permutes, the store.
// CHECK: %[[P0:.*]] = llvm.getelementptr %[[SMEM]][%[[SRC1]]]
// CHECK: %[[M:.*]] = nvvm.ldmatrix %[[P0]] {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<col>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK: %[[R0:.*]] = llvm.extractvalue %[[M]][0]
// CHECK: %[[R1:.*]] = llvm.extractvalue %[[M]][1]
// CHECK: %[[R2:.*]] = llvm.extractvalue %[[M]][2]
// CHECK: %[[R3:.*]] = llvm.extractvalue %[[M]][3]
// CHECK: %[[W0:.*]] = nvvm.prmt <default> %[[S0]], %[[R0]], %[[R1]] : i32
// CHECK: %[[W1:.*]] = nvvm.prmt <default> %[[S1]], %[[R0]], %[[R1]] : i32
// CHECK: %[[W2:.*]] = nvvm.prmt <default> %[[S0]], %[[R2]], %[[R3]] : i32
// CHECK: %[[W3:.*]] = nvvm.prmt <default> %[[S1]], %[[R2]], %[[R3]] : i32
// CHECK: nvvm.stmatrix %{{.*}}, %[[W0]], %[[W1]], %[[W2]], %[[W3]] {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : !llvm.ptr<3>, i32, i32, i32, i32
// The next groups: loads 2048 bytes further, stores at the unit XOR 16 g.
// CHECK: arith.constant 2048 : i32
// CHECK: nvvm.ldmatrix
// CHECK: arith.constant 16 : i32
// CHECK-NEXT: arith.xori
// CHECK: nvvm.stmatrix
// CHECK: arith.constant 4096 : i32
// CHECK: nvvm.ldmatrix
// CHECK: arith.constant 32 : i32
// CHECK: nvvm.stmatrix
// CHECK: arith.constant 6144 : i32
// CHECK: nvvm.ldmatrix
// CHECK: arith.constant 48 : i32
// CHECK: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK-NOT: nvvm.ldmatrix
// CHECK: {{^ +}}}{{$}}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
func.func @transpose(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 : !v, !vt
  return
}

// -----

// Units of 128 keys (unit_keys 128): 1 x 4 of them, W, W + 3, ... < 4,
// each eight groups of 16 keys from one address computation: loads 2048
// bytes apart, stores at the unit XOR 16 g for g up to 7.
!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
// CHECK-LABEL: func.func @transpose_whole_block(
// CHECK: scf.for %{{.*}} = %{{.*}} to %c4_i32{{[_0-9]*}} step %c3_i32{{[_0-9]*}} : i32 {
// CHECK: %[[G0:.*]] = arith.muli %{{.*}}, %c8_i32{{.*}} : i32
// CHECK: nvvm.ldmatrix
// CHECK: nvvm.stmatrix
// CHECK: arith.constant 2048 : i32
// CHECK: nvvm.ldmatrix
// CHECK: arith.constant 16 : i32
// CHECK-NEXT: arith.xori
// CHECK: nvvm.stmatrix
// CHECK-COUNT-5: nvvm.stmatrix
// CHECK: arith.constant 14336 : i32
// CHECK: nvvm.ldmatrix
// CHECK: arith.constant 112 : i32
// CHECK-NEXT: arith.xori
// CHECK: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK-NOT: nvvm.ldmatrix
// CHECK: {{^ +}}}{{$}}
// CHECK-NEXT: nvvm.fence.proxy
func.func @transpose_whole_block(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 unit_keys 128 : !v, !vt
  return
}

// -----

// Units of 16 keys (unit_keys 16): 8 x 4 of them, each one group: one
// load and one store a unit.
!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
// CHECK-LABEL: func.func @transpose_one_group(
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32_i32{{[_0-9]*}} step %c3_i32{{[_0-9]*}} : i32 {
// CHECK: nvvm.ldmatrix
// CHECK: nvvm.stmatrix
// CHECK-NOT: nvvm.ldmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK: {{^ +}}}{{$}}
// CHECK-NEXT: nvvm.fence.proxy
func.func @transpose_one_group(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 unit_keys 16 : !v, !vt
  return
}

// -----

// 224 keys in units of 32 (two groups): 7 x 4 units, W, W + 3, ... < 28.
// A unit's first group G0 = 2 (unit % 7) lies in box G0 / 8 of the
// transposed V (128 rows of 128 bytes: 16384 bytes each), at 16-byte unit
// G0 % 8 there; the source's key rows are G0 x 2048 bytes on whatever the
// box.
!v = !hopper.ring<stages = 2, stage_bytes = 28672, data = 32768, full = 229376, empty = 229392, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 32768, data = 98304, full = 229408, empty = 229424, arrivals = 256, cluster = 1>
// CHECK-LABEL: func.func @transpose_two_boxes(
// CHECK: scf.for %[[UN:.*]] = %{{.*}} to %c28_i32{{[_0-9]*}} step %c3_i32{{[_0-9]*}} : i32 {
// CHECK: %[[CB:.*]] = arith.divui %[[UN]], %c7_i32{{[_0-9]*}} : i32
// CHECK: %[[G:.*]] = arith.remui %[[UN]], %c7_i32{{[_0-9]*}} : i32
// CHECK: %[[G0:.*]] = arith.muli %[[G]], %c2_i32{{[_0-9]*}} : i32
// CHECK: arith.shli %[[G0]], %c11_i32{{[_0-9]*}} : i32
// CHECK: %[[ROW:.*]] = arith.muli %{{.*}}, %c128_i32{{[_0-9]*}} : i32
// CHECK: %[[ROWS:.*]] = arith.addi %{{.*}}, %[[ROW]] : i32
// CHECK: %[[BOX:.*]] = arith.shrui %[[G0]], %c3_i32{{[_0-9]*}} : i32
// CHECK: %[[BOXOFF:.*]] = arith.muli %[[BOX]], %c16384_i32{{[_0-9]*}} : i32
// CHECK: %[[ROWB:.*]] = arith.addi %[[ROWS]], %[[BOXOFF]] : i32
// CHECK: %[[GIN:.*]] = arith.andi %[[G0]], %c7_i32{{[_0-9]*}} : i32
// CHECK: %[[X:.*]] = arith.xori %[[GIN]], %{{.*}} : i32
// CHECK: %[[XS:.*]] = arith.shli %[[X]], %c4_i32{{[_0-9]*}} : i32
// CHECK: arith.addi %[[ROWB]], %[[XS]] : i32
// CHECK: nvvm.ldmatrix
// CHECK: nvvm.stmatrix
// CHECK: arith.constant 2048 : i32
// CHECK: nvvm.ldmatrix
// CHECK: arith.constant 16 : i32
// CHECK-NEXT: arith.xori
// CHECK: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK-NOT: nvvm.ldmatrix
// CHECK: {{^ +}}}{{$}}
// CHECK-NEXT: nvvm.fence.proxy
func.func @transpose_two_boxes(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 224 cols 128 unit_keys 32 : !v, !vt
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// A transposer of four workers on three warps (hopper-producer-warp-transpose
// not run) would wait forever for the fourth: refused.
func.func @short_of_warp_zero(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        // expected-error @below {{counts 4 workers but 3 warp(s) run it: with one worker more than warps 1 .. 3, run hopper-producer-warp-transpose first (warp 0 is worker 0)}}
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}
