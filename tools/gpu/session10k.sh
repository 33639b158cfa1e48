#!/usr/bin/env bash
# Session 10, eleventh call, one machine: gpumem bench's 16 MiB device-to-device copies trail the Node port by 3-6% in
# most sessions. The bench times on a non-blocking stream, the yardstick on cudaStreamCreate's: the port with each,
# 1 MiB and 16 MiB only, five rounds interleaved with the C program.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
for r in 1 2 3 4 5; do
  timeout -s KILL 60 /tmp/nb > $W/native-$r.txt; echo "C $r rc=$?"
  for v in as-c as-c+nbstream; do PORT_SIZES=mid timeout -s KILL 60 node tools/gpu/native-port.mjs $v > "$W/port-$v-$r.txt" 2>&1; echo "$v $r rc=$?"; done
done
cd ../..
node tools/gpu/port-to-json.mjs $W/port-*.txt
for v in as-c as-c+nbstream; do echo "== $v"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/port-$v-*.json | grep -E "^\| (1 MiB|16 MiB) \| (D2D|H2D_pinned|D2H_pinned)"; done
tar czf $OUT/runs.tgz -C $W .
