"""An independent float64 NumPy definition of attn.flash_attention and of its
gradients (attn.flash_attention_grad).

This is the oracle the compiled programs are checked against; it shares no
code with the compiler. Layout is the op's logical one: q [B, Hq, Sq, D],
k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] -> o [B, Hq, Sq, Dv], lse [B, Hq, Sq].
"""
import numpy as np


def visible_mask(sq, skv, causal=False, window=(-1, -1), chunk=0):
    """[Sq, Skv] bool: key j visible to query i (bottom-right aligned: i sits
    at key position p = i + Skv - Sq). chunk > 0 (FlashAttention-3's
    attention_chunk): also only the keys floor(p / chunk) * chunk .. + chunk
    - 1 (none for p < 0)."""
    left, right = window
    if causal:
        right = 0
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    diag = i + (skv - sq)
    ok = np.ones((sq, skv), dtype=bool)
    if left >= 0:
        ok &= j >= diag - left
    if right >= 0:
        ok &= j <= diag + right
    if chunk > 0:
        start = np.floor_divide(diag, chunk) * chunk
        ok &= (j >= start) & (j < start + chunk)
    return ok


def _scores(q, k, v, scale, causal, window, softcap, chunk=0):
    """What forward and backward share: k and v repeated over the q heads of
    their group (GQA), x = scale q k^T, the softcapped scores s and the
    visibility mask, all float64."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    sq, d = q.shape[2], q.shape[3]
    skv, g = k.shape[2], q.shape[1] // k.shape[1]
    if scale is None:
        scale = 1.0 / np.sqrt(d)
    kr, vr = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    x = np.einsum("bhid,bhjd->bhij", q, kr) * scale
    s = softcap * np.tanh(x / softcap) if softcap > 0 else x
    return kr, vr, scale, x, s, visible_mask(sq, skv, causal, window, chunk)


def attention(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0, chunk=0):
    """Returns (o, lse) in float64 (chunk: visible_mask's)."""
    _, v, _, _, s, mask = _scores(q, k, v, scale, causal, window, softcap, chunk)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)  # Skv = 0: -inf
    any_visible = np.isfinite(m)
    p = np.where(mask, np.exp(s - np.where(any_visible, m, 0.0)), 0.0)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v) / np.where(l > 0, l, 1.0)
    with np.errstate(divide="ignore"):
        lse = np.where(any_visible[..., 0], (m + np.log(l))[..., 0], -np.inf)
    return o, lse


def attention_grad(q, k, v, do, scale=None, causal=False, window=(-1, -1),
                   softcap=0.0, o=None, lse=None, magnitude=False):
    """(dq, dk, dv) in float64: the gradients of sum(o * do) with respect to
    q, k and v, by the chain rule through the softmax (dS = P (dP - D) with
    D = rowsum(dO o)) and softcap (d tanh = 1 - tanh^2); dk, dv summed over
    the q heads of a kv head. `o` and `lse`, when given, are used in place of
    the exact forward's (as the compiled backward uses the forward's
    outputs), so that a check can run the reference on the same inputs.

    magnitude=True gives instead the same sums over the absolute values of
    their terms (|dP| + |D| for dP - D, |q|, |k|, |dO|): the scale against
    which rounding errors are measured where the terms cancel (a row of dS
    sums to zero; with one key dq and dk are exactly 0)."""
    q, k, v, do = (np.asarray(a, dtype=np.float64) for a in (q, k, v, do))
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    g = hq // hkv
    kr, vr, scale, x, s, mask = _scores(q, k, v, scale, causal, window, softcap)
    if o is None or lse is None:
        o_exact, lse_exact = attention(q, k, v, scale, causal, window, softcap)
        o = o_exact if o is None else o
        lse = lse_exact if lse is None else lse
    lse = np.asarray(lse, dtype=np.float64)[..., None]
    live = np.isfinite(lse)
    p = np.where(mask & live, np.exp(np.where(mask, s, 0.0) - np.where(live, lse, 0.0)), 0.0)
    o = np.asarray(o, dtype=np.float64)
    dp = np.einsum("bhid,bhjd->bhij", do, vr)
    rowd = (do * o).sum(axis=-1, keepdims=True)
    if magnitude:
        q, kr, do = np.abs(q), np.abs(kr), np.abs(do)
        dp = np.einsum("bhid,bhjd->bhij", do, np.abs(vr))
        ds = p * (dp + (do * np.abs(o)).sum(axis=-1, keepdims=True))
    else:
        ds = p * (dp - rowd)
    dv_r = np.einsum("bhij,bhid->bhjd", p, do)
    if softcap > 0:
        ds = ds * (1.0 - np.tanh(x / softcap) ** 2)
    dq = np.einsum("bhij,bhjd->bhid", ds, kr) * scale
    dk_r = np.einsum("bhij,bhid->bhjd", ds, q) * scale
    # the q heads of each kv head summed
    dk = dk_r.reshape(b, hkv, g, skv, d).sum(axis=2)
    dvv = dv_r.reshape(b, hkv, g, skv, v.shape[3]).sum(axis=2)
    return dq, dk, dvv


def to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits):
    """bfloat16 bit patterns (uint16) -> float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
