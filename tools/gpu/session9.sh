#!/usr/bin/env bash
# Ninth GPU session (one H200): the pool suite on cuda (growable VmmSource after the test fix), the pool's allocation
# figures with the bucketed free lists, and where small copies lose time from JavaScript (small-copy-probe), with the
# native yardstick before and after in the same command. Hard time limits on every step.
set -uo pipefail
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && S=$(date +%s); timeout -s KILL 120 /tmp/nb > $OUT/native-1.txt; echo "native rc=$? s=$(( $(date +%s) - S ))"; head -4 $OUT/native-1.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
rm -rf .gpu/app/tools && cp -r tools .gpu/app/tools
cd .gpu/app
timeout -s KILL 60 node tools/gpu/small-copy-probe.mjs 2>&1 | tee $OUT/small-copy-probe-1.txt
timeout -s KILL 150 node --test --test-reporter=spec dist/pool/pool.test.js > $OUT/pool-cuda.txt 2>&1; echo "pool tests rc=$?"; grep -E '^ℹ (tests|pass|fail|skipped)|✖' $OUT/pool-cuda.txt | head -20
timeout -s KILL 120 node dist/cli.js bench --device 0 --only alloc --json > $OUT/bench-alloc.json 2>/tmp/a.err; echo "bench alloc rc=$?"; tail -2 /tmp/a.err
timeout -s KILL 60 node dist/cli.js bench --device 0 --only alloc 2>/dev/null | grep -i "pool\|live" | head -12
timeout -s KILL 60 node tools/gpu/small-copy-probe.mjs 2>&1 | tee $OUT/small-copy-probe-2.txt
cd ../..
timeout -s KILL 120 /tmp/nb > $OUT/native-2.txt; head -4 $OUT/native-2.txt
