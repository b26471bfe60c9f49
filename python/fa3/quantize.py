"""FP8 (e4m3) quantization for the FP8 forward kernels (flash_attn_func on
torch.float8_e4m3fn q, k, v).

    from fa3.quantize import quantize_qkv_fp8
    r = quantize_qkv_fp8(q, k, v)               # block scales + Hadamard rotation
    o = flash_attn_func(r.q, r.k, r.v, causal=True, **r.descales)   # o: bf16

    q8, q_descale = quantize_fp8(q)             # one scale per (batch, head)
    q8, q_descale = quantize_fp8(q, block=128)  # one per (batch, head, 128 rows)

A tensor x [B, S, H, D] becomes x8 = round_e4m3(x * scale) with
descale = 1 / scale = amax / 448 over the elements that share a scale, so
that x8.float() * descale approximates x (dequantize_fp8). 448 is e4m3's
largest finite value (torch.float8_e4m3fn: no infinities). A group whose
amax is 0, or below AMAX_MIN = 448 * 2^-126 (~5.3e-36; float32's smallest
normal times 448), gets descale 1 and its elements cast unscaled (to zeros:
e4m3's smallest value is 2^-9): 448 / amax would overflow to inf below
~1.3e-36 (a zero times inf is NaN), and amax / 448 would be a subnormal
descale, which arithmetic that flushes subnormals reads as 0 (the kernels
need positive, finite descales). Non-finite inputs are not checked (that
would cost a device-to-host synchronisation): an inf in a group makes its
descale inf, a NaN leaves NaN elements.

Error of one element (the bound test_quantize.py checks): e4m3 keeps 3
mantissa bits, so round-to-nearest-even of a scaled value y = x * scale is
off by at most half a unit in the last place: |round(y) - y| <= 2^-4 |y|
where y is a normal number (|y| >= 2^-6), and <= 2^-10 below that (the
subnormals are spaced 2^-9). Dequantized: |x8 * descale - x| <=
max(2^-4 |x|, 2^-10 descale), plus a few f32 ulps of x from scale *
descale != 1 exactly.

Incoherent processing (FlashAttention-3, section 3.3): multiplying q and k by
one random orthogonal M leaves the scores unchanged, (Q M)(K M)^T = Q K^T,
but spreads an outlier of a row over all D of its elements, so the amax of a
block (and the quantization step) shrinks. hadamard_matrix is M = H_d
diag(s) / sqrt(d): H_d the Sylvester Hadamard matrix (d a power of two), s
random signs drawn from `seed`. v is not rotated (O = P V needs V as it is).

Where it applies (a CUDA bf16 or f16 x, head dim 64, 128 or 256, the
rotation given by a seed), the work is one generated GPU kernel: the FP8
attention kernel's <kernel>_quantize (the GPU form of attn.quantize;
fa3rt_quantize), which reads x once and writes y and the descales, the
rotation done as a fast Walsh-Hadamard transform in registers. Its
arithmetic is this module's torch path's: bit for bit without the rotation,
the rotation's sums in another order (within a few float32 ulps).
``backend="torch"`` forces the torch ops, ``"kernel"`` the kernel.

torch is imported on first use (``import fa3.quantize`` works without it),
except in hadamard_matrix_numpy, which needs NumPy only.
"""
from __future__ import annotations

import operator
from typing import NamedTuple, Optional

E4M3_MAX = 448.0         # torch.finfo(torch.float8_e4m3fn).max
# the smallest amax given its own scale: 448 * torch.finfo(torch.float32).tiny, so
# that descale = amax / 448 is a normal float32 and scale = 448 / amax finite
AMAX_MIN = E4M3_MAX * 2.0 ** -126
BLOCK = 128              # rows of a block scale (the kernels read one per 128 rows)
# |dequantize(quantize(x)) - x| <= max(E4M3_REL_ERR * |x|, E4M3_SUBNORMAL_ERR * descale)
E4M3_REL_ERR = 2.0 ** -4
E4M3_SUBNORMAL_ERR = 2.0 ** -10


