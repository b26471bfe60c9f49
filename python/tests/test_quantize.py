"""fa3.quantize: the Hadamard rotation (NumPy, runs everywhere) and the e4m3
quantization (torch on the CPU: skipped where torch is missing, as on the
CPU machine and CI; the GPU machine has it).

The dequantization bound checked per element (fa3/quantize.py): e4m3 keeps 3
mantissa bits, so |x8 * descale - x| <= max(2^-4 |x|, 2^-10 descale) (half
an ulp relative to a normal number; half the subnormal spacing 2^-9 below
2^-6), plus a few float32 ulps of x (scale * descale is 1 within 2 ulps)."""
import importlib.util
import math

import numpy as np
import pytest

from fa3 import quantize as Q

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")


# ------------------------------------------------------------ NumPy: no torch

@pytest.mark.parametrize("d", [1, 2, 4, 64, 128, 256])
def test_hadamard_is_orthogonal(d):
    m = Q.hadamard_matrix_numpy(d, seed=3)
    assert m.dtype == np.float64 and m.shape == (d, d)
    assert np.abs(m @ m.T - np.eye(d)).max() < 1e-6
    assert np.abs(m.T @ m - np.eye(d)).max() < 1e-6
    # every entry +-1/sqrt(d): an outlier is spread evenly over the row
    assert np.allclose(np.abs(m), 1 / math.sqrt(d))


def test_hadamard_is_sylvester_times_signs():
    s = Q.hadamard_signs(4, seed=11)
    h4 = np.array([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], float)
    assert np.array_equal(Q.hadamard_matrix_numpy(4, 11), h4 * s[None, :] / 2)


def test_hadamard_signs_follow_the_seed():
    a, b = Q.hadamard_signs(256, 0), Q.hadamard_signs(256, 0)
    assert a.dtype == np.int8 and set(np.unique(a)) <= {-1, 1}
    assert np.array_equal(a, b)
    assert not np.array_equal(a, Q.hadamard_signs(256, 1))
    assert 64 < (a == 1).sum() < 192     # both signs, roughly balanced


def test_rotation_preserves_scores_numpy():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((77, 128)), rng.standard_normal((333, 128))
    m = Q.hadamard_matrix_numpy(128, seed=5)
    assert np.abs((q @ m) @ (k @ m).T - q @ k.T).max() < 1e-10


def test_rotation_spreads_an_outlier():
    x = np.zeros(128)
    x[7] = 100.0
    y = x @ Q.hadamard_matrix_numpy(128, 2)
    assert np.allclose(np.abs(y), 100 / math.sqrt(128))


@pytest.mark.parametrize("d,exc", [(0, ValueError), (3, ValueError), (96, ValueError),
                                   (-4, ValueError), (2.0, TypeError), ("8", TypeError)])
def test_hadamard_bad_dims(d, exc):
    with pytest.raises(exc):
        Q.hadamard_matrix_numpy(d)


@pytest.mark.parametrize("seed,exc", [(-1, ValueError), (2**63, ValueError),
                                      (True, TypeError), (1.5, TypeError)])
def test_hadamard_bad_seeds(seed, exc):
    with pytest.raises(exc):
        Q.hadamard_signs(8, seed)


