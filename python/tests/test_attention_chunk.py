"""attention_chunk (fa3.chunks): every route of flash_attn_func,
flash_attn_varlen_func and flash_attn_with_kvcache against the float64
oracle with the chunk mask applied directly (fa3.reference.visible_mask's
chunk), on fresh random inputs. The kernels' launches are stubbed with the
same oracle computing exactly what each launch is given (the fixed-length,
variable-length and decoding kernels' contracts: bottom-right alignment per
sequence, seqused_k, cache_leftpad, page tables, appended rows), so what
is checked is the virtual batches (folds, segments, moved first keys), not
the kernels: the tolerance 1e-12 is float64 rounding only. Unwritten rows
stay NaN and fail the comparison. The kernels themselves with chunks:
test/gpu/check_varlen.py, check_decode.py, check_torch.py."""
import importlib.util

import numpy as np
import pytest

from fa3 import chunks, reference, torch_api

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
TOL = 1e-12


def _ref(q, k, v, scale, causal, window, chunk=0):
    """One sequence: q [s, Hq, D], k, v [t, Hkv, D] (torch) -> o [s, Hq, Dv],
    lse [Hq, s] (torch float64); rows that see no key: o 0, lse -inf."""
    import torch
    o, lse = reference.attention(q.double().permute(1, 0, 2)[None].numpy(),
                                 k.double().permute(1, 0, 2)[None].numpy(),
                                 v.double().permute(1, 0, 2)[None].numpy(),
                                 scale, causal, tuple(window), 0.0, chunk)
    return torch.from_numpy(o[0]).permute(1, 0, 2), torch.from_numpy(lse[0])


def _stub(monkeypatch, seen):
    """The three launches, each the float64 oracle over what it is given."""
    import torch
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")

    def fwd(torch_, q, k, v, scale, causal, window, softcap, return_lse, *a):
        seen.append(("fwd", tuple(q.shape)))
        B, Sq, Hq, _ = q.shape
        o = torch.full((B, Sq, Hq, v.shape[3]), float("nan"), dtype=torch.float64)
        lse = torch.full((B, Hq, Sq), float("nan"), dtype=torch.float64)
        for b in range(B):
            o[b], lse[b] = _ref(q[b], k[b], v[b], scale, causal, window)
        # into out / lse_out where given, as the launch writes them
        return torch_api._copied_out(o, lse, a[2], a[3], return_lse)

    def varlen(torch_, q, k, v, cu_q, cu_k, used, max_q, scale, causal, window, softcap,
               return_lse, kernel_dir, kernel, jit, out=None, lse_out=None, page_table=None):
        seen.append(("varlen" if page_table is None else "paged varlen", cu_q.numel() - 1))
        if page_table is not None:
            pages = page_table.contiguous().flatten().long()
            k, v = k[pages].flatten(0, 1), v[pages].flatten(0, 1)
        o = torch.full((q.shape[0], q.shape[1], v.shape[2]), float("nan"), dtype=torch.float64)
        lse = torch.full((q.shape[1], q.shape[0]), float("nan"), dtype=torch.float64)
        for s in range(cu_q.numel() - 1):
            q0, q1, k0 = int(cu_q[s]), int(cu_q[s + 1]), int(cu_k[s])
            assert 0 <= q1 - q0 <= max_q
            n = int(cu_k[s + 1]) - k0
            if used is not None:
                n = min(max(int(used[s]), 0), n)     # the kernel's clamp
            if q1 > q0:
                o[q0:q1], lse[:, q0:q1] = _ref(q[q0:q1], k[k0:k0 + n], v[k0:k0 + n], scale,
                                               causal, window)
        return torch_api._copied_out(o, lse, out, lse_out, return_lse)

    def decode(torch_, q, k, v, used, scale, causal, window, softcap, n, sm_margin,
               return_lse, kernel_dir, kernel, jit, out, lse_out, table, k_new, v_new,
               ctas_per_sm, leftpad=None, checked=None, fp8_fields=None):
        seen.append(("decode", tuple(q.shape)))
        seen.append(("table columns", None if table is None else table.shape[1],
                     "leftpad", leftpad is not None))
        B, Sq, Hq, _ = q.shape
        if table is not None:     # batch b's rows: its pages in order (views of the pool)
            rows = [k[table[b].long()].flatten(0, 1) for b in range(B)]
            vrows = [v[table[b].long()].flatten(0, 1) for b in range(B)]
        else:
            rows, vrows = list(k), list(v)
        o = torch.full((B, Sq, Hq, v.shape[-1]), float("nan"), dtype=torch.float64)
        lse = torch.full((B, Hq, Sq), float("nan"), dtype=torch.float64)
        for b in range(B):
            end = rows[b].shape[0] if used is None else int(used[b])
            if k_new is not None:    # the append, through the table into the pool
                sn = k_new.shape[1]
                kb, vb = rows[b].clone(), vrows[b].clone()
                kb[end:end + sn], vb[end:end + sn] = k_new[b], v_new[b]
                rows[b], vrows[b] = kb, vb
                end += sn
            start = 0 if leftpad is None else int(leftpad[b])
            o[b], lse[b] = _ref(q[b], rows[b][start:end], vrows[b][start:end], scale, causal,
                                window)
        return (o, lse) if return_lse else o
    monkeypatch.setattr(torch_api, "_eager_fwd", fwd)
    monkeypatch.setattr(torch_api, "_eager_varlen", varlen)
    monkeypatch.setattr(torch_api, "_eager_decode", decode)


