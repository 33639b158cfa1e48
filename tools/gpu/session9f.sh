#!/usr/bin/env bash
# Session 9, sixth call, one machine: C yardstick, its Node port (koffi only), and gpumem bench --only copy,
# interleaved three times: does gpumem's bench lose anything against plain Node on the same machine?
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
for i in 1 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$i.txt; echo "C $i rc=$?"
  (cd .gpu/app && timeout -s KILL 60 node tools/gpu/native-port.mjs as-c > $W/port-$i.txt 2>&1); echo "port $i rc=$?"
  (cd .gpu/app && timeout -s KILL 100 node dist/cli.js bench --device 0 --only copy --json > $W/bench-$i.json 2> /dev/null); echo "bench $i rc=$?"
done
echo "== gpumem against C"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/bench-*.json | tee $OUT/compare-c.md | sed -n 8,22p
echo "== Node port against C"; node -e "
const fs=require('fs');const rows=[];
for (const i of [1,2,3]) for (const l of fs.readFileSync('$W/port-'+i+'.txt','utf8').split('\n')) { const c=l.split('\t'); if (c.length===6 && /^\d+$/.test(c[0])) { const b=+c[0]; const k=['H2D_pinned','D2H_pinned','H2D_pageable','D2H_pageable','D2D']; const dir={H2D_pinned:['HtoD','pinned','device'],D2H_pinned:['DtoH','device','pinned'],H2D_pageable:['HtoD','pageable','device'],D2H_pageable:['DtoH','device','pageable'],D2D:['DtoD','device','device']}; k.forEach((n,j)=>rows.push({test:'copy',direction:dir[n][0],srcKind:dir[n][1],dstKind:dir[n][2],engine:'copy-engine',bytes:b,medianGBps:+c[j+1],run:i})); } }
for (const i of [1,2,3]) fs.writeFileSync('$W/portjson-'+i+'.json', JSON.stringify({results: rows.filter(r=>r.run===i)}));"
node tools/gpu/compare-native.mjs $W/native-*.txt $W/portjson-*.json | tee $OUT/compare-port.md | sed -n 8,22p
tar czf $OUT/runs.tgz -C $W .
