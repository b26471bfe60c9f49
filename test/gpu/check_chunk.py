#!/usr/bin/env python3
"""GPU correctness check of attention_chunk (fa3.chunks) on every route that
takes it, through fa3.torch_api (run on an H100/H200).

    python3 test/gpu/check_chunk.py KERNEL_DIR [--out OUT_DIR]
    python3 test/gpu/check_chunk.py KERNEL_DIR --sanitize   # small cases, for
        `compute-sanitizer --tool memcheck|racecheck python3 ...`

KERNEL_DIR holds head dim 128 kernels, causal and not: the bf16 forward,
backward, varlen, paged varlen and decoding ones and the FP8 forward
(fa3-compile --head-dim 128 [--causal] [--backward | --varlen [--paged] |
--decode | --dtype e4m3]); no JIT.

Cases (chunks of 8 to 1024 keys; GQA 8/2; fresh random inputs):
flash_attn_func folded (Sq == Skv a multiple of the chunk) forward and
backward, FP8 (o bit-identical to each chunk called alone with its
descales, and within check_fp8's tolerance of the dequantized inputs'
reference) and with num_splits (the decoding kernel), and on segments (the variable-length kernel; Sq != Skv, lengths
not a multiple); flash_attn_varlen_func on ragged batches with lengths 0,
1, 17, 1000, 700, seqused_k, more queries than keys; flash_attn_with_kvcache
decoding steps on contiguous (cache_leftpad too) and paged caches (pages of
64, shuffled), with one appended row, and several query rows a batch (the
varlen route) and packed queries; decoding steps captured in CUDA graphs
(chunked, contiguous and paged, and FA3's packed new rows with and
without a chunk) replayed on new inputs bit-identical to eager calls.
Outputs poisoned with NaN; per sequence
against the fp32 reference with the chunk mask applied directly
(fa3.reference.visible_mask): check_fwd's bounds (||o - ref|| / ||ref|| <
1e-2, max |lse - ref| < 1e-3, every owned element written, rows that see no
key 0 and -inf); the backward by FlashAttention's rule (check_bwd's: max
error <= 2 x PyTorch's own bf16 error + 1e-3); appended rows found in the
cache. With --out: appends the run to OUT/history.jsonl. Exit status 1 on
any failure.
"""
import datetime
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test" / "gpu"))

import torch  # noqa: E402

import check_fwd  # noqa: E402  (reference, compare, bounds)
import check_fp8  # noqa: E402  (O_REL_TOL)
import records  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3 import quantize as fq  # noqa: E402
from fa3.reference import visible_mask  # noqa: E402
from fa3.torch_api import (flash_attn_func, flash_attn_varlen_func,  # noqa: E402
                           flash_attn_with_kvcache)

D = 128
SCALE = D ** -0.5
HQ, HKV = 8, 2
BWD_ATOL = 1e-3     # check_bwd's rule: err <= 2 * err_pt + 1e-3


def mask(causal, chunk):
    """check_fwd.reference's variant object for a causal or full mask with a
    chunk (its `chunk`)."""
    return SimpleNamespace(causal=causal, window_left=-1, window_right=0 if causal else -1,
                           softcap=0.0, chunk=chunk)


def rand(shape, gen):
    return torch.randn(*shape, device="cuda", generator=gen).to(torch.bfloat16)