def _close(got, want):
    import torch
    torch.testing.assert_close(got.double(), want, rtol=0, atol=TOL, equal_nan=False)


@pytest.mark.parametrize("value,err,text", [
    (-1, ValueError, "attention_chunk must be 0 (off) to 2^31-1 keys, got -1"),
    (2**31, ValueError, "to 2^31-1 keys, got 2147483648"),
    (True, TypeError, "attention_chunk must be an integer (0: off), got bool"),
    (1.5, TypeError, "attention_chunk must be an integer (0: off), got float"),
])
def test_chunk_values_refused(value, err, text):
    """Before torch is needed, each entry point names the bad value."""
    import re
    for f in (lambda: torch_api.flash_attn_func(None, None, None, attention_chunk=value),
              lambda: torch_api.flash_attn_with_kvcache(None, None, None,
                                                        attention_chunk=value),
              lambda: torch_api.get_scheduler_metadata(1, 1, 64, 8, 8, 128, None,
                                                       attention_chunk=value)):
        with pytest.raises(err, match=re.escape(text)):
            f()


def test_segments_cover_every_row_once():
    """fa3.chunks.segments on random ragged batches (CPU tensors): each
    virtual sequence's queries sit in one chunk whose keys are its keys,
    its last query at its last key, every query row in exactly one, no
    sequence over max_seqlen_q = min(max_q, c)."""
    import torch
    rng = np.random.default_rng(7)
    for trial in range(40):
        B = int(rng.integers(1, 5))
        c = int(rng.integers(1, 40))
        sq = rng.integers(0, 60, B)
        cap = rng.integers(0, 60, B)
        used = np.minimum(rng.integers(-3, 70, B), cap) if trial % 2 else None
        sk = cap if used is None else np.clip(used, 0, cap)
        cu_q = torch.tensor(np.concatenate(([0], np.cumsum(sq))), dtype=torch.int32)
        cu_k = torch.tensor(np.concatenate(([0], np.cumsum(cap))), dtype=torch.int32)
        u = None if used is None else torch.tensor(used, dtype=torch.int32)
        sq_, sk_, su, mq = chunks.segments(torch, cu_q, cu_k, u, c, int(sq.max()),
                                           int(cap.max()))
        assert sq_.numel() - 1 == chunks.segment_count(B, c, int(sq.max()), int(cap.max()))
        assert mq == min(int(sq.max()), c)
        claims = np.zeros(int(cu_q[-1]), dtype=int)
        for s in range(sq_.numel() - 1):
            q0, q1, k0, n = int(sq_[s]), int(sq_[s + 1]), int(sk_[s]), int(su[s])
            assert 0 <= q1 - q0 <= mq
            claims[q0:q1] += 1
            if q1 == q0:
                continue
            b = int(np.searchsorted(cu_q.numpy(), q0, side="right")) - 1
            pos0 = q0 - int(cu_q[b]) + int(sk[b]) - int(sq[b])   # the first row's position
            first = (q1 - 1 - int(cu_q[b])) + int(sk[b]) - int(sq[b])
            if first < 0:
                assert n == 0            # rows before the first key see none
                continue
            assert pos0 // c == first // c, "a virtual sequence spans two chunks"
            assert k0 - int(cu_k[b]) == first // c * c and n == min(c, int(sk[b]) - k0 + int(
                cu_k[b]))
            assert k0 + n - 1 - int(cu_k[b]) == first, "its last query is not at its last key"
        assert (claims == 1).all()


