#!/usr/bin/env bash
# Fourth GPU session: the full bench (synchronous event waits in the timing loop) and the native yardstick in one
# run, the comparison table, gpumem report and info as the README shows them. Outputs land in $OUT.
set -uo pipefail
R=$(pwd)
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && /tmp/nb > $OUT/native.txt; head -8 $OUT/native.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
S=$(date +%s%N); timeout 330 node dist/cli.js bench --json --html $OUT/bench.html > $OUT/bench.json 2> /tmp/bench.err; echo "bench full rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -2 /tmp/bench.err
S=$(date +%s%N); timeout 150 node dist/cli.js report > $OUT/report.txt 2> /tmp/report.err; echo "report rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
S=$(date +%s%N); timeout 60 node dist/cli.js bench --quick --json > /tmp/quick.json 2>/dev/null; echo "bench --quick rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
node dist/cli.js info > $OUT/info.txt 2>&1
cd $R
node tools/gpu/compare-native.mjs $OUT/native.txt $OUT/bench.json | tee $OUT/compare.md
node -e "const r=require('$OUT/bench.json'); for (const x of r.results.filter(x=>x.test==='cache')) console.log(x.test, x.bytes, x.medianGBps)"
