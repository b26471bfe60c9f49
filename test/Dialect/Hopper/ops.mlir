// The hopper ops print and parse back, and their verifiers refuse what the
// hardware cannot do.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @barriers
// CHECK: hopper.named_barrier.sync turn[%{{.*}}] of 2 threads 256
// CHECK: hopper.named_barrier.arrive turn[%{{.*}}] of 2 threads 256
// CHECK: hopper.named_barrier.sync epilogue[%{{.*}}] of 3 threads 128
// CHECK: hopper.warpgroup_any %{{.*}} in consumer[%{{.*}}] of 3
func.func @barriers(%c: i32, %p: i1) -> i1 {
  hopper.named_barrier.sync turn[%c] of 2 threads 256
  hopper.named_barrier.arrive turn[%c] of 2 threads 256
  hopper.named_barrier.sync epilogue[%c] of 3 threads 128
  %any = hopper.warpgroup_any %p in consumer[%c] of 3
  return %any : i1
}

// -----

// CHECK-LABEL: func.func @roles
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: nvvm.setmaxregister
// CHECK-NOT: gpu.yield
// CHECK: } consumers(%[[C:.*]] of 2) regs 240 {
// CHECK-NEXT: hopper.named_barrier.sync epilogue[%[[C]]] of 2 threads 128
// CHECK-NEXT: }
func.func @roles() {
  hopper.warp_specialize producer regs 24 {
    nvvm.setmaxregister decrease 24
  } consumers(%c of 2) regs 240 {
    hopper.named_barrier.sync epilogue[%c] of 2 threads 128
  }
  return
}

// -----

