"""libfa3rt.so built from runtime/fa3rt.c for the CPU tests (test_runtime.py,
test_facts_fuzz.py): with gcc, against the CUDA link stub, which also stands in
for libcuda.so.1 at run time (no CUDA call succeeds; none is needed to parse
facts or plan a launch). Built from the source rather than taken from build/,
so that the tests always see the code they test."""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime"
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
STUB = CUDA / "lib64" / "stubs" / "libcuda.so"
HAVE_C = bool(shutil.which("gcc") and (CUDA / "include" / "cuda.h").exists() and STUB.exists())
needs_c = pytest.mark.skipif(not HAVE_C, reason="needs gcc, cuda.h and the CUDA link stub")


def build_library(out_dir: Path) -> Path:
    so = out_dir / "libfa3rt.so"
    r = subprocess.run(["gcc", "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
                        "-fPIC", "-pthread", "-I", str(RUNTIME / "include"),
                        "-I", str(CUDA / "include"), str(RUNTIME / "fa3rt.c"), "-o", str(so),
                        "-L", str(STUB.parent), "-lcuda"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return so


def runtime_module(out_dir: Path):
    """fa3.runtime over a freshly built library; returns (module, restore)."""
    so = build_library(out_dir)
    try:  # a real driver if there is one, else the stub (same soname)
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        ctypes.CDLL(str(STUB), mode=ctypes.RTLD_GLOBAL)
    from fa3 import runtime
    old_env, old_lib = os.environ.get("FA3RT_LIBRARY"), runtime._lib
    os.environ["FA3RT_LIBRARY"] = str(so)
    runtime._lib = None

    def restore():
        runtime._lib = old_lib
        if old_env is None:
            os.environ.pop("FA3RT_LIBRARY", None)
        else:
            os.environ["FA3RT_LIBRARY"] = old_env
    return runtime, restore
