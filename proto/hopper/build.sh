#!/bin/bash
# Build fa_fwd_h128.mlir -> PTX -> cubin (CPU only: mlir-opt 22 + ptxas 13.0).
#   ./build.sh            regenerate the .mlir from gen_fa_fwd.py, lower, assemble, check
# Outputs (next to this script): fa_fwd_h128.mlir, fa_fwd_h128.ptx, fa_fwd_h128.cubin,
#   ptxas.log (ptxas -v report).
set -euo pipefail
cd "$(dirname "$0")"
LLVM=${LLVM:-/usr/lib/llvm-22/bin}
CUDA=${CUDA:-/usr/local/cuda}
PTX_FEATURES=${PTX_FEATURES:-+ptx80}

python3 gen_fa_fwd.py > fa_fwd_h128.mlir

# Explicit lowering pipeline (equivalent to the device half of -gpu-lower-to-nvvm-pipeline):
#  - nvvm-attach-target: sm_90a (wgmma / setmaxnreg need the 'a' target)
#  - inside gpu.module: scf->cf, gpu->nvvm (gpu.func -> llvm.func with ptx_kernel, sreg reads),
#    arith/math -> llvm, nvvm -> llvm (ops that are PTX strings become llvm.inline_asm:
#    wgmma.mma_async, mbarrier.try_wait.parity, ...)
#  - gpu-module-to-binary format=isa: LLVM NVPTX backend -> PTX text in a gpu.binary
nice $LLVM/mlir-opt fa_fwd_h128.mlir -pass-pipeline="builtin.module(\
nvvm-attach-target{chip=sm_90a features=$PTX_FEATURES O=3},\
gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,convert-arith-to-llvm,convert-math-to-llvm,\
convert-vector-to-llvm,convert-nvvm-to-llvm,canonicalize,cse,reconcile-unrealized-casts),\
gpu-module-to-binary{format=isa})" -o fa_fwd_h128.bin.mlir

# Extract the PTX string from the gpu.binary's #gpu.object (MLIR string escapes).
python3 - fa_fwd_h128.bin.mlir fa_fwd_h128.ptx <<'PY'
import sys
t = open(sys.argv[1]).read()
i = t.index('assembly = "') + len('assembly = "')
out = []; j = i
while t[j] != '"':
    if t[j] == '\\':
        n = t[j + 1]
        if n in '\\"': out.append(n); j += 2
        elif n == 'n': out.append('\n'); j += 2
        elif n == 't': out.append('\t'); j += 2
        else: out.append(chr(int(t[j + 1:j + 3], 16))); j += 3
    else:
        out.append(t[j]); j += 1
open(sys.argv[2], 'w').write(''.join(out))
PY
rm -f fa_fwd_h128.bin.mlir

nice $CUDA/bin/ptxas -arch=sm_90a -v fa_fwd_h128.ptx -o fa_fwd_h128.cubin 2>&1 | tee ptxas.log

echo "---- checks ----"
fail=0
chk() { local n; n=$(grep -c -- "$1" fa_fwd_h128.ptx || true); printf '%-55s %s\n' "$1" "$n"; [ "$n" -gt 0 ] || fail=1; }
chk 'wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {[^}]*}, %rd'   # SS: A descriptor
chk 'wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {[^}]*}, {'     # RS: A registers
chk 'cp.async.bulk.tensor.4d'
chk 'mbarrier.try_wait.parity'
chk 'setmaxnreg.inc'
chk 'setmaxnreg.dec'
if grep -qiE 'serialized|C75[0-9][0-9]' ptxas.log; then echo "ptxas performance warning present"; fail=1; fi
if grep -E 'spill (stores|loads)' ptxas.log | grep -vq ' 0 bytes spill stores, 0 bytes spill loads'; then echo "SPILLS"; fail=1; fi
[ $fail = 0 ] && echo "build OK" || { echo "build checks FAILED"; exit 1; }
