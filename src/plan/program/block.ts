/**
 * One transformer block as PyTorch eager runs a Hugging Face model's block, tensor by tensor: the forward pass (what
 * each op allocates and frees, what autograd saves) and the backward pass (each gradient where autograd makes it,
 * each saved tensor freed when its node has run). The family's traits (model-config.ts ArchTraits) choose the ops:
 * RMSNorm or LayerNorm, separate or fused q/k/v, q/k norms, norms after attention and MLP, rotary or learned
 * positions, a parallel residual, SwiGLU or GELU (one kernel, or transformers' Python formula), dropout, latent
 * attention, experts (moe.ts). What each op saves was checked against torch.autograd.graph.saved_tensors_hooks on an
 * H200 (docs/plan-training.md); a block saves per token exactly what the planner counts.
 */
import { type BlockContext, type BlockRun, blockDims, Keeper, type Lin, type RecordMode, site, type Stage } from './block-context.js';
import { compiledKept } from './compiled.js';
import { type GradStore, linearBack, linears, type MatmulExtras } from './linear.js';
import type { H, Mem } from './mem.js';
import { moeBackward, moeForward } from './moe.js';

/** How a block runs its forward pass. */
export interface BlockPass {
  mode: RecordMode;
  /** A mixture-of-experts layer. */
  moe: boolean;
  /** The block frees or keeps its input; false where a checkpoint holds it. */
  owns: boolean;
  extras: MatmulExtras;
  /**
   * Hugging Face generate's cache (generate.ts; `inference` mode): DynamicLayer.update copies the layer's keys and
   * values into it (torch.cat), which outlive the block; answers the copy's handle (0 where a preallocated cache is
   * written in place). The rotated keys and the projection's values are freed once copied, and SDPA reads the cache.
   */
  kvCache?: (part: 'keys' | 'values') => H;
}

/** One block's forward pass from `input` (R bytes per value); answers its output and what it saved. */
export function blockForward(mem: Mem, x: BlockContext, input: H, pass: BlockPass): { out: H; run: BlockRun } {
  const k = new Keeper(mem, x, pass.mode, pass.owns ? -1 : input);
  if (pass.mode === 'inference') {
    const out = x.m.family === 'gpt' ? gptInference(k, input, pass) : llamaInference(k, input, pass);
    k.flush();
    return { out, run: k.run };
  }
  const out = x.m.family === 'gpt' ? gptForward(k, input, pass) : llamaForward(k, input, pass);
  if (pass.mode === 'compiled') for (const t of compiledKept(x)) k.keepCompiled(t.bytes, 'attn-norm');
  return { out, run: k.run };
}

/**
 * RMSNorm as transformers runs it: the input cast to fp32 (kept; under fp32 the input itself), squared (a transient),
 * scaled, cast back (kept when the weight trains) and multiplied by the weight. Answers the output.
 */
function rmsNorm(k: Keeper, input: H, stage: Stage, width = k.x.m.hidden): H {
  const { R, full } = k.x;
  const f32 = R === 4 ? input : k.a(4 * width);
  k.f(k.a(4 * width));
  const scaled = k.a(4 * width);
  let cast = scaled;
  if (R !== 4) {
    cast = k.a(R * width);
    k.f(scaled);
  }
  const out = k.a(R * width);
  k.keep(f32, 4 * width, stage);
  if (full) k.keep(cast, R * width, stage);
  else k.f(cast);
  return out;
}

/**
 * RoPE on a query or key projection (frees it unless `keepInput`): q*cos, the rotated half (a negated half, a
 * concatenation), *sin, the sum.
 */
function rope(k: Keeper, q: H, dim: number, keepInput = false): H {
  const C = k.x.C;
  const a = k.a(C * dim);
  const neg = k.a((C * dim) / 2);
  const cat = k.a(C * dim);
  k.f(neg);
  if (!keepInput) k.f(q);
  const b = k.a(C * dim);
  k.f(cat);
  const out = k.a(C * dim);
  k.f(a, b);
  return out;
}

