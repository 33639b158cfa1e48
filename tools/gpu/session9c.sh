#!/usr/bin/env bash
# Session 9, third call: is the small-copy gap Node or gpumem? The C yardstick and its line-for-line Node port
# (as-c buffers/stream, and gpumem's buffers/stream), interleaved, then gpumem bench --only copy; C again after.
set -uo pipefail
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
rm -rf .gpu/app/tools && cp -r tools .gpu/app/tools
L=/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13; [ -f $L ] && export CUDART=$L
for i in 1 2; do
  timeout -s KILL 60 /tmp/nb | head -7 > $OUT/c-$i.txt; echo "== C $i"; sed -n 2,4p $OUT/c-$i.txt
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $OUT/port-as-c-$i.txt 2>&1); echo "== port as-c $i"; sed -n 3,5p $OUT/port-as-c-$i.txt
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-gpumem > $OUT/port-as-gpumem-$i.txt 2>&1); echo "== port as-gpumem $i"; sed -n 3,5p $OUT/port-as-gpumem-$i.txt
done
(cd .gpu/app && S=$(date +%s%N); timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $OUT/bench-copy.json 2> /tmp/bench.err; echo "bench copy rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))")
timeout -s KILL 60 /tmp/nb | head -7 > $OUT/c-3.txt; echo "== C 3"; sed -n 2,4p $OUT/c-3.txt
node tools/gpu/compare-native.mjs $OUT/c-3.txt $OUT/bench-copy.json | tee $OUT/compare.md | head -20
