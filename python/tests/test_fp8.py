"""FP8 (facts dtype e4m3) on the Python side: the facts, the runtime's
arguments through ctypes (libfa3rt's plan, no GPU), and flash_attn_func's
FP8 checks and descale forms (torch, on fake CUDA tensors: no GPU; skipped
without torch). With a GPU (test/gpu/check_fp8.py runs the kernels), the
arguments flash_attn_func hands to the runtime are planned by the real
libfa3rt against FP8 facts (test_fp8_args_reach_the_runtime)."""
import importlib.util

import pytest

from fa3 import facts as F
from test_runtime import FACTS

HAVE_TORCH = importlib.util.find_spec("torch") is not None

FP8_FACTS = (FACTS.replace("fa3_fwd_d128_bf16_causal", "fa3_fwd_d128_e4m3_causal_kernel")
             .replace("dtype bf16", "dtype e4m3"))


# ------------------------------------------------------------------- facts

def test_fp8_facts():
    kf = F.parse_facts(FP8_FACTS)
    assert kf.dtype == "e4m3" and kf.head_dim == 128 and not kf.decode
    assert "dtype=e4m3" in kf.describe()
    assert F.matches(kf, "e4m3", 128, 128, True, (-1, -1), 0.0)
    assert not F.matches(kf, "bf16", 128, 128, True, (-1, -1), 0.0)
    assert F.DTYPES == ("bf16", "f16", "e4m3")
    bad = {
        FP8_FACTS.replace("head_dim 128", "head_dim 96"): "head_dim and head_dim_v 64, 128 or 256",
        FP8_FACTS.replace("head_dim_v 128", "head_dim_v 192"): "got 128 and 192",
        FP8_FACTS + "varlen 1\n": "dtype e4m3 needs varlen 0",
        FP8_FACTS.replace("head_dim 128", "head_dim 256").replace(
            "head_dim_v 128", "head_dim_v 256") + "split_kv 1\npack_gqa 1\n":
            "dtype e4m3 with split_kv 1 needs head_dim 64 or 128, got 256",
        FP8_FACTS.replace("dtype e4m3", "dtype e5m2"): r"dtype 'e5m2' is not supported "
                                                       r"\(bf16, f16 or e4m3",
    }
    for text, msg in bad.items():
        with pytest.raises(F.FactsError, match=msg):
            F.parse_facts(text)
    ok256 = FP8_FACTS.replace("head_dim 128", "head_dim 256").replace("head_dim_v 128",
                                                                      "head_dim_v 256")
    assert F.parse_facts(ok256).head_dim == 256
    # the FP8 decoding kernel (head dim 64 or 128)
    dec = F.parse_facts(FP8_FACTS + "split_kv 1\npack_gqa 1\n")
    assert dec.decode and dec.dtype == "e4m3"
    # 64-row tiles: the GQA-packed decoding kernel's only (one q descale a kv head)
    rows64 = FP8_FACTS.replace("block_m 128", "block_m 64")
    assert F.parse_facts(rows64 + "split_kv 1\npack_gqa 1\n").block_m == 64
    with pytest.raises(F.FactsError, match="dtype e4m3 needs block_m 128 with block_n"):
        F.parse_facts(rows64)


FP8_TILE_WHY = (" (the kernel reads q's descale per 128-row block and k's per 128 keys, and "
                "the compiler builds e4m3 kernels only with those tiles and no cluster; "
                "another tile would read descales out of bounds)")
FP8_TILES = ("block_m 128 with block_n 128, 160, 192 or 224 (above 128 at head dim 64 or "
             "128), or block_m 192 (head dim 64) with block_n 128 or 160, got ")


