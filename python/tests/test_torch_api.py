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


@pytest.mark.parametrize("D,Dv,causal,window,softcap,det", [
    (64, 64, False, (-1, -1), 0.0, False),
    (128, 128, True, (-1, -1), 0.0, False),
    (128, 128, False, (-1, 0), 0.0, False),      # (-1, 0) is causal
    (128, 128, True, (-1, 5), 0.0, False),       # causal forces right = 0
    (64, 64, False, (-7, -3), 0.0, False),       # negative = unbounded
])
def test_check_backward_accepts(D, Dv, causal, window, softcap, det):
    torch_api._check_backward(D, Dv, causal, window, softcap, det)


@pytest.mark.parametrize("D,Dv,causal,window,softcap,det,text", [
    (128, 128, True, (-1, -1), 0.0, True, "deterministic backward is not built yet"),
    (128, 128, True, (-1, -1), 30.0, False, "does not take a softcap yet (softcap=30.0)"),
    (128, 128, False, (256, 0), 0.0, False, "no sliding window (window_size=(256, 0))"),
    (128, 128, False, (-1, 64), 0.0, False, "no sliding window"),
    (96, 96, False, (-1, -1), 0.0, False, "takes head dims 64 and 128, not 96"),
    (256, 256, True, (-1, -1), 0.0, False, "not 256"),
    (128, 64, False, (-1, -1), 0.0, False, "head_dim_v = head_dim, not 64 with 128"),
])
def test_check_backward_refuses(D, Dv, causal, window, softcap, det, text):
    with pytest.raises(NotImplementedError) as e:
        torch_api._check_backward(D, Dv, causal, window, softcap, det)
    assert text in str(e.value)
    if not det:
        assert "torch.no_grad()" in str(e.value)


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
    assert got["dk"] == ((2, 20, 2, 64), False) and got["dq_accum"] == ((2, 8, 10, 64), True)


def test_flash_attn_func_takes_deterministic():
    import inspect
    params = inspect.signature(torch_api.flash_attn_func).parameters
    assert params["deterministic"].default is False
    params = inspect.signature(torch_api.flash_attn_backward).parameters
    assert list(params)[:6] == ["dout", "q", "k", "v", "out", "lse"]


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
    with FakeTensorMode():
        q = torch.empty(2, 10, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 20, 2, 64, dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(2, 8, 10, device="cuda")
        dq, dk, dv = op(q, q, k, k, q, lse, None, True, [-1, 0], 0.0, None, None, None)
    assert tuple(dq.shape) == (2, 10, 8, 64) and tuple(dk.shape) == tuple(dv.shape) == (2, 20, 2, 64)


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
