// hopper-warp-copy: where the producer thread's program holds a
// hopper.copy_paged_tile (small pages, copied by every lane of its warps),
// the warps its copies name (warp 0, or warps 0 .. 3) run the program:
// every lane follows its loops and branches and waits for the slots, the
// copy stays warp-wide (with the warp's index where several share it),
// and each run of one thread's steps (tile loads, which hopper-async-copy
// then writes as TMA transfers, a slot's words and commits) is thread 0's
// hopper.producer_thread. Programs without such copies are left as they
// are; what the warps cannot run is refused.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --hopper-warp-copy | FileCheck %s

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 114688, empty = 114696, arrivals = 128, cluster = 1>
!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[POOL:[^:]*]]: !llvm.ptr<1>, %[[TABLE:[^:]*]]: !llvm.ptr<1>
// CHECK: hopper.warp_specialize producer regs 56 {
// CHECK-NEXT: hopper.producer_warps(%{{.*}}) first 0 count 1 {
// Q's load: one thread's.
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%c0
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.load_tile %[[MAP]]
// CHECK-NEXT: }
// Every lane runs the loop, waits for the slot and chooses the path.
// CHECK-NEXT: scf.for %[[I:.*]] = {{.*}} : i32 {
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%[[I]]]
// CHECK: %[[SMALL:.*]] = llvm.icmp "ne" %[[POOL]]
// CHECK-NEXT: scf.if %[[SMALL]] {
// The copy: every lane's.
// CHECK-NEXT: hopper.copy_paged_tile %[[POOL]][%[[I]], %{{.*}}] strides
// CHECK-NEXT: } else {
// One box a page: lane 0's.
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.load_paged_tile %[[MAP]][%[[I]], %{{.*}}] pages %[[TABLE]]
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: } consumers
func.func @decode(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                  %n: i32, %head: i32, %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %q = hopper.ring.create %smem : !q
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %q[%c0] : !q
      hopper.load_tile %map[%c0, %head, %c0] into %q[%c0] rows 64 cols 128 : bf16, !q
      scf.for %i = %c0 to %n step %c1 : i32 {
        hopper.ring.producer_acquire %k[%i] : !k
        %null = llvm.mlir.zero : !llvm.ptr<1>
        %small = llvm.icmp "ne" %pool, %null : !llvm.ptr<1>
        scf.if %small {
          hopper.copy_paged_tile %pool[%i, %head] strides %stride, %stride, %stride
              pages %table page_size %ps pool %pages bound %len into %k[%i] rows 64
              cols 128 : bf16, !k
        } else {
          hopper.load_paged_tile %map[%i, %head] pages %table page_size %ps bound %len
              into %k[%i] rows 64 cols 128 : bf16, !k
        }
      }
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A program without copies keeps its producer thread.
// CHECK-LABEL: func.func @boxes_only(
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NOT: first 0 count 1
func.func @boxes_only(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %table: !llvm.ptr<1>, %ps: i32,
                      %len: i32) {
  %c0 = arith.constant 0 : i32
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %k[%c0] : !k
      hopper.load_paged_tile %map[%c0, %c0] pages %table page_size %ps bound %len
          into %k[%c0] rows 64 cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 232 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A TMA transfer already written (hopper-async-copy ran first) is one
// thread's, not the warp's.
func.func @after_async_copy(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %pool: !llvm.ptr<1>,
                            %table: !llvm.ptr<1>, %ps: i32, %pages: i32, %len: i32,
                            %stride: i64) {
  %c0 = arith.constant 0 : i32
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %k[%c0] : !k
      // expected-error @+1 {{cannot run on every lane of warp 0 (its program copies pages with every lane): a TMA transfer already written (run hopper-warp-copy before hopper-async-copy, which writes tile loads as one thread's transfers)}}
      hopper.tma_load %map[%c0, %c0, %c0, %c0] into %k[%c0] at %c0 : !k
      hopper.ring.producer_acquire %k[%c0] : !k
      hopper.copy_paged_tile %pool[%c0, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%c0] rows 64
          cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A read of the thread's index would differ between the lanes.
func.func @thread_index(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                        %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      // expected-error @+1 {{cannot run on every lane of warp 0 (its program copies pages with every lane): it reads the thread's own index (every lane of warp 0 runs the program)}}
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      hopper.ring.producer_acquire %k[%tid] : !k
      hopper.copy_paged_tile %pool[%c0, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%tid] rows 64
          cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 114688, empty = 114696, arrivals = 128, cluster = 1>
!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// Copies of four warps (FlashAttention-3's split of the rows): warps 0 .. 3
// run the program, each copy takes the warp's index, and Q's load stays
// thread 0's.
// CHECK-LABEL: func.func @four_warps(
// CHECK: hopper.warp_specialize producer regs 56 {
// CHECK-NEXT: hopper.producer_warps(%[[W:.*]]) first 0 count 4 {
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: hopper.load_tile
// CHECK-NEXT: }
// CHECK-NEXT: scf.for
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.copy_paged_tile {{.*}} rows 64 cols 128 warps 4 warp %[[W]] : bf16
func.func @four_warps(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                      %n: i32, %head: i32, %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %q = hopper.ring.create %smem : !q
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %q[%c0] : !q
      hopper.load_tile %map[%c0, %head, %c0] into %q[%c0] rows 64 cols 128 : bf16, !q
      scf.for %i = %c0 to %n step %c1 : i32 {
        hopper.ring.producer_acquire %k[%i] : !k
        hopper.copy_paged_tile %pool[%i, %head] strides %stride, %stride, %stride
            pages %table page_size %ps pool %pages bound %len into %k[%i] rows 64
            cols 128 warps 4 : bf16, !k
      }
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A value of one thread's step (a claimed tile) reaches the lanes of its
// own warp by a shuffle, not warps 1 .. 3.
func.func @four_warps_claim(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                            %ctr: !llvm.ptr<1>, %ps: i32, %pages: i32, %len: i32,
                            %stride: i64) {
  %c0 = arith.constant 0 : i32
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      // expected-error @+1 {{cannot run on every lane of warps 0 .. 3 (its program copies pages with every lane): its value is one thread's, and a shuffle gives it to its own warp only}}
      %t = hopper.tile_claim %c0 first %c0 dynamic counter %ctr : !llvm.ptr<1>
      hopper.ring.producer_acquire %k[%t] : !k
      hopper.copy_paged_tile %pool[%t, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%t] rows 64
          cols 128 warps 4 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// The copies of one program name the same warps.
func.func @mixed_warps(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                       %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %k[%c0] : !k
      hopper.copy_paged_tile %pool[%c0, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%c0] rows 64
          cols 128 warps 4 : bf16, !k
      hopper.ring.producer_acquire %k[%c0] : !k
      // expected-error @+1 {{is copied by 1 warp(s), another copy of the program by 4: one program runs on one set of warps}}
      hopper.copy_paged_tile %pool[%c0, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%c0] rows 64
          cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// Warps 1 .. 3 running another role (FP8's V transposer of three
// workers) cannot also copy.
func.func @warps_taken(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                       %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %k[%c0] : !k
      // expected-error @+1 {{is copied by 4 warp(s), but warps 1 .. 3 run another role}}
      hopper.copy_paged_tile %pool[%c0, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%c0] rows 64
          cols 128 warps 4 : bf16, !k
    }
    hopper.producer_warps(%w) first 1 count 3 {
      hopper.ring.consumer_wait %k[%c0] : !k
      hopper.transpose_stage %k[%c0] to %k worker %w of 3 rows 128 cols 128 : !k, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!v = !hopper.ring<stages = 2, stage_bytes = 16384, data = 16384, full = 196624, empty = 196640, arrivals = 128, cluster = 1>
!vt = !hopper.ring<stages = 2, stage_bytes = 16384, data = 49152, full = 196656, empty = 196672, arrivals = 128, cluster = 1>

// FP8's V transposer on warps 1 .. 3 counting four workers: the four
// copying warps are its workers (hopper-producer-warp-transpose moves its
// step into their program), so they take warps 0 .. 3.
// CHECK-LABEL: func.func @transposers_join(
// CHECK: hopper.producer_warps(%[[W:.*]]) first 0 count 4 {
// CHECK: hopper.copy_paged_tile {{.*}} warps 4 warp %[[W]]
// CHECK: hopper.producer_warps(%{{.*}}) first 1 count 3 {
// CHECK-NEXT: hopper.transpose_stage {{.*}} of 4
func.func @transposers_join(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                            %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %v = hopper.ring.create %smem : !v
  %vt = hopper.ring.create %smem : !vt
  hopper.warp_specialize producer regs 64 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %v[%c0] : !v
      hopper.copy_paged_tile %pool[%c0, %c0] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %v[%c0] rows 128
          cols 128 warps 4 : f8E4M3FN, !v
    }
    hopper.producer_warps(%w) first 1 count 3 {
      hopper.transpose_stage %v[%c0] to %vt worker %w of 4 rows 128 cols 128 : !v, !vt
    }
  } consumers(%cw of 1) regs 192 {
  }
  return
}
