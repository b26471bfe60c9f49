"""The GPU runtime without a GPU: libfa3rt's facts parser and argument
validation (C unit test + through ctypes), the Python facts parser, kernel
selection, and that fa3.torch_api imports without torch.

Needs gcc, /usr/local/cuda/include/cuda.h and the CUDA link stub
(/usr/local/cuda/lib64/stubs/libcuda.so); skipped where they are missing. At run
time the stub stands in for libcuda.so.1: no CUDA call succeeds, none is needed.
"""
import ctypes
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fa3rt_build import CUDA, RUNTIME, STUB, needs_c

ROOT = Path(__file__).resolve().parents[2]

from fa3 import facts as F  # noqa: E402

FACTS = """fa3-kernel-facts 1
kernel fa3_fwd_d128_bf16_causal
dtype bf16
head_dim 128
head_dim_v 128
block_m 128
block_n 128
threads 384
dynamic_smem 163912
causal 1
window_left -1
window_right 0
softcap 0
scale 0.08838834764831845
params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages
grid tiles
"""


def _stub_dir(tmp_path):
    d = tmp_path / "stub"
    d.mkdir(exist_ok=True)
    link = d / "libcuda.so.1"
    if not link.exists():
        link.symlink_to(STUB)
    return d


@needs_c
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_c_unit(tmp_path, cc):
    """runtime/tests/fa3rt_unit.c: parser, validation, messages, with each
    compiler (ASan/UBSan where it has them; any UB report fails the test)."""
    if not shutil.which(cc):
        pytest.skip(f"no {cc}")
    exe = tmp_path / "fa3rt_unit"
    base = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I", str(RUNTIME / "include"),
            "-I", str(CUDA / "include"), str(RUNTIME / "fa3rt.c"),
            str(RUNTIME / "tests" / "fa3rt_unit.c"), "-o", str(exe),
            "-L", str(STUB.parent), "-lcuda", "-pthread", "-lm"]
    r = subprocess.run(base[:5] + ["-fsanitize=address,undefined",
                                   "-fno-sanitize-recover=all"] + base[5:],
                       capture_output=True, text=True)
    if r.returncode:  # no sanitizer runtime: plain build
        r = subprocess.run(base, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, LD_LIBRARY_PATH=str(_stub_dir(tmp_path)),
               ASAN_OPTIONS="detect_leaks=1")
    # It has its own sanitizer runtime (static): one preloaded into this
    # Python by the sanitizer build's run (scripts/test-build.sh) would clash.
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout


