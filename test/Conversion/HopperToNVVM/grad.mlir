// convert-hopper-to-nvvm on the backward's fragment ops (64x16 tiles: 8
// f32 registers a thread, register 4k + 2i + e at row i, column 8k + e
// from the thread's first).
// RUN: fa3-opt %s --split-input-file --convert-hopper-to-nvvm | FileCheck %s

// dQ = dS K with both operands MN-major: wgmma's "col" A and "row" B, and
// k-step kk 16 rows of 128 bytes on (2048 bytes = 128 units).
// CHECK-LABEL: func.func @ss_mn_major(
// CHECK-SAME: %[[DA:.*]]: i64, %[[DB:.*]]: i64)
// CHECK: nvvm.wgmma.mma_async %[[DA]], %[[DB]], {{.*}} D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK: %[[A1:.*]] = arith.addi %[[DA]], %c128_i64
// CHECK: %[[B1:.*]] = arith.addi %[[DB]], %c128_i64
// CHECK: nvvm.wgmma.mma_async %[[A1]], %[[B1]], {{.*}} D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
func.func @ss_mn_major(%da: i64, %db: i64) -> !hopper.frag<64x16xf32> {
  %d = hopper.wgmma.ss %da, %db k 32 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x16xf32>
  return %d : !hopper.frag<64x16xf32>
}

// -----

// With an accumulator: the first k-step adds to it (scale-d one), the
// accumulator the wgmma's input; a K-major A's k-step is 32 bytes on.
// CHECK-LABEL: func.func @ss_accumulate(
// CHECK-SAME: %[[DA:.*]]: i64, %[[DB:.*]]: i64, %[[C:.*]]: !llvm.struct
// CHECK: %[[D0:.*]] = nvvm.wgmma.mma_async %[[DA]], %[[DB]], %[[C]], {{.*}} D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: %[[A1:.*]] = arith.addi %[[DA]], %c2_i64
// CHECK: %[[B1:.*]] = arith.addi %[[DB]], %c128_i64
// CHECK: nvvm.wgmma.mma_async %[[A1]], %[[B1]], %[[D0]], {{.*}} D[<f32>, <one>]
// CHECK-NOT: nvvm.wgmma.mma_async
func.func @ss_accumulate(%da: i64, %db: i64, %c: !hopper.frag<64x16xf32>) -> !hopper.frag<64x16xf32> {
  %d = hopper.wgmma.ss %da, %db acc %c k 32 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x16xf32>
  return %d : !hopper.frag<64x16xf32>
}

// -----

// p = exp2(s sl2 - lse log2 e), with -mu = -inf where lse is infinite;
// ds = p (dp - delta).
// CHECK-LABEL: func.func @probs_scores(
// CHECK: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[NL2E:.*]] = arith.constant -1.44269502 : f32
// CHECK: %[[POS:.*]] = arith.cmpf oeq, %[[L:.*]], %[[INF]] : f32
// CHECK: %[[NEG:.*]] = arith.cmpf oeq, %[[L]], %[[NINF]] : f32
// CHECK: %[[ISINF:.*]] = arith.ori %[[POS]], %[[NEG]] : i1
// CHECK: %[[NMU:.*]] = arith.mulf %[[L]], %[[NL2E]] : f32
// CHECK: %[[NMU2:.*]] = arith.select %[[ISINF]], %[[NINF]], %[[NMU]] : f32
// CHECK: %[[X:.*]] = math.fma %{{.*}}, %{{.*}}, %[[NMU2]] : f32
// CHECK: math.exp2 %[[X]] : f32
// CHECK-COUNT-7: math.exp2
// CHECK: %[[D:.*]] = arith.subf %{{.*}}, %{{.*}} : f32
// CHECK: arith.mulf %{{.*}}, %[[D]] : f32
func.func @probs_scores(%s: !hopper.frag<64x16xf32>, %l: !hopper.frag<64x16xf32>, %sl2: f32, %dp: !hopper.frag<64x16xf32>) -> !hopper.frag<64x16xf32> {
  %p = hopper.grad_probs %s, %l scale %sl2 : !hopper.frag<64x16xf32>
  %ds = hopper.grad_scores %p, %dp, %l : !hopper.frag<64x16xf32>
  return %ds : !hopper.frag<64x16xf32>
}

