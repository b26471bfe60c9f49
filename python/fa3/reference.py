"""An independent float64 NumPy definition of attn.flash_attention.

This is the oracle the compiled programs are checked against; it shares no
code with the compiler. Layout is the op's logical one: q [B, Hq, Sq, D],
k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] -> o [B, Hq, Sq, Dv], lse [B, Hq, Sq].
"""
import numpy as np


def visible_mask(sq, skv, causal=False, window=(-1, -1)):
    """[Sq, Skv] bool: key j visible to query i (bottom-right aligned)."""
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
    return ok


def attention(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0):
    """Returns (o, lse) in float64."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    if scale is None:
        scale = 1.0 / np.sqrt(d)
    g = hq // hkv
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    mask = visible_mask(sq, skv, causal, window)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    any_visible = np.isfinite(m)
    p = np.where(mask, np.exp(s - np.where(any_visible, m, 0.0)), 0.0)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v) / np.where(l > 0, l, 1.0)
    with np.errstate(divide="ignore"):
        lse = np.where(any_visible[..., 0], (m + np.log(l))[..., 0], -np.inf)
    return o, lse


def to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits):
    """bfloat16 bit patterns (uint16) -> float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
