#!/usr/bin/env bash
# Builds FA3-MLIR a second way and runs the suite on that build:
#   gcc       GCC (Debian's default c++), Release: lit + pytest, and the
#             kernels of `fa3-compile --all` (also --varlen, --backward [--deterministic],
#             --decode, --fp8)
#             must be byte-identical to the clang build's (IR built inside
#             function arguments came out in another order under GCC).
#   sanitize  clang with AddressSanitizer and UndefinedBehaviorSanitizer
#             (any report aborts): lit (fa3-opt, fa3-compile, the C API
#             tests, the fuzzers) and the CPU pytest with the runtime
#             preloaded into Python.
# Run scripts/setup.sh first (scripts/test.sh does): it installs the
# compilers and builds the clang build in build/, which `gcc` compares with.
# Usage: bash scripts/test-build.sh gcc|sanitize
set -euo pipefail
cd "$(dirname "$0")/.."
variant=${1:-}
dir="build-$variant"
source scripts/cuda-env.sh
PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' build/CMakeCache.txt 2>/dev/null || true)
PY=${PY:-$(command -v python3)}
export CCACHE_BASEDIR="$PWD" # share objects between clones of the repository

configure() {
  [ -f "$dir/CMakeCache.txt" ] && return 0
  echo "== configuring $dir"
  cmake -S . -B "$dir" -G Ninja -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DPython3_EXECUTABLE="$PY" "$@" >/dev/null
}

case "$variant" in
  gcc)
    configure -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc \
              -DCMAKE_CXX_COMPILER=g++
    echo "== building $dir"
    ninja -C "$dir"
    ninja -C "$dir" check-fa3
    echo "== kernels from the GCC and the clang build"
    rm -rf "$dir/kernels-gcc" "$dir/kernels-clang"
    # the fixed-length, the packed variable-length, the backward (plain and
    # deterministic) and the decoding sets
    # (each builder), one directory: their kernel names differ
    for set in "" --varlen --backward "--backward --deterministic" --decode --fp8; do
      "$dir/bin/fa3-compile" --all $set --ptx-only -o "$dir/kernels-gcc" >/dev/null
      build/bin/fa3-compile --all $set --ptx-only -o "$dir/kernels-clang" >/dev/null
    done
    diff -r "$dir/kernels-clang" "$dir/kernels-gcc"
    echo "gcc: $(ls "$dir/kernels-gcc" | wc -l) files identical to the clang build's"
    ;;
  sanitize)
    rt=$(clang-22 -print-runtime-dir)
    san="-fsanitize=address,undefined -fno-sanitize-recover=all"
    san="$san -fno-omit-frame-pointer -shared-libsan -gline-tables-only"
    configure -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER="$(command -v clang-22)" \
      -DCMAKE_CXX_COMPILER="$(command -v clang++-22)" -DLLVM_ENABLE_LLD=ON \
      -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG $san" \
      -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG $san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san -Wl,-rpath,$rt" \
      -DCMAKE_SHARED_LINKER_FLAGS="$san -Wl,-rpath,$rt"
    echo "== building $dir"
    ninja -C "$dir"
    # Leaks are not checked: MLIR keeps its contexts' uniqued storage and
    # Python keeps much of its own until exit. User poisoning is off: LLVM's
    # BumpPtrAllocator is inline code, instrumented in our objects but not
    # in libMLIR.so, so a slab that our code opens (and poisons) and
    # libMLIR then allocates from (without unpoisoning) reads as
    # use-after-poison, a false report that comes and goes with the order
    # in which attributes are uniqued. Heap errors are still caught.
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ninja -C "$dir" check-fa3-lit
    echo "== CPU pytest on $dir (sanitizer runtime preloaded)"
    (cd python && FA3_BUILD_DIR="$PWD/../$dir" \
       LD_PRELOAD="$rt/libclang_rt.asan-x86_64.so" \
       ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0" \
       "$PY" -m pytest -q tests)
    ;;
  *)
    echo "usage: bash scripts/test-build.sh gcc|sanitize" >&2
    exit 2
    ;;
esac