@needs_torch
@pytest.mark.parametrize("B,Sq,Skv,c,causal,window,route", [
    (2, 64, 64, 16, True, (-1, -1), "fwd"),       # folded into 8 batches of 16
    (2, 64, 64, 16, False, (5, 3), "fwd"),        # a window inside the chunks
    (1, 50, 50, 16, True, (-1, -1), "varlen"),    # not a multiple: segments
    (2, 10, 70, 16, False, (-1, -1), "varlen"),   # fewer queries than keys
    (2, 40, 20, 8, False, (-1, 2), "varlen"),     # rows before the first key
    (1, 30, 100, 100, False, (-1, -1), "fwd"),    # one chunk of every key: no mask
])
def test_flash_attn_func_chunks(monkeypatch, B, Sq, Skv, c, causal, window, route):
    """flash_attn_func(attention_chunk=c) against the chunk-masked oracle:
    folded (Sq == Skv a multiple of c) through the fixed-length kernel on
    B * Sq / c batches, else the variable-length kernel's segments; GQA,
    Dv != D; o [B, Sq, Hq, Dv] and lse [B, Hq, Sq] and every row written,
    also into out= / lse_out=."""
    import torch
    seen = []
    _stub(monkeypatch, seen)
    gen = torch.Generator().manual_seed(B * 1000 + Sq * 10 + c)
    Hq, Hkv, D, Dv = 4, 2, 16, 8
    q = torch.randn(B, Sq, Hq, D, generator=gen, dtype=torch.float64)
    k = torch.randn(B, Skv, Hkv, D, generator=gen, dtype=torch.float64)
    v = torch.randn(B, Skv, Hkv, Dv, generator=gen, dtype=torch.float64)
    o, lse = torch_api.flash_attn_func(q, k, v, softmax_scale=0.4, causal=causal,
                                       window_size=window, attention_chunk=c,
                                       return_attn_probs=True)
    assert seen[0][0] == route
    if route == "fwd" and c < Skv:
        assert seen[0][1] == (B * Sq // c, c, Hq, D)
    for b in range(B):
        want_o, want_lse = _ref(q[b], k[b], v[b], 0.4, causal, window, c)
        _close(o[b], want_o)
        _close(lse[b], want_lse)
    out = torch.full_like(o, float("nan"))
    lse_out = torch.full((B, Hq, Sq), float("nan"))      # float32, as the kernels write
    r = torch_api.flash_attn_func(q, k, v, softmax_scale=0.4, causal=causal,
                                  window_size=window, attention_chunk=c, out=out,
                                  lse_out=lse_out)
    assert r[0] is out and r[1] is lse_out
    _close(out, o)
    assert torch.equal(lse_out, lse.float())


@needs_torch
def test_flash_attn_func_chunk_gradients_through_the_fold(monkeypatch):
    """Under autograd the folded call's op sees [B * n, c] batches; its
    gradients reach q, k, v through the fold's views as those of the
    chunk-masked attention (a float64 torch stand-in for the op, checked
    against autograd of the directly masked attention)."""
    import torch
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    shapes = []

    def dense(q, k, v, scale, causal, mask=None):
        g = q.shape[2] // k.shape[2]
        kk, vv = k.repeat_interleave(g, 2), v.repeat_interleave(g, 2)
        s = torch.einsum("bshd,bthd->bhst", q, kk) * scale
        Sq, Skv = q.shape[1], k.shape[1]
        if causal:
            i, j = torch.arange(Sq)[:, None], torch.arange(Skv)[None]
            s = s.masked_fill(j > i + Skv - Sq, float("-inf"))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.einsum("bhst,bthd->bshd", torch.softmax(s, -1), vv), \
            torch.logsumexp(s, -1)

    def op_fwd(torch_, q, k, v, scale, causal, window, softcap, return_lse, *a, **kw):
        shapes.append(tuple(q.shape))
        o, lse = dense(q, k, v, scale, causal)
        return (o, lse) if return_lse else o
    monkeypatch.setattr(torch_api, "_op_fwd", op_fwd)
    gen = torch.Generator().manual_seed(3)
    B, S, c = 2, 48, 16
    q, k, v = (torch.randn(B, S, h, 8, generator=gen, dtype=torch.float64, requires_grad=True)
               for h in (4, 2, 2))
    do = torch.randn(B, S, 4, 8, generator=gen, dtype=torch.float64)
    o = torch_api.flash_attn_func(q, k, v, softmax_scale=0.3, causal=True, attention_chunk=c)
    assert shapes == [(B * S // c, c, 4, 8)]
    grads = torch.autograd.grad(o, (q, k, v), do)
    mask = torch.from_numpy(reference.visible_mask(S, S, True, (-1, -1), c))
    qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
    want = dense(qr, kr, vr, 0.3, False, mask)[0]
    want_grads = torch.autograd.grad(want, (qr, kr, vr), do)
    _close(o.detach(), want.detach())
    for g, w in zip(grads, want_grads):
        _close(g, w)


@needs_torch
def test_flash_attn_func_chunk_refusals(monkeypatch):
    """What the segments route cannot take is refused by name: autograd and
    FP8 (variable-length kernels are forward, bf16/f16), a fixed-length
    kernel= ."""
    import torch
    from fa3 import facts
    monkeypatch.setattr(torch_api, "_check_inputs", lambda *a, **kw: "bf16")
    q = torch.zeros(1, 50, 2, 16, requires_grad=True)
    k = torch.zeros(1, 50, 2, 16)
    with pytest.raises(NotImplementedError, match="attention_chunk 16 under autograd needs "
                                                  "Sq == Skv, a multiple of the chunk"):
        torch_api.flash_attn_func(q, k, k, attention_chunk=16)
    q8 = torch.zeros(1, 50, 2, 16).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match="with FP8 inputs needs Sq == Skv"):
        torch_api.flash_attn_func(q8, q8, q8, attention_chunk=16)
    kf = facts.KernelFacts(kernel="fa3_fwd_x", dtype="bf16", head_dim=16, head_dim_v=16,
                           block_m=128, block_n=128, threads=384, dynamic_smem=0,
                           causal=False, window_left=-1, window_right=-1, softcap=0.0,
                           scale=0.25)
    with pytest.raises(ValueError, match="kernel= names fa3_fwd_x, a fixed-length one"):
        torch_api.flash_attn_func(q.detach(), k, k, attention_chunk=16, kernel=kf)
    with pytest.raises(ValueError, match="descales are for FP8 inputs"):
        torch_api.flash_attn_func(q.detach().bfloat16(), k.bfloat16(), k.bfloat16(),
                                  attention_chunk=16, q_descale=torch.ones(()))


def test_changes_nothing():
    """A chunk of at least Skv keys masks nothing where no query sits before
    the first key, or where those queries see no key anyway (causal, or a
    window closed on the right): checked against the oracle's masks."""
    for sq in range(1, 12):
        for skv in range(0, 12):
            for c in (1, 3, 8, 12, 20):
                for causal, window in ((False, (-1, -1)), (True, (-1, -1)), (False, (2, 0)),
                                       (False, (-1, 1))):
                    same = np.array_equal(reference.visible_mask(sq, skv, causal, window),
                                          reference.visible_mask(sq, skv, causal, window, c))
                    claim = chunks.changes_nothing(c, sq, skv, causal or window[1] == 0)
                    assert not claim or same, (sq, skv, c, causal, window)
    assert chunks.changes_nothing(16, 20, 10, True) and not chunks.changes_nothing(16, 20, 10)


def test_fold_descale():
    """FP8 descales of a folded call: [B, H] one row per chunk, [B, H,
    blocks] split at the chunks, 0-d as is; a chunk inside a block of
    scales refused."""
    import torch
    d = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)   # 4 blocks of 128
    f = chunks.fold_descale(torch, "q_descale", d, 2, 2, 256, 128)
    assert tuple(f.shape) == (4, 3, 2)
    for b in range(2):
        for i in range(2):
            assert torch.equal(f[b * 2 + i], d[b, :, 2 * i:2 * i + 2])
    two = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(chunks.fold_descale(torch, "k", two, 2, 4, 64, 128),
                       two.repeat_interleave(4, 0))
    s = torch.tensor(2.0)
    assert chunks.fold_descale(torch, "v", s, 2, 4, 64, 128) is s
    with pytest.raises(NotImplementedError, match="attention_chunk 64, not a multiple of 128"):
        chunks.fold_descale(torch, "q_descale", d, 2, 4, 64, 128)


@needs_torch
@pytest.mark.parametrize("c,causal,window", [(7, True, (-1, -1)), (16, False, (-1, -1)),
                                             (16, False, (9, 0)), (64, True, (-1, -1))])
def test_flash_attn_varlen_func_chunks(monkeypatch, c, causal, window):
    """flash_attn_varlen_func(attention_chunk=c) on a ragged batch (lengths
    0, 1, 17, 40; more queries than keys once; seqused_k below the
    capacity): each sequence against the chunk-masked oracle, every owned
    row written, the rows after the last sequence untouched."""
    import torch
    seen = []
    _stub(monkeypatch, seen)
    gen = torch.Generator().manual_seed(c * 7 + causal)
    lq, cap, used = [17, 0, 1, 40, 9], [30, 5, 1, 40, 3], [25, 5, 1, 40, 3]
    Hq, Hkv, D, Dv = 4, 1, 16, 16
    Tq, Tk = sum(lq) + 3, sum(cap)
    q = torch.randn(Tq, Hq, D, generator=gen, dtype=torch.float64)
    k = torch.randn(Tk, Hkv, D, generator=gen, dtype=torch.float64)
    v = torch.randn(Tk, Hkv, Dv, generator=gen, dtype=torch.float64)
    cu_q = torch.tensor(np.concatenate(([0], np.cumsum(lq))), dtype=torch.int32)
    cu_k = torch.tensor(np.concatenate(([0], np.cumsum(cap))), dtype=torch.int32)
    u = torch.tensor(used, dtype=torch.int32)
    out = torch.full((Tq, Hq, Dv), float("nan"), dtype=torch.float64)
    lse_out = torch.full((Hq, Tq), float("nan"))
    o, lse = torch_api.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(cap),
                                              seqused_k=u, softmax_scale=0.3, causal=causal,
                                              window_size=window, attention_chunk=c,
                                              out=out, lse_out=lse_out)
    assert seen[0][0] == "varlen"
    assert seen[0][1] == chunks.segment_count(len(lq), c, max(lq), max(cap))
    for b, n in enumerate(lq):
        q0, k0 = int(cu_q[b]), int(cu_k[b])
        want_o, want_lse = _ref(q[q0:q0 + n], k[k0:k0 + used[b]], v[k0:k0 + used[b]], 0.3,
                                causal, window, c)
        _close(o[q0:q0 + n], want_o)
        # lse_out is float32: its rounding
        torch.testing.assert_close(lse[:, q0:q0 + n].double(), want_lse, rtol=1e-6, atol=1e-6)
    assert torch.isnan(o[sum(lq):]).all()
    with pytest.raises(ValueError, match="attention_chunk 16 needs max_seqlen_k"):
        torch_api.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), attention_chunk=16)


