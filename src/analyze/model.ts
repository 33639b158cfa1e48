/**
 * The vendor-neutral event model every importer fills: copies, memsets, kernels, runtime calls, synchronisations,
 * allocations, page faults, and aggregate rows where a tool only kept statistics. Events live in typed-array
 * columns, so a trace of millions of events stays small in memory. Times are nanoseconds.
 */

import { BadInputError } from '../errors.js';

/**
 * The most bytes the event columns of one model may take, all tables together: a trace of valid events can hold
 * more than any machine's memory (a few MB of gzip inflate to gigabytes), and a model is refused, not held, past it.
 * 256 MiB is 8 million kernels or 3 million copies; a 1 GiB Kineto trace of a training step needs about a tenth.
 */
export const MAX_EVENT_BYTES = 256 * 2 ** 20;

/** What the tables of one model may still grow by, in bytes. */
export class EventBudget {
  constructor(public left = MAX_EVENT_BYTES) {}

  /** @throws BadInputError when `bytes` more would pass the budget. */
  take(bytes: number, rows: number): void {
    if (bytes > this.left)
      throw new BadInputError(
        `the trace holds more events than gpumem keeps in memory (over ${rows.toLocaleString('en-US')} of one kind, ${MAX_EVENT_BYTES / 2 ** 20} MiB of event columns in all): profile fewer steps, or one rank per file`,
      );
    this.left -= bytes;
  }
}

/** A growable table of numeric columns. */
export class Table<K extends string> {
  private cols: Record<K, Float64Array>;
  length = 0;

  constructor(
    private readonly names: readonly K[],
    private readonly budget = new EventBudget(),
  ) {
    this.cols = Object.fromEntries(names.map((n) => [n, new Float64Array(256)])) as Record<K, Float64Array>;
  }

  push(row: Record<K, number>): void {
    if (this.length === this.cols[this.names[0]!].length) {
      this.budget.take(this.length * this.names.length * 8, this.length);
      for (const n of this.names) {
        const a = new Float64Array(this.length * 2);
        a.set(this.cols[n]);
        this.cols[n] = a;
      }
    }
    for (const n of this.names) this.cols[n][this.length] = row[n];
    this.length++;
  }

  col(name: K): Float64Array {
    return this.cols[name].subarray(0, this.length);
  }

  get(i: number, name: K): number {
    return this.cols[name][i]!;
  }

  set(i: number, name: K, v: number): void {
    this.cols[name][i] = v;
  }
}

export const Direction = { HtoD: 0, DtoH: 1, DtoD: 2, PtoP: 3, HtoH: 4, unknown: 5 } as const;
export const DIRECTIONS = ['HtoD', 'DtoH', 'DtoD', 'PtoP', 'HtoH', 'unknown'] as const;
export type DirectionName = (typeof DIRECTIONS)[number];

export const MemKind = { unknown: 0, pageable: 1, pinned: 2, device: 3, managed: 4, array: 5 } as const;
export const MEM_KINDS = ['unknown', 'pageable', 'pinned', 'device', 'managed', 'array'] as const;
export type MemKindName = (typeof MEM_KINDS)[number];

/**
 * The memory kinds of a copy's two sides as far as its direction says them: the device side is device memory, the
 * host side unknown (pageable or pinned is for the trace's own fields, or the inference that follows, to say).
 */
export function kindsByDirection(dir: number): { src: number; dst: number } {
  return {
    src: dir === Direction.HtoD || dir === Direction.HtoH ? MemKind.unknown : MemKind.device,
    dst: dir === Direction.DtoH || dir === Direction.HtoH ? MemKind.unknown : MemKind.device,
  };
}

export const AllocLevel = { framework: 0, driver: 1 } as const;

/** What a synchronisation record waited for (Kineto cuda_sync, nsys CUPTI_ACTIVITY_KIND_SYNCHRONIZATION). */
export const SyncKind = { unknown: 0, stream: 1, device: 2, event: 3, streamWait: 4 } as const;

