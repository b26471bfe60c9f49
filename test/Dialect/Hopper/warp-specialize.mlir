// hopper-warp-specialize: the consumers' program says what fills each ring
// slot where it is used (hopper.ring.fill); the pass builds the producer
// thread's program from it (the control flow around the fills, the
// arithmetic and reads their operands need, each fill as the slot's acquire
// and loads, in program order) and leaves the consumers the rest. What it
// cannot recompute in the producer thread is refused, as are fills the
// verifier rejects.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --hopper-warp-specialize | FileCheck %s
// The passes after it refuse a fill that was not moved:
// RUN: not fa3-opt %s --split-input-file --hopper-async-copy 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not fa3-opt %s --split-input-file --convert-hopper-to-nvvm 2>&1 | FileCheck %s --check-prefix=ORDER-NVVM
// ORDER: error: 'hopper.ring.fill' op is still in the consumers' program: run hopper-warp-specialize before hopper-async-copy
// ORDER-NVVM: error: 'hopper.ring.fill' op has no NVVM form: hopper-warp-specialize moves it into the producer thread

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>
!k = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 256, cluster = 1>

// CHECK-LABEL: func.func @slice(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[LENS:[^:]*]]: !llvm.ptr<1>, %[[B:[^:]*]]: i32
// CHECK: %[[Q:.*]] = hopper.ring.create
// CHECK: %[[K:.*]] = hopper.ring.create
// The producer thread: the sequence's length read again (one lane runs it:
// no shuffle), the tile's row, Q, then the guard and loop around the K
// fills with the slot and row of block t; nothing of the consumers' math.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr %[[LENS]][%[[B]]]
// CHECK-NEXT: %[[N:.*]] = llvm.load %[[P]]
// CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[B]], %{{.*}}
// CHECK-NEXT: hopper.ring.producer_acquire %[[Q]][%{{.*}}]
// CHECK-NEXT: hopper.load_tile %[[MAP]][%[[ROW]], %{{.*}}, %[[B]]] into %[[Q]]
// CHECK-NEXT: %[[ANY:.*]] = arith.cmpi sgt, %[[N]]
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK-NEXT: scf.for %[[T:.*]] = %{{.*}} to %[[N]] step
// CHECK-NEXT: %[[KROW:.*]] = arith.muli %[[T]]
// CHECK-NEXT: hopper.ring.producer_acquire %[[K]][%[[T]]]
// CHECK-NEXT: hopper.load_tile %[[MAP]][%[[KROW]], %{{.*}}, %[[B]]] into %[[K]][%[[T]]]
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// Whatever the producer region held before stays, after the thread's role.
// CHECK-NEXT: hopper.producer_warps
// The consumers: the shuffled length and their math, no fills, and the row
// arithmetic only the fills needed gone.
// CHECK: } consumers(%{{.*}} of 2) regs 240 {
// CHECK-NEXT: %[[CP:.*]] = llvm.getelementptr %[[LENS]][%[[B]]]
// CHECK-NEXT: %[[CL:.*]] = llvm.load %[[CP]]
// CHECK-NEXT: %[[CN:.*]] = hopper.warp_uniform %[[CL]] : i32
// CHECK-NEXT: hopper.ring.consumer_wait %[[Q]]
// CHECK-NEXT: %[[CANY:.*]] = arith.cmpi sgt, %[[CN]]
// CHECK-NEXT: %{{.*}} = scf.if %[[CANY]] -> (i32) {
// CHECK-NEXT: %{{.*}} = scf.for %[[CT:.*]] = %{{.*}} to %[[CN]] step %{{.*}} iter_args
// CHECK-NEXT: hopper.ring.consumer_wait %[[K]][%[[CT]]]
// CHECK-NEXT: arith.addi
// CHECK-NEXT: hopper.ring.consumer_release %[[K]][%[[CT]]]
// CHECK-NOT: hopper.ring.fill
// CHECK-NOT: hopper.load_tile
// CHECK: return
func.func @slice(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %lens: !llvm.ptr<1>, %b: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %q = hopper.ring.create %smem : !q
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 1 count 1 {
    }
  } consumers(%cw of 2) regs 240 {
    %p = llvm.getelementptr %lens[%b] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    %loaded = llvm.load %p : !llvm.ptr<1> -> i32
    %n = hopper.warp_uniform %loaded : i32
    %row = arith.muli %b, %c64 : i32
    hopper.ring.fill %q[%c0] : !q {
      hopper.load_tile %map[%row, %c0, %b] into %q[%c0] rows 64 cols 128 : bf16, !q
    }
    hopper.ring.consumer_wait %q[%c0] : !q
    %any = arith.cmpi sgt, %n, %c0 : i32
    %r = scf.if %any -> (i32) {
      %s = scf.for %t = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
        %krow = arith.muli %t, %c64 : i32
        hopper.ring.fill %k[%t] : !k {
          hopper.load_tile %map[%krow, %c0, %b] into %k[%t] rows 64 cols 128 : bf16, !k
        }
        hopper.ring.consumer_wait %k[%t] : !k
        %a = arith.addi %acc, %t : i32
        hopper.ring.consumer_release %k[%t] : !k
        scf.yield %a : i32
      }
      scf.yield %s : i32
    } else {
      scf.yield %c0 : i32
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// A kernel without fills (a persistent kernel's producer is built as its
// own role) is left as it is.
// CHECK-LABEL: func.func @built_roles
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.load_tile
// CHECK-NEXT: }
// CHECK-NEXT: } consumers
func.func @built_roles(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %q[%u] : !q
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  } consumers(%cw of 2) regs 240 {
    hopper.ring.consumer_wait %q[%u] : !q
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @consumer_index(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{needs the consumer index, which the producer thread does not have}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%cw, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// The producer's copy of a loop carries the values its fills need (with
// their start and their update), not the others.
// CHECK-LABEL: func.func @loop_carried(
// CHECK: hopper.producer_thread {
// CHECK-NEXT: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ROW:.*]] = %{{.*}}) -> (i32)  : i32 {
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.load_tile %{{.*}}[%[[ROW]], %[[T]], %[[T]]]
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[ROW]], %[[T]] : i32
// CHECK-NEXT: scf.yield %[[NEXT]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: consumers(
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (i32, f32)
func.func @loop_carried(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %n: i32, %x: f32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %r:2 = scf.for %t = %c0 to %n step %c1 iter_args(%row = %c0, %sum = %x) -> (i32, f32) : i32 {
      hopper.ring.fill %q[%t] : !q {
        hopper.load_tile %map[%row, %t, %t] into %q[%t] rows 64 cols 128 : bf16, !q
      }
      %next = arith.addi %row, %t : i32
      %s1 = arith.addf %sum, %x : f32
      scf.yield %next, %s1 : i32, f32
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @carried_shuffle(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %r = scf.for %t = %c0 to %n step %c1 iter_args(%row = %c0) -> (i32) : i32 {
      // expected-note @+1 {{needed by this ring fill}}
      hopper.ring.fill %q[%t] : !q {
        hopper.load_tile %map[%row, %t, %t] into %q[%t] rows 64 cols 128 : bf16, !q
      }
      %lane0 = nvvm.shfl.sync idx %t, %row, %t, %t : i32 -> i32
      // expected-error @+1 {{needs 'nvvm.shfl.sync', which the producer thread cannot run again for itself}}
      scf.yield %lane0 : i32
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @side_effect(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %lane0 = nvvm.shfl.sync idx %u, %u, %u, %u : i32 -> i32
    // expected-error @+1 {{needs 'nvvm.shfl.sync', which the producer thread cannot run again for itself: 'nvvm.shfl.sync' may write memory, synchronize or need the whole warp}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%lane0, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// A while loop around fills: its condition and body in the producer.
// CHECK-LABEL: func.func @in_while(
// CHECK-SAME: %{{[^:]*}}: i32, %[[GO:[^:]*]]: i1)
// CHECK: hopper.producer_thread {
// CHECK-NEXT: scf.while : () -> () {
// CHECK-NEXT: scf.condition(%[[GO]])
// CHECK-NEXT: } do {
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.load_tile
// CHECK-NEXT: scf.yield
func.func @in_while(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %go: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    scf.while : () -> () {
      scf.condition(%go)
    } do {
      hopper.ring.fill %q[%u] : !q {
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      }
      scf.yield
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// The verifier: a fill holds its slot's loads, in the consumers' program.
func.func @other_slot(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %v: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{holds a load into another ring or slot than its own}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%v] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @acquire_inside(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{holds the slot's loads only; 'hopper.ring.producer_acquire' is not one}}
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.producer_acquire %q[%u] : !q
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @no_load(%smem: !llvm.ptr<3>, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{holds no load of its slot (hopper.load_tile, hopper.load_paged_tile or hopper.copy_paged_tile) and publishes nothing}}
    hopper.ring.fill %q[%u] : !q {
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @in_producer(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
    // expected-error @+1 {{must be inside the consumers region of hopper.warp_specialize}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}


// -----

func.func @uniform_in_thread(%u: i32) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      // expected-error @+1 {{inside hopper.producer_thread, where one lane runs: the value is its own}}
      %x = hopper.warp_uniform %u : i32
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// A call is followed into its callee: a read-only one is recomputed, a
// recursive one refused.
// CHECK-LABEL: func.func @calls
// CHECK: hopper.producer_thread {
// CHECK-NEXT: %[[R:.*]] = func.call @row_of(
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.load_tile %{{.*}}[%[[R]],
// ... and the consumers lose the call with the fill.
// CHECK: consumers(
// CHECK-NOT: func.call
// CHECK: return
func.func private @row_of(%x: i32) -> i32 {
  %c64 = arith.constant 64 : i32
  %r = arith.muli %x, %c64 : i32
  return %r : i32
}
func.func @calls(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %row = func.call @row_of(%u) : (i32) -> i32
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%row, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func private @forever(%x: i32) -> i32 {
  %r = func.call @forever(%x) : (i32) -> i32
  return %r : i32
}
func.func @recursive(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %row = func.call @forever(%u) : (i32) -> i32
    // expected-error @+1 {{needs 'func.call', which the producer thread cannot run again for itself}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%row, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// Fills in an else branch only: the producer's scf.if has an empty then.
// Two hopper.warp_specialize ops: each its own producer.
// CHECK-LABEL: func.func @else_only
// CHECK: hopper.producer_thread {
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK-NEXT: } else {
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.load_tile %{{.*}}[%[[ROW:[^,]*]],
// CHECK: hopper.producer_thread {
// CHECK-NEXT: hopper.ring.producer_acquire
func.func @else_only(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    scf.if %c {
      hopper.ring.consumer_wait %q[%u] : !q
    } else {
      hopper.ring.fill %q[%u] : !q {
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      }
    }
  }
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// A result of control flow holding fills: its copy in the producer yields
// it from both arms.
// CHECK-LABEL: func.func @structure_result(
// CHECK-SAME: %[[U:[^:]*]]: i32, %[[C:[^:]*]]: i1)
// CHECK: hopper.producer_thread {
// CHECK-NEXT: %[[R:.*]] = scf.if %[[C]] -> (i32) {
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.load_tile
// CHECK-NEXT: scf.yield %[[U]] : i32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[UU:.*]] = arith.addi %[[U]], %[[U]] : i32
// CHECK-NEXT: scf.yield %[[UU]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%[[R]]]
func.func @structure_result(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %r = scf.if %c -> (i32) {
      hopper.ring.fill %q[%u] : !q {
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      }
      scf.yield %u : i32
    } else {
      %uu = arith.addi %u, %u : i32
      scf.yield %uu : i32
    }
    hopper.ring.fill %q[%r] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%r] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @write(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %p: !llvm.ptr<1>) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %n = scf.execute_region -> i32 {
      llvm.store %u, %p : i32, !llvm.ptr<1>
      scf.yield %u : i32
    }
    // expected-error @+1 {{needs 'scf.execute_region', which the producer thread cannot run again for itself: 'llvm.store' touches memory or synchronizes}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%n, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @shared_read(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.consumer_wait %q[%u] : !q
    %n = llvm.load %smem : !llvm.ptr<3> -> i32
    // expected-error @+1 {{needs 'llvm.load', which the producer thread cannot run again for itself: 'llvm.load' reads shared or generic memory}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%n, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @thread_index(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %t = nvvm.read.ptx.sreg.tid.x : i32
    // expected-error @+1 {{needs 'nvvm.read.ptx.sreg.tid.x', which the producer thread cannot run again for itself: 'nvvm.read.ptx.sreg.tid.x' is the thread's own}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%t, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @thread_index_above(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  %t = nvvm.read.ptx.sreg.tid.x : i32
  %row = arith.addi %t, %u : i32
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{needs a value defined above the roles from the thread's own index}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%row, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func private @lane0(%x: i32) -> i32 {
  %r = hopper.warp_uniform %x : i32
  return %r : i32
}
func.func @uniform_in_callee(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %row = func.call @lane0(%u) : (i32) -> i32
    // expected-error @+1 {{a called function shuffles a warp}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%row, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @barrier_in_fill(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{holds 'nvvm.barrier0', which the producer thread cannot run}}
    hopper.ring.fill %q[%u] : !q {
      nvvm.barrier0
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @second_thread(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @+1 {{has ring fills and a hopper.producer_thread}}
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
    }
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 196608, empty = 196624, arrivals = 256, cluster = 1>
!k = !hopper.ring<stages = 2, stage_bytes = 16384, data = 32768, full = 196640, empty = 196656, arrivals = 256, cluster = 1>

// A persistent CTA's loop: Q's fill claims the k-th tile and publishes it;
// the consumers read the id after their wait. The producer claims before
// it acquires the slot (the atomic overlaps the wait), then publishes. The producer thread takes
// the claimed id itself where the program reads the word (the loop's
// condition, the K slot it carries to the body).
// CHECK-LABEL: func.func @published(
// CHECK-SAME: %[[ADDR:[^:]*]]: i32, %[[TILES:[^:]*]]: i32, %[[CTR:[^:]*]]: !llvm.ptr<1>, %[[CTA:[^:]*]]: i32)
// CHECK: hopper.producer_thread {
// CHECK: scf.while (%[[K:.*]] = %{{.*}}, %[[G:.*]] = %{{.*}}) : (i32, i32) -> (i32, i32) {
// CHECK-NEXT: %[[T:.*]] = hopper.tile_claim %[[K]] first %[[CTA]] dynamic counter %[[CTR]]
// CHECK-NEXT: hopper.ring.producer_acquire %[[Q:[0-9]+]][%[[K]]]
// CHECK-NEXT: hopper.ring.publish %[[T]] at %[[ADDR]] to %[[Q]][%[[K]]]
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[T]], %[[TILES]] : i32
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NEXT: hopper.load_tile
// CHECK-NEXT: } else {
// CHECK-NEXT: hopper.ring.producer_commit %[[Q]][%[[K]]] tx 0
// CHECK-NEXT: }
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi slt, %[[T]], %[[TILES]] : i32
// CHECK-NEXT: %[[G1:.*]] = arith.addi %[[G]], %[[T]] : i32
// CHECK-NEXT: scf.condition(%[[MORE]]) %[[K]], %[[G1]] : i32, i32
// CHECK-NEXT: } do {
// CHECK-NEXT: ^bb0(%[[KA:.*]]: i32, %[[GA:.*]]: i32):
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%[[GA]]]
// CHECK-NEXT: hopper.load_tile %{{.*}}[%[[GA]],
// CHECK-NEXT: %[[K1:.*]] = arith.addi %[[KA]], %{{.*}} : i32
// CHECK-NEXT: scf.yield %[[K1]], %[[GA]] : i32, i32
// CHECK: consumers(
// CHECK-NOT: hopper.ring.fill
// CHECK: hopper.ring.consumer_wait
// CHECK-NEXT: %[[ID:.*]] = hopper.ring.published %{{.*}} word 0 at %[[ADDR]]
// CHECK-NEXT: arith.cmpi slt, %[[ID]], %[[TILES]]
func.func @published(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %addr: i32, %tiles: i32, %ctr: !llvm.ptr<1>, %cta: i32) {
  %q = hopper.ring.create %smem : !q
  %kr = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %r:2 = scf.while (%k = %c0, %g = %c0) : (i32, i32) -> (i32, i32) {
      hopper.ring.fill %q[%k] : !q {
        %t = hopper.tile_claim %k first %cta dynamic counter %ctr : !llvm.ptr<1>
        hopper.ring.publish %t at %addr to %q[%k] : !q
        %in = arith.cmpi slt, %t, %tiles : i32
        scf.if %in {
          hopper.load_tile %map[%t, %t, %t] into %q[%k] rows 64 cols 128 : bf16, !q
        } else {
          hopper.ring.producer_commit %q[%k] tx 0 : !q
        }
      }
      hopper.ring.consumer_wait %q[%k] : !q
      %id = hopper.ring.published %q[%k] word 0 at %addr : !q
      %more = arith.cmpi slt, %id, %tiles : i32
      %g1 = arith.addi %g, %id : i32
      scf.condition(%more) %k, %g1 : i32, i32
    } do {
    ^bb0(%ka: i32, %ga: i32):
      hopper.ring.fill %kr[%ga] : !k {
        hopper.load_tile %map[%ga, %ga, %ga] into %kr[%ga] rows 64 cols 128 : bf16, !k
      }
      hopper.ring.consumer_wait %kr[%ga] : !k
      %k1 = arith.addi %ka, %c1 : i32
      scf.yield %k1, %ga : i32, i32
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @published_by_none(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
    hopper.ring.consumer_wait %q[%u] : !q
    %w = hopper.ring.published %q[%u] word 0 at %addr : !q
    // expected-error @+1 {{needs a word read from a slot whose last fill before the read publishes none}}
    hopper.ring.fill %q[%w] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%w] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @published_past_the_words(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.publish %u at %addr to %q[%u] : !q
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
    hopper.ring.consumer_wait %q[%u] : !q
    %w = hopper.ring.published %q[%u] word 2 at %addr : !q
    // expected-error @+1 {{reads word 2 of 1 published}}
    hopper.ring.fill %q[%w] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%w] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @publish_after_load(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{publishes after the slot is committed (the words must precede the loads and commits)}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      hopper.ring.publish %u at %addr to %q[%u] : !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @publish_twice(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{holds two hopper.ring.publish}}
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.publish %u at %addr to %q[%u] : !q
      hopper.ring.publish %u at %addr to %q[%u] : !q
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @commit_bytes_in_fill(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{holds a commit that is not its own slot's 'tx 0' (hopper-async-copy writes the commits of loads)}}
    hopper.ring.fill %q[%u] : !q {
      scf.if %c {
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      } else {
        hopper.ring.producer_commit %q[%u] tx 16384 : !q
      }
    }
  }
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 256, cluster = 1>

// A slot that carries words only (FP8's end-of-tiles flag after the tile
// loop): the producer publishes them and completes the slot itself, at the
// slot the loop's result names.
// CHECK-LABEL: func.func @words_only(
// CHECK-SAME: %[[ADDR:[^:]*]]: i32)
// CHECK: hopper.producer_thread {
// CHECK: %[[G:.*]] = scf.for
// CHECK: hopper.ring.producer_acquire %[[K:[0-9]+]][%[[G]]]
// CHECK-NEXT: hopper.ring.publish %{{.*}} at %[[ADDR]] to %[[K]][%[[G]]]
// CHECK-NEXT: hopper.ring.producer_commit %[[K]][%[[G]]] tx 0
// CHECK-NEXT: }
// CHECK: consumers(
// CHECK-NOT: hopper.ring.publish
func.func @words_only(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %n: i32, %addr: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %kr = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    %g = scf.for %t = %c0 to %n step %c1 iter_args(%u = %c0) -> (i32) : i32 {
      hopper.ring.fill %kr[%u] : !k {
        hopper.load_tile %map[%t, %t, %t] into %kr[%u] rows 64 cols 128 : bf16, !k
      }
      hopper.ring.consumer_wait %kr[%u] : !k
      %u1 = arith.addi %u, %c1 : i32
      scf.yield %u1 : i32
    }
    hopper.ring.fill %kr[%g] : !k {
      hopper.ring.publish %c1 at %addr to %kr[%g] : !k
      hopper.ring.producer_commit %kr[%g] tx 0 : !k
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

func.func @words_never_committed(%smem: !llvm.ptr<3>, %u: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{loads nothing and never commits its slot (a 'producer_commit ... tx 0' completes it)}}
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.publish %u at %addr to %q[%u] : !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// A path without an arrive (no tile: no load, no plain commit) would leave
// the consumers waiting.
func.func @path_without_arrive(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{must arrive on its slot once on every path: one load, or where it loads nothing a 'producer_commit ... tx 0', outside loops}}
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.publish %u at %addr to %q[%u] : !q
      scf.if %c {
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      }
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>

// Two arrives on one path would complete the next phase too.
func.func @two_arrives(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{must arrive on its slot once on every path}}
    hopper.ring.fill %q[%u] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      hopper.ring.producer_commit %q[%u] tx 0 : !q
    }
  }
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 264, cluster = 2>

func.func @plain_commit_in_cluster(%smem: !llvm.ptr<3>, %u: i32, %addr: i32) {
  %kr = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{commits 'tx 0' with 1 arrival(s) into a ring of 2 CTA(s) and 1 producers a stage: a plain arrive completes only a ring of one CTA, arriving for all of its producers}}
    hopper.ring.fill %kr[%u] : !k {
      hopper.ring.publish %u at %addr to %kr[%u] : !k
      hopper.ring.producer_commit %kr[%u] tx 0 : !k
    }
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 256, cluster = 1, producers = 128>

// A words-only fill of a ring whose stages count 128 arrivals: a plain
// commit must make all of them.
func.func @plain_commit_short_of_producers(%smem: !llvm.ptr<3>, %u: i32, %addr: i32) {
  %vr = hopper.ring.create %smem : !v
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{commits 'tx 0' with 1 arrival(s) into a ring of 1 CTA(s) and 128 producers a stage}}
    hopper.ring.fill %vr[%u] : !v {
      hopper.ring.publish %u at %addr to %vr[%u] : !v
      hopper.ring.producer_commit %vr[%u] tx 0 : !v
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 196608, empty = 196624, arrivals = 256, cluster = 1>

// The last fill of the read's slot publishes nothing, though an earlier
// one, a level up, did: refused, not bound to the older words.
func.func @published_by_none_nested(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.publish %u at %addr to %q[%u] : !q
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
    scf.if %c {
      hopper.ring.fill %q[%u] : !q {
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      }
      hopper.ring.consumer_wait %q[%u] : !q
      %w = hopper.ring.published %q[%u] word 0 at %addr : !q
      // expected-error @+1 {{needs a word read from a slot whose last fill before the read publishes none}}
      hopper.ring.fill %q[%w] : !q {
        hopper.load_tile %map[%u, %u, %u] into %q[%w] rows 64 cols 128 : bf16, !q
      }
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 196608, empty = 196624, arrivals = 256, cluster = 1>

// A fill of the ring inside control flow between the publishing fill and
// the read: which words the read sees depends on the path.
func.func @published_on_some_path(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %addr: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%u] : !q {
      hopper.ring.publish %u at %addr to %q[%u] : !q
      hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
    }
    scf.if %c {
      hopper.ring.fill %q[%u] : !q {
        hopper.ring.publish %addr at %addr to %q[%u] : !q
        hopper.load_tile %map[%u, %u, %u] into %q[%u] rows 64 cols 128 : bf16, !q
      }
    }
    hopper.ring.consumer_wait %q[%u] : !q
    %w = hopper.ring.published %q[%u] word 0 at %addr : !q
    // expected-error @+1 {{needs a word read from a slot of a ring that control flow before the read also fills: which fill published it depends on the path}}
    hopper.ring.fill %q[%w] : !q {
      hopper.load_tile %map[%u, %u, %u] into %q[%w] rows 64 cols 128 : bf16, !q
    }
  }
  return
}