@needs_torch
@pytest.mark.parametrize("paged,snew,leftpad,causal,route", [
    (False, 0, False, False, ("table columns", None, "leftpad", True)),  # leftpad moved
    (False, 1, True, True, ("table columns", None, "leftpad", True)),   # from cache_leftpad
    (False, 3, False, True, ("table columns", None, "leftpad", True)),
    (True, 1, False, True, ("table columns", 2, "leftpad", False)),    # pages of 8, shifted
    (True, 0, False, False, ("table columns", 2, "leftpad", False)),
])
def test_kvcache_decoding_step_chunks(monkeypatch, paged, snew, leftpad, causal, route):
    """A decoding step (one query row a batch) under attention_chunk 16:
    the decoding kernel from the chunk's first key (cache_leftpad moved
    there; a paged table shifted and cut to the chunk's 2 pages), against the
    chunk-masked oracle over the batch's keys after the append (from
    cache_leftpad[b]); the appended rows land in the caller's cache."""
    import torch
    seen = []
    _stub(monkeypatch, seen)
    gen = torch.Generator().manual_seed(snew * 10 + paged * 3 + leftpad)
    B, Hq, Hkv, D, c, ps = 3, 4, 2, 16, 16, 8
    lens = [33, 15, 0] if not leftpad else [33, 15, 6]
    lp = [3, 15, 6]
    q = torch.randn(B, 1, Hq, D, generator=gen, dtype=torch.float64)
    if paged:
        pool = 3 * B * 8
        kc = torch.randn(pool, ps, Hkv, D, generator=gen, dtype=torch.float64)
        vc = torch.randn(pool, ps, Hkv, D, generator=gen, dtype=torch.float64)
        table = torch.randperm(pool, generator=gen)[:B * 8].to(torch.int32).reshape(B, 8)
        rows_of = lambda t, b: t[table[b].long()].flatten(0, 1)  # noqa: E731
    else:
        kc = torch.randn(B, 64, Hkv, D, generator=gen, dtype=torch.float64)
        vc = torch.randn(B, 64, Hkv, D, generator=gen, dtype=torch.float64)
        table = None
        rows_of = lambda t, b: t[b]  # noqa: E731
    kn = torch.randn(B, snew, Hkv, D, generator=gen, dtype=torch.float64) if snew else None
    vn = torch.randn(B, snew, Hkv, D, generator=gen, dtype=torch.float64) if snew else None
    before_k = [rows_of(kc, b).clone() for b in range(B)]
    before_v = [rows_of(vc, b).clone() for b in range(B)]
    cs = torch.tensor(lens, dtype=torch.int32)
    kw = dict(k=kn, v=vn) if snew else {}
    o, lse = torch_api.flash_attn_with_kvcache(
        q, kc, vc, cache_seqlens=cs, page_table=table, softmax_scale=0.3, causal=causal,
        attention_chunk=c, return_softmax_lse=True,
        cache_leftpad=torch.tensor(lp, dtype=torch.int32) if leftpad else None, **kw)
    assert seen == [("decode", (B, 1, Hq, D)), route]
    for b in range(B):
        keys, vals = before_k[b], before_v[b]
        if snew:
            keys, vals = keys.clone(), vals.clone()
            keys[lens[b]:lens[b] + snew], vals[lens[b]:lens[b] + snew] = kn[b], vn[b]
        start, end = (lp[b] if leftpad else 0), lens[b] + snew
        want_o, want_lse = _ref(q[b], keys[start:end], vals[start:end], 0.3, causal, (-1, -1),
                                c)
        _close(o[b], want_o)
        _close(lse[b], want_lse)


