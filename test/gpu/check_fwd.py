#!/usr/bin/env python3
"""GPU correctness check of compiled FA3 forward kernels (run on an H100/H200).

For every kernel (<name>.cubin + <name>.facts) in a directory: fresh random
inputs per case, outputs poisoned with NaN, result compared with an fp32
reference computed by torch on the upcast inputs (explicit math, TF32 off).

    python3 test/gpu/check_fwd.py KERNEL_DIR --out OUT_DIR      # full check
    python3 test/gpu/check_fwd.py KERNEL_DIR --sanitize         # one small case per
        kernel, for `compute-sanitizer --tool memcheck|racecheck python3 ...`

Pass criteria (per case):
  * every element of o (and lse when requested) written (no NaN left),
  * ||o - ref|| / ||ref|| < O_REL_TOL over rows that see at least one key,
  * max |lse - ref_lse| < LSE_ABS_TOL (natural-log units) over those rows,
  * rows that see no key: o == 0 exactly and lse == -inf exactly,
  * the same inputs give bit-identical outputs twice (a moving result is a race).
Plus per kernel: `cuobjdump -sass` of the cubin contains HGMMA, no local memory
and a tightly issued steady-state wgmma batch (fa3.sass).
With --out: appends the run (every case) to OUT_DIR/history.jsonl and, unless
--only filters the kernels, rewrites the check_fwd table of OUT_DIR/RESULTS.md
(the repository's are in test/gpu/; bench/records.py). Exit status 1 on any
failure.
"""
import argparse
import datetime
import json
import math
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

O_REL_TOL = 1e-2      # bf16/f16 inputs, fp32 accumulation: expect ~2e-3
LSE_ABS_TOL = 1e-3    # lse in natural-log units; expect ~1e-5

import torch  # noqa: E402

import records  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3 import sass as fa3sass  # noqa: E402
from fa3 import runtime as fa3rt  # noqa: E402
from fa3.reference import visible_mask  # noqa: E402
from fa3.torch_api import flash_attn_bhsd, flash_attn_func  # noqa: E402

TORCH_DTYPE = {"bf16": torch.bfloat16, "f16": torch.float16}

# (B, Sq, Skv, Hq, Hkv): seqlens 1, 127, 1000, 4096, 12000; Sq != Skv both ways; GQA/MQA; B > 1
CASES = [
    (1, 1, 1, 1, 1),
    (2, 127, 127, 4, 4),
    (2, 1000, 1000, 4, 2),
    (1, 4096, 4096, 2, 2),
    (2, 300, 1000, 8, 2),
    (1, 1000, 300, 2, 1),
    (3, 127, 1000, 4, 1),
    (1, 1, 4096, 2, 2),
    (2, 4096, 127, 2, 1),
    # causal kernels order their tiles in sections of (head, batch) pairs
    # whose K/V fit 32 MiB (hopper.tile_coords): 12000 keys allow 10, 5 and
    # 2 pairs at head dim 64, 128 and 256, so the 14 pairs go in sections
    # of 7 + 7, 5 + 5 + 4 and 7 x 2
    (2, 1500, 12000, 7, 1),
]
# the last: more tiles (160) than SMs, so that persistent CTAs loop (small
# enough for racecheck: 1152 tiles took ~30 s per kernel there)
SANITIZE_CASES = [(1, 200, 300, 2, 1), (1, 300, 200, 2, 1), (1, 1024, 128, 20, 4)]


