"""fa3.torch_api without torch (the CPU machine and CI have none): the module
imports, the argument checks shared by the eager call and the traced
(torch.compile) call, and fa3.torch_ops, which needs torch. The GPU side
(torch.compile(fullgraph=True) against the fp32 reference, per-call
overhead): test/gpu/check_torch.py."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fa3 import torch_api

PYDIR = Path(__file__).resolve().parents[1]
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def test_check_shapes_returns_dims():
    # GQA (8 q heads over 2 k/v heads), Sq != Skv, head_dim_v != head_dim
    assert torch_api._check_shapes((2, 10, 8, 64), (2, 20, 2, 64), (2, 20, 2, 32)) == \
        (2, 10, 8, 64, 20, 2, 32)
    assert torch_api._check_shapes((1, 1, 3, 128), (1, 0, 1, 128), (1, 0, 1, 128)) == \
        (1, 1, 3, 128, 0, 1, 128)


@pytest.mark.parametrize("q,k,v,text", [
    ((2, 10, 4, 64), (2, 20, 4, 64), (2, 21, 4, 64), "k and v must agree in [B, Skv, Hkv]"),
    ((2, 10, 4, 64), (2, 20, 4, 64), (1, 20, 4, 64), "k and v must agree"),
    ((2, 10, 4, 64), (3, 20, 4, 64), (3, 20, 4, 64), "batch sizes differ: q 2, k 3"),
    ((2, 10, 4, 64), (2, 20, 4, 128), (2, 20, 4, 128), "q and k head dims differ: 64 and 128"),
    ((2, 10, 3, 64), (2, 20, 2, 64), (2, 20, 2, 64), "q heads (3) must be a multiple"),
    ((2, 10, 4, 64), (2, 20, 0, 64), (2, 20, 0, 64), "of k/v heads (0)"),
])
def test_check_shapes_refuses(q, k, v, text):
    with pytest.raises(ValueError) as e:
        torch_api._check_shapes(q, k, v)
    assert text in str(e.value)


def test_window():
    assert torch_api._window(None) == (-1, -1)
    assert torch_api._window([128, 0]) == (128, 0)      # a list (the op's int[]) -> tuple
    assert torch_api._window((-1, 5)) == (-1, 5)
    for bad in ((1,), (1, 2, 3), []):
        with pytest.raises(ValueError, match=r"window_size must be \(left, right\)"):
            torch_api._window(bad)


def test_op_path():
    # the op's `str?` arguments: None and str as they are, a path-like as its string
    assert torch_api._op_path(None) is None
    assert torch_api._op_path("/k") == "/k"
    assert torch_api._op_path(Path("/a/b")) == "/a/b"


@pytest.mark.parametrize("D,Dv", [(64, 64), (96, 96), (128, 128), (192, 192), (256, 256)])
def test_check_backward_accepts(D, Dv):
    torch_api._check_backward(D, Dv)


@pytest.mark.parametrize("D,Dv,text", [
    (80, 80, "takes head dims 64, 96, 128, 192 and 256, not 80"),
    (192, 128, "head_dim_v = head_dim, not 128 with 192"),
    (128, 64, "head_dim_v = head_dim, not 64 with 128"),
])
def test_check_backward_refuses(D, Dv, text):
    with pytest.raises(NotImplementedError) as e:
        torch_api._check_backward(D, Dv)
    assert text in str(e.value) and "torch.no_grad()" in str(e.value)


def test_tma_ok():
    """Which tensors the backward passes to TMA as they are (fa3rt_tensor's
    rules), and which it copies contiguous first."""
    ok = torch_api._tma_ok
    assert ok((2, 100, 8, 128), (102400, 1024, 128, 1), 2)          # BSHD
    assert ok((2, 100, 8, 128), (102400, 128, 12800, 1), 2)         # BHSD storage
    assert ok((1, 1, 1, 64), (0, 0, 0, 1), 2)                        # extent-1 dims: any stride
    assert not ok((2, 100, 8, 128), (0, 0, 0, 0), 2)                 # sum()'s expanded grad
    assert not ok((2, 100, 8, 128), (102400, 1024, 128, 2), 2)       # strided last dim
    assert not ok((2, 100, 8, 128), (102400, 1028, 128, 1), 2)       # 2056 bytes: not 16k
    assert not ok((2, 100, 8, 128), (0, 1024, 128, 1), 2)            # broadcast batch
    assert ok((2, 100, 8, 8), (6400, 64, 8, 1), 2) and not ok((2, 100, 8, 4), (3200, 32, 4, 1), 2)


def test_bwd_shapes():
    got = torch_api._bwd_shapes(2, 10, 8, 64, 20, 2, 64)
    assert got["dout"] == ((2, 10, 8, 64), False) and got["lse"] == ((2, 8, 10), True)
    assert got["dk"] == ((2, 20, 2, 64), False) and got["dq_accum"] == ((2 * 8 * 64 * 64,), True)  # Sq 10 -> one 64-row tile
    # the deterministic kernel's: 16 tiles' turn counters after them
    det = torch_api._bwd_shapes(2, 10, 8, 64, 20, 2, 64, deterministic=True)
    assert det["dq_accum"] == ((2 * 8 * 64 * 64 + 16,), True) and det["dq"] == got["dq"]


@pytest.mark.parametrize("B,Hq,Sq,D,plain,det", [
    (2, 3, 65, 64, 49152, 49152 + 12),    # 12 tiles: 12 counters
    (1, 3, 65, 64, 24576, 24576 + 8),     # 6 counters, rounded up to 8
    (1, 1, 1, 128, 8192, 8192 + 4),       # 1 counter, rounded up to 4
    (2, 8, 1000, 128, 2 * 8 * 1024 * 128, 2 * 8 * 1024 * 128 + 256),
    (1, 1, 0, 64, 0, 0),                  # no tiles: no counters
])
def test_bwd_dq_accum_words(B, Hq, Sq, D, plain, det):
    """dq_accum's floats (fa3rt_bwd_launch.dq_accum_words): the 64-row
    tiles, and a deterministic kernel's u32 turn counter per tile after
    them, a multiple of 4 words."""
    from fa3 import facts as F
    assert F.bwd_dq_accum_words(B, Hq, Sq, D) == plain
    assert F.bwd_dq_accum_words(B, Hq, Sq, D, deterministic=True) == det


def test_flash_attn_func_takes_deterministic():
    """deterministic=True is taken (the deterministic backward kernel), not
    refused: no refusal message is left, and flash_attn_backward takes it
    too."""
    import inspect
    params = inspect.signature(torch_api.flash_attn_func).parameters
    assert params["deterministic"].default is False
    params = inspect.signature(torch_api.flash_attn_backward).parameters
    assert list(params)[:6] == ["dout", "q", "k", "v", "out", "lse"]
    assert params["deterministic"].default is False
    assert not hasattr(torch_api, "_NOT_DETERMINISTIC")


def _write_bwd_kernel(d, name, **over):
    """A backward kernel's .facts (bf16, head dim 128, causal) and a cubin."""
    from fa3 import facts as F
    keys = {"kernel": name, "dtype": "bf16", "head_dim": 128, "head_dim_v": 128,
            "block_m": 64, "block_n": 128, "threads": 384, "dynamic_smem": 200000,
            "causal": 1, "window_left": -1, "window_right": 0, "softcap": 0, "scale": 0.125,
            "params": F.BWD_KERNEL_PARAMS, "grid": "tiles", "backward": 1, **over}
    (d / f"{name}.facts").write_text("fa3-kernel-facts 1\n" +
                                     "".join(f"{k} {v}\n" for k, v in keys.items()))
    (d / f"{name}.cubin").write_bytes(b"cubin")


def test_select_deterministic_backward_kernel(tmp_path):
    """A deterministic request takes a deterministic backward kernel (facts
    deterministic 1), and a plain request a plain one, whichever sorts
    first; a directory of plain backward kernels answers a deterministic
    request with a LookupError that names it."""
    from fa3 import facts as F
    _write_bwd_kernel(tmp_path, "a_bwd_det", deterministic=1)
    _write_bwd_kernel(tmp_path, "b_bwd")
    torch_api.clear_caches()

    def sel(**kw):
        return torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=tmp_path,
                                       jit=False, backward=True, **kw)
    det = sel(deterministic=True)
    assert det.kernel == "a_bwd_det" and det.deterministic
    assert sel().kernel == "b_bwd" and not sel().deterministic
    # an explicit kernel is checked against the request, deterministic too
    assert torch_api._pick(det, "bf16", 128, 128, True, (-1, -1), 0.0, None, backward=True,
                           deterministic=True) is det
    with pytest.raises(ValueError, match="a_bwd_det: .* tile=64x128 backward deterministic does "
                       "not compute .* softcap=0.0 backward$"):
        torch_api._pick(det, "bf16", 128, 128, True, (-1, -1), 0.0, None, backward=True)
    plain_only = tmp_path / "plain"
    plain_only.mkdir()
    _write_bwd_kernel(plain_only, "b_bwd")
    with pytest.raises(LookupError) as e:
        torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=plain_only, jit=False,
                                backward=True, deterministic=True)
    msg = str(e.value)
    assert "matches dtype=bf16 head_dim=128 causal=1 window=(-1,0) softcap=0 backward " \
        "deterministic." in msg
    assert "Available:\n  b_bwd: dtype=bf16 head_dim=128 causal=1" in msg
    assert F.select_kernel(F.scan_kernel_dir(plain_only)[0], "bf16", 128, 128, True, (-1, -1),
                           0.0, backward=True).kernel == "b_bwd"


def test_launch_picks_the_kernel_for_the_length(tmp_path, monkeypatch):
    """A forward call takes the kernel for its Sq (facts min_seqlen_q), all of
    the variant's loaded at its first call (a CUDA graph captured at another
    length finds its kernel loaded), the lookup memoized per variant; an
    explicit kernel is taken whatever the length; where every kernel asks
    for more rows, the first (by file name) of those that ask least."""
    from fa3 import facts as F
    _write_bwd_kernel(tmp_path, "a_fwd", params=F.KERNEL_PARAMS, backward=0,
                      grid="persistent", block_m=128)
    _write_bwd_kernel(tmp_path, "a_fwd_long", params=F.KERNEL_PARAMS, backward=0,
                      grid="persistent", block_m=192, min_seqlen_q=8192)
    loads = []

    def load(kf, dev, device=None):
        loads.append(kf.kernel)
        return kf
    monkeypatch.setattr(torch_api, "_load", load)
    torch_api.clear_caches()

    def launch(sq, kernel=None):
        return torch_api._launchable_kernel(kernel, "bf16", 128, 128, True, (-1, -1), 0.0,
                                            tmp_path, False, 0, None, seqlen_q=sq).kernel
    assert launch(1) == "a_fwd" and set(loads) == {"a_fwd", "a_fwd_long"}
    loads.clear()
    assert [launch(sq) for sq in (1, 8191, 8192, 1 << 20, 100)] == \
        ["a_fwd", "a_fwd", "a_fwd_long", "a_fwd_long", "a_fwd"]
    assert loads == []
    short = F.load_facts(tmp_path / "a_fwd.facts")
    assert launch(1 << 20, kernel=short) == "a_fwd"
    # only long kernels: the first of those that ask least, at any shorter length
    only_long = tmp_path / "long"
    only_long.mkdir()
    for name, min_q in (("b_long", 8192), ("c_long", 8192), ("d_longer", 65536)):
        _write_bwd_kernel(only_long, name, params=F.KERNEL_PARAMS, backward=0,
                          grid="persistent", block_m=192, min_seqlen_q=min_q)
    torch_api.clear_caches()
    got = [torch_api._launchable_kernel(None, "bf16", 128, 128, True, (-1, -1), 0.0, only_long,
                                        False, 0, None, seqlen_q=sq).kernel
           for sq in (100, 8192, 70000)]
    assert got == ["b_long", "b_long", "d_longer"]


