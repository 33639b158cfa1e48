#!/usr/bin/env bash
# Sixth GPU session (short): gated timing for everything but pageable copies, against the native yardstick in the
# same run; the quick bench to check every group under the gate. Hard time limits on every step.
set -uo pipefail
R=$(pwd)
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu && timeout -s KILL 90 /tmp/nb > $OUT/native.txt; head -7 $OUT/native.txt
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
S=$(date +%s%N); timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $OUT/bench-copy.json 2> /tmp/bench.err; echo "bench copy rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -2 /tmp/bench.err
S=$(date +%s%N); timeout -s KILL 90 node dist/cli.js bench --quick --json --html $OUT/bench-quick.html > $OUT/bench-quick.json 2>/tmp/q.err; echo "bench --quick rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; grep -i fail /tmp/q.err | head -3
nvidia-smi topo -m 2>/dev/null | head -5
cd $R
node tools/gpu/compare-native.mjs $OUT/native.txt $OUT/bench-copy.json | tee $OUT/compare.md