def test_fp8_facts_tile_grid_and_head_dims():
    """An FP8 kernel has tiles of 128 keys and 128 rows (192 at head dim
    64), equal head dims and no cluster: other tiles, clusters and head_dim
    != head_dim_v are refused by name (as fa3rt.c refuses them, same
    words); persistent CTAs are taken."""
    import re
    who = "facts of kernel 'fa3_fwd_d128_e4m3_causal_kernel': dtype e4m3 needs "
    bad = {
        FP8_FACTS.replace("head_dim_v 128", "head_dim_v 256"):
            "head_dim_v equal to head_dim, got 128 and 256 (the compiler builds FP8 kernels "
            "of equal head dims only)",
        FP8_FACTS.replace("head_dim 128", "head_dim 256"): "head_dim_v equal to head_dim, "
                                                           "got 256 and 128",
        FP8_FACTS.replace("block_n 128", "block_n 176"):
            FP8_TILES + "128 and 176" + FP8_TILE_WHY,
        FP8_FACTS.replace("block_n 128", "block_n 256"): FP8_TILES + "128 and 256",
        FP8_FACTS.replace("block_m 128", "block_m 64"):
            FP8_TILES + "64 and 128" + FP8_TILE_WHY,
        # 192 rows only at head dim 64 (three warpgroups' registers)
        FP8_FACTS.replace("block_m 128", "block_m 192"): FP8_TILES + "192 and 128",
        FP8_FACTS + "cluster_m 2\n": "cluster_m 1, got 2" + FP8_TILE_WHY,
        FP8_FACTS.replace("grid tiles", "grid persistent") + "cluster_m 2\n":
            "cluster_m 1, got 2",
        # the order: head dims, the tile, the cluster
        FP8_FACTS.replace("head_dim_v 128", "head_dim_v 256").replace("block_n 128",
                                                                      "block_n 64"):
            "head_dim_v equal to head_dim",
        FP8_FACTS.replace("block_n 128", "block_n 64") + "cluster_m 2\n":
            FP8_TILES + "128 and 64",
    }
    for text, msg in bad.items():
        with pytest.raises(F.FactsError, match="^" + re.escape(who + msg)):
            F.parse_facts(text)
    assert F.parse_facts(FP8_FACTS + "cluster_m 1\n").cluster_m == 1
    assert F.parse_facts(FP8_FACTS.replace("grid tiles", "grid persistent")).persistent
    d64 = (FP8_FACTS.replace("head_dim 128", "head_dim 64")
           .replace("head_dim_v 128", "head_dim_v 64")
           .replace("block_m 128", "block_m 192"))
    assert F.parse_facts(d64).block_m == 192
    # FA3's wider kv tiles: 160, 192 or 224 keys with 128 rows, 160 with 192
    for bn in (160, 192, 224):
        assert F.parse_facts(FP8_FACTS.replace("block_n 128", f"block_n {bn}")).block_n == bn
    assert F.parse_facts(d64.replace("block_n 128", "block_n 160")).block_n == 160
    with pytest.raises(F.FactsError, match=re.escape(FP8_TILES + "128 and 160")):
        F.parse_facts(FP8_FACTS.replace("head_dim 128", "head_dim 256")
                      .replace("head_dim_v 128", "head_dim_v 256")
                      .replace("block_n 128", "block_n 160"))
    with pytest.raises(F.FactsError, match=re.escape(FP8_TILES + "192 and 192")):
        F.parse_facts(d64.replace("block_n 128", "block_n 192"))


def test_fp8_facts_tile_grid_and_head_dims_alike(rt):
    """libfa3rt refuses the same facts with the same message."""
    cases = [
        (FP8_FACTS.replace("head_dim_v 128", "head_dim_v 256"), "head_dim_v equal to head_dim"),
        (FP8_FACTS.replace("block_n 128", "block_n 176"), "or 160, got 128 and 176"),
        (FP8_FACTS.replace("block_m 128", "block_m 192"), "or 160, got 192 and 128"),
        (FP8_FACTS + "cluster_m 2\n", "cluster_m 1, got 2"),
    ]
    for text, msg in cases:
        with pytest.raises(rt.Fa3RuntimeError) as c:
            rt.parse_facts_c(text)
        with pytest.raises(F.FactsError) as p:
            F.parse_facts(text)
        assert msg in str(p.value)
        assert str(p.value) in str(c.value), (str(c.value), str(p.value))


def test_fp8_facts_parse_alike(rt):
    c, p = rt.parse_facts_c(FP8_FACTS), F.parse_facts(FP8_FACTS)
    assert c.dtype == rt.DTYPES["e4m3"] == 3 and p.dtype == "e4m3"
    for text in (FP8_FACTS + "varlen 1\n", FP8_FACTS.replace("head_dim 128", "head_dim 96")):
        with pytest.raises(rt.Fa3RuntimeError):
            rt.parse_facts_c(text)


