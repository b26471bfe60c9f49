#!/usr/bin/env python3
"""A/B timing of compiled kernel variants (run on the GPU machine).

Times the bf16 (or --dtype f16, or e4m3) kernel of each variant directory on the FA3-paper grid (batch *
seqlen = 16384, hidden 2048), interleaved per cell on the same inputs, beside
cuDNN (SDPA) as the common yardstick; checks each output against cuDNN's. This
is how an optimisation is measured before/after in one run (bench/NOTES.md):

    python3 bench/compare_fwd.py --variant base=DIR_A --variant new=DIR_B \\
        [--runtime base=OLD/libfa3rt.so] \\
        [--hdim 64,128] [--seqlens 512,4096] [--causal 0|1|both] [--results-dir DIR]

With --dtype e4m3 every variant's FP8 kernel gets the same quantized inputs
(per (batch, head) descales, or --descale block: one per 128 rows of q and
k; fa3.quantize's torch path, outside the timing);
cuDNN still runs the bf16 inputs, as yardstick and reference (error bound
MAX_ERR["e4m3"]: e4m3's 3 mantissa bits).

--runtime binds a variant's kernels to another libfa3rt (one built from the
commit that compiled them), so kernels of an older kernel ABI are timed beside
current ones in the same process.

Appends the run (date, GPU, command, variants, rows) to
<results-dir>/history.jsonl (default: bench/; bench/records.py) and prints its
table.
"""
import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import records  # noqa: E402
from bench_fwd import HIDDEN, SEQLENS, TOKENS, paper_inputs, parse_hdims, rel, timeit  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3 import runtime  # noqa: E402
from fa3 import quantize as fq  # noqa: E402
from fa3.torch_api import flash_attn_func  # noqa: E402
from bench_fp8 import MAX_REL_ERR as MAX_ERR_E4M3  # noqa: E402

# Relative L2 error vs cuDNN above which a variant's output fails the run:
# 16-bit inputs round once (~4e-3); e4m3 inputs and P (3 mantissa bits)
# give ~5e-2, bound as bench_fp8.py's.
MAX_ERR = {"bf16": 2e-2, "f16": 2e-2, "e4m3": MAX_ERR_E4M3}


