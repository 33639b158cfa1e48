/**
 * A training run replayed tensor by tensor through PyTorch's caching allocator (torch-allocator.ts): the weights
 * as they are loaded, then steps of forward pass, loss, backward pass and optimizer step as PyTorch eager runs them
 * (block-replay.ts for the blocks), so that the planner says what max_memory_reserved() will report: the allocated
 * peak plus what the allocator holds in segments it cannot hand out at that moment.
 *
 * Three steps are replayed, as the measured runs are: the first allocates the optimizer's states between the
 * gradients and the next step's activations, the second and third reuse the cache the first left. Reserved memory
 * only grows in a run (segments go back to the driver only on empty_cache()), so the third step's figure is the run's.
 */
import { adaptedModules, linearModules, outputAdapted, quantisedBase, quantisedBytesPerWeight } from './adapters.js';
import { blockBackward } from './block-backward.js';
import { blockForward, finalNorm, type BlockContext, type GradStore, type H, type KeptBlock, Tape } from './block-replay.js';
import { dtypes } from './activations.js';
import { compiledPerOpDropsLastMatmul } from './compile-activations.js';
import type { ModelConfig } from './model-config.js';
import { bytesPerParam, optimizerStateBytes, pagedOptimizer } from './model-states.js';
import { compilesBlocks, compilesLoss, fusedAttention, type TrainOptions } from './options.js';
import { CUBLAS_WORKSPACE_BYTES } from './overheads.js';
import { countParams } from './params.js';
import { TorchAllocatorModel, type AllocatorStats } from './torch-allocator.js';

/** How the weights came to the GPU before the first step. */
export type LoadHistory =
  /** loaded in their training dtype (from_pretrained(torch_dtype=...), or built so), nothing left cached */
  | 'loaded'
  /** built in fp32 on the GPU and cast to bf16 with model.to(torch.bfloat16), the cache kept (the fit runs' script) */
  | 'fp32-cast';

/** One parameter tensor as the GPU holds it, in the order the model builds them. */
interface Param {
  key: string;
  bytes: number;
  /** Elements that train (0 for a frozen tensor). */
  trains: number;
  /** Elements of a weight quantised as it loads (0 for the others). */
  quantised: number;
}

/** What the replay needs of the options, worked out once. */
interface Setup {
  x: BlockContext;
  layers: number;
  /** Bytes per value of a trained parameter's gradient, and of its optimizer states (master weights included). */
  gradBytes: number;
  stateBytes: number;
  /** Bytes per value of a foreach step's temporary. */
  stepBytes: number;
  foreach: boolean;
  params: Param[];
  /** Every trained tensor, by gradient key: its elements on this GPU (after ZeRO / FSDP sharding of the states). */
  trained: Map<string, number>;
  /** FSDP2 (ZeRO-3): how the units are gathered and their gradients reduce-scattered. */
  fsdp: Fsdp | undefined;
}

/**
 * FSDP2 as torchtitan and torchtune apply it: a unit per block and a root unit (embeddings, final norm, output
 * layer); a unit's parameters are all-gathered into a flat buffer on the all-gather stream and copied out to their
 * unsharded tensors for its forward pass (freed after it, but for the last block's) and again for its backward pass;
 * its gradients are reduce-scattered from an fp32 buffer on the reduce-scatter stream.
 */
interface Fsdp {
  dp: number;
  /** Bytes per gathered value (MixedPrecisionPolicy's param_dtype: bf16 under amp-bf16). */
  gathered: number;
  /** The parameter tensors of block i's unit and of the root unit, in elements on this GPU's tensor-parallel share. */
  unit: (i: number) => number[];
  root: number[];
}

/** The all-gather and reduce-scatter streams of FSDP2: blocks freed on one are not reused by another. */
const ALL_GATHER = 1;
const REDUCE_SCATTER = 2;

