/**
 * Replaying a recorded allocation trace against pool configurations on a simulated device (no GPU): for each
 * configuration, the peaks of requested, allocated and reserved memory, segment allocations, fragmentation at the
 * peak, and the smallest device on which the trace runs without running out of memory.
 */
import { type AllocConf, DEFAULT_ALLOC_CONF, parseAllocConf } from '../allocator-model/alloc-conf.js';
import { TorchAllocatorModel } from '../allocator-model/torch-caching.js';
import { BadInputError, GpuError, OutOfMemoryError } from '../errors.js';
import { CachingPool, type CachingPoolOptions } from '../pool/caching-pool.js';
import { SimulatedGrowableSource } from '../pool/growable.js';
import { SimulatedResource } from '../pool/sources.js';
import { EventKind, type Extent, type Trace } from '../formats/allocator-trace.js';
import { RangeSet } from './ranges.js';

const MiB = 1024 * 1024;

/**
 * A configuration to replay against: gpumem's CachingPool with options (`growable: true` gives it growable segments
 * on the simulated device), or PyTorch's caching allocator with PYTORCH_CUDA_ALLOC_CONF's settings, as the planner
 * models it (allocator-model/torch-caching.ts).
 */
export type ReplayConfiguration = { name: string; description: string } & (
  | { pool: Omit<CachingPoolOptions, 'growable'> & { growable?: boolean } }
  | { pytorch: AllocConf }
);

/** The configurations `gpumem pool replay` compares by default. */
export const DEFAULT_CONFIGURATIONS: readonly ReplayConfiguration[] = [
  {
    name: 'pytorch-like',
    description: "PyTorch's caching allocator defaults: 512-byte rounding, 2 MiB small / 20 MiB large segments, no reuse across streams",
    pytorch: DEFAULT_ALLOC_CONF,
  },
  {
    name: 'pytorch-expandable',
    description: "PyTorch's caching allocator with expandable_segments:True: one segment per stream, mapped in 2 MiB / 20 MiB pages",
    pytorch: parseAllocConf('expandable_segments:True'),
  },
  {
    name: 'gpumem',
    description: 'gpumem CachingPool defaults: 256-byte rounding, fixed segments, reuse across streams with events',
    pool: {},
  },
  {
    name: 'gpumem-growable',
    description: 'gpumem CachingPool with growable segments (virtual memory API: one segment per stream grows in 2 MiB steps)',
    pool: { growable: true, growBytes: { small: 2 * MiB, large: 2 * MiB } },
  },
  {
    name: 'gpumem-max-split-200MiB',
    description: 'fixed segments; blocks over 200 MiB are never split (PyTorch max_split_size_mb=200)',
    pool: { maxSplitBytes: 200 * MiB },
  },
];

/** Memory already held when recording began: blocks in use and the segments reserved. */
export interface StartState {
  blocks: Extent[];
  /** The reserved address ranges (adjacent segments joined: an expandable segment's pieces make one range). */
  segments: Extent[];
  /** How many segments the allocator had: the snapshot's own, less those allocated during the recording, plus those freed. */
  segmentCount: number;
}

/**
 * What was live when recording began, from the snapshot's state at its end undone event by event, last first: a
 * block allocated during the recording did not exist before it, a block freed during it did. Reserved memory is
 * undone as address ranges, not segments: an expandable segment maps and unmaps pieces of one range (segment_map /
 * segment_unmap), and the snapshot lists its mapped ranges, which need not start where any map event did.
 * Empty when the trace carries no end state (logs, snapshots without `segments`).
 */
export function stateAtStart(trace: Trace): StartState {
  if (!trace.atEnd) return { blocks: [], segments: [], segmentCount: 0 };
  const blocks = new Map(trace.atEnd.blocks.map((b) => [b.address, b]));
  const reserved = new RangeSet();
  for (const x of trace.atEnd.segments) reserved.add(x.address, x.address + x.size, x.stream);
  let count = trace.atEnd.segments.length;
  let maps = 0;
  const ev = trace.events;
  const freeKind = trace.hasFreeCompleted ? EventKind.Free : EventKind.FreeRequested;
  for (let i = ev.length - 1; i >= 0; i--) {
    const k = ev.kind[i]!;
    const e = { address: ev.addr[i]!, size: ev.size[i]!, stream: ev.stream[i]! };
    if (k === EventKind.Alloc) blocks.delete(e.address);
    else if (k === freeKind) blocks.set(e.address, e);
    else if (k === EventKind.SegmentAlloc || k === EventKind.SegmentMap) reserved.remove(e.address, e.address + e.size);
    else if (k === EventKind.SegmentFree || k === EventKind.SegmentUnmap) reserved.add(e.address, e.address + e.size, e.stream);
    if (k === EventKind.SegmentAlloc) count--;
    else if (k === EventKind.SegmentFree) count++;
    else if (k === EventKind.SegmentMap || k === EventKind.SegmentUnmap) maps++;
  }
  const byAddress = (a: Extent, b: Extent): number => a.address - b.address;
  const segments = reserved.extents();
  // an expandable segment is mapped and unmapped in pieces: what was reserved is counted as the ranges it made
  return { blocks: [...blocks.values()].sort(byAddress), segments, segmentCount: maps > 0 ? segments.length : Math.max(0, count) };
}

