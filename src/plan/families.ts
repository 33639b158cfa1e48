/**
 * The architecture families gpumem reads, by the model_type a Hugging Face config.json names: each reads its own
 * field names and the defaults of its transformers config class, and says how its layers are built (norms, biases,
 * MLP, attention, experts). Sources: transformers' configuration_*.py and modeling_*.py of each family.
 */
import { Fields } from './config-fields.js';
import type { ArchTraits, MlaShape, ModelConfig, MoeShape } from './model-config.js';

type Shape = Omit<ModelConfig, 'name' | 'modelType'>;
type Family = (f: Fields) => Shape;

/** Activations transformers computes as a Python formula of several tensors rather than one kernel. */
const PYTHON_ACTIVATIONS = new Set(['gelu_new', 'gelu_fast', 'gelu_python', 'gelu_accurate', 'quick_gelu', 'gelu_10']);

const LLAMA_TRAITS: ArchTraits = {
  activation: 'silu',
  fusedActivation: true,
  qkvBias: false,
  outBias: false,
  mlpBias: false,
  lmHeadBias: false,
  normsPerLayer: 2,
  qkNorm: 'none',
  parallelResidual: false,
  fusedQkv: false,
  rotaryFraction: 1,
  attnSoftcap: undefined,
  finalSoftcap: undefined,
  extraParams: 0,
};

interface Names {
  hidden: readonly string[];
  layers: readonly string[];
  heads: readonly string[];
  kvHeads: readonly string[];
  intermediate: readonly string[];
  positions: readonly string[];
}
const HF: Names = {
  hidden: ['hidden_size'],
  layers: ['num_hidden_layers'],
  heads: ['num_attention_heads'],
  kvHeads: ['num_key_value_heads'],
  intermediate: ['intermediate_size'],
  positions: ['max_position_embeddings'],
};
const GPT2_NAMES: Names = {
  hidden: ['n_embd', 'hidden_size'],
  layers: ['n_layer', 'num_hidden_layers'],
  heads: ['n_head', 'num_attention_heads'],
  kvHeads: [],
  intermediate: ['n_inner'],
  positions: ['n_positions', 'n_ctx', 'max_position_embeddings'],
};

interface Options {
  names?: Names;
  traits?: Partial<ArchTraits>;
  /** The config class's hidden_act default and the field that holds it. */
  activation?: { field: readonly string[]; dflt: string };
  tiedDefault: boolean;
  /** head_dim when the config gives none (Gemma: 256, Qwen3: 128); otherwise hidden / heads. */
  headDimDefault?: number;
  kvHeads?: number;
  intermediate?: number;
  gated?: boolean;
  norm?: ModelConfig['norm'];
  positionEmbeddings?: boolean;
  dropout?: boolean;
  sliding?: { window: number | undefined; layers: number };
  mla?: MlaShape;
  moe?: MoeShape;
}

/** The dimensions every family has, under its own names. @throws BadInputError */
function dims(f: Fields, names: Names, headDimDefault: number | undefined) {
  const hidden = f.need(names.hidden);
  const layers = f.need(names.layers);
  const heads = f.need(names.heads);
  const vocab = f.need('vocab_size');
  const headDimField = f.int('head_dim') ?? headDimDefault;
  if (headDimField === undefined && hidden % heads !== 0)
    f.fail(`hidden_size (${hidden}) is not divisible by num_attention_heads (${heads}) and no head_dim is given`);
  return { hidden, layers, heads, vocab, headDim: headDimField ?? hidden / heads, maxPositions: f.int(names.positions) };
}

