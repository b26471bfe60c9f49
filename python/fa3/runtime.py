"""ctypes bindings of libfa3rt.so, the C runtime that launches compiled kernels.

No torch here: tensors are described by device pointers, shapes and strides in
logical order [B, H, S, D] (see runtime/include/fa3rt.h). fa3.torch_api builds
on this.

The library is found at $FA3RT_LIBRARY, else inside the installed package
(fa3/_lib), $FA3_BUILD_DIR/lib, build/lib (CMake), then runtime/libfa3rt.so
(``make -C runtime``).
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence, Union

from ._capi import (INT64, UINT64, LibraryNotFoundError, check_int, check_str,
                    library_candidates)

OK = 0
_U64_MAX, _I64_MAX = UINT64[1], INT64[1]
STATUS_NAMES = {0: "FA3RT_OK", 1: "FA3RT_ERR_INVALID_ARGUMENT", 2: "FA3RT_ERR_FACTS",
                3: "FA3RT_ERR_IO", 4: "FA3RT_ERR_UNSUPPORTED_DEVICE", 5: "FA3RT_ERR_CUDA",
                6: "FA3RT_ERR_OUT_OF_MEMORY"}
# fa3rt_dtype: e4m3 is the FP8 kernels' q, k and v (torch.float8_e4m3fn; their
# o is bf16)
DTYPES = {"bf16": 1, "f16": 2, "e4m3": 3}


class Fa3RuntimeError(RuntimeError):
    """A libfa3rt call failed; .status is the fa3rt_status code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Fa3ArgumentError(Fa3RuntimeError, ValueError):
    """An argument that libfa3rt would refuse (FA3RT_ERR_INVALID_ARGUMENT), or
    that its C types cannot hold, found before the call."""

    def __init__(self, message: str):
        super().__init__(1, message)


class Tensor(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_uint64), ("shape", ctypes.c_int64 * 4),
                ("strides", ctypes.c_int64 * 4)]


class FwdArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_uint64), ("softmax_scale", ctypes.c_double),
                ("dtype", ctypes.c_int), ("tile_counter", ctypes.c_uint64),
                ("cu_seqlens_q", ctypes.c_uint64), ("cu_seqlens_k", ctypes.c_uint64),
                ("seqused_k", ctypes.c_uint64), ("varlen_batch", ctypes.c_int32),
                ("max_seqlen_q", ctypes.c_int32), ("num_splits", ctypes.c_int32),
                ("o_accum", ctypes.c_uint64), ("lse_accum", ctypes.c_uint64),
                ("num_sms", ctypes.c_int32), ("page_table", ctypes.c_uint64),
                ("page_table_stride", ctypes.c_int32), ("paged_seqlen_k", ctypes.c_int32),
                ("k_new", Tensor), ("v_new", Tensor), ("seqlens_out", ctypes.c_uint64),
                ("o_dtype", ctypes.c_int), ("q_descale", ctypes.c_uint64),
                ("k_descale", ctypes.c_uint64), ("v_descale", ctypes.c_uint64),
                ("q_descale_stride_b", ctypes.c_int64), ("q_descale_stride_h", ctypes.c_int64),
                ("q_descale_stride_m", ctypes.c_int64), ("k_descale_stride_b", ctypes.c_int64),
                ("k_descale_stride_h", ctypes.c_int64), ("k_descale_stride_n", ctypes.c_int64),
                ("v_descale_stride_b", ctypes.c_int64), ("v_descale_stride_h", ctypes.c_int64),
                ("ctas_per_sm", ctypes.c_int32), ("leftpad_k", ctypes.c_uint64)]


class QuantizeArgs(ctypes.Structure):
    """fa3rt_quantize_args (fa3rt.h)."""
    _fields_ = [("x", Tensor), ("x_dtype", ctypes.c_int), ("y", Tensor),
                ("descale", ctypes.c_uint64), ("signs", ctypes.c_uint64),
                ("per_head", ctypes.c_int), ("workspace", ctypes.c_uint64)]


