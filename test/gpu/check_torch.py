#!/usr/bin/env python3
"""torch.compile check of fa3.torch_api.flash_attn_func (run on an H100/H200).

    FA3_JIT=0 python3 test/gpu/check_torch.py KERNEL_DIR [--out OUT_DIR]

1. A small model function (projection, attention through flash_attn_func,
   projection) compiled with torch.compile(fullgraph=True) (Inductor): for
   bf16 and f16, causal or not, head dim 64 and 128, the compiled output and
   lse are compared with an fp32 math reference (the criteria of
   check_fwd.py: ||o - ref|| / ||ref|| < 1e-2, max |lse - ref| < 1e-3; out=
   and lse_out= poisoned with NaN first, so an element not written fails),
   and with the eager call (the same kernel: bit-identical attention output).
   Also: the traced graph calls torch.ops.fa3.flash_attn_fwd, compiled
   with dynamic=True a second shape runs without recompiling, inputs that
   require grad with what the backward kernel cannot do (here head dim 256)
   are refused before the forward runs, and deterministic=True with grad
   runs the deterministic backward kernel (where KERNEL_DIR holds bf16 head
   dim 128 full-mask backward kernels, plain and deterministic: fa3-compile
   --all --backward [--deterministic]; else recorded as skipped), eager and
   compiled: dq, dk, dv bitwise the same over two eager runs and compiled,
   and within 1e-2 (relative norm) of the plain backward's (the backward's
   own accuracy: test/gpu/check_bwd.py). And
   flash_attn_qkvpacked_func's two packed forms ([B, S, 3, H, D] and GQA's
   [B, S, Hq + 2 Hkv, D]): o and lse bitwise those of flash_attn_func on
   unpacked copies, and with grad (where KERNEL_DIR holds the bf16 head
   dim 128 causal backward) the packed gradient against the unpacked dq, dk,
   dv (check_packed).
2. CUDA graphs: flash_attn_func captured with torch.cuda.graph (persistent
   kernels with the dynamic tile scheduler and one-CTA-per-tile kernels,
   causal and full, GQA) and replayed on fresh inputs copied into the
   captured ones, the output poisoned with NaN before each replay: against
   the fp32 reference after each replay, with eager calls on other tensors
   in between, two graphs replayed alternately, a replay on a second stream,
   and 20 back-to-back replays; torch.compile(mode="reduce-overhead") (CUDA
   graph trees) likewise; the C runtime's own tile counters in a capture
   (a persistent kernel launched without args.tile_counter: replays right,
   the 1025th captured launch of one kernel object refused with a message);
   a variant first called inside a capture is refused with a message.
3. Per-call overhead, B=1 S=128 H=1 D=128 bf16: median wall time of a call
   (time.perf_counter around N calls, then synchronize) for eager
   flash_attn_func (and on e4m3 inputs with descales, where the directory
   has the FP8 kernel), the compiled function calling it, and
   F.scaled_dot_product_attention eager and compiled; and of a CUDA-graph
   replay of one call, ours and SDPA's.

Prints a table; with --out writes OUT_DIR/check_torch.json. Exit status 1 on
any failure.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from fa3 import facts as fa3facts  # noqa: E402
from fa3 import torch_api  # noqa: E402

sys.path.insert(0, str(ROOT / "test" / "gpu"))
import check_fwd  # noqa: E402  (the fp32 reference)
from fa3.torch_api import flash_attn_func  # noqa: E402

O_REL_TOL = 1e-2      # as test/gpu/check_fwd.py
LSE_ABS_TOL = 1e-3
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
# (B, Sq, Skv, Hq, Hkv): GQA, Sq != Skv (bottom-right causal), a ragged tile
CASES = [(2, 256, 256, 4, 4), (1, 300, 1000, 8, 2), (2, 1000, 300, 4, 1)]


def reference(q, k, v, causal):
    """check_fwd's fp32 reference at the default scale 1/sqrt(D), no window
    or softcap: o [B, Sq, Hq, D] and lse [B, Hq, Sq] (causal bottom-right)."""
    mask = SimpleNamespace(causal=causal, window_left=-1,
                           window_right=0 if causal else -1, softcap=0.0)
    o, lse, _ = check_fwd.reference(q, k, v, 1.0 / math.sqrt(q.shape[-1]), mask)
    return o, lse


def attn_block(x, wq, wk, wv, wo, out, lse_out, *, Hq, Hkv, D, causal, kernel_dir):
    """The model: x [B, S, E] -> q, k, v projections -> attention -> wo."""
    B, S, _ = x.shape
    q = (x @ wq).view(B, S, Hq, D)
    k = (x @ wk).view(B, S, Hkv, D)
    v = (x @ wv).view(B, S, Hkv, D)
    o, lse = flash_attn_func(q, k, v, causal=causal, kernel_dir=kernel_dir, out=out,
                             lse_out=lse_out)
    return o.reshape(B, S, Hq * D) @ wo, o, lse, q, k, v


def attn_only(q, k, v, *, causal, kernel_dir, return_lse=True, deterministic=False):
    r = flash_attn_func(q, k, v, causal=causal, kernel_dir=kernel_dir, return_lse=return_lse,
                        deterministic=deterministic)
    return r


def relerr(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def check_cases(kdir, results):
    gen = torch.Generator(device="cuda").manual_seed(1234)
    for dname, dt in DTYPES.items():
        for D in (64, 128):
            for causal in (False, True):
                torch._dynamo.reset()   # a fresh compile per variant (then one recompile
                for case in CASES:      # with dynamic shapes for the 2nd shape)
                    label = f"{dname} d{D} {'causal' if causal else 'full'} {case}"
                    res = {"label": label}
                    try:
                        res.update(one_case(kdir, dt, D, causal, case, gen))
                    except Exception as e:  # noqa: BLE001
                        res.update(ok=False, error=f"{type(e).__name__}: {e}")
                        traceback.print_exc()
                    results.append(res)
                    print(("PASS " if res["ok"] else "FAIL ") + label
                          + "".join(f" {k}={v:.2e}" for k, v in res.items()
                                    if isinstance(v, float))
                          + (f" {res['error']}" if "error" in res else ""), flush=True)


def one_case(kdir, dt, D, causal, case, gen):
    B, Sq, Skv, Hq, Hkv = case
    res = {}
    # 1. attention alone, compiled with fullgraph=True: against the reference and eager
    q = torch.randn(B, Sq, Hq, D, device="cuda", generator=gen).to(dt)
    k = torch.randn(B, Skv, Hkv, D, device="cuda", generator=gen).to(dt)
    v = torch.randn(B, Skv, Hkv, D, device="cuda", generator=gen).to(dt)
    fn = torch.compile(attn_only, fullgraph=True)
    o, lse = fn(q, k, v, causal=causal, kernel_dir=kdir)
    o_e, lse_e = flash_attn_func(q, k, v, causal=causal, kernel_dir=kdir, return_lse=True)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, causal)
    keep = ~torch.isinf(ref_lse)            # rows that see a key (all but causal Sq > Skv)
    res["rel_err_o"] = relerr(o.transpose(1, 2)[keep], ref_o.transpose(1, 2)[keep])
    res["max_err_lse"] = (lse[keep] - ref_lse[keep]).abs().max().item()
    ok = (res["rel_err_o"] < O_REL_TOL and res["max_err_lse"] < LSE_ABS_TOL
          and not torch.isnan(o).any().item()
          and bool((o.transpose(1, 2)[~keep] == 0).all().item())
          and bool(torch.isneginf(lse[~keep]).all().item()))
    res["same_as_eager"] = bool(torch.equal(o, o_e) and torch.equal(lse, lse_e))
    ok = ok and res["same_as_eager"]
    # 2. the model (projections around it), out=/lse_out= poisoned with NaN
    E = 256
    x = torch.randn(B, Sq, E, device="cuda", generator=gen).to(dt) / 4
    w = [torch.randn(E, n, device="cuda", generator=gen).to(dt) / math.sqrt(E)
         for n in (Hq * D, Hkv * D, Hkv * D)]
    wo = torch.randn(Hq * D, E, device="cuda", generator=gen).to(dt) / math.sqrt(Hq * D)
    out = torch.full((B, Sq, Hq, D), float("nan"), device="cuda", dtype=dt)
    lse_out = torch.full((B, Hq, Sq), float("nan"), device="cuda")
    model = torch.compile(attn_block, fullgraph=True)
    y, o2, l2, q2, k2, v2 = model(x, *w, wo, out, lse_out, Hq=Hq, Hkv=Hkv, D=D, causal=causal,
                                  kernel_dir=kdir)
    torch.cuda.synchronize()
    r_o, r_lse = reference(q2, k2, v2, causal)
    keep2 = ~torch.isinf(r_lse)
    res["model_rel_err_o"] = relerr(out.transpose(1, 2)[keep2], r_o.transpose(1, 2)[keep2])
    res["model_max_err_lse"] = (lse_out[keep2] - r_lse[keep2]).abs().max().item()
    y_ref = r_o.reshape(B, Sq, Hq * D) @ wo.float()
    res["model_rel_err_y"] = relerr(y, y_ref)
    ok = (ok and res["model_rel_err_o"] < O_REL_TOL and res["model_max_err_lse"] < LSE_ABS_TOL
          and res["model_rel_err_y"] < 2e-2
          and not torch.isnan(out).any().item() and not torch.isnan(lse_out).any().item())
    res["ok"] = bool(ok)
    return res


def check_graph(kdir, results):
    """The traced graph holds the op; dynamic shapes; a backward the kernel
    cannot do refused; the deterministic backward, eager and compiled."""
    dt = torch.bfloat16

    def record(label, ok, detail=""):
        results.append({"label": label, "ok": bool(ok), "detail": detail})
        print(("PASS " if ok else "FAIL ") + label + (f": {detail}" if detail else ""),
              flush=True)

    mk = lambda *s: torch.randn(*s, device="cuda", dtype=dt)  # noqa: E731
    q, k, v = mk(1, 128, 2, 128), mk(1, 128, 2, 128), mk(1, 128, 2, 128)
    try:
        torch._dynamo.reset()
        ex = torch._dynamo.explain(attn_only)(q, k, v, causal=True, kernel_dir=kdir)
        ops = [str(n.target) for g in ex.graphs for n in g.graph.nodes
               if n.op == "call_function"]
        record("explain: one graph, no break, calls fa3.flash_attn_fwd",
               ex.graph_count == 1 and ex.graph_break_count == 0
               and any("fa3.flash_attn_fwd" in t for t in ops),
               f"graphs={ex.graph_count} breaks={ex.graph_break_count} ops={ops}")
    except Exception as e:  # noqa: BLE001
        record("explain", False, f"{type(e).__name__}: {e}")
    try:
        torch._dynamo.reset()
        from torch._dynamo.utils import counters
        counters.clear()
        fn = torch.compile(attn_only, fullgraph=True, dynamic=True)
        errs = []
        for S in (200, 333, 1024):
            a, b, c = mk(2, S, 4, 64), mk(2, S, 2, 64), mk(2, S, 2, 64)
            o, lse = fn(a, b, c, causal=False, kernel_dir=kdir)
            r, rl = reference(a, b, c, False)
            errs.append(relerr(o, r))
        frames = counters["stats"]["unique_graphs"]
        record("dynamic=True: 3 seqlens", max(errs) < O_REL_TOL,
               f"rel errs {[f'{e:.1e}' for e in errs]}, unique graphs {frames}")
    except Exception as e:  # noqa: BLE001
        record("dynamic=True", False, f"{type(e).__name__}: {e}")
    try:
        torch._dynamo.reset()
        fn = torch.compile(attn_only, fullgraph=True)
        qg = q.clone().requires_grad_()
        q80, k80, v80 = mk(1, 128, 2, 80), mk(1, 128, 2, 80), mk(1, 128, 2, 80)
        try:
            fn(q80.requires_grad_(), k80, v80, causal=False, kernel_dir=kdir)
            record("requires_grad + head dim 80 refused (compiled)", False, "no error")
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            record("requires_grad + head dim 80 refused (compiled)",
                   "takes head dims 64, 96, 128, 192 and 256, not 80" in str(e), msg[:300])
        with torch.no_grad():
            o = fn(qg, k, v, causal=False, kernel_dir=kdir, return_lse=False,
                   deterministic=True)
        record("requires_grad under no_grad (compiled)", o.shape == q.shape)
    except Exception as e:  # noqa: BLE001
        record("requires_grad", False, f"{type(e).__name__}: {e}")
    check_deterministic(kdir, record, q, k, v)
    check_packed(kdir, record)


def check_packed(kdir, record):
    """flash_attn_qkvpacked_func (FA3's), both packed forms: o and lse
    bitwise those of flash_attn_func on contiguous copies of q, k, v (the
    same kernel reads the views' strides), o within O_REL_TOL of the fp32
    reference; with grad, the packed tensor's gradient against the unpacked
    call's dq, dk, dv (within O_REL_TOL, not bitwise: dQ's atomics add in
    any order), where KERNEL_DIR holds the bf16 d128 causal backward."""
    gen = torch.Generator(device="cuda").manual_seed(77)
    B, S, D = 2, 333, 128
    kernels, _ = torch_api.available_kernels(kdir)
    try:
        fa3facts.select_kernel(kernels, "bf16", D, D, True, (-1, 0), 0.0, backward=True)
        with_grad = True
    except LookupError:
        with_grad = False
    for form, Hq, Hkv in (("[B, S, 3, H, D]", 4, 4), ("[B, S, Hq + 2 Hkv, D]", 8, 2)):
        label = f"flash_attn_qkvpacked_func {form}, causal" + (", with grad" if with_grad else "")
        try:
            if Hq == Hkv:
                qkv = torch.randn(B, S, 3, Hq, D, device="cuda", generator=gen)
            else:
                qkv = torch.randn(B, S, Hq + 2 * Hkv, D, device="cuda", generator=gen)
            qkv = qkv.to(torch.bfloat16).requires_grad_(with_grad)
            o, lse = torch_api.flash_attn_qkvpacked_func(
                qkv, causal=True, num_heads_q=None if Hq == Hkv else Hq,
                return_attn_probs=True, kernel_dir=kdir)
            parts = (qkv.unbind(2) if Hq == Hkv else qkv.split([Hq, Hkv, Hkv], dim=2))
            leaves = [t.detach().contiguous().requires_grad_(with_grad) for t in parts]
            o2, lse2 = flash_attn_func(*leaves, causal=True, return_lse=True, kernel_dir=kdir)
            ref_o, _ = reference(*[t.detach() for t in leaves], True)
            same = bool(torch.equal(o, o2) and torch.equal(lse, lse2))
            err = relerr(o, ref_o)
            ok = same and err < O_REL_TOL
            detail = f"same as unpacked {same}, rel err o {err:.1e}"
            if with_grad:
                dout = torch.randn(o.shape, device="cuda", generator=gen).to(o.dtype)
                o.backward(dout)
                o2.backward(dout)
                torch.cuda.synchronize()
                g = (qkv.grad.unbind(2) if Hq == Hkv
                     else qkv.grad.split([Hq, Hkv, Hkv], dim=2))
                errs = [relerr(a, b.grad) for a, b in zip(g, leaves)]
                ok = ok and max(errs) < O_REL_TOL
                detail += "; grad: dq, dk, dv rel diff " + " ".join(f"{e:.1e}" for e in errs)
            record(label, ok, detail)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            record(label, False, f"{type(e).__name__}: {e}")


def check_deterministic(kdir, record, q, k, v):
    """deterministic=True with grad (module docstring, 1.), on q, k, v [1,
    128, 2, 128] bf16, full mask."""
    label = "deterministic=True backward, eager x2 and compiled"
    kernels, _ = torch_api.available_kernels(kdir)
    missing = []
    for det in (False, True):
        try:
            fa3facts.select_kernel(kernels, "bf16", 128, 128, False, (-1, -1), 0.0,
                                   backward=True, deterministic=det)
        except LookupError:
            missing.append("deterministic" if det else "plain")
    if missing:
        record(label + ": skipped", True, f"KERNEL_DIR holds no {' or '.join(missing)} bf16 d128 "
               "full-mask backward kernel (fa3-compile --all --backward [--deterministic])")
        return
    dout = torch.randn_like(q)

    def grads(f, det):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        f(*leaves, causal=False, kernel_dir=kdir, return_lse=False,
          deterministic=det).backward(dout)
        torch.cuda.synchronize()
        return [t.grad for t in leaves]

    def bitwise(a, b):
        return all(torch.equal(x.view(torch.int16), y.view(torch.int16)) for x, y in zip(a, b))
    try:
        torch._dynamo.reset()
        eager = [grads(attn_only, True) for _ in range(2)]
        compiled = grads(torch.compile(attn_only, fullgraph=True), True)
        plain = grads(attn_only, False)
        errs = [relerr(d, p) for d, p in zip(eager[0], plain)]
        record(label, bitwise(eager[0], eager[1]) and bitwise(eager[0], compiled)
               and max(errs) < O_REL_TOL,
               f"eager runs bitwise equal {bitwise(eager[0], eager[1])}, compiled "
               f"{bitwise(eager[0], compiled)}; rel. diff to the plain backward's dq, dk, dv "
               + " ".join(f"{e:.1e}" for e in errs))
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        record(label, False, f"{type(e).__name__}: {e}")


def check_cuda_graphs(kdir, results):
    """Capture and replay (module docstring, 2.)."""
    gen = torch.Generator(device="cuda").manual_seed(4321)

    def record(label, ok, detail=""):
        results.append({"label": label, "ok": bool(ok), "detail": detail})
        print(("PASS " if ok else "FAIL ") + label + (f": {detail}" if detail else ""),
              flush=True)

    def fresh(shape, dt):
        return torch.randn(*shape, device="cuda", generator=gen).to(dt)

    def errors(q, k, v, o, lse, causal):
        ref_o, ref_lse = reference(q, k, v, causal)
        return relerr(o, ref_o), (lse - ref_lse).abs().max().item()

    def within(err):
        return err[0] < O_REL_TOL and err[1] < LSE_ABS_TOL

    # (dtype, D, causal, (B, Sq, Skv, Hq, Hkv)): persistent (d64/d128, tile
    # counters) and one-CTA-per-tile (d256) kernels
    graphs = [("bf16", 128, True, (2, 1000, 1000, 8, 2)),
              ("f16", 64, False, (1, 777, 1500, 4, 4)),
              ("bf16", 256, True, (1, 300, 513, 4, 1))]
    captured = []
    for dname, D, causal, (B, Sq, Skv, Hq, Hkv) in graphs:
        label = f"graph {dname} d{D} {'causal' if causal else 'full'} B{B} Sq{Sq} Skv{Skv} Hq{Hq} Hkv{Hkv}"
        try:
            dt = DTYPES[dname]
            q, k, v = (fresh(s, dt) for s in ((B, Sq, Hq, D), (B, Skv, Hkv, D), (B, Skv, Hkv, D)))
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):   # warm-up (loads the kernel), as torch asks
                flash_attn_func(q, k, v, causal=causal, kernel_dir=kdir, return_lse=True)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                o, lse = flash_attn_func(q, k, v, causal=causal, kernel_dir=kdir,
                                         return_lse=True)
            errs = []
            for _ in range(3):
                for t in (q, k, v):
                    t.copy_(fresh(t.shape, dt))
                o.fill_(float("nan"))
                lse.fill_(float("nan"))
                g.replay()
                errs.append(errors(q, k, v, o, lse, causal))
            record(label + ": 3 replays on fresh inputs", all(map(within, errs)),
                   " ".join(f"o {e[0]:.1e} lse {e[1]:.1e}" for e in errs))
            captured.append((label, g, q, k, v, o, lse, causal, dt))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            record(label, False, f"{type(e).__name__}: {e}")
    if len(captured) != len(graphs):
        return
    try:
        # eager calls on other tensors between replays, graphs alternating
        errs = []
        for rnd in range(2):
            for label, g, q, k, v, o, lse, causal, dt in captured:
                qe, ke, ve = (fresh(t.shape, dt) for t in (q, k, v))
                oe, lsee = flash_attn_func(qe, ke, ve, causal=causal, kernel_dir=kdir,
                                           return_lse=True)
                for t in (q, k, v):
                    t.copy_(fresh(t.shape, dt))
                o.fill_(float("nan"))
                g.replay()
                errs.append(within(errors(q, k, v, o, lse, causal)))
                errs.append(within(errors(qe, ke, ve, oe, lsee, causal)))
        record("graphs alternating with eager calls between replays", all(errs),
               f"{sum(errs)}/{len(errs)} within tolerance")
        # a replay on another stream; then 20 back-to-back replays
        label, g, q, k, v, o, lse, causal, dt = captured[0]
        s2 = torch.cuda.Stream()
        s2.wait_stream(torch.cuda.current_stream())
        o.fill_(float("nan"))
        with torch.cuda.stream(s2):
            g.replay()
        torch.cuda.current_stream().wait_stream(s2)
        e1 = errors(q, k, v, o, lse, causal)
        o.fill_(float("nan"))
        for _ in range(20):
            g.replay()
        e2 = errors(q, k, v, o, lse, causal)
        record("replay on a second stream, then 20 back-to-back", within(e1) and within(e2),
               f"o {e1[0]:.1e}/{e2[0]:.1e} lse {e1[1]:.1e}/{e2[1]:.1e}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        record("graph replays", False, f"{type(e).__name__}: {e}")
    try:
        # torch.compile's reduce-overhead mode captures the op in CUDA graph trees
        torch._dynamo.reset()
        fn = torch.compile(attn_only, mode="reduce-overhead", fullgraph=True)
        errs = []
        for i in range(4):   # the first calls record, later ones replay
            q, k, v = (fresh((2, 600, 4, 128), torch.bfloat16) for _ in range(3))
            o, lse = fn(q, k, v, causal=True, kernel_dir=kdir)
            errs.append(errors(q, k, v, o.clone(), lse.clone(), True))
        record("torch.compile(mode='reduce-overhead'): 4 calls on fresh inputs",
               all(map(within, errs)), " ".join(f"o {e[0]:.1e}" for e in errs))
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        record("torch.compile(mode='reduce-overhead')", False, f"{type(e).__name__}: {e}")
    try:
        # The C runtime's own counters in a capture (no args.tile_counter), on
        # a fresh kernel object of a persistent kernel (the dynamic
        # scheduler): replays on fresh inputs are right; after 1024 captured
        # launches the object refuses with what to do.
        from fa3 import runtime
        kf = torch_api.select_kernel("bf16", 128, 128, True, kernel_dir=kdir)
        kobj = runtime.Kernel(kf.cubin_path, kf.facts_path)
        assert kobj.facts.persistent and kobj.facts.cluster_m == 1, "not the dynamic scheduler"
        B, S, H, D = 2, 900, 4, 128
        q, k, v = (fresh((B, S, H, D), torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty((B, H, S), device="cuda")
        args = runtime.fwd_args(*[runtime.tensor(t.data_ptr(), *torch_api._bhsd(t), name=n)
                                  for n, t in zip("qkvo", (q, k, v, o))],
                                lse.data_ptr(), None, "bf16")

        def launch():
            kobj.fwd(args, torch.cuda.current_stream().cuda_stream)
        launch()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            launch()
        errs = []
        for _ in range(3):
            for t in (q, k, v):
                t.copy_(fresh(t.shape, torch.bfloat16))
            o.fill_(float("nan"))
            g.replay()
            errs.append(errors(q, k, v, o, lse, True))
        record("runtime's own counters in a capture: 3 replays", all(map(within, errs)),
               " ".join(f"o {e[0]:.1e}" for e in errs))
        msg, n = "", 1
        while n < 1100 and not msg:
            gi = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(gi):
                    launch()
                n += 1
            except Exception as e:  # noqa: BLE001
                msg = str(e)
        record("captured launches beyond 1024 refused", n == 1024 and "pass args.tile_counter"
               in msg, f"after {n}: {msg[:160]}")
        kobj.close()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        record("runtime's own counters in a capture", False, f"{type(e).__name__}: {e}")
    try:
        # a variant first used inside a capture: refused, with what to do (the
        # checks above load no bf16 head-dim-256 full-mask kernel)
        q = fresh((1, 128, 2, 256), torch.bfloat16)
        g = torch.cuda.CUDAGraph()
        msg = ""
        try:
            with torch.cuda.graph(g):
                flash_attn_func(q, q, q, causal=False, kernel_dir=kdir)
        except RuntimeError as e:
            msg = str(e)
        record("first call inside a capture refused", "call it once before capturing" in msg,
               msg[:200])
    except Exception as e:  # noqa: BLE001
        record("first call inside a capture", False, f"{type(e).__name__}: {e}")


def per_call(fn, n=2000, reps=5):
    """Median over `reps` of the mean wall time of n back-to-back calls (us),
    synchronized before and after each batch."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(ts)


def overhead(kdir):
    B, S, H, D = 1, 128, 1, 128
    dt = torch.bfloat16
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=dt) for _ in range(3))
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))
    torch._dynamo.reset()
    ours_c = torch.compile(lambda a, b, c: flash_attn_func(a, b, c, kernel_dir=kdir),
                           fullgraph=True)
    sdpa_c = torch.compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c),
                           fullgraph=True)
    rows = [
        ("fa3 flash_attn_func, eager", lambda: flash_attn_func(q, k, v, kernel_dir=kdir)),
        ("fa3 flash_attn_func, torch.compile(fullgraph)", lambda: ours_c(q, k, v)),
        ("SDPA, eager", lambda: F.scaled_dot_product_attention(qs, ks, vs)),
        ("SDPA, torch.compile(fullgraph)", lambda: sdpa_c(qs, ks, vs)),
    ]
    ours_c(q, k, v)   # compiles, registers the op
    graphs = []
    for call in (lambda: flash_attn_func(q, k, v, kernel_dir=kdir),
                 lambda: F.scaled_dot_product_attention(qs, ks, vs)):
        call()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call()
        graphs.append(g)
    rows += [("fa3 flash_attn_func, CUDA graph replay", graphs[0].replay),
             ("SDPA, CUDA graph replay", graphs[1].replay)]
    op = torch.ops.fa3.flash_attn_fwd.default
    rows.insert(1, ("torch.ops.fa3.flash_attn_fwd, eager",
                    lambda: op(q, k, v, None, False, [-1, -1], 0.0, kdir, None, None)))
    # FP8 (e4m3 q, k, v with FA3's [B, Hkv] descales), where the directory
    # has the head dim 128 kernel: its eager path checks the descales too
    q8, k8, v8 = (t.to(torch.float8_e4m3fn) for t in (q, k, v))
    ds = torch.ones(B, H, device="cuda")
    fp8 = [kf for kf in torch_api.available_kernels(kdir)[0]
           if kf.dtype == "e4m3" and kf.head_dim == D and not kf.causal]
    if fp8:
        rows.insert(2, ("fa3 flash_attn_func FP8 [B, Hkv] descales, eager",
                        lambda: flash_attn_func(q8, k8, v8, q_descale=ds, k_descale=ds,
                                                v_descale=ds, kernel_dir=kdir)))
    with torch.no_grad():
        out = [(name, per_call(f)) for name, f in rows]
    print(f"\nper-call wall time, B={B} S={S} H={H} D={D} bf16 (median of 5 x 2000 calls, "
          f"launch included; {torch.cuda.get_device_name()}, torch {torch.__version__}):")
    print("| call | us/call |\n|---|---|")
    for name, t in out:
        print(f"| {name} | {t:.1f} |")
    return [{"call": n, "us_per_call": t} for n, t in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel_dir")
    ap.add_argument("--out", default=None, help="write check_torch.json there")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--overhead-only", action="store_true")
    a = ap.parse_args()
    kdir = str(Path(a.kernel_dir).resolve())
    print(f"torch {torch.__version__}, cuda {torch.version.cuda}, {torch.cuda.get_device_name()}"
          f", FA3_JIT={os.environ.get('FA3_JIT')}", flush=True)
    torch_api.clear_caches()
    results = []
    if not a.overhead_only:
        check_cases(kdir, results)
        check_graph(kdir, results)
        check_cuda_graphs(kdir, results)
    timing = None if a.skip_overhead else overhead(kdir)
    failed = [r for r in results if not r["ok"]]
    print(f"\ncheck_torch: {len(results) - len(failed)}/{len(results)} passed")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "check_torch.json"), "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                       "results": results, "per_call_us": timing}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
