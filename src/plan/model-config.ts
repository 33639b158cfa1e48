/**
 * A transformer's shape, normalised from a Hugging Face config.json (GPT-2, Llama, Mistral, Mixtral, Qwen2,
 * DeepSeek-V3 naming) or from the catalogue. Bad or contradictory configs are refused with the field named.
 */
import { BadInputError } from '../errors.js';

/** Multi-head latent attention (DeepSeek-V2/V3). */
export interface MlaShape {
  kvLoraRank: number;
  qLoraRank: number | undefined;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
}

/** Mixture of experts. */
export interface MoeShape {
  experts: number;
  expertsPerToken: number;
  sharedExperts: number;
  /** Intermediate size of one expert. */
  expertIntermediate: number;
  /** The first layers that are dense, not MoE (DeepSeek's first_k_dense_replace). */
  denseLayers: number;
}

export interface ModelConfig {
  name: string;
  /** The config's model_type (names the modules LoRA targets); undefined for catalogue models of no one config. */
  modelType?: string | undefined;
  family: 'gpt' | 'llama';
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Intermediate size of the dense MLP. */
  intermediate: number;
  vocab: number;
  maxPositions: number | undefined;
  tiedEmbeddings: boolean;
  /** Learned absolute position embeddings (GPT-2, GPT-3). */
  positionEmbeddings: boolean;
  /** Gated MLP (SwiGLU: gate, up, down) or plain (fc, proj). */
  gatedMlp: boolean;
  /** Biases on attention projections and MLP (GPT-2) or only on q, k, v (Qwen2). */
  bias: 'all' | 'qkv' | 'none';
  /** LayerNorm (weight + bias) or RMSNorm (weight). */
  norm: 'layernorm' | 'rmsnorm';
  /** Dropout in training (GPT-2 defaults to 0.1). */
  dropout: boolean;
  slidingWindow: number | undefined;
  mla: MlaShape | undefined;
  moe: MoeShape | undefined;
}

type Json = Record<string, unknown>;

function num(cfg: Json, file: string, names: string[], opts: { required?: boolean; min?: number } = {}): number | undefined {
  for (const n of names) {
    const v = cfg[n];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || !Number.isInteger(v))
      throw new BadInputError(`field "${n}" must be a whole number, got ${JSON.stringify(v)}`, file);
    if (v < (opts.min ?? 1)) throw new BadInputError(`field "${n}" must be at least ${opts.min ?? 1}, got ${v}`, file);
    if (v > 1e12) throw new BadInputError(`field "${n}" is implausibly large: ${v}`, file);
    return v;
  }
  if (opts.required) throw new BadInputError(`missing field "${names[0]}"${names.length > 1 ? ` (or ${names.slice(1).join(', ')})` : ''}`, file);
  return undefined;
}

/**
 * Normalises a parsed config.json.
 * @throws BadInputError naming the field and the constraint.
 */
