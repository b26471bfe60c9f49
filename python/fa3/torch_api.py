"""PyTorch entry point for the compiled Hopper kernels.

    from fa3.torch_api import flash_attn_func, flash_attn_varlen_func
    o = flash_attn_func(q, k, v, causal=True)            # q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D]
    o, lse = flash_attn_func(q, k, v, return_lse=True)   # lse [B, Hq, Sq] f32, natural log
    o = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_seqlen_q)  # packed [T, H, D]
    flash_attn_func(q, k, v, causal=True).sum().backward()  # dq, dk, dv: the backward kernel
    dq, dk, dv = flash_attn_backward(do, q, k, v, o, lse, causal=True)
    o = flash_attn_with_kvcache(q, k_cache, v_cache)     # decoding: split-KV, GQA packing
    o = flash_attn_func(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)  # FP8: o bf16

The kernel variant is picked from a directory of compiled kernels (``kernel_dir``,
default ``$FA3_KERNEL_DIR``) by reading their ``.facts`` files and matching
(dtype, head_dim, head_dim_v, causal, window, softcap; the backward kernel
of a variant has facts `backward 1`, its deterministic one (deterministic=True)
also `deterministic 1`; torch.float8_e4m3fn inputs take the
FP8 kernels, facts `dtype e4m3`). When none matches (or
no directory is given) and the compiler library libFA3CAPI.so is there, the
variant is compiled on first use into the JIT cache (fa3.cache:
``$FA3_CACHE_DIR``, default ``~/.cache/fa3``); ``jit=False`` or ``FA3_JIT=0``
turns that off. A runtime-only install (no compiler) runs precompiled kernels
only. torch is imported lazily: this module imports without it.

Per call, a variant already looked up costs one dict lookup keyed by the
call's arguments (no file-system access, no environment read): kernel files
changed on disk afterwards, and changes of $FA3_KERNEL_DIR, $FA3_JIT or
$FA3_CACHE_DIR, are seen after clear_caches().
"""
from __future__ import annotations

import contextlib
import os
import operator
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from . import chunks as _chunks
from . import facts as _facts

_scan_cache: Dict[str, Tuple[int, list, list]] = {}
_kernel_cache: Dict[tuple, object] = {}
_selected: Dict[tuple, List[_facts.KernelFacts]] = {}  # request -> its kernels (_candidates)
_launchable: Dict[tuple, tuple] = {}  # (device, request) -> (kernels, loaded) (_launchable_kernel)
_plans: Dict[tuple, "_Plan"] = {}  # an eager call's metadata -> its launch plan (_plan_key)
_PLANS_MAX = 1024  # plans kept (a new one past this forgets them all)
_lock = threading.Lock()
_OFF = ("0", "off", "false", "no")


def clear_caches() -> None:
    """Forgets the looked-up kernels and directory scans of this process (the
    loaded kernels stay loaded), so that the next call looks at the files
    again."""
    from . import cache
    with _lock:
        _scan_cache.clear()
        _selected.clear()
        _launchable.clear()
        _plans.clear()
    cache.clear_memory()


def _jit_on(jit: Optional[bool]) -> bool:
    if jit is not None:
        return bool(jit)
    return os.environ.get("FA3_JIT", "1").strip().lower() not in _OFF


_DTYPE_NAMES: Dict[object, str] = {}


def _dtype_name(torch, dt) -> Optional[str]:
    """The facts dtype of a torch dtype: bf16, f16, e4m3 (torch.float8_e4m3fn,
    the FP8 kernels' q, k and v), else None."""
    if not _DTYPE_NAMES:
        names = {torch.bfloat16: "bf16", torch.float16: "f16"}
        f8 = getattr(torch, "float8_e4m3fn", None)
        if f8 is not None:
            names[f8] = "e4m3"
        _DTYPE_NAMES.update(names)
    return _DTYPE_NAMES.get(dt)


def _resolve_dir(kernel_dir) -> str:
    d = kernel_dir if kernel_dir is not None else os.environ.get("FA3_KERNEL_DIR")
    if not d:
        raise ValueError("no kernel directory: pass kernel_dir=... or set FA3_KERNEL_DIR to a "
                         "directory of compiled kernels (<name>.cubin + <name>.facts)")
    return os.path.realpath(str(d))


def available_kernels(kernel_dir=None) -> Tuple[List[_facts.KernelFacts], List[str]]:
    """(kernels, skipped-file messages) of a kernel directory; cached until the
    directory changes."""
    d = _resolve_dir(kernel_dir)
    try:
        mtime = os.stat(d).st_mtime_ns
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel directory '{d}' does not exist") from None
    with _lock:
        hit = _scan_cache.get(d)
        if hit and hit[0] == mtime:
            return hit[1], hit[2]
    kernels, skipped = _facts.scan_kernel_dir(d)
    with _lock:
        _scan_cache[d] = (mtime, kernels, skipped)
    return kernels, skipped


def _request(dtype, head_dim, head_dim_v, causal, window_size, softcap, kernel_dir, jit,
             varlen=False, backward=False, decode=False, deterministic=False, paged=False):
    """The memo key of a lookup: its arguments (the environment is read on a
    miss only: reading os.environ costs 1-2 us a variable)."""
    return (dtype, head_dim, head_dim_v, bool(causal),
            tuple(window_size) if window_size is not None else (-1, -1),
            softcap, kernel_dir, jit, bool(varlen), bool(backward), bool(decode),
            bool(deterministic), bool(paged))


def select_kernel(dtype: str, head_dim: int, head_dim_v: int, causal: bool = False,
                  window_size=(-1, -1), softcap: float = 0.0,
                  kernel_dir=None, jit: Optional[bool] = None,
                  varlen: bool = False, backward: bool = False,
                  decode: bool = False, deterministic: bool = False,
                  seqlen_q: int = 0, k_block_descales: bool = False,
                  paged: bool = False) -> _facts.KernelFacts:
    """The kernel that computes the variant: from `kernel_dir` (default
    $FA3_KERNEL_DIR) if one there matches, else compiled on first use into
    the JIT cache (fa3.cache) when `jit` (None: unless FA3_JIT=0) and
    libFA3CAPI.so is there. LookupError when none matches and there is no
    JIT, listing what the directory holds and why there is no JIT; ValueError
    when there is neither a directory nor a JIT. A repeated lookup is a dict
    lookup keyed by the arguments (clear_caches() forgets them, e.g. after
    changing $FA3_KERNEL_DIR). `varlen`: the kernel of a packed
    variable-length batch (flash_attn_varlen_func); `backward`: the
    variant's backward kernel (flash_attn_backward), with `deterministic`
    its deterministic one (facts deterministic 1: dq bitwise the same from
    run to run; a plain request takes a plain kernel); `decode`: its
    decoding kernel (split-KV and GQA packing: flash_attn_with_kvcache);
    `paged` (with `varlen`): its paged varlen kernel (facts paged_kv 1:
    flash_attn_with_kvcache with cu_seqlens_q and page_table).
    `seqlen_q`: the call's query rows; where the compiler configured the
    variant for long sequences too (facts min_seqlen_q: the compile adds
    <name>_long_kernel), the kernel for that length (fa3.facts.by_length);
    `k_block_descales`: an FP8 call's k descales are per 128 keys (the
    long kernel's 192-key tiles would straddle them: the first kernel)."""
    return _facts.by_length(_candidates(dtype, head_dim, head_dim_v, causal, window_size,
                                        softcap, kernel_dir, jit, varlen, backward, decode,
                                        deterministic, paged), seqlen_q, k_block_descales)


def _candidates(dtype, head_dim, head_dim_v, causal, window_size, softcap, kernel_dir, jit,
                varlen=False, backward=False, decode=False, deterministic=False, paged=False):
    """Every kernel that computes the variant (one, or one per length the
    compiler configured it for), memoized by the request."""
    req = _request(dtype, head_dim, head_dim_v, causal, window_size, softcap, kernel_dir, jit,
                   varlen, backward, decode, deterministic, paged)
    kfs = _selected.get(req)
    if kfs is None:
        kfs = _select(dtype, head_dim, head_dim_v, causal, window_size, softcap, kernel_dir,
                      jit, varlen, backward, decode, deterministic, paged)
        with _lock:
            _selected[req] = kfs
    return kfs


def _select(dtype, head_dim, head_dim_v, causal, window_size, softcap, kernel_dir, jit,
            varlen=False, backward=False, decode=False, deterministic=False, paged=False):
    """select_kernels' list for the request, from the directory or the JIT."""
    window_size = (-1, -1) if window_size is None else tuple(window_size)
    given = kernel_dir if kernel_dir is not None else os.environ.get("FA3_KERNEL_DIR")
    use_jit = _jit_on(jit)
    miss = None
    if given or not use_jit:
        d = _resolve_dir(kernel_dir)   # ValueError without a directory
        kernels, skipped = available_kernels(d)
        try:
            return _facts.select_kernels(kernels, dtype, head_dim, head_dim_v, causal,
                                         window_size, softcap, kernel_dir=d, skipped=skipped,
                                         varlen=varlen, backward=backward, decode=decode,
                                         deterministic=deterministic, paged=paged)
        except LookupError as e:
            if not use_jit:
                raise
            miss = e
    from . import _capi
    ok, why = _capi.compiler_available()
    if not ok:
        if miss is not None:
            raise LookupError(f"{miss}\nNo JIT compile either: {why}") from None
        raise ValueError("no kernel directory (pass kernel_dir=... or set FA3_KERNEL_DIR to a "
                         "directory of compiled kernels) and no JIT compile: " + why)
    from . import cache
    from .ir import Fa3Error
    try:
        options = {"varlen": True} if varlen else {}
        if backward:
            options["backward"] = True
        if deterministic:
            options["deterministic"] = True
        if decode:
            options["decode"] = True
        if paged:
            options["paged"] = True
        kf = cache.get_kernel(dtype, head_dim, head_dim_v, causal, window_size, softcap,
                              **options)
        # the entry holds the variant's kernels for longer sequences too
        entry, _ = _facts.scan_kernel_dir(cache.entry_dir(kf))
        return _facts.select_kernels(entry, dtype, head_dim, head_dim_v, causal, window_size,
                                     softcap, varlen=varlen, backward=backward, decode=decode,
                                     deterministic=deterministic, paged=paged)
    except (Fa3Error, LookupError) as e:
        where = f"in '{_resolve_dir(kernel_dir)}' " if given else ""
        raise LookupError(f"no precompiled FA3 kernel {where}computes dtype={dtype} "
                          f"head_dim={head_dim} head_dim_v={head_dim_v} causal={int(bool(causal))}"
                          f" window={window_size} softcap={softcap}"
                          f"{' varlen' if varlen else ''}{' backward' if backward else ''}"
                          f"{' deterministic' if deterministic else ''}"
                          f"{' decode' if decode else ''}{' paged_kv' if paged else ''}, "
                          f"and the JIT compile "
                          f"failed: {e}") from e


def _load(kf: _facts.KernelFacts, device_index: int, device=None):
    """The kernel loaded on device `device_index`, loaded again when its cubin
    changed; `device(index)` (torch.cuda.device) makes the device current for
    a load (None: it is current)."""
    from . import runtime
    st = os.stat(kf.cubin_path)
    # the library too: runtime.loading_with may bind a kernel to another one
    key = (device_index, kf.cubin_path, kf.facts_path, st.st_mtime_ns, st.st_size,
           id(runtime.lib()))
    k = _kernel_cache.get(key)
    if k is None:
        import torch
        with (device(device_index) if device else contextlib.nullcontext()):
            capturing = torch.cuda.is_current_stream_capturing()
        if capturing:
            # loading allocates device memory, which CUDA forbids in a capture
            raise RuntimeError(
                f"fa3: kernel {kf.describe()} is not loaded yet and a CUDA graph is being "
                "captured: call it once before capturing (the warm-up that torch.cuda.graph "
                "asks for)")
        with _lock, (device(device_index) if device else contextlib.nullcontext()):
            k = _kernel_cache.get(key)
            if k is None:
                k = runtime.Kernel(kf.cubin_path, kf.facts_path)
                _kernel_cache[key] = k
    return k


def _bhsd(t):
    """(shape, strides) of a BSHD tensor in logical [B, H, S, D] order (two
    calls into torch, not eight: each costs 0.3-0.5 us)."""
    b, s, h, d = t.shape
    sb, ss, sh, sd = t.stride()
    return (b, h, s, d), (sb, sh, ss, sd)


def _launch(torch, dev: int, run, args):
    """run(args, stream): a loaded kernel's fwd, bwd or quantize, on torch's
    current stream of device `dev`, with `dev` current during the call (its
    context is the one the kernel was loaded in). torch._C's raw stream
    handle and device index cost a fraction of a microsecond where
    torch.cuda.current_stream (a Stream object) and the torch.cuda.device
    guard (two device exchanges) cost microseconds, and a short
    attention's time is mostly such host work; the guard is entered only
    where another device is current (c10's device exchange is a no-op
    then anyway)."""
    C = torch._C
    raw = getattr(C, "_cuda_getCurrentRawStream", None)
    if raw is not None and C._cuda_getDevice() == dev:
        return run(args, raw(dev))
    with torch.cuda.device(dev):
        return run(args, raw(dev) if raw is not None
                   else torch.cuda.current_stream(dev).cuda_stream)


def _meta(t):
    """What of a tensor (None: nothing) a launch plan depends on: all but its
    data and address."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


_KEYED = (bool, int, float, str)  # the scalar types a plan key takes (by value)
_DESCALES = ("q_descale", "k_descale", "v_descale")  # fwd_args' descale addresses


def _plan_key(kind, q, k, v, out, lse_out, scalars, kernel, tensors=()):
    """The key of an eager call's launch plan (_plans), or None for a call
    planned anew each time. A plan holds what the checks, the kernel lookup
    and fwd_args made of the call's metadata (the shapes, strides, dtypes
    and devices of q, k, v, out, lse_out and `tensors`, and its other
    arguments), so a call repeated with new tensors of the same metadata
    (a model's layers, a benchmark's loop) skips them: they cost more host
    time than the launch (bench/NOTES.md, Next item 9). Only values hashed
    by value are keyed (`scalars`: None, bool, int, float, str and tuples
    of ints); an explicit `kernel` by identity (its plan keeps it alive).
    Like the kernel lookups, plans last until clear_caches()."""
    for x in scalars:
        if x is not None and type(x) not in _KEYED and not (
                type(x) is tuple and all(type(e) is int for e in x)):
            return None
    try:
        return (kind, _meta(q), _meta(k), _meta(v), _meta(out), _meta(lse_out), scalars,
                None if kernel is None else id(kernel), tuple(_meta(t) for t in tensors))
    except (AttributeError, TypeError):
        return None     # not tensors: the unplanned path names what is wrong


def _remember(key, plan) -> None:
    """Stores a launch plan (all of them forgotten past _PLANS_MAX)."""
    if key is None:
        return
    with _lock:
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        _plans[key] = plan


class _Plan(NamedTuple):
    """What an eager launch keeps of its checked path (_plan_key)."""
    kernel: object              # the loaded runtime.Kernel
    device: int
    args: object                # its fa3rt_fwd_args (addresses replaced per call)
    o_shape: tuple
    o_dtype: object
    lse_shape: tuple
    return_lse: bool
    keep: object                # an explicit KernelFacts keyed by id: kept alive
    # per tensor of the call's `tensors` (_plan_key's), the fwd_args field
    # that takes its address ("": none; "k_new"/"v_new": that Tensor's ptr)
    addresses: tuple = ()
    # allocated per call: (field, elements, dtype), e.g. split workspaces
    workspaces: tuple = ()


def _run_plan(torch, plan, q, k, v, out, lse_out, tensors=()):
    """A planned eager launch: its outputs allocated (or the given ones), the
    plan's arguments with this call's addresses, the launch. None where an
    address is not 16-byte aligned (the unplanned path then says so)."""
    o, lse, return_lse = _outputs(torch, q, plan.o_shape, plan.lse_shape, out, lse_out,
                                  plan.return_lse, plan.o_dtype)
    qp, kp, vp, op = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    if (qp | kp | vp | op) & 15:
        return None
    a = type(plan.args).from_buffer_copy(plan.args)
    a.q.ptr, a.k.ptr, a.v.ptr, a.o.ptr = qp, kp, vp, op
    a.lse = 0 if lse is None else lse.data_ptr()
    for field, t in zip(plan.addresses, tensors):
        if field == "k_new" or field == "v_new":
            p = t.data_ptr()
            if p & 15:
                return None
            getattr(a, field).ptr = p
        elif field:
            setattr(a, field, t.data_ptr())
    work = [torch.empty(n, dtype=dtype, device=q.device) for _, n, dtype in plan.workspaces]
    for (field, _, _), t in zip(plan.workspaces, work):
        setattr(a, field, t.data_ptr())
    counter = _graph_tile_counter(torch, plan.kernel, q.device)
    a.tile_counter = 0 if counter is None else counter.data_ptr()
    _launch(torch, plan.device, plan.kernel.fwd, a)
    return (o, lse) if return_lse else o


def _from_plan(torch, key, q, k, v, out, lse_out, tensors=()):
    """The call's result launched from its plan (_plan_key's `key`), or None
    where it has none or cannot take it (_run_plan): the checked path then
    runs."""
    plan = _plans.get(key) if key is not None else None
    return None if plan is None else _run_plan(torch, plan, q, k, v, out, lse_out, tensors)


def _descale_addresses(fields) -> tuple:
    """A plan's addresses for the FP8 descales (_Plan.addresses) from the
    fwd_args keywords the checked path gave them: a field it left 0 (no
    descale, or one of no elements) stays 0."""
    return tuple(n if fields.get(n) else "" for n in _DESCALES)


def _pick(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit=None, varlen=False,
          backward=False, decode=False, deterministic=False, paged=False):
    if kernel is None:
        return select_kernel(dt, D, Dv, bool(causal), tuple(window_size), softcap, kernel_dir,
                             jit, varlen, backward, decode, deterministic, paged=paged)
    if not _facts.matches(kernel, dt, D, Dv, bool(causal), tuple(window_size), softcap, varlen,
                          backward, decode, deterministic, paged):
        raise ValueError(f"kernel {kernel.describe()} does not compute dtype={dt} head_dim={D} "
                         f"head_dim_v={Dv} causal={int(bool(causal))} window={tuple(window_size)} "
                         f"softcap={softcap}{' varlen' if varlen else ''}"
                         f"{' backward' if backward else ''}"
                         f"{' deterministic' if deterministic else ''}"
                         f"{' decode' if decode else ''}{' paged_kv' if paged else ''}")
    return kernel


def _launchable_kernel(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit, dev,
                       device, varlen=False, backward=False, decode=False,
                       deterministic=False, seqlen_q=0, k_block_descales=False, paged=False):
    """The loaded runtime.Kernel for a call on device `dev` (`device`: see
    _load) with `seqlen_q` query rows (select_kernel; `k_block_descales`:
    fa3.facts.by_length's). A variant looked up
    before costs a dict lookup and a pass over its one or two kernels; an
    explicit `kernel` is checked against the request and found by its
    cubin's stat."""
    if kernel is not None:
        return _load(_pick(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir,
                           varlen=varlen, backward=backward, decode=decode,
                           deterministic=deterministic, paged=paged), dev, device)
    req = (dev, dt, D, Dv, bool(causal), tuple(window_size), softcap, kernel_dir, jit,
           bool(varlen), bool(backward), bool(decode), bool(deterministic), bool(paged))
    slots = _launchable.get(req)
    if slots is None:
        kfs = _candidates(dt, D, Dv, bool(causal), tuple(window_size), softcap, kernel_dir, jit,
                          varlen, backward, decode, deterministic, paged)
        # each loaded now: a CUDA graph captured at another length than the
        # warm-up finds its kernel loaded
        slots = (kfs, [_load(kf, dev, device) for kf in kfs])
        with _lock:
            _launchable[req] = slots
    kfs, loaded = slots
    picked = _facts.by_length(kfs, seqlen_q, k_block_descales)
    return loaded[next(i for i, kf in enumerate(kfs) if kf is picked)]


def _graph_tile_counter(torch, kobj, device):
    """In a captured call of a persistent kernel, 8 zeroed bytes from the
    graph's memory pool for its tile scheduler (fa3rt_fwd_args.tile_counter):
    the zeroing is captured with it, so each replay starts from zero and
    graphs replayed on different streams do not share counters. Otherwise
    None: the runtime's own counters serve."""
    if torch.cuda.is_current_stream_capturing() and kobj.facts.persistent:
        return torch.zeros(2, dtype=torch.int32, device=device)
    return None


def _window(window_size) -> Tuple[int, int]:
    """window_size as (left, right); None is (-1, -1)."""
    if window_size is None:
        return (-1, -1)
    if len(window_size) != 2:
        raise ValueError(f"window_size must be (left, right), got {window_size!r}")
    return (window_size[0], window_size[1])


def _check_shapes(q_shape, k_shape, v_shape) -> Tuple[int, int, int, int, int, int, int]:
    """(B, Sq, Hq, D, Skv, Hkv, Dv) of 4-D BSHD shapes q, k, v; ValueError
    naming what does not agree."""
    B, Sq, Hq, D = q_shape
    Bk, Skv, Hkv, Dk = k_shape
    if tuple(v_shape[:3]) != tuple(k_shape[:3]):
        raise ValueError(f"k and v must agree in [B, Skv, Hkv], got {tuple(k_shape)} and "
                         f"{tuple(v_shape)}")
    if Bk != B:
        raise ValueError(f"batch sizes differ: q {B}, k {Bk}")
    if Dk != D:
        raise ValueError(f"q and k head dims differ: {D} and {Dk}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"the number of q heads ({Hq}) must be a multiple of the number of "
                         f"k/v heads ({Hkv})")
    return B, Sq, Hq, D, Skv, Hkv, v_shape[3]


def _op_path(p) -> Optional[str]:
    """A path argument as the op's `str?` (None stays None)."""
    return p if p is None or isinstance(p, str) else os.fspath(p)


def _check_inputs(torch, q, k, v, layout="4-D [B, S, H, D] (BSHD)", fn="flash_attn_func",
                  grad_ok=False, fp8_ok=False):
    """The checks of every call (traced by Dynamo on the compiled path):
    q, k, v CUDA tensors of the `layout`'s rank, of one device and dtype
    (bf16 or f16; with `fp8_ok` also torch.float8_e4m3fn: the FP8 paths of
    flash_attn_func and flash_attn_with_kvcache), not requiring grad where grad is on unless `grad_ok` (a
    call with a backward). Returns the dtype name."""
    rank = int(layout[0])
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != rank:
            raise ValueError(f"{name} must be {layout}, got shape {tuple(t.shape)}")
        if not t.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not (q.dtype == k.dtype == v.dtype):
        fp8 = any(_dtype_name(torch, t.dtype) == "e4m3" for t in (q, k, v))
        raise ValueError(f"q, k, v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
                         + (" (FP8: all three torch.float8_e4m3fn, quantized with their "
                            "descales, e.g. by fa3.quantize_qkv_fp8)" if fp8 else ""))
    dt = _dtype_name(torch, q.dtype)
    if dt is None:
        raise ValueError(f"dtype {q.dtype} is not supported (torch.bfloat16 or torch.float16"
                         f"{'; torch.float8_e4m3fn with descales' if fp8_ok else ''})")
    if dt == "e4m3" and not fp8_ok:
        raise NotImplementedError(
            f"fa3 {fn}: FP8 (torch.float8_e4m3fn) inputs are taken by flash_attn_func and "
            "flash_attn_with_kvcache only: the FP8 kernels are the fixed-length forward and "
            "the decoding kernel (no packed variable-length batches, no backward, no SDPA "
            "layout); use bf16 or f16 here")
    if not grad_ok and _needs_grad(torch, q, k, v):
        raise NotImplementedError(f"fa3 {fn} is forward-only (no backward yet): call it "
                                  "under torch.no_grad() or on detached tensors")
    return dt


def _needs_grad(torch, q, k, v) -> bool:
    """Whether a call records a backward: grad mode on and an input that
    requires grad."""
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v))