/**
 * Why the driver moved managed pages (CUPTI's CUpti_ActivityUnifiedMemoryMigrationCause, which nsys exports as
 * migrationCause and labels in ENUM_CUDA_UNIF_MEM_MIGRATION): a prefetch the program asked for, a page fault, the
 * driver's speculative prefetch around a fault, eviction under oversubscription, or access counters.
 */
export const MigrationCause = { unknown: 0, userPrefetch: 1, pageFault: 2, speculativePrefetch: 3, eviction: 4, accessCounters: 5 } as const;
export const MIGRATION_CAUSES = ['unknown', 'user prefetch', 'page fault', 'speculative prefetch', 'eviction', 'access counters'] as const;
export type MigrationCauseName = (typeof MIGRATION_CAUSES)[number];

/** Kinds of activity a profiler records, each turned on or off when the trace is taken. */
export const ACTIVITIES = ['kernels', 'copies', 'runtime', 'allocations', 'faults'] as const;
export type Activity = (typeof ACTIVITIES)[number];

/** Runtime API calls that rules look at. */
export const Api = {
  other: 0,
  memcpySync: 1,
  memcpyAsync: 2,
  streamSync: 3,
  deviceSync: 4,
  eventSync: 5,
  malloc: 6,
  free: 7,
  hostAlloc: 8,
  hostFree: 9,
  mallocManaged: 10,
  launch: 11,
  memset: 12,
  mallocAsync: 13,
  freeAsync: 14,
  hostRegister: 15,
  /** Virtual memory management: mapping and unmapping physical memory into a reserved range (expandable segments). */
  vmmMap: 16,
  vmmUnmap: 17,
  /** cudaMemPrefetchAsync / hipMemPrefetchAsync: the program moving managed pages ahead of use. */
  memPrefetch: 18,
} as const;
export const API_NAMES = Object.keys(Api) as Array<keyof typeof Api>;

/** Classifies a CUDA / HIP runtime or driver function name. */
export function classifyApi(name: string): number {
  const n = name.replace(/^(cuda|hip|cu|hsa_amd_|hsa_)/, '').replace(/_v\d+$|_ptsz$|_ptds$/, '');
  if (/^Memcpy(Peer|2D|3D|ToSymbol|FromSymbol|HtoD|DtoH|DtoD)?$/i.test(n) && !/Async/.test(name)) return Api.memcpySync;
  // hipMemcpyWithStream returns when the copy is done: PyTorch's synchronous copy on ROCm (non_blocking=False)
  if (/^MemcpyWithStream$/.test(n)) return Api.memcpySync;
  if (/^Memcpy.*Async$/i.test(n)) return Api.memcpyAsync;
  if (/^StreamSynchronize$/i.test(n)) return Api.streamSync;
  if (/^(Device|Ctx|Thread)Synchronize$/i.test(n)) return Api.deviceSync;
  if (/^EventSynchronize$/i.test(n)) return Api.eventSync;
  // cuMemCreate / cuMemRelease take and give back physical memory as malloc and free do (virtual memory management)
  if (/^(Malloc|MemAlloc|ExtMallocWithFlags|MallocPitch|MemCreate)$/i.test(n)) return Api.malloc;
  if (/^(Free|MemFree|MemRelease)$/i.test(n)) return Api.free;
  if (/^MemMap$/i.test(n)) return Api.vmmMap;
  if (/^MemUnmap$/i.test(n)) return Api.vmmUnmap;
  if (/^(HostAlloc|MallocHost|HostMalloc|ExtHostAlloc|MemAllocHost|MemHostAlloc)$/i.test(n)) return Api.hostAlloc;
  if (/^(FreeHost|HostFree|MemFreeHost)$/i.test(n)) return Api.hostFree;
  if (/^(MallocManaged|MemAllocManaged)$/i.test(n)) return Api.mallocManaged;
  if (/^(MallocAsync|MallocFromPoolAsync|MemAllocAsync)$/i.test(n)) return Api.mallocAsync;
  if (/^(FreeAsync|MemFreeAsync)$/i.test(n)) return Api.freeAsync;
  if (/^(HostRegister|MemHostRegister)$/i.test(n)) return Api.hostRegister;
  if (/^MemPrefetch(Async|BatchAsync)$/i.test(n)) return Api.memPrefetch;
  if (/^(Launch$|LaunchKernel|LaunchKernelExC|LaunchKernelEx|ModuleLaunchKernel|ExtLaunchKernel|LaunchCooperativeKernel|GraphLaunch)/i.test(n))
    return Api.launch;
  // case matters: cudaMemSetAccess and cudaMemSetMemPool set attributes, they fill nothing
  if (/^Memset/.test(n)) return Api.memset;
  return Api.other;
}

