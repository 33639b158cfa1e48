/**
 * Models and GPUs gpumem knows by name. Model shapes are the values of each model's published config.json; GPU
 * memory is what the runtime reports where it was measured (H200 here), otherwise the vendor's nominal capacity.
 */
import { BadInputError } from '../errors.js';
import { normaliseConfig, type ModelConfig } from './model-config.js';

const llama = (
  h: number,
  l: number,
  heads: number,
  kv: number,
  f: number,
  vocab: number,
  ctx: number,
  extra: Record<string, unknown> = {},
): Record<string, unknown> => ({
  model_type: 'llama',
  hidden_size: h,
  num_hidden_layers: l,
  num_attention_heads: heads,
  num_key_value_heads: kv,
  intermediate_size: f,
  vocab_size: vocab,
  max_position_embeddings: ctx,
  tie_word_embeddings: false,
  ...extra,
});
const gpt = (h: number, l: number, heads: number, ctx: number, vocab = 50257): Record<string, unknown> => ({
  model_type: 'gpt2',
  n_embd: h,
  n_layer: l,
  n_head: heads,
  n_positions: ctx,
  vocab_size: vocab,
  tie_word_embeddings: true,
});

/** Model configs by catalogue name (lowercase, hyphens). */
export const MODEL_CONFIGS: Record<string, Record<string, unknown>> = {
  'gpt-2': gpt(768, 12, 12, 1024),
  'gpt-2-medium': gpt(1024, 24, 16, 1024),
  'gpt-2-large': gpt(1280, 36, 20, 1024),
  'gpt-2-xl': gpt(1600, 48, 25, 1024),
  'gpt-3-175b': { ...gpt(12288, 96, 96, 2048), model_type: 'gpt3', resid_pdrop: 0 },
  'llama-2-7b': llama(4096, 32, 32, 32, 11008, 32000, 4096),
  'llama-2-13b': llama(5120, 40, 40, 40, 13824, 32000, 4096),
  'llama-2-70b': llama(8192, 80, 64, 8, 28672, 32000, 4096),
  'llama-3-8b': llama(4096, 32, 32, 8, 14336, 128256, 8192),
  'llama-3-70b': llama(8192, 80, 64, 8, 28672, 128256, 8192),
  'llama-3.1-8b': llama(4096, 32, 32, 8, 14336, 128256, 131072),
  'llama-3.1-70b': llama(8192, 80, 64, 8, 28672, 128256, 131072),
  'llama-3.1-405b': llama(16384, 126, 128, 8, 53248, 128256, 131072),
  'llama-3.2-1b': llama(2048, 16, 32, 8, 8192, 128256, 131072, { tie_word_embeddings: true }),
  'llama-3.2-3b': llama(3072, 28, 24, 8, 8192, 128256, 131072, { tie_word_embeddings: true }),
  'mistral-7b': { ...llama(4096, 32, 32, 8, 14336, 32000, 32768), model_type: 'mistral', sliding_window: 4096 },
  'mixtral-8x7b': { ...llama(4096, 32, 32, 8, 14336, 32000, 32768), model_type: 'mixtral', num_local_experts: 8, num_experts_per_tok: 2 },
  'mixtral-8x22b': { ...llama(6144, 56, 48, 8, 16384, 32768, 65536), model_type: 'mixtral', num_local_experts: 8, num_experts_per_tok: 2 },
  'qwen2.5-7b': { ...llama(3584, 28, 28, 4, 18944, 152064, 131072), model_type: 'qwen2' },
  'qwen2.5-72b': { ...llama(8192, 80, 64, 8, 29568, 152064, 131072), model_type: 'qwen2' },
  'deepseek-v3': {
    ...llama(7168, 61, 128, 128, 18432, 129280, 163840),
    model_type: 'deepseek_v3',
    kv_lora_rank: 512,
    q_lora_rank: 1536,
    qk_nope_head_dim: 128,
    qk_rope_head_dim: 64,
    v_head_dim: 128,
    n_routed_experts: 256,
    num_experts_per_tok: 8,
    n_shared_experts: 1,
    moe_intermediate_size: 2048,
    first_k_dense_replace: 3,
  },
};

/** A GPU's memory and bandwidths. */
export interface GpuSpec {
  name: string;
  vendor: 'nvidia' | 'amd';
  memoryBytes: number;
  /** How memoryBytes was obtained. */
  memorySource: string;
  /** Device memory bandwidth, GB/s (vendor figure). */
  memoryGBps: number;
  /** Host link bandwidth one way, GB/s (theoretical PCIe after encoding, or the vendor's host link). */
  hostLinkGBps: number;
  /** GPU-to-GPU bandwidth one way, GB/s (vendor figure), where the part has a scale-up link. */
  peerGBps?: number;
}

