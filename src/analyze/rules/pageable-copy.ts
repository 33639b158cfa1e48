/** pageable-copy and d2h-to-pageable: recurring copies between the device and pageable host memory. */
import { formatBytes, formatNs } from '../../units.js';
import { Direction, DIRECTIONS, MemKind } from '../model.js';
import { basisOf, gbps, opsOf, RECURRING, severityOf, sizeList, sum, type RuleCheck } from './shared.js';

/** pageable-copy and d2h-to-pageable: recurring copies between the device and pageable host memory. */
export function pageableCopies(dir: number): RuleCheck {
  return (ctx) => {
    const c = ctx.model.copies;
    const all: number[] = [];
    let unsized = 0;
    for (let i = 0; i < c.length; i++) {
      if (c.get(i, 'dir') !== dir || ctx.hostKind[i] !== MemKind.pageable) continue;
      if (Number.isNaN(c.get(i, 'bytes'))) unsized++;
      else all.push(i);
    }
    const unknown = ctx.model.hostKindUnknown;
    if (all.length === 0 && unsized > 0) return { notApplicable: `${unsized} pageable ${DIRECTIONS[dir]} copies, none with a recorded size` };
    if (all.length === 0) return unknown > 0 && ctx.copyCount > 0 ? { notApplicable: `${unknown} host copies of unknown host memory kind` } : undefined;
    if (!Number.isFinite(ctx.pinnedRate(dir)))
      return { notApplicable: `no pinned copy rate to price the ${all.length} pageable ${DIRECTIONS[dir]} copies against (${ctx.rates.source})` };
    const bySize = new Map<number, number>();
    for (const i of all) bySize.set(c.get(i, 'bytes'), (bySize.get(c.get(i, 'bytes')) ?? 0) + 1);
    const idx = all.filter((i) => bySize.get(c.get(i, 'bytes'))! >= RECURRING);
    if (idx.length === 0) return undefined;
    const recurring = new Map([...bySize].filter(([, k]) => k >= RECURRING));
    const timeNs = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
    const bytes = sum(idx, (i) => c.get(i, 'bytes'));
    const saving = sum(idx, (i) => Math.max(0, c.get(i, 'end') - c.get(i, 'start') - ctx.pinnedTimeNs(i)));
    const largest = idx.reduce((a, i) => (c.get(i, 'bytes') > c.get(a, 'bytes') ? i : a), idx[0]!);
    const name = DIRECTIONS[dir];
    const evidence = [
      `${idx.length} ${name} copies ${dir === Direction.HtoD ? 'from' : 'to'} pageable host memory in ${recurring.size} recurring sizes: ${sizeList(recurring)}`,
      `${formatNs(timeNs)} on the copy engine for ${formatBytes(bytes)}; the largest (${formatBytes(c.get(largest, 'bytes'))}) ran at ${gbps(c.get(largest, 'bytes'), c.get(largest, 'end') - c.get(largest, 'start'))} against ${ctx.pinnedRate(dir)} GB/s from pinned memory`,
    ];
    const ops = opsOf(ctx, idx);
    if (ops) evidence.push(`issued by ${ops}`);
    const once = all.length - idx.length;
    if (unsized > 0) evidence.push(`${unsized} pageable ${name} copies without a recorded size are not counted`);
    if (once > 0) evidence.push(`${once} one-time pageable ${name} copies (sizes seen fewer than ${RECURRING} times: setup or model loading) are not counted`);
    return {
      severity: severityOf(saving, ctx.spanNs),
      title: dir === Direction.HtoD ? 'Recurring copies from pageable host memory' : 'Recurring device-to-host copies into pageable memory',
      count: idx.length,
      bytes,
      timeNs,
      estimatedSavingNs: saving,
      basis: basisOf(c, idx),
      savingHow: `each copy's measured time minus what it takes from pinned memory: ${ctx.floorText(dir)} plus its bytes at ${ctx.pinnedRate(dir)} GB/s`,
      evidence,
      change:
        dir === Direction.HtoD
          ? `Allocate the host buffers pinned (DataLoader(pin_memory=True), tensor.pin_memory(), ${ctx.api('cudaHostAlloc', 'hipHostMalloc')}, or gpumem's PinnedResource) and copy with non_blocking=True: a pageable copy is staged through a driver bounce buffer and blocks the host. Data that arrives in ordinary memory (decoded, read from disk) can go through pinned chunks filled on several threads (gpumem rt.upload) instead of the driver's one-threaded bounce buffer.`
          : 'Copy into a pinned buffer allocated once (torch.empty(..., pin_memory=True) and .copy_(x, non_blocking=True)), then wait on an event before reading it: a copy into pageable memory is staged and synchronous. Results needed in ordinary memory can come back through pinned chunks drained on several threads (gpumem rt.download).',
    };
  };
}
