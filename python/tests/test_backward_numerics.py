"""attn.flash_attention_grad lowered by the CPU reference pipeline, and in
its tiled form (attn-tile: FlashAttention's backward schedule, per kv-block
the q-blocks of attn.q_range, expanded for the CPU), against the float64
NumPy gradients (fa3.reference.attention_grad), and that reference against
central finite differences of the forward.

Fresh random inputs each run. The compiled backward takes q, k, v, dO, the
forward's o (rounded to the input dtype) and lse (f32) as a training step
would; the reference runs on exactly those values, so what is left is f32
arithmetic and the rounding of the gradients. The error of each of dq, dk,
dv is measured in the Frobenius norm relative to the norm of the same sums
taken over the absolute values of their terms (reference.attention_grad's
`magnitude`): where the terms cancel (a row of dS sums to zero; with one key,
dq and dk are exactly 0) rounding errors scale with the terms, not with the
result. Tolerances:
  f32 gradients:  1e-5 (f32 sums of up to ~400 products)
  f16 gradients:  2e-3 (one f16 rounding, eps 2^-11, of each element)
  bf16 gradients: 1e-2 (one bf16 rounding, eps 2^-8)
"""
import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context, Fa3Error
from fa3.spec import flash_attention_grad_func
from test_cpu_numerics import SHAPES, as_f64, output_buffer, random_inputs, rounded

TOL = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}


REFERENCE = "attn-cpu-reference-pipeline"


def tiled(bm, bn):
    return "attn-cpu-tiled-pipeline{block-m=%d block-n=%d}" % (bm, bn)


def compile_grad(pipeline, b, hq, hkv, sq, skv, d, dv, attrs, dtype, grad_dtype):
    ctx = Context()
    mod = ctx.parse(flash_attention_grad_func("attn_grad", b, hq, hkv, sq, skv, d, dv,
                                              dtype=dtype, grad_dtype=grad_dtype, **attrs))
    mod.run_pipeline(pipeline)
    return CpuProgram(mod), ctx


def run_grad(rng, b, hq, hkv, sq, skv, d, dv, attrs, dtype, grad_dtype, dead_rows=(),
             pipelines=(REFERENCE,)):
    """`dead_rows`: (b, h, i) whose lse is set to -inf (a row that saw no
    key, as the forward reports it): they must add nothing. Each pipeline
    runs on the same inputs; returns the errors of the first and every
    pipeline's gradients."""
    progs = [compile_grad(p, b, hq, hkv, sq, skv, d, dv, attrs, dtype, grad_dtype)
             for p in pipelines]
    (q, k, v), (q64, k64, v64) = random_inputs(rng, b, hq, hkv, sq, skv, d, dv, dtype)
    do, do64 = rounded(rng.standard_normal((b, hq, sq, dv)), dtype)
    o64, lse64 = reference.attention(q64, k64, v64, **attrs)
    o, o_in = rounded(o64, dtype)
    lse = lse64.astype(np.float32)
    for r in dead_rows:
        lse[r] = -np.inf
    want = reference.attention_grad(q64, k64, v64, do64, o=o_in, lse=lse, **attrs)
    mags = reference.attention_grad(q64, k64, v64, do64, o=o_in, lse=lse,
                                     magnitude=True, **attrs)
    results = []
    for pipeline, (prog, _ctx) in zip(pipelines, progs):
        grads = [output_buffer((b, hq, sq, d), grad_dtype),
                 output_buffer((b, hkv, skv, d), grad_dtype),
                 output_buffer((b, hkv, skv, dv), grad_dtype)]
        prog.call("attn_grad", q, k, v, o, do, lse, *grads)
        errs = []
        for name, got, ref, mag in zip(("dq", "dk", "dv"), grads, want, mags):
            g = as_f64(got, grad_dtype)
            assert not np.isnan(g).any(), f"{pipeline} {name}: elements left unwritten or NaN"
            err = np.linalg.norm(g - ref) / max(np.linalg.norm(mag), 1e-30)
            assert err <= TOL[grad_dtype], \
                f"{pipeline} {name}: relative error {err:.3g} > {TOL[grad_dtype]}"
            errs.append(err)
        results.append((grads, errs))
    if len(results) == 1:
        return results[0][1]
    return results


@pytest.mark.parametrize("name,b,hq,hkv,sq,skv,d,dv,attrs", SHAPES, ids=[s[0] for s in SHAPES])
def test_grad_f32(name, b, hq, hkv, sq, skv, d, dv, attrs):
    run_grad(np.random.default_rng(), b, hq, hkv, sq, skv, d, dv, attrs, "f32", "f32")


@pytest.mark.parametrize("dtype,grad_dtype", [("bf16", "bf16"), ("f16", "f16"),
                                              ("bf16", "f32")])
@pytest.mark.parametrize("attrs", [{}, {"causal": True}, {"softcap": 5.0, "window": (20, 3)}],
                         ids=["full", "causal", "softcap_window"])
def test_grad_low_precision(dtype, grad_dtype, attrs):
    # GQA 4/2, Sq != Skv, D != Dv
    run_grad(np.random.default_rng(), 1, 4, 2, 45, 70, 32, 16, attrs, dtype, grad_dtype)