function setup(m: ModelConfig, o: TrainOptions): Setup {
  const p = o.parallel;
  const lora = o.lora;
  const full = !lora;
  // FSDP2's MixedPrecisionPolicy gathers bf16 weights: the blocks compute in bf16 without autocast
  const precision = p.zero >= 3 && !lora && o.precision === 'amp-bf16' ? 'bf16-pure' : o.precision;
  const ctx = lora
    ? {
        precision,
        lora: {
          paths: new Set<string>(),
          adapterBytes: lora.dtype === 'fp32' || !lora.dtype ? 4 : 2,
          dropout: lora.dropout,
          dora: lora.dora,
          baseBytes: lora.base === 'fp32' ? 4 : 2,
        },
      }
    : { precision };
  const { R, C, autocast } = dtypes(ctx);
  const b = bytesPerParam(o.precision, o.optimizer);
  const ab = lora ? (lora.dtype === 'fp32' || !lora.dtype ? 4 : 2) : 0;
  const quantised = lora ? quantisedBase(lora.base) : false;
  const baseBytes = lora ? (quantised ? 2 : lora.base === 'fp32' ? 4 : 2) : b.weights;
  const paths = new Set(lora ? [...adaptedModules(m, lora), ...(m.moe ? adaptedModules(m, lora, true) : [])].map((l) => l.path) : []);
  const x: BlockContext = {
    m,
    batch: o.batch,
    seq: o.seq,
    tp: p.tp,
    R,
    C,
    autocast,
    full,
    weightBytes: p.zero >= 3 && !lora && o.precision === 'amp-bf16' ? 2 : baseBytes,
    lora: lora && { paths, rank: lora.rank, adapterBytes: ab, dropout: lora.dropout, dora: lora.dora, baseKeepsInput: !!lora.quantKeepsInput },
    fusedAttention: fusedAttention(m, o.attention, o.precision),
    kvCacheCopies: o.recompute === 'none' && o.loss !== 'chunked',
    gradsLeave: p.zero >= 3 || !!o.optimizerInBackward,
    autocastCache: [],
  };
  const c = countParams(m);
  const layers = m.layers / p.pp;
  const dp = p.gpus / (p.tp * p.pp);
  const shard = p.zero >= 3 ? dp : 1;
  const params: Param[] = [];
  const trained = new Map<string, number>();
  const add = (key: string, numel: number, trains: boolean, bytesPer: number, quantisedAs = false): void => {
    params.push({ key, bytes: (numel * bytesPer) / shard, trains: trains ? numel : 0, quantised: quantisedAs ? numel / shard : 0 });
    if (trains) trained.set(key, numel / (p.zero >= 1 ? dp : 1));
  };
  const other = baseBytes; // a quantised model's other parameters stay in 16 bits, as loaded (train-states.ts)
  add('embed', (c.embedding / p.tp) * (p.pp > 1 ? 0 : 1) || c.embedding / p.tp, full, other);
  for (let i = 0; i < layers; i++) {
    const moe = !!m.moe && i >= m.moe.denseLayers;
    for (const l of linearModules(m, moe)) {
      const numel = (l.in * l.out) / p.tp;
      const bytes = quantised ? quantisedBytesPerWeight(lora!.base, lora!.doubleQuant, l.in) : baseBytes;
      add(`${i}.${l.path}`, numel, full, bytes, quantised);
      if (paths.has(l.path)) {
        const a =
          lora!.rank * (l.in / (l.site === 'attn-out' || l.site === 'mlp-act' ? p.tp : 1)) +
          (lora!.rank * l.out) / (l.site === 'attn-out' || l.site === 'mlp-act' ? 1 : p.tp);
        add(`${i}.${l.path}.lora`, a + (lora!.dora ? l.out : 0), true, ab);
      }
    }
    if (moe && m.moe) add(`${i}.experts`, (m.moe.experts * c.expert) / p.ep / p.tp, full, quantised ? 0.5 : baseBytes, quantised);
    add(`${i}.norms`, (m.norm === 'layernorm' ? 4 : 2) * m.hidden, full, other);
  }
  add('norm', c.finalNorm, full, other);
  if (c.lmHead) add('lm_head', c.lmHead / p.tp, full, other);
  if (lora && outputAdapted(m, lora)) add('lm_head.lora', (lora.rank * (m.hidden + m.vocab)) / p.tp, true, ab);
  const lb = lora ? ab : b.grads;
  const unit = (i: number): number[] => {
    const moe = !!m.moe && i >= m.moe.denseLayers;
    const ls = linearModules(m, moe).map((l) => (l.in * l.out) / p.tp);
    if (moe && m.moe) ls.push((m.moe.experts * c.expert) / p.ep / p.tp);
    return [...ls, (m.norm === 'layernorm' ? 4 : 2) * m.hidden];
  };
  const fsdp: Fsdp | undefined =
    p.zero >= 3 && !lora
      ? { dp, gathered: o.precision === 'amp-bf16' ? 2 : b.weights, unit, root: [c.embedding / p.tp, c.finalNorm, c.lmHead / p.tp].filter((n) => n > 0) }
      : undefined;
  const foreach = o.offload === 'none' && !o.fusedOptimizer && o.optimizer !== 'sgd' && !o.optimizer.includes('8bit') && !o.optimizerInBackward;
  return {
    x,
    layers,
    gradBytes: lb,
    stateBytes:
      pagedOptimizer(o.optimizer) || o.offload !== 'none'
        ? 0
        : optimizerStateBytes(o.optimizer, lora ? ab : o.precision === 'bf16-pure' || o.precision === 'fp8-torchao' ? 2 : 4) + (lora ? 0 : b.master),
    stepBytes: lora ? ab : b.master || o.precision === 'fp32' || o.precision === 'amp-bf16' ? 4 : 2,
    foreach,
    params,
    trained,
    fsdp,
  };
}

