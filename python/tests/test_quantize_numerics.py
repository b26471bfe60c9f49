"""attn.quantize's CPU lowering (attn-lower-to-loops, run by
attn-cpu-reference-pipeline) against NumPy, on fresh random inputs.

Without the rotation the arithmetic is the op's definition in float32 (amax,
descale = amax / 448, scale = 448 / amax, x * scale, clamp, e4m3 rounding to
nearest even), which NumPy repeats exactly: y's bytes and the descales must
be equal bit for bit. With the rotation (x H_D diag(signs) / sqrt(D)) the
float32 sums differ from the float64 reference by rounding: the descale
within DESCALE_REL_TOL = 1e-5 of amax / 448 of the float64 rotation, each
dequantized element within e4m3's half ulp (2^-4 of it, or 2^-10 descale
below the normal range) plus DESCALE_REL_TOL of the group's amax.
"""
import numpy as np
import pytest

from fa3 import reference
from fa3.cpu import CpuProgram
from fa3.ir import Context
from fa3.quantize import AMAX_MIN, E4M3_MAX, hadamard_matrix_numpy, hadamard_signs

DESCALE_REL_TOL = 1e-5


def e4m3_values():
    """The float value of each of the 256 e4m3 (f8E4M3FN) codes (NaN at
    0x7F and 0xFF)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 0xF, codes & 7
    v = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    v = sign * v
    v[(codes & 0x7F) == 0x7F] = np.nan
    return v


E4M3 = e4m3_values()
POSITIVE = E4M3[:0x7F]          # codes 0 .. 126, increasing, 0 .. 448


def e4m3_encode(x):
    """Codes of float32 x (|x| <= 448 or NaN), rounded to nearest even."""
    a = np.abs(x.astype(np.float64)).ravel()
    hi = np.clip(np.searchsorted(POSITIVE, a), 1, 0x7E)
    lo = hi - 1
    dlo, dhi = a - POSITIVE[lo], POSITIVE[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a == POSITIVE[hi], hi, code)
    code = np.where(np.isnan(a), 0x7F, code)
    code = code | np.where(np.signbit(x.ravel()), 0x80, 0)
    return code.astype(np.uint8).reshape(x.shape)


def program(B, H, S, D, dtype, block, rotate):
    et = {"f32": "f32", "bf16": "bf16"}[dtype]
    xt = f"memref<{B}x{H}x{S}x{D}x{et}>"
    yt = f"memref<{B}x{H}x{S}x{D}xf8E4M3FN>"
    dt = f"memref<{B}x{H}x{-(-S // block)}xf32>" if block else f"memref<{B}x{H}xf32>"
    st = f"memref<{D}xf32>"
    args = f"%x: {xt}, " + (f"%s: {st}, " if rotate else "") + f"%y: {yt}, %d: {dt}"
    rot = f" rotate(%s : {st})" if rotate else ""
    blk = f" block({block})" if block else ""
    text = (f"func.func @q({args}) attributes {{llvm.emit_c_interface}} {{\n"
            f"  attn.quantize ins(%x : {xt}){rot} outs(%y, %d : {yt}, {dt}){blk}\n"
            f"  return\n}}\n")
    ctx = Context()
    mod = ctx.parse(text)
    mod.run_pipeline("attn-cpu-reference-pipeline")
    return CpuProgram(mod), ctx


def run(x, dtype, block, signs):
    """(y codes, descale) of the lowered op on x [B, H, S, D] (float32 values;
    bf16 inputs are rounded first and passed as their bits)."""
    B, H, S, D = x.shape
    prog, _ctx = program(B, H, S, D, dtype, block, signs is not None)
    xin = reference.to_bf16_bits(x) if dtype == "bf16" else x.astype(np.float32)
    y = np.full(x.shape, 0x7F, dtype=np.uint8)                 # e4m3 NaN
    d = np.full((B, H, -(-S // block)) if block else (B, H), np.nan, dtype=np.float32)
    args = [xin] + ([signs.astype(np.float32)] if signs is not None else []) + [y, d]
    prog.call("q", *args)
    return y, d


def groups(x, block):
    """x [B, H, S, D] as a list of ((b, h, t), rows slice)."""
    B, H, S, _ = x.shape
    n = block or max(S, 1)
    return [((b, h, t), slice(t * n, min(S, (t + 1) * n)))
            for b in range(B) for h in range(H) for t in range(-(-S // n) if block else 1)]


def exact_reference(x32, block):
    """The op without rotation in float32, as NumPy computes it."""
    B, H, S, D = x32.shape
    y = np.zeros(x32.shape, dtype=np.uint8)
    d = np.zeros((B, H, -(-S // block)) if block else (B, H), dtype=np.float32)
    for (b, h, t), rows in groups(x32, block):
        g = x32[b, h, rows]
        amax = np.float32(np.abs(g).max()) if g.size else np.float32(0)
        ok = amax >= AMAX_MIN
        f448 = np.float32(E4M3_MAX)
        ds = amax / f448 if ok else np.float32(1)
        sc = f448 / amax if ok else np.float32(1)
        d[(b, h, t) if block else (b, h)] = ds
        v = np.clip(g * sc, -f448, f448).astype(np.float32)
        y[b, h, rows] = e4m3_encode(v)
    return y, d


def inputs(rng, shape, dtype):
    """N(0, 1) with per-row-group factors 2^U(-6, 6) and 0.5 % outliers,
    rounded to `dtype` (float32 values)."""
    x = rng.standard_normal(shape) * 2.0 ** rng.uniform(-6, 6, size=shape[:3] + (1,))
    x += (rng.random(shape) < 5e-3) * rng.standard_normal(shape) * 30
    x = x.astype(np.float32)
    if dtype == "bf16":
        x = reference.from_bf16_bits(reference.to_bf16_bits(x)).astype(np.float32)
    return x


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("block", [128, 64, None])
@pytest.mark.parametrize("S", [1, 200, 257])
def test_plain_is_bit_exact(rng, dtype, block, S):
    x = inputs(rng, (2, 3, S, 16), dtype)
    y, d = run(x, dtype, block, None)
    want_y, want_d = exact_reference(x, block)
    assert np.array_equal(d, want_d), "descales differ"
    assert np.array_equal(y, want_y), f"{int((y != want_y).sum())} bytes differ"


def test_zero_tiny_nan_and_saturating_groups(rng):
    x = inputs(rng, (1, 2, 300, 16), "f32")
    x[0, 0, :128] = 0                  # descale 1, zeros
    x[0, 0, 128:256] = 1e-37           # below AMAX_MIN: descale 1, rounds to 0
    x[0, 1, 5, 3] = np.nan             # descale 1, NaN there, the rest unscaled
    x[0, 1, 130, 0] = -1e30            # a huge group: -448 there
    y, d = run(x, "f32", 128, None)
    want_y, want_d = exact_reference(x, 128)
    assert np.array_equal(y, want_y)
    assert d[0, 0, 0] == 1 and d[0, 0, 1] == 1 and d[0, 1, 0] == 1
    assert np.array_equal(d, want_d, equal_nan=False)
    assert y[0, 1, 5, 3] & 0x7F == 0x7F and E4M3[y[0, 1, 130, 0]] == -E4M3_MAX
    assert (y[0, 0, :256] == 0).all()


def test_rounds_half_to_even():
    # values halfway between neighbouring e4m3 codes (scale 1: amax < AMAX_MIN
    # is not wanted, so the group's amax is 448 itself)
    mids = (POSITIVE[1:0x7F] + POSITIVE[:0x7E]) / 2
    x = np.zeros((1, 1, 1, 128), dtype=np.float32)
    x[0, 0, 0, :mids.size] = mids.astype(np.float32)
    x[0, 0, 0, mids.size] = E4M3_MAX
    y, d = run(x, "f32", None, None)
    assert d[0, 0] == 1.0
    got = y[0, 0, 0, :mids.size]
    assert (got % 2 == 0).all(), "a tie went to an odd code"
    assert np.array_equal(got, e4m3_encode(mids.astype(np.float32)))


@pytest.mark.parametrize("block", [128, None])
@pytest.mark.parametrize("D", [16, 64])
def test_rotated_within_rounding(rng, block, D):
    x = inputs(rng, (2, 2, 150, D), "bf16")
    seed = int(rng.integers(0, 2**31))
    signs = hadamard_signs(D, seed).astype(np.float32)
    y, d = run(x, "bf16", block, signs)
    xr = x.astype(np.float64) @ hadamard_matrix_numpy(D, seed)
    for key, rows in groups(x, block):
        b, h = key[:2]
        g = xr[b, h, rows]
        amax = np.abs(g).max()
        want = amax / E4M3_MAX if amax >= AMAX_MIN else 1.0
        got_d = float(d[key if block else (b, h)])
        assert abs(got_d - want) <= DESCALE_REL_TOL * want, (key, got_d, want)
        deq = E4M3[y[b, h, rows]] * got_d
        bound = np.maximum(2.0 ** -4 * np.abs(g), 2.0 ** -10 * got_d) + DESCALE_REL_TOL * amax
        assert (np.abs(deq - g) <= bound).all(), key


def test_rotation_keeps_scores(rng):
    """Q and K rotated by the same signs: their dequantized product is the
    unrotated one's within the quantization error."""
    D = 64
    q, k = inputs(rng, (1, 1, 64, D), "f32"), inputs(rng, (1, 1, 64, D), "f32")
    signs = hadamard_signs(D, 11).astype(np.float32)
    (yq, dq), (yk, dk) = run(q, "f32", 128, signs), run(k, "f32", 128, signs)
    s = (E4M3[yq[0, 0]] * dq[0, 0, 0]) @ (E4M3[yk[0, 0]] * dk[0, 0, 0]).T
    ref = q[0, 0].astype(np.float64) @ k[0, 0].astype(np.float64).T
    assert np.linalg.norm(s - ref) / np.linalg.norm(ref) < 0.08


