// hopper-producer-warp-transpose: where FP8's transposer loop on warps
// 1 .. 3 counts four workers, warp 0 runs the producer thread's program as
// a whole warp (its one-thread steps on thread 0, a claimed tile shared with
// the warp) and is worker 0: in the kv loop it transposes the previous
// block's slot after each fill of V but the first, the last block's after
// the loop, none after a fill that carries words only. Kernels whose
// transposer is warps 1 .. 3 alone are left as they are. What warp 0
// cannot run is refused.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --hopper-producer-warp-transpose | FileCheck %s

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>
!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// CHECK-LABEL: func.func @merge(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[CTR:[^:]*]]: !llvm.ptr<1>, %[[N:[^:]*]]: i32
// CHECK: %[[Q:.*]] = hopper.ring.create
// CHECK: %[[V:.*]] = hopper.ring.create
// CHECK: %[[VT:.*]] = hopper.ring.create
// CHECK: hopper.warp_specialize producer regs 24 {
// The producer thread's program on warp 0: the claim on thread 0, its tile
// given to the warp; every lane waits for the slots.
// CHECK-NEXT: hopper.producer_warps(%{{.*}}) first 0 count 1 {
// CHECK-NEXT: %[[T:.*]] = hopper.producer_thread -> (i32) {
// CHECK-NEXT: %[[C:.*]] = hopper.tile_claim
// CHECK-NEXT: gpu.yield %[[C]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: hopper.ring.producer_acquire %[[Q]]
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.ring.publish %[[T]] at
// CHECK-NEXT: hopper.ring.producer_commit %[[Q]]{{.*}} tx 16384
// CHECK-NEXT: hopper.tma_load
// CHECK-NEXT: }
// CHECK-NEXT: scf.for %[[I:.*]] = %[[LB:[^ ]*]] to %[[N]] step %[[ST:[^ ]*]] : i32 {
// CHECK-NEXT: %[[U:.*]] = arith.addi %[[I]]
// CHECK-NEXT: hopper.ring.producer_acquire %[[V]][%[[U]]]
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.ring.producer_commit %[[V]][%[[U]]] tx 16384
// CHECK-NEXT: hopper.tma_load
// CHECK-NEXT: }
// The previous block's slot, after every fill but the first:
// CHECK-NEXT: %[[LATER:.*]] = arith.cmpi ne, %[[I]], %[[LB]]
// CHECK-NEXT: scf.if %[[LATER]] {
// CHECK: %[[PREV:.*]] = arith.subi %[[U]], %{{.*}}
// CHECK-NEXT: %[[W0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: hopper.ring.consumer_wait %[[V]][%[[PREV]]]
// CHECK-NEXT: hopper.ring.producer_acquire %[[VT]][%[[PREV]]]
// CHECK-NEXT: hopper.transpose_stage %[[V]][%[[PREV]]] to %[[VT]] worker %[[W0]] of 4
// CHECK-NEXT: hopper.ring.consumer_release %[[V]][%[[PREV]]]
// (warp 0's lane 0 may reach the meeting apart from its other lanes)
// CHECK-NEXT: hopper.named_barrier.sync transpose[%{{.*}}] of 2 threads 128 {diverged}
// (the transposed slot's commit stays warp 1's)
// CHECK-NOT: hopper.ring.producer_commit %[[VT]]
// The last block's, after the loop (its slot computed again):
// CHECK: %[[RAN:.*]] = arith.cmpi slt, %[[LB]], %[[N]]
// CHECK-NEXT: scf.if %[[RAN]] {
// CHECK-NEXT: %[[LASTI:.*]] = arith.subi %[[N]], %[[ST]]
// CHECK-NEXT: %[[LAST:.*]] = arith.addi %[[LASTI]]
// CHECK-NEXT: %[[W0B:.*]] = arith.constant 0 : i32
// CHECK-NEXT: hopper.ring.consumer_wait %[[V]][%[[LAST]]]
// CHECK-NEXT: hopper.ring.producer_acquire %[[VT]][%[[LAST]]]
// CHECK-NEXT: hopper.transpose_stage %[[V]][%[[LAST]]] to %[[VT]] worker %[[W0B]] of 4
// CHECK-NEXT: hopper.ring.consumer_release %[[V]][%[[LAST]]]
// CHECK-NEXT: hopper.named_barrier.sync transpose[%{{.*}}] of 2 threads 128 {diverged}
// CHECK-NOT: hopper.ring.producer_commit %[[VT]]
// The words-only fill that ends the tiles: no step after it.
// CHECK: hopper.ring.producer_acquire %[[V]][%[[N]]]
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.ring.publish
// CHECK-NEXT: hopper.ring.producer_commit %[[V]][%[[N]]] tx 0
// CHECK-NEXT: }
// CHECK-NEXT: }
// Warps 1 .. 3 keep their loop, workers 1 .. 3; their meeting is not
// .aligned either (warp 0 meets them at another instruction).
// CHECK-NEXT: hopper.producer_warps(%{{.*}}) first 1 count 3 {
// CHECK-NOT: hopper.producer_thread
// CHECK: hopper.named_barrier.sync transpose[%{{.*}}] of 2 threads 128 {diverged}
// CHECK: } consumers
func.func @merge(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %ctr: !llvm.ptr<1>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c32 = arith.constant 32 : i32
  %q = hopper.ring.create %smem : !q
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      %t = hopper.tile_claim %c0 first %c0 dynamic counter %ctr : !llvm.ptr<1>
      hopper.ring.producer_acquire %q[%c0] : !q
      hopper.ring.publish %t at %c0 to %q[%c0] : !q
      hopper.ring.producer_commit %q[%c0] tx 16384 : !q
      hopper.tma_load %map[%c0, %c0, %t, %c0] into %q[%c0] at %c0 : !q
      scf.for %i = %c0 to %n step %c1 : i32 {
        %u = arith.addi %i, %c2 : i32
        hopper.ring.producer_acquire %v[%u] : !v
        hopper.ring.producer_commit %v[%u] tx 16384 : !v
        hopper.tma_load %map[%c0, %c0, %u, %c0] into %v[%u] at %c0 : !v
      }
      hopper.ring.producer_acquire %v[%n] : !v
      hopper.ring.publish %c1 at %c0 to %v[%n] : !v
      hopper.ring.producer_commit %v[%n] tx 0 : !v
    }
    hopper.producer_warps(%w) first 1 count 3 {
      %worker = arith.addi %w, %c1 : i32
      %end = scf.while (%s = %c0) : (i32) -> i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        %flag = hopper.ring.published %v[%s] word 0 at %c0 : !v
        %more = arith.cmpi eq, %flag, %c0 : i32
        scf.condition(%more) %s : i32
      } do {
      ^bb0(%s: i32):
        hopper.ring.producer_acquire %vt[%s] : !vt
        hopper.transpose_stage %v[%s] to %vt worker %worker of 4 rows 128 cols 128 : !v, !vt
        hopper.ring.consumer_release %v[%s] : !v
        hopper.named_barrier.sync transpose[%c0] of 2 threads 128
        %tid = nvvm.read.ptx.sreg.tid.x : i32
        %first = arith.cmpi eq, %tid, %c32 : i32
        scf.if %first {
          hopper.ring.producer_commit %vt[%s] tx 0 : !vt
        }
        %next = arith.addi %s, %c1 : i32
        scf.yield %next : i32
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 96, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// Three workers on warps 1 .. 3: warp 0 keeps its producer thread.
// CHECK-LABEL: func.func @three_workers(
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NOT: first 0 count 1
// CHECK: hopper.producer_warps(%{{.*}}) first 1 count 3 {
func.func @three_workers(%smem: !llvm.ptr<3>, %u: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %v[%u] : !v
      hopper.ring.producer_commit %v[%u] tx 16384 : !v
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %u step %w : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 3 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

func.func @no_producer_thread(%smem: !llvm.ptr<3>, %u: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    // expected-error @below {{leaves worker 0 of its transpose to warp 0, but the producer region has no hopper.producer_thread for it to join}}
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %u step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

func.func @not_warp_wide(%smem: !llvm.ptr<3>, %g: !llvm.ptr<1>, %u: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      // expected-error @below {{cannot run on every lane of warp 0 (its program joins the V transposer): it may write memory or synchronize, and is not a step the pass gives thread 0}}
      llvm.store %u, %g : i32, !llvm.ptr<1>
      hopper.ring.producer_acquire %v[%u] : !v
      hopper.ring.producer_commit %v[%u] tx 16384 : !v
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %u step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// A program that branches on the thread (one lane would then be left out
// of worker 0's step).
func.func @thread_index(%smem: !llvm.ptr<3>, %u: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      // expected-error @below {{cannot run on every lane of warp 0 (its program joins the V transposer): it reads the thread's own index}}
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %t0 = arith.cmpi eq, %tid, %c0 : i32
      scf.if %t0 {
        hopper.ring.producer_acquire %v[%u] : !v
        hopper.ring.producer_commit %v[%u] tx 16384 : !v
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %u step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// Fills of every other slot: one behind would wait for a slot never filled.
func.func @stride_two(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      scf.for %i = %c0 to %n step %c2 : i32 {
        hopper.ring.producer_acquire %v[%i] : !v
        // expected-error @below {{fills V in a loop whose iterations the transposer's step cannot follow one behind: it needs step 1 and the slot the induction variable plus a value from before the loop}}
        hopper.ring.producer_commit %v[%i] tx 16384 : !v
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// A step that reads the transposer warps' own index beyond the worker.
func.func @own_value(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %v[%n] : !v
      hopper.ring.producer_commit %v[%n] tx 16384 : !v
    }
    hopper.producer_warps(%w) first 1 count 3 {
      %worker = arith.addi %w, %one : i32
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        // expected-error @below {{has a step that reads a value of the transposer warps' own (their index, a loop value or a result with effects), which warp 0 does not have}}
        hopper.transpose_stage %v[%s] to %vt worker %worker of 4 rows 128 cols 128 : !v, !vt
        %other = arith.addi %s, %w : i32
        hopper.ring.consumer_release %v[%other] : !v
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 128, cluster = 1>

// The decoding kernel's program of warps 0 .. 3 (hopper-warp-copy's: they
// copy small pages), beside a transposer counting four workers: the four
// copying warps are the workers, each its own warp's index. The step
// follows the loop body's op that holds V's fills (its paths: copied
// pages, a TMA box), the previous block's slot after every fill but the
// first, the last block's after the loop; the transposed slot's commit
// (thread 32, warp 1's lane 0) comes with the step, and the loop of warps
// 1 .. 3 is erased.
// CHECK-LABEL: func.func @copiers(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[POOL:[^:]*]]: !llvm.ptr<1>
// CHECK: %[[V:.*]] = hopper.ring.create
// CHECK: %[[VT:.*]] = hopper.ring.create
// CHECK: hopper.warp_specialize producer regs 64 {
// CHECK-NEXT: hopper.producer_warps(%[[W:.*]]) first 0 count 4 {
// CHECK-NEXT: scf.for %[[I:.*]] = %[[LB:[^ ]*]] to %[[N:[^ ]*]] step %{{.*}} : i32 {
// CHECK-NEXT: hopper.ring.producer_acquire %[[V]][%[[I]]]
// CHECK-NEXT: scf.if
// CHECK-NEXT: hopper.copy_paged_tile %[[POOL]]{{.*}} into %[[V]][%[[I]]] {{.*}} warps 4 warp %[[W]]
// CHECK-NEXT: } else {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.ring.producer_commit %[[V]][%[[I]]] tx 16384
// CHECK-NEXT: hopper.tma_load
// CHECK-NEXT: }
// CHECK-NEXT: }
// One step after both paths:
// CHECK-NEXT: %[[LATER:.*]] = arith.cmpi ne, %[[I]], %[[LB]]
// CHECK-NEXT: scf.if %[[LATER]] {
// CHECK: %[[PREV:.*]] = arith.subi %[[I]], %{{.*}}
// CHECK-NEXT: hopper.ring.consumer_wait %[[V]][%[[PREV]]]
// CHECK-NEXT: hopper.ring.producer_acquire %[[VT]][%[[PREV]]]
// CHECK-NEXT: hopper.transpose_stage %[[V]][%[[PREV]]] to %[[VT]] worker %[[W]] of 4
// CHECK-NEXT: hopper.ring.consumer_release %[[V]][%[[PREV]]]
// CHECK-NEXT: hopper.named_barrier.sync transpose[%{{.*}}] of 1 threads 128 {diverged}
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK-NEXT: %[[C:.*]] = arith.cmpi eq, %[[TID]]
// CHECK-NEXT: scf.if %[[C]] {
// CHECK-NEXT: hopper.ring.producer_commit %[[VT]][%[[PREV]]] tx 0
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: %[[RAN:.*]] = arith.cmpi slt, %[[LB]], %[[N]]
// CHECK-NEXT: scf.if %[[RAN]] {
// CHECK: hopper.transpose_stage %{{.*}} to %[[VT]] worker %[[W]] of 4
// CHECK: hopper.ring.producer_commit %[[VT]]
// CHECK: } consumers
// CHECK-NOT: first 1 count 3
func.func @copiers(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                   %n: i32, %ps: i32, %pages: i32, %len: i32, %stride: i64, %small: i1) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c32 = arith.constant 32 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 64 {
    hopper.producer_warps(%w) first 0 count 4 {
      scf.for %i = %c0 to %n step %c1 : i32 {
        hopper.ring.producer_acquire %v[%i] : !v
        scf.if %small {
          hopper.copy_paged_tile %pool[%i, %c0] strides %stride, %stride, %stride
              pages %table page_size %ps pool %pages bound %len into %v[%i] rows 128
              cols 128 warps 4 warp %w : f8E4M3FN, !v
        } else {
          hopper.producer_thread {
            hopper.ring.producer_commit %v[%i] tx 16384 : !v
            hopper.tma_load %map[%c0, %c0, %i, %c0] into %v[%i] at %c0 : !v
          }
        }
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      %worker = arith.addi %w, %c1 : i32
      scf.for %s = %c0 to %n step %c1 : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.ring.producer_acquire %vt[%s] : !vt
        hopper.transpose_stage %v[%s] to %vt worker %worker of 4 rows 128 cols 128 : !v, !vt
        hopper.ring.consumer_release %v[%s] : !v
        hopper.named_barrier.sync transpose[%c0] of 1 threads 128
        %tid = nvvm.read.ptx.sreg.tid.x : i32
        %first = arith.cmpi eq, %tid, %c32 : i32
        scf.if %first {
          hopper.ring.producer_commit %vt[%s] tx 0 : !vt
        }
      }
    }
  } consumers(%cw of 1) regs 192 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 128, cluster = 1>

// Copying warps neither warp 0 alone nor all of the workers.
func.func @two_copiers(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 64 {
    hopper.producer_warps(%w) first 0 count 2 {
      hopper.ring.producer_acquire %v[%n] : !v
    }
    // expected-error @below {{transposes V on 4 workers, but warps 0 .. 1 fill it: warp 0 alone joins the transposer as worker 0, or the fillers are all its workers}}
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 1) regs 192 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// Two paths of one loop-body op filling different slots: one step cannot
// follow both.
func.func @paths_apart(%smem: !llvm.ptr<3>, %n: i32, %one: i32, %c: i1) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      scf.for %i = %c0 to %n step %one : i32 {
        %j = arith.addi %i, %one : i32
        hopper.ring.producer_acquire %v[%i] : !v
        scf.if %c {
          hopper.ring.producer_commit %v[%i] tx 16384 : !v
        } else {
          // expected-error @below {{fills another slot of V than a fill beside it (another path of the same op), whose one step follows both}}
          hopper.ring.producer_commit %v[%j] tx 16384 : !v
        }
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// A branch that fills V on one path only: a step after it would wait for
// a slot the other path never fills.
func.func @one_path(%smem: !llvm.ptr<3>, %n: i32, %one: i32, %c: i1) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      scf.for %i = %c0 to %n step %one : i32 {
        hopper.ring.producer_acquire %v[%i] : !v
        scf.if %c {
          // expected-error @below {{fills V inside a scf.if that does not fill it on every path (a fill, a hopper.producer_thread, or an scf.if each of whose branches fills V): one step after it would wait for a slot not filled}}
          hopper.ring.producer_commit %v[%i] tx 16384 : !v
        }
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// Two fills of V in one loop body: a step after each would transpose each
// slot twice.
func.func @two_sites(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      scf.for %i = %c0 to %n step %one : i32 {
        hopper.ring.producer_acquire %v[%i] : !v
        hopper.ring.producer_commit %v[%i] tx 8192 : !v
        hopper.ring.producer_acquire %v[%i] : !v
        // expected-error @below {{fills V at a second place of one loop body (or of the program): a step after each would transpose its slot twice}}
        hopper.ring.producer_commit %v[%i] tx 8192 : !v
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// A fill in an scf.while: its iterations have no induction variable to
// follow one behind.
func.func @while_fill(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      %r = scf.while (%i = %c0) : (i32) -> i32 {
        %more = arith.cmpi slt, %i, %n : i32
        scf.condition(%more) %i : i32
      } do {
      ^bb0(%i: i32):
        hopper.ring.producer_acquire %v[%i] : !v
        // expected-error @below {{fills V in a loop other than an scf.for, whose iterations the transposer's step cannot follow one behind}}
        hopper.ring.producer_commit %v[%i] tx 16384 : !v
        %next = arith.addi %i, %one : i32
        scf.yield %next : i32
      }
    }
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// Copying warps that never fill V: erasing the loop of warps 1 .. 3 would
// leave V untransposed.
func.func @no_fill(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%cw0) first 0 count 4 {
      hopper.ring.producer_acquire %v[%n] : !v
    }
    // expected-error @below {{transposes V, but the program of the warps that would join it holds no fill of V (a commit carrying bytes, or a copy of pages) for its step to follow}}
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 256, cluster = 1>

// The pass run twice: warp 0 already runs the step.
func.func @twice(%smem: !llvm.ptr<3>, %n: i32, %one: i32) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w0) first 0 count 1 {
      hopper.ring.producer_acquire %v[%n] : !v
      hopper.producer_thread {
        hopper.ring.producer_commit %v[%n] tx 16384 : !v
      }
      %zero = arith.constant 0 : i32
      hopper.transpose_stage %v[%n] to %vt worker %zero of 4 rows 128 cols 128 : !v, !vt
    }
    // expected-error @below {{counts workers whose step another program already runs (the pass ran before)}}
    hopper.producer_warps(%w) first 1 count 3 {
      scf.for %s = %c0 to %n step %one : i32 {
        hopper.ring.consumer_wait %v[%s] : !v
        hopper.transpose_stage %v[%s] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
      }
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}
