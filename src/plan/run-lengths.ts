/**
 * The lengths of a whole run's micro-batches (--run-lengths). A trainer that reads max_memory_reserved() after
 * trainer.train() reports the peak of the whole run, not of one step: every micro-batch goes through one caching
 * allocator, whose segments are only returned by empty_cache() or a failed cudaMalloc
 * (c10/cuda/CUDACachingAllocator.cpp), so blocks cut for the activations of one length stay cached, in segments that
 * a later, longer micro-batch cannot use whole. ms-swift's benchmark reads it that way (swift/trainers/trainers.py
 * at 4312aeb, Seq2SeqTrainer.train: torch.cuda.max_memory_reserved(i) after super().train()), over a data set whose
 * samples run from 91 to 19548 tokens. The planner replays the run's micro-batches in order (train.ts, replayRun).
 *
 * A spec is either the lengths themselves (`1024,877,2048`: samples, in the order they run), or a distribution the
 * samples are drawn from with a fixed seed: `lognormal:mean=3234.4,sd=2547.5,min=91,max=19548,n=4959`, the lognormal
 * with that mean and standard deviation, cut to [min, max] (drawn again outside it), `n` samples. The lognormal's
 * shape is an assumption where a source publishes only the moments, named so in the rows that use it.
 * `over=drop` drops samples longer than --seq (ms-swift's truncation_strategy 'delete', template.py _encode),
 * `over=truncate` (the default) cuts them to --seq (a tokenizer's truncation=True). Samples are grouped into
 * micro-batches of --batch in order, each padded to its longest sample (ms-swift's data_collate_fn and
 * transformers' DataCollatorForSeq2Seq pad with pad_sequence to the longest), the last one kept whole or not
 * (DataLoader's drop_last False).
 */
import { InvalidArgumentError } from '../errors.js';

/** What a spec says, before --seq and --batch apply. */
export interface RunLengthSpec {
  /** The samples' lengths in order, or undefined for a distribution. */
  samples?: readonly number[];
  lognormal?: { mean: number; sd: number; min: number; max: number; n: number; seed: number };
  over: 'drop' | 'truncate';
}

/** The pattern the option's text matches (schema.ts). */
export const RUN_LENGTHS_PATTERN = /^(\d+(,\d+)*(;over=(drop|truncate))?|lognormal:[a-z]+=[\d.]+(,[a-z]+=[\w.]+)*)$/;

/** The most micro-batches one plan replays (each replay is a whole step's program). */
export const MAX_RUN_SAMPLES = 20000;

/**
 * Reads a --run-lengths spec.
 * @throws InvalidArgumentError for a key it does not know, a missing or out-of-range value
 */
export function parseRunLengths(text: string): RunLengthSpec {
  const bad = (why: string): never => {
    throw new InvalidArgumentError(`--run-lengths: ${why}`);
  };
  if (!text.startsWith('lognormal:')) {
    const [list = '', tail] = text.split(';');
    const samples = list.split(',').map(Number);
    if (samples.some((x) => !Number.isInteger(x) || x < 1)) bad('lengths are whole numbers of tokens, at least 1');
    if (samples.length > MAX_RUN_SAMPLES) bad(`at most ${MAX_RUN_SAMPLES} samples`);
    return { samples, over: tail === 'over=drop' ? 'drop' : 'truncate' };
  }
  const kv = new Map(
    text
      .slice('lognormal:'.length)
      .split(',')
      .map((p) => p.split('=') as [string, string]),
  );
  const known = new Set(['mean', 'sd', 'min', 'max', 'n', 'seed', 'over']);
  for (const k of kv.keys()) if (!known.has(k)) bad(`unknown key "${k}" (mean, sd, min, max, n, seed, over)`);
  const num = (k: string, fallback?: number): number => {
    const v = kv.has(k) ? Number(kv.get(k)) : fallback;
    if (v === undefined || !Number.isFinite(v)) return bad(`lognormal needs ${k}=<number>`);
    return v;
  };
  const mean = num('mean');
  const sd = num('sd');
  const n = num('n');
  const over = kv.get('over') ?? 'truncate';
  if (over !== 'drop' && over !== 'truncate') bad('over is drop or truncate');
  if (!(mean > 0) || !(sd >= 0)) bad('mean must be positive, sd not negative');
  if (!Number.isInteger(n) || n < 1 || n > MAX_RUN_SAMPLES) bad(`n is a whole number from 1 to ${MAX_RUN_SAMPLES}`);
  const min = num('min', 1);
  const max = num('max', Number.MAX_SAFE_INTEGER);
  if (!(min >= 1) || !(max >= min) || mean < min || mean > max) bad('min <= mean <= max, min at least 1');
  return { lognormal: { mean, sd, min, max, n, seed: num('seed', 42) }, over: over as 'drop' | 'truncate' };
}

/** The samples' lengths a spec gives, in order. */
export function sampleLengths(spec: RunLengthSpec): number[] {
  if (spec.samples) return [...spec.samples];
  const { mean, sd, min, max, n, seed } = spec.lognormal!;
  // a lognormal of that mean and standard deviation: sigma^2 = ln(1 + (sd/mean)^2), mu = ln(mean) - sigma^2/2
  const s2 = Math.log(1 + (sd / mean) ** 2);
  const mu = Math.log(mean) - s2 / 2;
  const sigma = Math.sqrt(s2);
  const next = lcg(seed);
  const out: number[] = [];
  // a cut so narrow that nothing lands in it would never end: the draws are bounded, the rest at the mean
  for (let draws = 0; out.length < n && draws < 1000 * n; draws++) {
    const z = Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next());
    const x = Math.round(Math.exp(mu + sigma * z));
    if (x >= min && x <= max) out.push(x);
  }
  while (out.length < n) out.push(Math.round(mean));
  return out;
}

/** One micro-batch of a run: its samples and the length they are padded to. */
export interface MicroBatch {
  batch: number;
  seq: number;
}

/**
 * The micro-batches for --seq and --batch: samples over `seq` dropped or cut, groups of `batch` padded to their
 * longest, the last group as many as are left.
 */
export function microBatches(spec: RunLengthSpec, seq: number, batch: number): MicroBatch[] {
  const kept = sampleLengths(spec).flatMap((x) => (x <= seq ? [x] : spec.over === 'drop' ? [] : [seq]));
  const out: MicroBatch[] = [];
  for (let i = 0; i < kept.length; i += batch) {
    const group = kept.slice(i, i + batch);
    out.push({ batch: group.length, seq: Math.max(...group) });
  }
  return out;
}

/** Numerical Recipes' linear congruential generator, in (0, 1): the same draws on every machine. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s + 0.5) / 2 ** 32;
  };
}
