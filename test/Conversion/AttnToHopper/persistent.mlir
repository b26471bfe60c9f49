// attn-hopper-config{persistent}: CTAs loop over tiles handed out by a
// dynamic scheduler. The kernel pass writes the loop as the consumers'
// program: each turn fills Q's slot k (hopper.ring.fill) with the CTA's
// k-th tile -- claimed (hopper.tile_claim: ctaid.x first, then a global
// counter's next), decoded, published as words {tile, m0, head, batch}
// (hopper.ring.publish, before the slot's arrive) and its Q loaded, or
// for no tile left an id >= the tile count with a plain arrive and the
// counters' reset -- then waits for the slot, reads the id
// (hopper.ring.published) and runs the tile while the id is below the
// tile count. hopper-warp-specialize gives the producer thread that loop
// with the published words as its own values; the consumers read them
// after the wait (no division between tiles), and again for the epilogue
// just before they release Q. The K/V ring slot g continues across tiles.
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on q-buffers=1" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s --check-prefix=Q2
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=on" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=FILL

// Before warp specialization: one program, the consumers'.
// FILL: } consumers(%{{.*}} of 2) regs 240 {
// FILL: %{{[^,]*}}, %[[TILES:[^ ]*]] = hopper.tile_grid
// FILL: scf.while (%[[K:[^ ]*]] = %c0_i32, %[[G:[^ ]*]] = %c0_i32) : (i32, i32) -> (i32, i32) {
// FILL: hopper.ring.fill %[[QR:[0-9]+]][%[[K]]]
// FILL-NEXT: %[[T:.*]] = hopper.tile_claim %[[K]] first %{{.*}} dynamic counter
// FILL-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[T]], %[[TILES]] : i32
// FILL: hopper.ring.publish %[[T]], %{{.*}}, %{{.*}}, %{{.*}} at %[[SLOT:[^ ]*]] to %[[QR]][%[[K]]]
// FILL-NEXT: scf.if %[[IN]] {
// FILL-NEXT: hopper.load_tile %arg0
// FILL-NEXT: } else {
// FILL-NEXT: hopper.ring.producer_commit %[[QR]][%[[K]]] tx 0
// FILL-NEXT: hopper.tile_counter_reset
// FILL: hopper.ring.consumer_wait %[[QR]][%[[K]]]
// FILL-NEXT: %[[ID:.*]] = hopper.ring.published %[[QR]][%[[K]]] word 0 at %[[SLOT]]
// FILL-NEXT: %[[IDU:.*]] = hopper.warp_uniform %[[ID]] : i32
// FILL-NEXT: %[[MORE:.*]] = arith.cmpi slt, %[[IDU]], %[[TILES]] : i32
// FILL-NEXT: %[[G1:.*]] = scf.if %[[MORE]] -> (i32) {
// FILL: hopper.ring.fill
// FILL: scf.yield %[[G]] : i32
// FILL: scf.condition(%[[MORE]]) %[[K]], %[[G1]] : i32, i32

// Q2: dynamic_smem = 180416
// Q2: %[[QR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 0, full = 180224, empty = 180240, arrivals = 256, cluster = 1>
// Q2: hopper.ring.init %[[QR]]
// Two Q buffers (the default where they fit): the Q ring has two stages,
// so tile k (ring slot k) uses buffer, barriers and published slot k % 2,
// with phase (k / 2) & 1 (the ring's lowering: HopperToNVVM/ring.mlir),
// and the producer loads tile k + 1's Q while the consumers work on tile
// k. Producer: slot k once tile k - 2 released its buffer; the tile's
// words into published slot k % 2 before the commit publishes them.
// Q2: hopper.producer_thread {
// Q2: scf.while (%[[PK:[^ ]*]] = %c0_i32,
// Q2-NEXT: %[[PB:.*]] = hopper.ring.stage %[[QR]][%[[PK]]]
// Q2-NEXT: %[[PB16:.*]] = arith.muli %[[PB]], %c16_i32 : i32
// Q2-NEXT: %[[PSLOT:.*]] = arith.addi %{{.*}}, %[[PB16]] : i32
// Q2-NEXT: hopper.tile_claim %[[PK]]
// Q2-NEXT: hopper.ring.producer_acquire %[[QR]][%[[PK]]]
// Q2: hopper.ring.publish %{{.*}} at %[[PSLOT]] to %[[QR]][%[[PK]]]
// Q2: hopper.ring.producer_commit %[[QR]][%[[PK]]] tx 16384
// Q2-NEXT: hopper.tma_load %arg0[%c0_i32, {{.*}}] into %[[QR]][%[[PK]]] at %c0_i32
// Consumers: the same slot's full barrier and published words, the id
// shuffled from lane 0 (ptxas then knows it is warp-uniform).
// Q2: } consumers(
// Q2: scf.while (%[[CK:[^ ]*]] = %c0_i32, %{{.*}} = %c0_i32) : (i32, i32) -> (i32, i32) {
// Q2-NEXT: %[[CB:.*]] = hopper.ring.stage %[[QR]][%[[CK]]]
// Q2-NEXT: %[[CB16:.*]] = arith.muli %[[CB]], %c16_i32 : i32
// Q2-NEXT: %[[CSLOT:.*]] = arith.addi %{{.*}}, %[[CB16]] : i32
// Q2-NEXT: hopper.ring.consumer_wait %[[QR]][%[[CK]]]
// Q2-NEXT: %[[RAW:.*]] = hopper.ring.published %[[QR]][%[[CK]]] word 0 at %[[CSLOT]]
// Q2-NEXT: %[[ID:.*]] = hopper.warp_uniform %[[RAW]] : i32
// Q2-NEXT: arith.cmpi slt, %[[ID]]
// The tile's S = Q K^T reads its buffer: descriptor + (k % 2) * 16384 / 16.
// Q2: %[[CST:.*]] = hopper.ring.stage %[[QR]][%[[CK]]]
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

