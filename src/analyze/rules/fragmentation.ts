/**
 * fragmentation: reserved memory that allocations cannot use, judged on each GPU by itself (memory stranded on one
 * GPU cannot serve another), and advice that fits the allocator settings the snapshot recorded. Three measures, the
 * largest counts: free blocks stranded inside segments that hold live blocks (a snapshot's segments), peak reserved
 * beyond peak allocated (an allocator's totals over time), and the peak reserved memory another pool configuration
 * would not have needed when the same allocations are replayed against it (pool replay's what-ifs of a snapshot).
 */
import { formatBytes, MiB, GiB } from '../../units.js';
import { Api, type PoolWhatIf, type TraceModel } from '../model.js';
import { pct, type RuleCheck } from './shared.js';

/** One GPU's figures: from a snapshot's segments and from the caching allocator's totals over time (Kineto). */
interface DeviceMemory {
  device: number;
  segments: number;
  reserved: number;
  allocated: number;
  /** Free blocks inside segments that also hold live blocks. */
  stranded: number;
  strandedBlocks: number;
  peakReserved: number;
  peakAllocated: number;
  /** Pool replay's best configuration for this GPU, and the peak reserved it saves against the recording allocator. */
  whatIf: { name: string; description: string; peakReserved: number; recorded: number; saved: number } | undefined;
  /** Memory reserved and unusable by the snapshot's segments or the allocator's totals (the what-if aside). */
  unusable: number;
  /** What the allocator holds and cannot use, by the largest of the measures, and which one it is. */
  held: number;
  how: string;
}

/** The configuration of a what-if that reserves least at its peak, and what it saves. */
function bestOf(w: PoolWhatIf): DeviceMemory['whatIf'] {
  const best = [...w.configurations].sort((a, b) => a.peakReservedBytes - b.peakReservedBytes)[0];
  if (!best) return undefined;
  return { ...best, peakReserved: best.peakReservedBytes, recorded: w.recordedPeakReservedBytes, saved: w.recordedPeakReservedBytes - best.peakReservedBytes };
}

function perDevice(m: TraceModel): DeviceMemory[] {
  const by = new Map<number, DeviceMemory>();
  const of = (device: number): DeviceMemory => {
    let d = by.get(device);
    if (!d)
      by.set(
        device,
        (d = {
          device,
          segments: 0,
          reserved: 0,
          allocated: 0,
          stranded: 0,
          strandedBlocks: 0,
          peakReserved: 0,
          peakAllocated: 0,
          whatIf: undefined,
          unusable: 0,
          held: 0,
          how: '',
        }),
      );
    return d;
  };
  for (const s of m.segments) {
    const d = of(s.device);
    d.segments++;
    d.reserved += s.totalBytes;
    d.allocated += s.allocatedBytes;
    d.stranded += s.inactiveSplitBytes;
    d.strandedBlocks += s.inactiveSplitBlocks;
  }
  const a = m.allocs;
  for (let i = 0; i < a.length; i++) {
    const r = a.get(i, 'reserved');
    const al = a.get(i, 'allocated');
    if (Number.isNaN(r) && Number.isNaN(al)) continue;
    const d = of(a.get(i, 'device'));
    if (r > d.peakReserved) d.peakReserved = r;
    if (al > d.peakAllocated) d.peakAllocated = al;
  }
  for (const w of m.whatIfs) of(w.device).whatIf = bestOf(w);
  for (const d of by.values()) heldBy(d);
  return [...by.values()].sort((x, y) => x.device - y.device);
}

/** Sets what a GPU's allocator holds and cannot use, by the largest measure. */
function heldBy(d: DeviceMemory): void {
  if (d.reserved > 0) {
    d.held = d.stranded;
    d.how = 'free blocks stranded inside segments that hold live blocks';
  }
  if (d.peakReserved > 0 && d.peakAllocated > 0 && d.peakReserved - d.peakAllocated > d.held) {
    d.held = d.peakReserved - d.peakAllocated;
    d.how = 'peak reserved beyond peak allocated';
  }
  d.unusable = d.held;
  if (d.whatIf && d.whatIf.saved > d.held) {
    d.held = d.whatIf.saved;
    d.how = `peak reserved that ${d.whatIf.name} would not have needed for the same allocations (pool replay)`;
  }
}

/**
 * A GPU's stranded memory matters at 64 MiB and either a tenth of what it reserves or a GiB; what a replayed
 * configuration saves matters at 64 MiB and a twentieth of the recorded peak (a replay measures the peak itself).
 */
function matters(d: DeviceMemory): boolean {
  const w = d.whatIf;
  if (w && w.saved >= 64 * MiB && (w.saved >= 0.05 * w.recorded || w.saved >= GiB)) return true;
  return d.unusable >= 64 * MiB && (d.unusable >= 0.1 * Math.max(d.reserved, d.peakReserved) || d.unusable >= GiB);
}