const total = (xs: readonly Extent[]): number => xs.reduce((s, x) => s + x.size, 0);

/** What the trace itself says about the allocator that recorded it. */
export interface RecordedFacts {
  /**
   * Set when recording began mid-run (the snapshot's state shows memory held before its first event): what was
   * live then. The figures below and the replay start from it.
   */
  startedMidRun?: { blocks: number; bytes: number; segments: number; reservedBytes: number } | undefined;
  peakRequestedBytes: number;
  /** From segment_alloc / segment_free (and map / unmap) events; undefined when the trace has none. */
  peakReservedBytes: number | undefined;
  segmentAllocs: number | undefined;
  /** segment_map events (expandable segments grow by mapping, not by segment_alloc); undefined when none. */
  segmentMaps: number | undefined;
  allocations: number;
  streams: number;
  /** Frees of addresses allocated before the trace began (ignored in replay). */
  untrackedFrees: number;
}

export interface ConfigurationResult {
  name: string;
  description: string;
  peakRequestedBytes: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** peak reserved / peak allocated */
  reservedOverAllocated: number;
  segmentAllocs: number;
  /** 1 − largest free block / free bytes, when reserved memory last reached its peak. */
  fragmentationAtPeak: number;
  /** Smallest device capacity (to 2 MiB) on which the replay ran without running out of memory. */
  minDeviceBytes: number;
}

export interface ReplayReport {
  trace: RecordedFacts & {
    file: string;
    format: string;
    device: number;
    /** Every device the trace holds events of; the replay is of `device` alone (each GPU has its own memory). */
    devices: number[];
    events: number;
    /** The recording allocator had expandable segments on (its settings, or segment_map / segment_unmap events). */
    expandableSegments: boolean;
  };
  configurations: ConfigurationResult[];
}

/** Facts of the recording allocator, read straight off the trace (and the state it started from). */
export function recordedFacts(trace: Trace, start: StartState = stateAtStart(trace)): RecordedFacts {
  const ev = trace.events;
  const freeKind = trace.hasFreeCompleted ? EventKind.Free : EventKind.FreeRequested;
  const live = new Map<number, number>(start.blocks.map((b) => [b.address, b.size]));
  let requested = total(start.blocks);
  let peakRequested = requested;
  let reserved = total(start.segments);
  let peakReserved = reserved;
  let segmentAllocs = 0;
  let segmentMaps = 0;
  let sawSegments = start.segments.length > 0;
  let untracked = 0;
  let allocations = 0;
  const streams = new Set<number>();
  for (let i = 0; i < ev.length; i++) {
    const k = ev.kind[i]!;
    const a = ev.addr[i]!;
    const s = ev.size[i]!;
    if (k === EventKind.Alloc) {
      live.set(a, s);
      requested += s;
      allocations++;
      streams.add(ev.stream[i]!);
      if (requested > peakRequested) peakRequested = requested;
    } else if (k === freeKind) {
      const had = live.get(a);
      if (had === undefined) untracked++;
      else {
        live.delete(a);
        requested -= had;
      }
    } else if (k === EventKind.SegmentAlloc || k === EventKind.SegmentMap) {
      sawSegments = true;
      if (k === EventKind.SegmentAlloc) segmentAllocs++;
      else segmentMaps++;
      reserved += s;
      if (reserved > peakReserved) peakReserved = reserved;
    } else if (k === EventKind.SegmentFree || k === EventKind.SegmentUnmap) {
      sawSegments = true;
      reserved -= s;
    }
  }
  const midRun = start.blocks.length + start.segments.length > 0;
  return {
    startedMidRun: midRun
      ? { blocks: start.blocks.length, bytes: total(start.blocks), segments: start.segmentCount, reservedBytes: total(start.segments) }
      : undefined,
    peakRequestedBytes: peakRequested,
    peakReservedBytes: sawSegments ? peakReserved : undefined,
    segmentAllocs: sawSegments ? segmentAllocs : undefined,
    segmentMaps: segmentMaps > 0 ? segmentMaps : undefined,
    allocations,
    streams: streams.size,
    untrackedFrees: untracked,
  };
}