export interface AggregateCopy {
  direction: DirectionName;
  calls: number;
  totalNs: number;
  bytes: number | undefined;
}

export interface AggregateApi {
  name: string;
  calls: number;
  totalNs: number;
}

/** A caching allocator's segment as a snapshot shows it. */
export interface SnapshotSegment {
  totalBytes: number;
  allocatedBytes: number;
  activeBytes: number;
  requestedBytes: number;
  /** Free blocks inside a segment that also holds allocated blocks. */
  inactiveSplitBytes: number;
  inactiveSplitBlocks: number;
  largestFreeBlock: number;
  stream: number;
  device: number;
  /** An expandable segment's mapped range (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True). */
  expandable: boolean;
}

/**
 * What pool replay (src/replay/) found one GPU of a snapshot would have reserved under other pool configurations.
 * The analyzer does not replay: the caller that ran the replay (the analyze command) fills it in.
 */
export interface PoolWhatIf {
  device: number;
  /** What the recording allocator reserved at its peak (its segment events, from what was reserved at the start). */
  recordedPeakReservedBytes: number;
  configurations: Array<{ name: string; description: string; peakReservedBytes: number }>;
}

export class TraceModel {
  /** Shared by the tables below: what their columns may still grow by. */
  private readonly budget = new EventBudget();
  /** bytes is NaN where the trace does not record it; op indexes opNames (-1: not known). */
  readonly copies = new Table(['start', 'end', 'bytes', 'dir', 'src', 'dst', 'stream', 'device', 'correlation', 'hostAddr', 'op'] as const, this.budget);
  readonly memsets = new Table(['start', 'end', 'bytes', 'stream', 'device'] as const, this.budget);
  readonly kernels = new Table(['start', 'end', 'stream', 'device'] as const, this.budget);
  readonly runtime = new Table(['start', 'end', 'api', 'thread', 'correlation'] as const, this.budget);
  /** Synchronisation records of the device timeline; correlation links them to runtime calls (NaN: none). */
  readonly syncs = new Table(['start', 'end', 'stream', 'kind', 'correlation'] as const, this.budget);
  /**
   * Allocator events: bytes is negative for a free; host is 1 for host (pinned) memory, 0 for device memory, NaN when
   * the trace names an agent whose type is resolved later (agent indexes agentNames, -1 none). level is
   * AllocLevel.framework for a caching allocator's tensor events, AllocLevel.driver for memory from the driver.
   */
  readonly allocs = new Table(['time', 'bytes', 'device', 'address', 'allocated', 'reserved', 'host', 'agent', 'level'] as const, this.budget);
  readonly faults = new Table(['time', 'duration', 'bytes', 'kind', 'address'] as const, this.budget);
  /**
   * Unified-memory page migrations: the driver moving managed pages between host and device (nsys exports them
   * among the copies, with copy kinds 11-13). They are not the program's copies, and no copy rule reads them.
   * cause is a MigrationCause.
   */
  readonly migrations = new Table(['start', 'end', 'bytes', 'dir', 'cause', 'device'] as const, this.budget);
  /** Agent names as traces write them ("Agent 0", "CPU 0", "2") and their types where known. */
  readonly agentNames: string[] = [];
  readonly agentTypes = new Map<string, 'CPU' | 'GPU'>();
  readonly aggregateCopies: AggregateCopy[] = [];
  readonly aggregateApis: AggregateApi[] = [];
  /** Kernels by name where a tool kept only totals (rocprof --stats, rocprofv3 kernel_stats). */
  readonly aggregateKernels: AggregateApi[] = [];
  /** Fills (memsets) by name where a tool kept only totals (legacy rocprof's copy_stats lists FillBuffer). */
  readonly aggregateMemsets: AggregateApi[] = [];
  readonly segments: SnapshotSegment[] = [];
  /** Pool replay's what-ifs of a snapshot's GPUs, where the caller ran them. */
  readonly whatIfs: PoolWhatIf[] = [];
  /** Out-of-memory events seen in allocator traces. */
  ooms = 0;
  /** The allocator settings a memory snapshot recorded, and whether they had expandable segments on. */
  allocatorSettings: Record<string, unknown> | undefined;
  expandableSegments: boolean | undefined;
  /** The allocation rows' times are only their order (a snapshot without time_us): span() leaves them out. */
  allocsOrderOnly = false;
  readonly kernelNames = new Map<string, { count: number; ns: number }>();
  readonly devices = new Map<number, string>();
  /** Each device's memory in bytes as the runtime reported it, where the trace records it. */
  readonly deviceMemory = new Map<number, number>();
  readonly formats = new Set<string>();
  /** The rank of the process in a distributed job, where the trace says (Kineto's distributedInfo). */
  rank: number | undefined;
  /**
   * Activities the trace's format shows were recorded even where none happened (nsys writes a table per traced
   * activity; CUPTI and roctracer record copies with kernels). Activities with events are recorded by definition.
   */
  private readonly tracedActivities = new Set<Activity>();