@needs_torch
@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_rows_and_packed_queries_chunks(monkeypatch, paged):
    """Several query rows a batch under attention_chunk (they may span two
    chunks): the variable-length kernel's virtual sequences over the
    cache's keys, for [B, Sq] queries and for packed ragged ones
    (cu_seqlens_q), contiguous and paged caches, against the oracle."""
    import torch
    seen = []
    _stub(monkeypatch, seen)
    gen = torch.Generator().manual_seed(11 + paged)
    B, Hq, Hkv, D, c, ps, Skv = 2, 4, 2, 16, 16, 8, 48
    lens = [37, 20]
    if paged:
        kc = torch.randn(4 * B * 6, ps, Hkv, D, generator=gen, dtype=torch.float64)
        vc = torch.randn(4 * B * 6, ps, Hkv, D, generator=gen, dtype=torch.float64)
        table = torch.randperm(4 * B * 6, generator=gen)[:B * 6].to(torch.int32).reshape(B, 6)
        rows_of = lambda t, b: t[table[b].long()].flatten(0, 1)  # noqa: E731
    else:
        kc = torch.randn(B, Skv, Hkv, D, generator=gen, dtype=torch.float64)
        vc = torch.randn(B, Skv, Hkv, D, generator=gen, dtype=torch.float64)
        table = None
        rows_of = lambda t, b: t[b]  # noqa: E731
    cs = torch.tensor(lens, dtype=torch.int32)
    q = torch.randn(B, 5, Hq, D, generator=gen, dtype=torch.float64)
    o, lse = torch_api.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=cs, page_table=table,
                                               softmax_scale=0.3, causal=True,
                                               attention_chunk=c, return_softmax_lse=True)
    assert seen[-1][0] == ("paged varlen" if paged else "varlen")
    for b in range(B):
        want_o, want_lse = _ref(q[b], rows_of(kc, b)[:lens[b]], rows_of(vc, b)[:lens[b]], 0.3,
                                True, (-1, -1), c)
        _close(o[b], want_o)
        _close(lse[b], want_lse)
    lq = [3, 1]
    qp = torch.randn(sum(lq), Hq, D, generator=gen, dtype=torch.float64)
    cu_q = torch.tensor([0, 3, 4], dtype=torch.int32)
    o, lse = torch_api.flash_attn_with_kvcache(qp, kc, vc, cache_seqlens=cs, page_table=table,
                                               cu_seqlens_q=cu_q, max_seqlen_q=3,
                                               softmax_scale=0.3, causal=False,
                                               attention_chunk=c, return_softmax_lse=True)
    for b in range(B):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        want_o, want_lse = _ref(qp[q0:q1], rows_of(kc, b)[:lens[b]], rows_of(vc, b)[:lens[b]],
                                0.3, False, (-1, -1), c)
        _close(o[q0:q1], want_o)
        _close(lse[:, q0:q1], want_lse)


