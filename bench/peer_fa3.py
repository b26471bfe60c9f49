"""FlashAttention-3 (Dao-AILab/flash-attention, hopper/) as a peer in the
benchmarks, timed in the same process on the same inputs as ours.

It is used where its Python interface imports (`flash_attn_interface`, with
its compiled `flash_attn_3._C` on PYTHONPATH). It is built from its public
sources for the GPU machine and is never part of this repository: neither
its code nor a script that builds it (issue 18); bench/NOTES.md ("FA3 in the
same run") records the commit and the options it was built with. Where it
does not import, the benchmarks run without it and say why.
"""


def add_option(ap):
    """The benchmarks' --no-fa3."""
    ap.add_argument("--no-fa3", action="store_true",
                    help="leave FlashAttention-3 out even where it is importable")


def load(leave_out=None, dtype=None):
    """(module, description) or (None, why not); `leave_out`: the option that
    left it out (None: use it where it imports); `dtype`: a torch dtype the
    benchmark runs, tried once on a small input first (a build may leave
    dtypes out: the one in bench/NOTES.md has no FP16), so that a run
    without it says why once instead of failing in every cell."""
    if leave_out:
        return None, f"left out ({leave_out})"
    try:
        import flash_attn_interface as fai
    except Exception as e:  # not installed: the usual case off the GPU machine
        return None, f"FlashAttention-3 not importable ({type(e).__name__}: {e})"[:200]
    commit = "?"
    try:
        from flash_attn_config import CONFIG
        commit = CONFIG.get("commit", "?")
    except Exception:
        pass
    if dtype is not None:
        import torch
        try:
            x = torch.zeros(1, 128, 1, 64, device="cuda", dtype=dtype)
            output(fai.flash_attn_func(x, x, x))
            torch.cuda.synchronize()  # a launch's own failure surfaces here
        except Exception as e:
            return None, (f"FlashAttention-3 (commit {commit}) does not run {dtype} "
                          f"(its forward at head dim 64 failed: {type(e).__name__}: "
                          f"{e})")[:300]
    return fai, f"FlashAttention-3 (flash_attn_interface), commit {commit}"


def forward(fai, q, k, v, causal, descales=None):
    """A callable that runs FA3's forward on [B, S, H, D] tensors (FP8: e4m3
    q, k, v with descales (q, k, v) of shape [B, H_kv], float32: ours are
    [B, H] per q head, the same where H = H_kv, as on the benchmark grids).
    Its default settings: FA3's own tile sizes, clusters and scheduler."""
    qd = kd = vd = None
    if descales is not None:
        qd, kd, vd = descales

    def run():
        return fai.flash_attn_func(q, k, v, causal=causal, q_descale=qd, k_descale=kd,
                                   v_descale=vd)
    return run


def output(result):
    """FA3's flash_attn_func returns o, or (o, lse) in some versions."""
    return result[0] if isinstance(result, tuple) else result


def backward(fai, q, k, v, dout, causal):
    """A closure running FA3's backward for (q, k, v) in BSHD through
    autograd (its forward done once here), and the gradients it computes
    (so one backward runs here too)."""
    import torch
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    o = output(fai.flash_attn_func(qg, kg, vg, causal=causal))

    def run():
        return torch.autograd.grad(o, (qg, kg, vg), dout, retain_graph=True)
    return run, list(run())


# FA3's kernels are all CUTLASS's device_kernel<...>: their roles by the
# class in the (demangled) name (hopper/flash_bwd_*.h)
_BWD_ROLES = (("FlashAttnBwdPreprocess", "pre"), ("FlashAttnBwdPostprocess", "post"),
              ("FlashAttnBwdSm90", "main"))


def backward_role(kernel_name):
    """'pre', 'main' or 'post' for a kernel of FA3's backward (its
    preprocess, main kernel, dQ / dK dV conversion), else None."""
    for cls, role in _BWD_ROLES:
        if cls in kernel_name:
            return role
    return None
