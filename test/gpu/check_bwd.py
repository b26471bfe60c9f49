#!/usr/bin/env python3
"""GPU correctness check of the backward kernels (dQ, dK, dV; fa3-compile
--backward, facts `backward 1`), run on an H100/H200.

    python3 test/gpu/check_bwd.py KERNEL_DIR [--fwd-kernel-dir DIR] [--out OUT_DIR]
    python3 test/gpu/check_bwd.py KERNEL_DIR --sanitize    # small cases, for
        `compute-sanitizer --tool memcheck|racecheck|synccheck python3 ...`
    python3 test/gpu/check_bwd.py KERNEL_DIR --emulate     # the Python side alone

For every backward kernel of KERNEL_DIR and every case (seqlens (Sq, Skv) =
(1, 1), (113, 203), (203, 113), (1023, 1024), (1024, 1024), (4224, 4224);
a kernel with a sliding window takes WINDOW_SEQLENS instead, where the
window's edges cut through blocks, rows see no key (Sq > Skv) and keys are
seen by no query (Sq << Skv); batch 2, 1 for the longest; heads MHA 4/4,
GQA 8/2, MQA 8/1; the kernel's dtype, mask (causal, window_left,
window_right: bottom-right aligned, query i sees key j iff i + Skv - Sq -
left <= j <= i + Skv - Sq + right, a side -1 unbounded) and softcap):
fresh random q, k, v, dout; the forward's o and lse from our forward
kernel of the same variant (same window and softcap; in
--fwd-kernel-dir, default KERNEL_DIR), or, where there is none, from
PyTorch's fp32 math (o rounded to the dtype, lse the natural-log
logsumexp of the scaled, softcapped, masked scores; the case records
which); then fa3.torch_api.flash_attn_backward (the runtime's
fa3rt_bwd: <kernel>_pre, the kernel, <kernel>_post) into dq, dk and dv
poisoned with NaN and a dq_accum poisoned with NaN (the runtime's _pre must
zero it).

Pass rule per case, FlashAttention's (its tests/test_flash_attn.py), for g in
dq, dk, dv:

    max |g - g_ref| <= 2 * max |g_pt - g_ref| + 1e-3

where g_ref is torch autograd of the explicit attention (scores x = scale
q k^T, softcap * tanh(x / softcap) where the kernel has a softcap, mask,
softmax, P V) on float32 copies of the inputs (TF32 off), and g_pt the same
computation done by PyTorch in the kernel's dtype (its bf16/f16 tensors and
kernels); plus no NaN left in dq, dk, dv (every element written, dq_accum
zeroed), and a repeated launch gives bit-identical dk and dv (dq is summed
with atomic adds in any order: its largest change is reported, not
required). Rows that see no key (causal or a window with Sq > Skv) have
o = 0 and lse = -inf from the forward; their dq must be exactly 0, and so
must dk and dv of keys that no query sees (the reference's).

Deterministic backward kernels (fa3-compile --backward --deterministic:
facts `deterministic 1`, names ..._det) take the cases of DET_CASES for
their dtype, head dim and mask instead (about ten in all; DET_MASK_CASES
for those with a window or softcap, or of a variant DET_CASES does not
list), each launched
DET_RUNS times on the same inputs into fresh poisoned dq, dk, dv and
dq_accum (whose turn counters _pre must zero: a counter left non-zero
hangs the kernel): the first within the rule above, and dq, dk and dv
bitwise the same in every run. For comparison, one plain kernel's dq over
DET_RUNS runs of NONDET_WATCH's inputs (its deterministic case's) is
recorded (whether it changed: information, never a failure). Their
autograd (flash_attn_func(..., deterministic=True)) and torch.compile runs
look the backward up in a directory that holds only the deterministic
kernel (a lookup that lost the flag finds nothing) and must give dq, dk
and dv bit-identical to the direct call's and to eager's.

Then per kernel: flash_attn_func under autograd (o.backward(dout), with the
kernel's window_size and softcap) against the same reference, with dk and
dv bit-identical to the direct call's; once per run for each of plain and
deterministic kernels, without and with a window or softcap,
torch.compile(fullgraph=True) of forward and backward against eager; and
the misuse refused with its message (head dim 80 or Dv != D with grad, a
kernel whose softcap or window differs from the call's, a forward kernel
given to fa3rt_bwd, dk and dv of different strides, a plain kernel given to
a deterministic call and the other way round, a deterministic call's
dq_accum of the plain size, empty problems giving zero gradients).

--emulate: no backward kernel needed. For each forward kernel of KERNEL_DIR
that the backward kernel would cover (head dim 64, 96, 128, 192 or 256, Dv = D, bf16 or
f16, any mask and softcap),
the backward launch (its three kernels) is replaced by PyTorch math on the
very arguments the runtime would pass (fa3rt_bwd_args: the C runtime's
fa3rt_bwd_plan checks them first, then the tensors are read and written
through their device pointers and strides): a check of the Python side
(o, dout, dq, lse and the workspaces passed, layouts, autograd,
torch.compile) apart from the kernels, for the plain and the deterministic
backward (the same math; the latter planned with its larger dq_accum).

With --out: appends the run to OUT/history.jsonl (kind check_bwd; a full run
also rewrites its table in OUT/RESULTS.md: bench/records.py). Exit status 1
on any failure.
"""
import argparse
import dataclasses
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from fa3.facts import normalize_window  # noqa: E402  (no torch needed)

