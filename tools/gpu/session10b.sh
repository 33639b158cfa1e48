#!/usr/bin/env bash
# Session 10, second call, one machine: gpumem bench's copies against the C yardstick, interleaved, five rounds with
# both pinned to one CPU (taskset -c 4) and three rounds unpinned: does holding the host thread on one core narrow
# the run-to-run spread that decides the 10% bar (sessions 9d-9h)?
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W/pin $W/free
source tools/gpu/session-setup.sh
cd .gpu/app
round() { # $1 dir, $2 round, $3... prefix command
  local d=$1 r=$2; shift 2
  S=$(date +%s%N); timeout -s KILL 60 "$@" /tmp/nb > $W/$d/native-$r.txt; echo "$d C $r rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
  S=$(date +%s%N); timeout -s KILL 100 "$@" node dist/cli.js bench --device 0 --only copy --json > $W/$d/bench-$r.json 2> /dev/null; echo "$d bench $r rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
}
for r in 1 2 3 4 5; do
  round pin $r taskset -c 4
  [ $r -le 3 ] && round free $r env
done
cd ../..
for d in pin free; do echo "== $d"; node tools/gpu/compare-native.mjs $W/$d/native-*.txt $W/$d/bench-*.json | tee $W/compare-$d.md; done
tar czf $OUT/runs.tgz -C $W .
