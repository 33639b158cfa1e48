/**
 * Synthetic traces of a distributed job, for the tests and the many-ranks benchmark: a recorded Kineto trace of one
 * process (fixtures/traces/pytorch-cuda-naive, one H200) written once per rank with its rank in distributedInfo, its
 * clock shifted a little, and — for the ranks named slow — every blocking stream synchronisation made `slowBy` times
 * longer (a straggler). Only the synthesised part is made up: every other event is the recording's.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

type Event = { name?: string; cat?: string; ts?: number; dur?: number; [k: string]: unknown };

/** Writes `ranks` traces into `dir` as rank-N.pt.trace.json; returns their paths. */
export function writeRankTraces(dir: string, ranks: number, options: { slow?: readonly number[]; slowBy?: number } = {}): string[] {
  const src = JSON.parse(gunzipSync(readFileSync(new URL('../../fixtures/traces/pytorch-cuda-naive.pt.trace.json.gz', import.meta.url))).toString()) as {
    traceEvents: Event[];
    [k: string]: unknown;
  };
  const files: string[] = [];
  for (let rank = 0; rank < ranks; rank++) {
    const slow = options.slow?.includes(rank) ?? false;
    const events = src.traceEvents.map((e) => {
      const out = { ...e };
      if (typeof out.ts === 'number') out.ts += rank * 13.7;
      if (slow && out.cat === 'cuda_runtime' && out.name === 'cudaStreamSynchronize' && typeof out.dur === 'number') out.dur *= options.slowBy ?? 10;
      return out;
    });
    const file = join(dir, `rank-${rank}.pt.trace.json`);
    writeFileSync(file, JSON.stringify({ ...src, distributedInfo: { backend: 'nccl', rank, world_size: ranks }, traceEvents: events }));
    files.push(file);
  }
  return files;
}
