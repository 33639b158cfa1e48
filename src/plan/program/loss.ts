/**
 * The final norm, the output layer and the loss, forward and backward, as Hugging Face's loss runs them (the fp32
 * upcast of the logits and log-softmax; Gemma 2's final softcap), torchtune's chunked cross-entropy, Liger's fused
 * linear cross-entropy and torch.compile's cross-entropy. LitGPT's chunked loss is its framework's (frameworks/).
 */
import { CONSTANTS } from '../constants.js';
import { compilesLoss, type LossKind } from '../options.js';
import { activationBytes } from '../precision.js';
import { type GradStore, keptInputBytes, weightGrad } from './linear.js';
import type { H, Mem, Tag } from './mem.js';
import type { StepSetup } from './step-setup.js';

/** What the loss's forward pass leaves for its backward pass. */
export interface LossState {
  kind: LossKind | 'compiled';
  /** The loss's kept tensors, a chunk at a time (standard: one chunk). */
  chunks: H[];
  /** The final norm's and the output layer's kept tensors. */
  final: H[];
  /** The compiled loss's log-sum-exp. */
  lse: H;
  /** Liger's fused loss: the output layer's gradient, made in the forward pass. */
  weightGrad?: H | undefined;
}

/** The tags of the loss's lines. */
export function lossTags(s: StepSetup): { logprobs: Tag; grads: Tag; softcap: Tag; compiled: Tag; fused: Tag } {
  const t = s.tags;
  const V = s.x.m.vocab;
  return {
    logprobs: t.line('loss: fp32 log-probabilities', 'logitsBytes', `4 bytes x ${V} vocabulary per token`),
    grads: t.line('loss backward: gradient of the logits', 'logitsBytes', 'logit-sized gradients at the start of the backward pass'),
    softcap: t.line('loss: softcapped logits (tanh output)', 'logitsBytes', `final_logit_softcapping ${s.x.m.arch.finalSoftcap}: tanh keeps its output`),
    compiled: t.line(
      'loss: logits and log-sum-exp (compiled cross-entropy)',
      'logitsBytes',
      `16-bit logits and 4 bytes per token; torch.compile fuses the fp32 upcast and the softmax`,
    ),
    fused: t.line(
      'loss: fused linear cross-entropy',
      'logitsBytes',
      "Liger's fused kernel computes the loss and the input's gradient chunk by chunk in the forward pass: no logits are kept",
    ),
  };
}

/** The final norm after the last block (owns `input`): its kept tensors and the output layer's input kept for it. */
export function finalNorm(mem: Mem, s: StepSetup, input: H): H[] {
  const x = s.x;
  const { R, m } = x;
  const full = s.endsGrads;
  const h = m.hidden;
  const gpt = m.family === 'gpt';
  const ln = gpt ? (x.autocast ? 4 : R) : R;
  // LayerNorm keeps its input (fp32 under autocast); RMSNorm its fp32 copy and, when its weight trains, its output;
  // compiled with the blocks and the loss as one graph (no checkpoint), what the partitioner keeps (compiledFinal)
  const perToken =
    compilesLoss(s.o) && s.policy.forward === 'compiled'
      ? compiledFinal(s)
      : (gpt ? ln * h : 4 * h + (full ? R * h : 0)) + keptInputBytes(h, ln, [{ trains: full, adapted: !!x.lora?.output }], x);
  const kept = [mem.alloc(perToken * x.tokens, s.tags.final)];
  mem.free(input);
  // autocast's bf16 copy of an fp32 output layer, kept by its matmul
  if (x.autocast && x.weightBytes === 4 && full) kept.push(mem.alloc((2 * m.vocab * h) / x.tp, x.tags.autocast));
  return kept;
}

/**
 * What the compiled model keeps once, after the last block, per token: the final norm's statistics and, when the
 * output layer trains, its input; and the causal mask transformers materialises for SDPA under tracing (2 bytes x
 * seq per token, one per distinct mask: two with sliding-window layers).
 */
function compiledFinal(s: StepSetup): number {
  const { C, m } = s.x;
  const output = s.endsGrads || !!s.x.lora?.output;
  const masks = m.slidingWindow !== undefined && m.slidingLayers > 0 ? 2 : 1;
  return 4 + (output ? C * m.hidden : 0) + masks * 2 * s.o.seq;
}

