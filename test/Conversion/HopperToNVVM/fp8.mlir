// convert-hopper-to-nvvm on FP8's ops. P rounds to e4m3 two columns at a
// time (cvt's first source is the high byte): register 4c + 2h + i holds
// row i's columns {0, 1} of n8 blocks 4c + 2h and 4c + 2h + 1. wgmma on
// e4m3 takes k-steps of 32 (32 bytes, as 16-bit k-steps of 16); the
// register-A form has no transpose operand, its K-major B steps 32 bytes
// (2 descriptor units) along its rows. The transposer's warps take units
// of 64 keys x 32 columns in turn (from their index, by the warp count):
// per group of 16 keys four loads of the keys 16 G + 2 q + {0, 1, 8, 9},
// three byte permutes per stored word, four stores; then the async-proxy
// fence.
// RUN: fa3-opt %s --split-input-file --convert-hopper-to-nvvm | FileCheck %s

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
// Units of 64 keys x 32 columns: 2 x 4 of them, W, W + 3, ... < 8
// CHECK: %[[N:.*]] = arith.constant 8 : i32
// CHECK: %[[STEP:.*]] = arith.constant 3 : i32
// CHECK: scf.for %{{.*}} = %[[W]] to %[[N]] step %[[STEP]] : i32 {
// The unit's first group (4 per unit, 2048 bytes each) ...
// CHECK: %[[G0:.*]] = arith.muli %{{.*}}, %c4_i32 : i32
// CHECK: arith.shli %[[G0]], %c11_i32 : i32
// ... its keys 2 q + {0, 1, 8, 9}, rows of 128 bytes, each lane's 16-byte
// unit XOR the key's row in its 8-row atom
// CHECK: %[[Q2:.*]] = arith.shli %{{.*}}, %c1_i32{{.*}} : i32
// CHECK: arith.andi %[[Q2]], %c7_i32 : i32
// CHECK: arith.muli %[[Q2]], %c128_i32 : i32
// CHECK: %[[K1:.*]] = arith.addi %[[Q2]], %c1_i32{{.*}} : i32
// CHECK: arith.andi %[[K1]], %c7_i32{{.*}} : i32
// CHECK: arith.muli %[[K1]], %c128_i32{{.*}} : i32
// CHECK: %[[K8:.*]] = arith.addi %[[Q2]], %c8_i32{{.*}} : i32
// CHECK: arith.muli %[[K8]], %c128_i32{{.*}} : i32
// CHECK: %[[K9:.*]] = arith.addi %[[Q2]], %c9_i32 : i32
// CHECK: arith.muli %[[K9]], %c128_i32{{.*}} : i32
// Column j's selector: bytes j and 4 + j (0x11 j + 0x40); its row of the
// destination at 128 j bytes, the group's 16-byte unit XOR the row's.
// CHECK: arith.muli %{{.*}}, %c17_i32 : i32
// CHECK: arith.addi %{{.*}}, %c64_i32 : i32
// CHECK: %[[LO:.*]] = arith.constant 21520 : i32
// Two groups of 16 keys at a time: their eight loads (the second group's
// 2048 bytes further), then per group four stores of three permutes each
// (the pair of keys' bytes, then 0x5410: the four keys in order).
// CHECK-COUNT-4: llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK: arith.constant 2048 : i32
// CHECK-COUNT-4: llvm.load
// CHECK-COUNT-2: nvvm.prmt <default>
// CHECK-NEXT: nvvm.prmt <default> %[[LO]]
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<3>
// CHECK-COUNT-3: nvvm.prmt <default>
// CHECK: llvm.store
// CHECK-COUNT-3: nvvm.prmt <default>
// CHECK: llvm.store
// CHECK-COUNT-3: nvvm.prmt <default>
// CHECK: llvm.store
// The second group's units: XOR 16.
// CHECK-COUNT-3: nvvm.prmt <default>
// CHECK-NEXT: arith.constant 16 : i32
// CHECK-NEXT: arith.xori
// CHECK: arith.constant 4096 : i32
// CHECK-COUNT-8: llvm.load
// CHECK: arith.constant 32 : i32
// CHECK: arith.constant 48 : i32
// CHECK-COUNT-4: llvm.store
// CHECK-NOT: llvm.store
// CHECK-NOT: llvm.store
// CHECK: }
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
func.func @transpose(%smem: !llvm.ptr<3>, %u: i32, %w: i32) {
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.transpose_stage %v[%u] to %vt worker %w of 3 rows 128 cols 128 : !v, !vt
  return
}
