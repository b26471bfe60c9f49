// hopper-copy-offsets: each hopper.copy_paged_tile of a warps' program is
// split into hopper.paged_offsets (the page-table loads) and the copy of
// those offsets; the offsets move before the acquire of the copy's slot
// where their operands allow, and a block's V takes its K's offsets (same
// rows, page table and strides). Left beside the copy: no acquire before
// it, or an operand computed after the acquire. Different rows or strides
// keep their own loads. Copies of more than 32 rows a warp (more than one
// entry a lane) are left whole.
// RUN: fa3-opt %s --split-input-file --hopper-copy-offsets="ahead=false only-when-copying=false" | FileCheck %s
// With ahead (the default), a loop's offsets are loaded one iteration early:
// RUN: fa3-opt %s --split-input-file --hopper-copy-offsets="only-when-copying=false" | FileCheck %s --check-prefix=AHEAD
// With only-when-copying (the default) the offsets name the program's copy
// bases (`for`): without one at the launch (boxed pages, a contiguous
// cache) they read nothing; not where a base is computed inside the
// program:
// RUN: fa3-opt %s --split-input-file --hopper-copy-offsets | FileCheck %s --check-prefix=COPYING

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
!v = !hopper.ring<stages = 3, stage_bytes = 16384, data = 65536, full = 114728, empty = 114776, arrivals = 128, cluster = 1>