  /** Marks an activity as recorded by the profiler, whether or not any event of it happened. */
  traced(...activities: Activity[]): void {
    for (const a of activities) this.tracedActivities.add(a);
  }

  /** Whether the trace recorded an activity: it holds such events, or its format says the activity was traced. */
  recorded(activity: Activity): boolean {
    if (this.tracedActivities.has(activity)) return true;
    switch (activity) {
      case 'kernels':
        return this.kernels.length > 0 || this.kernelNames.size > 0 || this.aggregateKernels.length > 0;
      case 'copies':
        return this.copies.length > 0 || this.aggregateCopies.length > 0 || this.aggregateMemsets.length > 0;
      case 'runtime':
        return this.runtime.length > 0 || this.syncs.length > 0 || this.aggregateApis.length > 0;
      case 'allocations':
        return this.allocs.length > 0 || this.segments.length > 0 || this.ooms > 0;
      case 'faults':
        return this.faults.length > 0;
    }
  }

  /** True when the trace holds only a tool's totals per name: no event has a time, a size or a host memory kind. */
  aggregatesOnly(): boolean {
    const events = this.copies.length + this.kernels.length + this.memsets.length + this.runtime.length + this.syncs.length + this.allocs.length;
    return events === 0 && this.aggregateCopies.length + this.aggregateApis.length + this.aggregateKernels.length + this.aggregateMemsets.length > 0;
  }

  /** Whose GPU the trace comes from, by its formats and device names; undefined when it does not say. */
  vendor(): 'amd' | 'nvidia' | undefined {
    if ([...this.formats].some((f) => f.startsWith('rocprof'))) return 'amd';
    if (['nsys-sqlite', 'nvvp', 'nvprof-csv'].some((f) => this.formats.has(f))) return 'nvidia';
    const names = [...this.devices.values()].join(' ');
    if (/\b(AMD|Instinct|Radeon|gfx\d)/i.test(names)) return 'amd';
    if (/\b(NVIDIA|Tesla|GeForce|Quadro|A100|H100|H200|B200|V100|A10G|L40)/i.test(names)) return 'nvidia';
    return undefined;
  }
  readonly files: string[] = [];
  readonly notes: string[] = [];
  /** Set when a copy's pinned/pageable kind is unknown and could not be inferred. */
  hostKindUnknown = 0;
  /** Counts of CPU-side framework ops that matter for memory (aten::item, aten::to, pin_memory...). */
  readonly cpuOps = new Map<string, number>();
  /** Names of the framework ops that launched copies (copies.op indexes it). */
  readonly opNames: string[] = [];
  private base: bigint | undefined;

