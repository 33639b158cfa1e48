/**
 * Hugging Face generate as a program: the weights in the order the model makes them (and, for a format quantised as
 * it loads, the largest weight's quantisation transient: the load moment), then the prefill (the training program's
 * block ops under torch.no_grad(), block.ts `inference`: each layer's tensors over the prompt freed where the modules
 * let go of them, its keys and values copied into the cache, its repeated key/value heads), the sampling of each
 * token (the last token's fp32 logits, min_new_tokens' processors), then the decode steps (each layer's cache grown
 * by concatenation: a copy one token longer, the old one freed; a paged cache grows in place; a static or AutoAWQ
 * fused cache is made at its full length and written in place). The walk reads
 * the load, the last decode step (the cache at its longest) and the prefill; the replay runs every step through the
 * caching allocator, where the growing copies leave reserved memory above allocated.
 */
import { formatCount } from '../../units.js';
import { linearModules } from '../adapters.js';
import type { ModelConfig } from '../model-config.js';
import { fusedAttention, type InferOptions } from '../options.js';
import type { GenerateRelease } from '../engines/transformers-releases.js';
import type { ServedWeights } from '../quantised-weights.js';
import type { BlockContext } from './block-context.js';
import { blockForward } from './block.js';
import type { MatmulExtras } from './linear.js';
import type { H, Mem, Runs, Tag } from './mem.js';
import { Tags } from './mem.js';

/** Decode steps the allocator replay runs one by one; a longer generation is replayed in strides. */
export const REPLAYED_STEPS = 1024;

/** What the program needs of a generate run, worked out once (infer.ts). */
export interface GenerateSetup {
  m: ModelConfig;
  o: InferOptions;
  /** Weights on this GPU: each layer's, and the ends' (embeddings and output layer). */
  layerWeightBytes: number;
  endWeightBytes: number;
  /** Of the ends, the input embeddings (made first, as the model's __init__ registers them; 0 where untold). */
  embeddingBytes: number;
  layers: number;
  /** Of the layers, those with a dense MLP (every layer but a mixture's expert layers). */
  denseLayers: number;
  /** Layers that keep only their last window (a sliding-window layer in Hugging Face's hybrid cache), and the window. */
  slidingLayers: number;
  window: number;
  /** Key and value bytes per token of one layer on this GPU. */
  kvPerTokenLayer: number;
  /** The tokens a static or awq-fused cache is made for (o.cacheLen, else prompt + new tokens). */
  cacheLen: number;
  /** The transformers release's generate: what a step holds of the one before, which logits the prefill makes. */
  release: GenerateRelease;
  /** The weight format's buffers and matmul transients. */
  quant: Pick<ServedWeights, 'scratchBytes' | 'loadBytes' | 'layerMatmulBytes' | 'outputMatmulBytes' | 'linearMatmulBytes' | 'expertMatmulBytes'> & {
    scheme: { says: string } | undefined;
  };
  tags: GenerateTags;
}

export interface GenerateTags {
  set: Tags;
  weights: Tag;
  kv: Tag;
  growth: Tag;
  activations: Tag;
  repeat: Tag;
  logits: Tag;
  scratch: Tag;
  rope: Tag;
  ropeTables: Tag;
  load: Tag;
  matmul: Tag;
}