def reference(q, k, v, scale, kf):
    """fp32 reference from BSHD inputs: o [B, Sq, Hq, Dv] f32, lse [B, Hq, Sq] f32, and the
    [Sq] mask of rows that see no key."""
    B, Sq, Hq, D = q.shape
    Skv, Hkv = k.shape[1], k.shape[2]
    g = Hq // Hkv
    qf = q.float().transpose(1, 2)
    kf_ = k.float().transpose(1, 2).repeat_interleave(g, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(g, dim=1)
    s = torch.matmul(qf, kf_.transpose(-1, -2)) * scale
    if kf.softcap > 0:
        s = kf.softcap * torch.tanh(s / kf.softcap)
    # the mask of the NumPy oracle (python/fa3/reference.py); kf.chunk where
    # present: attention_chunk's (check_chunk.py)
    vis = torch.from_numpy(visible_mask(Sq, Skv, kf.causal, (kf.window_left, kf.window_right),
                                        getattr(kf, "chunk", 0))).to(q.device)
    s = s.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    empty = ~vis.any(dim=1)
    p = torch.nan_to_num(p, nan=0.0)
    o = torch.matmul(p, vf)
    return o.transpose(1, 2), lse, empty


def compare(o, lse, ref_o, ref_lse, empty):
    """o [B, Sq, Hq, Dv] (kernel dtype), lse [B, Hq, Sq] or None, vs the reference."""
    of = o.float()
    res = {"unwritten": int(torch.isnan(of).sum().item())}
    if lse is not None:
        res["unwritten"] += int(torch.isnan(lse).sum().item())
    keep = ~empty
    nk = int(keep.sum().item())
    if nk:
        diff = (of[:, keep] - ref_o[:, keep]).norm().item()
        den = ref_o[:, keep].norm().item()
        res["rel_err_o"] = diff / den if den > 0 else diff
        if lse is not None:
            d = (lse[:, :, keep] - ref_lse[:, :, keep]).abs()
            res["max_abs_err_lse"] = float(torch.nan_to_num(d, nan=float("inf")).max().item())
    else:
        res["rel_err_o"] = 0.0
        if lse is not None:
            res["max_abs_err_lse"] = 0.0
    res["empty_rows"] = int(empty.sum().item())
    ok_empty = True
    if empty.any():
        ok_empty = bool((of[:, empty] == 0).all().item())
        if lse is not None:
            le = lse[:, :, empty]
            ok_empty = ok_empty and bool((torch.isinf(le) & (le < 0)).all().item())
    res["empty_rows_ok"] = ok_empty
    res["ok"] = (res["unwritten"] == 0 and math.isfinite(res["rel_err_o"])
                 and res["rel_err_o"] < O_REL_TOL and ok_empty
                 and (lse is None or res["max_abs_err_lse"] < LSE_ABS_TOL))
    return res


def variant_kw(kf):
    return dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
                softcap=kf.softcap, kernel=kf)


def rand(shape, dt, gen):
    return torch.randn(*shape, device="cuda", dtype=torch.float32, generator=gen).to(dt)


def run_bshd_case(kf, case, seed, scale=None, with_lse=True):
    B, Sq, Skv, Hq, Hkv = case
    dt = TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = rand((B, Sq, Hq, kf.head_dim), dt, gen)
    k = rand((B, Skv, Hkv, kf.head_dim), dt, gen)
    v = rand((B, Skv, Hkv, kf.head_dim_v), dt, gen)
    o = torch.full((B, Sq, Hq, kf.head_dim_v), float("nan"), device="cuda", dtype=dt)
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda") if with_lse else None
    r = flash_attn_func(q, k, v, softmax_scale=scale, out=o, lse_out=lse, **variant_kw(kf))
    assert (r[0] if with_lse else r) is o
    torch.cuda.synchronize()
    ref_o, ref_lse, empty = reference(q, k, v, kf.scale if scale is None else scale, kf)
    return (q, k, v), (o, lse), compare(o, lse, ref_o, ref_lse, empty)


