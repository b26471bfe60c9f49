// The tile scheduler's ops print and parse back; a dynamic schedule needs
// its counter and a static one has none.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @schedule
// CHECK: hopper.tile_grid %{{.*}}, %{{.*}}, %{{.*}} block_m 128 pairs
// CHECK: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128 longest_first
// CHECK: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128 longest_first sections %{{.*}} of %{{.*}}
// CHECK: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128 sections %{{.*}} of %{{.*}}
// CHECK: hopper.tile_next %{{.*}} static
// CHECK: hopper.tile_next %{{.*}} dynamic counter %{{.*}} : !llvm.ptr<1>
// CHECK: hopper.tile_counter_reset %{{.*}} : !llvm.ptr<1>
// CHECK: hopper.tile_claim %{{.*}} first %{{.*}} static
// CHECK: hopper.tile_claim %{{.*}} first %{{.*}} dynamic counter %{{.*}} : !llvm.ptr<1>
func.func @schedule(%sq: i32, %hq: i32, %b: i32, %t: i32, %ctr: !llvm.ptr<1>, %k: i32) -> (i32, i32, i32, i32, i32, i32, i32, i32, i32) {
  %numM, %tiles = hopper.tile_grid %sq, %hq, %b block_m 128 pairs
  %m0, %head, %batch = hopper.tile_coords %t in %numM, %hq block_m 128 longest_first
  %m1, %head1, %batch1 = hopper.tile_coords %t in %numM, %hq block_m 128 longest_first sections %k of %b
  %m2, %head2, %batch2 = hopper.tile_coords %t in %numM, %hq block_m 128 sections %k of %b
  %n0 = hopper.tile_next %t static
  %n1 = hopper.tile_next %t dynamic counter %ctr : !llvm.ptr<1>
  hopper.tile_counter_reset %ctr : !llvm.ptr<1>
  %c0 = hopper.tile_claim %k first %t static
  %c1 = hopper.tile_claim %k first %t dynamic counter %ctr : !llvm.ptr<1>
  return %tiles, %m0, %head, %batch, %n0, %n1, %numM, %c0, %c1 : i32, i32, i32, i32, i32, i32, i32, i32, i32
}

// -----

func.func @no_counter(%t: i32) -> i32 {
  // expected-error @below {{the dynamic schedule takes its tiles from a counter}}
  %n = hopper.tile_next %t dynamic
  return %n : i32
}

// -----

func.func @stray_counter(%t: i32, %ctr: !llvm.ptr<1>) -> i32 {
  // expected-error @below {{the static schedule has no counter}}
  %n = hopper.tile_next %t static counter %ctr : !llvm.ptr<1>
  return %n : i32
}

// -----

func.func @claim_no_counter(%k: i32, %t: i32) -> i32 {
  // expected-error @below {{the dynamic schedule takes its tiles from a counter}}
  %n = hopper.tile_claim %k first %t dynamic
  return %n : i32
}

// -----

func.func @claim_stray_counter(%k: i32, %t: i32, %ctr: !llvm.ptr<1>) -> i32 {
  // expected-error @below {{the static schedule has no counter}}
  %n = hopper.tile_claim %k first %t static counter %ctr : !llvm.ptr<1>
  return %n : i32
}

// -----

func.func @block(%sq: i32, %hq: i32, %b: i32) -> i32 {
  // expected-error @below {{attribute 'block_m' failed to satisfy constraint}}
  %numM, %tiles = hopper.tile_grid %sq, %hq, %b block_m 0
  return %tiles : i32
}

// -----

// One thread claims: in the consumers' program only inside a ring fill
// (hopper-warp-specialize gives it to the producer thread), in the
// producer region only in hopper.producer_thread.
func.func @claim_in_consumers(%k: i32, %t: i32, %ctr: !llvm.ptr<1>) {
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    // expected-error @+1 {{must stand in a hopper.ring.fill or hopper.producer_thread: one thread claims the tiles and counts itself done}}
    %c = hopper.tile_claim %k first %t dynamic counter %ctr : !llvm.ptr<1>
  }
  return
}

// -----

func.func @reset_in_producer_warps(%ctr: !llvm.ptr<1>) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_warps(%w) first 1 count 3 {
      // expected-error @+1 {{must stand in a hopper.ring.fill or hopper.producer_thread}}
      hopper.tile_counter_reset %ctr : !llvm.ptr<1>
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

// CHECK-LABEL: func.func @next_in_producer_thread
func.func @next_in_producer_thread(%t: i32, %ctr: !llvm.ptr<1>) {
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      // CHECK: hopper.tile_next
      %n = hopper.tile_next %t dynamic counter %ctr : !llvm.ptr<1>
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

// The section size and the pair count come together (the generic form
// could give one alone).
func.func @sections_without_pairs(%t: i32, %numM: i32, %hq: i32, %n: i32) -> i32 {
  // expected-error @below {{sections need both the section size and the pair count}}
  %c:3 = "hopper.tile_coords"(%t, %numM, %hq, %n) <{block_m = 128 : i64, longest_first, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (i32, i32, i32, i32) -> (i32, i32, i32)
  return %c#0 : i32
}

// -----

func.func @empty_sections(%t: i32, %numM: i32, %hq: i32, %hb: i32) -> i32 {
  %zero = arith.constant 0 : i32
  // expected-error @below {{sections of 0 pairs: at least 1}}
  %m0, %head, %batch = hopper.tile_coords %t in %numM, %hq block_m 128 longest_first sections %zero of %hb
  return %m0 : i32
}
