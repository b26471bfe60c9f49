"""Compile attention variants to Hopper kernels from Python (the C API's
one-call compile, fa3-c/Compile.h, through ctypes).

    from fa3.compile import compile_kernel
    files = compile_kernel("kernels", head_dim=128, causal=True)
    # kernels/fa3_fwd_d128_bf16_causal_kernel.{ptx,cubin,facts}, ready for
    # fa3.torch_api.flash_attn_func(..., kernel_dir="kernels")

Needs libFA3CAPI.so (this build, or the installed package; a runtime-only
install has none and raises fa3._capi.LibraryNotFoundError, an OSError, naming
it) and ptxas for the cubin (CUDA toolkit, found through $CUDA_HOME or
/usr/local/cuda; emit_cubin=False writes PTX and facts only); no GPU.
"""
import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from . import _capi
from ._capi import INT64, check_f32, check_int, check_str
from .ir import Context, Fa3Error


class _Spec(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("headDim", ctypes.c_int64), ("causal", ctypes.c_bool),
                ("windowLeft", ctypes.c_int64), ("windowRight", ctypes.c_int64),
                ("softcap", ctypes.c_float), ("hasScale", ctypes.c_bool),
                ("scale", ctypes.c_float), ("headDimV", ctypes.c_int64),
                ("varlen", ctypes.c_bool), ("backward", ctypes.c_bool),
                ("decode", ctypes.c_bool), ("deterministic", ctypes.c_bool),
                ("pagedKv", ctypes.c_bool)]


class _Options(ctypes.Structure):
    _fields_ = [("blockN", ctypes.c_int64), ("stages", ctypes.c_int64),
                ("pingpong", ctypes.c_bool), ("persistent", ctypes.c_int),
                ("tmaStore", ctypes.c_bool),
                ("chip", ctypes.c_char_p), ("features", ctypes.c_char_p),
                ("toolkit", ctypes.c_char_p), ("emitCubin", ctypes.c_bool),
                ("qBuffers", ctypes.c_int64), ("lazyRescale", ctypes.c_int),
                ("rescaleThreshold", ctypes.c_double), ("kvMulticast", ctypes.c_int),
                ("blockM", ctypes.c_int64), ("ptxasTimeoutSeconds", ctypes.c_int64),
                ("minSeqlenQ", ctypes.c_int64), ("transposeWarps", ctypes.c_int64)]


class _Binary(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("ptx", ctypes.c_void_p),
                ("ptxSize", ctypes.c_size_t), ("cubin", ctypes.c_void_p),
                ("cubinSize", ctypes.c_size_t), ("facts", ctypes.c_char_p)]


def _declare(lib):
    if getattr(lib, "_fa3_compile_declared", False):
        return lib
    lib.fa3CompileHopperSpec.restype = ctypes.c_void_p
    lib.fa3CompileHopperSpec.argtypes = [_capi.MlirContext, ctypes.POINTER(_Spec),
                                         ctypes.POINTER(_Options)]
    lib.fa3KernelSetSize.restype = ctypes.c_size_t
    lib.fa3KernelSetSize.argtypes = [ctypes.c_void_p]
    lib.fa3KernelSetGet.restype = _Binary
    lib.fa3KernelSetGet.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.fa3FindPtxas.restype = ctypes.c_size_t
    lib.fa3FindPtxas.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.fa3KernelSetDestroy.restype = None
    lib.fa3KernelSetDestroy.argtypes = [ctypes.c_void_p]
    lib.fa3AttentionSpecName.restype = ctypes.c_size_t
    lib.fa3AttentionSpecName.argtypes = [ctypes.POINTER(_Spec), ctypes.c_char_p, ctypes.c_size_t]
    lib._fa3_compile_declared = True
    return lib


@dataclass
class KernelFiles:
    name: str
    ptx: Path
    cubin: Optional[Path]   # None with emit_cubin=False
    facts: Path


_AUTO_ON_OFF = {"auto": 0, "on": 1, "off": -1}


