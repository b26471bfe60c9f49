"""attn.q_range, the backward's schedule (the m-blocks that see a kv-block and
the unmasked interior among them), JIT-compiled on the CPU and compared with
brute force over the visibility mask (fa3.reference.visible_mask) for every
kv-block of many shapes: tile sizes, windows (none, causal, two-sided, one
side, zero-width) and Sq < Skv, Sq > Skv, lengths 1 and non-multiples of the
tiles. Exact: [lo, hi) must be the m-blocks with a visible (row < Sq, key <
Skv) pair, [interiorLo, interiorHi) those whose rows all lie below Sq and see
every key of a kv-block that lies wholly below Skv (an empty range either
way when there are none)."""
import string

import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context

SHAPES = [(1, 1), (5, 300), (300, 5), (257, 513), (513, 257), (640, 640), (1000, 1000)]
WINDOWS = [(-1, -1), (-1, 0), (100, 20), (0, 0), (30, -1), (-1, 5)]


def program(bm, bn, window):
    text = string.Template("""
func.func @table(%out: memref<?x4xi64>, %dims: memref<2xi64>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %bn = arith.constant $bn : index
  %n = memref.dim %out, %c0 : memref<?x4xi64>
  %sq64 = memref.load %dims[%c0] : memref<2xi64>
  %skv64 = memref.load %dims[%c1] : memref<2xi64>
  %sq = arith.index_cast %sq64 : i64 to index
  %skv = arith.index_cast %skv64 : i64 to index
  scf.for %b = %c0 to %n step %c1 {
    %col0 = arith.muli %b, %bn : index
    %lo, %hi, %ilo, %ihi = attn.q_range cols %col0 seq(%sq, %skv) {block_m = $bm : i64, block_n = $bn : i64, window = array<i64: $left, $right>}
    %v0 = arith.index_cast %lo : index to i64
    %v1 = arith.index_cast %hi : index to i64
    %v2 = arith.index_cast %ilo : index to i64
    %v3 = arith.index_cast %ihi : index to i64
    memref.store %v0, %out[%b, %c0] : memref<?x4xi64>
    memref.store %v1, %out[%b, %c1] : memref<?x4xi64>
    memref.store %v2, %out[%b, %c2] : memref<?x4xi64>
    memref.store %v3, %out[%b, %c3] : memref<?x4xi64>
  }
  return
}
""").substitute(bm=bm, bn=bn, left=window[0], right=window[1])
    ctx = Context()
    mod = ctx.parse(text)
    mod.run_pipeline("attn-cpu-tiled-pipeline")
    return CpuProgram(mod), ctx


def expected(sq, skv, bm, bn, window):
    mask = reference.visible_mask(sq, skv, False, window)
    nm, out = -(-sq // bm), []
    for n in range(-(-skv // bn)):
        c0, c1 = n * bn, min((n + 1) * bn, skv)
        seen = [m for m in range(nm) if mask[m * bm:(m + 1) * bm, c0:c1].any()]
        inner = [m for m in range(nm) if (m + 1) * bm <= sq and (n + 1) * bn <= skv
                 and mask[m * bm:(m + 1) * bm, c0:c0 + bn].all()]
        out.append((seen, inner))
    return out


def as_blocks(lo, hi):
    return list(range(lo, hi)) if hi > lo else []


@pytest.mark.parametrize("window", WINDOWS, ids=[f"w{l}_{r}" for l, r in WINDOWS])
@pytest.mark.parametrize("bm,bn", [(128, 80), (64, 128)])
def test_q_range_is_exact(bm, bn, window):
    prog, _ctx = program(bm, bn, window)
    for sq, skv in SHAPES:
        nb = -(-skv // bn)
        out = np.full((nb, 4), -99, dtype=np.int64)
        prog.call("table", out, np.array([sq, skv], dtype=np.int64))
        for n, (seen, inner) in enumerate(expected(sq, skv, bm, bn, window)):
            lo, hi, ilo, ihi = (int(x) for x in out[n])
            where = f"Sq={sq} Skv={skv} kv-block {n}"
            assert as_blocks(lo, hi) == seen, f"{where}: [lo, hi) = [{lo}, {hi}), want {seen}"
            assert as_blocks(ilo, ihi) == inner, \
                f"{where}: interior [{ilo}, {ihi}), want {inner}"
