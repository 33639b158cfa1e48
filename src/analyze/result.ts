/** The shape of an analysis: a summary of the trace's memory activity and findings, as `gpumem analyze --json` prints it. */
import type { AggregateApi, AggregateCopy, DirectionName, MemKindName, MigrationCauseName } from './model.js';
import type { CopyRates } from './bandwidth.js';

export type Severity = 'high' | 'medium' | 'low' | 'info';

export interface Finding {
  /** Stable rule id: pageable-copy, sync-copy, d2h-to-pageable, small-copies, exposed-copy, sync-storm, alloc-churn, ... */
  rule: string;
  severity: Severity;
  title: string;
  /** Events the finding is about. */
  count: number;
  /** Bytes they moved or hold (null when the trace does not record sizes). */
  bytes: number | null;
  /** Time they took, as the trace measured it, in nanoseconds. */
  timeNs: number;
  /** Time the change would save, computed from the trace and the stated copy rates, in nanoseconds. */
  estimatedSavingNs: number;
  /** How the saving was computed. */
  savingHow: string;
  /**
   * Rules whose findings' savings rest on some of the same time (a pageable copy and the synchronisation that
   * waits for it): their savings are not additive.
   */
  overlapsWith: string[];
  /** Figures from the trace that show the problem. */
  evidence: string[];
  /** What to change. */
  change: string;
}

export interface CopyGroup {
  direction: DirectionName;
  /** The host side's kind for HtoD / DtoH; 'device' for device-side copies. */
  hostKind: MemKindName;
  count: number;
  /** Bytes moved, where the trace records them (null when it never does). */
  bytes: number | null;
  timeNs: number;
  /** Bytes over time of the copies with known sizes, GB/s (1e9). */
  achievedGBps: number | null;
}

export interface DeviceFigures {
  device: number;
  name: string | null;
  spanNs: number;
  kernels: { count: number; timeNs: number; busyNs: number };
  /** GPU busy time over this device's own span (first to last kernel or copy on it). */
  busyFraction: number | null;
  copies: { count: number; bytes: number | null; timeNs: number };
  memsets: number;
}

export interface Summary {
  files: string[];
  /** The process's rank in a distributed job, where the trace says (Kineto distributedInfo); null otherwise. */
  rank: number | null;
  formats: string[];
  devices: Array<{ id: number; name: string }>;
  /** From the first to the last recorded activity. */
  spanNs: number;
  copies: { count: number; bytes: number | null; timeNs: number; groups: CopyGroup[]; overlappedWithKernelsNs: number; overlapFraction: number | null };
  kernels: { count: number; timeNs: number; busyNs: number; top: Array<{ name: string; count: number; timeNs: number }> };
  memsets: { count: number; bytes: number | null; timeNs: number };
  /**
   * Each GPU's own figures where the trace holds several (the totals above add them up): its span, kernels, GPU busy
   * time and share of its span, copies and memsets. Empty for a trace of one GPU.
   */
  perDevice: DeviceFigures[];
  syncs: { streamSync: number; deviceSync: number; eventSync: number; memcpySync: number; hostBlockedNs: number; deviceRecords: number };
  allocations: {
    mallocCalls: number;
    freeCalls: number;
    hostAllocCalls: number;
    hostFreeCalls: number;
    managedAllocCalls: number;
    /** Driver-level virtual memory: physical memory mapped into and unmapped from reserved ranges (cuMemMap / cuMemUnmap). */
    vmmMapCalls: number;
    vmmUnmapCalls: number;
    driverAllocEvents: number;
    frameworkAllocEvents: number;
    peakAllocatedBytes: number | null;
    peakReservedBytes: number | null;
    ooms: number;
    segments: { count: number; reservedBytes: number; allocatedBytes: number; inactiveSplitBytes: number } | null;
  };
  /** Unified-memory page faults on the GPU and the CPU; null where the trace did not record them (not zero). */
  faults: { gpu: number | null; cpu: number | null };
  /**
   * Unified-memory page migrations (the driver moving managed pages; not the program's copies) by cause and
   * direction: user prefetch, page fault, speculative prefetch, eviction, access counters, unknown.
   */
  migrations: Array<{ cause: MigrationCauseName; direction: DirectionName; count: number; bytes: number; timeNs: number }>;
  cpuOps: Record<string, number>;
  /** A tool's totals per name (rocprof --stats), where the trace kept those; the figures above include them. */
  aggregates: { copies: AggregateCopy[]; apis: AggregateApi[]; kernels: AggregateApi[]; memsets: AggregateApi[] } | null;
  rates: CopyRates;
  notes: string[];
  /** Rules that could not judge this trace, and why. */
  notApplicable: Array<{ rule: string; reason: string }>;
}

export interface AnalyzeResult {
  schema: 'gpumem.analyze/1';
  summary: Summary;
  /** Sorted by estimated saving, largest first; findings about memory held (fragmentation) after those about time. */
  findings: Finding[];
}
