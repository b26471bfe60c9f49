#!/usr/bin/env python3
"""GPU check of the FP8 (e4m3) forward kernels (fa3-compile --dtype e4m3,
facts `dtype e4m3`) through fa3.torch_api.flash_attn_func (run on an
H100/H200).

    python3 test/gpu/check_fp8.py KERNEL_DIR [--out OUT_DIR] [--only SUBSTR]
    python3 test/gpu/check_fp8.py KERNEL_DIR --sanitize   # small cases, for
        `compute-sanitizer --tool memcheck|racecheck|synccheck python3 ...`
    python3 test/gpu/check_fp8.py KERNEL_DIR --paper-only  # (b) alone
    python3 test/gpu/check_fp8.py --emulate [--out OUT]    # the Python side alone

(a) Correctness, every FP8 kernel of the directory (the other kernels are
check_fwd.py's): B 2, Hq 8, Hkv 2 (GQA; one MQA case), lengths 1, 77, 128,
333, 1041 (Sq = Skv) and 77/1041, 1041/333, 2053/2053, and two with more
tiles than the GPU has SMs (B 9 x 200, B 4 x Hq 16 x 800: a persistent
kernel's CTAs take several); random N(0, 1)
inputs, each (batch, 128-row block, head) multiplied by its own 2^U(-1, 1)
so that block scales differ, quantized in each descale form
flash_attn_func takes (MODES: none; one factor per tensor, as 0-d and as
FA3's expanded [B, Hkv]; FA3's [B, Hkv] per kv head, q's expanded by the
API; per q head [B, Hq]; block scales [B, H, ceil(S / 128)] of
fa3.quantize_qkv_fp8 with and without the Hadamard rotation; block scales
passed as strided views; a kernel of wider kv tiles, `--block-n 160` to
224, scales each column by its key's block descale: every form too); o
(bf16) and lse poisoned with NaN; the
reference is float64 attention of the DEQUANTIZED inputs
(fa3.quantize.dequantize_fp8: what the kernel was given, so quantization
is not counted as the kernel's error). Criteria per case:

  * every element of o and lse written (no NaN left);
  * rows that see no key (causal, Sq > Skv): o = 0 and lse = -inf exactly;
  * z = |o - ref| / sigma <= Z_MAX elementwise, sigma the standard
    deviation that rounding P to e4m3 before P V gives o (the one rounding
    an FP8 kernel adds to what the reference computes; FlashAttention-3
    does the same): P's elements p_j (exp(s_j - max) in [0, 1]) rounded to
    nearest with 3 mantissa bits are off by a relative error of at most
    2^-4, whose RMS is at most 2^-4 / sqrt(3) (uniform within half an ulp,
    at the bottom of a binade), or by at most 2^-10 (RMS 2^-10 / sqrt(3))
    below 2^-6 (subnormals); the errors of different keys are independent,
    so o_i = sum_j p_j v_j / l is off by sigma_i^2 = sum_j
    sigma(p_j)^2 v_j^2 / l^2, plus bf16's rounding of o (2^-9 relative,
    RMS 2^-9 / sqrt(3)) and 1e-6 of max |ref|. A wrong descale (a factor 2
    on v changes o by |o|, about 28 sigma), a wrong block or a misplaced
    tile shows as z in the tens or more;
  * ||o - ref|| / ||ref|| < O_REL_TOL = 0.05 over rows that see a key: the
    RMS relative error of rounding to 3 mantissa bits is at most 2^-3 /
    sqrt(12) times the mean of 2^e / x over a binade (~0.72), 0.026; an
    emulation of the kernel's math (python/tests/test_check_fp8.py: online
    softmax over blocks of 128 keys, P rounded at the running max; and
    --emulate below) gives 0.011-0.024 on these inputs, max z 3-4.5;
  * |lse - ref_lse| <= LSE_ABS_TOL + LSE_ACC_REL * scale * max_j sum_k
    |q_ik| |k_jk| per row i (1e-2 + 2^-10 x the row's largest absolute
    dot product): lse does not see P's rounding (FlashAttention-3 sums the
    row in f32 before it), but the FP8 WGMMA accumulates Q K^T with fewer
    bits than f32 (about 14 kept, DeepSeek-V3 section 3.3.2), an error
    that grows with the magnitudes of the products, not with s: measured
    up to 0.06 at head dim 256 and softmax_scale 0.3 where a flat 1e-2
    failed, while o there was within z 3. Since lse is a smooth max of
    the row's scores, its error is at most theirs. A q or k descale off
    by 1.25x moves lse by a quarter of the row's largest score, 50-100x
    this bound;
  * the same inputs give bit-identical outputs twice and on a 2nd stream
    (one case per kernel).

Not a criterion, for scale: "max_abs_err_rel" = max |o - ref| / max |ref|
(the emulation reaches 0.021 on these inputs: a bound of 2e-2 would fail a
correct kernel) and
"rel_err_o_emul", the same error of torch emulating the kernel's math
(float64 with P rounded to e4m3 at the row's final max).

(b) FlashAttention-3's accuracy test (paper, section 4.3, as recalled:
Q, K, V entries N(0, 1) plus, on 0.1 % of them, an outlier term N(0, 100);
RMSE of O against float64 attention of the unquantized inputs; the paper
reports 2.4e-2 for a baseline FP8 attention with per-tensor scales and
9.1e-3 for FlashAttention-3's FP8 with block quantization and incoherent
processing, 9.3e-3 without the block quantization and 2.4e-2 without the
incoherent processing; its sizes are not restated here). Ours: B 1, H 8, S 4096, D 128
(each head dim of a non-causal FP8 kernel with --paper-hdims all),
non-causal; RMSE for fp8 with per-tensor scales, per-tensor + Hadamard,
block scales, block + Hadamard (fa3.quantize), and our bf16 kernel where
the directory has one (or the JIT compiles it), each beside torch's
emulation of the same FP8 math (the quantized inputs, P rounded to e4m3);
criterion: the kernel's RMSE within 1.5x of its emulation's + 1e-4.

--emulate: no FP8 kernel needed (nor KERNEL_DIR): the four variants (head
dims 128 and 256, causal or not) are facts in a temporary directory whose
"kernel" is PyTorch math on the launch's arguments: libfa3rt's
fa3rt_fwd_plan on them (runtime/libfa3rt.so, or $FA3RT_LIBRARY), then q,
k, v, o, lse and the descales read and written through their pointers and
strides as the ABI says (fa3rt_abi.def, FP8 kernels: qd per 128 query
rows, kd per 128 key rows, vd), the softmax online over blocks of 128 keys
with P rounded to e4m3 at the running max: the script, flash_attn_func's
FP8 path and the arguments it builds, checked end to end without the
compiler. Its runs are history only (never of record); no SASS check.

With --out: appends the run to OUT_DIR/history.jsonl (kind check_fp8) and,
unless --only filters the kernels, rewrites the check_fp8 section of
OUT_DIR/RESULTS.md (the repository's are test/gpu/; bench/records.py).
Exit status 1 on any failure.
"""
import argparse
import datetime
import json
import math
import shutil
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