class Facts(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("kernel", ctypes.c_char * 256),
                ("dtype", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("head_dim_v", ctypes.c_int), ("block_m", ctypes.c_int),
                ("block_n", ctypes.c_int), ("threads", ctypes.c_int),
                ("dynamic_smem", ctypes.c_int), ("causal", ctypes.c_int),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int),
                ("softcap", ctypes.c_double), ("scale", ctypes.c_double),
                ("persistent", ctypes.c_int), ("cluster_m", ctypes.c_int),
                ("cubin", ctypes.c_char * 256), ("varlen", ctypes.c_int),
                ("backward", ctypes.c_int), ("split_kv", ctypes.c_int),
                ("pack_gqa", ctypes.c_int), ("deterministic", ctypes.c_int),
                ("min_seqlen_q", ctypes.c_int), ("paged_kv", ctypes.c_int),
                ("paged_copy", ctypes.c_int), ("copy_rows", ctypes.c_int)]


class FwdLaunch(ctypes.Structure):
    _fields_ = [("empty", ctypes.c_int), ("fill_only", ctypes.c_int),
                ("B", ctypes.c_int32), ("Sq", ctypes.c_int32), ("Skv", ctypes.c_int32),
                ("Hq", ctypes.c_int32), ("Hkv", ctypes.c_int32),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("dynamic_smem", ctypes.c_uint),
                ("o_stride_b", ctypes.c_int64), ("o_stride_s", ctypes.c_int64),
                ("o_stride_h", ctypes.c_int64),
                ("scale", ctypes.c_double), ("scale_log2", ctypes.c_float),
                ("num_splits", ctypes.c_int32), ("pack_group", ctypes.c_int32),
                ("o_accum_bytes", ctypes.c_uint64), ("lse_accum_bytes", ctypes.c_uint64),
                ("combine_grid", ctypes.c_uint), ("combine_block", ctypes.c_uint),
                ("page_size", ctypes.c_int32), ("kv_box_rows", ctypes.c_int32),
                ("snew", ctypes.c_int32), ("append_grid", ctypes.c_uint),
                ("append_block", ctypes.c_uint)]


class BwdArgs(ctypes.Structure):
    """fa3rt_bwd_args (fa3rt.h), field for field."""
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("dout", Tensor),
                ("o", Tensor), ("lse", ctypes.c_uint64), ("delta", ctypes.c_uint64),
                ("dq_accum", ctypes.c_uint64), ("dq", Tensor), ("dk", Tensor),
                ("dv", Tensor), ("softmax_scale", ctypes.c_double), ("dtype", ctypes.c_int)]


class BwdLaunch(ctypes.Structure):
    _fields_ = [("empty", ctypes.c_int), ("zero_only", ctypes.c_int),
                ("B", ctypes.c_int32), ("Sq", ctypes.c_int32), ("Skv", ctypes.c_int32),
                ("Hq", ctypes.c_int32), ("Hkv", ctypes.c_int32),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("dynamic_smem", ctypes.c_uint),
                ("dkv_stride_b", ctypes.c_int64), ("dkv_stride_s", ctypes.c_int64),
                ("dkv_stride_h", ctypes.c_int64), ("dq_accum_words", ctypes.c_uint64),
                ("scale", ctypes.c_double), ("scale_log2", ctypes.c_float),
                ("aux_grid", ctypes.c_uint), ("aux_block", ctypes.c_uint),
                ("o_stride_b", ctypes.c_int64), ("o_stride_s", ctypes.c_int64),
                ("o_stride_h", ctypes.c_int64),
                ("dout_stride_b", ctypes.c_int64), ("dout_stride_s", ctypes.c_int64),
                ("dout_stride_h", ctypes.c_int64),
                ("dq_stride_b", ctypes.c_int64), ("dq_stride_s", ctypes.c_int64),
                ("dq_stride_h", ctypes.c_int64)]


