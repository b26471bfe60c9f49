#!/usr/bin/env python3
"""Variable-length prefill beside fixed-length batches at equal total tokens
(run on an H100/H200).

The FA3-paper grid's shapes (16384 tokens, hidden 2048: heads = 2048 //
hdim, bf16, seqlen 512..16k, causal and not), each timed three ways in the
same process, in turn each round (median round of --rounds):
  fixed   flash_attn_func on [B, S, H, D] with the fixed-length kernel;
  varlen  flash_attn_varlen_func on the same tokens packed as B sequences of
          S (cu_seqlens 0, S, 2S, ...): the cost of the ragged machinery;
  ragged  flash_attn_varlen_func on sequences of random lengths in
          [S/2, 3S/2) (seeded) filling the same 16384 tokens: what a serving
          batch looks like.
With --paged P also
  paged   flash_attn_with_kvcache(cu_seqlens_q=, page_table=) on the ragged
          batch with its keys in a shuffled pool of P-row pages (a serving
          engine's prefill over a paged cache: the paged varlen kernel,
          fa3-compile --varlen --paged, in the varlen directory), compared
          with ragged's output.
TFLOP/s = 4 * H * D * sum over sequences of Sq * Skv (half for causal) / t;
time: triton.testing.do_bench's median (ms). Each varlen output is compared
with the fixed-length kernel's on the same tokens (relative L2 error). The
issue's target: varlen >= 0.95 x fixed.

    python3 bench/bench_varlen.py --kernel-dir FIXED_DIR --varlen-dir VARLEN_DIR
        [--hdim 64,128,256] [--seqlens 512,2048] [--rounds 3] [--results-dir bench]

Appends the run to <results-dir>/history.jsonl (kind bench_varlen).
"""
import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

import records  # noqa: E402
from bench_fwd import HIDDEN, SEQLENS, TOKENS, rel, timeit  # noqa: E402
from fa3.torch_api import (flash_attn_func, flash_attn_varlen_func,  # noqa: E402
                           flash_attn_with_kvcache)