@needs_c
def test_ctypes_mirrors_match_the_header(tmp_path):
    """Every ctypes mirror of a fa3rt.h struct has the C struct's size and
    each field's offset (a field added in C but not here would shift the
    ones after it; fa3rt_bwd_plan would write past a short BwdLaunch)."""
    from fa3 import runtime as R
    structs = {"fa3rt_tensor": R.Tensor, "fa3rt_facts": R.Facts, "fa3rt_fwd_args": R.FwdArgs,
               "fa3rt_fwd_launch": R.FwdLaunch, "fa3rt_bwd_args": R.BwdArgs,
               "fa3rt_bwd_launch": R.BwdLaunch, "fa3rt_quantize_args": R.QuantizeArgs}
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "fa3rt.h"',
             "int main(void) {",
             '  printf("version %d.%d\\n", FA3RT_VERSION_MAJOR, FA3RT_VERSION_MINOR);']
    for c, py in structs.items():
        lines.append(f'  printf("{c} sizeof %zu\\n", sizeof({c}));')
        for name, _ in py._fields_:
            lines.append(f'  printf("{c} {name} %zu\\n", offsetof({c}, {name}));')
    lines += ["  return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", str(RUNTIME / "include"),
                        str(src), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    want = [f"version {R.VERSION[0]}.{R.VERSION[1]}"]
    for c, py in structs.items():
        want.append(f"{c} sizeof {ctypes.sizeof(py)}")
        want += [f"{c} {name} {getattr(py, name).offset}" for name, _ in py._fields_]
    assert got.split("\n")[:-1] == want


@pytest.mark.parametrize("body,why", [
    ("int fa3rt_version(void) { return 5; }", "is libfa3rt 0.5; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 6; }", "is libfa3rt 0.6; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 7; }", "is libfa3rt 0.7; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 8; }", "is libfa3rt 0.8; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 9; }", "is libfa3rt 0.9; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 10; }", "is libfa3rt 0.10; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 11; }", "is libfa3rt 0.11; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 12; }", "is libfa3rt 0.12; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 13; }", "is libfa3rt 0.13; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 14; }", "is libfa3rt 0.14; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 15; }", "is libfa3rt 0.15; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 16; }", "is libfa3rt 0.16; these bindings need 0.18"),
    ("int fa3rt_version(void) { return 17; }", "is libfa3rt 0.17; these bindings need 0.18"),
    ("int fa3rt_other(void) { return 5; }", "older than 0.5 (no fa3rt_version)"),
])
def test_load_library_refuses_another_version(tmp_path, body, why):
    """A libfa3rt of another version (its structs laid out otherwise) is
    refused by name, not called with mismatched arguments."""
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    from fa3 import runtime as R
    src, so = tmp_path / "old.c", tmp_path / "libold.so"
    src.write_text(body + "\n")
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    with pytest.raises(OSError, match=re.escape(why)):
        R.load_library(so)


def test_makefile_builds_the_library(tmp_path):
    if not (shutil.which("make") and shutil.which("gcc") and STUB.exists()):
        pytest.skip("needs make, gcc and the CUDA link stub")
    work = tmp_path / "runtime"
    shutil.copytree(RUNTIME, work, ignore=shutil.ignore_patterns("*.so"))
    r = subprocess.run(["make", "-C", str(work), f"CUDA={CUDA}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (work / "libfa3rt.so").exists()


def test_python_and_c_parsers_agree(rt):
    c = rt.parse_facts_c(FACTS)
    p = F.parse_facts(FACTS)
    assert c.kernel.decode() == p.kernel
    assert c.dtype == rt.DTYPES[p.dtype]
    for name in ("head_dim", "head_dim_v", "block_m", "block_n", "threads", "dynamic_smem",
                 "window_left", "window_right"):
        assert getattr(c, name) == getattr(p, name), name
    assert bool(c.causal) == p.causal and c.softcap == p.softcap and c.scale == p.scale
    bad = [FACTS.replace("head_dim 128\n", ""), FACTS.replace("dtype bf16", "dtype f32"),
           FACTS.replace("block_m 128", "block_m x"), FACTS.replace("window_right 0", "window_right 3"),
           FACTS.replace("fa3-kernel-facts 1", "fa3-kernel-facts 5"),
           FACTS.replace("oStrideH ", ""), FACTS + "threads 256\n", "hello\n",
           FACTS + "cluster_m 3\n", FACTS + "cluster_m 2\ncluster_m 2\n"]
    for text in bad:
        with pytest.raises(rt.Fa3RuntimeError) as e:
            rt.parse_facts_c(text)
        assert e.value.status == 2
        with pytest.raises(F.FactsError):
            F.parse_facts(text)
    ok = FACTS + "future_key 1 2 3\n# comment\n\n"
    v2 = FACTS.replace("fa3-kernel-facts 1", "fa3-kernel-facts 2")
    assert rt.parse_facts_c(v2).version == F.parse_facts(v2).version == 2
    v3 = FACTS.replace("fa3-kernel-facts 1", "fa3-kernel-facts 3")
    assert rt.parse_facts_c(v3).version == F.parse_facts(v3).version == 3
    v4 = FACTS.replace("fa3-kernel-facts 1", "fa3-kernel-facts 4")
    assert rt.parse_facts_c(v4).version == F.parse_facts(v4).version == 4
    assert rt.parse_facts_c(ok).head_dim == F.parse_facts(ok).head_dim == 128
    assert rt.parse_facts_c(ok).cluster_m == F.parse_facts(ok).cluster_m == 1
    two = FACTS + "cluster_m 2\n"
    assert rt.parse_facts_c(two).cluster_m == F.parse_facts(two).cluster_m == 2


def _bshd(rt, ptr, B, S, H, D):
    return rt.tensor(ptr, (B, H, S, D), (S * H * D, D, H * D, 1))


def test_plan_through_ctypes(rt):
    """Struct layouts of fa3rt.h as seen from Python, and the validation messages."""
    f = rt.parse_facts_c(FACTS)
    args = rt.fwd_args(_bshd(rt, 1 << 20, 2, 1000, 8, 128), _bshd(rt, 2 << 20, 2, 700, 2, 128),
                       _bshd(rt, 3 << 20, 2, 700, 2, 128), _bshd(rt, 4 << 20, 2, 1000, 8, 128),
                       5 << 20, None, "bf16")
    L = rt.plan(f, args)
    assert tuple(L.grid) == (8 * 8 * 2, 1, 1) and tuple(L.block) == (384, 1, 1)
    assert L.dynamic_smem == 163912 and not L.empty and not L.fill_only
    assert (L.B, L.Sq, L.Skv, L.Hq, L.Hkv) == (2, 1000, 700, 8, 2)
    assert (L.o_stride_b, L.o_stride_s, L.o_stride_h) == (1000 * 8 * 128, 8 * 128, 128)
    assert math.isclose(L.scale_log2, 0.08838834764831845 * 1.4426950408889634, rel_tol=1e-7)
    args.softmax_scale = 0.25
    assert rt.plan(f, args).scale == 0.25
    args.dtype = rt.DTYPES["f16"]
    with pytest.raises(rt.Fa3RuntimeError, match="dtype f16 does not match kernel"):
        rt.plan(f, args)
    args.dtype = rt.DTYPES["bf16"]
    args.q.ptr += 8
    with pytest.raises(rt.Fa3RuntimeError, match="q pointer .* is not 16-byte aligned"):
        rt.plan(f, args)


def test_plan_refuses_out_of_range_numbers(rt):
    """Issue 17: no division by zero, overflow or zero grid on any number."""
    f = rt.parse_facts_c(FACTS)

    def args(B=2, Hq=8, Hkv=2, Sq=1000, Skv=700):
        # overlapping rows (any strides that TMA takes are accepted): only the
        # counts are large
        t = lambda p, H, S: rt.tensor(p << 20, (B, H, S, 128), (128, 128, 128, 1))  # noqa: E731
        return rt.fwd_args(t(1, Hq, Sq), t(2, Hkv, Skv), t(3, Hkv, Skv), t(4, Hq, Sq), 0, None,
                           "bf16")
    with pytest.raises(rt.Fa3RuntimeError, match=r"q.shape\[0\] \(B\): 4294967296 is out of "
                       r"range \(0 to 2\^31-1\)"):
        rt.plan(f, args(B=2**32, Hq=2**32, Hkv=2**32))
    with pytest.raises(rt.Fa3RuntimeError, match=r"tiles: .* is out of range \(at most 2\^31-1"):
        rt.plan(f, args(B=2**31 - 1, Hq=2**31 - 1, Hkv=1))
    f.block_m = 0
    with pytest.raises(rt.Fa3RuntimeError, match=r"facts.block_m: 0 is out of range \(1 to 256\)"):
        rt.plan(f, args())
    f = rt.parse_facts_c(FACTS)
    a = args()
    a.softmax_scale = 1e300
    with pytest.raises(rt.Fa3RuntimeError, match=r"softmax_scale: 1e\+300 is out of range"):
        rt.plan(f, a)
    a.softmax_scale = 2.0
    assert rt.plan(f, a).scale == 2.0
    a.q.ptr = 2**64 - 16  # what -16 wraps to
    with pytest.raises(rt.Fa3RuntimeError, match="q pointer: 0xfffffffffffffff0 is out of range"):
        rt.plan(f, a)


def test_plan_varlen(rt):
    """A packed variable-length kernel (facts varlen 1): the grid covers the
    longest sequence in every sequence, the kernel's B is the sequence
    count and Sq the packed rows (LSE's [Hq, Tq] stride); the arrays and
    the batch-of-one tensors are checked, and the two kinds of kernel
    refuse each other's arguments."""
    f = rt.parse_facts_c(FACTS + "varlen 1\n")
    assert f.varlen == 1 and F.parse_facts(FACTS + "varlen 1\n").varlen
    assert rt.parse_facts_c(FACTS).varlen == 0 and not F.parse_facts(FACTS).varlen
    Tq, Tk = 5000, 3000

    def args(B=1, **kw):
        t = lambda p, H, T: rt.tensor(p << 20, (B, H, T, 128), (0, 128, H * 128, 1))  # noqa
        fields = dict(cu_seqlens_q=6 << 20, cu_seqlens_k=7 << 20, varlen_batch=3,
                      max_seqlen_q=4096)
        fields.update(kw)
        return rt.fwd_args(t(1, 8, Tq), t(2, 2, Tk), t(3, 2, Tk), t(4, 8, Tq), 5 << 20,
                           None, "bf16", **fields)
    L = rt.plan(f, args())
    assert tuple(L.grid) == (32 * 8 * 3, 1, 1) and not L.empty and not L.fill_only
    assert (L.B, L.Sq, L.Skv, L.Hq, L.Hkv) == (3, Tq, Tk, 8, 2)
    assert rt.plan(f, args(seqused_k=8 << 20)).grid[0] == 32 * 8 * 3
    # an over-estimated max_seqlen_q (FlashAttention takes one) covers no
    # more than the packed rows: 40 m-blocks of Tq = 5000, not 2^31 - 1's
    assert rt.plan(f, args(max_seqlen_q=2**31 - 1)).grid[0] == 40 * 8 * 3
    assert rt.plan(f, args(varlen_batch=0)).empty
    assert rt.plan(f, args(max_seqlen_q=0)).empty
    with pytest.raises(rt.Fa3RuntimeError, match="cu_seqlens_k pointer is NULL"):
        rt.plan(f, args(cu_seqlens_k=0))
    with pytest.raises(rt.Fa3RuntimeError, match="seqused_k pointer 0x801 is not a 4-byte"):
        rt.plan(f, args(seqused_k=0x801))
    with pytest.raises(rt.Fa3RuntimeError, match=r"q.shape\[0\] is 2; a packed batch's "):
        rt.plan(f, args(B=2))
    with pytest.raises(rt.Fa3ArgumentError, match="varlen_batch = -1 is out of range"):
        args(varlen_batch=-1)
    fixed = rt.parse_facts_c(FACTS)
    with pytest.raises(rt.Fa3RuntimeError, match="takes fixed-length batches .* use a varlen"):
        rt.plan(fixed, args())
    with pytest.raises(rt.Fa3RuntimeError, match=r"varlen 1 needs cluster_m 1 \(no clusters\)"):
        rt.parse_facts_c(FACTS + "cluster_m 2\nvarlen 1\n")
    with pytest.raises(F.FactsError, match=r"varlen 1 needs cluster_m 1 \(no clusters\)"):
        F.parse_facts(FACTS + "cluster_m 2\nvarlen 1\n")
    # a persistent one is launched like the fixed-length ones (one CTA per SM
    # at most, by fa3rt_fwd): its plan covers every tile
    persistent = rt.parse_facts_c(FACTS.replace("grid tiles", "grid persistent") + "varlen 1\n")
    assert persistent.persistent and rt.plan(persistent, args()).grid[0] == 32 * 8 * 3
    # no keys at all: the caller's to fill (the maps cannot describe an empty k)
    t = lambda p, H, T: rt.tensor(p << 20, (1, H, T, 128), (0, 128, H * 128, 1))  # noqa
    a = rt.fwd_args(t(1, 8, Tq), t(2, 2, 0), t(3, 2, 0), t(4, 8, Tq), 0, None, "bf16",
                    cu_seqlens_q=6 << 20, cu_seqlens_k=7 << 20, varlen_batch=3,
                    max_seqlen_q=4096)
    with pytest.raises(rt.Fa3RuntimeError, match=r"k and v have no rows \(Tk = 0\)"):
        rt.plan(f, a)


BWD_FACTS = """fa3-kernel-facts 1
kernel fa3_bwd_d128_bf16_causal_kernel
dtype bf16
head_dim 128
head_dim_v 128
block_m 64
block_n 128
threads 384
dynamic_smem 200000
causal 1
window_left -1
window_right 0
softcap 0
scale 0.08838834764831845
params mapQ mapK mapV mapdO dQaccum dK dV LSE delta B Sq Skv Hq Hkv dkvStrideB dkvStrideS dkvStrideH scaleLog2
grid tiles
backward 1
"""


def test_backward_facts(rt):
    """`backward 1`: the backward kernel's parameter list (read from
    fa3rt_abi.def), checked once the whole text is read, by both parsers."""
    assert F.BWD_KERNEL_PARAMS.split()[:5] == ["mapQ", "mapK", "mapV", "mapdO", "dQaccum"]
    assert F.BWD_KERNEL_PARAMS.split()[-1] == "scaleLog2" and "mapO" not in F.BWD_KERNEL_PARAMS
    # the helpers' lists are read apart from the kernels' (not matched by them)
    assert F.BWD_PRE_PARAMS.split()[:2] == ["O", "dO"] and F.BWD_PRE_PARAMS.endswith("B Sq Hq")
    assert F.BWD_POST_PARAMS.split()[:2] == ["dQaccum", "dQ"]
    assert F.BWD_POST_PARAMS.endswith("scale") and F.BWD_AUX_THREADS == 256
    assert "doStrideB" not in F.BWD_KERNEL_PARAMS and "dqStrideB" not in F.KERNEL_PARAMS
    c, p = rt.parse_facts_c(BWD_FACTS), F.parse_facts(BWD_FACTS)
    assert c.backward == 1 and p.backward and p.kernel == "fa3_bwd_d128_bf16_causal_kernel"
    assert (c.block_m, c.block_n) == (p.block_m, p.block_n) == (64, 128)
    assert rt.parse_facts_c(FACTS).backward == 0 and not F.parse_facts(FACTS).backward
    assert "backward" in p.describe() and "backward" not in F.parse_facts(FACTS).describe()
    # `backward` before `params`: the same
    first = BWD_FACTS.replace("backward 1\n", "").replace("kernel ", "backward 1\nkernel ")
    assert rt.parse_facts_c(first).backward == 1 and F.parse_facts(first).backward
    fwd_params = "params " + F.KERNEL_PARAMS
    bad = {
        # each kind's list with the other's `backward`
        BWD_FACTS.replace("backward 1\n", ""):
            r"params is the backward kernel's parameter list but the facts say backward 0",
        BWD_FACTS.replace(BWD_FACTS.splitlines()[14], fwd_params):
            r"params is the forward kernel's parameter list but the facts say backward 1",
        FACTS + "backward 1\n": r"params is the forward kernel's .* backward 1",
        BWD_FACTS.replace("scaleLog2", "scale"): "is not the ABI this",
        BWD_FACTS.replace("backward 1", "backward 2"): r"backward: 2 is out of range \(0 or 1\)",
        # what the backward kernel is not
        BWD_FACTS.replace("grid tiles", "grid persistent"): "backward 1 needs grid tiles",
        BWD_FACTS + "cluster_m 2\n": "backward 1 needs cluster_m 1",
        BWD_FACTS + "varlen 1\n": "backward 1 needs varlen 0",
        # only a backward kernel is deterministic by the key
        FACTS + "deterministic 1\n":
            "facts of kernel 'fa3_fwd_d128_bf16_causal': deterministic 1 needs backward 1",
        BWD_FACTS + "deterministic 2\n": r"deterministic: 2 is out of range \(0 or 1\)",
    }
    for text, msg in bad.items():
        with pytest.raises(rt.Fa3RuntimeError, match=msg) as e:
            rt.parse_facts_c(text)
        assert e.value.status == 2
        with pytest.raises(F.FactsError, match=msg):
            F.parse_facts(text)


def test_deterministic_facts(rt):
    """`deterministic 1` (a backward kernel whose dq is the same bit for bit
    from run to run): read alike by both parsers, shown by describe()."""
    det = BWD_FACTS + "deterministic 1\n"
    c, p = rt.parse_facts_c(det), F.parse_facts(det)
    assert c.deterministic == 1 and p.deterministic and p.backward
    assert p.describe().endswith(" backward deterministic")
    assert rt.parse_facts_c(BWD_FACTS).deterministic == 0
    plain = F.parse_facts(BWD_FACTS + "deterministic 0\n")
    assert not plain.deterministic and "deterministic" not in plain.describe()


def _bwd_args(rt, B=2, Sq=1000, Skv=700, Hq=8, Hkv=2, D=128, **kw):
    t = lambda p, S, H: _bshd(rt, p << 20, B, S, H, D)  # noqa: E731
    fields = dict(lse_ptr=5 << 20, delta_ptr=6 << 20, dq_accum_ptr=7 << 20)
    fields.update(kw)
    return rt.bwd_args(t(1, Sq, Hq), t(2, Skv, Hkv), t(3, Skv, Hkv), t(4, Sq, Hq),
                       t(10, Sq, Hq), fields["lse_ptr"], fields["delta_ptr"],
                       fields["dq_accum_ptr"], t(11, Sq, Hq), t(8, Skv, Hkv), t(9, Skv, Hkv),
                       fields.get("softmax_scale"), "bf16")


def test_bwd_plan_through_ctypes(rt):
    """fa3rt_bwd_args / fa3rt_bwd_launch as seen from Python (the ctypes
    mirror: every field lands where the C code reads it), and fa3rt_bwd's
    checks, which run before any CUDA call (fa3rt_bwd_plan)."""
    f = rt.parse_facts_c(BWD_FACTS)
    L = rt.plan_bwd(f, _bwd_args(rt))
    assert tuple(L.grid) == (6 * 2 * 2, 1, 1) and tuple(L.block) == (384, 1, 1)  # ceil(700/128)
    assert L.dynamic_smem == 200000 and not L.empty and not L.zero_only
    assert (L.B, L.Sq, L.Skv, L.Hq, L.Hkv) == (2, 1000, 700, 8, 2)
    assert (L.dkv_stride_b, L.dkv_stride_s, L.dkv_stride_h) == (700 * 2 * 128, 2 * 128, 128)
    assert L.dq_accum_words == 2 * 8 * 1024 * 128  # Sq rounded up to dQaccum's 64-row tiles
    assert math.isclose(L.scale_log2, 0.08838834764831845 * 1.4426950408889634, rel_tol=1e-7)
    # the helper kernels: 16000 rows, 256 * 16 / (128 * 2) = 16 a block
    assert (L.aux_grid, L.aux_block) == (1000, F.BWD_AUX_THREADS) == (1000, 256)
    strides = (1000 * 8 * 128, 8 * 128, 128)
    assert (L.o_stride_b, L.o_stride_s, L.o_stride_h) == strides
    assert (L.dout_stride_b, L.dout_stride_s, L.dout_stride_h) == strides
    assert (L.dq_stride_b, L.dq_stride_s, L.dq_stride_h) == strides
    a = _bwd_args(rt)
    a.dq.strides[:] = (8 * 1000 * 128, 1000 * 128, 128, 1)    # dq in BHSD: its own strides
    L = rt.plan_bwd(f, a)
    assert (L.dq_stride_b, L.dq_stride_s, L.dq_stride_h) == (8 * 1000 * 128, 128, 1000 * 128)
    assert rt.plan_bwd(f, _bwd_args(rt, softmax_scale=0.25)).scale == 0.25
    # MQA 8/1 at head dim 64 is the same kernel ABI
    f64 = rt.parse_facts_c(BWD_FACTS.replace("head_dim 128", "head_dim 64")
                           .replace("head_dim_v 128", "head_dim_v 64"))
    L = rt.plan_bwd(f64, _bwd_args(rt, Hkv=1, D=64, Skv=129))
    assert L.grid[0] == 2 * 1 * 2 and L.dq_accum_words == 2 * 8 * 1024 * 64
    assert L.aux_grid == 2 * 8 * 1000 // 32
    # a deterministic kernel's dq_accum: the tiles, then a u32 turn counter
    # per tile rounded up to 4 words (fa3.facts.bwd_dq_accum_words says the same)
    det64 = rt.parse_facts_c(BWD_FACTS.replace("head_dim 128", "head_dim 64")
                             .replace("head_dim_v 128", "head_dim_v 64") + "deterministic 1\n")
    for B, Hq, Sq, want in ((2, 3, 65, 49152 + 12), (1, 3, 65, 24576 + 8), (1, 1, 1, 4096 + 4)):
        L = rt.plan_bwd(det64, _bwd_args(rt, B=B, Sq=Sq, Hq=Hq, Hkv=1, D=64))
        assert L.dq_accum_words == want == F.bwd_dq_accum_words(B, Hq, Sq, 64, True)
        L = rt.plan_bwd(f64, _bwd_args(rt, B=B, Sq=Sq, Hq=Hq, Hkv=1, D=64))
        assert L.dq_accum_words == F.bwd_dq_accum_words(B, Hq, Sq, 64) < want
    # each kind of kernel refuses the other's call by name
    fwd = rt.parse_facts_c(FACTS)
    with pytest.raises(rt.Fa3RuntimeError, match="kernel fa3_fwd_d128_bf16_causal is a forward "
                       r"kernel \(facts backward 0\): fa3rt_bwd launches backward kernels"):
        rt.plan_bwd(fwd, _bwd_args(rt))
    fargs = rt.fwd_args(_bshd(rt, 1 << 20, 2, 1000, 8, 128), _bshd(rt, 2 << 20, 2, 700, 2, 128),
                        _bshd(rt, 3 << 20, 2, 700, 2, 128), _bshd(rt, 4 << 20, 2, 1000, 8, 128))
    with pytest.raises(rt.Fa3RuntimeError, match=r"is a backward kernel \(facts backward 1\): "
                       "launch it with fa3rt_bwd"):
        rt.plan(f, fargs)

    def refused(msg, args, facts=f):
        with pytest.raises(rt.Fa3RuntimeError, match=msg) as e:
            rt.plan_bwd(facts, args)
        assert e.value.status == 1
    refused("dq_accum pointer is NULL", _bwd_args(rt, dq_accum_ptr=0))
    refused("delta pointer is NULL", _bwd_args(rt, delta_ptr=0))
    refused("lse pointer 0x500004 is not 16-byte aligned", _bwd_args(rt, lse_ptr=(5 << 20) + 4))
    refused(r"softmax_scale: 1e\+300 is out of range", _bwd_args(rt, softmax_scale=1e300))
    refused(r"Hq = 8 is not a multiple of Hkv = 3", _bwd_args(rt, Hkv=3))
    a = _bwd_args(rt)
    a.dv.strides[1], a.dv.strides[2] = 700 * 128, 128    # dv in BHSD, dk in BSHD
    refused(r"dk and dv strides differ in dim H \(128 and 89600 elements\)", a)
    a = _bwd_args(rt)
    a.dout.shape[2] = 999
    refused(r"dout shape \[B,H,S,D\] = \[2,8,999,128\] but must be \[2,8,1000,128\]", a)
    a = _bwd_args(rt)
    a.dk.ptr = 0
    refused("dk pointer is NULL", a)
    a = _bwd_args(rt)
    a.dtype = rt.DTYPES["f16"]
    refused("dtype f16 does not match kernel fa3_bwd_d128_bf16_causal_kernel", a)
    # o and dq: the helper kernels' (16-byte rows)
    a = _bwd_args(rt)
    a.o.ptr = 0
    refused("o pointer is NULL", a)
    a = _bwd_args(rt)
    a.dq.ptr = 0
    refused("dq pointer is NULL", a)
    a = _bwd_args(rt)
    a.o.shape[2] = 999
    refused(r"o shape \[B,H,S,D\] = \[2,8,999,128\] but must be \[2,8,1000,128\]", a)
    a = _bwd_args(rt)
    a.dq.strides[2] = 8 * 128 + 4
    refused(r"dq stride of dim S is 1028 elements = 2056 bytes; it must be a multiple of 16 "
            r"bytes \(16-byte aligned rows for fa3rt_bwd's helper kernels\)", a)
    a = _bwd_args(rt)
    a.dq.strides[3] = 2
    refused(r"dq stride of the head dim \(D\) is 2 elements; it must be 1", a)
    # empty problems: Sq 0 needs nothing; Skv 0 runs the helpers only (dq = 0)
    a = _bwd_args(rt, Sq=0, dq_accum_ptr=0, lse_ptr=0, delta_ptr=0)
    a.o.ptr = a.dq.ptr = 0
    assert rt.plan_bwd(f, a).empty
    L = rt.plan_bwd(f, _bwd_args(rt, Skv=0, lse_ptr=0))
    assert L.zero_only and not L.empty and L.grid[0] == 0 and L.aux_grid == 1000
    assert L.dq_accum_words == 2 * 8 * 1024 * 128  # Sq rounded up to dQaccum's 64-row tiles
    refused("dq_accum pointer is NULL", _bwd_args(rt, Skv=0, dq_accum_ptr=0))
    refused("delta pointer is NULL", _bwd_args(rt, Skv=0, delta_ptr=0))
    with pytest.raises(rt.Fa3ArgumentError, match="dq_accum_ptr = -1 is out of range"):
        _bwd_args(rt, dq_accum_ptr=-1)


def test_kernel_load_without_a_gpu_fails_cleanly(rt, tmp_path):
    (tmp_path / "k.facts").write_text(FACTS)
    (tmp_path / "k.cubin").write_bytes(b"\0" * 64)
    with pytest.raises(rt.Fa3RuntimeError) as e:
        rt.Kernel(tmp_path / "k.cubin", tmp_path / "k.facts")
    assert e.value.status in (4, 5)  # no driver: a CUDA error naming the call and kernel
    assert "fa3_fwd_d128_bf16_causal" in str(e.value)
    with pytest.raises(rt.Fa3RuntimeError, match="cannot open facts file"):
        rt.Kernel(tmp_path / "k.cubin", tmp_path / "missing.facts")


# ---- pure Python: facts files and kernel selection ----

def _write_kernel(d, name, **over):
    text = FACTS.replace("fa3_fwd_d128_bf16_causal", name)
    for k, v in over.items():
        lines = [l for l in text.splitlines() if not l.startswith(k + " ")]
        text = "\n".join(lines + [f"{k} {v}"]) + "\n"
    (d / f"{name}.facts").write_text(text)
    (d / f"{name}.cubin").write_bytes(b"cubin")


def test_parse_facts_fields():
    kf = F.parse_facts(FACTS, "/x/fa3_fwd.facts")
    assert kf.kernel == "fa3_fwd_d128_bf16_causal" and kf.dtype == "bf16"
    assert kf.causal and kf.window_left == -1 and kf.window_right == 0
    assert kf.cubin_path == "/x/fa3_fwd.cubin"
    kf = F.parse_facts(FACTS + "cubin other.cubin\n", "/x/a.facts")
    assert kf.cubin_path == "/x/other.cubin" and kf.cubin == "other.cubin"
    # issue 17: the cubin is a file beside the facts, never a path elsewhere
    for name in ("/etc/passwd", "../k.cubin", "..", ".", "a/b.cubin"):
        with pytest.raises(F.FactsError, match="cubin: .* is not a file name"):
            F.parse_facts(FACTS + f"cubin {name}\n", "/x/a.facts")
    with pytest.raises(F.FactsError, match="lack required key.*softcap"):
        F.parse_facts(FACTS.replace("softcap 0\n", ""))


def test_select_kernel(tmp_path):
    _write_kernel(tmp_path, "a_causal")
    _write_kernel(tmp_path, "b_full", causal=0, window_right=-1)
    _write_kernel(tmp_path, "c_f16_d64", dtype="f16", head_dim=64, head_dim_v=64, causal=0,
                  window_right=-1)
    _write_kernel(tmp_path, "d_window", causal=0, window_left=256, window_right=0)
    _write_kernel(tmp_path, "e_softcap", causal=0, window_right=-1, softcap=30)
    (tmp_path / "broken.facts").write_text("fa3-kernel-facts 1\nkernel x\n")
    (tmp_path / "nocubin.facts").write_text(FACTS.replace("fa3_fwd_d128_bf16_causal", "nocubin"))
    ks, skipped = F.scan_kernel_dir(tmp_path)
    assert [k.kernel for k in ks] == ["a_causal", "b_full", "c_f16_d64", "d_window", "e_softcap"]
    assert len(skipped) == 2 and any("lack required" in s for s in skipped)
    assert any("cubin" in s and "missing" in s for s in skipped)

    def sel(*a, **kw):
        return F.select_kernel(ks, *a, kernel_dir=str(tmp_path), skipped=skipped, **kw).kernel
    assert sel("bf16", 128, 128, True, (-1, -1), 0.0) == "a_causal"
    assert sel("bf16", 128, 128, False, (-1, 0), 0.0) == "a_causal"  # (-1, 0) is causal
    assert sel("bf16", 128, 128, True, (-1, 5), 0.0) == "a_causal"   # causal forces right = 0
    assert sel("bf16", 128, 128, False, (-1, -1), 0.0) == "b_full"
    assert sel("bf16", 128, 128, False, (-7, -3), 0.0) == "b_full"   # negative = unbounded
    assert sel("f16", 64, 64, False, (-1, -1), None) == "c_f16_d64"
    assert sel("bf16", 128, 128, False, (256, 0), 0.0) == "d_window"
    assert sel("bf16", 128, 128, True, (256, -1), 0.0) == "d_window"
    assert sel("bf16", 128, 128, False, (-1, -1), 30.0) == "e_softcap"
    with pytest.raises(LookupError) as e:
        sel("bf16", 256, 256, False, (-1, -1), 0.0)
    msg = str(e.value)
    assert "matches dtype=bf16 head_dim=256 causal=0 window=(-1,-1) softcap=0" in msg
    assert "Available:" in msg and "c_f16_d64: dtype=f16 head_dim=64" in msg
    assert "Skipped:" in msg and "broken.facts" in msg
    # a packed variable-length kernel serves varlen requests only, and they
    # only it: the fixed "a_causal" sorts first
    _write_kernel(tmp_path, "f_causal_varlen", varlen=1)
    ks, skipped = F.scan_kernel_dir(tmp_path)
    assert sel("bf16", 128, 128, True, (-1, -1), 0.0) == "a_causal"
    assert sel("bf16", 128, 128, True, (-1, -1), 0.0, varlen=True) == "f_causal_varlen"
    with pytest.raises(LookupError, match="(?s)softcap=0 varlen.*f_causal_varlen: .* varlen"):
        sel("bf16", 128, 128, False, (-1, -1), 0.0, varlen=True)


def test_select_kernel_by_length(tmp_path):
    """Kernels of one variant configured for different lengths (facts
    min_seqlen_q): a call takes the one with the largest min_seqlen_q <= Sq,
    the first by file name among equals; where every one asks for more, the
    one that asks least (each computes every length)."""
    _write_kernel(tmp_path, "a_causal")
    _write_kernel(tmp_path, "a_causal_long", block_m=192, min_seqlen_q=8192)
    _write_kernel(tmp_path, "a_causal_longer", block_m=192, min_seqlen_q=65536)
    _write_kernel(tmp_path, "b_causal_also_long", block_m=192, min_seqlen_q=8192)
    ks, skipped = F.scan_kernel_dir(tmp_path)
    assert not skipped
    assert [k.min_seqlen_q for k in ks] == [0, 8192, 65536, 8192]
    assert "min_seqlen_q=8192" in ks[1].describe() and "min_seqlen_q" not in ks[0].describe()

    def sel(sq):
        return F.select_kernel(ks, "bf16", 128, 128, True, (-1, -1), 0.0, seqlen_q=sq).kernel
    assert [sel(sq) for sq in (0, 1, 8191, 8192, 65535, 65536, 1 << 30)] == [
        "a_causal", "a_causal", "a_causal", "a_causal_long", "a_causal_long",
        "a_causal_longer", "a_causal_longer"]
    assert F.by_length(ks[1:], 100).kernel == "a_causal_long"   # no kernel for any length
    # FP8 k descales per 128 keys: kernels whose kv tiles are whole descale
    # blocks only, while one computes the variant
    fp8 = tmp_path / "fp8"
    fp8.mkdir()
    _write_kernel(fp8, "e_causal", dtype="e4m3")
    _write_kernel(fp8, "e_causal_long", dtype="e4m3", block_n=192, min_seqlen_q=8192)
    _write_kernel(fp8, "e_causal_longer", dtype="e4m3", min_seqlen_q=16384)
    es, _ = F.scan_kernel_dir(fp8)

    def pick(sq, blocks, among=es):
        return F.by_length(among, sq, k_block_descales=blocks).kernel
    assert [pick(sq, False) for sq in (100, 8192, 16384)] == [
        "e_causal", "e_causal_long", "e_causal_longer"]
    assert [pick(sq, True) for sq in (100, 8192, 16384)] == [
        "e_causal", "e_causal", "e_causal_longer"]
    assert pick(8192, True, es[1:2]) == "e_causal_long"    # the only one: still taken
    assert F.select_kernel(es, "e4m3", 128, 128, True, (-1, -1), 0.0, seqlen_q=9000,
                           k_block_descales=True).kernel == "e_causal"
    assert F.select_kernel(ks, "bf16", 128, 128, True, (-1, -1), 0.0).kernel == "a_causal"
    from fa3 import torch_api
    torch_api.clear_caches()
    assert torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=tmp_path,
                                   jit=False, seqlen_q=16384).kernel == "a_causal_long"
    assert torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=tmp_path,
                                   jit=False, seqlen_q=4096).kernel == "a_causal"
    # the range is the ABI's, checked like every key
    for bad in ("-1", "2147483648", "x"):
        with pytest.raises(F.FactsError, match="min_seqlen_q"):
            F.parse_facts(FACTS + f"min_seqlen_q {bad}\n")


def test_select_backward_kernel(tmp_path):
    """A backward kernel (facts backward 1) serves backward requests only, and
    they only it, though its variant fields are the forward's."""
    _write_kernel(tmp_path, "b_bwd_causal", backward=1, grid="tiles", block_m=64,
                  params=F.BWD_KERNEL_PARAMS)
    _write_kernel(tmp_path, "c_fwd_causal")
    ks, skipped = F.scan_kernel_dir(tmp_path)
    assert not skipped and [k.backward for k in ks] == [True, False]

    def sel(**kw):
        return F.select_kernel(ks, "bf16", 128, 128, True, (-1, -1), 0.0,
                               kernel_dir=str(tmp_path), **kw).kernel
    assert sel() == "c_fwd_causal" and sel(backward=True) == "b_bwd_causal"
    with pytest.raises(LookupError, match="(?s)causal=0 .* backward.*b_bwd_causal: .* backward"):
        F.select_kernel(ks, "bf16", 128, 128, False, (-1, -1), 0.0, backward=True)
    from fa3 import torch_api
    torch_api.clear_caches()
    got = torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=tmp_path, jit=False,
                                  backward=True)
    assert got.kernel == "b_bwd_causal"
    assert torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=tmp_path,
                                   jit=False).kernel == "c_fwd_causal"


