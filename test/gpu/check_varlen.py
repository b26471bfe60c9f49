#!/usr/bin/env python3
"""GPU correctness check of the packed variable-length kernels (fa3-compile
--varlen) through fa3.torch_api.flash_attn_varlen_func (run on an H100/H200).

    python3 test/gpu/check_varlen.py KERNEL_DIR [--out OUT_DIR]
    python3 test/gpu/check_varlen.py KERNEL_DIR --sanitize   # small cases, for
        `compute-sanitizer --tool memcheck|racecheck|synccheck python3 ...`

For every varlen kernel of the directory and every case (ragged batches with
lengths 0, 1, 17, 1000 and 4096, queries shorter and longer than keys, GQA
and MQA, seqused_k over a padded cache, seqused_q, rows past the last
sequence): fresh random inputs, o and lse poisoned with NaN, then per
sequence check_fwd's
criteria against its fp32 reference on that sequence alone (the mask
bottom-right aligned per sequence): every owned element written,
||o - ref|| / ||ref|| < 1e-2 over rows that see a key, max |lse - ref| <
1e-3, rows that see no key exactly 0 and -inf; rows no sequence owns still
NaN (untouched); the same inputs give bit-identical outputs twice. Plus the
SASS check of check_fwd, and misuse (wrong dtypes and counts of the
arrays, seqused_q, shapes) refused with its message, no key rows at all
giving o = 0 and lse = -inf. Where a variant has kernels for different
lengths (facts min_seqlen_q), flash_attn_varlen_func without kernel=
launches the one for the batch's mean query length (checked just below and
at it). With --out: appends the run to OUT/history.jsonl.
Exit status 1 on any failure.
"""
import datetime
import math
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test" / "gpu"))

import torch  # noqa: E402

import check_fwd  # noqa: E402  (reference, compare, the SASS check)
import records  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3.torch_api import flash_attn_varlen_func  # noqa: E402

# (label, query lengths, key lengths, Hq, Hkv, extra): key length None =
# the query lengths; extra: "used" = seqused_k below a padded cache's
# capacity, "pad" = rows past the last sequence, "over" = max_seqlen_q
# larger than the packed rows (FlashAttention takes an over-estimate),
# "clamp" = seqused_k outside 0 .. the sequence's keys (against the
# caller's contract: the kernel clamps it, reading no other sequence's keys),
# "usedq" = seqused_q: about half of each sequence's rows used (one beyond
# its rows: clamped), the rest o = 0, lse = -inf
CASES = [
    ("ragged self", [0, 1, 17, 1000, 4096], None, 4, 2, ""),
    ("ragged cross", [1, 17, 1000, 4096, 0, 5], [4096, 1000, 17, 1, 5, 0], 4, 2, ""),
    ("MQA 8/1", [300, 129, 128, 513], [257, 1, 700, 128], 8, 1, "pad"),
    ("GQA seqused_k", [64, 200, 1, 333], [500, 17, 64, 1000], 4, 4, "used"),
    ("max_seqlen_q over Tq", [300, 17, 129], None, 4, 1, "over"),
    ("seqused_k out of range: clamped", [64, 200, 1, 333], [500, 17, 64, 1000], 4, 2, "clamp"),
    ("seqused_q", [64, 200, 1, 1000, 17], [500, 17, 64, 1000, 0], 4, 2, "usedq"),
]
SANITIZE_CASES = [
    ("small ragged", [0, 1, 17, 200], [5, 130, 17, 0], 2, 1, "pad"),
    ("small used", [70, 3], [200, 90], 2, 2, "used"),
    ("small seqused_k out of range", [70, 3], [200, 90], 2, 2, "clamp"),
    ("small seqused_q", [70, 3], [200, 90], 2, 2, "usedq"),
]