# Tiles that divide nothing (rows and keys hang over Sq and Skv, the
# boundary blocks of every mask), square ones, and a single tile per side.
TILES = [(16, 8), (32, 48), (128, 128)]


@pytest.mark.parametrize("bm,bn", TILES, ids=[f"{m}x{n}" for m, n in TILES])
@pytest.mark.parametrize("name,b,hq,hkv,sq,skv,d,dv,attrs", SHAPES, ids=[s[0] for s in SHAPES])
def test_tiled_grad_f32(name, b, hq, hkv, sq, skv, d, dv, attrs, bm, bn):
    """The tiled form within the f32 tolerance of the float64 gradients and,
    since it adds the oracle's per-pair terms (buildGradPair) in the
    oracle's order (keys ascending into dq; q heads, then rows ascending
    into dk and dv) and skips only pairs whose terms are zero, equal to the
    oracle's gradients bit for bit."""
    (ref, _), (tile, _) = run_grad(np.random.default_rng(), b, hq, hkv, sq, skv, d, dv,
                                   attrs, "f32", "f32", pipelines=(REFERENCE, tiled(bm, bn)))
    for name, r, t in zip(("dq", "dk", "dv"), ref, tile):
        assert np.array_equal(r, t), \
            f"{name}: tiled differs from the oracle by up to {np.abs(r - t).max():.3g}"


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("attrs", [{"causal": True}, {"softcap": 5.0, "window": (20, 3)}],
                         ids=["causal", "softcap_window"])
def test_tiled_grad_low_precision(dtype, attrs):
    # GQA 4/2, Sq != Skv, D != Dv, tiles hanging over both ends
    run_grad(np.random.default_rng(), 1, 4, 2, 45, 70, 32, 16, attrs, dtype, dtype,
             pipelines=(tiled(16, 32),))


def test_tiled_grad_rows_that_see_no_key():
    # window (0, 0) with Sq > Skv: the first Sq - Skv rows see no key, and the
    # m-blocks holding only those are outside every kv-block's q_range.
    run_grad(np.random.default_rng(), 1, 2, 2, 30, 10, 16, 16, {"window": (0, 0)},
             "f32", "f32", dead_rows=[(0, 1, 25)], pipelines=(tiled(8, 4),))


def test_rows_that_see_no_key_contribute_nothing():
    # window (0, 0) with Sq > Skv: the first Sq - Skv rows see no key
    # (lse = -inf); their dq is 0 and they add nothing to dk, dv.
    errs = run_grad(np.random.default_rng(), 1, 2, 2, 30, 10, 16, 16,
                    {"window": (0, 0)}, "f32", "f32")
    assert max(errs) <= TOL["f32"]


def test_a_row_whose_lse_is_minus_inf_adds_nothing():
    # rows that do see keys, but whose lse says they saw none: their p is
    # 0, so dq is 0 there and dk, dv get nothing from them (the reference
    # applies the same rule; a lowering that ignored lse = -inf would give
    # inf or NaN here)
    errs = run_grad(np.random.default_rng(), 1, 2, 2, 20, 24, 16, 16, {}, "f32", "f32",
                    dead_rows=[(0, 0, 3), (0, 1, 0), (0, 1, 19)])
    assert max(errs) <= TOL["f32"]


@pytest.mark.parametrize("attrs", [{}, {"causal": True, "scale": 0.3},
                                   {"softcap": 1.5, "window": (3, 2)}],
                         ids=["full", "causal_scale", "softcap_window"])
def test_reference_gradient_is_the_derivative(attrs):
    """The analytic reference against central differences of the float64
    forward: d/dx sum(o * dO) for every element x of q, k and v (relative
    error 1e-6: the difference quotient's truncation error at h = 1e-5)."""
    rng = np.random.default_rng()
    b, hq, hkv, sq, skv, d, dv = 1, 4, 2, 5, 7, 4, 3
    q = rng.standard_normal((b, hq, sq, d))
    k = rng.standard_normal((b, hkv, skv, d))
    v = rng.standard_normal((b, hkv, skv, dv))
    do = rng.standard_normal((b, hq, sq, dv))
    grads = reference.attention_grad(q, k, v, do, **attrs)
    h = 1e-5
    for x, g in zip((q, k, v), grads):
        num = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            keep = x[idx]
            x[idx] = keep + h
            fp = (reference.attention(q, k, v, **attrs)[0] * do).sum()
            x[idx] = keep - h
            fm = (reference.attention(q, k, v, **attrs)[0] * do).sum()
            x[idx] = keep
            num[idx] = (fp - fm) / (2 * h)
        assert np.linalg.norm(num - g) <= 1e-6 * max(np.linalg.norm(g), 1.0)


def test_grad_verifier_names_the_operand():
    ctx = Context()
    text = flash_attention_grad_func("g", 1, 2, 2, 8, 8, 16, 16, dtype="f32")
    # dk shaped as q's heads/lengths would be fine here; give dv the wrong head dim
    bad = text.replace("%dv: memref<1x2x8x16xf32>", "%dv: memref<1x2x8x24xf32>").replace(
        "outs(%dq, %dk, %dv : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>)",
        "outs(%dq, %dk, %dv : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x24xf32>)")
    assert bad != text
    with pytest.raises(Fa3Error, match="value head dim mismatch: value has 16 but dv has 24"):
        ctx.parse(bad)
