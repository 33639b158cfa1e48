/**
 * What a change costs, in parts a person can check: extra compute (a share of the step's FLOPs), time on the host
 * link or between GPUs (seconds per step), more GPUs, and what changes in the result. `price` folds them into one
 * figure to rank by: the extra share of a step's time on the GPUs used, plus a penalty for a changed result.
 */
export interface Cost {
  /** Extra compute as a share of the step's FLOPs (0.33: one more forward pass of every block). */
  compute: number;
  /** Seconds per step on the host link that the step waits for (offload). */
  transferSeconds: number;
  /** Seconds per step of extra communication between GPUs (sharding). */
  commSeconds: number;
  /** How many times the GPUs (1: the same GPUs). */
  gpus: number;
  /**
   * A changed result priced as a share of a step: 8-bit optimizer states, pure bf16 updates, adapters instead of
   * full fine-tuning, a smaller global batch. Each row says where its figure comes from.
   */
  result: number;
  /** Plain words for each part, with its source. */
  words: string[];
}

export const FREE: Cost = { compute: 0, transferSeconds: 0, commSeconds: 0, gpus: 1, result: 0, words: [] };

/** Two costs together: shares and seconds add, GPU factors multiply. */
export function addCost(a: Cost, b: Cost): Cost {
  return {
    compute: a.compute + b.compute,
    transferSeconds: a.transferSeconds + b.transferSeconds,
    commSeconds: a.commSeconds + b.commSeconds,
    gpus: a.gpus * b.gpus,
    result: a.result + b.result,
    words: [...a.words, ...b.words],
  };
}

/**
 * One figure to rank by: GPU-time of a step against the plan as asked (gpus x (1 + extra time) - 1), plus the
 * result's penalty. Never below 0 and never smaller when any part grows.
 */
export function price(c: Cost, stepSeconds: number): number {
  const time = c.compute + (c.transferSeconds + c.commSeconds) / Math.max(stepSeconds, 1e-9);
  return c.gpus * (1 + time) - 1 + c.result;
}

/** A cost in words: the shares as percentages, the seconds in ms. */
export function costWords(c: Cost, stepSeconds: number): string {
  if (!c.words.length) return 'no cost: the same step, the same result';
  return `${c.words.join('; ')} (about ${(price(c, stepSeconds) * 100).toFixed(0)}% of a step of ${(stepSeconds * 1000).toFixed(0)} ms)`;
}
