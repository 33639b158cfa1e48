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
