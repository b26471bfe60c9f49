"""The torch.library custom ops behind ``fa3.torch_api.flash_attn_func`` and
``flash_attn_varlen_func`` under torch.compile.

    torch.ops.fa3.flash_attn_fwd(q, k, v, softmax_scale, causal, window_size, softcap,
                                 kernel_dir, kernel_facts, jit,
                                 deterministic=False) -> (out, lse)

q [B, Sq, Hq, D], k [B, Skv, Hkv, D], v [B, Skv, Hkv, Dv] (BSHD, bf16 or f16,
CUDA); out [B, Sq, Hq, Dv] (q's dtype, contiguous), lse [B, Hq, Sq] float32
(natural log). The non-tensor arguments are those of flash_attn_func, in types
a schema holds: softmax_scale float or None, window_size int[2], kernel_dir a
path string or None, kernel_facts the .facts path of an explicit kernel or
None, jit bool or None; deterministic (flash_attn_func's) does not change the
forward and is kept for its backward. Its fake implementation gives those
shapes and dtypes, so that Dynamo traces a model calling flash_attn_func
without a graph break and Inductor calls the op (and through it the eager
path) at run time.

    torch.ops.fa3.flash_attn_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                        max_seqlen_q, softmax_scale, causal, window_size,
                                        softcap, kernel_dir, kernel_facts, jit,
                                        page_table=None) -> (out, lse)

is flash_attn_varlen_func's: packed q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk,
Hkv, Dv], int32 cu_seqlens [B + 1] and seqused_k [B] or None; out [Tq, Hq,
Dv], lse [Hq, Tq] float32. Its last argument, page_table=None, is
flash_attn_with_kvcache's over a paged cache with packed queries: an int32
[B, max_pages] table, k and v the page pools [num_pages, page_size, Hkv,
D], run by the paged varlen kernel (facts paged_kv 1).

    torch.ops.fa3.flash_attn_bwd(dout, q, k, v, out, lse, softmax_scale, causal,
                                 window_size, softcap, kernel_dir, kernel_facts,
                                 jit, deterministic=False) -> (dq, dk, dv)

is flash_attn_backward's (the backward kernel, the deterministic one with
deterministic; kernel_facts: an explicit backward kernel's .facts path or
None): dq, dk, dv of q's, k's and v's shapes and dtype, contiguous.

    torch.ops.fa3.flash_attn_decode_fwd(q, k, v, seqused_k, page_table, softmax_scale,
                                        causal, window_size, softcap, num_splits,
                                        sm_margin, kernel_dir, kernel_facts, jit,
                                        ctas_per_sm=0, leftpad_k=None, q_descale=None,
                                        k_descale=None, v_descale=None) -> (out, lse)

is the decoding kernel's (flash_attn_with_kvcache, and flash_attn_func with
num_splits != 1 or pack_gqa): flash_attn_fwd's tensors, seqused_k None or
int32 [B] (flash_attn_with_kvcache's cache_seqlens: each batch's valid keys
of the cache), page_table None or int32 [B, max_pages] (a paged cache: k and
v are then the page pools [num_pages, page_size, Hkv, D]), num_splits 0 (the
heuristic) to 128, sm_margin the SMs the heuristic leaves free,
ctas_per_sm 0 (as many CTAs a SM as fit) or 1 (one), leftpad_k None or
int32 [B] (cache_leftpad); with e4m3 q, k and v (an FP8 KV cache: the FP8
decoding kernel) the descales None, 0-d or [B, Hkv] each and out bf16;
the split workspaces are allocated inside. No autograd (its callers refuse
inputs that require grad).

    torch.ops.fa3.flash_attn_decode_append_fwd(q, k_cache(a!), v_cache(b!), k_new,
                                               v_new, seqused_k, page_table,
                                               softmax_scale, causal, window_size,
                                               softcap, num_splits, sm_margin,
                                               kernel_dir, kernel_facts, jit,
                                               ctas_per_sm=0, leftpad_k=None,
                                               q_descale=None, k_descale=None,
                                               v_descale=None) -> (out, lse)

is the same with new keys and values appended (flash_attn_with_kvcache's k
and v): k_new [B, Snew, Hkv, D] and v_new [B, Snew, Hkv, Dv] are written
into k_cache and v_cache (or their page pools, through page_table) at rows
seqused_k[b] .. + Snew - 1 before the attention, which then covers
seqused_k[b] + Snew keys; seqused_k (int32 [B]) is required and not
modified. The schema declares k_cache and v_cache mutated (Tensor(a!),
Tensor(b!)), so that torch.compile functionalizes the call and orders
every later read of the caches after it (the writes visible to the
caller, as in eager code); its fake implementation returns new out and
lse only. A separate op from flash_attn_decode_fwd, so that calls that
append nothing (and flash_attn_func's split calls) are not taken to write
their k and v.

    torch.ops.fa3.flash_attn_fp8_fwd(q, k, v, q_descale, k_descale, v_descale,
                                     softmax_scale, causal, window_size, softcap,
                                     kernel_dir, kernel_facts, jit) -> (out, lse)

is flash_attn_func's on FP8 inputs: q, k, v torch.float8_e4m3fn (BSHD),
the float32 descales None or in the forms flash_attn_func takes (0-d; [B,
Hkv] or [B, Hq]; [B, H, ceil(S / 128)] for q and k); out [B, Sq, Hq, Dv]
bfloat16, lse [B, Hq, Sq] float32. No autograd (the FP8 kernels are
forward-only: flash_attn_func refuses inputs that require grad). A separate
op from flash_attn_fwd, whose schema and autograd stay those of the bf16 /
f16 kernels.

    torch.ops.fa3.quantize_fp8(x, block, seed, kernel_dir, jit) -> (x8, descale)

is fa3.quantize_fp8's generated kernel (the FP8 kernel's <kernel>_quantize):
x [B, S, H, D] bf16 or f16 (CUDA, sm_90), block 128 (descale [B, H, ceil(S /
128)]) or 0 (one a head, [B, H]), seed -1 (no rotation) or the Hadamard
rotation's seed; x8 torch.float8_e4m3fn [B, S, H, D] (contiguous), descale
float32. No autograd (quantization has no gradient).

Autograd: flash_attn_fwd's backward (torch.library.register_autograd) is
flash_attn_bwd, so that flash_attn_func differentiates in eager code (where
grad is needed it calls the op) and under torch.compile (AOTAutograd traces
the backward into the op). It saves q, k, v, out and lse; the backward
kernel (the deterministic one where the forward's deterministic is true) is
looked up like the forward's, in kernel_dir, else the directory of an
explicit forward kernel (kernel_facts), else the JIT cache; lse is not
differentiable. flash_attn_func refuses, before the op, what the backward
kernel cannot do (torch_api._check_backward). The varlen op has no
autograd (flash_attn_varlen_func refuses inputs that require grad).

Importing this module imports torch and registers the ops (once per process).
flash_attn_func imports it on its compiled path and where grad is needed;
under Dynamo the import runs when the call is traced, outside the graph.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Optional

import torch

from . import facts as _facts

OP_NAME = "fa3::flash_attn_fwd"

_facts_by_path: Dict[str, _facts.KernelFacts] = {}
_facts_lock = threading.Lock()


def _kernel_from_facts(path: Optional[str]) -> Optional[_facts.KernelFacts]:
    """The kernel whose .facts file is `path` (read once per process)."""
    if path is None:
        return None
    kf = _facts_by_path.get(path)
    if kf is None:
        kf = _facts.load_facts(path)
        with _facts_lock:
            _facts_by_path[path] = kf
    return kf


# deterministic: the backward's (its autograd keeps it); the dispatcher
# leaves out arguments equal to their defaults, hence the Python defaults
SCHEMA = ("flash_attn_fwd(Tensor q, Tensor k, Tensor v, float? softmax_scale, bool causal, "
          "int[] window_size, float softcap, str? kernel_dir, str? kernel_facts, bool? jit, "
          "bool deterministic=False) -> (Tensor out, Tensor lse)")


def flash_attn_fwd(q, k, v, softmax_scale, causal, window_size, softcap, kernel_dir,
                   kernel_facts, jit, deterministic=False):
    """The CUDA implementation: flash_attn_func's eager path, lse computed
    (deterministic: the backward's only)."""
    from . import torch_api
    # (window_size a tuple: the schema's int[] is a list, which no plan keys)
    return torch_api._eager_fwd(torch, q, k, v, softmax_scale, causal, tuple(window_size),
                                softcap, True, kernel_dir, _kernel_from_facts(kernel_facts),
                                None, None, jit)


def _flash_attn_fwd_fake(q, k, v, softmax_scale, causal, window_size, softcap, kernel_dir,
                         kernel_facts, jit, deterministic=False):
    B, Sq, Hq, _ = q.shape
    Dv = v.shape[3]
    return (q.new_empty((B, Sq, Hq, Dv)),
            q.new_empty((B, Hq, Sq), dtype=torch.float32))


BWD_OP_NAME = "fa3::flash_attn_bwd"
BWD_SCHEMA = ("flash_attn_bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, "
              "Tensor lse, float? softmax_scale, bool causal, int[] window_size, "
              "float softcap, str? kernel_dir, str? kernel_facts, bool? jit, "
              "bool deterministic=False) -> (Tensor dq, Tensor dk, Tensor dv)")


def flash_attn_bwd(dout, q, k, v, out, lse, softmax_scale, causal, window_size, softcap,
                   kernel_dir, kernel_facts, jit, deterministic=False):
    """The CUDA implementation: flash_attn_backward's eager path."""
    from . import torch_api
    return torch_api._eager_bwd(torch, dout, q, k, v, out, lse, softmax_scale, causal,
                                window_size, softcap, kernel_dir,
                                _kernel_from_facts(kernel_facts), jit,
                                deterministic=deterministic)


def _flash_attn_bwd_fake(dout, q, k, v, out, lse, softmax_scale, causal, window_size, softcap,
                         kernel_dir, kernel_facts, jit, deterministic=False):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _fwd_setup_context(ctx, inputs, output):
    # (register_autograd fills in the arguments left at their defaults)
    (q, k, v, softmax_scale, causal, window_size, softcap, kernel_dir, kernel_facts, jit,
     deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.mark_non_differentiable(lse)
    if kernel_facts is not None:
        # an explicit forward kernel: its backward from the same directory,
        # with the scale this forward used
        if softmax_scale is None:
            softmax_scale = _kernel_from_facts(kernel_facts).scale
        if kernel_dir is None:
            kernel_dir = os.path.dirname(kernel_facts)
    ctx.fa3_args = (softmax_scale, causal, list(window_size), softcap, kernel_dir, jit,
                    deterministic)


def _fwd_backward(ctx, dout, dlse):
    # dlse: lse is not differentiable (FlashAttention ignores its gradient too)
    q, k, v, out, lse = ctx.saved_tensors
    softmax_scale, causal, window_size, softcap, kernel_dir, jit, deterministic = ctx.fa3_args
    dq, dk, dv = torch.ops.fa3.flash_attn_bwd.default(
        dout, q, k, v, out, lse, softmax_scale, causal, window_size, softcap, kernel_dir,
        None, jit, deterministic)
    # one gradient per positional input of the op: 11
    return dq, dk, dv, None, None, None, None, None, None, None, None


VARLEN_OP_NAME = "fa3::flash_attn_varlen_fwd"
VARLEN_SCHEMA = ("flash_attn_varlen_fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
                 "Tensor cu_seqlens_k, Tensor? seqused_k, int max_seqlen_q, "
                 "float? softmax_scale, bool causal, int[] window_size, float softcap, "
                 "str? kernel_dir, str? kernel_facts, bool? jit, Tensor? page_table=None) "
                 "-> (Tensor out, Tensor lse)")


def flash_attn_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                          softmax_scale, causal, window_size, softcap, kernel_dir,
                          kernel_facts, jit, page_table=None):
    """The CUDA implementation: flash_attn_varlen_func's eager path, lse
    computed; with page_table (flash_attn_with_kvcache's packed queries
    over a paged cache) k and v are the page pools, the table checked
    again (its rows are the batch's)."""
    from . import torch_api
    if page_table is not None:
        page_table, _ = torch_api._check_page_table(torch, "flash_attn_with_kvcache",
                                                    page_table, q.device,
                                                    cu_seqlens_q.numel() - 1)
    return torch_api._eager_varlen(torch, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                   max_seqlen_q, softmax_scale, causal, window_size, softcap,
                                   True, kernel_dir, _kernel_from_facts(kernel_facts), jit,
                                   None, None, page_table=page_table)


def _flash_attn_varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                                softmax_scale, causal, window_size, softcap, kernel_dir,
                                kernel_facts, jit, page_table=None):
    Tq, Hq, _ = q.shape
    Dv = v.shape[-1]
    return (q.new_empty((Tq, Hq, Dv)), q.new_empty((Hq, Tq), dtype=torch.float32))


