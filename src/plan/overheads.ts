/** What a GPU holds besides the model: the context, communication buffers, a fragmentation allowance. */
import type { Line, PlanOptions } from './options.js';

const MiB = 1024 * 1024;

/** Overhead lines: context, communication buffers, fragmentation allowance. */
export function overheads(o: PlanOptions, localParamsCount: number, weightBytesPer: number, largestLayerParams: number, peak: number): Line[] {
  const lines: Line[] = [
    {
      name: 'CUDA/HIP context and library workspaces',
      bytes: 512 * MiB,
      note: 'estimate: driver context, cuBLAS/hipBLASLt and NCCL/RCCL init; read yours as total - free at start (gpumem info)',
      field: 'overheadBytes',
    },
  ];
  if (o.parallel.gpus > 1) {
    let comm = 256 * MiB;
    let note = 'NCCL/RCCL buffers';
    if (o.mode === 'train') {
      if (o.parallel.zero >= 3) {
        comm += 2 * largestLayerParams * weightBytesPer;
        note += ' + all-gather of the two largest layers in flight (ZeRO-3/FSDP prefetch)';
      } else {
        comm += 2 * 25 * MiB;
        note += ' + two 25 MiB gradient buckets (DDP)';
      }
    }
    lines.push({ name: 'communication buffers', bytes: comm, note, field: 'overheadBytes' });
  }
  const frag = Math.round(peak * o.fragmentation);
  lines.push({
    name: 'fragmentation allowance',
    bytes: frag,
    note: `${Math.round(o.fragmentation * 100)}% of the estimate for the caching allocator's split blocks (gpumem pool replay measures yours)`,
    field: 'overheadBytes',
  });
  void localParamsCount;
  return lines;
}