# --------------------------------------------------------- runtime, no GPU

def _bshd(rt, ptr, B, S, H, D):
    return rt.tensor(ptr, (B, H, S, D), (S * H * D, D, H * D, 1))


def _fp8_args(rt, B=2, Sq=1000, Skv=700, Hq=8, Hkv=2, **kw):
    return rt.fwd_args(_bshd(rt, 1 << 20, B, Sq, Hq, 128), _bshd(rt, 2 << 20, B, Skv, Hkv, 128),
                       _bshd(rt, 3 << 20, B, Skv, Hkv, 128), _bshd(rt, 4 << 20, B, Sq, Hq, 128),
                       5 << 20, None, "e4m3", **kw)


def test_fp8_plan_through_ctypes(rt):
    """fwd_args' FP8 fields reach fa3rt_fwd_plan where its header puts them."""
    f = rt.parse_facts_c(FP8_FACTS)
    L = rt.plan(f, _fp8_args(rt))                      # no descales: all 1.0
    assert (L.B, L.Sq, L.Skv, L.Hq, L.Hkv) == (2, 1000, 700, 8, 2)
    a = _fp8_args(rt, o_dtype="bf16", q_descale=6 << 20, q_descale_strides=(64, 8, 1),
                  k_descale=7 << 20, k_descale_strides=(2, 1, 0), v_descale=8 << 20,
                  v_descale_strides=(0, 0))
    assert (a.q_descale, a.q_descale_stride_b, a.q_descale_stride_h, a.q_descale_stride_m) == \
        (6 << 20, 64, 8, 1)
    assert (a.k_descale_stride_b, a.k_descale_stride_h, a.k_descale_stride_n) == (2, 1, 0)
    assert a.o_dtype == rt.DTYPES["bf16"] and a.dtype == rt.DTYPES["e4m3"]
    rt.plan(f, a)
    # what the runtime checks of them, by their names
    a.q_descale += 2
    with pytest.raises(rt.Fa3RuntimeError, match="q_descale pointer .* 4-byte aligned"):
        rt.plan(f, a)
    a.q_descale -= 2
    a.v_descale = 0
    a.v_descale_stride_b = 4
    with pytest.raises(rt.Fa3RuntimeError, match="strides of an absent descale must be 0"):
        rt.plan(f, a)
    with pytest.raises(rt.Fa3RuntimeError, match="o_dtype f16 does not match"):
        rt.plan(f, _fp8_args(rt, o_dtype="f16"))
    # descales for a bf16 kernel: refused, not ignored
    fb = rt.parse_facts_c(FACTS)
    args = rt.fwd_args(_bshd(rt, 1 << 20, 2, 1000, 8, 128), _bshd(rt, 2 << 20, 2, 700, 2, 128),
                       _bshd(rt, 3 << 20, 2, 700, 2, 128), _bshd(rt, 4 << 20, 2, 1000, 8, 128),
                       0, None, "bf16", k_descale=7 << 20)
    with pytest.raises(rt.Fa3RuntimeError, match="k_descale is set"):
        rt.plan(fb, args)


def test_fp8_args_range_checks(rt):
    E = rt.Fa3ArgumentError
    with pytest.raises(E, match=r"q_descale_strides\[m\] = 2147483648 is out of range"):
        _fp8_args(rt, q_descale=1 << 20, q_descale_strides=(0, 0, 2**31))
    with pytest.raises(E, match="v_descale_strides must have 2 entries"):
        _fp8_args(rt, v_descale_strides=(0, 0, 0))
    with pytest.raises(E, match="k_descale = -1 is out of range"):
        _fp8_args(rt, k_descale=-1)
    with pytest.raises(ValueError, match="o_dtype must be None or one of"):
        _fp8_args(rt, o_dtype="f8")


# ------------------------------------------------ flash_attn_func, fake CUDA

@pytest.fixture
def fake():
    """torch's FakeTensorMode: CUDA tensors without a GPU (shapes, dtypes,
    devices, strides; no data)."""
    if not HAVE_TORCH:
        pytest.skip("needs torch")
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True):
        yield torch