def run_case(kf, case, seed):
    label, lq, lk, Hq, Hkv, extra = case
    lk = list(lq) if lk is None else list(lk)
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cap = [n + (37 if extra == "used" else 0) for n in lk]   # cache capacity per sequence
    given = lk
    if extra == "clamp":
        # past the sequence's keys, or negative: read as clamped to 0 .. cap
        given = [n + 40 if s % 2 == 0 else -5 for s, n in enumerate(cap)]
        lk = [min(max(u, 0), c) for u, c in zip(given, cap)]
    cu_q = [0]
    for n in lq:
        cu_q.append(cu_q[-1] + n)
    cu_k = [0]
    for n in cap:
        cu_k.append(cu_k[-1] + n)
    pad = 23 if extra == "pad" else 0
    Tq, Tk = cu_q[-1] + pad, max(cu_k[-1], 1)
    q = check_fwd.rand((Tq, Hq, kf.head_dim), dt, gen)
    k = check_fwd.rand((Tk, Hkv, kf.head_dim), dt, gen)
    v = check_fwd.rand((Tk, Hkv, kf.head_dim_v), dt, gen)
    dev = q.device
    cq = torch.tensor(cu_q, dtype=torch.int32, device=dev)
    ck = torch.tensor(cu_k, dtype=torch.int32, device=dev)
    used = (torch.tensor(given, dtype=torch.int32, device=dev)
            if extra in ("used", "clamp") else None)
    # seqused_q: half of each sequence's rows, the last one past its rows
    rows_used = [n // 2 for n in lq[:-1]] + [lq[-1] + 5] if extra == "usedq" else list(lq)
    used_q = (torch.tensor(rows_used, dtype=torch.int32, device=dev)
              if extra == "usedq" else None)
    rows_used = [min(u, n) for u, n in zip(rows_used, lq)]

    def call():
        # the outputs poisoned: an element not written stays NaN
        o = torch.full((Tq, Hq, kf.head_dim_v), float("nan"), dtype=dt, device=dev)
        lse = torch.full((Hq, Tq), float("nan"), device=dev)
        mq = 3 * Tq + 7 if extra == "over" else max(lq)
        r = flash_attn_varlen_func(q, k, v, cq, ck, mq, max(lk), seqused_k=used,
                                   seqused_q=used_q, causal=kf.causal,
                                   window_size=(kf.window_left, kf.window_right),
                                   softcap=kf.softcap, kernel=kf, out=o, lse_out=lse)
        assert r[0] is o and r[1] is lse
        torch.cuda.synchronize()
        return o, lse

    o, lse = call()
    res = {"unwritten": 0, "rel_err_o": 0.0, "max_abs_err_lse": 0.0, "empty_rows": 0,
           "empty_rows_ok": True, "ok": True}
    for s, (rows, m) in enumerate(zip(lq, lk)):
        n = rows_used[s]
        q0, k0 = cu_q[s], cu_k[s]
        if rows > n:     # rows past seqused_q: o = 0, lse = -inf
            tail_o, tail_lse = o[q0 + n:q0 + rows].float(), lse[:, q0 + n:q0 + rows]
            tail_ok = bool((tail_o == 0).all().item()) and bool(
                (torch.isinf(tail_lse) & (tail_lse < 0)).all().item())
            res["unused_rows_ok"] = res.get("unused_rows_ok", True) and tail_ok
            res["ok"] &= tail_ok
        if n == 0:
            continue
        ref_o, ref_lse, empty = check_fwd.reference(
            q[q0:q0 + n].unsqueeze(0), k[k0:k0 + m].unsqueeze(0), v[k0:k0 + m].unsqueeze(0),
            kf.scale, kf)
        r = check_fwd.compare(o[q0:q0 + n].unsqueeze(0), lse[:, q0:q0 + n].unsqueeze(0),
                              ref_o, ref_lse, empty)
        res["unwritten"] += r["unwritten"]
        res["rel_err_o"] = max(res["rel_err_o"], r["rel_err_o"])
        res["max_abs_err_lse"] = max(res["max_abs_err_lse"], r["max_abs_err_lse"])
        res["empty_rows"] += r["empty_rows"]
        res["empty_rows_ok"] &= r["empty_rows_ok"]
        res["ok"] &= r["ok"]
    # the rows no sequence owns: untouched (still the poison)
    end = cu_q[-1]
    res["unowned_touched"] = int((~torch.isnan(o[end:].float())).sum().item()
                                 + (~torch.isnan(lse[:, end:])).sum().item())
    o2, lse2 = call()
    same = (torch.equal(o[:end], o2[:end])
            and torch.equal(lse[:, :end].nan_to_num(), lse2[:, :end].nan_to_num()))
    res["repeat_identical"] = bool(same)
    res["ok"] = bool(res["ok"] and res["unowned_touched"] == 0 and same)
    return dict(kernel=kf.kernel, case=label, layout="packed", B=len(lq), Sq=max(lq),
                Skv=max(lk), Hq=Hq, Hkv=Hkv, **res)


def check_errors(kf):
    """Misuse gets a clear error before any launch; no key rows at all
    (Tk = 0) gives o = 0 and lse = -inf without the kernel."""
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    dev = "cuda"
    q = torch.randn(10, 2, kf.head_dim, device=dev).to(dt)
    k = torch.randn(10, 2, kf.head_dim, device=dev).to(dt)
    v = torch.randn(10, 2, kf.head_dim_v, device=dev).to(dt)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32, device=dev)
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)
    cases = [
        ("int64 cu_seqlens", lambda: flash_attn_varlen_func(q, k, v, cu.long(), cu, 6, **kw),
         ValueError, "cu_seqlens_q must be a 1-D torch.int32 tensor"),
        ("short cu_seqlens_k", lambda: flash_attn_varlen_func(q, k, v, cu, cu[:2], 6, **kw),
         ValueError, "cu_seqlens_k must have 3 entries"),
        ("seqused_q of B + 1 entries",
         lambda: flash_attn_varlen_func(q, k, v, cu, cu, 6, seqused_q=cu, **kw),
         ValueError, "seqused_q must have 2 entries"),
        ("q_descale (FP8)", lambda: flash_attn_varlen_func(q, k, v, cu, cu, 6, q_descale=cu,
                                                           **kw),
         NotImplementedError, "q_descale is not supported"),
        ("num_splits 2", lambda: flash_attn_varlen_func(q, k, v, cu, cu, 6, num_splits=2, **kw),
         NotImplementedError, "num_splits is not supported"),
        ("lse_out of the wrong shape",
         lambda: flash_attn_varlen_func(q, k, v, cu, cu, 6, lse_out=torch.empty(10, 2,
                                                                                device=dev),
                                        **kw),
         ValueError, "lse_out must be a contiguous float32 tensor of shape (2, 10)"),
        ("4-D q", lambda: flash_attn_varlen_func(q[None], k, v, cu, cu, 6, **kw),
         ValueError, "q must be 3-D"),
        ("negative max_seqlen_q", lambda: flash_attn_varlen_func(q, k, v, cu, cu, -1, **kw),
         ValueError, "max_seqlen_q must be 0 to 2^31-1"),
    ]
    out = []
    for label, fn, exc, text in cases:
        try:
            fn()
            ok, got = False, "no error"
        except exc as e:
            ok, got = text in str(e), str(e)[:200]
        except Exception as e:  # noqa: BLE001
            ok, got = False, f"{type(e).__name__}: {str(e)[:200]}"
        out.append(dict(kernel=kf.kernel, case=f"error: {label}", ok=ok, error=None if ok else got))
    # no key rows at all
    e = torch.empty(0, 2, kf.head_dim, device=dev, dtype=dt)
    o, lse = flash_attn_varlen_func(q, e, e[..., :kf.head_dim_v], cu,
                                    torch.zeros(3, dtype=torch.int32, device=dev), 6,
                                    return_attn_probs=True, **kw)
    ok = bool((o == 0).all()) and bool(torch.isneginf(lse).all())
    out.append(dict(kernel=kf.kernel, case="no key rows (Tk = 0)", ok=ok))
    return out


