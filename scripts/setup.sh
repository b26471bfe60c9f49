#!/usr/bin/env bash
# Installs what FA3-MLIR needs (Debian packages, Python test packages), then
# configures and builds it in ./build. Safe to run again: it only installs
# what is missing and rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22
              lld-22 ninja-build cmake ccache python3)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ptxas (CUDA) assembles the Hopper kernels; the tests that need it are
# skipped without it. It is not in Debian's main archive: nothing to install.
if [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v ptxas >/dev/null; then
  echo "== note: ptxas not found; Hopper assembly checks will be skipped"
fi

# A Python with numpy and pytest: the first python3 on PATH if it has them
# (or can get them from pip), else Debian's python3 with Debian's packages.
PY=$(command -v python3)
if ! "$PY" -c "import numpy, pytest" 2>/dev/null; then
  "$PY" -m pip install -q -r python/requirements.txt 2>/dev/null || true
fi
if ! "$PY" -c "import numpy, pytest" 2>/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  dpkg -s python3-numpy python3-pytest >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3-numpy python3-pytest >/dev/null
  }
  PY=/usr/bin/python3
fi
echo "== python: $PY"

# Configure once; later runs let ninja re-run CMake when a CMakeLists changes
# (changing the compiler of an existing build tree would wipe its cache).
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DCMAKE_C_COMPILER="$(command -v clang-22)" \
    -DCMAKE_CXX_COMPILER="$(command -v clang++-22)" \
    -DLLVM_ENABLE_LLD=ON \
    -DPython3_EXECUTABLE="$PY" >/dev/null
fi
ninja -C build
