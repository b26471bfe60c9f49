#!/usr/bin/env bash
# The main job: compile the bundled example attention op and show what each
# stage produced. Sets up first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
EX=${1:-examples/attention.mlir}
OUT=build/example
mkdir -p "$OUT"
opt=build/bin/fa3-opt

echo "== 1. $EX parsed and verified"
$opt "$EX" | tee "$OUT/0-verified.mlir" | grep -E "attn.flash_attention" -A2

echo
echo "== 2. bufferized and tiled (attn-tile): grid, kv loop, masked boundary tiles"
$opt "$EX" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
  --attn-tile --canonicalize --cse > "$OUT/1-tiled.mlir"
grep -E "scf.parallel|scf.for|scf.if|attn.tile_update|attn.tile_finalize|} else" "$OUT/1-tiled.mlir" | cut -c1-150

echo
echo "== 3. the tiled program lowered to the LLVM dialect for the CPU"
$opt "$EX" --attn-cpu-tiled-pipeline > "$OUT/2-cpu-llvm.mlir"
echo "$(grep -c '' "$OUT/2-cpu-llvm.mlir") lines, functions: $(grep -oE 'llvm.func @[A-Za-z_0-9]+' "$OUT/2-cpu-llvm.mlir" | sort -u | tr '\n' ' ')"

echo
echo "== written under $OUT/"
ls -l "$OUT"