def library_path() -> Path:
    """libfa3rt.so: $FA3RT_LIBRARY, else inside the installed package
    (fa3/_lib), $FA3_BUILD_DIR/lib, <repo>/build/lib (CMake), then
    <repo>/runtime (``make -C runtime``)."""
    env = os.environ.get("FA3RT_LIBRARY")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parents[2]
    cands = library_candidates("libfa3rt.so") + [root / "runtime" / "libfa3rt.so"]
    for c in cands:
        if c.exists():
            return c
    raise LibraryNotFoundError(
        "libfa3rt.so not found (looked at " + ", ".join(map(str, cands)) + "): install the "
        "package (pip install .; it needs the CUDA driver header and library, cuda.h and "
        "libcuda, at build time), build it with 'make -C runtime' (or the CMake target "
        "fa3rt), or set FA3RT_LIBRARY to its path")


_lib = None
_lib_lock = threading.Lock()


# fa3rt.h's FA3RT_VERSION_MAJOR and _MINOR, whose structs this module mirrors
# (python/tests/test_runtime.py checks both against the header)
VERSION = (0, 18)
MAX_SPLITS = 128       # FA3RT_MAX_SPLITS
DEFAULT_SMS = 132      # FA3RT_DEFAULT_SMS: fa3rt_fwd_plan's where num_sms is 0


def load_library(path) -> ctypes.CDLL:
    """libfa3rt at `path`, its functions typed (lib() loads the default one)."""
    try:
        L = ctypes.CDLL(str(path))
    except OSError as e:
        raise OSError(f"cannot load {path}: {e} (libfa3rt needs the NVIDIA driver's "
                      "libcuda.so.1)") from e
    P, c_int, c_size_t = ctypes.POINTER, ctypes.c_int, ctypes.c_size_t
    # the structs below mirror one version of fa3rt.h: refuse another library
    version = getattr(L, "fa3rt_version", None)
    if version is None:
        raise OSError(f"{path} is libfa3rt older than 0.5 (no fa3rt_version); these "
                      f"bindings need {VERSION[0]}.{VERSION[1]}: rebuild it (make -C runtime) "
                      "or reinstall the package")
    version.restype, version.argtypes = c_int, []
    got = version()
    if got != VERSION[0] * 1000 + VERSION[1]:
        raise OSError(f"{path} is libfa3rt {got // 1000}.{got % 1000}; these bindings need "
                      f"{VERSION[0]}.{VERSION[1]} (the argument structs differ): rebuild it "
                      "(make -C runtime) or reinstall the package")
    L.fa3rt_last_error.restype = ctypes.c_char_p
    L.fa3rt_last_error.argtypes = []
    L.fa3rt_facts_parse.restype = c_int
    L.fa3rt_facts_parse.argtypes = [ctypes.c_char_p, c_size_t, P(Facts)]
    L.fa3rt_fwd_plan.restype = c_int
    L.fa3rt_fwd_plan.argtypes = [P(Facts), P(FwdArgs), P(FwdLaunch)]
    L.fa3rt_kernel_load.restype = c_int
    L.fa3rt_kernel_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, P(ctypes.c_void_p)]
    L.fa3rt_kernel_load_data.restype = c_int
    L.fa3rt_kernel_load_data.argtypes = [ctypes.c_char_p, c_size_t, ctypes.c_char_p,
                                         c_size_t, P(ctypes.c_void_p)]
    L.fa3rt_kernel_destroy.restype = None
    L.fa3rt_kernel_destroy.argtypes = [ctypes.c_void_p]
    L.fa3rt_kernel_facts.restype = P(Facts)
    L.fa3rt_kernel_facts.argtypes = [ctypes.c_void_p]
    L.fa3rt_fwd.restype = c_int
    L.fa3rt_fwd.argtypes = [ctypes.c_void_p, P(FwdArgs), ctypes.c_void_p]
    L.fa3rt_bwd_plan.restype = c_int
    L.fa3rt_bwd_plan.argtypes = [P(Facts), P(BwdArgs), P(BwdLaunch)]
    L.fa3rt_bwd.restype = c_int
    L.fa3rt_bwd.argtypes = [ctypes.c_void_p, P(BwdArgs), ctypes.c_void_p]
    L.fa3rt_quantize.restype = c_int
    L.fa3rt_quantize.argtypes = [ctypes.c_void_p, P(QuantizeArgs), ctypes.c_void_p]
    L.fa3rt_num_splits_heuristic.restype = ctypes.c_int32
    L.fa3rt_num_splits_heuristic.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int32]
    return L


