// The pipeline ring: !hopper.ring and its ops print and parse back; the
// type's verifier refuses a ring the hardware cannot hold (alignment for
// 128B-swizzled TMA boxes and mbarriers, an mbarrier's count, the CTA's
// shared memory, overlaps), the ops' verifiers what the ring cannot take.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

// CHECK-LABEL: func.func @ring(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[U:[^:]*]]: i32, %[[X:[^:]*]]: i32)
// CHECK: %[[K:.*]] = hopper.ring.create %[[SMEM]] : !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
// CHECK: %[[Q:.*]] = hopper.ring.create %[[SMEM]] : !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
// CHECK: hopper.ring.init %[[K]] : !hopper.ring<stages = 2,
// CHECK: hopper.ring.producer_acquire %[[K]][%[[U]]] : !hopper.ring<stages = 2,
// CHECK: hopper.ring.producer_commit %[[K]][%[[U]]] tx 32768 : !hopper.ring<stages = 2,
// CHECK: %[[OFF:.*]] = arith.constant 16384 : i32
// CHECK: hopper.tma_load %[[MAP]][%[[X]], %[[X]], %[[X]], %[[X]]] into %[[K]][%[[U]]] at %[[OFF]] multicast 3 : !hopper.ring<stages = 2,
// CHECK: hopper.tma_load %[[MAP]][%[[X]], %[[X]]] into %[[K]][%[[U]]] at %[[X]] : !hopper.ring<stages = 2,
// CHECK: hopper.ring.producer_commit %[[Q]][%[[U]]] tx 0 : !hopper.ring<stages = 1,
// CHECK: hopper.ring.consumer_wait %[[K]][%[[U]]] : !hopper.ring<stages = 2,
// CHECK: %[[S:.*]] = hopper.ring.stage %[[K]][%[[U]]] : !hopper.ring<stages = 2,
// CHECK: hopper.ring.consumer_release %[[K]][%[[U]]] : !hopper.ring<stages = 2,
// CHECK: return %[[S]] : i32
func.func @ring(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %x: i32) -> i32 {
  %k = hopper.ring.create %smem : !k
  %q = hopper.ring.create %smem : !q
  hopper.ring.init %k : !k
  hopper.ring.producer_acquire %k[%u] : !k
  hopper.ring.producer_commit %k[%u] tx 32768 : !k
  %off = arith.constant 16384 : i32
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %off multicast 3 : !k
  hopper.tma_load %map[%x, %x] into %k[%u] at %x : !k
  hopper.ring.producer_commit %q[%u] tx 0 : !q
  hopper.ring.consumer_wait %k[%u] : !k
  %s = hopper.ring.stage %k[%u] : !k
  hopper.ring.consumer_release %k[%u] : !k
  return %s : i32
}

// -----