def _power_of_two(fn: str, d) -> int:
    try:
        d = operator.index(d)
    except TypeError:
        raise TypeError(f"{fn}: d must be an integer (a power of two), got "
                        f"{type(d).__name__}") from None
    if d < 1 or d & (d - 1):
        raise ValueError(f"{fn}: d = {d} is not a power of two (a Sylvester Hadamard matrix "
                         "has 2^n rows)")
    return d


def _seed(fn: str, seed) -> int:
    if isinstance(seed, bool):
        raise TypeError(f"{fn}: seed must be an integer, got bool")
    try:
        seed = operator.index(seed)
    except TypeError:
        raise TypeError(f"{fn}: seed must be an integer, got {type(seed).__name__}") from None
    if not 0 <= seed < 2**63:
        raise ValueError(f"{fn}: seed = {seed} is out of range (0 to 2^63-1)")
    return seed


def hadamard_signs(d: int, seed: int = 0):
    """The d random signs (+1 / -1, a NumPy int8 array) of hadamard_matrix's
    diag(s): NumPy's PCG64 from `seed`, the same on every machine."""
    import numpy as np
    d = _power_of_two("hadamard_signs", d)
    seed = _seed("hadamard_signs", seed)
    bits = np.random.Generator(np.random.PCG64(seed)).integers(0, 2, size=d, dtype=np.int8)
    return (1 - 2 * bits).astype(np.int8)


def hadamard_matrix_numpy(d: int, seed: int = 0):
    """M = H_d diag(s) / sqrt(d) as a float64 NumPy array [d, d] (no torch
    needed): H_d Sylvester's (H_1 = [1], H_2n = [[H, H], [H, -H]]), s =
    hadamard_signs(d, seed). Orthogonal: M M^T = I."""
    import numpy as np
    d = _power_of_two("hadamard_matrix_numpy", d)
    s = hadamard_signs(d, seed).astype(np.float64)
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h * s[None, :] / np.sqrt(d)


def hadamard_matrix(d: int, seed: int = 0, device=None, dtype=None):
    """M = H_d diag(s) / sqrt(d) as a torch tensor [d, d] on `device` (None:
    the CPU) of `dtype` (None: float32), built in float64
    (hadamard_matrix_numpy). Orthogonal, so (Q M)(K M)^T = Q K^T: rotate q
    and k by the same M (quantize_qkv_fp8 does)."""
    import torch
    m = torch.from_numpy(hadamard_matrix_numpy(d, seed))
    return m.to(device=device, dtype=torch.float32 if dtype is None else dtype)


def _torch_fp8():
    import torch
    dt = getattr(torch, "float8_e4m3fn", None)
    if dt is None:
        raise RuntimeError(f"fa3.quantize: torch {torch.__version__} has no float8_e4m3fn "
                           "(PyTorch 2.1 or newer)")
    return torch, dt


def _block(fn: str, block) -> Optional[int]:
    if block is None:
        return None
    if isinstance(block, bool):
        raise TypeError(f"{fn}: block must be None (one scale per batch and head) or "
                        f"{BLOCK} (one per {BLOCK} rows), got bool")
    try:
        b = operator.index(block)
    except TypeError:
        raise TypeError(f"{fn}: block must be None or {BLOCK}, got "
                        f"{type(block).__name__}") from None
    if b != BLOCK:
        raise ValueError(f"{fn}: block must be None (one scale per batch and head) or "
                         f"{BLOCK} (the kernels read one descale per {BLOCK} rows), got {b}")
    return b