def _qkv(torch, B=2, Sq=300, Skv=1041, Hq=8, Hkv=2, D=128, dtype=None):
    dt = torch.float8_e4m3fn if dtype is None else dtype
    mk = lambda S, H: torch.empty(B, S, H, D, device="cuda", dtype=dt)  # noqa: E731
    return mk(Sq, Hq), mk(Skv, Hkv), mk(Skv, Hkv)


def test_fp8_refusals(fake):
    torch = fake
    from fa3.torch_api import (flash_attn_backward, flash_attn_bhsd, flash_attn_func,
                               flash_attn_varlen_func, flash_attn_with_kvcache)
    q, k, v = _qkv(torch)
    f32 = lambda *s: torch.empty(*s, device="cuda")  # noqa: E731
    qb, kb, vb = _qkv(torch, dtype=torch.bfloat16)
    cu = torch.zeros(3, dtype=torch.int32, device="cuda")
    cases = [
        (lambda: flash_attn_func(q.clone().requires_grad_(), k, v), NotImplementedError,
         "forward-only"),
        (lambda: flash_attn_func(q, k, v, k_descale=f32(2, 2).requires_grad_()),
         NotImplementedError, "forward-only"),
        (lambda: flash_attn_func(q, k, v, num_splits=2), NotImplementedError,
         "not split-KV or GQA-packed \\(the FP8 decoding kernel is flash_attn_with_kvcache's\\)"),
        (lambda: flash_attn_func(q, k, v, pack_gqa=True), NotImplementedError, "num_splits=1"),
        (lambda: flash_attn_func(*_qkv(torch, D=96)), NotImplementedError,
         "head dims 64, 128 and 256, got head_dim 96"),
        (lambda: flash_attn_func(q, k, _qkv(torch, D=192)[2]), NotImplementedError,
         "head_dim_v 192"),
        (lambda: flash_attn_func(q, k, _qkv(torch, D=256)[2]), NotImplementedError,
         "the FP8 kernels take head_dim_v equal to head_dim, got head_dim 128, head_dim_v 256"),
        (lambda: flash_attn_func(*_qkv(torch, D=256)[:2], v), NotImplementedError,
         "head_dim_v equal to head_dim, got head_dim 256, head_dim_v 128"),
        (lambda: flash_attn_func(q, kb, v), ValueError, "FP8: all three torch.float8_e4m3fn"),
        (lambda: flash_attn_func(qb, kb, vb, q_descale=f32(2, 8)), ValueError,
         "q_descale given with torch.bfloat16 inputs: descales are for FP8 inputs"),
        (lambda: flash_attn_func(q, k, v, q_descale=f32(2, 8, 2)), ValueError,
         r"q_descale must be .* got shape \(2, 8, 2\) \(ceil\(300 / 128\) = 3 blocks"),
        (lambda: flash_attn_func(q, k, v, k_descale=f32(2, 8)), ValueError,
         r"k_descale must be .*\(2, 2\) or \(2, 2, 9\), got shape \(2, 8\)"),
        (lambda: flash_attn_func(q, k, v, v_descale=f32(2, 2, 9)), ValueError,
         r"v_descale must be .*of shape \(2, 2\), got shape"),
        (lambda: flash_attn_func(q, k, v, v_descale=f32(2, 2).double()), ValueError,
         "float32 tensor on cuda:0.*got torch.float64"),
        (lambda: flash_attn_func(q, k, v, v_descale=torch.empty(2, 2)), ValueError,
         "got torch.float32 on cpu"),
        (lambda: flash_attn_func(q, k, v, v_descale=1.0), TypeError, "must be None or"),
        (lambda: flash_attn_func(q, k, v, out=torch.empty(2, 300, 8, 128, device="cuda",
                                                          dtype=torch.float8_e4m3fn)),
         ValueError, "out must be a torch.bfloat16 tensor"),
        (lambda: flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 10), NotImplementedError,
         "taken by flash_attn_func and flash_attn_with_kvcache only"),
        (lambda: flash_attn_varlen_func(qb[0], kb[0], vb[0], cu, cu, 10, q_descale=f32(2, 2)),
         NotImplementedError, "q_descale is not supported.*flash_attn_func and "
         "flash_attn_with_kvcache take"),
        # the FP8 decoding kernel: FA3's descales, head dim 64 or 128, no rotary
        (lambda: flash_attn_with_kvcache(q, k, v, q_descale=f32(2, 8)), ValueError,
         r"flash_attn_with_kvcache: q_descale must be a float32 tensor on cuda:0: 0-d \(one "
         r"factor\), or of shape \(2, 2\), got shape \(2, 8\)"),
        (lambda: flash_attn_with_kvcache(q, k, v, k_descale=1.0), TypeError,
         "flash_attn_with_kvcache: k_descale must be None or a float32 tensor"),
        (lambda: flash_attn_with_kvcache(q, k, v, k_descale=f32(2, 2, 9)), ValueError,
         r"k_descale must be .* \(2, 2\), got shape \(2, 2, 9\)"),
        (lambda: flash_attn_with_kvcache(qb, kb, vb, k_descale=f32(2, 2)), ValueError,
         "flash_attn_with_kvcache: k_descale given with torch.bfloat16 inputs: descales are "
         "for FP8 q and caches"),
        (lambda: flash_attn_with_kvcache(*_qkv(torch, D=256)), NotImplementedError,
         "the FP8 decoding kernel takes head dim 64 or 128 .*got 256"),
        (lambda: flash_attn_with_kvcache(q[:, :1], k, v, k=k[:, :1], v=v[:, :1],
                                         cache_seqlens=3, rotary_cos=f32(64, 8),
                                         rotary_sin=f32(64, 8)), NotImplementedError,
         "rotary embedding with FP8 q and caches is not supported"),
        (lambda: flash_attn_with_kvcache(q[0], k, v, cu_seqlens_q=torch.tensor(
            [0, 100, 300], dtype=torch.int32, device="cuda"), max_seqlen_q=200),
         NotImplementedError, "FP8 q and caches .*with cu_seqlens_q whose sequences differ"),
        # refused before packed new rows are written: the ragged route, the
        # head dim, and descales with 16-bit tensors (before any route)
        (lambda: flash_attn_with_kvcache(
            q[0], k, v, k=k[0, :4], v=v[0, :4], cache_seqlens=3,
            cu_seqlens_k_new=torch.tensor([0, 2, 4], dtype=torch.int32, device="cuda"),
            cu_seqlens_q=torch.tensor([0, 100, 300], dtype=torch.int32, device="cuda"),
            max_seqlen_q=200), NotImplementedError,
         "FP8 q and caches with packed new rows and ragged packed queries .*refused before "
         "any row is written"),
        (lambda: flash_attn_with_kvcache(
            *_qkv(torch, D=256), k=_qkv(torch, D=256)[1][0, :4], v=_qkv(torch, D=256)[1][0, :4],
            cache_seqlens=3, cu_seqlens_k_new=torch.tensor([0, 2, 4], dtype=torch.int32,
                                                           device="cuda")),
         NotImplementedError, "FP8 decoding kernel takes head dim 64 or 128, got 256 "
         r"\(refused before any row is written\)"),
        (lambda: flash_attn_with_kvcache(qb[0], kb, vb, v_descale=f32(2, 2),
                                         cu_seqlens_q=torch.tensor([0, 100, 300],
                                                                   dtype=torch.int32,
                                                                   device="cuda"),
                                         max_seqlen_q=200), ValueError,
         "flash_attn_with_kvcache: v_descale given with torch.bfloat16 inputs"),
        (lambda: flash_attn_bhsd(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)),
         NotImplementedError, "FP8 .* go through flash_attn_func"),
        (lambda: flash_attn_backward(qb, q, k, v, qb, f32(2, 8, 300)), NotImplementedError,
         "taken by flash_attn_func and flash_attn_with_kvcache only"),
    ]
    for fn, exc, text in cases:
        with pytest.raises(exc, match=text):
            fn()