/** The replay's figures: the allocator's peaks over the run. */
export type ReplayResult = AllocatorStats;

/**
 * Replays `steps` training steps of `m` under `o` through the caching allocator model; answers its figures, or
 * undefined where the run is not PyTorch eager (Megatron-LM's own buffers are not modelled here).
 * @throws InvalidArgumentError for adapters the model cannot take (as estimateTrain refuses them first)
 */
export function replayTraining(m: ModelConfig, o: TrainOptions, history: LoadHistory = 'loaded', steps = 3): ReplayResult | undefined {
  if (o.framework === 'megatron') return undefined;
  const s = setup(m, o);
  const al = new TorchAllocatorModel();
  const tokens = o.batch * o.seq;
  const t = new Tape(al, tokens);
  const { x } = s;
  // ---- the weights
  const held = new Map<string, H>();
  if (history === 'fp32-cast') {
    const f32 = s.params.map((q) => t.p((q.bytes / (q.key.endsWith('.lora') ? 1 : x.weightBytes)) * 4));
    s.params.forEach((q, i) => {
      held.set(q.key, t.p(q.bytes));
      t.f(f32[i]!);
    });
  } else
    for (const q of s.params) {
      // a quantised weight arrives in 16 bits and is quantised on the GPU (bitsandbytes' quantize_4bit / int8):
      // the 16-bit copy is freed into the cache once the packed weight and its quant state are made
      const wide = q.quantised ? t.p(2 * q.quantised) : 0;
      held.set(q.key, t.p(q.bytes));
      t.f(wide);
    }
  const input = t.p(16 * tokens); // token ids and labels, int64
  const workspace = t.p(CUBLAS_WORKSPACE_BYTES); // made by the first matmul, kept by its handle
  const states = new Map<string, H>();
  for (let step = 0; step < steps; step++) {
    // the figures are the last step's, as the measured runs take them (reset_peak_memory_stats before it)
    if (step === steps - 1) al.resetPeaks();
    const grads: GradStore = new Map();
    for (let micro = 0; micro < o.gradAccum; micro++) microStep(t, s, o, grads);
    if (!o.optimizerInBackward) optimizerStep(t, s, grads, states);
    for (const g of grads.values()) t.f(g);
  }
  void held;
  void input;
  void workspace;
  return al.stats();
}

/**
 * The tensors torchtitan's per-op policy saves of a block besides its input: the outputs of SDPA and of every other
 * aten.mm, in the order the block runs them (q, v, w1, w2).
 */
function perOpSaved(t: Tape, s: Setup, o: TrainOptions, moe: boolean): H[] {
  const { x } = s;
  const m = x.m;
  const heads = m.heads / x.tp;
  const q = (m.heads * m.headDim) / x.tp;
  const kv = (m.kvHeads * m.headDim) / x.tp;
  const f = (moe && m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate) / x.tp;
  const saved = [t.a(x.C * q), t.a(4 * heads), t.a(x.C * q), t.a(x.C * kv), t.a(x.C * f)];
  // compiled, the partitioner leaves w2's output unsaved: the backward never reads it (compile-activations.ts)
  if (compilesBlocks(o) && compiledPerOpDropsLastMatmul(m, !!o.lora?.dora)) return saved;
  return [...saved, t.a(x.C * m.hidden)];
}

