#!/usr/bin/env bash
# Session 9, fifth call: five runs each of the C yardstick and gpumem bench --only copy (50 timed runs per figure up
# to 16 MiB), interleaved, with the card's clocks and power state before each run; compared median to median.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
st() { nvidia-smi --query-gpu=pstate,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader; }
for i in 1 2 3 4 5; do
  echo "before C $i: $(st)"; timeout -s KILL 60 /tmp/nb > $W/native-$i.txt; echo "C $i rc=$?"
  echo "before gpumem $i: $(st)"; S=$(date +%s%N); (cd .gpu/app && timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$i.json 2> /dev/null); echo "bench copy $i rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
done
node tools/gpu/compare-native.mjs $W/native-*.txt $W/bench-*.json > $OUT/compare.md; cat $OUT/compare.md
tar czf $OUT/runs.tgz -C $W .
