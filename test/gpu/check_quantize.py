#!/usr/bin/env python3
"""GPU check of the FP8 kernels' generated quantization, <kernel>_quantize
(fa3rt_quantize; fa3.quantize_fp8 / quantize_qkv_fp8 on CUDA bf16/f16
tensors), on an H100/H200.

    python3 test/gpu/check_quantize.py KERNEL_DIR [--out OUT_DIR]
    python3 test/gpu/check_quantize.py KERNEL_DIR --sanitize   # small cases,
        for `compute-sanitizer --tool memcheck|racecheck|synccheck python3 ...`

KERNEL_DIR holds FP8 kernels (fa3-compile --all --fp8); each head dim's
first one is used (any FP8 kernel of a head dim carries the same
quantization). Per case: x [B, S, H, D] of N(0, 1) entries, each (batch,
128-row block, head) multiplied by its own 2^U(-4, 4) so that block scales
differ, with 0.1 % outliers N(0, 100) (FlashAttention-3's accuracy test);
y poisoned with e4m3 NaN (0x7F), descales with NaN, the heads' amax words with -1.
Criteria:

  * every y byte and descale written (no NaN left; the inputs are finite);
  * without the rotation: y and the descales bit for bit those of the torch
    path (fa3.quantize's backend="torch": the same float32 arithmetic);
  * with the rotation (x H_D diag(signs) / sqrt(D), signs of the seed): the
    descale within DESCALE_REL_TOL = 1e-5 of amax / 448 of the float64
    rotation (the float32 transform's rounding: log2(D) sums, each off by
    2^-24 of its magnitude, at most ~2e-6 of the amax on these inputs), and
    each dequantized element within max(2^-4 |ref|, 2^-10 descale) (e4m3's
    half-ulp rounding, normal and subnormal) + DESCALE_REL_TOL * amax of
    the float64 rotation ref;
  * the same call twice gives the same bytes; a strided x (one third of a
    packed [B, S, 3, H, D]) the bytes of its contiguous copy; f16 as bf16.

Also: blocks of zeros and of values below 448 * 2^-126 (descale 1, y 0), a
NaN element (its block: descale 1, NaN there, as the torch path), S = 0;
q, k, v through quantize_qkv_fp8 and the FP8 attention on FlashAttention-3's
accuracy inputs (B 1, H 8, S 4096, non-causal), the RMSE of o against
float64 attention of the unquantized inputs for the kernel's quantization
and the torch path's (criterion: within 1.1x + 1e-4 of each other); a
CUDA-graph capture of quantize_qkv_fp8 replayed on new inputs; the same
under torch.compile(fullgraph=True), bit for bit the eager call; misuse
refused by name.
"""
import argparse
import datetime
import math
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

import records  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3 import quantize as fq  # noqa: E402
from fa3 import runtime  # noqa: E402
from fa3.torch_api import flash_attn_func  # noqa: E402

FP8 = torch.float8_e4m3fn
DESCALE_REL_TOL = 1e-5
RMSE_RATIO = 1.1
# (label, B, S, H, dtype)
CASES = [("one row", 1, 1, 1, "bf16"), ("odd 113", 2, 113, 3, "bf16"),
         ("exact block 128", 3, 128, 2, "bf16"), ("1023", 1, 1023, 2, "bf16"),
         ("4224", 2, 4224, 4, "bf16"), ("odd 203 f16", 2, 203, 3, "f16")]