def test_select_backward_kernel_by_window_and_softcap(tmp_path):
    """A backward request takes the backward kernel of its own window and
    softcap (facts window_left, window_right, softcap: the forward's keys),
    deterministic or not; a causal window (L, 0) is the same band with or
    without causal=True; no kernel of another window or softcap stands in,
    and an explicit kernel is checked against the call's softcap."""
    _write_bwd_kernel(tmp_path, "a_bwd_causal")
    _write_bwd_kernel(tmp_path, "b_bwd_softcap", causal=0, window_right=-1, softcap=30)
    _write_bwd_kernel(tmp_path, "c_bwd_causal_w256_0", window_left=256)
    _write_bwd_kernel(tmp_path, "d_bwd_w100_50_softcap_det", causal=0, window_left=100,
                      window_right=50, softcap=30, deterministic=1)
    torch_api.clear_caches()

    def sel(**kw):
        return torch_api.select_kernel("bf16", 128, 128, kernel_dir=tmp_path, jit=False,
                                       backward=True, **kw)
    assert sel(causal=True).kernel == "a_bwd_causal"
    assert sel(softcap=30.0).kernel == "b_bwd_softcap"
    assert sel(causal=True, window_size=(256, 0)).kernel == "c_bwd_causal_w256_0"
    assert sel(window_size=(256, 0)).kernel == "c_bwd_causal_w256_0"
    d = sel(window_size=(100, 50), softcap=30.0, deterministic=True)
    assert d.kernel == "d_bwd_w100_50_softcap_det"
    assert (d.window_left, d.window_right, d.softcap) == (100, 50, 30.0)
    for kw in (dict(window_size=(100, 50), softcap=30.0),         # only a deterministic one
               dict(causal=True, softcap=30.0), dict(window_size=(128, 0)),
               dict(window_size=(100, 50))):
        with pytest.raises(LookupError, match="Available:"):
            sel(**kw)
    b = sel(softcap=30.0)
    assert torch_api._pick(b, "bf16", 128, 128, False, (-1, -1), 30.0, None,
                           backward=True) is b
    with pytest.raises(ValueError, match="b_bwd_softcap: .* softcap=30 .*backward does not "
                       "compute .* softcap=0.0 backward$"):
        torch_api._pick(b, "bf16", 128, 128, False, (-1, -1), 0.0, None, backward=True)


def _run(code):
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)


