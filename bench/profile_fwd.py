#!/usr/bin/env python3
"""Runs one forward configuration a few times, for a profiler to capture.

    ncu --clock-control none -k regex:fa3_fwd --launch-skip 2 --launch-count 1 \\
        --set full -o prof python3 bench/profile_fwd.py --kernel-dir DIR \\
        --hdim 128 --seqlen 16384 [--causal]

Shapes follow the benchmark (batch * seqlen = 16384, hidden 2048, bf16, BSHD).
With --dtype e4m3 the FP8 kernel runs on q, k, v quantized with per (batch,
head) descales (fa3.quantize's torch path, as bench_fp8's default), which
FA3's FP8 forward takes too.
With --peer fa3, FlashAttention-3's forward runs instead of ours (where it
is importable: bench/peer_fa3.py), for the same profile of its kernel
(its kernel is CUTLASS's `device_kernel`: ncu -k regex:device_kernel).
With --packed ragged|paged (and --kernel-dir holding the varlen kernels,
fa3-compile --varlen [--paged]), bench_varlen's ragged batch instead: the
same 16384 tokens in sequences of random lengths, through
flash_attn_varlen_func (ragged) or, with its keys in a shuffled pool of
--page-size-row pages, flash_attn_with_kvcache(cu_seqlens_q=, page_table=)
(paged): bench_varlen's "paged / ragged" pair, for a profile of each.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

from fa3.torch_api import flash_attn_func  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", help="ours (required unless --peer fa3)")
    ap.add_argument("--peer", choices=["ours", "fa3"], default="ours")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--launches", type=int, default=4)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "e4m3"])
    ap.add_argument("--packed", choices=["", "ragged", "paged"], default="",
                    help="bench_varlen's ragged batch, contiguous or over a paged cache")
    ap.add_argument("--page-size", type=int, default=256, help="rows a page (--packed paged)")
    a = ap.parse_args()
    if a.peer == "ours" and not a.kernel_dir:
        ap.error("--kernel-dir is required for our kernels")
    if a.packed and (a.peer != "ours" or a.dtype != "bf16"):
        ap.error("--packed: our bf16 kernels only")
    if a.packed == "paged" and a.page_size < 1:
        ap.error(f"--page-size: a positive row count, got {a.page_size}")
    if a.packed:
        return packed(a)
    run = None
    if a.peer == "fa3":
        import peer_fa3
        fai, about = peer_fa3.load()
        if fai is None:
            sys.exit(f"profile_fwd: {about}")
    D, S = a.hdim, a.seqlen
    B, H = max(1, 16384 // S), 2048 // D
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    descales = {}
    if a.dtype == "e4m3":
        from fa3.quantize import quantize_qkv_fp8
        r = quantize_qkv_fp8(q, k, v, hadamard=False, block=None, backend="torch")
        q, k, v, descales = r.q, r.k, r.v, r.descales
    if a.peer == "fa3":
        run = peer_fa3.forward(fai, q, k, v, a.causal, (
            descales.get("q_descale"), descales.get("k_descale"), descales.get("v_descale"))
            if descales else None)
    for _ in range(a.launches):
        if run is not None:
            run()
        else:
            flash_attn_func(q, k, v, causal=a.causal, kernel_dir=a.kernel_dir, out=o,
                            **descales)
    torch.cuda.synchronize()
    print(f"ran {a.launches} launches of {a.peer}: hdim {D} seqlen {S} batch {B} heads {H} "
          f"causal {a.causal} {a.dtype}")


def packed(a):
    from bench_varlen import paged_call, ragged_call, ragged_lengths
    D, S = a.hdim, a.seqlen
    H = 2048 // D
    lens = ragged_lengths(S, S + D)  # bench_varlen's seeds
    n = sum(lens)
    q, k, v = (torch.randn(n, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if a.packed == "paged":
        run = paged_call(q, k, v, lens, a.page_size, S + D, a.kernel_dir, causal=a.causal)
    else:
        run = ragged_call(q, k, v, lens, a.kernel_dir, causal=a.causal)
    for _ in range(a.launches):
        run()
    torch.cuda.synchronize()
    print(f"ran {a.launches} launches of the {a.packed} batch: hdim {D} seqlen {S} "
          f"({len(lens)} sequences) heads {H} causal {a.causal}"
          + (f" pages of {a.page_size}" if a.packed == "paged" else ""))


if __name__ == "__main__":
    main()
