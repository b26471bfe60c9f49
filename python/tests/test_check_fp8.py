"""test/gpu/check_fp8.py's torch parts on the CPU (skipped without torch):
its float64 reference against the NumPy oracle (fa3.reference), its
descale forms, and its criteria against an emulation of an FP8 kernel's
math (online softmax over blocks of 128 keys, P rounded to e4m3 at the
running max, the row sum in f32 from the unrounded P, o rounded to bf16),
which must pass them, while a wrong descale or a wrong block must fail
them."""
import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def c():
    sys.path.insert(0, str(ROOT / "test" / "gpu"))
    import check_fp8
    check_fp8.DEVICE = "cpu"
    return check_fp8


def kf(causal=False, D=128):
    return SimpleNamespace(causal=causal, window_left=-1, window_right=0 if causal else -1,
                           softcap=0.0, scale=1 / math.sqrt(D), head_dim=D, head_dim_v=D)


def emulate_kernel(q, k, v, scale, causal, block_n=128):
    """An FP8 kernel's math in float64, BSHD: per block of keys the running
    max, p = exp(s - m) rounded to e4m3 for P V, l summed from the unrounded
    p, o rounded to bf16 (FlashAttention-3's order)."""
    import torch
    from fa3.reference import visible_mask
    B, Sq, Hq, D = q.shape
    Skv, Hkv = k.shape[1], k.shape[2]
    g = Hq // Hkv
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(g, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(g, dim=1)
    vis = torch.from_numpy(visible_mask(Sq, Skv, causal))
    m = torch.full((B, Hq, Sq, 1), float("-inf"), dtype=torch.float64)
    l = torch.zeros(B, Hq, Sq, 1, dtype=torch.float64)
    acc = torch.zeros(B, Hq, Sq, v.shape[3], dtype=torch.float64)
    for j0 in range(0, Skv, block_n):
        s = qh @ kh[:, :, j0:j0 + block_n].transpose(-1, -2) * scale
        s = s.masked_fill(~vis[:, j0:j0 + block_n], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        ms = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.where(torch.isfinite(m), torch.exp(m - ms), torch.zeros_like(m))
        p = torch.exp(s - ms)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p.float().to(torch.float8_e4m3fn).double() @ vh[:, :, j0:j0 + block_n]
        m = m_new
    o = torch.where(l > 0, acc / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(acc))
    lse = (m + torch.log(l)).squeeze(-1)
    return o.to(torch.bfloat16).transpose(1, 2), lse.float()


def test_reference_matches_the_numpy_oracle(c):
    import torch
    from fa3 import reference as R
    g = torch.Generator().manual_seed(0)
    for causal, (Sq, Skv) in ((False, (77, 200)), (True, (200, 77)), (True, (50, 50))):
        q = torch.randn(2, Sq, 4, 64, generator=g, dtype=torch.float64)
        k = torch.randn(2, Skv, 2, 64, generator=g, dtype=torch.float64)
        v = torch.randn(2, Skv, 2, 64, generator=g, dtype=torch.float64)
        ref = c.reference(q, k, v, 0.125, kf(causal, 64))
        want_o, want_lse = R.attention(q.transpose(1, 2).numpy(), k.transpose(1, 2).numpy(),
                                       v.transpose(1, 2).numpy(), scale=0.125,
                                       causal=causal)
        got = ref["o"].transpose(1, 2).numpy()
        rows = ~ref["empty"].numpy()
        assert np.abs(got[:, :, rows] - want_o[:, :, rows]).max() < 1e-12
        assert np.abs(ref["lse"].numpy()[:, :, rows] - want_lse[:, :, rows]).max() < 1e-12
        assert ref["empty"].sum() == (Sq - Skv if causal and Sq > Skv else 0)


@pytest.mark.parametrize("mode", ["block", "block+hadamard", "fa3", "tensor", "tensor-fa3",
                                  "qhead", "none", "block-strided"])
def test_emulated_kernel_passes_and_bugs_fail(c, mode):
    """The criteria of (a) on an emulated FP8 kernel: it passes, with
    margin; a wrong v descale, a q descale of the wrong block and an
    unrounded-P-but-wrong-rows o fail."""
    import torch
    from fa3 import quantize as fq
    case = (2, 333, 1041, 8, 2)
    g = torch.Generator().manual_seed(1)
    q, k, v = c.rand_inputs(case, 128, 128, g)
    q8, k8, v8, qd, kd, vd = c.quantize(mode, q, k, v, 3)
    if mode == "fa3":
        assert qd.shape == (2, 2) and kd.shape == (2, 2)
    if mode == "block-strided":
        assert not qd.is_contiguous() and not kd.is_contiguous()
    dq, dk, dv = (c.dequantized(x, d) for x, d in ((q8, qd), (k8, kd), (v8, vd)))
    for causal in (False, True):
        ref = c.reference(dq, dk, dv, 1 / math.sqrt(128), kf(causal))
        o, lse = emulate_kernel(dq, dk, dv, 1 / math.sqrt(128), causal)
        res = c.compare(o, lse, ref)
        assert res["ok"], res
        # margins: the model is not tight by more than ~3x, nor exceeded
        assert res["max_z"] < c.Z_MAX / 2 and res["rel_err_o"] < c.O_REL_TOL / 1.3, res
        assert 0.01 < res["rel_err_o"] < 0.04 and res["max_abs_err_lse"] < 1e-5, res
        assert abs(res["rel_err_o_emul"] - res["rel_err_o"]) < 0.3 * res["rel_err_o"], res
        # a v descale off by a factor 1.25: fails by z
        bad = c.compare((o.double() * 1.25).to(torch.bfloat16), lse, ref)
        assert not bad["ok"] and bad["max_z"] > 3 * c.Z_MAX, bad
    # the second q block read with the first block's descale (a wrong block
    # index): the lse criterion fails (and z)
    if qd is not None and qd.dim() == 3:
        wrong = qd.clone()
        wrong[:, :, 1] = wrong[:, :, 0]
        o2, lse2 = emulate_kernel(c.dequantized(q8, wrong), dk, dv, 1 / math.sqrt(128), False)
        ref = c.reference(dq, dk, dv, 1 / math.sqrt(128), kf(False))
        bad = c.compare(o2, lse2, ref)
        ratio = (qd[:, :, 1] / qd[:, :, 0]).max().item()
        if ratio > 1.1 or ratio < 0.9:
            assert not bad["ok"] and bad["max_abs_err_lse"] > c.LSE_ABS_TOL, bad
    # and the dequantization the reference uses is within e4m3's bound of x
    if mode not in ("none", "block+hadamard"):
        for x, d, x8 in ((q, qd, q8), (k, kd, k8), (v, vd, v8)):
            err = (c.dequantized(x8, d) - x.double()).abs()
            scale = fq.dequantize_fp8(torch.ones_like(x8), d).double()
            assert (err <= torch.maximum(2 ** -4 * x.double().abs(), 2 ** -10 * scale)
                    + 1e-6 * x.double().abs()).all()


def test_compare_catches_unwritten_and_empty_rows(c):
    import torch
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, S, 2, 128, generator=g, dtype=torch.float64)
               for S in (200, 77, 77))
    ref = c.reference(q, k, v, 0.1, kf(True))
    o, lse = emulate_kernel(q, k, v, 0.1, True)
    assert c.compare(o, lse, ref)["ok"] and c.compare(o, lse, ref)["empty_rows"] == 123
    o2 = o.clone()
    o2[0, 5, 1, 7] = float("nan")
    assert c.compare(o2, lse, ref)["unwritten"] == 1 and not c.compare(o2, lse, ref)["ok"]
    lse2 = lse.clone()
    lse2[0, 0, 3] = 0.0                       # a row without keys: must be -inf
    assert not c.compare(o, lse2, ref)["empty_rows_ok"]
    assert c.compare(o, None, ref)["ok"]


