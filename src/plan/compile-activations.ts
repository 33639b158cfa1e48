/**
 * What torch.compile keeps for the backward pass of a transformer block when no checkpoint decides it: inductor's
 * default partitioner (torch/_functorch/partitioners.py, min_cut_rematerialization_partition, activation memory budget
 * 1.0) cuts the joint forward-backward graph so that the saved bytes are fewest, under its bans:
 * - a matmul's or SDPA's output, and a random op's, is never recomputed (compute-intensive or random): kept where the
 *   backward reads it;
 * - a value that a non-fusible op of the backward reads (a matmul making a weight's gradient, SDPA's backward) must be
 *   materialised there, so it is kept rather than recomputed;
 * - a reduction whose output is 4x smaller than its input (a norm's rsqrt, LayerNorm's mean) is kept;
 * - everything else (the norms' pointwise chains, activations, casts, rotary, residual adds) is recomputed from what
 *   is kept, the residual stream at each norm's input being one of those.
 * The count, tensor by tensor, was checked on one H200 (2026-12-01, fixtures/plan/measured-peaks-h200-compile.json's fit
 * rows and docs/evidence/2026-12-01-1x-h200/compile/census.json): docs/plan-training.md, "torch.compile".
 */
import type { SavedContext } from './activations.js';
import { dtypes, savedBytesPerToken } from './activations.js';
import { linearModules, type InputSite } from './adapters.js';
import type { ModelConfig } from './model-config.js';

/** One kept tensor per token, for the explanation lines: what it is and its bytes per token. */
export interface KeptTensor {
  what: string;
  bytes: number;
}

/**
 * The tensors the compiled block keeps per token (see the file's comment); `rank`: the adapters' rank. A MoE layer and
 * DoRA keep what PyTorch eager keeps (not measured under compile).
 */
export function compiledKeptPerToken(m: ModelConfig, ctx: SavedContext, rank = 0, moeLayer = false): KeptTensor[] {
  if (moeLayer || ctx.lora?.dora)
    return [{ what: 'as PyTorch eager keeps it (MoE layer or DoRA: not measured under compile)', bytes: savedBytesPerToken(m, ctx, moeLayer) }];
  const { R, C } = dtypes(ctx);
  const h = m.hidden;
  const full = !ctx.lora;
  const layer = linearModules(m, false);
  const qkHead = m.mla ? m.mla.qkNopeHeadDim + m.mla.qkRopeHeadDim : m.headDim;
  const vHead = m.mla ? m.mla.vHeadDim : m.headDim;
  const qDim = m.heads * qkHead;
  const oDim = m.heads * vHead;
  const kept: KeptTensor[] = [];
  const add = (what: string, bytes: number) => {
    if (bytes > 0) kept.push({ what, bytes });
  };
  const gpt = m.family === 'gpt';
  const stat = gpt ? 8 : 4; // LayerNorm's mean and rstd, RMSNorm's rsqrt: fp32, one per token
  const residuals = m.arch.parallelResidual ? 1 : 2;
  add(`residual stream at the norms' inputs (${residuals} per layer, ${R}-byte)`, residuals * R * h);
  add('norm statistics (fp32 rsqrt / mean)', Math.max(2, m.arch.normsPerLayer) * stat);
  // Gemma 2/3's and OLMo-2's norms after attention and MLP read the output projections' results: matmul outputs, kept
  add('output projections read by the post-norms', Math.max(0, m.arch.normsPerLayer - 2) * C * h);
  // SDPA reads q, k, v materialised: transformers' SDPA path repeats k and v to every query head (repeat_kv) before it
  add('q, k, v as SDPA reads them (k, v repeated to the query heads)', C * (2 * qDim + oDim));
  if (m.arch.qkNorm !== 'none') add('q and k projections read by the q/k norms', C * (qDim + m.kvHeads * qkHead));
  add("SDPA's output", C * oDim);
  add("SDPA's log-sum-exp (fp32, per head)", 4 * m.heads);
  const f = m.intermediate;
  const gated = !gpt;
  add(gated ? 'gate and up projections (matmul outputs)' : 'first MLP projection (matmul output)', (gated ? 2 : 1) * C * f);
  // the input of every matmul whose weight (or adapter) gets a gradient: one tensor per input, however many layers read it
  const sites = new Set<InputSite>();
  let loraOut = 0;
  for (const l of layer) {
    const adapted = !!ctx.lora?.paths.has(l.path);
    if (full || adapted) sites.add(l.site);
    if (adapted) loraOut += 1;
  }
  const width: Record<InputSite, number> = { 'attn-norm': h, 'attn-out': oDim, 'mlp-norm': h, 'mlp-act': f };
  for (const site of sites) {
    // the attention output is SDPA's own output seen through a view (fused kernels write it token-major): kept already
    if (site === 'attn-out') continue;
    // a parallel block's two norms read one residual; with one norm (Phi, Falcon) attention and MLP read one output
    if (site === 'mlp-norm' && m.arch.normsPerLayer === 1 && sites.has('attn-norm')) continue;
    const where = site === 'mlp-act' ? 'second MLP projection' : `layers after the ${site === 'attn-norm' ? 'attention' : 'MLP'} norm`;
    add(`input of the ${where} (its weight's gradient reads it)`, C * width[site]);
  }
  if (ctx.lora) {
    add(`LoRA A outputs (rank ${rank}, ${loraOut} adapted layers)`, loraOut * C * rank);
    // an adapter on the output projection reads its own copy of the attention output (PEFT's LoRA branch casts its
    // input to the adapter's dtype first), which the partitioner keeps beside SDPA's output (the census of
    // llama-3.2-1b with all-linear: one attention-output-sized tensor per layer more than the count without it)
    if (sites.has('attn-out')) add('LoRA branch of the output projection: its copy of the attention output', C * oDim);
    if (ctx.lora.dropout)
      add(
        'LoRA dropout: mask and dropped input per adapted layer',
        layer.filter((l) => ctx.lora!.paths.has(l.path)).reduce((s, l) => s + (1 + C) * l.in, 0),
      );
  }
  if (m.dropout) add('dropout masks (1 byte, two per layer)', 2 * h);
  return kept;
}