interface RunResult {
  ok: boolean;
  peakRequested: number;
  peakAllocated: number;
  peakReserved: number;
  segmentAllocs: number;
  fragmentationAtPeak: number;
}

/** What a replay drives: an allocator that hands out addresses (or handles) for sizes on streams. */
interface Replayer {
  allocate(size: number, stream: number): number;
  deallocate(address: number, size: number, stream: number): void;
  /** Ran out of memory (the torch model flags it; the pool throws OutOfMemoryError). */
  readonly outOfMemory: boolean;
  /** The reserved peak so far (cheap: read after every allocation). */
  readonly reservedPeak: number;
  figures(): { allocatedPeak: number; reservedPeak: number; segmentAllocs: number; fragmentation: number };
  dispose(): void;
}

/** gpumem's CachingPool on a simulated device of `capacity` bytes. */
function poolReplayer(options: Extract<ReplayConfiguration, { pool: unknown }>['pool'], capacity: number): Replayer {
  const { growable, ...rest } = options;
  const pool = growable
    ? new CachingPool(undefined, { ...rest, traceEntries: 0, growable: new SimulatedGrowableSource(capacity) })
    : new CachingPool(new SimulatedResource(capacity), { ...rest, traceEntries: 0 });
  return {
    allocate: (size, stream) => pool.allocate(size, { stream }),
    deallocate: (address, size, stream) => pool.deallocate(address, size, { stream }),
    outOfMemory: false,
    get reservedPeak() {
      return pool.reservedPeakBytes;
    },
    figures: () => {
      const s = pool.stats();
      return { allocatedPeak: s.allocatedBytes.peak, reservedPeak: s.reservedBytes.peak, segmentAllocs: s.segmentAllocs, fragmentation: s.fragmentation };
    },
    dispose: () => pool[Symbol.dispose](),
  };
}

/** PyTorch's caching allocator, as the planner models it, with `capacity` bytes for cudaMalloc. */
function torchReplayer(conf: AllocConf, capacity: number): Replayer {
  const model = new TorchAllocatorModel({ capacityBytes: Number.isFinite(capacity) && capacity < Number.MAX_SAFE_INTEGER ? capacity : undefined, conf });
  return {
    allocate: (size, stream) => model.alloc(size, stream),
    deallocate: (handle) => model.free(handle),
    get outOfMemory() {
      return model.outOfMemory;
    },
    get reservedPeak() {
      return model.peakReservedBytes;
    },
    figures: () => {
      const s = model.stats();
      const free = s.reservedBytes - s.allocatedBytes;
      return {
        allocatedPeak: s.peakAllocatedBytes,
        reservedPeak: s.peakReservedBytes,
        segmentAllocs: s.segmentAllocs,
        fragmentation: free > 0 ? 1 - Math.min(1, s.largestFreeBytes / free) : 0,
      };
    },
    dispose: () => {},
  };
}

const replayerOf = (config: ReplayConfiguration, capacity: number): Replayer =>
  'pytorch' in config ? torchReplayer(config.pytorch, capacity) : poolReplayer(config.pool, capacity);

/** Replays the trace once on a simulated device of `capacity` bytes, starting with the blocks live at its start. */
function runOnce(trace: Trace, start: StartState, config: ReplayConfiguration, capacity: number): RunResult {
  const pool = replayerOf(config, capacity);
  const ev = trace.events;
  const freeKind = trace.hasFreeCompleted ? EventKind.Free : EventKind.FreeRequested;
  const map = new Map<number, { address: number; size: number; stream: number }>();
  let requested = 0;
  let peakRequested = 0;
  let lastPeakReserved = -1;
  let fragAtPeak = 0;
  let ok = true;
  /** The event being replayed (-1: the blocks live at the start), for an error that names it. */
  let at = -1;
  try {
    for (const b of start.blocks) {
      if (b.size <= 0) continue;
      map.set(b.address, { address: pool.allocate(b.size, b.stream), size: b.size, stream: b.stream });
      requested += b.size;
    }
    peakRequested = requested;
    for (let i = 0; i < ev.length && !pool.outOfMemory; i++) {
      at = i;
      const k = ev.kind[i]!;
      if (k === EventKind.Alloc) {
        const size = ev.size[i]!;
        if (size <= 0) continue;
        const stream = ev.stream[i]!;
        const address = pool.allocate(size, stream);
        const prev = map.get(ev.addr[i]!);
        if (prev) pool.deallocate(prev.address, prev.size, prev.stream); // a reused address means the old one was freed unseen
        map.set(ev.addr[i]!, { address, size, stream });
        requested += size;
        if (requested > peakRequested) peakRequested = requested;
        if (pool.reservedPeak > lastPeakReserved) {
          lastPeakReserved = pool.reservedPeak;
          fragAtPeak = pool.figures().fragmentation;
        }
      } else if (k === freeKind) {
        const m = map.get(ev.addr[i]!);
        if (!m) continue;
        pool.deallocate(m.address, m.size, m.stream);
        map.delete(ev.addr[i]!);
        requested -= m.size;
      }
    }
  } catch (e) {
    if (!(e instanceof OutOfMemoryError)) throw refusedEvent(trace, at, e);
    ok = false;
  }
  const s = pool.figures();
  pool.dispose();
  return {
    ok: ok && !pool.outOfMemory,
    peakRequested,
    peakAllocated: s.allocatedPeak,
    peakReserved: s.reservedPeak,
    segmentAllocs: s.segmentAllocs,
    fragmentationAtPeak: fragAtPeak,
  };
}