/** The math kernel's attention matrix (kept per layer), unless a fused kernel runs or it is recomputed. */
function scores(k: Keeper): void {
  const x = k.x;
  if (x.fusedAttention || x.scoresRecomputed) return;
  const bytes = x.scoreBytes * x.batch * (x.m.heads / x.tp) * x.seq * x.seq;
  k.keepBytes(k.mem.alloc(bytes, x.tags.scores), bytes, 'attn', x.tags.scores);
}

/** Llama's block (RMSNorm, q/k/v, RoPE, SDPA, SwiGLU or experts) with the traits of its family. */
function llamaForward(k: Keeper, input: H, pass: BlockPass): H {
  const { x } = k;
  const { R, C, m } = x;
  const h = m.hidden;
  const d = blockDims(x, pass.moe);
  const extraNorms = Math.max(0, m.arch.normsPerLayer - 2);
  const n1 = rmsNorm(k, input, 'attn-norm');
  const outs = linears(k, n1, R, site(x, pass.moe, 'attn-norm'), 'attn-in', pass.extras);
  // latent attention and a fused q,k,v projection: the queries, keys and values SDPA reads are their own tensors
  if (m.mla || outs.length === 1) {
    k.f(...outs.splice(0));
    outs.push(k.a(C * d.qDim), k.a(C * d.kDim), k.a(C * d.vDim));
  }
  if (m.arch.qkNorm !== 'none') {
    rmsNormKeeps(k, d.qDim, 'attn');
    rmsNormKeeps(k, d.kDim, 'attn');
  }
  const qe = rope(k, outs[0] as H, d.qDim);
  let ke = rope(k, outs[1] as H, d.kDim);
  let vv = outs[2] as H;
  if (x.kvCacheCopies) {
    const kc = k.a(C * d.kDim);
    const vc = k.a(C * d.vDim);
    k.f(ke, vv);
    ke = kc;
    vv = vc;
  }
  const attn = k.a(C * d.oDim);
  k.keep(qe, C * d.qDim, 'attn');
  k.keep(ke, C * d.kDim, 'attn');
  k.keep(vv, C * d.vDim, 'attn');
  k.keep(attn, C * d.oDim, 'attn');
  k.keep(k.a(4 * d.heads), 4 * d.heads, 'attn');
  scores(k);
  let [o] = linears(k, attn, C, site(x, pass.moe, 'attn-out'), 'attn-out', pass.extras, true);
  if (extraNorms > 0) o = postNorm(k, o as H, 'attn-out');
  const r1 = k.a(R * h);
  k.f(o as H);
  // the block's input is the fp32 copy RMSNorm keeps when the residual stream is fp32 (the keeper owns it then)
  if (R !== 4) k.f(input);
  k.flush();
  const n2 = rmsNorm(k, r1, 'mlp-norm');
  let down = pass.moe && m.moe ? moeForward(k, n2, site(x, pass.moe, 'mlp-norm'), pass.extras) : swiglu(k, n2, d.f, pass.extras);
  if (extraNorms > 1) down = postNorm(k, down, 'mlp-act');
  const r2 = k.a(R * h);
  k.f(down);
  if (R !== 4) k.f(r1);
  k.flush();
  return r2;
}

/** What a q/k RMSNorm keeps of a `width`-wide projection (its fp32 input, its output when its weight trains). */
function rmsNormKeeps(k: Keeper, width: number, stage: Stage): void {
  k.keep(k.a(4 * width), 4 * width, stage);
  if (k.x.full) k.keep(k.a(k.x.R * width), k.x.R * width, stage);
}

/** A norm after attention or the MLP (Gemma 2/3's post-norms): RMSNorm of the branch's output before the residual add. */
function postNorm(k: Keeper, branch: H, stage: Stage): H {
  const out = rmsNorm(k, branch, stage);
  if (k.x.R !== 4) k.f(branch);
  return out;
}