def check_kernel(kf, seed0, results, quick=False):
    name = kf.kernel
    cases = SANITIZE_CASES if quick else CASES

    def record(label, layout, case, res, extra=None):
        r = dict(kernel=name, case=label, layout=layout, B=case[0], Sq=case[1], Skv=case[2],
                 Hq=case[3], Hkv=case[4], **res)
        if extra:
            r.update(extra)
        results.append(r)
        print(("PASS " if r["ok"] else "FAIL ") + json.dumps(r), flush=True)

    def guarded(label, layout, case, fn):
        try:
            fn()
        except Exception as e:  # a crash in one case must not hide the others
            record(label, layout, case, dict(ok=False, error=f"{type(e).__name__}: {e}"))
            traceback.print_exc()

    for i, case in enumerate(cases):
        def one(case=case, i=i):
            _, _, res = run_bshd_case(kf, case, seed0 + i)
            record("random", "BSHD", case, res)
        guarded("random", "BSHD", case, one)
    if quick:
        return

    c = (2, 1000, 1000, 4, 2)

    def explicit_scale():
        _, _, res = run_bshd_case(kf, c, seed0 + 100, scale=0.3)
        record("softmax_scale=0.3", "BSHD", c, res)
    guarded("softmax_scale=0.3", "BSHD", c, explicit_scale)

    def no_lse():
        _, _, res = run_bshd_case(kf, c, seed0 + 101, with_lse=False)
        record("no lse (NULL)", "BSHD", c, res)
    guarded("no lse (NULL)", "BSHD", c, no_lse)

    def repeat(c=c, label="repeat x3 (2nd stream)", seed=seed0 + 102):
        (q, k, v), (o1, l1), res = run_bshd_case(kf, c, seed)
        o2, l2 = flash_attn_func(q, k, v, return_lse=True, **variant_kw(kf))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            o3, l3 = flash_attn_func(q, k, v, return_lse=True, **variant_kw(kf))
        torch.cuda.synchronize()
        same = (torch.equal(o1, o2) and torch.equal(l1, l2) and torch.equal(o1, o3)
                and torch.equal(l1, l3))
        res = dict(res, bitwise_repeat=same, ok=res["ok"] and same)
        record(label, "BSHD", c, res)
    guarded("repeat x3 (2nd stream)", "BSHD", c, repeat)

    # More tiles than SMs, with a partial last wave (1280 tiles at block_m
    # 128): persistent CTAs take many tiles each from the dynamic scheduler.
    # Repeated on a second stream: the result must not depend on which CTA
    # ran which tile, nor on a concurrent launch of the same kernel. The
    # second case has a single kv block per tile.
    many = (2, 2048, 2048, 40, 8)
    guarded("many tiles, repeat x3 (2nd stream)", "BSHD", many,
            lambda: repeat(many, "many tiles, repeat x3 (2nd stream)", seed0 + 105))

    def many_short():
        c4 = (4, 4096, 100, 16, 4)
        _, _, res = run_bshd_case(kf, c4, seed0 + 106)
        record("many tiles, one kv block", "BSHD", c4, res)
    guarded("many tiles, one kv block", "BSHD", (4, 4096, 100, 16, 4), many_short)

    def bhsd_strided():
        # q/k/v in SDPA layout [B, H, S, D], q taken from a packed qkv-like buffer
        # (strided), o written into a strided view (padded rows): exercises all strides
        B, Sq, Skv, Hq, Hkv = c2 = (2, 777, 1000, 4, 2)
        dt = TORCH_DTYPE[kf.dtype]
        gen = torch.Generator(device="cuda").manual_seed(seed0 + 103)
        D, Dv = kf.head_dim, kf.head_dim_v
        qbuf = rand((B, Hq, Sq, 2 * D), dt, gen)
        q = qbuf[..., D:]
        k = rand((B, Hkv, Skv, D), dt, gen)
        v = rand((B, Hkv, Skv, Dv), dt, gen)
        obuf = torch.full((B, Hq, Sq, Dv + 64), float("nan"), device="cuda", dtype=dt)
        o = obuf[..., :Dv]
        lse = torch.full((B, Hq, Sq), float("nan"), device="cuda")
        flash_attn_bhsd(q, k, v, o=o, lse=lse, **variant_kw(kf))
        torch.cuda.synchronize()
        ref_o, ref_lse, empty = reference(q.transpose(1, 2), k.transpose(1, 2),
                                          v.transpose(1, 2), kf.scale, kf)
        res = compare(o.transpose(1, 2), lse, ref_o, ref_lse, empty)
        pad_ok = bool(torch.isnan(obuf[..., Dv:]).all().item())  # nothing written outside o
        res = dict(res, padding_untouched=pad_ok, ok=res["ok"] and pad_ok)
        record("strided q, padded o", "BHSD", c2, res)
    guarded("strided q, padded o", "BHSD", (2, 777, 1000, 4, 2), bhsd_strided)

    def rising_scores():
        # Scores that rise along the keys for some rows (the running max is
        # raised many times, past the lazy-rescale threshold of 2^8 too),
        # stay flat for others and fall for the rest, so that the rows of one
        # warpgroup disagree on rescaling: q[..., 0] = c_row in [-8, 8],
        # k[..., 0] = 80 * key / Skv adds up to +-56 to a score.
        B, Sq, Skv, Hq, Hkv = c3 = (1, 2048, 2048, 4, 2)
        dt = TORCH_DTYPE[kf.dtype]
        gen = torch.Generator(device="cuda").manual_seed(seed0 + 104)
        q = rand((B, Sq, Hq, kf.head_dim), torch.float32, gen)
        k = rand((B, Skv, Hkv, kf.head_dim), torch.float32, gen)
        v = rand((B, Skv, Hkv, kf.head_dim_v), dt, gen)
        q[..., 0] = torch.rand(B, Sq, Hq, device="cuda", generator=gen) * 16 - 8
        k[..., 0] = (80.0 * torch.arange(Skv, device="cuda") / Skv)[None, :, None]
        q, k = q.to(dt), k.to(dt)
        o = torch.full((B, Sq, Hq, kf.head_dim_v), float("nan"), device="cuda", dtype=dt)
        lse = torch.full((B, Hq, Sq), float("nan"), device="cuda")
        flash_attn_func(q, k, v, out=o, lse_out=lse, **variant_kw(kf))
        torch.cuda.synchronize()
        ref_o, ref_lse, empty = reference(q, k, v, kf.scale, kf)
        record("rising scores (rescale path)", "BSHD", c3,
               compare(o, lse, ref_o, ref_lse, empty))
    guarded("rising scores (rescale path)", "BSHD", (1, 2048, 2048, 4, 2), rising_scores)

    def skv_zero():
        B, Sq, Hq = 2, 100, 4
        dt = TORCH_DTYPE[kf.dtype]
        q = torch.randn(B, Sq, Hq, kf.head_dim, device="cuda").to(dt)
        k = torch.empty(B, 0, 2, kf.head_dim, device="cuda", dtype=dt)
        v = torch.empty(B, 0, 2, kf.head_dim_v, device="cuda", dtype=dt)
        o, lse = flash_attn_func(q, k, v, return_lse=True, **variant_kw(kf))
        torch.cuda.synchronize()
        ok = bool((o == 0).all().item()) and bool((torch.isinf(lse) & (lse < 0)).all().item())
        record("Skv = 0 (o = 0, lse = -inf)", "BSHD", (B, Sq, 0, Hq, 2), dict(ok=ok))
        q0 = q[:, :0]
        o0 = flash_attn_func(q0, q0.new_empty(B, 5, 2, kf.head_dim),
                             q0.new_empty(B, 5, 2, kf.head_dim_v), **variant_kw(kf))
        record("Sq = 0 (no-op)", "BSHD", (B, 0, 5, Hq, 2), dict(ok=tuple(o0.shape) == (B, 0, Hq, kf.head_dim_v)))
    guarded("empty", "BSHD", (0, 0, 0, 0, 0), skv_zero)


