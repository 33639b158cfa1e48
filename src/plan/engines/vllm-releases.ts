/**
 * How each vLLM release sizes its KV cache at start-up: one row per range of releases that account the same way,
 * each field read in that release's code (vllm/worker/worker.py and model_runner.py for V0; vllm/v1/worker/
 * gpu_worker.py, gpu_model_runner.py, vllm/utils/mem_utils.py and vllm/v1/sample/ for V1; vllm/engine/arg_utils.py
 * for the defaults), at the tags (0.6.0 to 0.10.0) or, after 0.10.0, at the commit on main that made the change
 * (mapped to the first release by date). docs/plan-serving.md quotes each line.
 */

/**
 * What a release counts inside its budget besides the weights, the profiling peak and (0.21 on) the graphs. Every
 * baseline below is read with torch.cuda.mem_get_info after torch.cuda.set_device: that first runtime call creates
 * the CUDA primary context, so a baseline holds the context (vllm-project/vllm#12059) and only 'whole-device' counts it.
 */
export type NonTorch =
  /**
   * the device's whole use less PyTorch's allocated bytes after the profile and empty_cache: the CUDA context, what
   * loaded after it, NCCL, other processes (0.6.4 worker.py l.206-211; V1 0.8.0-0.9.0 gpu_worker.py)
   */
  | 'whole-device'
  /**
   * from a baseline taken after the CUDA context, before NCCL: NCCL inside, the context outside (0.6.0-0.6.3: a
   * free-memory difference from init_gpu_memory; 0.6.5, #10511: memory_profiling's baseline_memory_in_bytes; 0.7,
   * #12126: the MemorySnapshot of init_device, non-torch = (used - torch reserved) now less at the snapshot)
   */
  | 'before-nccl'
  /** from a snapshot taken after NCCL is initialised: only what appears during the profiling forward pass (0.11 on) */
  | 'after-nccl';

/** How the release's scheduler defaults max_num_batched_tokens and max_num_seqs for `vllm serve`. */
export type Scheduler =
  /** V0: max(max_model_len, 2048) tokens and 256 sequences; above 32768 tokens chunked prefill with `chunk` tokens */
  | { kind: 'v0'; chunk: number }
  /** V1 0.8.0-0.8.4: 8192 tokens where the device name holds h100 or h200, else 2048; 1024 sequences everywhere */
  | { kind: 'v1-name' }
  /** V1 from 0.8.5: by device memory (at least 70 GiB: 8192 and 1024; else 2048 and 256); `a100` excluded from 0.9 */
  | { kind: 'v1-memory'; excludeA100: boolean; b200Tier: boolean };

export interface VllmRelease {
  /** The first release the row holds for (until the next row's). */
  from: string;
  runner: 'V0' | 'V1';
  /** gpu_memory_utilization's default. */
  utilization: number;
  nonTorch: NonTorch;
  /** The profiling peak as the release measures it: PyTorch's allocated peak, or a free-memory difference (reserved). */
  activation: 'allocated' | 'reserved';
  scheduler: Scheduler;
  /**
   * The sampler warm-up's peak in fp32 vocabulary-sized copies per sampled request (the bf16 logits count half), and
   * whether the Triton top-k/top-p kernel's cached buffer (min(#SMs, requests) rows) comes with it.
   */
  sampler: { copies: number; tritonBuffer: boolean };
  /** CUDA graphs: captured after the cache (outside the budget), or estimated before sizing it (inside). */
  graphs: 'outside' | 'inside';
  /** Model Runner V2: the dense model_types it runs by default (its warm-up samples the bf16 logits only, ~0.5 copies; no graph estimate). */
  v2Dense: readonly string[] | 'all';
  /** Sliding windows: honoured per layer (the hybrid allocator), only where every layer has one, or Gemma 2 capped to 4096 tokens. */
  windows: 'per-layer' | 'uniform' | 'gemma2-capped';
  printedTokens: 'blocks' | 'concurrency';
}

const V0 = { runner: 'V0', utilization: 0.9, activation: 'allocated', graphs: 'outside', v2Dense: [], printedTokens: 'blocks' } as const;
const V1 = { runner: 'V1', utilization: 0.9, activation: 'allocated', graphs: 'outside', v2Dense: [], printedTokens: 'blocks', windows: 'per-layer' } as const;
const BY_MEMORY: Scheduler = { kind: 'v1-memory', excludeA100: true, b200Tier: false };

