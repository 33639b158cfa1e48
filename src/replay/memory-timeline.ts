/**
 * What `gpumem analyze SNAPSHOT --html` draws, per GPU: the active-memory timeline as PyTorch's memory_viz lays it
 * out (every live allocation stacked on the ones allocated before it, an allocation's band moving down when one below
 * it is freed; x is the allocation event's number, y bytes), the segments and their blocks when the snapshot was
 * taken, and pool replay's what-ifs. Plain data for a page: no drawing here.
 */
import { EventKind, type Trace } from '../formats/allocator-trace.js';
import { deviceTrace, type Frame, type PytorchSnapshot } from '../formats/pytorch-snapshot.js';
import { replay, stateAtStart, type ReplayReport } from './replay.js';

/** One allocation's band: its size, stack (index into the view's stacks, -1 none), and lower edge over time. */
export interface TimelineBand {
  size: number;
  stack: number;
  /** Step it was allocated at (0 when live before the first event) and freed at (`steps` when still live). */
  start: number;
  end: number;
  /** Lower edge: [step, bytes, step, bytes, ...], a point where it moves (the first at `start`). */
  points: number[];
}

export interface DeviceTimeline {
  /** Allocation and free events: the x axis runs from 0 to this. */
  steps: number;
  /** Most bytes live at once. */
  peakBytes: number;
  bands: TimelineBand[];
  /** Bytes of the bands drawn one by one, where it changes: [step, bytes, ...]; the summed band sits on it. */
  drawn: number[];
  /** Allocations too small to draw one by one, summed as one band on top: [step, bytes, ...] where it changes. */
  rest: number[];
  restCount: number;
  /** Bytes live before the first event (recording started mid-run). */
  liveAtStartBytes: number;
}

export interface SegmentView {
  address: number;
  size: number;
  expandable: boolean;
  /** [size, state (0 allocated, 1 waiting to be freed, 2 free), stack] per block, in address order. */
  blocks: number[];
}

export interface DeviceView {
  device: number;
  timeline: DeviceTimeline;
  segments: SegmentView[];
  /** Segments left out of the picture (beyond what a page can draw), with their bytes. */
  segmentsLeftOut: { count: number; bytes: number };
  /** Pool replay of this GPU's trace; undefined when it has no allocation events. */
  replay: ReplayReport | undefined;
}

export interface SnapshotView {
  file: string;
  devices: DeviceView[];
  /** Stack traces as "name (file:line)" lines, innermost first, with the allocator's own frames left out. */
  stacks: string[][];
  allocatorSettings: Record<string, unknown> | undefined;
}

/** Most allocations drawn one by one, and most points of their edges, so that a page stays small and quick. */
const MAX_BANDS = 3000;
const MAX_POINTS = 400_000;
const MAX_SEGMENTS = 2000;
const MAX_FRAMES = 40;

/** Frames of the recording machinery and the interpreter, which say nothing of where the memory was asked for. */
const NOISE = /^(torch::unwind::|torch::CapturedTraceback::|torch::gather|_?PyEval_|_?PyObject_|_?PyFunction_|_?Py_RunMain|__libc_start|_start$)/;

interface Live {
  band: TimelineBand | undefined;
  size: number;
  offset: number;
}

