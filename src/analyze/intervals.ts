/** Interval arithmetic over nanosecond spans: unions, and how much of a span a union covers. */

/** Disjoint, sorted intervals as parallel arrays. */
export interface Union {
  start: Float64Array;
  end: Float64Array;
  /** Prefix sums of lengths: covered[i] is the length of intervals 0..i-1. */
  covered: Float64Array;
}

/** The union of intervals given as start/end columns (optionally only rows where keep(i)). */
export function unionOf(starts: Float64Array, ends: Float64Array, keep?: (i: number) => boolean): Union {
  const idx: number[] = [];
  for (let i = 0; i < starts.length; i++) if (!keep || keep(i)) idx.push(i);
  idx.sort((a, b) => starts[a]! - starts[b]!);
  const s: number[] = [];
  const e: number[] = [];
  for (const i of idx) {
    const a = starts[i]!;
    const b = Math.max(a, ends[i]!);
    if (s.length > 0 && a <= e[e.length - 1]!) e[e.length - 1] = Math.max(e[e.length - 1]!, b);
    else {
      s.push(a);
      e.push(b);
    }
  }
  const covered = new Float64Array(s.length + 1);
  for (let i = 0; i < s.length; i++) covered[i + 1] = covered[i]! + (e[i]! - s[i]!);
  return { start: Float64Array.from(s), end: Float64Array.from(e), covered };
}

/** Total length of the union. */
export function unionLength(u: Union): number {
  return u.covered[u.covered.length - 1] ?? 0;
}

/** First interval index whose end is after t. */
function firstEndingAfter(u: Union, t: number): number {
  let lo = 0;
  let hi = u.end.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (u.end[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** How much of [a, b] the union covers. */
export function coveredWithin(u: Union, a: number, b: number): number {
  if (b <= a) return 0;
  let sum = 0;
  for (let i = firstEndingAfter(u, a); i < u.start.length && u.start[i]! < b; i++) sum += Math.min(b, u.end[i]!) - Math.max(a, u.start[i]!);
  return sum;
}