def launched_kernels(call):
    """`call`'s result and the names of the kernels it launched, read off
    fa3.torch_api._launchable_kernel's answers (kernels of one variant may
    give the same output bit for bit)."""
    from fa3 import torch_api
    launched = []
    real = torch_api._launchable_kernel

    def spy(*args, **kwargs):
        k = real(*args, **kwargs)
        launched.append(k.facts.kernel.decode())
        return k
    torch_api._launchable_kernel = spy
    try:
        return call(), launched
    finally:
        torch_api._launchable_kernel = real


def check_length_choice(kernels, results):
    """Where a directory holds a variant's kernels for different lengths
    (facts min_seqlen_q), flash_attn_func without kernel= launches the one
    for the call's Sq: its output is bit for bit that of the kernel given
    explicitly, just below and at each kernel's min_seqlen_q."""
    from fa3 import torch_api
    torch_api.clear_caches()
    for kf in kernels:
        if not kf.min_seqlen_q:
            continue
        same = [k for k in kernels if fa3facts.matches(
            k, kf.dtype, kf.head_dim, kf.head_dim_v, kf.causal,
            (kf.window_left, kf.window_right), kf.softcap)]
        if len(same) < 2:   # (--only left the others out)
            continue
        kw = variant_kw(kf)
        del kw["kernel"]
        gen = torch.Generator(device="cuda").manual_seed(kf.min_seqlen_q)
        dt = TORCH_DTYPE[kf.dtype]
        for S in (kf.min_seqlen_q - 1, kf.min_seqlen_q):
            want = fa3facts.by_length(same, S)
            q, k, v = (rand((1, S, 2, d), dt, gen) for d in (kf.head_dim, kf.head_dim,
                                                              kf.head_dim_v))
            got, launched = launched_kernels(lambda: flash_attn_func(
                q, k, v, kernel_dir=os.path.dirname(kf.facts_path), **kw))
            ref = flash_attn_func(q, k, v, kernel=want, causal=kf.causal,
                                  window_size=(kf.window_left, kf.window_right),
                                  softcap=kf.softcap)
            chosen = torch_api.select_kernel(kf.dtype, kf.head_dim, kf.head_dim_v, kf.causal,
                                             (kf.window_left, kf.window_right), kf.softcap,
                                             kernel_dir=os.path.dirname(kf.facts_path),
                                             jit=False, seqlen_q=S)
            ok = launched == [want.kernel] and chosen.kernel == want.kernel and \
                torch.equal(got, ref) and (want is kf) == (S >= kf.min_seqlen_q)
            r = dict(kernel=kf.kernel, case=f"length choice Sq={S}: {want.kernel}", layout="bshd",
                     B=1, Sq=S, Skv=S, Hq=2, Hkv=2, ok=ok,
                     message="" if ok else f"launched {launched}, wanted {want.kernel}")
            results.append(r)
            print(("PASS " if ok else "FAIL ") + json.dumps(r), flush=True)