def lib():
    """The loaded libfa3rt (loaded once, on first use)."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = load_library(library_path())
    return _lib


@contextlib.contextmanager
def loading_with(library: ctypes.CDLL):
    """Kernels loaded inside (e.g. by flash_attn_func's first call of a
    variant) are bound to `library` (load_library) for their lifetime: how
    bench/compare_fwd.py times kernels of an older ABI beside current ones in
    one process. Not thread-safe."""
    global _lib
    with _lib_lock:
        saved, _lib = _lib, library
    try:
        yield
    finally:
        with _lib_lock:
            _lib = saved


def _check(status: int, library: Optional[ctypes.CDLL] = None):
    if status != OK:
        msg = (library or lib()).fa3rt_last_error().decode(errors="replace")
        raise Fa3RuntimeError(status, f"{STATUS_NAMES.get(status, status)}: {msg}")


def tensor(ptr: int, shape: Sequence[int], strides: Sequence[int],
           name: str = "tensor") -> Tensor:
    """[B, H, S, D] logical shape and element strides of a device tensor `name`
    (for messages). Numbers that the C struct cannot hold are refused here;
    libfa3rt checks the rest (fa3rt.h)."""
    # Fast path (flash_attn_func calls this 4 times a call; the checks below
    # cost 5-8 us a tensor): an aligned int pointer and 8 numbers in range
    # that ctypes takes as integers (it refuses floats with TypeError). Any
    # other input goes the checked way, which names the problem.
    if type(ptr) is int and 0 <= ptr <= _U64_MAX and not ptr & 15:
        try:
            if (len(shape) == 4 and len(strides) == 4
                    and min(*shape, *strides) >= 0 and max(*shape, *strides) <= _I64_MAX):
                t = Tensor()
                t.ptr = ptr
                t.shape[:] = shape
                t.strides[:] = strides
                return t
        except (TypeError, ValueError):
            pass
    where, E = f"fa3.runtime.tensor({name})", Fa3ArgumentError
    if len(shape) != 4 or len(strides) != 4:
        raise E(f"{where}: shape and strides must have 4 entries [B, H, S, D], got "
                f"{len(shape)} and {len(strides)}")
    t = Tensor()
    t.ptr = check_int(where, "ptr", ptr, *UINT64, error=E)
    if t.ptr % 16:
        raise E(f"{where}: ptr = {t.ptr:#x} is not 16-byte aligned (TMA)")
    for i in range(4):
        t.shape[i] = check_int(where, f"shape[{i}]", shape[i], 0, INT64[1], error=E)
        t.strides[i] = check_int(where, f"strides[{i}]", strides[i], 0, INT64[1], error=E)
    return t


def fwd_args(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse_ptr: int = 0,
             softmax_scale: Optional[float] = None, dtype: str = "bf16",
             tile_counter: int = 0, *, cu_seqlens_q: int = 0, cu_seqlens_k: int = 0,
             seqused_k: int = 0, varlen_batch: int = 0, max_seqlen_q: int = 0,
             num_splits: int = 0, o_accum: int = 0, lse_accum: int = 0,
             num_sms: int = 0, page_table: int = 0, page_table_stride: int = 0,
             paged_seqlen_k: int = 0, k_new: Optional[Tensor] = None,
             v_new: Optional[Tensor] = None, seqlens_out: int = 0,
             o_dtype: Optional[str] = None, q_descale: int = 0,
             q_descale_strides: Sequence[int] = (0, 0, 0), k_descale: int = 0,
             k_descale_strides: Sequence[int] = (0, 0, 0), v_descale: int = 0,
             v_descale_strides: Sequence[int] = (0, 0), ctas_per_sm: int = 0,
             leftpad_k: int = 0) -> FwdArgs:
    """softmax_scale None: the kernel's (facts) scale; else 0 < scale <= 1e30.
    tile_counter: 0, or the address of 8 zeroed bytes of device memory for
    the persistent scheduler (fa3rt.h: fa3rt_fwd_args.tile_counter).
    A varlen kernel's packed batch (fa3rt.h): the device addresses of the
    int32 arrays cu_seqlens_q/k [varlen_batch + 1] and seqused_k (0: none),
    the sequence count and max_seqlen_q; q, k, v, o as [1, H, T, D].
    A split_kv kernel's launch (fa3rt.h; Kernel.plan resolves the count and
    the workspace's bytes): num_splits (0: the heuristic over num_sms SMs,
    0: the device's), the device addresses of the f32 workspaces o_accum and
    lse_accum (needed where the resolved count is > 1).
    A split_kv kernel's paged cache (fa3rt.h): the device address of the
    int32 page table [B, page_table_stride], its row stride in entries and
    the logical key length (0: page_table_stride * page_size); k and v are
    then the page pool [num_pages, Hkv, page_size, D].
    A split_kv kernel's append (fa3rt.h): k_new [B, Hkv, Snew, D] and v_new
    [B, Hkv, Snew, Dv] from tensor(), written into the cache (or pool) at
    rows seqused_k[b] .. + Snew - 1 before the attention, and the device
    address of the int32 [B] workspace seqlens_out (seqused_k[b] + Snew,
    the attention's key counts); None, None, 0: nothing appended.
    An FP8 kernel's launch (dtype "e4m3"; fa3rt.h): o_dtype None (the
    kernel's: bf16) or its name; the device addresses of the f32 descales
    (0: 1.0) and their element strides, q's (b, h, per 128 query rows),
    k's (b, h, per 128 key rows), v's (b, h), each 0 to 2^31-1 (0
    broadcasts).
    ctas_per_sm (fa3rt.h): 0, the runtime's choice (one CTA a SM where a
    split-KV kernel streams at least FA3RT_ONE_CTA_KEYS keys a CTA); 1, one
    (the launch given the most dynamic shared memory a block may have); 2,
    as many as the kernel's registers and shared memory let fit.
    leftpad_k (fa3rt.h): a split_kv kernel's left-padded cache, the device
    address of int32 [B], batch b's first key row (0: none)."""
    a = FwdArgs()
    w, E = "fa3.runtime.fwd_args", Fa3ArgumentError
    if o_dtype is not None:
        if o_dtype not in DTYPES:
            raise ValueError(f"o_dtype must be None or one of {sorted(DTYPES)}, got {o_dtype!r}")
        a.o_dtype = DTYPES[o_dtype]
    # (a field left 0, the struct's own value, is not checked: a call's host
    # time matters for short attentions, and most of these are 0)
    for name, ptr, strides, n, axes in (("q_descale", q_descale, q_descale_strides, 3, "bhm"),
                                        ("k_descale", k_descale, k_descale_strides, 3, "bhn"),
                                        ("v_descale", v_descale, v_descale_strides, 2, "bh")):
        if ptr:
            setattr(a, name, check_int(w, name, ptr, *UINT64, error=E))
        if len(strides) != n:
            raise E(f"{w}: {name}_strides must have {n} entries ({', '.join(axes)}), got "
                    f"{len(strides)}")
        for axis, st in zip(axes, strides):
            if st:
                setattr(a, f"{name}_stride_{axis}",
                        check_int(w, f"{name}_strides[{axis}]", st, 0, 2**31 - 1, error=E))
    for name, t in (("k_new", k_new), ("v_new", v_new)):
        if t is not None and not isinstance(t, Tensor):
            raise E(f"{w}: {name} must be a fa3.runtime.Tensor (fa3.runtime.tensor) or None, "
                    f"got {type(t).__name__}")
    if k_new is not None:
        a.k_new = k_new
    if v_new is not None:
        a.v_new = v_new
    i31 = (0, 2**31 - 1)
    for name, value, (lo, hi) in (
            ("seqlens_out", seqlens_out, UINT64), ("page_table", page_table, UINT64),
            ("page_table_stride", page_table_stride, i31),
            ("paged_seqlen_k", paged_seqlen_k, i31), ("num_splits", num_splits, (0, MAX_SPLITS)),
            ("o_accum", o_accum, UINT64), ("lse_accum", lse_accum, UINT64),
            ("num_sms", num_sms, i31), ("ctas_per_sm", ctas_per_sm, (0, 2)),
            ("cu_seqlens_q", cu_seqlens_q, UINT64), ("cu_seqlens_k", cu_seqlens_k, UINT64),
            ("seqused_k", seqused_k, UINT64), ("varlen_batch", varlen_batch, i31),
            ("max_seqlen_q", max_seqlen_q, i31), ("tile_counter", tile_counter, UINT64),
            ("leftpad_k", leftpad_k, UINT64)):
        if value:
            setattr(a, name, check_int(w, name, value, lo, hi, error=E))
    a.q, a.k, a.v, a.o = q, k, v, o
    if lse_ptr:
        a.lse = check_int(w, "lse_ptr", lse_ptr, *UINT64, error=E)
    a.softmax_scale = math.nan if softmax_scale is None else float(softmax_scale)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    a.dtype = DTYPES[dtype]
    return a