/** A gated MLP: gate and up (or one fused gate_up), SiLU (or GELU) times up, down. Answers the down projection's output. */
function swiglu(k: Keeper, n2: H, f: number, extras: MatmulExtras): H {
  const { C, x } = { C: k.x.C, x: k.x };
  const ups = linears(k, n2, k.x.R, site(x, false, 'mlp-norm'), 'mlp-in', extras);
  const [gate, up] = ups;
  const act = k.a(C * f);
  k.keep(gate as H, C * (up ? f : 2 * f), 'mlp-mid');
  k.keep(act, C * f, 'mlp-mid');
  if (up) k.keep(up, C * f, 'mlp-mid');
  const mid = k.a(C * f);
  const [d] = linears(k, mid, C, site(x, false, 'mlp-act'), 'mlp-act', extras);
  return d as H;
}

/**
 * GPT's block (LayerNorm, q/k/v as one fused projection or three, learned or rotary positions, GELU, dropout) with
 * its family's traits: a parallel residual (GPT-NeoX, Phi, Falcon) whose norms read one residual state (kept once;
 * with one norm its output feeds attention and MLP alike), a fused GELU kernel keeping its input only (where
 * transformers' gelu_new is a Python formula of four tensors), rotated copies of q and k.
 */
function gptForward(k: Keeper, input: H, pass: BlockPass): H {
  const { x } = k;
  const { R, C, m } = x;
  const h = m.hidden;
  const ln = x.autocast ? 4 : R; // layer_norm runs in fp32 under autocast: its input cast and its output are fp32
  const d = blockDims(x, false);
  const parallel = m.arch.parallelResidual;
  const oneNorm = parallel && m.arch.normsPerLayer === 1;
  // LayerNorm keeps its input: the residual stream itself where it is already in the norm's dtype
  k.keep(ln === R ? input : k.a(ln * h), ln * h, 'attn-norm');
  const n1 = k.a(ln * h);
  // with one norm (Phi, Falcon-7B) the MLP reads this norm's output too: it outlives the attention's linear layers
  const outs = linears(k, n1, ln, site(x, pass.moe, 'attn-norm'), 'attn-in', pass.extras, false, !oneNorm);
  gptAttention(k, outs, d);
  const attn = k.a(C * d.qDim);
  k.keep(attn, C * d.qDim, 'attn');
  k.keep(k.a(4 * d.heads), 4 * d.heads, 'attn');
  scores(k);
  const [o] = linears(k, attn, C, site(x, pass.moe, 'attn-out'), 'attn-out', pass.extras, true);
  if (m.dropout) k.keep(k.a(h), h, 'attn-out');
  // a parallel block's MLP reads the block's input; a sequential one the residual after attention
  let mlpIn = input;
  if (!parallel) {
    mlpIn = k.a(R * h);
    k.f(o as H);
    if (ln !== R) k.f(input);
    k.flush();
    k.keep(ln === R ? mlpIn : k.a(ln * h), ln * h, 'mlp-norm');
  }
  const n2 = oneNorm ? n1 : k.a(ln * h);
  const readers = site(x, pass.moe, 'mlp-norm');
  // the one norm's output is kept by the attention's layers already: the MLP's keep nothing of their own
  const [fc] = oneNorm ? linearsKeepingNothing(k, n2, ln, readers, pass.extras) : linears(k, n2, ln, readers, 'mlp-in', pass.extras);
  if (oneNorm && !k.owned(n1)) k.f(n1);
  const down = gelu(k, fc as H, pass.extras);
  if (m.dropout) k.keep(k.a(h), h, 'mlp-act');
  const r2 = k.a(R * h);
  k.f(down);
  if (parallel) {
    k.f(o as H);
    if (!k.owned(input)) k.f(input);
  } else if (ln !== R) k.f(mlpIn);
  k.flush();
  return r2;
}

/** GPT's attention inputs: the q/k/v projections' outputs kept, the cache's key and value copies, rotated q and k. */
function gptAttention(k: Keeper, outs: H[], d: ReturnType<typeof blockDims>): void {
  const { C, m } = k.x;
  // q, k and v (one fused output, or three) stay alive through attention: SDPA reads views of them
  const widths = outs.length === 1 ? [d.qDim + 2 * d.kDim] : [d.qDim, d.kDim, d.kDim];
  outs.forEach((h, i) => {
    k.keep(h, C * (widths[i] as number), 'attn');
  });
  k.keep(k.a(2 * C * d.kDim), 2 * C * d.kDim, 'attn');
  if (m.arch.rotaryFraction > 0) k.keep(k.a(C * (d.qDim + d.kDim)), C * (d.qDim + d.kDim), 'attn');
}

