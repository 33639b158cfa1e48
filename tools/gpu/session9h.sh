#!/usr/bin/env bash
# Session 9, eighth call, one machine: does waiting for the stream on koffi's worker thread (as the bench's
# `await stream.synchronize()` does) slow the copies timed after it? The Node port with the wait on this thread
# (as-c) and on the worker (as-c+async); gpumem bench as built (dist) and with a blocking wait before each timed
# loop (dist-blocksync); the C yardstick; interleaved three times.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
for i in 1 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$i.txt; echo "C $i rc=$?"
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$i.txt 2>&1); echo "port $i rc=$?"
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c+async > $W/portasync-$i.txt 2>&1); echo "port+async $i rc=$?"
  (cd .gpu/app && timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$i.json 2> /dev/null); echo "bench $i rc=$?"
  (cd .gpu/app && timeout -s KILL 100 node dist-blocksync/cli.js bench --device 0 --only copy --json > $W/blocksync-$i.json 2> /dev/null); echo "bench blocksync $i rc=$?"
done
node tools/gpu/port-to-json.mjs $W/port-*.txt $W/portasync-*.txt
for v in port portasync bench blocksync; do echo "== $v against C"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/$v-*.json > $OUT/compare-$v.md; grep -E "^\| (64 KiB|1 MiB|16 MiB) \| (H2D_pinned|D2H_pinned|D2D)|cells" $OUT/compare-$v.md; done
tar czf $OUT/runs.tgz -C $W .
