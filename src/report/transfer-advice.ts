/**
 * The advice drawn from the transfer rows that measure what programs do (many separate arrays, files): which call
 * to use for a list of arrays, and for a file. Called by advice.ts with its own lookups, so a row whose kind differed
 * from native C is left out the same way as everywhere else.
 */
import type { BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import type { Advice, Evidence } from './advice.js';

const f1 = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** What the advice needs from advice.ts: a quotable row at a given size, and evidence from a row. */
export interface TransferLookups {
  rows: readonly BenchResult[];
  pick(test: string, direction: string, srcKind: string, dstKind: string, engine: string, bytes: number): BenchResult | undefined;
  ev(label: string, r: BenchResult | undefined): Evidence | undefined;
}

type Draft = Omit<Advice, 'evidence'> & { evidence: Array<Evidence | undefined> };

/** Advice on lists of arrays and on files, from `bench --only transfer`'s program rows; none where they were not run. */
export function transferProgramAdvice(device: number, l: TransferLookups): Draft[] {
  const out: Draft[] = [];
  // The smallest arrays measured (4096 x 64 KiB in a full run): where per-call costs show most.
  const many = l.rows.filter((r) => r.device === device && r.test === 'transfer' && r.direction === 'HtoD-many' && r.copies);
  const small = many.sort((a, b) => a.bytes / (a.copies ?? 1) - b.bytes / (b.copies ?? 1))[0];
  if (small) {
    const at = (engine: string): BenchResult | undefined => l.pick('transfer', 'HtoD-many', 'pageable', 'device', engine, small.bytes);
    const list = at('uploadMany');
    const each = at('await-each');
    const all = at('promise-all');
    if (list?.medianGBps && each?.medianGBps) {
      const size = formatBytes(small.bytes / (small.copies ?? 1), 0);
      out.push({
        id: 'transfer-lists',
        workloads: ['inference', 'training', 'preprocessing'],
        title: `Send many arrays as one list: rt.uploadMany ${f1(list.medianGBps)} GB/s for ${small.copies} arrays of ${size}, ${f1(each.medianGBps)} awaited one by one`,
        recommendation: `Arrays awaited one at a time each pay a round trip; queued together they share the pinned ring's chunks and land with one batched copy per chunk. Pass them to rt.uploadMany (${f1(list.medianGBps)} GB/s here)${all?.medianGBps ? `, or start every rt.upload before awaiting any (Promise.all: ${f1(all.medianGBps)} GB/s)` : ''}.`,
        evidence: [
          l.ev(`${small.copies} x ${size}, uploadMany`, list),
          l.ev(`${small.copies} x ${size}, Promise.all`, all),
          l.ev(`${small.copies} x ${size}, awaited in turn`, each),
        ],
      });
    }
  }
  const fileRows = l.rows.filter((r) => r.device === device && r.test === 'transfer' && r.direction === 'FtoD');
  const biggest = fileRows.sort((a, b) => b.bytes - a.bytes)[0];
  if (biggest) {
    const find = (src: string, match: (e: string) => boolean): BenchResult | undefined => {
      const r = fileRows.find((x) => x.srcKind === src && x.bytes === biggest.bytes && match(x.engine));
      return r ? l.pick('transfer', 'FtoD', src, 'device', r.engine, r.bytes) : undefined;
    };
    const cached = find('file-cached', (e) => e.startsWith('uploadFile (') && e !== 'uploadFile (cufile)');
    const viaJs = find('file-cached', (e) => e === 'readFileSync+upload');
    const cold = find('file-cold', (e) => e.startsWith('uploadFile (') && !e.includes('forced') && e !== 'uploadFile (cufile)');
    if (cached?.medianGBps && viaJs?.medianGBps) {
      out.push({
        id: 'files-to-device',
        workloads: ['inference', 'training'],
        title: `Read files straight to the device: rt.uploadFile ${f1(cached.medianGBps)} GB/s from the page cache, ${f1(viaJs.medianGBps)} through a JS buffer`,
        recommendation: `rt.uploadFile reads the file on the copy threads into the pinned ring while the copy engine moves the chunk before (no JS buffer, no 2 GiB limit)${cold?.medianGBps ? `; from disk it read ${f1(cold.medianGBps)} GB/s (${cold.engine.replace('uploadFile ', '')}), the disk's own rate` : ''}. Reading the file into a JS buffer first (fs.readFileSync, then rt.upload) moved ${f1(viaJs.medianGBps)} GB/s.`,
        evidence: [
          l.ev('file (page cache), rt.uploadFile', cached),
          l.ev('file (page cache), readFileSync + rt.upload', viaJs),
          l.ev('file (cold), rt.uploadFile', cold),
        ],
      });
    }
  }
  return out;
}