// The producer warpgroup's roles: its thread 0, and helper warps with
// their index among them.
// CHECK-LABEL: func.func @producer_roles
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: nvvm.setmaxregister
// CHECK-NEXT: }
// CHECK-NEXT: hopper.producer_warps(%[[W:.*]]) first 1 count 3 {
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "helper", "r" %[[W]]
// CHECK-NEXT: }
func.func @producer_roles() {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      nvvm.setmaxregister decrease 24
    }
    hopper.producer_warps(%w) first 1 count 3 {
      llvm.inline_asm has_side_effects asm_dialect = att "helper", "r" %w : (i32) -> ()
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

// Results: thread 0's, given to its warp, inside warp 0's own program.
// CHECK-LABEL: func.func @producer_thread_results
// CHECK: hopper.producer_warps(%{{.*}}) first 0 count 1 {
// CHECK-NEXT: %[[T:.*]] = hopper.producer_thread -> (i32) {
// CHECK-NEXT: gpu.yield %{{.*}} : i32
// CHECK-NEXT: }
func.func @producer_thread_results(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 0 count 1 {
      %t = hopper.producer_thread -> (i32) {
        gpu.yield %x : i32
      }
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_thread_results_on_thread_zero(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    // expected-error @below {{with results must stand in 'hopper.producer_warps' of warp 0 alone (first 0 count 1), outside another producer_thread: its results go to every lane of thread 0's warp}}
    %t = hopper.producer_thread -> (i32) {
      gpu.yield %x : i32
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_thread_results_on_other_warps(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 0 count 2 {
      // expected-error @below {{with results must stand in 'hopper.producer_warps' of warp 0 alone}}
      %t = hopper.producer_thread -> (i32) {
        gpu.yield %x : i32
      }
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_thread_yields_too_few(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 0 count 1 {
      // expected-error @below {{yields 1 value(s) for 2 result(s) of the same types}}
      %t:2 = hopper.producer_thread -> (i32, i32) {
        gpu.yield %x : i32
      }
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_thread_results_nested(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 0 count 1 {
      hopper.producer_thread {
        // expected-error @below {{outside another producer_thread}}
        %t = hopper.producer_thread -> (i32) {
          gpu.yield %x : i32
        }
      }
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_thread_yields_without_results(%x: i32) {
  hopper.warp_specialize producer regs 24 {
    // expected-error @below {{yields 1 value(s) for 0 result(s) of the same types}}
    "hopper.producer_thread"() ({
      "gpu.yield"(%x) : (i32) -> ()
    }) : () -> ()
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_thread_outside() {
  // expected-error @below {{must be inside the producer region of hopper.warp_specialize (it names threads of the producer warpgroup)}}
  hopper.producer_thread {
  }
  return
}

// -----

func.func @producer_warps_in_consumers() {
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 2) regs 240 {
    // expected-error @below {{must be inside the producer region of hopper.warp_specialize}}
    hopper.producer_warps(%w) first 1 count 1 {
    }
  }
  return
}

// -----

func.func @producer_warps_past_four() {
  hopper.warp_specialize producer regs 24 {
    // expected-error @below {{warps 2 .. 4 do not lie in the producer warpgroup's 4}}
    hopper.producer_warps(%w) first 2 count 3 {
    }
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @producer_warps_index_i64() {
  hopper.warp_specialize producer regs 24 {
    // expected-error @below {{the region takes one i32 argument, the warp's index among the role's warps}}
    "hopper.producer_warps"() <{first = 1 : i64, count = 1 : i64}> ({
    ^bb0(%w: i64):
      gpu.yield
    }) : () -> ()
  } consumers(%c of 2) regs 240 {
  }
  return
}

// -----

func.func @budget() {
  // expected-error @below {{128 x (24 + 3 x 168) = 67584 registers: more than the CTA's 65536 at launch (512 threads x 128)}}
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 3) regs 168 {
  }
  return
}

// -----

// 168 a thread at launch with two consumer warpgroups: 48 + 2 x 232 would
// wait forever in setmaxnreg.inc.
func.func @budget_at_launch() {
  // expected-error @below {{128 x (48 + 2 x 232) = 65536 registers: more than the CTA's 64512 at launch (384 threads x 168)}}
  hopper.warp_specialize producer regs 48 {
  } consumers(%c of 2) regs 232 {
  }
  return
}

// -----

// Two CTAs a SM (nvvm.minctasm 2, the decoding kernel's): 128 registers a
// thread at launch, so one consumer warpgroup beside the producer's 24 has
// at most 232.
func.func @budget_two_a_sm() attributes {nvvm.minctasm = 2 : i32} {
  // expected-error @below {{128 x (24 + 1 x 240) = 33792 registers: more than the CTA's 32768 at launch (256 threads x 128, 2 CTAs a SM (nvvm.minctasm))}}
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 1) regs 240 {
  }
  return
}

// -----

// CHECK-LABEL: func.func @budget_two_a_sm_fits
// CHECK: } consumers(%{{.*}} of 1) regs 232 {
func.func @budget_two_a_sm_fits() attributes {nvvm.minctasm = 2 : i32} {
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 1) regs 232 {
  }
  return
}

// -----

func.func @odd_budget() {
  // expected-error @below {{register budgets must be multiples of 8 (setmaxnreg), got 100}}
  hopper.warp_specialize producer regs 24 {
  } consumers(%c of 2) regs 100 {
  }
  return
}

// -----

func.func @consumer_index_i64() {
  // expected-error @below {{the consumer region takes one i32 argument, its consumer index}}
  "hopper.warp_specialize"() <{consumer_regs = 240 : i64, consumers = 2 : i64, producer_regs = 24 : i64}> ({
    gpu.yield
  }, {
  ^bb0(%c: i64):
    gpu.yield
  }) : () -> ()
  return
}

// -----

func.func @turn_of_three(%c: i32) {
  // expected-error @below {{turn barriers pass the turn between two consumer warpgroups, not 3}}
  hopper.named_barrier.sync turn[%c] of 3 threads 256
  return
}

// -----

func.func @partial_warp(%c: i32) {
  // expected-error @below {{threads must be a multiple of 32 (whole warps), got 100}}
  hopper.named_barrier.arrive epilogue[%c] of 2 threads 100
  return
}

// -----

func.func @no_such_consumer() {
  %c2 = arith.constant 2 : i32
  // expected-error @below {{consumer 2 is not one of the 2 consumer warpgroups}}
  hopper.named_barrier.sync epilogue[%c2] of 2 threads 128
  return
}

// -----

func.func @too_many_threads(%c: i32) {
  // expected-error @below {{attribute 'threads' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 32 whose maximum value is 1024}}
  hopper.named_barrier.sync epilogue[%c] of 2 threads 2048
  return
}

// -----

func.func @four_consumers(%c: i32, %p: i1) -> i1 {
  // expected-error @below {{attribute 'consumers' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1 whose maximum value is 3}}
  %any = hopper.warpgroup_any %p in consumer[%c] of 4
  return %any : i1
}

// -----

func.func @vote_of_no_such_consumer(%p: i1) -> i1 {
  %c5 = arith.constant 5 : i32
  // expected-error @below {{consumer 5 is not one of the 2 consumer warpgroups}}
  %any = hopper.warpgroup_any %p in consumer[%c5] of 2
  return %any : i1
}

// -----

func.func @unknown_kind(%c: i32) {
  // expected-error @below {{expected ::fa3::hopper::BarrierKind to be one of: turn, epilogue, vote}}
  // expected-error @below {{failed to parse Hopper_BarrierKindAttr parameter 'value'}}
  hopper.named_barrier.sync ping[%c] of 2 threads 128
  return
}
