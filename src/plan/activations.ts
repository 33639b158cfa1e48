/** Activation memory per layer: PyTorch's saved tensors counted op by op, and Korthikanti et al.'s formula. */
import { linearModules, type InputSite } from './adapters.js';
import type { ModelConfig } from './model-config.js';
import { moeLayerExtraBytesPerToken } from './moe-activations.js';
import type { Precision, Recompute } from './options.js';

/** What decides which tensors autograd keeps in a block: the dtypes, autocast, and which weights train. */
export interface SavedContext {
  precision: Precision;
  /** Adapters on a frozen base: the wrapped layers' paths, the adapters' bytes per value, dropout, DoRA. */
  lora?:
    | {
        paths: ReadonlySet<string>;
        adapterBytes: number;
        dropout: boolean;
        dora: boolean;
        baseBytes: number;
        /** The output layer is wrapped too (PEFT's lm_head target). */
        output?: boolean | undefined;
        /** bitsandbytes before 0.43.2: each 4-bit matmul keeps its input (MatMul4Bit's ctx.tensors). */
        baseKeepsInput?: boolean | undefined;
      }
    | undefined;
}

/** Bytes per value of the residual stream (R) and of the matmuls' outputs (C), and whether autocast casts. */
export function dtypes(ctx: SavedContext): { R: number; C: number; autocast: boolean } {
  const autocast = ctx.precision === 'amp-bf16';
  const R = ctx.lora ? ctx.lora.baseBytes : ctx.precision === 'fp32' || autocast ? 4 : 2;
  return { R, C: autocast ? 2 : R, autocast };
}

/**
 * Bytes autograd keeps of one input tensor (w values per token, x bytes each) for the linear layers that read it:
 * a training weight keeps the input itself (or, under autocast, its own bf16 cast of an fp32 input); a LoRA adapter
 * keeps the input cast to the adapters' dtype (PEFT's _cast_input_dtype, one copy per wrapped layer), or, with
 * lora_dropout, the dropped copy and its 1-byte mask. `alreadyKept`: the input is kept by another op (SDPA's output).
 */
function inputKept(w: number, x: number, readers: Array<{ trains: boolean; adapted: boolean }>, ctx: SavedContext, alreadyKept = false): number {
  const { autocast } = dtypes(ctx);
  let shared = false;
  let bytes = 0;
  for (const r of readers) {
    if (!r.trains && ctx.lora?.baseKeepsInput) shared = true;
    if (r.trains) {
      if (autocast && x !== 2) bytes += 2 * w;
      else shared = true;
    }
    if (r.adapted && ctx.lora) {
      const a = ctx.lora.adapterBytes;
      if (ctx.lora.dropout) bytes += w + (autocast ? 2 : a) * w;
      else if (autocast) {
        if (a === 2 && x === 2) shared = true;
        else bytes += 2 * w;
      } else if (a !== x) bytes += a * w;
      else shared = true;
    }
  }
  return bytes + (shared && !alreadyKept ? x * w : 0);
}

/**
 * Activation bytes autograd keeps per token in one block, counted tensor by tensor as PyTorch eager runs Hugging Face
 * blocks (each figure checked against torch.autograd.graph.saved_tensors_hooks on an H200: docs/plan-training.md):
 * - RMSNorm keeps its fp32 input (a copy under bf16) and, when its weight trains, the normalised value the weight
 *   multiplies (R bytes); LayerNorm keeps its input (fp32 under autocast).
 * - each linear layer's input as inputKept() says; SDPA keeps q, k, v (k and v with their own heads: grouped-query
 *   attention is not repeated), its output and an fp32 log-sum-exp per head; GPT-2 also keeps its fused qkv output,
 *   the key and value copies its cache makes, and the merged heads.
 * - SwiGLU keeps the gate's output, the SiLU output and the up projection; GPT-2's tanh GELU four f-wide tensors
 *   (three of them fp32 under autocast, where pow and tanh run in fp32); dropout a 1-byte mask.
 * The attention matrix of the math kernel is not in this count (train.ts adds it).
 */
