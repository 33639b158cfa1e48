#!/usr/bin/env bash
# Session 10, fifth call, one machine: why does the yardstick's cudaMalloc+cudaFree take 60-90 us when gpumem bench
# measures 3-6 us for the same calls? The Node port times the yardstick's loop with the copy buffers held (as the C
# program does), then after freeing the device buffers, then after freeing the pinned buffer too.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
timeout -s KILL 60 /tmp/nb > $W/native-1.txt; echo "C rc=$?"; grep "cudaMalloc+cudaFree" $W/native-1.txt
for r in 1 2; do
  PORT_SIZES=small PORT_ALLOC=1 timeout -s KILL 120 node tools/gpu/native-port.mjs as-c > $W/port-alloc-$r.txt 2>&1; echo "port $r rc=$?"; grep "^port:" $W/port-alloc-$r.txt
done
timeout -s KILL 100 node dist/cli.js bench --device 0 --only alloc > $W/bench-alloc.txt 2>/dev/null; echo "bench alloc rc=$?"; grep -E "device +driver|driver.*device" $W/bench-alloc.txt | head -6
tar czf $OUT/runs.tgz -C $W .
