#!/usr/bin/env bash
# Session 9, seventh call, one machine: does a time-based warm-up (the bench thread submitting for 20 ms before each
# timed figure) close the gap to plain Node found in session 9f? C yardstick, its Node port, gpumem bench --only copy
# with the warm-up (dist) and without it (dist-nowarm, a build of the commit before), interleaved three times.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
for i in 1 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$i.txt; echo "C $i rc=$?"
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$i.txt 2>&1); echo "port $i rc=$?"
  (cd .gpu/app && S=$(date +%s%N); timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/warm-$i.json 2> /dev/null; echo "bench warm $i rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))")
  (cd .gpu/app && S=$(date +%s%N); timeout -s KILL 100 node dist-nowarm/cli.js bench --device 0 --only copy --json > $W/nowarm-$i.json 2> /dev/null; echo "bench nowarm $i rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))")
done
(cd .gpu/app && S=$(date +%s%N); timeout -s KILL 60 node dist/cli.js bench --quick --json > $W/quick.json 2>/dev/null; echo "bench --quick (warm) rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))")
node tools/gpu/port-to-json.mjs $W/port-1.txt $W/port-2.txt $W/port-3.txt
for v in warm nowarm port; do echo "== $v against C"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/$v-*.json > $OUT/compare-$v.md; grep -E "^\| (64 KiB|1 MiB|16 MiB)|cells" $OUT/compare-$v.md; done
tar czf $OUT/runs.tgz -C $W .