DECODE_OP_NAME = "fa3::flash_attn_decode_fwd"
DECODE_SCHEMA = ("flash_attn_decode_fwd(Tensor q, Tensor k, Tensor v, Tensor? seqused_k, "
                 "Tensor? page_table, float? softmax_scale, bool causal, int[] window_size, "
                 "float softcap, int num_splits, int sm_margin, str? kernel_dir, "
                 "str? kernel_facts, bool? jit, int ctas_per_sm=0, Tensor? leftpad_k=None, "
                 "Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None) "
                 "-> (Tensor out, Tensor lse)")


def _fp8_fields(fn, q, k, q_descale, k_descale, v_descale):
    """The decoding ops' FP8 descales (an e4m3 q: the FP8 decoding kernel)
    as _eager_decode's fp8_fields, else None (descales with 16-bit inputs
    refused by name)."""
    from . import torch_api
    if q.dtype != torch.float8_e4m3fn:
        torch_api._refuse_decode_descales(fn, q.dtype, (q_descale, k_descale, v_descale))
        return None
    return torch_api._fp8_decode_descales(torch, fn, q_descale, k_descale, v_descale, q.device,
                                          q.shape[0], k.shape[2])


def flash_attn_decode_fwd(q, k, v, seqused_k, page_table, softmax_scale, causal, window_size,
                          softcap, num_splits, sm_margin, kernel_dir, kernel_facts, jit,
                          ctas_per_sm=0, leftpad_k=None, q_descale=None, k_descale=None,
                          v_descale=None):
    """The CUDA implementation: the decoding kernel's eager path, lse
    computed (the FP8 decoding kernel's where q is e4m3)."""
    from . import torch_api
    fn = "flash_attn_decode_fwd"
    if seqused_k is not None:
        # the logical Skv: the cache's rows, or a paged cache's max_pages * page_size
        skv = k.shape[1] if page_table is None else page_table.shape[-1] * k.shape[1]
        seqused_k = torch_api._check_cache_seqlens(torch, fn, seqused_k, q.device, q.shape[0],
                                                   skv)
    if leftpad_k is not None:
        leftpad_k = torch_api._check_leftpad(torch, fn, leftpad_k, q.device, q.shape[0],
                                             page_table)
    return torch_api._eager_decode(torch, q, k, v, seqused_k, softmax_scale, causal,
                                   window_size, softcap, torch_api._num_splits(fn, num_splits),
                                   sm_margin, True, kernel_dir,
                                   _kernel_from_facts(kernel_facts), jit, page_table=page_table,
                                   ctas_per_sm=torch_api._ctas_per_sm(fn, ctas_per_sm),
                                   leftpad=leftpad_k,
                                   fp8_fields=_fp8_fields(fn, q, k, q_descale, k_descale,
                                                          v_descale))


