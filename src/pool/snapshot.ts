/** The pool's state in the JSON shape of PyTorch's memory snapshot (torch.cuda.memory._snapshot()). */
import { firstBlock, type Segment } from './blocks.js';
import type { TraceEntry } from './trace-ring.js';

/** The segments and their blocks, as a snapshot lists them. */
export function snapshotSegments(segments: Iterable<Segment>, device: number): SnapshotSegment[] {
  const out: SnapshotSegment[] = [];
  for (const seg of segments) {
    const blocks: SnapshotBlock[] = [];
    let allocated = 0;
    let active = 0;
    let requested = 0;
    for (let b = firstBlock(seg); b; b = b.next) {
      const state = b.allocated ? 'active_allocated' : b.events !== null ? 'active_pending_free' : 'inactive';
      blocks.push({ address: b.address, size: b.size, requested_size: b.requested, state, stream: b.stream });
      if (b.allocated) {
        allocated += b.size;
        requested += b.requested;
      }
      if (b.allocated || b.events !== null) active += b.size;
    }
    out.push({
      device,
      address: seg.address,
      total_size: seg.size,
      allocated_size: allocated,
      active_size: active,
      requested_size: requested,
      stream: seg.stream,
      segment_type: seg.small ? 'small' : 'large',
      is_expandable: seg.growable,
      mapped_size: seg.growable ? seg.mapped : seg.size,
      blocks,
    });
  }
  return out;
}

/** One block in a snapshot. */
export interface SnapshotBlock {
  address: number;
  size: number;
  requested_size: number;
  state: 'active_allocated' | 'active_pending_free' | 'inactive';
  stream: number;
}

/** One segment in a snapshot (PyTorch's field names). */
export interface SnapshotSegment {
  device: number;
  address: number;
  total_size: number;
  allocated_size: number;
  active_size: number;
  requested_size: number;
  stream: number;
  segment_type: 'small' | 'large';
  is_expandable: boolean;
  /** Physical bytes behind the segment: all of it for a fixed segment, the mapped granules of a growable one. */
  mapped_size: number;
  blocks: SnapshotBlock[];
}

export interface PoolSnapshot {
  segments: SnapshotSegment[];
  device_traces: TraceEntry[][];
  allocator: string;
}
