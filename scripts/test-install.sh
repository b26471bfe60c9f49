#!/usr/bin/env bash
# The installed package, used the way an outside project uses it: installs
# the build (`cmake --install`) into a temporary prefix, checks what went
# there, then configures and builds examples/consumer against that prefix
# (find_package(FA3MLIR) through CMAKE_PREFIX_PATH) with GCC and with clang,
# warnings as errors, and runs it: it builds causal head-dim-128 attention
# through the C API and from a spec, and writes PTX, facts and (with ptxas)
# cubins, which are checked here.
# Run scripts/setup.sh first (scripts/test.sh does): it builds build/.
# Usage: bash scripts/test-install.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
source scripts/cuda-env.sh # the ptxas the consumer will find, as in the tests
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fa3-test-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() {
  echo "test-install: FAIL: $*" >&2
  exit 1
}

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in include/fa3-c/Attn.h include/fa3-c/Compile.h include/fa3-c/Driver.h \
         include/fa3-c/Registration.h include/fa3-c/Support.h \
         lib/libFA3CAPI.so bin/fa3-opt bin/fa3-compile \
         lib/cmake/FA3MLIR/FA3MLIRConfig.cmake \
         lib/cmake/FA3MLIR/FA3MLIRConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
if [ -e "$build/lib/libfa3rt.so" ]; then
  for f in include/fa3rt.h lib/libfa3rt.so; do
    [ -e "$prefix/$f" ] || fail "$f was not installed"
  done
fi
# Only the public C API: no static archives, no C++ headers.
leaked=$(cd "$prefix" && find . \( -name '*.a' -o -path ./include/fa3 \) -print)
[ -z "$leaked" ] || fail "installed internals: $leaked"
echo "installed: $(cd "$prefix" && find . -type f | sort | sed 's|^\./||' | tr '\n' ' ')"

echo "== installed tools"
"$prefix/bin/fa3-opt" examples/attention.mlir | grep -q 'attn.flash_attention' ||
  fail "installed fa3-opt does not print examples/attention.mlir"
"$prefix/bin/fa3-compile" --head-dim 64 --ptx-only -o "$tmp/tool" >/dev/null
grep -q wgmma "$tmp/tool/fa3_fwd_d64_bf16_kernel.ptx" ||
  fail "installed fa3-compile wrote no wgmma PTX"
echo "fa3-opt and fa3-compile run from $prefix/bin"

compilers=()
for cc in gcc clang-22 clang; do
  command -v "$cc" >/dev/null || continue
  case "$cc" in clang*) [[ " ${compilers[*]-} " == *" clang"* ]] && continue ;; esac
  compilers+=("$cc")
done
[ ${#compilers[@]} -gt 0 ] || fail "no C compiler (gcc, clang)"

for cc in "${compilers[@]}"; do
  dir=$tmp/consumer-$cc
  echo "== examples/consumer with $cc against $prefix"
  cmake -S examples/consumer -B "$dir" -G Ninja -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_COMPILE_WARNING_AS_ERROR=ON \
    >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; fail "configure ($cc)"; }
  grep -q "FA3-MLIR .* from $prefix/" "$dir.configure.log" ||
    { cat "$dir.configure.log"; fail "find_package did not take $prefix"; }
  cmake --build "$dir" >"$dir.build.log" 2>&1 || { cat "$dir.build.log"; fail "build ($cc)"; }
  if grep -i 'warning' "$dir.build.log"; then
    fail "warnings building the consumer with $cc"
  fi
  grep -q wgmma "$dir/kernels/consumer_d64_kernel.ptx" ||
    fail "build-time fa3-compile (FA3MLIR::fa3-compile) wrote no wgmma PTX"

  out=$tmp/out-$cc
  "$dir/fa3-consumer" "$out" >"$out.log" 2>&1 || { cat "$out.log"; fail "fa3-consumer ($cc) failed"; }
  for k in consumer_d128_causal_kernel fa3_fwd_d128_bf16_causal_kernel; do
    grep -q wgmma "$out/$k.ptx" || fail "$k.ptx has no wgmma"
    read -r first <"$out/$k.facts"
    [[ "$first" == "fa3-kernel-facts "* ]] ||
      fail "$k.facts: first line '$first', not fa3-kernel-facts N"
    grep -qx 'head_dim 128' "$out/$k.facts" && grep -qx 'causal 1' "$out/$k.facts" ||
      fail "$k.facts is not head dim 128 causal"
    if [ -n "$FA3_PTXAS" ]; then
      [ "$(head -c 4 "$out/$k.cubin" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
        fail "$k.cubin is not an ELF file"
    else
      [ ! -e "$out/$k.cubin" ] || fail "$k.cubin written without ptxas"
    fi
  done
  # The IR built op by op and the spec are the same kernel.
  cmp -s <(sed 's/consumer_d128_causal/K/g' "$out/consumer_d128_causal_kernel.ptx") \
         <(sed 's/fa3_fwd_d128_bf16_causal/K/g' "$out/fa3_fwd_d128_bf16_causal_kernel.ptx") ||
    fail "the built module and the spec gave different PTX"
  how="cubins by $FA3_PTXAS"
  [ -n "$FA3_PTXAS" ] || how="no ptxas: PTX and facts only"
  echo "fa3-consumer wrote $(ls "$out" | wc -l) files ($how); both kernels alike"

  if [ -x "$dir/fa3-consumer-plan" ]; then
    # libfa3rt.so needs the CUDA driver's libcuda.so.1 to load (not a GPU).
    if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
      "$dir/fa3-consumer-plan" "$out/fa3_fwd_d128_bf16_causal_kernel.facts" ||
        fail "fa3-consumer-plan ($cc)"
    else
      echo "fa3-consumer-plan (FA3MLIR::runtime): built; not run (no CUDA driver libcuda.so.1)"
    fi
  fi
done
echo "test-install: OK (${compilers[*]})"
