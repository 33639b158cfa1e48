/**
 * Hugging Face generate release by release (`--engine hf --engine-version`, a transformers release): what a decode
 * step holds besides the cache it grows, and which logits the prefill makes. Read in transformers'
 * generation/utils.py and models/llama/modeling_llama.py at the releases named below.
 */
import { type EngineVersion, parseVersion, releaseRow } from './versions.js';

export interface GenerateRelease {
  from: string;
  /**
   * The previous step's cache stays alive through the next forward, so a step ends holding two caches: before 4.36 the
   * cache is a tuple of (key, value) per layer, each torch.cat making a new tensor while generate's model_kwargs still
   * hold the old tuple; 4.36 to 4.41 wrap that tuple in a DynamicCache each step (from_legacy_cache) and hand a tuple
   * back (to_legacy_cache), so the old tensors stay referenced the same way. Pull request #30536 (4.42) keeps one
   * DynamicCache from start to end: each layer's copy replaces the old one at once.
   */
  heldCache: boolean;
  /**
   * The previous step's outputs (its logits) are still bound while the next forward runs (greedy_search's `outputs`
   * reassigned only when the call returns); #30536 (4.42) drops them first. The prefill's are the large ones.
   */
  heldOutputs: boolean;
  /**
   * The prefill's logits: of every prompt token, in the model's dtype and then upcast (LlamaForCausalLM.forward's
   * `logits = logits.float()`), or of the last token only (pull request #31292, 4.45: generate passes
   * num_logits_to_keep = 1 and the upcast happens on the last token's row).
   */
  promptLogits: 'all' | 'last';
  /** StaticCache exists (transformers 4.38 on: `--kv-cache static` describes no run of an earlier release). */
  staticCache: boolean;
  /**
   * The model_types whose every attention layer builds its own rotary embedding with cos and sin tables for all
   * max_position_embeddings positions at init, in the default dtype (the one from_pretrained loads in): buffers that
   * stay on the GPU beside the weights. LlamaRotaryEmbedding's `_set_cos_sin_cache(seq_len=max_position_embeddings,
   * ..., dtype=torch.get_default_dtype())` came with RoPE scaling (#24653, 4.31; v4.37.2's modeling_llama.py
   * L134-136, as #29299 quotes it); GPT-NeoX took the same form in #25830 (4.33); Mistral (4.34), Mixtral (4.36),
   * Phi (4.36, the rotary part of the head) and Qwen2 (4.37) copy it. Llama computes cos and sin in each forward from
   * 4.38 (#27931, static cache); Mistral keeps its tables (now built from an int64 arange), and Mixtral, Qwen2 and
   * Qwen2-MoE (4.40: "Copied from transformers.models.mistral.modeling_mistral.MistralRotaryEmbedding with
   * Mistral->Qwen2Moe", its `_set_cos_sin_cache(seq_len=max_position_embeddings, ...)` at init) copy Mistral's through
   * 4.41. GPT-NeoX's and Phi's 4.38-4.41 modelling and every family's 4.42-4.44 were not read: planned without tables.
   * A fused AutoAWQ attention replaces the attention modules, tables and all.
   */
  ropeTables: readonly string[];
  /**
   * SDPA gets grouped key/value heads as they are when no mask is passed (transformers/integrations/sdpa_attention.py
   * use_gqa_in_sdpa: enable_gqa with torch 2.5 on and attention_mask None; #39412, 4.54); before it sdpa_attention_forward
   * repeats them to every head (repeat_kv) at every call.
   */
  gqaInSdpa: boolean;
  says: string;
}

export const HF_GENERATE = { label: 'transformers', oldest: '4.30', newest: '5.17' } as const;

export const GENERATE_RELEASES: readonly GenerateRelease[] = [
  {
    from: '4.30',
    heldCache: true,
    heldOutputs: true,
    promptLogits: 'all',
    staticCache: false,
    ropeTables: [],
    gqaInSdpa: false,
    says: "transformers < 4.42: the previous step's cache and outputs held through each forward, the prompt's logits upcast to fp32",
  },
  {
    from: '4.31',
    heldCache: true,
    heldOutputs: true,
    promptLogits: 'all',
    staticCache: false,
    ropeTables: ['llama'],
    gqaInSdpa: false,
    says: "transformers < 4.42: the previous step's cache and outputs held through each forward, the prompt's logits upcast to fp32; 4.31-4.37: each attention layer's rotary cos/sin tables (#24653)",
  },
  {
    from: '4.33',
    heldCache: true,
    heldOutputs: true,
    promptLogits: 'all',
    staticCache: false,
    ropeTables: ['llama', 'gpt_neox', 'mistral', 'mixtral', 'phi', 'qwen2'],
    gqaInSdpa: false,
    says: "transformers < 4.42: the previous step's cache and outputs held through each forward, the prompt's logits upcast to fp32; 4.31-4.37: each attention layer's rotary cos/sin tables (#24653, #25830)",
  },
  {
    from: '4.38',
    heldCache: true,
    heldOutputs: true,
    promptLogits: 'all',
    staticCache: true,
    ropeTables: ['mistral', 'mixtral', 'qwen2', 'qwen2_moe'],
    gqaInSdpa: false,
    says: "transformers < 4.42: the previous step's cache and outputs held through each forward, the prompt's logits upcast to fp32; 4.38-4.41: Mistral's rotary cos/sin tables in each attention layer, and its copies'",
  },
  {
    from: '4.42',
    heldCache: false,
    heldOutputs: false,
    promptLogits: 'all',
    staticCache: true,
    ropeTables: [],
    gqaInSdpa: false,
    says: "transformers 4.42-4.44: one DynamicCache throughout (#30536), the prompt's logits upcast to fp32",
  },
  {
    from: '4.45',
    heldCache: false,
    heldOutputs: false,
    promptLogits: 'last',
    staticCache: true,
    ropeTables: [],
    gqaInSdpa: false,
    says: "transformers 4.45-4.53: the last token's logits only (#31292)",
  },
  {
    from: '4.54',
    heldCache: false,
    heldOutputs: false,
    promptLogits: 'last',
    staticCache: true,
    ropeTables: [],
    gqaInSdpa: true,
    says: "transformers 4.54 on: the last token's logits only (#31292), SDPA over the grouped heads without a mask (#39412)",
  },
];

/**
 * The transformers release a generate plan follows: "4.35" or "4.36.2"; undefined gives the newest.
 * @throws InvalidArgumentError for a malformed version or one outside the releases gpumem follows.
 */
export const parseTransformersVersion = (text: string | undefined): EngineVersion => parseVersion(HF_GENERATE, text);

/** The row of GENERATE_RELEASES that release `text` (undefined: the newest) follows. */
export const generateRelease = (text: string | undefined): GenerateRelease => releaseRow(GENERATE_RELEASES, parseTransformersVersion(text));