  /** The index of an agent name in agentNames, added when new. */
  agentIndex(name: string): number {
    const key = name.trim();
    let i = this.agentNames.indexOf(key);
    if (i < 0) i = this.agentNames.push(key) - 1;
    return i;
  }

  /** Records an agent's type under all the spellings traces use for it. */
  setAgentType(id: string, type: 'CPU' | 'GPU'): void {
    const n = /(\d+)\s*$/.exec(id.trim())?.[1];
    this.agentTypes.set(id.trim(), type);
    if (n !== undefined) for (const k of [n, `Agent ${n}`, `${type} ${n}`]) this.agentTypes.set(k, type);
  }

  /** The type of an agent by any of its spellings, if known. */
  agentType(id: string): 'CPU' | 'GPU' | undefined {
    const t = id.trim();
    const word = /^(CPU|GPU)\b/i.exec(t)?.[1]?.toUpperCase();
    if (word === 'CPU' || word === 'GPU') return word;
    return this.agentTypes.get(t);
  }

  /** The index of an op name in opNames, added when new. */
  opIndex(name: string): number {
    let i = this.opNames.indexOf(name);
    if (i < 0 && this.opNames.length < 1000) i = this.opNames.push(name) - 1;
    return i;
  }

  /**
   * Nanoseconds since the first timestamp this model saw, from a timestamp in nanoseconds as the trace wrote it
   * (a decimal string or a bigint keeps full precision for clocks beyond 2^53 ns).
   */
  time(ns: bigint | number | string): number {
    let v: bigint;
    if (typeof ns === 'bigint') v = ns;
    else if (typeof ns === 'number') v = BigInt(Math.round(ns));
    else v = /^\d{1,30}$/.test(ns) ? BigInt(ns) : BigInt(Math.round(Number(ns)));
    if (this.base === undefined) this.base = v;
    return Number(v - this.base);
  }

  note(text: string): void {
    if (!this.notes.includes(text)) this.notes.push(text);
  }

  addKernelName(name: string, ns: number): void {
    const key = name.length > 200 ? `${name.slice(0, 200)}…` : name;
    const k = this.kernelNames.get(key);
    if (k) {
      k.count++;
      k.ns += ns;
    } else if (this.kernelNames.size < 5000) this.kernelNames.set(key, { count: 1, ns });
  }

  /** The time span of all recorded activity, or [0, 0]. */
  span(): [number, number] {
    let lo = Infinity;
    let hi = -Infinity;
    for (const t of [this.copies, this.kernels, this.memsets, this.migrations] as const) {
      const s = t.col('start');
      const e = t.col('end');
      for (let i = 0; i < s.length; i++) {
        if (s[i]! < lo) lo = s[i]!;
        if (e[i]! > hi) hi = e[i]!;
      }
    }
    // synchronisation records can end after every call and kernel (a context sync at the end of a run)
    for (const t of [this.runtime, this.syncs] as const) {
      const rs = t.col('start');
      const re = t.col('end');
      for (let i = 0; i < rs.length; i++) {
        if (rs[i]! < lo) lo = rs[i]!;
        if (re[i]! > hi) hi = re[i]!;
      }
    }
    for (const t of this.allocsOrderOnly ? [this.faults.col('time')] : [this.allocs.col('time'), this.faults.col('time')]) {
      for (const v of t) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    return lo === Infinity ? [0, 0] : [lo, hi];
  }
}