QUICK = {"one row", "odd 113", "odd 203 f16"}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def inputs(B, S, H, D, dtype, gen):
    x = torch.randn(B, S, H, D, generator=gen, device="cuda")
    nb = max(1, -(-S // 128))
    f = 2.0 ** (torch.rand(B, nb, H, generator=gen, device="cuda") * 8 - 4)
    x = x * f.repeat_interleave(128, dim=1)[:, :S, :, None]
    out = torch.rand(x.shape, generator=gen, device="cuda") < 1e-3
    x = x + out * torch.randn(x.shape, generator=gen, device="cuda") * 10
    return x.to(DTYPES[dtype])


def poisoned(x, block):
    B, S, H, D = x.shape
    nb = -(-S // 128)
    y = torch.full((B, S, H, D), 0x7F, dtype=torch.uint8, device=x.device).view(FP8)
    d = torch.full((B, H, nb) if block else (B, H), math.nan, device=x.device)
    # (the heads' amax words: poisoned too, fa3rt_quantize zeroes them)
    w = torch.full((B, H), -1, dtype=torch.int32, device=x.device) if not block else None
    return y, d, w


def run_kernel(x, block, seed, kernel_dir):
    out = poisoned(x, block)
    y, d = fq._quantize_kernel(torch, FP8, x, block, seed, kernel_dir, False, out=out)
    torch.cuda.synchronize()
    return y, d


def group_amax(xr, block):
    """amax per (b, h, block) [B, H, nb] or per (b, h) [B, H] of [B, S, H, D]."""
    B, S, H, D = xr.shape
    if block is None:
        return xr.abs().amax(dim=(1, 3)) if S else xr.new_zeros(B, H)
    nb = -(-S // 128)
    xp = torch.nn.functional.pad(xr, (0, 0, 0, 0, 0, nb * 128 - S))
    return xp.view(B, nb, 128, H, D).abs().amax(dim=(2, 4)).transpose(1, 2)


def per_row(d, block, S):
    """A descale per element's row, [B, S, H, 1], of [B, H, nb] or [B, H]."""
    if block is None:
        return d[:, None, :, None]
    return d.repeat_interleave(128, dim=2)[:, :, :S].transpose(1, 2).unsqueeze(-1)


def check_case(label, x, block, seed, kernel_dir):
    """One call against its reference; the result row."""
    B, S, H, D = x.shape
    r = dict(case=label, head_dim=D, dtype=str(x.dtype).replace("torch.", ""), B=B, S=S, H=H,
             block=block or "head", rotated=seed is not None)
    y, d = run_kernel(x, block, seed, kernel_dir)
    y2, d2 = run_kernel(x, block, seed, kernel_dir)
    r["unwritten_y"] = int(torch.isnan(y.float()).sum())
    r["unwritten_descale"] = int(torch.isnan(d).sum())
    r["deterministic"] = bool(torch.equal(y.view(torch.uint8), y2.view(torch.uint8))
                              and torch.equal(d, d2))
    ok = r["unwritten_y"] == 0 and r["unwritten_descale"] == 0 and r["deterministic"]
    if seed is None:
        yt, dt = fq._quantize(torch, FP8, x, block, None)
        r["bytes_differing"] = int((y.view(torch.uint8) != yt.view(torch.uint8)).sum())
        r["descales_differing"] = int((d != dt).sum())
        ok = ok and r["bytes_differing"] == 0 and r["descales_differing"] == 0
    else:
        m = torch.from_numpy(fq.hadamard_matrix_numpy(D, seed)).cuda()
        xr = x.double() @ m
        amax = group_amax(xr, block)
        ref_d = torch.where(amax >= fq.AMAX_MIN, amax / fq.E4M3_MAX, torch.ones_like(amax))
        rel = ((d.double() - ref_d).abs() / ref_d).max().item() if d.numel() else 0.0
        r["max_rel_err_descale"] = rel
        rows_d = per_row(d.double(), block, S)
        rows_amax = per_row(amax, block, S)
        got = y.double() * rows_d
        bound = torch.maximum(2.0 ** -4 * xr.abs(), 2.0 ** -10 * rows_d) \
            + DESCALE_REL_TOL * rows_amax
        ratio = ((got - xr).abs() / bound).max().item() if got.numel() else 0.0
        r["max_err_over_bound"] = ratio
        ok = ok and rel <= DESCALE_REL_TOL and ratio <= 1.0
    r["ok"] = bool(ok)
    return r


def check_special(D, kernel_dir, gen):
    """Zero and tiny blocks, a NaN, strided input, S = 0."""
    rows = []
    x = inputs(2, 300, 3, D, "bf16", gen)
    x[0, :128, 1] = 0                      # a zero block
    x[1, 128:256, 2] = 1e-36               # below AMAX_MIN: descale 1, y 0
    x[1, 5, 0, 3] = math.nan               # a NaN: its block descale 1
    y, d = run_kernel(x, 128, None, kernel_dir)
    yt, dt = fq._quantize(torch, FP8, x, 128, None)
    same = bool(torch.equal(y.view(torch.uint8), yt.view(torch.uint8))
                and torch.equal(d.nan_to_num(7.0), dt.nan_to_num(7.0)))
    ok = (same and d[0, 1, 0].item() == 1.0 and d[1, 2, 1].item() == 1.0
          and d[1, 0, 0].item() == 1.0 and bool((y[0, :128, 1].float() == 0).all())
          and bool((y[1, 128:256, 2].float() == 0).all()) and math.isnan(y[1, 5, 0, 3].float()))
    rows.append(dict(case="zero, tiny and NaN blocks", head_dim=D, ok=bool(ok),
                     same_as_torch=same))
    # strided: q of a packed [B, S, 3, H, D]
    qkv = inputs(2, 333, 9, D, "bf16", gen).view(2, 333, 3, 3, D)
    xs = qkv[:, :, 0]
    for block, seed in ((128, None), (None, 3)):
        y, d = run_kernel(xs, block, seed, kernel_dir)
        yc, dc = run_kernel(xs.contiguous(), block, seed, kernel_dir)
        ok = bool(torch.equal(y.view(torch.uint8), yc.view(torch.uint8)) and torch.equal(d, dc))
        rows.append(dict(case=f"strided x (packed qkv), block {block or 'head'}, "
                              f"seed {seed}", head_dim=D, ok=ok))
    # S = 0: no blocks; per head, descale 1
    x0 = torch.empty(2, 0, 3, D, device="cuda", dtype=torch.bfloat16)
    y, d = run_kernel(x0, None, 0, kernel_dir)
    yb, db = run_kernel(x0, 128, 0, kernel_dir)
    rows.append(dict(case="S = 0", head_dim=D, ok=bool(
        d.shape == (2, 3) and bool((d == 1).all()) and db.shape == (2, 3, 0)
        and y.numel() == 0)))
    return rows


def attention64(q, k, v):
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[3])
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)


def check_end_to_end(D, kf, kernel_dir, gen):
    """FA3's accuracy inputs through quantize_qkv_fp8 (kernel and torch
    paths, block scales + Hadamard) and the FP8 attention."""
    B, H, S = 1, 8, 4096
    qkv = []
    for _ in range(3):
        x = torch.randn(B, S, H, D, generator=gen, device="cuda", dtype=torch.float64)
        out = torch.rand(x.shape, generator=gen, device="cuda") < 1e-3
        qkv.append(x + out * torch.randn(x.shape, generator=gen, device="cuda",
                                         dtype=torch.float64) * 10)
    ref = attention64(*qkv)
    q, k, v = (t.to(torch.bfloat16) for t in qkv)
    rmse = {}
    for backend in ("kernel", "torch"):
        r = fq.quantize_qkv_fp8(q, k, v, block=128, hadamard=True, seed=0, backend=backend,
                                kernel_dir=kernel_dir, jit=False)
        o = flash_attn_func(r.q, r.k, r.v, kernel=kf, **r.descales)
        rmse[backend] = ((o.double() - ref) ** 2).mean().sqrt().item()
    ok = rmse["kernel"] <= RMSE_RATIO * rmse["torch"] + 1e-4
    return dict(case="end to end: quantize_qkv_fp8 + FP8 attention (FA3 accuracy inputs, "
                     "block + Hadamard)", head_dim=D, ok=bool(ok), rmse_kernel=rmse["kernel"],
                rmse_torch=rmse["torch"])


def check_graph(D, kernel_dir, gen):
    """quantize_qkv_fp8 captured in a CUDA graph, replayed on new inputs."""
    q, k, v = (inputs(2, 300, 4, D, "bf16", gen) for _ in range(3))
    run = lambda: fq.quantize_qkv_fp8(q, k, v, kernel_dir=kernel_dir, jit=False)  # noqa: E731
    run()                                   # warm: kernel loaded, signs on the device
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        r = run()
    for t in (q, k, v):
        t.copy_(inputs(2, 300, 4, D, "bf16", gen))
    g.replay()
    torch.cuda.synchronize()
    e = run()
    ok = all(torch.equal(a.view(torch.uint8) if a.dtype == FP8 else a,
                         b.view(torch.uint8) if b.dtype == FP8 else b) for a, b in zip(r, e))
    return dict(case="CUDA graph replay on new inputs", head_dim=D, ok=bool(ok))


def check_compiled(D, kernel_dir, gen):
    """quantize_qkv_fp8 under torch.compile(fullgraph=True) (the op
    torch.ops.fa3.quantize_fp8): bit for bit the eager result."""
    q, k, v = (inputs(2, 300, 4, D, "bf16", gen) for _ in range(3))

    def run(q, k, v):
        return fq.quantize_qkv_fp8(q, k, v, kernel_dir=kernel_dir, jit=False)
    got = torch.compile(run, fullgraph=True)(q, k, v)
    want = run(q, k, v)
    ok = all(torch.equal(a.view(torch.uint8) if a.dtype == FP8 else a,
                         b.view(torch.uint8) if b.dtype == FP8 else b)
             for a, b in zip(got, want))
    return dict(case="torch.compile(fullgraph) == eager", head_dim=D, ok=bool(ok))


def check_misuse(D, kernel_dir):
    """Refusals by name: the kernel path on float32, a wrong head dim."""
    rows = []
    x32 = torch.zeros(1, 4, 1, D, device="cuda")
    try:
        fq.quantize_fp8(x32, block=128, backend="kernel", kernel_dir=kernel_dir, jit=False)
        msg = None
    except ValueError as e:
        msg = str(e)
    rows.append(dict(case="backend='kernel' on float32 refused", head_dim=D,
                     ok=msg is not None and "reads bfloat16 or float16" in msg, message=msg))
    from fa3.torch_api import _launchable_kernel
    kobj = _launchable_kernel(None, "e4m3", D, D, False, (-1, -1), 0.0, kernel_dir, False,
                              torch.cuda.current_device(), torch.cuda.device)
    other = 64 if D != 64 else 128
    x = torch.zeros(1, 4, 1, other, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(1, 4, 1, other, device="cuda", dtype=FP8)
    d = torch.empty(1, 1, 1, device="cuda")
    a = runtime.QuantizeArgs()
    a.x = runtime.tensor(x.data_ptr(), (1, 1, 4, other), (4 * other, other, other, 1))
    a.y = runtime.tensor(y.data_ptr(), (1, 1, 4, other), (4 * other, other, other, 1))
    a.x_dtype, a.descale = runtime.DTYPES["bf16"], d.data_ptr()
    try:
        kobj.quantize(a)
        msg = None
    except runtime.Fa3RuntimeError as e:
        msg = str(e)
    rows.append(dict(case="head dim mismatch refused by the runtime", head_dim=D,
                     ok=msg is not None and f"x's head dim is {other}" in msg, message=msg))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel_dir")
    ap.add_argument("--out", default=None, help="directory of history.jsonl and RESULTS.md")
    ap.add_argument("--sanitize", action="store_true", help="small cases only")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    kernels, _ = fa3facts.scan_kernel_dir(a.kernel_dir)
    by_dim = {}
    for kf in kernels:
        if kf.dtype == "e4m3" and not kf.causal:
            by_dim.setdefault(kf.head_dim, kf)
    if not by_dim:
        print(f"no non-causal FP8 kernels in {a.kernel_dir}")
        return 1
    print(f"seed {a.seed}; {len(by_dim)} kernel(s): "
          + ", ".join(kf.kernel for _, kf in sorted(by_dim.items())))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    results, t0 = [], time.time()
    for D, kf in sorted(by_dim.items()):
        for label, B, S, H, dt in CASES:
            if a.sanitize and label not in QUICK:
                continue
            x = inputs(B, S, H, D, dt, gen)
            for block in (128, None):
                for seed in (None, a.seed % 1000):
                    try:
                        r = check_case(label, x, block, seed, a.kernel_dir)
                    except Exception as e:  # a failure, not a crash of the check
                        traceback.print_exc()
                        r = dict(case=label, head_dim=D, ok=False, error=repr(e))
                    results.append(r)
                    print(("PASS " if r["ok"] else "FAIL ") + str(r), flush=True)
        extra = [lambda: check_special(D, a.kernel_dir, gen)]
        if not a.sanitize:
            extra += [lambda: [check_end_to_end(D, kf, a.kernel_dir, gen)],
                      lambda: [check_graph(D, a.kernel_dir, gen)],
                      lambda: [check_compiled(D, a.kernel_dir, gen)],
                      lambda: check_misuse(D, a.kernel_dir)]
        for fn in extra:
            try:
                rows = fn()
            except Exception as e:
                traceback.print_exc()
                rows = [dict(case=getattr(fn, "__name__", "extra"), head_dim=D, ok=False,
                             error=repr(e))]
            for r in rows:
                results.append(r)
                print(("PASS " if r["ok"] else "FAIL ") + str(r), flush=True)
    nfail = sum(not r["ok"] for r in results)
    print(f"check_quantize: {len(results) - nfail}/{len(results)} cases passed, "
          f"{time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        command = "python3 " + " ".join(sys.argv)
        meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                    kernel_dir=a.kernel_dir, seed=a.seed, descale_rel_tol=DESCALE_REL_TOL,
                    rmse_ratio=RMSE_RATIO, seconds=round(time.time() - t0, 1))
        entry = records.new_entry("check_quantize", command, records.run_id(now), full=True,
                                  meta=meta, results=results)
        key = records.record(a.out, entry)
        print(records.render(entry))
        print(f"appended to {Path(a.out) / records.HISTORY}"
              + (f"; rewrote {key} in {Path(a.out) / records.TABLE}" if key else ""))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