def test_paper_methods_order(c):
    """(b)'s inputs and methods on a small size, emulated: the rotation
    lowers the RMSE (FlashAttention-3's finding), every method below 3e-2."""
    import torch
    g = torch.Generator().manual_seed(3)
    q, k, v = (c.paper_inputs(1, 512, 2, 128, g) for _ in range(3))
    assert 0.0003 < float((q.abs() > 5).double().mean()) < 0.003     # the outliers
    ref = c._attn64(q, k, v, 1 / math.sqrt(128))
    rmse = {}
    for name, fn in c.paper_methods().items():
        q8, k8, v8, qd, kd, vd = fn(q, k, v)
        assert q8.dtype == torch.float8_e4m3fn
        o = c._attn64(c.dequantized(q8, qd), c.dequantized(k8, kd), c.dequantized(v8, vd),
                      1 / math.sqrt(128), round_p=True)
        rmse[name] = float((o - ref).pow(2).mean().sqrt())
    assert all(r < 3e-2 for r in rmse.values()), rmse
    assert rmse["fp8 block + Hadamard"] < 0.85 * rmse["fp8 block"], rmse
    assert rmse["fp8 per-tensor + Hadamard"] < 0.85 * rmse["fp8 per-tensor"], rmse
    text = c.paper_table([dict(hdim=128, method=n, rmse=r, rmse_emul=r,
                               paper=c.PAPER_RMSE.get(n)) for n, r in rmse.items()])
    assert "| 128 | fp8 block + Hadamard |" in text and "9.10e-03" in text