/** Linear layers reading an input another op keeps, keeping nothing of their own (a one-norm parallel block's MLP). */
function linearsKeepingNothing(k: Keeper, input: H, xb: number, ls: Lin[], extras: MatmulExtras): H[] {
  return linears(k.withoutInputs(), input, xb, ls, 'mlp-in', extras, true);
}

/** GELU and the down projection: transformers' Python formula (four tensors, three kept) or one fused kernel. */
function gelu(k: Keeper, fc: H, extras: MatmulExtras): H {
  const { C, m } = k.x;
  const x = k.x;
  const f = site(x, false, 'mlp-norm')[0]?.out ?? 0;
  k.keep(fc, C * f, 'mlp-mid');
  if (m.arch.fusedActivation) {
    const act = k.a(C * f);
    return linears(k, act, C, site(x, false, 'mlp-act'), 'mlp-act', extras)[0] as H;
  }
  const g = k.x.autocast ? 4 : C; // pow and tanh run in fp32 under autocast
  // 0.5 * x * (1 + tanh(c * (x + 0.044715 x^3))): four transients, three kept
  const tmp = [k.a(g * f), k.a(g * f), k.a(g * f)];
  for (let i = 0; i < 3; i++) k.keep(k.a(g * f), g * f, 'mlp-mid');
  k.f(...tmp);
  const act = k.a(g * f);
  return linears(k, act, g, site(x, false, 'mlp-act'), 'mlp-act', extras)[0] as H;
}

/**
 * One block's backward pass from the gradient of its output (R bytes per value, which the block's input gradient
 * accumulates into): each op's gradients made where autograd makes them, each saved tensor freed when its node has
 * run. Weight gradients go to `grads` (linear.ts).
 */
export function blockBackward(mem: Mem, x: BlockContext, run: BlockRun, grads: GradStore, pass: BlockPass): void {
  const release = (stage: Stage): void => {
    for (const e of run.saved) if (e.stage === stage) mem.free(e.h);
    run.saved = run.saved.filter((e) => e.stage !== stage);
  };
  mlpBackward(mem, x, grads, pass, release);
  attentionBackward(mem, x, grads, pass, release);
  for (const e of run.saved) mem.free(e.h);
  run.saved = [];
}

const grad = (mem: Mem, x: BlockContext, perToken: number): H => mem.alloc(perToken * x.tokens, x.tags.grads);

function mlpBackward(mem: Mem, x: BlockContext, grads: GradStore, pass: BlockPass, release: (s: Stage) => void): void {
  const { R, C, m } = x;
  const h = m.hidden;
  const gd = R !== C ? grad(mem, x, C * h) : 0;
  if (pass.moe && m.moe) moeBackward(mem, x, grads, site(x, pass.moe, 'mlp-norm'), pass.extras);
  else {
    const up = site(x, pass.moe, 'mlp-norm');
    const f = up[0]?.out ?? 0;
    const gmid = linearBack(mem, x, site(x, pass.moe, 'mlp-act')[0] as Lin, grads, pass.extras);
    release('mlp-act');
    const gact = grad(mem, x, (m.family === 'gpt' && x.autocast ? 4 : C) * f);
    const gup = up.length >= 2 ? grad(mem, x, C * f) : 0;
    mem.free(gmid);
    const gpre = grad(mem, x, C * f);
    mem.free(gact, gup);
    release('mlp-mid');
    const gx = linearBack(mem, x, up[0] as Lin, grads, pass.extras);
    for (const l of up.slice(1)) mem.free(linearBack(mem, x, l, grads, pass.extras));
    mem.free(gpre);
    release('mlp-in');
    mem.free(normBack(mem, x, gx));
  }
  mem.free(gd);
  release('mlp-act');
  release('mlp-mid');
  release('mlp-in');
  release('mlp-norm');
}