@pytest.mark.filterwarnings("ignore:Accessing the data pointer of FakeTensor")
def test_fp8_descale_forms(fake):
    """The descales as the runtime takes them: pointer and strides [b, h,
    block] in elements (0 where a dim broadcasts)."""
    torch = fake
    from fa3 import torch_api as T
    dev = torch.device("cuda", 0)
    B, Sq, Skv, Hq, Hkv = 2, 300, 1041, 8, 2
    f32 = lambda *s: torch.empty(*s, device="cuda")  # noqa: E731

    def forms(qd=None, kd=None, vd=None):
        f, keep = T._fp8_descales(torch, qd, kd, vd, dev, B, Sq, Skv, Hq, Hkv)
        return (f["q_descale_strides"], f["k_descale_strides"], f["v_descale_strides"]), keep
    assert forms()[0] == ((0, 0, 0), (0, 0, 0), (0, 0))
    # FA3's [B, Hkv]: q's repeated over its group (a new [B, Hq] tensor)
    s, keep = forms(f32(B, Hkv), f32(B, Hkv), f32(B, Hkv))
    assert s == ((Hq, 1, 0), (Hkv, 1, 0), (Hkv, 1))
    assert tuple(keep[0].shape) == (B, Hq)
    # per q head, blocks, strided views, expanded scalars, 0-d
    s, _ = forms(f32(B, Hq), f32(B, 9, Hkv).transpose(1, 2), f32(()).expand(B, Hkv))
    assert s == ((Hq, 1, 0), (18, 1, 2), (0, 0))
    s, _ = forms(f32(B, Hq, 3), f32(B, Hkv, 9), f32(()))
    assert s == ((24, 3, 1), (18, 9, 1), (0, 0))
    s, keep = forms(f32(B, Hkv, 3))                    # FA3-like per kv head, with blocks
    assert s[0] == (24, 3, 1) and tuple(keep[0].shape) == (B, Hq, 3)
    # a batch of one: its batch stride is never used (0)
    f, _ = T._fp8_descales(torch, None, f32(1, Hkv, 9), None, dev, 1, Sq, Skv, Hq, Hkv)
    assert f["k_descale_strides"] == (0, 9, 1)


