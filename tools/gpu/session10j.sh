#!/usr/bin/env bash
# Session 10, tenth call, one machine: is the Node gap on small copies V8's helper threads (concurrent marking and
# compilation) competing with the main thread? Three rounds of C, the Node port and gpumem bench --only copy, each
# Node program also under `node --single-threaded` (no V8 worker threads).
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
for r in 1 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$r.txt; echo "C $r rc=$?"
  timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$r.txt 2>&1; echo "port $r rc=$?"
  timeout -s KILL 60 node --single-threaded tools/gpu/native-port.mjs as-c > $W/port-st-$r.txt 2>&1; echo "port st $r rc=$?"
  timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$r.json 2> /dev/null; echo "bench $r rc=$?"
  timeout -s KILL 100 node --single-threaded dist/cli.js bench --device 0 --only copy --json > $W/st-$r.json 2> /dev/null; echo "bench st $r rc=$?"
done
cd ../..
node tools/gpu/port-to-json.mjs $W/port-*.txt
mkdir -p $W/st && mv $W/port-st-*.json $W/st/ && for f in $W/st/port-st-*.json; do mv $f $W/st/port-$(basename $f | sed 's/port-st-//'); done
echo "== as usual"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/bench-*.json $W/port-*.json > $W/compare-usual.md; grep -E "^\| (64 KiB|1 MiB|16 MiB) \| (H2D_pinned|D2H_pinned|D2D)|cells|Node port:" $W/compare-usual.md
echo "== single-threaded"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/st-*.json $W/st/port-*.json > $W/compare-st.md; grep -E "^\| (64 KiB|1 MiB|16 MiB) \| (H2D_pinned|D2H_pinned|D2D)|cells|Node port:" $W/compare-st.md
tar czf $OUT/runs.tgz -C $W .
