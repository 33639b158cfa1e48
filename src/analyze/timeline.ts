/**
 * The events an HTML timeline shows: copies, memsets and kernels per device and stream, in one window of the
 * trace, capped so a page of a million-event trace stays small. The window starts at the first kernel (the compute
 * phase) unless there are none.
 */
import { DIRECTIONS, MEM_KINDS, type TraceModel } from './model.js';

export interface TimelineBar {
  lane: string;
  /** Series: "kernel", "memset", or "copy HtoD pageable" and the like. */
  kind: string;
  /** Milliseconds from the window's start. */
  start: number;
  end: number;
}

export interface Timeline {
  lanes: string[];
  bars: TimelineBar[];
  /** Window in ns since the trace's first timestamp. */
  windowNs: [number, number];
  shown: number;
  total: number;
}

/** The timeline of at most `max` events. */
export function timelineOf(model: TraceModel, max = 3000): Timeline {
  type Ev = { s: number; e: number; lane: string; kind: string };
  const evs: Ev[] = [];
  const c = model.copies;
  for (let i = 0; i < c.length; i++) {
    const dir = DIRECTIONS[c.get(i, 'dir')] ?? 'unknown';
    const host = dir === 'HtoD' ? MEM_KINDS[c.get(i, 'src')] : dir === 'DtoH' ? MEM_KINDS[c.get(i, 'dst')] : undefined;
    evs.push({
      s: c.get(i, 'start'),
      e: c.get(i, 'end'),
      lane: `GPU ${c.get(i, 'device')} stream ${c.get(i, 'stream')}`,
      kind: `copy ${dir}${host ? ` ${host}` : ''}`,
    });
  }
  const m = model.memsets;
  for (let i = 0; i < m.length; i++)
    evs.push({ s: m.get(i, 'start'), e: m.get(i, 'end'), lane: `GPU ${m.get(i, 'device')} stream ${m.get(i, 'stream')}`, kind: 'memset' });
  const k = model.kernels;
  let firstKernel = Infinity;
  for (let i = 0; i < k.length; i++) {
    evs.push({ s: k.get(i, 'start'), e: k.get(i, 'end'), lane: `GPU ${k.get(i, 'device')} stream ${k.get(i, 'stream')}`, kind: 'kernel' });
    firstKernel = Math.min(firstKernel, k.get(i, 'start'));
  }
  evs.sort((a, b) => a.s - b.s);
  let from = 0;
  if (evs.length > max && firstKernel !== Infinity) {
    from = evs.findIndex((e) => e.s >= firstKernel);
    // start a little before the first kernel, so the uploads that feed it show
    from = Math.max(0, Math.min(from - Math.floor(max / 10), evs.length - max));
  }
  const shown = evs.slice(from, from + max);
  const t0 = shown[0]?.s ?? 0;
  const t1 = shown.reduce((x, e) => Math.max(x, e.e), t0);
  const lanes = [...new Set(shown.map((e) => e.lane))].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  return {
    lanes,
    bars: shown.map((e) => ({ lane: e.lane, kind: e.kind, start: (e.s - t0) / 1e6, end: Math.max((e.e - t0) / 1e6, (e.s - t0) / 1e6 + 1e-4) })),
    windowNs: [t0, t1],
    shown: shown.length,
    total: evs.length,
  };
}
