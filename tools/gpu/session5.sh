#!/usr/bin/env bash
# Fifth GPU session: gated timing (device time, not submission speed) against the native yardstick, the full bench
# and report as published in the README, and the conformance suite. Outputs land in $OUT.
set -uo pipefail
R=$(pwd)
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && /tmp/nb > $OUT/native.txt; head -8 $OUT/native.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
S=$(date +%s%N); timeout 330 node dist/cli.js bench --json --html $OUT/bench.html > $OUT/bench.json 2> /tmp/bench.err; echo "bench full rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; grep -i fail /tmp/bench.err | head
S=$(date +%s%N); timeout 150 node dist/cli.js report --html $OUT/report.html > $OUT/report.txt 2> /tmp/report.err; echo "report rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
S=$(date +%s%N); timeout 60 node dist/cli.js bench --quick > $OUT/quick.txt 2>/dev/null; echo "bench --quick rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
timeout 150 node --test --test-reporter=spec dist/memory/memory.conformance.test.js dist/memory/validation.test.js dist/backend/no-device.test.js dist/pool/pool.test.js 2>&1 | grep -E '^ℹ|✖' | head -20
cd $R
node tools/gpu/compare-native.mjs $OUT/native.txt $OUT/bench.json | tee $OUT/compare.md
