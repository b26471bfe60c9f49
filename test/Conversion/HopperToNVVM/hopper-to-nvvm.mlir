// convert-hopper-to-nvvm: each named barrier becomes nvvm.barrier(.arrive)
// (a diverged one the intrinsics without .aligned) on its kind's id (turn 1 + c, epilogue 3 + c, vote 3 + consumers + c);
// warpgroup_any becomes bar.red.or on the vote barrier, then vote.any;
// warp_specialize becomes an scf.if on the warpgroup index whose arms start
// with their setmaxnreg; the producer warpgroup's roles become scf.if on
// thread 0 (producer_thread) and on the warp index (producer_warps: eq for
// one warp, uge for warps up to the last, both bounds otherwise), the
// role's warp index warp - first. A producer_thread with results (inside
// warp 0's own program) yields thread 0's values from its scf.if (poison in
// the other lanes) and shuffles them from lane 0 to the warp.
// RUN: fa3-opt %s --split-input-file --convert-hopper-to-nvvm | FileCheck %s

// CHECK-LABEL: func.func @barriers(
// CHECK-SAME: %[[C:.*]]: i32, %[[P:.*]]: i1)
func.func @barriers(%c: i32, %p: i1) -> i1 {
  // CHECK: %[[ONE:.*]] = arith.constant 1 : i32
  // CHECK: %[[TURN:.*]] = arith.addi %[[C]], %[[ONE]] : i32
  // CHECK: %[[N256:.*]] = arith.constant 256 : i32
  // CHECK: nvvm.barrier id = %[[TURN]] number_of_threads = %[[N256]]
  hopper.named_barrier.sync turn[%c] of 2 threads 256
  // CHECK: %[[ONE2:.*]] = arith.constant 1 : i32
  // CHECK: %[[TURN2:.*]] = arith.addi %[[C]], %[[ONE2]] : i32
  // CHECK: nvvm.barrier.arrive id = %[[TURN2]] number_of_threads = %{{.*}}
  hopper.named_barrier.arrive turn[%c] of 2 threads 256
  // CHECK: %[[THREE:.*]] = arith.constant 3 : i32
  // CHECK: %[[EPI:.*]] = arith.addi %[[C]], %[[THREE]] : i32
  // CHECK: %[[N128:.*]] = arith.constant 128 : i32
  // CHECK: nvvm.barrier id = %[[EPI]] number_of_threads = %[[N128]]
  hopper.named_barrier.sync epilogue[%c] of 3 threads 128
  // diverged: the forms without .aligned, which count each thread
  // CHECK: %[[TR:.*]] = arith.addi %[[C]], %{{.*}} : i32
  // CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.sync.count"(%[[TR]], %[[N128B:.*]]) : (i32, i32) -> ()
  hopper.named_barrier.sync transpose[%c] of 3 threads 128 {diverged}
  // CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.arrive.count"(%{{.*}}, %{{.*}}) : (i32, i32) -> ()
  hopper.named_barrier.arrive turn[%c] of 2 threads 256 {diverged}
  // vote of 3 consumers: 3 + 3 + c
  // CHECK: %[[IN:.*]] = arith.extui %[[P]] : i1 to i32
  // CHECK: %[[SIX:.*]] = arith.constant 6 : i32
  // CHECK: %[[VOTE:.*]] = arith.addi %[[C]], %[[SIX]] : i32
  // CHECK: %[[RED:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "{{.*}}bar.red.or.pred p, $2, 128, q;{{.*}}", "=r,r,r" %[[IN]], %[[VOTE]] : (i32, i32) -> i32
  // CHECK: %[[NE:.*]] = arith.cmpi ne, %[[RED]], %{{.*}} : i32
  // CHECK: %[[ANY:.*]] = nvvm.vote.sync any %{{.*}}, %[[NE]] -> i1
  // CHECK: return %[[ANY]]
  %any = hopper.warpgroup_any %p in consumer[%c] of 3
  return %any : i1
}

// -----

