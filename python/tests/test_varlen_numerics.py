"""attn.flash_attention_varlen lowered by the CPU reference pipeline, and in its
tiled form (attn-tile: a grid over (sequence, q head) whose cells run the
forward's tile ops on per-sequence views), against the float64 NumPy forward
applied to each sequence of the packed batch.

Fresh random inputs and, per case, the sequence lengths given (0 and 1
included); outputs poisoned with NaN first. Query tokens past the last
sequence must stay untouched. Tolerances as test_cpu_numerics (relative
Frobenius error of o per sequence; absolute error of lse): f32 1e-5 / 1e-4,
bf16 o 1e-2.
"""
import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context
from fa3.spec import flash_attention_func, flash_attention_varlen_func
from test_cpu_numerics import TOL_LSE, TOL_O, as_f64, output_buffer, random_inputs

# (name, q lengths, k lengths, seqused_k or None, Hq, Hkv, D, Dv, attrs)
CASES = [
    ("ragged", [0, 1, 17, 100, 45], [3, 1, 17, 120, 0], None, 4, 2, 16, 16, {}),
    ("causal", [5, 60, 1, 33], [5, 90, 40, 20], None, 2, 2, 16, 24, {"causal": True}),
    ("seqused_k", [7, 20, 1], [30, 30, 30], [0, 25, 30], 4, 1, 8, 8, {"causal": True}),
    # entries outside 0 .. the sequence's keys count as clamped into it
    ("seqused_k_out_of_range", [7, 20, 5], [30, 12, 30], [-4, 45, 30], 2, 2, 8, 8, {}),
    ("window_softcap", [40, 13], [70, 13], None, 2, 2, 16, 16,
     {"window": (8, 3), "softcap": 5.0, "scale": 0.4}),
    ("one_sequence", [77], [77], None, 2, 2, 32, 32, {}),
]


REFERENCE = "attn-cpu-reference-pipeline"


def tiled(bm, bn):
    return "attn-cpu-tiled-pipeline{block-m=%d block-n=%d}" % (bm, bn)


def run_case(rng, lq, lk, used, hq, hkv, d, dv, attrs, dtype, spare=3, pipeline=REFERENCE):
    """Packs the sequences (q tokens plus `spare` unowned ones), runs the
    compiled op and checks each sequence; returns the largest o error."""
    nseq = len(lq)
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    tq, tk = int(cu_q[-1]) + spare, max(int(cu_k[-1]), 1)
    ctx = Context()
    mod = ctx.parse(flash_attention_varlen_func(
        "attn", nseq, tq, tk, hq, hkv, d, dv, dtype=dtype, lse=True,
        seqused=used is not None, **attrs))
    mod.run_pipeline(pipeline)
    prog = CpuProgram(mod)
    # [1, H, T, D] draws, packed as [T, H, D]
    (q4, k4, v4), (q64, k64, v64) = random_inputs(rng, 1, hq, hkv, tq, tk, d, dv, dtype)
    pack = lambda x: np.ascontiguousarray(x[0].transpose(1, 0, 2))
    o = output_buffer((tq, hq, dv), dtype)
    lse = np.full((hq, tq), np.nan, dtype=np.float32)
    lens = [cu_q, cu_k] + ([np.asarray(used, dtype=np.int32)] if used is not None else [])
    prog.call("attn", pack(q4), pack(k4), pack(v4), *lens, o, lse)
    got = as_f64(o, dtype)
    worst = 0.0
    for b in range(nseq):
        q0, q1, k0 = cu_q[b], cu_q[b + 1], cu_k[b]
        skv = cu_k[b + 1] - k0
        if used is not None:  # seqused_k, clamped to the sequence's keys
            skv = min(max(int(used[b]), 0), skv)
        if q1 == q0:
            continue
        ref_o, ref_lse = reference.attention(q64[:, :, q0:q1], k64[:, :, k0:k0 + skv],
                                             v64[:, :, k0:k0 + skv], **attrs)
        g = got[q0:q1].transpose(1, 0, 2)[None]
        assert not np.isnan(g).any(), f"sequence {b}: o left unwritten or NaN"
        denom = max(np.linalg.norm(ref_o), 1e-30)
        err = np.linalg.norm(g - ref_o) / denom if np.linalg.norm(ref_o) > 0 \
            else np.abs(g).max()
        assert err <= TOL_O[dtype], f"sequence {b}: relative error of o {err:.3g}"
        worst = max(worst, err)
        lg, lr = lse[:, q0:q1], ref_lse[0]
        finite = np.isfinite(lr)
        assert np.array_equal(np.isfinite(lg), finite), f"sequence {b}: lse -inf rows differ"
        if finite.any():
            assert np.abs(lg[finite] - lr[finite]).max() <= TOL_LSE
    # tokens past the last sequence: untouched
    assert np.isnan(as_f64(o, dtype)[cu_q[-1]:]).all()
    assert np.isnan(lse[:, cu_q[-1]:]).all()
    return worst