def check_errors(kernels, results):
    """The runtime's validation seen through the Python API on a real GPU."""
    kf = kernels[0]
    dt = TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v

    def expect(label, fn, exc, text):
        try:
            fn()
            ok, msg = False, "no error raised"
        except exc as e:
            msg = str(e)
            ok = text in msg
        except Exception as e:  # wrong exception type
            ok, msg = False, f"{type(e).__name__}: {e}"
        r = dict(kernel=kf.kernel, case=f"error: {label}", layout="-", B=0, Sq=0, Skv=0, Hq=0,
                 Hkv=0, ok=ok, message=msg.splitlines()[0][:300])
        results.append(r)
        print(("PASS " if ok else "FAIL ") + json.dumps(r), flush=True)

    def mk(B, S, H, d):
        return torch.randn(B, S, H, d, device="cuda").to(dt)

    q, k, v = mk(1, 64, 2, D), mk(1, 64, 2, D), mk(1, 64, 2, Dv)
    flat = torch.randn(64 * 2 * D + 8, device="cuda").to(dt)
    qmis = flat[4:4 + 64 * 2 * D].view(1, 64, 2, D)  # 8-byte offset
    expect("misaligned q", lambda: flash_attn_func(qmis, k, v, **variant_kw(kf)),
           fa3rt.Fa3RuntimeError, "not 16-byte aligned")
    kpad = mk(1, 64, 1, D + 4)[..., :D]  # row stride (D + 4) * 2 bytes
    vpad = mk(1, 64, 1, Dv + 4)[..., :Dv]
    expect("k row stride not 16-byte multiple",
           lambda: flash_attn_func(q, kpad, vpad, **variant_kw(kf)),
           fa3rt.Fa3RuntimeError, "multiple of 16 bytes")
    expect("no matching variant (softcap)",
           lambda: flash_attn_func(q, k, v, causal=kf.causal, softcap=33.0,
                                   kernel_dir=os.path.dirname(kf.facts_path),
                                   jit=False),  # no compiling it on the fly
           LookupError, "Available:")
    expect("Hq % Hkv != 0", lambda: flash_attn_func(mk(1, 64, 3, D), k, v, **variant_kw(kf)),
           ValueError, "multiple of the number of k/v heads")
    expect("requires grad, head dim 80 (no such backward)",
           lambda: flash_attn_func(mk(1, 64, 2, 80).requires_grad_(), mk(1, 64, 2, 80),
                                   mk(1, 64, 2, 80), **dict(variant_kw(kf), kernel=None)),
           NotImplementedError, "takes head dims 64, 96, 128, 192 and 256, not 80")
    clustered = [c for c in kernels if c.cluster_m > 1]
    if clustered:
        # facts that deny the cubin's compile-time cluster: refused at load
        c = clustered[0]
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "bad.facts"
            bad.write_text(Path(c.facts_path).read_text().replace("cluster_m 2", "cluster_m 1"))
            expect("facts without the cubin's cluster",
                   lambda: fa3rt.Kernel(c.cubin_path, str(bad)),
                   fa3rt.Fa3RuntimeError, "facts say cluster_m 1 but the cubin's clusters are 2")


def sass_check(kf):
    tool = shutil.which("cuobjdump")
    if not tool:
        return dict(hgmma=None, ok=True, note="cuobjdump not found: skipped")
    p = fa3sass.run_cuobjdump(tool, kf.cubin_path)
    if p.returncode:
        return dict(hgmma=0, ok=False, note=p.stderr.strip()[:300])
    lines = p.stdout.splitlines()
    hg = sum("HGMMA" in l for l in lines)
    local = sum(("LDL" in l or "STL" in l) for l in lines)
    # the loop's wgmmas back to back and, with lazy rescaling, the softmax
    # beside the P V wgmmas (fa3.sass)
    j = fa3sass.judge(fa3sass.instructions(p.stdout), fa3sass.read_facts(kf.cubin_path),
                      fa3sass.addresses(p.stdout))
    batch = j["batch"]
    return dict(hgmma=hg, local_mem_insts=local,
                loop_batch=None if batch is None else f"{batch[0]} in {batch[1]}",
                exp2_beside_pv=j["exps"], ok=hg > 0 and local == 0 and j["ok"])


