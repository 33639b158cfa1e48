#!/usr/bin/env bash
# Session 10, seventh call, one machine: which step of opening gpumem's cuda backend makes cudaMalloc+cudaFree cost
# 4-9 us instead of the 70-100 us the yardstick's loop measures (session 10f)? The port's alloc loop after each step.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
for v in as-c as-c+libcuda as-c+cuinit as-c+nvrtc+nvml as-c+loadcuda as-c+backend as-c+open as-c+rt; do
  PORT_SIZES=small PORT_ALLOC=1 timeout -s KILL 120 node tools/gpu/native-port.mjs $v > "$W/port-alloc-$v.txt" 2>&1; echo "port $v rc=$?"
  grep "^port:.*first" "$W/port-alloc-$v.txt"
done
tar czf $OUT/runs.tgz -C $W .