/** The lines of a generate run. */
export function generateTags(s: Omit<GenerateSetup, 'tags'>): GenerateTags {
  const set = new Tags();
  const o = s.o;
  return {
    set,
    weights: set.get(
      `weights (${o.weights})`,
      'parametersBytes',
      (b) => `${formatCount(Math.round(b))} bytes of weights here (the embeddings and the output layer in 16 bits under a quantised format)`,
    ),
    kv: set.get(
      `KV cache (${o.kvCache === 'awq-fused' ? 'fp16' : o.kvDtype})`,
      'kvCacheBytes',
      `${s.kvPerTokenLayer} bytes per token per layer${s.m.mla ? ' (MLA latent)' : ''} x ${s.layers} layers x ${o.batch} sequences${s.slidingLayers ? ` (${s.slidingLayers} of ${s.layers} layers keep only the last ${s.window})` : ''}${o.blockSize ? ` (rounded to ${o.blockSize}-token blocks)` : ''}${fixedLen(s) ? ` x ${s.cacheLen} tokens, made at once (${o.kvCache === 'awq-fused' ? "AutoAWQ's WindowedCache: fp16 values (batch, kv heads, length, head dim) and keys packed 8 to a slot" : 'StaticCache'})` : ''}`,
    ),
    growth: s.release.heldCache
      ? set.get(
          "KV cache growth: the previous step's cache, held",
          'workspaceBytes',
          `each step makes every layer's cache anew by concatenation while generate still holds the previous step's (${s.release.says})`,
        )
      : set.get("KV cache growth: one layer's cache copied", 'workspaceBytes', 'a contiguous cache grows by concatenation at every step'),
    activations: set.get(
      'prefill activations',
      'activationsBytes',
      "one layer's tensors over the prompt tokens as its ops make them without autograd (norms, projections, RoPE, attention, MLP; the attention matrix without a fused kernel)",
    ),
    repeat: set.get(
      'keys and values repeated to every head (one layer)',
      'workspaceBytes',
      'Hugging Face repeats grouped key/value heads for the attention call',
    ),
    logits: set.get(
      'fp32 logits',
      'logitsBytes',
      s.release.promptLogits === 'all'
        ? `the prefill's: ${o.batch} sequences x ${o.prompt} prompt tokens x ${s.m.vocab} vocabulary x 4 bytes, upcast from the output layer's${s.release.heldOutputs ? ', held through the first decode step' : ''} (${s.release.says})`
        : `${o.batch} sequences x ${s.m.vocab} vocabulary x 4 bytes`,
    ),
    scratch: set.get(
      "quantisation kernels' scratch",
      'workspaceBytes',
      `allocated once at load for the largest quantised layer (${s.quant.scheme?.says ?? 'none'}: exllama's temp_dq, exllamav2's scratch)`,
    ),
    rope: set.get(
      "AutoAWQ fused attention's RoPE table",
      'workspaceBytes',
      `each fused attention layer's complex64 freqs_cis of 2 x ${s.cacheLen} positions x head dim / 2 (awq/modules/fused/attn.py RoPE), made at load`,
    ),
    ropeTables: set.get(
      "rotary cos/sin tables, every attention layer's own",
      'workspaceBytes',
      `cos and sin for ${s.m.maxPositions ?? 0} positions (max_position_embeddings) x ${rotaryDim(s)} rotary dims x ${s.layers} layers in the load dtype, made at init (${s.release.says})`,
    ),
    load: set.get(
      'a weight quantised at load',
      'workspaceBytes',
      `bitsandbytes quantises each 16-bit checkpoint weight on the GPU as it loads (${s.quant.scheme?.says ?? 'none'}): its fp16 copy and the quantiser's buffers, the largest layer's while every other weight is held`,
    ),
    matmul: set.get(
      "a quantised layer's matmul transients",
      'workspaceBytes',
      `one layer's matmul at a time (${s.quant.scheme?.says ?? 'none'}): bitsandbytes 4-bit dequantises the weight for more than one row, LLM.int8() quantises its input (and converts the weight's layout in the first pass), AWQ sums 8 split-k partial outputs`,
    ),
  };
}

/** Bytes of an element in the dtype the model loads and computes in: fp32, else 16 bits (a quantised format's too). */
export const elementBytes = (o: InferOptions): number => (o.weights === 'fp32' ? 4 : 2);

/** A layer's weights as the tensors it loads: each linear module's share (by its in x out), then the rest. */
function weightShares(s: GenerateSetup): number[] {
  const ls = linearModules(s.m, !!s.m.moe);
  const total = ls.reduce((a, l) => a + l.in * l.out, 0);
  if (total <= 0 || s.m.moe) return [s.layerWeightBytes];
  const linear = Math.min(s.layerWeightBytes, total * elementBytes(s.o));
  const shares = ls.map((l) => (linear * l.in * l.out) / total);
  return s.layerWeightBytes - linear > 0 ? [...shares, s.layerWeightBytes - linear] : shares;
}

/** The rotary dimensions of a head (GPT-NeoX's rotary_ndims, Phi's partial rotary factor: int(head dim x fraction)). */
const rotaryDim = (s: Omit<GenerateSetup, 'tags'>): number => Math.floor(s.m.headDim * s.m.arch.rotaryFraction);

/**
 * One attention layer's rotary cos and sin tables, where the release builds them in every attention layer at init
 * (GenerateRelease.ropeTables); 0 where it does not, where the config gives no max_position_embeddings, and under
 * AutoAWQ's fused attention (which replaces the attention modules, tables and all).
 */
