#!/usr/bin/env bash
# `pip install .` as a user runs it, in fresh virtual environments under /tmp
# (pip fetches scikit-build-core and numpy from PyPI, or its cache):
#   1. the full install (compiler library, runtime, tools, the fa3 package);
#      then, from a folder outside the repository, with no PYTHONPATH or
#      FA3_* variables: import fa3 from the venv, compile a variant nobody
#      precompiled (cubin too where there is a ptxas), parse its facts with
#      the Python and the C parser, compile another through the JIT cache
#      ($FA3_CACHE_DIR), run fa3-compile and fa3-opt from PATH;
#   2. the runtime-only install (-C cmake.define.FA3_RUNTIME_ONLY=ON: libfa3rt
#      and the package, no MLIR): fa3 and fa3.torch_api import, a
#      precompiled kernel is found, compiling raises an error naming
#      libFA3CAPI.so, fa3-compile says it is not there.
# The CMake builds stay in build-pip/ and build-pip-rt/ (ignored by git), so
# a second run rebuilds nothing; ccache shares objects between checkouts.
# Usage: bash scripts/test-pip.sh   (on the shared machine: under
# flock /tmp/fa3-build.lock, it is a full build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source scripts/cuda-env.sh   # CUDA_HOME of the ptxas setup installed, if any
export CCACHE_BASEDIR="$ROOT"
PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' build/CMakeCache.txt 2>/dev/null || true)
PY=${PY:-$(command -v python3)}
if ! "$PY" -c "import ensurepip, venv" 2>/dev/null; then   # Debian's python3
  echo "== installing python3-venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
work=$(mktemp -d /tmp/fa3-pip.XXXXXX)
trap 'rm -rf "$work"' EXIT
# what a user's shell would not have: nothing points into the checkout
unset PYTHONPATH FA3_BUILD_DIR FA3_LIBRARY FA3RT_LIBRARY FA3_KERNEL_DIR FA3_JIT
export FA3_CACHE_DIR="$work/cache"

install() {   # install VENV BUILD_DIR [pip options...]
  local venv=$1 bdir=$2
  shift 2
  "$PY" -m venv "$venv"
  local t0=$SECONDS
  if ! "$venv/bin/python" -m pip install -v -C build-dir="$bdir" "$@" "$ROOT" \
      >"$venv.log" 2>&1; then
    tail -n 60 "$venv.log"
    echo "FAIL: pip install $* (log above)" >&2
    exit 1
  fi
  echo "   installed in $((SECONDS - t0)) s"
}

echo "== pip install . (full) into a venv"
install "$work/full" "$ROOT/build-pip"
cd "$work"   # outside the repository: only the installed package can be imported
PATH="$work/full/bin:$PATH" FA3_REPO="$ROOT" FA3_OUT="$work/out" python - <<'EOF'
import ctypes, os, subprocess, sys
from pathlib import Path
import fa3, fa3.cache, fa3.compile, fa3.torch_api
from fa3 import _capi, facts, runtime

repo, out = Path(os.environ["FA3_REPO"]), Path(os.environ["FA3_OUT"])
pkg = Path(fa3.__file__).resolve().parent
assert repo not in pkg.parents and "site-packages" in str(pkg), pkg
capi = Path(_capi.lib()._name)
assert capi == pkg / "_lib" / "libFA3CAPI.so", capi
assert runtime.library_path() == pkg / "_lib" / "libfa3rt.so", runtime.library_path()
print(f"   fa3 {fa3.__version__} from {pkg}; {capi.name} and libfa3rt.so in {capi.parent}")

# a variant nobody precompiled (not in fa3-compile --all): f16, head dim 64,
# window (100, 3), softcap 17.5
ptxas = fa3.compile.find_ptxas()
[f] = fa3.compile.compile_kernel(out, head_dim=64, dtype="f16", window=(100, 3),
                                 softcap=17.5, emit_cubin=bool(ptxas))
kf = facts.load_facts(f.facts)
assert (kf.dtype, kf.head_dim, kf.causal, kf.window_left, kf.window_right, kf.softcap) == \
    ("f16", 64, False, 100, 3, 17.5), kf
assert "wgmma.mma_async" in f.ptx.read_text()
if ptxas:
    assert f.cubin.read_bytes()[:4] == b"\x7fELF"