def test_import_does_not_need_torch():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import sys, fa3, fa3.quantize; "
                        "print('torch' in sys.modules)"], capture_output=True, text=True,
                       cwd=str(__import__("pathlib").Path(Q.__file__).parents[1]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


# ------------------------------------------------------------- torch (CPU)

def _x(shape, seed=0, dtype=None):
    import torch
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    # rows of very different magnitudes, so that block scales differ
    B, S, H, D = shape
    x = x * torch.exp2(torch.randint(-6, 7, (B, S, H, 1), generator=g).float())
    return x if dtype is None else x.to(dtype)


def _within_bound(torch, x, x8, descale_rows):
    """|x8 * descale - x| <= max(2^-4 |x|, 2^-10 descale) + 4 f32 ulps of |x|,
    per element; descale_rows broadcasts against x [B, S, H, D]."""
    deq = x8.float() * descale_rows
    err = (deq - x).abs()
    bound = torch.maximum(Q.E4M3_REL_ERR * x.abs(), Q.E4M3_SUBNORMAL_ERR * descale_rows)
    bound = bound + 4 * 2.0 ** -23 * x.abs()
    return bool((err <= bound).all()), float((err / bound).max())


@needs_torch
@pytest.mark.parametrize("S", [1, 77, 128, 129, 333, 1041])
def test_block_descales_are_amax_over_448(S):
    import torch
    B, H, D = 2, 3, 64
    x = _x((B, S, H, D), seed=S)
    x8, d = Q.quantize_fp8(x, block=128)
    nb = -(-S // 128)
    assert x8.dtype == torch.float8_e4m3fn and x8.shape == x.shape and x8.is_contiguous()
    assert d.dtype == torch.float32 and d.shape == (B, H, nb)
    for b in range(B):
        for h in range(H):
            for i in range(nb):
                amax = x[b, i * 128:(i + 1) * 128, h].abs().max()
                assert d[b, h, i] == amax / 448          # exactly, in float32
                # the block's largest element lands on 448
                assert x8[b, i * 128:(i + 1) * 128, h].float().abs().max() == 448
    rows = d.repeat_interleave(128, dim=2)[:, :, :S].transpose(1, 2).unsqueeze(-1)
    ok, worst = _within_bound(torch, x, x8, rows)
    assert ok, worst
    assert torch.equal(Q.dequantize_fp8(x8, d), x8.float() * rows)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_head_descales_and_error_bound(dtype):
    import torch
    x = _x((2, 333, 4, 128), seed=1, dtype=getattr(torch, dtype))
    x8, d = Q.quantize_fp8(x)
    assert d.shape == (2, 4) and d.dtype == torch.float32
    xf = x.float()
    assert torch.equal(d, xf.abs().amax(dim=(1, 3)) / 448)
    ok, worst = _within_bound(torch, xf, x8, d[:, None, :, None])
    assert ok, worst
    # the bound is attained, not loose: some element is off by more than a
    # quarter of it (3 mantissa bits really are all there is)
    assert worst > 0.25
    assert torch.equal(Q.dequantize_fp8(x8, d), x8.float() * d[:, None, :, None])


@needs_torch
def test_rotation_preserves_scores_torch():
    import torch
    m = Q.hadamard_matrix(128, seed=9, dtype=torch.float64)
    assert torch.allclose(m @ m.T, torch.eye(128, dtype=torch.float64), atol=1e-12)
    assert torch.equal(m, torch.from_numpy(Q.hadamard_matrix_numpy(128, 9)))
    q, k = _x((1, 50, 2, 128), 3).double(), _x((1, 70, 2, 128), 4).double()
    s = torch.einsum("bqhd,bkhd->bhqk", q, k)
    sr = torch.einsum("bqhd,bkhd->bhqk", q @ m, k @ m)
    assert (s - sr).abs().max() <= 1e-9 * s.abs().max()


@needs_torch
def test_quantize_with_rotation():
    import torch
    x = _x((1, 200, 2, 128), 5)
    m = Q.hadamard_matrix(128, seed=7)
    for h in (7, m):      # a seed, or the matrix itself
        x8, d = Q.quantize_fp8(x, block=128, hadamard=h)
        xr = x @ m
        assert torch.equal(d, Q.quantize_fp8(xr, block=128)[1])
        rows = d.repeat_interleave(128, dim=2)[:, :, :200].transpose(1, 2).unsqueeze(-1)
        ok, worst = _within_bound(torch, xr, x8, rows)
        assert ok, worst
    # True is seed 0
    assert torch.equal(Q.quantize_fp8(x, hadamard=True)[0].float(),
                       Q.quantize_fp8(x, hadamard=0)[0].float())


@needs_torch
def test_rotation_shrinks_outlier_error():
    """The point of the rotation (FlashAttention-3, section 4.3): with the
    paper's inputs, N(0, 1) plus N(0, 100) on 0.1 % of the entries, the
    attention of the dequantized inputs is off by about 1.4e-2 RMS without
    it and 0.9e-2 with it (block scales alone change little)."""
    import torch
    g = torch.Generator().manual_seed(0)
    B, S, H, D = 1, 512, 2, 128

    def gen():
        x = torch.randn(B, S, H, D, generator=g, dtype=torch.float64)
        return x + (torch.rand(x.shape, generator=g, dtype=torch.float64) < 0.001) * \
            torch.randn(x.shape, generator=g, dtype=torch.float64) * 10
    q, k, v = gen(), gen(), gen()

    def attn(q, k, v):
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D)
        return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)
    ref = attn(q, k, v)

    def err(hadamard):
        r = Q.quantize_qkv_fp8(q, k, v, hadamard=hadamard)
        o = attn(*(Q.dequantize_fp8(x, d).double() for x, d in
                   ((r.q, r.q_descale), (r.k, r.k_descale), (r.v, r.v_descale))))
        return float((o - ref).pow(2).mean().sqrt())
    assert err(True) < 0.8 * err(False)