function ropeTableBytes(s: Omit<GenerateSetup, 'tags'>): number {
  if (!s.release.ropeTables.includes(s.m.modelType) || s.o.kvCache === 'awq-fused' || !s.m.maxPositions) return 0;
  return 2 * s.m.maxPositions * rotaryDim(s) * elementBytes(s.o);
}

/** The length a preallocated cache is made at (StaticCache, AutoAWQ's WindowedCache), or 0 for a cache that grows. */
const fixedLen = (s: Omit<GenerateSetup, 'tags'>): number => (s.o.kvCache === 'static' || s.o.kvCache === 'awq-fused' ? s.cacheLen : 0);

/**
 * Every layer's cache at its full length, made at once: transformers' StaticCache (torch.zeros per layer of (batch,
 * kv heads, max_cache_len, head dim) before the prefill; a sliding-window layer's at its window), AutoAWQ's
 * WindowedCache (awq/modules/fused/cache.py at v0.1.7: fp16 v of (batch, kv heads, max_seq_len, head dim) and k of
 * (batch, kv heads, head dim / 8, max_seq_len, 8), one per fused attention layer, made when the layers are fused).
 */
function fixedCache(mem: Mem, s: GenerateSetup): void {
  const L = fixedLen(s);
  for (const r of runs(s))
    mem.repeat(r.count, () => {
      const half = (s.kvPerTokenLayer / 2) * s.o.batch * (r.sliding ? Math.min(L, s.window) : L);
      mem.alloc(half, s.tags.kv);
      mem.alloc(half, s.tags.kv);
    });
  // QuantAttentionFused's RoPE: precompute_freqs_cis(head dim, max_seq_len * 2), complex64, an nn.Parameter a layer
  if (s.o.kvCache === 'awq-fused') mem.repeat(s.layers, () => mem.alloc(2 * L * (s.m.headDim / 2) * 8, s.tags.rope));
}

/** Tokens of the cache a layer keeps after `tokens` tokens (its window for a sliding-window layer), in blocks. */
const kept = (s: GenerateSetup, tokens: number, sliding: boolean): number => {
  const t = sliding ? Math.min(tokens, s.window) : tokens;
  const b = s.o.blockSize;
  return b ? Math.ceil(t / b) * b : t;
};

/**
 * One layer's attention transients for `tokens` tokens of each sequence: repeated keys and values, or nothing. From
 * transformers 4.54 (#39412) SDPA takes the grouped heads as they are (enable_gqa) when no mask is passed
 * (use_gqa_in_sdpa: torch 2.5 on and attention_mask None), which is generate's case over unpadded prompts with a
 * growing cache: the causal mask is skipped for a full-attention layer, and for a sliding one while the keys fit its
 * window (_ignore_causal_mask_sdpa); a StaticCache's padded slots always need one.
 */
function repeatKv(mem: Mem, s: GenerateSetup, tokens: number, sliding: boolean): void {
  const { m, o } = s;
  const e = elementBytes(o);
  // the fused attention repeats inside its own prefill (counted there) and decodes with FasterTransformer's
  // single_query_attention over the cache in place; a StaticCache hands the attention every slot it has
  if (o.kvCache === 'awq-fused') return;
  const masked = o.kvCache === 'static' || (sliding && tokens >= s.window);
  if (o.attention === 'sdpa' && s.release.gqaInSdpa && !masked) return;
  const t = o.kvCache === 'static' ? s.cacheLen : tokens;
  if (m.kvHeads < m.heads && !m.mla) mem.free(mem.alloc((2 * o.batch * t * m.heads * m.headDim * e) / o.parallel.tp, s.tags.repeat));
}

/**
 * AutoAWQ's fused attention over a prompt of `s` tokens (QuantAttentionFused.forward at v0.1.7, seqlen > 1): keys and
 * values repeat_interleave'd to every head (fp16), then scores = matmul(q, k^T) / sqrt(d) + mask, fp16 (each a new
 * tensor, the one before it freed), and F.softmax(scores.float()).type_as(q): at the softmax the fp16 scores, their
 * fp32 copy and the fp32 softmax are held, 2 + 4 + 4 bytes a score.
 */
function fusedPrefillAttention(s: GenerateSetup): number {
  const { m, o } = s;
  const heads = m.heads / o.parallel.tp;
  // repeat_interleave(repeats = heads / kv heads) copies even when that is 1 (multi-head attention)
  return o.batch * heads * o.prompt * o.prompt * (2 + 4 + 4) + 2 * o.batch * o.prompt * heads * m.headDim * 2;
}