def test_compiled_kernel_facts_parse(tmp_path):
    """The facts fa3-compile writes are what the Python parser reads."""
    import subprocess
    from toolkit import have_ptxas
    tool = ROOT / "build" / "bin" / "fa3-compile"
    if not tool.exists():
        pytest.skip("fa3-compile not built")
    if not have_ptxas():
        pytest.skip("no ptxas to assemble the cubin")
    subprocess.run([str(tool), "--head-dim", "64", "--causal", "--softcap", "5",
                    "-o", str(tmp_path)], check=True, capture_output=True)
    ks, skipped = F.scan_kernel_dir(tmp_path)
    assert not skipped and len(ks) == 2
    k, long = ks
    assert k.kernel == "fa3_fwd_d64_bf16_causal_softcap_kernel"
    assert (k.dtype, k.head_dim, k.causal, k.softcap) == ("bf16", 64, True, 5.0)
    assert (k.window_left, k.window_right) == (-1, 0)
    assert k.threads == 384 and k.dynamic_smem > 0 and k.min_seqlen_q == 0
    # beside it the table's kernel for long sequences: 192 rows from 6144
    assert long.kernel == "fa3_fwd_d64_bf16_causal_softcap_long_kernel"
    assert (long.dtype, long.head_dim, long.causal, long.softcap) == ("bf16", 64, True, 5.0)
    assert (long.block_m, long.threads, long.min_seqlen_q) == (192, 512, 6144)


