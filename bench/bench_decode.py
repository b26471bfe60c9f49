#!/usr/bin/env python3
"""Decoding benchmark: one query per sequence over a KV cache (run on an
H100/H200).

hdim 128, bf16, Sq = 1, Hq/Hkv = 32/8 and 64/8, batch 1, 4, 16, 64, 128 x
context 1k, 4k, 16k, 64k, 128k (cells whose K + V cache is over
--max-gb, 40 GB by default, are skipped). Ours:
fa3.torch_api.flash_attn_with_kvcache on a contiguous [B, ctx, Hkv, D]
cache, the split count left to the runtime's heuristic (num_splits 0,
recorded); beside it PyTorch's scaled_dot_product_attention on the same
cache (BHSD views of it, enable_gqa=True; where a backend refuses GQA, K/V
expanded to the q heads, reported as 'exp.'), each of --sdpa backends
(cudnn, flash by default) tried, the fastest named per cell. Same process,
same inputs; ours and SDPA in turn each round, the median of --rounds.

Time: each implementation's calls are captured back to back in a CUDA
graph, replayed, timed with CUDA events (time per call, without the
launch overhead of Python); a cache smaller than 2 x L2 gets copies, each
call reading its own, so that the time is that of a cache read from HBM as
a serving step's is (each layer has its own cache), not from L2.
Bandwidth = K + V bytes (B x ctx x Hkv x (D + Dv) x 2) / time, in TB/s.
Target: >= 80 % of 4.25 TB/s where the K + V read is >= 256 MB. Ours is
compared with SDPA's output (relative L2 error, reported).

    python3 bench/bench_decode.py --kernel-dir DIR [--rounds 3] [--results-dir bench]
    python3 bench/bench_decode.py --kernel-dir DIR --quick    # a smoke run
    python3 bench/bench_decode.py --kernel-dir DIR --paged 64 # + a paged cache
    python3 bench/bench_decode.py --kernel-dir DIR --ctas-per-sm 2  # + two CTAs a SM

With --paged PAGE_SIZE, each cell also times ours on a paged cache
(flash_attn_with_kvcache's page_table): the same K + V memory seen as a pool
of B x ctx / PAGE_SIZE pages of PAGE_SIZE rows ([pages, PAGE_SIZE, Hkv, D]
views of the contiguous caches), each batch's pages a random permutation of
the pool's, so that a batch's keys lie scattered over the whole cache; its
time and bandwidth are reported beside the contiguous one's (same bytes
read), and once per cell the paged call with the identity table must equal
the contiguous call bit for bit.

With --chunk C, each cell also times attention_chunk=C (the decoding step
from its chunk's first key: cache_leftpad moved there) in the same rounds,
beside the same step over the whole cache.

With --fp8, each cell also times ours on an e4m3 copy of the caches and
q (the FP8 decoding kernel, fa3-compile --dtype e4m3 --decode; FA3's [B,
Hkv] descales, here 1.0) in the same rounds: its time, its bandwidth in
its own bytes (half of bf16's), and bf16 / FP8 time.

With --ctas-per-sm N, each cell also times ours launched with
flash_attn_with_kvcache(ctas_per_sm=N) in the same rounds: 1 one CTA a SM
(the same kernel given all the shared memory a block may have), 2 as many
as fit (two for the decoding kernel), reported beside the default launch
(ctas_per_sm 0, the runtime's choice: one a SM from FA3RT_ONE_CTA_KEYS keys
a CTA, else two) as its time and default / N-a-SM time; its output must
equal the default's bit for bit. --one-cta-per-sm is --ctas-per-sm 1.

Appends the run to <results-dir>/history.jsonl (kind bench_decode; the full
grid also rewrites its table in <results-dir>/RESULTS.md: bench/records.py).
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

HEADS = [(32, 8), (64, 8)]
BATCHES = [1, 4, 16, 64, 128]
CONTEXTS = [1024, 4096, 16384, 65536, 131072]
QUICK = dict(heads=[(32, 8)], batches=[1, 16], contexts=[4096, 65536])
D = 128
REPLAY_MS = 10.0      # a graph replay's target length
MAX_CALLS = 200       # calls captured in one graph at most


def kv_bytes(B, ctx, hkv, d=D, dv=D, elem=2):
    return B * ctx * hkv * (d + dv) * elem


def grid(heads, batches, contexts, max_bytes):
    """The cells (hq, hkv, B, ctx) to run and the labels of those skipped
    (K + V over max_bytes)."""
    cells, skipped = [], []
    for hq, hkv in heads:
        for B in batches:
            for ctx in contexts:
                if kv_bytes(B, ctx, hkv) > max_bytes:
                    skipped.append(f"{hq}/{hkv} B={B} ctx={ctx // 1024}k")
                else:
                    cells.append((hq, hkv, B, ctx))
    return cells, skipped


def copies_for(nbytes, l2_bytes, most=64):
    """How many copies of a cache make each call read HBM: enough that they
    span 2 x L2."""
    return max(1, min(most, math.ceil(2 * l2_bytes / max(nbytes, 1))))


def graph_time_us(torch, fns, est_us, replays=5):
    """Time per call of fns (called in turn, one per cache copy) captured
    back to back in a CUDA graph: the median of `replays` timed replays
    after a warm one. Falls back to timing eager calls if capture fails
    (returns (us, "eager") then)."""
    per = max(1, min(MAX_CALLS, round(REPLAY_MS * 1000 / max(est_us, 1.0))))
    calls = max(1, per // len(fns)) * len(fns)     # each copy as often
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns[:2]:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    how = "graph"
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(calls):
                fns[i % len(fns)]()
        run = g.replay
    except Exception:  # noqa: BLE001  (time the calls eagerly)
        torch.cuda.synchronize()
        how = "eager"

        def run():
            for i in range(calls):
                fns[i % len(fns)]()
    run()
    torch.cuda.synchronize()
    ts = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / calls)
    del run
    ts.sort()
    return ts[len(ts) // 2], how


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", required=True, help="the decoding kernels (--decode)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 32/8, B 1 and 16, "
                    "4k and 64k, one round")
    ap.add_argument("--sdpa", default="cudnn,flash",
                    help="SDPA backends to try (cudnn, flash, efficient, math)")
    ap.add_argument("--max-gb", type=float, default=40.0,
                    help="skip cells whose K + V cache is larger (GB)")
    ap.add_argument("--results-dir", default=None,
                    help="where history.jsonl and RESULTS.md are (bench/ for the record)")
    ap.add_argument("--paged", type=int, default=0, metavar="PAGE_SIZE",
                    help="also time a paged cache of PAGE_SIZE-row pages in a shuffled order "
                    "(0: not)")
    ap.add_argument("--num-splits", type=int, default=0,
                    help="ours with this many kv splits (0: the runtime's heuristic), to "
                    "measure the heuristic against a fixed count")
    ap.add_argument("--ctas-per-sm", type=int, default=0, choices=(1, 2), metavar="N",
                    help="also time ours launched with ctas_per_sm=N (1: one CTA a SM, 2: as "
                    "many as fit) in the same rounds, beside the default (0: the runtime's "
                    "choice)")
    ap.add_argument("--one-cta-per-sm", dest="ctas_per_sm", action="store_const", const=1,
                    help="--ctas-per-sm 1")
    ap.add_argument("--fp8", action="store_true",
                    help="also time ours on e4m3 q and caches (the FP8 decoding kernel)")
    ap.add_argument("--chunk", type=int, default=0, metavar="C",
                    help="also time ours with attention_chunk=C in the same rounds")
    ap.add_argument("--heads", default=None, metavar="HQ/HKV,...",
                    help="only these head pairs (e.g. 32/8); default 32/8,64/8")
    ap.add_argument("--batches", default=None, metavar="B,...",
                    help="only these batch sizes; default 1,4,16,64,128")
    ap.add_argument("--contexts", default=None, metavar="CTX,...",
                    help="only these context lengths (keys); default 1024 ... 131072")
    a = ap.parse_args()
    if not 0 <= a.num_splits <= 128:
        ap.error(f"--num-splits: 0 to 128, got {a.num_splits}")
    if a.paged and a.paged < 1:
        ap.error(f"--paged: a page size is at least 1 row, got {a.paged}")

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import records
    from bench_fwd import rel
    from fa3 import facts as fa3facts
    from fa3 import runtime as fa3rt
    from fa3.torch_api import flash_attn_with_kvcache

    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    tried = [b for b in a.sdpa.split(",") if b]
    for b in tried:
        if b not in backends:
            ap.error(f"--sdpa: unknown backend {b!r} (one of {', '.join(backends)})")
    heads, batches, contexts = ((QUICK["heads"], QUICK["batches"], QUICK["contexts"])
                                if a.quick else (HEADS, BATCHES, CONTEXTS))
    try:
        if a.heads:
            heads = [tuple(int(x) for x in p.split("/")) for p in a.heads.split(",")]
            if any(len(p) != 2 or p[0] % p[1] for p in heads):
                raise ValueError("a pair is HQ/HKV with HKV dividing HQ")
        if a.batches:
            batches = [int(x) for x in a.batches.split(",")]
        if a.contexts:
            contexts = [int(x) for x in a.contexts.split(",")]
    except ValueError as e:
        ap.error(f"--heads/--batches/--contexts: {e}")
    if min(batches + contexts + [p for h in heads for p in h]) < 1:
        ap.error("--heads/--batches/--contexts: each value is at least 1")
    rounds = 1 if a.quick else a.rounds
    cells, skipped = grid(heads, batches, contexts, a.max_gb * 1e9)
    kernels, _ = fa3facts.scan_kernel_dir(a.kernel_dir)
    try:
        kf = next(k for k in kernels if fa3facts.matches(k, "bf16", D, D, False, (-1, -1), 0.0,
                                                         decode=True))
    except StopIteration:
        print(f"no bf16 head-dim-{D} decoding kernel (fa3-compile --decode) in {a.kernel_dir}")
        return 1
    kf8 = None
    if a.fp8:
        kf8 = next((k for k in kernels if fa3facts.matches(k, "e4m3", D, D, False, (-1, -1),
                                                            0.0, decode=True)), None)
        if kf8 is None:
            print(f"--fp8: no e4m3 head-dim-{D} decoding kernel (fa3-compile --dtype e4m3 "
                  f"--decode) in {a.kernel_dir}")
            return 1
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    l2 = getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20
    gpu = torch.cuda.get_device_name()
    print(f"GPU {gpu} ({sms} SMs, L2 {l2 / 2**20:.0f} MB); torch {torch.__version__}; kernel "
          f"{kf.kernel}; {len(cells)} cells, skipped {len(skipped)}", flush=True)
    paged_cols = (f" paged {a.paged} us | paged TB/s | paged/ours |" if a.paged else "")
    alt = f"ours {a.ctas_per_sm}/SM"
    alt_cols = (f" {a.ctas_per_sm}/SM us | ours/{a.ctas_per_sm}-SM |" if a.ctas_per_sm
                else "")
    print("| Hq/Hkv | batch | context | K+V MB | copies | splits | ours us | ours TB/s | "
          "SDPA us (backend) | SDPA TB/s | SDPA/ours | rel err |" + paged_cols + alt_cols
          + (f" chunk {a.chunk} us |" if a.chunk else "")
          + (" fp8 us | fp8 TB/s | ours/fp8 |" if a.fp8 else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if a.paged
                                                               else "")
          + ("---|---|" if a.ctas_per_sm else "") + ("---|" if a.chunk else "")
          + ("---|---|---|" if a.fp8 else ""))
    rows = []
    t_start = time.time()
    for hq, hkv, B, ctx in cells:
        nbytes = kv_bytes(B, ctx, hkv)
        n = copies_for(nbytes, l2)
        torch.manual_seed(B * 7 + ctx + hq)
        q = torch.randn(B, 1, hq, D, device="cuda", dtype=torch.bfloat16)
        caches = [(torch.randn(B, ctx, hkv, D, device="cuda", dtype=torch.bfloat16),
                   torch.randn(B, ctx, hkv, D, device="cuda", dtype=torch.bfloat16))
                  for _ in range(n)]
        g = hq // hkv
        tiles = -(-g // kf.block_m) * hkv * B
        splits = a.num_splits or fa3rt.num_splits_heuristic(tiles, -(-ctx // kf.block_n), sms)
        row = dict(hq=hq, hkv=hkv, batch=B, context=ctx, kv_bytes=nbytes, copies=n,
                   splits=splits, kernel=kf.kernel, errors={})
        est_us = nbytes / 3.0e6 + 5.0     # ~3 TB/s plus the launches
        ours_fns = [lambda kc=kc, vc=vc: flash_attn_with_kvcache(q, kc, vc,
                                                                 num_splits=a.num_splits,
                                                                 kernel=kf)
                    for kc, vc in caches]
        qt = q.transpose(1, 2)
        paged_fns = []
        if a.paged and ctx % a.paged == 0:
            # the caches as pools of pages, each batch's pages a random
            # permutation of the pool's (distinct per copy)
            ps, P = a.paged, ctx // a.paged
            gen = torch.Generator(device="cuda").manual_seed(ctx + B)
            tables = [torch.randperm(B * P, generator=gen, device="cuda").view(B, P)
                      .to(torch.int32) for _ in caches]
            pools = [(kc.view(B * P, ps, hkv, D), vc.view(B * P, ps, hkv, D))
                     for kc, vc in caches]
            paged_fns = [lambda kp=kp, vp=vp, t=t: flash_attn_with_kvcache(
                q, kp, vp, page_table=t, num_splits=a.num_splits, kernel=kf)
                for (kp, vp), t in zip(pools, tables)]
            ident = torch.arange(B * P, dtype=torch.int32, device="cuda").view(B, P)
            row["page_size"] = ps
            row["paged_identity_equal"] = bool(torch.equal(
                flash_attn_with_kvcache(q, *pools[0], page_table=ident, num_splits=0, kernel=kf),
                ours_fns[0]()))
        elif a.paged:
            row["errors"]["paged"] = f"context {ctx} is not a multiple of the page size"
        chunk_fns = {}
        if a.chunk:
            chunk_fns = {"ours chunk": [lambda kc=kc, vc=vc: flash_attn_with_kvcache(
                q, kc, vc, attention_chunk=a.chunk, kernel=kf) for kc, vc in caches]}
            row["chunk"] = a.chunk
        if a.fp8:
            f8 = torch.float8_e4m3fn
            q8, one = q.to(f8), torch.ones(B, hkv, device="cuda")
            caches8 = [(kc.to(f8), vc.to(f8)) for kc, vc in caches]
            chunk_fns["ours fp8"] = [lambda k8=k8, v8=v8: flash_attn_with_kvcache(
                q8, k8, v8, q_descale=one, k_descale=one, v_descale=one,
                num_splits=a.num_splits, kernel=kf8) for k8, v8 in caches8]
            row["fp8_kernel"] = kf8.kernel
        alt_fns = []
        if a.ctas_per_sm:
            alt_fns = [lambda kc=kc, vc=vc: flash_attn_with_kvcache(
                q, kc, vc, num_splits=a.num_splits, kernel=kf, ctas_per_sm=a.ctas_per_sm)
                for kc, vc in caches]
            row["alt_equal"] = bool(torch.equal(alt_fns[0](), ours_fns[0]()))

        def sdpa_fns(name, expand):
            def one(kc, vc):
                kt, vt = kc.transpose(1, 2), vc.transpose(1, 2)
                if expand:
                    kt, vt = (t.repeat_interleave(g, dim=1) for t in (kt, vt))

                    def f():
                        with sdpa_kernel(backends[name]):
                            return F.scaled_dot_product_attention(qt, kt, vt)
                else:
                    def f():
                        with sdpa_kernel(backends[name]):
                            return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
                return f
            return [one(kc, vc) for kc, vc in caches]

        # which SDPA backends run here (GQA, else expanded K/V where it fits),
        # and ours against the first one's output
        impls = {"ours": ours_fns}
        if paged_fns:
            impls["ours paged"] = paged_fns
        if alt_fns:
            impls[alt] = alt_fns
        impls.update(chunk_fns)
        ref_err = None
        o_ours = ours_fns[0]()
        for name in tried:
            for expand in (False, True):
                if expand and nbytes * (g + 1) > a.max_gb * 1e9:
                    row["errors"][name] = row["errors"].get(name, "") + \
                        "; K/V expanded would not fit"
                    break
                try:
                    fns = sdpa_fns(name, expand)
                    out = fns[0]()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001
                    row["errors"][name] = (row["errors"].get(name, "") +
                                           f"{'; exp.: ' if expand else ''}"
                                           f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
                    fns = None
                    torch.cuda.synchronize()
                    continue
                label = f"{name} exp." if expand else name
                impls[label] = fns
                if ref_err is None:
                    ref_err = rel(o_ours, out.transpose(1, 2))
                    row["rel_err_vs_sdpa"] = ref_err
                    row["rel_err_ref"] = label
                break
        times = {k: [] for k in impls}
        how = {}
        for _ in range(rounds):
            for name, fns in impls.items():
                try:
                    t, how[name] = graph_time_us(torch, fns, est_us)
                    times[name].append(t)
                except Exception as e:  # noqa: BLE001
                    row["errors"][name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                    torch.cuda.synchronize()
        med = {k: sorted(ts)[len(ts) // 2] for k, ts in times.items() if ts}
        row["us"] = med
        row["timer"] = how
        if "ours" in med:
            row["ours_us"] = med["ours"]
            row["ours_tbs"] = nbytes / med["ours"] / 1e6
        if "ours paged" in med:
            row["paged_us"] = med["ours paged"]
            row["paged_tbs"] = nbytes / med["ours paged"] / 1e6
        if alt in med:
            row["alt_us"] = med[alt]
        for name in chunk_fns:
            if name in med:
                row[name.replace(" ", "_") + "_us"] = med[name]
        sd = {k: t for k, t in med.items()
              if k not in ("ours", "ours paged", alt) and k not in chunk_fns}
        if sd:
            best = min(sd, key=sd.get)
            row["sdpa_backend"], row["sdpa_us"] = best, sd[best]
            row["sdpa_tbs"] = nbytes / sd[best] / 1e6
        if not row["errors"]:
            row.pop("errors")
        rows.append(row)
        f = lambda x, s: "-" if x is None else format(x, s)  # noqa: E731
        ratio = row["sdpa_us"] / row["ours_us"] if "sdpa_us" in row and "ours_us" in row \
            else None
        paged_ratio = row["paged_us"] / row["ours_us"] if "paged_us" in row and \
            "ours_us" in row else None
        alt_ratio = row["ours_us"] / row["alt_us"] if "alt_us" in row and \
            "ours_us" in row else None
        # FP8's bandwidth in its own bytes (one byte an element)
        fp8_tbs = nbytes / 2 / row["ours_fp8_us"] / 1e6 if "ours_fp8_us" in row else None
        fp8_ratio = row["ours_us"] / row["ours_fp8_us"] if "ours_fp8_us" in row and \
            "ours_us" in row else None
        print(f"| {hq}/{hkv} | {B} | {ctx // 1024}k | {nbytes / 2**20:.0f} | {n} | {splits} | "
              f"{f(row.get('ours_us'), '.1f')} | {f(row.get('ours_tbs'), '.2f')} | "
              f"{f(row.get('sdpa_us'), '.1f')} ({row.get('sdpa_backend', '-')}) | "
              f"{f(row.get('sdpa_tbs'), '.2f')} | {f(ratio, '.2f')} | "
              f"{f(row.get('rel_err_vs_sdpa'), '.1e')} |" +
              (f" {f(row.get('paged_us'), '.1f')} | {f(row.get('paged_tbs'), '.2f')} | "
               f"{f(paged_ratio, '.2f')} |" if a.paged else "") +
              (f" {f(row.get('alt_us'), '.1f')} | {f(alt_ratio, '.3f')} |"
               if a.ctas_per_sm else "") +
              (f" {f(row.get('ours_chunk_us'), '.1f')} |" if a.chunk else "") +
              (f" {f(row.get('ours_fp8_us'), '.1f')} | {f(fp8_tbs, '.2f')} | "
               f"{f(fp8_ratio, '.2f')} |" if a.fp8 else ""),
              flush=True)
        print(json.dumps(row), flush=True)
        q = qt = caches = ours_fns = impls = o_ours = None  # free before the next cell
        paged_fns = pools = tables = alt_fns = chunk_fns = caches8 = q8 = None
        torch.cuda.empty_cache()

    date = records.run_id()
    command = "python3 " + " ".join(sys.argv)
    meta = dict(date=date, gpu=gpu, torch=torch.__version__, kernel_dir=a.kernel_dir,
                kernel=kf.kernel, dtype="bf16", hdim=D, sms=sms, l2_bytes=l2, rounds=rounds,
                sdpa_tried=tried, max_gb=a.max_gb, skipped=skipped, paged=a.paged,
                num_splits=a.num_splits, alt_ctas_per_sm=a.ctas_per_sm, chunk=a.chunk,
                fp8=a.fp8,
                timer="CUDA-graph replays, CUDA events",
                seconds=round(time.time() - t_start, 1))
    # the table of record is the shipped configuration's: the heuristic's splits
    full = (not a.quick and set(tried) >= {"cudnn", "flash"} and a.max_gb >= 40.0
            and a.num_splits == 0 and not (a.heads or a.batches or a.contexts)
            and not a.ctas_per_sm and not a.fp8)
    entry = records.new_entry("bench_decode", command, date, full=full, meta=meta, rows=rows)
    print(records.render_bench_decode(entry))
    met = [records.decode_target_met(r) for r in rows]
    print(f"target (>= {records.DECODE_TARGET_TBS:.2f} TB/s where K+V >= 256 MB): met in "
          f"{sum(m for m in met if m)}/{sum(m is not None for m in met)} cells; "
          f"{time.time() - t_start:.0f} s")
    if a.results_dir:
        key = records.record(a.results_dir, entry)
        print(f"appended to {Path(a.results_dir) / records.HISTORY}"
              + (f"; rewrote {key} in {Path(a.results_dir) / records.TABLE}" if key else ""))
    bad = [r for r in rows if "ours_us" not in r or (r.get("rel_err_vs_sdpa") or 0) > 2e-2
           or (a.paged and ("paged_us" not in r or not r.get("paged_identity_equal")))
           or (a.ctas_per_sm and ("alt_us" not in r or not r.get("alt_equal")))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