def bwd_args(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, o: Tensor, lse_ptr: int,
             delta_ptr: int, dq_accum_ptr: int, dq: Tensor, dk: Tensor, dv: Tensor,
             softmax_scale: Optional[float] = None, dtype: str = "bf16") -> BwdArgs:
    """fa3rt_bwd_args (fa3rt.h), in its order: q, k, v, dout, o (the
    forward's output), dq, dk, dv (written) from tensor(); the device
    addresses of lse (f32 [B, Hq, Sq], the forward's) and of the workspaces
    delta (f32 [B, Hq, Sq]) and dq_accum (fa3.facts.bwd_dq_accum_words
    floats, the kernel's tile order; a deterministic kernel's holds its
    turn counters too), all contiguous, which the launch fills. softmax_scale None: the kernel's
    (facts) scale; else 0 < scale <= 1e30."""
    a = BwdArgs()
    w, E = "fa3.runtime.bwd_args", Fa3ArgumentError
    a.q, a.k, a.v, a.dout, a.o, a.dq, a.dk, a.dv = q, k, v, dout, o, dq, dk, dv
    a.lse = check_int(w, "lse_ptr", lse_ptr or 0, *UINT64, error=E)
    a.delta = check_int(w, "delta_ptr", delta_ptr or 0, *UINT64, error=E)
    a.dq_accum = check_int(w, "dq_accum_ptr", dq_accum_ptr or 0, *UINT64, error=E)
    a.softmax_scale = math.nan if softmax_scale is None else float(softmax_scale)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    a.dtype = DTYPES[dtype]
    return a


