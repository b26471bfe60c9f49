"""bench/compare_fwd.py's timing order (CPU only: the timing itself needs
the GPU machine)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_compare_rounds_rotate_the_order():
    """compare_fwd.py: each round times the runs in another order, each run
    in each place once over as many rounds as runs."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "bench"))
    import compare_fwd
    names = ["cudnn", "base", "new"]
    orders = [compare_fwd.round_order(names, r) for r in range(4)]
    assert orders[0] == names
    assert orders[1] == ["base", "new", "cudnn"]
    assert orders[3] == orders[0]
    for place in range(3):
        assert sorted(o[place] for o in orders[:3]) == sorted(names)
    assert compare_fwd.round_order([], 2) == []
