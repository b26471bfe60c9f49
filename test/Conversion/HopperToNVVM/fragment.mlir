// convert-hopper-to-nvvm on fragments: a !hopper.frag becomes the struct of
// the thread's registers (64x16xf32: 8 f32; 64x16xbf16: 4 i32; 64xf32: 2
// f32) and each op is unrolled on them. Small tiles keep the checks short.
// RUN: fa3-opt %s --split-input-file --convert-hopper-to-nvvm | FileCheck %s

// S = Q K^T from shared memory: one wgmma per k-step of 16, the first with
// scale-d zero; k-step kk reads column 16 kk, box 16 kk / 64 at byte
// (16 kk % 64) x 2; descriptors count 16-byte units. One commit.
// CHECK-LABEL: func.func @ss(
// CHECK-SAME: %[[DA:.*]]: i64, %[[DB:.*]]: i64)
// CHECK: %[[U:.*]] = llvm.mlir.undef : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK: nvvm.wgmma.mma_async %[[DA]], %[[DB]], %[[U]], <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// k-step 1: column 16, 32 bytes = 2 units into the box.
// CHECK: %[[A1:.*]] = arith.addi %[[DA]], %c2_i64
// CHECK: %[[B1:.*]] = arith.addi %[[DB]], %c2_i64
// CHECK: nvvm.wgmma.mma_async %[[A1]], %[[B1]], {{.*}} D[<f32>, <one>]
// k-step 4: column 64, the second box: A 8192 / 16, B 2048 / 16 units on.
// CHECK: arith.constant 512 : i64
// CHECK: arith.constant 128 : i64
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
gpu.module @k {
func.func @ss(%da: i64, %db: i64) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)> {
  %s = hopper.wgmma.ss %da, %db k 128 boxes 8192, 2048 : bf16 -> !hopper.frag<64x16xf32>
  %r = builtin.unrealized_conversion_cast %s : !hopper.frag<64x16xf32> to !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
  return %r : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
}
}

// -----

// O += P V with P from registers: inline PTX (no NVVM op has the register-A
// form) with the accumulators tied, 4 A registers per k-step, B's
// descriptor 16 rows of 128 bytes (128 units) further each k-step.
// (O is an argument: an accumulator that is hopper.zero starts from
// scale-d 0 instead, HopperToNVVM/fp8.mlir.)
// CHECK-LABEL: func.func @rs(
// CHECK-SAME: %[[O:[^:]*]]: !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>, %[[DB:.*]]: i64)
// CHECK: %[[P:.*]] = llvm.mlir.zero : !llvm.struct<(i32, i32, i32, i32, i32, i32, i32, i32)>
// CHECK: %[[A0:.*]] = llvm.extractvalue %[[P]][0]
// CHECK: %[[A3:.*]] = llvm.extractvalue %[[P]][3]
// CHECK: %[[A4:.*]] = llvm.extractvalue %[[P]][4]
// CHECK: %[[O0:.*]] = llvm.extractvalue %[[O]][0]
// CHECK: %[[ACC:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "{\0A.reg .pred p;\0Asetp.ne.b32 p, $21, 0;\0Awgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7}, {$16, $17, $18, $19}, $20, p, 1, 1, 1;\0A}", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,r,r,r,r,l,n" %[[O0]], {{.*}}, %[[A0]], {{.*}}, %[[A3]], %[[DB]], %c1_i32
// CHECK: %[[DB1:.*]] = arith.addi %[[DB]], %c128_i64 : i64
// CHECK: llvm.inline_asm {{.*}} %[[A4]], {{.*}}, %[[DB1]], %c1_i32
// CHECK-NOT: wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
gpu.module @k {
func.func @rs(%o: !hopper.frag<64x16xf32>, %db: i64) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)> {
  %p = hopper.zero : !hopper.frag<64x32xf16>
  %d = hopper.wgmma.rs %p, %db, %o : !hopper.frag<64x32xf16>, !hopper.frag<64x16xf32>
  %r = builtin.unrealized_conversion_cast %d : !hopper.frag<64x16xf32> to !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
  return %r : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
}
}

