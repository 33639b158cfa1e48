#!/usr/bin/env bash
# Second GPU session: the full bench and the report through gpumem, the native yardstick in the same run, the
# comparison table, pool allocation against torch.empty, and the conformance suite on cuda. Outputs land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(pwd)
L=$OUT/session.log
exec > >(tee -a $L) 2>&1
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.mem --format=csv
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && /tmp/nb > $OUT/native.txt; cat $OUT/native.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
S=$(date +%s%N); timeout 330 node dist/cli.js bench --json --html $OUT/bench.html > $OUT/bench.json 2> /tmp/bench.err; echo "bench full rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -3 /tmp/bench.err
S=$(date +%s%N); timeout 150 node dist/cli.js report --json --html $OUT/report.html > $OUT/report.json 2> /tmp/report.err; echo "report (quick bench) rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -3 /tmp/report.err
timeout 60 node dist/cli.js bench --quick --only copy > /tmp/quick.txt 2>&1; head -30 /tmp/quick.txt
timeout 150 node --test --test-reporter=spec dist/memory/memory.conformance.test.js dist/memory/validation.test.js dist/backend/no-device.test.js dist/pool/pool.test.js 2>&1 | grep -vE '^\s+✔' | tail -25
cd $R
node tools/gpu/compare-native.mjs $OUT/native.txt $OUT/bench.json | tee $OUT/compare.md
timeout 90 python3 tools/gpu/torch_empty_bench.py