Z_MAX = 8.0            # |o - ref| / sigma, elementwise (module docstring)
O_REL_TOL = 0.05       # ||o - ref|| / ||ref||; the model: ~0.026
LSE_ABS_TOL = 1e-2     # natural-log units
LSE_ACC_REL = 2.0 ** -10  # FP8 accumulation, of scale * sum_k |q_k| |k_k|
SIGMA_REL = 2.0 ** -4 / math.sqrt(3)     # RMS relative error of p rounded to e4m3, at most
SIGMA_SUB = 2.0 ** -10 / math.sqrt(3)    # RMS absolute error below 2^-6 (subnormals)
E4M3_MIN_NORMAL = 2.0 ** -6
SIGMA_BF16 = 2.0 ** -9 / math.sqrt(3)    # o rounded to bf16
EMUL_RATIO = 1.5       # (b): kernel RMSE <= EMUL_RATIO * emulated + EMUL_ABS
EMUL_ABS = 1e-4

# (B, Sq, Skv, Hq, Hkv)
CASES = [
    (2, 1, 1, 8, 2),
    (2, 77, 77, 8, 2),
    (2, 128, 128, 8, 2),
    (2, 333, 333, 8, 2),
    (2, 1041, 1041, 8, 2),
    (2, 77, 1041, 8, 2),
    (2, 1041, 333, 8, 2),      # causal: rows that see no key
    (1, 2053, 2053, 4, 1),     # MQA, more m-blocks than one wave of CTAs per head
    (9, 200, 200, 8, 2),       # 144 tiles: a persistent kernel's CTAs take two
    (4, 800, 800, 16, 4),      # 320-448 tiles, several per persistent CTA
]
SANITIZE_CASES = [(1, 200, 300, 8, 2), (1, 300, 200, 8, 2)]
MODES = ["block", "block+hadamard", "fa3", "tensor", "tensor-fa3", "qhead", "none",
         "block-strided"]
SANITIZE_MODES = ["block", "fa3"]
# (b): FlashAttention-3 section 4.3's outlier inputs, our size
PAPER_B, PAPER_H, PAPER_S, PAPER_D = 1, 8, 4096, 128
PAPER_OUTLIER_P, PAPER_OUTLIER_STD = 1e-3, 10.0
# the paper's RMSE where it reports one for the method (as recalled: its
# baseline FP8 attention 2.4e-2, FlashAttention-3's FP8 9.1e-3, and its
# ablation without block quantization 9.3e-3, without incoherent
# processing 2.4e-2). torch's emulation of these methods on our inputs
# (H200, seed 7): 1.98e-2, 9.37e-3, 1.71e-2, 9.40e-3; bf16 inputs with
# exact math 1.29e-3
PAPER_RMSE = {"fp8 per-tensor": 2.4e-2, "fp8 per-tensor + Hadamard": 9.3e-3,
              "fp8 block": 2.4e-2, "fp8 block + Hadamard": 9.1e-3}

import torch  # noqa: E402

import records  # noqa: E402
from fa3 import facts as fa3facts  # noqa: E402
from fa3 import quantize as fq  # noqa: E402
from fa3 import runtime as fa3rt  # noqa: E402
from fa3 import sass as fa3sass  # noqa: E402
from fa3.reference import visible_mask  # noqa: E402
from fa3.torch_api import flash_attn_func  # noqa: E402
from device_view import device_view  # noqa: E402

FP8 = torch.float8_e4m3fn
DEVICE = "cuda"        # of the inputs' generators (the CPU tests set "cpu")


# ------------------------------------------------------------ inputs