/** The change to suggest, given what the recording allocator already had on and what the replay found best. */
function changeFor(m: TraceModel, best: DeviceMemory['whatIf']): string {
  const replay = 'compare configurations on this very trace with `gpumem pool replay SNAPSHOT`';
  const s = m.allocatorSettings;
  const maxSplit = typeof s?.max_split_size === 'number' && s.max_split_size > 0 && s.max_split_size < 2 ** 53 ? s.max_split_size : undefined;
  if (best && /max-split/.test(best.name) && maxSplit === undefined)
    return `Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:200 so that large free blocks are not split for small requests (the replay's ${best.name}); ${replay}.`;
  if (m.expandableSegments)
    return `Expandable segments were already on (the snapshot's allocator_settings${m.segments.some((x) => x.expandable) ? ' and segments' : ''} say so), so what is stranded is free space between live blocks of mapped ranges: ${
      maxSplit === undefined ? 'set max_split_size_mb so that large free blocks are not split for small requests, ' : ''
    }free or reuse long-lived tensors in a steady order (allocate the largest first), or call torch.cuda.empty_cache() between phases to unmap what is free; ${replay}.`;
  return `Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or use gpumem's growable pool) so segments grow in place instead of splitting${
    maxSplit === undefined ? '' : ` (max_split_size_mb is already ${Math.round(maxSplit / MiB)})`
  }; ${replay}.`;
}

/** Each GPU's figures as evidence lines. */
function evidenceOf(gpus: readonly DeviceMemory[]): string[] {
  const several = gpus.length > 1;
  const name = (d: DeviceMemory): string => (several ? `GPU ${d.device}: ` : '');
  const evidence: string[] = [];
  for (const d of gpus) {
    if (d.segments > 0 && d.reserved > 0) {
      evidence.push(
        `${name(d)}${d.segments} segments reserve ${formatBytes(d.reserved)} for ${formatBytes(d.allocated)} allocated (${pct(d.allocated, d.reserved)}) when the snapshot was taken`,
      );
      if (d.stranded > 0)
        evidence.push(
          `${name(d)}${formatBytes(d.stranded)} sits in ${d.strandedBlocks} free blocks inside segments that also hold live blocks: split blocks no request of another size can use`,
        );
    }
    if (d.peakReserved > 0 && d.peakAllocated > 0)
      evidence.push(
        `${name(d)}the caching allocator peaked at ${formatBytes(d.peakReserved)} reserved for ${formatBytes(d.peakAllocated)} allocated (${pct(d.peakAllocated, d.peakReserved)})`,
      );
    const w = d.whatIf;
    if (w && w.saved > 0)
      evidence.push(
        `${name(d)}pool replay of the snapshot's allocations: ${w.name} peaks at ${formatBytes(w.peakReserved)} reserved, ${formatBytes(w.saved)} (${pct(w.saved, w.recorded)}) below the ${formatBytes(w.recorded)} the recording allocator reserved at its peak`,
      );
  }
  return evidence;
}

/** Why fragmentation cannot be judged: the trace says what was allocated, not what the allocator reserved. */
function cannotJudge(m: TraceModel): { notApplicable: string } {
  let calls = 0;
  for (let i = 0; i < m.runtime.length; i++) {
    const api = m.runtime.get(i, 'api');
    if (api === Api.malloc || api === Api.free || api === Api.mallocAsync || api === Api.freeAsync) calls++;
  }
  const what = m.allocs.length > 0 ? `${m.allocs.length} allocation events` : calls > 0 ? `${calls} allocation and free calls` : undefined;
  if (!what) return { notApplicable: 'the trace did not record allocations' };
  return {
    notApplicable: `the trace records ${what} but not what the allocator reserved around them (no segments, no reserved totals): fragmentation needs a PyTorch memory snapshot or a profiler trace with profile_memory`,
  };
}

export const fragmentation: RuleCheck = (ctx) => {
  const m = ctx.model;
  const gpus = perDevice(m);
  if (m.ooms === 0 && !gpus.some((d) => d.segments > 0 || d.peakReserved > 0 || d.whatIf)) return cannotJudge(m);
  const bad = gpus.filter(matters);
  if (m.ooms === 0 && bad.length === 0) return undefined;
  const evidence = evidenceOf(gpus);
  if (m.ooms > 0) evidence.push(`${m.ooms} out-of-memory events`);
  // the worst GPU's figure, never a sum: memory stranded on one GPU cannot serve an allocation on another
  const worst = [...(bad.length > 0 ? bad : gpus)].sort((x, y) => y.held - x.held)[0];
  const held = worst?.held ?? 0;
  const several = gpus.length > 1;
  const where = several && bad.length > 0 ? ` on GPU ${bad.map((d) => d.device).join(', GPU ')}` : '';
  return {
    severity: m.ooms > 0 ? 'high' : held >= GiB ? 'medium' : 'low',
    title: `The allocator holds memory it cannot use${where}`,
    count: worst?.strandedBlocks || m.ooms,
    bytes: held,
    timeNs: 0,
    estimatedSavingNs: 0,
    savingHow: `memory, not time: ${formatBytes(held)} of ${worst?.how || 'memory reserved and unusable'}${several && worst ? ` on GPU ${worst.device}, the most of any GPU (each GPU's figure is its own; they do not add up)` : ''}`,
    evidence,
    change: changeFor(m, worst && worst.held > worst.unusable ? worst.whatIf : undefined),
  };
};
