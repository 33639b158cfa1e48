/**
 * What findings may claim together. Every saving is bounded by the time the events it rests on took (a change
 * cannot give back more time than those events spent), and findings whose events share time are marked as
 * overlapping: a pageable copy and the synchronisation that waits for it are one stretch of time, saved once.
 */
import { formatNs } from '../units.js';
import { coveredWithin, unionLength, unionOf, type Union } from './intervals.js';
import type { Finding } from './result.js';
import type { RuleResult } from './rules/index.js';

/** The findings with savings bounded by their events and overlaps marked, without their event intervals. */
export function settleSavings(results: readonly RuleResult[]): Finding[] {
  const unions = results.map((r): Union | undefined => (r.basis ? unionOf(Float64Array.from(r.basis.start), Float64Array.from(r.basis.end)) : undefined));
  return results.map((r, i) => {
    const { basis: _, ...f } = r;
    // savings priced at a rate are fractions of a nanosecond; the trace's clock counts whole ones
    f.estimatedSavingNs = Math.round(f.estimatedSavingNs);
    f.timeNs = Math.round(f.timeNs);
    const u = unions[i];
    if (u) {
      const took = unionLength(u);
      if (f.estimatedSavingNs > took) {
        f.savingHow = `${f.savingHow}; capped at the ${formatNs(took)} the events it rests on took`;
        f.estimatedSavingNs = took;
      }
      // only savings can overlap: a finding that claims no time overlaps nothing
      f.overlapsWith =
        f.estimatedSavingNs > 0
          ? results
              .filter((o, j) => {
                const v = unions[j];
                return j !== i && v !== undefined && o.estimatedSavingNs > 0 && shared(u, v) > 0;
              })
              .map((o) => o.rule)
          : [];
    }
    return f;
  });
}

/** The time two unions share. */
function shared(a: Union, b: Union): number {
  const [small, large] = a.start.length <= b.start.length ? [a, b] : [b, a];
  let t = 0;
  for (let k = 0; k < small.start.length; k++) t += coveredWithin(large, small.start[k]!, small.end[k]!);
  return t;
}