// expected-error @below {{a ring has at least one stage, got 0}}
func.func @no_stage(%r: !hopper.ring<stages = 0, stage_bytes = 32768, data = 0, full = 65536, empty = 65544, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{stage_bytes must be a positive multiple of 1024 (each stage starts at a 128B-swizzle atom), got 1000}}
func.func @stage_bytes(%r: !hopper.ring<stages = 2, stage_bytes = 1000, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{data must be a non-negative multiple of 1024 (128B-swizzle atoms), got 512}}
func.func @data_alignment(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 512, full = 131072, empty = 131088, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{full must be a non-negative multiple of 8 (mbarriers are 8 aligned bytes), got 65540}}
func.func @full_alignment(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65540, empty = 65560, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{empty must be a non-negative multiple of 8 (mbarriers are 8 aligned bytes), got -16}}
func.func @empty_negative(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = -16, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{arrivals must be 1 to 1048575 (an mbarrier's count), got 0}}
func.func @no_arrivals(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 0, cluster = 1>)

// -----

// expected-error @below {{producers must be 1 to 1048575 (an mbarrier's count), got 0}}
func.func @no_producers(%r: !hopper.ring<stages = 2, stage_bytes = 1024, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1, producers = 0>)

// -----

// expected-error @below {{cluster must be 1, or 2 for a multicast pair, got 4}}
func.func @cluster_of_four(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 4>)

// -----

// 8 stages of 32 KiB: 256 KiB.
// expected-error @below {{the data buffers end at byte 262144, past the 232448 bytes of dynamic shared memory a Hopper CTA has}}
func.func @too_big(%r: !hopper.ring<stages = 8, stage_bytes = 32768, data = 0, full = 0, empty = 64, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{the empty barriers end at byte 232456, past the 232448 bytes of dynamic shared memory a Hopper CTA has}}
func.func @barriers_past_the_end(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 232440, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{the full barriers [65528, 65544) overlap the data buffers [0, 65536)}}
func.func @barriers_in_the_data(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65528, empty = 65544, arrivals = 256, cluster = 1>)

// -----

// expected-error @below {{the empty barriers [65544, 65560) overlap the full barriers [65536, 65552)}}
func.func @empty_on_full(%r: !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65544, arrivals = 256, cluster = 1>)

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @generic_smem(%smem: !llvm.ptr) {
  // expected-error @below {{'hopper.ring.create' op operand #0 must be LLVM pointer in address space 3, but got '!llvm.ptr'}}
  %k = "hopper.ring.create"(%smem) : (!llvm.ptr) -> !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @commit_too_much(%k: !k, %u: i32) {
  // expected-error @below {{'hopper.ring.producer_commit' op tx 40000 is more than a stage holds (32768 bytes)}}
  hopper.ring.producer_commit %k[%u] tx 40000 : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @commit_negative(%k: !k, %u: i32) {
  // expected-error @below {{attribute 'tx' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  hopper.ring.producer_commit %k[%u] tx -1 : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @six_coordinates(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  // expected-error @below {{'hopper.tma_load' op a TMA box has 1 to 5 coordinates, got 6}}
  hopper.tma_load %map[%x, %x, %x, %x, %x, %x] into %k[%u] at %x : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @no_coordinates(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  // expected-error @below {{'hopper.tma_load' op a TMA box has 1 to 5 coordinates, got 0}}
  hopper.tma_load %map[] into %k[%u] at %x : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @multicast_alone(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  // expected-error @below {{'hopper.tma_load' op multicast needs a ring shared by a 2-CTA cluster (cluster = 2), not cluster = 1}}
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %x multicast 3 : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 264, cluster = 2>
func.func @multicast_to_a_third_cta(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  // expected-error @below {{'hopper.tma_load' op multicast mask 4 names a CTA outside the ring's cluster of 2}}
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %x multicast 4 : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 264, cluster = 2>
func.func @multicast_to_nobody(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  // expected-error @below {{attribute 'multicast' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %x multicast 0 : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @offset_past_the_stage(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  %off = arith.constant 32768 : i32
  // expected-error @below {{'hopper.tma_load' op offset 32768 is outside the stage's 32768 bytes}}
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %off : !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1>
func.func @offset_misaligned(%map: !llvm.ptr, %k: !k, %u: i32, %x: i32) {
  %off = arith.constant 64 : i32
  // expected-error @below {{'hopper.tma_load' op offset 64 is not a multiple of 128 (TMA writes shared memory from 128-byte aligned addresses)}}
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %off : !k
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

// Words published with a slot: in the slot's fill (before
// hopper-warp-specialize) or the producer thread; read by the consumers.
// CHECK-LABEL: func.func @publish(
// CHECK: hopper.ring.publish %{{.*}}, %{{.*}} at %{{.*}} to %{{.*}}[%{{.*}}] : !hopper.ring<stages = 1,
// CHECK: hopper.ring.publish %{{.*}} at %{{.*}} to %{{.*}}[%{{.*}}] : !hopper.ring<stages = 1,
// CHECK: hopper.ring.published %{{.*}}[%{{.*}}] word 1 at %{{.*}} : !hopper.ring<stages = 1,
func.func @publish(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %k: i32, %addr: i32, %a: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      hopper.ring.producer_acquire %q[%k] : !q
      hopper.ring.publish %a, %k at %addr to %q[%k] : !q
      hopper.ring.producer_commit %q[%k] tx 0 : !q
    }
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%k] : !q {
      hopper.ring.publish %a at %addr to %q[%k] : !q
      hopper.load_tile %map[%a, %a, %a] into %q[%k] rows 64 cols 128 : bf16, !q
    }
    hopper.ring.consumer_wait %q[%k] : !q
    %w = hopper.ring.published %q[%k] word 1 at %addr : !q
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

func.func @publish_stray(%smem: !llvm.ptr<3>, %k: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{must stand in the hopper.ring.fill of its ring and slot (its words travel with that slot) or in hopper.producer_thread}}
  hopper.ring.publish %k at %addr to %q[%k] : !q
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

func.func @publish_nothing(%smem: !llvm.ptr<3>, %k: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      // expected-error @below {{publishes no word}}
      hopper.ring.publish at %addr to %q[%k] : !q
    }
  } consumers(%cw of 2) regs 240 {
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

func.func @publish_other_slot(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %k: i32, %j: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%k] : !q {
      // expected-error @below {{must stand in the hopper.ring.fill of its ring and slot}}
      hopper.ring.publish %k at %addr to %q[%j] : !q
      hopper.load_tile %map[%k, %k, %k] into %q[%k] rows 64 cols 128 : bf16, !q
    }
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

// A read of the words before the slot's wait would race the producer.
func.func @published_before_wait(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %k: i32, %addr: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.fill %q[%k] : !q {
      hopper.ring.publish %k at %addr to %q[%k] : !q
      hopper.load_tile %map[%k, %k, %k] into %q[%k] rows 64 cols 128 : bf16, !q
    }
    // expected-error @below {{must follow its slot's 'hopper.ring.consumer_wait' (the same ring and slot, before it in its block or an enclosing one): the words are valid once the wait has seen the slot's commit}}
    %w = hopper.ring.published %q[%k] word 0 at %addr : !q
    hopper.ring.consumer_wait %q[%k] : !q
  }
  return
}

// -----

!q = !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

// The wait of another slot does not release this one's words; a wait
// before an enclosing op does.
func.func @published_other_slot(%smem: !llvm.ptr<3>, %k: i32, %j: i32, %addr: i32, %c: i1) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
  } consumers(%cw of 2) regs 240 {
    hopper.ring.consumer_wait %q[%j] : !q
    scf.if %c {
      hopper.ring.consumer_wait %q[%k] : !q
      scf.if %c {
        %v = hopper.ring.published %q[%k] word 0 at %addr : !q
      }
    }
    // expected-error @below {{must follow its slot's 'hopper.ring.consumer_wait'}}
    %w = hopper.ring.published %q[%k] word 0 at %addr : !q
  }
  return
}

// -----

// hopper.copy_paged_tile round-trips; its tile is the TMA tile's layout
// (whole 128-byte boxes), copied in passes of whole rows by 32 lanes, of
// one warp (the default, not printed) or of several, each with its index.
!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
// CHECK-LABEL: func.func @copy_paged(
// CHECK: hopper.copy_paged_tile %{{.*}}[%{{.*}}, %{{.*}}] strides %{{.*}}, %{{.*}}, %{{.*}} pages %{{.*}} page_size %{{.*}} pool %{{.*}} bound %{{.*}} into %{{.*}}[%{{.*}}] rows 64 cols 128 : bf16
// CHECK: hopper.copy_paged_tile {{.*}} rows 48 cols 128 warps 4 warp %{{.*}} : bf16
func.func @copy_paged(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>, %x: i32,
                      %s: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 warps 1 : bf16, !k
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 48 cols 128 warps 4 warp %x : bf16, !k
  return
}

// -----

// hopper.paged_offsets round-trips (per 32 of a warp's rows a page entry,
// then a row in its page), and a copy takes them.
!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
// CHECK-LABEL: func.func @paged_offsets(
// CHECK: %[[O:.*]]:4 = hopper.paged_offsets %{{.*}}[%{{.*}}] page_size %{{.*}} pool %{{.*}} bound %{{.*}} strides %{{.*}}, %{{.*}} rows 64 per_pass 4 : i32, i32, i32, i32
// CHECK: %[[P:.*]]:2 = hopper.paged_offsets {{.*}} rows 64 per_pass 2 warps 4 warp %{{.*}} for %{{.*}} : i32, i32
// CHECK: hopper.copy_paged_tile {{.*}} rows 64 cols 64 offsets %[[O]]#0, %[[O]]#1, %[[O]]#2, %[[O]]#3 : bf16
// CHECK: hopper.copy_paged_tile {{.*}} rows 64 cols 128 warps 4 warp %{{.*}} offsets %[[P]]#0, %[[P]]#1 : bf16
func.func @paged_offsets(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                         %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  %o:4 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 64 per_pass 4 : i32, i32, i32, i32
  %p:2 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 64 per_pass 2 warps 4 warp %x for %pool : i32, i32
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 64 offsets %o#0, %o#1, %o#2, %o#3 : bf16, !k
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 warps 4 warp %x offsets %p#0, %p#1 : bf16, !k
  return
}

// -----

func.func @paged_offsets_count(%table: !llvm.ptr<1>, %x: i32, %s: i64) {
  // expected-error @below {{gives a page entry and a row in its page per 32 of a warp's 64 rows (4), got 1}}
  %o = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 64 per_pass 4 : i32
  return
}

// -----

func.func @paged_offsets_pass(%table: !llvm.ptr<1>, %x: i32, %s: i64) {
  // expected-error @below {{per_pass must be a power of two up to 32 (a pass of the warp's lanes copies whole rows), got 3}}
  %o:4 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 48 per_pass 3 : i32, i32, i32, i32
  return
}

// -----

func.func @paged_offsets_no_warp(%table: !llvm.ptr<1>, %x: i32, %s: i64) {
  // expected-error @below {{loads the rows of 4 warps, so it needs its warp's index (`warp`)}}
  %o:2 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 64 per_pass 2 warps 4 : i32, i32
  return
}

// -----

func.func @paged_offsets_warps(%table: !llvm.ptr<1>, %x: i32, %s: i64) {
  // expected-error @below {{rows must split into whole passes of 8 rows over 4 warp(s) (a pass copies whole rows), got 16}}
  %o:2 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 16 per_pass 8 warps 4 warp %x : i32, i32
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
func.func @copy_offsets_count(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                              %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{takes a page entry and a row in its page per 32 of a warp's 64 rows (4), got 1}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 offsets %x : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
func.func @copy_offsets_layout(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                               %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  %o:2 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
      rows 64 per_pass 2 warps 2 warp %x : i32, i32
  // expected-error @below {{takes the offsets of 64 rows in passes of 2 over 2 warp(s), but copies 64 in passes of 2 over 4}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 warps 4 warp %x offsets %o#0, %o#1 : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
func.func @copy_paged_rows(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                           %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{rows must split into whole passes of 4 rows over 4 warp(s) (a pass copies whole rows), got 40}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 40 cols 64 warps 4 warp %x : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
func.func @copy_paged_warps(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                            %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{warps must be 1, 2 or 4 (of the producer warpgroup's four), got 3}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 48 cols 128 warps 3 warp %x : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
func.func @copy_paged_one_warp(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                               %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{names a warp index with one warp}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 warp %x : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 49152, data = 0, full = 98304, empty = 98320, arrivals = 128, cluster = 1>
func.func @copy_paged_wide(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                           %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{a row's 16-byte pieces must be a power of two up to 32 (one pass of the warp's lanes copies whole rows), got 48}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 384 : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
func.func @copy_paged_cluster(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                              %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{a paged tile loads into a ring of one CTA (cluster = 1), got cluster 2}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
func.func @copy_paged_valid(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                            %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{valid columns must be whole 16-byte pieces of the tile's 128, got 100}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 valid 100 : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1, producers = 2>
func.func @copy_paged_producers(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                                %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{completes its slot by lane 0's arrive (a ring of 1 producer) or by each of its 32 lanes' (a ring of that many), but the ring's full barrier counts 2 producers}}
  hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table page_size %x
      pool %x bound %x into %k[%x] rows 64 cols 128 : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 256, cluster = 1, producers = 64>
func.func @commit_count_past_producers(%smem: !llvm.ptr<3>, %u: i32) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{arrives 65 times, but the ring's full barrier counts 64 producers a stage}}
  hopper.ring.producer_commit %k[%u] tx 32768 count 65 : !k
  return
}
