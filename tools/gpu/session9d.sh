#!/usr/bin/env bash
# Session 9, fourth call: gpumem against the native yardstick with several runs of each, interleaved (C, gpumem full
# bench, C, gpumem copies, C, gpumem copies), compared median to median with each side's run-to-run range; the quick
# bench's time; report and info as the README shows them; the pool against torch.empty (PyTorch's caching allocator).
set -uo pipefail
R=$(pwd)
W=/tmp/runs; rm -rf $W; mkdir -p $W
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
timeout -s KILL 60 /tmp/nb > $W/native-1.txt; echo "C 1 rc=$?"
S=$(date +%s%N); timeout -s KILL 300 node dist/cli.js bench --json --html $W/bench.html > $W/bench-1.json 2> $W/bench-1.err; echo "bench full rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -1 $W/bench-1.err
for i in 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$i.txt; echo "C $i rc=$?"
  S=$(date +%s%N); timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$i.json 2> /dev/null; echo "bench copy $i rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
done
timeout -s KILL 60 /tmp/nb > $W/native-4.txt; echo "C 4 rc=$?"
S=$(date +%s%N); timeout -s KILL 60 node dist/cli.js bench --quick --json > $W/quick.json 2>/dev/null; echo "bench --quick rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
S=$(date +%s%N); timeout -s KILL 120 node dist/cli.js report > $W/report.txt 2> $W/report.err; echo "report rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
timeout -s KILL 30 node dist/cli.js info > $W/info.txt 2>&1
cd $R
timeout -s KILL 120 python3 tools/gpu/torch_empty_bench.py > $W/torch-empty.txt 2>&1; echo "torch rc=$?"; cat $W/torch-empty.txt | tail -3
node tools/gpu/compare-native.mjs $W/native-*.txt $W/bench-*.json > $OUT/compare.md; cat $OUT/compare.md
tar czf $OUT/runs.tgz -C $W .