// -----

// lse_neg_log2: the values are -lse log2 e already; p = exp2(s sl2 + value),
// no comparison, multiply or select before the FMA.
// CHECK-LABEL: func.func @probs_neg_log2(
// CHECK-NOT: arith.cmpf
// CHECK-NOT: arith.select
// CHECK: %[[X:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: math.exp2 %[[X]] : f32
// CHECK-COUNT-7: math.exp2
// CHECK-NOT: arith.cmpf
func.func @probs_neg_log2(%s: !hopper.frag<64x16xf32>, %l: !hopper.frag<64x16xf32>, %sl2: f32) -> !hopper.frag<64x16xf32> {
  %p = hopper.grad_probs %s, %l scale %sl2 lse_neg_log2 : !hopper.frag<64x16xf32>
  return %p : !hopper.frag<64x16xf32>
}

// -----

// The band: d = (col0 + colbase) - (row0 + row) in i64; a bound b is
// clamp(b + d, -512, 512) in i32, compared with register 4k + 2i + e's
// constant 8 i - 8 k - e (0, -1, 8, 7 for block 0; -8, -9, 0, -1 for
// block 1); a row past skv has an upper bound of -512.
// CHECK-LABEL: func.func @band_mask(
// CHECK-SAME: %[[S:[^:]*]]: !llvm.struct<{{.*}}>, %[[R0:[^:]*]]: i32, %[[C0:[^:]*]]: i32, %[[SKV:[^:]*]]: i32, %[[LO:[^:]*]]: i64, %[[HI:[^:]*]]: i64
// CHECK: %[[R:.*]] = arith.addi %[[R0]], %{{.*}} : i32
// CHECK: %[[C:.*]] = arith.addi %[[C0]], %{{.*}} : i32
// CHECK: %[[CW:.*]] = arith.extsi %[[C]] : i32 to i64
// CHECK: %[[RW:.*]] = arith.extsi %[[R]] : i32 to i64
// CHECK: %[[D:.*]] = arith.subi %[[CW]], %[[RW]] : i64
// CHECK: %[[LOD:.*]] = arith.addi %[[LO]], %[[D]] : i64
// CHECK: %[[LOA:.*]] = arith.maxsi %[[LOD]], %c-512_i64
// CHECK: %[[LOB:.*]] = arith.minsi %[[LOA]], %c512_i64
// CHECK: %[[LOS:.*]] = arith.trunci %[[LOB]] : i64 to i32
// CHECK: %[[HID:.*]] = arith.addi %[[HI]], %[[D]] : i64
// CHECK: %[[HIS:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK: %[[K0:.*]] = arith.cmpi slt, %[[R]], %[[SKV]] : i32
// CHECK: %[[H0:.*]] = arith.select %[[K0]], %[[HIS]], %c-512_i32 : i32
// CHECK: %[[R8:.*]] = arith.addi %[[R]], %c8_i32
// CHECK: %[[K1:.*]] = arith.cmpi slt, %[[R8]], %[[SKV]] : i32
// CHECK: %[[H1:.*]] = arith.select %[[K1]], %[[HIS]], %c-512_i32{{.*}} : i32
// CHECK: %[[V0:.*]] = arith.cmpi sgt, %[[H0]], %c0_i32
// CHECK: %[[L0:.*]] = arith.cmpi sle, %[[LOS]], %c0_i32
// CHECK: %[[A0:.*]] = arith.andi %[[V0]], %[[L0]]
// CHECK: arith.select %[[A0]], %{{.*}}, %cst
// CHECK: arith.cmpi sgt, %[[H0]], %c-1_i32
// CHECK: arith.cmpi sle, %[[LOS]], %c-1_i32
// CHECK: arith.cmpi sgt, %[[H1]], %c8_i32
// CHECK: arith.cmpi sle, %[[LOS]], %c8_i32
// CHECK: arith.cmpi sgt, %[[H1]], %c7_i32
// CHECK: arith.cmpi sgt, %[[H0]], %c-8_i32
// CHECK: arith.cmpi sgt, %[[H0]], %c-9_i32
// CHECK: arith.cmpi sgt, %[[H1]], %c0_i32
// CHECK: arith.cmpi sgt, %[[H1]], %c-1_i32
// CHECK-NOT: func.call
func.func @band_mask(%s: !hopper.frag<64x16xf32>, %r0: i32, %c0: i32, %skv: i32, %lo: i64, %hi: i64) -> !hopper.frag<64x16xf32> {
  %m = hopper.band_mask %s rows %r0 cols %c0 keys %skv lo %lo hi %hi : !hopper.frag<64x16xf32>
  return %m : !hopper.frag<64x16xf32>
}