/** A decoder-only transformer from its dims and the family's options. @throws BadInputError */
function decoder(f: Fields, o: Options): Shape {
  const names = o.names ?? HF;
  const d = dims(f, names, o.headDimDefault);
  const activation = o.activation ? f.str(o.activation.field, o.activation.dflt) : (o.traits?.activation ?? 'silu');
  const traits: ArchTraits = { ...LLAMA_TRAITS, ...o.traits, activation, fusedActivation: !PYTHON_ACTIVATIONS.has(activation) };
  const gated = o.gated ?? true;
  const bias: ModelConfig['bias'] =
    traits.qkvBias && traits.outBias && traits.mlpBias ? 'all' : traits.qkvBias && !traits.outBias && !traits.mlpBias ? 'qkv' : 'none';
  return {
    family: gated ? 'llama' : 'gpt',
    hidden: d.hidden,
    layers: d.layers,
    heads: d.heads,
    // every config class transformers has defaults num_key_value_heads to the heads (multi-head): not a guess to say
    kvHeads: o.kvHeads ?? f.int(names.kvHeads) ?? d.heads,
    headDim: d.headDim,
    intermediate: o.intermediate ?? f.or(names.intermediate, 4 * d.hidden, '4 x the hidden size'),
    vocab: d.vocab,
    maxPositions: d.maxPositions,
    tiedEmbeddings: f.bool('tie_word_embeddings', o.tiedDefault),
    positionEmbeddings: o.positionEmbeddings ?? false,
    gatedMlp: gated,
    bias,
    norm: o.norm ?? 'rmsnorm',
    dropout: o.dropout ?? false,
    slidingWindow: o.sliding?.layers ? o.sliding.window : undefined,
    slidingLayers: o.sliding?.window ? o.sliding.layers : 0,
    mla: o.mla,
    moe: o.moe,
    arch: traits,
  };
}

/** Layers whose layer_types entry is sliding_attention (newer configs list every layer's kind). */
function slidingFromTypes(f: Fields): number | undefined {
  return f.list('layer_types', 'string')?.filter((t) => t === 'sliding_attention').length;
}

/** A window on every layer when the config sets one (Mistral, Phi-3, Starcoder2), `dflt` when the field is absent. */
function everyLayerWindow(f: Fields, dflt: number | undefined): { window: number | undefined; layers: number } {
  const window = 'sliding_window' in f.c ? f.int('sliding_window') : dflt;
  return { window, layers: window ? (slidingFromTypes(f) ?? f.need('num_hidden_layers')) : 0 };
}

/** Qwen2/Qwen3: a window only with use_sliding_window, on the layers from max_window_layers on. */
function qwenWindow(f: Fields): { window: number | undefined; layers: number } {
  if (!f.bool('use_sliding_window', false)) return { window: undefined, layers: 0 };
  const layers = f.need('num_hidden_layers');
  const from = f.int('max_window_layers', { min: 0 }) ?? 28;
  return { window: f.int('sliding_window') ?? 4096, layers: slidingFromTypes(f) ?? Math.max(0, layers - from) };
}

/** Which layers hold experts: Qwen-MoE's decoder_sparse_step and mlp_only_layers. */
function qwenMoe(f: Fields, shared: boolean): MoeShape | undefined {
  const experts = f.or('num_experts', 60, "Qwen1.5-MoE-A2.7B's, gpumem's default for the family", { min: 0 });
  if (experts <= 1) return undefined;
  const layers = f.need('num_hidden_layers');
  const step = f.int('decoder_sparse_step') ?? 1;
  const only = new Set(f.list('mlp_only_layers', 'number') ?? []);
  let moeLayers = 0;
  for (let i = 0; i < layers; i++) if (!only.has(i) && (i + 1) % step === 0) moeLayers++;
  const expert = f.or('moe_intermediate_size', shared ? 1408 : 768, shared ? "Qwen1.5-MoE-A2.7B's" : "Qwen3-30B-A3B's");
  const sharedWidth = shared ? (f.int('shared_expert_intermediate_size', { min: 0 }) ?? 5632) : 0;
  return {
    experts,
    expertsPerToken: f.or('num_experts_per_tok', shared ? 4 : 8, shared ? "Qwen1.5-MoE-A2.7B's" : "Qwen3-30B-A3B's"),
    sharedExperts: sharedWidth / expert,
    expertIntermediate: expert,
    denseLayers: layers - moeLayers,
    sharedExpertGate: shared && sharedWidth > 0,
    routerBias: false,
  };
}

