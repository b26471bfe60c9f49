// attn.kv_range expanded to index arithmetic (the shared schedule builder).
// RUN: fa3-opt %s --attn-lower-tiles-to-loops | FileCheck %s

// Window [100, 20], block 128 x 80, off = Skv - Sq:
//   lo = floor(max(0, row0 + off - 100) / 80)
//   hi = max(lo, ceil(min(Skv, last + off + 21) / 80))
//   interiorLo = max(lo, ceil((last + off - 100) / 80))
//   interiorHi = min(floor(Skv / 80), floor((row0 + off + 21) / 80))
// CHECK-LABEL: func @window
// CHECK-SAME: (%[[ROW0:.*]]: index, %[[SQ:.*]]: index, %[[SKV:.*]]: index)
// CHECK: %[[OFF:.*]] = arith.subi %[[SKV]], %[[SQ]]
// CHECK: %[[END:.*]] = arith.addi %[[ROW0]], %c128
// CHECK: %[[MIN:.*]] = arith.minsi %[[END]], %[[SQ]]
// CHECK: %[[LAST:.*]] = arith.subi %[[MIN]], %c1
// CHECK: %[[D0:.*]] = arith.addi %[[ROW0]], %[[OFF]]
// CHECK: %[[L0:.*]] = arith.subi %[[D0]], %c100
// CHECK: %[[COLLO:.*]] = arith.maxsi %c0{{.*}}, %[[L0]]
// CHECK: %[[DL:.*]] = arith.addi %[[LAST]], %[[OFF]]
// CHECK: %[[H0:.*]] = arith.addi %[[DL]], %c21
// CHECK: %[[COLHI:.*]] = arith.minsi %[[SKV]], %[[H0]]
// CHECK: %[[LO:.*]] = arith.floordivsi %[[COLLO]], %c80
// CHECK: %[[HC:.*]] = arith.ceildivsi %[[COLHI]], %c80
// CHECK: %[[HI:.*]] = arith.maxsi %[[LO]], %[[HC]]
// CHECK: %[[SKVB:.*]] = arith.floordivsi %[[SKV]], %c80
// CHECK: %[[D1:.*]] = arith.addi %[[LAST]], %[[OFF]]
// CHECK: %[[L1:.*]] = arith.subi %[[D1]], %c100
// CHECK: %[[IC:.*]] = arith.ceildivsi %[[L1]], %c80
// CHECK: %[[ILO:.*]] = arith.maxsi %[[LO]], %[[IC]]
// CHECK: %[[D2:.*]] = arith.addi %[[ROW0]], %[[OFF]]
// CHECK: %[[R2:.*]] = arith.addi %[[D2]], %c21
// CHECK: %[[IF:.*]] = arith.floordivsi %[[R2]], %c80
// CHECK: %[[IHI:.*]] = arith.minsi %[[SKVB]], %[[IF]]
// CHECK: return %[[LO]], %[[HI]], %[[ILO]], %[[IHI]]
func.func @window(%row0: index, %sq: index, %skv: index) -> (index, index, index, index) {
  %lo, %hi, %ilo, %ihi = attn.kv_range rows %row0 seq(%sq, %skv) {block_m = 128 : i64, block_n = 80 : i64, window = array<i64: 100, 20>}
  return %lo, %hi, %ilo, %ihi : index, index, index, index
}

// No window: lo = 0, hi = ceil(Skv / 128), interior blocks end at floor(Skv / 128).
// CHECK-LABEL: func @full
// CHECK-SAME: (%[[ROW0:.*]]: index, %[[SQ:.*]]: index, %[[SKV:.*]]: index)
// CHECK: %[[LO:.*]] = arith.floordivsi %c0{{.*}}, %c128
// CHECK: %[[HC:.*]] = arith.ceildivsi %[[SKV]], %c128
// CHECK: %[[HI:.*]] = arith.maxsi %[[LO]], %[[HC]]
// CHECK: %[[IHI:.*]] = arith.floordivsi %[[SKV]], %c128
// CHECK: return %[[LO]], %[[HI]], %[[LO]], %[[IHI]]
func.func @full(%row0: index, %sq: index, %skv: index) -> (index, index, index, index) {
  %lo, %hi, %ilo, %ihi = attn.kv_range rows %row0 seq(%sq, %skv) {block_m = 128 : i64, block_n = 128 : i64, window = array<i64: -1, -1>}
  return %lo, %hi, %ilo, %ihi : index, index, index, index
}