// -----

// Without bounds only the rows' key bound.
// CHECK-LABEL: func.func @band_mask_keys(
// CHECK: %[[K0:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK: %[[K1:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.cmpi
// CHECK: arith.select %[[K0]]
// CHECK: arith.select %[[K0]]
// CHECK: arith.select %[[K1]]
// CHECK: arith.select %[[K1]]
func.func @band_mask_keys(%s: !hopper.frag<64x16xf32>, %r0: i32, %c0: i32, %skv: i32) -> !hopper.frag<64x16xf32> {
  %m = hopper.band_mask %s rows %r0 cols %c0 keys %skv : !hopper.frag<64x16xf32>
  return %m : !hopper.frag<64x16xf32>
}

// -----

// LSE and D read where used (columns): each n8 block's pair loaded just
// before its four exp2 (its four subtractions), never all at once; the
// pair at 32 k bytes past the thread's first column, D's at the second
// offset.
// CHECK-LABEL: func.func @probs_scores_columns(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[LOFF:[^:]*]]: i32, %[[DOFF:[^:]*]]: i32
// CHECK: %[[LB:.*]] = arith.addi %[[LOFF]], %{{.*}} : i32
// CHECK: %[[LP0:.*]] = llvm.getelementptr %[[SMEM]][%[[LB]]]
// CHECK: %[[LV:.*]] = llvm.load %[[LP0]] {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK: %[[L0:.*]] = vector.extract %[[LV]][0]
// CHECK: %[[L1:.*]] = vector.extract %[[LV]][1]
// CHECK: arith.mulf %[[L0]], %{{.*}}
// CHECK: math.exp2
// CHECK: arith.mulf %[[L1]], %{{.*}}
// CHECK: math.exp2
// CHECK: arith.mulf %[[L0]], %{{.*}}
// CHECK: math.exp2
// CHECK: arith.mulf %[[L1]], %{{.*}}
// CHECK: math.exp2
// CHECK-NOT: math.exp2
// CHECK: %[[LA1:.*]] = arith.addi %[[LB]], %c32_i32
// CHECK: %[[LP1:.*]] = llvm.getelementptr %[[SMEM]][%[[LA1]]]
// CHECK: llvm.load %[[LP1]]
// CHECK-COUNT-4: math.exp2
// CHECK-NOT: math.exp2
// CHECK: %[[DB:.*]] = arith.addi %[[DOFF]], %{{.*}} : i32
// CHECK: %[[DP0:.*]] = llvm.getelementptr %[[SMEM]][%[[DB]]]
// CHECK: %[[DV:.*]] = llvm.load %[[DP0]]
// CHECK: %[[D0:.*]] = vector.extract %[[DV]][0]
// CHECK: %[[D1:.*]] = vector.extract %[[DV]][1]
// CHECK: arith.subf %{{.*}}, %[[D0]]
// CHECK: arith.subf %{{.*}}, %[[D1]]
// CHECK: arith.subf %{{.*}}, %[[D0]]
// CHECK: arith.subf %{{.*}}, %[[D1]]
// CHECK-NOT: arith.subf
// CHECK: arith.addi %[[DB]], %c32_i32
// CHECK: llvm.load
// CHECK-COUNT-4: arith.subf
// CHECK-NOT: llvm.load
func.func @probs_scores_columns(%s: !hopper.frag<64x16xf32>, %smem: !llvm.ptr<3>, %loff: i32, %doff: i32, %sl2: f32, %dp: !hopper.frag<64x16xf32>) -> !hopper.frag<64x16xf32> {
  %p = hopper.grad_probs %s, columns %smem[%loff] scale %sl2 : !hopper.frag<64x16xf32>
  %ds = hopper.grad_scores %p, %dp, columns %smem[%doff] : !hopper.frag<64x16xf32>
  return %ds : !hopper.frag<64x16xf32>
}

