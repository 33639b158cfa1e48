/**
 * `--fit batch|seq|context|concurrency`: the largest value of one input for which the plan fits, by doubling then
 * bisection on the fast path (evaluate.ts); fitting shrinks as each of these grows, so the search is exact.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { ModelConfig } from '../model-config.js';
import { LIMITS, type PlanInputs } from '../schema.js';
import type { Evaluated } from './evaluate.js';

export type FitTarget = 'batch' | 'seq' | 'context' | 'concurrency';

/** The input a target turns, for the run the inputs describe. @throws InvalidArgumentError where it does not apply */
export function fitInput(t: FitTarget, i: PlanInputs): 'batch' | 'seq' | 'context' | 'maxModelLen' | 'maxNumSeqs' {
  if (i.mode === 'train') {
    if (t === 'batch' || t === 'seq') return t;
    throw new InvalidArgumentError(`--fit ${t} is for --mode infer: training fits batch or seq`);
  }
  if (t === 'seq') throw new InvalidArgumentError('--fit seq is for training: inference fits context, batch or concurrency');
  if (t === 'context') return i.engine === 'hf' ? 'context' : 'maxModelLen';
  // vLLM schedules max_num_seqs sequences at once (its profiling run sizes for them); SGLang sizes by tokens
  if (i.engine === 'vllm') return 'maxNumSeqs';
  if (i.engine === 'sglang') throw new InvalidArgumentError('--fit concurrency: SGLang sizes its cache by tokens; --fit context gives the longest request');
  return 'batch';
}

/** The largest n in [lo, hi] with ok(n), given ok is true up to some n and false after; undefined when ok(lo) is false. */
export function largestTrue(ok: (n: number) => boolean, lo: number, hi: number): number | undefined {
  if (!ok(lo)) return undefined;
  let good = lo;
  let step = lo;
  while (good + step <= hi && ok(good + step)) {
    good += step;
    step *= 2;
  }
  let bad = Math.min(good + step, hi + 1);
  while (bad - good > 1) {
    const mid = Math.floor((good + bad) / 2);
    if (ok(mid)) good = mid;
    else bad = mid;
  }
  return good;
}

/**
 * The largest value of the target's input that fits (up to `below` where given), and the inputs at it; undefined when even the smallest does not.
 * @throws InvalidArgumentError where the target does not apply to the run
 */
export function fitLargest(
  m: ModelConfig,
  i: PlanInputs,
  t: FitTarget,
  evaluate: (i: PlanInputs) => Pick<Evaluated, 'fits'> | undefined,
  below?: number,
): { input: string; value: number; inputs: PlanInputs } | undefined {
  const key = fitInput(t, i);
  const positions = m.maxPositions ?? LIMITS.tokens;
  const lo = key === 'context' ? i.newTokens + 1 : 1;
  const hi = below ?? (key === 'batch' || key === 'maxNumSeqs' ? (i.mode === 'train' ? 4096 : 1 << 16) : positions);
  const at = (n: number): PlanInputs => ({ ...i, [key]: n, given: [...new Set([...(i.given ?? []), key])] }) as PlanInputs;
  if (hi < lo) return undefined;
  const n = largestTrue((n) => evaluate(at(n))?.fits === true, lo, hi);
  return n === undefined ? undefined : { input: key, value: n, inputs: at(n) };
}
