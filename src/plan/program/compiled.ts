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
 * rows and docs/evidence/2026-12-01-1x-h200/compile/census.json): docs/plan-training.md, "torch.compile". The save
 * policy (policies.ts) runs the eager ops without saving and keeps this set instead; a MoE layer and DoRA keep what
 * PyTorch eager keeps (not measured under compile).
 */
import type { InputSite } from '../adapters.js';
import { type BlockContext, modules } from './block-context.js';

/** One kept tensor per token: what it is and its bytes per token. */
export interface KeptTensor {
  what: string;
  bytes: number;
}

/** The tensors a compiled dense block keeps per token (see the file's comment). */
export function compiledKept(x: BlockContext): KeptTensor[] {
  const { R, C, m, tp } = x;
  const h = m.hidden;
  const full = x.full;
  const layer = modules(x, false);
  const qkHead = m.mla ? m.mla.qkNopeHeadDim + m.mla.qkRopeHeadDim : m.headDim;
  const vHead = m.mla ? m.mla.vHeadDim : m.headDim;
  const heads = m.heads / tp;
  const qDim = heads * qkHead;
  const oDim = heads * vHead;
  const kept: KeptTensor[] = [];
  const add = (what: string, bytes: number): void => {
    if (bytes > 0) kept.push({ what, bytes });
  };
  const gpt = m.family === 'gpt';
  const residuals = m.arch.parallelResidual ? 1 : 2;
  add(`residual stream at the norms' inputs (${residuals} per layer, ${R}-byte)`, residuals * R * h);
  add('norm statistics (fp32 rsqrt / mean)', Math.max(2, m.arch.normsPerLayer) * (gpt ? 8 : 4));
  // Gemma 2/3's and OLMo-2's norms after attention and MLP read the output projections' results: matmul outputs, kept
  add('output projections read by the post-norms', Math.max(0, m.arch.normsPerLayer - 2) * C * h);
  // SDPA reads q, k, v materialised: transformers' SDPA path repeats k and v to every query head (repeat_kv) before it
  add('q, k, v as SDPA reads them (k, v repeated to the query heads)', C * (2 * qDim + oDim));
  if (m.arch.qkNorm !== 'none') add('q and k projections read by the q/k norms', C * (qDim + (m.kvHeads / tp) * qkHead));
  add("SDPA's output", C * oDim);
  add("SDPA's log-sum-exp (fp32, per head)", 4 * heads);
  const f = m.intermediate / tp;
  add(gpt ? 'first MLP projection (matmul output)' : 'gate and up projections (matmul outputs)', (gpt ? 1 : 2) * C * f);
  // the input of every matmul whose weight (or adapter) gets a gradient: one tensor per input, however many layers read it
  const sites = new Set<InputSite>();
  let adapted = 0;
  for (const l of layer) {
    if (full || l.adapted) sites.add(l.site);
    if (l.adapted) adapted += 1;
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
  if (x.lora) {
    add(`LoRA A outputs (rank ${x.lora.rank}, ${adapted} adapted layers)`, adapted * C * x.lora.rank);
    // an adapter on the output projection reads its own copy of the attention output (PEFT's LoRA branch casts its
    // input to the adapter's dtype first), which the partitioner keeps beside SDPA's output (the census of
    // llama-3.2-1b with all-linear: one attention-output-sized tensor per layer more than the count without it)
    if (sites.has('attn-out')) add('LoRA branch of the output projection: its copy of the attention output', C * oDim);
    if (x.lora.dropout)
      add(
        'LoRA dropout: mask and dropped input per adapted layer',
        layer.filter((l) => l.adapted).reduce((s, l) => s + (1 + C) * l.in, 0),
      );
  }
  if (m.dropout) add('dropout masks (1 byte, two per layer)', 2 * h);
  return kept;
}

/**
 * What torchtitan's per-op checkpoint saves of a block besides its input, per token: the policy (torchtitan's
 * `_save_list`: SDPA and every other `aten.mm`, counted in the order the block runs them: the first, third, fifth and
 * seventh are saved, torchtitan/models/llama3/infra/parallelize.py `_get_custom_policy`) caches those outputs. Under
 * torch.compile the partitioner saves only what lies on the cut between the forward and the backward graph: a cached
 * output that nothing in the backward reads is not saved. The block's last matmul (the MLP's output projection)
 * feeds only the residual add that makes the block's output, whose backward reads no values: unread, unless a norm
 * after the MLP (Gemma 2/3, OLMo-2) reads it; with a parallel residual the attention's output projection as well.
 */
export function perOpKept(x: BlockContext, moe: boolean, compiled: boolean): KeptTensor[] {
  const { C, m } = x;
  const heads = m.heads / x.tp;
  const vHead = m.mla ? m.mla.vHeadDim : m.headDim;
  const kept: KeptTensor[] = [
    { what: "SDPA's output", bytes: C * heads * vHead },
    { what: "SDPA's log-sum-exp (fp32, per head)", bytes: 4 * heads },
  ];
  const postNorms = m.arch.normsPerLayer > 2;
  const dropUnread = compiled && !m.moe && !m.mla && !x.lora?.dora;
  modules(x, moe).forEach((l, i) => {
    if (i % 2 === 1) return; // every other aten.mm: the first, third, fifth... are saved
    const unread = dropUnread && !postNorms && (l.site === 'mlp-act' || (l.site === 'attn-out' && m.arch.parallelResidual));
    if (!unread) kept.push({ what: `${l.path}'s output (saved by the policy${compiled ? ', read by the backward' : ''})`, bytes: C * l.out });
  });
  return kept;
}
