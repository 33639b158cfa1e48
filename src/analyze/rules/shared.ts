/** What the rules share: their thresholds, the rule type, and helpers to word evidence. */
import { formatBytes, formatNs, KiB } from '../../units.js';
import type { AnalysisContext } from '../context.js';
import type { AggregateApi } from '../model.js';
import type { Finding, Severity } from '../result.js';

/**
 * The events a finding's saving rests on, as time intervals (ns): the saving can be no larger than the time they
 * cover, and two findings whose intervals meet claim the same time (analyze/savings.ts).
 */
export interface Basis {
  start: number[];
  end: number[];
}

/** The intervals of rows `idx` of a table with start and end columns. */
export function basisOf(table: { get(i: number, c: 'start' | 'end'): number }, idx: readonly number[]): Basis {
  return { start: idx.map((i) => table.get(i, 'start')), end: idx.map((i) => table.get(i, 'end')) };
}

/** Both bases in one. */
export function joinBasis(a: Basis, b: Basis): Basis {
  return { start: [...a.start, ...b.start], end: [...a.end, ...b.end] };
}

/**
 * A finding as a rule returns it: the rule's id and the findings it overlaps are stamped on it by the registry
 * (rules/index.ts, savings.ts); `basis` is the events its saving rests on, where it rests on events.
 */
export type RuleFinding = Omit<Finding, 'rule' | 'overlapsWith'> & { basis?: Basis };
export type RuleOutcome = RuleFinding | { notApplicable: string } | undefined;
/** One rule's check of a trace. */
export type RuleCheck = (ctx: AnalysisContext) => RuleOutcome;

/** Small copies: under this many bytes. */
export const SMALL_COPY_BYTES = 64 * KiB;
/** Small copies: at least this many make a finding. */
export const SMALL_COPY_COUNT = 64;
/** A size seen at least this many times is recurring (per step), not a one-time upload. */
export const RECURRING = 3;
/** Blocking synchronisations: at least this many make a storm. */
export const SYNC_STORM_COUNT = 20;

export function severityOf(savingNs: number, spanNs: number): Severity {
  const share = spanNs > 0 ? savingNs / spanNs : 0;
  return share >= 0.1 ? 'high' : share >= 0.02 ? 'medium' : 'low';
}

export const pct = (part: number, whole: number): string => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');
export const gbps = (bytes: number, ns: number): string => (ns > 0 ? `${(bytes / ns).toFixed(2)} GB/s` : 'n/a');

/** "4 B × 1200, 4.0 MiB × 6" for the most frequent sizes. */
export function sizeList(sizes: Map<number, number>, n = 4): string {
  const top = [...sizes.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0]);
  const head = top.slice(0, n).map(([b, k]) => `${Number.isNaN(b) ? 'unknown size' : formatBytes(b)} × ${k}`);
  return top.length > n ? `${head.join(', ')} and ${top.length - n} more sizes` : head.join(', ');
}

/** The ops that issued a set of copies, most frequent first. */
export function opsOf(ctx: AnalysisContext, idx: number[]): string | undefined {
  const counts = new Map<string, number>();
  for (const i of idx) {
    const op = ctx.model.copies.get(i, 'op');
    if (op >= 0) counts.set(ctx.model.opNames[op]!, (counts.get(ctx.model.opNames[op]!) ?? 0) + 1);
  }
  if (counts.size === 0) return undefined;
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([n, k]) => `${n} (${k}×)`)
    .join(', ');
}

export function sum(idx: number[], f: (i: number) => number): number {
  let s = 0;
  for (const i of idx) s += f(i);
  return s;
}

/**
 * Why a rule cannot judge a tool's totals per call name (calls and time, no events): what the totals show, and what
 * only events would tell. A saving rests on events; totals give none, so they give no finding either.
 */
export function totalsCannotTell(rows: readonly AggregateApi[], cannotTell: string): { notApplicable: string } {
  const calls = rows.reduce((s, a) => s + a.calls, 0);
  const ns = rows.reduce((s, a) => s + a.totalNs, 0);
  const names = rows
    .slice(0, 4)
    .map((a) => `${a.name} ${a.calls}`)
    .join(', ');
  return {
    notApplicable: `the trace kept only totals per call (${names}${rows.length > 4 ? ', ...' : ''}: ${calls} calls, ${formatNs(ns)}); totals cannot tell ${cannotTell}, so no saving can rest on them`,
  };
}

/** Indices of runtime calls per thread, in time order. */
export function runtimeByThread(ctx: AnalysisContext): Map<number, number[]> {
  const r = ctx.model.runtime;
  const by = new Map<number, number[]>();
  for (let i = 0; i < r.length; i++) {
    const t = r.get(i, 'thread');
    let a = by.get(t);
    if (!a) by.set(t, (a = []));
    a.push(i);
  }
  for (const a of by.values()) a.sort((x, y) => r.get(x, 'start') - r.get(y, 'start'));
  return by;
}

/** Steady state: after the first fifth of the trace, where warm-up allocations are over. */
export function steadyFrom(ctx: AnalysisContext): number {
  return ctx.span[0] + 0.2 * ctx.spanNs;
}

/**
 * Sums durations with each counted at most at their median. A call that took far longer than its peers was held by
 * something else (waiting for earlier GPU work, an implicit device synchronisation): changing how the calls are
 * made does not recover that wait. `over` counts the calls that took more than twice the median; `excessNs` is all
 * the time left out.
 */
export function cappedAtMedian(durations: readonly number[]): { sumNs: number; capNs: number; over: number; excessNs: number } {
  const sorted = [...durations].sort((a, b) => a - b);
  const capNs = sorted[sorted.length >> 1] ?? 0;
  let sumNs = 0;
  let over = 0;
  let excessNs = 0;
  for (const d of durations) {
    sumNs += Math.min(d, capNs);
    if (d > capNs) excessNs += d - capNs;
    if (d > 2 * capNs) over++;
  }
  return { sumNs, capNs, over, excessNs };
}
