"""Lazy rescaling of the online softmax, the Hopper kernel's rule, run on the
CPU (attn-cpu-tiled-pipeline{rescale-threshold=tau}: the CPU expansion of
attn.tile_update builds the same step as the kernel) against the float64
NumPy reference, on fresh random inputs built so that the rule matters.

Per row and kv block, in log2 units: the lazy rule raises the row's reference
max m only when the block's max exceeds m + tau, and only then rescales l and
O by alpha = exp2(m_old - m_new); else p = exp2(s - m) <= 2^tau. O / l does
not depend on which m was used, so whatever tau (0: the exact rule) the
outputs must meet test_cpu_numerics' f32 tolerances: o 1e-5 relative
(Frobenius), lse 1e-4 absolute.

What makes the check bite is the inputs. Scores grow along the kv axis by
about GROWTH log2 units a block, less than tau: the exact rule raises m on
almost every block, the lazy one skips most raises. The skips are counted on
the same inputs by replaying the rule over the tiled schedule in float64
(lazy_skips), and the test requires them, so it fails if the inputs stop
exercising the lazy path. Each block outweighs the one before by 2^GROWTH:
an alpha left out when m rises (O and l kept on the old scale), or one taken
against a max that m did not take, misweights whole blocks, far beyond the
tolerance (checked by breaking the builder on purpose). Alpha applied where
m was not raised is exp2(m - m) = 1 and changes nothing: the kernel's select
there only lets it skip the multiply. Rows whose first visited blocks show
them no key (sliding window) enter later blocks with m = -inf, and rows that
see no key at all (causal, Sq > Skv) must give o = 0 and lse = -inf.
"""
import re

import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context
from fa3.spec import flash_attention_func
from test_cpu_numerics import check_outputs, compile_program, output_buffer

BM, BN = 32, 16
GROWTH = 3.0  # log2 units a kv block, below the thresholds tested (8, 15)
D = 16

# (name, Sq, Skv, attrs)
CASES = [
    ("full", 64, 200, {}),
    ("causal", 200, 200, {"causal": True}),
    ("causal_sq_gt_skv", 230, 200, {"causal": True}),
    ("window_causal", 200, 200, {"window": (40, 0)}),
    ("window_softcap", 150, 200, {"window": (40, 10), "softcap": 60.0}),
]


def growing_inputs(rng, hq, hkv, sq, skv, d, bn, dtype):
    """q, k, v (as passed, and in float64) whose scores rise by about GROWTH
    log2 units per bn keys: q[..., 0] ~ 1 meets a ramp in k[..., 0]; the
    other dims add noise of about 1.4 log2 units."""
    scale = 1.0 / np.sqrt(d)
    slope = GROWTH / (bn * scale * np.log2(np.e))
    q = rng.standard_normal((1, hq, sq, d))
    k = rng.standard_normal((1, hkv, skv, d))
    v = rng.standard_normal((1, hkv, skv, d))
    q[..., 0] = 1.0 + 0.1 * rng.standard_normal((1, hq, sq))
    k[..., 0] = slope * np.arange(skv)
    t = {"f32": np.float32, "f16": np.float16}[dtype]
    xs = [x.astype(t) for x in (q, k, v)]
    return xs, [x.astype(np.float64) for x in xs]