def parse_facts_c(text: Union[str, bytes]) -> Facts:
    """The C parser (for tests: it must agree with fa3.facts.parse_facts)."""
    f = Facts()
    b = text.encode() if isinstance(text, str) else bytes(text)
    _check(lib().fa3rt_facts_parse(b, len(b), ctypes.byref(f)))
    return f


def plan(facts: Facts, args: FwdArgs) -> FwdLaunch:
    """Validates args against facts without a GPU; raises Fa3RuntimeError."""
    L = FwdLaunch()
    _check(lib().fa3rt_fwd_plan(ctypes.byref(facts), ctypes.byref(args), ctypes.byref(L)))
    return L


def num_splits_heuristic(tiles: int, kv_blocks: int, num_sms: int) -> int:
    """libfa3rt's split count for a split_kv launch with num_splits 0
    (fa3rt_num_splits_heuristic: FlashAttention's)."""
    w = "fa3.runtime.num_splits_heuristic"
    return lib().fa3rt_num_splits_heuristic(check_int(w, "tiles", tiles, *INT64),
                                            check_int(w, "kv_blocks", kv_blocks, *INT64),
                                            check_int(w, "num_sms", num_sms, -2**31, 2**31 - 1))


def plan_bwd(facts: Facts, args: BwdArgs) -> BwdLaunch:
    """Validates backward args against facts without a GPU; raises
    Fa3RuntimeError."""
    L = BwdLaunch()
    _check(lib().fa3rt_bwd_plan(ctypes.byref(facts), ctypes.byref(args), ctypes.byref(L)))
    return L