/** A pool's refusal of an event other than out of memory: the trace's fault, named by its file and event. */
function refusedEvent(trace: Trace, at: number, e: unknown): unknown {
  if (!(e instanceof GpuError)) return e;
  const ev = trace.events;
  const what =
    at < 0
      ? 'a block live at the start of the trace'
      : `event ${at} (${ev.kind[at] === EventKind.Alloc ? 'an allocation' : 'a free'} of ${ev.size[at]} bytes at 0x${ev.addr[at]!.toString(16)})`;
  return new BadInputError(`${what}: the pool cannot replay it (${e.message})`, trace.file, { cause: e });
}

/** The smallest capacity, to `step` bytes, on which the replay succeeds (binary search between lo and hi). */
function minCapacity(trace: Trace, start: StartState, config: ReplayConfiguration, lo: number, hi: number, step = 2 * MiB): number {
  let low = Math.floor(lo / step) * step;
  let high = Math.ceil(hi / step) * step;
  while (high - low > step) {
    const mid = Math.floor((low + high) / 2 / step) * step;
    if (runOnce(trace, start, config, mid).ok) high = mid;
    else low = mid;
  }
  return high;
}

/**
 * What the recording allocator reserved at its peak and what each configuration reserves at its peak, from one
 * replay each on an unbounded device: the what-if alone, without the search for the smallest device (a dozen more
 * replays per configuration). recordedPeakReservedBytes is undefined where the trace does not say it.
 */
export function replayPeaks(
  trace: Trace,
  configurations: readonly ReplayConfiguration[] = DEFAULT_CONFIGURATIONS,
): { recordedPeakReservedBytes: number | undefined; configurations: Array<{ name: string; description: string; peakReservedBytes: number }> } {
  const start = stateAtStart(trace);
  return {
    recordedPeakReservedBytes: recordedFacts(trace, start).peakReservedBytes,
    configurations: configurations.map((c) => ({
      name: c.name,
      description: c.description,
      peakReservedBytes: runOnce(trace, start, c, Number.MAX_SAFE_INTEGER).peakReserved,
    })),
  };
}

/** Replays `trace` against every configuration. */
export function replay(trace: Trace, configurations: readonly ReplayConfiguration[] = DEFAULT_CONFIGURATIONS): ReplayReport {
  const start = stateAtStart(trace);
  const facts = recordedFacts(trace, start);
  const results = configurations.map((config): ConfigurationResult => {
    const r = runOnce(trace, start, config, Number.MAX_SAFE_INTEGER);
    return {
      name: config.name,
      description: config.description,
      peakRequestedBytes: r.peakRequested,
      peakAllocatedBytes: r.peakAllocated,
      peakReservedBytes: r.peakReserved,
      reservedOverAllocated: r.peakAllocated > 0 ? r.peakReserved / r.peakAllocated : 0,
      segmentAllocs: r.segmentAllocs,
      fragmentationAtPeak: r.fragmentationAtPeak,
      minDeviceBytes: minCapacity(trace, start, config, r.peakAllocated, r.peakReserved + 2 * MiB),
    };
  });
  return {
    trace: {
      file: trace.file,
      format: trace.format,
      device: trace.device,
      devices: trace.devices,
      events: trace.events.length,
      expandableSegments: trace.expandableSegments === true || trace.events.count(EventKind.SegmentMap) > 0,
      ...facts,
    },
    configurations: results,
  };
}