def test_torch_api_does_not_import_torch():
    r = _run("import sys, fa3.torch_api; print('torch' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.skipif(HAVE_TORCH, reason="torch is installed here")
def test_torch_ops_needs_torch():
    r = _run("import fa3.torch_ops")
    assert r.returncode != 0 and "No module named 'torch'" in r.stderr


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_op_schema_and_fake_shapes():
    import torch
    from fa3 import torch_ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = torch.ops.fa3.flash_attn_fwd.default
    args = [a.name for a in op._schema.arguments]
    assert args[:8] == ["q", "k", "v", "softmax_scale", "causal", "window_size", "softcap",
                        "kernel_dir"]
    # the backward's flag, kept by the op's autograd (a default: older calls still fit)
    assert args[-1] == "deterministic" and op._schema.arguments[-1].default_value is False
    with FakeTensorMode():
        q = torch.empty(2, 10, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 20, 2, 64, dtype=torch.bfloat16, device="cuda")
        v = torch.empty(2, 20, 2, 32, dtype=torch.bfloat16, device="cuda")
        o, lse = op(q, k, v, None, True, [-1, 0], 0.0, None, None, None)
    assert tuple(o.shape) == (2, 10, 8, 32) and o.dtype == torch.bfloat16
    assert tuple(lse.shape) == (2, 8, 10) and lse.dtype == torch.float32


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_backward_op_schema_and_fake_shapes():
    import torch
    from fa3 import torch_ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = torch.ops.fa3.flash_attn_bwd.default
    args = [a.name for a in op._schema.arguments]
    assert args[:6] == ["dout", "q", "k", "v", "out", "lse"]
    assert args[-1] == "deterministic" and op._schema.arguments[-1].default_value is False
    with FakeTensorMode():
        q = torch.empty(2, 10, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 20, 2, 64, dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(2, 8, 10, device="cuda")
        dq, dk, dv = op(q, q, k, k, q, lse, None, True, [-1, 0], 0.0, None, None, None)
        dq2, _, _ = op(q, q, k, k, q, lse, None, True, [-1, 0], 0.0, None, None, None, True)
    assert tuple(dq.shape) == (2, 10, 8, 64) and tuple(dk.shape) == tuple(dv.shape) == (2, 20, 2, 64)
    assert tuple(dq2.shape) == (2, 10, 8, 64)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_autograd_hands_window_and_softcap_to_the_backward(monkeypatch):
    """flash_attn_func with grad, a sliding window and a softcap (taken now,
    not refused): the op's autograd calls the backward op with the
    forward's causal, window_size, softcap, kernel_dir and deterministic,
    so that the backward kernel looked up is the variant's (on fake CUDA
    tensors: no kernel runs); a value head dim the backward does not take
    (192 with 128) is refused before the forward."""
    import types
    import torch
    from fa3 import torch_ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    seen = []

    def bwd(dout, q, k, v, out, lse, softmax_scale, causal, window_size, softcap, kernel_dir,
            kernel_facts, jit, deterministic=False):
        seen.append((causal, list(window_size), softcap, kernel_dir, deterministic))
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    monkeypatch.setattr(torch.ops.fa3, "flash_attn_bwd", types.SimpleNamespace(default=bwd))
    with FakeTensorMode():
        def leaf(*shape):
            return torch.empty(*shape, dtype=torch.bfloat16, device="cuda").requires_grad_()
        q, k, v = leaf(1, 10, 4, 64), leaf(1, 20, 2, 64), leaf(1, 20, 2, 64)
        o = torch_api.flash_attn_func(q, k, v, causal=True, window_size=(100, 0), softcap=30.0,
                                      kernel_dir="/kernels", deterministic=True)
        # the op's registered backward, called as the engine calls it (the
        # engine itself needs a CUDA device for CUDA tensors, fake or not,
        # from torch 2.15)
        dq, dk, dv = o.grad_fn.apply(torch.ones_like(o), None)[:3]
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
        q2, k2, v2 = leaf(1, 10, 4, 192), leaf(1, 20, 2, 192), leaf(1, 20, 2, 128)
        with pytest.raises(NotImplementedError, match="head_dim_v = head_dim, not 128 with 192"):
            torch_api.flash_attn_func(q2, k2, v2, window_size=(100, 50), softcap=30.0)
    assert seen == [(True, [100, 0], 30.0, "/kernels", True)]


def test_fp8_launch_asks_for_the_kernel_of_its_length(monkeypatch):
    """The FP8 forward asks for the kernel of its Sq, as the bf16 one does
    (an FP8 variant's long-sequence kernel, facts min_seqlen_q, is taken
    from that length: fa3-compile's <name>_long_kernel), and says whether
    k's descales are per 128 keys (by_length then keeps to kernels of
    whole descale blocks): a block stride of 0 is per head or one factor."""
    from types import SimpleNamespace
    asked = []

    class Picked(Exception):
        pass

    def launchable(*args, **kw):
        asked.append((kw.get("seqlen_q", 0), kw.get("k_block_descales", False)))
        raise Picked
    monkeypatch.setattr(torch_api, "_launchable_kernel", launchable)
    for sq, k_strides in ((100, (0, 0, 0)), (9000, (8, 1, 0)), (9000, (568, 71, 1))):
        monkeypatch.setattr(torch_api, "_check_fp8",
                            lambda *a, sq=sq, **k: (2, sq, 8, 128, 9100, 8, 128))
        monkeypatch.setattr(torch_api, "_fp8_descales",
                            lambda *a, ks=k_strides, **k: ({"k_descale_strides": ks}, ()))
        fake_torch = SimpleNamespace(bfloat16="bf16", float32="f32",
                                     cuda=SimpleNamespace(device=object,
                                                          current_device=lambda: 0))
        q = SimpleNamespace(device=SimpleNamespace(index=0))
        with pytest.raises(Picked):
            torch_api._eager_fp8(fake_torch, q, q, q, None, None, None, None, True, (-1, -1),
                                 0.0, False, "dir", None, None, None, None)
    assert asked == [(100, False), (9000, False), (9000, True)]


def test_backward_default_scale_is_the_forwards(monkeypatch):
    """softmax_scale=None in the backward takes the forward kernel's default
    scale (a forward compiled with --scale X and a default backward must
    not silently disagree); the backward kernel's own when the variant has
    no forward kernel."""
    from types import SimpleNamespace
    from fa3 import torch_api
    fwd = SimpleNamespace(facts=SimpleNamespace(scale=0.5))
    bwd = SimpleNamespace(facts=SimpleNamespace(scale=0.125))
    asked = []

    def launchable(kernel, dt, D, Dv, causal, window, softcap, kdir, jit, dev, device,
                   varlen=False, backward=False):
        asked.append(backward)
        return fwd
    monkeypatch.setattr(torch_api, "_launchable_kernel", launchable)
    args = ("bf16", 128, 128, True, (-1, 0), 0.0, "dir", False, 0, None)
    assert torch_api._forward_scale(*args, bwd) == 0.5 and asked == [False]

    def missing(*a, **k):
        raise LookupError("no forward kernel")
    monkeypatch.setattr(torch_api, "_launchable_kernel", missing)
    assert torch_api._forward_scale(*args, bwd) == 0.125


# ---- the decoding kernel: flash_attn_with_kvcache, flash_attn_func's num_splits ----

def test_flash_attn_with_kvcache_signature():
    """FA3's flash_attn_with_kvcache (hopper/flash_attn_interface.py): its
    arguments in its order and with its defaults, then ours (keyword-only)."""
    import inspect
    params = inspect.signature(torch_api.flash_attn_with_kvcache).parameters
    fa3 = ["q", "k_cache", "v_cache", "k", "v", "qv", "rotary_cos", "rotary_sin",
           "cache_seqlens", "cache_batch_idx", "cache_leftpad", "page_table", "cu_seqlens_q",
           "cu_seqlens_k_new", "max_seqlen_q", "rotary_seqlens", "q_descale", "k_descale",
           "v_descale", "softmax_scale", "causal", "window_size", "attention_chunk", "softcap",
           "rotary_interleaved", "scheduler_metadata", "num_splits", "pack_gqa", "sm_margin",
           "return_softmax_lse"]
    assert list(params)[:len(fa3)] == fa3
    assert params["num_splits"].default == 0 and params["causal"].default is False
    assert params["window_size"].default == (-1, -1) and params["softcap"].default == 0.0
    assert params["return_softmax_lse"].default is False
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY
               for n in ("kernel_dir", "kernel", "jit", "ctas_per_sm"))
    assert params["ctas_per_sm"].default == 0
    import fa3
    assert fa3.flash_attn_with_kvcache is torch_api.flash_attn_with_kvcache
    assert fa3.flash_attn_func is torch_api.flash_attn_func
    params = inspect.signature(torch_api.flash_attn_func).parameters
    assert params["num_splits"].default == 1 and params["pack_gqa"].default is None


@pytest.mark.parametrize("kw,text", [
    ({"qv": 1}, "qv is not supported: pass None"),
    ({"scheduler_metadata": 1}, "scheduler_metadata is not supported"),
])
def test_flash_attn_with_kvcache_refuses_what_is_not_built(kw, text):
    """Refused by name before anything else (no torch, no GPU needed)."""
    with pytest.raises(NotImplementedError) as e:
        torch_api.flash_attn_with_kvcache(None, None, None, **kw)
    assert text in str(e.value) and str(e.value).startswith("flash_attn_with_kvcache: ")


def test_get_scheduler_metadata():
    """FA3's get_scheduler_metadata, its arguments in its order: None (the
    split count is the runtime's host-side choice over the cache's
    capacity: nothing to precompute), which flash_attn_with_kvcache takes;
    what the decoding call refuses is refused here by the same names."""
    import inspect
    import fa3
    f = torch_api.get_scheduler_metadata
    assert fa3.get_scheduler_metadata is f
    assert list(inspect.signature(f).parameters) == [
        "batch_size", "max_seqlen_q", "max_seqlen_k", "num_heads_q", "num_heads_kv", "headdim",
        "cache_seqlens", "qkv_dtype", "headdim_v", "cu_seqlens_q", "cu_seqlens_k_new",
        "cache_leftpad", "page_size", "max_seqlen_k_new", "causal", "window_size",
        "attention_chunk", "has_softcap", "num_splits", "pack_gqa", "sm_margin"]
    assert f(4, 1, 4096, 32, 8, 128, None, causal=True, page_size=64, num_splits=3) is None
    # packed queries are taken (flash_attn_with_kvcache's cu_seqlens_q), and
    # cu_seqlens_k_new, with max_seqlen_k_new new rows or without (then unused, as in FA3)
    assert f(4, 1, 4096, 32, 8, 128, None, cu_seqlens_q=1, cu_seqlens_k_new=1) is None
    assert f(4, 1, 4096, 32, 8, 128, None, cu_seqlens_k_new=1, max_seqlen_k_new=4) is None
    cases = [
        (dict(attention_chunk=-8), ValueError, "attention_chunk must be 0 (off) to 2^31-1"),
        (dict(num_splits=129), ValueError, "num_splits must be 0 (the heuristic) to 128"),
        (dict(sm_margin=-1), ValueError, "sm_margin must be >= 0"),
    ]
    for kw, err, text in cases:
        with pytest.raises(err) as e:
            f(1, 1, 64, 8, 8, 128, None, **kw)
        assert str(e.value).startswith("get_scheduler_metadata: ") and text in str(e.value)


@pytest.mark.parametrize("kw,err,text", [
    ({"num_splits": 129}, ValueError, "num_splits must be 0 (the heuristic) to 128, got 129"),
    ({"num_splits": -1}, ValueError, "got -1"),
    ({"num_splits": 2.0}, TypeError, "num_splits must be an integer, got float"),
    ({"sm_margin": -2}, ValueError, "sm_margin must be >= 0"),
    ({"sm_margin": "4"}, TypeError, "sm_margin must be an integer, got str"),
    ({"ctas_per_sm": 3}, ValueError, "ctas_per_sm must be 0 (the runtime's choice), 1 (one "
     "CTA a SM) or 2 (as many as fit), got 3"),
    ({"ctas_per_sm": -1}, ValueError, "got -1"),
    ({"ctas_per_sm": 1.0}, TypeError, "ctas_per_sm must be an integer, got float"),
])
def test_flash_attn_with_kvcache_checks_numbers(kw, err, text):
    with pytest.raises(err) as e:
        torch_api.flash_attn_with_kvcache(None, None, None, **kw)
    assert str(e.value).startswith("flash_attn_with_kvcache: ") and text in str(e.value)


def test_num_splits():
    assert torch_api._num_splits("f", 0) == 0 and torch_api._num_splits("f", 128) == 128
    assert torch_api._num_splits("f", True) == 1    # an index, as operator.index takes it
    with pytest.raises(ValueError, match=r"^f: num_splits must be 0 \(the heuristic\) to 128"):
        torch_api._num_splits("f", 2**70)


@pytest.mark.parametrize("value,err,text", [
    (-1, ValueError, "cache_seqlens must be 0 to k_cache's Skv, got -1"),
    (2**31, ValueError, "got 2147483648"),
    (True, TypeError, "cache_seqlens must be an int or a 1-D torch.int32 tensor of the batch's "
     "lengths, got bool"),
])
def test_flash_attn_with_kvcache_checks_an_int_cache_seqlens(value, err, text):
    """An int cache_seqlens (FA3 takes one) is checked before torch; its
    upper bound, Skv, with the shapes."""
    with pytest.raises(err) as e:
        torch_api.flash_attn_with_kvcache(None, None, None, cache_seqlens=value)
    assert str(e.value).startswith("flash_attn_with_kvcache: ") and text in str(e.value)


def test_cache_seqlens_int():
    """An int cache_seqlens passes its range check before torch is needed;
    anything else passes on to the tensor checks."""
    assert torch_api._cache_seqlens_int("f", 0) == 0
    assert torch_api._cache_seqlens_int("f", 2**31 - 1) == 2**31 - 1
    marker = object()   # a tensor, say: checked with torch
    assert torch_api._cache_seqlens_int("f", marker) is marker


def test_k_and_v_are_appended_not_refused():
    """k and v (new keys and values written into the cache before the
    attention, FA3's) are taken now: not in the refused list, and what FA3
    refuses about them is refused before torch (v alone, which FA3 ignores,
    too): they go together, and with cache_seqlens."""
    cases = [
        ({"k": 1}, "flash_attn_with_kvcache: k and v (the new keys and values to append to the "
         "cache) must be given together, got k alone"),
        ({"v": 1, "cache_seqlens": 3}, "must be given together, got v alone"),
        ({"k": 1, "v": 1}, "flash_attn_with_kvcache: k and v (new keys and values to append) "
         "need cache_seqlens: each batch's rows before the append, where its new rows go (FA3 "
         "requires it with k and v too)"),
        ({"k": 1, "v": 1, "page_table": 1}, "need cache_seqlens"),
    ]
    for kw, text in cases:
        with pytest.raises(ValueError) as e:
            torch_api.flash_attn_with_kvcache(None, None, None, **kw)
        assert str(e.value) == text or text in str(e.value), str(e.value)
    assert torch_api._append_needs("f", None, 1, None) == (
        "f: k and v (the new keys and values to append to the cache) must be given together, "
        "got v alone")


def test_check_paged_shapes():
    """A paged call's shapes (no torch needed): q [B, Sq, Hq, D], the pools
    [num_pages, page_size, Hkv, D / Dv], the table [B, max_pages]; the
    logical Skv is max_pages * page_size (FA3's)."""
    f = torch_api._check_paged_shapes
    assert f("f", (3, 1, 32, 128), (100, 64, 8, 128), (100, 64, 8, 128), (3, 20)) == \
        (3, 1, 32, 128, 1280, 8, 128)
    assert f("f", (2, 4, 64, 192), (7, 16, 8, 192), (7, 16, 8, 128), (2, 1)) == \
        (2, 4, 64, 192, 16, 8, 128)
    # the pool's pages need not be B
    assert f("f", (5, 1, 8, 64), (1, 256, 1, 64), (1, 256, 1, 64), (5, 4))[4] == 1024
    bad = [
        ((2, 1, 8, 64), (10, 64, 2, 64), (10, 32, 2, 64), (2, 3),
         "f: k_cache and v_cache must agree in [num_pages, page_size, Hkv], got (10, 64, 2, 64) "
         "and (10, 32, 2, 64)"),
        ((2, 1, 8, 64), (10, 64, 2, 64), (9, 64, 2, 64), (2, 3), "must agree in"),
        ((2, 1, 8, 64), (10, 64, 2, 128), (10, 64, 2, 64), (2, 3),
         "q and k head dims differ: 64 and 128"),
        ((2, 1, 8, 64), (10, 64, 3, 64), (10, 64, 3, 64), (2, 3),
         "the number of q heads (8) must be a multiple of the number of k/v heads (3)"),
        ((2, 1, 8, 64), (0, 64, 2, 64), (0, 64, 2, 64), (2, 3),
         "f: k_cache and v_cache have no pages (shape (0, 64, 2, 64)): a page table needs a "
         "pool of at least one page"),
        ((2, 1, 8, 64), (10, 256, 2, 64), (10, 256, 2, 64), (2, 2**23),
         "f: max_pages_per_seq 8388608 * page_size 256 = 2147483648 keys is out of range "
         "(at most 2^31-1)"),
    ]
    for qs, ks, vs, ts, text in bad:
        with pytest.raises(ValueError) as e:
            f("f", qs, ks, vs, ts)
        assert text in str(e.value), str(e.value)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_check_page_table_with_torch():
    """page_table as the kernel's: int32 [B, max_pages] on q's device (CPU
    tensors stand in for the device's: no entry is read); its row stride in
    entries, a copy where its rows are not plain."""
    import torch
    cpu = torch.device("cpu")

    def check(x, B=3):
        return torch_api._check_page_table(torch, "f", x, cpu, B)
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    got, stride = check(t)
    assert got is t and stride == 4
    wide = torch.arange(30, dtype=torch.int32).reshape(3, 10)
    got, stride = check(wide[:, :4])          # a column slice: the wider row stride
    assert got.data_ptr() == wide.data_ptr() and stride == 10 and got.shape == (3, 4)
    got, stride = check(wide[:, ::2])         # strided columns: a copy
    assert got.is_contiguous() and stride == 5 and got.tolist() == wide[:, ::2].tolist()
    got, stride = check(t[:1].expand(3, 4))   # rows that overlap: a copy
    assert got.is_contiguous() and stride == 4
    got, stride = check(wide[1:2, :3], B=1)   # one batch: its columns
    assert stride == 3
    bad = [
        ([[0]], TypeError, "f: page_table must be a 2-D torch.int32 tensor [B, "
         "max_pages_per_seq] of page indices, got list"),
        (t.long(), ValueError, "f: page_table must be a 2-D torch.int32 tensor [B, "
         "max_pages_per_seq] on cpu, got torch.int64 of shape (3, 4) on cpu"),
        (t[0], ValueError, "got torch.int32 of shape (4,)"),
        (t[:2], ValueError, "f: page_table must have 3 rows (one per batch), got 2"),
        (t[:, :0], ValueError, "f: page_table has no columns (max_pages_per_seq = 0)"),
    ]
    for x, err, text in bad:
        with pytest.raises(err) as e:
            check(x)
        assert text in str(e.value), str(e.value)


@pytest.mark.skipif(HAVE_TORCH, reason="torch is installed here")
def test_decoding_calls_need_torch_past_the_checks():
    """Arguments that pass the checks above reach torch (ImportError here)."""
    with pytest.raises(ImportError):
        torch_api.flash_attn_with_kvcache(None, None, None, page_table=[[0]])
    with pytest.raises(ImportError):
        torch_api.flash_attn_with_kvcache(None, None, None, num_splits=3)
    with pytest.raises(ImportError):
        torch_api.flash_attn_func(None, None, None, num_splits=0)
    with pytest.raises(ImportError):
        torch_api.flash_attn_with_kvcache(None, None, None, cache_seqlens=17)
    with pytest.raises(ImportError):
        torch_api.flash_attn_with_kvcache(None, None, None, cache_seqlens=[1, 2])
    with pytest.raises(ImportError):   # an append that passes the checks above
        torch_api.flash_attn_with_kvcache(None, None, None, k=1, v=1, cache_seqlens=3)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_check_cache_seqlens_with_torch():
    """cache_seqlens as the kernel's seqUsedK (CPU tensors stand in for the
    device's: the checks read no value)."""
    import torch
    cpu = torch.device("cpu")

    def check(x, B=3, Skv=100):
        return torch_api._check_cache_seqlens(torch, "f", x, cpu, B, Skv)
    assert check(None) is None
    assert check(100) is None                     # every key: no array
    t = check(17)
    assert t.dtype == torch.int32 and t.tolist() == [17, 17, 17] and t.device == cpu
    assert check(0).tolist() == [0, 0, 0]
    lens = torch.tensor([0, 5, 100], dtype=torch.int32)
    assert check(lens) is lens
    strided = torch.tensor([1, 9, 2, 9, 3, 9], dtype=torch.int32)[::2]
    assert check(strided).is_contiguous() and check(strided).tolist() == [1, 2, 3]
    bad = [
        (101, ValueError, "cache_seqlens must be 0 to k_cache's Skv = 100, got 101"),
        (-1, ValueError, "got -1"),
        (2.0, TypeError, "must be an int or a 1-D torch.int32 tensor of the batch's lengths, "
         "got float"),
        (True, TypeError, "got bool"),
        (lens.long(), ValueError, "cache_seqlens must be a 1-D torch.int32 tensor on cpu, got "
         "torch.int64 of shape (3,)"),
        (lens[None], ValueError, "of shape (1, 3)"),
        (lens[:2], ValueError, "cache_seqlens must have 3 entries (one per batch), got 2"),
        (lens.float().requires_grad_(), ValueError, "got torch.float32"),
    ]
    for x, err, text in bad:
        with pytest.raises(err) as e:
            check(x)
        assert str(e.value).startswith("f: ") and text in str(e.value), str(e.value)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_decode_op_schema_and_fake_shapes():
    import torch
    from fa3 import torch_ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = torch.ops.fa3.flash_attn_decode_fwd.default
    args = [a.name for a in op._schema.arguments]
    assert args == ["q", "k", "v", "seqused_k", "page_table", "softmax_scale", "causal",
                    "window_size", "softcap", "num_splits", "sm_margin", "kernel_dir",
                    "kernel_facts", "jit", "ctas_per_sm", "leftpad_k", "q_descale",
                    "k_descale", "v_descale"]
    assert op._schema.arguments[-5].default_value == 0
    assert all(a.default_value is None for a in op._schema.arguments[-4:])
    with FakeTensorMode():
        q = torch.empty(2, 1, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 4096, 2, 64, dtype=torch.bfloat16, device="cuda")
        v = torch.empty(2, 4096, 2, 32, dtype=torch.bfloat16, device="cuda")
        o, lse = op(q, k, v, None, None, None, False, [-1, -1], 0.0, 0, 0, None, None, None)
        used = torch.empty(2, dtype=torch.int32, device="cuda")
        o2, lse2 = op(q, k, v, used, None, None, False, [-1, -1], 0.0, 0, 0, None, None, None)
        # a paged cache: pools of 50 pages of 64 rows, o from q and v's Dv
        kp = torch.empty(50, 64, 2, 64, dtype=torch.bfloat16, device="cuda")
        vp = torch.empty(50, 64, 2, 32, dtype=torch.bfloat16, device="cuda")
        table = torch.empty(2, 64, dtype=torch.int32, device="cuda")
        o3, lse3 = op(q, kp, vp, used, table, None, False, [-1, -1], 0.0, 0, 0, None, None,
                      None)
        # a left-padded cache (cache_leftpad): the op's last argument
        o4, lse4 = op(q, k, v, used, None, None, True, [-1, 0], 0.0, 0, 0, None, None, None, 0,
                      used)
        # an FP8 KV cache (e4m3 q, k, v, FA3's [B, Hkv] descales): o bf16
        f8 = torch.float8_e4m3fn
        d = torch.empty(2, 2, device="cuda")
        o5, lse5 = op(q.to(f8), k.to(f8), k.to(f8), used, None, None, True, [-1, 0], 0.0, 0, 0,
                      None, None, None, 0, None, d, d, d)
    assert o5.dtype == torch.bfloat16 and tuple(o5.shape) == (2, 1, 8, 64)
    assert tuple(lse5.shape) == (2, 8, 1)
    assert tuple(o4.shape) == (2, 1, 8, 32) and tuple(lse4.shape) == (2, 8, 1)
    assert tuple(o.shape) == (2, 1, 8, 32) and o.dtype == torch.bfloat16
    assert tuple(lse.shape) == (2, 8, 1) and lse.dtype == torch.float32
    assert tuple(o2.shape) == (2, 1, 8, 32) and tuple(lse2.shape) == (2, 8, 1)
    assert tuple(o3.shape) == (2, 1, 8, 32) and tuple(lse3.shape) == (2, 8, 1)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_check_cache_seqlens_leaves_room_for_appended_rows():
    """With snew new rows a batch (k and v appended), an int cache_seqlens
    must leave room for them (0 to Skv - snew) and is always a tensor (the
    append reads where its rows go); a tensor's values stay the caller's."""
    import torch
    cpu = torch.device("cpu")

    def check(x, snew, B=3, Skv=100):
        return torch_api._check_cache_seqlens(torch, "f", x, cpu, B, Skv, snew)
    assert check(95, 5).tolist() == [95, 95, 95]       # exactly full after the append
    assert check(0, 5).tolist() == [0, 0, 0]
    assert check(0, 100).tolist() == [0, 0, 0]
    assert check(100, 0) is None                          # no append: every key, no array
    lens = torch.tensor([0, 5, 100], dtype=torch.int32)
    assert check(lens, 5) is lens                         # values: the caller's contract
    assert check(None, 5) is None                         # _decode refuses this first
    for x, snew, text in [(96, 5, "f: cache_seqlens must be 0 to k_cache's Skv - Snew = 100 - "
                           "5 = 95 (room for the 5 new rows of k and v a batch), got 96"),
                          (100, 1, "Skv - Snew = 100 - 1 = 99"),
                          (-1, 5, "got -1")]:
        with pytest.raises(ValueError) as e:
            check(x, snew)
        assert text in str(e.value), str(e.value)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_check_append_with_torch():
    """k and v to append (FA3's k_new, v_new): [B, Snew, Hkv, D / Dv] of
    q's dtype and device, B from q, Hkv and head dims from the caches, Snew
    at most Skv; the caches written in place need a contiguous last dim
    (CPU tensors stand in for the device's: nothing is launched)."""
    import torch
    bf = torch.bfloat16
    q = torch.empty(2, 1, 8, 64, dtype=bf)
    kc, vc = torch.empty(2, 100, 2, 64, dtype=bf), torch.empty(2, 100, 2, 32, dtype=bf)
    dims = torch_api._check_shapes(q.shape, kc.shape, vc.shape)

    def check(k, v, kc=kc, vc=vc, dims=dims):
        return torch_api._check_append(torch, "f", q, kc, vc, k, v, dims)
    assert check(torch.empty(2, 5, 2, 64, dtype=bf), torch.empty(2, 5, 2, 32, dtype=bf)) == 5
    assert check(torch.empty(2, 0, 2, 64, dtype=bf), torch.empty(2, 0, 2, 32, dtype=bf)) == 0
    assert check(torch.empty(2, 100, 2, 64, dtype=bf), torch.empty(2, 100, 2, 32, dtype=bf)) == 100
    # any strides (copied later where the rows are not 16-byte aligned)
    assert check(torch.empty(2, 2, 5, 64, dtype=bf).transpose(1, 2),
                 torch.empty(2, 5, 2, 40, dtype=bf)[..., :32]) == 5
    # a paged cache: the pools' heads and head dims, the logical Skv
    pool_k, pool_v = torch.empty(7, 16, 2, 64, dtype=bf), torch.empty(7, 16, 2, 32, dtype=bf)
    pdims = torch_api._check_paged_shapes("f", q.shape, pool_k.shape, pool_v.shape, (2, 3))
    assert check(torch.empty(2, 48, 2, 64, dtype=bf), torch.empty(2, 48, 2, 32, dtype=bf),
                 pool_k, pool_v, pdims) == 48
    k5, v5 = torch.empty(2, 5, 2, 64, dtype=bf), torch.empty(2, 5, 2, 32, dtype=bf)
    bad = [
        ((1, v5), TypeError, "f: k (the new keys to append) must be a torch.Tensor, got int"),
        ((k5, None), TypeError, "f: v (the new values to append) must be a torch.Tensor, got "
         "NoneType"),
        ((k5[0], v5), ValueError, "f: k must be 4-D [B, Snew, Hkv, D] (the new rows), got shape "
         "(5, 2, 64)"),
        ((k5.half(), v5), ValueError, "f: k must have q's dtype torch.bfloat16, got "
         "torch.float16"),
        ((k5, v5.float()), ValueError, "f: v must have q's dtype"),
        ((k5[:1], v5[:1]), ValueError, "f: k must be [B, Snew, Hkv, D] = [2, Snew, 2, 64] (q's "
         "batch, k_cache's heads and head dim), got (1, 5, 2, 64)"),
        ((torch.empty(2, 5, 1, 64, dtype=bf), v5), ValueError, "got (2, 5, 1, 64)"),
        ((torch.empty(2, 5, 2, 32, dtype=bf), v5), ValueError, "got (2, 5, 2, 32)"),
        ((k5, v5[:, :4]), ValueError, "f: v must be [B, Snew, Hkv, Dv] = [2, 5, 2, 32] (k's "
         "rows, v_cache's head dim), got (2, 4, 2, 32)"),
        ((k5, torch.empty(2, 5, 2, 64, dtype=bf)), ValueError, "got (2, 5, 2, 64)"),
        ((torch.empty(2, 101, 2, 64, dtype=bf), torch.empty(2, 101, 2, 32, dtype=bf)),
         ValueError, "f: k and v have Snew = 101 new rows a batch but the cache holds Skv = 100 "
         "keys"),
        ((k5.clone().requires_grad_(), v5), NotImplementedError, "is forward-only"),
    ]
    for args, err, text in bad:
        with pytest.raises(err) as e:
            check(*args)
        assert text in str(e.value), str(e.value)
    # the caches are written in place: a strided last dim is refused, not copied
    wide = torch.empty(2, 100, 2, 128, dtype=bf)[..., ::2]
    with pytest.raises(ValueError) as e:
        check(k5, v5, kc=wide, dims=torch_api._check_shapes(q.shape, wide.shape, vc.shape))
    assert "f: k_cache must have a contiguous last dim to take the new rows of k and v (it is " \
        "written in place, not copied), got strides (25600, 256, 128, 2)" in str(e.value)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_append_op_schema_and_fake_shapes():
    """torch.ops.fa3.flash_attn_decode_append_fwd: the caches declared
    written (Tensor(a!), Tensor(b!)) and nothing else; the fake gives o and
    lse alone. The decoding op without an append writes nothing."""
    import torch
    from fa3 import torch_ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = torch.ops.fa3.flash_attn_decode_append_fwd.default
    args = op._schema.arguments
    assert [a.name for a in args] == [
        "q", "k_cache", "v_cache", "k_new", "v_new", "seqused_k", "page_table", "softmax_scale",
        "causal", "window_size", "softcap", "num_splits", "sm_margin", "kernel_dir",
        "kernel_facts", "jit", "ctas_per_sm", "leftpad_k", "q_descale", "k_descale",
        "v_descale"]
    written = [a.name for a in args if a.alias_info is not None and a.alias_info.is_write]
    assert written == ["k_cache", "v_cache"]
    assert op._schema.is_mutable
    assert not torch.ops.fa3.flash_attn_decode_fwd.default._schema.is_mutable
    with FakeTensorMode():
        q = torch.empty(2, 1, 8, 64, dtype=torch.bfloat16, device="cuda")
        kc = torch.empty(2, 4096, 2, 64, dtype=torch.bfloat16, device="cuda")
        vc = torch.empty(2, 4096, 2, 32, dtype=torch.bfloat16, device="cuda")
        kn = torch.empty(2, 3, 2, 64, dtype=torch.bfloat16, device="cuda")
        vn = torch.empty(2, 3, 2, 32, dtype=torch.bfloat16, device="cuda")
        used = torch.empty(2, dtype=torch.int32, device="cuda")
        o, lse = op(q, kc, vc, kn, vn, used, None, None, False, [-1, -1], 0.0, 0, 0, None, None,
                    None)
    assert tuple(o.shape) == (2, 1, 8, 32) and o.dtype == torch.bfloat16
    assert tuple(lse.shape) == (2, 8, 1) and lse.dtype == torch.float32


# ---- FA3's names: flash_attn_qkvpacked_func, return_attn_probs ----

@pytest.mark.parametrize("shape, nq, heads", [
    ((2, 10, 3, 4, 64), None, (4, 4)),
    ((2, 10, 3, 4, 64), 4, (4, 4)),
    ((2, 10, 12, 64), 8, (8, 2)),       # GQA 8/2
    ((1, 1, 34, 128), 32, (32, 1)),     # MQA 32/1
])
def test_packed_heads(shape, nq, heads):
    assert torch_api._packed_heads(shape, nq) == heads


@pytest.mark.parametrize("shape, nq, text", [
    ((2, 10, 2, 4, 64), None, "needs 3 at dim 2"),
    ((2, 10, 3, 4, 64), 8, "num_heads_q 8 with a 5-D qkv of 4 heads"),
    ((2, 10, 12, 64), None, "needs num_heads_q"),
    ((2, 10, 12, 64), 9, "12 packed heads are not num_heads_q 9 + 2 Hkv"),
    ((2, 10, 12, 64), 12, "12 packed heads are not num_heads_q 12 + 2 Hkv"),
    ((2, 10, 12, 64), 0, "12 packed heads are not num_heads_q 0 + 2 Hkv"),
    ((10, 12, 64), 4, "got 3-D shape"),
])
def test_packed_heads_refuses(shape, nq, text):
    import re
    with pytest.raises(ValueError, match=re.escape(text)):
        torch_api._packed_heads(shape, nq)


def test_fa3_names():
    """FA3's flash_attn_qkvpacked_func (its arguments by its names and
    defaults, from hopper/flash_attn_interface.py, less the ones ours does
    not take: attention_chunk, sm_margin) and return_attn_probs on
    flash_attn_func; both also as fa3.<name>."""
    import inspect
    import fa3
    params = inspect.signature(torch_api.flash_attn_qkvpacked_func).parameters
    fa3_args = {"qkv": inspect.Parameter.empty, "softmax_scale": None, "causal": False,
                "q_descale": None, "k_descale": None, "v_descale": None,
                "window_size": (-1, -1), "softcap": 0.0, "deterministic": False,
                "num_heads_q": None, "return_attn_probs": False}
    assert {n: params[n].default for n in fa3_args} == fa3_args
    assert list(params)[:3] == ["qkv", "softmax_scale", "causal"]
    # FA3's order, so that its positional calls mean the same here
    assert list(params)[:13] == ["qkv", "softmax_scale", "causal", "q_descale", "k_descale",
                                 "v_descale", "window_size", "attention_chunk", "softcap",
                                 "deterministic", "num_heads_q", "sm_margin",
                                 "return_attn_probs"]
    fa3_order = ["q", "k", "v", "softmax_scale", "causal", "qv", "q_descale", "k_descale",
                 "v_descale", "window_size", "attention_chunk", "softcap", "num_splits",
                 "pack_gqa", "deterministic", "sm_margin", "return_attn_probs"]
    params = inspect.signature(torch_api.flash_attn_func).parameters
    assert list(params)[:len(fa3_order)] == fa3_order
    assert params["return_attn_probs"].default is False
    # ours after FA3's, by keyword only
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY
               for p in list(params.values())[len(fa3_order):])
    assert inspect.signature(torch_api.flash_attn_varlen_func).parameters.keys() >= set(
        fa3_order[3:])
    assert fa3.flash_attn_qkvpacked_func is torch_api.flash_attn_qkvpacked_func