@needs_torch
def test_kvcache_chunk_refusals(monkeypatch):
    """What the chunked routes cannot take, refused by name."""
    import torch
    _stub(monkeypatch, [])
    f = torch_api.flash_attn_with_kvcache
    q1, q3 = torch.zeros(2, 1, 4, 16), torch.zeros(2, 3, 4, 16)
    pool = torch.zeros(16, 8, 2, 16)
    table = torch.arange(16, dtype=torch.int32).reshape(2, 8)
    cs = torch.tensor([3, 9], dtype=torch.int32)
    kn = torch.zeros(2, 2, 2, 16)
    cases = [
        (dict(q=q1, k_cache=pool, v_cache=pool, page_table=table, cache_seqlens=cs,
              attention_chunk=12), "the chunk must be a multiple of the page size"),
        # the table cut to the chunk's one page must not let cache_leftpad in
        (dict(q=q1, k_cache=pool, v_cache=pool, page_table=table, cache_seqlens=cs,
              cache_leftpad=torch.tensor([1, 2], dtype=torch.int32), attention_chunk=8),
         "cache_leftpad with a paged cache of 8 pages a batch"),
        (dict(q=q1, k_cache=pool, v_cache=pool, page_table=table, cache_seqlens=cs,
              k=kn, v=kn, attention_chunk=16), "with 2 new rows of k and v: at most one"),
        (dict(q=q3, k_cache=torch.zeros(2, 64, 2, 16), v_cache=torch.zeros(2, 64, 2, 16),
              cache_seqlens=cs, k=kn, v=kn, attention_chunk=16),
         "with 3 query rows a batch and k and v \\(appending\\) is not supported"),
    ]
    for kw, text in cases:
        with pytest.raises(NotImplementedError, match=text):
            f(**kw)