def _decode_fake(q, v):
    """A decoding op's outputs: o of q's dtype (bf16 for e4m3 q), lse f32
    (the workspaces are the implementation's own)."""
    B, Sq, Hq, _ = q.shape
    dt = torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype
    return (q.new_empty((B, Sq, Hq, v.shape[3]), dtype=dt),
            q.new_empty((B, Hq, Sq), dtype=torch.float32))


def _flash_attn_decode_fwd_fake(q, k, v, seqused_k, page_table, softmax_scale, causal,
                                window_size, softcap, num_splits, sm_margin, kernel_dir,
                                kernel_facts, jit, ctas_per_sm=0, leftpad_k=None,
                                q_descale=None, k_descale=None, v_descale=None):
    return _decode_fake(q, v)


APPEND_OP_NAME = "fa3::flash_attn_decode_append_fwd"
APPEND_SCHEMA = ("flash_attn_decode_append_fwd(Tensor q, Tensor(a!) k_cache, "
                 "Tensor(b!) v_cache, Tensor k_new, Tensor v_new, Tensor seqused_k, "
                 "Tensor? page_table, float? softmax_scale, bool causal, int[] window_size, "
                 "float softcap, int num_splits, int sm_margin, str? kernel_dir, "
                 "str? kernel_facts, bool? jit, int ctas_per_sm=0, Tensor? leftpad_k=None, "
                 "Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None) "
                 "-> (Tensor out, Tensor lse)")


