/**
 * Models gpumem knows by name: the values of each model's published config.json. GPUs live in ../catalogue/gpus.ts.
 */
import { BadInputError } from '../errors.js';
import { closest } from '../catalogue/gpus.js';
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
  // GPT-3's layout is GPT-2's (its alternating sparse attention aside), trained without dropout
  'gpt-3-175b': { ...gpt(12288, 96, 96, 2048), resid_pdrop: 0 },
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
  'deepseek-v2-lite': {
    ...llama(2048, 27, 16, 16, 10944, 102400, 163840),
    model_type: 'deepseek_v2',
    kv_lora_rank: 512,
    q_lora_rank: null,
    qk_nope_head_dim: 128,
    qk_rope_head_dim: 64,
    v_head_dim: 128,
    n_routed_experts: 64,
    num_experts_per_tok: 6,
    n_shared_experts: 2,
    moe_intermediate_size: 1408,
    first_k_dense_replace: 1,
  },
  'pythia-1.4b': { ...llama(2048, 24, 16, 16, 8192, 50304, 2048), model_type: 'gpt_neox', rotary_pct: 0.25, use_parallel_residual: true },
  santacoder: { ...gpt(2048, 24, 16, 2048, 49280), model_type: 'gpt_bigcode', multi_query: true, n_inner: 8192 },
  'falcon-7b': {
    model_type: 'falcon',
    hidden_size: 4544,
    num_hidden_layers: 32,
    num_attention_heads: 71,
    vocab_size: 65024,
    multi_query: true,
    new_decoder_architecture: false,
    parallel_attn: true,
    bias: false,
  },
  'phi-2': { ...llama(2560, 32, 32, 32, 10240, 51200, 2048), model_type: 'phi', partial_rotary_factor: 0.4, hidden_act: 'gelu_new', resid_pdrop: 0.1 },
  'phi-3-mini': { ...llama(3072, 32, 32, 32, 8192, 32064, 4096), model_type: 'phi3', sliding_window: 2047 },
  'gemma-7b': { ...llama(3072, 28, 16, 16, 24576, 256000, 8192, { tie_word_embeddings: true }), model_type: 'gemma', head_dim: 256 },
  'gemma-2-9b': {
    ...llama(3584, 42, 16, 8, 14336, 256000, 8192, { tie_word_embeddings: true }),
    model_type: 'gemma2',
    head_dim: 256,
    sliding_window: 4096,
    attn_logit_softcapping: 50,
    final_logit_softcapping: 30,
    query_pre_attn_scalar: 256,
  },
  'gemma-3-1b': {
    ...llama(1152, 26, 4, 1, 6912, 262144, 32768, { tie_word_embeddings: true }),
    model_type: 'gemma3_text',
    head_dim: 256,
    sliding_window: 512,
    sliding_window_pattern: 6,
  },
  'qwen3-8b': { ...llama(4096, 36, 32, 8, 12288, 151936, 40960), model_type: 'qwen3', head_dim: 128 },
  'qwen3-30b-a3b': {
    ...llama(2048, 48, 32, 4, 6144, 151936, 40960),
    model_type: 'qwen3_moe',
    head_dim: 128,
    num_experts: 128,
    num_experts_per_tok: 8,
    moe_intermediate_size: 768,
  },
  'qwen1.5-moe-a2.7b': {
    ...llama(2048, 24, 16, 16, 5632, 151936, 8192),
    model_type: 'qwen2_moe',
    num_experts: 60,
    num_experts_per_tok: 4,
    moe_intermediate_size: 1408,
    shared_expert_intermediate_size: 5632,
  },
  'starcoder2-3b': { ...llama(3072, 30, 24, 2, 12288, 49152, 16384), model_type: 'starcoder2', tie_word_embeddings: true, sliding_window: 4096 },
  'olmo-7b': { ...llama(4096, 32, 32, 32, 11008, 50304, 2048), model_type: 'olmo' },
  'olmo-2-7b': { ...llama(4096, 32, 32, 32, 11008, 100352, 4096), model_type: 'olmo2' },
};

/** A name only a path can be: relative (./, ../), absolute, from home (~), or of more than two parts. */
const PATH_LIKE = /^(\.{1,2}[\\/]|[\\/]|~|[A-Za-z]:[\\/])|[\\/][^\\/]*[\\/]/;
/** owner/name: a Hugging Face id, or a relative folder that is not there. */
const HUB_ID = /^[\w.-]+\/[\w.-]+$/;

/**
 * A catalogue model; the name was not found as a file or folder (the caller looked) when this is reached.
 * @throws BadInputError saying that a path is not there, that a Hub id is not fetched, or listing the closest names.
 */
export function catalogueModel(name: string): ModelConfig {
  const key = name.toLowerCase();
  const cfg = MODEL_CONFIGS[key];
  if (!cfg) {
    if (PATH_LIKE.test(name)) throw new BadInputError('no such file or folder (a model is a config.json, a folder holding one, or a catalogue name)', name);
    const close = `Closest: ${closest(key, Object.keys(MODEL_CONFIGS)).join(', ')}`;
    if (HUB_ID.test(name))
      throw new BadInputError(
        `no such file or folder, and gpumem does not fetch "${name}" from the Hugging Face Hub: give its config.json or the folder holding it. ${close}`,
        name,
      );
    throw new BadInputError(`unknown model "${name}": not a config.json path nor a catalogue name. ${close}`);
  }
  return normaliseConfig(cfg, `catalogue:${key}`, key);
}
