/**
 * managed-faults: managed memory that moves on demand (page faults, and the migrations the driver makes for them),
 * where prefetching would move it in bulk. Migrations the program asked for (cudaMemPrefetchAsync) are not on
 * demand, and page faults a trace did not record are not zero.
 */
import { formatBytes, formatNs, MiB } from '../../units.js';
import type { AnalysisContext } from '../context.js';
import { Api, Direction, MigrationCause } from '../model.js';
import { basisOf, gbps, joinBasis, severityOf, sum, type RuleCheck } from './shared.js';

/** Migrations by what moved them: the program's prefetches, demand (faults and the driver's moves around them), eviction. */
interface MigrationClasses {
  onDemand: number[];
  prefetch: number[];
  /** Of unrecorded cause, after a prefetch call of the program: perhaps its prefetches, not counted as on demand. */
  afterPrefetch: number[];
  eviction: number[];
  prefetchCalls: number;
}

function classify(ctx: AnalysisContext): MigrationClasses {
  const g = ctx.model.migrations;
  const r = ctx.model.runtime;
  let firstPrefetch = Infinity;
  let prefetchCalls = 0;
  for (let i = 0; i < r.length; i++)
    if (r.get(i, 'api') === Api.memPrefetch) {
      prefetchCalls++;
      firstPrefetch = Math.min(firstPrefetch, r.get(i, 'start'));
    }
  const out: MigrationClasses = { onDemand: [], prefetch: [], afterPrefetch: [], eviction: [], prefetchCalls };
  for (let i = 0; i < g.length; i++) {
    const cause = g.get(i, 'cause');
    if (cause === MigrationCause.userPrefetch) out.prefetch.push(i);
    else if (cause === MigrationCause.eviction) out.eviction.push(i);
    else if (cause === MigrationCause.unknown && g.get(i, 'start') >= firstPrefetch) out.afterPrefetch.push(i);
    else out.onDemand.push(i);
  }
  return out;
}

/** "12 migrations moved 48.0 MiB in 3.2 ms (15.0 GB/s)". */
function moved(ctx: AnalysisContext, idx: number[]): { bytes: number; ns: number; text: string } {
  const g = ctx.model.migrations;
  const bytes = sum(idx, (i) => g.get(i, 'bytes') || 0);
  const ns = sum(idx, (i) => g.get(i, 'end') - g.get(i, 'start'));
  return { bytes, ns, text: `moved ${formatBytes(bytes)} in ${formatNs(ns)} (${gbps(bytes, ns)})` };
}

export const managedFaults: RuleCheck = (ctx) => {
  const f = ctx.model.faults;
  const g = ctx.model.migrations;
  if (f.length === 0 && g.length === 0) return undefined;
  const m = classify(ctx);
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
  // the program's own prefetches, and nothing else: managed memory already moved the way this rule advises
  if (f.length === 0 && m.onDemand.length === 0) return undefined;
  const pingPong = [...pages.values()].filter((v) => v === 3).length;
  const demand = moved(ctx, m.onDemand);
  const prefetchApi = ctx.api('cudaMemPrefetchAsync', 'hipMemPrefetchAsync');
  // without a rate no prefetch time can be stated: the saving is then not computed (0)
  const bulkNs = demand.bytes > 0 ? demand.bytes / ctx.pinnedRate(Direction.HtoD) : 0;
  const saving = Number.isFinite(bulkNs) ? Math.max(0, demand.ns + faultNs - bulkNs) : 0;
  const evidence = [
    ctx.model.recorded('faults')
      ? `${gpu} GPU page-fault groups (${formatNs(faultNs)}) and ${cpu} CPU page faults on managed memory`
      : 'page faults: not recorded (the trace holds no unified-memory fault records; nsys profile --cuda-um-gpu-page-faults=true --cuda-um-cpu-page-faults=true records them)',
  ];
  if (m.onDemand.length > 0) evidence.push(`${m.onDemand.length} migrations on demand (page faults, and the driver's own moves around them) ${demand.text}`);
  if (m.prefetch.length > 0)
    evidence.push(`${m.prefetch.length} migrations the program asked for (${prefetchApi}) ${moved(ctx, m.prefetch).text}: not counted`);
  if (m.afterPrefetch.length > 0)
    evidence.push(
      `${m.afterPrefetch.length} migrations of unrecorded cause after the program's first of ${m.prefetchCalls} ${prefetchApi} calls ${moved(ctx, m.afterPrefetch).text}: perhaps its prefetches, not counted`,
    );
  if (m.eviction.length > 0)
    evidence.push(`${m.eviction.length} evictions ${moved(ctx, m.eviction).text}: the device's memory was oversubscribed, which prefetching does not avoid`);
  if (pingPong > 0) evidence.push(`${pingPong} 2 MiB regions faulted on both the CPU and the GPU: pages ping-pong between them`);
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'Managed memory migrates on demand',
    count: gpu + cpu + m.onDemand.length,
    bytes: demand.bytes || null,
    timeNs: demand.ns + faultNs,
    estimatedSavingNs: saving,
    basis: joinBasis(basisOf(g, m.onDemand), {
      start: Array.from(f.col('time')),
      end: Array.from(f.col('time'), (t, i) => t + f.get(i, 'duration')),
    }),
    savingHow: `on-demand migration and GPU fault time minus moving the same bytes in bulk at ${ctx.pinnedRate(Direction.HtoD)} GB/s (a prefetch); migrations the program prefetched, evictions and faults the trace did not record are not counted`,
    evidence,
    change: `Prefetch managed ranges before the kernels that use them (${prefetchApi}) and back before the CPU reads them; advise read-mostly data (SetReadMostly) and a preferred location to stop ping-pong.${ctx.model.vendor() === 'nvidia' ? '' : ' On AMD, with XNACK off, managed memory does not migrate on fault: prefetch or use device memory.'}`,
  };
};