def test_torch_api_imports_without_torch(tmp_path):
    """fa3 and fa3.torch_api import on a machine without torch (CPU CI); the
    kernel lookup works there too, and flash_attn_func needs torch only when
    called. FA3_JIT=0: a variant the directory lacks is an error (not a JIT
    compile, which test_cache.py tests)."""
    _write_kernel(tmp_path, "a_causal")
    code = f"""
import sys
sys.modules['torch'] = None  # any 'import torch' raises ImportError
sys.path.insert(0, {str(ROOT / 'python')!r})
import fa3, fa3.runtime, fa3.facts
from fa3 import torch_api
k = torch_api.select_kernel('bf16', 128, 128, causal=True, kernel_dir={str(tmp_path)!r})
assert k.kernel == 'a_causal', k
try:
    torch_api.select_kernel('bf16', 128, 128, causal=False, kernel_dir={str(tmp_path)!r})
    raise SystemExit('no error')
except LookupError as e:
    assert 'Available:' in str(e)
try:
    torch_api.flash_attn_func(None, None, None)
    raise SystemExit('no error')
except ImportError:
    pass
print('ok')
"""
    env = {k: v for k, v in os.environ.items() if k != "FA3_KERNEL_DIR"}
    env["FA3_JIT"] = "0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_kernel_dir_required(monkeypatch):
    """Without the JIT (FA3_JIT=0) a kernel directory is needed."""
    from fa3 import torch_api
    monkeypatch.delenv("FA3_KERNEL_DIR", raising=False)
    monkeypatch.setenv("FA3_JIT", "0")
    with pytest.raises(ValueError, match="FA3_KERNEL_DIR"):
        torch_api.select_kernel("bf16", 128, 128)