/**
 * The runs of layers: those keeping every token (a mixture's dense layers first, then its expert layers), then the
 * sliding-window ones.
 */
const runs = (s: GenerateSetup): Array<{ count: number; sliding: boolean; moe: boolean }> => {
  const full = s.layers - s.slidingLayers;
  const dense = s.m.moe ? Math.min(full, s.denseLayers) : full;
  return [
    { count: dense, sliding: false, moe: false },
    { count: full - dense, sliding: false, moe: true },
    { count: s.slidingLayers, sliding: true, moe: !!s.m.moe },
  ].filter((r) => r.count > 0);
};

/** The prefill: each layer's ops over the prompt with its cache, the prompt's logits where the release makes them all. */
function prefill(mem: Mem, s: GenerateSetup): { caches: H[][][]; held: H | undefined } {
  const { o } = s;
  mem.phase('prefill');
  const tokens = o.batch * o.prompt;
  if (o.kvCache === 'static') fixedCache(mem, s);
  const caches = o.kvCache === 'awq-fused' ? awqFusedPrefill(mem, s) : blockPrefill(mem, s, fixedLen(s) > 0);
  // a quantised output layer runs over every prompt token (LitGPT's GPT.forward returns logits for all of them)
  mem.free(mem.alloc(s.quant.outputMatmulBytes(tokens, true), s.tags.matmul));
  return { caches: caches.map((c) => Array.from({ length: c.count }, (_, i) => c.at(i))), held: promptLogits(mem, s) };
}

/**
 * The prefill's layers as the training program's blocks run them under torch.no_grad() (block.ts, `inference`): each op's
 * tensors over batch x prompt tokens in the dtype the model loads, the layer's keys and values copied into the cache
 * where DynamicLayer.update copies them (after RoPE, before attention), a quantised layer's matmul transient where its
 * matmul runs; then the repeated key/value heads where the release repeats them. The embeddings' output is the first
 * layer's input; each layer's output the next one's.
 */
function blockPrefill(mem: Mem, s: GenerateSetup, fixed: boolean): Runs<H[]>[] {
  const { m, o } = s;
  const x = prefillContext(s);
  const rows = o.batch * o.prompt;
  const extras: MatmulExtras = {
    dequantisedBytes: 0,
    fp8: false,
    matmulBytes: (l) => s.quant.linearMatmulBytes(l, rows, true),
    expertMatmulBytes: s.quant.expertMatmulBytes(rows, true),
  };
  // the model's forward holds the embeddings' output (inputs_embeds) and the rotary module's cos and sin for every
  // position through every layer (the allocator trace of a Qwen3-0.6B prefill, 2026-12-04, holds both at its peak,
  // the last layer's MLP: cos and sin as fp32 (batch, tokens, rotary dims)); the first layer reads a copy of its own
  const held = [
    mem.alloc(x.R * m.hidden * x.tokens, s.tags.activations),
    ...(m.arch.rotaryFraction > 0 ? [0, 1].map(() => mem.alloc(4 * rotaryDim(s) * x.tokens, s.tags.activations)) : []),
  ];
  let hidden = mem.alloc(x.R * m.hidden * x.tokens, s.tags.activations);
  const caches = runs(s).map((r) =>
    mem.repeat(r.count, () => {
      const half = (s.kvPerTokenLayer / 2) * o.batch * kept(s, o.prompt, r.sliding);
      const kv: H[] = [];
      // a preallocated cache is written in place
      const kvCache = (): H => {
        const h = fixed ? 0 : mem.alloc(half, s.tags.kv);
        if (h) kv.push(h);
        return h;
      };
      hidden = blockForward(mem, x, hidden, { mode: 'inference', moe: r.moe, owns: true, extras, kvCache }).out;
      repeatKv(mem, s, o.prompt, r.sliding);
      return kv;
    }),
  );
  mem.free(hidden, ...held);
  return caches;
}