// Producer: the loop over the tiles it claims, carrying the tile count k
// and the K/V ring slot g; each turn claims the tile, acquires Q's slot k
// (the claim's atomic overlaps the wait), then decodes the tile (the
// producer's 24 registers hold nothing decoded across the wait).
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK: %[[NUMM:[^,]*]], %[[TILES:[^ ]*]] = hopper.tile_grid %arg8, %arg10, %arg7 block_m 128
// CHECK: scf.while (%[[PK:[^ ]*]] = %c0_i32, %[[PG:[^ ]*]] = %c0_i32) : (i32, i32) -> (i32, i32) {
// CHECK-NEXT: %[[PT:.*]] = hopper.tile_claim %[[PK]] first %[[CTA]] dynamic counter %[[COUNTER]] : !llvm.ptr<1>
// CHECK-NEXT: hopper.ring.producer_acquire %[[QR]][%[[PK]]]
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[PT]], %[[TILES]] : i32
// CHECK-NEXT: %[[W:.*]]:4 = scf.if %[[IN]]
// CHECK: hopper.tile_coords %[[PT]] in %[[NUMM]], %arg10 block_m 128 longest_first sections
// CHECK: hopper.ring.publish %[[PT]], %[[W]]#0, %[[W]]#1, %[[W]]#2 at %[[SLOT]] to %[[QR]][%[[PK]]]
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NEXT: hopper.ring.producer_commit %[[QR]][%[[PK]]] tx 16384
// CHECK-NEXT: hopper.tma_load %arg0[%c0_i32, {{.*}}] into %[[QR]][%[[PK]]] at %c0_i32
// No tile left: the stop id published by a commit of no bytes; then the
// counters reset by the last CTA.
// CHECK-NEXT: } else {
// CHECK-NEXT: hopper.ring.producer_commit %[[QR]][%[[PK]]] tx 0
// CHECK-NEXT: hopper.tile_counter_reset %[[COUNTER]] : !llvm.ptr<1>
// The tile's K/V blocks from ring slot g on, its schedule computed from the
// published words (here the producer's own values).
// CHECK: %[[G1:.*]] = scf.if
// CHECK: func.call @attn_kernel_kv_range(%[[W]]#0,
// CHECK: scf.for %[[T:[^ ]*]] = %c0_i32 to
// CHECK-NEXT: %[[U:.*]] = arith.addi %[[PG]], %[[T]] : i32
// CHECK: hopper.ring.producer_acquire %[[KR]][%[[U]]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[PG]] : i32
// CHECK: scf.condition(%{{.*}}) %[[PK]], %[[G1]] : i32, i32

// Consumers: wait for the tile's Q with the tile parity, read its id, stop
// at the stop id; read its coordinates (no division) and schedule; release
// Q once the tile's last S has retired; read the coordinates again for the
// epilogue.
// Ping-pong is hopper-pingpong's (test/Dialect/Hopper/pingpong.mlir): its
// edges sit outside the tile loop, so the turn passes on across tiles.
// CHECK: } consumers(%{{.*}} of 2) regs 240 {
// CHECK: %{{[^,]*}}, %[[CTILES:[^ ]*]] = hopper.tile_grid %arg8, %arg10, %arg7 block_m 128
// CHECK-NOT: hopper.named_barrier.arrive turn
// CHECK: scf.while (%[[CK:[^ ]*]] = %c0_i32, %[[CG:[^ ]*]] = %c0_i32) : (i32, i32) -> (i32, i32) {
// CHECK-NOT: hopper.ring.fill
// CHECK:   hopper.ring.consumer_wait %[[QR]][%[[CK]]]
// CHECK-NEXT: %[[TILE:.*]] = hopper.ring.published %[[QR]][%[[CK]]] word 0 at %[[SLOT]]
// CHECK-NEXT: %[[LIVE:.*]] = arith.cmpi slt, %[[TILE]], %[[CTILES]] : i32
// CHECK-NEXT: scf.if %[[LIVE]] -> (i32) {
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   %[[CM0:.*]] = hopper.ring.published %[[QR]][%[[CK]]] word 1 at %[[SLOT]]
// CHECK:   func.call @attn_kernel_kv_range(%[[CM0]],
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   hopper.ring.published %[[QR]][%[[CK]]] word 1
// CHECK-NEXT: hopper.ring.published %[[QR]][%[[CK]]] word 2
// CHECK-NEXT: hopper.ring.published %[[QR]][%[[CK]]] word 3
// CHECK-NEXT: hopper.ring.consumer_release %[[QR]][%[[CK]]]
// CHECK:   } else {
// CHECK:     hopper.ring.published %[[QR]][%[[CK]]] word 1
// CHECK:     hopper.ring.consumer_release %[[QR]][%[[CK]]]
// CHECK-NOT: arith.{{divui|remui}} %{{.*}}, %arg10 :
// CHECK:   } else {
// CHECK-NEXT: scf.yield %[[CG]] : i32
// CHECK: } {hopper.pingpong}
func.func @attn(%q: memref<?x4x?x64xbf16>, %k: memref<?x2x?x64xbf16>, %v: memref<?x2x?x64xbf16>,
                %o: memref<?x4x?x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16>)
    outs(%o : memref<?x4x?x64xbf16>) causal
  return
}