ATOL = 1e-3           # FlashAttention's rule: err <= 2 * err_pt + ATOL
RULE = "max|g - g_ref| <= 2 * max|g_pt - g_ref| + 1e-3 for g in dq, dk, dv"

SEQLENS = [(1, 1), (113, 203), (203, 113), (1023, 1024), (1024, 1024), (4224, 4224)]
# a kernel with a sliding window: edges inside blocks, rows without keys
# (203, 113), keys without queries (113, 1100), many kv blocks (4224)
WINDOW_SEQLENS = [(113, 203), (203, 113), (1023, 1024), (113, 1100), (4224, 4224)]
HEADS = [(4, 4), (8, 2), (8, 1)]          # MHA, GQA, MQA
# small ones for compute-sanitizer (several kv blocks, rows without keys)
SANITIZE_CASES = [(1, 1, 1, 2, 2), (1, 113, 203, 4, 2), (1, 203, 113, 4, 1),
                  (1, 300, 260, 2, 2)]
# the deterministic kernels' cases, (dtype, head dim, causal, (B, Sq, Skv,
# Hq, Hkv)), each run DET_RUNS times: few, as each costs DET_RUNS launches
DET_RUNS = 5
DET_CASES = [
    ("bf16", 128, True, (2, 113, 203, 8, 2)), ("bf16", 128, True, (2, 1023, 1024, 4, 1)),
    ("bf16", 128, True, (1, 4224, 4224, 8, 2)),
    ("bf16", 128, False, (2, 113, 203, 4, 1)), ("bf16", 128, False, (2, 1023, 1024, 8, 2)),
    ("bf16", 64, True, (2, 113, 203, 4, 1)), ("bf16", 64, True, (2, 1023, 1024, 8, 2)),
    ("bf16", 64, False, (2, 113, 203, 8, 2)), ("bf16", 64, False, (2, 1023, 1024, 4, 1)),
    ("f16", 128, True, (2, 1023, 1024, 8, 2)),
    # Sq > Skv: causal's first m-blocks see no key (no turns on them)
    ("bf16", 128, True, (2, 203, 113, 8, 2)), ("bf16", 64, False, (2, 203, 113, 4, 1)),
]
# a deterministic kernel with a window or softcap (any dtype, head dim,
# mask), or of a variant DET_CASES does not list; (113, 1100): kv blocks
# that no query sees take no turn
DET_MASK_CASES = [(2, 203, 113, 8, 2), (2, 1023, 1024, 4, 1), (1, 4224, 4224, 8, 2),
                  (2, 113, 1100, 4, 4)]
# the plain kernel and inputs whose dq is watched over DET_RUNS runs (many kv
# blocks add into each dQ tile: the most room for another order)
NONDET_WATCH = ("bf16", 128, True, (1, 4224, 4224, 8, 2))


def has_window(kf):
    """Whether kf's mask is a sliding window (not full, not plain causal)."""
    left, right = normalize_window(kf.causal, kf.window_left, kf.window_right)
    return (left, right) not in ((-1, -1), (-1, 0))


def plain_mask(kf):
    """Full or causal, no softcap: what DET_CASES and NONDET_WATCH key on."""
    return not has_window(kf) and not kf.softcap


def cases(kf):
    """(B, Sq, Skv, Hq, Hkv) of a full run: every seqlen pair (WINDOW_SEQLENS
    for a kernel with a window) with every head configuration, batch 2 (1
    at the longest)."""
    return [(1 if sq > 4096 else 2, sq, skv, hq, hkv)
            for sq, skv in (WINDOW_SEQLENS if has_window(kf) else SEQLENS)
            for hq, hkv in HEADS]


def det_cases(kf):
    """A deterministic kernel's cases (DET_CASES; DET_MASK_CASES with a
    window or softcap, or for a variant DET_CASES does not list)."""
    if not plain_mask(kf):
        return list(DET_MASK_CASES)
    listed = [c for dt, d, causal, c in DET_CASES
              if (dt, d, causal) == (kf.dtype, kf.head_dim, kf.causal)]
    return listed or list(DET_MASK_CASES)


def variant_kw(kf):
    """The mask and softcap arguments of flash_attn_func / flash_attn_backward
    for kf's variant."""
    return dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
                softcap=kf.softcap)


def within_rule(err, err_pt, atol=ATOL):
    """FlashAttention's pass rule (module docstring)."""
    return err <= 2 * err_pt + atol


if __name__ == "__main__":
    import torch  # noqa: E402  (import-safe without torch: only when run)

    import records  # noqa: E402
    from device_view import device_view  # noqa: E402
    from fa3 import facts as fa3facts  # noqa: E402
    from fa3 import runtime as fa3rt  # noqa: E402
    from fa3 import torch_api  # noqa: E402
    from fa3.reference import visible_mask  # noqa: E402
    from fa3.torch_api import flash_attn_backward, flash_attn_func  # noqa: E402

    TORCH_DTYPE = {"bf16": torch.bfloat16, "f16": torch.float16}


def rand(shape, dt, gen):
    return torch.randn(*shape, device="cuda", dtype=torch.float32, generator=gen).to(dt)


