#!/bin/bash
# One GPU-machine session: build harness, correctness, sanitizers, SASS check, benchmark.
# Usage (from repo root, via the device `run` tool): bash proto/hopper/run_gpu.sh [check|all]
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa_out}; mkdir -p $OUT
export PYTHONUNBUFFERED=1
what=${1:-all}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv | tee $OUT/gpu.txt
python3 test_fa.py build || exit 1
cuobjdump -sass fa_fwd_h128.cubin > $OUT/sass.txt 2>&1
echo "SASS HGMMA count: $(grep -c HGMMA $OUT/sass.txt)  LDL/STL: $(grep -cE 'LDL|STL' $OUT/sass.txt)"
timeout 120 python3 test_fa.py check 2>&1 | tee $OUT/check.log; rc=${PIPESTATUS[0]}
echo "check rc=$rc"
timeout 150 compute-sanitizer --tool memcheck python3 test_fa.py small 2>&1 | tail -n 15 | tee $OUT/memcheck.log
[ "$what" = check ] && exit $rc
timeout 150 compute-sanitizer --tool racecheck python3 test_fa.py small 2>&1 | tail -n 15 | tee $OUT/racecheck.log
[ $rc = 0 ] && timeout 240 python3 test_fa.py bench 2>&1 | tee $OUT/bench.log
exit $rc