def _rotation(fn: str, torch, hadamard, D: int, device):
    """hadamard as a float32 [D, D] matrix on `device`, or None: None/False
    none, True seed 0, an int a seed, a tensor the matrix itself."""
    if hadamard is None or hadamard is False:
        return None
    if isinstance(hadamard, torch.Tensor):
        if hadamard.shape != (D, D) or not hadamard.is_floating_point():
            raise ValueError(f"{fn}: hadamard as a matrix must be a floating-point [D, D] = "
                             f"[{D}, {D}] tensor, got {hadamard.dtype} of shape "
                             f"{tuple(hadamard.shape)}")
        return hadamard.to(device=device, dtype=torch.float32)
    seed = 0 if hadamard is True else _seed(fn, hadamard)
    if D < 1 or D & (D - 1):
        raise ValueError(f"{fn}: a Hadamard rotation needs a head dim that is a power of two, "
                         f"got D = {D}")
    return hadamard_matrix(D, seed, device=device)


def _check_x(fn: str, torch, name: str, x):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"{fn}: {name} must be 4-D [B, S, H, D], got shape {tuple(x.shape)}")
    if not x.is_floating_point() or x.dtype not in (torch.float32, torch.float16,
                                                     torch.bfloat16, torch.float64):
        raise ValueError(f"{fn}: {name} must be float32, float16, bfloat16 or float64, got "
                         f"{x.dtype}")


