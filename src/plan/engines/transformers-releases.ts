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
    says: "transformers < 4.42: the previous step's cache and outputs held through each forward, the prompt's logits upcast to fp32",
  },
  {
    from: '4.38',
    heldCache: true,
    heldOutputs: true,
    promptLogits: 'all',
    staticCache: true,
    says: "transformers < 4.42: the previous step's cache and outputs held through each forward, the prompt's logits upcast to fp32",
  },
  {
    from: '4.42',
    heldCache: false,
    heldOutputs: false,
    promptLogits: 'all',
    staticCache: true,
    says: "transformers 4.42-4.44: one DynamicCache throughout (#30536), the prompt's logits upcast to fp32",
  },
  {
    from: '4.45',
    heldCache: false,
    heldOutputs: false,
    promptLogits: 'last',
    staticCache: true,
    says: "transformers 4.45 on: the last token's logits only (#31292)",
  },
];

/**
 * The transformers release a generate plan follows: "4.35" or "4.36.2"; undefined gives the newest.
 * @throws InvalidArgumentError for a malformed version or one outside the releases gpumem follows.
 */
export const parseTransformersVersion = (text: string | undefined): EngineVersion => parseVersion(HF_GENERATE, text);

/** The row of GENERATE_RELEASES that release `text` (undefined: the newest) follows. */
export const generateRelease = (text: string | undefined): GenerateRelease => releaseRow(GENERATE_RELEASES, parseTransformersVersion(text));