def scores_log2(q, k, d, softcap):
    """[Hq, Sq, Skv] float64 scores in log2 units, as the kernel weighs them."""
    s = np.einsum("hid,hjd->hij", q[0],
                  np.repeat(k[0], q.shape[1] // k.shape[1], axis=0))
    s /= np.sqrt(d)
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    return s * np.log2(np.e)


def lazy_skips(s2, vis, tau, bm, bn):
    """Replays the lazy rule over the tiled schedule (the kv blocks where some
    row of the m-block sees a key). Returns (rises, skips, late): steps where
    a row's block max exceeded its finite m, those of them the lazy rule left
    alone (the exact rule rescales there), and rows whose first visited block
    showed them no key though a later one did."""
    sq, skv = vis.shape
    rises = skips = late = 0
    for r0 in range(0, sq, bm):
        rv = vis[r0:r0 + bm]
        blocks = [c0 for c0 in range(0, skv, bn) if rv[:, c0:c0 + bn].any()]
        if not blocks:
            continue
        late += np.count_nonzero(~rv[:, blocks[0]:blocks[0] + bn].any(axis=1)
                                 & rv.any(axis=1))
        for h in range(s2.shape[0]):
            m = np.full(rv.shape[0], -np.inf)
            for c0 in blocks:
                blk = np.where(rv[:, c0:c0 + bn], s2[h, r0:r0 + bm, c0:c0 + bn],
                               -np.inf)
                mx = blk.max(axis=1)
                rose = np.isfinite(m) & (mx > m)
                raised = mx > m + tau
                rises += np.count_nonzero(rose)
                skips += np.count_nonzero(rose & ~raised)
                m = np.where(raised, mx, m)
    return rises, skips, late


def run_and_check(prog, inputs, sq, attrs, dtype):
    (q, k, v), (q64, k64, v64) = inputs
    o = output_buffer((1, q.shape[1], sq, v.shape[3]), dtype)
    lse = np.full((1, q.shape[1], sq), np.nan, dtype=np.float32)
    prog.call("attn", q, k, v, o, lse)
    ref_o, ref_lse = reference.attention(q64, k64, v64, **attrs)
    return check_outputs(o, lse, ref_o, ref_lse, dtype)


@pytest.fixture
def rng():
    return np.random.default_rng()  # fresh inputs on every run


@pytest.mark.parametrize("tau", [0.0, 8.0, 15.0])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_lazy_rescale_matches_reference(case, tau, rng):
    _, sq, skv, attrs = case
    hq, hkv = 2, 1
    pipeline = ("attn-cpu-tiled-pipeline{block-m=%d block-n=%d "
                "rescale-threshold=%g}" % (BM, BN, tau))
    prog, _ctx = compile_program(pipeline, b=1, hq=hq, hkv=hkv, sq=sq, skv=skv,
                                 d=D, dv=D, dtype="f32", lse=True, **attrs)
    inputs = growing_inputs(rng, hq, hkv, sq, skv, D, BN, "f32")

    # By construction, the schedule exercises what the test is about.
    vis = reference.visible_mask(sq, skv, attrs.get("causal", False),
                                 attrs.get("window", (-1, -1)))
    q64, k64, _ = inputs[1]
    s2 = scores_log2(q64, k64, D, attrs.get("softcap", 0.0))
    rises, skips, late = lazy_skips(s2, vis, tau, BM, BN)
    assert rises > 0
    if tau == 0:
        assert skips == 0  # the exact rule
    else:
        assert skips >= rises // 2, "only %d of %d raises skipped" % (skips, rises)
    if "window" in attrs:
        assert late > 0, "no row starts with a fully masked block"
    if sq > skv and attrs.get("causal"):
        assert not vis[:sq - skv].any()

    got = run_and_check(prog, inputs, sq, attrs, "f32")
    assert np.all(got[:, :, ~vis.any(axis=1)] == 0.0)


def test_hopper_configuration_rule_on_cpu(rng):
    """The rule of a kernel configuration (attn-hopper-config with lazy
    rescaling, threshold 8 by default) run by the CPU tiled pipeline: attn-tile
    takes the tiles and the threshold from the recorded configuration. f16
    in and out: o within 2e-3 (one f16 rounding of each output)."""
    sq, skv, d, attrs = 300, 1000, 128, {"causal": True}
    ctx = Context()
    mod = ctx.parse(flash_attention_func("attn", b=1, hq=2, hkv=1, sq=sq,
                                         skv=skv, d=d, dtype="f16", lse=True,
                                         **attrs))
    mod.run_pipeline("builtin.module(attn-hopper-config{lazy-rescale=on})")
    config = re.search(r"block_m = (\d+), block_n = (\d+), .*"
                       r"lazy_rescale = true, rescale_threshold = ([^,]+),",
                       str(mod))
    assert config, str(mod)
    bm, bn, tau = int(config[1]), int(config[2]), float(config[3])
    prog = CpuProgram(mod.run_pipeline("attn-cpu-tiled-pipeline"))
    inputs = growing_inputs(rng, 2, 1, sq, skv, d, bn, "f16")
    q64, k64, _ = inputs[1]
    vis = reference.visible_mask(sq, skv, True)
    rises, skips, _ = lazy_skips(scores_log2(q64, k64, d, 0.0), vis, tau, bm, bn)
    assert skips >= rises // 2, "only %d of %d raises skipped" % (skips, rises)
    run_and_check(prog, inputs, sq, attrs, "f16")
