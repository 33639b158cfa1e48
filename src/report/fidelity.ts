/**
 * Which kinds of `gpumem bench` row agreed with a native CUDA C program measuring the same thing, in the published
 * comparison (docs/performance.md, written by `npm run gpu:verify`): `gpumem report` quotes a row only when its kind
 * agreed there, names that comparison (machine, date, evidence folder) beside the figure, and lists the rows it
 * left out. A kind is matched at the compared size nearest to the row's own. A kind is left out only when the two
 * can be told apart (every round of gpumem outside the native program's rounds), not when a noisy row merely falls
 * outside the native program's own spread.
 */
import type { BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { NATIVE_AGREEMENT } from './native-agreement.js';

/**
 * The published verdict per row: `agrees` within the native program's own run-to-run spread; `indistinct` outside
 * it, but gpumem's figures over the rounds overlap the native program's (the rounds cannot tell them apart);
 * `differs` the two sets of rounds lie apart; `unjudged` one round only.
 */
export type PublishedVerdict = 'agrees' | 'indistinct' | 'differs' | 'unjudged';

export interface NativeAgreement {
  measured: string;
  machine: string;
  evidence: string;
  rows: Record<string, PublishedVerdict>;
}

export interface NativeVerdict {
  state: 'agrees' | 'differs' | 'not compared';
  /** One sentence for the reader: against what, where and when. */
  detail: string;
}

/** The kind of a row: everything but its size. */
const kindOf = (test: string, direction: string, src: string, dst: string, engine: string): string => [test, direction, src, dst, engine].join('|');

/** The verdict for a bench row of `backend` (the comparison ran on CUDA; other backends' rows were not compared). */
export function nativeVerdict(r: BenchResult, backend: string, table: NativeAgreement = NATIVE_AGREEMENT): NativeVerdict {
  const where = `one ${table.machine}, ${table.measured} (${table.evidence})`;
  if (backend !== 'cuda') return { state: 'not compared', detail: `no native comparison on the ${backend} backend (the published one ran on ${where})` };
  const kind = kindOf(r.test, r.direction, r.srcKind, r.dstKind, r.engine);
  let best: { bytes: number; verdict: PublishedVerdict } | undefined;
  for (const [key, verdict] of Object.entries(table.rows)) {
    const cut = key.lastIndexOf('|');
    if (key.slice(0, cut) !== kind) continue;
    const bytes = Number(key.slice(cut + 1));
    if (!best || Math.abs(Math.log2(bytes / r.bytes)) < Math.abs(Math.log2(best.bytes / r.bytes))) best = { bytes, verdict };
  }
  if (!best) return { state: 'not compared', detail: `this kind of row has no native counterpart in the published comparison (${where})` };
  const at = `at ${formatBytes(best.bytes, 0)} on ${where}`;
  if (best.verdict === 'agrees') return { state: 'agrees', detail: `agreed with native CUDA C within its run-to-run spread ${at}` };
  if (best.verdict === 'indistinct')
    return {
      state: 'agrees',
      detail: `within the run-to-run noise of native CUDA C (the rounds of the two overlap, though not within the native spread alone) ${at}`,
    };
  if (best.verdict === 'differs')
    return { state: 'differs', detail: `differed from native CUDA C: every round of gpumem lay outside the native program's rounds ${at}` };
  return { state: 'not compared', detail: `one round only, nothing to judge the difference by ${at}` };
}