@pytest.mark.parametrize("kw, text", [({"qv": object()}, "qv is not supported")])
def test_flash_attn_func_refuses_fa3_arguments_it_does_not_do(kw, text):
    """Before torch is needed: FA3's qv is refused by name, not ignored
    (attention_chunk's bad values: test_attention_chunk)."""
    with pytest.raises(NotImplementedError, match=text):
        torch_api.flash_attn_func(None, None, None, **kw)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("call,dtype", [("func", "bf16"), ("func", "e4m3"),
                                        ("kvcache", "bf16"), ("backward", "bf16")])
def test_host_overhead_times_calls_that_reach_the_launch(call, dtype):
    """bench/host_overhead.py times the whole eager path: every timed call
    (100 warm-up, 3 batches of --calls) reaches the stubbed launch, none
    stops at a check."""
    import re
    tool = PYDIR.parent / "bench" / "host_overhead.py"
    p = subprocess.run([sys.executable, str(tool), "--call", call, "--dtype", dtype,
                        "--calls", "20"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    m = re.search(r"([0-9.]+) us a call .* (\d+) launches reached", p.stdout)
    assert m and float(m.group(1)) > 0 and int(m.group(2)) == 100 + 3 * 20, p.stdout


# ---- rotary embedding in flash_attn_with_kvcache ----

def _rotary_reference(x, cos, sin, pos, interleaved):
    """FlashAttention's rotary on float64 numbers, element by element: x [B,
    S, H, D], cos/sin [seqlen_ro, rd / 2], pos [B][S] positions."""
    B, S, H, D = x.shape
    rd = 2 * cos.shape[1]
    out = x.double().clone()
    for b in range(B):
        for i in range(S):
            p = pos[b][i]
            for h in range(H):
                for j in range(rd // 2):
                    c, sn = float(cos[p, j]), float(sin[p, j])
                    a, o = (2 * j, 2 * j + 1) if interleaved else (j, j + rd // 2)
                    x1, x2 = float(x[b, i, h, a]), float(x[b, i, h, o])
                    out[b, i, h, a] = x1 * c - x2 * sn
                    out[b, i, h, o] = x1 * sn + x2 * c
    return out


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("interleaved", [True, False])
def test_apply_rotary_matches_a_float64_reference(interleaved):
    """Both pair layouts, a rotary_dim (8) below the head dim (16: the rest
    passes through), per-batch positions; float32 in, so the only error is
    float32 arithmetic (tolerance 1e-5 absolute on values of about 1)."""
    import torch
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 2, 16, generator=g)
    ang = torch.rand(10, 4, generator=g, dtype=torch.float64) * 6.3
    cos, sin = ang.cos().float(), ang.sin().float()
    pos = torch.tensor([[0, 4, 9], [7, 7, 2]])
    got = torch_api._apply_rotary(torch, x, cos, sin, pos, interleaved)
    want = _rotary_reference(x, cos, sin, pos.tolist(), interleaved)
    assert got.dtype == x.dtype and (got.double() - want).abs().max() < 1e-5
    assert torch.equal(got[..., 8:], x[..., 8:])
    # bf16 in, bf16 out: computed in float32, rounded once
    xb = x.bfloat16()
    gb = torch_api._apply_rotary(torch, xb, cos, sin, pos, interleaved)
    wb = _rotary_reference(xb.float(), cos, sin, pos.tolist(), interleaved)
    assert gb.dtype == torch.bfloat16 and (gb.double() - wb).abs().max() < 2e-2


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_rotary_positions():
    import torch
    lens = torch.tensor([5, 0, 9], dtype=torch.int32)
    assert torch_api._rotary_positions(torch, lens, 3, 2, "cpu", True).tolist() == \
        [[5, 6], [0, 1], [9, 10]]
    assert torch_api._rotary_positions(torch, lens, 3, 2, "cpu", False).tolist() == \
        [[5, 5], [0, 0], [9, 9]]
    assert torch_api._rotary_positions(torch, 4, 2, 3, "cpu", True).tolist() == \
        [[4, 5, 6], [4, 5, 6]]


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("causal,window,interleaved,by_rotary_seqlens", [
    (True, (-1, -1), True, False), (False, (-1, -1), False, False),
    (False, (64, 0), True, True)])
def test_kvcache_rotary_rotates_q_and_the_new_keys(monkeypatch, causal, window, interleaved,
                                                   by_rotary_seqlens):
    """FA3's positions: the new keys at p[b], p[b] + 1, ...; q at the same
    positions if causal or with a window, else every row of q at p[b]; p
    is rotary_seqlens where given, else cache_seqlens. What reaches the
    launch (_eager_decode, stubbed, after the call's checks) is q and k
    rotated so; the cache and v are untouched (CPU tensors: the CUDA checks
    stubbed)."""
    import torch
    g = torch.Generator().manual_seed(11)
    B, Sq, Hq, Hkv, D, Skv, Snew = 2, 2, 4, 2, 16, 32, 2
    q = torch.randn(B, Sq, Hq, D, generator=g)
    kc, vc = torch.zeros(B, Skv, Hkv, D), torch.zeros(B, Skv, Hkv, D)
    k, v = torch.randn(B, Snew, Hkv, D, generator=g), torch.randn(B, Snew, Hkv, D, generator=g)
    ang = torch.rand(40, 6, generator=g, dtype=torch.float64) * 6.3
    cos, sin = ang.cos().float(), ang.sin().float()
    lens = torch.tensor([3, 17], dtype=torch.int32)
    rot = torch.tensor([20, 1], dtype=torch.int32)
    seen = {}

    def eager(torch_, q_, k_cache, v_cache, seqused_k, *args, **kw):
        seen.update(q=q_, k=args[-3], v=args[-2], kc=k_cache, lens=seqused_k)
        return "o"
    monkeypatch.setattr(torch_api, "_eager_decode", eager)
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    out = torch_api.flash_attn_with_kvcache(
        q, kc, vc, k=k, v=v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lens,
        rotary_seqlens=rot if by_rotary_seqlens else None, causal=causal,
        window_size=window, rotary_interleaved=interleaved)
    assert out == "o" and seen["kc"] is kc and seen["v"] is v
    assert seen["lens"].tolist() == lens.tolist()
    p = (rot if by_rotary_seqlens else lens).tolist()
    consecutive = causal or window != (-1, -1)
    q_pos = [[p[b] + (i if consecutive else 0) for i in range(Sq)] for b in range(B)]
    k_pos = [[p[b] + i for i in range(Snew)] for b in range(B)]
    assert (seen["q"].double() - _rotary_reference(q, cos, sin, q_pos, interleaved)).abs().max() < 1e-5
    assert (seen["k"].double() - _rotary_reference(k, cos, sin, k_pos, interleaved)).abs().max() < 1e-5


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_kvcache_rotary_refusals(monkeypatch):
    import torch
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    q = torch.zeros(2, 1, 4, 16)
    kc = vc = torch.zeros(2, 8, 2, 16)
    k = v = torch.zeros(2, 1, 2, 16)
    cs = torch.zeros(8, 4)
    f = torch_api.flash_attn_with_kvcache
    cases = [
        (dict(rotary_cos=cs), ValueError, "rotary_cos and rotary_sin go together"),
        (dict(rotary_cos=cs, rotary_sin=cs), ValueError,
         r"rotate the new keys k \(and the queries\): pass k and v"),
        (dict(k=k, v=v, cache_seqlens=2, rotary_cos=torch.zeros(8, 9), rotary_sin=torch.zeros(8, 9)),
         ValueError, r"rotary_cos must be a floating tensor \[seqlen_ro, rotary_dim / 2\] on "
         r"cpu, rotary_dim even, 2 to the head dim 16"),
        (dict(k=k, v=v, cache_seqlens=2, rotary_cos=cs, rotary_sin=torch.zeros(8, 2)),
         ValueError, r"rotary_sin must be .*got torch.float32 \(8, 2\)"),
        (dict(k=k, v=v, cache_seqlens=2, rotary_cos=cs, rotary_sin=cs,
              rotary_seqlens=torch.zeros(3, dtype=torch.int32)), ValueError,
         "flash_attn_with_kvcache: rotary_seqlens must have 2 entries"),
        (dict(k=k, v=v, cache_seqlens=2, rotary_seqlens=torch.zeros(2, dtype=torch.int32)),
         ValueError, "rotary_seqlens gives the rotary embedding's positions"),
        (dict(k=k, v=v, cache_seqlens=torch.zeros(2, dtype=torch.int64), rotary_cos=cs,
              rotary_sin=cs), ValueError,
         "flash_attn_with_kvcache: cache_seqlens must be a 1-D torch.int32 tensor"),
    ]
    for kw, err, text in cases:
        with pytest.raises(err, match=text):
            f(q, kc, vc, **kw)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("with_batch_idx", [False, True])
def test_kvcache_leftpad_reaches_the_launch(monkeypatch, with_batch_idx):
    """cache_leftpad (FA3's) reaches the launch (_eager_decode, stubbed,
    after the call's checks) as the checked int32 [B] tensor, beside
    cache_seqlens unchanged and, with cache_batch_idx, its one-column
    page table (CPU tensors: the CUDA checks stubbed)."""
    import torch
    seen = {}

    def eager(torch_, q_, k_cache, v_cache, seqused_k, *args, **kw):
        seen.update(lens=seqused_k, table=args[-4], leftpad=kw.get("leftpad"))
        return "o"
    monkeypatch.setattr(torch_api, "_eager_decode", eager)
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    q = torch.zeros(2, 1, 4, 16)
    kc = vc = torch.zeros(2, 64, 2, 16)
    lens = torch.tensor([30, 64], dtype=torch.int32)
    # a strided view: the launch gets a contiguous copy of its values
    pad = torch.tensor([[3, 0], [60, 0]], dtype=torch.int32)[:, 0]
    kw = dict(cache_batch_idx=torch.tensor([1, 0], dtype=torch.int32)) if with_batch_idx else {}
    assert torch_api.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, cache_leftpad=pad,
                                             **kw) == "o"
    assert seen["leftpad"].tolist() == [3, 60] and seen["leftpad"].is_contiguous()
    assert seen["lens"].tolist() == [30, 64]
    assert (seen["table"] is None) != with_batch_idx


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_kvcache_leftpad_refusals(monkeypatch):
    """cache_leftpad must be int32 [B] on q's device without grad; not with
    a page table of several pages a batch (a block of keys would start
    inside a page: FA3 refuses leftpad with a paged cache too)."""
    import torch
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    q = torch.zeros(2, 1, 4, 16)
    kc = vc = torch.zeros(2, 64, 2, 16)
    pad = torch.tensor([1, 2], dtype=torch.int32)
    f = torch_api.flash_attn_with_kvcache
    cases = [
        (dict(cache_leftpad=pad.long()), ValueError,
         r"^flash_attn_with_kvcache: cache_leftpad must be a 1-D torch.int32 tensor on cpu, "
         r"got torch.int64"),
        (dict(cache_leftpad=pad[:1]), ValueError, "cache_leftpad must have 2 entries"),
        (dict(cache_leftpad=[1, 2]), TypeError, "cache_leftpad must be a torch.Tensor, got list"),
        (dict(cache_leftpad=pad.float().requires_grad_().int()), None, None),
        (dict(cache_leftpad=pad, page_table=torch.zeros(2, 4, dtype=torch.int32)),
         NotImplementedError, "cache_leftpad with a paged cache of 4 pages a batch "
         r"\(page_table\) is not supported \(nor in FA3\)"),
    ]
    monkeypatch.setattr(torch_api, "_eager_decode", lambda *a, **kw: "o")
    for kw, err, text in cases:
        if err is None:   # an int tensor cannot require grad: taken
            assert f(q, kc, vc, **kw) == "o"
            continue
        paged = "page_table" in kw
        with pytest.raises(err, match=text):
            f(q, torch.zeros(9, 16, 2, 16) if paged else kc,
              torch.zeros(9, 16, 2, 16) if paged else vc, **kw)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_kvcache_cache_batch_idx_is_a_page_table_of_whole_rows(monkeypatch):
    """cache_batch_idx (FA3's): batch b's keys are row idx[b] of the
    contiguous caches, which the kernel's call gets as a page table of one
    page a batch over the caches' rows (the pool: the caches as they are).
    Refused: with a page table, not int32 [B], Skv not a multiple of 8."""
    import torch
    seen = {}

    def decode(torch_, fn, q_, k_cache, v_cache, cache_seqlens, *args, **kw):
        seen.update(kc=k_cache, vc=v_cache, table=args[-4])
        return "o"
    monkeypatch.setattr(torch_api, "_decode", decode)
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    q = torch.zeros(3, 1, 4, 16)
    kc, vc = torch.zeros(5, 64, 2, 16), torch.zeros(5, 64, 2, 16)
    idx = torch.tensor([4, 0, 2], dtype=torch.int32)
    f = torch_api.flash_attn_with_kvcache
    assert f(q, kc, vc, cache_batch_idx=idx, cache_seqlens=7) == "o"
    assert seen["kc"] is kc and seen["vc"] is vc
    assert seen["table"].tolist() == [[4], [0], [2]] and seen["table"].dtype == torch.int32
    cases = [
        (dict(cache_batch_idx=idx, page_table=idx.reshape(3, 1)), ValueError,
         "cache_batch_idx indexes a contiguous cache's rows; with page_table"),
        (dict(cache_batch_idx=idx.long()), ValueError,
         "flash_attn_with_kvcache: cache_batch_idx must be a 1-D torch.int32 tensor"),
        (dict(cache_batch_idx=idx[:2]), ValueError, "cache_batch_idx must have 3 entries"),
    ]
    for kw, err, text in cases:
        with pytest.raises(err, match=text):
            f(q, kc, vc, **kw)
    with pytest.raises(ValueError, match=r"Skv must be a multiple of 8, got shape \(5, 60, 2, 16\)"):
        f(q, torch.zeros(5, 60, 2, 16), torch.zeros(5, 60, 2, 16), cache_batch_idx=idx)


def _attention_ref(torch, q, k, v, scale, causal):
    """One sequence's attention in float64 (q [s, Hq, D], k and v [t, Hkv,
    D]; GQA by repeating the kv heads), causal bottom-right aligned: o [s,
    Hq, Dv] and lse [Hq, s]; a row that sees no key has o 0 and lse -inf
    (the kernels' contract)."""
    s, Hq, _ = q.shape
    t, Hkv, _ = k.shape
    g = Hq // Hkv
    kk = k.double().repeat_interleave(g, dim=1)
    vv = v.double().repeat_interleave(g, dim=1)
    sc = torch.einsum("shd,thd->hst", q.double(), kk) * scale
    if causal:
        i = torch.arange(s).reshape(s, 1)
        j = torch.arange(t).reshape(1, t)
        sc = sc.masked_fill(j > i + (t - s), float("-inf"))
    lse = torch.logsumexp(sc, dim=-1)
    p = torch.exp(sc - lse.unsqueeze(-1)).nan_to_num(0.0)
    return torch.einsum("hst,thd->shd", p, vv), lse


def _stub_kernels(monkeypatch, torch, seen):
    """The two launches flash_attn_with_kvcache's packed queries take,
    stubbed with _attention_ref over what the kernels are given (the
    decoding kernel: [B, Sq] queries over each batch's first seqused_k[b]
    cache rows; the variable-length kernel: packed rows by cu_seqlens_q /
    cu_seqlens_k, seqused_k[b] keys where given), so that a test checks
    the routing's views and layouts, not the kernels."""
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")

    def decode(torch_, q, k, v, seqused_k, scale, causal, *a, **kw):
        seen.append("decode")
        B, Sq, Hq, _ = q.shape
        table = a[10]
        if table is not None:   # batch b's keys: its row of pages
            k = k[table.long()].flatten(1, 2)
            v = v[table.long()].flatten(1, 2)
        o = torch.zeros(B, Sq, Hq, v.shape[3], dtype=torch.float64)
        lse = torch.full((B, Hq, Sq), float("-inf"), dtype=torch.float64)
        for b in range(B):
            n = k.shape[1] if seqused_k is None else int(seqused_k[b])
            o[b], lse[b] = _attention_ref(torch, q[b], k[b, :n], v[b, :n], scale, causal)
        return (o, lse) if a[4] else o

    def varlen(torch_, q, k, v, cu_q, cu_k, seqused_k, max_seqlen_q, scale, causal, window,
               softcap, return_lse, *a, page_table=None):
        seen.append("varlen" if page_table is None else "paged varlen")
        if page_table is not None:
            # the table's pages in order, as the kernel reads its memory
            # (rows page_table.stride(0) entries apart), are the packed rows
            # (fa3rt.h)
            B, cols = page_table.shape
            n = B * (page_table.stride(0) if B > 1 else cols)
            pages = page_table.as_strided((n,), (1,)).long()
            k = k[pages].flatten(0, 1)
            v = v[pages].flatten(0, 1)
        o = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=torch.float64)
        lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=torch.float64)
        for b in range(cu_q.numel() - 1):
            q0, q1, k0 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b])
            assert q1 - q0 <= max_seqlen_q
            n = int(cu_k[b + 1]) - k0 if seqused_k is None else int(seqused_k[b])
            o[q0:q1], lse[:, q0:q1] = _attention_ref(torch, q[q0:q1], k[k0:k0 + n],
                                                     v[k0:k0 + n], scale, causal)
        return (o, lse) if return_lse else o
    monkeypatch.setattr(torch_api, "_eager_decode", decode)
    monkeypatch.setattr(torch_api, "_eager_varlen", varlen)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("lens_q,causal,sliced,lens", [
    ([2, 2, 2], True, False, [5, 40, 17]),        # every sequence max_seqlen_q long
    ([1, 1, 1, 1], False, True, None),            # a decoding step, a sliced cache
    ([1, 3, 0, 5], True, True, [7, 40, 0, 12]),   # ragged: the variable-length kernel
    ([1, 3, 0, 5], False, False, [7, 40, 3, 12]),
    ([4, 1], True, True, None),                   # ragged, every key of a sliced cache
    ([3, 2], False, False, 9),                    # ragged, an int cache_seqlens
])
def test_kvcache_packed_queries(monkeypatch, lens_q, causal, sliced, lens):
    """flash_attn_with_kvcache(cu_seqlens_q=, max_seqlen_q=) on packed q
    [total_q, Hq, D] (FA3's, a serving engine's prefill and decoding
    steps) against each sequence's attention over its cache rows in float64
    (fresh random inputs; the same float64 reference inside the stubbed
    launches, so the tolerance 1e-12 is rounding only): every sequence
    max_seqlen_q long takes the decoding kernel ([B, Sq] queries), a ragged
    batch the variable-length kernel over the cache as packed rows (a
    sliced cache's batch stride 50 rows, not Skv 40); o [total_q, Hq, Dv]
    and lse [Hq, total_q] in FA3's varlen layouts."""
    import torch
    seen = []
    _stub_kernels(monkeypatch, torch, seen)
    gen = torch.Generator().manual_seed(sum(lens_q) * 7 + causal)
    B, Hq, Hkv, D, Dv, Skv = len(lens_q), 4, 2, 16, 8, 40
    Tq, Sq = sum(lens_q), max(lens_q)
    q = torch.randn(Tq, Hq, D, generator=gen)
    kc = torch.randn(B, 50 if sliced else Skv, Hkv, D, generator=gen)[:, :Skv]
    vc = torch.randn(B, 50 if sliced else Skv, Hkv, Dv, generator=gen)[:, :Skv]
    cu_q = torch.tensor([0] + lens_q, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    cache_seqlens = torch.tensor(lens, dtype=torch.int32) if isinstance(lens, list) else lens
    o, lse = torch_api.flash_attn_with_kvcache(
        q, kc, vc, cache_seqlens=cache_seqlens, cu_seqlens_q=cu_q, max_seqlen_q=Sq,
        softmax_scale=0.3, causal=causal, return_softmax_lse=True)
    assert seen == ["decode" if Tq == B * Sq else "varlen"]
    assert tuple(o.shape) == (Tq, Hq, Dv) and tuple(lse.shape) == (Hq, Tq)
    for b in range(B):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        n = Skv if lens is None else lens if isinstance(lens, int) else lens[b]
        want_o, want_lse = _attention_ref(torch, q[q0:q1], kc[b, :n], vc[b, :n], 0.3, causal)
        torch.testing.assert_close(o[q0:q1], want_o, rtol=0, atol=1e-12)
        torch.testing.assert_close(lse[:, q0:q1], want_lse, rtol=0, atol=1e-12)
    # o alone without return_softmax_lse
    seen.clear()
    o2 = torch_api.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=cache_seqlens,
                                           cu_seqlens_q=cu_q, max_seqlen_q=Sq,
                                           softmax_scale=0.3, causal=causal)
    torch.testing.assert_close(o2, o, rtol=0, atol=0)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("lens_q,causal,ps,lens,columns", [
    ([1, 3, 0, 5], True, 16, [7, 40, 0, 12], 3),     # ragged over pages of 16
    ([4, 1, 2], False, 8, None, 4),                  # every key of the table's rows
    ([2, 2], True, 16, [30, 17], 2),                 # max_seqlen_q each: the decoding kernel
    ([5, 1], True, 16, [9, 32], 2),                  # a column slice of a wider table
])
def test_kvcache_packed_queries_paged(monkeypatch, lens_q, causal, ps, lens, columns):
    """Packed queries over a paged cache (SGLang's FA3 call): a ragged batch
    runs the paged variable-length kernel, which reads the table's pages
    in order as packed rows (sequence b's from b * row stride * page_size),
    cache_seqlens[b] of them; against each sequence's attention over its
    pages' rows in float64 (fresh random inputs, a shuffled pool; the
    stubbed launches compute the same float64 reference: tolerance 1e-12,
    rounding only)."""
    import torch
    seen = []
    _stub_kernels(monkeypatch, torch, seen)
    gen = torch.Generator().manual_seed(sum(lens_q) * 11 + ps)
    B, Hq, Hkv, D, Dv = len(lens_q), 4, 2, 16, 8
    Tq, Sq = sum(lens_q), max(lens_q)
    pool = 3 * B * columns
    q = torch.randn(Tq, Hq, D, generator=gen)
    kc = torch.randn(pool, ps, Hkv, D, generator=gen)
    vc = torch.randn(pool, ps, Hkv, Dv, generator=gen)
    wide = torch.randperm(pool, generator=gen).to(torch.int32).reshape(B, 3 * columns)
    sliced = lens_q == [5, 1]
    table = wide[:, :columns] if sliced else wide[:, :columns].contiguous()
    cu_q = torch.tensor([0] + lens_q, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    cache_seqlens = None if lens is None else torch.tensor(lens, dtype=torch.int32)
    o, lse = torch_api.flash_attn_with_kvcache(
        q, kc, vc, cache_seqlens=cache_seqlens, page_table=table, cu_seqlens_q=cu_q,
        max_seqlen_q=Sq, softmax_scale=0.3, causal=causal, return_softmax_lse=True)
    assert seen == ["decode" if Tq == B * Sq else "paged varlen"]
    for b in range(B):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        n = columns * ps if lens is None else lens[b]
        keys = kc[table[b].long()].flatten(0, 1)[:n]
        vals = vc[table[b].long()].flatten(0, 1)[:n]
        want_o, want_lse = _attention_ref(torch, q[q0:q1], keys, vals, 0.3, causal)
        torch.testing.assert_close(o[q0:q1], want_o, rtol=0, atol=1e-12)
        torch.testing.assert_close(lse[:, q0:q1], want_lse, rtol=0, atol=1e-12)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_kvcache_packed_queries_refusals(monkeypatch):
    """What packed queries refuse, by name: max_seqlen_q missing, q not
    3-D, and for a ragged batch what only the decoding kernel takes (a
    paged cache, appending, cache_batch_idx, cache_leftpad, rotary) and
    caches whose batches are not whole numbers of rows apart."""
    import torch
    _stub_kernels(monkeypatch, torch, [])
    q = torch.zeros(5, 4, 16)
    kc = vc = torch.zeros(2, 16, 2, 16)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    lens = torch.tensor([3, 16], dtype=torch.int32)
    f = torch_api.flash_attn_with_kvcache
    i32 = dict(dtype=torch.int32)
    cases = [
        (dict(cu_seqlens_q=cu), ValueError, "max_seqlen_q must be given with cu_seqlens_q"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=2.5), TypeError, "max_seqlen_q must be an integer"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=-1), ValueError, r"max_seqlen_q must be 0 to 2\^31-1"),
        (dict(cu_seqlens_q=cu.long(), max_seqlen_q=3), ValueError,
         "cu_seqlens_q must be a 1-D torch.int32 tensor"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, page_table=torch.zeros(3, 1, **i32)),
         ValueError, "page_table must have 2 rows"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, rotary_sin=torch.zeros(4, 4)),
         NotImplementedError, r"rotary embedding \(rotary_cos, rotary_sin\) with cu_seqlens_q"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, cache_batch_idx=torch.zeros(2, **i32),
              page_table=torch.zeros(2, 1, **i32)), NotImplementedError,
         r"cache_batch_idx with cu_seqlens_q whose sequences differ in length \(q has 5 "
         r"rows, not B 2 \* max_seqlen_q 3\) is not supported"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, k=torch.zeros(2, 1, 2, 16),
              v=torch.zeros(2, 1, 2, 16), cache_seqlens=lens), NotImplementedError,
         r"k and v \(appending\) with cu_seqlens_q"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, cache_batch_idx=torch.zeros(2, **i32)),
         NotImplementedError, "cache_batch_idx with cu_seqlens_q"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, cache_leftpad=torch.zeros(2, **i32)),
         NotImplementedError, "cache_leftpad with cu_seqlens_q"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, rotary_cos=torch.zeros(4, 4),
              rotary_sin=torch.zeros(4, 4), k=torch.zeros(2, 1, 2, 16),
              v=torch.zeros(2, 1, 2, 16), cache_seqlens=lens), NotImplementedError,
         "with cu_seqlens_q"),
        (dict(cu_seqlens_q=torch.tensor([0, 2, 5, 5], **i32), max_seqlen_q=3), ValueError,
         r"must hold B = 3 batches \(cu_seqlens_q's entries - 1\)"),
        (dict(cu_seqlens_q=cu, max_seqlen_q=3, cache_seqlens=lens[:1]), ValueError,
         "cache_seqlens must have 2 entries"),
    ]
    for kw, err, text in cases:
        with pytest.raises(err, match=text) as e:
            f(q, kc, vc, **kw)
        assert str(e.value).startswith("flash_attn_with_kvcache: ")
    # the packed rows of a paged table's pages in i32: B * max_pages * page_size
    big = torch.zeros(1, 1, 2, 16).expand(1, 2**20, 2, 16)
    with pytest.raises(ValueError, match=r"B 2 \* max_pages_per_seq 1024 \* page_size 1048576 "
                       r"rows of pages is out of range \(at most 2\^31-1"):
        f(q, big, big, cu_seqlens_q=cu, max_seqlen_q=3, page_table=torch.zeros(2, 1024, **i32))
    with pytest.raises(ValueError, match=r"q must be a 3-D \[total_q, Hq, D\] tensor"):
        f(q.unsqueeze(0), kc, vc, cu_seqlens_q=cu, max_seqlen_q=3)
    # batches 16 rows apart in k, 24 in v: not one packed tensor of rows
    vbig = torch.zeros(2, 24, 2, 16)[:, :16]
    with pytest.raises(ValueError, match=r"batch stride must be one whole number of its row "
                       r"stride \(>= Skv = 16\), the same for both; v_cache has strides"):
        f(q, kc, vbig, cu_seqlens_q=cu, max_seqlen_q=3)
    # a cache whose rows interleave its batches ([Skv, B] storage)
    kt = torch.zeros(16, 2, 2, 16).transpose(0, 1)
    with pytest.raises(ValueError, match="k_cache has strides"):
        f(q, kt, kt, cu_seqlens_q=cu, max_seqlen_q=3)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("layout,lens,new,packed_q", [
    ("contiguous", [5, 0, 30], [2, 0, 10], None),      # one query a batch: decoding kernel
    ("contiguous", [5, 0, 38], [2, 3, 10], [1, 2, 0]),  # batch 2 past Skv 40: rows dropped
    ("paged", [5, 0, 30], [2, 1, 10], None),
    ("paged", [40, 33, 0], [4, 7, 1], [3, 1, 2]),       # a full cache, one past its end
    ("batch_idx", [7, 12, 0], [1, 5, 2], None),
])
def test_kvcache_packed_new_rows(monkeypatch, layout, lens, new, packed_q):
    """flash_attn_with_kvcache(k, v, cu_seqlens_k_new=) (FA3's packed new
    rows [T_new, Hkv, D]): batch b's rows land in its cache from
    cache_seqlens[b] on (through the page table, or cache_batch_idx's row),
    rows past Skv are dropped (the rest of the cache untouched), and the
    attention covers min(cache_seqlens[b] + new rows, Skv) keys, against
    the float64 reference over the expected cache (fresh random inputs;
    stubbed launches: tolerance 1e-12, rounding only)."""
    _packed_new_rows_case(monkeypatch, layout, lens, new, packed_q)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("layout,lens,new,packed_q,causal,interleaved,rot", [
    ("contiguous", [5, 0, 30], [2, 0, 10], None, True, True, None),
    ("contiguous", [5, 0, 38], [2, 3, 10], [1, 2, 0], True, False, [9, 0, 3]),
    ("paged", [5, 0, 30], [2, 1, 10], None, False, True, [1, 2, 3]),
    ("paged", [40, 33, 0], [4, 7, 1], [3, 1, 2], True, True, None),   # ragged packed q
    ("paged", [4, 17, 0], [2, 2, 2], [2, 2, 2], False, False, None),  # uniform packed q
    ("batch_idx", [7, 12, 0], [1, 5, 2], None, False, False, [30, 0, 7]),
])
def test_kvcache_packed_new_rows_rotary(monkeypatch, layout, lens, new, packed_q, causal,
                                        interleaved, rot):
    """Packed new rows with rotary embedding (FA3's positions): batch b's
    i-th new row rotated at p[b] + i before it is written, q's rows of a
    batch (a sequence's, where packed) at p[b] + i if causal else all at
    p[b]; p is rotary_seqlens where given, else cache_seqlens. Against the
    float64 rotation (_rotary_reference) and attention over the expected
    cache; tolerance 1e-5 (the rotation runs in float32, as FA3's)."""
    _packed_new_rows_case(monkeypatch, layout, lens, new, packed_q, causal,
                          rotary=(interleaved, rot))


