#!/usr/bin/env bash
# Session 10, ninth call: after deviceInfo and the capabilities moved into NativeBackend, on cuda: info (text and
# JSON), the memory conformance suite, the quick bench and report.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
exec > >(tee -a $OUT/session.log) 2>&1
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
node dist/cli.js info > $W/info.txt 2>&1; echo "info rc=$?"; cat $W/info.txt
node dist/cli.js info --json > $W/info.json 2>&1; echo "info --json rc=$?"
timeout -s KILL 120 node --test dist/memory/memory.conformance.test.js > $W/conformance.txt 2>&1; echo "conformance rc=$?"; grep -E "^not ok|^# (tests|pass|fail|skipped)" $W/conformance.txt
S=$(date +%s%N); timeout -s KILL 60 node dist/cli.js bench --quick --json > $W/quick.json 2>/dev/null; echo "bench --quick rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"
S=$(date +%s%N); timeout -s KILL 120 node dist/cli.js report > $W/report.txt 2> $W/report.err; echo "report rc=$? ms=$(( ($(date +%s%N) - S) / 1000000 ))"; head -30 $W/report.txt
tar czf $OUT/runs.tgz -C $W .