def flash_attn_decode_append_fwd(q, k_cache, v_cache, k_new, v_new, seqused_k, page_table,
                                 softmax_scale, causal, window_size, softcap, num_splits,
                                 sm_margin, kernel_dir, kernel_facts, jit, ctas_per_sm=0,
                                 leftpad_k=None, q_descale=None, k_descale=None,
                                 v_descale=None):
    """The CUDA implementation: the decoding kernel's eager path with the
    append (k_cache and v_cache written in place), lse computed."""
    from . import torch_api
    fn = "flash_attn_decode_append_fwd"
    if page_table is None:
        dims = torch_api._check_shapes(q.shape, k_cache.shape, v_cache.shape)
    else:
        dims = torch_api._check_paged_shapes(fn, q.shape, k_cache.shape, v_cache.shape,
                                             page_table.shape)
    snew = torch_api._check_append(torch, fn, q, k_cache, v_cache, k_new, v_new, dims)
    seqused_k = torch_api._check_cache_seqlens(torch, fn, seqused_k, q.device, q.shape[0],
                                               dims[4], snew)
    if leftpad_k is not None:
        leftpad_k = torch_api._check_leftpad(torch, fn, leftpad_k, q.device, q.shape[0],
                                             page_table)
    return torch_api._eager_decode(torch, q, k_cache, v_cache, seqused_k, softmax_scale, causal,
                                   window_size, softcap, torch_api._num_splits(fn, num_splits),
                                   sm_margin, True, kernel_dir,
                                   _kernel_from_facts(kernel_facts), jit, page_table=page_table,
                                   k_new=k_new, v_new=v_new,
                                   ctas_per_sm=torch_api._ctas_per_sm(fn, ctas_per_sm),
                                   leftpad=leftpad_k,
                                   fp8_fields=_fp8_fields(fn, q, k_cache, q_descale, k_descale,
                                                          v_descale))


