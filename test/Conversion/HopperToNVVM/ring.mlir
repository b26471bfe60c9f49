// convert-hopper-to-nvvm on the pipeline ring: a ring value becomes the
// shared-memory base it was created at; each op derives slot u's stage
// (u % stages) and phase ((u / stages) & 1), the stage's barrier (base +
// full|empty + 8 stage) or data (base + data + stage * stage_bytes +
// offset), then its mbarrier or TMA op. With one stage, the addresses are
// constants and the phase is u & 1. A consumer's release in a ring of a
// 2-CTA cluster also arrives, from lane 0 of each warp, on the peer CTA's
// barrier.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --convert-hopper-to-nvvm | FileCheck %s

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>

// Stage by stage: full (count 1), then empty (count arrivals).
// CHECK-LABEL: func.func @init(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>)
// CHECK-NEXT: %[[F0:.*]] = llvm.getelementptr %[[SMEM]][229408] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: nvvm.mbarrier.init %[[F0]], %[[ONE]] : !llvm.ptr<3>, i32
// CHECK-NEXT: %[[E0:.*]] = llvm.getelementptr %[[SMEM]][229440] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NEXT: %[[N:.*]] = arith.constant 264 : i32
// CHECK-NEXT: nvvm.mbarrier.init %[[E0]], %[[N]] : !llvm.ptr<3>, i32
// CHECK-NEXT: %[[F1:.*]] = llvm.getelementptr %[[SMEM]][229416]
// CHECK-NEXT: arith.constant 1 : i32
// CHECK-NEXT: nvvm.mbarrier.init %[[F1]]
// CHECK-NEXT: %[[E1:.*]] = llvm.getelementptr %[[SMEM]][229448]
// CHECK-NEXT: arith.constant 264 : i32
// CHECK-NEXT: nvvm.mbarrier.init %[[E1]]
// CHECK-NEXT: return
func.func @init(%smem: !llvm.ptr<3>) {
  %k = hopper.ring.create %smem : !k
  hopper.ring.init %k : !k
  return
}

// -----

