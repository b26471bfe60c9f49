"""Launch plans of eager calls (fa3.torch_api._plans): a call repeated with
new tensors of the same metadata launches with the arguments that the
checked, unplanned path builds for it, byte for byte but for its own
addresses; a call that differs in anything the plan depends on is planned
anew; the checks that a plan cannot stand for (grad, alignment) still
refuse; clear_caches() forgets the plans.

Without a GPU: CPU tensors pass for CUDA ones (Tensor.is_cuda patched), the
kernel lookup and the launch are stubbed, and the launched fa3rt_fwd_args
are compared as bytes."""
import ctypes
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from fa3 import runtime, torch_api as T  # noqa: E402


@pytest.fixture
def launches(monkeypatch):
    """The fwd_args each launch got (as bytes) and how many kernel lookups
    the calls made."""
    seen = SimpleNamespace(args=[], lookups=0)

    class Kernel:
        facts = SimpleNamespace(persistent=False)

        def fwd(self, args, stream):
            seen.args.append(bytes(args))
    kernel = Kernel()

    def lookup(*a, **kw):
        seen.lookups += 1
        return kernel
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(T, "_launchable_kernel", lookup)
    monkeypatch.setattr(T, "_launch", lambda torch, dev, run, args: run(args, 0))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    T.clear_caches()
    yield seen
    T.clear_caches()


def _aligned(*shape, dtype=torch.bfloat16):
    """A CPU tensor at a 16-byte aligned address (TMA's rule)."""
    for _ in range(16):
        t = torch.randn(*shape).to(dtype)
        if t.data_ptr() % 16 == 0:
            return t
    raise AssertionError("no 16-byte aligned allocation")


def _args(raw):
    return runtime.FwdArgs.from_buffer_copy(raw)


def _without_addresses(raw):
    """The launch's arguments with its tensors' addresses zeroed."""
    a = _args(raw)
    for name in ("q", "k", "v", "o"):
        getattr(a, name).ptr = 0
    for name in ("lse", "q_descale", "k_descale", "v_descale"):
        setattr(a, name, 0)
    return bytes(a)


def _calls():
    """(name, make inputs, call): bf16 and FP8 calls of several forms."""
    f8 = torch.float8_e4m3fn

    def bf16(B=2, Sq=100, Skv=130, Hq=4, Hkv=2, D=64):
        return (_aligned(B, Sq, Hq, D), _aligned(B, Skv, Hkv, D), _aligned(B, Skv, Hkv, D))

    def fp8(B=2, Sq=100, Skv=300, H=2, D=128):
        return (_aligned(B, Sq, H, D, dtype=f8), _aligned(B, Skv, H, D, dtype=f8),
                _aligned(B, Skv, H, D, dtype=f8))
    ds = lambda *s: torch.rand(*s) + 0.5   # noqa: E731
    return [
        ("bf16", bf16, lambda q, k, v: T.flash_attn_func(q, k, v)),
        ("bf16 masked, lse", bf16,
         lambda q, k, v: T.flash_attn_func(q, k, v, causal=True, window_size=(50, 0),
                                           softcap=30.0, softmax_scale=0.2,
                                           return_lse=True)),
        ("bf16 out=", bf16,
         lambda q, k, v: T.flash_attn_func(q, k, v, out=_aligned(2, 100, 4, 64))),
        ("fp8 [B, H]", fp8,
         lambda q, k, v: T.flash_attn_func(q, k, v, q_descale=ds(2, 2), k_descale=ds(2, 2),
                                           v_descale=ds(2, 2))),
        ("fp8 blocks, 0-d, none", fp8,
         lambda q, k, v: T.flash_attn_func(q, k, v, q_descale=ds(2, 2, 1),
                                           k_descale=ds(2, 2, 3), v_descale=ds(()))),
        ("fp8 no descales", fp8, lambda q, k, v: T.flash_attn_func(q, k, v, causal=True)),
    ]