def find_ptxas(toolkit: Optional[str] = None) -> Optional[str]:
    """The ptxas a cubin would be assembled with (the compiler's own lookup:
    `toolkit`, else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, PATH), or None."""
    toolkit = check_str("find_ptxas", "toolkit", toolkit or None)
    lib = _declare(_capi.lib())
    buf = ctypes.create_string_buffer(4096)
    n = lib.fa3FindPtxas(toolkit, buf, len(buf))
    return buf.value.decode() if n else None


def _spec(w, name, head_dim, dtype, causal, window, softcap, scale, head_dim_v, varlen,
          backward, decode=False, deterministic=False, paged=False) -> _Spec:
    """The C API's Fa3AttentionSpec; only what ctypes would wrap, round or
    cut is checked here (the compiler diagnoses the rest)."""
    if len(window) != 2:
        raise ValueError(f"{w}: window must be (left, right), got {window!r}")

    def i64(n, value):
        return check_int(w, n, value, *INT64)
    # name None: the C API derives it from the variant, as fa3-compile does
    return _Spec(check_str(w, "name", name or None), check_str(w, "dtype", dtype),
                 i64("head_dim", head_dim), causal, i64("window[0]", window[0]),
                 i64("window[1]", window[1]), check_f32(w, "softcap", softcap),
                 scale is not None, 0.0 if scale is None else check_f32(w, "scale", scale),
                 0 if head_dim_v is None else i64("head_dim_v", head_dim_v), bool(varlen),
                 bool(backward), bool(decode), bool(deterministic), bool(paged))


