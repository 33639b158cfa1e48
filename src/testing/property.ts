/**
 * Settings for every fast-check property test: a fixed seed by default, so that a run is repeatable and a failure
 * in CI is the same failure here; `GPUMEM_FC_SEED=random` (or a number) runs it with another seed, and
 * `GPUMEM_FC_RUNS=N` changes the number of runs. fast-check prints the seed and the path of a failing run, which
 * `GPUMEM_FC_SEED=<seed>` replays.
 */
import type { Parameters } from 'fast-check';

/** The seed every property test uses unless GPUMEM_FC_SEED says otherwise. */
export const DEFAULT_SEED = 20261201;

function seed(): number {
  const s = process.env.GPUMEM_FC_SEED;
  if (s === undefined || s === '') return DEFAULT_SEED;
  if (s === 'random') return Math.floor(Math.random() * 2 ** 31);
  const n = Number(s);
  if (!Number.isInteger(n)) throw new Error(`GPUMEM_FC_SEED must be an integer or "random", not ${s}`);
  return n;
}

/** fast-check parameters: the seed (fixed unless asked), numRuns (GPUMEM_FC_RUNS overrides `runs`), and `extra`. */
export function propertyParams<T>(runs: number, extra: Parameters<T> = {}): Parameters<T> {
  const r = process.env.GPUMEM_FC_RUNS;
  const numRuns = r !== undefined && r !== '' ? Number(r) : runs;
  if (!Number.isInteger(numRuns) || numRuns < 1) throw new Error(`GPUMEM_FC_RUNS must be a positive integer, not ${r}`);
  return { ...extra, seed: seed(), numRuns };
}
