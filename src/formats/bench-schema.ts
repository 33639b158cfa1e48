/** The JSON shape of `gpumem bench --json` (schema gpumem.bench/1), as a type and as a JSON Schema. */

/** How the bytes behind a bandwidth were counted. GB = 1e9 bytes. */
export type Counted = 'one-way' | 'read+write' | 'both-directions' | 'useful-bytes' | 'read+write+index' | 'algorithm';

/** One measured row. Bandwidth rows carry *GBps; latency rows carry *Us. */
export interface BenchResult {
  /** Test group: copy, sm-copy, peer, managed, zero-copy, stream, cache, access, latency, alloc. */
  test: string;
  /** What was measured within the group: HtoD, DtoH, bidirectional, DtoD, triad, read-only, stride-4, ... */
  direction: string;
  srcKind: string;
  dstKind: string;
  /** copy-engine (memcpyAsync), sm (a kernel), driver (an allocation call), pool, host (the CPU). */
  engine: string;
  device: number;
  /** Bytes per operation (for latency rows: the size allocated, or the working set). */
  bytes: number;
  counted: Counted | 'latency';
  medianGBps?: number;
  minGBps?: number;
  maxGBps?: number;
  medianUs?: number;
  minUs?: number;
  maxUs?: number;
  cv: number;
  repeats: number;
  /** The data arrived intact (checked after the timed repeats). */
  verified: boolean;
  /** Percent of the theoretical peak, for headline rows. */
  percentOfPeak?: number;
  /** Why a headline figure is low, in plain words. */
  note?: string;
  /** Peer rows: peer access on or off. */
  peerAccess?: boolean;
  peer?: number;
  /** Transfer rows: the stager's host threads and chunk size; the number of copies a row's bytes were split into. */
  threads?: number;
  chunkBytes?: number;
  copies?: number;
  /** Collective rows: ranks, and bus bandwidth as nccl-tests defines it (algorithm bandwidth times its factor). */
  ranks?: number;
  medianBusGBps?: number;
}

export interface BenchEnvironment {
  backend: string;
  runtimeVersion?: string;
  driverVersion?: string;
  gpumemVersion: string;
  node: string;
  host: string;
  cpu: string;
  date: string;
  mode: 'quick' | 'full';
  /** How runs were timed: as a native benchmark does (submission included) or gated (device time). */
  timing: 'as-native' | 'gated';
  devices: Array<{
    index: number;
    name?: string;
    arch?: string;
    totalBytes?: number;
    multiprocessors?: number;
    l2Bytes?: number;
    pciBusId?: string;
    link?: { generation?: number; width?: number; maxGeneration?: number; maxWidth?: number };
    numaNode?: number;
    concurrentManagedAccess?: boolean;
    pageableMemoryAccess?: boolean;
    xnack?: { arch?: boolean; env?: string; enabled?: boolean };
    /** Theoretical peaks used for percentOfPeak, and how they were derived. */
    peaks: { linkGBps?: number; memoryGBps?: number; how: string };
  }>;
  hostNumaNodes: number[];
  /** Failures that were reported instead of figures (a verification failure is never a bandwidth). */
  failures: Array<{ test: string; direction: string; bytes: number; reason: string }>;
  seconds: number;
  /** The run was stopped (Ctrl-C) before every test ran: the rows are those finished before it. */
  interrupted?: boolean;
}

export interface BenchReport {
  schema: 'gpumem.bench/1';
  environment: BenchEnvironment;
  results: BenchResult[];
}

/** JSON Schema of BenchReport, for validating bench JSON read from disk (`plan --from-bench`) and in tests. */
export const BENCH_JSON_SCHEMA = {
  $id: 'https://gpumem.dev/schemas/bench-1.json',
  type: 'object',
  required: ['schema', 'environment', 'results'],
  properties: {
    schema: { const: 'gpumem.bench/1' },
    environment: {
      type: 'object',
      required: ['backend', 'gpumemVersion', 'date', 'mode', 'devices', 'failures'],
      properties: {
        backend: { type: 'string' },
        mode: { enum: ['quick', 'full'] },
        devices: {
          type: 'array',
          items: {
            type: 'object',
            required: ['index', 'peaks'],
            properties: {
              index: { type: 'integer', minimum: 0 },
              totalBytes: { type: 'number', minimum: 0 },
              peaks: {
                type: 'object',
                required: ['how'],
                properties: { linkGBps: { type: 'number' }, memoryGBps: { type: 'number' }, how: { type: 'string' } },
              },
            },
          },
        },
        failures: { type: 'array', items: { type: 'object', required: ['test', 'reason'] } },
        interrupted: { type: 'boolean' },
      },
    },
    results: {
      type: 'array',
      items: {
        type: 'object',
        required: ['test', 'direction', 'srcKind', 'dstKind', 'engine', 'bytes', 'counted', 'cv', 'verified', 'repeats', 'device'],
        properties: {
          test: { type: 'string' },
          direction: { type: 'string' },
          srcKind: { type: 'string' },
          dstKind: { type: 'string' },
          engine: { type: 'string' },
          device: { type: 'integer', minimum: 0 },
          bytes: { type: 'number', exclusiveMinimum: 0 },
          counted: { enum: ['one-way', 'read+write', 'both-directions', 'useful-bytes', 'read+write+index', 'algorithm', 'latency'] },
          ranks: { type: 'integer', minimum: 1 },
          medianBusGBps: { type: 'number', minimum: 0 },
          medianGBps: { type: 'number', minimum: 0 },
          minGBps: { type: 'number', minimum: 0 },
          maxGBps: { type: 'number', minimum: 0 },
          medianUs: { type: 'number', minimum: 0 },
          minUs: { type: 'number', minimum: 0 },
          maxUs: { type: 'number', minimum: 0 },
          cv: { type: 'number', minimum: 0 },
          repeats: { type: 'integer', minimum: 1 },
          verified: { type: 'boolean' },
          percentOfPeak: { type: 'number', minimum: 0 },
          note: { type: 'string' },
        },
        oneOf: [{ required: ['medianGBps', 'minGBps', 'maxGBps'] }, { required: ['medianUs', 'minUs', 'maxUs'] }],
      },
    },
  },
} as const;
