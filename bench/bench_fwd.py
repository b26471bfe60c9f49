#!/usr/bin/env python3
"""Forward attention benchmark on the FA3-paper grid (run on an H100/H200).

batch * seqlen = 16384, hidden 2048 (heads = 2048 // hdim: 10 at hdim 192),
bf16 (or --dtype f16), seqlen 512..16k, every head dim (and value head dim,
as 192:128) with a compiled kernel of that dtype, causal and not. Ours
(fa3.torch_api.flash_attn_func) beside PyTorch SDPA with the cuDNN backend and
the FlashAttention-2 backend, and FlashAttention-3 where it is importable
(bench/peer_fa3.py), in the same process on the same inputs (SDPA gets BHSD
views of the same BSHD tensors). Time: triton.testing.do_bench median (ms);
TFLOP/s = 2 * B * H * S * S * (D + Dv) / t (half for causal; 4 * ... * D where
Dv = D). Every output is compared with cuDNN's (relative L2 error).

    python3 bench/bench_fwd.py --kernel-dir DIR [--hdim 128,192:128] [--seqlens 1024,4096]
        [--causal 0|1|both] [--results-dir bench]

Appends the run (date, GPU, command, rows) to <results-dir>/history.jsonl and,
for the full grid (no --hdim, --seqlens or --causal filter, baselines on),
rewrites its dtype's table in <results-dir>/RESULTS.md (bench/records.py).
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import peer_fa3  # noqa: E402
import records  # noqa: E402
from gpu_clock import ClockSampler, medians  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3.torch_api import flash_attn_func  # noqa: E402

try:
    from triton.testing import do_bench as _do_bench
except Exception:  # pragma: no cover - triton is on the GPU machine
    _do_bench = None

TOKENS = 16384
HIDDEN = 2048
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]


def timeit(fn, warmup, rep):
    if _do_bench is not None:
        return _do_bench(fn, warmup=warmup, rep=rep, return_mode="median")
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def paper_inputs(D, S, causal, dtype="bf16", Dv=None):
    """The FA3-paper grid cell (hdim D, value hdim Dv (None: D), seqlen S):
    batch, heads, seeded random q, k, v (bf16 or f16) in BSHD, and the FLOP
    count (half for causal)."""
    Dv = D if Dv is None else Dv
    B, H = max(1, TOKENS // S), HIDDEN // D
    torch.manual_seed(S + D + causal)
    q, k, v = (torch.randn(B, S, H, d, device="cuda", dtype=DTYPES[dtype])
               for d in (D, D, Dv))
    return B, H, q, k, v, 2.0 * B * H * S * S * (D + Dv) * (0.5 if causal else 1.0)


def parse_hdims(text):
    """"128,192:128" -> [(128, 128), (192, 128)] (D or D:Dv)."""
    out = []
    for item in text.split(","):
        d, _, dv = item.partition(":")
        out.append((int(d), int(dv or d)))
    return out


def rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", default=os.environ.get("FA3_KERNEL_DIR"))
    ap.add_argument("--hdim", default=None,
                    help="comma list of D or D:Dv (default: all with a kernel of --dtype)")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warm-up (ms)")
    ap.add_argument("--rep", type=int, default=100, help="do_bench repetitions (ms)")
    ap.add_argument("--no-baselines", action="store_true", help="time ours only")
    peer_fa3.add_option(ap)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each cell this many rounds (ours, cuDNN, FA2, FA3 in "
                         "turn each round) and report the median round: one "
                         "cell's time moves by up to 5 %% from run to run")
    ap.add_argument("--results-dir", default=str(ROOT / "bench"),
                    help="where history.jsonl and RESULTS.md are (default: bench/)")
    a = ap.parse_args()
    if not a.kernel_dir:
        ap.error("--kernel-dir (or FA3_KERNEL_DIR) is required")

    kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    for s in skipped:
        print(f"SKIPPED FILE {s}")
    causals = {"0": [False], "1": [True], "both": [False, True]}[a.causal]
    hdims = sorted({(k.head_dim, k.head_dim_v) for k in kernels if k.dtype == a.dtype})
    if a.hdim:
        hdims = [h for h in parse_hdims(a.hdim) if h in hdims]
    seqlens = [int(x) for x in a.seqlens.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name()
    print(f"GPU {gpu}; torch {torch.__version__}; hdims {hdims}; seqlens {seqlens}", flush=True)
    fa3, fa3_about = peer_fa3.load(
        leave_out="--no-fa3" if a.no_fa3 else "--no-baselines" if a.no_baselines else None,
        dtype=DTYPES[a.dtype])
    print(fa3_about, flush=True)

    rows = []
    t_start = time.time()
    for D, Dv in hdims:
        for causal in causals:
            try:
                candidates = fa3facts.select_kernels(kernels, a.dtype, D, Dv, causal,
                                                     (-1, -1), 0.0)
            except LookupError:
                print(f"no {a.dtype} kernel for hdim {D}:{Dv} causal={causal}: skipped")
                continue
            for S in seqlens:
                # the kernel flash_attn_func would take for this length (facts
                # min_seqlen_q: the compiler's kernel for long sequences)
                kf = fa3facts.by_length(candidates, S)
                B, H, q, k, v, flops = paper_inputs(D, S, causal, a.dtype, Dv)
                row = dict(hdim=D, causal=causal, seqlen=S, batch=B, heads=H, kernel=kf.kernel,
                           dtype=a.dtype)
                if Dv != D:
                    row["hdim_v"] = Dv
                o = q.new_empty(B, S, H, Dv)

                def ours():
                    flash_attn_func(q, k, v, causal=causal, kernel=kf, out=o)
                qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                ref = None
                run_fa3 = None
                times = {"ours": [], "cudnn": [], "fa2": [], "fa3": []}
                clocks = {"ours": [], "cudnn": [], "fa3": []}  # (MHz, W) samples while timed

                def timed(name, fn):
                    with ClockSampler() as s:
                        times[name].append(timeit(fn, a.warmup, a.rep))
                    if name in clocks:
                        clocks[name].extend(s.samples)
                for rnd in range(a.rounds):
                    if "ours_error" not in row:
                        try:
                            if rnd == 0:
                                ours()
                                torch.cuda.synchronize()
                            timed("ours", ours)
                        except Exception as e:
                            row["ours_error"] = f"{type(e).__name__}: {e}"[:300]
                    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                     ("fa2", SDPBackend.FLASH_ATTENTION)):
                        if a.no_baselines or f"{name}_error" in row:
                            continue
                        try:
                            with sdpa_kernel(be):
                                if rnd == 0:
                                    out = F.scaled_dot_product_attention(
                                        qt, kt, vt, is_causal=causal)
                                    if name == "cudnn":
                                        ref = out.transpose(1, 2)
                                    elif ref is not None:
                                        row["fa2_rel_err_vs_cudnn"] = rel(
                                            out.transpose(1, 2), ref)
                                timed(name, lambda: F.scaled_dot_product_attention(
                                    qt, kt, vt, is_causal=causal))
                        except Exception as e:
                            row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:300]
                    if fa3 is not None and "fa3_error" not in row:
                        try:
                            run_fa3 = peer_fa3.forward(fa3, q, k, v, causal)
                            if rnd == 0 and ref is not None:
                                row["fa3_rel_err_vs_cudnn"] = rel(
                                    peer_fa3.output(run_fa3()), ref)
                            timed("fa3", run_fa3)
                        except Exception as e:
                            row["fa3_error"] = f"{type(e).__name__}: {e}"[:300]
                for name, ts in times.items():
                    if ts:
                        t = sorted(ts)[len(ts) // 2]
                        row[f"{name}_ms"] = t
                        row[f"{name}_tflops"] = flops / t / 1e9
                for name, samples in clocks.items():
                    mhz, watts = medians(samples)
                    if mhz is not None:
                        row[f"{name}_sm_mhz"], row[f"{name}_power_w"] = mhz, watts
                if ref is not None and "ours_ms" in row:
                    row["ours_rel_err_vs_cudnn"] = rel(o, ref)
                    row["ours_over_cudnn"] = row["ours_tflops"] / row["cudnn_tflops"]
                if "ours_tflops" in row and "fa3_tflops" in row:
                    row["ours_over_fa3"] = row["ours_tflops"] / row["fa3_tflops"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                q = k = v = o = qt = kt = vt = ref = run_fa3 = None  # free before the next cell
                torch.cuda.empty_cache()

    date = records.run_id()
    command = "python3 " + " ".join(sys.argv)
    meta = dict(date=date, gpu=gpu, torch=torch.__version__, command=command,
                kernel_dir=a.kernel_dir, dtype=a.dtype, tokens=TOKENS, hidden=HIDDEN,
                fa3=fa3_about,
                timer="triton.testing.do_bench median" if _do_bench else "cuda events median",
                warmup_ms=a.warmup, rep_ms=a.rep, rounds=a.rounds,
                seconds=round(time.time() - t_start, 1))
    full = (bool(rows) and not a.hdim and seqlens == SEQLENS and a.causal == "both"
            and not a.no_baselines)
    entry = records.new_entry("bench", command, date, full=full, meta=meta, rows=rows)
    key = records.record(a.results_dir, entry)
    print(records.render_bench(entry))
    print(f"appended to {Path(a.results_dir) / records.HISTORY}"
          + (f"; rewrote {key} in {Path(a.results_dir) / records.TABLE}" if key else ""))
    if full:  # the plot of record beside the table, where matplotlib exists
        try:
            import plot
            print("plotted", plot.plot(entry, Path(a.results_dir) / f"RESULTS-{a.dtype}.png"))
        except ImportError:
            print("no matplotlib: plot later with python3 bench/plot.py --dtype", a.dtype)
    for r in rows:  # a peer that disagrees with cuDNN makes its ratio meaningless
        if r.get("fa3_rel_err_vs_cudnn", 0) > 2e-2:
            print(f"WARNING: FA3's output differs from cuDNN's at {r['hdim']}/{r['causal']}/"
                  f"{r['seqlen']}: rel. L2 error {r['fa3_rel_err_vs_cudnn']:.1e}")
    bad = [r for r in rows if "ours_ms" not in r or r.get("ours_rel_err_vs_cudnn", 0) > 2e-2]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