/** DeepSeek-V2/V3: multi-head latent attention and routed experts after the first dense layers. */
function deepseek(v3: boolean): Family {
  return (f) => {
    const layers = f.need('num_hidden_layers');
    const nope = f.int('qk_nope_head_dim') ?? 128;
    const rope = f.int('qk_rope_head_dim') ?? 64;
    const mla: MlaShape = {
      kvLoraRank: f.int('kv_lora_rank') ?? 512,
      qLoraRank: 'q_lora_rank' in f.c ? f.int('q_lora_rank') : 1536,
      qkNopeHeadDim: nope,
      qkRopeHeadDim: rope,
      vHeadDim: f.int('v_head_dim') ?? 128,
    };
    const experts = f.or('n_routed_experts', v3 ? 256 : 160, v3 ? "DeepSeek-V3's" : "DeepSeek-V2's", { min: 0 });
    const first = f.int('first_k_dense_replace', { min: 0 }) ?? (v3 ? 3 : 0);
    if (first > layers) f.fail(`first_k_dense_replace (${first}) exceeds num_hidden_layers (${layers})`);
    const freq = f.int('moe_layer_freq') ?? 1;
    let moeLayers = 0;
    for (let i = first; i < layers; i++) if (i % freq === 0) moeLayers++;
    const moe: MoeShape | undefined =
      experts > 1
        ? {
            experts,
            expertsPerToken: f.or('num_experts_per_tok', v3 ? 8 : 6, v3 ? "DeepSeek-V3's" : "DeepSeek-V2's"),
            sharedExperts: f.int('n_shared_experts', { min: 0 }) ?? (v3 ? 1 : 2),
            expertIntermediate: f.or('moe_intermediate_size', v3 ? 2048 : 1536, v3 ? "DeepSeek-V3's" : "DeepSeek-V2's"),
            denseLayers: layers - moeLayers,
            sharedExpertGate: false,
            routerBias: v3,
          }
        : undefined;
    const heads = f.need('num_attention_heads');
    return decoder(f, { tiedDefault: false, headDimDefault: nope + rope, kvHeads: heads, mla, moe });
  };
}

/** Gemma 3's language model: Gemma3TextConfig's defaults under the fields a multimodal config leaves out. */
const GEMMA3_TEXT_DEFAULTS: Record<string, unknown> = {
  vocab_size: 262208,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: 256,
  max_position_embeddings: 131072,
};

function gemma3Text(f: Fields): Shape {
  const layers = f.need('num_hidden_layers');
  const window = f.int('sliding_window') ?? 4096;
  const pattern = f.int('sliding_window_pattern') ?? 6;
  const global = Math.floor(layers / pattern);
  return decoder(f, {
    tiedDefault: true,
    headDimDefault: 256,
    activation: { field: ['hidden_activation'], dflt: 'gelu_pytorch_tanh' },
    traits: {
      normsPerLayer: 4,
      qkNorm: 'head',
      normScaleFp32: true,
      attnSoftcap: f.real('attn_logit_softcapping', undefined),
      finalSoftcap: f.real('final_logit_softcapping', undefined),
    },
    sliding: { window, layers: slidingFromTypes(f) ?? layers - global },
  });
}

/** SigLIP's vision tower and Gemma 3's projector: parameters only. @throws BadInputError */
function gemma3Vision(v: Fields | undefined, textHidden: number): number {
  if (!v) return 0;
  const h = v.int('hidden_size') ?? 1152;
  const inter = v.int('intermediate_size') ?? 4304;
  const layers = v.int('num_hidden_layers') ?? 27;
  const patch = v.int('patch_size') ?? 14;
  const image = v.int('image_size') ?? 896;
  const channels = v.int('num_channels') ?? 3;
  const embeddings = channels * patch * patch * h + h + (image / patch) ** 2 * h;
  const layer = 2 * 2 * h + 4 * (h * h + h) + (h * inter + inter) + (inter * h + h);
  // multi_modal_projector: mm_input_projection_weight (vision x text) and mm_soft_emb_norm (RMSNorm of the vision width)
  return embeddings + layers * layer + 2 * h + h * textHidden + h;
}

