// convert-hopper-to-nvvm on the tile scheduler: the grid (ceil(Sq / block_m)
// m-blocks, even with pairs, times Hq x B), a tile's coordinates (m-blocks
// fastest; longest first reverses them), the next tile (+ gridDim.x, from
// the counter when dynamic), the counters' reset by the last CTA, and a
// CTA's k-th tile (static: ctaid.x + k gridDim.x; dynamic: ctaid.x for
// k = 0, else the counter's next).
// RUN: fa3-opt %s --convert-hopper-to-nvvm | FileCheck %s

// CHECK-LABEL: func.func @schedule(
// CHECK-SAME: %[[SQ:[^:]*]]: i32, %[[HQ:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[T:[^:]*]]: i32, %[[CTR:[^:]*]]: !llvm.ptr<1>)
// The grid from an opaque copy of Sq.
// CHECK: %[[SQC:.*]] = llvm.inline_asm asm_dialect = att "mov.b32 $0, $1;", "=r,r" %[[SQ]]
// CHECK: %[[PAD:.*]] = arith.addi %[[SQC]], %c127_i32
// CHECK: %[[NM:.*]] = arith.divui %[[PAD]], %c128_i32
// CHECK: %[[NM1:.*]] = arith.addi %[[NM]], %c1_i32
// CHECK: %[[NUMM:.*]] = arith.andi %[[NM1]], %c-2_i32
// CHECK: %[[HB:.*]] = arith.muli %[[HQ]], %[[B]]
// CHECK: %[[TILES:.*]] = arith.muli %[[NUMM]], %[[HB]]
// Coordinates, the m-blocks reversed.
// CHECK: %[[REV:.*]] = arith.remui %[[T]], %[[NUMM]]
// CHECK: %[[LAST:.*]] = arith.subi %[[NUMM]], %c1_i32
// CHECK: %[[MB:.*]] = arith.subi %[[LAST]], %[[REV]]
// CHECK: %[[REST:.*]] = arith.divui %[[T]], %[[NUMM]]
// CHECK: %[[HEAD:.*]] = arith.remui %[[REST]], %[[HQ]]
// CHECK: %[[BATCH:.*]] = arith.divui %[[REST]], %[[HQ]]
// CHECK: %[[M0:.*]] = arith.muli %[[MB]], %c128_i32
// Static: + gridDim.x; dynamic: the counter's old value + gridDim.x.
// CHECK: %[[N0:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: %[[S:.*]] = arith.addi %[[T]], %[[N0]]
// CHECK: %[[GOT:.*]] = llvm.atomicrmw add %[[CTR]], %c1_i32{{.*}} monotonic
// CHECK: %[[N1:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: %[[D:.*]] = arith.addi %[[GOT]], %[[N1]]
// The reset: the second counter counts finished CTAs; the last zeroes both.
// CHECK: %[[BEFORE:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "atom.acq_rel.gpu.global.add.u32 $0, [$1+4], 1;", "=r,l,~{memory}" %[[CTR]]
// CHECK: %[[N2:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: %[[COUNT:.*]] = arith.addi %[[BEFORE]], %c1_i32
// CHECK: %[[ISLAST:.*]] = arith.cmpi eq, %[[COUNT]], %[[N2]]
// CHECK: scf.if %[[ISLAST]] {
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.store %[[Z]], %[[CTR]]
// CHECK-NEXT: %[[DONE:.*]] = llvm.getelementptr %[[CTR]][1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, i32
// CHECK-NEXT: llvm.store %[[Z]], %[[DONE]]
// CHECK: return %[[TILES]], %[[M0]], %[[HEAD]], %[[BATCH]], %[[S]], %[[D]]
func.func @schedule(%sq: i32, %hq: i32, %b: i32, %t: i32, %ctr: !llvm.ptr<1>) -> (i32, i32, i32, i32, i32, i32) {
  %numM, %tiles = hopper.tile_grid %sq, %hq, %b block_m 128 pairs
  %m0, %head, %batch = hopper.tile_coords %t in %numM, %hq block_m 128 longest_first
  %n0 = hopper.tile_next %t static
  %n1 = hopper.tile_next %t dynamic counter %ctr : !llvm.ptr<1>
  hopper.tile_counter_reset %ctr : !llvm.ptr<1>
  return %tiles, %m0, %head, %batch, %n0, %n1 : i32, i32, i32, i32, i32, i32
}

