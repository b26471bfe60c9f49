#!/usr/bin/env python3
"""FP8 (e4m3) forward TFLOP/s on the FA3-paper grid, beside our bf16 kernel
in the same run (run on an H100/H200).

The grid of bench_fwd.py (16384 tokens, hidden 2048: heads = 2048 // hdim,
seqlen 512..16k, causal and not), every head dim with an FP8 kernel
(fa3-compile --dtype e4m3: 64, 128 and 256) in --kernel-dir. Per cell, on the
same inputs (bench_fwd.paper_inputs' bf16 q, k, v; the FP8 call gets them
quantized by fa3.quantize, outside the timing), in turn each round (median
round of --rounds):
  fp8   flash_attn_func(q8, k8, v8, q_descale=, k_descale=, v_descale=) with
        --descale head ([B, H] per batch and head, FA3's form; default),
        block ([B, H, S / 128]) or none; o bf16;
  bf16  flash_attn_func on the bf16 inputs with the directory's bf16 kernel
        of the variant (skipped where there is none; --no-bf16: never).
TFLOP/s = 4 * B * H * S * S * D / t (half for causal), t the median of
triton.testing.do_bench. The FP8 output is compared with the bf16 one
(relative L2 error: ~5 % expected, e4m3's 3 mantissa bits in q, k, v and P;
above MAX_REL_ERR = 10 % the run fails). The
FA3 column is FlashAttention-3's FP8 forward on the same e4m3 inputs and
descales, timed in turn with ours, where it is importable (bench/peer_fa3.py;
not with --descale block); elsewhere its numbers measured on the H200
(shared/DESIGN.md, "Measured on the GPU machine"; seqlens 512, 2k, 8k and
16k: FA3_FP8_TFLOPS).

    python3 bench/bench_fp8.py --kernel-dir DIR [--hdim 128,256] [--seqlens 512,8192]
        [--causal 0|1|both] [--descale head|block|none] [--rounds 3] [--results-dir bench]

Appends the run to <results-dir>/history.jsonl (kind bench_fp8) and, for
the full grid (no --hdim, --seqlens or --causal filter, --descale head,
bf16 on), rewrites the bench_fp8 section of <results-dir>/RESULTS.md
(bench/records.py).
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

# FlashAttention-3's FP8 e4m3 forward on the H200 (shared/DESIGN.md),
# TFLOP/s by (hdim, causal) and seqlen: the target
FA3_FP8_TFLOPS = {
    (64, False): {512: 352, 2048: 579, 8192: 655, 16384: 670},
    (128, False): {512: 547, 2048: 817, 8192: 904, 16384: 894},
    (256, False): {512: 742, 2048: 1079, 8192: 1080, 16384: 1082},
    (128, True): {512: 331, 2048: 683, 8192: 871, 16384: 905},
    (256, True): {512: 460, 2048: 911, 8192: 1142, 16384: 1091},
}
DESCALES = ("head", "block", "none")
# fp8 vs bf16 output, relative L2: torch's emulation of the FP8 math gives
# 0.052 on these inputs (N(0, 1), per-head scales)
MAX_REL_ERR = 0.1


def fa3_target(hdim, causal, seqlen):
    """FlashAttention-3's FP8 TFLOP/s for the cell, or None where not measured."""
    return FA3_FP8_TFLOPS.get((hdim, bool(causal)), {}).get(seqlen)


