#!/usr/bin/env bash
# Installs what FA3-MLIR needs (Debian packages, Python test packages), then
# configures and builds it in ./build. Safe to run again: it only installs
# what is missing and rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# g++ and the sanitizer runtimes serve CI's second builds (scripts/test-build.sh).
APT_PACKAGES=(libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22
              lld-22 libclang-rt-22-dev g++ ninja-build cmake ccache python3)
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

# ptxas (CUDA) assembles the Hopper kernels and cuobjdump shows their SASS;
# the tests that need them are skipped without them. Not in Debian's main
# archive: without a CUDA toolkit, NVIDIA's pip wheels of the same ptxas
# (13.0.88) go into build/cuda (best effort: no network, no tools).
source scripts/cuda-env.sh
if [ -z "$FA3_PTXAS" ]; then
  echo "== installing ptxas and cuobjdump (NVIDIA's pip wheels) into build/cuda"
  "$PY" -m pip install -q --no-deps --target build/cuda \
      nvidia-cuda-nvcc==13.0.88 nvidia-cuda-cuobjdump==13.2.51 \
      nvidia-cuda-nvdisasm==13.2.51 2>/dev/null || true
  source scripts/cuda-env.sh
fi
# A toolkit with ptxas but no cuobjdump (this machine's, CI's): the SASS
# checks would be skipped; the wheels' cuobjdump and nvdisasm fill in.
if [ -n "$FA3_PTXAS" ] && [ -z "${FA3_CUOBJDUMP:-}" ] \
    && [ ! -x "$(dirname "$FA3_PTXAS")/cuobjdump" ] && ! command -v cuobjdump >/dev/null; then
  echo "== installing cuobjdump and nvdisasm (NVIDIA's pip wheels) into build/cuda"
  "$PY" -m pip install -q --no-deps --upgrade --target build/cuda \
      nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51 2>/dev/null || true
  source scripts/cuda-env.sh
fi
echo "== ptxas: ${FA3_PTXAS:-none (Hopper assembly checks will be skipped)}"
echo "== cuobjdump: ${FA3_CUOBJDUMP:-$(command -v cuobjdump || echo "beside ptxas, or none (SASS checks will be skipped)")}"

# ccache keys on paths relative to the checkout, so clones share objects.
export CCACHE_BASEDIR="$PWD"

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
echo "== building in build/ (ninja)"
ninja -C build