const GB = 1e9;
export const GPUS: Record<string, GpuSpec> = {
  h200: {
    name: 'NVIDIA H200',
    vendor: 'nvidia',
    memoryBytes: 150_109_880_320,
    memorySource: 'cudaMemGetInfo total, measured on an H200 (139.8 GiB)',
    memoryGBps: 4800,
    hostLinkGBps: 63,
    peerGBps: 450,
  },
  h100: {
    name: 'NVIDIA H100 SXM 80GB',
    vendor: 'nvidia',
    memoryBytes: 80 * GB,
    memorySource: 'nominal 80 GB',
    memoryGBps: 3350,
    hostLinkGBps: 63,
    peerGBps: 450,
  },
  'h100-pcie': {
    name: 'NVIDIA H100 PCIe 80GB',
    vendor: 'nvidia',
    memoryBytes: 80 * GB,
    memorySource: 'nominal 80 GB',
    memoryGBps: 2000,
    hostLinkGBps: 63,
    peerGBps: 300,
  },
  'a100-80': {
    name: 'NVIDIA A100 80GB',
    vendor: 'nvidia',
    memoryBytes: 80 * GB,
    memorySource: 'nominal 80 GB',
    memoryGBps: 2039,
    hostLinkGBps: 31.5,
    peerGBps: 300,
  },
  'a100-40': {
    name: 'NVIDIA A100 40GB',
    vendor: 'nvidia',
    memoryBytes: Math.round(39.5 * 2 ** 30),
    memorySource: 'total memory as vLLM printed it on an A100 40GB (39.50 GiB; vllm-project/vllm#12330)',
    memoryGBps: 1555,
    hostLinkGBps: 31.5,
    peerGBps: 300,
  },
  l40s: { name: 'NVIDIA L40S', vendor: 'nvidia', memoryBytes: 48 * GB, memorySource: 'nominal 48 GB', memoryGBps: 864, hostLinkGBps: 31.5 },
  'rtx-4090': { name: 'NVIDIA GeForce RTX 4090', vendor: 'nvidia', memoryBytes: 24 * GB, memorySource: 'nominal 24 GB', memoryGBps: 1008, hostLinkGBps: 31.5 },
  mi300x: {
    name: 'AMD Instinct MI300X',
    vendor: 'amd',
    memoryBytes: 192 * GB,
    memorySource: 'nominal 192 GB',
    memoryGBps: 5300,
    hostLinkGBps: 63,
    peerGBps: 64,
  },
  mi325x: {
    name: 'AMD Instinct MI325X',
    vendor: 'amd',
    memoryBytes: 256 * GB,
    memorySource: 'nominal 256 GB',
    memoryGBps: 6000,
    hostLinkGBps: 63,
    peerGBps: 64,
  },
  mi250x: {
    name: 'AMD Instinct MI250X (one GCD, as the runtime shows it)',
    vendor: 'amd',
    memoryBytes: 64 * GB,
    memorySource: 'nominal 128 GB per package, 64 GB per GCD',
    memoryGBps: 1600,
    hostLinkGBps: 31.5,
    peerGBps: 50,
  },
  mi210: { name: 'AMD Instinct MI210', vendor: 'amd', memoryBytes: 64 * GB, memorySource: 'nominal 64 GB', memoryGBps: 1600, hostLinkGBps: 31.5 },
};

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest known names to `name`. */
export function closest(name: string, known: readonly string[], n = 3): string[] {
  const q = name.toLowerCase();
  return [...known].sort((x, y) => distance(q, x) - distance(q, y) || x.localeCompare(y)).slice(0, n);
}

/** A catalogue model. @throws BadInputError listing the closest names. */
export function catalogueModel(name: string): ModelConfig {
  const key = name.toLowerCase();
  const cfg = MODEL_CONFIGS[key];
  if (!cfg)
    throw new BadInputError(
      `unknown model "${name}": not a config.json path nor a catalogue name. Closest: ${closest(key, Object.keys(MODEL_CONFIGS)).join(', ')}`,
    );
  return normaliseConfig(cfg, `catalogue:${key}`, key);
}

/** A catalogue GPU. @throws BadInputError listing the closest names. */
export function catalogueGpu(name: string): GpuSpec {
  const key = name.toLowerCase().replace(/\s+/g, '-');
  const g = GPUS[key];
  if (!g) throw new BadInputError(`unknown GPU "${name}". Closest: ${closest(key, Object.keys(GPUS)).join(', ')}`);
  return g;
}