/** Bytes per token a compiled block keeps (compiledKeptPerToken, summed). */
export function compiledSavedBytesPerToken(m: ModelConfig, ctx: SavedContext, rank = 0, moeLayer = false): number {
  return compiledKeptPerToken(m, ctx, rank, moeLayer).reduce((s, t) => s + t.bytes, 0);
}

/**
 * What the compiled model keeps once, after the last block, per token: the final norm's statistics and, when the
 * output layer trains, its input; and the causal mask transformers materialises for SDPA (2 bytes x seq per token,
 * one per distinct mask: two with sliding-window layers).
 */
export function compiledFinalBytesPerToken(m: ModelConfig, ctx: SavedContext, seq: number): number {
  const { C } = dtypes(ctx);
  const output = !ctx.lora || !!ctx.lora.output;
  const masks = m.slidingWindow !== undefined && m.slidingLayers > 0 ? 2 : 1;
  return 4 + (output ? C * m.hidden : 0) + masks * 2 * seq;
}

/**
 * What torchtitan's per-op checkpoint saves of a block under torch.compile, per token, besides the block's input. The
 * policy (torchtitan's `_save_list`: SDPA and every other `aten.mm`, counted in the order the block runs them) tags
 * those ops MUST_SAVE and the rest PREFER_RECOMPUTE; inductor's partitioner then bans the tagged outputs from
 * recomputation and forces the others to be recomputed (partitioners.py, `must_recompute`), but it saves only what
 * lies on the cut between the forward and the backward graph: a MUST_SAVE output that nothing in the backward reads,
 * directly or to recompute from, is not saved, where eager's checkpoint caches every output the policy names. The
 * block's last matmul (the MLP's output projection) feeds only the residual add that makes the block's output, whose
 * backward reads no values: unread, unless a norm after the MLP (Gemma 2/3, OLMo-2) reads it; with a parallel
 * residual (GPT-NeoX, Phi, Falcon) the attention's output projection as well. Returns undefined where the count is not
 * made (MoE layers, MLA, DoRA: the eager count stands).
 */
export function compiledPerOpKeptPerToken(m: ModelConfig, ctx: SavedContext): KeptTensor[] | undefined {
  if (m.moe || m.mla || ctx.lora?.dora) return undefined;
  const { C } = dtypes(ctx);
  const kept: KeptTensor[] = [
    { what: "SDPA's output", bytes: C * m.heads * m.headDim },
    { what: "SDPA's log-sum-exp (fp32, per head)", bytes: 4 * m.heads },
  ];
  const postNorms = m.arch.normsPerLayer > 2;
  linearModules(m, false).forEach((l, i) => {
    if (i % 2 === 1) return; // every other aten.mm: the first, third, fifth... are saved
    const unread = !postNorms && (l.site === 'mlp-act' || (l.site === 'attn-out' && !!m.arch.parallelResidual));
    if (!unread) kept.push({ what: `${l.path}'s output (saved by the policy, read by the backward)`, bytes: C * l.out });
  });
  return kept;
}

/**
 * Whether torchtitan's per-op policy saves a block's last matmul output that a compiled block then leaves unsaved
 * (compiledPerOpKeptPerToken): true where the MLP's output projection is an odd-numbered matmul of the block and no
 * norm reads it. The step replay drops that tensor from what a block keeps.
 */
export function compiledPerOpDropsLastMatmul(m: ModelConfig, dora = false): boolean {
  if (m.moe || m.mla || dora) return false;
  const layers = linearModules(m, false);
  const last = layers.length - 1;
  return last % 2 === 0 && layers[last]?.site === 'mlp-act' && m.arch.normsPerLayer <= 2;
}