def round_order(names, r):
    """The runs' order in round r, rotated by r, so that over rounds each
    run takes each place in turn: with one fixed order, two identical
    kernels read 0.99-1.06 of each other, the later one 1.4 % ahead on
    average (H100, bench/NOTES.md, "A run's place in its round")."""
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", required=True, metavar="LABEL=DIR",
                    help="a kernel directory to time (give two or more)")
    ap.add_argument("--runtime", action="append", default=[], metavar="LABEL=LIB",
                    help="the libfa3rt.so that launches variant LABEL's kernels "
                         "(default: the current one)")
    ap.add_argument("--hdim", default="64,128,256",
                    help="comma list of D or D:Dv (value head dim)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "e4m3"])
    ap.add_argument("--descale", default="head", choices=["head", "block"],
                    help="e4m3: per (batch, head) descales (default, FA3's form) or block "
                         "scales, one per 128 rows of q and k")
    ap.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warm-up (ms)")
    ap.add_argument("--rep", type=int, default=100, help="do_bench repetitions (ms)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each cell this many rounds (cuDNN and every variant in "
                         "turn, each round's order rotated by one) and report the median")
    ap.add_argument("--results-dir", default=str(ROOT / "bench"),
                    help="where history.jsonl is (default: bench/)")
    a = ap.parse_args()

    variants = []
    for v in a.variant:
        label, sep, d = v.partition("=")
        if not sep or not label or not d:
            ap.error(f"--variant takes LABEL=DIR, got {v!r}")
        kernels, skipped = fa3facts.scan_kernel_dir(d)
        for s in skipped:
            print(f"SKIPPED FILE {s}")
        variants.append((label, d, kernels))
    libraries = {}
    for r in a.runtime:
        label, sep, path = r.partition("=")
        if not sep or label not in [v[0] for v in variants]:
            ap.error(f"--runtime takes LABEL=LIB with the LABEL of a --variant, got {r!r}")
        libraries[label] = runtime.load_library(Path(path).resolve())
    causals = {"0": [False], "1": [True], "both": [False, True]}[a.causal]
    hdims = parse_hdims(a.hdim)
    seqlens = [int(x) for x in a.seqlens.split(",")]
    labels = [v[0] for v in variants]
    gpu = torch.cuda.get_device_name()
    print(f"GPU {gpu}; variants {labels}; hdims {hdims}; seqlens {seqlens}", flush=True)

    rows = []
    t_start = time.time()
    for D, Dv in hdims:
        for causal in causals:
            candidates = {}   # label -> the variant's kernels (one per length range)
            for label, d, kernels in variants:
                found = [k for k in kernels if fa3facts.matches(
                    k, a.dtype, D, Dv, causal, (-1, -1), 0.0)]
                if found:
                    candidates[label] = found
            if not candidates:
                continue
            for S in seqlens:
                fp8 = a.dtype == "e4m3"
                B, H, q, k, v, flops = paper_inputs(D, S, causal, "bf16" if fp8 else a.dtype,
                                                    Dv)
                row = dict(hdim=D, causal=causal, seqlen=S, batch=B, heads=H)
                if Dv != D:
                    row["hdim_v"] = Dv
                qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                ref = ref.transpose(1, 2)

                runs = {"cudnn": lambda: F.scaled_dot_product_attention(
                    qt, kt, vt, is_causal=causal)}
                qkv, ds = (q, k, v), {}
                if fp8:
                    r = fq.quantize_qkv_fp8(q, k, v, hadamard=False,
                                            block=128 if a.descale == "block" else None,
                                            backend="torch")
                    qkv, ds = (r.q, r.k, r.v), r.descales
                for label, found in candidates.items():
                    # the kernel flash_attn_func takes for this length (facts
                    # min_seqlen_q; FP8 block descales: whole descale blocks)
                    kf = fa3facts.by_length(found, S, fp8 and a.descale == "block")
                    o = torch.full_like(v, float("nan"))  # [B, S, H, Dv], as o

                    def ours(kf=kf, o=o):
                        flash_attn_func(*qkv, causal=causal, kernel=kf, out=o, **ds)
                    try:
                        # the first call loads the kernel, with the variant's library
                        with (runtime.loading_with(libraries[label]) if label in libraries
                              else contextlib.nullcontext()):
                            ours()
                        torch.cuda.synchronize()
                        row[f"{label}_err"] = rel(o, ref)
                        runs[label] = ours
                    except Exception as e:
                        row[f"{label}_error"] = f"{type(e).__name__}: {e}"[:300]
                # rounds interleave all runs, so a clock drift hits each alike,
                # each round in another order
                times = {name: [] for name in runs}
                for rnd in range(a.rounds):
                    for name in round_order(list(runs), rnd):
                        fn = runs[name]
                        with (sdpa_kernel(SDPBackend.CUDNN_ATTENTION) if name == "cudnn"
                              else contextlib.nullcontext()):
                            times[name].append(timeit(fn, a.warmup, a.rep))
                for name, ts in times.items():
                    row[f"{name}_tflops"] = flops / statistics.median(ts) / 1e9
                rows.append(row)
                print(json.dumps(row), flush=True)
                q = k = v = qt = kt = vt = ref = qkv = ds = None  # free before the next cell
                torch.cuda.empty_cache()

    date = records.run_id()
    command = "python3 " + " ".join(sys.argv)
    meta = dict(date=date, gpu=gpu, torch=torch.__version__, command=command,
                variants={v[0]: v[1] for v in variants},
                runtimes={r.partition("=")[0]: r.partition("=")[2] for r in a.runtime},
                dtype=a.dtype, tokens=TOKENS,
                **({"descale": a.descale} if a.dtype == "e4m3" else {}),
                hidden=HIDDEN,
                warmup_ms=a.warmup, rep_ms=a.rep, rounds=a.rounds, seconds=round(time.time() - t_start, 1))
    records.record(a.results_dir, records.new_entry("compare", command, date, meta=meta,
                                                    rows=rows))

    def cell(r, key):
        x = r.get(key)
        return "-" if x is None else f"{x:.0f}"
    base = labels[0]
    md = [f"# compare_fwd {date}", "", f"GPU: {gpu}; torch {torch.__version__}", "",
          f"Command: `{command}`", "",
          "Variants: " + ", ".join(f"{lbl} = `{d}`" for lbl, d, _ in variants), "",
          f"{a.dtype} TFLOP/s (do_bench medians, interleaved per cell on the same inputs"
          + (f", median of {a.rounds} rounds" if a.rounds > 1 else "") + "); "
          f"ratios are over `{base}`; err = rel. L2 error vs cuDNN.", "",
          "| hdim | causal | seqlen | cuDNN | " + " | ".join(labels) + " | " +
          " | ".join(f"{lbl}/{base}" for lbl in labels[1:]) + " | max err |",
          "|---" * (4 + 2 * len(labels)) + "|"]
    for r in rows:
        ratios = []
        for lbl in labels[1:]:
            x, y = r.get(f"{lbl}_tflops"), r.get(f"{base}_tflops")
            ratios.append("-" if x is None or y is None else f"{x / y:.2f}")
        errs = [r[k] for k in r if k.endswith("_err")]
        err = f"{max(errs):.1e}" if errs else "-"
        md.append(f"| {records.hdim_label(r)} | {int(r['causal'])} | {r['seqlen']} | "
                  f"{cell(r, 'cudnn_tflops')} | " +
                  " | ".join(cell(r, f"{lbl}_tflops") for lbl in labels) + " | " +
                  " | ".join(ratios) + f" | {err} |")
    failures = [f"- {records.hdim_label(r)}/{int(r['causal'])}/{r['seqlen']}: {k}: {v}"
                for r in rows for k, v in r.items() if k.endswith("_error")]
    if failures:
        md += ["", "Errors:"] + failures
    print("\n".join(md))
    print(f"appended to {Path(a.results_dir) / records.HISTORY}")
    bad = failures or [r for r in rows for k, v in r.items()
                       if k.endswith("_err") and v > MAX_ERR[a.dtype]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