# What the backward kernel computes (fa3-c/Compile.h, Fa3AttentionSpec.backward;
# its deterministic form takes the same)
BWD_HEAD_DIMS = (64, 96, 128, 192, 256)


def _check_backward(D: int, Dv: int) -> None:
    """NotImplementedError naming what the backward kernel cannot
    differentiate (checked when the forward records a backward, so that the
    error comes before the forward runs, not at .backward()): head dims.
    Any mask (full, causal, sliding window) and softcap are taken."""
    hint = "(call the forward under torch.no_grad() or on detached tensors)"
    if D not in BWD_HEAD_DIMS:
        raise NotImplementedError(f"fa3: the backward kernel takes head dims "
                                  f"{', '.join(map(str, BWD_HEAD_DIMS[:-1]))} and {BWD_HEAD_DIMS[-1]}, "
                                  f"not {D} {hint}")
    if Dv != D:
        raise NotImplementedError(f"fa3: the backward kernel takes head_dim_v = head_dim, not "
                                  f"{Dv} with {D} {hint}")


def _tma_ok(shape, strides, elem_size: int) -> bool:
    """TMA can read a tensor of this shape and these strides (elements): the
    last dim contiguous, every other dim of extent > 1 a positive stride of a
    multiple of 16 bytes (fa3rt.h, fa3rt_tensor)."""
    if shape[-1] > 1 and strides[-1] != 1:
        return False
    return all(n <= 1 or (s > 0 and s * elem_size % 16 == 0)
               for n, s in zip(shape[:-1], strides[:-1]))


def _tma_ready(t):
    """t, or a contiguous copy where TMA could not read it (e.g. the
    expanded gradient of a sum(), or a view not 16-byte aligned)."""
    if _tma_ok(t.shape, t.stride(), t.element_size()) and not t.data_ptr() % 16:
        return t
    return t.contiguous() if not t.is_contiguous() else t.clone()


def _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv, out_dtype=None):
    """out (o's dtype: `out_dtype`, None: q's) and lse_out as given."""
    want = q.dtype if out_dtype is None else out_dtype
    if out is not None and (tuple(out.shape) != (B, Sq, Hq, Dv) or out.dtype != want
                            or out.device != q.device):
        raise ValueError(f"out must be a {want} tensor of shape {(B, Sq, Hq, Dv)} on "
                         f"{q.device}, got {out.dtype} {tuple(out.shape)} on {out.device}")
    if lse_out is not None and (tuple(lse_out.shape) != (B, Hq, Sq)
                                or lse_out.dtype != torch.float32
                                or lse_out.device != q.device or not lse_out.is_contiguous()):
        raise ValueError(f"lse_out must be a contiguous float32 tensor of shape "
                         f"{(B, Hq, Sq)} on {q.device}")


def _refuse_qv(qv, fn: str = "") -> None:
    """FA3's qv (an extra query term), which no kernel here computes:
    refused by name unless None (the message prefixed with `fn`: where
    given)."""
    if qv is not None:
        raise NotImplementedError(f"{fn + ': ' if fn else ''}qv is not supported: pass None")


def _integer(fn: str, name: str, value) -> int:
    """value as an int (operator.index), else a TypeError naming the
    argument (prefixed with `fn`: where given); the callers check ranges."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{fn + ': ' if fn else ''}{name} must be an integer, got "
                        f"{type(value).__name__}") from None


def _max_seqlen(value, fn: str = "", name: str = "max_seqlen_q") -> int:
    """A packed batch's max_seqlen_q (the tile grid's rows) or max_seqlen_k
    as an int 0 to 2^31-1 (the message prefixed with `fn`: where given)."""
    at = f"{fn}: " if fn else ""
    n = _integer(fn, name, value)
    if not 0 <= n <= 2**31 - 1:
        raise ValueError(f"{at}{name} must be 0 to 2^31-1, got {n}")
    return n


def _max_seqlen_q(value, fn: str = "") -> int:
    return _max_seqlen(value, fn)


def _max_seqlen_k(value, fn: str, chunk: int) -> int:
    """max_seqlen_k as attention_chunk needs it: the bound of every
    sequence's keys that sizes its chunks."""
    if value is None:
        raise ValueError(f"{fn}: attention_chunk {chunk} needs max_seqlen_k (at least every "
                         f"sequence's key count: it sets how many chunks a sequence spans)")
    return _max_seqlen(value, fn, "max_seqlen_k")


def flash_attn_func(q, k, v, softmax_scale: Optional[float] = None, causal: bool = False,
                    qv=None, q_descale=None, k_descale=None, v_descale=None,
                    window_size=(-1, -1), attention_chunk: int = 0, softcap: float = 0.0,
                    num_splits: int = 1, pack_gqa: Optional[bool] = None,
                    deterministic: bool = False, sm_margin: int = 0,
                    return_attn_probs: bool = False, *, return_lse: bool = False,
                    kernel_dir=None, kernel: Optional[_facts.KernelFacts] = None,
                    out=None, lse_out=None, jit: Optional[bool] = None):
    """FlashAttention on BSHD tensors, like FA3's ``flash_attn_func``
    (hopper/flash_attn_interface.py: its arguments, names and order; ours
    after them, by keyword only). ``return_attn_probs`` (FA3's name) or
    ``return_lse`` returns (o, lse), as FA3's does (no probabilities: FA3
    returns none either). ``sm_margin`` is taken and changes nothing;
    ``qv`` is refused unless None.

    ``attention_chunk`` c > 0 (FA3's; Llama 4's chunked local attention):
    query row i, at key position p = i + Skv - Sq, sees only the keys
    floor(p / c) * c .. floor(p / c) * c + c - 1 (with causal or the window
    on top; none where p < 0), run as virtual batches of the existing
    kernels (fa3.chunks): with Sq == Skv a multiple of c the batch folded
    into B * Skv / c batches of c rows (every route: autograd with the
    backward kernel, FP8, num_splits), otherwise the variable-length
    kernel over each (batch, chunk) pair (bf16/f16, forward only; FA3's
    backward has no attention_chunk at all).

    q: [B, Sq, Hq, D], k: [B, Skv, Hkv, D], v: [B, Skv, Hkv, Dv] (bf16 or f16,
    one CUDA device, Hq % Hkv == 0). ``softmax_scale`` defaults to the kernel's
    (1/sqrt(D) unless compiled otherwise). Causal and windows are bottom-right
    aligned when Sq != Skv; ``window_size=(left, right)``, -1 = unbounded.
    Returns o [B, Sq, Hq, Dv], or (o, lse) with lse [B, Hq, Sq] float32 (natural
    log; -inf for rows that see no key, whose o is 0). Runs on
    torch.cuda.current_stream(). Can be captured in
    a CUDA graph (torch.cuda.graph, torch.compile's reduce-overhead) once the
    variant has run before the capture.

    Autograd: where q, k or v require grad (grad mode on), the call goes
    through the custom op ``torch.ops.fa3.flash_attn_fwd``, whose registered
    backward (fa3.torch_ops) runs the variant's backward kernel
    (flash_attn_backward; looked up like the forward's, in ``kernel_dir``, the
    explicit ``kernel``'s directory or the JIT cache); lse is not
    differentiable (its gradient is ignored, as in FlashAttention). The
    backward kernel takes head dims 64, 96, 128, 192 and 256 with Dv = D (any mask: full,
    causal, sliding window; softcap too); other variants that need a
    backward are refused here, before the forward runs (NotImplementedError).
    ``deterministic=True`` makes that backward the variant's deterministic
    kernel (facts `deterministic 1`, fa3-compile --backward --deterministic):
    dq is then bitwise the same from run to run (dk and dv always are), at
    some cost in speed, as the kv blocks add their dQ tiles in turn; the
    forward is deterministic either way.
    ``kernel`` (a fa3.facts.KernelFacts) bypasses the directory lookup; it must
    compute the requested variant. Without it the kernel comes from
    ``kernel_dir`` (default ``$FA3_KERNEL_DIR``) or, when none there matches,
    from the JIT cache (compiled on first use; ``jit=False`` or ``FA3_JIT=0``:
    never), see select_kernel. ``out`` ([B, Sq, Hq, Dv], any strides with a
    contiguous last dim) and ``lse_out`` (contiguous float32 [B, Hq, Sq]; implies
    return_lse) are optional preallocated outputs.

    Under torch.compile (fullgraph=True works) the call is the custom op
    ``torch.ops.fa3.flash_attn_fwd`` (fa3.torch_ops), which always computes
    lse; ``out``/``lse_out`` are then filled by a copy (so too in eager calls
    that record a backward).

    ``num_splits`` other than 1 (0: the heuristic; 2 to 128: that many
    splits of the keys) or ``pack_gqa=True`` run the variant's decoding
    kernel instead, as flash_attn_with_kvcache does (split-KV with the
    splits merged by a second kernel, the q heads of a kv head packed into
    one tile): forward only, so inputs that require grad are refused; under
    torch.compile the op ``torch.ops.fa3.flash_attn_decode_fwd``.
    ``pack_gqa`` None or False with num_splits 1 keeps the kernel above (the
    decoding kernel always packs: pack_gqa is a speed hint, as in FA3).

    FP8: q, k, v of torch.float8_e4m3fn (all three) run the variant's FP8
    kernel (facts dtype e4m3, fa3-compile --dtype e4m3: head dims 64, 128
    and 256, head_dim_v = head_dim), which returns o in bfloat16 (``out`` must be bf16) and computes S =
    (Q K^T) * qd * kd * softmax_scale, O = (P V) * vd with the float32
    descale factors ``q_descale``, ``k_descale``, ``v_descale`` (each None:
    1.0; on q's device; no gradient):

    * FA3's form: [B, Hkv] each (q's: one factor per kv head's group of q
      heads, expanded here to [B, Hq]);
    * q_descale [B, Hq]: one per q head (fa3.quantize_fp8's);
    * block scales (fa3.quantize_fp8(x, block=128), quantize_qkv_fp8):
      q_descale [B, Hq, ceil(Sq / 128)] and k_descale [B, Hkv,
      ceil(Skv / 128)], one per 128 rows of a head (v_descale stays [B,
      Hkv]);
    * a 0-d tensor: one factor for the whole tensor.

    Every descale value must be positive and finite: the kernel's online
    softmax takes the score scale softmax_scale * qd * kd to be positive,
    and a zero, negative, NaN or infinite factor gives wrong or non-finite
    o and lse. They are not checked here (reading them would synchronise
    with the device). Any strides (an expanded tensor's 0 included). P is rounded to e4m3 for
    P V, as in FlashAttention-3 (expect a relative error of o of about 3 %
    against attention of the dequantized inputs). Forward only (inputs that
    require grad are refused, NotImplementedError), no split or decoding
    kernel (num_splits 1, pack_gqa off); flash_attn_varlen_func,
    flash_attn_with_kvcache and flash_attn_bhsd refuse FP8 inputs. Under
    torch.compile the call is the op ``torch.ops.fa3.flash_attn_fp8_fwd``.
    Descales given with bf16 or f16 inputs are refused (ValueError).
    """
    _refuse_qv(qv)
    import torch
    return_lse = return_lse or return_attn_probs
    chunk = _chunks.check_chunk("flash_attn_func", attention_chunk)
    if chunk and all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v)) \
            and not _chunks.changes_nothing(chunk, q.shape[1], k.shape[1],
                                            causal or _window(window_size)[1] == 0):
        return _chunked_func(torch, chunk, q, k, v, softmax_scale, causal, q_descale,
                             k_descale, v_descale, window_size, softcap, num_splits, pack_gqa,
                             deterministic, sm_margin, return_lse, kernel_dir, kernel, out,
                             lse_out, jit)
    if (q_descale is not None or k_descale is not None or v_descale is not None
            or _any_fp8(torch, q, k, v)):
        return _fp8_fwd(torch, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                        window_size, softcap, return_lse, kernel_dir, kernel, out, lse_out, jit,
                        num_splits, pack_gqa)
    if num_splits != 1 or pack_gqa:
        return _decode(torch, "flash_attn_func", q, k, v, None, softmax_scale, causal,
                       window_size, softcap, num_splits, 0, return_lse, kernel_dir, kernel, out,
                       lse_out, jit)
    if torch.compiler.is_compiling() or _needs_grad(torch, q, k, v):
        return _op_fwd(torch, q, k, v, softmax_scale, causal, window_size, softcap, return_lse,
                       kernel_dir, kernel, out, lse_out, jit, deterministic)
    return _eager_fwd(torch, q, k, v, softmax_scale, causal, window_size, softcap, return_lse,
                      kernel_dir, kernel, out, lse_out, jit)


def _chunked_func(torch, c, q, k, v, softmax_scale, causal, q_descale, k_descale, v_descale,
                  window_size, softcap, num_splits, pack_gqa, deterministic, sm_margin,
                  return_lse, kernel_dir, kernel, out, lse_out, jit):
    """flash_attn_func with attention_chunk c that masks something
    (fa3.chunks): Sq == Skv a multiple of c folds the batch into chunks
    (any route: autograd, FP8, decoding kernel); otherwise the
    variable-length kernel over the (batch, chunk) virtual sequences
    (bf16/f16, forward only; num_splits and pack_gqa, speed hints, do not
    apply there)."""
    fn = "flash_attn_func"
    B, Sq, Hq, D, Skv, Hkv, Dv = _check_shapes(q.shape, k.shape, v.shape)
    want_lse = return_lse or lse_out is not None
    _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv,
               torch.bfloat16 if _any_fp8(torch, q, k, v) else None)
    n = _chunks.folds(c, Sq, Skv)
    if n:
        f = _chunks.fold
        rows = _facts.DESCALE_ROWS
        # out folded where that is a view (its batch stride Sq rows), else
        # written by a copy below
        of = (f(out, n) if out is not None and (B == 1 or out.stride(0) == Sq * out.stride(1))
              else None)
        r = flash_attn_func(
            f(q, n), f(k, n), f(v, n), softmax_scale=softmax_scale, causal=causal,
            q_descale=_chunks.fold_descale(torch, "q_descale", q_descale, B, n, c, rows),
            k_descale=_chunks.fold_descale(torch, "k_descale", k_descale, B, n, c, rows),
            v_descale=_chunks.fold_descale(torch, "v_descale", v_descale, B, n, c, rows),
            window_size=window_size, softcap=softcap, num_splits=num_splits,
            pack_gqa=pack_gqa, deterministic=deterministic, sm_margin=sm_margin,
            return_lse=want_lse, kernel_dir=kernel_dir, kernel=kernel, out=of, jit=jit)
        o, lse = r if want_lse else (r, None)
        o = out if of is not None else o.unflatten(0, (B, n)).flatten(1, 2)
        if lse is not None:
            lse = _chunks.unfold_lse(lse, B, n)
        return _copied_out(o, lse, out if of is None else None, lse_out, return_lse)
    if q_descale is not None or k_descale is not None or v_descale is not None:
        # bf16/f16 inputs with descales: refused by name (FP8 ones below)
        _check_fp8(torch, q, k, v, q_descale, k_descale, v_descale, grad_check=False)
    if _needs_grad(torch, q, k, v):
        raise NotImplementedError(
            f"fa3 {fn}: attention_chunk {c} under autograd needs Sq == Skv, a multiple of the "
            f"chunk (the batch folded into chunks runs the backward kernel), got Sq {Sq}, Skv "
            f"{Skv}; FA3's backward has no attention_chunk either")
    if _any_fp8(torch, q, k, v):
        raise NotImplementedError(
            f"fa3 {fn}: attention_chunk {c} with FP8 inputs needs Sq == Skv, a multiple of the "
            f"chunk (got Sq {Sq}, Skv {Skv}): other shapes run the variable-length kernel, "
            f"which has no FP8 form")
    if kernel is not None and not kernel.varlen:
        raise ValueError(
            f"{fn}: attention_chunk {c} with Sq {Sq}, Skv {Skv} (not one multiple of the "
            f"chunk) runs the variable-length kernel over the chunks; kernel= names "
            f"{kernel.kernel}, a fixed-length one: pass a --varlen kernel or none")
    dev = q.device
    cu_q = torch.arange(B + 1, dtype=torch.int32, device=dev) * Sq
    cu_k = torch.arange(B + 1, dtype=torch.int32, device=dev) * Skv
    seg_q, seg_k, used, max_q = _chunks.segments(torch, cu_q, cu_k, None, c, Sq, Skv,
                                                 max_behind=Sq - Skv)
    o, lse = flash_attn_varlen_func(
        q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), seg_q, seg_k, max_q, Skv,
        seqused_k=used, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
        softcap=softcap, return_attn_probs=True, kernel_dir=kernel_dir, kernel=kernel, jit=jit)
    o = o.unflatten(0, (B, Sq))
    lse = lse.unflatten(1, (B, Sq)).transpose(0, 1).contiguous() if want_lse else None
    return _copied_out(o, lse, out, lse_out, return_lse)


