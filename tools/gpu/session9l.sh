#!/usr/bin/env bash
# Session 9, twelfth call, one machine: which step of opening gpumem slows the port's small copies (session 9k)?
# C, port, port after importing gpumem, after opening its cuda backend, after touching device 0, C.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
timeout -s KILL 60 /tmp/nb > $W/native-1.txt
for v in as-c as-c+import as-c+open as-c+rt; do (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs $v > $W/port-$v.txt 2>&1); echo "$v rc=$?"; done
timeout -s KILL 60 /tmp/nb > $W/native-2.txt
node tools/gpu/port-to-json.mjs $W/port-*.txt
for v in as-c as-c+import as-c+open as-c+rt; do echo "== $v"; node tools/gpu/compare-native.mjs $W/native-*.txt "$W/port-$v.json" | grep -E "^\| (64 KiB|1 MiB) \| (H2D_pinned|D2H_pinned|D2D)|cells"; done
tar czf $OUT/runs.tgz -C $W .