/** Readers by model_type. */
export const FAMILIES: Record<string, Family> = {
  gpt2: (f) =>
    decoder(f, {
      names: GPT2_NAMES,
      tiedDefault: true,
      gated: false,
      norm: 'layernorm',
      positionEmbeddings: true,
      activation: { field: ['activation_function'], dflt: 'gelu_new' },
      traits: { qkvBias: true, outBias: true, mlpBias: true, fusedQkv: true, rotaryFraction: 0 },
      dropout: (f.real('resid_pdrop', 0.1) ?? 0) > 0,
    }),
  // not a Hugging Face model_type: gpumem's name for a GPT as Megatron-LM builds it (GPT-2's layout, grouped-query
  // attention allowed), for --framework megatron plans
  gpt3: (f) =>
    decoder(f, {
      names: { ...GPT2_NAMES, kvHeads: ['num_key_value_heads'] },
      tiedDefault: true,
      gated: false,
      norm: 'layernorm',
      positionEmbeddings: true,
      activation: { field: ['activation_function'], dflt: 'gelu' },
      traits: { qkvBias: true, outBias: true, mlpBias: true, fusedQkv: true, rotaryFraction: 0 },
      dropout: (f.real('resid_pdrop', 0.1) ?? 0) > 0,
    }),
  gpt_bigcode: (f) =>
    decoder(f, {
      names: GPT2_NAMES,
      tiedDefault: true,
      gated: false,
      norm: 'layernorm',
      positionEmbeddings: true,
      kvHeads: f.bool('multi_query', true) ? 1 : undefined,
      activation: { field: ['activation_function'], dflt: 'gelu_pytorch_tanh' },
      traits: { qkvBias: true, outBias: true, mlpBias: true, fusedQkv: true, rotaryFraction: 0 },
      dropout: (f.real('resid_pdrop', 0.1) ?? 0) > 0,
    }),
  gpt_neo: (f) =>
    decoder(f, {
      names: { ...HF, layers: ['num_layers'], heads: ['num_heads'] },
      tiedDefault: true,
      gated: false,
      norm: 'layernorm',
      positionEmbeddings: true,
      activation: { field: ['activation_function'], dflt: 'gelu_new' },
      traits: { outBias: true, mlpBias: true, rotaryFraction: 0 },
      dropout: (f.real('resid_dropout', 0) ?? 0) > 0,
    }),
  gpt_neox: (f) =>
    decoder(f, {
      tiedDefault: false,
      gated: false,
      norm: 'layernorm',
      activation: { field: ['hidden_act'], dflt: 'gelu' },
      traits: {
        ...(f.bool('attention_bias', true) ? { qkvBias: true, outBias: true } : {}),
        mlpBias: true,
        fusedQkv: true,
        parallelResidual: f.bool('use_parallel_residual', true),
        rotaryFraction: f.real('rotary_pct', 0.25, { min: 0, max: 1 }) ?? 0.25,
      },
      dropout: (f.real('hidden_dropout', 0) ?? 0) > 0,
    }),
  llama: (f) =>
    decoder(f, {
      tiedDefault: false,
      traits: { qkvBias: f.bool('attention_bias', false), outBias: f.bool('attention_bias', false), mlpBias: f.bool('mlp_bias', false) },
    }),
  mistral: (f) => decoder(f, { tiedDefault: false, sliding: everyLayerWindow(f, 4096) }),
  mixtral: (f) => {
    const experts = f.int('num_local_experts') ?? 8;
    const moe: MoeShape | undefined =
      experts > 1
        ? {
            experts,
            expertsPerToken: f.int('num_experts_per_tok') ?? 2,
            sharedExperts: 0,
            expertIntermediate: f.int('intermediate_size') ?? 14336,
            denseLayers: 0,
            sharedExpertGate: false,
            routerBias: false,
          }
        : undefined;
    return decoder(f, { tiedDefault: false, sliding: everyLayerWindow(f, undefined), moe });
  },
  qwen2: (f) => decoder(f, { tiedDefault: false, traits: { qkvBias: true }, sliding: qwenWindow(f) }),
  qwen2_moe: (f) => decoder(f, { tiedDefault: false, traits: { qkvBias: true }, sliding: qwenWindow(f), moe: qwenMoe(f, true) }),
  qwen3: (f) =>
    decoder(f, {
      tiedDefault: false,
      headDimDefault: 128,
      traits: { qkvBias: f.bool('attention_bias', false), qkNorm: 'head' },
      sliding: qwenWindow(f),
    }),
  qwen3_moe: (f) =>
    decoder(f, {
      tiedDefault: false,
      headDimDefault: 128,
      traits: { qkvBias: f.bool('attention_bias', false), qkNorm: 'head' },
      sliding: qwenWindow(f),
      moe: qwenMoe(f, false),
    }),
  gemma: (f) =>
    decoder(f, {
      tiedDefault: true,
      headDimDefault: 256,
      activation: { field: ['hidden_activation'], dflt: 'gelu_pytorch_tanh' },
      traits: { normScaleFp32: true },
    }),
  gemma2: (f) => {
    const layers = f.need('num_hidden_layers');
    return decoder(f, {
      tiedDefault: true,
      headDimDefault: 256,
      activation: { field: ['hidden_activation'], dflt: 'gelu_pytorch_tanh' },
      traits: {
        normsPerLayer: 4,
        normScaleFp32: true,
        attnSoftcap: f.real('attn_logit_softcapping', 50),
        finalSoftcap: f.real('final_logit_softcapping', 30),
      },
      // transformers: every even-numbered layer (0, 2, ...) attends within the window
      sliding: { window: f.int('sliding_window') ?? 4096, layers: slidingFromTypes(f) ?? Math.ceil(layers / 2) },
    });
  },
  gemma3_text: gemma3Text,
  gemma3: (f) => {
    const text = f.object('text_config');
    if (!text) return gemma3Text(f);
    const withDefaults = new Fields({ ...GEMMA3_TEXT_DEFAULTS, ...text.c }, text.file);
    const shape = gemma3Text(withDefaults);
    return { ...shape, arch: { ...shape.arch, extraParams: gemma3Vision(f.object('vision_config'), shape.hidden) } };
  },
  phi: (f) =>
    decoder(f, {
      tiedDefault: false,
      gated: false,
      norm: 'layernorm',
      activation: { field: ['hidden_act'], dflt: 'gelu_new' },
      traits: {
        qkvBias: true,
        outBias: true,
        mlpBias: true,
        lmHeadBias: true,
        normsPerLayer: 1,
        parallelResidual: true,
        rotaryFraction: f.real('partial_rotary_factor', 0.5, { min: 0, max: 1 }) ?? 0.5,
      },
      dropout: (f.real('resid_pdrop', 0) ?? 0) > 0,
    }),
  phi3: (f) =>
    decoder(f, {
      tiedDefault: false,
      traits: { fusedQkv: true, rotaryFraction: f.real('partial_rotary_factor', 1, { min: 0, max: 1 }) ?? 1 },
      sliding: everyLayerWindow(f, undefined),
      dropout: (f.real('resid_pdrop', 0) ?? 0) > 0,
    }),
  falcon: (f) => {
    const heads = f.need(['num_attention_heads', 'n_head']);
    const newArch = f.bool('new_decoder_architecture', false);
    const parallel = f.bool('parallel_attn', true);
    const bias = f.bool('bias', false);
    const kvHeads = newArch ? (f.int('num_kv_heads') ?? heads) : f.bool('multi_query', true) ? 1 : heads;
    return decoder(f, {
      names: { ...HF, layers: ['num_hidden_layers', 'n_layer'], heads: ['num_attention_heads', 'n_head'], intermediate: ['ffn_hidden_size'] },
      tiedDefault: true,
      gated: false,
      norm: 'layernorm',
      kvHeads,
      activation: { field: ['activation'], dflt: 'gelu' },
      traits: {
        qkvBias: bias,
        outBias: bias,
        mlpBias: bias,
        normsPerLayer: newArch ? (f.int('num_ln_in_parallel_attn') ?? 2) : parallel ? 1 : 2,
        parallelResidual: newArch || parallel,
        fusedQkv: true,
        rotaryFraction: f.bool('alibi', false) ? 0 : 1,
      },
      dropout: (f.real('hidden_dropout', 0) ?? 0) > 0,
    });
  },
  starcoder2: (f) => {
    const b = f.bool('use_bias', true);
    return decoder(f, {
      tiedDefault: true,
      gated: false,
      norm: 'layernorm',
      activation: { field: ['hidden_act'], dflt: 'gelu_pytorch_tanh' },
      traits: { qkvBias: b, outBias: b, mlpBias: b },
      sliding: everyLayerWindow(f, undefined),
      dropout: (f.real('residual_dropout', 0) ?? 0) > 0,
    });
  },
  deepseek_v2: deepseek(false),
  deepseek_v3: deepseek(true),
  olmo: (f) => decoder(f, { tiedDefault: false, norm: 'none', traits: { qkvBias: f.bool('attention_bias', false), outBias: f.bool('attention_bias', false) } }),
  olmo2: (f) => decoder(f, { tiedDefault: false, traits: { qkNorm: 'full' } }),
};

/** The model_types gpumem reads, sorted. */
export const MODEL_TYPES: readonly string[] = Object.keys(FAMILIES).sort();
