#!/usr/bin/env python3
"""Backward TFLOP/s beside PyTorch SDPA's cuDNN and FlashAttention-2
backward (run on an H100/H200).

The FA3-paper grid (16384 tokens, hidden 2048: heads = 2048 // hdim, seqlen
512..16k, causal and not), bf16 by default. Per cell, in the same process
on the same inputs, in turn each round (median round of --rounds):
  ours    flash_attn_backward (fa3-compile --backward kernels): the three
          kernels (_pre, the kernel, _post), as autograd runs it;
  cudnn   torch.autograd.grad through SDPA with SDPBackend.CUDNN_ATTENTION
          (its forward run once, outside the timing);
  fa2     the same with SDPBackend.FLASH_ATTENTION (FlashAttention-2);
  fa3     FlashAttention-3's backward through its autograd function, where
          it is importable (bench/peer_fa3.py; --no-fa3: never);
  det     with --deterministic: flash_attn_backward(deterministic=True),
          the deterministic kernels (fa3-compile --backward
          --deterministic), whose kv blocks add their dQ tiles in turn.
TFLOP/s = 2.5 x the forward's FLOPs (FlashAttention's convention: 4 B H S^2
D, half for causal) / median time (triton.testing.do_bench). Our dq, dk,
dv are compared with cuDNN's (relative L2 error) as a sanity check.

    python3 bench/bench_bwd.py --kernel-dir BWD_AND_FWD_DIR [--hdim 64,96,128,192,256]
        [--seqlens 512,2048] [--causal both] [--rounds 3] [--deterministic]
        [--results-dir bench]

The directory holds the backward kernels and the forward kernels of the
same variants (the forward makes o and lse). Appends the run to
<results-dir>/history.jsonl (kind bench_bwd).
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import peer_fa3  # noqa: E402
import records  # noqa: E402
from bench_fwd import DTYPES, SEQLENS, paper_inputs, rel, timeit  # noqa: E402

# the backward's head dims (fa3-compile --all --backward)
HDIMS = "64,96,128,192,256"
from fa3.torch_api import flash_attn_backward, flash_attn_func  # noqa: E402

PEERS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}


def sdpa_backward(backend, q, k, v, dout, causal):
    """A closure running SDPA's backward for (q, k, v) in BSHD, its forward
    done once here; and the gradients it computes (BSHD)."""
    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))
    dt = dout.transpose(1, 2)
    with sdpa_kernel(backend):
        o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def run():
        return torch.autograd.grad(o, (qt, kt, vt), dt, retain_graph=True)
    grads = [g.transpose(1, 2) for g in run()]
    return run, grads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--hdim", default=HDIMS)
    ap.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--deterministic", action="store_true",
                    help="also time the deterministic backward kernels (column det; the "
                         "directory must hold them)")
    peer_fa3.add_option(ap)
    a = ap.parse_args()
    fa3, fa3_about = peer_fa3.load(leave_out="--no-fa3" if a.no_fa3 else None,
                                   dtype=DTYPES[a.dtype])
    print(fa3_about, flush=True)
    causals = [False, True] if a.causal == "both" else [a.causal == "1"]
    rows = []
    det_head = " det | det/ours |" if a.deterministic else ""
    fa3_head = " fa3 (ours/fa3), rel err dq, dk, dv vs cuDNN's |" if fa3 is not None else ""
    print(f"| mask | hdim | seqlen | ours | cudnn | fa2 | ours/cudnn | ours/fa2 |{det_head} "
          f"rel err dq, dk, dv |{fa3_head}")
    print("|---|---|---|---|---|---|---|---|" + "---|---|" * a.deterministic + "---|"
          + "---|" * (fa3 is not None))
    for D in map(int, a.hdim.split(",")):
        for causal in causals:
            for S in map(int, a.seqlens.split(",")):
                B, H, q, k, v, fwd_flops = paper_inputs(D, S, causal, a.dtype)
                flops = 2.5 * fwd_flops
                kw = dict(causal=causal, kernel_dir=a.kernel_dir, jit=False)
                o, lse = flash_attn_func(q, k, v, return_lse=True, **kw)
                dout = torch.randn_like(o)
                ours = lambda: flash_attn_backward(dout, q, k, v, o, lse, **kw)
                fns = {"ours": ours}
                if a.deterministic:
                    fns["det"] = lambda: flash_attn_backward(dout, q, k, v, o, lse,
                                                             deterministic=True, **kw)
                errs = None
                for name, backend in PEERS.items():
                    try:
                        fns[name], grads = sdpa_backward(backend, q, k, v, dout, causal)
                    except RuntimeError as e:  # a backend that refuses the shape
                        print(f"  ({name} unavailable: {str(e).splitlines()[0][:80]})")
                        continue
                    if name == "cudnn":
                        errs = [rel(x, y) for x, y in zip(ours(), grads)]
                        ref = grads
                fa3_errs = None
                if fa3 is not None:
                    try:
                        fns["fa3"], grads = peer_fa3.backward(fa3, q, k, v, dout, causal)
                        if errs is not None:
                            fa3_errs = [rel(x, y) for x, y in zip(grads, ref)]
                    except Exception as e:  # e.g. FA3 built without this head dim
                        print(f"  (fa3 failed: {type(e).__name__}: "
                              f"{str(e).splitlines()[0][:80]})")
                times = {n: [] for n in fns}
                for _ in range(a.rounds):
                    for n, fn in fns.items():
                        times[n].append(timeit(fn, 10, 50))
                t = {n: sorted(ts)[len(ts) // 2] for n, ts in times.items()}
                tf = {n: flops / ms / 1e9 for n, ms in t.items()}
                row = dict(hdim=D, causal=causal, seqlen=S, batch=B, heads=H, ms=t,
                           tflops=tf, rel_err=errs)
                if fa3_errs is not None:
                    row["fa3_rel_err"] = fa3_errs
                rows.append(row)
                ratio = lambda p: f"{tf['ours'] / tf[p]:.2f}" if p in tf else "-"
                err = ", ".join(f"{e:.1e}" for e in errs) if errs else "-"
                det = (f" {tf['det']:.0f} | {tf['det'] / tf['ours']:.2f} |"
                       if a.deterministic else "")
                f3 = (f" {tf['fa3']:.0f} ({ratio('fa3')}), "
                      + (", ".join(f"{e:.1e}" for e in fa3_errs) if fa3_errs else "-") + " |"
                      if "fa3" in tf else " - |" if fa3 is not None else "")
                print(f"| {'causal' if causal else 'full'} | {D} | {S} | {tf['ours']:.0f} | "
                      f"{tf.get('cudnn', float('nan')):.0f} | {tf.get('fa2', float('nan')):.0f} | "
                      f"{ratio('cudnn')} | {ratio('fa2')} |{det} {err} |{f3}", flush=True)
                # free the cell's closures (FA3's holds its graph) and gradients
                fns = fn = grads = ref = None
    if a.results_dir:
        full = (a.hdim == HDIMS and a.causal == "both" and a.dtype == "bf16"
                and a.seqlens == ",".join(map(str, SEQLENS)))
        entry = records.new_entry("bench_bwd", "python3 " + " ".join(sys.argv),
                                  gpu=torch.cuda.get_device_name(), rows=rows, full=full,
                                  meta={"dtype": a.dtype, "torch": torch.__version__,
                                        "deterministic": a.deterministic, "fa3": fa3_about})
        key = records.record(a.results_dir, entry)
        print(f"appended to {Path(a.results_dir) / records.HISTORY}"
              + (f"; rewrote {key} in {Path(a.results_dir) / records.TABLE}" if key else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
