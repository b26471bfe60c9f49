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
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on q-buffers=1" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s --check-prefix=Q2

// Two Q buffers (the default where they fit): the Q ring has two stages,
// so tile k (ring slot k) uses buffer, barriers and published slot k % 2,
// with phase (k / 2) & 1 (the ring's lowering: HopperToNVVM/ring.mlir),
// and the producer loads tile k + 1's Q while the consumers work on tile
// k. The published words pass through a lane-0 shuffle: ptxas then knows
// they are warp-uniform.
// Q2: dynamic_smem = 180416
// Q2: %[[QR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 180224, empty = 180240, arrivals = 256, cluster = 1>
// Q2: hopper.ring.init %[[QR]]
// Producer: slot k once tile k - 2 released its buffer; the tile's words
// into published slot k % 2 before the commit publishes them.
// Q2: ^bb0(%{{.*}}: i32, %[[PK:[^:]*]]: i32, %{{.*}}: i32):
// Q2-NEXT: %[[PB:.*]] = hopper.ring.stage %[[QR]][%[[PK]]]
// Q2-NEXT: %[[PB16:.*]] = arith.muli %[[PB]], %c16_i32 : i32
// Q2-NEXT: %[[PSLOT:.*]] = arith.addi %{{.*}}, %[[PB16]] : i32
// Q2-NEXT: hopper.ring.producer_acquire %[[QR]][%[[PK]]]
// Q2: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+0], $1;", "r,r" %[[PSLOT]],
// Q2: hopper.ring.producer_commit %[[QR]][%[[PK]]] tx 16384
// Q2-NEXT: hopper.tma_load %arg0[%c0_i32, {{.*}}] into %[[QR]][%[[PK]]] at %c0_i32
// Consumers: the same slot's full barrier and published words, the id
// shuffled from lane 0.
// Q2: scf.while (%[[CK0:.*]] = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32) -> (i32, i32, i32) {
// Q2-NEXT: %[[CB:.*]] = hopper.ring.stage %[[QR]][%[[CK0]]]
// Q2-NEXT: %[[CB16:.*]] = arith.muli %[[CB]], %c16_i32 : i32
// Q2-NEXT: %[[CSLOT:.*]] = arith.addi %{{.*}}, %[[CB16]] : i32
// Q2-NEXT: hopper.ring.consumer_wait %[[QR]][%[[CK0]]]
// Q2-NEXT: %[[RAW:.*]] = llvm.inline_asm has_side_effects {{.*}}"ld.shared.u32 $0, [$1];", "=r,r" %[[CSLOT]]
// Q2-NEXT: %[[ID:.*]] = hopper.warp_uniform %[[RAW]] : i32
// Q2-NEXT: arith.cmpi slt, %[[ID]]
// The tile's S = Q K^T reads its buffer: descriptor + (k % 2) * 16384 / 16.
// Q2: } do {
// Q2: ^bb0(%{{.*}}: i32, %[[CK:[^:]*]]: i32, %{{.*}}: i32):
// Q2-NEXT: %[[CST:.*]] = hopper.ring.stage %[[QR]][%[[CK]]]
// Q2: %[[QOFF:.*]] = arith.muli %[[CST]], %c16384_i32 : i32
// Q2: %[[QOFF16:.*]] = arith.shrui %[[QOFF]], %c4_i32 : i32
// Q2-NEXT: %[[QOFF64:.*]] = arith.extui %[[QOFF16]] : i32 to i64
// Q2-NEXT: %[[DESCQ:.*]] = arith.addi %{{.*}}, %[[QOFF64]] : i64
// Q2: hopper.wgmma.ss %[[DESCQ]],

// CHECK: gpu.func @attn_kernel(
// CHECK-SAME: %[[LSE:[^:]*]]: !llvm.ptr<1>, %[[COUNTER:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: i32,
// CHECK-SAME: grid = "persistent"
// CHECK-SAME: "LSE", "tileCounter", "B"
// One Q buffer: a Q ring of one stage (slot = the tile count k); K and V
// rings of 4 stages at head dim 64.
// CHECK: %[[QR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 163840, empty = 163848, arrivals = 256, cluster = 1>
// CHECK-NEXT: %[[KR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 4, stage_bytes = 16384, data = 16384,
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: %[[SLOT:.*]] = llvm.ptrtoint

