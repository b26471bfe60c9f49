// convert-hopper-to-nvvm on the epilogue ops: the quad's row sums, 1 / l by
// rcp.approx and the LSE by lg2.approx; the LSE store from lane % 4 == 0,
// rows < Sq, non-null pointer; O / l by 4-byte stores at the caller's
// strides; O / l staged by stmatrix in the 128B-swizzled box layout, fenced
// for the async proxy, the epilogue barrier (3 + c), and the leader's TMA
// stores (one per 64-column box), with the persistent kernel's flags
// (wait_previous: the previous store has read the buffer; drain: this one
// has, for the whole warpgroup).
// RUN: fa3-opt %s --split-input-file --convert-hopper-to-nvvm | FileCheck %s

!rows = !llvm.struct<(f32, f32)>

// CHECK-LABEL: func.func @finalize_and_lse(
// CHECK-SAME: %[[MS:[^:]*]]: !llvm.struct<(f32, f32)>, %[[LS:[^:]*]]: !llvm.struct<(f32, f32)>, %[[PTR:[^:]*]]: !llvm.ptr<1>, %[[ROW0:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[HQ:[^:]*]]: i32, %[[SQ:[^:]*]]: i32)
// CHECK: %[[M0:.*]] = llvm.extractvalue %[[MS]][0]
// CHECK: %[[M1:.*]] = llvm.extractvalue %[[MS]][1]
// CHECK: %[[L0:.*]] = llvm.extractvalue %[[LS]][0]
// CHECK: %[[L1:.*]] = llvm.extractvalue %[[LS]][1]
// The quad's partial sums: butterflies 1 and 2 (row 0, then row 1).
// CHECK: %[[X1:.*]] = nvvm.shfl.sync  bfly %{{.*}}, %[[L0]], %c1_i32{{.*}}, %c31_i32
// CHECK: %[[S1:.*]] = arith.addf %[[L0]], %[[X1]] : f32
// CHECK: %[[X2:.*]] = nvvm.shfl.sync  bfly %{{.*}}, %[[S1]], %c2_i32{{.*}}, %c31_i32
// CHECK: %[[SUM0:.*]] = arith.addf %[[S1]], %[[X2]] : f32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %[[L1]], %c1_i32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c2_i32
// CHECK: %[[SUM1:.*]] = arith.addf
// 1 / l, 0 for a row without keys.
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[E0:.*]] = arith.cmpf oeq, %[[SUM0]], %[[ZERO]] : f32
// CHECK: %[[R0:.*]] = llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"(%[[SUM0]]) : (f32) -> f32
// CHECK: arith.select %[[E0]], %[[ZERO]], %[[R0]] : f32
// CHECK: %[[E1:.*]] = arith.cmpf oeq, %[[SUM1]], %[[ZERO]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"(%[[SUM1]])
// LSE = (m + log2 l) ln 2, -inf for a row without keys.
// CHECK: %[[LN2:.*]] = arith.constant 0.693147182 : f32
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[LG0:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"(%[[SUM0]]) : (f32) -> f32
// CHECK: %[[A0:.*]] = arith.addf %[[M0]], %[[LG0]] : f32
// CHECK: %[[N0:.*]] = arith.mulf %[[A0]], %[[LN2]] : f32
// CHECK: %[[LSE0:.*]] = arith.select %[[E0]], %[[NINF]], %[[N0]] : f32
// CHECK: %[[LG1:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"(%[[SUM1]])
// CHECK: %[[A1:.*]] = arith.addf %[[M1]], %[[LG1]] : f32
// CHECK: %[[N1:.*]] = arith.mulf %[[A1]], %[[LN2]] : f32
// CHECK: %[[LSE1:.*]] = arith.select %[[E1]], %[[NINF]], %[[N1]] : f32
// The thread's rows row0 + 16 warp + lane / 4 (+ 8); its lane in the quad.
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: %[[LTID:.*]] = arith.remui %[[TID]], %c128_i32
// CHECK: %[[WARP:.*]] = arith.divui %[[LTID]], %c32_i32
// CHECK: %[[LANE:.*]] = arith.remui %[[LTID]], %c32_i32
// CHECK: %[[QUAD:.*]] = arith.divui %[[LANE]], %c4_i32
// CHECK: %[[TQ:.*]] = arith.remui %[[LANE]], %c4_i32
// CHECK: %[[WROW:.*]] = arith.muli %[[WARP]], %c16_i32
// CHECK: %[[TROW:.*]] = arith.addi %[[WROW]], %[[QUAD]] : i32
// CHECK: %[[LSEREG0:.*]] = llvm.extractvalue %{{.*}}[0] : !llvm.struct<(f32, f32)>
// CHECK: %[[LSEREG1:.*]] = llvm.extractvalue %{{.*}}[1] : !llvm.struct<(f32, f32)>
// CHECK: %[[ROWA:.*]] = arith.addi %[[ROW0]], %[[TROW]] : i32
// CHECK: %[[ROWB:.*]] = arith.addi %[[ROWA]], %c8_i32 : i32
// Only lane % 4 == 0 of a row's quad, only with an LSE pointer ...
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr<1>
// CHECK: %[[HAS:.*]] = llvm.icmp "ne" %[[PTR]], %[[NULL]] : !llvm.ptr<1>
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TQ]], %c0_i32 : i32
// CHECK: %[[WRITER:.*]] = arith.andi %[[FIRST]], %[[HAS]] : i1
// ... only rows < Sq.
// CHECK: %[[INA:.*]] = arith.cmpi slt, %[[ROWA]], %[[SQ]] : i32
// CHECK: %[[VA:.*]] = arith.andi %[[WRITER]], %[[INA]] : i1
// CHECK: scf.if %[[VA]] {
// ((batch * Hq + head) * Sq + row) * 4 bytes
// CHECK: %[[BH:.*]] = arith.muli %[[B]], %[[HQ]] : i32
// CHECK: %[[BHH:.*]] = arith.addi %[[BH]], %[[H]] : i32
// CHECK: %[[BH64:.*]] = arith.extui %[[BHH]] : i32 to i64
// CHECK: %[[SQ64:.*]] = arith.extui %[[SQ]] : i32 to i64
// CHECK: %[[BHS:.*]] = arith.muli %[[BH64]], %[[SQ64]] : i64
// CHECK: %[[R64:.*]] = arith.extui %[[ROWA]] : i32 to i64
// CHECK: %[[EL:.*]] = arith.addi %[[BHS]], %[[R64]] : i64
// CHECK: %[[BYTES:.*]] = arith.muli %[[EL]], %c4_i64 : i64
// CHECK: %[[P:.*]] = llvm.getelementptr %[[PTR]][%[[BYTES]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// CHECK: llvm.store %[[LSEREG0]], %[[P]] : f32, !llvm.ptr<1>
// CHECK: }
// CHECK: %[[INB:.*]] = arith.cmpi slt, %[[ROWB]], %[[SQ]] : i32
// CHECK: %[[VB:.*]] = arith.andi %[[WRITER]], %[[INB]] : i1
// CHECK: scf.if %[[VB]] {
// CHECK: arith.extui %[[ROWB]] : i32 to i64
// CHECK: llvm.store %[[LSEREG1]], %{{.*}} : f32, !llvm.ptr<1>
// CHECK: }
// CHECK-NOT: hopper.
// CHECK: return
func.func @finalize_and_lse(%ms: !rows, %ls: !rows, %LSE: !llvm.ptr<1>, %row0: i32,
                            %h: i32, %b: i32, %Hq: i32, %Sq: i32) {
  %m = builtin.unrealized_conversion_cast %ms : !rows to !hopper.frag<64xf32>
  %l = builtin.unrealized_conversion_cast %ls : !rows to !hopper.frag<64xf32>
  %inv, %lse = hopper.finalize_rows %m, %l : !hopper.frag<64xf32>
  hopper.store_lse %lse to %LSE rows %row0 head %h batch %b heads %Hq bound %Sq
      : !hopper.frag<64xf32>
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>

// A packed variable-length batch: LSE is [Hq, Tq], so the head's stride is
// the given %Tq while rows stop at the sequence's end %end.
// CHECK-LABEL: func.func @lse_strided(
// CHECK-SAME: %[[H:[^:]*]]: i32, %[[HQ:[^:]*]]: i32, %[[END:[^:]*]]: i32, %[[TQ:[^:]*]]: i32)
// CHECK: arith.cmpi slt, %{{.*}}, %[[END]] : i32
// CHECK: %[[BH:.*]] = arith.muli %c0_i32, %[[HQ]] : i32
// CHECK: %[[BHH:.*]] = arith.addi %[[BH]], %[[H]] : i32
// CHECK: %[[BH64:.*]] = arith.extui %[[BHH]] : i32 to i64
// CHECK: %[[T64:.*]] = arith.extui %[[TQ]] : i32 to i64
// CHECK: arith.muli %[[BH64]], %[[T64]] : i64
// CHECK: arith.cmpi slt, %{{.*}}, %[[END]] : i32
// CHECK-NOT: hopper.
func.func @lse_strided(%ls: !rows, %LSE: !llvm.ptr<1>, %row0: i32, %h: i32,
                       %Hq: i32, %end: i32, %Tq: i32) {
  %c0 = arith.constant 0 : i32
  %lse = builtin.unrealized_conversion_cast %ls : !rows to !hopper.frag<64xf32>
  hopper.store_lse %lse to %LSE rows %row0 head %h batch %c0 heads %Hq bound %end stride %Tq
      : !hopper.frag<64xf32>
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>
!o16 = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>

// 64x16 f32, two n8 blocks: two 4-byte stores per row of the thread.
// CHECK-LABEL: func.func @direct(
// CHECK-SAME: %[[OS:[^:]*]]: !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>, %[[IS:[^:]*]]: !llvm.struct<(f32, f32)>, %[[PTR:[^:]*]]: !llvm.ptr<1>, %[[ROW0:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[SQ:[^:]*]]: i32, %[[SB:[^:]*]]: i64, %[[SS:[^:]*]]: i64, %[[SH:[^:]*]]: i64)
// CHECK: %[[TQ:.*]] = arith.remui %{{.*}}, %c4_i32
// CHECK: %[[TROW:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
// CHECK: %[[COLBASE:.*]] = arith.muli %[[TQ]], %c2_i32
// CHECK: %[[INV0:.*]] = llvm.extractvalue %[[IS]][0]
// CHECK: %[[INV1:.*]] = llvm.extractvalue %[[IS]][1]
// CHECK: %[[ROWA:.*]] = arith.addi %[[ROW0]], %[[TROW]] : i32
// CHECK: %[[ROWB:.*]] = arith.addi %[[ROWA]], %c8_i32 : i32
// CHECK: %[[INA:.*]] = arith.cmpi slt, %[[ROWA]], %[[SQ]] : i32
// CHECK: scf.if %[[INA]] {
// element b*sB + row*sS + head*sH + colbase, 2 bytes each
// CHECK: %[[B64:.*]] = arith.extsi %[[B]] : i32 to i64
// CHECK: %[[T0:.*]] = arith.muli %[[B64]], %[[SB]] : i64
// CHECK: %[[R64:.*]] = arith.extsi %[[ROWA]] : i32 to i64
// CHECK: %[[RS:.*]] = arith.muli %[[R64]], %[[SS]] : i64
// CHECK: %[[T1:.*]] = arith.addi %[[T0]], %[[RS]] : i64
// CHECK: %[[H64:.*]] = arith.extsi %[[H]] : i32 to i64
// CHECK: %[[HS:.*]] = arith.muli %[[H64]], %[[SH]] : i64
// CHECK: %[[T2:.*]] = arith.addi %[[T1]], %[[HS]] : i64
// CHECK: %[[C64:.*]] = arith.extui %[[COLBASE]] : i32 to i64
// CHECK: %[[T3:.*]] = arith.addi %[[T2]], %[[C64]] : i64
// CHECK: %[[T4:.*]] = arith.muli %[[T3]], %c2_i64 : i64
// CHECK: %[[PROW:.*]] = llvm.getelementptr %[[PTR]][%[[T4]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// Registers 0, 1 (block 0, row 0) times 1 / l, rounded to f16.
// CHECK: %[[O0:.*]] = llvm.extractvalue %[[OS]][0]
// CHECK: %[[P0:.*]] = arith.mulf %[[O0]], %[[INV0]] : f32
// CHECK: %[[O1:.*]] = llvm.extractvalue %[[OS]][1]
// CHECK: %[[P1:.*]] = arith.mulf %[[O1]], %[[INV0]] : f32
// CHECK: %[[V:.*]] = vector.from_elements %[[P0]], %[[P1]] : vector<2xf32>
// CHECK: %[[H16:.*]] = arith.truncf %[[V]] : vector<2xf32> to vector<2xf16>
// CHECK: llvm.store %[[H16]], %[[PROW]] {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
// Registers 4, 5 (block 1): 8 columns = 16 bytes on.
// CHECK: llvm.extractvalue %[[OS]][4]
// CHECK: llvm.extractvalue %[[OS]][5]
// CHECK: %[[P16:.*]] = llvm.getelementptr %[[PROW]][16] : (!llvm.ptr<1>) -> !llvm.ptr<1>, i8
// CHECK: llvm.store %{{.*}}, %[[P16]] {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
// CHECK: }
// Row 1: registers 2, 3 and 6, 7 times its own 1 / l.
// CHECK: %[[INB:.*]] = arith.cmpi slt, %[[ROWB]], %[[SQ]] : i32
// CHECK: scf.if %[[INB]] {
// CHECK: arith.extsi %[[ROWB]] : i32 to i64
// CHECK: %[[O2:.*]] = llvm.extractvalue %[[OS]][2]
// CHECK: arith.mulf %[[O2]], %[[INV1]] : f32
// CHECK: llvm.extractvalue %[[OS]][3]
// CHECK: llvm.store
// CHECK: llvm.extractvalue %[[OS]][6]
// CHECK: llvm.extractvalue %[[OS]][7]
// CHECK: llvm.store
// CHECK: }
// CHECK-NOT: llvm.store
// CHECK: return
func.func @direct(%os: !o16, %is: !rows, %O: !llvm.ptr<1>, %row0: i32, %h: i32,
                  %b: i32, %Sq: i32, %sB: i64, %sS: i64, %sH: i64) {
  %o = builtin.unrealized_conversion_cast %os : !o16 to !hopper.frag<64x16xf32>
  %inv = builtin.unrealized_conversion_cast %is : !rows to !hopper.frag<64xf32>
  hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h
      batch %b bound %Sq : !hopper.frag<64x16xf32> as f16
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>
!o16 = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>

// columns 8 of a 16-column fragment (a tile wider than the tensor, as head
// dim 96 in a 128-column tile): only block 0 (registers 0-3) is stored.
// CHECK-LABEL: func.func @direct_columns(
// CHECK-SAME: %[[OS:[^:]*]]: !llvm.struct
// CHECK: llvm.extractvalue %[[OS]][0]
// CHECK: llvm.extractvalue %[[OS]][1]
// CHECK: llvm.store
// CHECK-NOT: llvm.extractvalue %[[OS]][4]
// CHECK: llvm.extractvalue %[[OS]][2]
// CHECK: llvm.extractvalue %[[OS]][3]
// CHECK: llvm.store
// CHECK-NOT: llvm.store
// CHECK-NOT: llvm.extractvalue %[[OS]][6]
// CHECK: return
func.func @direct_columns(%os: !o16, %is: !rows, %O: !llvm.ptr<1>, %row0: i32, %h: i32,
                          %b: i32, %Sq: i32, %sB: i64, %sS: i64, %sH: i64) {
  %o = builtin.unrealized_conversion_cast %os : !o16 to !hopper.frag<64x16xf32>
  %inv = builtin.unrealized_conversion_cast %is : !rows to !hopper.frag<64xf32>
  hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h
      batch %b bound %Sq {columns = 8} : !hopper.frag<64x16xf32> as f16
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>
!o128 = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>

// 64x128 (two boxes) of consumer %cw of 2 (box rows: 128), staged at 81920,
// after the previous tile's store has read the buffer.
// CHECK-LABEL: func.func @tma_wait_previous(
// CHECK-SAME: %[[OS:[^:]*]]: !llvm.struct<{{.*}}>, %[[IS:[^:]*]]: !llvm.struct<(f32, f32)>, %[[MAP:[^:]*]]: !llvm.ptr, %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[M0:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[CW:[^:]*]]: i32)
// CHECK: %[[LTID:.*]] = arith.remui %{{.*}}, %c128_i32
// CHECK: %[[WARP:.*]] = arith.divui %[[LTID]], %c32_i32
// CHECK: %[[LANE:.*]] = arith.remui %[[LTID]], %c32_i32
// CHECK: %[[LEADER:.*]] = arith.cmpi eq, %[[LTID]], %c0_i32{{.*}} : i32
// wait_previous: the leader waits for the previous store's reads, then the
// warpgroup's epilogue barrier (3 + c, 128 threads).
// CHECK-NEXT: scf.if %[[LEADER]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[EPI:.*]] = arith.addi %[[CW]], %[[C3]] : i32
// CHECK-NEXT: %[[N128:.*]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %[[N128]]
// stmatrix addresses: lane l gives row l % 8 of matrix l / 8; the warp's
// row 64 c + 16 warp + 8 ((l / 8) & 1) + l % 8, 128 bytes each.
// CHECK: %[[MAT:.*]] = arith.divui %[[LANE]], %c8_i32
// CHECK: %[[RIN:.*]] = arith.remui %[[LANE]], %c8_i32
// CHECK: %[[HALF:.*]] = arith.andi %[[MAT]], %c1_i32
// CHECK: %[[KHI:.*]] = arith.shrui %[[MAT]], %c1_i32
// CHECK: %[[RWG:.*]] = arith.muli %[[CW]], %c64_i32
// CHECK: %[[RWARP:.*]] = arith.muli %[[WARP]], %c16_i32
// CHECK: %[[R1:.*]] = arith.addi %[[RWG]], %[[RWARP]]
// CHECK: %[[HR:.*]] = arith.muli %[[HALF]], %c8_i32
// CHECK: %[[INW:.*]] = arith.addi %[[HR]], %[[RIN]]
// CHECK: %[[ROW:.*]] = arith.addi %[[R1]], %[[INW]]
// CHECK: %[[RB:.*]] = arith.muli %[[ROW]], %c128_i32
// CHECK: %[[ROWBYTE:.*]] = arith.addi %[[RB]], %c81920_i32
// 128B swizzle: 16-byte unit u of row r at u ^ (r % 8).
// CHECK: %[[U0:.*]] = arith.xori %[[KHI]], %[[RIN]] : i32
// CHECK: %[[U0B:.*]] = arith.muli %[[U0]], %c16_i32
// CHECK: %[[U0O:.*]] = arith.addi %[[U0B]], %c0_i32
// CHECK: %[[OFF0:.*]] = arith.addi %[[ROWBYTE]], %[[U0O]]
// Blocks 0, 1 of rows 0 and 1 (registers 0 1, 2 3, 4 5, 6 7) times 1 / l,
// rounded to bf16 pairs.
// CHECK: llvm.extractvalue %[[OS]][0]
// CHECK: llvm.extractvalue %[[OS]][1]
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: %[[A0:.*]] = llvm.bitcast %{{.*}} : vector<2xbf16> to i32
// CHECK: llvm.extractvalue %[[OS]][2]
// CHECK: %[[A1:.*]] = llvm.bitcast
// CHECK: llvm.extractvalue %[[OS]][4]
// CHECK: %[[A2:.*]] = llvm.bitcast
// CHECK: llvm.extractvalue %[[OS]][6]
// CHECK: %[[A3:.*]] = llvm.bitcast
// CHECK: %[[DST0:.*]] = llvm.getelementptr %[[SMEM]][%[[OFF0]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK: nvvm.stmatrix %[[DST0]], %[[A0]], %[[A1]], %[[A2]], %[[A3]] {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// Blocks 2, 3: unit + 2.
// CHECK: %[[K2:.*]] = arith.addi %[[KHI]], %c2_i32
// CHECK: arith.xori %[[K2]], %[[RIN]] : i32
// CHECK: nvvm.stmatrix
// CHECK: nvvm.stmatrix
// CHECK: nvvm.stmatrix
// Blocks 8, 9: the second box, 128 rows x 128 bytes further.
// CHECK: %[[U8:.*]] = arith.xori %[[KHI]], %[[RIN]] : i32
// CHECK: %[[U8B:.*]] = arith.muli %[[U8]], %c16_i32
// CHECK: arith.addi %[[U8B]], %c16384_i32
// CHECK: llvm.extractvalue %[[OS]][32]
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// Visible to the async proxy, then the barrier, then the leader's stores.
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: %[[C3B:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[EPIB:.*]] = arith.addi %[[CW]], %[[C3B]] : i32
// CHECK-NEXT: %[[N128B:.*]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[EPIB]] number_of_threads = %[[N128B]]
// CHECK-NEXT: scf.if %[[LEADER]] {
// CHECK: %[[WGR:.*]] = arith.muli %[[CW]], %c64_i32
// CHECK: %[[OROW:.*]] = arith.addi %[[M0]], %[[WGR]] : i32
// CHECK: %[[WGOFF:.*]] = arith.muli %[[CW]], %c8192_i32
// CHECK: %[[SRC0O:.*]] = arith.addi %[[WGOFF]], %c81920_i32
// CHECK: %[[SRC0:.*]] = llvm.getelementptr %[[SMEM]][%[[SRC0O]]]
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %[[MAP]], %[[SRC0]], box[%c0_i32{{.*}}, %[[H]], %[[OROW]], %[[B]]]
// CHECK: %[[SRC1O:.*]] = arith.addi %[[WGOFF]], %c98304_i32
// CHECK: %[[SRC1:.*]] = llvm.getelementptr %[[SMEM]][%[[SRC1O]]]
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %[[MAP]], %[[SRC1]], box[%c64_i32{{.*}}, %[[H]], %[[OROW]], %[[B]]]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @tma_wait_previous(%os: !o128, %is: !rows, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                             %m0: i32, %h: i32, %b: i32, %cw: i32) {
  %o = builtin.unrealized_conversion_cast %os : !o128 to !hopper.frag<64x128xf32>
  %inv = builtin.unrealized_conversion_cast %is : !rows to !hopper.frag<64xf32>
  hopper.store_o_tma %o, %inv to %map tile(%m0, %h, %b) staging %smem[81920]
      consumer[%cw] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>
!o64 = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>

// drain, three consumers (box rows: 192): no wait before staging; after the
// commit the leader waits for the store's reads, then the warpgroup syncs.
// CHECK-LABEL: func.func @tma_drain(
// CHECK-SAME: %[[CW:[^:]*]]: i32)
// CHECK: %[[LEADER:.*]] = arith.cmpi eq, %{{.*}}, %c0_i32{{.*}} : i32
// CHECK-NOT: nvvm.cp.async.bulk.wait_group
// CHECK-NOT: nvvm.barrier
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK: nvvm.fence.proxy
// CHECK: nvvm.barrier id
// CHECK-NEXT: scf.if %[[LEADER]] {
// CHECK: %[[WGOFF:.*]] = arith.muli %[[CW]], %c8192_i32
// CHECK: arith.addi %[[WGOFF]], %c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %{{.*}}, %{{.*}}, box[%c0_i32
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[EPI:.*]] = arith.addi %[[CW]], %[[C3]] : i32
// CHECK-NEXT: %[[N128:.*]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %[[N128]]
// CHECK-NEXT: return
func.func @tma_drain(%os: !o64, %is: !rows, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                     %m0: i32, %h: i32, %b: i32, %cw: i32) {
  %o = builtin.unrealized_conversion_cast %os : !o64 to !hopper.frag<64x64xf32>
  %inv = builtin.unrealized_conversion_cast %is : !rows to !hopper.frag<64xf32>
  hopper.store_o_tma %o, %inv to %map tile(%m0, %h, %b) staging %smem[0]
      consumer[%cw] of 3 drain : !hopper.frag<64x64xf32> as f16
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>
!o96 = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>

// A 96-wide O: six stmatrix (n8 blocks 0-11), the last two into the second
// box; two TMA stores, the second box staged in part (its columns past the
// tensor's 96 are clipped by the tensor map).
// CHECK-LABEL: func.func @tma_partial_box(
// CHECK-COUNT-6: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK: nvvm.fence.proxy
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %{{.*}}, %{{.*}}, box[%c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %{{.*}}, %{{.*}}, box[%c64_i32
// CHECK-NOT: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK: nvvm.cp.async.bulk.commit.group
func.func @tma_partial_box(%os: !o96, %is: !rows, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                           %m0: i32, %h: i32, %b: i32, %cw: i32) {
  %o = builtin.unrealized_conversion_cast %os : !o96 to !hopper.frag<64x96xf32>
  %inv = builtin.unrealized_conversion_cast %is : !rows to !hopper.frag<64xf32>
  hopper.store_o_tma %o, %inv to %map tile(%m0, %h, %b) staging %smem[0]
      consumer[%cw] of 2 : !hopper.frag<64x96xf32> as bf16
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>
!o16 = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>

// GQA packing (group %g) and f32 (a split's partial O): the thread's row
// r is query r / g of head %h + r % g, bounded as a query; each pair of
// columns is stored unrounded, 8 bytes.
// CHECK-LABEL: func.func @direct_packed_f32(
// CHECK-SAME: %[[OS:[^:]*]]: !llvm.struct<{{.*}}>, %[[IS:[^:]*]]: !llvm.struct<(f32, f32)>, %[[O:[^:]*]]: !llvm.ptr<1>, %[[ROW0:[^:]*]]: i32, %[[G:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[SQ:[^:]*]]: i32
// CHECK: %[[R:.*]] = arith.addi %[[ROW0]], %{{.*}} : i32
// CHECK: %[[Q:.*]] = arith.divui %[[R]], %[[G]] : i32
// CHECK: %[[HR:.*]] = arith.remui %[[R]], %[[G]] : i32
// CHECK: %[[HH:.*]] = arith.addi %[[H]], %[[HR]] : i32
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[Q]], %[[SQ]] : i32
// CHECK: scf.if %[[IN]] {
// CHECK: arith.extsi %[[Q]] : i32 to i64
// CHECK: arith.extsi %[[HH]] : i32 to i64
// CHECK: %[[V:.*]] = vector.from_elements %{{.*}}, %{{.*}} : vector<2xf32>
// CHECK-NOT: arith.truncf
// CHECK: llvm.store %[[V]], %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT: hopper.
func.func @direct_packed_f32(%os: !o16, %is: !rows, %O: !llvm.ptr<1>, %row0: i32, %g: i32,
                             %h: i32, %b: i32, %Sq: i32, %sB: i64, %sS: i64, %sH: i64) {
  %o = builtin.unrealized_conversion_cast %os : !o16 to !hopper.frag<64x16xf32>
  %inv = builtin.unrealized_conversion_cast %is : !rows to !hopper.frag<64xf32>
  hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 group %g head %h
      batch %b bound %Sq : !hopper.frag<64x16xf32> as f32
  return
}

// -----

!rows = !llvm.struct<(f32, f32)>

// GQA packing: the LSE of row r goes to query r / g of head %h + r % g.
// CHECK-LABEL: func.func @lse_packed(
// CHECK-SAME: %[[ROW0:[^:]*]]: i32, %[[G:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[HQ:[^:]*]]: i32, %[[SQ:[^:]*]]: i32)
// CHECK: %[[Q:.*]] = arith.divui %{{.*}}, %[[G]] : i32
// CHECK: %[[HR:.*]] = arith.remui %{{.*}}, %[[G]] : i32
// CHECK: %[[HH:.*]] = arith.addi %[[H]], %[[HR]] : i32
// CHECK: arith.cmpi slt, %[[Q]], %[[SQ]] : i32
// CHECK: %[[BH:.*]] = arith.muli %[[B]], %[[HQ]] : i32
// CHECK: arith.addi %[[BH]], %[[HH]] : i32
// CHECK: %[[Q64:.*]] = arith.extui %[[Q]] : i32 to i64
// CHECK-NOT: hopper.
func.func @lse_packed(%ls: !rows, %LSE: !llvm.ptr<1>, %row0: i32, %g: i32, %h: i32,
                      %b: i32, %Hq: i32, %Sq: i32) {
  %lse = builtin.unrealized_conversion_cast %ls : !rows to !hopper.frag<64xf32>
  hopper.store_lse %lse to %LSE rows %row0 group %g head %h batch %b heads %Hq bound %Sq
      : !hopper.frag<64xf32>
  return
}

// -----

// hopper.store_o_staged: with wait_previous the epilogue barrier (3 + c)
// first, O / l staged by stmatrix as for the TMA store, the barrier, then
// the copy-out: 64 rows x 8 units of 16 bytes over 128 threads, 4 rounds;
// unit idx = ltid + 128 i is row idx / 8, unit idx % 8, read from the
// 128B-swizzled box (unit ^ row % 8) and stored at the row's place when
// the row is below the bound.
// CHECK-LABEL: func.func @staged(
// CHECK-SAME: %[[O:[^:]*]]: !llvm.struct<{{.*}}>, %[[INV:[^:]*]]: !llvm.struct<(f32, f32)>, %[[PTR:[^:]*]]: !llvm.ptr<1>, %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[ROW0:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[BOUND:[^:]*]]: i32, %[[CW:[^:]*]]: i32, %[[SB:[^:]*]]: i64, %[[SS:[^:]*]]: i64, %[[SH:[^:]*]]: i64)
// CHECK: %[[LTID:.*]] = arith.remui %{{.*}}, %c128_i32
// CHECK: %[[ID0:.*]] = arith.addi %[[CW]], %c3_i32
// CHECK: nvvm.barrier id = %[[ID0]]
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK-NOT: nvvm.stmatrix
// CHECK-NOT: nvvm.fence.proxy
// CHECK: %[[ID1:.*]] = arith.addi %[[CW]], %c3_i32
// CHECK: nvvm.barrier id = %[[ID1]]
// CHECK: %[[WGROW:.*]] = arith.muli %[[CW]], %c64_i32
// CHECK: %[[B64:.*]] = arith.extsi %[[B]] : i32 to i64
// CHECK: %[[BOFF:.*]] = arith.muli %[[B64]], %[[SB]] : i64
// CHECK: %[[R:.*]] = arith.divui %[[LTID]], %[[C8:.*]] : i32
// CHECK: %[[U:.*]] = arith.remui %[[LTID]], %[[C8]] : i32
// CHECK: %[[ROW:.*]] = arith.addi %[[ROW0]], %[[R]] : i32
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[ROW]], %[[BOUND]] : i32
// CHECK: scf.if %[[IN]] {
// CHECK: %[[SROW:.*]] = arith.addi %[[WGROW]], %[[R]] : i32
// CHECK: %[[UM:.*]] = arith.remui %[[U]], %{{.*}} : i32
// CHECK: %[[RM:.*]] = arith.remui %[[R]], %{{.*}} : i32
// CHECK: %[[SW:.*]] = arith.xori %[[UM]], %[[RM]] : i32
// CHECK: %[[SRC:.*]] = llvm.getelementptr %[[SMEM]][%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK: %[[V:.*]] = llvm.load %[[SRC]] {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: arith.muli %{{.*}}, %[[SS]] : i64
// CHECK: arith.muli %{{.*}}, %[[SH]] : i64
// CHECK: %[[DST:.*]] = llvm.getelementptr %[[PTR]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// CHECK: llvm.store %[[V]], %[[DST]] {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: }
// CHECK: arith.addi %[[LTID]], %c128_i32
// CHECK-COUNT-3: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NOT: llvm.store
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK: return
func.func @staged(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                  %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %row0: i32, %h: i32, %b: i32,
                  %bound: i32, %cw: i32, %sB: i64, %sS: i64, %sH: i64) {
  hopper.store_o_staged %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h batch %b
      bound %bound staging %smem[16384] consumer[%cw] of 2 wait_previous
      : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

// 24 of the fragment's 64 columns: 3 units a row, 192 units, so the second
// round's threads past unit 191 store nothing; GQA packing (group g): row
// p is query p / g of head h + p % g.
// CHECK-LABEL: func.func @staged_partial(
// CHECK-SAME: !llvm.ptr<3>, %[[ROW0:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[G:[^:]*]]: i32, %[[BOUND:[^:]*]]: i32, %[[CW:[^:]*]]: i32, %{{[^:]*}}: i64)
// CHECK: nvvm.barrier
// CHECK: %[[C3:.*]] = arith.constant 3 : i32
// CHECK: %[[R0:.*]] = arith.divui %{{.*}}, %[[C3]] : i32
// CHECK: %[[P0:.*]] = arith.addi %[[ROW0]], %[[R0]] : i32
// CHECK: %[[Q0:.*]] = arith.divui %[[P0]], %[[G]] : i32
// CHECK: %[[HG0:.*]] = arith.remui %[[P0]], %[[G]] : i32
// CHECK: arith.addi %[[H]], %[[HG0]] : i32
// CHECK: arith.cmpi slt, %[[Q0]], %[[BOUND]] : i32
// CHECK: %[[IDX1:.*]] = arith.addi %{{.*}}, %c128_i32
// CHECK: %[[C192:.*]] = arith.constant 192 : i32
// CHECK: %[[LIVE:.*]] = arith.cmpi ult, %[[IDX1]], %[[C192]] : i32
// CHECK: scf.if %[[LIVE]] {
// CHECK: arith.divui %[[IDX1]], %[[C3]] : i32
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NOT: llvm.store
// CHECK: return
func.func @staged_partial(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                          %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %row0: i32, %h: i32,
                          %g: i32, %bound: i32, %cw: i32, %s: i64) {
  hopper.store_o_staged %o, %inv to %O strides(%s, %s, %s) rows %row0 group %g head %h
      batch %cw bound %bound staging %smem[0] consumer[%cw] of 1 {columns = 24}
      : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

// drain (O staged in Q's buffer, which the caller releases to the
// producer's TMA loads): each thread's generic-proxy accesses fenced for
// the async proxy after its copy-out; no bulk operation.
// CHECK-LABEL: func.func @staged_drain(
// CHECK: nvvm.barrier
// CHECK: nvvm.barrier
// CHECK-COUNT-4: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: nvvm.fence.proxy
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK: return
func.func @staged_drain(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                        %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32, %s: i64) {
  hopper.store_o_staged %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[0] consumer[%i] of 2 wait_previous drain
      : !hopper.frag<64x64xf32> as bf16
  return
}
