#!/usr/bin/env python3
"""The host work of one eager fa3.torch_api.flash_attn_func call, on the CPU.

A short attention's time under do_bench is host work beyond what its L2
flush hides (~55 us on the H200), so the Python path's cost is a number to
keep down. This times it without a GPU: torch's FakeTensorMode gives CUDA
tensors without data, and the kernel lookup, the launch and the CUDA calls
(device guard and stream, torch_api._launch; capture query) are stubbed,
so what is timed is our checks and argument building (plus the fake
tensors' own dispatch: real tensors cost less, and a fake allocation costs
far more than a real one, so the allocating calls, the backward's five
tensors above all, read high; a fake tensor's `is_cuda` alone costs ~10
us, a real one's 0.07). Use it to compare the Python work before and
after a change, not as the call's cost, which includes the launch path
stubbed here (bench/NOTES.md, Next item 9). On the GPU machine,
test/gpu/check_torch.py --overhead-only times the real call.

  python3 bench/host_overhead.py [--call func|kvcache|backward] [--dtype bf16|e4m3]
                                 [--calls N] [--profile] [--unplanned]

func: flash_attn_func, B=1 S=128 H=1 D=128 (e4m3 with FA3's [B, Hkv]
descales); kvcache: flash_attn_with_kvcache, a decoding step (B=1, one
query row, 32 q heads over 8 kv heads, D=128, a 4096-row cache with int32
cache_seqlens); backward: flash_attn_backward at func's shape (its three
kernels one launch).

A repeated eager flash_attn_func call runs from its launch plan
(torch_api._plans: the checks and the argument building skipped);
--unplanned forgets the plans before each call, to time those.

Prints the mean microseconds a call (best of 3 batches) and how many calls
reached the (stubbed) launch; --profile adds cProfile's top functions by own
time. Needs torch (no GPU).
"""
import argparse
import cProfile
import pstats
import sys
import time
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--call", default="func", choices=["func", "kvcache", "backward"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "e4m3"])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--unplanned", action="store_true",
                    help="forget the launch plans before each call (times the checks)")
    a = ap.parse_args(argv)
    if a.call != "func" and a.dtype == "e4m3":
        ap.error(f"--call {a.call} takes bf16 or f16 (FP8 is a forward kernel only)")
    try:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
    except ImportError:
        sys.exit("host_overhead: needs torch (pip install torch; no GPU needed)")
    from fa3 import torch_api

    class Kernel:  # a loaded kernel that launches nothing (and counts the calls)
        facts = types.SimpleNamespace(persistent=True, block_n=64, scale=0.125)
        launches = 0

        def bwd(self, args, stream):
            Kernel.launches += 1

        def plan(self, args):  # one split: no workspace
            return types.SimpleNamespace(num_splits=1, o_accum_bytes=0, lse_accum_bytes=0)

        def fwd(self, args, stream):
            Kernel.launches += 1
    kernel = Kernel()
    stubs = {(torch_api, "_launchable_kernel"): lambda *args, **kw: kernel,
             (torch_api, "_launch"): lambda torch, dev, run, args: run(args, 0),
             (torch.cuda, "is_current_stream_capturing"): lambda: False,
             (torch.cuda, "current_device"): lambda: 0}
    saved = {key: getattr(*key) for key in stubs}
    for (mod, name), fn in stubs.items():
        setattr(mod, name, fn)
    torch_api._device_sms[0] = 132   # (the device's SMs, read once a device)
    warnings.filterwarnings("ignore", message=".*data pointer of FakeTensor")
    try:
        with FakeTensorMode(), torch.no_grad():
            dt = {"bf16": torch.bfloat16, "f16": torch.float16,
                  "e4m3": torch.float8_e4m3fn}[a.dtype]
            if a.call == "func":
                B, S, H, D = 1, 128, 1, 128
                shape = f"B={B} S={S} H={H} D={D}"
                q, k, v = (torch.empty(B, S, H, D, device="cuda", dtype=dt) for _ in range(3))
                o = torch.empty(B, S, H, D, device="cuda",
                                dtype=torch.bfloat16 if a.dtype == "e4m3" else dt)
                kw = {}
                if a.dtype == "e4m3":  # FA3's per (batch, kv head) descales
                    ds = torch.ones(B, H, device="cuda")
                    kw = dict(q_descale=ds, k_descale=ds, v_descale=ds)

                def call():
                    torch_api.flash_attn_func(q, k, v, out=o, **kw)
            elif a.call == "backward":
                B, S, H, D = 1, 128, 1, 128
                shape = f"B={B} S={S} H={H} D={D}"
                q, k, v, o, do = (torch.empty(B, S, H, D, device="cuda", dtype=dt)
                                  for _ in range(5))
                lse = torch.empty(B, H, S, device="cuda")

                def call():
                    torch_api.flash_attn_backward(do, q, k, v, o, lse)
            else:
                B, Skv, Hq, Hkv, D = 1, 4096, 32, 8, 128
                shape = f"B={B} Sq=1 Hq/Hkv={Hq}/{Hkv} D={D} cache {Skv}"
                q = torch.empty(B, 1, Hq, D, device="cuda", dtype=dt)
                kc, vc = (torch.empty(B, Skv, Hkv, D, device="cuda", dtype=dt)
                          for _ in range(2))
                lens = torch.empty(B, device="cuda", dtype=torch.int32)

                def call():
                    torch_api.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
            if a.unplanned:
                planned = call

                def call():
                    torch_api._plans.clear()
                    planned()
            for _ in range(100):
                call()
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    call()
                best = min(best, (time.perf_counter() - t0) / a.calls * 1e6)
            name = {"func": "flash_attn_func", "kvcache": "flash_attn_with_kvcache",
                    "backward": "flash_attn_backward"}[a.call]
            print(f"{a.dtype} {name}, eager, {shape}: "
                  f"{best:.1f} us a call (host work on fake tensors; best of 3 x {a.calls}; "
                  f"{Kernel.launches} launches reached)")
            if a.profile:
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(a.calls):
                    call()
                pr.disable()
                pstats.Stats(pr).sort_stats("tottime").print_stats(15)
    finally:
        for (mod, name), fn in saved.items():
            setattr(mod, name, fn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