print(f"   compiled {kf.describe()}; cubin: {f.cubin.name if ptxas else 'none (no ptxas)'}")
# the C runtime's parser agrees (libcuda: the driver's, else the toolkit's stub)
stub = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib64/stubs/libcuda.so"
try:
    ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    have_cuda = True
except OSError:
    have_cuda = stub.exists() and bool(ctypes.CDLL(str(stub), mode=ctypes.RTLD_GLOBAL))
if have_cuda:
    c = runtime.parse_facts_c(f.facts.read_bytes())
    assert (c.head_dim, c.window_left, c.window_right, c.softcap) == (64, 100, 3, 17.5)
    print("   libfa3rt parses the facts alike")
# through the JIT cache, as flash_attn_func does (a cubin needs ptxas)
if ptxas:
    jk = fa3.torch_api.select_kernel("bf16", 128, 128, causal=True, window_size=(300, 0),
                                     softcap=9.0)
    assert Path(jk.cubin_path).parent.parent == Path(os.environ["FA3_CACHE_DIR"]), jk
    print(f"   JIT: {jk.kernel} in {Path(jk.cubin_path).parent}")
# the tools from PATH (console scripts running fa3/_bin/*)
r = subprocess.run(["fa3-compile", "--head-dim", "256", "--causal", "-o", str(out / "tool")]
                   + ([] if ptxas else ["--ptx-only"]), capture_output=True, text=True)
assert r.returncode == 0 and (out / "tool/fa3_fwd_d256_bf16_causal_kernel.facts").exists(), \
    r.stdout + r.stderr
r = subprocess.run(["fa3-opt", str(repo / "examples/attention.mlir")], capture_output=True,
                   text=True)
assert r.returncode == 0 and "attn.flash_attention" in r.stdout, r.stdout + r.stderr
print("   fa3-compile and fa3-opt run from PATH")
EOF
cd "$ROOT"

echo "== pip install . -C cmake.define.FA3_RUNTIME_ONLY=ON into a venv"
install "$work/rt" "$ROOT/build-pip-rt" -C cmake.define.FA3_RUNTIME_ONLY=ON
cd "$work"
PATH="$work/rt/bin:$PATH" FA3_OUT="$work/out" python - <<'EOF'
import os, subprocess
from pathlib import Path
import fa3, fa3.torch_api
from fa3 import runtime
from fa3._capi import LibraryNotFoundError

pkg = Path(fa3.__file__).resolve().parent
assert "site-packages" in str(pkg), pkg
assert sorted(p.name for p in (pkg / "_lib").iterdir()) == ["libfa3rt.so"]
assert not (pkg / "_bin").exists()
assert runtime.library_path() == pkg / "_lib" / "libfa3rt.so"
# a precompiled kernel (the full install's fa3-compile's) is found
kdir = Path(os.environ["FA3_OUT"]) / "tool"
cubin = kdir / "fa3_fwd_d256_bf16_causal_kernel.cubin"
if not cubin.exists():   # no ptxas there: as if assembled elsewhere
    cubin.write_bytes(b"\x7fELF")
kf = fa3.torch_api.select_kernel("bf16", 256, 256, causal=True, kernel_dir=kdir)
assert kf.kernel == "fa3_fwd_d256_bf16_causal_kernel", kf
# compiling: an error naming the missing library
import fa3.compile
try:
    fa3.compile.compile_kernel(Path(os.environ["FA3_OUT"]) / "rt", head_dim=128)
    raise SystemExit("FAIL: compile_kernel worked without libFA3CAPI.so")
except LibraryNotFoundError as e:
    assert "libFA3CAPI.so" in str(e) and "runtime-only" in str(e), e
    print(f"   compile_kernel: {type(e).__name__}: {str(e)[:100]}...")
try:
    fa3.torch_api.select_kernel("bf16", 256, 256, softcap=3.0, kernel_dir=kdir)
    raise SystemExit("FAIL: select_kernel found a kernel it cannot have")
except LookupError as e:
    assert "No JIT compile either" in str(e) and "libFA3CAPI.so" in str(e), e
r = subprocess.run(["fa3-compile", "--all"], capture_output=True, text=True)
assert r.returncode != 0 and "runtime-only" in r.stderr, r.stdout + r.stderr
print("   fa3, fa3.torch_api import; precompiled kernels found; no compiler, said clearly")
EOF
cd "$ROOT"
echo "test-pip: both installs work"
