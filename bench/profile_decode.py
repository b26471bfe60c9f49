#!/usr/bin/env python3
"""Runs one decoding step a few times, for a profiler to capture.

    ncu --clock-control none -k regex:fa3_fwd_d128_bf16_decode_kernel \\
        --launch-skip 2 --launch-count 1 --set full -o prof \\
        python3 bench/profile_decode.py --kernel-dir DIR --paged 1

One query row a batch against a cache of --context keys (bench_decode's
shapes: Hq/Hkv 32/8, head dim 128, bf16 or --dtype e4m3), contiguous or,
with --paged PAGE_SIZE, a pool of PAGE_SIZE-row pages in a shuffled order
(each batch's table a random permutation, as bench_decode's paged column):
where pages of up to block_n / 8 rows are copied by the producer warp
and larger ones boxed by TMA (docs/runtime.md, Paged KV cache), the
profile of each beside the contiguous cache's. --num-splits fixes the
kv splits (0: the runtime's heuristic). --sdpa BACKEND runs PyTorch's
scaled_dot_product_attention with that backend (cudnn, flash, efficient) on
the same contiguous cache instead (BHSD views, enable_gqa=True: bench_decode's
peer call), for a profile of the peer's kernel (ncu -k regex:. there).
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

from fa3.torch_api import flash_attn_with_kvcache  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", required=True, help="the decoding kernels (--decode)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=16384, help="keys a batch")
    ap.add_argument("--heads", default="32/8", metavar="HQ/HKV")
    ap.add_argument("--paged", type=int, default=0, metavar="PAGE_SIZE",
                    help="a paged cache of PAGE_SIZE-row pages (0: contiguous)")
    ap.add_argument("--num-splits", type=int, default=0)
    ap.add_argument("--launches", type=int, default=4)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "e4m3"])
    ap.add_argument("--sdpa", default="", choices=["", "cudnn", "flash", "efficient"],
                    help="profile SDPA with this backend instead of ours (contiguous, bf16)")
    a = ap.parse_args()
    if a.sdpa and (a.paged or a.dtype != "bf16"):
        ap.error("--sdpa: a contiguous bf16 cache (no --paged, no --dtype e4m3)")
    try:
        hq, hkv = (int(x) for x in a.heads.split("/"))
    except ValueError:
        ap.error(f"--heads: HQ/HKV, e.g. 32/8, got {a.heads!r}")
    if a.paged < 0 or (a.paged and a.context % a.paged):
        ap.error(f"--paged: a page size that divides --context {a.context}, got {a.paged}")
    B, S, D = a.batch, a.context, 128
    q = torch.randn(B, 1, hq, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, S, hkv, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    kw = {}
    if a.dtype == "e4m3":
        f8 = torch.float8_e4m3fn
        q, k, v = q.to(f8), k.to(f8), v.to(f8)
        one = torch.ones(B, hkv, device="cuda")
        kw = dict(q_descale=one, k_descale=one, v_descale=one)
    if a.paged:
        ps, P = a.paged, S // a.paged
        table = torch.randperm(B * P, device="cuda").view(B, P).to(torch.int32)
        pool_k = torch.empty((B * P, ps, hkv, D), device="cuda", dtype=k.dtype)
        pool_v = torch.empty_like(pool_k)
        pool_k[table.view(-1).long()] = k.reshape(B * P, ps, hkv, D)
        pool_v[table.view(-1).long()] = v.reshape(B * P, ps, hkv, D)
        k, v, kw["page_table"] = pool_k, pool_v, table
    if a.sdpa:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                   "efficient": SDPBackend.EFFICIENT_ATTENTION}[a.sdpa]
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        with sdpa_kernel(backend):
            for _ in range(a.launches):
                F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
    else:
        for _ in range(a.launches):
            flash_attn_with_kvcache(q, k, v, kernel_dir=a.kernel_dir, num_splits=a.num_splits,
                                   **kw)
    torch.cuda.synchronize()
    print(f"{'SDPA ' + a.sdpa if a.sdpa else 'ours'}: ran {a.launches} decoding steps: B {B} keys {S} heads {hq}/{hkv} {a.dtype} "
          f"{f'pages of {a.paged}' if a.paged else 'contiguous'} splits {a.num_splits or 'heuristic'}")


if __name__ == "__main__":
    main()