def block_factors(B, S, H, gen):
    """[B, S, H, 1] float32: 2^U(-1, 1) per (batch, 128-row block, head)."""
    nb = max(1, -(-S // 128))
    f = torch.exp2(torch.rand(B, nb, H, device=DEVICE, generator=gen) * 2 - 1)
    return f.repeat_interleave(128, dim=1)[:, :S, :, None]


def rand_inputs(case, D, Dv, gen):
    """float32 q, k, v [B, S, H, D] on the GPU, rows of block-dependent scale."""
    B, Sq, Skv, Hq, Hkv = case

    def mk(S, H, d):
        x = torch.randn(B, S, H, d, device=DEVICE, generator=gen)
        return x * block_factors(B, S, H, gen)
    return mk(Sq, Hq, D), mk(Skv, Hkv, D), mk(Skv, Hkv, Dv)


def _per_tensor(x):
    """(x8, 0-d descale): one scale for the whole tensor."""
    amax = x.abs().amax() if x.numel() else x.new_zeros(())
    d = torch.where(amax > 0, amax / fq.E4M3_MAX, torch.ones_like(amax))
    return (x / d).clamp(-fq.E4M3_MAX, fq.E4M3_MAX).to(FP8), d.float()


def _per_kv_group(q, Hkv):
    """(q8, [B, Hkv] descale): one scale per (batch, kv head's group of q
    heads), FlashAttention-3's q descale."""
    B, S, Hq, D = q.shape
    g = Hq // Hkv
    amax = q.view(B, S, Hkv, g, D).abs().amax(dim=(1, 3, 4)) if S else q.new_zeros(B, Hkv)
    d = torch.where(amax > 0, amax / fq.E4M3_MAX, torch.ones_like(amax))
    rows = d.repeat_interleave(g, dim=1)[:, None, :, None]
    return (q / rows).clamp(-fq.E4M3_MAX, fq.E4M3_MAX).to(FP8), d


def quantize(mode, q, k, v, seed):
    """(q8, k8, v8, q_descale, k_descale, v_descale) of float32 inputs in
    descale form `mode` (MODES)."""
    Hkv = k.shape[2]
    if mode == "none":
        return q.to(FP8), k.to(FP8), v.to(FP8), None, None, None
    if mode in ("tensor", "tensor-fa3"):
        (q8, qd), (k8, kd), (v8, vd) = (_per_tensor(x) for x in (q, k, v))
        if mode == "tensor-fa3":   # FA3's [B, Hkv] form, all strides 0
            B = q.shape[0]
            qd, kd, vd = (d.expand(B, Hkv) for d in (qd, kd, vd))
        return q8, k8, v8, qd, kd, vd
    if mode == "fa3":
        q8, qd = _per_kv_group(q, Hkv)
        (k8, kd), (v8, vd) = fq.quantize_fp8(k), fq.quantize_fp8(v)
        return q8, k8, v8, qd, kd, vd
    if mode == "qhead":
        (q8, qd), (k8, kd), (v8, vd) = (fq.quantize_fp8(x) for x in (q, k, v))
        return q8, k8, v8, qd, kd, vd
    if mode in ("block", "block+hadamard", "block-strided"):
        r = fq.quantize_qkv_fp8(q, k, v, block=128, hadamard=mode == "block+hadamard",
                                seed=seed)
        qd, kd, vd = r.q_descale, r.k_descale, r.v_descale
        if mode == "block-strided":
            # the same values through non-contiguous views: [B, blocks, H]
            # storage transposed to [B, H, blocks], v's [H, B] transposed
            qd = qd.transpose(1, 2).contiguous().transpose(1, 2)
            kd = kd.transpose(1, 2).contiguous().transpose(1, 2)
            vd = vd.t().contiguous().t()
        return r.q, r.k, r.v, qd, kd, vd
    raise ValueError(f"unknown mode {mode!r}")


def dequantized(x8, d):
    """float64 of what the kernel reads: x8 * its descale."""
    if d is None:
        return x8.double()
    return fq.dequantize_fp8(x8, d).double()


# ------------------------------------------------------------ reference

def reference(q, k, v, scale, kf, sigma=True, emulate=True):
    """float64 attention of BSHD inputs q [B, Sq, Hq, D], k, v [B, Skv, Hkv,
    D / Dv] (float64): dict with o [B, Sq, Hq, Dv], lse [B, Hq, Sq], empty
    ([Sq] rows that see no key), sigma (o's model error, module docstring)
    and o_emul (P rounded to e4m3 at the row's max, o to bf16)."""
    B, Sq, Hq, D = q.shape
    Skv, Hkv = k.shape[1], k.shape[2]
    g = Hq // Hkv
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(g, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(g, dim=1)
    s = torch.matmul(qh, kh.transpose(-1, -2)) * scale
    if kf.softcap > 0:
        s = kf.softcap * torch.tanh(s / kf.softcap)
    vis = torch.from_numpy(visible_mask(Sq, Skv, kf.causal,
                                        (kf.window_left, kf.window_right))).to(q.device)
    s = s.masked_fill(~vis, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)                      # 0 where masked
    l = p.sum(dim=-1, keepdim=True)
    empty = ~vis.any(dim=1)
    lsafe = torch.where(l > 0, l, torch.ones_like(l))
    o = torch.matmul(p, vh) / lsafe
    lse = (m + torch.log(l)).squeeze(-1)      # -inf where l = 0
    out = dict(o=o.transpose(1, 2), lse=lse, empty=empty)
    # lse's bound per row: the FP8 accumulation's error on its scores
    dots = torch.matmul(qh.abs(), kh.abs().transpose(-1, -2)) * abs(scale)
    dots = dots.masked_fill(~vis, 0.0)
    out["lse_tol"] = LSE_ABS_TOL + LSE_ACC_REL * dots.amax(dim=-1)
    if sigma:
        v2 = vh * vh
        sub = (p < E4M3_MIN_NORMAL) & vis
        var = (SIGMA_REL ** 2 * torch.matmul(p * p, v2)
               + SIGMA_SUB ** 2 * torch.matmul(sub.double(), v2)) / lsafe ** 2
        var = var + (SIGMA_BF16 * o) ** 2
        floor = 1e-6 * float(o.abs().max()) if o.numel() else 0.0
        out["sigma"] = (var.sqrt() + floor).transpose(1, 2)
    if emulate:
        pr = p.float().to(FP8).double()
        oe = (torch.matmul(pr, vh) / lsafe).to(torch.bfloat16).double()
        out["o_emul"] = oe.transpose(1, 2)
    return out


def compare(o, lse, ref):
    """The criteria of (a) for o [B, Sq, Hq, Dv] bf16 and lse [B, Hq, Sq]
    (or None) against reference()'s dict."""
    of = o.double()
    res = {"unwritten": int(torch.isnan(of).sum().item())}
    if lse is not None:
        res["unwritten"] += int(torch.isnan(lse).sum().item())
    keep, empty = ~ref["empty"], ref["empty"]
    ro = ref["o"]
    if bool(keep.any()):
        d = (of[:, keep] - ro[:, keep])
        den = ro[:, keep].norm().item()
        res["rel_err_o"] = d.norm().item() / den if den > 0 else d.norm().item()
        res["max_abs_err_rel"] = (d.abs().max().item() / ro[:, keep].abs().max().item()
                                  if den > 0 else d.abs().max().item())
        z = d.abs() / ref["sigma"][:, keep]
        res["max_z"] = float(torch.nan_to_num(z, nan=float("inf")).max().item())
        if "o_emul" in ref:
            de = ref["o_emul"][:, keep] - ro[:, keep]
            res["rel_err_o_emul"] = de.norm().item() / den if den > 0 else de.norm().item()
        if lse is not None:
            dl = (lse.double()[:, :, keep] - ref["lse"][:, :, keep]).abs()
            dl = torch.nan_to_num(dl, nan=float("inf"))
            res["max_abs_err_lse"] = float(dl.max().item())
            res["lse_err_over_bound"] = float((dl / ref["lse_tol"][:, :, keep]).max().item())
    else:
        res.update(rel_err_o=0.0, max_z=0.0)
        if lse is not None:
            res["max_abs_err_lse"] = 0.0
            res["lse_err_over_bound"] = 0.0
    res["empty_rows"] = int(empty.sum().item())
    ok_empty = True
    if bool(empty.any()):
        ok_empty = bool((of[:, empty] == 0).all().item())
        if lse is not None:
            le = lse[:, :, empty]
            ok_empty = ok_empty and bool((torch.isinf(le) & (le < 0)).all().item())
    res["empty_rows_ok"] = ok_empty
    res["ok"] = (res["unwritten"] == 0 and ok_empty
                 and math.isfinite(res["rel_err_o"]) and res["rel_err_o"] < O_REL_TOL
                 and res["max_z"] <= Z_MAX
                 and (lse is None or res["lse_err_over_bound"] <= 1.0))
    return res


# ------------------------------------------------------------ (a)

def variant_kw(kf):
    return dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
                softcap=kf.softcap, kernel=kf)


def run_case(kf, case, mode, seed, scale=None, with_lse=True):
    """One call on fresh inputs: ((q8, k8, v8, descales), (o, lse), result)."""
    B, Sq, Skv, Hq, Hkv = case
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = rand_inputs(case, kf.head_dim, kf.head_dim_v, gen)
    q8, k8, v8, qd, kd, vd = quantize(mode, q, k, v, seed)
    o = torch.full((B, Sq, Hq, kf.head_dim_v), float("nan"), device="cuda",
                   dtype=torch.bfloat16)
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda") if with_lse else None
    r = flash_attn_func(q8, k8, v8, softmax_scale=scale, out=o, lse_out=lse, q_descale=qd,
                        k_descale=kd, v_descale=vd, **variant_kw(kf))
    assert (r[0] if with_lse else r) is o
    torch.cuda.synchronize()
    ref = reference(dequantized(q8, qd), dequantized(k8, kd), dequantized(v8, vd),
                    kf.scale if scale is None else scale, kf)
    return (q8, k8, v8, qd, kd, vd), (o, lse), compare(o, lse, ref)


def check_kernel(kf, seed0, results, quick=False):
    cases = SANITIZE_CASES if quick else CASES
    modes = SANITIZE_MODES if quick else MODES

    def record(label, mode, case, res):
        r = dict(kernel=kf.kernel, case=label, mode=mode, B=case[0], Sq=case[1], Skv=case[2],
                 Hq=case[3], Hkv=case[4], **res)
        results.append(r)
        print(("PASS " if r["ok"] else "FAIL ") + json.dumps(r), flush=True)

    def guarded(label, mode, case, fn):
        try:
            fn()
        except Exception as e:  # a crash in one case must not hide the others
            record(label, mode, case, dict(ok=False, error=f"{type(e).__name__}: {e}"[:500]))
            traceback.print_exc()

    n = 0
    for case in cases:
        for mode in modes:
            n += 1

            def one(case=case, mode=mode, seed=seed0 + n):
                _, _, res = run_case(kf, case, mode, seed)
                record("random", mode, case, res)
            guarded("random", mode, case, one)
    if quick:
        return
    c = (2, 1041, 1041, 8, 2)

    def explicit_scale():
        _, _, res = run_case(kf, c, "block", seed0 + 500, scale=0.3)
        record("softmax_scale=0.3", "block", c, res)
    guarded("softmax_scale=0.3", "block", c, explicit_scale)

    def no_lse():
        _, _, res = run_case(kf, c, "fa3", seed0 + 501, with_lse=False)
        record("no lse (NULL)", "fa3", c, res)
    guarded("no lse (NULL)", "fa3", c, no_lse)

    def repeat():
        (q8, k8, v8, qd, kd, vd), (o1, l1), res = run_case(kf, c, "block+hadamard",
                                                           seed0 + 502)
        kw = dict(q_descale=qd, k_descale=kd, v_descale=vd, return_lse=True, **variant_kw(kf))
        o2, l2 = flash_attn_func(q8, k8, v8, **kw)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            o3, l3 = flash_attn_func(q8, k8, v8, **kw)
        torch.cuda.synchronize()
        same = all(torch.equal(a, b) for a, b in ((o1, o2), (l1, l2), (o1, o3), (l1, l3)))
        record("repeat x3 (2nd stream)", "block+hadamard", c,
               dict(res, bitwise_repeat=same, ok=res["ok"] and same))
    guarded("repeat x3 (2nd stream)", "block+hadamard", c, repeat)

    def empty():
        B, Sq, Hq, D = 2, 100, 8, kf.head_dim
        q = torch.randn(B, Sq, Hq, D, device="cuda").to(FP8)
        k = torch.empty(B, 0, 2, D, device="cuda", dtype=FP8)
        v = torch.empty(B, 0, 2, kf.head_dim_v, device="cuda", dtype=FP8)
        o, lse = flash_attn_func(q, k, v, return_lse=True, k_descale=torch.ones(B, 2, 0,
                                                                               device="cuda"),
                                 **variant_kw(kf))
        torch.cuda.synchronize()
        ok = (o.dtype == torch.bfloat16 and bool((o == 0).all().item())
              and bool((torch.isinf(lse) & (lse < 0)).all().item()))
        record("Skv = 0 (o = 0, lse = -inf)", "none", (B, Sq, 0, Hq, 2), dict(ok=ok))
        o0 = flash_attn_func(q[:, :0], q.new_empty(B, 5, 2, D), q.new_empty(B, 5, 2, kf.head_dim_v),
                             **variant_kw(kf))
        record("Sq = 0 (no-op)", "none", (B, 0, 5, Hq, 2),
               dict(ok=tuple(o0.shape) == (B, 0, Hq, kf.head_dim_v)))
    guarded("empty", "none", (0, 0, 0, 0, 0), empty)


def check_errors(kernels, results):
    """Misuse refused with its message, on a real GPU and kernel."""
    kf = kernels[0]
    D, Dv = kf.head_dim, kf.head_dim_v

    def expect(label, fn, exc, text):
        try:
            fn()
            ok, msg = False, "no error raised"
        except exc as e:
            msg = str(e)
            ok = text in msg
        except Exception as e:  # the wrong exception type
            ok, msg = False, f"{type(e).__name__}: {e}"
        r = dict(kernel=kf.kernel, case=f"error: {label}", mode="-", B=0, Sq=0, Skv=0, Hq=0,
                 Hkv=0, ok=ok, message=msg.splitlines()[0][:300])
        results.append(r)
        print(("PASS " if ok else "FAIL ") + json.dumps(r), flush=True)

    def mk(B, S, H, d):
        return torch.randn(B, S, H, d, device="cuda").to(FP8)
    q, k, v = mk(1, 64, 2, D), mk(1, 64, 2, D), mk(1, 64, 2, Dv)
    flat = mk(1, 1, 1, 64 * 2 * D + 32).flatten()
    qmis = flat[8:8 + 64 * 2 * D].view(1, 64, 2, D)      # 8-byte offset
    expect("misaligned q", lambda: flash_attn_func(qmis, k, v, **variant_kw(kf)),
           fa3rt.Fa3RuntimeError, "not 16-byte aligned")
    expect("requires grad (no FP8 backward)",
           lambda: flash_attn_func(q.float().requires_grad_().to(FP8), k, v, **variant_kw(kf)),
           NotImplementedError, "forward-only")
    expect("k descale of the wrong block count",
           lambda: flash_attn_func(q, k, v, k_descale=torch.ones(1, 2, 2, device="cuda"),
                                   **variant_kw(kf)),
           ValueError, "ceil(64 / 128) = 1 blocks")
    expect("descales with bf16 inputs",
           lambda: flash_attn_func(q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                   v_descale=torch.ones(1, 2, device="cuda"), **variant_kw(kf)),
           ValueError, "descales are for FP8 inputs")
    expect("no matching FP8 variant (softcap)",
           lambda: flash_attn_func(q, k, v, causal=kf.causal, softcap=33.0,
                                   kernel_dir=str(Path(kf.facts_path).parent), jit=False),
           LookupError, "Available:")
    expect("FP8 with num_splits", lambda: flash_attn_func(q, k, v, num_splits=2,
                                                         **variant_kw(kf)),
           NotImplementedError, "not split-KV")


def sass_check(kf):
    """Judged: HGMMA on e4m3 operands, and fa3.sass.judge's loop (S's and
    P V's wgmmas back to back, the exponentials beside P V). Reported, not
    judged: local memory, in the whole kernel and in its kv loop
    (fa3.sass.local_memory_in_wgmma_loops): head dim 256's 24 / 240
    register split keeps a few spill instructions in the loop and measured
    1.04-1.08x faster than a split without them (bench/NOTES.md, FP8)."""
    tool = shutil.which("cuobjdump")
    if not tool:
        return dict(hgmma=None, ok=True, note="cuobjdump not found: skipped")
    p = fa3sass.run_cuobjdump(tool, kf.cubin_path)
    if p.returncode:
        return dict(hgmma=0, ok=False, note=p.stderr.strip()[:300])
    # the attention kernel's function, not <kernel>_quantize's
    text = next((("Function : " + f) for f in p.stdout.split("Function : ")[1:]
                 if f.split("\n", 1)[0].strip() == kf.kernel), p.stdout)
    insts, addrs = fa3sass.instructions(text), fa3sass.addresses(text)
    # (FP8 warpgroup MMAs are QGMMA in SASS, 16-bit ones HGMMA)
    hg = [i for i in insts if "HGMMA" in i or "QGMMA" in i]
    e4m3 = sum("E4M3" in i for i in hg)
    batches = [len(b) for b in fa3sass.wgmma_batches(insts)]
    j = fa3sass.judge(insts, fa3sass.read_facts(kf.cubin_path), addrs)
    return dict(hgmma=len(hg), hgmma_e4m3=e4m3,
                local_mem_insts=sum(fa3sass.is_local(i) for i in insts),
                local_mem_insts_in_kv_loop=j["spills"],
                loop_batch=None if j["batch"] is None else f"{j['batch'][0]} in {j['batch'][1]}",
                exp2_beside_pv=j["exps"],
                largest_hgmma_batch=max(batches) if batches else 0,
                ok=len(hg) > 0 and e4m3 > 0 and j["scheduled"])


# ------------------------------------------------------------ (b)

def paper_inputs(B, S, H, D, gen):
    """float64 N(0, 1) plus N(0, 100) on 0.1 % of the entries (FA3 section 4.3)."""
    x = torch.randn(B, S, H, D, device=DEVICE, dtype=torch.float64, generator=gen)
    hit = torch.rand(B, S, H, D, device=DEVICE, dtype=torch.float64, generator=gen) \
        < PAPER_OUTLIER_P
    return x + hit * torch.randn(B, S, H, D, device=DEVICE, dtype=torch.float64,
                                 generator=gen) * PAPER_OUTLIER_STD


def _attn64(q, k, v, scale, round_p=False):
    """float64 attention per head (BSHD; memory: one head's S x S at a
    time); round_p: P rounded to e4m3 at the row max, o to bf16 (the FP8
    kernels' math)."""
    out = torch.empty(q.shape[:3] + (v.shape[3],), dtype=torch.float64, device=q.device)
    g = q.shape[2] // k.shape[2]
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            s = q[b, :, h] @ k[b, :, h // g].T * scale
            p = torch.exp(s - s.amax(dim=-1, keepdim=True))
            l = p.sum(dim=-1, keepdim=True)
            if round_p:
                p = p.float().to(FP8).double()
            o = p @ v[b, :, h // g] / l
            out[b, :, h] = o.to(torch.bfloat16).double() if round_p else o
    return out


def paper_methods():
    """name -> (q, k, v float64) -> (q8, k8, v8, qd, kd, vd)."""
    def tensor(q, k, v, had):
        m = fq.hadamard_matrix(q.shape[3], 0, device=q.device, dtype=torch.float64) \
            if had else None
        rot = (lambda x: x @ m) if had else (lambda x: x)
        (q8, qd), (k8, kd), (v8, vd) = (_per_tensor(x.float()) for x in (rot(q), rot(k), v))
        return q8, k8, v8, qd, kd, vd

    def block(q, k, v, had):
        r = fq.quantize_qkv_fp8(q, k, v, block=128, hadamard=had, seed=0)
        return r.q, r.k, r.v, r.q_descale, r.k_descale, r.v_descale
    return {"fp8 per-tensor": lambda q, k, v: tensor(q, k, v, False),
            "fp8 per-tensor + Hadamard": lambda q, k, v: tensor(q, k, v, True),
            "fp8 block": lambda q, k, v: block(q, k, v, False),
            "fp8 block + Hadamard": lambda q, k, v: block(q, k, v, True)}


def paper_check(kf, kernel_dir, seed, jit):
    """(b) for one non-causal FP8 kernel: rows of the accuracy table."""
    B, H, S, D = PAPER_B, PAPER_H, PAPER_S, kf.head_dim
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (paper_inputs(B, S, H, D, gen) for _ in range(3))
    scale = kf.scale
    ref = _attn64(q, k, v, scale)

    def rmse(o):
        return float((o.double() - ref).pow(2).mean().sqrt())
    rows = []
    for name, fn in paper_methods().items():
        row = dict(hdim=D, method=name, B=B, H=H, S=S, paper=PAPER_RMSE.get(name))
        try:
            q8, k8, v8, qd, kd, vd = fn(q, k, v)
            o = flash_attn_func(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd,
                                kernel=kf)
            torch.cuda.synchronize()
            row["rmse"] = rmse(o)
            row["unwritten"] = int(torch.isnan(o).sum().item())
            row["rmse_emul"] = rmse(_attn64(dequantized(q8, qd), dequantized(k8, kd),
                                            dequantized(v8, vd), scale, round_p=True))
            row["ok"] = (row["unwritten"] == 0
                         and row["rmse"] <= EMUL_RATIO * row["rmse_emul"] + EMUL_ABS)
        except Exception as e:
            row.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
            traceback.print_exc()
        rows.append(row)
        print(("PASS " if row["ok"] else "FAIL ") + json.dumps(row), flush=True)
    row = dict(hdim=D, method="bf16 (ours)", B=B, H=H, S=S, paper=None)
    try:
        o = flash_attn_func(q.bfloat16(), k.bfloat16(), v.bfloat16(), kernel_dir=kernel_dir,
                            jit=jit, softmax_scale=scale)
        torch.cuda.synchronize()
        row.update(rmse=rmse(o), ok=True)
    except (LookupError, ValueError) as e:   # no bf16 kernel there: not a failure
        row.update(ok=True, note=f"no bf16 kernel: {str(e).splitlines()[0][:200]}")
    except Exception as e:
        row.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
    rows.append(row)
    print(("PASS " if row["ok"] else "FAIL ") + json.dumps(row), flush=True)
    return rows


def paper_table(rows):
    out = ["| hdim | method | RMSE ours | RMSE torch emulation | paper |",
           "|---|---|---|---|---|"]
    f = lambda x: "-" if x is None else f"{x:.2e}"  # noqa: E731
    for r in rows:
        out.append(f"| {r['hdim']} | {r['method']} | {f(r.get('rmse'))} | "
                   f"{f(r.get('rmse_emul'))} | {f(r.get('paper'))} |")
    return "\n".join(out)


# ------------------------------------------------------------ --emulate

EMULATED_VARIANTS = [(128, False), (128, True), (256, False), (256, True)]


def emulated_kernel_dir(directory):
    """Facts (and empty cubins) of the four FP8 variants in `directory`."""
    for D, causal in EMULATED_VARIANTS:
        name = f"fa3_fwd_d{D}_e4m3{'_causal' if causal else ''}_emulated"
        text = "\n".join([
            "fa3-kernel-facts 1", f"kernel {name}", "dtype e4m3", f"head_dim {D}",
            f"head_dim_v {D}", "block_m 128", "block_n 128", "threads 384", "dynamic_smem 1",
            f"causal {int(causal)}", "window_left -1", f"window_right {0 if causal else -1}",
            "softcap 0", f"scale {1 / math.sqrt(D)!r}", f"params {fa3facts.KERNEL_PARAMS}",
            "grid tiles"]) + "\n"
        Path(directory, name + ".facts").write_text(text)
        Path(directory, name + ".cubin").write_bytes(b"")
    return directory


class EmulatedKernel:
    """Stands in for a loaded FP8 kernel: libfa3rt's fa3rt_fwd_plan on the
    arguments against its facts, then the kernel's work in PyTorch math
    (float64), every input read and output written through the
    arguments' pointers and strides."""

    def __init__(self, kf):
        self.kf = kf
        self.facts = fa3rt.parse_facts_c(Path(kf.facts_path).read_bytes())

    def fwd(self, args, stream=0):
        L = fa3rt.plan(self.facts, args)
        if L.empty:
            return
        B, Sq, Skv, Hq, Hkv = L.B, L.Sq, L.Skv, L.Hq, L.Hkv
        Dv = self.kf.head_dim_v

        def tensor(t, dtype):
            return device_view(t.ptr, tuple(t.shape), tuple(t.strides), dtype)
        o = tensor(args.o, torch.bfloat16)                   # [B, Hq, Sq, Dv]
        lse = (device_view(args.lse, (B, Hq, Sq), (Hq * Sq, Sq, 1), torch.float32)
               if args.lse else None)
        if L.fill_only:
            o.zero_()
            if lse is not None:
                lse.fill_(float("-inf"))
            return

        def descale(ptr, strides, H, rows):
            """[B, H, rows] factors (1.0 for a NULL pointer), by the ABI's
            index: b * sB + h * sH + (row / 128) * sM."""
            if not ptr:
                return torch.ones(B, H, rows, device="cuda", dtype=torch.float64)
            nb = -(-rows // 128)
            d = device_view(ptr, (B, H, nb), strides, torch.float32).double()
            return d.repeat_interleave(128, dim=2)[:, :, :rows]
        qd = descale(args.q_descale, (args.q_descale_stride_b, args.q_descale_stride_h,
                                      args.q_descale_stride_m), Hq, Sq)
        kd = descale(args.k_descale, (args.k_descale_stride_b, args.k_descale_stride_h,
                                      args.k_descale_stride_n), Hkv, Skv)
        vd = descale(args.v_descale, (args.v_descale_stride_b, args.v_descale_stride_h, 0),
                     Hkv, 1)
        q = tensor(args.q, FP8).double() * qd[..., None]            # [B, Hq, Sq, D]
        k = tensor(args.k, FP8).double() * kd[..., None]
        v = tensor(args.v, FP8).double()
        g = Hq // Hkv
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        vd = vd.repeat_interleave(g, dim=1)                         # [B, Hq, 1]
        vis = torch.from_numpy(visible_mask(Sq, Skv, self.kf.causal)).to("cuda")
        m = torch.full((B, Hq, Sq, 1), float("-inf"), device="cuda", dtype=torch.float64)
        l = torch.zeros(B, Hq, Sq, 1, device="cuda", dtype=torch.float64)
        acc = torch.zeros(B, Hq, Sq, Dv, device="cuda", dtype=torch.float64)
        for j in range(0, Skv, 128):
            s = q @ k[:, :, j:j + 128].transpose(-1, -2) * L.scale
            s = s.masked_fill(~vis[:, j:j + 128], float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            ms = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            alpha = torch.where(torch.isfinite(m), torch.exp(m - ms), torch.zeros_like(m))
            p = torch.exp(s - ms)
            l = l * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + p.float().to(FP8).double() @ v[:, :, j:j + 128]
            m = m_new
        lsafe = torch.where(l > 0, l, torch.ones_like(l))
        out = torch.where(l > 0, acc / lsafe * vd[..., None], torch.zeros_like(acc))
        o.copy_(out.to(torch.bfloat16))
        if lse is not None:
            lse.copy_((m + torch.log(l)).squeeze(-1).float())


def install_emulation():
    """flash_attn_func's FP8 kernels become EmulatedKernel (the others are
    looked up as usual)."""
    from fa3 import torch_api
    original = torch_api._launchable_kernel

    def launchable(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit, dev,
                   device, **kinds):
        if dt != "e4m3":
            return original(kernel, dt, D, Dv, causal, window_size, softcap, kernel_dir, jit,
                            dev, device, **kinds)
        return EmulatedKernel(torch_api._pick(kernel, dt, D, Dv, causal, window_size, softcap,
                                              kernel_dir, jit, **kinds))
    torch_api._launchable_kernel = launchable


# ------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel_dir", nargs="?", default=None,
                    help="directory of compiled kernels (not with --emulate)")
    ap.add_argument("--emulate", action="store_true",
                    help="no kernels: PyTorch math on the launch's arguments (the Python side)")
    ap.add_argument("--out", default=None,
                    help="directory of history.jsonl and RESULTS.md (e.g. test/gpu)")
    ap.add_argument("--sanitize", action="store_true",
                    help="small cases only, no (b) (for compute-sanitizer)")
    ap.add_argument("--only", default=None, help="substring filter on kernel names")
    ap.add_argument("--paper-only", action="store_true", help="(b) only")
    ap.add_argument("--no-paper", action="store_true", help="(a) only")
    ap.add_argument("--paper-hdims", default="128",
                    help="head dims of (b): a comma list or 'all' (default 128)")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000,
                    help="base seed (default: fresh)")
    a = ap.parse_args()

    if bool(a.emulate) == bool(a.kernel_dir):
        ap.error("give KERNEL_DIR or --emulate (one of them)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if a.emulate:
        import tempfile
        a.kernel_dir = emulated_kernel_dir(tempfile.mkdtemp(prefix="fa3-fp8-emulated-"))
        install_emulation()
        print(f"EMULATED: PyTorch math stands in for the FP8 kernels ({a.kernel_dir})")
    all_kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    for s in skipped:
        print(f"SKIPPED FILE {s}")
    kernels = [k for k in all_kernels if k.dtype == "e4m3" and not k.split_kv]
    if a.only:
        kernels = [k for k in kernels if a.only in k.kernel]
    if not kernels:
        print(f"no FP8 (dtype e4m3) kernels in {a.kernel_dir}"
              + (f" matching {a.only!r}" if a.only else ""))
        return 1
    print(f"seed {a.seed}; {len(kernels)} kernel(s): " + ", ".join(k.kernel for k in kernels))
    results, sass, paper = [], {}, []
    t0 = time.time()
    if not a.paper_only:
        for i, kf in enumerate(kernels):
            print(f"== {kf.describe()}", flush=True)
            check_kernel(kf, a.seed + 1000 * i, results, quick=a.sanitize)
            if not a.sanitize and not a.emulate:
                sass[kf.kernel] = sass_check(kf)
                print(f"SASS {kf.kernel}: {sass[kf.kernel]}")
        if not a.sanitize:
            check_errors(kernels, results)
    if not (a.sanitize or a.no_paper):
        hd = None if a.paper_hdims == "all" else {int(x) for x in a.paper_hdims.split(",")}
        for kf in kernels:
            if kf.causal or kf.window_left >= 0 or kf.window_right >= 0 or kf.softcap \
                    or (hd is not None and kf.head_dim not in hd):
                continue
            print(f"== accuracy (FA3 section 4.3): {kf.kernel}", flush=True)
            paper += paper_check(kf, a.kernel_dir, a.seed + 7, None)
        if paper:
            print(paper_table(paper))
    nfail = (sum(not r["ok"] for r in results) + sum(not s["ok"] for s in sass.values())
             + sum(not r["ok"] for r in paper))
    print(f"check_fp8: {len(results) - sum(not r['ok'] for r in results)}/{len(results)} "
          f"cases passed, {len(paper)} accuracy rows, {nfail} failure(s), "
          f"{time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        command = "python3 " + " ".join(sys.argv)
        meta = dict(date=now.isoformat(timespec="seconds"), gpu=torch.cuda.get_device_name(),
                    torch=torch.__version__, kernel_dir=a.kernel_dir, seed=a.seed,
                    command=command, o_rel_tol=O_REL_TOL, z_max=Z_MAX,
                    lse_abs_tol=LSE_ABS_TOL, lse_acc_rel=LSE_ACC_REL, emul_ratio=EMUL_RATIO,
                    paper_size=dict(B=PAPER_B, H=PAPER_H, S=PAPER_S), emulated=a.emulate,
                    skipped_files=skipped, seconds=round(time.time() - t0, 1))
        full = not a.only and not a.paper_only and not a.no_paper and not a.emulate
        entry = records.new_entry("check_fp8", command, records.run_id(now), full=full,
                                  meta=meta, sass=sass, results=results, paper=paper)
        key = records.record(a.out, entry)
        print(records.render(entry))
        print(f"appended to {Path(a.out) / records.HISTORY}"
              + (f"; rewrote {key} in {Path(a.out) / records.TABLE}" if key else ""))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