def visible(kf, Sq, Skv, device):
    """[Sq, Skv] bool on `device`: key j visible to query i under kf's mask
    (causal, window_left, window_right; bottom-right aligned)."""
    return torch.from_numpy(visible_mask(Sq, Skv, kf.causal,
                                         (kf.window_left, kf.window_right))).to(device)


def scores(q, k, scale, kf):
    """[B, Hq, Sq, Skv] scores of BSHD q, k in their dtype: x = scale q k^T,
    softcap * tanh(x / softcap) where kf has a softcap (unmasked)."""
    g = q.shape[2] // k.shape[2]
    kh = k.transpose(1, 2).repeat_interleave(g, dim=1)
    s = torch.matmul(q.transpose(1, 2), kh.transpose(-1, -2)) * scale
    if kf.softcap > 0:
        s = kf.softcap * torch.tanh(s / kf.softcap)
    return s


def attention(q, k, v, scale, kf):
    """o [B, Sq, Hq, Dv] of BSHD q, k, v by explicit math in their dtype,
    with kf's mask and softcap, differentiable: rows that see no key give 0
    (not NaN), and no NaN reaches a gradient."""
    Sq, Hq, Skv, Hkv = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    vh = v.transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    vis = visible(kf, Sq, Skv, q.device)
    empty = ~vis.any(dim=1)
    s = scores(q, k, scale, kf)
    s = s.masked_fill(~vis, float("-inf")).masked_fill(empty[:, None], 0.0)
    p = torch.softmax(s, dim=-1).masked_fill(empty[:, None], 0.0)
    return torch.matmul(p.to(vh.dtype), vh).transpose(1, 2)


def math_forward(q, k, v, scale, kf):
    """o (q's dtype) and lse (f32 [B, Hq, Sq], natural log, -inf for rows
    that see no key) by PyTorch's fp32 math, with kf's mask and softcap."""
    qf, kf_, vf = q.float(), k.float(), v.float()
    o = attention(qf, kf_, vf, scale, kf).to(q.dtype)
    vis = visible(kf, q.shape[1], k.shape[1], q.device)
    lse = torch.logsumexp(scores(qf, kf_, scale, kf).masked_fill(~vis, float("-inf")), dim=-1)
    return o.contiguous(), lse.contiguous()


def reference_grads(q, k, v, dout, scale, kf, upcast):
    """(dq, dk, dv) by torch autograd of attention() with kf's mask and
    softcap: on float32 copies (upcast), or in the inputs' dtype (PyTorch's
    own error, the rule's yardstick)."""
    leaves = [(t.float() if upcast else t).detach().clone().requires_grad_() for t in (q, k, v)]
    o = attention(*leaves, scale, kf)
    return torch.autograd.grad(o, leaves, dout.float() if upcast else dout)


def compare(got, ref, pt, kf):
    """The rule's numbers for each of dq, dk, dv, and whether all pass; dq
    of the rows that see no key under kf's mask, and dk and dv of the keys
    that no query sees, must be exactly 0."""
    res, ok = {}, True
    dq, dk, dv = got
    vis = visible(kf, dq.shape[1], dk.shape[1], dq.device)
    no_keys, no_queries = ~vis.any(dim=1), ~vis.any(dim=0)
    if bool(no_keys.any()):
        stray = int((dq[:, no_keys] != 0).sum().item())
        res["dq_nonzero_in_rows_without_keys"] = stray
        ok = stray == 0
    if bool(no_queries.any()):
        stray = int((dk[:, no_queries] != 0).sum().item() + (dv[:, no_queries] != 0).sum().item())
        res["dkdv_nonzero_in_keys_without_queries"] = stray
        ok = ok and stray == 0
    for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
        nan = int(torch.isnan(g.float()).sum().item())
        if g.numel() == 0:
            err = err_pt = 0.0
        else:
            err = float(torch.nan_to_num((g.float() - r).abs(), nan=float("inf")).max().item())
            err_pt = float((p.float() - r).abs().max().item())
        res[f"err_{name}"] = err
        res[f"err_pt_{name}"] = err_pt
        res[f"nan_{name}"] = nan
        ok = ok and nan == 0 and within_rule(err, err_pt)
    res["ok"] = ok
    return res


