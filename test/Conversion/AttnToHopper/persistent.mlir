// attn-hopper-config{persistent}: CTAs loop over tiles handed out by a
// dynamic scheduler. A CTA's first tile is its ctaid.x; the producer thread
// claims the next one from a global counter (atomic add + gridDim.x) once
// the current tile's loads are issued, and
// passes each tile to the consumers through shared memory -- its id and
// coordinates {tile, m0, head, batch}, decoded by the producer so that the
// consumers do no integer division between tiles -- written after the last
// tile's Q was released (Q empty) and before the Q load's arrive. The
// consumers read it after the Q full wait, and the coordinates again for
// the epilogue just before they release Q; an id >= the tile count (written
// with a plain arrive, no load) ends their loop. The K/V ring slot g
// continues across tiles.
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on q-buffers=1" --attn-tile --convert-attn-to-hopper | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=Q2

// Two Q buffers (the default where they fit): tile k uses buffer, barriers
// and published slot k & 1, with phase (k >> 1) & 1, so the producer loads
// tile k + 1's Q while the consumers work on tile k. The published words
// pass through a lane-0 shuffle: ptxas then knows they are warp-uniform.
// Q2: dynamic_smem = 180416
// Q2-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c1_i32
// Producer: buffer k & 1 once tile k - 2 released it.
// Q2: ^bb0(%{{.*}}: i32, %[[PK:[^:]*]]: i32, %{{.*}}: i32):
// Q2-NEXT: %[[PB:.*]] = arith.andi %[[PK]], %c1_i32 : i32
// Q2-NEXT: %[[PB8:.*]] = arith.muli %[[PB]], %c8_i32 : i32
// Q2-NEXT: %[[PFULLOFF:.*]] = arith.addi %[[PB8]], %c[[QFULL:[0-9]+]]_i32 : i32
// Q2-NEXT: %[[PFULL:.*]] = llvm.getelementptr %{{.*}}[%[[PFULLOFF]]]
// Q2-NEXT: %[[PEMPTYOFF:.*]] = arith.addi %[[PB8]], %c[[QEMPTY:[0-9]+]]_i32 : i32
// Q2-NEXT: %[[PEMPTY:.*]] = llvm.getelementptr %{{.*}}[%[[PEMPTYOFF]]]
// Q2-NEXT: %[[PJ:.*]] = arith.shrui %[[PK]], %c1_i32 : i32
// Q2-NEXT: %[[PPH:.*]] = arith.andi %[[PJ]], %c1_i32 : i32
// Q2: %[[PQOFF:.*]] = arith.muli %[[PB]], %c16384_i32 : i32
// Q2-NEXT: %[[PFLIP:.*]] = arith.xori %[[PPH]], %c1_i32 : i32
// Q2-NEXT: nvvm.mbarrier.try_wait.parity %[[PEMPTY]], %[[PFLIP]]
// Q2: nvvm.mbarrier.arrive.expect_tx %[[PFULL]], %c16384_i32
// Q2-NEXT: %[[DST:.*]] = arith.addi %[[PQOFF]], %c0_i32 : i32
// Q2: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %[[PFULL]]
// Consumers: the same buffer's full barrier and slot, the id shuffled from lane 0.
// Q2: scf.while (%[[CK0:.*]] = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32) -> (i32, i32, i32) {
// Q2-NEXT: %[[CB:.*]] = arith.andi %[[CK0]], %c1_i32 : i32
// Q2: %[[CFULLOFF:.*]] = arith.addi %{{.*}}, %c[[QFULL]]_i32 : i32
// Q2: nvvm.mbarrier.try_wait.parity
// Q2-NEXT: %[[RAW:.*]] = llvm.inline_asm has_side_effects {{.*}}"ld.shared.u32 $0, [$1];"
// Q2-NEXT: %[[ID:.*]] = nvvm.shfl.sync idx %c-1_i32, %[[RAW]], %c0_i32, %c31_i32 : i32 -> i32
// Q2-NEXT: arith.cmpi slt, %[[ID]]
// The tile's S = Q K^T reads its buffer: descriptor + (k & 1) * 16384 / 16.
// Q2: } do {
// Q2: %[[QOFF:.*]] = arith.muli %{{.*}}, %c16384_i32 : i32
// Q2: %[[QOFF16:.*]] = arith.shrui %{{.*}}, %c4_i32 : i32
// Q2-NEXT: %[[QOFF64:.*]] = arith.extui %[[QOFF16]] : i32 to i64
// Q2-NEXT: %[[DESCQ:.*]] = arith.addi %{{.*}}, %[[QOFF64]] : i64
// Q2: hopper.wgmma.ss %[[DESCQ]],

