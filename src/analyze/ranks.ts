/**
 * Traces of a distributed job, one per rank (what HolisticTraceAnalysis reads: a folder of 8 to thousands of rank
 * traces). Each rank is analysed on its own, on every core (worker threads; a worker sends back its rank's result
 * as one JSON string and its figures as a Float64Array, never an object graph), then the ranks are compared: a rank
 * whose copies, synchronisations or GPU idle time stand out from the others' holds the job back at every collective.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { BadInputError, ErrorCode, GpuError } from '../errors.js';
import { formatNs } from '../units.js';
import type { TraceFormat } from './analyze.js';
import type { JsonReader } from './importers/kineto.js';
import type { AnalyzeResult, Finding } from './result.js';

/** Formats in which one file is one process's whole run, so several files are several ranks. */
export const RANK_FORMATS: readonly TraceFormat[] = ['kineto', 'nsys-sqlite'];

/** The figures of one rank the ranks are compared on, in this order in a worker's Float64Array. */
export const RANK_METRICS = ['spanNs', 'kernelBusyNs', 'gpuIdleNs', 'copyNs', 'copyBytes', 'syncBlockedNs', 'syncs', 'savingNs'] as const;
export type RankMetric = (typeof RANK_METRICS)[number];

/** The metrics a straggler is found on, and how to say them. */
const COMPARED: ReadonlyArray<{ metric: RankMetric; what: string }> = [
  { metric: 'copyNs', what: 'time copying' },
  { metric: 'syncBlockedNs', what: 'host time blocked in synchronisation' },
  { metric: 'gpuIdleNs', what: 'GPU idle time (span minus kernel time)' },
  { metric: 'kernelBusyNs', what: 'kernel time' },
];

/** A rank's figures from its analysis. */
export function rankMetrics(r: AnalyzeResult): Float64Array {
  const s = r.summary;
  const values: Record<RankMetric, number> = {
    spanNs: s.spanNs,
    kernelBusyNs: s.kernels.busyNs,
    gpuIdleNs: s.kernels.count > 0 ? Math.max(0, s.spanNs - s.kernels.busyNs) : 0,
    copyNs: s.copies.timeNs,
    copyBytes: s.copies.bytes ?? 0,
    syncBlockedNs: s.syncs.hostBlockedNs,
    syncs: s.syncs.streamSync + s.syncs.deviceSync + s.syncs.eventSync + s.syncs.memcpySync,
    savingNs: r.findings.reduce((m, f) => Math.max(m, f.estimatedSavingNs), 0),
  };
  return Float64Array.from(RANK_METRICS, (k) => values[k]);
}

export interface RankResult {
  rank: number;
  file: string;
  /** Named figures (RANK_METRICS). */
  metrics: Record<RankMetric, number>;
  findings: Finding[];
  /** The rank's whole analysis. */
  result: AnalyzeResult;
}

export interface Straggler {
  rank: number;
  metric: RankMetric;
  valueNs: number;
  medianNs: number;
  /** value − median: what the job gains at most if this rank did as the median rank does. */
  excessNs: number;
  evidence: string;
}

export interface RanksResult {
  schema: 'gpumem.analyze-ranks/1';
  format: TraceFormat;
  workers: number;
  wallNs: number;
  ranks: RankResult[];
  /** Files that could not be read, and why: the other ranks are still analysed. */
  refused: Array<{ file: string; reason: string }>;
  /** Each rule that fired on any rank: on which ranks, and its savings across them. */
  rules: Array<{ rule: string; title: string; ranks: number[]; medianSavingNs: number; maxSavingNs: number }>;
  stragglers: Straggler[];
  /** How stragglers were found. */
  method: string;
  notes: string[];
}