function attentionBackward(mem: Mem, x: BlockContext, grads: GradStore, pass: BlockPass, release: (s: Stage) => void): void {
  const { R, C, m } = x;
  const d = blockDims(x, pass.moe);
  const go = R !== C ? grad(mem, x, C * m.hidden) : 0;
  const attnOut = site(x, pass.moe, 'attn-out')[0];
  const gattn = attnOut ? linearBack(mem, x, attnOut, grads, pass.extras) : grad(mem, x, C * m.hidden);
  mem.free(go);
  release('attn-out');
  const accum = grad(mem, x, 4 * d.qDim);
  const gq = grad(mem, x, C * d.qDim);
  const gk = grad(mem, x, C * d.kDim);
  const gv = grad(mem, x, C * d.vDim);
  mem.free(accum, gattn);
  release('attn');
  const ins = site(x, pass.moe, 'attn-norm');
  const gins: H[] = [];
  if (m.family === 'gpt') {
    const gqkv = grad(mem, x, C * (d.qDim + 2 * d.kDim));
    mem.free(gq, gk, gv);
    for (const l of ins) gins.push(linearBack(mem, x, l, grads, pass.extras));
    mem.free(gqkv);
  } else {
    const inputs = [ropeBack(mem, x, gq, d.qDim), ropeBack(mem, x, gk, d.kDim), gv];
    ins.forEach((l, i) => {
      gins.push(linearBack(mem, x, l, grads, pass.extras));
      mem.free(inputs[i] ?? 0);
    });
    mem.free(...inputs.slice(ins.length));
  }
  release('attn-in');
  mem.free(...gins.slice(1));
  mem.free(normBack(mem, x, gins[0] ?? 0));
  release('attn-norm');
}

/** RoPE's backward pass (frees the gradient it is given): the gradient times cos and the rotated gradient times sin. */
function ropeBack(mem: Mem, x: BlockContext, g: H, dim: number): H {
  const a = grad(mem, x, x.C * dim);
  const b = grad(mem, x, x.C * dim);
  const out = grad(mem, x, x.C * dim);
  mem.free(a, b, g);
  return out;
}

/** A norm's backward pass from the gradient of its output (frees it): fp32 temporaries, the input's gradient. */
export function normBack(mem: Mem, x: BlockContext, g: H): H {
  const h = x.m.hidden;
  const g32 = x.R !== 4 ? grad(mem, x, 4 * h) : 0;
  mem.free(g);
  mem.free(grad(mem, x, 4 * h));
  const gh = grad(mem, x, 4 * h);
  mem.free(grad(mem, x, 4 * h), g32);
  if (x.R === 4) return gh;
  const out = grad(mem, x, x.R * h);
  mem.free(gh);
  return out;
}

/** Bytes per token one block saves in an eager forward pass (the agreement check and the notes). */
export function eagerKeptPerToken(mem: Mem, x: BlockContext, moe: boolean, input: H): number {
  return blockForward(mem, x, input, { mode: 'eager', moe, owns: true, extras: { dequantisedBytes: 0, fp8: false } }).run.keptPerToken;
}

export type { BlockRun };

/**
 * An RMSNorm without autograd as transformers' modules run it, each tensor freed where its variable lets go:
 * `hidden_states.to(torch.float32)`, `pow(2)`, `mean(-1, keepdim=True)` (+ eps, rsqrt: one fp32 value per row), the
 * scaled fp32 states (the fp32 copy freed as the variable is rebound), then Llama's `weight * states.to(dtype)` or
 * Gemma's `(states * (1 + weight.float())).type_as(x)`. `rows` values per token are normalised (the heads of a
 * per-head q/k norm). Answers the output; the input is the caller's.
 */
function normInference(k: Keeper, input: H, width: number, rows = 1): H {
  const { R, m } = k.x;
  const f32 = R === 4 ? input : k.a(4 * width);
  const sq = k.a(4 * width);
  const variance = k.a(4 * rows);
  k.f(sq);
  const eps = k.a(4 * rows);
  const rs = k.a(4 * rows);
  k.f(eps);
  const scaled = k.a(4 * width);
  k.f(rs);
  if (f32 !== input) k.f(f32);
  let out: H;
  if (m.arch.normScaleFp32) {
    const weighted = k.a(4 * width);
    k.f(scaled);
    out = R === 4 ? weighted : k.a(R * width);
    if (out !== weighted) k.f(weighted);
  } else {
    const cast = R === 4 ? scaled : k.a(R * width);
    out = k.a(R * width);
    if (cast !== scaled) k.f(cast);
    k.f(scaled);
  }
  k.f(variance);
  return out;
}