def kernel_name(head_dim: int = 128, dtype: str = "bf16", causal: bool = False,
                window: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                head_dim_v: Optional[int] = None, varlen: bool = False,
                backward: bool = False, decode: bool = False,
                deterministic: bool = False, paged: bool = False) -> str:
    """The kernel base name the compiler derives for a variant
    (fa3AttentionSpecName: fa3_<fwd|bwd>_d<D>[v<Dv>]_<dtype>[_causal]...
    [_varlen][_paged][_decode][_det]; the kernel function in the cubin is
    this name + "_kernel")."""
    spec = _spec("kernel_name", None, head_dim, dtype, causal, window, softcap, None,
                 head_dim_v, varlen, backward, decode, deterministic, paged)
    lib = _declare(_capi.lib())
    n = lib.fa3AttentionSpecName(ctypes.byref(spec), None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.fa3AttentionSpecName(ctypes.byref(spec), buf, len(buf))
    return buf.value.decode()


def compile_kernel(out_dir, head_dim: int = 128, dtype: str = "bf16",
                   causal: bool = False, window: Tuple[int, int] = (-1, -1),
                   softcap: float = 0.0, scale: Optional[float] = None,
                   name: Optional[str] = None, block_n: int = 0, stages: int = 0,
                   pingpong: bool = True, persistent: str = "auto",
                   tma_store: bool = True, q_buffers: int = 0,
                   lazy_rescale: str = "auto",
                   rescale_threshold: float = 8.0,
                   kv_multicast: str = "auto", block_m: int = 0,
                   min_seqlen_q: int = 0, transpose_warps: int = 0,
                   toolkit: Optional[str] = None,
                   ptxas_timeout: int = 0, emit_cubin: bool = True,
                   head_dim_v: Optional[int] = None,
                   varlen: bool = False, backward: bool = False,
                   decode: bool = False, deterministic: bool = False,
                   paged: bool = False) -> List[KernelFiles]:
    """Compiles one variant and writes <kernel>.ptx/.cubin/.facts to out_dir.
    `head_dim` is that of q and k, `head_dim_v` that of v and o (None: the
    same). `varlen`: the kernel of a packed variable-length batch
    (flash_attn_varlen_func; no clusters). `backward`: the variant's
    backward kernel (dQ, dK, dV; facts `backward 1`, named fa3_bwd_...;
    head dim 64, 96, 128, 192 or 256, Dv = D, any mask (sliding windows too) and softcap,
    no varlen).
    `deterministic` (with `backward`): the backward kernel whose dq is the
    same bit for bit from run to run (FlashAttention's deterministic=True;
    facts `deterministic 1`, named ..._det; needs tma_store).
    `decode`: the variant's decoding kernel (flash_attn_with_kvcache:
    split-KV with its <kernel>_combine and GQA packing, facts `split_kv 1`
    and `pack_gqa 1`, named ..._decode; no varlen or backward).
    `paged` (with `varlen`): the packed batch's kernel that also takes a
    page table (flash_attn_with_kvcache with cu_seqlens_q and page_table;
    facts `paged_kv 1`, named ..._varlen_paged; one CTA per tile).
    `min_seqlen_q`: configure the forward for calls with at least that many
    query rows (the table's long-sequence entries; facts min_seqlen_q).
    With it and block_m at 0, a variant the table configures differently
    for long sequences gets that kernel too, <name>_long_kernel (the list
    holds both; fa3.torch_api picks by Sq).
    `transpose_warps` (FP8): the producer warps that transpose V, 3 or 4
    (warp 0 too; persistent kernels, and decoding kernels, whose four warps
    also copy small pages; docs/design.md, FP8); 0: the table's, 4 at head
    dim 256 and for decoding, 3 elsewhere.
    `toolkit` holds the bin/ptxas to assemble with (None: $CUDA_HOME,
    $CUDA_PATH, /usr/local/cuda, PATH); ptxas is stopped after
    `ptxas_timeout` seconds (0: 600). emit_cubin=False: PTX and facts only
    (no ptxas needed; KernelFiles.cubin is None). Raises Fa3Error with the
    compiler's diagnostics when the variant is not supported, and
    fa3._capi.LibraryNotFoundError (an OSError) when there is no
    libFA3CAPI.so."""
    if persistent not in _AUTO_ON_OFF:
        raise ValueError("persistent must be auto, on or off, got %r" % (persistent,))
    if lazy_rescale not in _AUTO_ON_OFF:
        raise ValueError("lazy_rescale must be auto, on or off, got %r" % (lazy_rescale,))
    if kv_multicast not in _AUTO_ON_OFF:
        raise ValueError("kv_multicast must be auto, on or off, got %r" % (kv_multicast,))
    # Only what ctypes would wrap, round or cut is checked here; the compiler
    # diagnoses the rest (supported head dims, window ranges, ...).
    w = "compile_kernel"

    def i64(name, value):
        return check_int(w, name, value, *INT64)

    spec = _spec(w, name, head_dim, dtype, causal, window, softcap, scale, head_dim_v, varlen,
                 backward, decode, deterministic, paged)
    opts = _Options(i64("block_n", block_n), i64("stages", stages), pingpong,
                    _AUTO_ON_OFF[persistent], tma_store, b"sm_90a", b"+ptx81",
                    check_str(w, "toolkit", toolkit or None), bool(emit_cubin),
                    i64("q_buffers", q_buffers), _AUTO_ON_OFF[lazy_rescale],
                    float(rescale_threshold), _AUTO_ON_OFF[kv_multicast],
                    i64("block_m", block_m), i64("ptxas_timeout", ptxas_timeout),
                    i64("min_seqlen_q", min_seqlen_q),
                    i64("transpose_warps", transpose_warps))
    lib = _declare(_capi.lib())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with Context() as ctx:
        ctx._take_diagnostics()
        kset = lib.fa3CompileHopperSpec(ctx._ctx, ctypes.byref(spec), ctypes.byref(opts))
        if not kset:
            raise Fa3Error(ctx._take_diagnostics() or "compilation failed")
        try:
            files = []
            for i in range(lib.fa3KernelSetSize(kset)):
                b = lib.fa3KernelSetGet(kset, i)
                kname = b.name.decode()
                f = KernelFiles(kname, out / (kname + ".ptx"),
                                out / (kname + ".cubin") if emit_cubin else None,
                                out / (kname + ".facts"))
                f.ptx.write_bytes(ctypes.string_at(b.ptx, b.ptxSize))
                if f.cubin is not None:
                    f.cubin.write_bytes(ctypes.string_at(b.cubin, b.cubinSize))
                f.facts.write_bytes(b.facts)
                files.append(f)
            return files
        finally:
            lib.fa3KernelSetDestroy(kset)