def nan(shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def merge(res, r):
    """check_fwd.compare results summed over a case's sequences."""
    res["unwritten"] = res.get("unwritten", 0) + r["unwritten"]
    res["empty_rows"] = res.get("empty_rows", 0) + r["empty_rows"]
    for key in ("rel_err_o", "max_abs_err_lse"):
        res[key] = max(res.get(key, 0.0), r[key])
    res["ok"] = res.get("ok", True) and r["ok"]
    return res


def check_seq(res, o, lse, q, k, v, causal, chunk):
    """One sequence: o [Sq, Hq, D], lse [Hq, Sq], q [Sq, ...], k, v [Skv, ...]."""
    ref_o, ref_lse, empty = check_fwd.reference(q[None], k[None], v[None], SCALE,
                                                mask(causal, chunk))
    return merge(res, check_fwd.compare(o[None], lse[None], ref_o, ref_lse, empty))


def func_case(kdir, causal, B, Sq, Skv, chunk, gen, grad):
    q, k, v = rand((B, Sq, HQ, D), gen), rand((B, Skv, HKV, D), gen), rand((B, Skv, HKV, D), gen)
    o, lse = nan((B, Sq, HQ, D)), nan((B, HQ, Sq), torch.float32)
    flash_attn_func(q, k, v, softmax_scale=SCALE, causal=causal, attention_chunk=chunk,
                    kernel_dir=kdir, jit=False, out=o, lse_out=lse)
    res = {}
    for b in range(B):
        check_seq(res, o[b], lse[b].contiguous(), q[b], k[b], v[b], causal, chunk)
    if grad:
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        do = rand((B, Sq, HQ, D), gen)
        og = flash_attn_func(*leaves, softmax_scale=SCALE, causal=causal, attention_chunk=chunk,
                             kernel_dir=kdir, jit=False)
        got = torch.autograd.grad(og, leaves, do)
        vis = torch.from_numpy(visible_mask(Sq, Skv, causal, (-1, -1), chunk)).cuda()
        ref = dense_grads([t.float() for t in (q, k, v)], do.float(), vis)
        pt = dense_grads([q, k, v], do, vis)
        for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
            err = (g.float() - r).abs().max().item()
            err_pt = (p.float() - r).abs().max().item()
            res[f"{name}_err"], res[f"{name}_err_pt"] = err, err_pt
            res["ok"] = res["ok"] and err <= 2 * err_pt + BWD_ATOL
    return res


def fp8_fold_case(kdir, causal, B, S, chunk, block, gen):
    """flash_attn_func on e4m3 inputs folded by the chunk (descales per head,
    block None, or per 128 rows, block 128): o bit-identical to each chunk
    called alone with its slice of the descales (the fold's descale mapping),
    and within check_fp8's O_REL_TOL of the fp32 reference on the
    dequantized inputs."""
    q, k, v = rand((B, S, HQ, D), gen), rand((B, S, HKV, D), gen), rand((B, S, HKV, D), gen)
    (q8, qd), (k8, kd), (v8, vd) = (fq.quantize_fp8(t, block=blk, backend="torch")
                                    for t, blk in ((q, block), (k, block), (v, None)))
    o = nan((B, S, HQ, D))
    flash_attn_func(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, softmax_scale=SCALE,
                    causal=causal, attention_chunk=chunk, kernel_dir=kdir, jit=False, out=o)
    alone = torch.empty_like(o)
    per = chunk // 128 if block else 0
    for b in range(B):
        for j in range(S // chunk):
            rows = slice(j * chunk, (j + 1) * chunk)
            cut = [d[b:b + 1, :, j * per:(j + 1) * per] if d.dim() == 3 else d[b:b + 1]
                   for d in (qd, kd)]
            alone[b:b + 1, rows] = flash_attn_func(
                q8[b:b + 1, rows], k8[b:b + 1, rows], v8[b:b + 1, rows], q_descale=cut[0],
                k_descale=cut[1], v_descale=vd[b:b + 1], softmax_scale=SCALE, causal=causal,
                kernel_dir=kdir, jit=False)
    deq = [fq.dequantize_fp8(t, d) for t, d in ((q8, qd), (k8, kd), (v8, vd))]
    ref, _, _ = check_fwd.reference(*deq, SCALE, mask(causal, chunk))
    rel = ((o.float() - ref).norm() / ref.norm()).item()
    same = bool(torch.equal(o, alone))
    # (its own key: the report's rel. error column holds check_fwd's bound)
    return dict(bit_identical_to_chunks_alone=same, fp8_rel_err_o=rel,
                ok=same and rel < check_fp8.O_REL_TOL)


def splits_fold_case(kdir, causal, B, Sq, Skv, chunk, num_splits, gen):
    """flash_attn_func with num_splits (the split-KV decoding kernel) under
    attention_chunk, against the chunk-masked fp32 reference."""
    q, k, v = rand((B, Sq, HQ, D), gen), rand((B, Skv, HKV, D), gen), rand((B, Skv, HKV, D), gen)
    o, lse = flash_attn_func(q, k, v, softmax_scale=SCALE, causal=causal, attention_chunk=chunk,
                             num_splits=num_splits, kernel_dir=kdir, jit=False, return_lse=True)
    res = {}
    for b in range(B):
        check_seq(res, o[b], lse[b].contiguous(), q[b], k[b], v[b], causal, chunk)
    return res


def dense_grads(qkv, do, vis):
    """(dq, dk, dv) by autograd of masked attention in the inputs' dtype
    (rows that see no key: 0)."""
    q, k, v = (t.detach().clone().requires_grad_() for t in qkv)
    g = q.shape[2] // k.shape[2]
    kk, vv = k.repeat_interleave(g, 2), v.repeat_interleave(g, 2)
    s = torch.einsum("bshd,bthd->bhst", q, kk) * SCALE
    empty = ~vis.any(dim=1)
    s = s.masked_fill(~vis, float("-inf")).masked_fill(empty[:, None], 0.0)
    p = torch.softmax(s, -1).masked_fill(empty[:, None], 0.0)
    o = torch.einsum("bhst,bthd->bshd", p, vv)
    return torch.autograd.grad(o, (q, k, v), do)


def varlen_case(kdir, causal, lq, lk, cap, chunk, gen):
    cu_q = [0] + list(torch.tensor(lq).cumsum(0).tolist())
    cu_k = [0] + list(torch.tensor(cap).cumsum(0).tolist())
    Tq, Tk = cu_q[-1] + 5, max(cu_k[-1], 1)
    q, k, v = rand((Tq, HQ, D), gen), rand((Tk, HKV, D), gen), rand((Tk, HKV, D), gen)
    o, lse = nan((Tq, HQ, D)), nan((HQ, Tq), torch.float32)
    i32 = dict(dtype=torch.int32, device="cuda")
    flash_attn_varlen_func(q, k, v, torch.tensor(cu_q, **i32), torch.tensor(cu_k, **i32),
                           max(lq), max(cap), seqused_k=torch.tensor(lk, **i32),
                           softmax_scale=SCALE, causal=causal, attention_chunk=chunk,
                           kernel_dir=kdir, jit=False, out=o, lse_out=lse)
    res = {}
    for s, (n, m) in enumerate(zip(lq, lk)):
        if n:
            q0, k0 = cu_q[s], cu_k[s]
            check_seq(res, o[q0:q0 + n], lse[:, q0:q0 + n].contiguous(), q[q0:q0 + n],
                      k[k0:k0 + m], v[k0:k0 + m], causal, chunk)
    res["unowned_touched"] = int((~torch.isnan(o[cu_q[-1]:].float())).sum().item())
    res["ok"] = res["ok"] and res["unowned_touched"] == 0
    return res


def cache(B, Skv, ps, gen):
    """Caches holding B batches of Skv rows: contiguous [B, Skv, Hkv, D]
    (ps 0) or pools of pages of ps rows with a shuffled table (and spare
    pages); and rows(t, b), batch b's rows of t."""
    if not ps:
        kc, vc = rand((B, Skv, HKV, D), gen), rand((B, Skv, HKV, D), gen)
        return kc, vc, None, lambda t, b: t[b]
    cols = Skv // ps
    pool = B * cols + 7
    kc, vc = rand((pool, ps, HKV, D), gen), rand((pool, ps, HKV, D), gen)
    table = torch.randperm(pool, device="cuda", generator=gen)[:B * cols]
    table = table.to(torch.int32).reshape(B, cols)
    return kc, vc, table, lambda t, b: t[table[b].long()].flatten(0, 1)


def kvcache_case(kdir, causal, B, Skv, ps, lens, chunk, gen, snew=0, leftpad=None, sq=1,
                 packed=None):
    kc, vc, table, rows = cache(B, Skv, ps, gen)
    i32 = dict(dtype=torch.int32, device="cuda")
    cs = torch.tensor(lens, **i32)
    kw = dict(cache_seqlens=cs, page_table=table, softmax_scale=SCALE, causal=causal,
              attention_chunk=chunk, kernel_dir=kdir, jit=False, return_softmax_lse=True)
    kn = vn = None
    if snew:
        kn, vn = rand((B, snew, HKV, D), gen), rand((B, snew, HKV, D), gen)
        kw.update(k=kn, v=vn)
    if leftpad is not None:
        kw["cache_leftpad"] = torch.tensor(leftpad, **i32)
    res = {}
    if packed is None:
        q = rand((B, sq, HQ, D), gen)
        o, lse = flash_attn_with_kvcache(q, kc, vc, **kw)
        spans = [(b, b, sq) for b in range(B)]
        qs = [q[b] for b in range(B)]
        os_ = [o[b] for b in range(B)]
        lses = [lse[b] for b in range(B)]
    else:
        cu = [0] + torch.tensor(packed).cumsum(0).tolist()
        q = rand((cu[-1], HQ, D), gen)
        o, lse = flash_attn_with_kvcache(q, kc, vc, cu_seqlens_q=torch.tensor(cu, **i32),
                                         max_seqlen_q=max(packed), **kw)
        qs = [q[cu[b]:cu[b + 1]] for b in range(B)]
        os_ = [o[cu[b]:cu[b + 1]] for b in range(B)]
        lses = [lse[:, cu[b]:cu[b + 1]] for b in range(B)]
        spans = [(b, b, n) for b, n in enumerate(packed)]
    landed = True
    for b, _, n in spans:
        start = 0 if leftpad is None else leftpad[b]
        end = lens[b] + snew
        kb, vb = rows(kc, b), rows(vc, b)
        if snew:
            landed &= bool(torch.equal(kb[lens[b]:end], kn[b])
                           and torch.equal(vb[lens[b]:end], vn[b]))
        if n:
            check_seq(res, os_[b], lses[b].contiguous(), qs[b], kb[start:end], vb[start:end],
                      causal, chunk)
    res["appended_rows_in_cache"] = landed
    res["ok"] = res.get("ok", True) and landed
    return res


def graph_case(kdir, causal, gen, ps, chunk, packed_new=False):
    """A decoding step with one appended row a batch (chunk > 0: under
    attention_chunk; packed_new: the row passed packed, cu_seqlens_k_new)
    captured in a CUDA graph, replayed twice, the second time after q, the
    new rows and cache_seqlens (advanced by one) change in place: each
    replay's o, lse and caches bit-identical to an eager call on copies of
    the caches as they were (the device-built metadata is in the graph:
    nothing is read on the host)."""
    B, Skv = 3, 2048
    kc, vc, table, _ = cache(B, Skv, ps, gen)
    i32 = dict(dtype=torch.int32, device="cuda")
    lens = torch.tensor([700, 0, 1535], **i32)
    q = rand((B, 1, HQ, D), gen)
    kn = rand((B, 1, HKV, D), gen)
    vn = rand((B, 1, HKV, D), gen)
    kw = dict(page_table=table, softmax_scale=SCALE, causal=causal, attention_chunk=chunk,
              kernel_dir=kdir, jit=False, return_softmax_lse=True)
    if packed_new:
        kw["cu_seqlens_k_new"] = torch.arange(B + 1, **i32)

    def call(kc_, vc_):
        k_, v_ = (kn.flatten(0, 1), vn.flatten(0, 1)) if packed_new else (kn, vn)
        return flash_attn_with_kvcache(q, kc_, vc_, k=k_, v=v_, cache_seqlens=lens, **kw)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):      # loads the kernels, warms the allocator (on copies)
        call(kc.clone(), vc.clone())
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        og, lg = call(kc, vc)
    ok = True
    for step in range(2):
        if step:
            q.copy_(rand(tuple(q.shape), gen))
            kn.copy_(rand(tuple(kn.shape), gen))
            vn.copy_(rand(tuple(vn.shape), gen))
            lens.add_(1)
        k0, v0 = kc.clone(), vc.clone()
        graph.replay()
        oe, le = call(k0, v0)
        torch.cuda.synchronize()
        ok &= bool(torch.equal(og, oe) and torch.equal(lg, le) and torch.equal(kc, k0)
                   and torch.equal(vc, v0))
    return dict(replays_equal_eager=ok, ok=ok)


def cases(sanitize):
    """(label, fn(kdir, causal, gen) -> result fields) of a run."""
    if sanitize:
        return [
            ("func fold 256 / 128 fwd+bwd",
             lambda d, c, g: func_case(d, c, 1, 256, 256, 128, g, True)),
            ("func segments 100 x 300 / 128",
             lambda d, c, g: func_case(d, c, 1, 100, 300, 128, g, False)),
            ("varlen ragged / 128",
             lambda d, c, g: varlen_case(d, c, [0, 1, 130], [5, 0, 200], [5, 3, 200], 128, g)),
            ("kvcache step paged 64 + 1 row / 128",
             lambda d, c, g: kvcache_case(d, c, 2, 512, 64, [300, 0], 128, g, snew=1)),
        ]
    return [
        ("func fold 4096 / 256 fwd+bwd",
         lambda d, c, g: func_case(d, c, 2, 4096, 4096, 256, g, True)),
        ("func fold 1024 / 128 fwd+bwd",
         lambda d, c, g: func_case(d, c, 2, 1024, 1024, 128, g, True)),
        ("func fold FP8 2048 / 512, descales per head",
         lambda d, c, g: fp8_fold_case(d, c, 2, 2048, 512, None, g)),
        ("func fold FP8 1024 / 256, descales per 128 rows",
         lambda d, c, g: fp8_fold_case(d, c, 2, 1024, 256, 128, g)),
        ("func fold num_splits 4, 64 / 64",
         lambda d, c, g: splits_fold_case(d, c, 3, 256, 256, 64, 4, g)),
        ("func fold num_splits 0, 8 / 8",
         lambda d, c, g: splits_fold_case(d, c, 2, 64, 64, 8, 0, g)),
        ("func segments 1000 / 257",
         lambda d, c, g: func_case(d, c, 2, 1000, 1000, 257, g, False)),
        ("func segments 300 x 2000 / 256",
         lambda d, c, g: func_case(d, c, 2, 300, 2000, 256, g, False)),
        ("func segments 700 x 500 / 128 (rows before the first key)",
         lambda d, c, g: func_case(d, c, 1, 700, 500, 128, g, False)),
        ("varlen ragged / 256",
         lambda d, c, g: varlen_case(d, c, [0, 1, 17, 1000, 700], [0, 1, 17, 1000, 4096],
                                     [3, 1, 17, 1000, 4096], 256, g)),
        ("varlen seqused_k, Sq > Skv / 257",
         lambda d, c, g: varlen_case(d, c, [500, 33, 1000], [300, 33, 1500], [400, 40, 1500],
                                     257, g)),
        ("kvcache step contiguous / 1024",
         lambda d, c, g: kvcache_case(d, c, 4, 8192, 0, [8192, 1, 0, 5000], 1024, g)),
        ("kvcache step contiguous + 1 row, leftpad / 1024",
         lambda d, c, g: kvcache_case(d, c, 4, 8192, 0, [3000, 1, 0, 8000], 1024, g, snew=1,
                                      leftpad=[100, 1, 0, 7000])),
        ("kvcache step paged 64 + 1 row / 1024",
         lambda d, c, g: kvcache_case(d, c, 4, 8192, 64, [3072, 1023, 0, 8191], 1024, g,
                                      snew=1)),
        ("kvcache 4 rows paged 64 / 1024 (varlen)",
         lambda d, c, g: kvcache_case(d, c, 3, 4096, 64, [1026, 2000, 4], 1024, g, sq=4)),
        ("kvcache packed q contiguous / 512 (varlen)",
         lambda d, c, g: kvcache_case(d, c, 3, 2048, 0, [600, 2048, 9], 512, g,
                                      packed=[5, 300, 1])),
        ("kvcache CUDA graph: step contiguous + 1 row / 512",
         lambda d, c, g: graph_case(d, c, g, 0, 512)),
        ("kvcache CUDA graph: step paged 64 + 1 row / 512",
         lambda d, c, g: graph_case(d, c, g, 64, 512)),
        ("kvcache CUDA graph: packed new rows, paged 64 / 512",
         lambda d, c, g: graph_case(d, c, g, 64, 512, packed_new=True)),
        ("kvcache CUDA graph: packed new rows, contiguous, no chunk",
         lambda d, c, g: graph_case(d, c, g, 0, 0, packed_new=True)),
    ]


def main():
    a = check_fwd.parse_args(__doc__.split("\n\n")[0], "small cases (for compute-sanitizer)")
    torch.backends.cuda.matmul.allow_tf32 = False
    kernels, _ = fa3facts.scan_kernel_dir(a.kernel_dir)
    print(f"seed {a.seed}; {len(kernels)} kernel(s) in {a.kernel_dir}")
    results = []
    t0 = time.time()
    for ci, causal in enumerate((True, False)):
        for j, (label, fn) in enumerate(cases(a.sanitize)):
            if a.only and a.only not in label:
                continue
            gen = torch.Generator(device="cuda").manual_seed(a.seed + 100 * ci + j)
            name = ("causal" if causal else "full") + ", " + label
            try:
                r = fn(a.kernel_dir, causal, gen)
                torch.cuda.synchronize()
            except Exception as e:
                traceback.print_exc()
                r = dict(ok=False, error=f"{type(e).__name__}: {e}")
            r = dict(kernel=label.split(" ")[0], case=name, **r)
            results.append(r)
            print(("PASS " if r["ok"] else "FAIL ") + f"{name}: "
                  + ", ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in r.items() if k not in ("kernel", "case", "ok")),
                  flush=True)
    nfail = sum(not r["ok"] for r in results)
    print(f"check_chunk: {len(results) - nfail}/{len(results)} cases passed, {nfail} "
          f"failure(s), {time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        check_fwd.write_report(a.out, records.run_id(now), check_fwd.run_meta(a, now), results,
                               {}, full=not a.only, kind="check_chunk")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