// -----

// Through softcap's tanh t: dx = ds (1 - t^2), 1 - t^2 as fma(-t, t, 1).
// CHECK-LABEL: func.func @grad_softcap(
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[NT:.*]] = arith.negf %[[T:.*]] : f32
// CHECK: %[[DT:.*]] = math.fma %[[NT]], %[[T]], %[[ONE]] : f32
// CHECK: arith.mulf %{{.*}}, %[[DT]] : f32
// CHECK-COUNT-7: math.fma
// CHECK-NOT: math.fma
func.func @grad_softcap(%ds: !hopper.frag<64x16xf32>, %t: !hopper.frag<64x16xf32>) -> !hopper.frag<64x16xf32> {
  %dx = hopper.grad_softcap %ds, %t : !hopper.frag<64x16xf32>
  return %dx : !hopper.frag<64x16xf32>
}

// -----

// S^T: the visibility of each column's query, one call per column; a
// score is kept iff its row (key) is below the column's bound.
// CHECK-LABEL: func.func @mask_transposed(
// CHECK-SAME: %[[S:.*]]: !llvm.struct<{{.*}}>, %[[R0:.*]]: i32, %[[C0:.*]]: i32, %[[SQ:.*]]: i32, %[[SKV:.*]]: i32)
// CHECK: %[[CB:.*]] = arith.addi %[[C0]], %{{.*}} : i32
// CHECK: %[[ROW0:.*]] = arith.addi %[[R0]], %{{.*}} : i32
// CHECK: %[[ROW1:.*]] = arith.addi %[[ROW0]], %c8_i32 : i32
// CHECK: %[[REG0:.*]] = llvm.extractvalue %[[S]][0]
// CHECK: %[[REG2:.*]] = llvm.extractvalue %[[S]][2]
// CHECK: %[[COL:.*]] = arith.addi %[[CB]], %c0_i32 : i32
// CHECK: %[[V:.*]]:2 = call @vis(%[[COL]], %[[SQ]], %[[SKV]])
// CHECK: %[[K0:.*]] = arith.cmpi slt, %[[ROW0]], %[[V]]#1 : i32
// CHECK: arith.select %[[K0]], %[[REG0]], %{{.*}} : f32
// CHECK: %[[K1:.*]] = arith.cmpi slt, %[[ROW1]], %[[V]]#1 : i32
// CHECK: arith.select %[[K1]], %[[REG2]], %{{.*}} : f32
// CHECK-COUNT-3: call @vis
func.func private @vis(i32, i32, i32) -> (i32, i32)
func.func @mask_transposed(%s: !hopper.frag<64x16xf32>, %r: i32, %c: i32, %sq: i32, %skv: i32) -> !hopper.frag<64x16xf32> {
  %m = hopper.mask %s rows %r cols %c visible @vis(%sq, %skv) transposed : !hopper.frag<64x16xf32>
  return %m : !hopper.frag<64x16xf32>
}