/** One micro-batch: forward, loss, backward; weight gradients land in `grads`. */
function microStep(t: Tape, s: Setup, o: TrainOptions, grads: GradStore): void {
  const { x, fsdp } = s;
  const { R, m } = x;
  const h = m.hidden;
  const V = m.vocab / x.tp;
  const full = o.recompute === 'full';
  const perOp = o.recompute === 'op';
  const moeLayer = (i: number): boolean => !!m.moe && i >= m.moe.denseLayers;
  const gathered = new Map<number, H[]>();
  const gather = (sizes: number[]): H[] => {
    const g = fsdp!.gathered;
    const flat = t.p(sizes.reduce((a, n) => a + n, 0) * g, ALL_GATHER);
    const out = sizes.map((n) => t.p(n * g));
    t.f(flat);
    return out;
  };
  /** A unit's reduce-scatter: its unsharded gradients cast to fp32 into one buffer, this GPU's shard out. */
  const reduceScatter = (sizes: number[], unsharded: H[], key: string): void => {
    const n = sizes.reduce((a, v) => a + v, 0);
    const input = t.p(n * 4, REDUCE_SCATTER);
    t.f(...unsharded);
    const shard = t.p((n * 4) / fsdp!.dp, REDUCE_SCATTER);
    t.f(input);
    if (grads.has(key)) t.f(shard);
    else grads.set(key, shard);
  };
  const root = fsdp ? gather(fsdp.root) : [];
  // ---- forward: the embedding's output, then each block (under checkpointing, without autograd: its input stays)
  let hidden = t.a(R * h);
  const blocks: Array<{ input: H; block: KeptBlock | undefined; offloaded: boolean; saved: H[] }> = [];
  for (let i = 0; i < s.layers; i++) {
    if (fsdp) gathered.set(i, gather(fsdp.unit(i)));
    const keepsAll = !full && !perOp;
    const { out, block } = blockForward(t, x, hidden, !full, moeLayer(i), keepsAll);
    let saved: H[] = [];
    if (perOp) {
      // per-op checkpointing: what the policy saves stays, the rest is made again in the backward pass
      for (const e of block.kept) t.f(e.h);
      saved = perOpSaved(t, s, o, moeLayer(i));
    }
    // activation offloading: the kept tensors go to pinned host memory; about two layers' worth stay on the GPU
    const offloaded = keepsAll && !!o.activationOffload && i < s.layers - 2;
    if (offloaded) for (const e of block.kept) t.f(e.h);
    blocks.push({ input: keepsAll ? 0 : hidden, block: keepsAll ? block : undefined, offloaded, saved });
    // FSDP2 reshards a block after its forward pass, but for the last one, which its backward pass needs at once
    if (fsdp && i < s.layers - 1) {
      t.f(...gathered.get(i)!);
      gathered.delete(i);
    }
    hidden = out;
  }
  const norm = finalNorm(t, x, hidden);
  const lossKept = lossForward(t, s, o, V);
  if (!x.full) t.f(norm.out);
  // leaving autocast clears its cache of weight copies nothing saved
  t.f(...x.autocastCache.splice(0));
  // ---- backward
  const rootSink: H[] = [];
  x.gradSink = fsdp ? rootSink : undefined;
  lossBackward(t, s, o, lossKept, V, grads);
  t.f(...norm.kept);
  if (x.full) t.f(norm.out);
  let g = t.a(R * h);
  for (let i = s.layers - 1; i >= 0; i--) {
    const b = blocks[i]!;
    if (fsdp && !gathered.has(i)) gathered.set(i, gather(fsdp.unit(i)));
    let block = b.block;
    let redone: H = 0;
    if (!block) {
      // the checkpoint runs the block again with autograd: its output only feeds the block's own backward pass
      const again = blockForward(t, x, b.input, true, moeLayer(i), false);
      block = again.block;
      redone = again.out;
    } else if (b.offloaded) block = { ...block, kept: block.kept.map((e) => ({ ...e, h: e.h ? t.a(e.bytes) : 0 })) };
    const sink: H[] = [];
    if (fsdp) x.gradSink = sink;
    blockBackward(t, x, block, grads, String(i), moeLayer(i));
    // the input's gradient: the output's, and what the two branches add to it
    const gi = t.a(R * h);
    t.f(g, b.input, redone, ...b.saved);
    g = gi;
    if (fsdp) {
      reduceScatter(fsdp.unit(i), sink, `unit.${i}`);
      t.f(...gathered.get(i)!);
      gathered.delete(i);
    }
  }
  t.f(g);
  if (x.full) {
    const made = t.p(V * h * (fsdp ? fsdp.gathered : s.gradBytes));
    if (fsdp) rootSink.push(made);
    else if (grads.has('embed') || x.gradsLeave) t.f(made);
    else grads.set('embed', made);
  }
  if (fsdp) {
    x.gradSink = undefined;
    reduceScatter(fsdp.root, rootSink, 'unit.root');
    t.f(...root);
  }
}

