#!/usr/bin/env bash
# Assembles every standard variant's PTX with ptxas -v and prints one line
# per kernel: OK when the PTX holds both wgmma forms, the bulk tensor copy
# (loads, and the O store from stmatrix-staged shared memory), the mbarrier
# parity wait and setmaxnreg, and ptxas reports 0 spill bytes
# and no performance warning; FAIL with the reason otherwise.
set -u
ptxas=$1
dir=$2
for ptx in "$dir"/*.ptx; do
  name=$(basename "$ptx" .ptx)
  why=""
  grep -q 'wgmma.mma_async.sync.aligned.m64n[0-9]*k16.f32.[bf16]*.[bf16]* {[^}]*}, %rd' "$ptx" || why="$why no-SS-wgmma"
  grep -q 'wgmma.mma_async.sync.aligned.m64n[0-9]*k16.f32.[bf16]*.[bf16]* {[^}]*}, {' "$ptx" || why="$why no-RS-wgmma"
  grep -q 'cp.async.bulk.tensor' "$ptx" || why="$why no-TMA"
  grep -q 'cp.async.bulk.tensor.4d.global.shared::cta' "$ptx" || why="$why no-TMA-store"
  grep -q 'stmatrix.sync.aligned' "$ptx" || why="$why no-stmatrix"
  grep -q 'mbarrier.try_wait.parity' "$ptx" || why="$why no-parity-wait"
  grep -q 'setmaxnreg.inc' "$ptx" || why="$why no-setmaxnreg.inc"
  grep -q 'setmaxnreg.dec' "$ptx" || why="$why no-setmaxnreg.dec"
  log=$("$ptxas" -arch=sm_90a -v "$ptx" -o /dev/null 2>&1) || why="$why ptxas-error"
  echo "$log" | grep -q ' 0 bytes spill stores, 0 bytes spill loads' || why="$why spills"
  echo "$log" | grep -qiE 'warning|serializ' && why="$why ptxas-warning"
  regs=$(echo "$log" | grep -oE 'Used [0-9]+ registers' | head -1)
  if [ -z "$why" ]; then echo "OK $name ($regs)"; else echo "FAIL $name:$why"; echo "$log"; fi
done