// -----

// The wait, then an empty asm redefining each register of the fragment.
// CHECK-LABEL: func.func @wait(
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: %[[F:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7"
// CHECK: return %[[F]]
gpu.module @k {
func.func @wait(%da: i64, %db: i64) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)> {
  %s = hopper.wgmma.ss %da, %db k 16 boxes 8192, 2048 : bf16 -> !hopper.frag<64x16xf32>
  %w = hopper.wgmma.wait 1, %s : !hopper.frag<64x16xf32>
  %r = builtin.unrealized_conversion_cast %w : !hopper.frag<64x16xf32> to !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
  return %r : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
}
}

// -----

// The lazy step, per row (registers 4k + 2i + e belong to row i): the max of
// the row's registers, then of the quad (shuffles 1, 2); the shared
// builder's rule: raise m only past m + tau, alpha = exp2(m_old - mu) or 1;
// then p = exp2(fma(s, sl2, -mu)) per score (ex2.approx.ftz), the row's
// partial sum, l = fma(l, alpha, sum).
// CHECK-LABEL: func.func @lazy_step(
// CHECK-SAME: %[[S:[^:]*]]: !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>, %[[SL2:[^:]*]]: f32, %[[M:[^:]*]]: !llvm.struct<(f32, f32)>, %[[L:[^:]*]]: !llvm.struct<(f32, f32)>)
// CHECK: %[[S0:.*]] = llvm.extractvalue %[[S]][0]
// CHECK: %[[S1:.*]] = llvm.extractvalue %[[S]][1]
// CHECK: %[[M0:.*]] = llvm.extractvalue %[[M]][0]
// CHECK: %[[L0:.*]] = llvm.extractvalue %[[L]][0]
// Row 0: registers 0, 1, 4, 5.
// CHECK: %[[X01:.*]] = llvm.intr.maxnum(%[[S0]], %[[S1]])
// CHECK: %[[X:.*]] = llvm.intr.maxnum(%[[X01]], %{{.*}})
// CHECK: %[[SH1:.*]] = nvvm.shfl.sync bfly %{{.*}}, %[[X]], %c1_i32, %c31_i32 : f32 -> f32
// CHECK: %[[Q1:.*]] = llvm.intr.maxnum(%[[X]], %[[SH1]])
// CHECK: nvvm.shfl.sync bfly %{{.*}}, %[[Q1]], %c2_i32
// CHECK: %[[MXS:.*]] = arith.mulf %{{.*}}, %[[SL2]] : f32
// CHECK: %[[LIM:.*]] = arith.addf %[[M0]], %cst{{.*}} : f32
// CHECK: %[[UP0:.*]] = arith.cmpf ogt, %[[MXS]], %[[LIM]] : f32
// CHECK: %[[MN:.*]] = arith.select %[[UP0]], %[[MXS]], %[[M0]] : f32
// CHECK: %[[NI:.*]] = arith.cmpf oeq, %[[MN]], %cst
// CHECK: %[[MU:.*]] = arith.select %[[NI]], %cst{{.*}}, %[[MN]] : f32
// CHECK: %[[D:.*]] = arith.subf %[[M0]], %[[MU]] : f32
// CHECK: %[[AL:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[D]]) : (f32) -> f32
// CHECK: %[[ALPHA0:.*]] = arith.select %[[UP0]], %[[AL]], %cst{{.*}} : f32
// CHECK: %[[NEGMU:.*]] = arith.negf %[[MU]] : f32
// CHECK: %[[UP1:.*]] = arith.cmpf ogt
// CHECK: %[[RAISED:.*]] = arith.ori %[[UP0]], %[[UP1]] : i1
// CHECK: %[[F0:.*]] = llvm.intr.fma(%[[S0]], %[[SL2]], %[[NEGMU]])
// CHECK: %[[P0:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[F0]])
// CHECK: %[[F1:.*]] = llvm.intr.fma(%[[S1]], %[[SL2]], %[[NEGMU]])
// CHECK: %[[P1:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[F1]])
// CHECK: %[[SUM01:.*]] = arith.addf %[[P0]], %[[P1]] : f32
// CHECK: %[[SUM:.*]] = arith.addf %[[SUM01]], %{{.*}} : f32
// CHECK: llvm.intr.fma(%[[L0]], %[[ALPHA0]], %[[SUM]])
// CHECK-NOT: math.
// CHECK: return {{.*}}, %[[RAISED]]
gpu.module @k {
func.func @lazy_step(%s: !hopper.frag<64x16xf32>, %sl2: f32, %m: !hopper.frag<64xf32>, %l: !hopper.frag<64xf32>)
    -> (!hopper.frag<64x16xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, i1) {
  %p, %m1, %l1, %a, %up = hopper.softmax_step %s scale %sl2 state(%m, %l) threshold 8.0
      : !hopper.frag<64x16xf32>, !hopper.frag<64xf32>
  return %p, %m1, %l1, %a, %up : !hopper.frag<64x16xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, i1
}
}

// -----

// A row's first block: m = the block's max (scaled), no alpha (0: there is
// no O yet), never raised, l = the row sum.
// CHECK-LABEL: func.func @first_step(
// CHECK: %[[MXS:.*]] = arith.mulf
// CHECK-NOT: arith.subf
// CHECK: arith.cmpf oeq, %[[MXS]]
// CHECK-NOT: arith.cmpf ogt
// CHECK: %[[NO:.*]] = arith.constant false
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: llvm.insertvalue %[[ZERO]]
// CHECK: return {{.*}}, %[[NO]]
gpu.module @k {
func.func @first_step(%s: !hopper.frag<64x16xf32>, %sl2: f32)
    -> (!hopper.frag<64x16xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, i1) {
  %p, %m1, %l1, %a, %up = hopper.softmax_step %s scale %sl2
      : !hopper.frag<64x16xf32>, !hopper.frag<64xf32>
  return %p, %m1, %l1, %a, %up : !hopper.frag<64x16xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, i1
}
}

// -----

// The mask: per row of the thread (row0 + 16 warp + lane / 4, + 8), the
// visible columns from the kernel's function on an opaque copy of the row,
// made relative to the thread's first column; register (k, e) is column
// 8k + e further: one compare (two with a window) and a select.
// CHECK-LABEL: func.func @mask(
// CHECK-SAME: %[[S:[^:]*]]: !llvm.struct<{{.*}}>, %[[ROW0:[^:]*]]: i32, %[[COL0:[^:]*]]: i32
// CHECK: %[[CB:.*]] = arith.addi %[[COL0]], %{{.*}} : i32
// CHECK: %[[R:.*]] = arith.addi %[[ROW0]], %{{.*}} : i32
// CHECK: %[[OPQ:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, $1;", "=r,r" %[[R]]
// CHECK: %[[C0:.*]]:2 = call @cols(%[[OPQ]], %{{.*}}, %{{.*}})
// CHECK: %[[LO0:.*]] = arith.subi %[[C0]]#0, %[[CB]]
// CHECK: %[[HI0:.*]] = arith.subi %[[C0]]#1, %[[CB]]
// CHECK: %[[R8:.*]] = arith.addi %[[R]], %c8_i32
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, $1;", "=r,r" %[[R8]]
// Register 5 (k 1, row 0, e 1): column 9.
// CHECK: %[[V5:.*]] = arith.cmpi sgt, %[[HI0]], %c9_i32
// CHECK-NEXT: %[[W5:.*]] = arith.cmpi sle, %[[LO0]], %c9_i32
// CHECK-NEXT: %[[B5:.*]] = arith.andi %[[V5]], %[[W5]]
// CHECK-NEXT: arith.select %[[B5]], %{{.*}}, %cst
gpu.module @k {
func.func private @cols(i32, i32, i32) -> (i32, i32)
func.func @mask(%s: !hopper.frag<64x16xf32>, %row0: i32, %col0: i32, %sq: i32, %skv: i32) -> !hopper.frag<64x16xf32> {
  %m = hopper.mask %s rows %row0 cols %col0 visible @cols(%sq, %skv) left_bounded : !hopper.frag<64x16xf32>
  return %m : !hopper.frag<64x16xf32>
}
}

// -----

// GQA packing (group %g): a row's visible columns are its query's, row / g.
// CHECK-LABEL: func.func @mask_packed(
// CHECK-SAME: %[[S:[^:]*]]: !llvm.struct<{{.*}}>, %[[ROW0:[^:]*]]: i32, %[[G:[^:]*]]: i32
// CHECK: %[[R:.*]] = arith.addi %[[ROW0]], %{{.*}} : i32
// CHECK: %[[Q:.*]] = arith.divui %[[R]], %[[G]] : i32
// CHECK: %[[OPQ:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, $1;", "=r,r" %[[Q]]
// CHECK: call @cols(%[[OPQ]], %{{.*}}, %{{.*}})
// CHECK: %[[R8:.*]] = arith.addi %[[R]], %c8_i32
// CHECK: %[[Q8:.*]] = arith.divui %[[R8]], %[[G]] : i32
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, $1;", "=r,r" %[[Q8]]
gpu.module @k {
func.func private @cols(i32, i32, i32) -> (i32, i32)
func.func @mask_packed(%s: !hopper.frag<64x16xf32>, %row0: i32, %g: i32, %col0: i32, %sq: i32, %skv: i32) -> !hopper.frag<64x16xf32> {
  %m = hopper.mask %s rows %row0 group %g cols %col0 visible @cols(%sq, %skv) : !hopper.frag<64x16xf32>
  return %m : !hopper.frag<64x16xf32>
}
}

// -----

// Softcap: tanh.approx of s * pre; rescale: each register times its row's
// factor; trunc: f32 registers 2r, 2r + 1 into 16-bit register r.
// CHECK-LABEL: func.func @elementwise(
// CHECK: arith.mulf
// CHECK: llvm.inline_asm asm_dialect = att "tanh.approx.f32 $0, $1;", "=f,f"
// CHECK: %[[F1:.*]] = llvm.extractvalue %{{.*}}[1] : !llvm.struct<(f32, f32)>
// CHECK: %[[O2:.*]] = llvm.extractvalue %{{.*}}[2] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NEXT: arith.mulf %[[O2]], %[[F1]] : f32
// CHECK: %[[V:.*]] = vector.from_elements %{{.*}}, %{{.*}} : vector<2xf32>
// CHECK-NEXT: %[[H:.*]] = arith.truncf %[[V]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: llvm.bitcast %[[H]] : vector<2xbf16> to i32
gpu.module @k {
func.func @elementwise(%s: !hopper.frag<64x16xf32>, %pre: f32, %f: !hopper.frag<64xf32>)
    -> (!hopper.frag<64x16xf32>, !hopper.frag<64x16xf32>, !hopper.frag<64x16xbf16>) {
  %c = hopper.softcap %s, %pre : !hopper.frag<64x16xf32>
  %o = hopper.scale_rows %s, %f : !hopper.frag<64x16xf32>, !hopper.frag<64xf32>
  %b = hopper.trunc %s : !hopper.frag<64x16xf32> to !hopper.frag<64x16xbf16>
  return %c, %o, %b : !hopper.frag<64x16xf32>, !hopper.frag<64x16xf32>, !hopper.frag<64x16xbf16>
}
}
