/** Summary statistics of repeated measurements. */

export interface Summary {
  median: number;
  min: number;
  max: number;
  /** Coefficient of variation: standard deviation / mean. */
  cv: number;
  n: number;
}

/** Median, min, max and coefficient of variation of `xs` (which must not be empty). */
export function summarize(xs: readonly number[]): Summary {
  if (xs.length === 0) throw new Error('summarize: no samples');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  const sd = Math.sqrt(s.reduce((a, b) => a + (b - mean) ** 2, 0) / s.length);
  return { median, min: s[0]!, max: s[s.length - 1]!, cv: mean > 0 ? sd / mean : 0, n: s.length };
}