@pytest.mark.parametrize("name,lq,lk,used,hq,hkv,d,dv,attrs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_varlen_against_each_sequence(name, lq, lk, used, hq, hkv, d, dv, attrs, dtype):
    run_case(np.random.default_rng(), lq, lk, used, hq, hkv, d, dv, attrs, dtype)


@pytest.mark.parametrize("bm,bn", [(16, 8), (32, 48)], ids=["16x8", "32x48"])
@pytest.mark.parametrize("name,lq,lk,used,hq,hkv,d,dv,attrs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_tiled_varlen_against_each_sequence(name, lq, lk, used, hq, hkv, d, dv, attrs, dtype,
                                            bm, bn):
    """The tiled form: each sequence's m-blocks and kv-blocks from its own
    lengths (bottom-right aligned per sequence), empty sequences and empty
    key sets included, unowned tokens untouched."""
    run_case(np.random.default_rng(), lq, lk, used, hq, hkv, d, dv, attrs, dtype,
             pipeline=tiled(bm, bn))


def test_tiled_varlen_equals_the_tiled_fixed_length_op_per_sequence():
    """Each sequence of a tiled packed batch gives, bit for bit, what the
    tiled fixed-length op gives on that sequence alone: the cells are the
    forward's, on views of the sequence's rows and keys."""
    rng = np.random.default_rng()
    hq, hkv, d = 4, 2, 16
    attrs = {"causal": True, "softcap": 3.0}
    lq, lk = [37, 0, 64], [50, 9, 20]
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    tq, tk = int(cu_q[-1]), int(cu_k[-1])
    (q4, k4, v4), _ = random_inputs(rng, 1, hq, hkv, tq, tk, d, d, "f32")
    pack = lambda x: np.ascontiguousarray(x[0].transpose(1, 0, 2))
    ctx = Context()
    packed = ctx.parse(flash_attention_varlen_func("packed", 3, tq, tk, hq, hkv, d, lse=True,
                                                   **attrs))
    packed.run_pipeline(tiled(16, 8))
    o = np.zeros((tq, hq, d), np.float32)
    lse = np.zeros((hq, tq), np.float32)
    CpuProgram(packed).call("packed", pack(q4), pack(k4), pack(v4), cu_q, cu_k, o, lse)
    for b in range(3):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0:
            continue
        one = ctx.parse(flash_attention_func("one", 1, hq, hkv, q1 - q0, k1 - k0, d, lse=True,
                                             **attrs))
        one.run_pipeline(tiled(16, 8))
        o1 = np.zeros((1, hq, q1 - q0, d), np.float32)
        lse1 = np.zeros((1, hq, q1 - q0), np.float32)
        CpuProgram(one).call("one", np.ascontiguousarray(q4[:, :, q0:q1]),
                             np.ascontiguousarray(k4[:, :, k0:k1]),
                             np.ascontiguousarray(v4[:, :, k0:k1]), o1, lse1)
        assert np.array_equal(o[q0:q1].transpose(1, 0, 2)[None], o1), f"sequence {b}: o"
        assert np.array_equal(lse[:, q0:q1][None], lse1), f"sequence {b}: lse"


def test_varlen_equals_the_fixed_length_op_on_one_sequence():
    """One sequence covering the whole packed tensor: the same o and lse,
    bit for bit, as attn.flash_attention on the [1, H, S, D] tensors (both
    lowerings build the same reference rows)."""
    rng = np.random.default_rng()
    hq, hkv, s, d = 4, 2, 50, 16
    attrs = {"causal": True, "softcap": 3.0}
    (q, k, v), _ = random_inputs(rng, 1, hq, hkv, s, s, d, d, "f32")
    ctx = Context()
    fixed = ctx.parse(flash_attention_func("fixed", 1, hq, hkv, s, s, d, lse=True, **attrs))
    fixed.run_pipeline("attn-cpu-reference-pipeline")
    o_fixed = np.zeros((1, hq, s, d), np.float32)
    lse_fixed = np.zeros((1, hq, s), np.float32)
    CpuProgram(fixed).call("fixed", q, k, v, o_fixed, lse_fixed)
    packed = ctx.parse(flash_attention_varlen_func("packed", 1, s, s, hq, hkv, d, lse=True,
                                                   **attrs))
    packed.run_pipeline("attn-cpu-reference-pipeline")
    pack = lambda x: np.ascontiguousarray(x[0].transpose(1, 0, 2))
    cu = np.array([0, s], np.int32)
    o = np.zeros((s, hq, d), np.float32)
    lse = np.zeros((hq, s), np.float32)
    CpuProgram(packed).call("packed", pack(q), pack(k), pack(v), cu, cu, o, lse)
    assert np.array_equal(o.transpose(1, 0, 2)[None], o_fixed)
    assert np.array_equal(lse[None], lse_fixed)