/** The block ops' context for the prefill: the model's widths over the prompt's tokens, no autograd, no autocast. */
function prefillContext(s: GenerateSetup): BlockContext {
  const { m, o } = s;
  const e = elementBytes(o);
  const t = s.tags.activations;
  return {
    m,
    tokens: (o.batch * o.prompt) / o.parallel.tp,
    batch: o.batch,
    seq: o.prompt,
    tp: o.parallel.tp,
    R: e,
    C: e,
    autocast: false,
    precision: e === 4 ? 'fp32' : 'bf16-pure',
    full: false,
    weightBytes: e,
    gradBytes: 0,
    restParams: { dense: 0, moe: 0 },
    expertParams: 0,
    lora: undefined,
    fusedAttention: fusedAttention(m, o.attention, o.weights),
    // the math kernel's scores in fp32 while the softmax runs
    scoreBytes: 4,
    scoresRecomputed: false,
    kvCacheCopies: false,
    gradsLeave: false,
    gradSink: undefined,
    autocastCache: [],
    tags: { kept: t, scores: t, transient: t, grads: t, paramGrads: t, autocast: t, expertWeights: t, expertInputs: t, matmul: s.tags.matmul },
    lins: {},
    sites: new Map(),
  };
}

/** AutoAWQ's fused blocks over the prompt (LlamaLikeBlock.forward): each layer's cache, its buffers, its largest matmul transient. */
function awqFusedPrefill(mem: Mem, s: GenerateSetup): Runs<H[]>[] {
  const { m, o } = s;
  const e = elementBytes(o);
  const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  const tokens = o.batch * o.prompt;
  const scores = fusedPrefillAttention(s);
  // the fused block (LlamaLikeBlock.forward): the attention's scores are freed before the MLP runs, so the layer's
  // hidden buffers are held with the one, then with the other and its largest matmul transient; the WindowedCache,
  // made at load, is written in place
  return runs(s).map((r) =>
    mem.repeat(r.count, (): H[] => {
      const hidden = mem.alloc((tokens * 4 * m.hidden * e) / o.parallel.tp, s.tags.activations);
      mem.free(mem.alloc(scores, s.tags.activations));
      const mlp = mem.alloc((tokens * 3 * f * e) / o.parallel.tp, s.tags.activations);
      mem.free(mem.alloc(s.quant.layerMatmulBytes(tokens, true), s.tags.matmul));
      mem.free(mlp, hidden);
      return [];
    }),
  );
}

/**
 * The prefill's logits: the last token's in fp32, or (before transformers 4.45) every prompt token's from the output
 * layer and their fp32 upcast (`logits.float()`: a copy, unless the model runs in fp32), the original freed. Returns
 * the fp32 logits when the release's generate holds them into the first decode step.
 */
function promptLogits(mem: Mem, s: GenerateSetup): H | undefined {
  const { m, o } = s;
  if (s.release.promptLogits === 'last') return undefined;
  const n = o.batch * o.prompt * m.vocab;
  const e = elementBytes(o);
  const out = e === 4 ? undefined : mem.alloc(n * e, s.tags.logits);
  const f32 = mem.alloc(n * 4, s.tags.logits);
  if (out) mem.free(out);
  return held(mem, s, f32);
}

/** A step's logits: returned when the release holds the step's outputs through the next forward, else freed. */
function held(mem: Mem, s: GenerateSetup, logits: H): H | undefined {
  if (s.release.heldOutputs) return logits;
  mem.free(logits);
  return undefined;
}

/**
 * One decode step at `tokens` tokens: each layer's cache grown (a contiguous cache by a copy), the logits; `before`,
 * the previous step's outputs a release holds through this forward, is freed when it returns. Returns this step's
 * logits when the release holds them into the next.
 */