/** A tensor's norm where the tensor is let go of once normed (a q/k norm, Gemma's post-norms). */
function normedInPlaceOf(k: Keeper, t: H, width: number, rows = 1): H {
  const normed = normInference(k, t, width, rows);
  k.f(t);
  return normed;
}

/** One linear layer's output from `input` (left to the caller), with its matmul's transients. */
const linearOut = (k: Keeper, input: H, xb: number, l: Lin, extras: MatmulExtras): H => linears(k, input, xb, [l], 'attn-in', extras, true)[0] as H;

/** The layer's keys and values copied into generate's cache (DynamicLayer.update's torch.cat). */
function cacheCopies(pass: BlockPass): void {
  pass.kvCache?.('keys');
  pass.kvCache?.('values');
}

/** SDPA's output, with the math kernel's fp32 scores around it where no fused kernel applies. */
function attentionInference(k: Keeper, d: ReturnType<typeof blockDims>): H {
  const x = k.x;
  const scores = x.fusedAttention ? 0 : k.mem.alloc(x.scoreBytes * x.batch * (x.m.heads / x.tp) * x.seq * x.seq, x.tags.scores);
  const attn = k.a(x.C * d.oDim);
  k.f(scores);
  return attn;
}

/**
 * Llama's block under torch.no_grad() as transformers 5 runs it (the allocator traces of Qwen3-0.6B and Gemma-2-2B
 * prefills on one H200, 2026-12-04, name each tensor's op): the input norm; q_proj and its q norm (the projection
 * freed), k_proj and its norm, v_proj; RoPE on q and k (the projections freed after both); the keys and values
 * copied into the cache (the rotated keys and v_proj's output freed); attention; o_proj (SDPA's output, the rotated
 * queries and the norm's output freed as the attention returns); a post-norm where the family has one; the residual
 * sum (the input freed); the MLP's norm, gate, activation (gate freed), up, their product (both freed), down (the
 * product freed, then the norm's output); a post-norm; the second residual sum.
 */
function llamaInference(k: Keeper, input: H, pass: BlockPass): H {
  const { x } = k;
  const { R, C, m } = x;
  const h = m.hidden;
  const d = blockDims(x, pass.moe);
  const extraNorms = Math.max(0, m.arch.normsPerLayer - 2);
  const n1 = normInference(k, input, h);
  const ins = site(x, pass.moe, 'attn-norm');
  let q: H;
  let kk: H;
  let v: H;
  if (m.mla || ins.length === 1) {
    // latent attention or one fused q,k,v projection: the queries, keys and values SDPA reads are their own tensors
    k.f(...ins.map((l) => linearOut(k, n1, R, l, pass.extras)));
    [q, kk, v] = [k.a(C * d.qDim), k.a(C * d.kDim), k.a(C * d.vDim)];
  } else {
    const headNorm = (proj: H, width: number): H =>
      m.arch.qkNorm === 'none' ? proj : normedInPlaceOf(k, proj, width, m.arch.qkNorm === 'head' ? width / m.headDim : 1);
    q = headNorm(linearOut(k, n1, R, ins[0] as Lin, pass.extras), d.qDim);
    kk = headNorm(linearOut(k, n1, R, ins[1] as Lin, pass.extras), d.kDim);
    v = ins[2] ? linearOut(k, n1, R, ins[2], pass.extras) : k.a(C * d.vDim);
  }
  const qe = rope(k, q, d.qDim, true);
  const ke = rope(k, kk, d.kDim, true);
  k.f(q, kk);
  cacheCopies(pass);
  k.f(ke, v);
  const attn = attentionInference(k, d);
  let o = linearOut(k, attn, C, site(x, pass.moe, 'attn-out')[0] as Lin, pass.extras);
  k.f(attn, qe, n1);
  if (extraNorms > 0) o = normedInPlaceOf(k, o, h);
  const r1 = k.a(R * h);
  k.f(o, input);
  const n2 = normInference(k, r1, h);
  let down: H;
  if (pass.moe && m.moe) {
    down = moeForward(k, n2, site(x, pass.moe, 'mlp-norm'), pass.extras);
    k.flush();
  } else {
    const ups = site(x, false, 'mlp-norm');
    const gate = linearOut(k, n2, R, ups[0] as Lin, pass.extras);
    const act = k.a(C * d.f);
    k.f(gate);
    const up = ups[1] ? linearOut(k, n2, R, ups[1], pass.extras) : 0;
    const mid = k.a(C * d.f);
    k.f(act, up);
    down = linearOut(k, mid, C, site(x, false, 'mlp-act')[0] as Lin, pass.extras);
    k.f(mid, n2);
  }
  if (extraNorms > 1) down = normedInPlaceOf(k, down, h);
  const r2 = k.a(R * h);
  k.f(down, r1);
  return r2;
}