class Checker:
    """The backward kernel of one variant, its forward (ours or math), and the
    cases run on it."""

    def __init__(self, kf, fwd_kernels, emulated=False):
        self.kf = kf
        self.dt = TORCH_DTYPE[kf.dtype]
        self.emulated = emulated
        try:
            self.fwd = fa3facts.select_kernel(
                fwd_kernels, kf.dtype, kf.head_dim, kf.head_dim_v, kf.causal,
                (kf.window_left, kf.window_right), kf.softcap)
        except LookupError:
            self.fwd = None
        self._lookup_dir = None

    def lookup_dir(self):
        """Where the autograd and torch.compile runs look the backward up: the
        kernel's directory; for a deterministic kernel a directory of its
        files alone, so that a lookup without the flag finds no kernel."""
        kf = self.kf
        if not kf.deterministic:
            return os.path.dirname(kf.facts_path)
        if self._lookup_dir is None:
            self._lookup_dir = tempfile.mkdtemp(prefix="check_bwd_det_")
            for path in (kf.facts_path, kf.cubin_path):
                os.symlink(os.path.abspath(path),
                           os.path.join(self._lookup_dir, os.path.basename(path)))
        return self._lookup_dir

    def close(self):
        if self._lookup_dir is not None:
            shutil.rmtree(self._lookup_dir, ignore_errors=True)

    def forward(self, q, k, v):
        kf = self.kf
        if self.fwd is None:
            return math_forward(q, k, v, kf.scale, kf)
        with torch.no_grad():
            return flash_attn_func(q, k, v, softmax_scale=kf.scale, return_lse=True,
                                   kernel=self.fwd, **variant_kw(kf))

    def backward(self, dout, q, k, v, o, lse, dq=None, dk=None, dv=None, dq_accum=None):
        kf = self.kf
        return flash_attn_backward(dout, q, k, v, o, lse, softmax_scale=kf.scale, kernel=kf,
                                   dq=dq, dk=dk, dv=dv, dq_accum=dq_accum,
                                   deterministic=kf.deterministic, **variant_kw(kf))

    def refs(self, q, k, v, dout):
        """(g_ref, g_pt) of the rule (module docstring)."""
        kf = self.kf
        return (reference_grads(q, k, v, dout, kf.scale, kf, True),
                reference_grads(q, k, v, dout, kf.scale, kf, False))

    def inputs(self, case, seed):
        B, Sq, Skv, Hq, Hkv = case
        gen = torch.Generator(device="cuda").manual_seed(seed)
        D, Dv = self.kf.head_dim, self.kf.head_dim_v
        return (rand((B, Sq, Hq, D), self.dt, gen), rand((B, Skv, Hkv, D), self.dt, gen),
                rand((B, Skv, Hkv, Dv), self.dt, gen), rand((B, Sq, Hq, Dv), self.dt, gen))

    def launch(self, q, k, v, dout, o, lse):
        """(dq, dk, dv) of one launch into fresh NaN-poisoned dq, dk, dv and
        dq_accum (the deterministic kernel's, counters included)."""
        nan = float("nan")
        dq, dk, dv = torch.full_like(q, nan), torch.full_like(k, nan), torch.full_like(v, nan)
        B, Sq, Hq, D = q.shape
        acc = torch.full((fa3facts.bwd_dq_accum_words(B, Hq, Sq, D, self.kf.deterministic),),
                         nan, device="cuda")
        got = self.backward(dout, q, k, v, o, lse, dq=dq, dk=dk, dv=dv, dq_accum=acc)
        assert got[0] is dq and got[1] is dk and got[2] is dv
        torch.cuda.synchronize()
        return dq, dk, dv

    def run_case(self, case, seed):
        kf = self.kf
        q, k, v, dout = self.inputs(case, seed)
        o, lse = self.forward(q, k, v)
        got = self.launch(q, k, v, dout, o, lse)
        res = compare(got, *self.refs(q, k, v, dout), kf)
        again = self.launch(q, k, v, dout, o, lse)
        same = torch.equal(got[1], again[1]) and torch.equal(got[2], again[2])
        res["repeat_dkdv_identical"] = bool(same)
        res["repeat_dq_max_diff"] = (float((got[0].float() - again[0].float()).abs().max())
                                     if got[0].numel() else 0.0)
        res["ok"] = bool(res["ok"] and same)
        B, Sq, Skv, Hq, Hkv = case
        return dict(kernel=kf.kernel, case="random", fwd="ours" if self.fwd else "math",
                    B=B, Sq=Sq, Skv=Skv, Hq=Hq, Hkv=Hkv, **res)

    def run_repeats(self, case, seed, informational=False):
        """DET_RUNS launches on the same inputs: the first within the rule,
        and whether dq, dk and dv came out bitwise the same in each (all
        three required of a deterministic kernel). informational: a plain
        kernel's, recorded only (no reference, never a failure)."""
        kf = self.kf
        q, k, v, dout = self.inputs(case, seed)
        o, lse = self.forward(q, k, v)
        runs = [self.launch(q, k, v, dout, o, lse) for _ in range(DET_RUNS)]
        bits = lambda t: t.view(torch.int16)  # noqa: E731  (NaN payloads and -0 too)
        same = {name: all(torch.equal(bits(r[i]), bits(runs[0][i])) for r in runs[1:])
                for i, name in enumerate(("dq", "dk", "dv"))}
        res = {} if informational else compare(runs[0], *self.refs(q, k, v, dout), kf)
        res.update(runs=DET_RUNS, **{f"{g}_bitwise_same": eq for g, eq in same.items()})
        res["repeat_dq_max_diff"] = max(
            (float((r[0].float() - runs[0][0].float()).abs().max()) for r in runs[1:]
             if r[0].numel()), default=0.0)
        res["ok"] = True if informational else bool(res["ok"] and all(same.values()))
        B, Sq, Skv, Hq, Hkv = case
        label = ("dq over repeats (plain kernel, information)" if informational
                 else f"deterministic x{DET_RUNS}")
        return dict(kernel=kf.kernel, case=label, fwd="ours" if self.fwd else "math",
                    B=B, Sq=Sq, Skv=Skv, Hq=Hq, Hkv=Hkv, **res)

    def run_autograd(self, case, seed):
        """flash_attn_func under autograd: the op's registered backward (it
        needs our forward kernel: the backward is looked up in lookup_dir();
        with deterministic=True for a deterministic kernel, whose gradients
        must then all equal the direct call's bit for bit)."""
        kf = self.kf
        q, k, v, dout = self.inputs(case, seed)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        # softmax_scale=None: forward and backward each resolve the default
        # (the forward kernel's), the reference uses the facts' scale
        o = flash_attn_func(*leaves, softmax_scale=None, kernel=self.fwd,
                            kernel_dir=self.lookup_dir(), jit=False,
                            deterministic=kf.deterministic, **variant_kw(kf))
        o.backward(dout)
        got = [t.grad for t in leaves]
        with torch.no_grad():
            o2, lse = self.forward(q, k, v)
        direct = self.backward(dout, q, k, v, o2, lse)
        torch.cuda.synchronize()
        res = compare(got, *self.refs(q, k, v, dout), kf)
        same = torch.equal(got[1], direct[1]) and torch.equal(got[2], direct[2])
        res.update(dkdv_as_direct_call=bool(same), ok=bool(res["ok"] and same))
        if kf.deterministic:
            dq_same = torch.equal(got[0], direct[0])
            res.update(dq_as_direct_call=bool(dq_same), ok=bool(res["ok"] and dq_same))
        B, Sq, Skv, Hq, Hkv = case
        return dict(kernel=kf.kernel, case="autograd (o.backward)", fwd="ours", B=B, Sq=Sq,
                    Skv=Skv, Hq=Hq, Hkv=Hkv, **res)

    def run_compiled(self, case, seed):
        """torch.compile(fullgraph=True) of forward and backward (AOTAutograd
        traces the op's backward into torch.ops.fa3.flash_attn_bwd): dk and dv
        bit-identical to eager autograd (dq too for a deterministic kernel),
        dq within the rule."""
        kf = self.kf
        q, k, v, dout = self.inputs(case, seed)
        kdir = self.lookup_dir()

        def step(q, k, v, dout):
            o = flash_attn_func(q, k, v, softmax_scale=kf.scale, kernel_dir=kdir,
                                kernel=self.fwd, jit=False, deterministic=kf.deterministic,
                                **variant_kw(kf))
            return (o.float() * dout.float()).sum()

        def grads(fn):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            fn(*leaves, dout).backward()
            torch.cuda.synchronize()
            return [t.grad for t in leaves]

        torch._dynamo.reset()
        eager = grads(step)
        compiled = grads(torch.compile(step, fullgraph=True))
        res = compare(compiled, *self.refs(q, k, v, dout), kf)
        same = torch.equal(eager[1], compiled[1]) and torch.equal(eager[2], compiled[2])
        res.update(dkdv_as_eager=bool(same), ok=bool(res["ok"] and same))
        if kf.deterministic:
            dq_same = torch.equal(eager[0], compiled[0])
            res.update(dq_as_eager=bool(dq_same), ok=bool(res["ok"] and dq_same))
        B, Sq, Skv, Hq, Hkv = case
        return dict(kernel=kf.kernel, case="torch.compile(fullgraph=True) fwd+bwd", fwd="ours",
                    B=B, Sq=Sq, Skv=Skv, Hq=Hq, Hkv=Hkv, **res)

    def run_errors(self, fwd_kernel):
        """Misuse refused with its message; empty problems give zero
        gradients."""
        kf, dt = self.kf, self.dt
        q, k, v, dout = self.inputs((1, 64, 64, 2, 2), 5)
        o, lse = self.forward(q, k, v)
        kw = dict(softmax_scale=kf.scale, kernel=kf, deterministic=kf.deterministic,
                  **variant_kw(kf))
        out = []

        def expect(label, fn, exc, text):
            try:
                fn()
                ok, msg = False, "no error raised"
            except exc as e:
                msg = str(e)
                ok = text in msg
            except Exception as e:  # noqa: BLE001
                ok, msg = False, f"{type(e).__name__}: {e}"
            out.append(dict(kernel=kf.kernel, case=f"error: {label}", ok=ok,
                            message=msg.splitlines()[0][:300] if msg else ""))

        # each kind of backward kernel serves its own requests only (the
        # emulation checks an explicit kernel against the call as _pick does)
        other = dict(kw, deterministic=not kf.deterministic)
        expect(("deterministic" if kf.deterministic else "plain") + " kernel given to a "
               + ("plain" if kf.deterministic else "deterministic") + " call",
               lambda: flash_attn_backward(dout, q, k, v, o, lse, **other),
               ValueError, "does not compute")
        # and its own softcap and window only
        sc = dict(kw, softcap=0.0 if kf.softcap else 30.0)
        expect(f"a kernel of softcap {kf.softcap:g} given a call of softcap {sc['softcap']:g}",
               lambda: flash_attn_backward(dout, q, k, v, o, lse, **sc),
               ValueError, "does not compute")
        win = dict(kw, causal=False, window_size=(-1, -1) if has_window(kf) else (16, 0))
        expect(f"a kernel of window {variant_kw(kf)['window_size']} given a call of window "
               f"{win['window_size']}",
               lambda: flash_attn_backward(dout, q, k, v, o, lse, **win),
               ValueError, "does not compute")
        if kf.deterministic:
            B, Sq, Hq, D = q.shape
            small = torch.zeros(fa3facts.bwd_dq_accum_words(B, Hq, Sq, D), device="cuda")
            expect("a deterministic call's dq_accum of the plain size",
                   lambda: flash_attn_backward(dout, q, k, v, o, lse, dq_accum=small, **kw),
                   ValueError, "bwd_dq_accum_words(B, Hq, Sq, D, deterministic=True)")
        # what no backward kernel takes: refused before the forward runs,
        # with this kernel's window and softcap too
        grad_kw = dict(variant_kw(kf), kernel_dir=os.path.dirname(kf.facts_path), jit=False)
        q80, k80, v80 = (torch.randn(1, 64, 2, 80, device="cuda", dtype=dt)
                         for _ in range(3))
        expect("head dim 80 with grad",
               lambda: flash_attn_func(q80.requires_grad_(), k80, v80, **grad_kw),
               NotImplementedError, "takes head dims 64, 96, 128, 192 and 256, not 80")
        expect("head_dim_v != head_dim with grad",
               lambda: flash_attn_func(q.clone().requires_grad_(), k,
                                       v[..., :kf.head_dim // 2].contiguous(), **grad_kw),
               NotImplementedError, "head_dim_v = head_dim")
        dv_bhsd = torch.empty(v.shape[0], v.shape[2], v.shape[1], v.shape[3], dtype=dt,
                              device="cuda").transpose(1, 2)
        if not self.emulated:
            # (emulated: the runtime's checks are those of the CPU tests)
            expect("dk and dv of different strides",
                   lambda: flash_attn_backward(dout, q, k, v, o, lse, dv=dv_bhsd, **kw),
                   fa3rt.Fa3RuntimeError, "dk and dv strides differ in dim")
        if fwd_kernel is not None:
            # a forward kernel's object given to fa3rt_bwd, through the runtime
            kobj = fa3rt.Kernel(fwd_kernel.cubin_path, fwd_kernel.facts_path)
            t = lambda x, n: fa3rt.tensor(x.data_ptr(), *torch_api._bhsd(x), name=n)  # noqa
            acc = torch.empty(q.shape[0], q.shape[2], q.shape[1], q.shape[3], device="cuda")
            dq = torch.empty_like(q)
            args = fa3rt.bwd_args(t(q, "q"), t(k, "k"), t(v, "v"), t(dout, "dout"), t(o, "o"),
                                  lse.data_ptr(), lse.data_ptr(), acc.data_ptr(), t(dq, "dq"),
                                  t(k, "dk"), t(v, "dv"), kf.scale, kf.dtype)
            expect("a forward kernel given to fa3rt_bwd",
                   lambda: kobj.bwd(args, torch.cuda.current_stream().cuda_stream),
                   fa3rt.Fa3RuntimeError, "is a forward kernel (facts backward 0)")
            kobj.close()
        if not self.emulated:
            expect("the backward kernel given to flash_attn_func",
                   lambda: flash_attn_func(q, k, v, kernel=kf, **variant_kw(kf)),
                   ValueError, "does not compute")
            kobj = fa3rt.Kernel(kf.cubin_path, kf.facts_path)
            fargs = fa3rt.fwd_args(*[fa3rt.tensor(x.data_ptr(), *torch_api._bhsd(x), name=n)
                                     for n, x in zip("qkvo", (q, k, v, o))], 0, None, kf.dtype)
            expect("the backward kernel given to fa3rt_fwd",
                   lambda: kobj.fwd(fargs, torch.cuda.current_stream().cuda_stream),
                   fa3rt.Fa3RuntimeError, "is a backward kernel (facts backward 1)")
            kobj.close()
        # empty problems: zero gradients, no kernel
        for label, (Sq, Skv) in (("Skv = 0", (50, 0)), ("Sq = 0", (0, 50))):
            try:
                qe, ke, ve, de = self.inputs((2, Sq, Skv, 4, 2), 6)
                oe = torch.zeros_like(de)
                le = torch.full((2, 4, Sq), float("-inf"), device="cuda")
                dq, dk, dv = flash_attn_backward(de, qe, ke, ve, oe, le, **kw)
                torch.cuda.synchronize()
                ok = all(bool((g == 0).all()) for g in (dq, dk, dv))
                out.append(dict(kernel=kf.kernel, case=f"empty: {label}", ok=ok))
            except Exception as e:  # noqa: BLE001
                out.append(dict(kernel=kf.kernel, case=f"empty: {label}", ok=False,
                                error=f"{type(e).__name__}: {e}"))
        return out


# ---- --emulate: the backward launch as PyTorch math on fa3rt_bwd's arguments ----

def _contiguous(shape):
    strides, n = [], 1
    for d in reversed(shape):
        strides.insert(0, n)
        n *= d
    return strides


class EmulatedKernel:
    """Stands in for a loaded backward kernel: fa3rt_bwd's checks (the C
    runtime's fa3rt_bwd_plan on the facts of a backward kernel of this
    variant), then the work of its three kernels (_pre, the kernel, _post)
    in PyTorch math (fp32), read and written through the arguments' pointers
    and strides."""

    def __init__(self, kf):
        self.kf = kf
        # deterministic: plan_bwd checks the larger dq_accum (this math has
        # one order anyway)
        text = "\n".join([
            "fa3-kernel-facts 1", f"kernel {kf.kernel}", f"dtype {kf.dtype}",
            f"head_dim {kf.head_dim}", f"head_dim_v {kf.head_dim_v}", "block_m 64",
            "block_n 128", "threads 384", "dynamic_smem 1", f"causal {int(kf.causal)}",
            f"window_left {kf.window_left}", f"window_right {kf.window_right}",
            f"softcap {kf.softcap!r}",
            f"scale {kf.scale!r}", f"params {fa3facts.BWD_KERNEL_PARAMS}", "grid tiles",
            "backward 1", f"deterministic {int(kf.deterministic)}"]) + "\n"
        self.facts = fa3rt.parse_facts_c(text)

    def bwd(self, args, stream=0):
        L = fa3rt.plan_bwd(self.facts, args)
        if L.empty:
            return
        B, Sq, Hq, D = L.B, L.Sq, L.Hq, self.kf.head_dim
        dt = TORCH_DTYPE[self.kf.dtype]
        # this stand-in's own order in the workspace (its first B Hq Sq D floats)
        acc = device_view(args.dq_accum, (B, Hq, Sq, D), _contiguous((B, Hq, Sq, D)), torch.float32)

        def tensor(t):
            return device_view(t.ptr, tuple(t.shape), tuple(t.strides), dt)
        rows = _contiguous((B, Hq, Sq))
        delta = device_view(args.delta, (B, Hq, Sq), rows, torch.float32)
        do = tensor(args.dout).float()
        delta.copy_((do * tensor(args.o).float()).sum(-1))   # _pre: rowsum(dO * O)
        acc.zero_()                                          # _pre: dQaccum zeroed
        if not L.zero_only:
            self._grad(args, L, acc, delta, tensor, do)
        tensor(args.dq).copy_(acc * L.scale)                 # _post: rounded once

    def _grad(self, args, L, acc, delta, tensor, do):
        """The backward kernel: dK, dV, and dQ / scale into dQaccum."""
        B, Sq, Skv, Hq, Hkv = L.B, L.Sq, L.Skv, L.Hq, L.Hkv
        q, k, v = (tensor(t).float() for t in (args.q, args.k, args.v))
        dk, dv = tensor(args.dk), tensor(args.dv)
        lse = device_view(args.lse, (B, Hq, Sq), _contiguous((B, Hq, Sq)), torch.float32)
        g = Hq // Hkv
        kr, vr = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        s = torch.matmul(q, kr.transpose(-1, -2)) * L.scale
        cap = self.kf.softcap
        if cap > 0:
            s = cap * torch.tanh(s / cap)
        vis = visible(self.kf, Sq, Skv, q.device)
        # P = exp(s - lse): 0 where masked, and in rows without keys (lse -inf)
        p = torch.exp(s - lse[..., None]).masked_fill(~vis, 0.0)
        p = p.masked_fill(torch.isinf(lse)[..., None], 0.0)
        ds = p * (torch.matmul(do, vr.transpose(-1, -2)) - delta[..., None])
        if cap > 0:
            ds = ds * (1.0 - (s / cap) ** 2)           # d softcap*tanh(x/softcap) / dx
        acc.copy_(torch.matmul(ds, kr))                # dq / scale
        fold = lambda x: x.unflatten(1, (Hkv, g)).sum(2)  # noqa: E731  (sum a group's q heads)
        dk.copy_(fold(torch.matmul(ds.transpose(-1, -2), q)) * L.scale)
        dv.copy_(fold(torch.matmul(p.transpose(-1, -2), do)))


def emulated_kernels(fwd_kernels):
    """A backward KernelFacts per forward kernel the backward kernel would
    cover, plain and deterministic, and the patch that launches
    EmulatedKernel for every backward lookup of flash_attn_backward and of
    the autograd path."""
    out = []
    for kf in fwd_kernels:
        if (kf.head_dim in torch_api.BWD_HEAD_DIMS and kf.head_dim_v == kf.head_dim
                and kf.dtype in TORCH_DTYPE):
            name = kf.kernel.replace("fwd", "bwd")
            out.append(dataclasses.replace(kf, backward=True, kernel=name + "_emulated"))
            out.append(dataclasses.replace(kf, backward=True, deterministic=True,
                                           kernel=name + "_det_emulated"))
    real = torch_api._launchable_kernel

    def launchable(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit, dev,
                   device, varlen=False, backward=False, decode=False, deterministic=False):
        if not backward:
            return real(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit, dev,
                        device, varlen, decode=decode)
        if kernel is not None:
            # an explicit kernel: checked against the call, as for a real one
            return EmulatedKernel(torch_api._pick(kernel, dt, D, Dv, causal, window_size,
                                                  softcap, kernel_dir, jit, varlen, backward,
                                                  decode, deterministic))
        for kf in out:
            if fa3facts.matches(kf, dt, D, Dv, bool(causal), tuple(window_size), softcap,
                                varlen, True, decode, deterministic):
                return EmulatedKernel(kf)
        raise LookupError(f"no emulated backward kernel for {dt} d{D} causal={causal} "
                          f"window={tuple(window_size)} softcap={softcap}"
                          f"{' deterministic' if deterministic else ''}")
    torch_api._launchable_kernel = launchable
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel_dir")
    ap.add_argument("--fwd-kernel-dir", default=None,
                    help="forward kernels of the same variants (default: KERNEL_DIR); "
                         "without one a case takes PyTorch's fp32 forward")
    ap.add_argument("--out", default=None,
                    help="directory of history.jsonl and RESULTS.md (e.g. test/gpu)")
    ap.add_argument("--sanitize", action="store_true", help="small cases (compute-sanitizer)")
    ap.add_argument("--emulate", action="store_true",
                    help="no backward kernel: PyTorch math on fa3rt_bwd's arguments")
    ap.add_argument("--only", default=None, help="substring filter on kernel names")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000,
                    help="base seed (default: fresh)")
    return ap.parse_args()


def report_line(r):
    return ("PASS " if r["ok"] else "FAIL ") + json.dumps(r)


def main():
    a = parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    for s in skipped:
        print(f"SKIPPED FILE {s}")
    fdir = a.fwd_kernel_dir or a.kernel_dir
    fwd_kernels = [k for k in (kernels if fdir == a.kernel_dir
                               else fa3facts.scan_kernel_dir(fdir)[0])
                   if not k.backward and not k.varlen and not k.decode]
    bwd = emulated_kernels(fwd_kernels) if a.emulate else [k for k in kernels if k.backward]
    if a.only:
        bwd = [k for k in bwd if a.only in k.kernel]
    if not bwd:
        print(f"no backward kernels in {a.kernel_dir}" + ("" if a.emulate else
              " (facts backward 1: fa3-compile --backward; --emulate checks the Python side "
              "without one)"))
        return 1
    print(f"seed {a.seed}; {len(bwd)} kernel(s): " + ", ".join(k.kernel for k in bwd))
    results = []
    t0 = time.time()

    def guarded(kf, label, fn, case=None):
        try:
            rs = fn()
        except Exception as e:  # a crash in one case must not hide the others
            traceback.print_exc()
            rs = dict(kernel=kf.kernel, case=label, ok=False, error=f"{type(e).__name__}: {e}")
            if case:
                rs.update(zip(("B", "Sq", "Skv", "Hq", "Hkv"), case))
        for r in rs if isinstance(rs, list) else [rs]:
            results.append(r)
            print(report_line(r), flush=True)

    # once per run for each (deterministic, window or softcap)
    compiled_done = set()
    watch_seed = a.seed + 999   # NONDET_WATCH's inputs: its deterministic case's where run
    for i, kf in enumerate(bwd):
        c = Checker(kf, fwd_kernels, emulated=a.emulate)
        print(f"== {kf.describe()}; forward: "
              + (c.fwd.kernel if c.fwd else "PyTorch fp32 math (no forward kernel)"), flush=True)
        try:
            if a.sanitize:
                for j, case in enumerate(SANITIZE_CASES):
                    guarded(kf, "random", lambda: c.run_case(case, a.seed + 1000 * i + j), case)
                continue
            if kf.deterministic:
                for j, case in enumerate(det_cases(kf)):
                    seed = a.seed + 1000 * i + j
                    if plain_mask(kf) and (kf.dtype, kf.head_dim, kf.causal, case) == \
                            NONDET_WATCH:
                        watch_seed = seed
                    guarded(kf, f"deterministic x{DET_RUNS}", lambda: c.run_repeats(case, seed),
                            case)
            else:
                for j, case in enumerate(cases(kf)):
                    guarded(kf, "random", lambda: c.run_case(case, a.seed + 1000 * i + j), case)
            if c.fwd is not None:
                ac = (2, 203, 113, 8, 2)
                guarded(kf, "autograd (o.backward)",
                        lambda: c.run_autograd(ac, a.seed + 1000 * i + 100), ac)
                kind = (kf.deterministic, not plain_mask(kf))
                if kind not in compiled_done:
                    compiled_done.add(kind)
                    guarded(kf, "torch.compile fwd+bwd",
                            lambda: c.run_compiled(ac, a.seed + 1000 * i + 101), ac)
            guarded(kf, "errors", lambda: c.run_errors(c.fwd))
        finally:
            c.close()
    # for comparison: whether a plain kernel's dq changes over the runs that
    # a deterministic kernel's may not change over, on the same inputs
    # (information only)
    watch = next((k for k in bwd if not k.deterministic and plain_mask(k)
                  and (k.dtype, k.head_dim, k.causal) == NONDET_WATCH[:3]), None)
    if watch is not None and any(k.deterministic for k in bwd) and not a.sanitize:
        c = Checker(watch, fwd_kernels, emulated=a.emulate)
        guarded(watch, "dq over repeats (plain kernel, information)",
                lambda: c.run_repeats(NONDET_WATCH[3], watch_seed, informational=True),
                NONDET_WATCH[3])
    nfail = sum(not r["ok"] for r in results)
    print(f"check_bwd: {len(results) - nfail}/{len(results)} cases passed, {nfail} failure(s), "
          f"{time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        meta = dict(date=now.isoformat(timespec="seconds"), gpu=torch.cuda.get_device_name(),
                    torch=torch.__version__, kernel_dir=a.kernel_dir, fwd_kernel_dir=fdir,
                    seed=a.seed, command="python3 " + " ".join(sys.argv), rule=RULE,
                    emulated=a.emulate, skipped_files=skipped)
        entry = records.new_entry("check_bwd", meta["command"], records.run_id(now),
                                  full=not a.only and not a.emulate, meta=meta, sass={},
                                  results=results)
        key = records.record(a.out, entry)
        print(records.render(entry))
        print(f"appended to {Path(a.out) / records.HISTORY}"
              + (f"; rewrote {key} in {Path(a.out) / records.TABLE}" if key else ""))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
