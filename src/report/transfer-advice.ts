/**
 * The advice drawn from the transfer rows that measure what programs do (many separate arrays, files): which call to
 * use for a list of arrays, and for a file. Called by advice-transfer.ts; every row goes through ./figures.ts, so a
 * row whose kind differed from native C is left out the same way as everywhere else.
 */
import type { BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { f1, type RuleContext } from './figures.js';

/** Advice on lists of arrays and on files, from `bench --only transfer`'s program rows; none where they were not run. */
export function transferProgramAdvice(c: RuleContext): void {
  const { F, add } = c;
  const ev = F.ev.bind(F);
  // The smallest arrays measured (4096 x 64 KiB in a full run): where per-call costs show most.
  const many = F.quotableRows((r) => r.test === 'transfer' && r.direction === 'HtoD-many' && !!r.copies);
  const small = [...many].sort((a, b) => a.bytes / (a.copies ?? 1) - b.bytes / (b.copies ?? 1))[0];
  if (small) {
    const at = (engine: string): BenchResult | undefined => F.pick('transfer', 'HtoD-many', 'pageable', 'device', engine, small.bytes);
    const list = at('uploadMany');
    const each = at('await-each');
    const all = at('promise-all');
    if (list?.medianGBps && each?.medianGBps) {
      const size = formatBytes(small.bytes / (small.copies ?? 1), 0);
      add({
        id: 'transfer-lists',
        workloads: ['inference', 'training', 'preprocessing'],
        title: `Send many arrays as one list: rt.uploadMany ${f1(list.medianGBps)} GB/s for ${small.copies} arrays of ${size}, ${f1(each.medianGBps)} awaited one by one`,
        recommendation: `Arrays awaited one at a time each pay a round trip; queued together they share the pinned ring's chunks and land with one batched copy per chunk. Pass them to rt.uploadMany (${f1(list.medianGBps)} GB/s here)${all?.medianGBps ? `, or start every rt.upload before awaiting any (Promise.all: ${f1(all.medianGBps)} GB/s)` : ''}.`,
        evidence: [
          ev(`${small.copies} x ${size}, uploadMany`, list),
          ev(`${small.copies} x ${size}, Promise.all`, all),
          ev(`${small.copies} x ${size}, awaited in turn`, each),
        ],
      });
    }
  }
  const file = (src: string, match: (e: string) => boolean): BenchResult | undefined => F.pick('transfer', 'FtoD', src, 'device', match);
  const cached = file('file-cached', (e) => e.startsWith('uploadFile (') && e !== 'uploadFile (cufile)');
  const viaJs = file('file-cached', (e) => e === 'readFileSync+upload');
  const cold = file('file-cold', (e) => e.startsWith('uploadFile (') && !e.includes('forced') && e !== 'uploadFile (cufile)');
  if (cached?.medianGBps && viaJs?.medianGBps) {
    add({
      id: 'files-to-device',
      workloads: ['inference', 'training'],
      title: `Read files straight to the device: rt.uploadFile ${f1(cached.medianGBps)} GB/s from the page cache, ${f1(viaJs.medianGBps)} through a JS buffer`,
      recommendation: `rt.uploadFile reads the file on the copy threads into the pinned ring while the copy engine moves the chunk before (no JS buffer, no 2 GiB limit)${cold?.medianGBps ? `; from disk it read ${f1(cold.medianGBps)} GB/s (${cold.engine.replace('uploadFile ', '')}), the disk's own rate` : ''}. Reading the file into a JS buffer first (fs.readFileSync, then rt.upload) moved ${f1(viaJs.medianGBps)} GB/s.`,
      evidence: [
        ev('file (page cache), rt.uploadFile', cached),
        ev('file (page cache), readFileSync + rt.upload', viaJs),
        ev('file (cold), rt.uploadFile', cold),
      ],
    });
  }
}
