/** redundant-copy: the same data copied again. */
import { formatBytes, KiB } from '../../units.js';
import { Direction } from '../model.js';
import { basisOf, RECURRING, severityOf, sum, type RuleCheck } from './shared.js';

export const redundantCopy: RuleCheck = (ctx) => {
  const c = ctx.model.copies;
  const groups = new Map<string, number[]>();
  let withAddr = 0;
  for (let i = 0; i < c.length; i++) {
    if (c.get(i, 'dir') !== Direction.HtoD || Number.isNaN(c.get(i, 'hostAddr'))) continue;
    withAddr++;
    const key = `${c.get(i, 'hostAddr')}:${c.get(i, 'bytes')}`;
    const g = groups.get(key);
    if (g) g.push(i);
    else groups.set(key, [i]);
  }
  if (withAddr === 0)
    return ctx.copyCount > 0
      ? {
          notApplicable:
            'the trace does not record the host address of copies, so the same buffer uploaded again cannot be told from new data of the same size',
        }
      : undefined;
  const again = [...groups.values()].filter((g) => g.length >= RECURRING && c.get(g[0]!, 'bytes') >= 64 * KiB);
  if (again.length === 0) return undefined;
  const repeats = again.flatMap((g) => g.slice(1));
  const t = sum(repeats, (i) => c.get(i, 'end') - c.get(i, 'start'));
  return {
    severity: severityOf(t, ctx.spanNs),
    title: 'The same host buffer is uploaded again and again',
    count: repeats.length,
    bytes: sum(repeats, (i) => c.get(i, 'bytes')),
    timeNs: t,
    estimatedSavingNs: t,
    basis: basisOf(c, repeats),
    savingHow: 'the time of every upload of a buffer after its first (if its contents did not change, which the trace cannot show)',
    evidence: again
      .slice(0, 5)
      .map((g) => `host buffer 0x${c.get(g[0]!, 'hostAddr').toString(16)} (${formatBytes(c.get(g[0]!, 'bytes'))}) uploaded ${g.length} times`),
    change: 'Keep data that does not change on the device (upload once, reuse the device tensor); if it changes partly, upload only the changed part.',
  };
};
