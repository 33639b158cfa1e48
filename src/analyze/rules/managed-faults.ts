/** managed-faults: page faults on managed memory. */
import { formatBytes, formatNs, MiB } from '../../units.js';
import { Direction, MemKind } from '../model.js';
import { basisOf, gbps, joinBasis, severityOf, sum, type RuleCheck } from './shared.js';

export const managedFaults: RuleCheck = (ctx) => {
  const f = ctx.model.faults;
  const c = ctx.model.copies;
  const mig: number[] = [];
  for (let i = 0; i < c.length; i++) if (c.get(i, 'src') === MemKind.managed || c.get(i, 'dst') === MemKind.managed) mig.push(i);
  if (f.length === 0 && mig.length === 0) return undefined;
  let gpu = 0;
  let cpu = 0;
  let faultNs = 0;
  const pages = new Map<number, number>();
  for (let i = 0; i < f.length; i++) {
    const kind = f.get(i, 'kind');
    if (kind === 1) {
      gpu++;
      faultNs += f.get(i, 'duration');
    } else cpu++;
    const page = Math.floor(f.get(i, 'address') / (2 * MiB));
    if (Number.isFinite(page)) pages.set(page, (pages.get(page) ?? 0) | (kind === 1 ? 2 : 1));
  }
  const pingPong = [...pages.values()].filter((v) => v === 3).length;
  const migNs = sum(mig, (i) => c.get(i, 'end') - c.get(i, 'start'));
  const migBytes = sum(mig, (i) => c.get(i, 'bytes') || 0);
  // without a rate no prefetch time can be stated: the saving is then not computed (0)
  const prefetchNs = migBytes > 0 ? migBytes / ctx.pinnedRate(Direction.HtoD) : 0;
  const saving = Number.isFinite(prefetchNs) ? Math.max(0, migNs + faultNs - prefetchNs) : 0;
  const evidence = [`${gpu} GPU page-fault groups (${formatNs(faultNs)}) and ${cpu} CPU page faults on managed memory`];
  if (mig.length > 0) evidence.push(`${mig.length} on-demand migrations moved ${formatBytes(migBytes)} in ${formatNs(migNs)} (${gbps(migBytes, migNs)})`);
  if (pingPong > 0) evidence.push(`${pingPong} 2 MiB regions faulted on both the CPU and the GPU: pages ping-pong between them`);
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'Managed memory migrates on page faults',
    count: gpu + cpu + mig.length,
    bytes: migBytes || null,
    timeNs: migNs + faultNs,
    estimatedSavingNs: saving,
    basis: joinBasis(basisOf(c, mig), {
      start: Array.from(f.col('time')),
      end: Array.from(f.col('time'), (t, i) => t + f.get(i, 'duration')),
    }),
    savingHow: `migration and GPU fault time minus moving the same bytes in bulk at ${ctx.pinnedRate(Direction.HtoD)} GB/s (a prefetch)`,
    evidence,
    change: `Prefetch managed ranges before the kernels that use them (${ctx.api('cudaMemPrefetchAsync', 'hipMemPrefetchAsync')}) and back before the CPU reads them; advise read-mostly data (SetReadMostly) and a preferred location to stop ping-pong.${ctx.model.vendor() === 'nvidia' ? '' : ' On AMD, with XNACK off, managed memory does not migrate on fault: prefetch or use device memory.'}`,
  };
};
