#!/usr/bin/env bash
# The main job: compile the bundled example attention op to a Hopper (sm_90a)
# kernel and show what each stage produced. Sets up first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
source scripts/cuda-env.sh  # the compiler's ptxas, as setup found or installed it
EX=${1:-examples/attention.mlir}
OUT=build/example
rm -rf "$OUT" && mkdir -p "$OUT"
opt=build/bin/fa3-opt

echo "== 1. $EX: parsed and verified"
$opt "$EX" | tee "$OUT/0-verified.mlir" | grep -E "attn.flash_attention" -A2

echo
echo "== 2. attn-tile: grid over (m-block, head, batch), kv loop, mask only on boundary tiles"
$opt "$EX" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
  --attn-tile="block-m=128" --canonicalize --cse > "$OUT/1-tiled.mlir"
grep -E "scf.parallel|attn.kv_range|scf.for|scf.if|attn.tile_update|attn.tile_finalize|} else" "$OUT/1-tiled.mlir" | cut -c1-140

echo
echo "== 3. convert-attn-to-hopper: the warp-specialised kernel (gpu.module)"
$opt "$EX" --attn-hopper-pipeline="format=none" > /dev/null  # lowers end to end
$opt "$EX" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
  --attn-tile="block-m=128" --convert-attn-to-hopper > "$OUT/2-kernel.mlir"
for pat in "setmaxregister +decrease" "setmaxregister +increase" \
           "cp.async.bulk.tensor.shared.cluster.global" "mbarrier.try_wait.parity" \
           "nvvm.wgmma.mma_async" "llvm.inline_asm has_side_effects asm_dialect = att \"{.*wgmma" \
           "nvvm.barrier id" "func.call @.*_visible" "llvm.atomicrmw add" "nvvm.stmatrix" \
           "cp.async.bulk.tensor.global.shared.cta"; do
  printf '   %-60s %s\n' "$pat" "$(grep -cE "$pat" "$OUT/2-kernel.mlir")"
done

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