/** The rank a file belongs to: the trace's own distributedInfo, else a number in its name (rank-3, rank_3, worker3), else its position. */
function rankOf(r: AnalyzeResult, file: string, position: number): number {
  if (r.summary.rank !== null) return r.summary.rank;
  const name = file.split('/').pop() ?? file;
  const m = /(?:rank|worker|proc|process)[-_.]?(\d+)/i.exec(name) ?? /(\d+)(?!.*\d)/.exec(name.replace(/\.(json|gz|sqlite)$/gi, ''));
  return m ? Number(m[1]) : position;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Ranks whose figure lies far above the others': past the median by 3 scaled MADs, 10% of the median and 1 ms. */
export function findStragglers(ranks: readonly RankResult[]): { stragglers: Straggler[]; method: string } {
  const method =
    'a rank stands out when its figure exceeds the median of all ranks by more than 3 scaled median absolute deviations (1.4826 x MAD), by more than 10% of the median, and by more than 1 ms; needs at least 3 ranks';
  const stragglers: Straggler[] = [];
  if (ranks.length < 3) return { stragglers, method };
  for (const { metric, what } of COMPARED) {
    const values = ranks.map((r) => r.metrics[metric]);
    const med = median(values);
    const mad = 1.4826 * median(values.map((v) => Math.abs(v - med)));
    for (const r of ranks) {
      const v = r.metrics[metric];
      const excess = v - med;
      if (excess > 3 * mad && excess > 0.1 * med && excess > 1e6)
        stragglers.push({
          rank: r.rank,
          metric,
          valueNs: v,
          medianNs: med,
          excessNs: excess,
          evidence: `rank ${r.rank}: ${what} ${formatNs(v)} against a median of ${formatNs(med)} over ${ranks.length} ranks (${med > 0 ? `${(v / med).toFixed(1)}x` : 'the others: none'})`,
        });
    }
  }
  stragglers.sort((a, b) => b.excessNs - a.excessNs);
  return { stragglers, method };
}

/** Which rules fired on which ranks, with their savings. */
function rulesAcross(ranks: readonly RankResult[]): RanksResult['rules'] {
  const by = new Map<string, { title: string; ranks: number[]; savings: number[] }>();
  for (const r of ranks)
    for (const f of r.findings) {
      let e = by.get(f.rule);
      if (!e) by.set(f.rule, (e = { title: f.title, ranks: [], savings: [] }));
      e.ranks.push(r.rank);
      e.savings.push(f.estimatedSavingNs);
    }
  return [...by]
    .map(([rule, e]) => ({
      rule,
      title: e.title,
      ranks: e.ranks.sort((a, b) => a - b),
      medianSavingNs: median(e.savings),
      maxSavingNs: Math.max(...e.savings),
    }))
    .sort((a, b) => b.ranks.length - a.ranks.length || b.medianSavingNs - a.medianSavingNs);
}

export interface RanksOptions {
  format: TraceFormat;
  fromBench?: string | undefined;
  jsonReader?: JsonReader | undefined;
  /** Worker threads (default: the cores this process may use, at most one per file). */
  workers?: number | undefined;
  /** Called as each rank finishes. */
  progress?: ((done: number, total: number) => void) | undefined;
}

interface Reply {
  id: number;
  json?: string;
  metrics?: Float64Array;
  error?: { message: string; bad: boolean };
}

/**
 * Analyses one trace per rank on worker threads and compares the ranks.
 * @throws BadInputError when no rank could be read.
 */
export async function analyzeRanks(files: readonly string[], options: RanksOptions): Promise<RanksResult> {
  const t0 = process.hrtime.bigint();
  const n = Math.max(1, Math.min(options.workers ?? availableParallelism(), files.length));
  const workerUrl = new URL('./rank-worker.js', import.meta.url);
  const workers = Array.from({ length: n }, () => new Worker(workerUrl));
  const replies: Reply[] = new Array(files.length);
  let next = 0;
  let done = 0;
  try {
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            const give = (): void => {
              if (next >= files.length) return resolve();
              const id = next++;
              w.postMessage({ id, file: files[id], format: options.format, fromBench: options.fromBench, jsonReader: options.jsonReader });
            };
            w.on('message', (m: Reply) => {
              replies[m.id] = m;
              options.progress?.(++done, files.length);
              give();
            });
            w.on('error', reject);
            w.on('exit', (code) =>
              next < files.length || done < files.length ? reject(new GpuError(ErrorCode.WORKER_FAILED, `an analysis worker exited (${code})`)) : resolve(),
            );
            give();
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  const ranks: RankResult[] = [];
  const refused: RanksResult['refused'] = [];
  replies.forEach((m, i) => {
    const file = files[i]!;
    if (m.error) {
      if (!m.error.bad) throw new GpuError(ErrorCode.WORKER_FAILED, `${file}: ${m.error.message}`);
      refused.push({ file, reason: m.error.message });
      return;
    }
    const result = JSON.parse(m.json!) as AnalyzeResult;
    const metrics = Object.fromEntries(RANK_METRICS.map((k, j) => [k, m.metrics![j]!])) as Record<RankMetric, number>;
    ranks.push({ rank: rankOf(result, file, i), file, metrics, findings: result.findings, result });
  });
  if (ranks.length === 0) throw new BadInputError(`none of the ${files.length} rank traces could be read (${refused[0]?.reason ?? ''})`);
  ranks.sort((a, b) => a.rank - b.rank);
  const notes: string[] = [];
  const seen = new Set<number>();
  for (const r of ranks) {
    if (seen.has(r.rank))
      notes.push(
        `two files claim rank ${r.rank}: ${ranks
          .filter((x) => x.rank === r.rank)
          .map((x) => x.file)
          .join(', ')}`,
      );
    seen.add(r.rank);
  }
  if (ranks.length < 3) notes.push(`${ranks.length} ranks: too few to tell a straggler from the others (3 or more are needed); the table compares them`);
  const { stragglers, method } = findStragglers(ranks);
  return {
    schema: 'gpumem.analyze-ranks/1',
    format: options.format,
    workers: n,
    wallNs: Number(process.hrtime.bigint() - t0),
    ranks,
    refused,
    rules: rulesAcross(ranks),
    stragglers,
    method,
    notes,
  };
}
