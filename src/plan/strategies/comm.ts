/** Communication buffers a multi-GPU run holds outside the tensors its step makes (overhead lines). */
import type { Line } from '../options.js';
import { CONSTANTS } from '../constants.js';

/** NCCL's (RCCL's) buffers for a run on more than one GPU, and `extra` bytes a strategy adds, named by `what`. */
export function commLines(gpus: number, extra = 0, what = ''): Line[] {
  if (gpus <= 1) return [];
  return [
    {
      name: 'communication buffers',
      bytes: CONSTANTS.ncclBuffersBytes.value + extra,
      note: `NCCL/RCCL buffers (${CONSTANTS.ncclBuffersBytes.source})${what}`,
      field: 'overheadBytes',
    },
  ];
}
