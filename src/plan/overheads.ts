/**
 * What a GPU holds besides the tensors of the step: the CUDA context and what a PyTorch process loads with its first
 * step (the serving engines count theirs themselves: engines/), and for inference the flat allowance for the caching
 * allocator and the communication buffers.
 */
import { CONSTANTS } from './constants.js';
import type { Line, PlanOptions } from './options.js';

/** The context lines of a PyTorch process: the CUDA context, and cuBLAS handles and kernels loaded by the first step. */
export function contextLines(o: PlanOptions): Line[] {
  const lines: Line[] = [
    {
      name: 'CUDA context',
      bytes: CONSTANTS.cudaContextBytes.value,
      note: 'total - free before any allocation, measured by gpumem info on an H200 (CUDA 13); read yours the same way',
      field: 'overheadBytes',
    },
  ];
  // vLLM and SGLang count what they hold outside PyTorch themselves (engines/)
  if (o.mode === 'train' || o.engine === 'hf')
    lines.push({
      name: 'cuBLAS handles and kernels loaded by the first step',
      bytes: CONSTANTS.loadedKernelsBytes.value,
      note: 'outside the caching allocator, after one PyTorch step on an H200 (torch 2.11, CUDA 13), less the context',
      field: 'overheadBytes',
    });
  return lines;
}

/** What cudaMalloc can hand PyTorch's allocator on a GPU of `capacityBytes`: less the context and the loaded kernels. */
export const allocatorCapacity = (capacityBytes: number | undefined): number | undefined =>
  capacityBytes === undefined ? undefined : capacityBytes - CONSTANTS.cudaContextBytes.value - CONSTANTS.loadedKernelsBytes.value;
