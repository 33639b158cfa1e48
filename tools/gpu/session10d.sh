#!/usr/bin/env bash
# Session 10, fourth call, one machine: the bench now waits for its warm-up copies on the main thread (Stream.waitSync),
# as the yardstick does. Memory conformance suite on cuda (waitSync included); then four interleaved rounds of the
# C yardstick, its Node port (as-c) and gpumem bench (round 1 the full bench with --html, then --only copy); the
# quick bench's and report's times; both compared with C.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
timeout -s KILL 120 node --test dist/memory/memory.conformance.test.js > $W/conformance.txt 2>&1; echo "conformance rc=$?"
grep -E "waitSync|^# (tests|pass|fail|skipped)" $W/conformance.txt
for r in 1 2 3 4; do
  timeout -s KILL 60 /tmp/nb > $W/native-$r.txt; echo "C $r rc=$?"
  timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$r.txt 2>&1; echo "port $r rc=$?"
  S=$(date +%s%N)
  if [ $r = 1 ]; then timeout -s KILL 300 node dist/cli.js bench --json --html $W/bench.html > $W/bench-1.json 2> $W/bench-1.err; echo "bench full rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; tail -1 $W/bench-1.err
  else timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$r.json 2> /dev/null; echo "bench copy $r rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; fi
done
S=$(date +%s%N); timeout -s KILL 60 node dist/cli.js bench --quick --json > $W/quick.json 2>/dev/null; echo "bench --quick rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
S=$(date +%s%N); timeout -s KILL 120 node dist/cli.js report > $W/report.txt 2> $W/report.err; echo "report rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
cd ../..
node tools/gpu/port-to-json.mjs $W/port-*.txt
for v in port bench; do echo "== $v against C"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/$v-*.json > $W/compare-$v.md; cat $W/compare-$v.md; done
tar czf $OUT/runs.tgz -C $W .
