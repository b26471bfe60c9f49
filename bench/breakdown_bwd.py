#!/usr/bin/env python3
"""Where a backward's time goes: the GPU time of each kernel of one
flash_attn_backward (_pre, the kernel, _post), of cuDNN's backward (SDPA)
and of FlashAttention-3's where it imports (bench/peer_fa3.py; its
preprocess, main kernel and dQ conversion as pre, main, post), by
torch.profiler (CUPTI), per cell of the FA3-paper grid; with
several --variant NAME=DIR, kernel directories side by side in the same
process, rounds interleaved (median round per kernel).

    python3 bench/breakdown_bwd.py --variant ours=DIR [--variant new=DIR2]
        [--hdim 64,128] [--seqlens 512,2048] [--causal both] [--rounds 3]
        [--no-cudnn] [--no-fa3] [--deterministic]

Each directory holds the backward kernels and the forward kernels of the
same variants (the first directory's forward makes o and lse).
--deterministic times our deterministic kernels (fa3-compile --backward
--deterministic) instead of the plain ones; the peers stay as they are.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import peer_fa3  # noqa: E402
from bench_bwd import PEERS, sdpa_backward  # noqa: E402
from bench_fwd import paper_inputs  # noqa: E402
from fa3.torch_api import flash_attn_backward, flash_attn_func  # noqa: E402


def kernel_times(fn, reps):
    """{kernel name: mean GPU microseconds per call of fn}."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    tot = {}
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            tot[e.name] = tot.get(e.name, 0.0) + e.device_time / reps
    return tot


def short(name):
    """Our kernels and FA3's by their role (pre, main, post), the others
    (cuDNN's, torch's fills) by a prefix."""
    for suffix in ("_pre", "_post"):
        if name.startswith("fa3_") and name.endswith(suffix):
            return suffix[1:]
    if name.startswith("fa3_"):
        return "main"
    return peer_fa3.backward_role(name) or name[:40]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", required=True, metavar="NAME=DIR")
    ap.add_argument("--hdim", default="64,128")
    ap.add_argument("--seqlens", default="512,2048,8192")
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-cudnn", action="store_true")
    ap.add_argument("--deterministic", action="store_true",
                    help="our deterministic backward kernels")
    peer_fa3.add_option(ap)
    a = ap.parse_args()
    fa3, fa3_about = peer_fa3.load(leave_out="--no-fa3" if a.no_fa3 else None,
                                   dtype=torch.bfloat16)
    print(fa3_about, flush=True)
    variants = dict(v.split("=", 1) for v in a.variant)
    causals = [False, True] if a.causal == "both" else [a.causal == "1"]
    for D in map(int, a.hdim.split(",")):
        for causal in causals:
            for S in map(int, a.seqlens.split(",")):
                B, H, q, k, v, fwd_flops = paper_inputs(D, S, causal)
                first = next(iter(variants.values()))
                o, lse = flash_attn_func(q, k, v, causal=causal, kernel_dir=first,
                                         jit=False, return_lse=True)
                dout = torch.randn_like(o)
                fns = {n: (lambda d=d: flash_attn_backward(
                           dout, q, k, v, o, lse, causal=causal,
                           deterministic=a.deterministic, kernel_dir=d, jit=False))
                       for n, d in variants.items()}
                if not a.no_cudnn:
                    fns["cudnn"], _ = sdpa_backward(PEERS["cudnn"], q, k, v, dout, causal)
                if fa3 is not None:
                    fns["fa3"], _ = peer_fa3.backward(fa3, q, k, v, dout, causal)
                rounds = {n: [] for n in fns}
                for _ in range(a.rounds):
                    for n, fn in fns.items():
                        rounds[n].append(kernel_times(fn, a.reps))
                cell = f"hd{D} {'causal' if causal else 'full'} {S}"
                for n, rs in rounds.items():
                    names = sorted({k for r in rs for k in r})
                    med = {}
                    for k in names:
                        xs = sorted(r.get(k, 0.0) for r in rs)
                        med[short(k)] = med.get(short(k), 0.0) + xs[len(xs) // 2]
                    total = sum(med.values())
                    parts = ", ".join(f"{k} {t:.1f}" for k, t in
                                      sorted(med.items(), key=lambda x: -x[1]))
                    print(f"{cell} {n}: {total:.1f} us ({2.5 * fwd_flops / total / 1e6:.0f} "
                          f"TFLOP/s) = {parts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