@needs_torch
def test_quantize_qkv():
    import torch
    q, k, v = _x((2, 77, 8, 128), 1), _x((2, 333, 2, 128), 2), _x((2, 333, 2, 128), 3)
    r = Q.quantize_qkv_fp8(q, k, v, seed=4)
    assert r.q.dtype == r.k.dtype == r.v.dtype == torch.float8_e4m3fn
    assert r.q_descale.shape == (2, 8, 1) and r.k_descale.shape == (2, 2, 3)
    assert r.v_descale.shape == (2, 2)
    assert set(r.descales) == {"q_descale", "k_descale", "v_descale"}
    m = Q.hadamard_matrix(128, 4)
    assert torch.equal(r.q.float(), Q.quantize_fp8(q, block=128, hadamard=m)[0].float())
    assert torch.equal(r.k_descale, Q.quantize_fp8(k, block=128, hadamard=4)[1])
    assert torch.equal(r.v.float(), Q.quantize_fp8(v)[0].float())     # v: not rotated
    # dequantized scores match the exact ones within fp8's error
    s = torch.einsum("bqhd,bkhd->bhqk", Q.dequantize_fp8(r.q, r.q_descale).double(),
                     Q.dequantize_fp8(r.k, r.k_descale).double().repeat_interleave(4, dim=2))
    s0 = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double().repeat_interleave(4, dim=2))
    assert float((s - s0).norm() / s0.norm()) < 0.1
    flat = Q.quantize_qkv_fp8(q, k, v, block=None, hadamard=False)
    assert flat.q_descale.shape == (2, 8) and flat.k_descale.shape == (2, 2)
    assert torch.equal(flat.q.float(), Q.quantize_fp8(q)[0].float())


@needs_torch
def test_zeros_and_empty():
    import torch
    x = torch.zeros(2, 300, 2, 64)
    x[1, 200:, 1] = 3.0                       # one block of one head not zero
    x8, d = Q.quantize_fp8(x, block=128)
    assert not torch.isnan(x8.float()).any()
    assert (x8.float()[0] == 0).all()
    assert (d[0] == 1).all() and (d[1, 0] == 1).all() and (d[1, 1, :1] == 1).all()
    assert d[1, 1, 2] == 3.0 / 448
    x8, d = Q.quantize_fp8(torch.zeros(1, 5, 1, 64))
    assert (d == 1).all() and (x8.float() == 0).all()
    for block in (None, 128):
        x8, d = Q.quantize_fp8(torch.zeros(2, 0, 3, 64), block=block)
        assert x8.shape == (2, 0, 3, 64)
        assert d.shape == ((2, 3) if block is None else (2, 3, 0))
        assert (d == 1).all()