// -----

// Register 2k + i (row i, columns 8k + colbase + {0, 1}) to byte
// row * 128 + 2 colbase + 16 ((k % 8) ^ (lane / 4)); row i = 1 is 8 rows
// (1024 bytes) on. Then the proxy fence for the wgmma that reads it.
// CHECK-LABEL: func.func @store_shared(
// CHECK-SAME: %[[T:.*]]: !llvm.struct<(i32, i32, i32, i32)>, %[[SMEM:.*]]: !llvm.ptr<3>, %[[OFF:.*]]: i32)
// CHECK: %[[BASE0:.*]] = arith.addi %[[OFF]], %{{.*}} : i32
// CHECK: %[[BASE:.*]] = arith.addi %[[BASE0]], %{{.*}} : i32
// CHECK: %[[PHASE:.*]] = arith.divui %{{.*}}, %c4_i32
// CHECK: %[[SW0:.*]] = arith.xori %c0_i32{{.*}}, %[[PHASE]] : i32
// CHECK: %[[U0:.*]] = arith.muli %[[SW0]], %c16_i32
// CHECK: %[[O0:.*]] = arith.addi %[[BASE]], %[[U0]] : i32
// CHECK: %[[P0:.*]] = llvm.getelementptr %[[SMEM]][%[[O0]]]
// CHECK: llvm.store %{{.*}}, %[[P0]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: %[[O1:.*]] = arith.addi %[[O0]], %c1024_i32 : i32
// CHECK: %[[P1:.*]] = llvm.getelementptr %[[SMEM]][%[[O1]]]
// CHECK: llvm.store %{{.*}}, %[[P1]]
// CHECK: arith.xori %c1_i32{{.*}}, %[[PHASE]] : i32
// CHECK-COUNT-2: llvm.store
// CHECK-NOT: nvvm.stmatrix
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
func.func @store_shared(%t: !hopper.frag<64x16xbf16>, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.store_shared %t to %smem [%off] box_bytes 0 : !hopper.frag<64x16xbf16>
  return
}

// -----

// At a column: the units start at column / 8 of the row, XORed with the
// row's phase after the add.
// CHECK-LABEL: func.func @store_shared_column(
// CHECK-SAME: %{{.*}}: !llvm.struct<(i32, i32, i32, i32)>, %[[SMEM:.*]]: !llvm.ptr<3>, %[[OFF:.*]]: i32, %[[COL:.*]]: i32)
// CHECK: %[[FIRST:.*]] = arith.divui %[[COL]], %c8_i32
// CHECK: %[[U0:.*]] = arith.addi %c0_i32{{.*}}, %[[FIRST]] : i32
// CHECK-NEXT: arith.xori %[[U0]], %{{.*}} : i32
// CHECK: %[[U1:.*]] = arith.addi %c1_i32{{.*}}, %[[FIRST]] : i32
// CHECK-NEXT: arith.xori %[[U1]], %{{.*}} : i32
func.func @store_shared_column(%t: !hopper.frag<64x16xbf16>, %smem: !llvm.ptr<3>, %off: i32, %col: i32) {
  hopper.store_shared %t to %smem [%off] column %col box_bytes 0 : !hopper.frag<64x16xbf16>
  return
}

// -----