/** The loss's forward pass from the last block's output `hidden`. */
export function lossForward(mem: Mem, s: StepSetup, hidden: H): LossState {
  const x = s.x;
  const { C, m } = x;
  const V = m.vocab / x.tp;
  const T = s.tokens;
  const tags = lossTags(s);
  const final = finalNorm(mem, s, hidden);
  const kind = s.o.loss ?? 'standard';
  if (kind === 'fused') {
    // Liger: logits a chunk at a time, the input's gradient (and the output layer's) made in the forward pass
    const chunk = Math.max(1, Math.ceil((V * C) / (m.hidden * C)));
    mem.free(mem.alloc((C * V * T) / chunk, x.tags.transient), mem.alloc((4 * V * T) / chunk, x.tags.transient));
    const out = s.table.ends.find((t) => t.key === 'lm_head') ?? s.table.ends.find((t) => t.key === 'embed');
    const weightGrad =
      out && s.endsGrads
        ? mem.alloc(
            out.numel * x.gradBytes,
            s.tags.line("loss: the output layer's gradient, computed in the forward pass", 'logitsBytes', 'Liger saves it for the backward pass'),
          )
        : 0;
    return { kind, chunks: [mem.alloc(x.R * m.hidden * x.tokens, tags.fused)], final, lse: 0, weightGrad };
  }
  const n = kind === 'chunked' ? CONSTANTS.chunkedLossChunks.value : 1;
  const logits: H[] = [];
  for (let i = 0; i < n; i++) logits.push(mem.alloc((C * V * T) / n, x.tags.transient));
  if (compilesLoss(s.o)) {
    // a compiled cross-entropy keeps its input, the 16-bit logits, and a log-sum-exp per token
    for (const h of logits) mem.retag(h, tags.compiled);
    return { kind: 'compiled', chunks: logits, final, lse: mem.alloc(4 * T, tags.compiled) };
  }
  const softcap = m.arch.finalSoftcap ? mem.alloc(activationBytes(s.o.precision) * m.vocab * x.tokens, tags.softcap) : 0;
  const chunks: H[] = [];
  for (let i = 0; i < n; i++) {
    const f32 = C !== 4 ? mem.alloc((4 * V * T) / n, x.tags.transient) : 0;
    chunks.push(mem.alloc((4 * V * T) / n, tags.logprobs));
    mem.free(f32);
  }
  mem.free(...logits);
  if (softcap) final.push(softcap);
  return { kind, chunks, final, lse: 0 };
}

/** The loss's backward pass down to the last block's output gradient; the output layer's weight gradient. */
export function lossBackward(mem: Mem, s: StepSetup, loss: LossState, grads: GradStore): void {
  const x = s.x;
  const { C, m } = x;
  const V = m.vocab / x.tp;
  const T = s.tokens;
  const h = m.hidden;
  const tags = lossTags(s);
  if (loss.kind === 'fused') {
    mem.free(...loss.chunks);
    adoptWeightGrad(mem, s, loss.weightGrad ?? 0, grads);
  } else if (loss.kind === 'compiled') {
    // the compiled loss's backward: the logits' 16-bit gradient from the logits and the log-sum-exp; run in the
    // model's graph without a checkpoint, two logit-sized buffers (measured on an H200: fixtures/plan/
    // measured-peaks-h200-compile.json's fit rows)
    const whole = s.o.recompute === 'none' ? 2 : 1;
    const n = loss.chunks.length;
    for (let i = n - 1; i >= 0; i--) {
      const g = mem.alloc((whole * C * V * T) / n, tags.grads);
      mem.free(loss.chunks[i] as H);
      const gx = mem.alloc((C * h * x.tokens) / n, x.tags.grads);
      mem.free(g, gx);
    }
    mem.free(loss.lse);
  } else chunkedBackward(mem, s, loss.chunks, tags.grads);
  outputGrads(mem, s, grads, loss.kind === 'fused');
  mem.free(...loss.final);
}

/** The fused loss's output-layer gradient becomes param.grad in the backward pass (or is added into it). */
function adoptWeightGrad(mem: Mem, s: StepSetup, h: H, grads: GradStore): void {
  if (!h) return;
  const key = s.table.ends.some((t) => t.key === 'lm_head') ? 'lm_head' : 'embed';
  if (grads.has(key) || s.x.gradsLeave || s.x.gradSink) mem.free(h);
  else {
    mem.retag(h, s.x.tags.paramGrads);
    grads.set(key, h);
  }
}

/** The cross-entropy's backward pass a chunk at a time: two fp32 logit-sized tensors, the 16-bit gradient, the input's. */
function chunkedBackward(mem: Mem, s: StepSetup, chunks: H[], tag: Tag): void {
  const x = s.x;
  const V = x.m.vocab / x.tp;
  const T = s.tokens;
  const n = chunks.length;
  const gin: H[] = [];
  for (let i = n - 1; i >= 0; i--) {
    const g1 = mem.alloc((4 * V * T) / n, tag);
    const g2 = mem.alloc((4 * V * T) / n, tag);
    mem.free(g1, chunks[i] as H);
    const g3 = x.C !== 4 ? mem.alloc((x.C * V * T) / n, tag) : 0;
    mem.free(g2);
    const gx = mem.alloc((x.C * x.m.hidden * x.tokens) / n, x.tags.grads);
    mem.free(g3);
    if (n > 1) gin.push(gx);
    else mem.free(gx);
  }
  if (n > 1) mem.free(...gin, mem.alloc(x.C * x.m.hidden * x.tokens, x.tags.grads));
}

/** The output layer's weight gradient (a tied output layer's is the embedding's) and its adapter's. */
export function outputGrads(mem: Mem, s: StepSetup, grads: GradStore, inForward: boolean): void {
  const x = s.x;
  const out = s.table.ends.find((t) => t.key === 'lm_head') ?? s.table.ends.find((t) => t.key === 'embed');
  if (out && s.endsGrads && !inForward) weightGrad(mem, x, out.key, out.numel * x.gradBytes, 0, grads);
  const norm = s.table.ends.find((t) => t.key === 'norm');
  if (norm && s.endsGrads) weightGrad(mem, x, 'norm', norm.numel * x.gradBytes, 0, grads);
  const adapter = s.table.ends.find((t) => t.key === 'lm_head.lora');
  if (adapter) weightGrad(mem, x, adapter.key, adapter.numel * (x.lora?.adapterBytes ?? 4), 0, grads);
}