/** What the loss keeps for the backward pass: fp32 log-probabilities (per chunk), or the fused kernel's gradients. */
function lossForward(t: Tape, s: Setup, o: TrainOptions, V: number): H[] {
  const { C } = s.x;
  const kind = o.loss ?? 'standard';
  if (kind === 'fused') {
    // Liger: logits a chunk at a time, the input's gradient (and the output layer's) made in the forward pass
    const chunk = 1 / Math.max(1, Math.ceil((V * C) / (s.x.m.hidden * C)));
    const tmp = [t.a(C * V * chunk), t.a(4 * V * chunk)];
    t.f(...tmp);
    return [t.a(s.x.R * s.x.m.hidden)];
  }
  const chunks = kind === 'chunked' ? 8 : 1;
  const logits: H[] = [];
  for (let i = 0; i < chunks; i++) logits.push(t.a((C * V) / chunks));
  // a compiled cross-entropy keeps the 16-bit logits and a log-sum-exp per token (eager with --compile blocks)
  if (compilesLoss(o)) return [...logits, t.a(4)];
  const kept: H[] = [];
  for (let i = 0; i < chunks; i++) {
    const f32 = C !== 4 ? t.a((4 * V) / chunks) : 0;
    kept.push(t.a((4 * V) / chunks));
    t.f(f32);
  }
  t.f(...logits);
  return kept;
}

/** The loss's backward pass down to the gradient of the output layer's input; the output layer's weight gradient. */
function lossBackward(t: Tape, s: Setup, o: TrainOptions, kept: H[], V: number, grads: GradStore): void {
  const { C, m } = s.x;
  const h = m.hidden;
  const outputTrains = s.x.full;
  const weightGrad = (): void => {
    if (!outputTrains) return;
    // a tied output layer is the embedding's weight: its gradient is the embedding's param.grad
    const key = m.tiedEmbeddings ? 'embed' : 'lm_head';
    const made = t.p(V * h * (s.fsdp ? s.fsdp.gathered : s.gradBytes));
    if (s.x.gradSink) s.x.gradSink.push(made);
    else if (grads.has(key) || s.x.gradsLeave) t.f(made);
    else grads.set(key, made);
  };
  if ((o.loss ?? 'standard') === 'fused') {
    t.f(...kept);
    weightGrad();
    return;
  }
  if (compilesLoss(o)) {
    // the compiled loss's backward: the logits' 16-bit gradient, a chunk at a time, from the logits and the lse
    const n = kept.length - 1;
    for (let i = n - 1; i >= 0; i--) {
      const g = t.a((C * V) / n);
      t.f(kept[i]!);
      const gx = t.a((C * h) / n);
      t.f(g, gx);
    }
    t.f(kept[n]!);
    weightGrad();
    return;
  }
  const n = kept.length;
  const gin: H[] | undefined = n > 1 ? [] : undefined;
  for (let i = n - 1; i >= 0; i--) {
    const g1 = t.a((4 * V) / n);
    const g2 = t.a((4 * V) / n);
    t.f(g1, kept[i]!);
    const g3 = C !== 4 ? t.a((C * V) / n) : 0;
    t.f(g2);
    const gx = t.a((C * h) / n);
    gin?.push(gx);
    t.f(g3);
    if (!gin) t.f(gx);
  }
  if (gin) {
    const all = t.a(C * h);
    t.f(...gin, all);
  }
  weightGrad();
}

/** The optimizer step: its states on the first step (between the gradients), a foreach step's temporaries. */
function optimizerStep(t: Tape, s: Setup, grads: GradStore, states: Map<string, H>): void {
  for (const [key, numel] of s.trained)
    if (!states.has(key) && s.stateBytes > 0) {
      // zeros_like per state: exp_avg, then exp_avg_sq (two allocations of the state's dtype)
      const half = (numel * s.stateBytes) / 2;
      states.set(key, t.p(half));
      states.set(`${key}#2`, t.p(half));
    }
  if (s.foreach) {
    const tmp: H[] = [];
    for (const numel of s.trained.values()) tmp.push(t.p(numel * s.stepBytes));
    t.f(...tmp);
  }
  void grads;
}