def main():
    import torch
    import peer_fa3
    import records
    from bench_fwd import SEQLENS, TOKENS, HIDDEN, paper_inputs, rel, timeit, _do_bench
    from gpu_clock import ClockSampler, medians
    from fa3 import facts as fa3facts
    from fa3 import quantize as fq
    from fa3.torch_api import flash_attn_func

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", default=os.environ.get("FA3_KERNEL_DIR"))
    ap.add_argument("--hdim", default=None,
                    help="comma list of head dims (default: all with an FP8 kernel)")
    ap.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--descale", default="head", choices=DESCALES,
                    help="descale form of the FP8 call (default head: [B, H])")
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warm-up (ms)")
    ap.add_argument("--rep", type=int, default=100, help="do_bench repetitions (ms)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each cell this many rounds (fp8, bf16 in turn) and report "
                         "the median round")
    ap.add_argument("--no-bf16", action="store_true", help="time the FP8 kernels only")
    peer_fa3.add_option(ap)
    ap.add_argument("--results-dir", default=str(ROOT / "bench"),
                    help="where history.jsonl and RESULTS.md are (default: bench/)")
    a = ap.parse_args()
    if not a.kernel_dir:
        ap.error("--kernel-dir (or FA3_KERNEL_DIR) is required")

    kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    for s in skipped:
        print(f"SKIPPED FILE {s}")
    causals = {"0": [False], "1": [True], "both": [False, True]}[a.causal]
    hdims = sorted({k.head_dim for k in kernels if k.dtype == "e4m3" and
                    k.head_dim == k.head_dim_v})
    if a.hdim:
        hdims = [h for h in (int(x) for x in a.hdim.split(",")) if h in hdims]
    seqlens = [int(x) for x in a.seqlens.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name()
    print(f"GPU {gpu}; torch {torch.__version__}; FP8 hdims {hdims}; seqlens {seqlens}; "
          f"descale {a.descale}", flush=True)
    fa3, fa3_about = peer_fa3.load(leave_out="--no-fa3" if a.no_fa3 else None)
    print(fa3_about, flush=True)

    def find(dtype, D, causal, S=0):
        """The kernel flash_attn_func takes for a call of S query rows (facts
        min_seqlen_q; FP8 with block descales: of whole descale blocks), or
        None."""
        found = [k for k in kernels if fa3facts.matches(k, dtype, D, D, causal, (-1, -1), 0.0)]
        return fa3facts.by_length(found, S, dtype == "e4m3" and a.descale == "block") \
            if found else None
    rows = []
    t_start = time.time()
    for D in hdims:
        for causal in causals:
            kf = find("e4m3", D, causal)
            if kf is None:
                print(f"no e4m3 kernel for hdim {D} causal={causal}: skipped")
                continue
            for S in seqlens:
                kf = find("e4m3", D, causal, S)   # the kernel for this length
                kb = None if a.no_bf16 else find("bf16", D, causal, S)
                B, H, q, k, v, flops = paper_inputs(D, S, causal, "bf16")
                live = fa3 is not None and a.descale != "block"  # FA3 takes [B, H] descales
                row = dict(hdim=D, causal=causal, seqlen=S, batch=B, heads=H, kernel=kf.kernel,
                           descale=a.descale,
                           fa3_fp8_tflops=None if live else fa3_target(D, causal, S))
                if live:
                    row["fa3_live"] = True
                if kb is not None:
                    row["bf16_kernel"] = kb.kernel
                if a.descale == "none":
                    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
                    ds = {}
                else:
                    r = fq.quantize_qkv_fp8(q, k, v, hadamard=False,
                                            block=128 if a.descale == "block" else None,
                                            kernel_dir=a.kernel_dir)
                    q8, k8, v8, ds = r.q, r.k, r.v, r.descales
                o8 = torch.empty(B, S, H, D, device="cuda", dtype=torch.bfloat16)
                o = torch.empty_like(o8)

                def fp8():
                    flash_attn_func(q8, k8, v8, causal=causal, kernel=kf, out=o8, **ds)

                def bf16():
                    flash_attn_func(q, k, v, causal=causal, kernel=kb, out=o)
                fns = {"fp8": fp8} if kb is None else {"fp8": fp8, "bf16": bf16}
                if live:
                    fns["fa3"] = peer_fa3.forward(fa3, q8, k8, v8, causal, (
                        ds.get("q_descale"), ds.get("k_descale"), ds.get("v_descale")))
                times = {n: [] for n in fns}
                clocks = {n: [] for n in fns}
                for rnd in range(a.rounds):
                    for name, fn in fns.items():
                        if f"{name}_error" in row:
                            continue
                        try:
                            if rnd == 0:
                                fn()
                                torch.cuda.synchronize()
                            with ClockSampler() as smp:
                                times[name].append(timeit(fn, a.warmup, a.rep))
                            clocks[name].extend(smp.samples)
                        except Exception as e:
                            row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:300]
                for name, ts in times.items():
                    if ts:
                        t = sorted(ts)[len(ts) // 2]
                        row[f"{name}_ms"] = t
                        row[f"{name}_tflops"] = flops / t / 1e9
                    mhz, watts = medians(clocks[name])
                    if mhz is not None:
                        row[f"{name}_sm_mhz"], row[f"{name}_power_w"] = mhz, watts
                if "fp8_ms" in row and "bf16_ms" in row:
                    row["fp8_over_bf16"] = row["fp8_tflops"] / row["bf16_tflops"]
                    row["fp8_rel_err_vs_bf16"] = rel(o8, o)
                if "fa3_tflops" in row:  # measured in this run: it replaces the target
                    row["fa3_fp8_tflops"] = row.pop("fa3_tflops")
                    if "bf16_ms" in row:  # FA3's output against our bf16 kernel's
                        try:
                            row["fa3_rel_err_vs_bf16"] = rel(peer_fa3.output(fns["fa3"]()), o)
                        except Exception as e:
                            row["fa3_error"] = f"{type(e).__name__}: {e}"[:300]
                        if row.get("fa3_rel_err_vs_bf16", 0) > MAX_REL_ERR:
                            print(f"WARNING: FA3's FP8 output differs from our bf16 one at "
                                  f"{D}/{int(causal)}/{S}: rel. L2 error "
                                  f"{row['fa3_rel_err_vs_bf16']:.1e}", flush=True)
                if "fp8_ms" in row and row["fa3_fp8_tflops"]:
                    row["fp8_over_fa3"] = row["fp8_tflops"] / row["fa3_fp8_tflops"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                # free before the next cell (the quantized r and the closures hold q8 ..)
                q = k = v = q8 = k8 = v8 = o = o8 = ds = fns = fn = r = None
                torch.cuda.empty_cache()

    date = records.run_id()
    command = "python3 " + " ".join(sys.argv)
    meta = dict(date=date, gpu=gpu, torch=torch.__version__, command=command,
                kernel_dir=a.kernel_dir, tokens=TOKENS, hidden=HIDDEN, descale=a.descale,
                fa3=fa3_about,
                timer="triton.testing.do_bench median" if _do_bench else "cuda events median",
                warmup_ms=a.warmup, rep_ms=a.rep, rounds=a.rounds,
                seconds=round(time.time() - t_start, 1))
    full = (bool(rows) and not a.hdim and seqlens == SEQLENS and a.causal == "both"
            and a.descale == "head" and not a.no_bf16)
    entry = records.new_entry("bench_fp8", command, date, full=full, meta=meta, rows=rows)
    key = records.record(a.results_dir, entry)
    print(records.render(entry))
    print(f"appended to {Path(a.results_dir) / records.HISTORY}"
          + (f"; rewrote {key} in {Path(a.results_dir) / records.TABLE}" if key else ""))
    bad = [r for r in rows if "fp8_ms" not in r or r.get("fp8_rel_err_vs_bf16", 0) > MAX_REL_ERR]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