/** The releases gpumem follows, oldest first. */
export const VLLM_RELEASES: readonly VllmRelease[] = [
  // worker.py l.171 init_gpu_memory after set_device, before the distributed init; l.231 a free-memory difference
  // (reserved) after profile_run. The sampler (sampler.py: the fp32 logits, sort, masks, softmax, cumsum, scatter,
  // then log-softmax and probabilities) on the driver rank, whose block count the engine takes: 10 copies, as
  // vllm-project/vllm#10511's log printed it (a 1.26 GiB peak for 256 requests of a 128256-token vocabulary: 10.3
  // copies; the sort alone keeps about 8 alive, the rest not traced)
  {
    ...V0,
    from: '0.6',
    nonTorch: 'before-nccl',
    activation: 'reserved',
    scheduler: { kind: 'v0', chunk: 512 },
    sampler: { copies: 10, tritonBuffer: false },
    windows: 'gemma2-capped',
  },
  // worker.py l.201 allocated_bytes.all.peak, l.211 the device's whole use less PyTorch's (context included)
  { ...V0, from: '0.6.4', nonTorch: 'whole-device', scheduler: { kind: 'v0', chunk: 512 }, sampler: { copies: 10, tritonBuffer: false }, windows: 'uniform' },
  // #10511: baseline_memory_in_bytes taken in init_device, before NCCL; chunked prefill's default 2048 (#10544)
  { ...V0, from: '0.6.5', nonTorch: 'before-nccl', scheduler: { kind: 'v0', chunk: 2048 }, sampler: { copies: 10, tritonBuffer: false }, windows: 'uniform' },
  // V1: gpu_worker.py l.169-183 total x util - allocated peak - (device used - torch allocated); all-gathered logits on
  // every rank. The sort-based top-k/top-p (topk_topp_sampler.py) keeps 8 copies alive in the code (7 from #15478's
  // in-place cumulative sum); the start-ups published with their figures show about 10 (vllm-project/vllm#21348 at
  // 0.9.2: 8.11 GiB of KV cache), as V0's did: the planner follows the start-ups until the Triton kernel
  { ...V1, from: '0.8', nonTorch: 'whole-device', scheduler: { kind: 'v1-name' }, sampler: { copies: 10, tritonBuffer: false }, windows: 'uniform' },
  // #17073: the scheduler's defaults by device memory
  {
    ...V1,
    from: '0.8.5',
    nonTorch: 'whole-device',
    scheduler: { kind: 'v1-memory', excludeA100: false, b200Tier: false },
    sampler: { copies: 10, tritonBuffer: false },
    windows: 'uniform',
  },
  // #17885: A100s out of the large tier; the pip wheel has no FlashInfer (its sampler needs it): the native path
  { ...V1, from: '0.9', nonTorch: 'whole-device', scheduler: BY_MEMORY, sampler: { copies: 10, tritonBuffer: false }, windows: 'uniform' },
  // #19312: init_snapshot before init_worker_distributed_environment; #17996: the hybrid KV cache manager
  { ...V1, from: '0.9.1', nonTorch: 'before-nccl', scheduler: BY_MEMORY, sampler: { copies: 10, tritonBuffer: false } },
  // #25359: the snapshot after NCCL's initialisation; NCCL's buffers for large all-reduces appear in the profiling pass
  { ...V1, from: '0.11', nonTorch: 'after-nccl', scheduler: BY_MEMORY, sampler: { copies: 10, tritonBuffer: false } },
  // #33538: Triton top-k/top-p in place for 8 requests or more (3.5 copies and its cached buffer)
  { ...V1, from: '0.16', nonTorch: 'after-nccl', scheduler: BY_MEMORY, sampler: { copies: 3.5, tritonBuffer: true } },
  // #38284: utilisation 0.92, CUDA graphs estimated before sizing; #40376: FlashInfer's sampler on; #41069: printed tokens
  {
    ...V1,
    from: '0.21',
    utilization: 0.92,
    nonTorch: 'after-nccl',
    scheduler: BY_MEMORY,
    sampler: { copies: 3.5, tritonBuffer: true },
    graphs: 'inside',
    printedTokens: 'concurrency',
  },
  // Model Runner V2 by default for Qwen3 dense models (0.22), Llama and Mistral (0.23), every dense model (0.25, #44443)
  {
    ...V1,
    from: '0.22',
    utilization: 0.92,
    nonTorch: 'after-nccl',
    scheduler: BY_MEMORY,
    sampler: { copies: 3.5, tritonBuffer: true },
    graphs: 'inside',
    v2Dense: ['qwen3'],
    printedTokens: 'concurrency',
  },
  {
    ...V1,
    from: '0.23',
    utilization: 0.92,
    nonTorch: 'after-nccl',
    scheduler: BY_MEMORY,
    sampler: { copies: 3.5, tritonBuffer: true },
    graphs: 'inside',
    v2Dense: ['qwen3', 'llama', 'mistral'],
    printedTokens: 'concurrency',
  },
  {
    ...V1,
    from: '0.25',
    utilization: 0.92,
    nonTorch: 'after-nccl',
    scheduler: BY_MEMORY,
    sampler: { copies: 3.5, tritonBuffer: true },
    graphs: 'inside',
    v2Dense: 'all',
    printedTokens: 'concurrency',
  },
  // #49208: what the profile consumed read from the device's free memory (the allocator's slack counts)
  {
    ...V1,
    from: '0.26',
    utilization: 0.92,
    nonTorch: 'after-nccl',
    activation: 'reserved',
    scheduler: BY_MEMORY,
    sampler: { copies: 3.5, tritonBuffer: true },
    graphs: 'inside',
    v2Dense: 'all',
    printedTokens: 'concurrency',
  },
  // #51726: 16384 tokens on GPUs of 160 GiB or more (B200)
  {
    ...V1,
    from: '0.28',
    utilization: 0.92,
    nonTorch: 'after-nccl',
    activation: 'reserved',
    scheduler: { kind: 'v1-memory', excludeA100: true, b200Tier: true },
    sampler: { copies: 3.5, tritonBuffer: true },
    graphs: 'inside',
    v2Dense: 'all',
    printedTokens: 'concurrency',
  },
];
