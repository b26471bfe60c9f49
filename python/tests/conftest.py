import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def rt(tmp_path_factory):
    """fa3.runtime over a libfa3rt.so built here, with the stub as
    libcuda.so.1 (test_runtime.py, test_facts_fuzz.py)."""
    from fa3rt_build import HAVE_C, runtime_module
    if not HAVE_C:
        pytest.skip("needs gcc, cuda.h and the CUDA link stub")
    runtime, restore = runtime_module(tmp_path_factory.mktemp("rt"))
    yield runtime
    restore()