# ---- split-KV decoding (facts split_kv / pack_gqa) ----

DEC_FACTS = (FACTS.replace("fa3_fwd_d128_bf16_causal", "fa3_fwd_d128_bf16_decode_kernel")
             .replace("block_m 128", "block_m 64").replace("causal 1", "causal 0")
             .replace("window_right 0", "window_right -1")
             + "cluster_m 1\nvarlen 0\nsplit_kv 1\npack_gqa 1\n")


def test_decode_facts(rt):
    """The keys split_kv and pack_gqa (optional, 0 or 1) and their rules,
    alike in both parsers; the combine kernel's parameters read from
    fa3rt_abi.def."""
    assert F.FWD_COMBINE_PARAMS.split() == ["oAccum", "lseAccum", "O", "oStrideB", "oStrideS",
                                            "oStrideH", "LSE", "B", "Sq", "Hq", "numSplits"]
    assert F.FWD_COMBINE_THREADS == 256
    assert F.KERNEL_PARAMS.split()[-24:-18] == ["numSplits", "oAccum", "lseAccum", "pageTable",
                                                "pageTableStride", "pageSize"]
    assert F.KERNEL_PARAMS.split()[-7:] == ["leftPadK", "pagedK", "pagedV", "pagedStridePage",
                                            "pagedStrideRow", "pagedStrideHead", "pagedPages"]
    assert "oStrideB" not in F.BWD_KERNEL_PARAMS
    c, p = rt.parse_facts_c(DEC_FACTS), F.parse_facts(DEC_FACTS)
    assert c.split_kv == 1 and c.pack_gqa == 1 and p.split_kv and p.pack_gqa and p.decode
    assert "split_kv pack_gqa" in p.describe()
    plain = F.parse_facts(FACTS)
    assert rt.parse_facts_c(FACTS).split_kv == 0 and not plain.split_kv and not plain.decode
    assert "split_kv" not in plain.describe()
    only_pack = DEC_FACTS.replace("split_kv 1", "split_kv 0")
    assert F.parse_facts(only_pack).decode and rt.parse_facts_c(only_pack).pack_gqa == 1
    bad = {
        DEC_FACTS.replace("split_kv 1", "split_kv 2"): r"split_kv: 2 is out of range \(0 or 1\)",
        DEC_FACTS.replace("pack_gqa 1", "pack_gqa x"): r"pack_gqa: 'x' is not an integer",
        DEC_FACTS + "split_kv 1\n": "duplicate key 'split_kv'",
        DEC_FACTS.replace("grid tiles", "grid persistent"):
            r"'fa3_fwd_d128_bf16_decode_kernel': split_kv 1 needs grid tiles \(a decoding "
            r"kernel runs one CTA per tile and split over fixed-length batches\)",
        DEC_FACTS.replace("cluster_m 1", "cluster_m 2"): "split_kv 1 needs cluster_m 1",
        DEC_FACTS.replace("varlen 0", "varlen 1"): "split_kv 1 needs varlen 0",
        only_pack.replace("grid tiles", "grid persistent"): "pack_gqa 1 needs grid tiles",
        BWD_FACTS + "split_kv 1\n": "split_kv 1 needs backward 0",
        BWD_FACTS + "pack_gqa 1\n": "pack_gqa 1 needs backward 0",
    }
    for text, msg in bad.items():
        with pytest.raises(rt.Fa3RuntimeError, match=msg) as e:
            rt.parse_facts_c(text)
        assert e.value.status == 2
        with pytest.raises(F.FactsError, match=msg):
            F.parse_facts(text)


