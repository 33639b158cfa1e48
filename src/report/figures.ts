/**
 * What every advice rule stands on: the bench rows of one device, each quoted only when its kind of row matched native
 * CUDA C in the published comparison (./fidelity.ts). Every lookup goes through `quotable`, so no rule can quote a row
 * that differed; the rows left out that way are listed as withheld.
 */
import type { DeviceInfo } from '../backend/backend.js';
import type { BenchReport, BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { nativeVerdict, type NativeAgreement, type NativeVerdict } from './fidelity.js';
import { NATIVE_AGREEMENT } from './native-agreement.js';

export type Workload = 'training' | 'inference' | 'preprocessing';

export interface Evidence {
  label: string;
  value: number;
  unit: 'GB/s' | 'µs' | '%' | 'x';
  /** Where the figure came from in the bench results. */
  source?: string;
  /** The run that measured it: this machine's bench, when, which device. */
  run?: string;
  /** How that kind of row compared with native CUDA C in the published comparison. */
  native?: string;
  nativeState?: 'agrees' | 'differs' | 'not compared';
}

/** A row a rule needed but did not quote: its kind differed from native C in the published comparison. */
export interface Withheld {
  source: string;
  reason: string;
}

export interface Advice {
  id: string;
  workloads: Workload[];
  title: string;
  recommendation: string;
  evidence: Evidence[];
}

/** An advice as a rule writes it: evidence it could not find is undefined and dropped. */
export type AdviceDraft = Omit<Advice, 'evidence'> & { evidence: Array<Evidence | undefined> };

/** What a rule reads (the device, the bench, its figures) and where it puts its advice. */
export interface RuleContext {
  info: DeviceInfo;
  bench: BenchReport;
  F: Figures;
  add: (a: AdviceDraft) => void;
}

/** A figure as advice prints it: 3 significant digits or so. */
export const f1 = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

const sourceOf = (r: BenchResult): string => `${r.test} ${r.direction} ${r.srcKind}->${r.dstKind} ${r.engine} ${formatBytes(r.bytes, 0)}`;

/** Where the batch call comes from, for the advice's wording. */
export function batchCall(bench: BenchReport): string {
  return bench.environment.backend === 'cuda'
    ? ' (cudaMemcpyBatchAsync where the runtime has it, from CUDA 12.8)'
    : bench.environment.backend === 'hip'
      ? ' (hipMemcpyBatchAsync from ROCm 7.1)'
      : '';
}

export class Figures {
  readonly withheld: Withheld[] = [];
  private readonly verdicts = new Map<BenchResult, NativeVerdict>();

  constructor(
    private readonly rows: BenchResult[],
    readonly device: number,
    private readonly backend: string,
    private readonly run: string,
    private readonly table: NativeAgreement = NATIVE_AGREEMENT,
  ) {}

  /** How the row's kind compared with native C (looked up once per row). */
  private verdict(r: BenchResult): NativeVerdict {
    let v = this.verdicts.get(r);
    if (!v) this.verdicts.set(r, (v = nativeVerdict(r, this.backend, this.table)));
    return v;
  }

  /** The row itself when its kind may be quoted; undefined (and listed as withheld) when it differed from native C. */
  private quotable(r: BenchResult | undefined): BenchResult | undefined {
    if (!r) return undefined;
    const v = this.verdict(r);
    if (v.state !== 'differs') return r;
    const source = sourceOf(r);
    if (!this.withheld.some((w) => w.source === source)) this.withheld.push({ source, reason: v.detail });
    return undefined;
  }

  /** Evidence from a row: its figure, where it came from, the run, and how its kind compared with native C. */
  ev(label: string, r: BenchResult | undefined, unit: 'GB/s' | 'µs' = 'GB/s'): Evidence | undefined {
    if (!r) return undefined;
    const value = unit === 'GB/s' ? r.medianGBps : r.medianUs;
    if (value === undefined) return undefined;
    const v = this.verdict(r);
    return { label, value, unit, source: sourceOf(r), run: this.run, native: v.detail, nativeState: v.state };
  }

  /** This device's rows matching `where` that may be quoted, in the bench's order (the rest listed as withheld). */
  quotableRows(where: (r: BenchResult) => boolean): BenchResult[] {
    return this.rows.filter((r) => r.device === this.device && where(r)).flatMap((r) => this.quotable(r) ?? []);
  }

  /**
   * The row at the largest size matching the filter (or at `bytes`), if its kind may be quoted: a row left out is not
   * replaced by a smaller one. `engine` is a name or a test of the name.
   */
  pick(
    test: string,
    direction: string,
    srcKind?: string,
    dstKind?: string,
    engine?: string | ((e: string) => boolean),
    bytes?: number,
  ): BenchResult | undefined {
    return this.quotable(this.matching(test, direction, srcKind, dstKind, engine, bytes).sort((a, b) => b.bytes - a.bytes)[0]);
  }

  /** The smallest copy-engine row of a kind, if it may be quoted. */
  smallest(test: string, direction: string, srcKind: string, dstKind: string): BenchResult | undefined {
    return this.quotable(this.matching(test, direction, srcKind, dstKind, 'copy-engine').sort((a, b) => a.bytes - b.bytes)[0]);
  }

  private matching(
    test: string,
    direction: string,
    srcKind?: string,
    dstKind?: string,
    engine?: string | ((e: string) => boolean),
    bytes?: number,
  ): BenchResult[] {
    const engineOk = (e: string): boolean => engine === undefined || (typeof engine === 'string' ? e === engine : engine(e));
    return this.rows.filter(
      (r) =>
        r.device === this.device &&
        r.test === test &&
        r.direction === direction &&
        (srcKind === undefined || r.srcKind === srcKind) &&
        (dstKind === undefined || r.dstKind === dstKind) &&
        engineOk(r.engine) &&
        (bytes === undefined || r.bytes === bytes),
    );
  }
}

/** Figures of one device of a bench, with the run named for every piece of evidence, judged against `table`. */
export function figuresFor(info: DeviceInfo, bench: BenchReport, table: NativeAgreement = NATIVE_AGREEMENT): Figures {
  const env = bench.environment;
  const name = env.devices.find((d) => d.index === info.index)?.name ?? info.name;
  return new Figures(
    bench.results,
    info.index,
    env.backend,
    `gpumem bench (${env.mode}) on this machine, ${env.date}, device ${info.index}${name ? ` (${name})` : ''}`,
    table,
  );
}