// CHECK-LABEL: func.func @roles(
// CHECK-SAME: %[[X:.*]]: i32)
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: %[[WG:.*]] = arith.divui %[[TID]], %{{.*}} : i32
// CHECK: %[[PROD:.*]] = arith.cmpi eq, %[[WG]], %{{.*}} : i32
// CHECK: scf.if %[[PROD]] {
// CHECK-NEXT: nvvm.setmaxregister decrease 24
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "producer", "r" %[[X]]
// CHECK-NEXT: } else {
// CHECK-NEXT: nvvm.setmaxregister increase 240
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[C:.*]] = arith.subi %[[WG]], %[[ONE]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "consumer", "r,r" %[[X]], %[[C]]
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK-NEXT: }
// CHECK-NOT: hopper.
func.func @roles(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    llvm.inline_asm has_side_effects asm_dialect = att "producer", "r" %x : (i32) -> ()
  } consumers(%c of 2) regs 240 {
    llvm.inline_asm has_side_effects asm_dialect = att "consumer", "r,r" %x, %c : (i32, i32) -> ()
    hopper.named_barrier.sync epilogue[%c] of 2 threads 128
  }
  return
}

// -----

// CHECK-LABEL: func.func @producer_roles(
// CHECK: nvvm.setmaxregister decrease 24
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[T0:.*]] = arith.cmpi eq, %[[TID]], %[[ZERO]] : i32
// CHECK-NEXT: scf.if %[[T0]] {
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "tma"
// CHECK-NEXT: }
// CHECK-NEXT: %[[TID1:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[WARP:.*]] = arith.divui %[[TID1]], %[[C32]] : i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi uge, %[[WARP]], %[[ONE]] : i32
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NEXT: %[[ONE2:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[W:.*]] = arith.subi %[[WARP]], %[[ONE2]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "transpose", "r" %[[W]]
// CHECK-NEXT: }
// One warp: eq.
// CHECK: %[[WARP2:.*]] = arith.divui
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[IS2:.*]] = arith.cmpi eq, %[[WARP2]], %[[TWO]] : i32
// CHECK-NEXT: scf.if %[[IS2]] {
// Warps 1 .. 2 of 4: both bounds.
// CHECK: %[[WARP3:.*]] = arith.divui
// CHECK-NEXT: %[[ONE3:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[GE:.*]] = arith.cmpi uge, %[[WARP3]], %[[ONE3]] : i32
// CHECK-NEXT: %[[THREE:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[LT:.*]] = arith.cmpi ult, %[[WARP3]], %[[THREE]] : i32
// CHECK-NEXT: %[[BOTH:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK-NEXT: scf.if %[[BOTH]] {
// CHECK-NOT: hopper.
func.func @producer_roles() {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      llvm.inline_asm has_side_effects asm_dialect = att "tma", "" : () -> ()
    }
    hopper.producer_warps(%w) first 1 count 3 {
      llvm.inline_asm has_side_effects asm_dialect = att "transpose", "r" %w : (i32) -> ()
    }
    hopper.producer_warps(%w) first 2 count 1 {
      llvm.inline_asm has_side_effects asm_dialect = att "rows", "r" %w : (i32) -> ()
    }
    hopper.producer_warps(%w) first 1 count 2 {
      llvm.inline_asm has_side_effects asm_dialect = att "pair", "r" %w : (i32) -> ()
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

// CHECK-LABEL: func.func @producer_thread_results(
// CHECK-SAME: %[[G:.*]]: !llvm.ptr<1>
// (thread 0: inside the warp's scf.if on warp 0)
// CHECK: scf.if
// CHECK: scf.if
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[IS0:.*]] = arith.cmpi eq, %[[TID]], %[[ZERO]] : i32
// CHECK-NEXT: %[[R:.*]] = scf.if %[[IS0]] -> (i32) {
// CHECK-NEXT: %[[X:.*]] = llvm.load %[[G]]
// CHECK-NEXT: scf.yield %[[X]] : i32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[P:.*]] = llvm.mlir.poison : i32
// CHECK-NEXT: scf.yield %[[P]] : i32
// CHECK-NEXT: }
// CHECK: %[[S:.*]] = nvvm.shfl.sync idx %{{.*}}, %[[R]], %{{.*}}, %{{.*}} : i32 -> i32
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "use", "r" %[[S]]
func.func @producer_thread_results(%g: !llvm.ptr<1>) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 0 count 1 {
      %t = hopper.producer_thread -> (i32) {
        %x = llvm.load %g : !llvm.ptr<1> -> i32
        gpu.yield %x : i32
      }
      llvm.inline_asm has_side_effects asm_dialect = att "use", "r" %t : (i32) -> ()
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}
