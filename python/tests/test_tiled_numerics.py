"""attn-tile: the tiled FlashAttention program run on the CPU, against the
NumPy float64 reference and against the reference lowering, over tile sizes
that do and do not divide the lengths. Tolerances as in test_cpu_numerics."""
import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context
from fa3.spec import flash_attention_func
from test_cpu_numerics import SHAPES, output_buffer, random_inputs, run_case

TILES = [(16, 16), (32, 24), (64, 64), (0, 0)]  # (0, 0): per-head-dim default


def tiled(bm, bn, count=False):
    return "attn-cpu-tiled-pipeline{block-m=%d block-n=%d%s}" % (
        bm, bn, " count-blocks=true" if count else "")


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.mark.parametrize("tile", TILES, ids=["%dx%d" % t for t in TILES])
@pytest.mark.parametrize("case", SHAPES, ids=[c[0] for c in SHAPES])
def test_tiled_f32(case, tile, rng):
    run_case(tiled(*tile), rng, *case[1:], "f32")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", [SHAPES[2], SHAPES[4], SHAPES[7], SHAPES[9]],
                         ids=["causal", "window", "softcap", "mqa"])
def test_tiled_half(case, dtype, rng):
    run_case(tiled(32, 24), rng, *case[1:], dtype)


def test_tiled_matches_reference_lowering(rng):
    """Same inputs through both lowerings: they agree to f32 rounding."""
    spec = dict(b=1, hq=4, hkv=2, sq=150, skv=130, d=32, dv=32, dtype="f32",
                causal=True, window=(40, 0), softcap=3.0)
    (q, k, v), _ = random_inputs(rng, 1, 4, 2, 150, 130, 32, 32, "f32")
    outs = []
    for pipeline in ("attn-cpu-reference-pipeline", tiled(64, 32)):
        ctx = Context()
        mod = ctx.parse(flash_attention_func("attn", **spec))
        prog = CpuProgram(mod.run_pipeline(pipeline))
        o = output_buffer((1, 4, 150, 32), "f32")
        prog.call("attn", q, k, v, o)
        outs.append(o.astype(np.float64))
    err = np.linalg.norm(outs[0] - outs[1]) / np.linalg.norm(outs[0])
    assert err < 1e-5


def expected_tile_counts(sq, skv, bm, bn, causal=False, window=(-1, -1)):
    """Brute force from the mask: a tile is visited iff some (row < Sq, key)
    pair in it is visible; it is masked iff visited and not every pair of
    rows < Sq x columns is visible and inside Skv."""
    vis = reference.visible_mask(sq, skv, causal, window)
    visited = masked = 0
    for r0 in range(0, sq, bm):
        for c0 in range(0, -(-skv // bn) * bn, bn):
            blk = vis[r0:r0 + bm, c0:c0 + bn]
            if blk.size and blk.any():
                visited += 1
                if not blk.all() or c0 + bn > skv:
                    masked += 1
    return visited, masked


def count_tiles(sq, skv, bm, bn, **attrs):
    ctx = Context()
    mod = ctx.parse(flash_attention_func("attn", b=1, hq=1, hkv=1, sq=sq,
                                         skv=skv, d=8, **attrs))
    prog = CpuProgram(mod.run_pipeline(tiled(bm, bn, count=True)))
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, 1, 1, 1, sq, skv, 8, 8, "f32")
    o = output_buffer((1, 1, sq, 8), "f32")
    prog.call("attn", q, k, v, o)
    counts = np.zeros(2, dtype=np.int64)
    prog.call("attn_tile_counters", counts)
    return tuple(int(c) for c in counts)


def test_causal_1024_visits_36_of_64_tiles_and_masks_8():
    assert count_tiles(1024, 1024, 128, 128, causal=True) == (36, 8)


@pytest.mark.parametrize("sq,skv,bm,bn,attrs", [
    (1024, 1024, 128, 128, {}),
    (1000, 1000, 128, 128, {"causal": True}),
    (300, 700, 64, 48, {"causal": True}),
    (700, 300, 64, 48, {"causal": True}),
    (1024, 1024, 128, 128, {"window": (256, 0)}),
    (500, 600, 64, 80, {"window": (100, 37)}),
    (500, 600, 64, 80, {"window": (-1, 20)}),
])
def test_schedule_visits_exactly_the_needed_tiles(sq, skv, bm, bn, attrs):
    assert count_tiles(sq, skv, bm, bn, **attrs) == expected_tile_counts(
        sq, skv, bm, bn, attrs.get("causal", False), attrs.get("window", (-1, -1)))


def test_many_grid_cells_do_not_exhaust_the_stack(rng):
    # 8 x 8 x 32 cells, each with its own state buffers: a per-cell stack
    # allocation would overflow the stack here.
    run_case(tiled(16, 16), rng, 8, 8, 8, 512, 64, 64, 128, {}, "f32")


# The widest windows the verifier takes (2^31 - 1 a side): both CPU lowerings
# used to mask every key for window(0, 2^63 - 1) (index overflow), and huge
# left bounds with causal broke rows of the tiled program.
WIDE = (2**31 - 1)


@pytest.mark.parametrize("window", [(0, WIDE), (WIDE, 0), (WIDE, WIDE), (WIDE, 3)],
                         ids=["right", "left_causal", "both", "left_right3"])
@pytest.mark.parametrize("pipeline", ["attn-cpu-reference-pipeline", tiled(32, 24)],
                         ids=["reference", "tiled"])
def test_widest_windows(window, pipeline, rng):
    run_case(pipeline, rng, 1, 2, 1, 90, 70, 16, 16, {"window": window}, "f32")