@needs_torch
@pytest.mark.parametrize("c,causal", [(0, True), (0, False), (16, True), (7, False)])
def test_flash_attn_varlen_func_seqused_q(monkeypatch, c, causal):
    """seqused_q (FA3's): sequence s's first seqused_q[s] rows (clamped to
    its rows) against its keys, bottom-right aligned to those rows, with
    and without attention_chunk; its other rows o = 0 and lse = -inf; the
    rows after the last sequence untouched."""
    import torch
    seen = []
    _stub(monkeypatch, seen)
    gen = torch.Generator().manual_seed(c * 5 + causal)
    lq, lk, uq = [17, 0, 6, 40], [30, 5, 1, 64], [9, 0, 10, 0]
    Hq, Hkv, D = 2, 1, 16
    Tq, Tk = sum(lq) + 2, sum(lk)
    q = torch.randn(Tq, Hq, D, generator=gen, dtype=torch.float64)
    k = torch.randn(Tk, Hkv, D, generator=gen, dtype=torch.float64)
    v = torch.randn(Tk, Hkv, D, generator=gen, dtype=torch.float64)
    cu_q = torch.tensor(np.concatenate(([0], np.cumsum(lq))), dtype=torch.int32)
    cu_k = torch.tensor(np.concatenate(([0], np.cumsum(lk))), dtype=torch.int32)
    out = torch.full((Tq, Hq, D), float("nan"), dtype=torch.float64)
    o, lse = torch_api.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(lq), max(lk), seqused_q=torch.tensor(uq, dtype=torch.int32),
        softmax_scale=0.3, causal=causal, attention_chunk=c, return_attn_probs=True, out=out)
    for b, rows in enumerate(lq):
        q0, k0, n = int(cu_q[b]), int(cu_k[b]), min(uq[b], rows)
        want_o, want_lse = _ref(q[q0:q0 + n], k[k0:k0 + lk[b]], v[k0:k0 + lk[b]], 0.3, causal,
                                (-1, -1), c)
        _close(o[q0:q0 + n], want_o)
        _close(lse[:, q0:q0 + n], want_lse)
        assert (o[q0 + n:q0 + rows] == 0).all()
        assert (lse[:, q0 + n:q0 + rows] == float("-inf")).all()
    assert torch.isnan(o[sum(lq):]).all()
    with pytest.raises(ValueError, match="seqused_q must have 4 entries"):
        torch_api.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq),
                                         seqused_q=torch.zeros(3, dtype=torch.int32))


