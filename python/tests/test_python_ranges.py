"""Issue 17: numbers and strings that the Python package hands to C through
ctypes are checked where they enter (ctypes would wrap 2**64 + 128 to 128,
make 1e300 an f32 infinity and cut a string at a NUL byte), and
fa3.runtime.Kernel cleans up whatever state it is in. No library is needed:
every check comes before the first C call."""
import subprocess
import sys
from pathlib import Path

import pytest

from fa3 import runtime
from fa3.compile import compile_kernel, find_ptxas
from fa3.spec import flash_attention_func

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kw, msg", [
    (dict(head_dim=2**64 + 128), r"compile_kernel: head_dim = 18446744073709551744 is out of "
                                 r"range \(-2\^63 to 2\^63-1\)"),
    (dict(window=(2**70, 0)), r"compile_kernel: window\[0\] = 1180591620717411303424 is out of "
                              r"range"),
    (dict(window=(-1, -2**63 - 1)), r"window\[1\] = -9223372036854775809 is out of range"),
    (dict(block_n=2**63), r"block_n = 9223372036854775808 is out of range"),
    (dict(stages=-2**64), r"stages = .* is out of range"),
    (dict(q_buffers=2**64 + 1), r"q_buffers = .* is out of range"),
    (dict(block_m=2**64 + 128), r"block_m = .* is out of range"),
    (dict(softcap=3e39), r"compile_kernel: softcap = 3e\+39 is out of range \(finite, .*f32\)"),
    (dict(scale=1e300), r"compile_kernel: scale = 1e\+300 is out of range"),
    (dict(scale=float("nan")), r"scale = nan is out of range"),
    (dict(name="fa3\0x"), r"compile_kernel: name 'fa3\\x00x' contains a NUL byte"),
    (dict(dtype="bf16\0junk"), r"compile_kernel: dtype .* contains a NUL byte"),
    (dict(window=(1, 2, 3)), r"window must be \(left, right\)"),
])
def test_compile_kernel_refuses_what_ctypes_would_mangle(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        compile_kernel(tmp_path, **kw)
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_compile_kernel_wants_integers(tmp_path):
    with pytest.raises(TypeError, match="compile_kernel: head_dim must be an integer"):
        compile_kernel(tmp_path, head_dim=128.0)


def test_find_ptxas_refuses_a_nul_in_the_toolkit():
    with pytest.raises(ValueError, match="find_ptxas: toolkit .* contains a NUL byte"):
        find_ptxas("/usr/local/cuda\0/elsewhere")


def test_run_pipeline_refuses_a_nul():
    from fa3.ir import Context
    try:
        ctx = Context()
    except OSError:
        pytest.skip("libFA3CAPI.so not built")
    with ctx:
        mod = ctx.parse("module {}")
        with pytest.raises(ValueError, match="Module.run_pipeline: pipeline .* NUL byte"):
            mod.run_pipeline("canonicalize\0,attn-tile")


@pytest.mark.parametrize("args, msg", [
    ((-16, (1, 1, 1, 8), (8, 8, 8, 1)), r"tensor\(q\): ptr = -16 is out of range \(0 to 2\^64-1\)"),
    ((2**64, (1, 1, 1, 8), (8, 8, 8, 1)), r"ptr = 18446744073709551616 is out of range"),
    ((0x10008, (1, 1, 1, 8), (8, 8, 8, 1)), r"tensor\(q\): ptr = 0x10008 is not 16-byte aligned"),
    ((0x10000, (2**64 + 1, 1, 1, 8), (8, 8, 8, 1)),
     r"tensor\(q\): shape\[0\] = 18446744073709551617 is out of range \(0 to 2\^63-1\)"),
    ((0x10000, (1, -1, 1, 8), (8, 8, 8, 1)), r"shape\[1\] = -1 is out of range"),
    ((0x10000, (1, 1, 1, 8), (8, 8, -8, 1)), r"strides\[2\] = -8 is out of range \(0 to 2\^63-1\)"),
    ((0x10000, (1, 1, 1, 8), (2**63, 8, 8, 1)), r"strides\[0\] = 9223372036854775808 is out of"),
    ((0x10000, (1, 1, 8), (8, 8, 1)), r"tensor\(q\): shape and strides must have 4 entries"),
])
def test_tensor_refuses_what_the_struct_cannot_hold(args, msg):
    with pytest.raises(ValueError, match=msg) as e:
        runtime.tensor(*args, name="q")
    # also what the C runtime would have raised (test/gpu/check_fwd.py expects that)
    assert isinstance(e.value, runtime.Fa3RuntimeError) and e.value.status == 1


def test_tensor_and_fwd_args_keep_good_numbers():
    t = runtime.tensor(2**63 - 16, (2**31 - 1, 3, 5, 256), (2**40, 256, 768, 1))
    assert (t.ptr, list(t.shape), list(t.strides)) == (2**63 - 16, [2**31 - 1, 3, 5, 256],
                                                       [2**40, 256, 768, 1])
    a = runtime.fwd_args(t, t, t, t, 2**64 - 4, 0.5, "f16")
    assert a.lse == 2**64 - 4 and a.softmax_scale == 0.5  # the C runtime refuses such an lse
    with pytest.raises(ValueError, match=r"fwd_args: lse_ptr = -4 is out of range \(0 to 2\^64-1\)"):
        runtime.fwd_args(t, t, t, t, -4)


def test_kernel_paths_refuse_a_nul(tmp_path):
    with pytest.raises(ValueError, match="fa3.runtime.Kernel: facts_path .* NUL byte"):
        runtime.Kernel(tmp_path / "k.cubin", str(tmp_path / "k.facts") + "\0.x")


def test_kernel_del_after_a_failed_init(monkeypatch):
    """__init__ raised before the handle existed: __del__ must stay quiet."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    with pytest.raises(ValueError):
        runtime.Kernel("k\0.cubin", "k.facts")
    k = object.__new__(runtime.Kernel)  # __init__ never ran at all
    del k
    assert not seen, [str(u.exc_value) for u in seen]


def test_kernel_del_while_module_globals_are_torn_down(monkeypatch):
    """At interpreter exit the module's globals may already be None (issue 17:
    AttributeError from Kernel.__del__ with four kernels loaded)."""
    destroyed, seen = [], []

    class Lib:
        def fa3rt_kernel_destroy(self, h):
            destroyed.append(h)
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    kernels = []
    for h in range(1, 5):
        k = object.__new__(runtime.Kernel)
        k._h, k._lib = h, Lib()
        kernels.append(k)
    for name in ("sys", "ctypes", "lib", "_check", "check_str", "check_int"):
        monkeypatch.setattr(runtime, name, None)
    kernels[0].close()
    kernels[0].close()  # twice: nothing more
    del kernels, k
    assert not seen, [str(u.exc_value) for u in seen]
    assert sorted(destroyed) == [1, 2, 3, 4]


def test_kernels_alive_at_interpreter_exit():
    """Kernels still referenced by module globals when the interpreter exits
    (the GPU session's case): no 'Exception ignored' on stderr."""
    code = f"""
import sys
sys.path.insert(0, {str(ROOT / 'python')!r})
from fa3 import runtime

class Lib:
    def fa3rt_kernel_destroy(self, h):
        pass

kernels = []
for h in range(1, 5):
    k = object.__new__(runtime.Kernel)
    k._h, k._lib = h, Lib()
    kernels.append(k)
runtime.KEEP = kernels  # torn down with the module
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr


def test_spec_text_cannot_inject_ir():
    with pytest.raises(ValueError, match="name 'x.*' is not an MLIR identifier"):
        flash_attention_func("x(%q: i32) { return } func.func @y", 1, 1, 1, 8, 8, 8)
    with pytest.raises(ValueError, match="memref_type: dtype 'f32> ' is not one of"):
        flash_attention_func("f", 1, 1, 1, 8, 8, 8, dtype="f32> ")
    with pytest.raises(TypeError):
        flash_attention_func("f", "1x2", 1, 1, 8, 8, 8)
    with pytest.raises(ValueError, match="shape = -1 is out of range"):
        flash_attention_func("f", -1, 1, 1, 8, 8, 8)
    with pytest.raises(ValueError, match="scale = inf is out of range"):
        flash_attention_func("f", 1, 1, 1, 8, 8, 8, scale=float("inf"))
    assert "func.func @f_1.x$(" in flash_attention_func("f_1.x$", 1, 1, 1, 8, 8, 8)
