#!/usr/bin/env bash
# Session 10, eighth call, one machine: is the yardstick's slow small cudaMalloc+cudaFree the driver releasing the
# chunk that holds small allocations each time it empties? The port's loop with and without one 512-byte allocation
# made first and kept.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
for r in 1 2; do for anchor in 0 1; do
  PORT_ANCHOR=$anchor PORT_SIZES=small PORT_ALLOC=1 timeout -s KILL 120 node tools/gpu/native-port.mjs as-c > "$W/port-alloc-anchor$anchor-$r.txt" 2>&1; echo "port anchor=$anchor rc=$?"
  grep "^port:.*first" "$W/port-alloc-anchor$anchor-$r.txt"
done; done
tar czf $OUT/runs.tgz -C $W .