def test_split_heuristic_through_ctypes(rt):
    # B 1, Hkv 8 packed: 8 tiles; 128k keys at block_n 128: 1024 kv blocks
    assert rt.num_splits_heuristic(8, 1024, 132) == 16
    assert rt.num_splits_heuristic(8, 1024, 108) == 13
    assert rt.num_splits_heuristic(106, 1024, 132) == 1     # >= 0.8 of the SMs
    assert rt.num_splits_heuristic(0, 0, 0) == 1 and rt.num_splits_heuristic(-1, 5, -3) == 1
    assert rt.num_splits_heuristic(1, 2**63 - 1, 2**31 - 1) == 122
    with pytest.raises(ValueError, match="tiles = 9223372036854775808 is out of range"):
        rt.num_splits_heuristic(2**63, 1, 1)


def _dec_args(rt, B=1, Sq=1, Hq=32, Hkv=8, Skv=131072, **kw):
    return rt.fwd_args(_bshd(rt, 1 << 20, B, Sq, Hq, 128), _bshd(rt, 2 << 20, B, Skv, Hkv, 128),
                       _bshd(rt, 3 << 20, B, Skv, Hkv, 128), _bshd(rt, 4 << 20, B, Sq, Hq, 128),
                       5 << 20, None, "bf16", **kw)