/** Lays out one GPU's allocations, drawing the `keep` largest one by one. */
function layout(trace: Trace, keep: number, stackAt: (address: number) => number): DeviceTimeline & { points: number } {
  const ev = trace.events;
  const freeKind = trace.hasFreeCompleted ? EventKind.Free : EventKind.FreeRequested;
  const start = stateAtStart(trace);
  // sizes of everything that will be live, to find the `keep` largest
  const sizes: number[] = start.blocks.map((b) => b.size);
  for (let i = 0; i < ev.length; i++) if (ev.kind[i] === EventKind.Alloc) sizes.push(ev.size[i]!);
  const threshold = sizes.length > keep ? [...sizes].sort((a, b) => b - a)[keep - 1]! : 0;
  // allocations above the threshold are all drawn; of those equal to it, as many as the rest of `keep` allows
  let ties = keep - sizes.filter((x) => x > threshold).length;
  const bands: TimelineBand[] = [];
  const stack: Live[] = [];
  const byAddress = new Map<number, Live>();
  let drawn = 0;
  let rest = 0;
  let restCount = 0;
  const restPoints: number[] = [0, 0];
  const drawnPoints: number[] = [0, 0];
  let peak = 0;
  let points = 0;
  const open = (address: number, size: number, stackId: number, step: number): void => {
    if (size > threshold || (size === threshold && ties-- > 0)) {
      const band: TimelineBand = { size, stack: stackId, start: step, end: -1, points: [step, drawn] };
      bands.push(band);
      const l = { band, size, offset: drawn };
      stack.push(l);
      byAddress.set(address, l);
      drawn += size;
      points++;
    } else {
      rest += size;
      restCount++;
      byAddress.set(address, { band: undefined, size, offset: -1 });
    }
  };
  const close = (address: number, step: number): void => {
    const l = byAddress.get(address);
    if (!l) return;
    byAddress.delete(address);
    if (!l.band) {
      rest -= l.size;
      return;
    }
    l.band.end = step;
    const j = stack.indexOf(l);
    stack.splice(j, 1);
    drawn -= l.size;
    for (let k = j; k < stack.length; k++) {
      const above = stack[k]!;
      above.offset -= l.size;
      above.band!.points.push(step, above.offset);
      points++;
    }
  };
  for (const b of start.blocks) open(b.address, b.size, stackAt(b.address), 0);
  const liveAtStart = drawn + rest;
  peak = liveAtStart;
  restPoints[1] = rest;
  drawnPoints[1] = drawn;
  let step = 0;
  for (let i = 0; i < ev.length; i++) {
    const k = ev.kind[i];
    if (k !== EventKind.Alloc && k !== freeKind) continue;
    step++;
    const before = rest;
    const drawnBefore = drawn;
    if (k === EventKind.Alloc) {
      close(ev.addr[i]!, step); // an address allocated again was freed unseen
      open(ev.addr[i]!, ev.size[i]!, ev.stack[i]!, step);
    } else close(ev.addr[i]!, step);
    if (rest !== before) restPoints.push(step, rest);
    if (drawn !== drawnBefore) drawnPoints.push(step, drawn);
    peak = Math.max(peak, drawn + rest);
  }
  for (const b of bands) if (b.end < 0) b.end = step;
  return {
    steps: step,
    peakBytes: peak,
    bands,
    drawn: drawnPoints,
    rest: restPoints,
    restCount,
    liveAtStartBytes: liveAtStart,
    points: points + (restPoints.length + drawnPoints.length) / 2,
  };
}

/** The timeline with as many bands drawn one by one as the page's budget of points allows. */
function timelineOf(trace: Trace, stackAt: (address: number) => number): DeviceTimeline {
  for (let keep = MAX_BANDS; ; keep = Math.floor(keep / 2)) {
    const t = layout(trace, keep, stackAt);
    if (t.points <= MAX_POINTS || keep <= 16) {
      const { points: _, ...out } = t;
      return out;
    }
  }
}

const STATE_CODE = { active_allocated: 0, active_pending_free: 1, inactive: 2 } as const;

/**
 * The page's data for every GPU of a snapshot read with its stacks. Replays each GPU against the default pool
 * configurations, unless given those replays (what-if.ts replaysOf).
 */
export function snapshotView(snap: PytorchSnapshot, replays?: ReadonlyMap<number, ReplayReport>): SnapshotView {
  const used = new Map<number, number>();
  const stacks: string[][] = [];
  const ref = (id: number): number => {
    if (id < 0) return -1;
    let j = used.get(id);
    if (j === undefined) {
      const frames: Frame[] = snap.stacks[id] ?? [];
      const lines = frames.filter((f) => !NOISE.test(f.name)).map((f) => `${f.name} (${f.filename}:${f.line})`);
      j = stacks.push(lines.slice(0, MAX_FRAMES)) - 1;
      used.set(id, j);
    }
    return j;
  };
  const devices = snap.devices.map((d): DeviceView => {
    const blockStack = new Map<number, number>();
    for (const s of d.segments) for (const b of s.blocks) if (b.stack >= 0) blockStack.set(b.address, b.stack);
    const hasAllocs = d.events.count(EventKind.Alloc) > 0;
    const trace = hasAllocs ? deviceTrace(snap, d.device) : undefined;
    const timeline = trace
      ? timelineOf(trace, (a) => blockStack.get(a) ?? -1)
      : { steps: 0, peakBytes: 0, bands: [], drawn: [0, 0], rest: [0, 0], restCount: 0, liveAtStartBytes: 0 };
    for (const b of timeline.bands) b.stack = ref(b.stack);
    const sorted = [...d.segments].sort((a, b) => a.address - b.address);
    const shown = sorted.slice(0, MAX_SEGMENTS);
    const left = sorted.slice(MAX_SEGMENTS);
    return {
      device: d.device,
      timeline,
      segments: shown.map((s) => ({
        address: s.address,
        size: s.size,
        expandable: s.expandable,
        blocks: s.blocks.flatMap((b) => [b.size, STATE_CODE[b.state], ref(b.stack)]),
      })),
      segmentsLeftOut: { count: left.length, bytes: left.reduce((n, s) => n + s.size, 0) },
      replay: trace ? (replays?.get(d.device) ?? replay(trace)) : undefined,
    };
  });
  return { file: snap.file, devices, stacks, allocatorSettings: snap.allocatorSettings };
}