class Kernel:
    """A kernel loaded into the calling thread's current CUDA context."""

    _h = None     # class defaults: close() works on an object whose __init__ failed
    _lib = None

    def __init__(self, cubin_path, facts_path):
        where = "fa3.runtime.Kernel"
        self.cubin_path, self.facts_path = str(cubin_path), str(facts_path)
        cubin = check_str(where, "cubin_path", self.cubin_path)
        facts = check_str(where, "facts_path", self.facts_path)
        L = lib()
        h = ctypes.c_void_p()
        _check(L.fa3rt_kernel_load(cubin, facts, ctypes.byref(h)), L)
        self._lib, self._h = L, h.value

    @property
    def facts(self) -> Facts:
        if not self._h:
            raise ValueError("fa3.runtime.Kernel: the kernel is closed")
        return self._lib.fa3rt_kernel_facts(self._h).contents

    def plan(self, args: FwdArgs) -> FwdLaunch:
        """fa3rt_fwd_plan against this kernel's facts, by the library that
        loaded it (no GPU work): a split_kv launch's resolved num_splits and
        workspace bytes. With args.num_sms 0 the heuristic assumes
        DEFAULT_SMS SMs (fa3rt_fwd: the device's): pass the device's count
        for the split count fwd will launch."""
        if not self._h:
            raise ValueError("fa3.runtime.Kernel: the kernel is closed")
        L = FwdLaunch()
        _check(self._lib.fa3rt_fwd_plan(self._lib.fa3rt_kernel_facts(self._h),
                                        ctypes.byref(args), ctypes.byref(L)), self._lib)
        return L

    def fwd(self, args: FwdArgs, stream: int = 0):
        """Launches asynchronously on stream (a CUstream handle as int)."""
        if not self._h:
            raise ValueError("fa3.runtime.Kernel: the kernel is closed")
        stream = check_int("fa3.runtime.Kernel.fwd", "stream", stream or 0, *UINT64)
        _check(self._lib.fa3rt_fwd(self._h, ctypes.byref(args), stream or None), self._lib)

    def bwd(self, args: BwdArgs, stream: int = 0):
        """The backward's launch (fa3rt_bwd: <kernel>_pre, the kernel,
        <kernel>_post), asynchronously on stream (a CUstream handle as int)."""
        if not self._h:
            raise ValueError("fa3.runtime.Kernel: the kernel is closed")
        stream = check_int("fa3.runtime.Kernel.bwd", "stream", stream or 0, *UINT64)
        _check(self._lib.fa3rt_bwd(self._h, ctypes.byref(args), stream or None), self._lib)

    def quantize(self, args: QuantizeArgs, stream: int = 0):
        """An FP8 kernel's <kernel>_quantize (fa3rt_quantize: x to e4m3 with
        its descales, optionally Hadamard-rotated), asynchronously on stream."""
        if not self._h:
            raise ValueError("fa3.runtime.Kernel: the kernel is closed")
        stream = check_int("fa3.runtime.Kernel.quantize", "stream", stream or 0, *UINT64)
        _check(self._lib.fa3rt_quantize(self._h, ctypes.byref(args), stream or None), self._lib)

    def close(self):
        # no module globals here: __del__ may run while the interpreter tears
        # them down
        h, L = self._h, self._lib
        self._h = None
        if h and L is not None:
            L.fa3rt_kernel_destroy(h)

    def __del__(self, _finalizing=sys.is_finalizing):
        # At interpreter exit the CUDA context may already be gone: leave the
        # kernel to the process's end. The function is bound at definition, as
        # the module's globals (sys) may be None by then.
        if _finalizing():
            return
        try:
            self.close()
        except Exception:
            pass
