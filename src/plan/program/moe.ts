/**
 * A mixture-of-experts layer's MLP as transformers runs its MoE blocks (Mixtral, Qwen-MoE, DeepSeek): the router's
 * probabilities in fp32, top-k's indices and weights, and for every (token, expert) pair the token's hidden state
 * gathered into the expert's batch (`hidden_states[top_x]`), the expert's output kept by the multiplication with its
 * routing weight, and the index tensors the gather, the weight lookup and index_add_ keep; the experts' SwiGLU tensors
 * as one MLP as wide as the experts a token visits; Qwen2-MoE's shared expert gate. With PEFT's all-linear on
 * transformers 5's fused experts, each layer's merged expert weights and every expert matmul's input (moe-adapters.ts).
 */
import { activationBytes, streamBytes } from '../precision.js';
import { type BlockContext, blockDims, type Keeper, type Lin } from './block-context.js';
import { type GradStore, linearBack, linears, type MatmulExtras, weightGrad } from './linear.js';
import type { H, Mem } from './mem.js';

/** int64 indices: the pair's token (kept by the gather and index_add_) and its top-k slot (kept by the weight lookup). */
const INDEX_BYTES_PER_PAIR = 2 * 8;

/** The experts' forward pass from the post-attention norm's output `n2`; answers the layer's MLP output. */
export function moeForward(k: Keeper, n2: H, readers: Lin[], extras: MatmulExtras): H {
  const { x } = k;
  const m = x.m;
  const moe = m.moe!;
  const h = m.hidden;
  const e = activationBytes(x.precision);
  const amp = x.precision.startsWith('amp');
  const top = moe.expertsPerToken;
  // the router reads the norm's output (kept for its weight's gradient when it trains); its logits go into the routing
  k.f(...linears(k, n2, x.R, readers, 'mlp-in', extras, false, false));
  // softmax (or sigmoid) over the experts in fp32; top-k's values and indices, their normalised and cast weights
  k.keep(k.a(moe.experts * 4 + top * (4 + 8 + 4 + e) + (amp ? 2 * h : 0)), moe.experts * 4 + top * (4 + 8 + 4 + e) + (amp ? 2 * h : 0), 'mlp-in');
  // frozen experts under adapters keep no input for their weights' gradient: only the output the weighting keeps
  const perPair = ((x.full ? streamBytes(x.precision) + (amp ? 2 : 0) : 0) + e) * h + INDEX_BYTES_PER_PAIR;
  k.keep(k.a(top * perPair), top * perPair, 'mlp-mid');
  const f = blockDims(x, true).f;
  const { C } = x;
  for (let i = 0; i < 3; i++) k.keep(k.a(C * f), C * f, 'mlp-mid');
  if (extras.expertMatmulBytes) k.f(k.mem.alloc(extras.expertMatmulBytes, x.tags.matmul ?? x.tags.transient));
  if (moe.sharedExpertGate) k.keep(k.a(h * e + 4), h * e + 4, 'mlp-mid');
  expertAdapters(k);
  if (!k.owned(n2)) k.f(n2);
  return k.a(C * h);
}

/** PEFT's ParamWrapper on the fused experts: each layer's merged weights and the expert matmuls' inputs, kept. */
function expertAdapters(k: Keeper): void {
  const { x } = k;
  const wrapped = x.lora?.experts ?? [];
  if (wrapped.length === 0) return;
  const moe = x.m.moe!;
  const merged = wrapped.reduce((s, p) => s + x.lora!.baseBytes * moe.experts * p.in * p.out, 0);
  k.keepBytes(k.mem.alloc(merged, x.tags.expertWeights), merged, 'mlp-mid', x.tags.expertWeights);
  const inputs = x.C * moe.expertsPerToken * wrapped.reduce((s, p) => s + p.in, 0);
  const h = k.mem.alloc(inputs * x.tokens, x.tags.expertInputs);
  k.keepBytes(h, inputs * x.tokens, 'mlp-mid', x.tags.expertInputs);
}

/** The experts' backward pass: their SwiGLU's gradients, the router's, the experts' weight gradients when they train. */
export function moeBackward(mem: Mem, x: BlockContext, grads: GradStore, readers: Lin[], extras: MatmulExtras): void {
  const f = blockDims(x, true).f;
  const g = (perToken: number): H => mem.alloc(perToken * x.tokens, x.tags.grads);
  const gmid = g(x.C * f);
  const gact = g(x.C * f);
  const gup = g(x.C * f);
  mem.free(gmid);
  const gpre = g(x.C * f);
  mem.free(gact, gup);
  const gx = g(x.C * x.m.hidden);
  mem.free(gpre);
  if (x.full) weightGrad(mem, x, 'experts', x.expertParams * x.gradBytes, 0, grads);
  for (const l of readers) mem.free(linearBack(mem, x, l, grads, extras));
  mem.free(gx);
}