# ---------------------------------------------- FP8 attention with descales

def expand(d, B, H, S, group=1):
    """A descale of one of attn.flash_attention's forms as [B, H, S, 1]
    factors of the rows it scales (group: q heads a head of d serves)."""
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 0:
        return np.full((B, H, S, 1), float(d))
    if d.ndim == 2:
        return np.repeat(d, group, axis=1)[:, :, None, None] * np.ones((1, 1, S, 1))
    return np.repeat(d, 128, axis=2)[:, :, :S, None]


FORMS = {  # name -> (q form, k form, v form) as functions of (B, Hq, Hkv, Sq, Skv)
    "tensor": lambda B, hq, hkv, sq, skv: ((), (), ()),
    "fa3 (per kv head)": lambda B, hq, hkv, sq, skv: ((B, hkv), (B, hkv), (B, hkv)),
    "per q head": lambda B, hq, hkv, sq, skv: ((B, hq), (B, hkv), (B, hkv)),
    "blocks": lambda B, hq, hkv, sq, skv: ((B, hq, -(-sq // 128)), (B, hkv, -(-skv // 128)),
                                           (B, hkv)),
}


@pytest.mark.parametrize("pipeline", ["attn-cpu-reference-pipeline",
                                      "attn-cpu-tiled-pipeline{rescale-threshold=8}"])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_attention_descales(rng, form, causal, pipeline):
    """attn.flash_attention on f8E4M3FN q, k, v with descale operands, on
    the CPU (the reference: e4m3 decoded in integer arithmetic, s = scale
    qd kd dot, o = vd P V; the tiled schedule: the same factors applied in
    attn.tile_update, lazy rescaling on): against float64 attention of the
    dequantized inputs (x8 * descale), o (bf16) within 1e-2 relative (one
    bf16 rounding), lse within 1e-4."""
    from fa3.spec import flash_attention_func
    B, hq, hkv, sq, skv, D = 2, 4, 2, 150, 300, 32
    shapes = FORMS[form](B, hq, hkv, sq, skv)
    text = flash_attention_func("fp8", B, hq, hkv, sq, skv, D, dtype="e4m3", lse=True,
                                causal=causal, descales=shapes)
    ctx = Context()
    mod = ctx.parse(text)
    mod.run_pipeline(pipeline)
    prog = CpuProgram(mod)
    codes = np.concatenate([np.arange(0, 0x7F), np.arange(0x80, 0xFF)]).astype(np.uint8)
    q8, k8, v8 = (rng.choice(codes, size=s) for s in
                  ((B, hq, sq, D), (B, hkv, skv, D), (B, hkv, skv, D)))
    ds = [rng.uniform(0.002, 0.02, size=s).astype(np.float32) for s in shapes]
    o = np.full((B, hq, sq, D), 0x7FC0, dtype=np.uint16)      # bf16 NaN
    lse = np.full((B, hq, sq), np.nan, dtype=np.float32)
    prog.call("fp8", q8, k8, v8, *[np.ascontiguousarray(d) for d in ds], o, lse)
    qgroup = hq // ds[0].shape[1] if ds[0].ndim == 2 else 1
    q = E4M3[q8] * expand(ds[0], B, hq, sq, qgroup)
    k = E4M3[k8] * expand(ds[1], B, hkv, skv)
    v = E4M3[v8] * expand(ds[2], B, hkv, skv)
    ref_o, ref_lse = reference.attention(q, k, v, causal=causal)
    got = reference.from_bf16_bits(o).astype(np.float64)
    assert not np.isnan(got).any() and not np.isnan(lse).any()
    err = np.linalg.norm(got - ref_o) / np.linalg.norm(ref_o)
    assert err < 1e-2, err
    fin = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), fin)
    assert np.abs(lse[fin] - ref_lse[fin]).max() < 1e-4
    # the descales matter: without them the scores would be 1e4x larger
    plain, _ = reference.attention(E4M3[q8], E4M3[k8], E4M3[v8], causal=causal)
    assert np.linalg.norm(got - plain) / np.linalg.norm(plain) > 0.1


def test_e4m3_decodes_every_code_exactly():
    """The CPU lowering's e4m3 decoding, code by code: one key per query
    (softmax weight 1), so o = v's decoded row, exact in bf16 (e4m3's 3
    mantissa bits and exponents fit): all 256 codes, signs, subnormals and
    the two NaNs."""
    from fa3.spec import flash_attention_func
    ctx = Context()
    mod = ctx.parse(flash_attention_func("one", 1, 1, 1, 1, 1, 256, dtype="e4m3"))
    mod.run_pipeline("attn-cpu-reference-pipeline")
    prog = CpuProgram(mod)
    q = np.zeros((1, 1, 1, 256), dtype=np.uint8)
    v = np.arange(256, dtype=np.uint8).reshape(1, 1, 1, 256)
    o = np.full((1, 1, 1, 256), 0x7FC0, dtype=np.uint16)
    o[..., 0x7F] = o[..., 0xFF] = 0                          # (NaN expected there)
    prog.call("one", q, q, v, o)
    got = reference.from_bf16_bits(o[0, 0, 0]).astype(np.float64)
    want = E4M3
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    # (values, signs included; 0x80's -0 comes out +0: o sums into a +0)
    assert np.array_equal(got[~nan], want[~nan])