export function savedBytesPerToken(m: ModelConfig, ctx: SavedContext, moeLayer = false): number {
  const { R, C, autocast } = dtypes(ctx);
  const h = m.hidden;
  const full = !ctx.lora;
  const layer = linearModules(m, moeLayer);
  const readers = (site: InputSite) => layer.filter((l) => l.site === site).map((l) => ({ trains: full, adapted: !!ctx.lora?.paths.has(l.path), out: l.out }));
  const dora = (site: InputSite) =>
    ctx.lora?.dora
      ? readers(site)
          .filter((r) => r.adapted)
          .reduce((s, r) => s + (ctx.lora!.adapterBytes + C) * r.out, 0)
      : 0;
  const f = m.moe && moeLayer ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  const qDim = m.mla ? m.heads * (m.mla.qkNopeHeadDim + m.mla.qkRopeHeadDim) : m.heads * m.headDim;
  const kDim = m.mla ? qDim : m.kvHeads * m.headDim;
  const vDim = m.mla ? m.heads * m.mla.vHeadDim : m.kvHeads * m.headDim;
  const oDim = m.mla ? vDim : qDim;
  const lse = 4 * m.heads;
  // a mixture-of-experts layer's router and gathered expert inputs (moe-activations.ts)
  const moe = moeLayer && m.moe ? moeLayerExtraBytesPerToken(m, ctx.precision, full) : 0;
  if (m.family === 'gpt') {
    const ln = autocast ? 4 : R; // layer_norm runs in fp32 under autocast: its input cast and its output are fp32
    const gelu = autocast ? 4 : C;
    const masks = m.dropout ? 2 * h : 0;
    // The family's own block (model-config.ts ArchTraits): a parallel block's norms read one residual state, kept once
    // (with one norm, its output feeds attention and MLP alike); a fused GELU kernel keeps its input and output, not
    // GPT-2's four Python tensors; rotary families keep rotated copies of q and k beside the fused projection.
    let family = 0;
    if (m.arch.parallelResidual) {
      family -= ln * h;
      if (m.arch.normsPerLayer === 1) family -= inputKept(h, ln, readers('mlp-norm'), ctx);
    }
    if (m.arch.fusedActivation) family += -3 * gelu * f + inputKept(f, C, readers('mlp-act'), ctx) - inputKept(f, gelu, readers('mlp-act'), ctx);
    if (m.arch.rotaryFraction > 0) family += C * (qDim + kDim);
    return (
      family +
      moe +
      2 * ln * h +
      inputKept(h, ln, readers('attn-norm'), ctx) +
      C * (qDim + 2 * kDim + 2 * kDim + oDim) +
      lse +
      inputKept(oDim, C, readers('attn-out'), ctx, true) +
      inputKept(h, ln, readers('mlp-norm'), ctx) +
      (C + 3 * gelu) * f +
      inputKept(f, gelu, readers('mlp-act'), ctx) +
      masks +
      dora('attn-norm') +
      dora('attn-out') +
      dora('mlp-norm') +
      dora('mlp-act')
    );
  }
  const norm = 4 * h + (full ? R * h : 0);
  const mlp = moeLayer && !m.moe ? 0 : 3 * C * f + inputKept(f, C, readers('mlp-act'), ctx);
  // Gemma 2/3's and OLMo-2's norms after attention and MLP; Qwen3's and Gemma 3's RMSNorm of each query and key head
  // (OLMo-2's over the whole projection): each keeps its fp32 input and, when its weight trains, its output
  const extraNorms = Math.max(0, m.arch.normsPerLayer - 2) * norm;
  const qkNorm = m.arch.qkNorm === 'none' ? 0 : (qDim + kDim) * (4 + (full ? R : 0));
  return (
    moe +
    extraNorms +
    qkNorm +
    2 * norm +
    inputKept(h, R, readers('attn-norm'), ctx) +
    C * (qDim + kDim + vDim + oDim) +
    lse +
    inputKept(oDim, C, readers('attn-out'), ctx, true) +
    inputKept(h, R, readers('mlp-norm'), ctx) +
    mlp +
    dora('attn-norm') +
    dora('attn-out') +
    dora('mlp-norm') +
    dora('mlp-act')
  );
}

/** What the final norm and the output layer's input keep per token (once, after the last block). */
export function finalSavedBytesPerToken(m: ModelConfig, ctx: SavedContext): number {
  const { R, autocast } = dtypes(ctx);
  const full = !ctx.lora;
  const h = m.hidden;
  const output = [{ trains: full, adapted: !!ctx.lora?.output }];
  if (m.family === 'gpt') return (autocast ? 4 : R) * h + inputKept(h, autocast ? 4 : R, output, ctx);
  return 4 * h + (full ? R * h : 0) + inputKept(h, R, output, ctx);
}

/**
 * The correction of the tensor count for what it misses (the transients of the backward pass's first operations,
 * PyTorch's contiguous copies). With every kept tensor counted it is 1: kept for tools/plan-accuracy.mjs, which
 * fits it to show how far from 1 the measured runs put it.
 */
export function pytorchCorrection(_precision: Precision): number {
  return 1;
}

/**
 * Korthikanti et al. 2022, activation memory of one transformer layer in bytes (16-bit activations).
 * s sequence, b micro-batch, h hidden, a heads, t tensor-parallel size.
 */
export function korthikantiLayerBytes(s: number, b: number, h: number, a: number, t: number, sp: boolean, recompute: Recompute): number {
  const sbh = s * b * h;
  // full recomputation keeps each layer's input: 2sbh, as Table 2 gives it for every parallel form
  if (recompute === 'full') return 2 * sbh;
  const attn = recompute === 'selective' ? 0 : (5 * a * s) / (h * t);
  if (sp) return sbh * (34 / t + attn);
  if (t === 1) return sbh * (34 + attn);
  return sbh * (10 + 24 / t + attn);
}