def test_fp8_op_schema_and_fake_shapes(fake):
    torch = fake
    from fa3 import torch_ops  # noqa: F401
    op = torch.ops.fa3.flash_attn_fp8_fwd.default
    assert [a.name for a in op._schema.arguments][:6] == ["q", "k", "v", "q_descale",
                                                         "k_descale", "v_descale"]
    q, k, v = _qkv(torch, Sq=10, Skv=20)
    o, lse = op(q, k, v, None, torch.empty(2, 2, device="cuda"), None, None, True, [-1, 0],
                0.0, None, None, None)
    assert tuple(o.shape) == (2, 10, 8, 128) and o.dtype == torch.bfloat16
    assert tuple(lse.shape) == (2, 8, 10) and lse.dtype == torch.float32
    # the bf16 op keeps its schema (no descales)
    assert "q_descale" not in [a.name for a in
                               torch.ops.fa3.flash_attn_fwd.default._schema.arguments]


# --------------------------------------------------- with a GPU: real pointers

def _cuda():
    if not HAVE_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda(), reason="needs torch and a GPU")
def test_fp8_args_reach_the_runtime(rt, monkeypatch):
    """flash_attn_func's FP8 launch, its kernel replaced by one whose fwd
    plans the arguments with libfa3rt against FP8 facts (no cubin needed):
    pointers, strides, dtypes and descales as the runtime reads them."""
    import torch
    from types import SimpleNamespace
    from fa3 import torch_api as T
    facts = rt.parse_facts_c(FP8_FACTS.replace("causal 1", "causal 0")
                             .replace("window_right 0", "window_right -1"))
    seen = []

    def fwd(args, stream):
        seen.append((args, rt.plan(facts, args)))
    kobj = SimpleNamespace(facts=SimpleNamespace(persistent=False), fwd=fwd)
    monkeypatch.setattr(T, "_launchable_kernel", lambda *a, **k: kobj)
    B, Sq, Skv, Hq, Hkv = 2, 300, 1041, 8, 2
    q = torch.randn(B, Sq, Hq, 128, device="cuda").to(torch.float8_e4m3fn)
    k = torch.randn(B, Skv, Hkv, 128, device="cuda").to(torch.float8_e4m3fn)
    qd, kd = torch.rand(B, Hkv, device="cuda"), torch.rand(B, Hkv, 9, device="cuda")
    o, lse = T.flash_attn_func(q, k, k, q_descale=qd, k_descale=kd,
                               v_descale=torch.tensor(2.0, device="cuda"), return_lse=True)
    args, L = seen[-1]
    assert o.dtype == torch.bfloat16 and tuple(o.shape) == (B, Sq, Hq, 128)
    assert (L.B, L.Sq, L.Skv, L.Hq, L.Hkv) == (B, Sq, Skv, Hq, Hkv)
    assert args.dtype == 3 and args.o_dtype == 1 and args.lse == lse.data_ptr()
    assert (args.q_descale_stride_b, args.q_descale_stride_h, args.q_descale_stride_m) == \
        (Hq, 1, 0)
    assert args.k_descale == kd.data_ptr()
    assert (args.k_descale_stride_b, args.k_descale_stride_h, args.k_descale_stride_n) == \
        (Hkv * 9, 9, 1)
    assert (args.v_descale_stride_b, args.v_descale_stride_h) == (0, 0)
    assert args.q.strides[3] == 1 and args.q.strides[2] == Hq * 128     # elements (1 byte)


