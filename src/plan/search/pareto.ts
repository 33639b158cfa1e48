/**
 * The Pareto set of fitting candidates, memory against cost: taken in order of price (then bytes, then fewer
 * changes), a candidate is kept only when it needs fewer bytes than every cheaper one kept. Ties keep the first.
 */
export interface Point {
  price: number;
  bytesPerGpu: number;
  size: number;
}

/** Orders points for the Pareto walk: price, then bytes, then the number of changes. */
export const byPrice = (a: Point, b: Point): number => a.price - b.price || a.bytesPerGpu - b.bytesPerGpu || a.size - b.size;

/** The points of `sorted` (byPrice order) on the Pareto front, at most `limit`. */
export function paretoFront<P extends Point>(sorted: readonly P[], limit = Infinity): P[] {
  const out: P[] = [];
  let least = Infinity;
  for (const p of sorted) {
    if (out.length >= limit) break;
    if (p.bytesPerGpu < least) {
      out.push(p);
      least = p.bytesPerGpu;
    }
  }
  return out;
}
