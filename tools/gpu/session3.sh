#!/usr/bin/env bash
# Third GPU session: copies again with prepared (single-call) submission against the native yardstick, the new
# cache sweep, and a probe of pageable-upload speed by allocation kind. Outputs land in $OUT.
set -uo pipefail
R=$(pwd)
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && /tmp/nb > $OUT/native.txt; head -8 $OUT/native.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
S=$(date +%s%N); timeout 200 node dist/cli.js bench --only copy cache stream --json > $OUT/bench.json 2> /tmp/bench.err; echo "bench rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -2 /tmp/bench.err
timeout 120 node $R/tools/gpu/pageable-probe.mjs
cd $R
node tools/gpu/compare-native.mjs $OUT/native.txt $OUT/bench.json | tee $OUT/compare.md
node -e "const r=require('$OUT/bench.json'); for (const x of r.results.filter(x=>x.test==='cache'||x.test==='stream')) console.log(x.test, x.direction, x.bytes, x.medianGBps)"
