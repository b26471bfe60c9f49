#!/usr/bin/env python3
"""What FP8 costs end to end from bf16 inputs: fa3.quantize_qkv_fp8 (block
scales, with and without the Hadamard rotation of q and k) plus the FP8
attention, beside the FP8 attention alone and our bf16 kernel, on the
FA3-paper grid (issue 14: the Hadamard path at most 5 % end to end). The
quantization two ways: the generated kernel (<kernel>_quantize, the
default on the GPU) and the torch ops (backend="torch"), same inputs.

    python3 bench/bench_fp8_quantize.py --kernel-dir DIR [--hdim 128] [--seqlens 2048,8192]
        [--causal 0|1|both]

Medians of triton.testing.do_bench (cuda events without triton), in ms;
"hadamard / plain" is kernel quantize + attention with the rotation over
the same without it. The kernel quantization also alone as the GPU sees it
(its four launches replayed from a CUDA graph: no Python between them),
plain and rotated, in us, and "GB/s" its bytes read and written (2 + 1 per
element of q, k, v) over the rotated graph's time. Prints a table (bench/NOTES.md, FP8, quotes it with its date).
"""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))


def graph_of(torch, fn):
    """fn's launches captured in a CUDA graph (fn run once before, so that
    its kernel is loaded and its constants are on the device)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def main():
    import torch
    from bench_fwd import paper_inputs, timeit
    from fa3 import facts as fa3facts
    from fa3 import quantize as fq
    from fa3.torch_api import flash_attn_func

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", default=os.environ.get("FA3_KERNEL_DIR"))
    ap.add_argument("--hdim", default="128")
    ap.add_argument("--seqlens", default="2048,8192,16384")
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--rep", type=int, default=100)
    a = ap.parse_args()
    if not a.kernel_dir:
        ap.error("--kernel-dir (or FA3_KERNEL_DIR) is required")
    kernels, _ = fa3facts.scan_kernel_dir(a.kernel_dir)
    causals = {"0": [False], "1": [True], "both": [False, True]}[a.causal]
    print(f"GPU {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print("| hdim | mask | seqlen | bf16 attn | fp8 attn | torch quant(H) | kernel quant "
          "| kernel quant(H) | graph us | graph(H) us | GB/s | quant + fp8 | quant(H) + fp8 "
          "| hadamard / plain | quant(H) + fp8 / bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for D in (int(x) for x in a.hdim.split(",")):
        for causal in causals:
            k8s = [k for k in kernels if fa3facts.matches(k, "e4m3", D, D, causal, (-1, -1),
                                                           0.0)]
            kbs = [k for k in kernels if fa3facts.matches(k, "bf16", D, D, causal, (-1, -1),
                                                           0.0)]
            if not k8s:
                continue
            for S in (int(x) for x in a.seqlens.split(",")):
                # the kernels flash_attn_func takes at this length (block
                # descales: of whole descale blocks)
                k8 = fa3facts.by_length(k8s, S, k_block_descales=True)
                kb = fa3facts.by_length(kbs, S) if kbs else None
                _, _, q, k, v, _ = paper_inputs(D, S, causal)
                kd = a.kernel_dir

                def quant(hadamard, backend="kernel"):
                    return fq.quantize_qkv_fp8(q, k, v, block=128, hadamard=hadamard,
                                               backend=backend, kernel_dir=kd)

                r = quant(True)

                def fp8_only():
                    flash_attn_func(r.q, r.k, r.v, causal=causal, kernel=k8, **r.descales)

                def plain():
                    p = quant(False)
                    flash_attn_func(p.q, p.k, p.v, causal=causal, kernel=k8, **p.descales)

                def rotated():
                    p = quant(True)
                    flash_attn_func(p.q, p.k, p.v, causal=causal, kernel=k8, **p.descales)

                t = {"fp8": timeit(fp8_only, a.warmup, a.rep),
                     "torch_q": timeit(lambda: quant(True, "torch"), a.warmup, a.rep),
                     "q": timeit(lambda: quant(False), a.warmup, a.rep),
                     "q_rot": timeit(lambda: quant(True), a.warmup, a.rep),
                     "plain": timeit(plain, a.warmup, a.rep),
                     "rot": timeit(rotated, a.warmup, a.rep)}
                tb = (timeit(lambda: flash_attn_func(q, k, v, causal=causal, kernel=kb),
                             a.warmup, a.rep) if kb is not None else float("nan"))
                g = {h: graph_of(torch, lambda h=h: quant(h)) for h in (False, True)}
                t["g"] = timeit(g[False].replay, a.warmup, a.rep)
                t["g_rot"] = timeit(g[True].replay, a.warmup, a.rep)
                gbs = 3 * (q.numel() + k.numel() + v.numel()) / (t["g_rot"] * 1e-3) / 1e9
                print(f"| {D} | {'causal' if causal else 'full'} | {S} | {tb:.3f} | "
                      f"{t['fp8']:.3f} | {t['torch_q']:.3f} | {t['q']:.3f} | {t['q_rot']:.3f} | "
                      f"{t['g'] * 1e3:.1f} | {t['g_rot'] * 1e3:.1f} | {gbs:.0f} | "
                      f"{t['plain']:.3f} | {t['rot']:.3f} | "
                      f"{t['rot'] / t['plain']:.3f} | {t['rot'] / tb:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
