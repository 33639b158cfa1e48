/** low-bandwidth: copies far below the link rate. */
import { formatBytes, formatNs, MiB } from '../../units.js';
import { Direction, MemKind } from '../model.js';
import { basisOf, gbps, severityOf, sum, type RuleCheck } from './shared.js';

export const lowBandwidth: RuleCheck = (ctx) => {
  const c = ctx.model.copies;
  // A copy whose host memory kind is unknown may be pageable, whose ceiling is lower than the link's: it is judged
  // against the fastest copy of 1 MiB or more the trace shows in its direction, so that a pageable copy at its own
  // ceiling is not called slow
  const fastest = [0, 0];
  for (let i = 0; i < c.length; i++) {
    const dir = c.get(i, 'dir');
    if ((dir === Direction.HtoD || dir === Direction.DtoH) && c.get(i, 'bytes') >= MiB)
      fastest[dir] = Math.max(fastest[dir]!, c.get(i, 'bytes') / (c.get(i, 'end') - c.get(i, 'start')));
  }
  const rateFor = (i: number): number => {
    const dir = c.get(i, 'dir');
    return ctx.hostKind[i] === MemKind.unknown ? Math.min(ctx.pinnedRate(dir), fastest[dir]!) : ctx.pinnedRate(dir);
  };
  const idx: number[] = [];
  let unknownKind = 0;
  for (let i = 0; i < c.length; i++) {
    const dir = c.get(i, 'dir');
    const kind = ctx.hostKind[i];
    if ((dir !== Direction.HtoD && dir !== Direction.DtoH) || !(c.get(i, 'bytes') >= MiB)) continue;
    if (kind !== MemKind.pinned && kind !== MemKind.unknown) continue;
    const rate = c.get(i, 'bytes') / (c.get(i, 'end') - c.get(i, 'start'));
    if (rate < 0.5 * rateFor(i)) {
      idx.push(i);
      if (kind === MemKind.unknown) unknownKind++;
    }
  }
  if (idx.length === 0) return undefined;
  const t = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
  const bytes = sum(idx, (i) => c.get(i, 'bytes'));
  const saving = sum(idx, (i) => {
    const d = c.get(i, 'end') - c.get(i, 'start');
    return Math.max(0, d - (ctx.floorNs[c.get(i, 'dir')]! + c.get(i, 'bytes') / rateFor(i)));
  });
  const against =
    ctx.rates.basis === 'trace'
      ? `the fastest copies of this trace, ${ctx.pinnedRate(Direction.HtoD)} / ${ctx.pinnedRate(Direction.DtoH)} GB/s HtoD / DtoH`
      : `${ctx.pinnedRate(Direction.HtoD)} / ${ctx.pinnedRate(Direction.DtoH)} GB/s HtoD / DtoH`;
  const evidence = [
    `${idx.length} host copies of 1 MiB or more ran below half the expected rate: ${formatBytes(bytes)} in ${formatNs(t)} (${gbps(bytes, t)} against ${against})`,
  ];
  if (unknownKind > 0)
    evidence.push(
      `${unknownKind} of them have unknown host memory kind${ctx.model.vendor() === 'amd' ? ': on ROCm a slow copy is most often from pageable memory' : ' (the trace does not say whether it was pinned)'}`,
    );
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: ctx.rates.basis === 'trace' ? 'Large copies run far below the fastest copies of this trace' : 'Large copies run far below the link rate',
    count: idx.length,
    bytes,
    timeNs: t,
    estimatedSavingNs: saving,
    basis: basisOf(c, idx),
    savingHow: `each copy's time minus its bytes at the stated pinned rate (for a copy of unknown host memory kind, at most the fastest copy of its direction in this trace) plus ${ctx.floorText(Direction.HtoD)}`,
    evidence,
    change: `Check the link (gpumem info shows the PCIe generation and width the GPU trained at), allocate pinned buffers on the GPU's NUMA node (numactl --membind${ctx.model.vendor() === 'nvidia' ? '' : ", or hipHostMalloc's NUMA flags on ROCm"}), make sure the memory is really pinned, and avoid several copies in one direction at once.`,
  };
};