def _packed_heads(shape, num_heads_q) -> Tuple[int, int]:
    """(Hq, Hkv) of FA3's packed qkv: [B, S, 3, H, D] (num_heads_q None or
    H), or [B, S, Hq + 2 Hkv, D] with num_heads_q = Hq (GQA/MQA)."""
    shape = tuple(shape)
    if len(shape) == 5:
        if shape[2] != 3:
            raise ValueError(f"flash_attn_qkvpacked_func: qkv [B, S, 3, H, D] needs 3 at "
                             f"dim 2, got shape {list(shape)}")
        if num_heads_q is not None and num_heads_q != shape[3]:
            raise ValueError(f"flash_attn_qkvpacked_func: num_heads_q {num_heads_q} with a "
                             f"5-D qkv of {shape[3]} heads (it is for the 4-D form)")
        return shape[3], shape[3]
    if len(shape) == 4:
        if num_heads_q is None:
            raise ValueError("flash_attn_qkvpacked_func: a 4-D qkv [B, S, Hq + 2 Hkv, D] "
                             "needs num_heads_q")
        rest = shape[2] - num_heads_q
        if num_heads_q < 1 or rest < 2 or rest % 2:
            raise ValueError(f"flash_attn_qkvpacked_func: {shape[2]} packed heads are not "
                             f"num_heads_q {num_heads_q} + 2 Hkv with Hkv >= 1")
        return num_heads_q, rest // 2
    raise ValueError(f"flash_attn_qkvpacked_func: qkv is [B, S, 3, H, D] or [B, S, Hq + 2 "
                     f"Hkv, D], got {len(shape)}-D shape {list(shape)}")


def flash_attn_qkvpacked_func(qkv, softmax_scale: Optional[float] = None, causal: bool = False,
                              q_descale=None, k_descale=None, v_descale=None,
                              window_size=(-1, -1), attention_chunk: int = 0,
                              softcap: float = 0.0, deterministic: bool = False,
                              num_heads_q: Optional[int] = None, sm_margin: int = 0,
                              return_attn_probs: bool = False, *, kernel_dir=None,
                              jit: Optional[bool] = None):
    """FA3's ``flash_attn_qkvpacked_func``: q, k and v stacked in one tensor,
    qkv [B, S, 3, H, D], or [B, S, Hq + 2 Hkv, D] with ``num_heads_q`` = Hq
    (GQA/MQA: q's heads, then k's, then v's); FA3's arguments in its order,
    ours after them by keyword only. Runs flash_attn_func on views
    of qkv (no copy: the kernels take the strides), so the rest is as there;
    under autograd the gradient reaches qkv through the views (dq, dk and dv
    copied into one tensor, where FA3 writes them there directly)."""
    Hq, Hkv = _packed_heads(qkv.shape, num_heads_q)
    if qkv.dim() == 5:
        q, k, v = qkv.unbind(dim=2)
    else:
        q, k, v = qkv.split([Hq, Hkv, Hkv], dim=2)
    return flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal,
                           window_size=window_size, attention_chunk=attention_chunk,
                           softcap=softcap, sm_margin=sm_margin,
                           return_lse=return_attn_probs, kernel_dir=kernel_dir, jit=jit,
                           deterministic=deterministic, q_descale=q_descale,
                           k_descale=k_descale, v_descale=v_descale)


def _copied_out(o, lse, out, lse_out, return_lse):
    """A custom op's (o, lse) as the caller asked: copied into `out` /
    `lse_out` where given (lse_out implies returning lse)."""
    if out is not None:
        out.copy_(o)
        o = out
    if lse_out is not None:
        lse_out.copy_(lse)
        lse, return_lse = lse_out, True
    return (o, lse) if return_lse else o


def _outputs(torch, q, o_shape, lse_shape, out, lse_out, return_lse, o_dtype=None):
    """The eager paths' o (`out` or a new tensor of o_shape, of `o_dtype`,
    None: q's), lse (`lse_out`, a new float32 tensor of lse_shape when
    return_lse, else None) and whether lse is returned."""
    o = torch.empty(o_shape, dtype=q.dtype if o_dtype is None else o_dtype,
                    device=q.device) if out is None else out
    if lse_out is not None:
        return o, lse_out, True
    lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    return o, lse, return_lse


def _op_fwd(torch, q, k, v, softmax_scale, causal, window_size, softcap, return_lse,
            kernel_dir, kernel, out, lse_out, jit, deterministic=False):
    """flash_attn_func through the custom op: as Dynamo traces it, and in
    eager calls that record a backward (the op's autograd, fa3.torch_ops):
    the checks, then the op."""
    from . import torch_ops  # noqa: F401  (registers torch.ops.fa3.flash_attn_fwd)
    _check_inputs(torch, q, k, v, grad_ok=True)
    B, Sq, Hq, D, Skv, Hkv, Dv = _check_shapes(q.shape, k.shape, v.shape)
    window_size = _window(window_size)
    if _needs_grad(torch, q, k, v):
        _check_backward(D, Dv)
    _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv)
    o, lse = torch.ops.fa3.flash_attn_fwd.default(
        q, k, v, None if softmax_scale is None else float(softmax_scale), bool(causal),
        list(window_size), float(softcap), _op_path(kernel_dir),
        None if kernel is None else _op_path(kernel.facts_path), jit, bool(deterministic))
    return _copied_out(o, lse, out, lse_out, return_lse)


def _eager_fwd(torch, q, k, v, softmax_scale, causal, window_size, softcap, return_lse,
               kernel_dir, kernel, out, lse_out, jit):
    key = _plan_key("fwd", q, k, v, out, lse_out,
                    (softmax_scale, causal, window_size, softcap, return_lse, kernel_dir, jit),
                    kernel)
    done = _from_plan(torch, key, q, k, v, out, lse_out)
    if done is not None:
        return done
    from . import runtime

    # grad_ok: flash_attn_func comes here without grad, and so does the op's
    # forward under its autograd (fa3.torch_ops)
    dt = _check_inputs(torch, q, k, v, grad_ok=True)
    B, Sq, Hq, D, Skv, Hkv, Dv = _check_shapes(q.shape, k.shape, v.shape)
    window_size = _window(window_size)

    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    kobj = _launchable_kernel(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit,
                              dev, torch.cuda.device, seqlen_q=Sq)

    # TMA reads rows of D contiguous elements: make the last dim contiguous
    # (a call that copies is not planned)
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        key = None
        q, k, v = [t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v)]
    _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv)
    o, lse, return_lse = _outputs(torch, q, (B, Sq, Hq, Dv), (B, Hq, Sq), out, lse_out,
                                  return_lse)

    counter = _graph_tile_counter(torch, kobj, q.device)
    args = runtime.fwd_args(runtime.tensor(q.data_ptr(), *_bhsd(q), name="q"),
                            runtime.tensor(k.data_ptr(), *_bhsd(k), name="k"),
                            runtime.tensor(v.data_ptr(), *_bhsd(v), name="v"),
                            runtime.tensor(o.data_ptr(), *_bhsd(o), name="o"),
                            lse.data_ptr() if lse is not None else 0,
                            softmax_scale, dt,
                            counter.data_ptr() if counter is not None else 0)
    _launch(torch, dev, kobj.fwd, args)
    _remember(key, _Plan(kobj, dev, args, tuple(o.shape), o.dtype, (B, Hq, Sq), return_lse,
                         kernel))
    return (o, lse) if return_lse else o


# ---- FP8 (facts dtype e4m3) ----

_FP8_ELSEWHERE = (" (the FP8 kernels are the fixed-length forward and the decoding kernel: "
                  "flash_attn_func and flash_attn_with_kvcache take torch.float8_e4m3fn q, k, "
                  "v with their descales)")

# head dims of the FP8 kernels (fa3rt.h: fa3rt_dtype, FA3RT_E4M3), and of
# the FP8 decoding kernel's
FP8_HEAD_DIMS = (64, 128, 256)
FP8_DECODE_HEAD_DIMS = (64, 128)


def _any_fp8(torch, *ts) -> bool:
    """Whether any of ts is a torch.float8_e4m3fn tensor."""
    return any(_dtype_name(torch, getattr(t, "dtype", None)) == "e4m3" for t in ts)


def _fp8_descale(torch, name, t, device, B, H, rows, Hq=None, check_only=False,
                 fn="flash_attn_func"):
    """One descale as the runtime takes it: (tensor or None, pointer,
    strides [b, h(, block)]). t None: 1.0 (pointer 0, strides 0). A 0-d
    tensor: one factor (strides 0). [B, H]: per batch and head (block
    stride 0). [B, H, ceil(rows / 128)] (rows not None): per 128 rows. q's
    (Hq given, H = Hkv < Hq): [B, Hkv] or [B, Hkv, blocks] too, FA3's per
    kv head, repeated here over each group's Hq / Hkv q heads. check_only:
    the checks alone (no copy, no pointer: what Dynamo traces)."""
    n = 2 if rows is None else 3
    if t is None:
        return None, 0, (0,) * n
    per = _facts.DESCALE_ROWS
    blocks = None if rows is None else -(-rows // per)

    def want():
        """What the descale must be (messages only: a call's host time
        matters for short attentions)."""
        forms = [f"{(B, H)}"] + ([] if blocks is None else [f"{(B, H, blocks)}"])
        if Hq is not None and Hq != H:
            forms = [f"{(B, Hq)}", f"{(B, Hq, blocks)}", f"{(B, H)} (FA3's, per kv head)",
                     f"{(B, H, blocks)}"]
        return (f"a float32 tensor on {device}: 0-d (one factor), or of shape "
                + (", ".join(forms[:-1]) + " or " if len(forms) > 1 else "") + forms[-1])
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be None or {want()}, got "
                        f"{type(t).__name__}")
    if t.dtype != torch.float32 or t.device != device:
        raise ValueError(f"{fn}: {name} must be {want()}, got {t.dtype} on "
                         f"{t.device}")
    shape = tuple(t.shape)
    if shape == ():
        return t, 0 if check_only else t.data_ptr(), (0,) * n
    heads = (H,) if Hq is None or Hq == H else (Hq, H)
    ok = shape[:1] == (B,) and len(shape) in ((2, 3) if n == 3 else (2,)) and \
        shape[1:2] in [(h,) for h in heads] and (len(shape) == 2 or shape[2] == blocks)
    if not ok:
        raise ValueError(f"{fn}: {name} must be {want()}, got shape {shape}"
                         + (f" (ceil({rows} / {per}) = {blocks} blocks of {per} rows)"
                            if len(shape) == 3 and rows is not None else ""))
    if check_only:
        return t, 0, (0,) * n
    if Hq is not None and shape[1] != Hq:
        # FA3's q descale, one per kv head: one per q head of its group
        t = t.repeat_interleave(Hq // H, dim=1)
        shape = tuple(t.shape)
    if t.numel() == 0:
        return t, 0, (0,) * n      # nothing is read
    strides = [0 if e == 1 else st for e, st in zip(shape, t.stride())]
    strides += [0] * (n - len(strides))
    if max(strides) > 2**31 - 1:
        t = t.contiguous()
        strides = [0 if e == 1 else st for e, st in zip(shape, t.stride())]
        strides += [0] * (n - len(strides))
    return t, t.data_ptr(), tuple(strides)


def _fp8_descales(torch, q_descale, k_descale, v_descale, device, B, Sq, Skv, Hq, Hkv,
                  check_only=False):
    """The three descales checked and in the runtime's form (fwd_args'
    keywords), and the tensors that must live until the launch."""
    c = check_only
    qt, qp, qs = _fp8_descale(torch, "q_descale", q_descale, device, B, Hkv, Sq, Hq, c)
    kt, kp, ks = _fp8_descale(torch, "k_descale", k_descale, device, B, Hkv, Skv, None, c)
    vt, vp, vs = _fp8_descale(torch, "v_descale", v_descale, device, B, Hkv, None, None, c)
    return (dict(q_descale=qp, q_descale_strides=qs, k_descale=kp, k_descale_strides=ks,
                 v_descale=vp, v_descale_strides=vs), (qt, kt, vt))


def _fp8_decode_descales(torch, fn, q_descale, k_descale, v_descale, device, B, Hkv):
    """The FP8 decoding kernel's descales (fwd_args' keywords) and the
    tensors to keep until the launch: each None (1.0), 0-d (one factor) or
    FA3's [B, Hkv], q's too (a GQA-packed tile mixes the q heads of a kv
    head, so q's descale is per kv head: fa3rt.h)."""
    fields, keep = {}, []
    for name, t in (("q_descale", q_descale), ("k_descale", k_descale),
                    ("v_descale", v_descale)):
        kt, ptr, strides = _fp8_descale(torch, name, t, device, B, Hkv, None, fn=fn)
        fields[name] = ptr
        fields[name + "_strides"] = strides if name == "v_descale" else strides + (0,)
        keep.append(kt)
    return fields, keep


def _check_fp8(torch, q, k, v, q_descale, k_descale, v_descale, num_splits=1, pack_gqa=None,
               grad_check=True):
    """flash_attn_func's FP8 checks (before any kernel is chosen; traced by
    Dynamo on the compiled path; grad_check False: the op's, below the
    autograd layer). Returns (B, Sq, Hq, D, Skv, Hkv, Dv)."""
    fn = "flash_attn_func"
    dt = _check_inputs(torch, q, k, v, grad_ok=True, fp8_ok=True)
    given = [n for n, t in (("q_descale", q_descale), ("k_descale", k_descale),
                            ("v_descale", v_descale)) if t is not None]
    if dt != "e4m3":
        raise ValueError(f"{fn}: {', '.join(given)} given with {q.dtype} inputs: descales are "
                         "for FP8 inputs (q, k, v torch.float8_e4m3fn, e.g. from "
                         "fa3.quantize_qkv_fp8); pass None")
    if grad_check and _needs_grad(torch, q, k, v) or grad_check and any(
            torch.is_grad_enabled() and isinstance(t, torch.Tensor) and t.requires_grad
            for t in (q_descale, k_descale, v_descale)):
        raise NotImplementedError(f"fa3 {fn}: the FP8 kernels are forward-only (no FP8 "
                                  "backward): call it under torch.no_grad() or on detached "
                                  "tensors")
    if num_splits != 1 or pack_gqa:
        raise NotImplementedError(f"fa3 {fn}: FP8 inputs run the FP8 forward kernel here, "
                                  f"not split-KV or GQA-packed (the FP8 decoding kernel is "
                                  f"flash_attn_with_kvcache's): pass num_splits=1 and "
                                  f"pack_gqa=None (got {num_splits}, {pack_gqa})")
    dims = _check_shapes(q.shape, k.shape, v.shape)
    D, Dv = dims[3], dims[6]
    if D not in FP8_HEAD_DIMS or Dv not in FP8_HEAD_DIMS:
        raise NotImplementedError(f"fa3 {fn}: the FP8 kernels take head dims "
                                  f"{', '.join(map(str, FP8_HEAD_DIMS[:-1]))} and {FP8_HEAD_DIMS[-1]}, got head_dim {D}"
                                  + (f", head_dim_v {Dv}" if Dv != D else ""))
    if D != Dv:
        raise NotImplementedError(f"fa3 {fn}: the FP8 kernels take head_dim_v equal to "
                                  f"head_dim, got head_dim {D}, head_dim_v {Dv}")
    return dims


def _fp8_fwd(torch, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
             window_size, softcap, return_lse, kernel_dir, kernel, out, lse_out, jit,
             num_splits=1, pack_gqa=None):
    """flash_attn_func on FP8 inputs: the eager launch, or under
    torch.compile the checks, then the custom op as Dynamo traces it
    (torch.ops.fa3.flash_attn_fp8_fwd)."""
    if not torch.compiler.is_compiling():
        return _eager_fp8(torch, q, k, v, q_descale, k_descale, v_descale, softmax_scale,
                          causal, window_size, softcap, return_lse, kernel_dir, kernel, out,
                          lse_out, jit, grad_check=True, num_splits=num_splits,
                          pack_gqa=pack_gqa)
    B, Sq, Hq, D, Skv, Hkv, Dv = _check_fp8(torch, q, k, v, q_descale, k_descale, v_descale,
                                            num_splits, pack_gqa)
    window_size = _window(window_size)
    _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv, torch.bfloat16)
    # the descales' shapes, dtypes and devices, before the op (their strides
    # are taken at launch)
    _fp8_descales(torch, q_descale, k_descale, v_descale, q.device, B, Sq, Skv, Hq, Hkv,
                  check_only=True)
    from . import torch_ops  # noqa: F401  (registers torch.ops.fa3.flash_attn_fp8_fwd)
    o, lse = torch.ops.fa3.flash_attn_fp8_fwd.default(
        q, k, v, q_descale, k_descale, v_descale,
        None if softmax_scale is None else float(softmax_scale), bool(causal),
        list(window_size), float(softcap), _op_path(kernel_dir),
        None if kernel is None else _op_path(kernel.facts_path), jit)
    return _copied_out(o, lse, out, lse_out, return_lse)


def _eager_fp8(torch, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
               window_size, softcap, return_lse, kernel_dir, kernel, out, lse_out, jit,
               grad_check=False, num_splits=1, pack_gqa=None):
    """The FP8 kernel's launch, every check once (a short call's time is
    mostly this host work): flash_attn_func's (grad_check, num_splits,
    pack_gqa: its arguments) and the op's (fa3.torch_ops, below the autograd
    layer: the defaults). o bfloat16."""
    descales = (q_descale, k_descale, v_descale)
    key = _plan_key("fp8", q, k, v, out, lse_out,
                    (softmax_scale, causal, window_size, softcap, return_lse, kernel_dir, jit,
                     num_splits, pack_gqa), kernel, descales)
    # (a plan cannot stand for the grad check: made each call; a key means
    # tensors or None)
    if key is not None and not (grad_check and torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (q, k, v) + descales)):
        done = _from_plan(torch, key, q, k, v, out, lse_out, descales)
        if done is not None:
            return done
    from . import runtime
    B, Sq, Hq, D, Skv, Hkv, Dv = _check_fp8(torch, q, k, v, q_descale, k_descale, v_descale,
                                            num_splits, pack_gqa, grad_check=grad_check)
    window_size = _window(window_size)
    _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv, torch.bfloat16)
    fields, keep = _fp8_descales(torch, q_descale, k_descale, v_descale, q.device, B, Sq, Skv,
                                 Hq, Hkv)
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    # (k's descales per 128 keys: a kernel of whole descale blocks)
    kobj = _launchable_kernel(kernel, "e4m3", D, Dv, causal, window_size, softcap, kernel_dir,
                              jit, dev, torch.cuda.device, seqlen_q=Sq,
                              k_block_descales=fields["k_descale_strides"][2] != 0)
    # TMA reads rows of D contiguous elements: make the last dim contiguous
    # (a call that copies, or expands a descale, is not planned)
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1 or any(
            t is not given for t, given in zip(keep, descales)):
        key = None
        q, k, v = [t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v)]
    o, lse, return_lse = _outputs(torch, q, (B, Sq, Hq, Dv), (B, Hq, Sq), out, lse_out,
                                  return_lse, torch.bfloat16)
    counter = _graph_tile_counter(torch, kobj, q.device)
    t = runtime.tensor
    args = runtime.fwd_args(t(q.data_ptr(), *_bhsd(q), name="q"),
                            t(k.data_ptr(), *_bhsd(k), name="k"),
                            t(v.data_ptr(), *_bhsd(v), name="v"),
                            t(o.data_ptr(), *_bhsd(o), name="o"),
                            lse.data_ptr() if lse is not None else 0, softmax_scale, "e4m3",
                            counter.data_ptr() if counter is not None else 0,
                            o_dtype="bf16", **fields)
    _launch(torch, dev, kobj.fwd, args)
    del keep    # (expanded descales: freed after the launch, stream-ordered)
    _remember(key, _Plan(kobj, dev, args, tuple(o.shape), o.dtype, (B, Hq, Sq), return_lse,
                         kernel, _descale_addresses(fields)))
    return (o, lse) if return_lse else o