def _flash_attn_decode_append_fwd_fake(q, k_cache, v_cache, k_new, v_new, seqused_k,
                                       page_table, softmax_scale, causal, window_size, softcap,
                                       num_splits, sm_margin, kernel_dir, kernel_facts, jit,
                                       ctas_per_sm=0, leftpad_k=None, q_descale=None,
                                       k_descale=None, v_descale=None):
    # the outputs alone (the caches are written in place, as the schema says)
    return _decode_fake(q, v_cache)


FP8_OP_NAME = "fa3::flash_attn_fp8_fwd"
FP8_SCHEMA = ("flash_attn_fp8_fwd(Tensor q, Tensor k, Tensor v, Tensor? q_descale, "
              "Tensor? k_descale, Tensor? v_descale, float? softmax_scale, bool causal, "
              "int[] window_size, float softcap, str? kernel_dir, str? kernel_facts, bool? jit) "
              "-> (Tensor out, Tensor lse)")


def flash_attn_fp8_fwd(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                       window_size, softcap, kernel_dir, kernel_facts, jit):
    """The CUDA implementation: flash_attn_func's FP8 eager path, lse
    computed."""
    from . import torch_api
    return torch_api._eager_fp8(torch, q, k, v, q_descale, k_descale, v_descale, softmax_scale,
                                causal, tuple(window_size), softcap, True, kernel_dir,
                                _kernel_from_facts(kernel_facts), None, None, jit)