function step(
  mem: Mem,
  s: GenerateSetup,
  caches: H[][][],
  tokens: number,
  before: H | undefined,
  sampled: Sampled | undefined,
): { held: H | undefined; sampled: Sampled | undefined } {
  const o = s.o;
  // each run's layers' previous caches, where the release keeps them until the forward returns
  const previous = runs(s).map((r, i) => {
    const layers = caches[i] as H[][];
    return mem.repeat(r.count, (j): H[] => {
      const kv = layers[j] ?? (layers[0] as H[]);
      let old: H[] = [];
      const grows = kept(s, tokens, r.sliding) !== kept(s, tokens - 1, r.sliding);
      const L = fixedLen(s);
      if (L > 0) {
        // past its length AutoAWQ's WindowedCache rolls (roll_kv_n_steps: torch.roll makes a new v, then a new k,
        // each replacing the old): one layer's values copied at a time
        if (o.kvCache === 'awq-fused' && tokens > L && !r.sliding) mem.free(mem.alloc((s.kvPerTokenLayer / 2) * o.batch * L, s.tags.growth));
      } else if (grows && !o.blockSize) {
        // torch.cat: the longer copy made, then the old one let go; DynamicCache.update (DynamicLayer.update in
        // transformers 5) assigns the keys' copy before it makes the values', so with nothing else holding them the
        // old keys are freed before the new values are allocated (as a recorded allocator trace of transformers 5.17
        // generate shows: alloc K', free K, alloc V', free V, layer by layer); a release that holds the previous
        // step's cache frees both after the forward
        const half = (s.kvPerTokenLayer / 2) * o.batch * kept(s, tokens, r.sliding);
        let next: H[];
        if (s.release.heldCache) {
          next = [mem.alloc(half, s.tags.growth), mem.alloc(half, s.tags.growth)];
          for (const h of kv) mem.retag(h, s.tags.growth);
          for (const h of next) mem.retag(h, s.tags.kv);
          old = [...kv];
        } else next = copyCache(mem, s, kv.slice(0, 2), half);
        kv.splice(0, 2, ...next);
      } else if (grows) {
        const extra = (s.kvPerTokenLayer / 2) * o.batch * (kept(s, tokens, r.sliding) - kept(s, tokens - 1, r.sliding));
        kv.push(mem.alloc(extra, s.tags.kv), mem.alloc(extra, s.tags.kv));
      }
      repeatKv(mem, s, tokens, r.sliding);
      mem.free(mem.alloc(s.quant.layerMatmulBytes(o.batch, false), s.tags.matmul));
      return old;
    });
  });
  mem.free(mem.alloc(s.quant.outputMatmulBytes(o.batch, false), s.tags.matmul));
  // the current generate samples from the last token's logits; an older one's logits are held or freed whole
  const current = s.release.promptLogits === 'last';
  const logits = current ? 0 : mem.alloc(o.batch * s.m.vocab * 4, s.tags.logits);
  const next = current ? sample(mem, s, tokens, sampled) : undefined;
  // the forward has returned: generate lets go of the previous step's outputs and cache
  if (before) mem.free(before);
  // each layer's previous cache freed by a repeat of its own count (what the same iteration of the one above kept)
  for (const runsOld of previous) mem.repeat(runsOld.count, (j) => mem.free(...runsOld.at(j)));
  return { held: current ? undefined : held(mem, s, logits), sampled: next };
}

/** The step's sampling tensors generate still binds when the next step samples: next_token_logits and next_token_scores. */
interface Sampled {
  copy: H;
  scores: H;
}

/**
 * A step's sampling as generate's _sample runs it (transformers 4.45 on, where the logits are the last token's): the
 * logits copied to fp32 (`outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`; the previous step's copy
 * freed as the name is rebound), then, while fewer than min_new_tokens are made (`tokens`, the context after the
 * step, short of prompt + min_new_tokens), MinLengthLogitsProcessor and MinNewTokensLengthLogitsProcessor each
 * `scores.clone()` and `torch.where(eos_token_mask, -inf, scores)` (the clone freed; the first processor's output
 * once the second has made its own), and the previous step's scores freed as next_token_scores is rebound. Answers
 * what the step leaves bound.
 */
function sample(mem: Mem, s: GenerateSetup, tokens: number, before: Sampled | undefined): Sampled {
  const o = s.o;
  const bytes = o.batch * s.m.vocab * 4;
  const copy = mem.alloc(bytes, s.tags.logits);
  const distinct = before && before.scores !== before.copy;
  if (before) mem.free(before.copy);
  let scores = copy;
  if (o.minNewTokens && tokens - 1 < o.prompt + o.minNewTokens) {
    for (let i = 0; i < 2; i++) {
      const clone = mem.alloc(bytes, s.tags.logits);
      const masked = mem.alloc(bytes, s.tags.logits);
      mem.free(clone);
      if (scores !== copy) mem.free(scores);
      scores = masked;
    }
  }
  if (distinct) mem.free(before.scores);
  return { copy, scores };
}

/** Frees what the last step's sampling left bound (generate returns). */
const unbind = (mem: Mem, sampled: Sampled | undefined): void => {
  if (sampled) mem.free(sampled.copy, sampled.scores === sampled.copy ? 0 : sampled.scores);
};

/**
 * A layer's keys, then its values, copied to `half` bytes each (torch.cat in DynamicLayer.update): each copy is made
 * while its old one lives (the old one the growth line, the copy the cache), the old one freed before the next copy.
 */