@needs_torch
@pytest.mark.parametrize("seed", range(6))
def test_hostile_values_get_clear_errors(monkeypatch, seed):
    """The new arguments (attention_chunk, max_seqlen_k with it, seqused_q,
    cu_seqlens_k_new with k and v) given hostile values — wrong types,
    dtypes, ranks, counts, devices' worth of shapes, huge or negative
    numbers — end in TypeError, ValueError or NotImplementedError naming
    the call, never in another exception from deeper down (seeded)."""
    import random
    import torch
    _stub(monkeypatch, [])
    rng = random.Random(seed)
    i32 = torch.int32
    bad = [None, "8", 2.5, True, -3, 2**40, torch.zeros(3, dtype=torch.int64),
           torch.zeros(2, 2, dtype=i32), torch.zeros(7, dtype=i32), torch.zeros((), dtype=i32),
           torch.tensor([0, 5, 2], dtype=i32), [0, 1, 2]]
    q4, k4 = torch.zeros(2, 3, 2, 16), torch.zeros(2, 8, 1, 16)
    qp, kp = torch.zeros(6, 2, 16), torch.zeros(10, 1, 16)
    cu = torch.tensor([0, 3, 6], dtype=i32)
    cuk = torch.tensor([0, 4, 10], dtype=i32)
    pool, table = torch.zeros(6, 8, 1, 16), torch.arange(6, dtype=i32).reshape(2, 3)
    calls = [
        lambda x: torch_api.flash_attn_func(q4, k4, k4, attention_chunk=x),
        lambda x: torch_api.flash_attn_varlen_func(qp, kp, kp, cu, cuk, 3, x,
                                                   attention_chunk=4),
        lambda x: torch_api.flash_attn_varlen_func(qp, kp, kp, cu, cuk, 3, 6, seqused_q=x),
        lambda x: torch_api.flash_attn_with_kvcache(q4, torch.zeros(2, 16, 1, 16),
                                                    torch.zeros(2, 16, 1, 16),
                                                    cache_seqlens=2, attention_chunk=x),
        lambda x: torch_api.flash_attn_with_kvcache(
            q4[:, :1], pool, pool, k=torch.zeros(3, 1, 16), v=torch.zeros(3, 1, 16),
            cache_seqlens=torch.tensor([1, 2], dtype=i32), page_table=table,
            cu_seqlens_k_new=x),
        lambda x: torch_api.flash_attn_with_kvcache(
            q4[:, :1], pool, pool, k=x, v=torch.zeros(3, 1, 16),
            cache_seqlens=torch.tensor([1, 2], dtype=i32), page_table=table,
            cu_seqlens_k_new=torch.tensor([0, 1, 3], dtype=i32), attention_chunk=8),
    ]
    fine = (TypeError, ValueError, NotImplementedError)
    for _ in range(20):
        call, x = rng.choice(calls), rng.choice(bad)
        try:
            call(x)
        except fine:
            pass
        except Exception as e:  # noqa: BLE001  (the failure this test looks for)
            pytest.fail(f"{type(e).__name__} from a hostile value {x!r}: {e}")