def _flash_attn_fp8_fwd_fake(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                             window_size, softcap, kernel_dir, kernel_facts, jit):
    B, Sq, Hq, _ = q.shape
    Dv = v.shape[3]
    return (q.new_empty((B, Sq, Hq, Dv), dtype=torch.bfloat16),
            q.new_empty((B, Hq, Sq), dtype=torch.float32))


QUANTIZE_OP_NAME = "fa3::quantize_fp8"
QUANTIZE_SCHEMA = ("quantize_fp8(Tensor x, int block, int seed, str? kernel_dir, bool? jit) "
                   "-> (Tensor x8, Tensor descale)")


def quantize_fp8(x, block, seed, kernel_dir, jit):
    """The CUDA implementation: fa3.quantize's kernel path."""
    from . import quantize as fq
    return fq._quantize_kernel(torch, torch.float8_e4m3fn, x, block or None,
                               None if seed < 0 else seed, kernel_dir, jit)


def _quantize_fp8_fake(x, block, seed, kernel_dir, jit):
    B, S, H, D = x.shape
    d = (B, H, -(-S // block)) if block else (B, H)
    return (x.new_empty((B, S, H, D), dtype=torch.float8_e4m3fn),
            x.new_empty(d, dtype=torch.float32))


# torch.library.Library + impl rather than torch.library.custom_op: the
# latter's Python autograd layer costs ~50 us a call (H200, torch 2.11),
# more than the launch itself
_lib = torch.library.Library("fa3", "DEF")
_lib.define(SCHEMA)
_lib.impl("flash_attn_fwd", flash_attn_fwd, "CUDA")
torch.library.register_fake(OP_NAME, _flash_attn_fwd_fake, lib=_lib)
_lib.define(BWD_SCHEMA)
_lib.impl("flash_attn_bwd", flash_attn_bwd, "CUDA")
torch.library.register_fake(BWD_OP_NAME, _flash_attn_bwd_fake, lib=_lib)
torch.library.register_autograd(OP_NAME, _fwd_backward, setup_context=_fwd_setup_context,
                                lib=_lib)
_lib.define(VARLEN_SCHEMA)
_lib.impl("flash_attn_varlen_fwd", flash_attn_varlen_fwd, "CUDA")
torch.library.register_fake(VARLEN_OP_NAME, _flash_attn_varlen_fwd_fake, lib=_lib)
_lib.define(DECODE_SCHEMA)
_lib.impl("flash_attn_decode_fwd", flash_attn_decode_fwd, "CUDA")
torch.library.register_fake(DECODE_OP_NAME, _flash_attn_decode_fwd_fake, lib=_lib)
_lib.define(APPEND_SCHEMA)
_lib.impl("flash_attn_decode_append_fwd", flash_attn_decode_append_fwd, "CUDA")
torch.library.register_fake(APPEND_OP_NAME, _flash_attn_decode_append_fwd_fake, lib=_lib)
_lib.define(FP8_SCHEMA)
_lib.impl("flash_attn_fp8_fwd", flash_attn_fp8_fwd, "CUDA")
torch.library.register_fake(FP8_OP_NAME, _flash_attn_fp8_fwd_fake, lib=_lib)
_lib.define(QUANTIZE_SCHEMA)
_lib.impl("quantize_fp8", quantize_fp8, "CUDA")
torch.library.register_fake(QUANTIZE_OP_NAME, _quantize_fp8_fake, lib=_lib)
