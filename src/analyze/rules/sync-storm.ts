/** sync-storm: many blocking host synchronisations. */
import { formatNs } from '../../units.js';
import { Api, SyncKind } from '../model.js';
import { basisOf, runtimeByThread, severityOf, SYNC_STORM_COUNT, totalsCannotTell, type RuleCheck } from './shared.js';

export const syncStorm: RuleCheck = (ctx) => {
  const r = ctx.model.runtime;
  const counts = { streamSync: 0, deviceSync: 0, eventSync: 0 };
  let blockedNs = 0;
  let afterCopy = 0;
  let afterCopyNs = 0;
  /** Of the waits after copies, the time the GPU spent on work the host was waiting for: no saving there. */
  let gpuWorkNs = 0;
  const afterCopyCalls: number[] = [];
  let n = 0;
  for (const calls of runtimeByThread(ctx).values()) {
    for (let k = 0; k < calls.length; k++) {
      const i = calls[k]!;
      const api = r.get(i, 'api');
      if (api !== Api.streamSync && api !== Api.deviceSync && api !== Api.eventSync) continue;
      n++;
      counts[api === Api.streamSync ? 'streamSync' : api === Api.deviceSync ? 'deviceSync' : 'eventSync']++;
      const d = r.get(i, 'end') - r.get(i, 'start');
      blockedNs += d;
      const prevApi = k > 0 ? r.get(calls[k - 1]!, 'api') : -1;
      if (prevApi === Api.memcpyAsync || prevApi === Api.memcpySync) {
        afterCopy++;
        afterCopyNs += d;
        gpuWorkNs += ctx.gpuBusyWithin(r.get(i, 'start'), r.get(i, 'end'));
        afterCopyCalls.push(i);
      }
    }
  }
  // Synchronisations the device timeline records (Kineto cuda_sync, nsys SYNCHRONIZATION) whose runtime call the
  // trace does not hold: counted too. A stream waiting on an event does not block the host and is left out.
  const seen = new Set<number>();
  for (let i = 0; i < r.length; i++) {
    const api = r.get(i, 'api');
    if (api === Api.streamSync || api === Api.deviceSync || api === Api.eventSync) seen.add(r.get(i, 'correlation'));
  }
  const sy = ctx.model.syncs;
  for (let i = 0; i < sy.length; i++) {
    const kind = sy.get(i, 'kind');
    if (kind !== SyncKind.stream && kind !== SyncKind.device && kind !== SyncKind.event) continue;
    if (seen.has(sy.get(i, 'correlation'))) continue;
    n++;
    counts[kind === SyncKind.stream ? 'streamSync' : kind === SyncKind.device ? 'deviceSync' : 'eventSync']++;
    blockedNs += sy.get(i, 'end') - sy.get(i, 'start');
  }
  const agg = ctx.model.aggregateApis.filter((a) => /Synchronize$|signal_wait/i.test(a.name));
  if (n === 0 && agg.length > 0) {
    if (agg.reduce((s, a) => s + a.calls, 0) < SYNC_STORM_COUNT) return undefined;
    return totalsCannotTell(agg, 'which synchronisations follow copies, nor whether the GPU sat idle while the host waited');
  }
  // a memory finding: synchronisations that wait on copies, and some time the GPU sat idle in them
  if (n < SYNC_STORM_COUNT || afterCopy === 0 || afterCopyNs - gpuWorkNs <= 0) return undefined;
  const items = (ctx.model.cpuOps.get('aten::item') ?? 0) + (ctx.model.cpuOps.get('aten::tolist') ?? 0);
  const evidence = [
    `${n} blocking synchronisations (${counts.streamSync} stream, ${counts.deviceSync} device, ${counts.eventSync} event) held the host for ${formatNs(blockedNs)}, one every ${formatNs(ctx.spanNs / n)} on average`,
    `${afterCopy} of them come straight after a copy call (${formatNs(afterCopyNs)}): a copy from pageable memory, or without non_blocking=True, waits for the stream`,
  ];
  if (items > 0) evidence.push(`aten::item / tolist ran ${items}× — each reads a value back and waits for the device`);
  const saving = Math.max(0, afterCopyNs - gpuWorkNs);
  if (gpuWorkNs > 0)
    evidence.push(
      `during ${formatNs(gpuWorkNs)} of those waits the GPU was running the kernels and copies the host waited for: that work takes as long without the synchronisation (pageable-copy and exposed-copy judge the copies), so the saving is the ${formatNs(saving)} the GPU sat idle`,
    );
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'The host synchronises with the device after copies',
    count: n,
    bytes: null,
    timeNs: blockedNs,
    estimatedSavingNs: saving,
    basis: basisOf(r, afterCopyCalls),
    savingHow: 'the host time blocked in the synchronisations that directly follow a copy call, less the time the GPU spent running work during them',
    evidence,
    change:
      'Copy with non_blocking=True from pinned memory; accumulate losses and metrics on the device and call .item() / .cpu() every N steps, not every step; where order matters, record an event and wait on it instead of synchronising the stream or device.',
  };
};