// The decoding kernel's loop, as hopper-warp-copy leaves it: K's and V's
// copies each behind its slot's acquire and the branches on the page
// table and the copy's base.
// CHECK-LABEL: func.func @k_and_v(
// CHECK-SAME: %[[KP:[^:]*]]: !llvm.ptr<1>, %[[VP:[^:]*]]: !llvm.ptr<1>, %[[TABLE:[^:]*]]: !llvm.ptr<1>
// CHECK: hopper.producer_warps(%[[W:.*]]) first 0 count 4 {
// CHECK-NEXT: scf.for %[[I:[^ ]*]] =
// CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[I]]
// One load of the entries a block, before K's wait.
// CHECK-NEXT: %[[O:[^:]*]]:2 = hopper.paged_offsets %[[TABLE]][%[[ROW]]] page_size %{{.*}} pool %{{.*}} bound %{{.*}} strides %{{.*}}, %{{.*}} rows 64 per_pass 2 warps 4 warp %[[W]] : i32, i32
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%[[I]]] : !hopper.ring<{{.*}}data = 16384
// CHECK: hopper.copy_paged_tile %[[KP]][%[[ROW]], %{{.*}} warps 4 warp %[[W]] offsets %[[O]]#0, %[[O]]#1 : bf16
// CHECK-NOT: hopper.paged_offsets
// CHECK: hopper.ring.producer_acquire %{{.*}}[%[[I]]] : !hopper.ring<{{.*}}data = 65536
// CHECK: hopper.copy_paged_tile %[[VP]][%[[ROW]], %{{.*}} warps 4 warp %[[W]] offsets %[[O]]#0, %[[O]]#1 : bf16
// COPYING-LABEL: func.func @k_and_v(
// COPYING-SAME: %[[KP:[^:]*]]: !llvm.ptr<1>, %[[VP:[^:]*]]: !llvm.ptr<1>
// COPYING: hopper.paged_offsets {{.*}} for %[[KP]], %[[VP]] : i32, i32
// COPYING: hopper.paged_offsets {{.*}} for %[[KP]], %[[VP]] : i32, i32
// COPYING-NOT: hopper.paged_offsets
// COPYING: } consumers
// The first block's offsets before the loop (row 0 x 64), the next
// block's where this block's stood ((i + 1) x 64), carried by the loop.
// AHEAD-LABEL: func.func @k_and_v(
// AHEAD: hopper.producer_warps(%[[W:.*]]) first 0 count 4 {
// AHEAD-NEXT: %[[ROW0:.*]] = arith.muli %c0_i32, %c64_i32
// AHEAD-NEXT: %[[O0:[^:]*]]:2 = hopper.paged_offsets %{{.*}}[%[[ROW0]]] {{.*}} warp %[[W]] : i32, i32
// AHEAD-NEXT: scf.for %[[I:[^ ]*]] = {{.*}} iter_args(%[[E:[^ ]*]] = %[[O0]]#0, %[[R:[^ ]*]] = %[[O0]]#1) -> (i32, i32)
// AHEAD-NEXT: %[[ROW:.*]] = arith.muli %[[I]], %c64_i32
// AHEAD-NEXT: %[[NEXT:.*]] = arith.addi %[[I]], %c1_i32
// AHEAD-NEXT: %[[ROWN:.*]] = arith.muli %[[NEXT]], %c64_i32
// AHEAD-NEXT: %[[ON:[^:]*]]:2 = hopper.paged_offsets %{{.*}}[%[[ROWN]]] {{.*}} warp %[[W]] : i32, i32
// AHEAD-NEXT: hopper.ring.producer_acquire
// AHEAD: hopper.copy_paged_tile %{{.*}}[%[[ROW]], {{.*}} offsets %[[E]], %[[R]] : bf16
// AHEAD: hopper.copy_paged_tile %{{.*}}[%[[ROW]], {{.*}} offsets %[[E]], %[[R]] : bf16
// AHEAD: scf.yield %[[ON]]#0, %[[ON]]#1 : i32, i32
func.func @k_and_v(%kpool: !llvm.ptr<1>, %vpool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                   %smem: !llvm.ptr<3>, %map: !llvm.ptr, %n: i32, %head: i32, %ps: i32,
                   %pages: i32, %len: i32, %stride: i64) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %k = hopper.ring.create %smem : !k
  %v = hopper.ring.create %smem : !v
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 4 {
      scf.for %i = %c0 to %n step %c1 : i32 {
        %row = arith.muli %i, %c64 : i32
        hopper.ring.producer_acquire %k[%i] : !k
        %null = llvm.mlir.zero : !llvm.ptr<1>
        %paged = llvm.icmp "ne" %table, %null : !llvm.ptr<1>
        scf.if %paged {
          %kc = llvm.icmp "ne" %kpool, %null : !llvm.ptr<1>
          scf.if %kc {
            hopper.copy_paged_tile %kpool[%row, %head] strides %stride, %stride, %stride
                pages %table page_size %ps pool %pages bound %len into %k[%i] rows 64
                cols 128 warps 4 warp %w : bf16, !k
          } else {
            hopper.producer_thread {
              hopper.load_paged_tile %map[%row, %head] pages %table page_size %ps
                  bound %len into %k[%i] rows 64 cols 128 : bf16, !k
            }
          }
        }
        hopper.ring.producer_acquire %v[%i] : !v
        scf.if %paged {
          %vc = llvm.icmp "ne" %vpool, %null : !llvm.ptr<1>
          scf.if %vc {
            hopper.copy_paged_tile %vpool[%row, %head] strides %stride, %stride, %stride
                pages %table page_size %ps pool %pages bound %len into %v[%i] rows 64
                cols 128 warps 4 warp %w : bf16, !v
          }
        }
      }
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>
!v = !hopper.ring<stages = 3, stage_bytes = 16384, data = 65536, full = 114728, empty = 114776, arrivals = 128, cluster = 1>

// A row computed after the acquire keeps the offsets beside the copy;
// K and V of different rows (or strides) each load their own.
// CHECK-LABEL: func.func @stays(
// CHECK: hopper.ring.producer_acquire %{{.*}}[%{{.*}}] : !hopper.ring<{{.*}}data = 16384
// CHECK-NEXT: %[[ROW:.*]] = arith.muli
// CHECK-NEXT: %[[O:[^:]*]]:2 = hopper.paged_offsets %{{.*}}[%[[ROW]]] {{.*}} rows 32 per_pass 2 : i32, i32
// CHECK-NEXT: hopper.copy_paged_tile {{.*}} offsets %[[O]]#0, %[[O]]#1 : bf16
// CHECK-NEXT: %[[O2:[^:]*]]:2 = hopper.paged_offsets %{{.*}}[%{{.*}}] {{.*}} rows 32 per_pass 2 : i32, i32
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%{{.*}}] : !hopper.ring<{{.*}}data = 65536
// CHECK-NEXT: hopper.copy_paged_tile {{.*}} offsets %[[O2]]#0, %[[O2]]#1 : bf16
// CHECK-NEXT: %[[O3:[^:]*]]:2 = hopper.paged_offsets {{.*}} strides %{{.*}}, %[[SR:[^ ]*]] rows 32 per_pass 2 : i32, i32
// CHECK-NEXT: hopper.ring.producer_acquire %{{.*}}[%{{.*}}] : !hopper.ring<{{.*}}data = 65536
// CHECK-NEXT: hopper.copy_paged_tile {{.*}} offsets %[[O3]]#0, %[[O3]]#1 : bf16
// 64 rows by one warp, two entries a lane: left whole.
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK-NEXT: hopper.copy_paged_tile {{.*}} rows 64
// CHECK-NOT: offsets
// CHECK-SAME: : bf16
// Outside a warps' program (hopper-warp-copy has not run): left alone.
// CHECK: hopper.producer_thread {
// CHECK-NOT: hopper.paged_offsets
// CHECK: hopper.copy_paged_tile
// CHECK-NOT: offsets
// CHECK: } consumers
func.func @stays(%pool: !llvm.ptr<1>, %table: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32,
                 %head: i32, %ps: i32, %pages: i32, %len: i32, %stride: i64, %other: i64) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %k = hopper.ring.create %smem : !k
  %v = hopper.ring.create %smem : !v
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 1 {
      hopper.ring.producer_acquire %k[%i] : !k
      %row = arith.muli %i, %c64 : i32
      hopper.copy_paged_tile %pool[%row, %head] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%i] rows 32
          cols 128 : bf16, !k
      hopper.ring.producer_acquire %v[%i] : !v
      hopper.copy_paged_tile %pool[%i, %head] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %v[%i] rows 32
          cols 128 : bf16, !v
      hopper.ring.producer_acquire %v[%c0] : !v
      hopper.copy_paged_tile %pool[%i, %head] strides %stride, %other, %stride
          pages %table page_size %ps pool %pages bound %len into %v[%c0] rows 32
          cols 128 : bf16, !v
      hopper.ring.producer_acquire %k[%c0] : !k
      hopper.copy_paged_tile %pool[%i, %head] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%c0] rows 64
          cols 128 : bf16, !k
    }
    hopper.producer_thread {
      hopper.ring.producer_acquire %k[%i] : !k
      hopper.copy_paged_tile %pool[%i, %head] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%i] rows 64
          cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A copy base computed inside the warps' program: the offsets name no
// base (they read the table wherever it is given).
// COPYING-LABEL: func.func @base_inside(
// COPYING: hopper.paged_offsets
// COPYING-NOT: for
// COPYING-SAME: : i32, i32
func.func @base_inside(%pools: !llvm.ptr<1>, %table: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32,
                       %head: i32, %ps: i32, %pages: i32, %len: i32, %stride: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 1 {
      %pool = llvm.getelementptr %pools[%head] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i8
      hopper.ring.producer_acquire %k[%i] : !k
      hopper.copy_paged_tile %pool[%i, %head] strides %stride, %stride, %stride
          pages %table page_size %ps pool %pages bound %len into %k[%i] rows 32
          cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}