def _packed_new_rows_case(monkeypatch, layout, lens, new, packed_q, causal=True, rotary=None):
    """The checks of the two tests above; rotary: None, or (interleaved,
    rotary_seqlens as a list or None)."""
    import torch
    seen = []
    _stub_kernels(monkeypatch, torch, seen)
    gen = torch.Generator().manual_seed(sum(lens) + 3 * sum(new) + len(layout))
    B, Hq, Hkv, D, Skv, ps = 3, 4, 2, 16, 40, 8
    rows_of = {"contiguous": lambda t, b: t[b], "batch_idx": lambda t, b: t[[2, 0, 1][b]]}
    kw = {}
    if layout == "paged":
        pool = 4 * B * (Skv // ps)
        kc = torch.randn(pool, ps, Hkv, D, generator=gen, dtype=torch.float64)
        vc = torch.randn(pool, ps, Hkv, D, generator=gen, dtype=torch.float64)
        table = torch.randperm(pool, generator=gen)[:B * (Skv // ps)].to(torch.int32)
        table = table.reshape(B, Skv // ps)
        kw["page_table"] = table
        rows_of["paged"] = lambda t, b: t[table[b].long()].flatten(0, 1)
    else:
        kc = torch.randn(B, Skv, Hkv, D, generator=gen, dtype=torch.float64)
        vc = torch.randn(B, Skv, Hkv, D, generator=gen, dtype=torch.float64)
        if layout == "batch_idx":
            kw["cache_batch_idx"] = torch.tensor([2, 0, 1], dtype=torch.int32)
    rows = rows_of[layout]
    want_k = [rows(kc, b).clone() for b in range(B)]
    want_v = [rows(vc, b).clone() for b in range(B)]
    kn = torch.randn(sum(new), Hkv, D, generator=gen, dtype=torch.float64)
    vn = torch.randn(sum(new), Hkv, D, generator=gen, dtype=torch.float64)
    cu_new = torch.tensor([0] + new, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    if packed_q is None:
        q = torch.randn(B, 1, Hq, D, generator=gen, dtype=torch.float64)
        qs = [q[b] for b in range(B)]
    else:
        q = torch.randn(sum(packed_q), Hq, D, generator=gen, dtype=torch.float64)
        cu_q = torch.tensor([0] + packed_q, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        kw.update(cu_seqlens_q=cu_q, max_seqlen_q=max(packed_q))
        qs = [q[int(cu_q[b]):int(cu_q[b + 1])] for b in range(B)]
    kn_want, tol = kn, 1e-12
    if rotary is not None:
        interleaved, rot = rotary
        ang = torch.rand(64, 6, generator=gen, dtype=torch.float64) * 6.3
        cos, sin = ang.cos(), ang.sin()
        kw.update(rotary_cos=cos, rotary_sin=sin, rotary_interleaved=interleaved)
        if rot is not None:
            kw["rotary_seqlens"] = torch.tensor(rot, dtype=torch.int32)
        p = rot if rot is not None else lens
        kn_want = torch.cat([_rotary_reference(
            kn[int(cu_new[b]):int(cu_new[b + 1])][None], cos, sin,
            [[p[b] + i for i in range(new[b])]], interleaved)[0] for b in range(B)])
        qs = [_rotary_reference(qs[b][None], cos, sin,
                                [[p[b] + (i if causal else 0) for i in range(qs[b].shape[0])]],
                                interleaved)[0] for b in range(B)]
        tol = 1e-5
    keys = []
    for b in range(B):
        n = min(new[b], Skv - lens[b])
        r0 = int(cu_new[b])
        want_k[b][lens[b]:lens[b] + n] = kn_want[r0:r0 + n]
        want_v[b][lens[b]:lens[b] + n] = vn[r0:r0 + n]
        keys.append(lens[b] + n)
    o, lse = torch_api.flash_attn_with_kvcache(
        q, kc, vc, k=kn, v=vn, cu_seqlens_k_new=cu_new,
        cache_seqlens=torch.tensor(lens, dtype=torch.int32), softmax_scale=0.3, causal=causal,
        return_softmax_lse=True, **kw)
    for b in range(B):
        torch.testing.assert_close(rows(kc, b), want_k[b], rtol=0, atol=tol)
        assert torch.equal(rows(vc, b), want_v[b])
        want_o, want_lse = _attention_ref(torch, qs[b], want_k[b][:keys[b]],
                                          want_v[b][:keys[b]], 0.3, causal)
        got_o = o[b] if packed_q is None else o[int(cu_q[b]):int(cu_q[b + 1])]
        got_lse = lse[b] if packed_q is None else lse[:, int(cu_q[b]):int(cu_q[b + 1])]
        torch.testing.assert_close(got_o, want_o, rtol=0, atol=tol)
        torch.testing.assert_close(got_lse, want_lse, rtol=0, atol=tol)
    if rotary is not None:
        return
    with pytest.raises(ValueError, match="rotary_seqlens gives the rotary embedding's positions"):
        torch_api.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cu_seqlens_k_new=cu_new,
                                          cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                          rotary_seqlens=torch.tensor(lens, dtype=torch.int32),
                                          **kw)
    with pytest.raises(ValueError, match=r"k and v are the packed new rows \[T_new, Hkv, D\]"):
        torch_api.flash_attn_with_kvcache(q, kc, vc, k=kn[None], v=vn[None],
                                          cu_seqlens_k_new=cu_new, cache_seqlens=1, **kw)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_kvcache_packed_new_rows_write_only_their_slots(monkeypatch):
    """Packed new rows write nothing but their batches' slots: rows of k
    before cu_seqlens_k_new[0] and after cu_seqlens_k_new[B] (a padded
    buffer), rows past Skv, and rows whose cache_batch_idx or page-table
    entry lies outside the cache leave it as it was; a call refused by the
    attention's route (ragged packed queries with cache_leftpad) writes
    nothing at all."""
    import torch
    _stub_kernels(monkeypatch, torch, [])
    # the writes are what is checked here (the attention after them: the test above)
    monkeypatch.setattr(torch_api, "_eager_decode", lambda *a, **kw: None)
    gen = torch.Generator().manual_seed(5)
    B, Hq, Hkv, D, Skv = 2, 2, 1, 8, 8
    q = torch.randn(B, 1, Hq, D, generator=gen, dtype=torch.float64)
    kn = torch.randn(7, Hkv, D, generator=gen, dtype=torch.float64)
    f = torch_api.flash_attn_with_kvcache
    lens = torch.tensor([3, 6], dtype=torch.int32)

    def caches(n=B):
        return (torch.randn(n, Skv, Hkv, D, generator=gen, dtype=torch.float64),
                torch.randn(n, Skv, Hkv, D, generator=gen, dtype=torch.float64))
    # rows 1-2 batch 0's, rows 3-5 batch 1's (one past Skv); rows 0 and 6 no batch's
    cu = torch.tensor([1, 3, 6], dtype=torch.int32)
    kc, vc = caches()
    want = kc.clone()
    want[0, 3:5] = kn[1:3]
    want[1, 6:8] = kn[3:5]
    f(q, kc, vc, k=kn, v=kn.clone(), cu_seqlens_k_new=cu, cache_seqlens=lens)
    assert torch.equal(kc, want)
    # cache_batch_idx: batch 1's row is outside the cache (3 rows): not written
    kc, vc = caches(3)
    want = kc.clone()
    want[2, 3:5] = kn[1:3]
    f(q, kc, vc, k=kn, v=kn.clone(), cu_seqlens_k_new=cu, cache_seqlens=lens,
      cache_batch_idx=torch.tensor([2, 7], dtype=torch.int32))
    assert torch.equal(kc, want)
    # refused by the route after it: nothing written
    kc, vc = caches()
    before = kc.clone()
    with pytest.raises(NotImplementedError, match="cache_leftpad with packed new rows and "
                                                  "ragged packed queries"):
        f(q.reshape(2, Hq, D)[:2].repeat(2, 1, 1)[:3], kc, vc, k=kn, v=kn.clone(),
          cu_seqlens_k_new=cu, cache_seqlens=lens,
          cache_leftpad=torch.zeros(B, dtype=torch.int32),
          cu_seqlens_q=torch.tensor([0, 1, 3], dtype=torch.int32), max_seqlen_q=2)
    assert torch.equal(kc, before)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("causal,window,chunk,local", [
    (False, (-1, -1), 0, False), (True, (-1, -1), 0, True), (False, (8, 8), 0, True),
    (False, (-1, -1), 16, True)])
def test_packed_new_rows_rotary_q_positions(monkeypatch, causal, window, chunk, local):
    """q's rows rotated at consecutive positions where FA3 does: causal, or
    local (a window, or attention_chunk: FA3's is_local), else all at the
    batch's position (the rotation's `local`, seen before any route)."""
    import torch
    seen = []

    class Stop(Exception):
        pass

    def spy(torch_, fn, q, cu, cos, sin, interleaved, base, local_):
        seen.append(local_)
        raise Stop
    monkeypatch.setattr(torch_api, "_rotate_queries", spy)
    B, Hq, Hkv, D = 2, 4, 2, 16
    kc = torch.zeros(B, 32, Hkv, D, dtype=torch.float64)
    kn = torch.zeros(3, Hkv, D, dtype=torch.float64)
    with pytest.raises(Stop):
        torch_api.flash_attn_with_kvcache(
            torch.zeros(B, 2, Hq, D, dtype=torch.float64), kc, kc.clone(), k=kn, v=kn.clone(),
            cu_seqlens_k_new=torch.tensor([0, 1, 3], dtype=torch.int32),
            cache_seqlens=torch.tensor([3, 5], dtype=torch.int32), rotary_cos=torch.zeros(64, 4),
            rotary_sin=torch.zeros(64, 4), causal=causal, window_size=window,
            attention_chunk=chunk)
    assert seen == [local]