@pytest.mark.parametrize("name,make,call", _calls(), ids=[c[0] for c in _calls()])
def test_a_planned_call_launches_what_the_checked_path_builds(launches, name, make, call):
    with torch.no_grad():
        call(*make())                       # planned: one lookup
        q, k, v = make()
        out = call(q, k, v)                 # from the plan: no lookup
        assert launches.lookups == 1 and len(launches.args) == 2
        planned = launches.args[-1]
        a = _args(planned)
        o = out[0] if isinstance(out, tuple) else out
        assert (a.q.ptr, a.k.ptr, a.v.ptr, a.o.ptr) == \
            (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr())
        if isinstance(out, tuple):
            assert a.lse == out[1].data_ptr() and out[1].shape == (q.shape[0], q.shape[2],
                                                                   q.shape[1])
        T.clear_caches()
        call(q, k, v)                       # the checked path again
        assert launches.lookups == 2
        assert _without_addresses(launches.args[-1]) == _without_addresses(planned)


def test_descale_addresses_are_the_calls(launches):
    f8 = torch.float8_e4m3fn
    q, k, v = (_aligned(1, 64, 2, 128, dtype=f8) for _ in range(3))
    with torch.no_grad():
        for _ in range(2):
            qd, kd = torch.rand(1, 2) + 0.5, torch.rand(1, 2) + 0.5
            T.flash_attn_func(q, k, v, q_descale=qd, k_descale=kd)
            a = _args(launches.args[-1])
            assert (a.q_descale, a.k_descale, a.v_descale) == (qd.data_ptr(), kd.data_ptr(), 0)
    assert launches.lookups == 1


@pytest.mark.parametrize("change", [
    "causal", "window", "softcap", "scale", "lse", "dtype", "stride", "length", "descale form",
])
def test_a_call_that_differs_is_planned_anew(launches, change):
    base = dict(causal=False, window_size=(-1, -1), softcap=0.0, softmax_scale=None,
                return_lse=False)
    f8 = change == "descale form"
    dtype = torch.float8_e4m3fn if f8 else torch.bfloat16
    q, k, v = (_aligned(2, 128, 2, 128, dtype=dtype) for _ in range(3))
    kw = dict(base, **(dict(q_descale=torch.ones(2, 2)) if f8 else {}))
    with torch.no_grad():
        T.flash_attn_func(q, k, v, **kw)
        T.flash_attn_func(q, k, v, **kw)
        assert launches.lookups == 1
        other = dict(kw)
        if change == "causal":
            other["causal"] = True
        elif change == "window":
            other["window_size"] = (64, 0)
        elif change == "softcap":
            other["softcap"] = 20.0
        elif change == "scale":
            other["softmax_scale"] = 0.3
        elif change == "lse":
            other["return_lse"] = True
        elif change == "dtype":
            q, k, v = (t.to(torch.float16) for t in (q, k, v))
        elif change == "stride":     # [B, H, S, D] storage seen as BSHD
            q = _aligned(2, 2, 128, 128).transpose(1, 2)
        elif change == "length":
            q = _aligned(2, 127, 2, 128)
        else:
            other["q_descale"] = torch.ones(2, 2, 1)
        T.flash_attn_func(q, k, v, **other)
        assert launches.lookups == 2
        a = _args(launches.args[-1])
        if change == "stride":
            assert tuple(a.q.strides) == (2 * 128 * 128, 128 * 128, 128, 1)
        if change == "scale":
            assert a.softmax_scale == pytest.approx(0.3)


def test_what_a_plan_cannot_stand_for_is_still_refused(launches):
    f8 = torch.float8_e4m3fn
    q, k, v = (_aligned(1, 64, 2, 128, dtype=f8) for _ in range(3))
    ds = torch.ones(1, 2)
    with torch.no_grad():
        T.flash_attn_func(q, k, v, q_descale=ds)
    # the FP8 kernels are forward-only: a planned call that records a
    # backward is refused all the same
    with pytest.raises(NotImplementedError, match="forward-only"):
        T.flash_attn_func(q, k, v, q_descale=ds.clone().requires_grad_())
    # an address TMA cannot read (the same metadata, 2 bytes into a buffer)
    qb = _aligned(1, 64, 2, 128)
    with torch.no_grad():
        T.flash_attn_func(qb, qb, qb)
        raw = torch.empty(qb.numel() * 2 + 64, dtype=torch.uint8)
        base = (-raw.data_ptr()) % 16 + 2
        odd = raw[base:base + qb.numel() * 2].view(torch.bfloat16).view(qb.shape)
        with pytest.raises(runtime.Fa3ArgumentError, match="not 16-byte aligned"):
            T.flash_attn_func(odd, qb, qb)
    # not tensors: the checked path's message, not the plan's
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        T.flash_attn_func([1.0], qb, qb)


