#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: lit (FileCheck of
# every pass, verifier diagnostics, the C API test, CPU runs) and pytest
# (numerics against NumPy float64, the Python binding).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/cuda-env.sh  # the compiler's ptxas, as setup found or installed it
ninja -C build check-fa3
