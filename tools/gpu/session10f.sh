#!/usr/bin/env bash
# Session 10, sixth call, one machine: the yardstick's cudaMalloc+cudaFree loop timed by the Node port at each stage
# of the program (first; after buffers, stream and events; after the copies; after freeing buffers), with the C
# program's buffers and stream (as-c) and with gpumem bench's (as-gpumem).
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
for v in as-c as-gpumem as-c; do
  PORT_SIZES=small PORT_ALLOC=1 timeout -s KILL 120 node tools/gpu/native-port.mjs $v > $W/port-alloc-$v-$RANDOM.txt 2>&1; echo "port $v rc=$?"
done
grep -H "^port:" $W/*.txt
tar czf $OUT/runs.tgz -C $W .