// Producer: a loop over the tiles it fetches, carrying the tile count and the ring slot.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK: %[[NUMM:[^,]*]], %[[TILES:[^ ]*]] = hopper.tile_grid %arg8, %arg10, %arg7 block_m 128
// CHECK: %[[PLOOP:.*]]:3 = scf.while (%[[PT0:.*]] = %[[CTA]], %{{.*}} = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32, i32) -> (i32, i32, i32) {
// CHECK:   %[[MORE:.*]] = arith.cmpi slt, %[[PT0]], %[[TILES]] : i32
// CHECK:   scf.condition(%[[MORE]])
// CHECK: } do {
// CHECK: ^bb0(%[[PT:.*]]: i32, %[[PK:.*]]: i32, %[[PG:.*]]: i32):
// CHECK-NEXT: hopper.ring.producer_acquire %[[QR]][%[[PK]]]
// CHECK:   func.call @attn_kernel_kv_range
// CHECK:   llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+0], $1;", "r,r" %[[SLOT]], %[[PT]]
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+4], $1;", "r,r" %[[SLOT]], %[[M0:[^ ]*]]
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+8], $1;"
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+12], $1;"
// CHECK-NEXT: hopper.ring.producer_commit %[[QR]][%[[PK]]] tx 16384
// CHECK-NEXT: hopper.tma_load %arg0[%c0_i32, {{.*}}] into %[[QR]][%[[PK]]] at %c0_i32
// The K/V loop runs over ring slots g .. g + nblk; its bound is the next g.
// CHECK:   %[[GEND:.*]] = arith.addi %[[PG]], %{{.*}} : i32
// CHECK:   scf.for %[[U:.*]] = %[[PG]] to %[[GEND]]
// CHECK:     hopper.ring.producer_acquire %[[KR]][%[[U]]]
// The next tile is claimed once this one's loads are issued.
// CHECK:   %[[NEXT:.*]] = hopper.tile_next %[[PT]] dynamic counter %[[COUNTER]] : !llvm.ptr<1>
// CHECK:   scf.yield %[[NEXT]], %{{.*}}, %[[GEND]] : i32, i32, i32
// No tile left: the stop id in the next Q slot, published by a commit of
// no bytes; then the counters reset by the last CTA.
// CHECK: hopper.ring.producer_acquire %[[QR]][%[[PLOOP]]#1]
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"st.shared.u32 [$0+0], $1;", "r,r" %[[SLOT]], %[[TILES]]
// CHECK: hopper.ring.producer_commit %[[QR]][%[[PLOOP]]#1] tx 0
// CHECK: hopper.tile_counter_reset %[[COUNTER]] : !llvm.ptr<1>

// Consumers: wait for the tile's Q with the tile parity, read its id, stop
// at the stop id; read its coordinates (no division) and schedule; release
// Q once the tile's last S has retired; read the coordinates again for the
// epilogue.
// Ping-pong is hopper-pingpong's (test/Dialect/Hopper/pingpong.mlir): its
// edges sit outside the tile loop, so the turn passes on across tiles.
// CHECK: } consumers(%{{.*}} of 2) regs 240 {
// CHECK: %{{[^,]*}}, %[[CTILES:[^ ]*]] = hopper.tile_grid %arg8, %arg10, %arg7 block_m 128
// CHECK-NOT: hopper.named_barrier.arrive turn
// CHECK: scf.while (%[[CK0:.*]] = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32) -> (i32, i32, i32) {
// CHECK:   hopper.ring.consumer_wait %[[QR]][%[[CK0]]]
// CHECK:   %[[TILE:.*]] = llvm.inline_asm has_side_effects {{.*}}"ld.shared.u32 $0, [$1];", "=r,r" %[[SLOT]]
// CHECK:   %[[LIVE:.*]] = arith.cmpi slt, %[[TILE]], %[[CTILES]] : i32
// CHECK:   scf.condition(%[[LIVE]]) %[[TILE]]
// CHECK: } do {
// CHECK: ^bb0(%{{.*}}: i32, %[[CK:[^:]*]]: i32, %{{.*}}: i32):
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   %[[A4:.*]] = arith.addi %[[SLOT]], %c4_i32 : i32
// CHECK:   %[[CM0:.*]] = llvm.inline_asm has_side_effects {{.*}}"ld.shared.u32 $0, [$1];", "=r,r" %[[A4]]
// CHECK:   func.call @attn_kernel_kv_range(%[[CM0]],
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   arith.addi %[[SLOT]], %c4_i32
// CHECK-NEXT: "ld.shared.u32 $0, [$1];"
// CHECK-NEXT: arith.addi %[[SLOT]], %c8_i32
// CHECK:   hopper.ring.consumer_release %[[QR]][%[[CK]]]
// CHECK:   } else {
// CHECK:     arith.addi %[[SLOT]], %c4_i32
// CHECK-NEXT: "ld.shared.u32 $0, [$1];"
// CHECK:     hopper.ring.consumer_release %[[QR]][%[[CK]]]
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