// Sections of at most N (head, batch) pairs, as even as they divide: C =
// max(ceil(HB / N), 1) sections, the first E = HB % C of Q + 1 = HB / C + 1
// pairs, the rest of Q. Tile T lies in a large section when T < E (Q + 1)
// numM; its section starts at tile BASE (0, or the large ones' tiles) and
// pair FIRST; r counted from the section's first tile, m-block numM - 1 -
// r / S of pair FIRST + r % S.
// CHECK-LABEL: func.func @sections(
// CHECK-SAME: %[[T:[^:]*]]: i32, %[[NUMM:[^:]*]]: i32, %[[HQ:[^:]*]]: i32, %[[N:[^:]*]]: i32, %[[HB:[^:]*]]: i32)
// CHECK: %[[N1:.*]] = arith.subi %[[N]], %c1_i32
// CHECK: %[[PAD:.*]] = arith.addi %[[HB]], %[[N1]]
// CHECK: %[[C0:.*]] = arith.divui %[[PAD]], %[[N]]
// CHECK: %[[C:.*]] = arith.maxui %[[C0]], %c1_i32
// CHECK: %[[Q:.*]] = arith.divui %[[HB]], %[[C]]
// CHECK: %[[Q1:.*]] = arith.addi %[[Q]], %c1_i32
// CHECK: %[[E:.*]] = arith.remui %[[HB]], %[[C]]
// CHECK: %[[LPAIRS:.*]] = arith.muli %[[E]], %[[Q1]]
// CHECK: %[[LTILES:.*]] = arith.muli %[[LPAIRS]], %[[NUMM]]
// CHECK: %[[INL:.*]] = arith.cmpi ult, %[[T]], %[[LTILES]]
// CHECK: %[[S0:.*]] = arith.select %[[INL]], %[[Q1]], %[[Q]]
// CHECK: %[[S:.*]] = arith.maxui %[[S0]], %c1_i32
// CHECK: %[[BASE:.*]] = arith.select %[[INL]], %c0_i32, %[[LTILES]]
// CHECK: %[[FBASE:.*]] = arith.select %[[INL]], %c0_i32, %[[LPAIRS]]
// CHECK: %[[FROM:.*]] = arith.subi %[[T]], %[[BASE]]
// CHECK: %[[PER:.*]] = arith.muli %[[S]], %[[NUMM]]
// CHECK: %[[SEC:.*]] = arith.divui %[[FROM]], %[[PER]]
// CHECK: %[[R:.*]] = arith.remui %[[FROM]], %[[PER]]
// CHECK: %[[SKIP:.*]] = arith.muli %[[SEC]], %[[S]]
// CHECK: %[[FIRST:.*]] = arith.addi %[[FBASE]], %[[SKIP]]
// CHECK: %[[BACK:.*]] = arith.divui %[[R]], %[[S]]
// CHECK: %[[IN:.*]] = arith.remui %[[R]], %[[S]]
// CHECK: %[[PAIR:.*]] = arith.addi %[[FIRST]], %[[IN]]
// CHECK: %[[LAST:.*]] = arith.subi %[[NUMM]], %c1_i32
// CHECK: %[[MB:.*]] = arith.subi %[[LAST]], %[[BACK]]
// CHECK: %[[HEAD:.*]] = arith.remui %[[PAIR]], %[[HQ]]
// CHECK: %[[BATCH:.*]] = arith.divui %[[PAIR]], %[[HQ]]
// CHECK: %[[M0:.*]] = arith.muli %[[MB]], %c128_i32
// CHECK: return %[[M0]], %[[HEAD]], %[[BATCH]]
func.func @sections(%t: i32, %numM: i32, %hq: i32, %n: i32, %hb: i32) -> (i32, i32, i32) {
  %m0, %head, %batch = hopper.tile_coords %t in %numM, %hq block_m 128 longest_first sections %n of %hb
  return %m0, %head, %batch : i32, i32, i32
}

// Without longest_first (the backward's causal kv blocks, the first the
// longest): the same sections, m-block r / S.
// CHECK-LABEL: func.func @sections_first_first(
// CHECK: %[[FROM:.*]] = arith.subi %arg0,
// CHECK-NEXT: %[[PER:.*]] = arith.muli %[[S:.*]], %arg1 : i32
// CHECK-NEXT: arith.divui %[[FROM]], %[[PER]]
// CHECK-NEXT: %[[R:.*]] = arith.remui %[[FROM]], %[[PER]]
// CHECK: %[[BACK:.*]] = arith.divui %[[R]], %[[S]] : i32
// CHECK: %[[IN:.*]] = arith.remui %[[R]], %[[S]]
// CHECK: %[[PAIR:.*]] = arith.addi %{{.*}}, %[[IN]]
// CHECK-NOT: arith.subi
// CHECK: %[[HEAD:.*]] = arith.remui %[[PAIR]], %{{.*}}
// CHECK: %[[M0:.*]] = arith.muli %[[BACK]], %c128_i32
// CHECK: return %[[M0]], %[[HEAD]]
func.func @sections_first_first(%t: i32, %numM: i32, %hq: i32, %n: i32, %hb: i32) -> (i32, i32, i32) {
  %m0, %head, %batch = hopper.tile_coords %t in %numM, %hq block_m 128 sections %n of %hb
  return %m0, %head, %batch : i32, i32, i32
}

// CHECK-LABEL: func.func @claim(
// CHECK-SAME: %[[K:[^:]*]]: i32, %[[FIRST:[^:]*]]: i32, %[[CTR:[^:]*]]: !llvm.ptr<1>)
// CHECK: %[[N:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: %[[KN:.*]] = arith.muli %[[K]], %[[N]]
// CHECK: %[[ST:.*]] = arith.addi %[[FIRST]], %[[KN]]
// CHECK: %[[ISFIRST:.*]] = arith.cmpi eq, %[[K]], %c0_i32
// CHECK: %[[DYN:.*]] = scf.if %[[ISFIRST]] -> (i32) {
// CHECK-NEXT: scf.yield %[[FIRST]] : i32
// CHECK-NEXT: } else {
// CHECK: %[[GOT:.*]] = llvm.atomicrmw add %[[CTR]], %{{.*}} monotonic
// CHECK-NEXT: %[[N2:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[GOT]], %[[N2]]
// CHECK-NEXT: scf.yield %[[NEXT]] : i32
// CHECK: return %[[ST]], %[[DYN]]
func.func @claim(%k: i32, %first: i32, %ctr: !llvm.ptr<1>) -> (i32, i32) {
  %s = hopper.tile_claim %k first %first static
  %d = hopper.tile_claim %k first %first dynamic counter %ctr : !llvm.ptr<1>
  return %s, %d : i32, i32
}
