#!/usr/bin/env bash
# Fuzzes fa3-opt by hand, longer than the lit test does (test/fuzz/fuzz-ir.test:
# seed 1, 200 cases): mutated and generated IR through every pass and pipeline
# of ours with random, boundary and malformed options.
#
#   bash scripts/fuzz.sh [SEED] [CASES] [extra fuzz_ir.py options...]
#
# Defaults: a seed from the clock, 5000 cases, 2 worker processes, 10 s a
# case. Failing cases (input, command, log, one-line reproduction) and a
# summary.json go to build/fuzz-out/seed-SEED; the first input of each signature
# is shrunk (--minimize). Exit status 1 when anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-$(date +%s)}
cases=${2:-5000}
shift $(( $# < 2 ? $# : 2 ))
out=build/fuzz-out/seed-$seed
echo "fuzz: seed $seed, $cases cases, failures in $out"
exec python3 test/fuzz/fuzz_ir.py --opt build/bin/fa3-opt --seed "$seed" \
  --cases "$cases" --jobs "${FUZZ_JOBS:-2}" --timeout "${FUZZ_TIMEOUT:-10}" \
  --out "$out" --minimize --quiet "$@"
