#!/usr/bin/env python3
"""Runs one backward configuration a few times, for a profiler to capture
(bench/NOTES.md, Backward, was profiled so).

    ncu --clock-control none -k regex:fa3_bwd --launch-skip 1 --launch-count 1 \\
        --set full -o prof python3 bench/profile_bwd.py --kernel-dir DIR \\
        --hdim 128 --seqlen 4096 [--causal]

DIR holds the variant's backward and forward kernels (fa3-compile --all
--backward and --all: the forward makes o and lse). The regex matches the
backward kernel and its _pre/_post: pick one with -k's exact name for a
single kernel. Shapes follow the benchmark (batch * seqlen = 16384, hidden
2048, bf16, BSHD). With --peer fa3, FlashAttention-3's backward runs
instead of ours (where it is importable: bench/peer_fa3.py) on the same
inputs. FA3's kernels are all CUTLASS's `device_kernel`; pick its main
backward kernel by its demangled name (ncu --kernel-name-base demangled
-k regex:FlashAttnBwdSm90). One backward runs before the --launches
(the setup computes FA3's gradients once): --launch-skip 1 skips it.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

from bench_fwd import paper_inputs  # noqa: E402
from fa3.torch_api import flash_attn_backward, flash_attn_func  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", help="ours (required unless --peer fa3)")
    ap.add_argument("--peer", choices=["ours", "fa3"], default="ours")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--launches", type=int, default=3)
    a = ap.parse_args()
    if a.peer == "ours" and not a.kernel_dir:
        ap.error("--kernel-dir is required for our kernels")
    if a.peer == "fa3" and a.kernel_dir:
        ap.error("--kernel-dir is for our kernels; --peer fa3 runs FlashAttention-3's")
    D, S = a.hdim, a.seqlen
    # bench_bwd's cell: the same shapes and seeded inputs
    B, H, q, k, v, _ = paper_inputs(D, S, a.causal)
    if a.peer == "fa3":
        import peer_fa3
        fai, about = peer_fa3.load()
        if fai is None:
            sys.exit(f"profile_bwd: {about}")
        dout = torch.randn_like(q)
        run, _ = peer_fa3.backward(fai, q, k, v, dout, a.causal)
    else:
        kw = dict(causal=a.causal, kernel_dir=a.kernel_dir)
        o, lse = flash_attn_func(q, k, v, return_lse=True, **kw)
        dout = torch.randn_like(o)

        def run():
            flash_attn_backward(dout, q, k, v, o, lse, **kw)
    for _ in range(a.launches):
        run()
    torch.cuda.synchronize()
    print(f"ran {a.launches} backward launches of {a.peer}: hdim {D} seqlen {S} batch {B} "
          f"heads {H} causal {a.causal}")


if __name__ == "__main__":
    main()