// A ring committed by the 32 lanes of a warp: the full barrier counts 32.
// CHECK-LABEL: func.func @init_producers(
// CHECK: %[[N:.*]] = arith.constant 32 : i32
// CHECK-NEXT: nvvm.mbarrier.init %{{.*}}, %[[N]] : !llvm.ptr<3>, i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[2056]
// CHECK-NEXT: arith.constant 256 : i32
func.func @init_producers(%smem: !llvm.ptr<3>) {
  %r = hopper.ring.create %smem : !hopper.ring<stages = 1, stage_bytes = 1024, data = 0, full = 2048, empty = 2056, arrivals = 256, cluster = 1, producers = 32>
  hopper.ring.init %r : !hopper.ring<stages = 1, stage_bytes = 1024, data = 0, full = 2048, empty = 2056, arrivals = 256, cluster = 1, producers = 32>
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>

// The producer's slot: wait 'empty' with the phase flipped, arrive on
// 'full' expecting the tile's bytes, then the boxes into the stage (a
// constant offset folded into the data's, a dynamic one added after it),
// multicast with an i16 mask. The ring, created outside, is used inside
// the loop.
// CHECK-LABEL: func.func @producer(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[N:[^:]*]]: i32, %[[X:[^:]*]]: i32)
// CHECK: scf.for %[[U:.*]] = %{{.*}} to %[[N]]
// acquire: stage, phase, empty barrier, phase ^ 1
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[ST:.*]] = arith.remui %[[U]], %[[TWO]] : i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[TWO2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[ROUND:.*]] = arith.divui %[[U]], %[[TWO2]] : i32
// CHECK-NEXT: %[[PH:.*]] = arith.andi %[[ROUND]], %[[ONE]] : i32
// CHECK-NEXT: %[[EIGHT:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[S8:.*]] = arith.muli %[[ST]], %[[EIGHT]] : i32
// CHECK-NEXT: %[[EOFF:.*]] = arith.constant 229440 : i32
// CHECK-NEXT: %[[EADDR:.*]] = arith.addi %[[S8]], %[[EOFF]] : i32
// CHECK-NEXT: %[[EMPTY:.*]] = llvm.getelementptr %[[SMEM]][%[[EADDR]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK-NEXT: %[[ONE2:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[FLIP:.*]] = arith.xori %[[PH]], %[[ONE2]] : i32
// CHECK-NEXT: %[[HINT:.*]] = arith.constant 10000000 : i32
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %[[EMPTY]], %[[FLIP]], %[[HINT]] : !llvm.ptr<3>, i32, i32
// commit: the full barrier expects 32768 bytes
// CHECK: %[[FOFF:.*]] = arith.constant 229408 : i32
// CHECK-NEXT: %[[FADDR:.*]] = arith.addi %{{.*}}, %[[FOFF]] : i32
// CHECK-NEXT: %[[FULL:.*]] = llvm.getelementptr %[[SMEM]][%[[FADDR]]]
// CHECK-NEXT: %[[TX:.*]] = arith.constant 32768 : i32
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %[[FULL]], %[[TX]] : !llvm.ptr<3>, i32
// box at constant offset 16384: data 65536 + stage * 32768 + 16384
// CHECK: %[[ST3:.*]] = arith.remui %[[U]], %{{.*}} : i32
// CHECK-NEXT: %[[SB:.*]] = arith.constant 32768 : i32
// CHECK-NEXT: %[[SOFF:.*]] = arith.muli %[[ST3]], %[[SB]] : i32
// CHECK-NEXT: %[[C:.*]] = arith.constant 81920 : i32
// CHECK-NEXT: %[[DOFF:.*]] = arith.addi %[[SOFF]], %[[C]] : i32
// CHECK-NEXT: %[[DST:.*]] = llvm.getelementptr %[[SMEM]][%[[DOFF]]]
// CHECK-NEXT: %[[DSTC:.*]] = llvm.addrspacecast %[[DST]] : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK: %[[BAR:.*]] = llvm.getelementptr %[[SMEM]][%{{.*}}]
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DSTC]], %[[MAP]], %[[BAR]], box[%[[X]], %[[X]], %[[U]], %[[X]]] multicast_mask = %[[MASK]] : !llvm.ptr<7>, !llvm.ptr
// box at dynamic offset %x: (stage * 32768 + 65536) + %x, no multicast
// CHECK: %[[SOFF2:.*]] = arith.muli
// CHECK-NEXT: %[[DATA:.*]] = arith.constant 65536 : i32
// CHECK-NEXT: %[[TILE:.*]] = arith.addi %[[SOFF2]], %[[DATA]] : i32
// CHECK-NEXT: %[[DOFF2:.*]] = arith.addi %[[TILE]], %[[X]] : i32
// CHECK-NEXT: %[[DST2:.*]] = llvm.getelementptr %[[SMEM]][%[[DOFF2]]]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]], %{{.*}}, box[%[[X]]] : !llvm.ptr<7>, !llvm.ptr
// CHECK-NOT: hopper.
func.func @producer(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %n: i32, %x: i32) {
  %k = hopper.ring.create %smem : !k
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16384 = arith.constant 16384 : i32
  scf.for %u = %c0 to %n step %c1 : i32 {
    hopper.ring.producer_acquire %k[%u] : !k
    hopper.ring.producer_commit %k[%u] tx 32768 : !k
    hopper.tma_load %map[%x, %x, %u, %x] into %k[%u] at %c16384 multicast 3 : !k
    hopper.tma_load %map[%x] into %k[%u] at %x : !k
  }
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
!v = !hopper.ring<stages = 2, stage_bytes = 32768, data = 131072, full = 229424, empty = 229456, arrivals = 256, cluster = 1>

// The consumers' side, inside scf.if / scf.while regions: wait 'full' with
// the slot's phase; the stage index; release 'empty' -- in the 2-CTA ring
// also the peer's (lane = tid % 32, peer = cluster rank ^ 1, predicated in
// the asm), in the 1-CTA ring the local arrive alone.
// CHECK-LABEL: func.func @consumer(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[U:[^:]*]]: i32, %[[P:[^:]*]]: i1)
// CHECK: scf.if %[[P]] -> (i32) {
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[ST:.*]] = arith.remui %[[U]], %[[TWO]] : i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: arith.constant 2 : i32
// CHECK-NEXT: %[[ROUND:.*]] = arith.divui %[[U]], %{{.*}} : i32
// CHECK-NEXT: %[[PH:.*]] = arith.andi %[[ROUND]], %[[ONE]] : i32
// CHECK-NEXT: %[[EIGHT:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[S8:.*]] = arith.muli %[[ST]], %[[EIGHT]] : i32
// CHECK-NEXT: %[[FOFF:.*]] = arith.constant 229408 : i32
// CHECK-NEXT: %[[FADDR:.*]] = arith.addi %[[S8]], %[[FOFF]] : i32
// CHECK-NEXT: %[[FULL:.*]] = llvm.getelementptr %[[SMEM]][%[[FADDR]]]
// CHECK-NEXT: %[[HINT:.*]] = arith.constant 10000000 : i32
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %[[FULL]], %[[PH]], %[[HINT]] : !llvm.ptr<3>, i32, i32
// CHECK: %[[STAGE:.*]] = arith.remui %[[U]], %{{.*}} : i32
// CHECK: %[[EOFF:.*]] = arith.constant 229440 : i32
// CHECK-NEXT: %[[EADDR:.*]] = arith.addi %{{.*}}, %[[EOFF]] : i32
// CHECK-NEXT: %[[EMPTY:.*]] = llvm.getelementptr %[[SMEM]][%[[EADDR]]]
// CHECK-NEXT: nvvm.mbarrier.arrive %[[EMPTY]] : !llvm.ptr<3>
// CHECK-NEXT: %[[A:.*]] = llvm.ptrtoint %[[EMPTY]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[W:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[LANE:.*]] = arith.remui %[[TID]], %[[W]] : i32
// CHECK-NEXT: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK-NEXT: %[[ONE3:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[PEER:.*]] = arith.xori %[[RANK]], %[[ONE3]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "{\0A.reg .pred p;\0A.reg .b32 r;\0Asetp.eq.u32 p, $1, 0;\0Amapa.shared::cluster.u32 r, $0, $2;\0A@p mbarrier.arrive.shared::cluster.b64 _, [r];\0A}", "r,r,r" %[[A]], %[[LANE]], %[[PEER]] : (i32, i32, i32) -> ()
// CHECK-NEXT: scf.yield %[[STAGE]] : i32
// CHECK: scf.while
// CHECK: %[[VOFF:.*]] = arith.constant 229456 : i32
// CHECK-NEXT: %[[VADDR:.*]] = arith.addi %{{.*}}, %[[VOFF]] : i32
// CHECK-NEXT: %[[VEMPTY:.*]] = llvm.getelementptr %[[SMEM]][%[[VADDR]]]
// CHECK-NEXT: nvvm.mbarrier.arrive %[[VEMPTY]] : !llvm.ptr<3>
// CHECK-NEXT: scf.condition
// CHECK-NOT: hopper.
// CHECK-NOT: unrealized_conversion_cast
func.func @consumer(%smem: !llvm.ptr<3>, %u: i32, %p: i1) -> i32 {
  %k = hopper.ring.create %smem : !k
  %v = hopper.ring.create %smem : !v
  %r = scf.if %p -> i32 {
    hopper.ring.consumer_wait %k[%u] : !k
    %s = hopper.ring.stage %k[%u] : !k
    hopper.ring.consumer_release %k[%u] : !k
    scf.yield %s : i32
  } else {
    %z = arith.constant 0 : i32
    scf.yield %z : i32
  }
  scf.while : () -> () {
    hopper.ring.consumer_release %v[%u] : !v
    scf.condition(%p)
  } do {
    scf.yield
  }
  return %r : i32
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 16384, full = 229376, empty = 229384, arrivals = 256, cluster = 1>

// One stage (one Q buffer): constant addresses, phase = u & 1, stage 0; a
// commit of 0 bytes is a plain arrive.
// CHECK-LABEL: func.func @one_stage(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[K:[^:]*]]: i32, %[[X:[^:]*]]: i32)
// CHECK-NEXT: %[[OFF:.*]] = arith.constant 8192 : i32
// acquire: empty at a constant address, phase (k & 1) ^ 1
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[PH:.*]] = arith.andi %[[K]], %[[ONE]] : i32
// CHECK-NEXT: %[[EMPTY:.*]] = llvm.getelementptr %[[SMEM]][229384] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NEXT: %[[ONE2:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[FLIP:.*]] = arith.xori %[[PH]], %[[ONE2]] : i32
// CHECK: nvvm.mbarrier.try_wait.parity %[[EMPTY]], %[[FLIP]]
// CHECK-NEXT: %[[FULL:.*]] = llvm.getelementptr %[[SMEM]][229376] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NEXT: nvvm.mbarrier.arrive %[[FULL]] : !llvm.ptr<3>
// the box at 16384 + 8192
// CHECK-NEXT: %[[DST:.*]] = llvm.getelementptr %[[SMEM]][24576] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NEXT: %[[DSTC:.*]] = llvm.addrspacecast %[[DST]] : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK-NEXT: %[[FULL2:.*]] = llvm.getelementptr %[[SMEM]][229376]
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DSTC]], %[[MAP]], %[[FULL2]], box[%[[X]], %[[X]]] : !llvm.ptr<7>, !llvm.ptr
// wait: phase k & 1
// CHECK-NEXT: %[[ONE3:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[PH2:.*]] = arith.andi %[[K]], %[[ONE3]] : i32
// CHECK-NEXT: %[[FULL3:.*]] = llvm.getelementptr %[[SMEM]][229376]
// CHECK: nvvm.mbarrier.try_wait.parity %[[FULL3]], %[[PH2]]
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[EMPTY2:.*]] = llvm.getelementptr %[[SMEM]][229384]
// CHECK-NEXT: nvvm.mbarrier.arrive %[[EMPTY2]] : !llvm.ptr<3>
// CHECK-NEXT: return %[[ZERO]] : i32
func.func @one_stage(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %k: i32, %x: i32) -> i32 {
  %q = hopper.ring.create %smem : !q
  %off = arith.constant 8192 : i32
  hopper.ring.producer_acquire %q[%k] : !q
  hopper.ring.producer_commit %q[%k] tx 0 : !q
  hopper.tma_load %map[%x, %x] into %q[%k] at %off : !q
  hopper.ring.consumer_wait %q[%k] : !q
  %s = hopper.ring.stage %q[%k] : !q
  hopper.ring.consumer_release %q[%k] : !q
  return %s : i32
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 256, cluster = 1>

// A ring carried by a loop takes the converted type there too.
// CHECK-LABEL: func.func @carried(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[R:.*]] = %[[SMEM]]) -> (!llvm.ptr<3>)
// CHECK: llvm.getelementptr %[[R]][
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: scf.yield %[[R]] : !llvm.ptr<3>
func.func @carried(%smem: !llvm.ptr<3>, %n: i32) {
  %k = hopper.ring.create %smem : !k
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.for %u = %c0 to %n step %c1 iter_args(%kk = %k) -> (!k) : i32 {
    hopper.ring.consumer_wait %kk[%u] : !k
    scf.yield %kk : !k
  }
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

// Published words: one st.shared per word at addr + 4 i; a read of word i
// is an ld.shared at addr + 4 i (asms with side effects: they stay between
// the slot's barriers).
// CHECK-LABEL: func.func @publish(
// CHECK-SAME: %{{[^:]*}}: i32, %[[ADDR:[^:]*]]: i32, %[[A:[^:]*]]: i32, %[[B:[^:]*]]: i32
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "st.shared.u32 [$0+0], $1;", "r,r" %[[ADDR]], %[[A]]
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "st.shared.u32 [$0+4], $1;", "r,r" %[[ADDR]], %[[B]]
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "ld.shared.u32 $0, [$1];", "=r,r" %[[ADDR]]
// CHECK: %[[A8:.*]] = arith.addi %[[ADDR]], %c8_i32
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "ld.shared.u32 $0, [$1];", "=r,r" %[[A8]]
func.func @publish(%smem: !llvm.ptr<3>, %k: i32, %addr: i32, %a: i32, %b: i32) {
  %q = hopper.ring.create %smem : !q
  hopper.warp_specialize producer regs 24 {
    hopper.producer_thread {
      hopper.ring.publish %a, %b at %addr to %q[%k] : !q
    }
  } consumers(%cw of 2) regs 240 {
    hopper.ring.consumer_wait %q[%k] : !q
    %w0 = hopper.ring.published %q[%k] word 0 at %addr : !q
    %w2 = hopper.ring.published %q[%k] word 2 at %addr : !q
    llvm.inline_asm has_side_effects asm_dialect = att "use", "r,r" %w0, %w2 : (i32, i32) -> ()
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A paged tile copied by warp 0's lanes (64 rows of 256 bytes: 16 pieces a
// row, two rows a pass of the warp): each lane loads the pages of rows
// lane and lane + 32 (clamped to the sequence's last row, and into the
// pool), their offsets in 16-byte units; then per pass one shuffle from
// the lane that loaded the row and one 16-byte cp.async.cg into the
// 128-byte swizzled stage; then every lane's cp.async.mbarrier.arrive
// (without .noinc), the warp's barrier and lane 0's arrive on the slot's
// full barrier.
// CHECK-LABEL: func.func @copy_paged(
// CHECK: nvvm.read.ptx.sreg.laneid
// CHECK: %[[E:.*]] = arith.divui %{{.*}}, %[[PS:[^ ]*]] : i32
// CHECK-NEXT: %[[IN:.*]] = arith.remui %{{.*}}, %[[PS]] : i32
// CHECK-NEXT: %[[EP:.*]] = llvm.getelementptr %{{.*}}[%[[E]]] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK-NEXT: %[[PAGE:.*]] = llvm.load %[[EP]] : !llvm.ptr<1> -> i32
// CHECK: %[[PAGE2:.*]] = llvm.load
// CHECK: arith.minui %[[PAGE]], %{{.*}} : i32
// CHECK: arith.minui %[[PAGE2]], %{{.*}} : i32
// CHECK: scf.for
// CHECK: nvvm.shfl.sync idx
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg
// CHECK: scf.for
// CHECK: nvvm.shfl.sync idx
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK-NEXT: nvvm.bar.warp.sync
// CHECK: setp.eq.u32 p, $1, 0;\0A@p mbarrier.arrive.shared::cta.b64 _, [$0];
// CHECK-NOT: nvvm.cp.async.shared.global
func.func @copy_paged(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                      %u: i32, %row: i32, %head: i32, %ps: i32, %pages: i32, %len: i32,
                      %sp: i64, %sr: i64, %sh: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 1 {
      hopper.ring.producer_acquire %k[%u] : !k
      hopper.copy_paged_tile %pool[%row, %head] strides %sp, %sr, %sh pages %table
          page_size %ps pool %pages bound %len into %k[%u] rows 64 cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// The same tile copied by the four producer warps (FlashAttention-3's
// split): their passes interleave, warp w's row i being the tile's (i / 2)
// 8 + 2 w + i % 2, so that each lane loads one page (of its warp's row
// lane) and its rows in the warp's 8 passes lie 8 apart: one swizzled
// destination (row 2 w + q's), then 1024 bytes a pass; the warps meet at
// the `copy` named barrier (id 15, 128 threads, not .aligned) before warp
// 0's lane 0 arrives.
// CHECK-LABEL: func.func @copy_paged_warps(
// CHECK: %[[LANE:.*]] = nvvm.read.ptx.sreg.laneid
// CHECK: %[[Q:.*]] = arith.shrui %[[LANE]], %c4_i32
// CHECK: %[[LEAD:.*]] = arith.muli %[[W:.*]], %c2_i32 : i32
// CHECK: %[[I:.*]] = arith.addi %[[LANE]], %c0_i32{{[_0-9]*}} : i32
// CHECK: %[[PAIR:.*]] = arith.shrui %[[I]], %c1_i32{{[_0-9]*}} : i32
// CHECK: %[[GROUP:.*]] = arith.muli %[[PAIR]], %c8_i32{{[_0-9]*}} : i32
// CHECK: %[[ODD:.*]] = arith.andi %[[I]], %c1_i32{{[_0-9]*}} : i32
// CHECK: %[[WITHIN:.*]] = arith.addi %[[LEAD]], %[[ODD]] : i32
// CHECK: %[[ROW:.*]] = arith.addi %[[GROUP]], %[[WITHIN]] : i32
// CHECK: arith.addi %{{.*}}, %[[ROW]] : i32
// CHECK: llvm.load
// CHECK-NOT: llvm.load
// CHECK: %[[FIRST:.*]] = arith.addi %[[LEAD]], %[[Q]] : i32
// CHECK: %[[R7:.*]] = arith.andi %[[FIRST]], %c7_i32{{[_0-9]*}} : i32
// CHECK: arith.xori %{{.*}}, %[[R7]] : i32
// CHECK: %[[DST0:.*]] = llvm.getelementptr
// CHECK: scf.for %[[P:.*]] = %c0_i32{{[_0-9]*}} to %c8_i32{{[_0-9]*}} step
// CHECK: nvvm.shfl.sync idx
// CHECK: %[[AT:.*]] = arith.muli %{{.*}}, %c1024_i32 : i32
// CHECK: %[[DST:.*]] = llvm.getelementptr %[[DST0]][%[[AT]]]
// CHECK: nvvm.cp.async.shared.global %[[DST]], %{{.*}}, 16, cache = cg
// CHECK-NOT: scf.for
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK: %[[ID:.*]] = arith.addi %c0_i32{{[_0-9]*}}, %c15_i32{{[_0-9]*}} : i32
// CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.sync.count"(%[[ID]], %c128_i32{{[_0-9]*}})
// CHECK: %[[WHO:.*]] = arith.ori %[[LANE]], %[[W]] : i32
// CHECK: setp.eq.u32 p, $1, 0;\0A@p mbarrier.arrive.shared::cta.b64 _, [$0];{{.*}} %{{.*}}, %[[WHO]]
func.func @copy_paged_warps(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                            %u: i32, %row: i32, %head: i32, %ps: i32, %pages: i32, %len: i32,
                            %sp: i64, %sr: i64, %sh: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 4 {
      hopper.ring.producer_acquire %k[%u] : !k
      hopper.copy_paged_tile %pool[%row, %head] strides %sp, %sr, %sh pages %table
          page_size %ps pool %pages bound %len into %k[%u] rows 64 cols 128 warps 4
          warp %w : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1, producers = 128>

// A ring whose full barrier counts the four warps' copying lanes: each
// lane's cp.async.mbarrier.arrive.noinc is its arrival, once its copies
// land; no own arrive, no barrier between the warps, no lane-0 arrive.
// One thread's TMA fill of the same ring arrives for all 128: expect the
// bytes, then 127 more arrivals.
// CHECK-LABEL: func.func @copy_paged_lane_commits(
// CHECK: nvvm.cp.async.shared.global
// CHECK: %[[FULL:.*]] = llvm.getelementptr
// CHECK: nvvm.cp.async.mbarrier.arrive %[[FULL]] {noinc = true} : !llvm.ptr<3>
// CHECK-NOT: nvvm.mbarrier.arrive %[[FULL]] : !llvm.ptr<3>
// CHECK-NOT: barrier.cta.sync
// CHECK-NOT: mbarrier.arrive.shared::cta.b64
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[BAR:.*]], %c16384_i32
// CHECK-NEXT: %[[REST:.*]] = arith.constant 127 : i32
// CHECK-NEXT: nvvm.mbarrier.arrive %[[BAR]], %[[REST]] : !llvm.ptr<3>
func.func @copy_paged_lane_commits(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                                   %u: i32, %row: i32, %head: i32, %ps: i32, %pages: i32, %len: i32,
                                   %sp: i64, %sr: i64, %sh: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 4 {
      hopper.ring.producer_acquire %k[%u] : !k
      hopper.copy_paged_tile %pool[%row, %head] strides %sp, %sr, %sh pages %table
          page_size %ps pool %pages bound %len into %k[%u] rows 64 cols 128 warps 4
          warp %w : bf16, !k
    }
    hopper.producer_thread {
      hopper.ring.producer_commit %k[%u] tx 16384 count 128 : !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// The offsets apart (hopper-copy-offsets): the page-table loads, the four
// warps' rows as above, behind a branch on the table and the rows (a null
// table or no rows read nothing: zeros), before the slot's wait, giving
// each row's page entry as loaded and its row in the page; after the wait
// the copy clamps the entry (through an opaque copy, which keeps LLVM from
// moving that first use of the load ahead of the wait) and forms the
// offset, and loads nothing itself.
// With `for`, also behind a branch on the copies' bases: a launch that
// gives none (its pages boxed, its cache contiguous) runs no copy.
// CHECK-LABEL: func.func @copy_paged_offsets(
// CHECK: %[[TABLE:.*]] = llvm.icmp "ne" %{{.*}}, %{{.*}} : !llvm.ptr<1>
// CHECK: %[[ROWS:.*]] = arith.cmpi ne, %{{.*}}, %c0_i32{{[_0-9]*}} : i32
// CHECK-NEXT: %[[BOTH:.*]] = arith.andi %[[TABLE]], %[[ROWS]] : i1
// CHECK-NEXT: %[[KC:.*]] = llvm.icmp "ne" %[[KPOOL:.*]], %{{.*}} : !llvm.ptr<1>
// CHECK-NEXT: %[[VC:.*]] = llvm.icmp "ne" %[[VPOOL:.*]], %{{.*}} : !llvm.ptr<1>
// CHECK-NEXT: %[[ANY:.*]] = arith.ori %[[KC]], %[[VC]] : i1
// CHECK-NEXT: %[[GIVEN:.*]] = arith.andi %[[BOTH]], %[[ANY]] : i1
// CHECK-NEXT: %[[O:.*]]:2 = scf.if %[[GIVEN]] -> (i32, i32) {
// CHECK: %[[LEAD:.*]] = arith.muli %{{.*}}, %c2_i32{{[_0-9]*}} : i32
// CHECK: arith.muli %{{.*}}, %c8_i32{{[_0-9]*}} : i32
// CHECK: arith.addi %[[LEAD]], %{{.*}} : i32
// CHECK: arith.divui
// CHECK: %[[IN:.*]] = arith.remui
// CHECK: %[[PAGE:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK-NEXT: scf.yield %[[PAGE]], %[[IN]] : i32, i32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: scf.yield %[[Z]], %[[Z]] : i32, i32
// CHECK-NEXT: }
// CHECK: mbarrier.try_wait
// CHECK-NOT: llvm.load
// CHECK: %[[E:.*]] = llvm.inline_asm has_side_effects {{.*}}"mov.b32 $0, $1;", "=r,r" %[[O]]#0
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[E]], %{{.*}} : i32
// CHECK: arith.muli %[[CLAMPED]]
// CHECK: arith.muli %[[O]]#1
// CHECK: scf.for
// CHECK: nvvm.shfl.sync idx
// CHECK: nvvm.cp.async.shared.global
func.func @copy_paged_offsets(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                              %u: i32, %row: i32, %head: i32, %ps: i32, %pages: i32,
                              %len: i32, %sp: i64, %sr: i64, %sh: i64, %vpool: !llvm.ptr<1>) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 4 {
      %o:2 = hopper.paged_offsets %table[%row] page_size %ps pool %pages bound %len
          strides %sp, %sr rows 64 per_pass 2 warps 4 warp %w for %pool, %vpool : i32, i32
      hopper.ring.producer_acquire %k[%u] : !k
      hopper.copy_paged_tile %pool[%row, %head] strides %sp, %sr, %sh pages %table
          page_size %ps pool %pages bound %len into %k[%u] rows 64 cols 128 warps 4
          warp %w offsets %o#0, %o#1 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// Head dim 96 in a 128-column tile: a lane's pieces past the row's 12
// (192 bytes) copy 0 source bytes (zero-filled, nothing read), as TMA
// fills a box past the tensor.
// CHECK-LABEL: func.func @copy_paged_narrow(
// CHECK: %[[LANE:.*]] = nvvm.read.ptx.sreg.laneid
// CHECK: %[[PIECE:.*]] = arith.andi %[[LANE]], %c15_i32
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[PIECE]], %c12_i32
// CHECK: %[[SIZE:.*]] = arith.select %[[IN]], %c16_i32, %c0_i32
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %[[SIZE]]
func.func @copy_paged_narrow(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                             %u: i32, %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 1 {
      hopper.ring.producer_acquire %k[%u] : !k
      hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table
          page_size %x pool %x bound %x into %k[%u] rows 64 cols 128 valid 96 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// Left in the producer thread's program (hopper-warp-copy not run), the
// copy would wait at the warp's barrier for lanes that never come.
func.func @copy_in_one_thread(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                              %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_thread {
      // expected-error @below {{is run by every lane of 1 warp(s), but stands in one thread's program: run hopper-warp-copy first (warps 0 .. 0 then run the producer's program)}}
      hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table
          page_size %x pool %x bound %x into %k[%x] rows 64 cols 128 : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

// Offsets of four warps' rows outside their program: warp 0 alone would
// load only its own rows' pages.
func.func @offsets_short_of_warps(%table: !llvm.ptr<1>, %x: i32, %s: i64) {
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 1 {
      // expected-error @below {{is run by every lane of 4 warp(s), but stands in no program of warps 0 .. 3: run hopper-warp-copy first (warps 0 .. 3 then run the producer's program)}}
      %o:2 = hopper.paged_offsets %table[%x] page_size %x pool %x bound %x strides %s, %s
          rows 64 per_pass 2 warps 4 warp %w : i32, i32
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}

// -----

!k = !hopper.ring<stages = 3, stage_bytes = 16384, data = 16384, full = 114704, empty = 114752, arrivals = 128, cluster = 1>

// A copy of four warps run by warp 0 alone would wait at the warps'
// barrier for three that never come.
func.func @copy_short_of_warps(%smem: !llvm.ptr<3>, %pool: !llvm.ptr<1>, %table: !llvm.ptr<1>,
                               %x: i32, %s: i64) {
  %k = hopper.ring.create %smem : !k
  hopper.warp_specialize producer regs 56 {
    hopper.producer_warps(%w) first 0 count 1 {
      // expected-error @below {{is run by every lane of 4 warp(s), but stands in no program of warps 0 .. 3: run hopper-warp-copy first (warps 0 .. 3 then run the producer's program)}}
      hopper.copy_paged_tile %pool[%x, %x] strides %s, %s, %s pages %table
          page_size %x pool %x bound %x into %k[%x] rows 64 cols 128 warps 4
          warp %w : bf16, !k
    }
  } consumers(%cw of 1) regs 200 {
  }
  return
}