def _quantize(torch, fp8, x, block, m):
    """(x8, descale) of a checked x [B, S, H, D]: rotate (m), amax per group,
    scale, clamp, cast; descale float32 [B, H] or [B, H, ceil(S / block)]."""
    B, S, H, D = x.shape
    with torch.no_grad():
        xf = x.detach().to(torch.float32)
        if m is not None:
            xf = xf @ m
        if block is None:
            if S and D:
                amax = xf.abs().amax(dim=(1, 3))                      # [B, H]
            else:
                amax = xf.new_zeros((B, H))
            shape = (B, 1, H, 1)
        else:
            nb = -(-S // block)
            pad = nb * block - S
            if nb and D:
                xp = torch.nn.functional.pad(xf, (0, 0, 0, 0, 0, pad)) if pad else xf
                amax = xp.view(B, nb, block, H, D).abs().amax(dim=(2, 4))   # [B, nb, H]
                amax = amax.transpose(1, 2).contiguous()                    # [B, H, nb]
            else:
                amax = xf.new_zeros((B, H, nb))
            shape = None
        # amax 0 or tiny (below AMAX_MIN): descale 1, x cast as it is (the
        # scale would overflow, 0 * inf be NaN, the descale subnormal)
        # correctly rounded divisions by a tensor (torch divides by a
        # Python number as a * (1 / b), and 448 / t is 448 * reciprocal(t):
        # an ulp off at times), as the kernel's div.rn
        ok = amax >= AMAX_MIN
        one = torch.ones_like(amax)
        e4m3_max = torch.full_like(amax, E4M3_MAX)
        safe = torch.where(ok, amax, one)
        descale = torch.where(ok, safe / e4m3_max, one)
        scale = torch.where(ok, e4m3_max / safe, one)
        if block is None:
            y = xf * scale.view(shape)
        else:
            # per row: the scale of its block, [B, S, H, 1]
            rows = scale.repeat_interleave(block, dim=2)[:, :, :S]          # [B, H, S]
            y = xf * rows.transpose(1, 2).unsqueeze(-1)
        # x * (448 / amax) may round a hair above 448: clamp before the cast
        y = y.clamp_(-E4M3_MAX, E4M3_MAX)
        return y.to(fp8), descale


BACKENDS = (None, "kernel", "torch")
KERNEL_HEAD_DIMS = (64, 128, 256)     # the FP8 kernels', whose module holds _quantize
_signs_cache: dict = {}


def _backend(fn: str, backend):
    if backend not in BACKENDS:
        raise ValueError(f"{fn}: backend must be None (the kernel where it applies), 'kernel' "
                         f"or 'torch', got {backend!r}")
    return backend


def _kernel_applies(torch, x, hadamard) -> Optional[str]:
    """Why the generated kernel cannot quantize x (None: it can)."""
    if x.dtype not in (torch.bfloat16, torch.float16):
        return f"x is {x.dtype}; the kernel reads bfloat16 or float16"
    if x.shape[3] not in KERNEL_HEAD_DIMS:
        return (f"head dim {x.shape[3]}: the FP8 kernels (and their quantization) take "
                f"{', '.join(map(str, KERNEL_HEAD_DIMS))}")
    if isinstance(hadamard, torch.Tensor):
        return "hadamard is a matrix; the kernel rotates by hadamard_matrix(D, seed) only"
    if not x.is_cuda:
        return f"x is on {x.device}, not a CUDA device"
    major, minor = torch.cuda.get_device_capability(x.device)
    if (major, minor) != (9, 0):
        return (f"{x.device} is sm_{major}{minor}; the FP8 kernels are sm_90a's "
                "(Hopper)")
    B, S = x.shape[0], x.shape[1]
    if B > 65535 or -(-S // BLOCK) > 65535:
        return (f"B = {B} or S = {S} is beyond the kernel's grid (65535 batches, 65535 "
                f"blocks of {BLOCK} rows)")
    return None


def _signs(torch, D: int, seed: int, device):
    """hadamard_signs(D, seed) as float32 on `device`, made once per
    (D, seed, device): a call (or a CUDA-graph capture) after the first
    copies nothing from the host."""
    key = (D, seed, str(device))
    t = _signs_cache.get(key)
    if t is None:
        t = torch.tensor(hadamard_signs(D, seed), dtype=torch.float32, device=device)
        _signs_cache[key] = t
    return t


class _KernelNotFound(LookupError):
    """No FP8 kernel of x's head dim (its cubin holds the quantization) in
    kernel_dir, nor a JIT to compile one."""


def _quantize_kernel(torch, fp8, x, block, seed, kernel_dir, jit, out=None):
    """(x8, descale) by the FP8 kernel's <kernel>_quantize; x a CUDA bf16 or
    f16 [B, S, H, D] (_kernel_applies), seed None (no rotation) or the
    rotation's seed. `out`: (x8, descale, workspace) to write instead of new
    tensors (the GPU check poisons them first)."""
    from . import runtime
    from .torch_api import _launch, _launchable_kernel, _tma_ready
    B, S, H, D = x.shape
    device = x.device
    dev = device.index if device.index is not None else torch.cuda.current_device()
    try:
        kobj = _launchable_kernel(None, "e4m3", D, D, False, (-1, -1), 0.0, kernel_dir, jit,
                                  dev, torch.cuda.device)
    except (LookupError, ValueError) as e:
        if kernel_dir is not None:
            raise           # a directory asked for: its error, not a fallback
        raise _KernelNotFound(str(e)) from e
    # rows as fa3rt_quantize reads them: TMA's rule (16-byte aligned,
    # contiguous last dim), a copy otherwise
    x = _tma_ready(x)
    nb = -(-S // BLOCK)
    if out is not None:
        y, descale, work = out
    else:
        y = torch.empty((B, S, H, D), dtype=fp8, device=device)
        descale = torch.empty((B, H, nb) if block else (B, H), dtype=torch.float32,
                              device=device)
        # per head: one amax word a head (fa3rt_quantize zeroes it)
    work = torch.empty((B, H), dtype=torch.int32, device=device) if not block else None
    signs = _signs(torch, D, seed, device) if seed is not None else None
    a = runtime.QuantizeArgs()
    xs, ys = x.stride(), y.stride()
    a.x = runtime.tensor(x.data_ptr(), (B, H, S, D), (xs[0], xs[2], xs[1], xs[3]), name="x")
    a.x_dtype = runtime.DTYPES["f16" if x.dtype == torch.float16 else "bf16"]
    a.y = runtime.tensor(y.data_ptr(), (B, H, S, D), (ys[0], ys[2], ys[1], ys[3]), name="y")
    a.descale = descale.data_ptr()
    a.signs = signs.data_ptr() if signs is not None else 0
    a.per_head = 0 if block else 1
    a.workspace = work.data_ptr() if work is not None and work.numel() else 0
    _launch(torch, dev, kobj.quantize, a)
    return y, descale


def _quantize_any(fn, torch, fp8, x, block, hadamard, backend, kernel_dir, jit):
    """quantize_fp8's dispatch: the kernel where it applies (or is asked
    for), else the torch ops."""
    why = _kernel_applies(torch, x, hadamard) if backend != "torch" else "backend='torch'"
    if backend == "kernel" and why:
        raise ValueError(f"{fn}: backend='kernel' cannot quantize this x: {why}")
    if why is None:
        seed = None
        if hadamard is not None and hadamard is not False:
            seed = 0 if hadamard is True else _seed(fn, hadamard)
        if torch.compiler.is_compiling():
            # traced as the op (fa3.torch_ops): no graph break; the kernel
            # is looked up when the compiled graph first runs
            from . import torch_ops  # noqa: F401  (registers torch.ops.fa3.quantize_fp8)
            return torch.ops.fa3.quantize_fp8.default(
                x, block or 0, -1 if seed is None else seed,
                None if kernel_dir is None else str(kernel_dir), jit)
        try:
            return _quantize_kernel(torch, fp8, x, block, seed, kernel_dir, jit)
        except _KernelNotFound:
            if backend == "kernel":
                raise
    m = _rotation(fn, torch, hadamard, x.shape[3], x.device)
    return _quantize(torch, fp8, x, block, m)



def quantize_fp8(x, *, block: Optional[int] = None, hadamard=None, backend=None,
                 kernel_dir=None, jit=None):
    """(x_fp8, descale) of x [B, S, H, D] (float32, float16, bfloat16 or
    float64, any device): x_fp8 torch.float8_e4m3fn [B, S, H, D]
    (contiguous), descale float32 [B, H] (block None: one scale per batch and
    head, FA3's form) or [B, H, ceil(S / 128)] (block 128: one per 128 rows
    of a head, the last block shorter); descale = amax / 448 of its group (1
    where the amax is 0 or below AMAX_MIN, ~5.3e-36: those elements cast
    unscaled, to zeros). `hadamard`: None or False, no rotation; True or an
    int seed, x is first multiplied by hadamard_matrix(D, seed) (True: seed
    0; D a power of two); a [D, D] tensor, by that matrix. Computed in
    float32; no gradient. `backend`: None, the generated kernel where it
    applies (CUDA bf16/f16 on an sm_90 GPU, head dim 64/128/256, no explicit
    matrix; found like flash_attn_func's FP8 kernel: `kernel_dir`, else the
    JIT cache; with neither a kernel_dir nor a kernel found, the torch
    ops), else the torch ops; "kernel" or "torch" to insist."""
    fn = "quantize_fp8"
    torch, fp8 = _torch_fp8()
    _check_x(fn, torch, "x", x)
    block = _block(fn, block)
    backend = _backend(fn, backend)
    if isinstance(hadamard, bool) or hadamard is None:
        pass
    elif not isinstance(hadamard, torch.Tensor):
        hadamard = _seed(fn, hadamard)
    return _quantize_any(fn, torch, fp8, x, block, hadamard, backend, kernel_dir, jit)


def dequantize_fp8(x_fp8, descale):
    """float32 x_fp8 * descale, broadcast as the kernels read it: x_fp8 [B,
    S, H, D]; descale a 0-d tensor (one scale), [B, H] or [B, H', ...] with
    H' dividing H (FA3's q descale per kv head: H' = Hkv, each descale
    serving H / H' consecutive heads), or [B, H, ceil(S / 128)] (one per
    128 rows). For references and tests."""
    import torch
    B, S, H, D = x_fp8.shape
    xf = x_fp8.to(torch.float32)
    d = descale.to(device=xf.device, dtype=torch.float32)
    if d.dim() == 0:
        return xf * d
    if d.dim() not in (2, 3) or d.shape[0] != B or H % d.shape[1]:
        raise ValueError(f"dequantize_fp8: descale of shape {tuple(d.shape)} does not fit x of "
                         f"shape {tuple(x_fp8.shape)} (0-d, [B, H] or [B, H, blocks])")
    if d.shape[1] != H:
        d = d.repeat_interleave(H // d.shape[1], dim=1)
    if d.dim() == 2:
        return xf * d[:, None, :, None]
    nb = -(-S // BLOCK)
    if d.shape[2] != nb:
        raise ValueError(f"dequantize_fp8: a block descale of x with S = {S} needs "
                         f"ceil(S / {BLOCK}) = {nb} blocks, got {d.shape[2]}")
    rows = d.repeat_interleave(BLOCK, dim=2)[:, :, :S]                    # [B, H, S]
    return xf * rows.transpose(1, 2).unsqueeze(-1)


class QuantizedQKV(NamedTuple):
    """quantize_qkv_fp8's result: the e4m3 tensors and their descales, in the
    order and names flash_attn_func takes (``**r.descales``)."""
    q: object
    k: object
    v: object
    q_descale: object
    k_descale: object
    v_descale: object

    @property
    def descales(self) -> dict:
        return {"q_descale": self.q_descale, "k_descale": self.k_descale,
                "v_descale": self.v_descale}


def quantize_qkv_fp8(q, k, v, *, block: Optional[int] = BLOCK, hadamard: bool = True,
                     seed: int = 0, backend=None, kernel_dir=None,
                     jit=None) -> QuantizedQKV:
    """q [B, Sq, Hq, D], k [B, Skv, Hkv, D], v [B, Skv, Hkv, Dv] (one device)
    quantized to e4m3 for flash_attn_func, FlashAttention-3's recipe (section
    3.3): with `hadamard`, q and k both multiplied by M =
    hadamard_matrix(D, seed) ((Q M)(K M)^T = Q K^T, so the attention is
    unchanged while outliers are spread over the head dim); q and k with
    block scales (`block` 128: descales [B, Hq, ceil(Sq / 128)] and [B, Hkv,
    ceil(Skv / 128)]; None: [B, Hq] and [B, Hkv]); v (not rotated) one
    scale per (batch, kv head), [B, Hkv], the only form the kernels read.
    Each tensor is quantized by quantize_fp8 (`backend`, `kernel_dir`,
    `jit` as there: on the GPU, one generated kernel launch for q and one
    for k, two for v). Returns a QuantizedQKV (q, k, v, q_descale,
    k_descale, v_descale)."""
    fn = "quantize_qkv_fp8"
    torch, fp8 = _torch_fp8()
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_x(fn, torch, name, t)
    if not (q.device == k.device == v.device):
        raise ValueError(f"{fn}: q, k, v must be on one device, got {q.device}, {k.device}, "
                         f"{v.device}")
    B, Sq, Hq, D = q.shape
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"{fn}: k must be [B, Skv, Hkv, D] with q's B = {B} and D = {D}, got "
                         f"{tuple(k.shape)}")
    if tuple(v.shape[:3]) != tuple(k.shape[:3]):
        raise ValueError(f"{fn}: k and v must agree in [B, Skv, Hkv], got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    block = _block(fn, block)
    if not isinstance(hadamard, bool):
        raise TypeError(f"{fn}: hadamard must be True or False (the rotation's seed is "
                        f"`seed`), got {type(hadamard).__name__}")
    seed = _seed(fn, seed)
    backend = _backend(fn, backend)
    rot = seed if hadamard else None
    q8, qd = _quantize_any(fn, torch, fp8, q, block, rot, backend, kernel_dir, jit)
    k8, kd = _quantize_any(fn, torch, fp8, k, block, rot, backend, kernel_dir, jit)
    v8, vd = _quantize_any(fn, torch, fp8, v, None, None, backend, kernel_dir, jit)
    return QuantizedQKV(q8, k8, v8, qd, kd, vd)
