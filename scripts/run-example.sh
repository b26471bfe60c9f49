#!/usr/bin/env bash
# The main job: compile the bundled example attention op to a Hopper (sm_90a)
# kernel and show what each stage produced. Sets up first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== setup: installs what is missing and builds (minutes the first time)"
set +e
bash scripts/setup.sh 2>&1 | grep --line-buffered -E "^== |FAILED|error" | sed -u 's/^/   /'
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || { echo "setup failed (exit $rc): run bash scripts/setup.sh to see why" >&2; exit 1; }
source scripts/cuda-env.sh  # the compiler's ptxas, as setup found or installed it
EX=${1:-examples/attention.mlir}
OUT=build/example
rm -rf "$OUT" && mkdir -p "$OUT"
opt=build/bin/fa3-opt

echo "== 1. $EX: parsed and verified"
$opt "$EX" | tee "$OUT/0-verified.mlir" | grep -E "attn.flash_attention" -A2

echo
echo "== 2. attn-hopper-config + attn-tile: the kernel's configuration, then the grid over"
echo "      (m-block, head, batch), kv loop, mask only on boundary tiles"
$opt "$EX" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
  --attn-hopper-config="block-m=128" --attn-tile --canonicalize --cse > "$OUT/1-tiled.mlir"
grep -E "scf.parallel|attn.kv_range|scf.for|scf.if|attn.tile_update|attn.tile_finalize|} else" "$OUT/1-tiled.mlir" | cut -c1-140

echo
echo "== 3. convert-attn-to-hopper: the warp-specialised kernel (gpu.module)"
$opt "$EX" --attn-hopper-pipeline="format=none" > /dev/null  # lowers end to end
$opt "$EX" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
  --attn-hopper-config="block-m=128" --attn-tile --convert-attn-to-hopper > "$OUT/2-kernel.mlir"
# label | pattern counted in the kernel
while IFS='|' read -r label pat; do
  printf '   %-52s %s\n' "$label" "$(grep -cE "$pat" "$OUT/2-kernel.mlir")"
done <<'EOF'
producer gives up registers (setmaxnreg.dec)|setmaxregister +decrease
consumers take registers (setmaxnreg.inc)|setmaxregister +increase
TMA loads of Q, K, V|cp.async.bulk.tensor.shared.cluster.global
mbarrier waits (the K/V pipeline)|mbarrier.try_wait.parity
S = Q K^T on the tensor cores (wgmma, SS)|nvvm.wgmma.mma_async
O += P V with P from registers (wgmma, RS)|llvm.inline_asm has_side_effects asm_dialect = att "{.*wgmma
named barriers (ping-pong, warpgroup sync)|nvvm.barrier id
mask bounds from the shared builder|func.call @.*_visible
tiles claimed from the dynamic scheduler|llvm.atomicrmw add
O staged in shared memory (stmatrix)|nvvm.stmatrix
O stored by TMA|cp.async.bulk.tensor.global.shared.cta
EOF

echo
echo "== 4. fa3-compile: PTX, cubin (ptxas, sm_90a) and launch facts"
build/bin/fa3-compile "$EX" -o "$OUT"
ptx=$(ls "$OUT"/*.ptx | head -1)
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
if [ -x "$ptxas" ]; then
  echo "   ptxas -arch=sm_90a -v:"
  "$ptxas" -arch=sm_90a -v "$ptx" -o /dev/null 2>&1 | grep -E "registers|spill" | sed 's/^/     /'
fi
echo "   launch facts ($(basename "${ptx%.ptx}").facts):"
sed 's/^/     /' "${ptx%.ptx}.facts"

echo
echo "== written under $OUT/"
ls -l "$OUT"
echo
echo "Run it on an H200: see docs/runtime.md (libfa3rt) or python/fa3/torch_api.py."
