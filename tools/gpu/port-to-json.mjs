// Turns outputs of the Node port of the yardstick (native-port.mjs) into bench-shaped JSON (port-N.txt -> port-N.json)
// so that compare-native.mjs can set them against the C yardstick.
import { readFileSync, writeFileSync } from 'node:fs';

const shape = {
  H2D_pinned: ['HtoD', 'pinned', 'device'],
  D2H_pinned: ['DtoH', 'device', 'pinned'],
  H2D_pageable: ['HtoD', 'pageable', 'device'],
  D2H_pageable: ['DtoH', 'device', 'pageable'],
  D2D: ['DtoD', 'device', 'device'],
};
for (const file of process.argv.slice(2)) {
  const results = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const c = line.trim().split(/\t+/);
    if (c.length !== 6 || !/^\d+$/.test(c[0])) continue;
    Object.entries(shape).forEach(([, [direction, srcKind, dstKind]], j) => {
      results.push({ test: 'copy', direction, srcKind, dstKind, engine: 'copy-engine', bytes: Number(c[0]), medianGBps: Number(c[j + 1]) });
    });
  }
  writeFileSync(file.replace(/\.txt$/, '.json'), JSON.stringify({ results }));
}