@pytest.mark.skipif(not _cuda(), reason="needs torch and a GPU")
def test_fp8_compiles_and_captures(rt, monkeypatch):
    """torch.compile(fullgraph=True) traces the FP8 call into
    torch.ops.fa3.flash_attn_fp8_fwd, and a CUDA graph captures it (FA3's q
    descale expanded inside the capture): each launch's arguments planned
    by libfa3rt as in test_fp8_args_reach_the_runtime."""
    import torch
    from types import SimpleNamespace
    import fa3
    from fa3 import torch_api as T
    facts = rt.parse_facts_c(FP8_FACTS)
    seen = []

    def fwd(args, stream):
        seen.append((args.q_descale_stride_b, args.q_descale_stride_h, args.k_descale,
                     rt.plan(facts, args).Hq))
    kobj = SimpleNamespace(facts=SimpleNamespace(persistent=False), fwd=fwd)
    monkeypatch.setattr(T, "_launchable_kernel", lambda *a, **k: kobj)
    B, S, Hq, Hkv = 1, 256, 4, 2
    q = torch.randn(B, S, Hq, 128, device="cuda").to(torch.float8_e4m3fn)
    k = torch.randn(B, S, Hkv, 128, device="cuda").to(torch.float8_e4m3fn)
    qd, kd = torch.rand(B, Hkv, device="cuda"), torch.rand(B, Hkv, 2, device="cuda")

    def f(q, k, qd, kd):
        return fa3.flash_attn_func(q, k, k, causal=True, q_descale=qd, k_descale=kd)
    o = torch.compile(f, fullgraph=True)(q, k, qd, kd)
    torch.cuda.synchronize()
    assert o.dtype == torch.bfloat16 and tuple(o.shape) == (B, S, Hq, 128)
    assert seen[-1] == (0, 1, kd.data_ptr(), Hq)       # B = 1: its stride is never used
    n = len(seen)
    f(q, k, qd, kd)                                    # warm-up, then capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o = f(q, k, qd, kd)
    assert len(seen) == n + 2 and seen[-1][:2] == (0, 1)


# ------------------------------------------------- FP8 decoding (kv cache)

FP8_DECODE_FACTS = (FP8_FACTS.replace("fa3_fwd_d128_e4m3_causal_kernel",
                                      "fa3_fwd_d128_e4m3_causal_decode_kernel")
                    + "split_kv 1\npack_gqa 1\n")