def ragged_lengths(S, seed):
    """Random lengths in [S/2, 3S/2) summing to TOKENS (the last one cut)."""
    rng = random.Random(seed)
    out, left = [], TOKENS
    while left > 0:
        n = min(left, rng.randrange(max(1, S // 2), max(2, 3 * S // 2)))
        out.append(n)
        left -= n
    return out


def flops(lengths, H, D, causal):
    return 4.0 * H * D * sum(n * n for n in lengths) * (0.5 if causal else 1.0)


def paged_cache(kp, vp, lens, ps, seed):
    """The ragged batch's packed keys and values as a pool of ps-row pages in
    a shuffled order and its int32 page table, one row a sequence."""
    cols = -(-max(lens) // ps)
    n = len(lens)
    g = torch.Generator(device="cuda").manual_seed(seed)
    table = torch.randperm(n * cols, generator=g, device="cuda").to(torch.int32).view(n, cols)
    H, D = kp.shape[1], kp.shape[2]
    kpool = torch.zeros(n * cols, ps, H, D, device="cuda", dtype=kp.dtype)
    vpool = torch.zeros_like(kpool)
    start = 0
    for b, m in enumerate(lens):
        rows = torch.zeros(cols * ps, H, D, device="cuda", dtype=kp.dtype)
        for pool, src in ((kpool, kp), (vpool, vp)):
            rows[:m] = src[start:start + m]
            pool[table[b].long()] = rows.view(cols, ps, H, D)
        start += m
    return kpool, vpool, table


def cu_seqlens(lens):
    return torch.tensor([0] + lens, dtype=torch.int32, device="cuda").cumsum(0).to(torch.int32)


def ragged_call(q, k, v, lens, varlen_dir, **kw):
    """flash_attn_varlen_func on the packed batch of sequences of `lens`."""
    cu = cu_seqlens(lens)
    return lambda: flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens),
                                          kernel_dir=varlen_dir, jit=False, **kw)


def paged_call(q, k, v, lens, page_size, seed, varlen_dir, **kw):
    """flash_attn_with_kvcache(cu_seqlens_q=, page_table=) on the same batch,
    its keys and values in a shuffled pool of page_size-row pages."""
    cu = cu_seqlens(lens)
    kpool, vpool, table = paged_cache(k, v, lens, page_size, seed)
    used = torch.tensor(lens, dtype=torch.int32, device="cuda")
    return lambda: flash_attn_with_kvcache(
        q, kpool, vpool, cache_seqlens=used, page_table=table, cu_seqlens_q=cu,
        max_seqlen_q=max(lens), kernel_dir=varlen_dir, jit=False, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", required=True, help="the fixed-length kernels")
    ap.add_argument("--varlen-dir", required=True, help="the varlen kernels")
    ap.add_argument("--hdim", default="64,128,256")
    ap.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--paged", type=int, default=0, metavar="PAGE_SIZE",
                    help="also time the ragged batch over a paged cache of PAGE_SIZE-row "
                         "pages (flash_attn_with_kvcache with cu_seqlens_q; 0: not)")
    a = ap.parse_args()
    rows = []
    causals = [False, True] if a.causal == "both" else [a.causal == "1"]
    paged_cols = " paged | paged/ragged | rel err paged |" if a.paged else ""
    print("| mask | hdim | seqlen | fixed | varlen | ragged (seqs) | varlen/fixed | rel err |"
          + paged_cols)
    print("|---|---|---|---|---|---|---|---|" + "---|---|---|" * bool(a.paged))
    for D in map(int, a.hdim.split(",")):
        H = HIDDEN // D
        for causal in causals:
            for S in map(int, a.seqlens.split(",")):
                B = max(1, TOKENS // S)
                torch.manual_seed(S + D + causal)
                q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                qp, kp, vp = (t.reshape(B * S, H, D) for t in (q, k, v))
                cu = torch.arange(0, B * S + 1, S, dtype=torch.int32, device="cuda")
                lens = ragged_lengths(S, S + D)
                kw = dict(causal=causal)
                fixed = lambda: flash_attn_func(q, k, v, kernel_dir=a.kernel_dir, jit=False,
                                                **kw)
                var = lambda: flash_attn_varlen_func(qp, kp, vp, cu, cu, S, S,
                                                     kernel_dir=a.varlen_dir, jit=False, **kw)
                rag = ragged_call(qp, kp, vp, lens, a.varlen_dir, **kw)
                err = rel(var().reshape(B, S, H, D), fixed())
                fns = [("fixed", fixed), ("varlen", var), ("ragged", rag)]
                if a.paged:
                    pag = paged_call(qp, kp, vp, lens, a.paged, S + D, a.varlen_dir, **kw)
                    err_paged = rel(pag(), rag())
                    fns.append(("paged", pag))
                times = {name: [] for name, _ in fns}
                for _ in range(a.rounds):
                    for name, fn in fns:
                        times[name].append(timeit(fn, 25, 100))
                t = {n: sorted(ts)[len(ts) // 2] for n, ts in times.items()}
                f_eq = flops([S] * B, H, D, causal)
                tf = {"fixed": f_eq / t["fixed"] / 1e9, "varlen": f_eq / t["varlen"] / 1e9,
                      "ragged": flops(lens, H, D, causal) / t["ragged"] / 1e9}
                row = dict(hdim=D, causal=causal, seqlen=S, batch=B, heads=H,
                           ragged_seqs=len(lens), ms=t, tflops=tf, rel_err_varlen=err,
                           ratio=tf["varlen"] / tf["fixed"])
                extra = ""
                if a.paged:
                    tf["paged"] = flops(lens, H, D, causal) / t["paged"] / 1e9
                    row.update(page_size=a.paged, rel_err_paged=err_paged,
                               paged_ratio=tf["paged"] / tf["ragged"])
                    extra = (f" {tf['paged']:.0f} | {row['paged_ratio']:.2f} | "
                             f"{err_paged:.1e} |")
                rows.append(row)
                print(f"| {'causal' if causal else 'full'} | {D} | {S} | {tf['fixed']:.0f} | "
                      f"{tf['varlen']:.0f} | {tf['ragged']:.0f} ({len(lens)}) | "
                      f"{row['ratio']:.2f} | {err:.1e} |" + extra, flush=True)
    if a.results_dir:
        full = (a.hdim == "64,128,256" and a.causal == "both" and not a.paged
                and a.seqlens == ",".join(map(str, SEQLENS)))
        entry = records.new_entry("bench_varlen", "python3 " + " ".join(sys.argv),
                                  gpu=torch.cuda.get_device_name(), rows=rows, full=full)
        key = records.record(a.results_dir, entry)
        print(f"appended to {Path(a.results_dir) / records.HISTORY}"
              + (f"; rewrote {key} in {Path(a.results_dir) / records.TABLE}" if key else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