@needs_torch
@pytest.mark.parametrize("block", [None, 128])
def test_tiny_amax_is_treated_as_zero(block):
    """An amax below AMAX_MIN = 448 * float32's smallest normal: 448 / amax
    overflows to inf below ~1.3e-36 (the zeros became 0 * inf = NaN) and
    amax / 448 is subnormal up to AMAX_MIN; such a group gets descale 1 and
    its elements cast unscaled (zeros), with no NaN anywhere."""
    import torch
    tiny = torch.finfo(torch.float32).tiny
    assert Q.AMAX_MIN == 448 * tiny
    assert torch.isinf(torch.tensor(448.0) / torch.tensor(1e-37))   # the overflow avoided
    groups = [1e-45, 1e-40, tiny, 1e-37, 1.3e-36, 1.4e-36, 5e-36, Q.AMAX_MIN, 1e-35, 3.0]
    n = len(groups)
    # group i: head i of batch 0 (block None) or rows 128 i .. 128 i + 127 of
    # head 0 (block 128); its amax groups[i] at one element, the rest zeros
    # and values a thousandth of it
    x = torch.zeros(1, 128 * n if block else 5, n if block is None else 1, 64)
    for i, a in enumerate(groups):
        h, r = (i, 0) if block is None else (0, 128 * i)
        x[0, r, h, 3] = -a
        x[0, r + 1, h, :8] = a / 1000
    x8, d = Q.quantize_fp8(x, block=block)
    xf = x8.float()
    assert not torch.isnan(xf).any() and torch.isfinite(d).all()
    d = d.reshape(-1)
    assert d.shape == (n,)
    for i, a in enumerate(groups):
        g = xf[0, :, i] if block is None else xf[0, 128 * i:128 * (i + 1), 0]
        amax = np.float32(a)
        if amax < Q.AMAX_MIN:
            assert d[i] == 1, (a, d[i])
            assert (g == 0).all(), a          # too small for e4m3 unscaled
        else:
            # its own scale: a normal float32 descale, the amax at 448
            assert d[i] == torch.tensor(amax) / 448 and d[i] >= tiny, (a, d[i])
            assert g.abs().max() == 448, a
    # the dequantization bound holds for every group
    deq = Q.dequantize_fp8(x8, d.reshape((1, n) if block is None else (1, 1, n)))
    assert torch.isfinite(deq).all()
    err = (deq - x).abs()
    bound = torch.maximum(Q.E4M3_REL_ERR * x.abs(), torch.full_like(x, Q.E4M3_SUBNORMAL_ERR)
                          * (d.reshape(1, 1, n, 1) if block is None else
                             d.repeat_interleave(128)[None, :, None, None]))
    assert (err <= bound * (1 + 1e-6)).all()


@needs_torch
def test_dequantize_fa3_q_descale_per_kv_head():
    """FA3's q descale is [B, Hkv]: each serves the Hq / Hkv q heads of its
    group."""
    import torch
    x8 = torch.ones(1, 3, 4, 8).to(torch.float8_e4m3fn)
    d = torch.tensor([[2.0, 5.0]])
    deq = Q.dequantize_fp8(x8, d)
    assert (deq[0, :, :2] == 2).all() and (deq[0, :, 2:] == 5).all()
    assert (Q.dequantize_fp8(x8, torch.tensor(0.5)) == 0.5).all()
    with pytest.raises(ValueError, match="does not fit"):
        Q.dequantize_fp8(x8, torch.ones(1, 3))
    with pytest.raises(ValueError, match="blocks"):
        Q.dequantize_fp8(x8, torch.ones(1, 4, 2))


@needs_torch
def test_bad_arguments():
    import torch
    x = torch.randn(1, 10, 2, 64)
    cases = [
        (lambda: Q.quantize_fp8(x[0]), ValueError, "4-D"),
        (lambda: Q.quantize_fp8(x.numpy()), TypeError, "torch.Tensor"),
        (lambda: Q.quantize_fp8(x.to(torch.int32)), ValueError, "float32"),
        (lambda: Q.quantize_fp8(x.to(torch.float8_e4m3fn)), ValueError, "float32"),
        (lambda: Q.quantize_fp8(x, block=64), ValueError, "None .* or 128"),
        (lambda: Q.quantize_fp8(x, block=True), TypeError, "bool"),
        (lambda: Q.quantize_fp8(x, block="128"), TypeError, "block"),
        (lambda: Q.quantize_fp8(torch.randn(1, 4, 1, 96), hadamard=1), ValueError,
         "power of two"),
        (lambda: Q.quantize_fp8(x, hadamard=torch.eye(32)), ValueError, r"\[64, 64\]"),
        (lambda: Q.quantize_fp8(x, hadamard=-3), ValueError, "seed"),
        (lambda: Q.quantize_fp8(x, hadamard=2.5), TypeError, "seed"),
        (lambda: Q.quantize_qkv_fp8(x, x, x, hadamard=3), TypeError, "True or False"),
        (lambda: Q.quantize_qkv_fp8(x, x, x, seed=-1), ValueError, "seed"),
        (lambda: Q.quantize_qkv_fp8(x, torch.randn(2, 10, 2, 64), x), ValueError, "q's B"),
        (lambda: Q.quantize_qkv_fp8(x, x, torch.randn(1, 11, 2, 64)), ValueError,
         "agree in"),
        (lambda: Q.quantize_qkv_fp8(x, torch.randn(1, 10, 2, 32), x), ValueError, "D = 64"),
        (lambda: Q.quantize_qkv_fp8(x, x, x, block=256), ValueError, "128"),
    ]
    for fn, exc, text in cases:
        with pytest.raises(exc, match=text):
            fn()


