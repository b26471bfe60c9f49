#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: lit (FileCheck of
# every pass, verifier diagnostics, the C API test, CPU runs) and pytest
# (numerics against NumPy float64, the Python binding, and fa3.torch_api /
# fa3.torch_ops on PyTorch's fake CUDA tensors: no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/cuda-env.sh  # the compiler's ptxas, as setup found or installed it
# PyTorch for python/tests' torch tests (FakeTensorMode, torch.compile's op
# registration; skipped without it), from PyPI, the version they were last
# run with. Required in CI; elsewhere a failed install only skips them.
PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' build/CMakeCache.txt 2>/dev/null || true)
PY=${PY:-$(command -v python3)}
# (Debian's own python3 refuses pip installs, PEP 668: there into its
# site-packages all the same, as a test dependency.)
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "== installing torch (python/tests' PyTorch tests)"
  if ! "$PY" -m pip install -q "torch==2.15.0" &&
     ! "$PY" -m pip install -q --break-system-packages "torch==2.15.0"; then
    [ -n "${CI:-}" ] && { echo "torch could not be installed" >&2; exit 1; }
    echo "== torch not installed: python/tests' PyTorch tests will be skipped"
  fi
fi
ninja -C build check-fa3
