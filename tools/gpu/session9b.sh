#!/usr/bin/env bash
# Session 9, second call: the small-copy probe with a JIT-warm gpumem case and host cost per call; the pool's
# allocation figures after the trace-clock change; the native yardstick in the same command.
set -uo pipefail
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && timeout -s KILL 120 /tmp/nb > $OUT/native-3.txt; head -4 $OUT/native-3.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
rm -rf .gpu/app/tools && cp -r tools .gpu/app/tools
cd .gpu/app
timeout -s KILL 90 node tools/gpu/small-copy-probe.mjs 2>&1 | tee $OUT/small-copy-probe-3.txt
timeout -s KILL 120 node dist/cli.js bench --device 0 --only alloc --json > $OUT/bench-alloc-2.json 2>/tmp/a.err; echo "bench alloc rc=$?"
node -e "for (const r of JSON.parse(require('fs').readFileSync('$OUT/bench-alloc-2.json')).results) if (r.engine==='gpumem-pool') console.log(r.direction, r.bytes, r.medianUs, r.minUs, r.maxUs, r.cv)"
