/**
 * A transformer's shape, normalised from a Hugging Face config.json or from the catalogue. The config's model_type
 * picks the family (families.ts) whose layout the counts follow; an unknown model_type is refused with the list of
 * those gpumem reads, never guessed. Bad or contradictory configs are refused with the field named.
 */
import { BadInputError } from '../errors.js';
import { Fields, type Json } from './config-fields.js';
import { FAMILIES, MODEL_TYPES } from './families.js';
import { type CheckpointQuantization, readQuantizationConfig } from './quantization-config.js';

/** Multi-head latent attention (DeepSeek-V2/V3). */
export interface MlaShape {
  kvLoraRank: number;
  /** Rank of the query's low-rank projection; undefined where the query is projected directly (DeepSeek-V2-Lite). */
  qLoraRank: number | undefined;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
}

/** Mixture of experts. */
export interface MoeShape {
  experts: number;
  expertsPerToken: number;
  /**
   * Width of the always-on shared expert(s) in units of one routed expert (DeepSeek: n_shared_experts; Qwen2-MoE:
   * shared_expert_intermediate_size / moe_intermediate_size; 0 without).
   */
  sharedExperts: number;
  /** Intermediate size of one expert. */
  expertIntermediate: number;
  /** Layers with a dense MLP instead of experts (DeepSeek's first_k_dense_replace, Qwen-MoE's mlp_only_layers). */
  denseLayers: number;
  /** A sigmoid gate on the shared expert's output (Qwen2-MoE's shared_expert_gate). */
  sharedExpertGate: boolean;
  /** A per-expert bias in the router (DeepSeek-V3's e_score_correction_bias). */
  routerBias: boolean;
}

/** What sets one family's layers apart from another's, as transformers builds them. */
export interface ArchTraits {
  /** hidden_act (or activation_function) as the config names it. */
  activation: string;
  /**
   * The activation runs as one kernel that keeps only its input for the backward pass (torch's gelu, SiLU, ReLU);
   * false for GPT-2's gelu_new, which transformers computes as a Python formula of several tensors.
   */
  fusedActivation: boolean;
  qkvBias: boolean;
  outBias: boolean;
  mlpBias: boolean;
  /** A bias on the output layer (Phi). */
  lmHeadBias: boolean;
  /** Norms in each layer (2 in most; 4 in Gemma 2/3 and OLMo-2's pre and post norms; 1 in Phi and Falcon-7B). */
  normsPerLayer: number;
  /** RMSNorm of queries and keys: per head (Qwen3, Gemma 3) or over the whole projection (OLMo-2). */
  qkNorm: 'none' | 'head' | 'full';
  /** Attention and MLP read the same input and add into one residual (GPT-NeoX, Phi, Falcon). */
  parallelResidual: boolean;
  /** One fused q,k,v projection whose output attention keeps a view of (GPT-2, GPT-NeoX, Falcon, BigCode, Phi-3). */
  fusedQkv: boolean;
  /** Share of each head's dimensions rotated by RoPE (GPT-NeoX 0.25, Phi-2 0.4); 0 with learned positions. */
  rotaryFraction: number;
  /** Gemma 2's attn_logit_softcapping: tanh on the attention scores, which no fused SDPA kernel applies. */
  attnSoftcap: number | undefined;
  /** Gemma 2's final_logit_softcapping: tanh on the logits. */
  finalSoftcap: number | undefined;
  /** Parameters outside the language model (Gemma 3's vision tower and projector): weights only, no activations. */
  extraParams: number;
  /**
   * RMSNorm scales by (1 + weight) in fp32 and casts after (Gemma's GemmaRMSNorm.forward: `output * (1.0 +
   * self.weight.float())`, then `type_as(x)`), where Llama's casts first and scales in the input's dtype.
   */
  normScaleFp32?: boolean | undefined;
  /**
   * A fused gate/up projection run as two linear layers (LitGPT's LLaMAMLP fc_1 and fc_2 for Phi-3): each adapted
   * separately, with its own dropout. Undefined: as the family names it.
   */
  separateGateUp?: boolean | undefined;
}

