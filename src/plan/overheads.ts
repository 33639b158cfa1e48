/**
 * What a GPU holds besides the tensors: the CUDA context, communication buffers, and what PyTorch's caching
 * allocator keeps reserved without a tensor in it at the peak.
 */
import type { Line, PlanOptions } from './options.js';

const MiB = 1024 * 1024;

/**
 * The CUDA context of one process: total - free before anything is allocated, as gpumem info measured it on one
 * H200 (CUDA 13.0, driver 580.159, 2026-12-01: 150,109,880,320 - 149,557,477,376 bytes; docs/evidence/
 * 2026-12-01-1x-h200/info.json). Most of it is the local memory the driver reserves for every thread the GPU can
 * run at once (1 KiB of stack each by default), so a GPU with fewer SMs holds somewhat less.
 */
export const CUDA_CONTEXT_BYTES = 552_402_944;

/**
 * What a PyTorch training process holds outside its caching allocator beyond the bare context once a step has run:
 * cuBLAS and cuBLASLt handles, the kernel modules loaded on first use (measured with
 * benchmarks/pytorch/record_context.py on one H200, torch 2.11, CUDA 13.0, 2026-12-01: 804,061,184 bytes outside the
 * allocator after a Llama-style training step, less the 552,402,944-byte context; docs/evidence/2026-12-01-1x-h200/
 * context/). A separate probe, not a fit on any accuracy row.
 */
export const LOADED_KERNELS_BYTES = 804_061_184 - 552_402_944;

/**
 * The cuBLAS workspace PyTorch allocates through its caching allocator, one per handle and stream (a training step
 * on one GPU uses one): 32 MiB on Hopper and later, 8 MiB + 128 KiB before (CUBLAS_WORKSPACE_CONFIG's default in
 * aten/src/ATen/cuda/CublasHandlePool.cpp); cuBLASLt shares it (TORCH_CUBLASLT_UNIFIED_WORKSPACE, on by default).
 * A tensor to the allocator: it counts in max_memory_allocated().
 */
export const CUBLAS_WORKSPACE_BYTES = 32 * MiB;

/**
 * Overhead lines: the context, communication buffers, and the caching allocator's cached blocks: `cached` when a
 * replay of the step through the allocator model measured them (step-replay.ts), else the flat allowance
 * (o.fragmentation of the peak, 5% by default).
 */
export function overheads(o: PlanOptions, _localParams: number, weightBytesPer: number, largestLayerParams: number, peak: number, cached?: number): Line[] {
  const lines: Line[] = [
    {
      name: 'CUDA context',
      bytes: CUDA_CONTEXT_BYTES,
      note: 'total - free before any allocation, measured by gpumem info on an H200 (CUDA 13); read yours the same way',
      field: 'overheadBytes',
    },
  ];
  // vLLM and SGLang count what they hold outside PyTorch themselves (vllm.ts, sglang.ts)
  if (o.mode === 'train' || o.engine === 'hf')
    lines.push({
      name: 'cuBLAS handles and kernels loaded by the first step',
      bytes: LOADED_KERNELS_BYTES,
      note: 'outside the caching allocator, after one PyTorch step on an H200 (torch 2.11, CUDA 13), less the context',
      field: 'overheadBytes',
    });
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
  if (cached !== undefined && o.fragmentation === undefined)
    lines.push({
      name: 'caching allocator: reserved, no tensor in it',
      bytes: cached,
      note: "PyTorch's caching allocator replayed through the step (its 2 MiB and 20 MiB segments, blocks split and never merged across segments): what max_memory_reserved() holds above the tensors",
      field: 'overheadBytes',
      cached: true,
    });
  else {
    const share = o.fragmentation ?? 0.05;
    lines.push({
      name: 'fragmentation allowance',
      bytes: Math.round(peak * share),
      note: `${Math.round(share * 100)}% of the estimate for the caching allocator's split blocks (gpumem pool replay measures yours)`,
      field: 'overheadBytes',
      cached: true,
    });
  }
  return lines;
}