// CHECK: gpu.func @attn_kernel(
// CHECK-SAME: %[[LSE:[^:]*]]: !llvm.ptr<1>, %[[COUNTER:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: i32,
// CHECK-SAME: grid = "persistent"
// CHECK-SAME: "LSE", "tileCounter", "B"
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: %[[NCTA:.*]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK: %[[SLOT:.*]] = llvm.ptrtoint

// Producer: a loop over the tiles it fetches, carrying the tile count and the ring slot.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK: %[[HB:.*]] = arith.muli %arg10, %arg7 : i32
// CHECK: %[[TILES:.*]] = arith.muli %{{.*}}, %[[HB]] : i32
// CHECK: %[[PLOOP:.*]]:3 = scf.while (%[[PT0:.*]] = %[[CTA]], %{{.*}} = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32, i32) -> (i32, i32, i32) {
// CHECK:   %[[MORE:.*]] = arith.cmpi slt, %[[PT0]], %[[TILES]] : i32
// CHECK:   scf.condition(%[[MORE]])
// CHECK: } do {
// CHECK: ^bb0(%[[PT:.*]]: i32, %[[PK:.*]]: i32, %[[PG:.*]]: i32):
// CHECK:   %[[QPH:.*]] = arith.andi %[[PK]], %c1_i32 : i32
// CHECK:   %[[FLIP:.*]] = arith.xori %[[QPH]], %c1_i32 : i32
// CHECK:   nvvm.mbarrier.try_wait.parity %{{.*}}, %[[FLIP]]
// CHECK:   func.call @attn_kernel_kv_range
// CHECK:   llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+0], $1;", "r,r" %[[SLOT]], %[[PT]]
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+4], $1;", "r,r" %[[SLOT]], %[[M0:[^ ]*]]
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+8], $1;"
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+12], $1;"
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx
// CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// The K/V loop runs over ring slots g .. g + nblk; its bound is the next g.
// CHECK:   %[[GEND:.*]] = arith.addi %[[PG]], %{{.*}} : i32
// CHECK:   scf.for %[[U:.*]] = %[[PG]] to %[[GEND]]
// CHECK-NEXT: arith.remui %[[U]], %c4_i32
// The next tile is claimed once this one's loads are issued.
// CHECK:   %[[GOT:.*]] = llvm.atomicrmw add %[[COUNTER]], %c1_i32 monotonic : !llvm.ptr<1>, i32
// CHECK:   %[[NEXT:.*]] = arith.addi %[[GOT]], %[[NCTA]] : i32
// CHECK:   scf.yield %[[NEXT]], %{{.*}}, %[[GEND]] : i32, i32, i32
// No tile left: the stop id, then the counters reset by the last CTA.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+0], $1;", "r,r" %[[SLOT]], %[[TILES]]
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK: atom.acq_rel.gpu.global.add.u32
// CHECK: scf.if
// CHECK-NEXT: llvm.store %c0_i32, %[[COUNTER]] : i32, !llvm.ptr<1>

// Consumers: wait for the tile's Q with the tile parity, read its id, stop
// at the stop id; read its coordinates (no division) and schedule; release
// Q once the tile's last S has retired; read the coordinates again for the
// epilogue.
// Ping-pong is hopper-pingpong's (test/Dialect/Hopper/pingpong.mlir): its
// edges sit outside the tile loop, so the turn passes on across tiles.
// CHECK: } consumers(%{{.*}} of 2) regs 240 {
// CHECK: %[[CHB:.*]] = arith.muli %arg10, %arg7 : i32
// CHECK-NEXT: %[[CTILES:.*]] = arith.muli %{{.*}}, %[[CHB]] : i32
// CHECK-NOT: hopper.named_barrier.arrive turn
// CHECK: scf.while (%[[CK0:.*]] = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32) -> (i32, i32, i32) {
// CHECK:   %[[CPH:.*]] = arith.andi %[[CK0]], %c1_i32 : i32
// CHECK:   nvvm.mbarrier.try_wait.parity %{{.*}}, %[[CPH]]
// CHECK:   %[[TILE:.*]] = llvm.inline_asm has_side_effects {{.*}}"ld.shared.u32 $0, [$1];", "=r,r" %[[SLOT]]
// CHECK:   %[[LIVE:.*]] = arith.cmpi slt, %[[TILE]], %[[CTILES]] : i32
// CHECK:   scf.condition(%[[LIVE]]) %[[TILE]]
// CHECK: } do {
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   %[[A4:.*]] = arith.addi %[[SLOT]], %c4_i32 : i32
// CHECK:   %[[CM0:.*]] = llvm.inline_asm has_side_effects {{.*}}"ld.shared.u32 $0, [$1];", "=r,r" %[[A4]]
// CHECK:   func.call @attn_kernel_kv_range(%[[CM0]],
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   arith.addi %[[SLOT]], %c4_i32
// CHECK-NEXT: "ld.shared.u32 $0, [$1];"
// CHECK-NEXT: arith.addi %[[SLOT]], %c8_i32
// CHECK:   nvvm.mbarrier.arrive %[[QEMPTY:.*]] : !llvm.ptr<3>
// CHECK:   } else {
// CHECK:     arith.addi %[[SLOT]], %c4_i32
// CHECK-NEXT: "ld.shared.u32 $0, [$1];"
// CHECK:     nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   scf.yield %{{.*}}, %{{.*}} : i32, i32
// CHECK-NEXT: }
// CHECK: } {hopper.pingpong}
func.func @attn(%q: memref<?x4x?x64xbf16>, %k: memref<?x2x?x64xbf16>, %v: memref<?x2x?x64xbf16>,
                %o: memref<?x4x?x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16>)
    outs(%o : memref<?x4x?x64xbf16>) causal
  return
}