export interface ModelConfig {
  name: string;
  /** The config's model_type: the family whose layout the counts follow. */
  modelType: string;
  /** The activation archetype: GPT-2's block (LayerNorm, plain MLP) or Llama's (RMSNorm, gated MLP). */
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
  /** Learned absolute position embeddings (GPT-2, GPT-3, BigCode). */
  positionEmbeddings: boolean;
  /** Gated MLP (SwiGLU, GeGLU: gate, up, down) or plain (fc, proj). */
  gatedMlp: boolean;
  /** Biases: on every projection, on q, k, v only (Qwen2), or none. See arch for the detail. */
  bias: 'all' | 'qkv' | 'none';
  /** LayerNorm (weight + bias), RMSNorm (weight), or a LayerNorm without parameters (OLMo-1). */
  norm: 'layernorm' | 'rmsnorm' | 'none';
  /** Dropout in training (GPT-2 defaults to 0.1). */
  dropout: boolean;
  /** The sliding window of the layers that have one. */
  slidingWindow: number | undefined;
  /** How many layers attend within slidingWindow (all in Mistral, half in Gemma 2, five in six in Gemma 3). */
  slidingLayers: number;
  mla: MlaShape | undefined;
  moe: MoeShape | undefined;
  arch: ArchTraits;
  /** The fields a config.json left out that its family needs, each with the default taken (the plan's notes say them). */
  defaults?: readonly string[];
  /** The checkpoint's quantization_config as a --weights scheme (the default weights of an inference plan). */
  quantization?: CheckpointQuantization | undefined;
}

/**
 * Normalises a parsed config.json.
 * @throws BadInputError naming the field and the constraint, or, for an unknown model_type, listing the known ones.
 */
export function normaliseConfig(cfg: unknown, file: string, name = 'custom'): ModelConfig {
  if (!cfg || typeof cfg !== 'object' || Array.isArray(cfg)) throw new BadInputError('a model config must be a JSON object', file);
  const f = new Fields(cfg as Json, file);
  const type = f.c.model_type;
  if (typeof type !== 'string') return f.fail(`no "model_type": gpumem reads the layout from it and does not guess one. Known: ${MODEL_TYPES.join(', ')}`);
  const family = FAMILIES[type];
  if (!family) return f.fail(`unknown model_type "${type}": gpumem reads ${MODEL_TYPES.join(', ')} and does not guess the layout of others`);
  const m = family(f);
  checkShape(m, f);
  // the catalogue's entries hold what their families need; a file's gaps are said in the plan
  const quantization = readQuantizationConfig(f.c.quantization_config, file, f.defaults);
  const said = f.defaults.length > 0 && !file.startsWith('catalogue:') ? { defaults: f.defaults.map((d) => `${file}: ${d}`) } : {};
  return { name, modelType: type, ...m, ...said, ...(quantization ? { quantization } : {}) };
}

/** Constraints every family shares. @throws BadInputError */
function checkShape(m: Omit<ModelConfig, 'name' | 'modelType'>, f: Fields): void {
  if (m.kvHeads > m.heads) f.fail(`num_key_value_heads (${m.kvHeads}) exceeds num_attention_heads (${m.heads})`);
  if (m.heads % m.kvHeads !== 0) f.fail(`num_attention_heads (${m.heads}) is not a multiple of num_key_value_heads (${m.kvHeads})`);
  if (m.moe && m.moe.expertsPerToken > m.moe.experts) f.fail(`num_experts_per_tok (${m.moe.expertsPerToken}) exceeds the number of experts (${m.moe.experts})`);
  if (m.slidingLayers > m.layers) f.fail(`more sliding-window layers (${m.slidingLayers}) than layers (${m.layers})`);
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