def test_uncopied_and_unkeyed_calls_are_not_planned(launches):
    q = _aligned(1, 64, 2, 128)
    with torch.no_grad():
        strided = _aligned(1, 64, 2, 256)[..., ::2]     # last dim not contiguous: copied
        for _ in range(2):
            T.flash_attn_func(strided, q, q)
        assert launches.lookups == 2
        for _ in range(2):                             # a list: not keyed by value
            T.flash_attn_func(q, q, q, window_size=[-1, -1])
        assert launches.lookups == 4
        for _ in range(2):                             # a tensor scale: not keyed
            T.flash_attn_func(q, q, q, softmax_scale=torch.tensor(0.1))
        assert launches.lookups == 6


def test_plans_are_bounded(launches, monkeypatch):
    monkeypatch.setattr(T, "_PLANS_MAX", 3)
    with torch.no_grad():
        for s in range(1, 8):
            q = _aligned(1, s, 1, 64)
            T.flash_attn_func(q, q, q)
    assert 1 <= len(T._plans) <= 3
    assert ctypes.sizeof(runtime.FwdArgs) == len(launches.args[-1])


# ---- the decoding kernel (flash_attn_with_kvcache) ----

_DECODE_ADDRESSES = ("lse", "seqused_k", "page_table", "leftpad_k", "seqlens_out", "o_accum",
                     "lse_accum", "q_descale", "k_descale", "v_descale")


def _decode_without_addresses(raw):
    a = _args(raw)
    for name in ("q", "k", "v", "o", "k_new", "v_new"):
        getattr(a, name).ptr = 0
    for name in _DECODE_ADDRESSES:
        setattr(a, name, 0)
    return bytes(a)


@pytest.fixture
def decode_launches(launches, monkeypatch):
    """launches, the stub kernel also planning a split launch (three
    splits, their workspaces) with 64-key blocks."""
    kernel = T._launchable_kernel()
    launches.lookups -= 1
    kernel.facts = SimpleNamespace(persistent=False, block_n=64, kernel=b"stub")
    kernel.plan = lambda args: SimpleNamespace(num_splits=3, o_accum_bytes=4096,
                                               lse_accum_bytes=256)
    monkeypatch.setitem(T._device_sms, 0, 132)
    return launches


def _decode_calls():
    f8 = torch.float8_e4m3fn
    B, Hq, Hkv, D = 2, 8, 2, 128

    def contiguous(dtype=torch.bfloat16):
        return dict(q=_aligned(B, 1, Hq, D, dtype=dtype),
                    k_cache=_aligned(B, 256, Hkv, D, dtype=dtype),
                    v_cache=_aligned(B, 256, Hkv, D, dtype=dtype),
                    cache_seqlens=torch.tensor([100, 7], dtype=torch.int32))

    def paged():
        return dict(q=_aligned(B, 1, Hq, D), k_cache=_aligned(12, 16, Hkv, D),
                    v_cache=_aligned(12, 16, Hkv, D),
                    page_table=torch.randperm(12, dtype=torch.int32)[:10].view(B, 5),
                    cache_seqlens=torch.tensor([80, 3], dtype=torch.int32))

    def appending():
        return dict(contiguous(), k=_aligned(B, 2, Hkv, D), v=_aligned(B, 2, Hkv, D))

    def fp8():
        return dict(contiguous(f8), q_descale=torch.rand(B, Hkv) + 0.5,
                    k_descale=torch.rand(B, Hkv) + 0.5)
    return [("contiguous", contiguous, {}), ("paged", paged, {"return_softmax_lse": True}),
            ("appending", appending, {}), ("fp8", fp8, {"causal": True})]