def run_meta(a, now, gpu=None, **extra):
    """A check run's meta for its history line: date, GPU (default: the
    current device's name), torch, the kernel directory, seed, command and
    the bounds, then `extra`."""
    return dict(date=now.isoformat(timespec="seconds"),
                gpu=torch.cuda.get_device_name() if gpu is None else gpu,
                torch=torch.__version__, kernel_dir=a.kernel_dir, seed=a.seed,
                command="python3 " + " ".join(sys.argv),
                o_rel_tol=O_REL_TOL, lse_abs_tol=LSE_ABS_TOL, **extra)


def write_report(out, run_id, meta, results, sass, full=True, kind="check_fwd"):
    """Appends the run to OUT/history.jsonl (a line of `kind`); a full run
    (no --only) also rewrites its table in OUT/RESULTS.md."""
    entry = records.new_entry(kind, meta["command"], run_id, full=full, meta=meta,
                              sass=sass, results=results)
    key = records.record(out, entry)
    print(records.render_check(entry))
    print(f"appended to {Path(out) / records.HISTORY}"
          + (f"; rewrote {key} in {Path(out) / records.TABLE}" if key else ""))


def parse_args(description, sanitize_help):
    """The command line of the GPU checks (this one and check_varlen.py)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("kernel_dir")
    ap.add_argument("--out", default=None,
                    help="directory of history.jsonl and RESULTS.md (e.g. test/gpu)")
    ap.add_argument("--sanitize", action="store_true", help=sanitize_help)
    ap.add_argument("--only", default=None, help="substring filter on kernel names")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000,
                    help="base seed (default: fresh)")
    return ap.parse_args()


def main():
    a = parse_args(__doc__.split("\n\n")[0],
                   "one small case per kernel (for compute-sanitizer)")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    for s in skipped:
        print(f"SKIPPED FILE {s}")
    varlen = [k.kernel for k in kernels if k.varlen]
    if varlen:
        print(f"not checked here (packed variable-length kernels: test/gpu/check_varlen.py): "
              + ", ".join(varlen))
    backward = [k.kernel for k in kernels if k.backward]
    if backward:
        print(f"not checked here (backward kernels: test/gpu/check_bwd.py): "
              + ", ".join(backward))
    decode = [k.kernel for k in kernels if k.decode]
    if decode:
        print(f"not checked here (decoding kernels: test/gpu/check_decode.py): "
              + ", ".join(decode))
    fp8 = [k.kernel for k in kernels if k.dtype == "e4m3"]
    if fp8:
        print(f"not checked here (FP8 kernels: test/gpu/check_fp8.py): " + ", ".join(fp8))
    kernels = [k for k in kernels if not k.varlen and not k.backward and not k.decode
               and k.dtype != "e4m3"]
    if a.only:
        kernels = [k for k in kernels if a.only in k.kernel]
    if not kernels:
        others = varlen or backward or decode or fp8
        print(f"no kernels in {a.kernel_dir}"
              + (" but varlen, backward, decoding or FP8 ones" if others else ""))
        return 0 if others and not a.only else 1
    print(f"seed {a.seed}; {len(kernels)} kernel(s): " + ", ".join(k.kernel for k in kernels))
    results, sass = [], {}
    t0 = time.time()
    for i, kf in enumerate(kernels):
        print(f"== {kf.describe()}", flush=True)
        check_kernel(kf, a.seed + 1000 * i, results, quick=a.sanitize)
        if not a.sanitize:
            sass[kf.kernel] = sass_check(kf)
            print(f"SASS {kf.kernel}: {sass[kf.kernel]}")
    if not a.sanitize:
        check_errors(kernels, results)
        try:
            check_length_choice(kernels, results)
        except Exception:
            traceback.print_exc()
            results.append(dict(kernel=kernels[0].kernel, case="length choice", layout="-",
                                B=0, Sq=0, Skv=0, Hq=0, Hkv=0, ok=False, message="exception"))
    nfail = sum(not r["ok"] for r in results) + sum(not s["ok"] for s in sass.values())
    print(f"check_fwd: {len(results) - sum(not r['ok'] for r in results)}/{len(results)} cases "
          f"passed, {nfail} failure(s), {time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        write_report(a.out, records.run_id(now), run_meta(a, now, skipped_files=skipped),
                     results, sass, full=not a.only)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