def check_compiled(kf):
    """torch.compile(fullgraph=True) of a function calling
    flash_attn_varlen_func: traced as torch.ops.fa3.flash_attn_varlen_fwd,
    the same kernel, so o and lse equal the eager call's bit for bit."""
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(7)
    lens = [300, 17, 129]
    q = check_fwd.rand((sum(lens), 4, kf.head_dim), dt, gen)
    k = check_fwd.rand((sum(lens), 2, kf.head_dim), dt, gen)
    v = check_fwd.rand((sum(lens), 2, kf.head_dim_v), dt, gen)
    cu = torch.tensor([0, 300, 317, 446], dtype=torch.int32, device="cuda")

    def f(q, k, v, cu):
        o, lse = flash_attn_varlen_func(q, k, v, cu, cu, 300, 300, causal=kf.causal,
                                        window_size=(kf.window_left, kf.window_right),
                                        softcap=kf.softcap, return_attn_probs=True, kernel=kf)
        return o.float() * 2, lse

    torch._dynamo.reset()
    eager = f(q, k, v, cu)
    compiled = torch.compile(f, fullgraph=True)
    got = compiled(q, k, v, cu)
    torch.cuda.synchronize()
    ok = torch.equal(eager[0], got[0]) and torch.equal(eager[1], got[1])
    graph = torch._dynamo.explain(f)(q, k, v, cu)
    ok = ok and graph.graph_break_count == 0
    return dict(kernel=kf.kernel, case="torch.compile(fullgraph=True) == eager", ok=bool(ok),
                error=None if ok else f"graph breaks {graph.graph_break_count}")