@pytest.mark.filterwarnings("ignore:Accessing the data pointer of FakeTensor")
def test_fp8_kvcache_args_reach_the_runtime(fake, rt, monkeypatch):
    """flash_attn_with_kvcache on e4m3 q and caches with FA3's [B, Hkv]
    descales: the decoding kernel's launch planned by libfa3rt against FP8
    decoding facts (CUDA tensors without a GPU, the CUDA calls stubbed): o
    bfloat16, dtype e4m3 / o_dtype bf16, q's descale per kv head as given
    (not expanded over the q heads: a GQA-packed tile's rows mix them), the
    new rows appended by the kernel (e4m3, 1-byte rows), and packed new
    rows written by torch on bytes."""
    from types import SimpleNamespace
    from fa3 import torch_api as T
    torch = fake
    facts = rt.parse_facts_c(FP8_DECODE_FACTS)
    seen = []

    class Kernel:
        facts = SimpleNamespace(block_n=128, persistent=False)

        def plan(self, args):
            # fake tensors' data pointers are 0: planned on a copy with
            # addresses where the runtime needs them
            a = type(args).from_buffer_copy(args)
            for i, name in enumerate(("q", "k", "v", "o", "k_new", "v_new")):
                t = getattr(a, name)
                if t.shape[0] and not t.ptr:
                    t.ptr = (i + 1) << 24
            a.lse = a.lse or 7 << 24
            a.seqused_k = 6 << 24       # cache_seqlens (a tensor) given
            if a.k_new.shape[0]:
                a.seqlens_out = 8 << 24
            for i, d in enumerate(("q", "k", "v")):
                if any(getattr(a, f"{d}_descale_stride_{x}", 0) for x in "bhmn"):
                    setattr(a, f"{d}_descale", (9 + i) << 24)
            L = rt.plan(facts, a)
            seen.append((args, L, a))
            return L

        def fwd(self, args, stream):
            pass
    monkeypatch.setattr(T, "_launchable_kernel", lambda *a, **k: Kernel())
    monkeypatch.setattr(T, "_launch", lambda torch, dev, run, args: run(args, 0))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setitem(T._device_sms, 0, 132)
    B, Skv, Hq, Hkv, D = 3, 4096, 32, 8, 128
    f8 = torch.float8_e4m3fn
    q = torch.empty(B, 1, Hq, D, device="cuda", dtype=f8)
    kc = torch.empty(B, Skv, Hkv, D, device="cuda", dtype=f8)
    vc = torch.empty(B, Skv, Hkv, D, device="cuda", dtype=f8)
    lens = torch.empty(B, device="cuda", dtype=torch.int32)
    qd, kd = torch.empty(B, Hkv, device="cuda"), torch.empty(B, Hkv, device="cuda")
    o, lse = T.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, q_descale=qd,
                                       k_descale=kd, v_descale=torch.empty((), device="cuda"),
                                       causal=True, return_softmax_lse=True)
    args, L, _ = seen[-1]
    assert o.dtype == torch.bfloat16 and tuple(o.shape) == (B, 1, Hq, D)
    assert tuple(lse.shape) == (B, Hq, 1)
    assert args.dtype == 3 and args.o_dtype == 1 and (L.B, L.Hq, L.Hkv) == (B, Hq, Hkv)
    assert (args.q_descale_stride_b, args.q_descale_stride_h, args.q_descale_stride_m) == \
        (Hkv, 1, 0)
    assert (args.k_descale_stride_b, args.k_descale_stride_h, args.k_descale_stride_n) == \
        (Hkv, 1, 0)
    assert (args.v_descale_stride_b, args.v_descale_stride_h) == (0, 0)
    assert args.k.strides[2] == Hkv * D                  # elements of 1 byte
    # two new rows a batch: the kernel's append, e4m3 rows
    kn = torch.empty(B, 2, Hkv, D, device="cuda", dtype=f8)
    T.flash_attn_with_kvcache(q, kc, vc, k=kn, v=kn, cache_seqlens=lens, q_descale=qd)
    args, L, _ = seen[-1]
    assert args.k_new.shape[2] == 2 and args.q_descale_stride_h == 1
    # packed new rows: written by torch (on bytes), then the decoding kernel
    T.flash_attn_with_kvcache(q, kc, vc, k=kn.flatten(0, 1), v=kn.flatten(0, 1),
                              cu_seqlens_k_new=torch.empty(B + 1, device="cuda",
                                                           dtype=torch.int32),
                              cache_seqlens=lens, k_descale=kd)
    args, L, planned = seen[-1]
    assert args.dtype == 3 and not args.k_new.shape[0] and args.k_descale_stride_b == Hkv
    # a q descale of the per-q-head form is refused by the runtime too
    planned.q_descale = 9 << 24
    planned.q_descale_stride_m = 1
    with pytest.raises(Exception, match="q_descale_stride_m is 1 but kernel "
                                        "fa3_fwd_d128_e4m3_causal_decode_kernel packs"):
        rt.plan(facts, planned)
