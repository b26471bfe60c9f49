"""The CPU lowerings against the independent float64 NumPy reference.

Every case draws fresh random inputs. Tolerances (relative Frobenius error of
o; absolute error of lse):
  f32 inputs and output:  o 1e-5, lse 1e-4 (f32 accumulation over <= 300 keys)
  f16 output:             o 2e-3  (one f16 rounding, eps 2^-11, of each output)
  bf16 output:            o 1e-2  (one bf16 rounding, eps 2^-8)
Inputs are rounded to their dtype first and the reference runs on the rounded
values, so the only error left is f32 arithmetic and the output rounding.
"""
import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context
from fa3.spec import flash_attention_func

TOL_O = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}
TOL_LSE = 1e-4

# (name, B, Hq, Hkv, Sq, Skv, D, Dv, attrs)
SHAPES = [
    ("plain", 2, 4, 4, 77, 77, 32, 32, {}),
    ("causal_sq_lt_skv", 1, 2, 2, 50, 83, 16, 16, {"causal": True}),
    ("causal_sq_gt_skv", 1, 2, 2, 90, 40, 16, 16, {"causal": True}),
    ("window", 2, 2, 2, 130, 130, 16, 16, {"window": (16, 8)}),
    ("window_left_causal", 1, 2, 1, 100, 70, 16, 24, {"window": (10, 0)}),
    ("window_right_only", 1, 2, 2, 65, 100, 16, 16, {"window": (-1, 5)}),
    ("softcap", 1, 2, 2, 64, 100, 32, 32, {"softcap": 5.0}),
    ("softcap_causal_scale", 1, 2, 2, 70, 70, 32, 32,
     {"softcap": 2.0, "causal": True, "scale": 0.5}),
    ("gqa", 2, 6, 2, 33, 129, 16, 16, {}),
    ("mqa_causal", 1, 4, 1, 100, 100, 8, 16, {"causal": True}),
    ("sq_1", 2, 2, 2, 1, 100, 16, 16, {"causal": True}),
    ("skv_1", 1, 2, 2, 37, 1, 16, 16, {}),
]


def rounded(x, dtype):
    """x -> (the array of `dtype` a program takes, its value in float64)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f16":
        return x.astype(np.float16), x.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        bits = reference.to_bf16_bits(x)
        return bits, reference.from_bf16_bits(bits).astype(np.float64)
    return x, x.astype(np.float64)


def random_inputs(rng, b, hq, hkv, sq, skv, d, dv, dtype):
    def make(shape, scale=1.0):
        return rounded(rng.standard_normal(shape) * scale, dtype)
    # Larger q makes the softmax peaky, so masking and max-tracking matter.
    q, q64 = make((b, hq, sq, d), 2.0)
    k, k64 = make((b, hkv, skv, d))
    v, v64 = make((b, hkv, skv, dv))
    return (q, k, v), (q64, k64, v64)


def output_buffer(shape, dtype):
    """An output poisoned with NaN, so unwritten elements fail the check."""
    if dtype == "bf16":
        return np.full(shape, 0x7FC0, dtype=np.uint16)
    return np.full(shape, np.nan, dtype={"f32": np.float32, "f16": np.float16}[dtype])


def as_f64(x, dtype):
    if dtype == "bf16":
        return reference.from_bf16_bits(x).astype(np.float64)
    return x.astype(np.float64)


def compile_program(pipeline, **spec):
    ctx = Context()
    mod = ctx.parse(flash_attention_func("attn", **spec))
    mod.run_pipeline(pipeline)
    return CpuProgram(mod), ctx


def run_case(pipeline, rng, b, hq, hkv, sq, skv, d, dv, attrs, dtype):
    prog, _ctx = compile_program(pipeline, b=b, hq=hq, hkv=hkv, sq=sq, skv=skv,
                                 d=d, dv=dv, dtype=dtype, lse=True, **attrs)
    (q, k, v), (q64, k64, v64) = random_inputs(rng, b, hq, hkv, sq, skv, d, dv,
                                               dtype)
    o = output_buffer((b, hq, sq, dv), dtype)
    lse = np.full((b, hq, sq), np.nan, dtype=np.float32)
    prog.call("attn", q, k, v, o, lse)
    ref_o, ref_lse = reference.attention(q64, k64, v64, **attrs)
    return check_outputs(o, lse, ref_o, ref_lse, dtype)


def check_outputs(o, lse, ref_o, ref_lse, dtype):
    """o and lse against the reference, within TOL_O / TOL_LSE; returns o
    in float64."""
    got = as_f64(o, dtype)
    assert not np.isnan(got).any(), "output elements left unwritten or NaN"
    assert not np.isnan(lse).any(), "lse elements left unwritten or NaN"
    denom = max(np.linalg.norm(ref_o), 1e-30)
    err = np.linalg.norm(got - ref_o) / denom
    assert err <= TOL_O[dtype], "relative error of o %.3g > %g" % (err, TOL_O[dtype])
    finite = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), finite), "lse -inf rows differ"
    assert np.all(lse[~finite] == -np.inf)
    if finite.any():
        lerr = np.abs(lse[finite] - ref_lse[finite]).max()
        assert lerr <= TOL_LSE, "lse error %.3g" % lerr
    return got


@pytest.fixture
def rng():
    return np.random.default_rng()  # fresh inputs on every run


@pytest.mark.parametrize("case", SHAPES, ids=[c[0] for c in SHAPES])
def test_reference_lowering_f32(case, rng):
    run_case("attn-cpu-reference-pipeline", rng, *case[1:], "f32")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", [SHAPES[1], SHAPES[3], SHAPES[8]],
                         ids=["causal", "window", "gqa"])
def test_reference_lowering_half(case, dtype, rng):
    run_case("attn-cpu-reference-pipeline", rng, *case[1:], dtype)


def test_fully_masked_rows_give_zero_and_minus_inf(rng):
    # Causal with Sq > Skv: the first Sq - Skv rows see no key.
    got = run_case("attn-cpu-reference-pipeline", rng, 1, 1, 1, 20, 5, 8, 8,
                   {"causal": True}, "f32")
    assert np.all(got[0, 0, :15] == 0.0)
