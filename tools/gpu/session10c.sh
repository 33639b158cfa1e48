#!/usr/bin/env bash
# Session 10, third call, one machine, four interleaved rounds of: the C yardstick; its Node port (as-c, no gpumem
# code); gpumem bench --only copy as built (waits for the warm-up copies on koffi's worker thread); the same bench
# with a blocking wait on the main thread instead, as the C program does (dist-blocksync, patched here from dist).
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
cd .gpu/app
rm -rf dist-blocksync && cp -r dist dist-blocksync
sed -i '141s/await stream.synchronize();/this.rt.backend.synchronizeStream(stream.handle, stream.device);/' dist-blocksync/bench/context.js
sed -n 139,142p dist-blocksync/bench/context.js
for r in 1 2 3 4; do
  timeout -s KILL 60 /tmp/nb > $W/native-$r.txt; echo "C $r rc=$?"
  timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$r.txt 2>&1; echo "port $r rc=$?"
  timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$r.json 2> /dev/null; echo "bench $r rc=$?"
  timeout -s KILL 100 node dist-blocksync/cli.js bench --device 0 --only copy --json > $W/blocksync-$r.json 2> /dev/null; echo "blocksync $r rc=$?"
done
cd ../..
node tools/gpu/port-to-json.mjs $W/port-*.txt
for v in port bench blocksync; do echo "== $v against C"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/$v-*.json > $W/compare-$v.md; cat $W/compare-$v.md | grep -E "^\| (64 KiB|1 MiB|16 MiB|256 MiB|1 GiB) |cells"; done
tar czf $OUT/runs.tgz -C $W .