export function normaliseConfig(cfg: unknown, file: string, name = 'custom'): ModelConfig {
  if (!cfg || typeof cfg !== 'object' || Array.isArray(cfg)) throw new BadInputError('a model config must be a JSON object', file);
  const c = cfg as Json;
  const type = typeof c.model_type === 'string' ? c.model_type : 'unknown';
  const gptLike = ['gpt2', 'gpt3', 'gpt_neo', 'gpt_bigcode', 'openai-gpt'].includes(type) || 'n_embd' in c;
  const hidden = num(c, file, ['hidden_size', 'n_embd', 'd_model'], { required: true })!;
  const layers = num(c, file, ['num_hidden_layers', 'n_layer', 'num_layers'], { required: true })!;
  const heads = num(c, file, ['num_attention_heads', 'n_head'], { required: true })!;
  const kvHeads = num(c, file, ['num_key_value_heads', 'num_kv_heads', 'multi_query_group_num']) ?? heads;
  const vocab = num(c, file, ['vocab_size'], { required: true })!;
  const headDimField = num(c, file, ['head_dim']);
  if (headDimField === undefined && hidden % heads !== 0) {
    throw new BadInputError(`hidden_size (${hidden}) is not divisible by num_attention_heads (${heads}) and no head_dim is given`, file);
  }
  const headDim = headDimField ?? hidden / heads;
  if (kvHeads > heads) throw new BadInputError(`num_key_value_heads (${kvHeads}) exceeds num_attention_heads (${heads})`, file);
  if (heads % kvHeads !== 0) throw new BadInputError(`num_attention_heads (${heads}) is not a multiple of num_key_value_heads (${kvHeads})`, file);
  const intermediate = num(c, file, ['intermediate_size', 'n_inner', 'ffn_dim']) ?? 4 * hidden;
  const tied = typeof c.tie_word_embeddings === 'boolean' ? c.tie_word_embeddings : gptLike;
  const window = num(c, file, ['sliding_window']);
  const useWindow = window !== undefined && c.use_sliding_window !== false;
  let mla: MlaShape | undefined;
  const kvLora = num(c, file, ['kv_lora_rank']);
  if (kvLora !== undefined) {
    const nope = num(c, file, ['qk_nope_head_dim'], { required: true })!;
    const rope = num(c, file, ['qk_rope_head_dim'], { required: true })!;
    mla = {
      kvLoraRank: kvLora,
      qLoraRank: num(c, file, ['q_lora_rank']),
      qkNopeHeadDim: nope,
      qkRopeHeadDim: rope,
      vHeadDim: num(c, file, ['v_head_dim']) ?? nope,
    };
  }
  let moe: MoeShape | undefined;
  const experts = num(c, file, ['num_local_experts', 'n_routed_experts', 'num_experts']);
  if (experts !== undefined && experts > 1) {
    const perTok = num(c, file, ['num_experts_per_tok', 'moe_top_k', 'top_k'], { required: true })!;
    if (perTok > experts) throw new BadInputError(`num_experts_per_tok (${perTok}) exceeds the number of experts (${experts})`, file);
    const first = num(c, file, ['first_k_dense_replace'], { min: 0 }) ?? 0;
    if (first > layers) throw new BadInputError(`first_k_dense_replace (${first}) exceeds num_hidden_layers (${layers})`, file);
    moe = {
      experts,
      expertsPerToken: perTok,
      sharedExperts: num(c, file, ['n_shared_experts', 'num_shared_experts'], { min: 0 }) ?? 0,
      expertIntermediate: num(c, file, ['moe_intermediate_size', 'expert_intermediate_size']) ?? intermediate,
      denseLayers: first,
    };
  }
  const qkvBias = c.attention_bias === true || type === 'qwen2';
  return {
    name,
    modelType: typeof c.model_type === 'string' ? c.model_type : undefined,
    family: gptLike ? 'gpt' : 'llama',
    hidden,
    layers,
    heads,
    kvHeads,
    headDim,
    intermediate,
    vocab,
    maxPositions: num(c, file, ['max_position_embeddings', 'n_positions', 'n_ctx']),
    tiedEmbeddings: tied,
    positionEmbeddings: gptLike,
    gatedMlp: !gptLike,
    bias: gptLike ? 'all' : qkvBias ? 'qkv' : 'none',
    norm: gptLike ? 'layernorm' : 'rmsnorm',
    dropout: gptLike ? (typeof c.resid_pdrop === 'number' ? c.resid_pdrop > 0 : true) : false,
    slidingWindow: useWindow ? window : undefined,
    mla,
    moe,
  };
}

/** Parses and normalises the text of a config.json (`where` names it in errors). @throws BadInputError */
export function parseConfigText(text: string, where: string, name: string): ModelConfig {
  if (text.length > 10 * 1024 * 1024) throw new BadInputError('a config.json larger than 10 MiB is not a model config', where);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new BadInputError(`not valid JSON: ${(e as Error).message}`, where);
  }
  return normaliseConfig(parsed, where, name);
}