def check_length_choice(kernels):
    """Where a directory holds a variant's packed kernels for different
    lengths (facts min_seqlen_q), flash_attn_varlen_func without kernel=
    launches the one for the batch's mean query length: its output is bit
    for bit that of the kernel given explicitly, for two sequences whose
    mean is just below and at min_seqlen_q (their lengths unequal)."""
    import os
    from fa3 import torch_api
    torch_api.clear_caches()
    out = []
    for kf in kernels:
        if not kf.min_seqlen_q:
            continue
        same = [k for k in kernels if fa3facts.matches(
            k, kf.dtype, kf.head_dim, kf.head_dim_v, kf.causal,
            (kf.window_left, kf.window_right), kf.softcap, varlen=True)]
        if len(same) < 2:   # (--only left the others out)
            continue
        dt = check_fwd.TORCH_DTYPE[kf.dtype]
        gen = torch.Generator(device="cuda").manual_seed(kf.min_seqlen_q)
        for mean in (kf.min_seqlen_q - 1, kf.min_seqlen_q):
            lens = [mean - 100, mean + 100]
            T = sum(lens)
            cu = torch.tensor([0, lens[0], T], dtype=torch.int32, device="cuda")
            q, k, v = (check_fwd.rand((T, 2, d), dt, gen)
                       for d in (kf.head_dim, kf.head_dim, kf.head_dim_v))
            want = fa3facts.by_length(same, mean)
            kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
                      softcap=kf.softcap)
            got, launched = check_fwd.launched_kernels(lambda: flash_attn_varlen_func(
                q, k, v, cu, cu, max(lens), max(lens),
                kernel_dir=os.path.dirname(kf.facts_path), **kw))
            ref = flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), kernel=want, **kw)
            ok = (launched == [want.kernel] and torch.equal(got, ref)
                  and (want is kf) == (mean >= kf.min_seqlen_q))
            out.append(dict(kernel=kf.kernel, case=f"length choice mean={mean}: {want.kernel}",
                            ok=ok, error=None if ok else f"launched {launched}"))
    return out


def main():
    a = check_fwd.parse_args(__doc__.split("\n\n")[0], "small cases (for compute-sanitizer)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    # (a paged packed batch's kernels take a page table: check_decode.py's
    # packed paged cases run them)
    paged = [k.kernel for k in kernels if k.varlen and k.paged_kv]
    if paged:
        print(f"paged kernels left to check_decode.py: {', '.join(paged)}")
    kernels = [k for k in kernels if k.varlen and not k.paged_kv
               and (not a.only or a.only in k.kernel)]
    if not kernels:
        print(f"no varlen kernels in {a.kernel_dir}")
        return 1
    print(f"seed {a.seed}; {len(kernels)} kernel(s)")
    results, sass = [], {}
    t0 = time.time()
    if not a.sanitize:
        try:
            r = check_compiled(kernels[0])
        except Exception:
            traceback.print_exc()
            r = dict(kernel=kernels[0].kernel, case="torch.compile", ok=False, error="exception")
        results.append(r)
        print(("PASS " if r["ok"] else "FAIL ") + f"{r['case']}: {r.get('error')}", flush=True)
    for i, kf in enumerate(kernels):
        print(f"== {kf.describe()}", flush=True)
        for j, case in enumerate(SANITIZE_CASES if a.sanitize else CASES):
            try:
                r = run_case(kf, case, a.seed + 1000 * i + j)
            except Exception:
                traceback.print_exc()
                r = dict(kernel=kf.kernel, case=case[0], ok=False, error="exception")
            results.append(r)
            print(("PASS " if r["ok"] else "FAIL ") + f"{r['case']}: "
                  + ", ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in r.items() if k not in ("kernel", "case", "ok")),
                  flush=True)
        if not a.sanitize:
            for r in check_errors(kf):
                results.append(r)
                if not r["ok"]:
                    print(f"FAIL {r['case']}: {r.get('error')}")
            sass[kf.kernel] = check_fwd.sass_check(kf)
            print(f"SASS {kf.kernel}: {sass[kf.kernel]}")
    if not a.sanitize:
        try:
            choices = check_length_choice(kernels)
        except Exception:
            traceback.print_exc()
            choices = [dict(kernel=kernels[0].kernel, case="length choice", ok=False,
                            error="exception")]
        for r in choices:
            results.append(r)
            print(("PASS " if r["ok"] else "FAIL ") + r["case"]
                  + ("" if r["ok"] else f": {r.get('error')}"), flush=True)
    nfail = sum(not r["ok"] for r in results) + sum(not s["ok"] for s in sass.values())
    print(f"check_varlen: {len(results) - sum(not r['ok'] for r in results)}/{len(results)} "
          f"cases passed, {nfail} failure(s), {time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        check_fwd.write_report(a.out, records.run_id(now), check_fwd.run_meta(a, now), results,
                               sass, full=not a.only, kind="check_varlen")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