def flash_attn_backward(dout, q, k, v, out, lse, softmax_scale: Optional[float] = None,
                        causal: bool = False, window_size=(-1, -1), softcap: float = 0.0,
                        deterministic: bool = False, kernel_dir=None,
                        kernel: Optional[_facts.KernelFacts] = None,
                        jit: Optional[bool] = None, dq=None, dk=None, dv=None, dq_accum=None):
    """The gradients (dq, dk, dv) of flash_attn_func's o, given dout = dL/do,
    with the variant's backward kernel (fa3-compile --backward; facts
    `backward 1`): what flash_attn_func's autograd runs.

    q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D], out and dout [B, Sq, Hq, D] (q's
    dtype), lse [B, Hq, Sq] float32: the forward's o and lse (natural log).
    The variant (dtype, head dim, causal, window_size, softcap,
    softmax_scale: None is the kernel's default) must be the forward's. The
    kernel is looked up like the forward's (``kernel_dir``, else the JIT
    cache; ``kernel``: an explicit backward KernelFacts, deterministic where
    ``deterministic``). It takes head dims 64, 96, 128, 192 and 256 with Dv = D, any mask
    (full, causal, sliding window) and softcap. dq is summed over the kv blocks in f32, in no fixed order, so
    its last bits may change from run to run; ``deterministic=True`` runs
    the variant's deterministic backward kernel (facts `deterministic 1`),
    whose kv blocks add their dQ tiles in turn: dq bitwise the same from run
    to run, at some cost in speed (dk and dv are the same either way).

    The runtime (fa3rt_bwd) runs three kernels: delta = rowsum(dout * out)
    in float32 [B, Hq, Sq] with dq_accum zeroed, the backward kernel, and
    dq = softmax_scale * dq_accum rounded once to q's dtype; delta and
    dq_accum (a flat float32 tensor of fa3.facts.bwd_dq_accum_words(B, Hq,
    Sq, D, deterministic) elements, in the kernel's tile order, the
    deterministic kernel's turn counters after the tiles; pass ``dq_accum``
    to reuse one) are workspaces allocated here. ``dq``, ``dk``, ``dv``:
    optional preallocated outputs of q's, k's and v's shapes (dk and dv with
    the same strides, TMA-style: a contiguous last dim and 16-byte
    multiples; a dq otherwise gets its values by a copy); else new
    contiguous tensors. Inputs the kernels cannot read (e.g. an expanded
    dout, a view not 16-byte aligned) are copied contiguous first. Runs on
    torch.cuda.current_stream()."""
    import torch
    if torch.compiler.is_compiling():
        from . import torch_ops  # noqa: F401  (registers torch.ops.fa3.flash_attn_bwd)
        grads = torch.ops.fa3.flash_attn_bwd.default(
            dout, q, k, v, out, lse, None if softmax_scale is None else float(softmax_scale),
            bool(causal), list(_window(window_size)), float(softcap), _op_path(kernel_dir),
            None if kernel is None else _op_path(kernel.facts_path), jit, bool(deterministic))
        return tuple(g if into is None else into.copy_(g) for g, into in zip(grads, (dq, dk, dv)))
    return _eager_bwd(torch, dout, q, k, v, out, lse, softmax_scale, causal, window_size,
                      softcap, kernel_dir, kernel, jit, dq, dk, dv, dq_accum, deterministic)


def _bwd_shapes(B, Sq, Hq, D, Skv, Hkv, Dv, deterministic=False):
    """name: (shape, float32?) of flash_attn_backward's other tensors."""
    return {"dout": ((B, Sq, Hq, Dv), False), "out": ((B, Sq, Hq, Dv), False),
            "lse": ((B, Hq, Sq), True), "dq": ((B, Sq, Hq, D), False),
            "dk": ((B, Skv, Hkv, D), False), "dv": ((B, Skv, Hkv, Dv), False),
            "dq_accum": ((_facts.bwd_dq_accum_words(B, Hq, Sq, D, deterministic),), True)}


def _forward_scale(dt, D, Dv, causal, window_size, softcap, kernel_dir, jit, dev, device,
                   bwd):
    """softmax_scale=None in the backward: the scale the forward used, its
    kernel's default (the forward and backward kernels of one variant may
    have been compiled with different --scale); the backward kernel's own
    where no forward kernel of the variant can be found."""
    try:
        fwd = _launchable_kernel(None, dt, D, Dv, causal, window_size, softcap, kernel_dir,
                                 jit, dev, device)
    except (LookupError, ValueError):
        return bwd.facts.scale
    return fwd.facts.scale


def _eager_bwd(torch, dout, q, k, v, out, lse, softmax_scale, causal, window_size, softcap,
               kernel_dir, kernel, jit, dq=None, dk=None, dv=None, dq_accum=None,
               deterministic=False):
    """flash_attn_backward's launch (and the op's, fa3.torch_ops)."""
    from . import runtime
    dt = _check_inputs(torch, q, k, v, fn="flash_attn_backward", grad_ok=True)
    B, Sq, Hq, D, Skv, Hkv, Dv = _check_shapes(q.shape, k.shape, v.shape)
    window_size = _window(window_size)
    _check_backward(D, Dv)
    given = {"dout": dout, "out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv,
             "dq_accum": dq_accum}
    shapes = _bwd_shapes(B, Sq, Hq, D, Skv, Hkv, Dv, deterministic)
    for name, (shape, f32) in shapes.items():
        t = given[name]
        if t is None and name not in ("dout", "out", "lse"):
            continue
        want = torch.float32 if f32 else q.dtype
        if (not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != want
                or t.device != q.device):
            got = (f"{t.dtype} {tuple(t.shape)} on {t.device}" if isinstance(t, torch.Tensor)
                   else type(t).__name__)
            size = (f" (fa3.facts.bwd_dq_accum_words(B, Hq, Sq, D, deterministic="
                    f"{bool(deterministic)}))" if name == "dq_accum" else "")
            raise ValueError(f"flash_attn_backward: {name} must be a {want} tensor of shape "
                             f"{shape}{size} on {q.device}, got {got}")
    if dq_accum is not None and not dq_accum.is_contiguous():
        raise ValueError("flash_attn_backward: dq_accum must be contiguous")
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    kobj = _launchable_kernel(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit,
                              dev, torch.cuda.device, backward=True,
                              deterministic=deterministic)

    def new(shape, dtype=q.dtype):
        return torch.empty(shape, dtype=dtype, device=q.device)
    dq = new((B, Sq, Hq, D)) if dq is None else dq
    dk = new((B, Skv, Hkv, D)) if dk is None else dk    # contiguous: dk and dv share strides
    dv = new((B, Skv, Hkv, Dv)) if dv is None else dv
    if not (B and Sq and Hq and Skv):
        # an empty problem: every gradient is 0 (dq without keys, dk and dv
        # without queries); the tensor maps cannot describe empty tensors
        for t in (dq, dk, dv):
            t.zero_()
        return dq, dk, dv
    # q, k, v, dout by TMA; out and dout by the helper kernels in 16-byte
    # vectors, which need the same rows (fa3rt.h, fa3rt_bwd_args)
    q, k, v, dout, out = (_tma_ready(t) for t in (q, k, v, dout, out))
    # f32 [B, Hq, Sq] contiguous and 16-byte aligned (fa3rt_bwd_args.lse)
    lse = lse if lse.is_contiguous() and not lse.data_ptr() % 16 else lse.clone(
        memory_format=torch.contiguous_format)
    # workspaces the runtime fills: delta = rowsum(dout * out), dq_accum
    # zeroed then summed into (fresh allocations are 16-byte aligned)
    delta = new((B, Hq, Sq), torch.float32)
    if dq_accum is None:
        dq_accum = new(shapes["dq_accum"][0], torch.float32)
    # dq written by the runtime: a given one whose rows it cannot write
    # (16-byte aligned, contiguous last dim) gets the result by a copy
    dq_out = dq if _tma_ok(dq.shape, dq.stride(), dq.element_size()) and not (
        dq.data_ptr() % 16) else new((B, Sq, Hq, D))
    scale = (float(softmax_scale) if softmax_scale is not None else
             _forward_scale(dt, D, Dv, causal, window_size, softcap, kernel_dir, jit, dev,
                            torch.cuda.device, kobj))
    t = runtime.tensor
    args = runtime.bwd_args(t(q.data_ptr(), *_bhsd(q), name="q"),
                            t(k.data_ptr(), *_bhsd(k), name="k"),
                            t(v.data_ptr(), *_bhsd(v), name="v"),
                            t(dout.data_ptr(), *_bhsd(dout), name="dout"),
                            t(out.data_ptr(), *_bhsd(out), name="out"),
                            lse.data_ptr(), delta.data_ptr(), dq_accum.data_ptr(),
                            t(dq_out.data_ptr(), *_bhsd(dq_out), name="dq"),
                            t(dk.data_ptr(), *_bhsd(dk), name="dk"),
                            t(dv.data_ptr(), *_bhsd(dv), name="dv"), scale, dt)
    _launch(torch, dev, kobj.bwd, args)
    if dq_out is not dq:
        dq.copy_(dq_out)
    return dq, dk, dv


