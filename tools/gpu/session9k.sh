#!/usr/bin/env bash
# Session 9, eleventh call, one machine: does opening gpumem's cuda runtime in a process slow the copies that the
# yardstick's Node port then times with its own buffers and stream? C, port (as-c), port after openRuntime (as-c+rt),
# interleaved three times.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
for i in 1 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$i.txt; echo "C $i rc=$?"
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$i.txt 2>&1); echo "port $i rc=$?"
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c+rt > $W/portrt-$i.txt 2>&1); echo "port+rt $i rc=$?"
done
node tools/gpu/port-to-json.mjs $W/port-*.txt $W/portrt-*.txt
for v in port portrt; do echo "== $v against C"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/$v-*.json > $OUT/compare-$v.md; grep -E "^\| (64 KiB|1 MiB|16 MiB) \| (H2D_pinned|D2H_pinned|D2D)|cells" $OUT/compare-$v.md; done
tar czf $OUT/runs.tgz -C $W .