def test_decode_plan_through_ctypes(rt):
    """fa3rt_fwd_launch's split fields as seen from Python: the resolved
    split count, the GQA group, the workspace's bytes and the merge's grid."""
    f = rt.parse_facts_c(DEC_FACTS)
    L = rt.plan(f, _dec_args(rt))
    assert (L.num_splits, L.pack_group, tuple(L.grid)) == (16, 4, (8 * 16, 1, 1))
    assert (L.o_accum_bytes, L.lse_accum_bytes) == (16 * 32 * 128 * 4, 16 * 32 * 4)
    assert (L.combine_grid, L.combine_block) == (4, F.FWD_COMBINE_THREADS)
    assert rt.plan(f, _dec_args(rt, num_sms=108)).num_splits == 13
    L = rt.plan(f, _dec_args(rt, num_splits=1))
    assert (L.num_splits, L.grid[0], L.o_accum_bytes, L.combine_grid) == (1, 8, 0, 0)
    L = rt.plan(f, _dec_args(rt, num_splits=5, o_accum=6 << 20, lse_accum=7 << 20))
    assert (L.num_splits, L.grid[0]) == (5, 40)
    assert rt.plan(f, _dec_args(rt, B=16)).num_splits == 1       # 128 tiles fill the SMs
    assert rt.plan(f, _dec_args(rt, Skv=0)).fill_only
    with pytest.raises(rt.Fa3RuntimeError, match="o_accum pointer 0x600008 is not 16-byte"):
        rt.plan(f, _dec_args(rt, o_accum=(6 << 20) + 8))
    with pytest.raises(rt.Fa3RuntimeError, match=r"g = Hq / Hkv = 48 / 1 = 48 must divide "
                       "block_m 64"):
        rt.plan(f, _dec_args(rt, Hq=48, Hkv=1))
    with pytest.raises(rt.Fa3ArgumentError, match=r"num_splits = 129 is out of range \(0 to "
                       r"128\)"):
        _dec_args(rt, num_splits=129)
    with pytest.raises(rt.Fa3ArgumentError, match="num_sms = -1 is out of range"):
        _dec_args(rt, num_sms=-1)
    # ctas_per_sm 1: the launch takes the most shared memory a block may
    # have, so that one CTA runs a SM; 2: the facts' bytes; 0 the runtime's
    # choice: these facts' 163912 bytes leave no room for a second CTA, so
    # as 2 (the runtime's unit test covers a kernel two CTAs share)
    assert rt.plan(f, _dec_args(rt, B=64)).dynamic_smem == 163912
    assert rt.plan(f, _dec_args(rt, B=64, ctas_per_sm=2)).dynamic_smem == 163912
    L = rt.plan(f, _dec_args(rt, B=64, ctas_per_sm=1))
    assert (L.dynamic_smem, L.grid[0], L.num_splits) == (232448, 64 * 8, 1)
    with pytest.raises(rt.Fa3ArgumentError, match=r"ctas_per_sm = 3 is out of range \(0 to "
                       r"2\)"):
        _dec_args(rt, ctas_per_sm=3)
    bad = _dec_args(rt)
    bad.ctas_per_sm = -1
    with pytest.raises(rt.Fa3RuntimeError, match=r"ctas_per_sm: -1 is out of range \(0: the "
                       r"runtime's choice, 1: one CTA a SM, 2: as many as fit\)"):
        rt.plan(f, bad)
    # seqused_k (flash_attn_with_kvcache's cache_seqlens): int32 [B], 4-byte
    # aligned, alone of the varlen fields; the splits still come from Skv
    L = rt.plan(f, _dec_args(rt, B=2, seqused_k=(8 << 20) + 4))
    assert L.num_splits == rt.plan(f, _dec_args(rt, B=2)).num_splits
    with pytest.raises(rt.Fa3RuntimeError, match=r"seqused_k pointer 0x800002 is not a 4-byte "
                       r"aligned device address of 2 int32 \(one per batch\)"):
        rt.plan(f, _dec_args(rt, B=2, seqused_k=(8 << 20) + 2))
    with pytest.raises(rt.Fa3RuntimeError, match=r"but cu_seqlens_q/k, varlen_batch or "
                       r"max_seqlen_q is set: use a varlen kernel \(a decoding kernel takes "
                       r"seqused_k alone"):
        rt.plan(f, _dec_args(rt, seqused_k=8 << 20, cu_seqlens_k=9 << 20))
    # kernels that do not split take num_splits 0 or 1
    fwd = rt.parse_facts_c(FACTS)
    with pytest.raises(rt.Fa3RuntimeError, match="but seqused_k is set: use a varlen kernel, "
                       "or a decoding kernel"):
        rt.plan(fwd, _dec_args(rt, seqused_k=8 << 20))
    assert rt.plan(fwd, _dec_args(rt, num_splits=1)).num_splits == 1
    with pytest.raises(rt.Fa3RuntimeError, match=r"does not split the kv sequence \(facts "
                       r"split_kv 0\): num_splits must be 0 or 1, got 2"):
        rt.plan(fwd, _dec_args(rt, num_splits=2))