def _check_seqlens(torch, name, t, device, n=None):
    """An int32 CUDA vector on `device` of n entries (any count when None)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.int32 or t.dim() != 1 or t.device != device:
        raise ValueError(f"{name} must be a 1-D torch.int32 tensor on {device}, got "
                         f"{t.dtype} of shape {tuple(t.shape)} on {t.device}")
    if n is not None and t.numel() != n:
        raise ValueError(f"{name} must have {n} entries (one per sequence"
                         f"{' + 1' if name.startswith('cu_') else ''}), got {t.numel()}")
    return t.contiguous()


def _packed(runtime, t, name):
    """A packed [T, H, D] tensor as the [1, H, T, D] the runtime takes."""
    T, H, D = t.shape
    sT, sH, _ = t.stride()
    return runtime.tensor(t.data_ptr(), (1, H, T, D), (0, sH, sT, 1), name=name)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                           max_seqlen_k: Optional[int] = None, seqused_q=None, seqused_k=None,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           qv=None, q_descale=None, k_descale=None, v_descale=None,
                           window_size=(-1, -1), attention_chunk: int = 0,
                           softcap: float = 0.0, num_splits: int = 1, pack_gqa=None,
                           deterministic: bool = False, sm_margin: int = 0,
                           return_attn_probs: bool = False, *, kernel_dir=None,
                           kernel: Optional[_facts.KernelFacts] = None,
                           jit: Optional[bool] = None, out=None, lse_out=None):
    """FlashAttention forward on a packed variable-length batch: FA3's
    ``flash_attn_varlen_func`` (flash_attn_interface), its arguments in its
    order.

    q: [Tq, Hq, D], k: [Tk, Hkv, D], v: [Tk, Hkv, Dv] (bf16 or f16, one CUDA
    device, Hq % Hkv == 0), the sequences packed one after another;
    cu_seqlens_q / cu_seqlens_k: int32 [B + 1] on that device, sequence s has
    the rows cu_seqlens_q[s] .. cu_seqlens_q[s + 1] of q and the rows from
    cu_seqlens_k[s] of k and v, ``seqused_k[s]`` of them when given (int32
    [B]; one outside 0 .. the sequence's keys is clamped into it), else up
    to cu_seqlens_k[s + 1]. Lengths 0 and 1 are allowed.
    ``max_seqlen_q`` must be at least every sequence's query count (it sizes
    the tile grid: the m-blocks of the longest sequence, per head and
    sequence; tiles past a sequence's end are skipped); ``max_seqlen_k`` is
    taken for FA3's signature and not needed. Causal and windows are
    bottom-right aligned per sequence. Returns o [Tq, Hq, Dv], or (o, lse)
    with ``return_attn_probs`` (or ``lse_out``), lse [Hq, Tq] float32 (FA3's
    varlen layout; natural log, -inf for rows that see no key, whose o is
    0). Rows of o and lse that no sequence owns are not written (as in
    FlashAttention), except that with no key rows at all (Tk = 0) every row
    gets o = 0 and lse = -inf (no kernel runs). The lengths are read on the
    GPU only: offsets past the tensors are the caller's error, as in
    FlashAttention. The key rows a kernel tile reads past a sequence's
    keys, up to the next multiple of its block_n (the next sequence's, or
    unused cache slots with seqused_k), are masked out of the scores but
    their V rows are multiplied by 0: they must be finite (NaN there gives
    NaN rows, as in FA3, Dao-AILab/flash-attention#2374). Runs on
    torch.cuda.current_stream(); forward only. Under torch.compile the call
    is the custom op ``torch.ops.fa3.flash_attn_varlen_fwd``
    (fa3.torch_ops), which always computes lse; ``out``/``lse_out`` are then
    filled by a copy.

    Of FA3's other arguments, ``pack_gqa``, ``deterministic`` (the forward
    is deterministic), ``sm_margin`` and ``num_splits`` 0 or 1 are taken and
    change nothing; ``qv`` and the FP8 descales are refused unless left at
    their defaults. ``seqused_q`` (int32 [B]): sequence s uses its first
    seqused_q[s] query rows (clamped to its rows; causal and windows
    aligned to them, as in FA3), its other rows get o = 0 and lse = -inf
    (FA3 leaves them unwritten: "not used"). ``attention_chunk`` (as in
    flash_attn_func) runs the (sequence, chunk) pairs as sequences of their
    own (fa3.chunks.segments, built on the device) and needs
    ``max_seqlen_k``, at least every sequence's key count.
    The kernel is looked up as flash_attn_func's (``kernel_dir``,
    ``kernel``, ``jit``), among the variable-length kernels (fa3-compile
    --varlen). ``out`` ([Tq, Hq, Dv], a contiguous last dim) and ``lse_out``
    (contiguous float32 [Hq, Tq]; implies return_attn_probs) are optional
    preallocated outputs.
    """
    import torch
    from . import runtime

    dt = _check_inputs(torch, q, k, v, "3-D [T, H, D] (packed sequences)",
                       "flash_attn_varlen_func")
    refused = {"q_descale": q_descale, "k_descale": k_descale, "v_descale": v_descale}
    for name, value in refused.items():
        if value is not None:
            raise NotImplementedError(f"{name} is not supported: pass None"
                                      + (_FP8_ELSEWHERE if name.endswith("_descale") else ""))
    _refuse_qv(qv)
    chunk = _chunks.check_chunk("flash_attn_varlen_func", attention_chunk)
    if num_splits not in (0, 1):
        raise NotImplementedError(f"num_splits is not supported: pass 1 (or 0), got "
                                  f"{num_splits}")
    Tq, Hq, D = q.shape
    Tk, Hkv, Dk = k.shape
    if tuple(v.shape[:2]) != tuple(k.shape[:2]):
        raise ValueError(f"k and v must agree in [Tk, Hkv], got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    if Dk != D:
        raise ValueError(f"q and k head dims differ: {D} and {Dk}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"the number of q heads ({Hq}) must be a multiple of the number of "
                         f"k/v heads ({Hkv})")
    Dv = v.shape[2]
    cu_seqlens_q = _check_seqlens(torch, "cu_seqlens_q", cu_seqlens_q, q.device)
    if cu_seqlens_q.numel() < 1:
        raise ValueError("cu_seqlens_q must have B + 1 >= 1 entries, got 0")
    B = cu_seqlens_q.numel() - 1
    cu_seqlens_k = _check_seqlens(torch, "cu_seqlens_k", cu_seqlens_k, q.device, B + 1)
    if seqused_k is not None:
        seqused_k = _check_seqlens(torch, "seqused_k", seqused_k, q.device, B)
    max_seqlen_q = _max_seqlen_q(max_seqlen_q)
    window_size = _window(window_size)
    if out is not None and (tuple(out.shape) != (Tq, Hq, Dv) or out.dtype != q.dtype
                            or out.device != q.device or out.stride(-1) != 1):
        raise ValueError(f"out must be a {q.dtype} tensor of shape {(Tq, Hq, Dv)} with a "
                         f"contiguous last dim on {q.device}")
    if lse_out is not None and (tuple(lse_out.shape) != (Hq, Tq)
                                or lse_out.dtype != torch.float32
                                or lse_out.device != q.device or not lse_out.is_contiguous()):
        raise ValueError(f"lse_out must be a contiguous float32 tensor of shape {(Hq, Tq)} "
                         f"on {q.device}")
    if seqused_q is not None:
        # each sequence's used rows, then its unused ones as a sequence of
        # no keys (fa3.chunks.used_queries)
        seqused_q = _check_seqlens(torch, "seqused_q", seqused_q, q.device, B)
        cu_seqlens_q, cu_seqlens_k, seqused_k = _chunks.used_queries(
            torch, cu_seqlens_q, cu_seqlens_k, seqused_k, seqused_q)
    if chunk:
        # the (sequence, chunk) virtual sequences (fa3.chunks), in row order:
        # o and lse keep their layouts
        cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q = _chunks.segments(
            torch, cu_seqlens_q, cu_seqlens_k, seqused_k, chunk, max_seqlen_q,
            _max_seqlen_k(max_seqlen_k, "flash_attn_varlen_func", chunk))

    if torch.compiler.is_compiling():
        # Dynamo traces the custom op (fa3.torch_ops), which runs the eager
        # path below at run time
        from . import torch_ops  # noqa: F401  (registers torch.ops.fa3.flash_attn_varlen_fwd)
        o, lse = torch.ops.fa3.flash_attn_varlen_fwd.default(
            q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
            None if softmax_scale is None else float(softmax_scale), bool(causal),
            list(window_size), float(softcap), _op_path(kernel_dir),
            None if kernel is None else _op_path(kernel.facts_path), jit)
        return _copied_out(o, lse, out, lse_out, return_attn_probs)
    return _eager_varlen(torch, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                         softmax_scale, causal, window_size, softcap, return_attn_probs,
                         kernel_dir, kernel, jit, out, lse_out)


def _eager_varlen(torch, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                  softmax_scale, causal, window_size, softcap, return_lse, kernel_dir, kernel,
                  jit, out, lse_out, page_table=None):
    """flash_attn_varlen_func's launch on checked arguments. page_table: None,
    or (flash_attn_with_kvcache's packed queries over a paged cache) a
    checked int32 [B, max_pages] table over the page pools k and v
    [num_pages, page_size, Hkv, D]: the paged varlen kernel (facts
    paged_kv 1) reads packed row r of k and v as row r % page_size of page
    table.flatten()[r / page_size] (the table made contiguous)."""
    from . import runtime
    dt = _dtype_name(torch, q.dtype)
    Tq, Hq, D = q.shape
    Tk, Dv = k.shape[0], v.shape[-1]
    B = cu_seqlens_q.numel() - 1
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    paged = page_table is not None
    # the kernel for the batch's mean query length (facts min_seqlen_q:
    # select_kernel), what sets how full its tiles are
    kobj = _launchable_kernel(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit,
                              dev, torch.cuda.device, varlen=True,
                              seqlen_q=Tq // B if B else 0, paged=paged)
    if paged:
        _check_page_size("flash_attn_with_kvcache", kobj, k.shape[1])
    o, lse, return_lse = _outputs(torch, q, (Tq, Hq, Dv), (Hq, Tq), out, lse_out, return_lse)
    if B and Tq and max_seqlen_q and not Tk:
        # No keys at all: every row sees none (o = 0, lse = -inf); the
        # kernel's K/V tensor maps cannot describe an empty tensor.
        o.zero_()
        if lse is not None:
            lse.fill_(float("-inf"))
        return (o, lse) if return_lse else o
    # TMA reads rows of D contiguous elements: make the last dim contiguous
    q, k, v = [t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v)]
    counter = _graph_tile_counter(torch, kobj, q.device)
    if paged:
        # the pools [num_pages, page_size, Hkv, D] as [num_pages, Hkv,
        # page_size, D] (fa3rt_fwd_args.page_table); the table contiguous,
        # as the caller's cu_seqlens_k counted its rows
        t = runtime.tensor
        kt, vt = t(k.data_ptr(), *_bhsd(k), name="k"), t(v.data_ptr(), *_bhsd(v), name="v")
        page_table = page_table.contiguous()
        table = dict(page_table=page_table.data_ptr(), page_table_stride=page_table.shape[1])
    else:
        kt, vt, table = _packed(runtime, k, "k"), _packed(runtime, v, "v"), {}
    args = runtime.fwd_args(_packed(runtime, q, "q"), kt, vt, _packed(runtime, o, "o"),
                            lse.data_ptr() if lse is not None else 0, softmax_scale, dt,
                            counter.data_ptr() if counter is not None else 0,
                            cu_seqlens_q=cu_seqlens_q.data_ptr(),
                            cu_seqlens_k=cu_seqlens_k.data_ptr(),
                            seqused_k=seqused_k.data_ptr() if seqused_k is not None else 0,
                            varlen_batch=B, max_seqlen_q=max_seqlen_q, **table)
    _launch(torch, dev, kobj.fwd, args)
    return (o, lse) if return_lse else o


def _ctas_per_sm(fn: str, ctas_per_sm) -> int:
    """ctas_per_sm as an int 0 (the runtime's choice), 1 (one CTA a SM) or
    2 (as many as fit): fa3rt.h, fa3rt_fwd_args.ctas_per_sm."""
    n = _integer(fn, "ctas_per_sm", ctas_per_sm)
    if n not in (0, 1, 2):
        raise ValueError(f"{fn}: ctas_per_sm must be 0 (the runtime's choice), 1 (one CTA a "
                         f"SM) or 2 (as many as fit), got {n}")
    return n


def _sm_margin(fn: str, sm_margin) -> int:
    """FA3's sm_margin: SMs the split heuristic leaves free, an integer >= 0."""
    sm_margin = _integer(fn, "sm_margin", sm_margin)
    if sm_margin < 0:
        raise ValueError(f"{fn}: sm_margin must be >= 0 (SMs the heuristic leaves free), got "
                         f"{sm_margin}")
    return sm_margin


def _num_splits(fn: str, num_splits) -> int:
    """num_splits as an int 0 (the heuristic) to 128 (fa3rt.h:
    FA3RT_MAX_SPLITS)."""
    n = _integer(fn, "num_splits", num_splits)
    if not 0 <= n <= _MAX_SPLITS:
        raise ValueError(f"{fn}: num_splits must be 0 (the heuristic) to {_MAX_SPLITS}, got {n}")
    return n


_MAX_SPLITS = 128                   # fa3rt.h: FA3RT_MAX_SPLITS
_device_sms: Dict[int, int] = {}    # device index -> SMs (multi_processor_count)


def _cache_seqlens_int(fn, cache_seqlens):
    """flash_attn_with_kvcache's cache_seqlens before torch is imported: a
    Python int (not a bool) must be 0 to 2^31-1 (its upper bound, Skv, is
    checked with the shapes); anything else passes on to
    _check_cache_seqlens."""
    if isinstance(cache_seqlens, bool):
        raise TypeError(f"{fn}: cache_seqlens must be an int or a 1-D torch.int32 tensor of "
                        f"the batch's lengths, got bool")
    if isinstance(cache_seqlens, int) and not 0 <= cache_seqlens <= 2**31 - 1:
        raise ValueError(f"{fn}: cache_seqlens must be 0 to k_cache's Skv, got {cache_seqlens}")
    return cache_seqlens


def _check_cache_seqlens(torch, fn, cache_seqlens, device, B, Skv, snew=0):
    """cache_seqlens as the kernel's seqUsedK: None (every key of the cache),
    or an int32 [B] CUDA tensor on q's device (contiguous). An int n (FA3
    takes one: every batch's length) is checked against Skv: n = Skv is
    None, else a tensor filled with n. A tensor's values are read on the GPU
    only (0 to Skv: the caller's contract, as in FlashAttention; the kernel
    clamps one outside it, so nothing past the cache is read). snew > 0:
    that many new rows are appended after each batch's cache_seqlens[b]
    (_check_append), so an int is checked against Skv - snew and always
    becomes a tensor (the append reads where its rows go), and a tensor's
    values must be 0 to Skv - snew (the caller's contract; the append writes
    no row at or past Skv)."""
    if cache_seqlens is None:
        return None
    if not isinstance(cache_seqlens, torch.Tensor):
        try:
            n = operator.index(_cache_seqlens_int(fn, cache_seqlens))
        except TypeError:
            raise TypeError(f"{fn}: cache_seqlens must be an int or a 1-D torch.int32 tensor of "
                            f"the batch's lengths, got {type(cache_seqlens).__name__}") from None
        if snew and not 0 <= n <= Skv - snew:
            raise ValueError(f"{fn}: cache_seqlens must be 0 to k_cache's Skv - Snew = {Skv} - "
                             f"{snew} = {Skv - snew} (room for the {snew} new rows of k and v "
                             f"a batch), got {n}")
        if not 0 <= n <= Skv:
            raise ValueError(f"{fn}: cache_seqlens must be 0 to k_cache's Skv = {Skv}, got {n}")
        if n == Skv and not snew:
            return None
        return torch.full((B,), n, dtype=torch.int32, device=device)
    if cache_seqlens.dtype != torch.int32 or cache_seqlens.dim() != 1 \
            or cache_seqlens.device != device:
        raise ValueError(f"{fn}: cache_seqlens must be a 1-D torch.int32 tensor on {device}, "
                         f"got {cache_seqlens.dtype} of shape {tuple(cache_seqlens.shape)} on "
                         f"{cache_seqlens.device}")
    if cache_seqlens.numel() != B:
        raise ValueError(f"{fn}: cache_seqlens must have {B} entries (one per batch), got "
                         f"{cache_seqlens.numel()}")
    if cache_seqlens.requires_grad:
        raise ValueError(f"{fn}: cache_seqlens must not require grad")
    return cache_seqlens.contiguous()


def _check_leftpad(torch, fn, cache_leftpad, device, B, page_table):
    """flash_attn_with_kvcache's cache_leftpad as the kernel's leftPadK: an
    int32 [B] CUDA tensor on q's device (FA3's; contiguous: a copy where it
    is not), batch b's first key row of its cache. Its values, 0 to
    cache_seqlens[b], are read on the GPU only (the caller's contract, as
    in FA3; the kernel clamps one outside it). A page table whose batches
    span pages is refused (a block of keys then starts at any row of a
    page; FA3 refuses leftpad with a paged cache too); one page a batch
    (cache_batch_idx's) is taken."""
    t = _check_seqlens(torch, f"{fn}: cache_leftpad", cache_leftpad, device, B)
    if page_table is not None and page_table.shape[1] > 1:
        raise NotImplementedError(
            f"{fn}: cache_leftpad with a paged cache of {page_table.shape[1]} pages a batch "
            f"(page_table) is not supported (nor in FA3): its blocks of keys would start "
            f"inside pages; pass a contiguous k_cache [B, Skv, Hkv, D] (or cache_batch_idx's "
            f"rows) instead")
    return t


def _check_page_table(torch, fn, page_table, device, B):
    """page_table as the kernel's: an int32 [B, max_pages_per_seq] tensor on
    q's device with at least one column (FA3's; its entries, pages of the
    pool, are read on the GPU only: the caller's contract). Returns the
    table (a copy where its last dim is not contiguous or its rows overlap)
    and its row stride in entries."""
    if not isinstance(page_table, torch.Tensor):
        raise TypeError(f"{fn}: page_table must be a 2-D torch.int32 tensor [B, "
                        f"max_pages_per_seq] of page indices, got {type(page_table).__name__}")
    if page_table.dtype != torch.int32 or page_table.dim() != 2 or page_table.device != device:
        raise ValueError(f"{fn}: page_table must be a 2-D torch.int32 tensor [B, "
                         f"max_pages_per_seq] on {device}, got {page_table.dtype} of shape "
                         f"{tuple(page_table.shape)} on {page_table.device}")
    rows, cols = page_table.shape
    if rows != B:
        raise ValueError(f"{fn}: page_table must have {B} rows (one per batch), got {rows}")
    if cols == 0:
        raise ValueError(f"{fn}: page_table has no columns (max_pages_per_seq = 0): a paged "
                         "cache needs at least one page a batch")
    if page_table.stride(1) != 1 or (rows > 1 and page_table.stride(0) < cols):
        page_table = page_table.contiguous()
    return page_table, (page_table.stride(0) if rows > 1 else cols)


def _check_paged_shapes(fn, q_shape, k_shape, v_shape, pt_shape):
    """(B, Sq, Hq, D, Skv, Hkv, Dv) of a paged call: q [B, Sq, Hq, D], the
    page pools k [num_pages, page_size, Hkv, D] and v [num_pages, page_size,
    Hkv, Dv], the table [B, max_pages]; Skv is the logical key length
    max_pages * page_size (FA3's)."""
    B, Sq, Hq, D = q_shape
    P, ps, Hkv, Dk = k_shape
    if tuple(v_shape[:3]) != tuple(k_shape[:3]):
        raise ValueError(f"{fn}: k_cache and v_cache must agree in [num_pages, page_size, Hkv], "
                         f"got {tuple(k_shape)} and {tuple(v_shape)}")
    if Dk != D:
        raise ValueError(f"q and k head dims differ: {D} and {Dk}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"the number of q heads ({Hq}) must be a multiple of the number of "
                         f"k/v heads ({Hkv})")
    if P == 0:
        raise ValueError(f"{fn}: k_cache and v_cache have no pages (shape "
                         f"{tuple(k_shape)}): a page table needs a pool of at least one page")
    # (pages of fewer than 8 rows: TMA boxes of part of a 128-byte swizzle
    # atom, which TMA swizzles by the shared-memory address, so a box lands
    # in its rows of the atom; whether block_n and the page size divide one
    # another is the kernel's to say, once it is chosen)
    Skv = pt_shape[1] * ps
    if Skv > 2**31 - 1:
        raise ValueError(f"{fn}: max_pages_per_seq {pt_shape[1]} * page_size {ps} = {Skv} keys "
                         "is out of range (at most 2^31-1)")
    return B, Sq, Hq, D, Skv, Hkv, v_shape[3]


def _check_append(torch, fn, q, k_cache, v_cache, k_new, v_new, dims) -> int:
    """New keys and values to append (flash_attn_with_kvcache's k and v,
    FA3's): k_new [B, Snew, Hkv, D] and v_new [B, Snew, Hkv, Dv] CUDA
    tensors of q's device and dtype, B from q, Hkv and the head dims from
    the caches (`dims`: _check_shapes' or _check_paged_shapes'), Snew at
    most the logical Skv; the caches written in place, so their last dim
    must be contiguous (they are not copied). Returns Snew."""
    B, _, _, D, Skv, Hkv, Dv = dims
    for name, t in (("k", k_new), ("v", v_new)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} (the new {'keys' if name == 'k' else 'values'} to "
                            f"append) must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{fn}: {name} must be 4-D [B, Snew, Hkv, "
                             f"{'D' if name == 'k' else 'Dv'}] (the new rows), got shape "
                             f"{tuple(t.shape)}")
        if t.device != q.device:
            raise ValueError(f"{fn}: {name} must be on q's device {q.device}, got {t.device}")
        if t.dtype != q.dtype:
            raise ValueError(f"{fn}: {name} must have q's dtype {q.dtype}, got {t.dtype}")
    Snew = k_new.shape[1]
    if tuple(k_new.shape) != (B, Snew, Hkv, D):
        raise ValueError(f"{fn}: k must be [B, Snew, Hkv, D] = [{B}, Snew, {Hkv}, {D}] (q's "
                         f"batch, k_cache's heads and head dim), got {tuple(k_new.shape)}")
    if tuple(v_new.shape) != (B, Snew, Hkv, Dv):
        raise ValueError(f"{fn}: v must be [B, Snew, Hkv, Dv] = [{B}, {Snew}, {Hkv}, {Dv}] "
                         f"(k's rows, v_cache's head dim), got {tuple(v_new.shape)}")
    if Snew > Skv:
        raise ValueError(f"{fn}: k and v have Snew = {Snew} new rows a batch but the cache "
                         f"holds Skv = {Skv} keys")
    if _needs_grad(torch, k_new, v_new, None):
        raise NotImplementedError(f"fa3 {fn} is forward-only (no backward yet): call it "
                                  "under torch.no_grad() or on detached tensors")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise ValueError(f"{fn}: {name} must have a contiguous last dim to take the new rows "
                             f"of k and v (it is written in place, not copied), got strides "
                             f"{tuple(t.stride())}")
    return Snew


def _uniform_packed(q, B: int, max_seqlen_q) -> bool:
    """Whether packed queries q [Tq, Hq, D] of B sequences are all
    max_seqlen_q long (Tq = B * max_seqlen_q, the contract that q holds
    exactly cu_seqlens_q[B] rows): the decoding kernel's route, decided on
    the host without reading cu_seqlens_q; else the variable-length one."""
    return (B > 0 and isinstance(max_seqlen_q, int) and q.dim() == 3
            and q.shape[0] == B * max_seqlen_q)


def _refuse_before_append(torch, fn, q, cu_seqlens_q, max_seqlen_q, chunk, cache_batch_idx,
                          cache_leftpad, num_splits, ctas_per_sm, sm_margin, fp8=None):
    """What the attention after packed new rows would refuse by its
    arguments alone, refused before a row is written: the launch options'
    ranges, and cache_batch_idx / cache_leftpad (or, fp8 not None, FP8 q and
    caches) where the call runs the variable-length kernel (ragged packed
    queries, or attention_chunk over several query rows a batch), and an FP8
    head dim the decoding kernel does not take. (Later failures, such as no
    kernel for the variant, leave the rows written past cache_seqlens: slots
    the cache's lengths do not count, written again alike by a retry.)"""
    _num_splits(fn, num_splits)
    _ctas_per_sm(fn, ctas_per_sm)
    _sm_margin(fn, sm_margin)
    if not isinstance(q, torch.Tensor) or (cache_batch_idx is None and cache_leftpad is None
                                           and fp8 is None):
        return
    if fp8 is not None and q.shape[-1] not in FP8_DECODE_HEAD_DIMS:
        raise NotImplementedError(
            f"{fn}: the FP8 decoding kernel takes head dim 64 or 128, got {q.shape[-1]} "
            f"(refused before any row is written)")
    if cu_seqlens_q is not None and isinstance(cu_seqlens_q, torch.Tensor):
        varlen = not _uniform_packed(q, cu_seqlens_q.numel() - 1, max_seqlen_q)
        why = "ragged packed queries (cu_seqlens_q)"
    else:
        varlen = bool(chunk) and q.dim() == 4 and q.shape[1] > 1
        why = f"attention_chunk {chunk} over {q.shape[1] if q.dim() == 4 else '?'} query rows"
    if varlen and fp8 is not None:
        raise NotImplementedError(
            f"{fn}: FP8 q and caches with packed new rows and {why} are not supported: that "
            f"call runs the variable-length kernel, which has no FP8 variant (refused before "
            f"any row is written)")
    if varlen and (cache_batch_idx is not None or cache_leftpad is not None):
        name = "cache_batch_idx" if cache_batch_idx is not None else "cache_leftpad"
        raise NotImplementedError(
            f"{fn}: {name} with packed new rows and {why} is not supported: that call runs the "
            f"variable-length kernel, which reads a cache's keys only (refused before any row "
            f"is written)")


def _append_packed(torch, fn, q, cu_seqlens_q, k_cache, v_cache, k_new, v_new, cu_new,
                   cache_seqlens, page_table, cache_batch_idx, rotary=None):
    """FA3's packed new rows: k_new [T_new, Hkv, D], v_new [T_new, Hkv, Dv],
    batch b's rows cu_new[b] .. cu_new[b + 1] - 1 written into its cache
    rows from cache_seqlens[b] on (through page_table, or row
    cache_batch_idx[b] of a contiguous cache), by torch's index_put_ on the
    device (no host sync). Rows past the batch's Skv keys are not written
    (the caller's contract broken, as in FA3), and so are rows outside
    cu_new[0] .. cu_new[B] and rows on table entries outside the pool.
    rotary: None, or (cos, sin, interleaved, rotary_seqlens, local): the
    new rows are rotated before they are written, batch b's i-th at p[b] +
    i (p: rotary_seqlens, else cache_seqlens), and q too (_rotate_queries).
    Returns (the key counts after it, min(cache_seqlens + new rows, Skv),
    int32 [B]; q, rotated where rotary is given)."""
    if q is None or not isinstance(q, torch.Tensor):
        raise TypeError(f"{fn}: q must be a torch.Tensor, got {type(q).__name__}")
    B = (cu_seqlens_q.numel() - 1 if isinstance(cu_seqlens_q, torch.Tensor)
         else q.shape[0])
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k", k_new), ("v", v_new)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if k_cache.dim() != 4 or v_cache.dim() != 4 or k_cache.shape[:3] != v_cache.shape[:3]:
        raise ValueError(f"{fn}: k_cache and v_cache must be 4-D and agree but in the last "
                         f"dim, got shapes {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    _, ps, Hkv, D = k_cache.shape
    Dv = v_cache.shape[3]
    T = k_new.shape[0] if k_new.dim() == 3 else -1
    if tuple(k_new.shape) != (T, Hkv, D) or tuple(v_new.shape) != (T, Hkv, Dv):
        raise ValueError(f"{fn}: with cu_seqlens_k_new, k and v are the packed new rows [T_new, "
                         f"Hkv, D] = [T_new, {Hkv}, {D}] and [T_new, {Hkv}, {Dv}] (the caches' "
                         f"heads and head dims), got {tuple(k_new.shape)} and "
                         f"{tuple(v_new.shape)}")
    for name, t in (("k", k_new), ("v", v_new), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.device != q.device or t.dtype != q.dtype:
            raise ValueError(f"{fn}: {name} must be {q.dtype} on q's device {q.device}, got "
                             f"{t.dtype} on {t.device}")
    if _needs_grad(torch, k_new, v_new, None):
        raise NotImplementedError(f"fa3 {fn} is forward-only (no backward yet): call it "
                                  "under torch.no_grad() or on detached tensors")
    cu_new = _check_seqlens(torch, f"{fn}: cu_seqlens_k_new", cu_new, q.device, B + 1)
    dev = q.device
    if rotary is not None:
        cos, sin, interleaved, rotary_seqlens, local = rotary
        rotary_seqlens = _check_rotary(torch, fn, cos, sin, q, k_new, rotary_seqlens, B)
    if cache_batch_idx is not None:    # one page a batch: its row of the cache
        if page_table is not None:
            raise ValueError(f"{fn}: cache_batch_idx indexes a contiguous cache's rows; with "
                             f"page_table the table already says where each batch's keys are: "
                             f"pass one of them")
        page_table = _check_seqlens(torch, f"{fn}: cache_batch_idx", cache_batch_idx, dev,
                                    B).reshape(B, 1)
    if page_table is not None:
        page_table, _ = _check_page_table(torch, fn, page_table, dev, B)
        Skv = ps * page_table.shape[1]
    else:
        if k_cache.shape[0] != B or v_cache.shape[0] != B:
            raise ValueError(f"{fn}: k_cache and v_cache must hold B = {B} batches, got "
                             f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
        Skv = ps
    used = _check_cache_seqlens(torch, fn, cache_seqlens, dev, B, Skv)
    if used is None:
        used = torch.full((B,), Skv, dtype=torch.int32, device=dev)
    if rotary is not None:
        # FA3's positions: from rotary_seqlens, else cache_seqlens as given
        base = used if rotary_seqlens is None else rotary_seqlens
        k_new = _rotate_rows(torch, k_new, cu_new, cos, sin, interleaved, base, True)
        q = _rotate_queries(torch, fn, q, cu_seqlens_q, cos, sin, interleaved, base, local)
    i64 = torch.int64
    # (values outside 0 .. Skv, against the contract, clamped as the kernel
    # clamps seqused_k)
    cs, starts = used.to(i64).clamp(0, Skv), cu_new.to(i64)
    after = torch.minimum(cs + (starts[1:] - starts[:-1]).clamp(min=0),
                          torch.full_like(cs, Skv)).to(torch.int32)
    if T == 0 or B == 0 or k_cache.shape[0] == 0 or Skv == 0:
        return after, q
    r = torch.arange(T, dtype=i64, device=dev)
    b = torch.searchsorted(starts[1:], r, right=True).clamp(max=B - 1)
    pos = cs[b] + r - starts[b]
    # a row is written where it is batch b's (cu_seqlens_k_new's rows only)
    # and lands inside the batch's Skv rows, on a page of the pool
    valid = (r >= starts[0]) & (r < starts[B]) & (pos >= 0) & (pos < Skv)
    at = pos.clamp(0, Skv - 1)
    if page_table is not None:
        page = page_table.to(i64)[b, at // ps]
        valid &= (page >= 0) & (page < k_cache.shape[0])
        idx = (page.clamp(0, k_cache.shape[0] - 1), at % ps)
    else:
        idx = (b, at)
    # every other row repeats the first valid row's write (the same bits to
    # the same place), or with none rewrites the pool's first row as it is:
    # the result does not depend on the order of the writes
    # (index_select, not t[j]: a 0-d index tensor is read on the host, which
    # a CUDA graph's capture cannot do)
    j = torch.argmax(valid.to(torch.int8)).view(1)
    any_valid = valid.index_select(0, j)
    zero = torch.zeros_like(r)
    idx = tuple(torch.where(valid, t, torch.where(any_valid, t.index_select(0, j), zero))
                for t in idx)
    src = torch.where(valid, r, j)
    for cache, new in ((k_cache, k_new), (v_cache, v_new)):
        if cache.element_size() == 1:
            # e4m3 rows moved as bytes (torch's float8 types lack some ops)
            cache, new = cache.view(torch.uint8), new.view(torch.uint8)
        vals = torch.where((valid | any_valid).view(T, 1, 1), new[src], cache[idx])
        cache.index_put_(idx, vals)
    return after, q


def _rotate_rows(torch, x, cu, cos, sin, interleaved, base, consecutive):
    """Packed rows x [T, H, D], sequence b's rows cu[b] .. cu[b + 1] - 1
    (cu int32 [B + 1], B >= 1), rotated (_apply_rotary) at positions base[b]
    + i for a sequence's i-th row, or base[b] for all of its rows where not
    `consecutive` (base: an int, or an int32 [B] tensor on x's device). Rows
    outside cu[0] .. cu[B] take a neighbour's positions (no sequence's: what
    they hold is not read)."""
    B, i64 = cu.numel() - 1, torch.int64
    if x.shape[0] == 0 or B < 1:
        return x
    r = torch.arange(x.shape[0], dtype=i64, device=x.device)
    starts = cu.to(i64)
    b = torch.searchsorted(starts[1:], r, right=True).clamp(max=B - 1)
    start = (base.to(i64)[b] if isinstance(base, torch.Tensor)
             else torch.full_like(r, int(base)))
    pos = start + (r - starts[b]).clamp(min=0) if consecutive else start
    return _apply_rotary(torch, x.unsqueeze(0), cos, sin, pos.unsqueeze(0), interleaved)[0]


def _rotate_queries(torch, fn, q, cu_seqlens_q, cos, sin, interleaved, base, local):
    """q rotated as flash_attn_with_kvcache's rotary embedding rotates it: a
    batch's rows at base[b], base[b] + 1, ... where `local` (causal or a
    window), else all at base[b]; q [B, Sq, Hq, D], or packed [total_q, Hq,
    D] with cu_seqlens_q (a row's index counted in its sequence)."""
    if q.dim() != (4 if cu_seqlens_q is None else 3):
        raise ValueError(f"{fn}: q must be " + ("[B, Sq, Hq, D]" if cu_seqlens_q is None else
                                                "the packed queries [total_q, Hq, D] with "
                                                "cu_seqlens_q") + f", got shape {tuple(q.shape)}")
    if cu_seqlens_q is None:
        return _rotate(torch, q, None, cos, sin, interleaved, base, local)[0]
    cu = _check_seqlens(torch, f"{fn}: cu_seqlens_q", cu_seqlens_q, q.device)
    return _rotate_rows(torch, q, cu, cos, sin, interleaved, base, local)


def _decode(torch, fn, q, k, v, cache_seqlens, softmax_scale, causal, window_size, softcap,
            num_splits, sm_margin, return_lse, kernel_dir, kernel, out, lse_out, jit,
            page_table=None, k_new=None, v_new=None, ctas_per_sm=0, rotary=None,
            leftpad=None, fp8=None):
    """A call of the decoding kernel (flash_attn_with_kvcache, and
    flash_attn_func with num_splits != 1 or pack_gqa): the checks, then the
    custom op as Dynamo traces it, else the eager launch. Forward only.
    cache_seqlens: None, an int or an int32 [B] tensor (each batch's valid
    keys of the cache: the kernel's seqUsedK). page_table: None (k, v the
    caches [B, Skv, Hkv, D]) or an int32 [B, max_pages] tensor of pages of
    the pools k, v [num_pages, page_size, Hkv, D]. k_new, v_new: None, or
    the new rows [B, Snew, Hkv, D / Dv] written into k and v after each
    batch's cache_seqlens[b] rows before the attention, which then covers
    cache_seqlens[b] + Snew keys (cache_seqlens required; the op
    torch.ops.fa3.flash_attn_decode_append_fwd, which mutates k and v).
    ctas_per_sm: 0, 1 or 2 (_ctas_per_sm). rotary: None, or (cos, sin,
    interleaved, rotary_seqlens), flash_attn_with_kvcache's rotary
    embedding: q and k_new rotated (_rotate) once the call is checked.
    leftpad: None, or flash_attn_with_kvcache's cache_leftpad, an int32 [B]
    tensor (_check_leftpad): each batch's keys start at that row. fp8:
    None, or flash_attn_with_kvcache's (q_descale, k_descale, v_descale)
    for torch.float8_e4m3fn q and caches (the FP8 decoding kernel; o
    bfloat16)."""
    n = _num_splits(fn, num_splits)
    dt = _check_inputs(torch, q, k, v, fn=fn if fn != "flash_attn_func" else
                       "flash_attn_func with num_splits != 1 or pack_gqa=True (the decoding "
                       "kernel)", fp8_ok=fp8 is not None)
    pt_stride = 0
    if page_table is None:
        dims = _check_shapes(q.shape, k.shape, v.shape)
    else:
        page_table, pt_stride = _check_page_table(torch, fn, page_table, q.device, q.shape[0])
        dims = _check_paged_shapes(fn, q.shape, k.shape, v.shape, page_table.shape)
    B, Sq, Hq, D, Skv, Hkv, Dv = dims
    window_size = _window(window_size)
    fp8_fields = None
    if dt == "e4m3":
        if D != Dv or D not in FP8_DECODE_HEAD_DIMS:
            raise NotImplementedError(
                f"{fn}: the FP8 decoding kernel takes head dim 64 or 128 (value head dim the "
                f"same), got {D}" + (f" and {Dv}" if Dv != D else ""))
        if rotary is not None:
            raise NotImplementedError(
                f"{fn}: rotary embedding with FP8 q and caches is not supported: rotate q and "
                f"the new rows before quantizing them")
        if torch.compiler.is_compiling():   # (the op takes them: checks only, no pointers)
            for name, t in zip(("q_descale", "k_descale", "v_descale"), fp8):
                _fp8_descale(torch, name, t, q.device, B, Hkv, None, check_only=True, fn=fn)
        else:
            fp8_fields = _fp8_decode_descales(torch, fn, *fp8, q.device, B, Hkv)
    _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv,
               torch.bfloat16 if dt == "e4m3" else None)
    appending = k_new is not None or v_new is not None
    snew = 0
    if appending:
        if k_new is None or v_new is None or cache_seqlens is None:
            raise ValueError(_append_needs(fn, k_new, v_new, cache_seqlens))
        snew = _check_append(torch, fn, q, k, v, k_new, v_new, dims)
    if rotary is not None:
        cos, sin, interleaved, rotary_seqlens = rotary
        rotary_seqlens = _check_rotary(torch, fn, cos, sin, q, k_new, rotary_seqlens)
    if appending and snew == 0:
        # no rows to append: the attention alone, on cache_seqlens
        appending, k_new, v_new = False, None, None
    seqused_k = _check_cache_seqlens(torch, fn, cache_seqlens, q.device, B, Skv, snew)
    if leftpad is not None:
        leftpad = _check_leftpad(torch, fn, leftpad, q.device, B, page_table)
    if rotary is not None:
        # positions from rotary_seqlens, else cache_seqlens (an int as given,
        # a tensor as checked)
        base = (rotary_seqlens if rotary_seqlens is not None
                else seqused_k if isinstance(cache_seqlens, torch.Tensor) else cache_seqlens)
        q, k_new = _rotate(torch, q, k_new, cos, sin, interleaved, base,
                           causal or window_size != (-1, -1))
    scale = None if softmax_scale is None else float(softmax_scale)
    facts_path = None if kernel is None else _op_path(kernel.facts_path)
    if torch.compiler.is_compiling():
        from . import torch_ops  # noqa: F401  (registers the ops)
        if appending:
            # the op that writes the new rows into k and v (declared in its
            # schema, so that the compiled graph orders reads of the caches
            # after it)
            o, lse = torch.ops.fa3.flash_attn_decode_append_fwd.default(
                q, k, v, k_new, v_new, seqused_k, page_table, scale, bool(causal),
                list(window_size), float(softcap), n, int(sm_margin), _op_path(kernel_dir),
                facts_path, jit, ctas_per_sm, leftpad, *(fp8 or (None,) * 3))
        else:
            o, lse = torch.ops.fa3.flash_attn_decode_fwd.default(
                q, k, v, seqused_k, page_table, scale, bool(causal), list(window_size),
                float(softcap), n, int(sm_margin), _op_path(kernel_dir), facts_path, jit,
                ctas_per_sm, leftpad, *(fp8 or (None,) * 3))
        return _copied_out(o, lse, out, lse_out, return_lse)
    return _eager_decode(torch, q, k, v, seqused_k, softmax_scale, causal, window_size, softcap,
                         n, sm_margin, return_lse, kernel_dir, kernel, jit, out, lse_out,
                         page_table, k_new, v_new, ctas_per_sm, leftpad=leftpad,
                         checked=(dt, dims, pt_stride, snew), fp8_fields=fp8_fields)


def _check_page_size(fn, kobj, ps):
    """A ValueError before the launch where the kernel's blocks cannot load
    pages of ps rows whole (the runtime's check, named by the call)."""
    bn = kobj.facts.block_n
    if ps < 1 or (bn % ps and ps % bn):
        raise ValueError(
            f"{fn}: page size {ps} (k_cache.shape[1]) must divide the kernel's block_n "
            f"{bn} or be a multiple of it: kernel {kobj.facts.kernel.decode()} loads each "
            f"block of {bn} keys as pages of min(page_size, {bn}) rows (1 to 256 powers of "
            f"two divide or are divided by a power-of-two block_n)")


def _append_needs(fn, k_new, v_new, cache_seqlens) -> str:
    """The message refusing an append without its partner or its lengths
    (FA3 refuses them too: "If k_new is supplied, v_new must also be passed
    in", "... seqlens_k must also be passed in")."""
    if k_new is None or v_new is None:
        return (f"{fn}: k and v (the new keys and values to append to the cache) must be given "
                f"together, got {'v' if k_new is None else 'k'} alone")
    return (f"{fn}: k and v (new keys and values to append) need cache_seqlens: each batch's "
            "rows before the append, where its new rows go (FA3 requires it with k and v too)")


def _eager_decode(torch, q, k, v, seqused_k, softmax_scale, causal, window_size, softcap,
                  num_splits, sm_margin, return_lse, kernel_dir, kernel, jit, out=None,
                  lse_out=None, page_table=None, k_new=None, v_new=None, ctas_per_sm=0,
                  leftpad=None, checked=None, fp8_fields=None):
    """The decoding kernel's launch (and the ops', fa3.torch_ops): planned
    with the device's SMs less sm_margin, the f32 workspaces of a split
    launch allocated on the stream it runs on (the caching allocator keeps
    them until the kernels that use them are done). seqused_k: None or a
    checked int32 [B] tensor on q's device (_check_cache_seqlens).
    page_table: None, or an int32 [B, max_pages] tensor on q's device over
    the page pools k and v (_check_page_table; the logical Skv is max_pages
    * page_size). k_new, v_new: None, or the rows to append (_check_append;
    seqused_k then required, its values 0 to Skv - Snew): the runtime
    launches the cubin's append before the attention, which reads the
    counts after it from an int32 [B] workspace allocated here.
    ctas_per_sm: 0, 1 or 2, fa3rt_fwd_args.ctas_per_sm. leftpad: None or a
    checked int32 [B] tensor on q's device (_check_leftpad),
    fa3rt_fwd_args.leftpad_k.
    checked: None (the ops' launch: every check here), or what _decode's
    checks found, (dtype name, dims, page table stride, Snew), so that an
    eager call checks once (its host time is a decoding step's latency).
    fp8_fields: an FP8 call's (_fp8_decode_descales: fwd_args' descale
    keywords, the tensors to keep until the launch); o bfloat16.
    A call repeated with the same metadata runs from its launch plan
    (_plan_key)."""
    given = (seqused_k, page_table, leftpad, k_new, v_new) + (
        tuple(fp8_fields[1]) if fp8_fields is not None else (None, None, None))
    key = _plan_key("decode", q, k, v, out, lse_out,
                    (softmax_scale, causal, window_size, softcap, num_splits, sm_margin,
                     return_lse, kernel_dir, jit, ctas_per_sm, fp8_fields is not None),
                    kernel, given)
    done = _from_plan(torch, key, q, k, v, out, lse_out, given)
    if done is not None:
        return done
    from . import runtime
    fn = "flash_attn_with_kvcache"
    if checked is None:
        # grad_ok: the public calls refuse grad first; the op's inputs may
        # still say requires_grad below the autograd layer
        dt = _check_inputs(torch, q, k, v, fn=fn, grad_ok=True, fp8_ok=fp8_fields is not None)
        pt_stride = 0
        if page_table is None:
            dims = _check_shapes(q.shape, k.shape, v.shape)
        else:
            page_table, pt_stride = _check_page_table(torch, fn, page_table, q.device,
                                                      q.shape[0])
            dims = _check_paged_shapes(fn, q.shape, k.shape, v.shape, page_table.shape)
    else:
        dt, dims, pt_stride, snew = checked
    B, Sq, Hq, D, Skv, Hkv, Dv = dims
    appending = k_new is not None or v_new is not None
    if appending:
        if checked is None:
            if k_new is None or v_new is None or seqused_k is None:
                raise ValueError(_append_needs(fn, k_new, v_new, seqused_k))
            snew = _check_append(torch, fn, q, k, v, k_new, v_new, dims)
        # the append copies 16-byte chunks of rows: a copy where they are not
        k_new, v_new = _tma_ready(k_new), _tma_ready(v_new)
    window_size = _window(window_size)
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    kobj = _launchable_kernel(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit,
                              dev, torch.cuda.device, decode=True)
    if page_table is not None:
        _check_page_size(fn, kobj, k.shape[1])
    # TMA reads rows of D contiguous elements: make the last dim contiguous
    # (the caches that take new rows have one: _check_append); a call that
    # copies is not planned
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1 or any(
            t is not g for t, g in zip((seqused_k, page_table, leftpad, k_new, v_new), given)):
        key = None
        q, k, v = [t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v)]
    if checked is None:
        _check_out(torch, q, out, lse_out, B, Sq, Hq, Dv)
    fp8 = {}
    if fp8_fields is not None:
        fp8, _keep = fp8_fields
        fp8 = dict(fp8, o_dtype="bf16")
    o, lse, return_lse = _outputs(torch, q, (B, Sq, Hq, Dv), (B, Hq, Sq), out, lse_out,
                                  return_lse, torch.bfloat16 if fp8 else None)
    append = {}
    if appending:
        t = runtime.tensor
        append = dict(k_new=t(k_new.data_ptr(), *_bhsd(k_new), name="k_new"),
                      v_new=t(v_new.data_ptr(), *_bhsd(v_new), name="v_new"))
        if snew and B:
            # the key counts after the append (seqused_k[b] + Snew), which the
            # attention reads: written and read on this stream
            seqlens_out = torch.empty(B, dtype=torch.int32, device=q.device)
            append["seqlens_out"] = seqlens_out.data_ptr()
    sms = _device_sms.get(dev)
    if sms is None:
        sms = _device_sms[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    t = runtime.tensor
    args = runtime.fwd_args(t(q.data_ptr(), *_bhsd(q), name="q"),
                            t(k.data_ptr(), *_bhsd(k), name="k"),
                            t(v.data_ptr(), *_bhsd(v), name="v"),
                            t(o.data_ptr(), *_bhsd(o), name="o"),
                            lse.data_ptr() if lse is not None else 0, softmax_scale, dt,
                            seqused_k=seqused_k.data_ptr() if seqused_k is not None else 0,
                            num_splits=num_splits, num_sms=max(1, sms - int(sm_margin)),
                            page_table=page_table.data_ptr() if page_table is not None else 0,
                            page_table_stride=pt_stride,
                            paged_seqlen_k=Skv if page_table is not None else 0,
                            ctas_per_sm=ctas_per_sm,
                            leftpad_k=leftpad.data_ptr() if leftpad is not None else 0,
                            **append, **fp8)
    launch = kobj.plan(args)
    args.num_splits = launch.num_splits   # what the workspace is sized for
    workspaces = []
    if appending and snew and B:
        workspaces.append(("seqlens_out", B, torch.int32))
    if launch.o_accum_bytes:
        # fresh allocations are 16-byte aligned; the words, not the bytes
        o_accum = torch.empty(launch.o_accum_bytes // 4, dtype=torch.float32, device=q.device)
        lse_accum = torch.empty(launch.lse_accum_bytes // 4, dtype=torch.float32,
                                device=q.device)
        args.o_accum, args.lse_accum = o_accum.data_ptr(), lse_accum.data_ptr()
        workspaces += [("o_accum", launch.o_accum_bytes // 4, torch.float32),
                       ("lse_accum", launch.lse_accum_bytes // 4, torch.float32)]
    _launch(torch, dev, kobj.fwd, args)
    given_at = ("seqused_k", "page_table", "leftpad_k", "k_new", "v_new")
    addresses = tuple(f if t is not None else "" for f, t in zip(given_at, given))
    _remember(key, _Plan(kobj, dev, args, tuple(o.shape), o.dtype, (B, Hq, Sq), return_lse,
                         kernel, addresses + _descale_addresses(fp8), tuple(workspaces)))
    return (o, lse) if return_lse else o



def _rotary_positions(torch, base, B, S, device, consecutive):
    """The rotary positions [B, S] (int64) of S rows a batch starting at
    `base` (an int, or an int32 [B] tensor on `device`): base[b] + i, or
    base[b] for every row where not `consecutive`."""
    if isinstance(base, torch.Tensor):
        start = base.to(torch.int64).reshape(B, 1)
    else:
        start = torch.full((B, 1), int(base), dtype=torch.int64, device=device)
    if not consecutive:
        return start.expand(B, S)
    return start + torch.arange(S, dtype=torch.int64, device=device).reshape(1, S)


def _apply_rotary(torch, x, cos, sin, pos, interleaved):
    """x [B, S, H, D] with its first rotary_dim = 2 * cos.shape[1] dims
    rotated by the angles of rows `pos` [B, S] of cos and sin
    ([seqlen_ro, rotary_dim / 2]; positions clamped to them: a position
    past the table is the caller's error, not a device fault), pairs (0, 1),
    (2, 3) ... when `interleaved` (GPT-J), else (i, i + rotary_dim / 2)
    (GPT-NeoX), as FlashAttention's rotary: in float32, then x's dtype."""
    rd = 2 * cos.shape[1]
    idx = pos.clamp(0, cos.shape[0] - 1)
    c = cos[idx].float().unsqueeze(2)       # [B, S, 1, rd / 2]
    s = sin[idx].float().unsqueeze(2)
    xr = x[..., :rd].float()
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., :rd // 2], xr[..., rd // 2:]
        out = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((out.to(x.dtype), x[..., rd:]), dim=-1)


def _check_rotary(torch, fn, cos, sin, q, k, rotary_seqlens, B=None):
    """rotary_cos and rotary_sin given together, with the new rows k (FA3:
    only with k and v), [seqlen_ro, rotary_dim / 2] of one floating dtype on
    q's device, rotary_dim even and at most the head dim; rotary_seqlens
    None or an int32 [B] tensor there (B: q.shape[0] unless given). Returns
    rotary_seqlens (contiguous)."""
    if cos is None or sin is None:
        raise ValueError(f"{fn}: rotary_cos and rotary_sin go together: pass both or neither")
    if k is None:
        raise ValueError(f"{fn}: rotary_cos and rotary_sin rotate the new keys k (and the "
                         f"queries): pass k and v, the rows appended to the cache, as in "
                         f"FlashAttention-3")
    D = q.shape[-1]
    for name, t in (("rotary_cos", cos), ("rotary_sin", sin)):
        if (not isinstance(t, torch.Tensor) or t.dim() != 2 or not t.is_floating_point()
                or t.device != q.device or tuple(t.shape) != tuple(cos.shape)
                or not 1 <= t.shape[0] or not 1 <= t.shape[1] <= D // 2):
            got = (f"{t.dtype} {tuple(t.shape)} on {t.device}" if isinstance(t, torch.Tensor)
                   else type(t).__name__)
            raise ValueError(f"{fn}: {name} must be a floating tensor [seqlen_ro, rotary_dim / "
                             f"2] on {q.device}, rotary_dim even, 2 to the head dim {D} "
                             f"(rotary_cos's shape for both), got {got}")
    if rotary_seqlens is not None:
        return _check_seqlens(torch, f"{fn}: rotary_seqlens", rotary_seqlens, q.device,
                              q.shape[0] if B is None else B)
    return None


def _rotate(torch, q, k_new, cos, sin, interleaved, base, local):
    """q and the new keys k_new (None: Snew = 0) rotated by the rotary
    embedding, FA3's positions: the keys at base[b], base[b] + 1, ...; q's
    rows there too where `local` (causal or a window), else all at base[b]
    (base: an int, or an int32 [B] tensor on q's device)."""
    B = q.shape[0]
    q = _apply_rotary(torch, q, cos, sin,
                      _rotary_positions(torch, base, B, q.shape[1], q.device, local),
                      interleaved)
    if k_new is not None:
        k_new = _apply_rotary(torch, k_new, cos, sin,
                              _rotary_positions(torch, base, B, k_new.shape[1], q.device, True),
                              interleaved)
    return q, k_new


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None,
                            softmax_scale: Optional[float] = None, causal: bool = False,
                            window_size=(-1, -1), attention_chunk: int = 0,
                            softcap: float = 0.0, rotary_interleaved: bool = True,
                            scheduler_metadata=None, num_splits: int = 0, pack_gqa=None,
                            sm_margin: int = 0, return_softmax_lse: bool = False, *,
                            kernel_dir=None, kernel: Optional[_facts.KernelFacts] = None,
                            jit: Optional[bool] = None, ctas_per_sm: int = 0):
    """Attention of new queries over a KV cache (decoding): FA3's
    ``flash_attn_with_kvcache`` (flash_attn_interface), its arguments in its
    order, for a contiguous or a paged cache.

    q: [B, Sq, Hq, D] (Sq = 1 for a decoding step; more for speculative or
    chunked steps), k_cache: [B, Skv, Hkv, D], v_cache: [B, Skv, Hkv, Dv]
    (bf16 or f16, or e4m3 with descales: below; one CUDA device, Hq % Hkv
    == 0; any strides with a
    contiguous last dim, 16-byte multiples). ``cache_seqlens``: each batch's
    number of valid keys, the first cache_seqlens[b] rows of its Skv (an
    int32 [B] tensor on q's device, or an int for every batch, as in FA3;
    None: all Skv). Its values must be 0 to Skv: they are read on the GPU
    only (the caller's contract, as in FlashAttention; one outside is
    clamped to 0 .. Skv, so no key past the cache is read); the split heuristic
    still sizes the splits by Skv, the cache's capacity. Causal and windows
    are bottom-right aligned to each batch's length L = cache_seqlens[b] (or
    Skv): query i sees the keys up to L - Sq + i. Returns o [B, Sq, Hq, Dv],
    or (o, lse) with ``return_softmax_lse`` (lse [B, Hq, Sq] float32,
    natural log; -inf for rows that see no key, whose o is 0: so every row
    of a batch of length 0). The cache rows past a batch's length up to the
    next multiple of the kernel's block_n are read: their keys are masked
    out of the scores but their V rows are multiplied by 0, so they must be
    finite (as in FlashAttention-3, Dao-AILab/flash-attention#2374).

    A paged cache (``page_table``, FA3's): k_cache [num_pages, page_size,
    Hkv, D] and v_cache [num_pages, page_size, Hkv, Dv] are a pool of pages,
    ``page_table`` an int32 [B, max_pages_per_seq] tensor on q's device:
    batch b's key r is row r % page_size of page page_table[b, r //
    page_size]. The logical Skv (cache_seqlens' bound; every batch's length
    without cache_seqlens) is max_pages_per_seq * page_size, as in FA3. The
    page size must divide the kernel's block_n or be a multiple of it (1 to
    256 powers of two at block_n 128 or 64; a ValueError names it
    otherwise). The decoding kernel's producer warp copies pages of up to
    block_n / 8 rows (8 in bf16 / f16, 16 in e4m3) at about 0.65 of the
    contiguous cache's speed; larger pages go by TMA boxes (0.8 at 16 rows,
    near 1 from 32), as do a packed batch's (cu_seqlens_q): docs/runtime.md,
    Paged KV cache. The entries (0 to num_pages - 1) are read
    on the GPU only, those of a batch's first ceil(cache_seqlens[b] /
    page_size) pages (the caller's contract, as in FlashAttention); the rows
    of a batch's last page past its length are read (masked, so finite).

    Appending (``k`` and ``v``, FA3's): k [B, Snew, Hkv, D] and v [B, Snew,
    Hkv, Dv] (q's dtype and device) are written into the cache in place,
    before the attention and on the same stream, at rows cache_seqlens[b]
    .. cache_seqlens[b] + Snew - 1 of each batch (through page_table for a
    paged cache), and the attention then covers each batch's
    cache_seqlens[b] + Snew keys (causal and windows bottom-right aligned
    to that length). ``cache_seqlens`` is required with them (as in FA3)
    and is not modified: the caller advances it. Its values must leave room
    for the new rows, cache_seqlens[b] + Snew <= Skv (an int is checked, a
    tensor's values are the caller's contract, read on the GPU only: rows
    that would land at or past Skv are not written). k_cache
    and v_cache must have a contiguous last dim (they are written, not
    copied); k and v any strides with a contiguous last dim (copied where
    their rows are not 16-byte aligned). k and v must be given together;
    Snew = 0 appends nothing. Under torch.compile the call is the op
    ``torch.ops.fa3.flash_attn_decode_append_fwd``, whose schema declares
    that it writes k_cache and v_cache.

    It runs the variant's decoding kernel (fa3-compile --decode; looked up
    like flash_attn_func's: ``kernel_dir``, ``kernel``, ``jit``): the q heads
    of a kv head share a tile (GQA packing: Hq / Hkv must divide the
    kernel's block_m), and each tile's keys are split over ``num_splits``
    CTAs (0: the runtime's heuristic, FlashAttention's, over this device's
    SMs less ``sm_margin``; 1: no split; up to 128), whose partial results a
    second kernel merges (their f32 workspaces are allocated here, on the
    current stream). ``pack_gqa`` is taken and changes nothing (the kernel
    always packs). ``ctas_per_sm`` (ours, keyword only): 0, the runtime's
    choice (one a SM where a CTA streams at least 16384 keys, else as many
    as fit; docs/runtime.md); 1, one, each CTA launched with all the shared
    memory a block may have; 2, as many of the kernel's CTAs a SM as fit
    (two for the decoding kernels of head dim up to 128)
    (bench/bench_decode.py --ctas-per-sm N measures them against 0). Runs
    on torch.cuda.current_stream(); forward only (inputs that require grad
    are refused); under torch.compile the call is the
    custom op ``torch.ops.fa3.flash_attn_decode_fwd`` (fa3.torch_ops).

    Rotary embedding (FA3's ``rotary_cos``, ``rotary_sin``,
    ``rotary_interleaved``, ``rotary_seqlens``; with k and v only, as in
    FA3): cos and sin [seqlen_ro, rotary_dim / 2] (any floating dtype, q's
    device; rotary_dim even, up to the head dim) rotate the first
    rotary_dim dims of the new keys k at positions p[b], p[b] + 1, ...,
    and of q at the same positions if causal or local (a window, or
    attention_chunk: FA3's is_local), else all of q's rows at p[b]; p is ``rotary_seqlens`` (int32 [B]) or else
    cache_seqlens. Pairs (0, 1), (2, 3), ... (``rotary_interleaved``, the
    default) or (i, i + rotary_dim / 2) (GPT-NeoX), computed in float32.
    The rotation runs as torch operations before the kernel (not fused into
    it: for a decoding step's few rows, a few small kernels); the cache
    receives the rotated keys. Positions past seqlen_ro take its last row
    (a tensor's values are not read on the host).

    ``cache_batch_idx`` (FA3's, int32 [B] on q's device): batch b attends
    (and appends to) row cache_batch_idx[b] of a contiguous k_cache /
    v_cache [B_cache, Skv, Hkv, D], run as a page table of one page a batch
    over the caches' rows (so Skv must be a multiple of 8 that the kernel's
    block_n divides or that divides it; not with page_table). Duplicate
    indices with k and v appended: either batch's rows may land, as in FA3;
    an index outside 0 .. B_cache - 1 reads no keys and writes nothing.

    ``cache_leftpad`` (FA3's, int32 [B] on q's device): batch b's keys are
    rows cache_leftpad[b] .. cache_seqlens[b] - 1 of its cache (and its
    appended rows, written at cache_seqlens[b] as without it): a
    left-padded batch. Causal and windows are bottom-right aligned to the
    keys' count, cache_seqlens[b] - cache_leftpad[b] (+ Snew); rotary
    positions stay cache_seqlens[b] (FA3's). Values 0 to cache_seqlens[b]
    are the caller's contract, read on the GPU only (one outside is clamped
    into it). Not with a paged cache (NotImplementedError, as in FA3); with
    cache_batch_idx, yes.

    Packed queries (``cu_seqlens_q`` and ``max_seqlen_q``, FA3's, as a
    serving engine's prefill and decoding steps pass them): q [total_q, Hq,
    D], sequence b's queries rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] -
    1 (int32 [B + 1] on q's device; q must hold exactly cu_seqlens_q[B]
    rows, no padding rows after them, and no sequence be longer than
    max_seqlen_q: the caller's contract, not read on the host); returns o
    [total_q, Hq, Dv] and lse [Hq, total_q]. Where total_q = B *
    max_seqlen_q every sequence has max_seqlen_q queries and the call is the
    decoding kernel's above, with all it takes; otherwise (ragged) the
    variable-length kernel's (fa3-compile --varlen) over a contiguous
    cache, or over a paged cache the paged varlen kernel's (fa3-compile
    --varlen --paged; the table is made contiguous), batch b's keys its
    first cache_seqlens[b] rows, masks bottom-right aligned per sequence;
    there cache_batch_idx, cache_leftpad, appending and rotary embedding
    are refused (NotImplementedError). ``kernel`` then names the kernel of
    the route taken. ``cu_seqlens_k_new`` (int32 [B + 1], FA3's) makes k
    and v packed new rows [T_new, Hkv, D] / [T_new, Hkv, Dv], batch b's
    rows cu_seqlens_k_new[b] .. [b + 1] - 1, written into its cache rows
    from cache_seqlens[b] on by torch on the device (_append_packed; with
    rotary embedding, batch b's i-th new row rotated at p[b] + i and q as
    above, a packed query's row counted in its sequence), then the
    attention over cache_seqlens[b] + its new rows, by either route above
    (a ragged batch of packed queries included: the rotation done before
    it); without k and v it is taken and unused, as in FA3.

    ``attention_chunk`` (as in flash_attn_func, positions counted from
    cache_leftpad): a decoding step (one query row a batch) runs the
    decoding kernel from the first key of the row's chunk (cache_leftpad
    moved there; over a paged cache the table shifted by whole pages,
    which needs the chunk a multiple of the page size and at most one new
    row); several query rows a batch, and packed queries, run the
    variable-length kernel over the (batch, chunk) pairs, reading the
    cache's keys only (appending, rotary, cache_batch_idx and cache_leftpad
    refused there).

    An FP8 KV cache (FA3's ``q_descale``, ``k_descale``, ``v_descale``):
    q, the caches and any new rows torch.float8_e4m3fn, each descale None
    (1.0), a 0-d float32 tensor or FA3's [B, Hkv] (q's one per kv head: the
    decoding kernel's tiles pack a kv head's q heads), head dim 64 or 128
    (fa3-compile --dtype e4m3 --decode); o bfloat16; paged caches,
    appending (k and v, or packed new rows), cache_batch_idx,
    cache_leftpad, num_splits and decoding steps under attention_chunk as
    in bf16, also under torch.compile (the decoding ops take the descales).
    Not with rotary embedding (rotate before quantizing), ragged packed
    queries or several query rows under attention_chunk (the
    variable-length kernel has no FP8 variant): NotImplementedError each.

    FA3's other arguments (``qv``, ``scheduler_metadata``
    (get_scheduler_metadata returns None: there is none to pass)) are
    refused unless left at their defaults;
    ``rotary_interleaved`` and ``rotary_seqlens`` matter only with rotary
    embedding.
    """
    fn = "flash_attn_with_kvcache"
    if (k is not None or v is not None) and (k is None or v is None or cache_seqlens is None):
        raise ValueError(_append_needs(fn, k, v, cache_seqlens))
    refused = {"qv": qv, "scheduler_metadata": scheduler_metadata}
    for name, value in refused.items():
        if value is not None:
            raise NotImplementedError(f"{fn}: {name} is not supported: pass None")
    # FP8 (an e4m3 KV cache, FA3's descales): the FP8 decoding kernel
    fp8 = _kvcache_fp8(q, k_cache, v_cache, q_descale, k_descale, v_descale)
    chunk = _chunks.check_chunk(fn, attention_chunk)
    if k is not None and cu_seqlens_k_new is not None:
        # packed new rows (FA3's cu_seqlens_k_new with k and v): written
        # here, then the attention over the caches as they are after it
        # (with rotary embedding: the rows and q rotated first, so every
        # route after it runs on rotated queries, none rotating again)
        import torch
        _refuse_before_append(torch, fn, q, cu_seqlens_q, max_seqlen_q, chunk,
                              cache_batch_idx, cache_leftpad, num_splits, ctas_per_sm,
                              sm_margin, fp8)
        rotary = None
        if rotary_cos is not None or rotary_sin is not None:
            # q's rows at consecutive positions where causal or local (FA3:
            # a window or attention_chunk), else all at the batch's position
            rotary = (rotary_cos, rotary_sin, bool(rotary_interleaved), rotary_seqlens,
                      bool(causal) or _window(window_size) != (-1, -1) or bool(chunk))
        elif rotary_seqlens is not None:
            raise ValueError(f"{fn}: rotary_seqlens gives the rotary embedding's positions: "
                             f"pass it with rotary_cos and rotary_sin, or pass None")
        if rotary is not None and fp8 is not None:
            raise NotImplementedError(
                f"{fn}: rotary embedding with FP8 q and caches is not supported: rotate q and "
                f"the new rows before quantizing them")
        cache_seqlens, q = _append_packed(torch, fn, q, cu_seqlens_q, k_cache, v_cache, k, v,
                                          cu_seqlens_k_new, cache_seqlens, page_table,
                                          cache_batch_idx, rotary)
        k = v = rotary_cos = rotary_sin = rotary_seqlens = None
    if cu_seqlens_q is not None:
        return _kvcache_packed_q(
            q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
            cache_batch_idx, cache_leftpad, page_table, cu_seqlens_q, max_seqlen_q,
            rotary_seqlens, softmax_scale, causal, window_size, chunk, softcap,
            rotary_interleaved, num_splits, sm_margin, return_softmax_lse, kernel_dir,
            kernel, jit, ctas_per_sm, fp8)
    _num_splits(fn, num_splits)
    ctas_per_sm = _ctas_per_sm(fn, ctas_per_sm)
    sm_margin = _sm_margin(fn, sm_margin)
    _cache_seqlens_int(fn, cache_seqlens)
    rotary = rotary_cos is not None or rotary_sin is not None
    if rotary_seqlens is not None and not rotary:
        raise ValueError(f"{fn}: rotary_seqlens gives the rotary embedding's positions: pass "
                         f"it with rotary_cos and rotary_sin, or pass None")
    import torch
    if cache_batch_idx is not None:
        # batch b's keys: row cache_batch_idx[b] of the caches, as a page
        # table of one page a batch (a page: a whole row of Skv keys)
        if page_table is not None:
            raise ValueError(f"{fn}: cache_batch_idx indexes a contiguous cache's rows; with "
                             f"page_table the table already says where each batch's keys are: "
                             f"pass one of them")
        if not isinstance(q, torch.Tensor) or not isinstance(k_cache, torch.Tensor):
            raise TypeError(f"{fn}: q and k_cache must be torch.Tensors")
        idx = _check_seqlens(torch, f"{fn}: cache_batch_idx", cache_batch_idx, q.device,
                             q.shape[0] if q.dim() == 4 else None)
        if k_cache.dim() != 4 or k_cache.shape[1] < 8 or k_cache.shape[1] % 8:
            raise ValueError(f"{fn}: with cache_batch_idx, k_cache [B_cache, Skv, Hkv, D] is "
                             f"read as one page a batch row: Skv must be a multiple of 8, got "
                             f"shape {tuple(k_cache.shape)}")
        page_table = idx.reshape(-1, 1)
    if chunk and isinstance(q, torch.Tensor) and q.dim() == 4 and isinstance(
            k_cache, torch.Tensor) and k_cache.dim() == 4 and (
            page_table is None or isinstance(page_table, torch.Tensor)):
        # (anything else: _decode's checks refuse it by name)
        Sq = q.shape[1]
        Skv = k_cache.shape[1] * (1 if page_table is None else page_table.shape[-1])
        if Sq > 1 and not (causal and chunk >= Skv):
            if fp8 is not None:
                raise NotImplementedError(
                    f"{fn}: attention_chunk {chunk} with {Sq} query rows a batch and FP8 q and "
                    f"caches is not supported: the rows may span two chunks, which runs the "
                    f"variable-length kernel, which has no FP8 variant (one query row a "
                    f"batch, a decoding step, takes it)")
            return _kvcache_chunked_rows(torch, fn, chunk, q, k_cache, v_cache, k, rotary,
                                         cache_seqlens, cache_batch_idx, cache_leftpad,
                                         page_table, softmax_scale, causal, window_size,
                                         softcap, return_softmax_lse, kernel_dir, kernel, jit)
        if Sq == 1 and chunk < Skv:
            cache_seqlens, cache_leftpad, page_table, rotary_seqlens = _kvcache_chunk_start(
                torch, fn, chunk, q, k_cache, k, cache_seqlens, cache_leftpad, page_table,
                rotary, rotary_seqlens)
    return _decode(torch, fn, q, k_cache, v_cache, cache_seqlens, softmax_scale, causal,
                   window_size, softcap, num_splits, sm_margin, return_softmax_lse, kernel_dir,
                   kernel, None, None, jit, page_table, k, v, ctas_per_sm,
                   rotary=(rotary_cos, rotary_sin, bool(rotary_interleaved), rotary_seqlens)
                   if rotary else None, leftpad=cache_leftpad, fp8=fp8)


def _kvcache_fp8(q, k_cache, v_cache, q_descale, k_descale, v_descale):
    """flash_attn_with_kvcache's descales as _decode's `fp8` where the call
    is FP8 (q or a cache torch.float8_e4m3fn), else None; descales given
    with 16-bit tensors are refused here, before any route is taken."""
    import torch
    descales = (q_descale, k_descale, v_descale)
    if _any_fp8(torch, q, k_cache, v_cache):
        return descales
    _refuse_decode_descales("flash_attn_with_kvcache",
                            getattr(q, "dtype", type(q).__name__), descales)
    return None


def _refuse_decode_descales(fn, dtype, descales):
    """A ValueError naming the descales given (q_descale, k_descale,
    v_descale) to a decoding call on 16-bit tensors of `dtype`."""
    given = [n for n, d in zip(("q_descale", "k_descale", "v_descale"), descales)
             if d is not None]
    if given:
        raise ValueError(f"{fn}: {', '.join(given)} given with {dtype} inputs: descales are "
                         f"for FP8 q and caches (torch.float8_e4m3fn); pass None")


def _kvcache_chunk_start(torch, fn, c, q, k_cache, k_new, cache_seqlens, cache_leftpad,
                         page_table, rotary, rotary_seqlens):
    """A decoding step (one query row a batch) under attention_chunk c: its
    chunk is the keys from fa3.chunks.decode_start on, so the decoding
    kernel runs from there: cache_leftpad moved to it on a contiguous cache
    (or cache_batch_idx's one page a batch); a paged table shifted left by
    whole pages (c a multiple of the page size; one new row at most, whose
    chunk then starts at or before it) and cut to the chunk's ceil(c /
    page_size) pages, cache_seqlens less the rows shifted out (the append
    still lands where it did; the rotary positions stay cache_seqlens').
    (Reading a contiguous cache as such a table instead, so that the
    split-KV plan covers the chunk and not the whole cache, was 1.04-1.7x
    slower: bench/NOTES.md, Log.) Returns (cache_seqlens, cache_leftpad,
    page_table, rotary_seqlens)."""
    B = q.shape[0]
    # (k_new checked by _decode: one that is not [B, Snew, Hkv, D] is refused there)
    snew = k_new.shape[1] if isinstance(k_new, torch.Tensor) and k_new.dim() == 4 else 0
    paged = page_table is not None and page_table.shape[-1] > 1
    ps = k_cache.shape[1]
    Skv = ps * (page_table.shape[-1] if paged else 1)
    used = _check_cache_seqlens(torch, fn, cache_seqlens, q.device, B, Skv, snew)
    if used is None:
        used = torch.full((B,), Skv, dtype=torch.int32, device=q.device)
    keys = used.to(torch.int64) + snew
    if not paged:
        lp = None if cache_leftpad is None else _check_seqlens(
            torch, f"{fn}: cache_leftpad", cache_leftpad, q.device, B)
        return used, _chunks.decode_start(torch, c, keys, lp), page_table, rotary_seqlens
    if c % ps:
        raise NotImplementedError(
            f"{fn}: attention_chunk {c} over a paged cache of pages of {ps} rows: the chunk "
            f"must be a multiple of the page size (a decoding step's keys then start at a "
            f"page, the table shifted by whole pages)")
    if snew > 1:
        raise NotImplementedError(
            f"{fn}: attention_chunk {c} over a paged cache with {snew} new rows of k and v: "
            f"at most one (the chunk of the step's query may start past the cache's rows)")
    table, _ = _check_page_table(torch, fn, page_table, q.device, B)
    if cache_leftpad is not None:   # refused with a table of several pages
        _check_leftpad(torch, fn, cache_leftpad, q.device, B, table)
    shift = _chunks.decode_start(torch, c, keys, None).to(torch.int64) // ps
    cols = table.shape[1]
    # the chunk's keys (at most c from its first page) and the append's rows
    # fit ceil(c / ps) pages: the kernel's capacity, which sizes its splits
    idx = (torch.arange(min(cols, -(-c // ps)), device=q.device).unsqueeze(0)
           + shift.unsqueeze(1)).clamp(max=cols - 1)
    if rotary and rotary_seqlens is None:
        rotary_seqlens = used
    return ((used.to(torch.int64) - shift * ps).to(torch.int32), cache_leftpad,
            table.gather(1, idx), rotary_seqlens)


def _kvcache_chunked_rows(torch, fn, c, q, k_cache, v_cache, k_new, rotary, cache_seqlens,
                          cache_batch_idx, cache_leftpad, page_table, softmax_scale, causal,
                          window_size, softcap, return_lse, kernel_dir, kernel, jit):
    """flash_attn_with_kvcache with Sq > 1 query rows a batch under
    attention_chunk c: the rows may span two chunks, so the call runs as
    the ragged route's virtual sequences (_kvcache_ragged over q's rows
    packed, B sequences of Sq), which reads a cache's keys only."""
    extras = {"k and v (appending)": k_new, "rotary embedding": True if rotary else None,
              "cache_batch_idx": cache_batch_idx, "cache_leftpad": cache_leftpad}
    for name, value in extras.items():
        if value is not None:
            raise NotImplementedError(
                f"{fn}: attention_chunk {c} with {q.shape[1]} query rows a batch and {name} is "
                f"not supported: the rows may span two chunks, which runs the "
                f"variable-length kernel over the chunks, and it reads a cache's keys only "
                f"(one query row a batch, a decoding step, takes {name})")
    B, Sq, Hq, _ = q.shape
    cu_q = torch.arange(B + 1, dtype=torch.int32, device=q.device) * Sq
    r = _kvcache_ragged(torch, fn, q.flatten(0, 1), k_cache, v_cache, cache_seqlens,
                        page_table, cu_q, Sq, softmax_scale, causal, window_size, c, softcap,
                        True, kernel_dir, kernel, jit)
    o, lse = r
    o = o.unflatten(0, (B, Sq))
    if not return_lse:
        return o
    return o, lse.unflatten(1, (B, Sq)).transpose(0, 1).contiguous()


def _kvcache_packed_q(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                      cache_batch_idx, cache_leftpad, page_table, cu_seqlens_q, max_seqlen_q,
                      rotary_seqlens, softmax_scale, causal, window_size, attention_chunk,
                      softcap, rotary_interleaved, num_splits, sm_margin, return_lse,
                      kernel_dir, kernel, jit, ctas_per_sm, fp8=None):
    """flash_attn_with_kvcache with ``cu_seqlens_q``: q packed [Tq, Hq, D],
    sequence b's queries rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1
    (FA3's). Two routes, chosen on the host without reading the array:

    - Tq = B * max_seqlen_q: every sequence has max_seqlen_q rows (the
      contract: q holds exactly cu_seqlens_q[B] rows, no sequence longer
      than max_seqlen_q), so q is the fixed-length [B, max_seqlen_q, Hq, D]
      of the decoding kernel, with everything that takes (a paged cache,
      appending, rotary, cache_batch_idx, cache_leftpad): a serving
      engine's decoding or speculative step.
    - otherwise (ragged queries): the variable-length kernel over the
      contiguous cache's rows, sequence b's keys rows b * S' .. of the
      cache seen as one packed [T, Hkv, D] tensor (S' its batch stride in
      rows), cache_seqlens[b] of them (its seqused_k); over a paged cache
      the paged varlen kernel (_kvcache_paged_ragged). The decoding
      kernel's extras are refused there by name (NotImplementedError).

    Returns o [Tq, Hq, Dv] and, with return_softmax_lse, lse [Hq, Tq] (FA3's
    varlen layouts). fp8: None, or the call's descales (_kvcache_fp8): the
    decoding kernel's route only."""
    import torch
    fn = "flash_attn_with_kvcache"
    if max_seqlen_q is None:
        raise ValueError(f"{fn}: max_seqlen_q must be given with cu_seqlens_q (the longest "
                         f"sequence's query rows; FA3 requires it too)")
    max_seqlen_q = _max_seqlen_q(max_seqlen_q, fn)
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        raise ValueError(f"{fn}: with cu_seqlens_q, q must be a 3-D [total_q, Hq, D] tensor "
                         f"(the sequences' queries packed), got "
                         f"{tuple(q.shape) if isinstance(q, torch.Tensor) else type(q).__name__}")
    cu_seqlens_q = _check_seqlens(torch, f"{fn}: cu_seqlens_q", cu_seqlens_q, q.device)
    if cu_seqlens_q.numel() < 1:
        raise ValueError(f"{fn}: cu_seqlens_q must have B + 1 >= 1 entries, got 0")
    B = cu_seqlens_q.numel() - 1
    Tq, Hq, D = q.shape
    if _uniform_packed(q, B, max_seqlen_q):
        q4 = q.unflatten(0, (B, max_seqlen_q))
        r = flash_attn_with_kvcache(
            q4, k_cache, v_cache, k=k, v=v, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
            cache_seqlens=cache_seqlens, cache_batch_idx=cache_batch_idx,
            cache_leftpad=cache_leftpad, page_table=page_table,
            rotary_seqlens=rotary_seqlens, softmax_scale=softmax_scale, causal=causal,
            window_size=window_size, attention_chunk=attention_chunk, softcap=softcap,
            rotary_interleaved=rotary_interleaved, num_splits=num_splits,
            sm_margin=sm_margin, return_softmax_lse=return_lse, kernel_dir=kernel_dir,
            kernel=kernel, jit=jit, ctas_per_sm=ctas_per_sm,
            **dict(zip(("q_descale", "k_descale", "v_descale"), fp8 or (None,) * 3)))
        o, lse = r if return_lse else (r, None)
        o = o.flatten(0, 1)
        if not return_lse:
            return o
        # [B, Hq, Sq] -> [Hq, B * Sq]: the packed rows' order
        return o, lse.transpose(0, 1).reshape(Hq, Tq)
    extras = {"k and v (appending)": k if k is not None else v,
              "cache_batch_idx": cache_batch_idx, "cache_leftpad": cache_leftpad,
              "rotary embedding (rotary_cos, rotary_sin)":
                  rotary_cos if rotary_cos is not None else rotary_sin,
              "FP8 q and caches (the variable-length kernel has no FP8 variant)": fp8}
    for name, value in extras.items():
        if value is not None:
            raise NotImplementedError(
                f"{fn}: {name} with cu_seqlens_q whose sequences differ in length (q has "
                f"{Tq} rows, not B {B} * max_seqlen_q {max_seqlen_q}) is not supported: the "
                f"variable-length kernel reads a cache's keys only (with every sequence "
                f"max_seqlen_q long, the decoding kernel takes it)")
    _num_splits(fn, num_splits)
    _ctas_per_sm(fn, ctas_per_sm)
    _sm_margin(fn, sm_margin)
    return _kvcache_ragged(torch, fn, q, k_cache, v_cache, cache_seqlens, page_table,
                           cu_seqlens_q, max_seqlen_q, softmax_scale, causal, window_size,
                           attention_chunk, softcap, return_lse, kernel_dir, kernel, jit)


def _kvcache_ragged(torch, fn, q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q,
                    max_seqlen_q, softmax_scale, causal, window_size, chunk, softcap,
                    return_lse, kernel_dir, kernel, jit):
    """Packed queries q [Tq, Hq, D] (checked cu_seqlens_q, max_seqlen_q)
    over a cache's keys, the variable-length kernel: over the contiguous
    cache as packed rows, or the paged one (_kvcache_paged_ragged);
    attention_chunk `chunk` (0: off) as its virtual sequences."""
    B = cu_seqlens_q.numel() - 1
    # (q as one batch of its rows: the checks of the caches' rank, device,
    # dtype and grad)
    _check_inputs(torch, q.unsqueeze(0), k_cache, v_cache, fn=fn)
    if page_table is not None:
        return _kvcache_paged_ragged(torch, fn, q, k_cache, v_cache, cache_seqlens,
                                     page_table, cu_seqlens_q, max_seqlen_q, softmax_scale,
                                     causal, window_size, softcap, return_lse, kernel_dir,
                                     kernel, jit, chunk)
    Bc, Skv, Hkv, _ = k_cache.shape
    if Bc != B or v_cache.shape[0] != B or v_cache.shape[1] != Skv:
        raise ValueError(f"{fn}: k_cache {tuple(k_cache.shape)} and v_cache "
                         f"{tuple(v_cache.shape)} must hold B = {B} batches (cu_seqlens_q's "
                         f"entries - 1) of one Skv")
    # the caches as one packed tensor: batch b's row r is packed row
    # b * rows + r, rows the batch stride in rows (>= Skv)
    rows = None
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        s0, s1 = t.stride(0), t.stride(1)
        if t.stride(3) != 1 and t.shape[3] > 1:
            raise ValueError(f"{fn}: {name} must have a contiguous last dim (it is read in "
                             f"place), got strides {tuple(t.stride())}")
        if B > 1 and (s1 <= 0 or s0 % s1 or s0 // s1 < Skv
                      or (rows is not None and s0 // s1 != rows)):
            raise ValueError(
                f"{fn}: with cu_seqlens_q, k_cache and v_cache are read as packed rows: each "
                f"one's batch stride must be one whole number of its row stride (>= Skv = "
                f"{Skv}), the same for both; {name} has strides {tuple(t.stride())}")
        rows = s0 // s1 if B > 1 else Skv
    if cache_seqlens is None and rows == Skv:
        seqused_k = None
    else:
        seqused_k = _check_cache_seqlens(torch, fn, Skv if cache_seqlens is None
                                         else cache_seqlens, q.device, B, Skv)
        if seqused_k is None:   # an int equal to Skv, with rows > Skv
            seqused_k = torch.full((B,), Skv, dtype=torch.int32, device=q.device)
    T = (B - 1) * rows + Skv if B else 0

    def packed(t):
        return t.as_strided((T, t.shape[2], t.shape[3]), (t.stride(1), t.stride(2), 1))
    cu_seqlens_k = torch.arange(B + 1, dtype=torch.int32, device=q.device) * rows
    return flash_attn_varlen_func(
        q, packed(k_cache), packed(v_cache), cu_seqlens_q, cu_seqlens_k, max_seqlen_q, Skv,
        seqused_k=seqused_k, softmax_scale=softmax_scale, causal=causal,
        window_size=window_size, attention_chunk=chunk, softcap=softcap,
        return_attn_probs=return_lse, kernel_dir=kernel_dir, kernel=kernel, jit=jit)


def _kvcache_paged_ragged(torch, fn, q, k_cache, v_cache, cache_seqlens, page_table,
                          cu_seqlens_q, max_seqlen_q, softmax_scale, causal, window_size,
                          softcap, return_lse, kernel_dir, kernel, jit, chunk=0):
    """_kvcache_packed_q's ragged batch over a paged cache: the paged
    variable-length kernel (fa3-compile --varlen --paged, facts paged_kv 1),
    which reads packed row r of k and v as row r % page_size of page
    page_table.flatten()[r // page_size] (the table made contiguous), so
    that sequence b's keys, from row b * max_pages * page_size
    (cu_seqlens_k), are its row of the table, cache_seqlens[b] of them
    (seqused_k; without it all max_pages * page_size)."""
    B = cu_seqlens_q.numel() - 1
    Tq, Hq, D = q.shape
    page_table, _ = _check_page_table(torch, fn, page_table, q.device, B)
    # contiguous: the rows of pages are then max_pages apart here and in the
    # op, whatever layout torch.compile gives its input (a column slice of
    # a wider table is copied: B * max_pages int32)
    page_table = page_table.contiguous()
    _, _, _, _, Skv, _, _ = _check_paged_shapes(fn, (B, 0, Hq, D), k_cache.shape,
                                                v_cache.shape, page_table.shape)
    ps = k_cache.shape[1]
    if B * Skv > 2**31 - 1:
        raise ValueError(f"{fn}: B {B} * max_pages_per_seq {page_table.shape[1]} * page_size "
                         f"{ps} rows of pages is out of range (at most 2^31-1: the kernel's "
                         f"i32 row index)")
    seqused_k = _check_cache_seqlens(torch, fn, cache_seqlens, q.device, B, Skv)
    cu_seqlens_k = torch.arange(B + 1, dtype=torch.int32, device=q.device) * Skv
    window_size = _window(window_size)
    if chunk:
        cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q = _chunks.segments(
            torch, cu_seqlens_q, cu_seqlens_k, seqused_k, chunk, max_seqlen_q, Skv)
    if torch.compiler.is_compiling():
        from . import torch_ops  # noqa: F401  (registers torch.ops.fa3.flash_attn_varlen_fwd)
        o, lse = torch.ops.fa3.flash_attn_varlen_fwd.default(
            q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
            None if softmax_scale is None else float(softmax_scale), bool(causal),
            list(window_size), float(softcap), _op_path(kernel_dir),
            None if kernel is None else _op_path(kernel.facts_path), jit, page_table)
        return (o, lse) if return_lse else o
    return _eager_varlen(torch, q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, seqused_k,
                         max_seqlen_q, softmax_scale, causal, window_size, softcap, return_lse,
                         kernel_dir, kernel, jit, None, None, page_table=page_table)


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv,
                           headdim, cache_seqlens, qkv_dtype=None, headdim_v=None,
                           cu_seqlens_q=None, cu_seqlens_k_new=None, cache_leftpad=None,
                           page_size: Optional[int] = None, max_seqlen_k_new: int = 0,
                           causal: bool = False, window_size=(-1, -1), attention_chunk: int = 0,
                           has_softcap: bool = False, num_splits: int = 0, pack_gqa=None,
                           sm_margin: int = 0):
    """FA3's ``get_scheduler_metadata`` (flash_attn_interface), its arguments
    in its order, for code that computes it once and passes it to every
    ``flash_attn_with_kvcache(scheduler_metadata=...)`` (a serving engine's
    CUDA-graph path). Returns None, which flash_attn_with_kvcache takes:
    here the split count is the runtime's host-side heuristic over the
    cache's capacity and the device's SMs (docs/runtime.md, Split-KV
    decoding), not over cache_seqlens' values, so it is the same at every
    replay and there is no device-side schedule to precompute. What the
    decoding call would refuse is refused here too, by the same names
    (attention_chunk, num_splits and sm_margin by their ranges)."""
    fn = "get_scheduler_metadata"
    _chunks.check_chunk(fn, attention_chunk)
    _num_splits(fn, num_splits)
    _sm_margin(fn, sm_margin)
    return None


def flash_attn_bhsd(q, k, v, o=None, lse=None, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, kernel_dir=None, kernel=None, jit=None):
    """Same kernels on SDPA-layout tensors q [B, Hq, Sq, D], k/v [B, Hkv, Skv, D]
    (any strides with a contiguous last dim). Writes into o [B, Hq, Sq, Dv] and
    lse [B, Hq, Sq] if given (else allocates o; lse is then not computed).
    Returns o."""
    import torch
    from . import runtime

    dt = _dtype_name(torch, q.dtype)
    if dt == "e4m3" or _any_fp8(torch, k, v):
        raise NotImplementedError("fa3 flash_attn_bhsd takes bf16 or f16: FP8 "
                                  "(torch.float8_e4m3fn) inputs, with their descales, go "
                                  "through flash_attn_func (BSHD)")
    if dt is None or not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must all be bf16 or all f16, got {q.dtype}, {k.dtype}, "
                         f"{v.dtype}")
    if not (q.is_cuda and q.device == k.device == v.device):
        raise ValueError("q, k, v must be CUDA tensors on one device")
    B, Hq, Sq, D = q.shape
    Dv = v.shape[3]
    if window_size is None:
        window_size = (-1, -1)
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    kobj = _launchable_kernel(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit,
                              dev, torch.cuda.device, seqlen_q=Sq)
    if o is None:
        o = torch.empty((B, Hq, Sq, Dv), dtype=q.dtype, device=q.device)
    if lse is not None and (lse.dtype != torch.float32 or not lse.is_contiguous()
                            or tuple(lse.shape) != (B, Hq, Sq)):
        raise ValueError(f"lse must be a contiguous float32 tensor of shape {(B, Hq, Sq)}")
    counter = _graph_tile_counter(torch, kobj, q.device)
    args = runtime.fwd_args(*[runtime.tensor(t.data_ptr(), tuple(t.shape), t.stride(), name=n)
                              for n, t in zip("qkvo", (q, k, v, o))],
                            lse.data_ptr() if lse is not None else 0, softmax_scale, dt,
                            counter.data_ptr() if counter is not None else 0)
    _launch(torch, dev, kobj.fwd, args)
    return o