/**
 * GPT's block under torch.no_grad() (the allocator trace of a Pythia-1.4B prefill, GPT-NeoX, on one H200,
 * 2026-12-04): LayerNorm (one kernel: its output only); the q/k/v projection; RoPE on the rotated share of q and k,
 * each concatenated with the rest; the keys and values copied into the cache (the rotated keys freed); attention; the
 * output projection (SDPA's output, q/k/v, the rotated queries and the norm's output freed); then a parallel block's
 * MLP reads the block's input through its own norm (or the one norm's output), a sequential one the residual sum;
 * fc, the activation (fc freed), the down projection; the sums into the residual.
 */
function gptInference(k: Keeper, input: H, pass: BlockPass): H {
  const { x } = k;
  const { R, C, m } = x;
  const h = m.hidden;
  const d = blockDims(x, false);
  const parallel = m.arch.parallelResidual;
  const oneNorm = parallel && m.arch.normsPerLayer === 1;
  const n1 = k.a(R * h);
  const projections = site(x, pass.moe, 'attn-norm').map((l) => linearOut(k, n1, R, l, pass.extras));
  let qFull = 0;
  let kFull = 0;
  if (m.arch.rotaryFraction > 0) {
    const rq = Math.floor(d.qDim * m.arch.rotaryFraction);
    const rk = Math.floor(d.kDim * m.arch.rotaryFraction);
    // the rotated shares of views of the projections, then each concatenated with its unrotated rest
    const qr = rope(k, 0, rq);
    const kr = rope(k, 0, rk);
    qFull = k.a(C * d.qDim);
    k.f(qr);
    kFull = k.a(C * d.kDim);
    k.f(kr);
  }
  cacheCopies(pass);
  k.f(kFull);
  const attn = attentionInference(k, d);
  const o = linearOut(k, attn, C, site(x, pass.moe, 'attn-out')[0] as Lin, pass.extras);
  k.f(attn, ...projections, qFull);
  let mlpIn = input;
  if (!parallel) {
    k.f(n1);
    mlpIn = k.a(R * h);
    k.f(o, input);
  }
  if (parallel && !oneNorm) k.f(n1);
  const n2 = oneNorm ? n1 : k.a(R * h);
  const fc = linearOut(k, n2, R, site(x, pass.moe, 'mlp-norm')[0] as Lin, pass.extras);
  const f = site(x, false, 'mlp-norm')[0]?.out ?? 0;
  if (!m.arch.fusedActivation) {
    // gelu_new's formula: its intermediate tensors before the activation
    k.f(k.a(C * f), k.a(C * f), k.a(C * f));
  }
  const act = k.a(C * f);
  k.f(fc);
  const down = linearOut(k, act, C, site(x, false, 'mlp-act')[0] as Lin, pass.extras);
  k.f(act, n2);
  if (!parallel) {
    const r2 = k.a(R * h);
    k.f(down, mlpIn);
    return r2;
  }
  // mlp_output + attn_output + residual: two sums, the first freed
  const sum = k.a(R * h);
  const r2 = k.a(R * h);
  k.f(sum, o, down, input);
  return r2;
}