@pytest.mark.parametrize("name,make,kw", _decode_calls(), ids=[c[0] for c in _decode_calls()])
def test_a_planned_decoding_step_launches_what_the_checked_path_builds(decode_launches, name,
                                                                      make, kw):
    seen = decode_launches
    with torch.no_grad():
        T.flash_attn_with_kvcache(**make(), **kw)
        inputs = make()
        out = T.flash_attn_with_kvcache(**inputs, **kw)
        assert seen.lookups == 1 and len(seen.args) == 2
        planned = seen.args[-1]
        a = _args(planned)
        o = out[0] if isinstance(out, tuple) else out
        assert (a.q.ptr, a.k.ptr, a.v.ptr, a.o.ptr) == tuple(
            t.data_ptr() for t in (inputs["q"], inputs["k_cache"], inputs["v_cache"], o))
        assert a.seqused_k == inputs["cache_seqlens"].data_ptr()
        assert a.num_splits == 3 and a.o_accum and a.lse_accum and a.o_accum != a.lse_accum
        if "page_table" in inputs:
            assert a.page_table == inputs["page_table"].data_ptr()
        # allocated per call: the split workspaces and, appending, the key
        # counts after the append
        (plan,) = T._plans.values()
        assert [w[0] for w in plan.workspaces] == (["seqlens_out"] if "k" in inputs else []) + [
            "o_accum", "lse_accum"]
        if "k" in inputs:
            assert a.k_new.ptr == inputs["k"].data_ptr() and a.seqlens_out
        if "q_descale" in inputs:
            assert (a.q_descale, a.k_descale, a.v_descale) == (
                inputs["q_descale"].data_ptr(), inputs["k_descale"].data_ptr(), 0)
        T.clear_caches()
        T.flash_attn_with_kvcache(**inputs, **kw)
        assert seen.lookups == 2
        assert _decode_without_addresses(seen.args[-1]) == _decode_without_addresses(planned)


def test_a_decoding_step_that_differs_is_planned_anew(decode_launches):
    seen = decode_launches
    B, D = 2, 128
    q = _aligned(B, 1, 8, D)
    kc, vc = _aligned(B, 256, 2, D), _aligned(B, 256, 2, D)
    lens = torch.tensor([100, 7], dtype=torch.int32)
    with torch.no_grad():
        for kw in ({}, {}, {"num_splits": 2}, {"cache_seqlens": lens}, {"cache_seqlens": lens},
                   {"cache_seqlens": lens, "cache_leftpad": lens}):
            T.flash_attn_with_kvcache(q, kc, vc, **kw)
    assert seen.lookups == 4
    assert _args(seen.args[-1]).leftpad_k == lens.data_ptr()


def test_launch_takes_the_raw_stream_and_guards_only_another_device():
    """_launch: torch's current stream of the device as a raw handle; the
    device guard entered only where another device is current (and the
    Stream object's handle where torch has no raw-stream call)."""
    import contextlib
    entered = []

    @contextlib.contextmanager
    def guard(dev):
        entered.append(dev)
        yield

    def fake(current, raw=True):
        C = SimpleNamespace(_cuda_getDevice=lambda: current)
        if raw:
            C._cuda_getCurrentRawStream = lambda dev: 1000 + dev
        cuda = SimpleNamespace(device=guard, current_stream=lambda dev: SimpleNamespace(
            cuda_stream=2000 + dev))
        return SimpleNamespace(_C=C, cuda=cuda)
    run = lambda args, stream: (args, stream)   # noqa: E731
    assert T._launch(fake(0), 0, run, "a") == ("a", 1000) and entered == []
    assert T._launch(fake(0), 1, run, "b") == ("b", 1001) and entered == [1]
    assert T._launch(fake(1, raw=False), 1, run, "c") == ("c", 2001) and entered == [1, 1]