// With stmatrix: one stmatrix.x4 a pair of n8 blocks: lane l addresses row l % 8 of matrix
// m = l / 8, the warp's row 8 (m % 2) + l % 8 (128 bytes a row), in 16-byte
// unit (m / 2) ^ (l % 8) (the 128-byte swizzle); registers in the
// accumulator's order (block k rows 0-7, rows 8-15, block k + 1 ...). Then
// the proxy fence for the wgmma that reads it.
// CHECK-LABEL: func.func @store_shared_stmatrix(
// CHECK-SAME: %[[T:.*]]: !llvm.struct<(i32, i32, i32, i32)>, %[[SMEM:.*]]: !llvm.ptr<3>, %[[OFF:.*]]: i32)
// CHECK-DAG: %[[R0:.*]] = llvm.extractvalue %[[T]][0]
// CHECK-DAG: %[[R1:.*]] = llvm.extractvalue %[[T]][1]
// CHECK-DAG: %[[R2:.*]] = llvm.extractvalue %[[T]][2]
// CHECK-DAG: %[[R3:.*]] = llvm.extractvalue %[[T]][3]
// CHECK: %[[MAT:.*]] = arith.divui %[[LANE:.*]], %c8_i32
// CHECK: %[[RIN:.*]] = arith.remui %[[LANE]], %c8_i32
// CHECK: %[[HALF:.*]] = arith.andi %[[MAT]], %c1_i32
// CHECK: %[[HI:.*]] = arith.shrui %[[MAT]], %c1_i32
// CHECK: %[[WROW:.*]] = arith.muli %{{.*}}, %c16_i32
// CHECK: %[[HROW:.*]] = arith.muli %[[HALF]], %c8_i32
// CHECK: %[[ROW0:.*]] = arith.addi %[[WROW]], %[[HROW]]
// CHECK: %[[ROW:.*]] = arith.addi %[[ROW0]], %[[RIN]]
// CHECK: %[[RB:.*]] = arith.muli %[[ROW]], %c128_i32
// CHECK: %[[BASE:.*]] = arith.addi %[[OFF]], %[[RB]]
// CHECK: %[[SW:.*]] = arith.xori %[[HI]], %[[RIN]]
// CHECK: %[[UB:.*]] = arith.muli %[[SW]], %c16_i32
// CHECK: %[[O:.*]] = arith.addi %[[BASE]], %[[UB]]
// CHECK: %[[P:.*]] = llvm.getelementptr %[[SMEM]][%[[O]]]
// CHECK: nvvm.stmatrix %[[P]], %[[R0]], %[[R1]], %[[R2]], %[[R3]] {{.*}}layout = #nvvm.mma_layout<row>
// CHECK-NOT: nvvm.stmatrix
// CHECK-NOT: llvm.store
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
func.func @store_shared_stmatrix(%t: !hopper.frag<64x16xbf16>, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.store_shared %t to %smem [%off] box_bytes 0 stmatrix : !hopper.frag<64x16xbf16>
  return
}

// -----

// At a column: the units start at column / 8 of the row (plus the matrix's
// block), XORed with the row's phase after the add; pairs 2 .. 7 add 2 k.
// A 64 x 32 tile is two stmatrix.
// CHECK-LABEL: func.func @store_shared_stmatrix_column(
// CHECK-SAME: %{{.*}}: !llvm.struct<(i32, i32, i32, i32, i32, i32, i32, i32)>, %[[SMEM:.*]]: !llvm.ptr<3>, %[[OFF:.*]]: i32, %[[COL:.*]]: i32)
// CHECK: %[[HI:.*]] = arith.shrui
// CHECK: %[[FIRST:.*]] = arith.divui %[[COL]], %c8_i32
// CHECK: %[[U0:.*]] = arith.addi %[[FIRST]], %[[HI]] : i32
// CHECK-NEXT: arith.xori %[[U0]], %{{.*}} : i32
// CHECK: nvvm.stmatrix
// CHECK: %[[U1:.*]] = arith.addi %[[U0]], %c2_i32{{.*}} : i32
// CHECK-NEXT: arith.xori %[[U1]], %{{.*}} : i32
// CHECK: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
func.func @store_shared_stmatrix_column(%t: !hopper.frag<64x32xbf16>, %smem: !llvm.ptr<3>, %off: i32, %col: i32) {
  hopper.store_shared %t to %smem [%off] column %col box_bytes 0 stmatrix : !hopper.frag<64x32xbf16>
  return
}