function copyCache(mem: Mem, s: GenerateSetup, kv: readonly H[], half: number): H[] {
  return kv.map((before) => {
    mem.retag(before, s.tags.growth);
    const copy = mem.alloc(half, s.tags.kv);
    mem.free(before);
    return copy;
  });
}

/**
 * Runs generate through `mem`: every decode step (`allSteps`, for the allocator replay), or the cache grown to one
 * token short and the last step (the walk: the last step is the largest).
 */
export function generateProgram(mem: Mem, s: GenerateSetup, allSteps: boolean): void {
  mem.phase('load');
  // each parameter its own tensor, as from_pretrained loads them: every linear layer's weight, the rest of the layer
  // (norms, biases) in one
  const shares = weightShares(s);
  // in the order the model's __init__ makes them: the input embeddings, the layers, the final norm and output layer
  mem.alloc(s.embeddingBytes, s.tags.weights);
  mem.repeat(s.layers, () => {
    for (const b of shares) mem.alloc(b, s.tags.weights);
  });
  mem.alloc(s.endWeightBytes - s.embeddingBytes, s.tags.weights);
  const tables = ropeTableBytes(s);
  if (tables > 0) mem.repeat(s.layers, () => mem.alloc(tables, s.tags.ropeTables));
  if (s.quant.loadBytes > 0) mem.free(mem.alloc(s.quant.loadBytes, s.tags.load));
  if (s.quant.scratchBytes > 0) mem.alloc(s.quant.scratchBytes, s.tags.scratch);
  if (s.o.kvCache === 'awq-fused') fixedCache(mem, s);
  const { caches, held: fromPrefill } = prefill(mem, s);
  // the current generate samples the first token from the prefill's last logits
  const sampled = s.release.promptLogits === 'last' ? sample(mem, s, s.o.prompt + 1, undefined) : undefined;
  // one new token comes from the prefill alone: generate runs no decode step
  if (s.o.newTokens > 1) decode(mem, s, caches, fromPrefill, sampled, allSteps);
  else {
    if (fromPrefill) mem.free(fromPrefill);
    unbind(mem, sampled);
  }
}

function decode(mem: Mem, s: GenerateSetup, caches: H[][][], fromPrefill: H | undefined, sampled: Sampled | undefined, allSteps: boolean): void {
  mem.phase('decode');
  const ctx = s.o.prompt + s.o.newTokens;
  let carry = { held: fromPrefill, sampled };
  if (allSteps) {
    // at most REPLAYED_STEPS steps are replayed: past that each grows the cache by several tokens (the copies'
    // sizes and order are what the allocator sees; their number only repeats the pattern)
    const stride = Math.ceil(s.o.newTokens / REPLAYED_STEPS);
    for (let t = s.o.prompt + stride; t < ctx; t += stride) carry = step(mem, s, caches, t, carry.held, carry.sampled);
  } else {
    // the first step, where it still holds the prefill's logits, then the cache as the steps up to the last leave it
    const first = carry.held !== undefined && s.o.prompt + 1 < ctx;
    if (first) carry = step(mem, s, caches, s.o.prompt + 1, carry.held, carry.sampled);
    if (!fixedLen(s) && ctx - 1 > s.o.prompt + (first ? 1 : 0)) growTo(mem, s, caches, ctx - 1);
    // what the step before the last leaves bound of its sampling
    if (carry.sampled && ctx - 1 > s.o.prompt + 1) carry = { ...carry, sampled: sample(mem, s, ctx - 1, carry.sampled) };
  }
  const last = step(mem, s, caches, ctx, carry.held, carry.sampled);
  if (last.held) mem.free(last.held);
  unbind(mem, last.sampled);
}

/** The cache as the steps before the last leave it: `tokens` long (the walk's shortcut to the last step). */
function growTo(mem: Mem, s: GenerateSetup, caches: H[][][], tokens: number): void {
  runs(s).forEach((r, i) => {
    const layers = caches[i] as H[][];
    mem.repeat(r.count, (j) => {
      const kv = layers[j] ?? (layers[0] as H[]);
      const half = (s.kvPerTokenLayer / 2) * s.o.batch * kept(s, tokens, r.sliding);
      // as a decode step copies them
      const next = copyCache(mem, s, kv.slice(0, 2), half);
      mem.free(...kv.slice(2));
      kv.splice(0, kv.length, ...next);
    });
  });
}