@needs_torch
def test_no_gradient_and_exported():
    import torch
    import fa3
    x = torch.randn(1, 4, 1, 64, requires_grad=True)
    x8, d = fa3.quantize_fp8(x)
    assert not x8.requires_grad and not d.requires_grad
    assert fa3.quantize_qkv_fp8 is Q.quantize_qkv_fp8
    assert fa3.hadamard_matrix is Q.hadamard_matrix and fa3.dequantize_fp8 is Q.dequantize_fp8


@needs_torch
def test_backend_choice_is_explained():
    """Where the generated kernel cannot run, backend='kernel' says why; the
    default falls back to the torch ops there; a wrong backend is refused."""
    import torch
    x = torch.randn(1, 5, 2, 64, dtype=torch.bfloat16)
    why = {
        "x is on cpu, not a CUDA device": x,
    }
    for text, t in why.items():
        with pytest.raises(ValueError, match=f"backend='kernel' cannot quantize this x: {text}"):
            Q.quantize_fp8(t, block=128, backend="kernel")
    with pytest.raises(ValueError, match="backend must be None"):
        Q.quantize_fp8(x, backend="gpu")
    with pytest.raises(ValueError, match="backend must be None"):
        Q.quantize_qkv_fp8(x, x, x, backend="cuda")
    # the default on the CPU: the torch ops, as backend='torch'
    a, b = Q.quantize_fp8(x, block=128, hadamard=3), Q.quantize_fp8(x, block=128, hadamard=3,
                                                                   backend="torch")
    assert torch.equal(a[0].view(torch.uint8), b[0].view(torch.uint8)) and torch.equal(a[1], b[1])
    # the reasons the kernel does not apply, by their checks
    assert "float32" in Q._kernel_applies(torch, x.float(), None)
    assert "head dim 96" in Q._kernel_applies(torch, torch.zeros(1, 1, 1, 96,
                                                                 dtype=torch.float16), None)
    assert "matrix" in Q._kernel_applies(torch, x, torch.eye(64))


@needs_torch
def test_descales_divide_with_correct_rounding():
    """descale = amax / 448 and scale = 448 / amax as float32 divisions
    (torch's `t / 448.0` multiplies by 1 / 448, an ulp off at times; the
    kernel's div.rn does not): checked on amaxes where the two differ."""
    import torch
    amax = torch.tensor(np.float32(np.linspace(1, 2, 4097)), dtype=torch.float32)
    x = torch.zeros(1, amax.numel(), 1, 8)
    x[0, :, 0, 0] = amax
    _, d = Q.quantize_fp8(x, block=None)
    # one head: its descale is the largest amax / 448
    assert d.item() == np.float32(np.float32(2.0) / np.float32(448.0))
    a32 = amax.numpy()
    exact = a32 / np.float32(448.0)                       # IEEE division in NumPy
    assert (np.float32(a32 * np.float32(1 / 448.0)) != exact).any()   # the shortcut differs
    for i in range(0, 4097, 512):
        xi = torch.zeros(1, 128, 1, 8)
        xi[0, 0, 0, 0] = float(a32[i])
        _, di = Q.quantize_fp8(xi, block=128)
        assert di.item() == exact[i]