// -----

// A second box (columns 64 ..) is box_bytes on: the fifth pair is unit
// k % 8 = 0 again (the matrix's block, XORed with the row's phase) and
// adds 8192; its registers are the fifth quadruple.
// CHECK-LABEL: func.func @store_shared_stmatrix_boxes(
// CHECK-SAME: %[[T:[^:]*]]: !llvm.struct
// CHECK-DAG: %[[R16:.*]] = llvm.extractvalue %[[T]][16]
// CHECK-DAG: %[[R19:.*]] = llvm.extractvalue %[[T]][19]
// CHECK: %[[RIN:.*]] = arith.remui %{{.*}}, %c8_i32
// CHECK: %[[HI:.*]] = arith.shrui
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK: arith.xori %[[HI]], %[[RIN]]
// CHECK: arith.addi %{{.*}}, %c8192_i32
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: nvvm.stmatrix %{{.*}}, %[[R16]], %{{.*}}, %{{.*}}, %[[R19]] {
// CHECK-COUNT-3: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
func.func @store_shared_stmatrix_boxes(%t: !hopper.frag<64x128xbf16>, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.store_shared %t to %smem [%off] box_bytes 8192 stmatrix : !hopper.frag<64x128xbf16>
  return
}

// -----

// Lane l copies rows l and l + 32: a predicated load (the fill past the
// bound), a 4-byte store at the offset + 4 (l + 32 i).
// CHECK-LABEL: func.func @stage_rows(
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c32_i32
// CHECK: arith.cmpi slt
// CHECK: llvm.inline_asm {{.*}}@p ld.global.nc.f32 $0, [$3];
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK: arith.addi %[[LANE]], %c32_i32
// CHECK: llvm.inline_asm {{.*}}@p ld.global.nc.f32 $0, [$3];
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NOT: llvm.store
func.func @stage_rows(%p: !llvm.ptr<1>, %b: i64, %r: i32, %n: i32, %f: f32, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.stage_rows %p [%b] rows %r bound %n fill %f to %smem[%off] count 64
  return
}

// -----

// neg_log2: the loaded value v becomes -v log2 e, an infinite v -inf, and
// the fill replaces it past the bound (not transformed).
// CHECK-LABEL: func.func @stage_rows_neg_log2(
// CHECK-SAME: %[[F:[^:]*]]: f32
// CHECK: %[[IN:.*]] = arith.cmpi slt
// CHECK: %[[V:.*]] = llvm.inline_asm {{.*}}@p ld.global.nc.f32 $0, [$2];
// CHECK: %[[POS:.*]] = arith.cmpf oeq, %[[V]], %{{.*}} : f32
// CHECK: %[[NEG:.*]] = arith.cmpf oeq, %[[V]], %{{.*}} : f32
// CHECK: %[[ISINF:.*]] = arith.ori %[[POS]], %[[NEG]] : i1
// CHECK: %[[NMU:.*]] = arith.mulf %[[V]], %{{.*}} : f32
// CHECK: %[[T:.*]] = arith.select %[[ISINF]], %{{.*}}, %[[NMU]] : f32
// CHECK: %[[OUT:.*]] = arith.select %[[IN]], %[[T]], %[[F]] : f32
// CHECK: llvm.store %[[OUT]], %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
func.func @stage_rows_neg_log2(%p: !llvm.ptr<1>, %b: i64, %r: i32, %n: i32, %f: f32, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.stage_rows %p [%b] rows %r bound %n fill %f to %smem[%off] count 32 neg_log2
  return
}

// -----

// A thread's columns colbase + 8k + {0, 1}: one 8-byte shared load per
// n8 block (32 bytes apart), its two rows sharing the values.
// CHECK-LABEL: func.func @load_columns(
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK-NOT: llvm.load
func.func @load_columns(%smem: !llvm.ptr<3>, %off: i32) -> !hopper.frag<64x16xf32> {
  %c = hopper.load_columns %smem[%off] : !hopper.frag<64x16xf32>
  return %c : !hopper.frag<64x16xf32>
}

// -----

// Accumulator order: the thread's quadruple j at byte 16 (128 j + ltid),
// one red.global.add.v4.f32 each (two quadruples at N = 16: the second
// 2048 bytes on).
// CHECK-LABEL: func.func @reduce_add(
// CHECK: %[[MINE:.*]] = arith.muli %{{.*}}, %c16_i32 : i32
// CHECK: %[[BASE:.*]] = llvm.getelementptr %{{.*}}[%[[MINE]]] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i8
// CHECK: llvm.inline_asm has_side_effects {{.*}}"red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f" %[[BASE]],
// CHECK: %[[NEXT:.*]] = llvm.getelementptr %[[BASE]][2048] : (!llvm.ptr<1>) -> !llvm.ptr<1>, i8
// CHECK: "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f" %[[NEXT]],
// CHECK-NOT: red.global
func.func @reduce_add(%t: !hopper.frag<64x16xf32>, %p: !llvm.ptr<1>) {
  hopper.reduce_add %t to %p : !hopper.frag<64x16xf32>
  return
}

// -----

// `columns 8`: the first quadruple only (the first 64 x 8 floats).
// CHECK-LABEL: func.func @reduce_add_columns(
// CHECK-COUNT-1: red.global.add.v4.f32
// CHECK-NOT: red.global
func.func @reduce_add_columns(%t: !hopper.frag<64x16xf32>, %p: !llvm.ptr<1>) {
  hopper.reduce_add %t to %p columns 8 : !hopper.frag<64x16xf32>
  return
}

// -----

// The same order in shared memory: 16-byte stores at the offset plus
// 16 ltid (+ 2048 for the second quadruple), then the async-proxy fence.
// CHECK-LABEL: func.func @stage_fragment(
// CHECK: %[[MINE:.*]] = arith.muli %{{.*}}, %c16_i32 : i32
// CHECK: %[[AT:.*]] = arith.addi %[[MINE]], %{{.*}} : i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK: arith.addi %[[AT]], %c2048_i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK-NOT: llvm.store
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
func.func @stage_fragment(%t: !hopper.frag<64x16xf32>, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.stage_fragment %t to %smem[%off] : !hopper.frag<64x16xf32>
  return
}

// -----

// One bulk reduction of the staged bytes, its own group.
// CHECK-LABEL: func.func @reduce_add_bulk(
// CHECK: %[[SRC:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK: llvm.inline_asm has_side_effects {{.*}}"cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r" %{{.*}}, %[[SRC]], %c4096_i32
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
func.func @reduce_add_bulk(%p: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %off: i32) {
  hopper.reduce_add_bulk %smem[%off] to %p bytes 4096
  return
}

// -----

// A turn: spin on an acquire load until the counter is the turn (the loop
// in braces, its label local), then order the async proxy after it; pass
// it once every bulk group is complete (writes too), by a release add.
// CHECK-LABEL: func.func @turns(
// CHECK-SAME: %[[C:.*]]: !llvm.ptr<1>, %[[T:.*]]: i32)
// CHECK: llvm.inline_asm has_side_effects {{.*}}"{\0A.reg .pred p;\0A.reg .b32 v;\0Await_turn:\0Ald.acquire.gpu.global.b32 v, [$0];\0Asetp.ne.b32 p, v, $1;\0A@p bra wait_turn;\0A}", "l,r" %[[C]], %[[T]]
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"red.release.gpu.global.add.u32 [$0], 1;", "l" %[[C]]
func.func @turns(%c: !llvm.ptr<1>, %t: i32) {
  hopper.wait_turn %c, %t
  hopper.pass_turn %c
  return
}
