/**
 * Every fixed number the planner uses, with where it comes from: code at a commit, a paper's table, a measured run, or
 * named an estimate (a figure no source gives, with the reason for its value). Engine releases keep their numbers in
 * their own tables (engines/); bytes-per-value rules are in precision.ts.
 */

export interface Constant {
  value: number;
  source: string;
  /** True where no source gives the figure: the planner's own estimate. */
  estimate?: boolean;
}

const MiB = 2 ** 20;

export const CONSTANTS = {
  /**
   * The CUDA context of one process: total - free before anything is allocated, as gpumem info measured it on one
   * H200 (CUDA 13.0, driver 580.159, 2026-12-01: 150,109,880,320 - 149,557,477,376 bytes). Most of it is the local
   * memory the driver reserves for every thread the GPU can run at once, so a GPU with fewer SMs holds somewhat less.
   */
  cudaContextBytes: { value: 552_402_944, source: 'measured by gpumem info on one H200, 2026-12-01 (docs/evidence/2026-12-01-1x-h200/info.json)' },
  /**
   * What a PyTorch process holds outside its caching allocator beyond the bare context once a step has run: cuBLAS and
   * cuBLASLt handles, the kernel modules loaded on first use (804,061,184 bytes outside the allocator after a
   * Llama-style training step, less the context).
   */
  loadedKernelsBytes: {
    value: 804_061_184 - 552_402_944,
    source: 'measured with benchmarks/pytorch/record_context.py on one H200, torch 2.11, CUDA 13.0, 2026-12-01 (docs/evidence/2026-12-01-1x-h200/context/)',
  },
  /** The cuBLAS workspace PyTorch allocates through its caching allocator, one per handle and stream (Hopper and later). */
  cublasWorkspaceBytes: {
    value: 32 * MiB,
    source: "CUBLAS_WORKSPACE_CONFIG's default in aten/src/ATen/cuda/CublasHandlePool.cpp (32 MiB from sm_90, 8 MiB + 128 KiB before); cuBLASLt shares it",
  },
  /** NCCL's (RCCL's) own buffers per process in a multi-GPU run. */
  ncclBuffersBytes: {
    value: 256 * MiB,
    source: 'estimate: NCCL allocates NCCL_BUFFSIZE (4 MiB) per channel, protocol and peer; tens of channels on NVLink machines',
    estimate: true,
  },
  /** DistributedDataParallel's gradient bucket. */
  ddpBucketBytes: { value: 25 * MiB, source: 'bucket_cap_mb=25, torch/nn/parallel/distributed.py' },
  /** The flat allowance for the caching allocator where no replay is made (inference, Megatron-LM). */
  fragmentationShare: {
    value: 0.05,
    source: 'estimate: what the caching allocator holds above the tensors where the step is not replayed (gpumem pool replay measures yours)',
    estimate: true,
  },
  /** torchtune's chunked cross-entropy. */
  chunkedLossChunks: { value: 8, source: 'CEWithChunkedOutputLoss(num_output_chunks=8), torchtune/modules/loss/ce_chunked_output_loss.py' },
  /** LitGPT's lm_head_chunk_size in finetune/lora.py, full.py and adapter.py. */
  litgptChunkTokens: { value: 128, source: '`model(input_ids, lm_head_chunk_size=128)`, Lightning-AI/litgpt finetune/lora.py at 00af8b0' },
  /** Layers whose saved tensors torchtune's activation offloading leaves on the GPU while it streams the rest. */
  offloadLayersOnGpu: {
    value: 2,
    source: 'estimate: torchtune OffloadActivations overlaps the copy of one layer with the next (torchtune/training/_activation_offloading.py)',
    estimate: true,
  },
} satisfies Record<string, Constant>;
