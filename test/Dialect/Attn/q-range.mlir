// attn.q_range (the backward's schedule: the m-blocks that see a kv-block)
// prints and parses back, is refused with bad tiles or window, and expands
// to index arithmetic (buildQRange); python/tests/test_q_range.py checks its
// values against brute force.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=RT
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --attn-lower-tiles-to-loops | FileCheck %s

// RT-LABEL: func @causal
// RT: attn.q_range cols %{{.*}} seq(%{{.*}}, %{{.*}}) {block_m = 128 : i64, block_n = 80 : i64, window = array<i64: -1, 0>}
// Causal (right 0): rows from col0 - off; no left bound: rows up to Sq.
// CHECK-LABEL: func @causal
// CHECK-SAME: (%[[COL0:.*]]: index, %[[SQ:.*]]: index, %[[SKV:.*]]: index)
// CHECK: %[[OFF:.*]] = arith.subi %[[SKV]], %[[SQ]]
// CHECK: %[[END:.*]] = arith.addi %[[COL0]], %c80
// CHECK: %[[CEND:.*]] = arith.minsi %[[END]], %[[SKV]]
// CHECK: %[[D:.*]] = arith.subi %[[COL0]], %[[OFF]]
// CHECK: %[[R:.*]] = arith.subi %[[D]], %c0
// CHECK: %[[ROWLO:.*]] = arith.maxsi %c0{{.*}}, %[[R]]
// CHECK: %[[NOKEY:.*]] = arith.cmpi sle, %[[CEND]], %[[COL0]]
// CHECK: %[[NOROW:.*]] = arith.cmpi sle, %[[SQ]], %[[ROWLO]]
// CHECK: %[[NONE:.*]] = arith.ori %[[NOKEY]], %[[NOROW]]
// CHECK: %[[LO:.*]] = arith.floordivsi %[[ROWLO]], %c128
// CHECK: %[[HC:.*]] = arith.ceildivsi %[[SQ]], %c128
// CHECK: %[[HB:.*]] = arith.maxsi %[[LO]], %[[HC]]
// CHECK: %[[HI:.*]] = arith.select %[[NONE]], %[[LO]], %[[HB]]
// CHECK: return %[[LO]], %[[HI]]
func.func @causal(%col0: index, %sq: index, %skv: index) -> (index, index, index, index) {
  %lo, %hi, %ilo, %ihi = attn.q_range cols %col0 seq(%sq, %skv) {block_m = 128 : i64, block_n = 80 : i64, window = array<i64: -1, 0>}
  return %lo, %hi, %ilo, %ihi : index, index, index, index
}

// -----

func.func @bad_blocks(%col0: index, %sq: index, %skv: index) -> index {
  // expected-error @+1 {{block sizes must be 1 to}}
  %lo, %hi, %ilo, %ihi = attn.q_range cols %col0 seq(%sq, %skv) {block_m = 0 : i64, block_n = 80 : i64, window = array<i64: -1, -1>}
  return %lo : index
}

// -----

func.func @bad_window(%col0: index, %sq: index, %skv: index) -> index {
  // expected-error @+1 {{window entries must be -1 (unbounded) or 0 to}}
  %lo, %hi, %ilo, %ihi = attn.q_range cols %col0 seq(%sq, %skv) {block_m = 64 : i64, block_n = 64 : i64, window = array<i64: -3, 0>}
  return %lo : index
}