def test_paged_plan_through_ctypes(rt):
    """A paged cache (fa3rt_fwd_args.page_table, page_table_stride,
    paged_seqlen_k; fa3rt_fwd_launch.page_size, kv_box_rows) as seen from
    Python: k and v the pool [num_pages, Hkv, page_size, D]."""
    f = rt.parse_facts_c(DEC_FACTS)

    def paged(B=1, pages=1024, ps=128, stride=1024, page_table=9 << 20, **kw):
        return rt.fwd_args(_bshd(rt, 1 << 20, B, 1, 32, 128),
                           _bshd(rt, 2 << 20, pages, ps, 8, 128),
                           _bshd(rt, 3 << 20, pages, ps, 8, 128),
                           _bshd(rt, 4 << 20, B, 1, 32, 128), 5 << 20, None, "bf16",
                           page_table=page_table, page_table_stride=stride, **kw)
    L = rt.plan(f, paged())                     # as the contiguous 128k cache
    assert (L.Skv, L.num_splits, L.page_size, L.kv_box_rows) == (131072, 16, 128, 128)
    L = rt.plan(f, paged(B=3, pages=7, ps=16, stride=64, paged_seqlen_k=1000))
    assert (L.B, L.Skv, L.page_size, L.kv_box_rows) == (3, 1000, 16, 16)
    L = rt.plan(f, paged(ps=256, stride=8))
    assert (L.Skv, L.page_size, L.kv_box_rows) == (2048, 256, 128)
    L = rt.plan(f, _dec_args(rt))
    assert (L.page_size, L.kv_box_rows) == (0, 128)
    with pytest.raises(rt.Fa3RuntimeError, match=r"page size 24 \(k.shape\[2\]: the rows of a "
                       r"page of the pool \[num_pages, Hkv, page_size, D\]\) must divide "
                       r"block_n 128 or be a multiple of it"):
        rt.plan(f, paged(ps=24, stride=8))
    # pages of fewer than 8 rows: boxes of that many rows
    L = rt.plan(f, paged(ps=1, stride=8, paged_seqlen_k=8))
    assert (L.page_size, L.kv_box_rows) == (1, 1)
    with pytest.raises(rt.Fa3RuntimeError, match=r"paged_seqlen_k: 2049 is out of range"):
        rt.plan(f, paged(ps=256, stride=8, paged_seqlen_k=2049))
    with pytest.raises(rt.Fa3RuntimeError, match=r"page_table pointer 0x900002 is not a 4-byte"):
        rt.plan(f, paged(page_table=(9 << 20) + 2))
    with pytest.raises(rt.Fa3RuntimeError, match=r"takes no page table \(facts split_kv 0, paged_kv 0\)"):
        rt.plan(rt.parse_facts_c(FACTS), paged())
    with pytest.raises(rt.Fa3RuntimeError, match=r"page_table_stride 4 and paged_seqlen_k 0 must "
                       r"be 0 without a page_table"):
        rt.plan(f, _dec_args(rt, page_table_stride=4))
    with pytest.raises(rt.Fa3ArgumentError, match=r"page_table_stride = -1 is out of range"):
        paged(stride=-1)
    with pytest.raises(rt.Fa3ArgumentError, match=r"paged_seqlen_k = 2147483648 is out of range"):
        paged(paged_seqlen_k=2**31)
    with pytest.raises(rt.Fa3ArgumentError, match=r"page_table = -1 is out of range"):
        paged(page_table=-1)


def test_append_plan_through_ctypes(rt):
    """New keys and values appended to the cache (fa3rt_fwd_args.k_new,
    v_new, seqlens_out; fa3rt_fwd_launch.snew, append_grid, append_block)
    as seen from Python; <kernel>_append's parameters read from
    fa3rt_abi.def."""
    assert F.FWD_APPEND_PARAMS.split() == [
        "kNew", "kNewStrideB", "kNewStrideS", "kNewStrideH", "vNew", "vNewStrideB",
        "vNewStrideS", "vNewStrideH", "kCache", "kCacheStrideB", "kCacheStrideS",
        "kCacheStrideH", "vCache", "vCacheStrideB", "vCacheStrideS", "vCacheStrideH",
        "pageTable", "pageTableStride", "pageSize", "numPages", "cacheSeqlens", "seqlensOut",
        "B", "Snew", "Hkv", "Skv"]
    assert F.FWD_APPEND_THREADS == 256
    f = rt.parse_facts_c(DEC_FACTS)

    def app(B=3, Snew=5, **kw):
        return _dec_args(rt, B=B, Skv=4096, seqused_k=8 << 20,
                         k_new=_bshd(rt, 10 << 20, B, Snew, 8, 128),
                         v_new=_bshd(rt, 11 << 20, B, Snew, 8, 128), **kw)
    base = rt.plan(f, _dec_args(rt, B=3, Skv=4096, seqused_k=8 << 20))
    assert (base.snew, base.append_grid, base.append_block) == (0, 0, 0)
    L = rt.plan(f, app(seqlens_out=12 << 20))
    # 3 * 5 * 8 rows of 16 chunks: 1920 threads, 8 blocks of 256
    assert (L.snew, L.append_grid, L.append_block) == (5, 8, F.FWD_APPEND_THREADS)
    assert (L.num_splits, L.Skv, tuple(L.grid)) == (base.num_splits, 4096, tuple(base.grid))
    L = rt.plan(f, app(Snew=0))                      # nothing appended: no workspace needed
    assert (L.snew, L.append_grid) == (0, 0)
    with pytest.raises(rt.Fa3RuntimeError, match=r"seqlens_out pointer is NULL: appending 5 "
                       r"rows a batch"):
        rt.plan(f, app())
    with pytest.raises(rt.Fa3RuntimeError, match=r"seqlens_out \(0x800004, 3 int32\) overlaps "
                       r"seqused_k \(0x800000\)"):
        rt.plan(f, app(seqlens_out=(8 << 20) + 4))
    with pytest.raises(rt.Fa3RuntimeError, match=r"appending k_new and v_new needs seqused_k"):
        rt.plan(f, _dec_args(rt, B=3, Skv=4096, k_new=_bshd(rt, 10 << 20, 3, 5, 8, 128),
                             v_new=_bshd(rt, 11 << 20, 3, 5, 8, 128), seqlens_out=12 << 20))
    with pytest.raises(rt.Fa3RuntimeError, match=r"k_new has Snew = 4097 rows a batch but the "
                       r"cache holds Skv = 4096 keys"):
        rt.plan(f, app(Snew=4097, seqlens_out=12 << 20))
    with pytest.raises(rt.Fa3RuntimeError, match=r"v_new shape \[B,H,S,D\] = \[3,8,4,128\] but "
                       r"must be \[3,8,5,128\]"):
        a = app(seqlens_out=12 << 20)
        a.v_new = _bshd(rt, 11 << 20, 3, 4, 8, 128)
        rt.plan(f, a)
    with pytest.raises(rt.Fa3RuntimeError, match=r"appends no new keys to a cache \(facts "
                       r"split_kv 0\)"):
        rt.plan(rt.parse_facts_c(FACTS), _dec_args(rt, B=3, Skv=4096, seqlens_out=12 << 20))
    with pytest.raises(rt.Fa3ArgumentError, match=r"seqlens_out = -1 is out of range"):
        app(seqlens_out=-1)
    with pytest.raises(rt.Fa3ArgumentError, match=r"k_new must be a fa3.runtime.Tensor"):
        _dec_args(rt, k_new=(1, 2))


def test_select_decode_kernel(tmp_path):
    """A decoding kernel (split_kv / pack_gqa) serves decode requests only,
    and they only it."""
    _write_kernel(tmp_path, "a_fwd", causal=0, window_right=-1)
    _write_kernel(tmp_path, "b_decode", causal=0, window_right=-1, block_m=64, split_kv=1,
                  pack_gqa=1)
    ks, skipped = F.scan_kernel_dir(tmp_path)
    assert not skipped and [k.decode for k in ks] == [False, True]

    def sel(**kw):
        return F.select_kernel(ks, "bf16", 128, 128, False, (-1, -1), 0.0,
                               kernel_dir=str(tmp_path), **kw).kernel
    assert sel() == "a_fwd" and sel(decode=True) == "b_decode"
    with pytest.raises(LookupError, match="(?s)causal=1 .* decode.*b_decode: .* split_kv"):
        F.select_kernel(ks, "bf16", 128, 128, True, (-1, -1), 0.0, decode=True)
    from fa3 import torch_api
    torch_api.clear_caches()
    assert torch_api.select_kernel("bf16", 128, 128, kernel_dir=tmp_path, jit=False,
                                   decode=True).kernel == "b_decode"
    assert torch_api.select_kernel("bf16", 128, 128, kernel_dir=tmp_path,
                                   jit=False).kernel == "a_fwd"
