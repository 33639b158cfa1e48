/**
 * One transformer block's forward pass as a sequence of tensor allocations and frees (its backward pass:
 * block-backward.ts), in the order PyTorch eager runs Hugging Face's blocks (LlamaDecoderLayer and its relatives,
 * GPT2Block), with PEFT's LoRA layers where they wrap a linear layer, so that step-replay.ts can replay a training
 * step through the caching allocator model (torch-allocator.ts).
 *
 * What each op allocates follows the op: RMSNorm casts its input to fp32, squares it (a transient), scales it and
 * casts back; LayerNorm keeps its input; each linear layer allocates its output (under autocast, its own bf16 copy
 * of an fp32 input first); RoPE makes query- and key-sized temporaries; SDPA's fused kernel its output and an fp32
 * log-sum-exp, its backward pass an fp32 accumulator for the query's gradient; a LoRA adapter its input cast to the
 * adapter's dtype, its output, the scaled output and the sum, promoted to the adapter's dtype and cast back. The
 * tensors kept for the backward pass are those activations.ts counts (a test checks that the two agree); each is
 * freed in the backward pass when the node that saved it has run, and each gradient is allocated where autograd
 * makes it.
 */
import { linearModules, type InputSite, type LinearModule } from './adapters.js';
import type { ModelConfig } from './model-config.js';
import type { TorchAllocatorModel } from './torch-allocator.js';

/** What decides the block's tensors: sizes per token, dtypes, which weights train, the adapters. */
export interface BlockContext {
  m: ModelConfig;
  batch: number;
  seq: number;
  /** Tensor-parallel size: the attention heads and the MLP's width are split over it. */
  tp: number;
  /** Bytes per value of the residual stream and of the matmuls' outputs; whether autocast casts to bf16. */
  R: number;
  C: number;
  autocast: boolean;
  /** Every weight trains (full fine-tuning); else only the adapters do. */
  full: boolean;
  /** Bytes per value of the weights the matmuls read, before autocast (their gradients have the same size). */
  weightBytes: number;
  lora?:
    | {
        paths: ReadonlySet<string>;
        rank: number;
        adapterBytes: number;
        dropout: boolean;
        dora: boolean;
        /** bitsandbytes before 0.43.2: each 4-bit matmul keeps its input. */
        baseKeepsInput?: boolean | undefined;
      }
    | undefined;
  /** A fused attention kernel (no s x s matrix); else the math kernel keeps its scores. */
  fusedAttention: boolean;
  /** Hugging Face's DynamicCache copies keys and values in a training forward pass (not under checkpointing). */
  kvCacheCopies: boolean;
  /** Weight gradients leave at once (the optimizer step in the backward pass). */
  gradsLeave: boolean;
  /** Where a block's unsharded weight gradients wait for FSDP's reduce-scatter (undefined without FSDP). */
  gradSink?: H[] | undefined;
  /**
   * torch.autocast's cache of bf16 weight copies made without autograd recording (a checkpoint's first pass): it
   * holds the copies of trainable weights until the forward pass leaves autocast. The driver frees it then.
   */
  autocastCache: H[];
}

/** A live tensor: its allocator handle (0: nothing allocated). */
export type H = number;

/** Allocates and frees tensors sized per token of the micro-batch. */
export class Tape {
  constructor(
    readonly al: TorchAllocatorModel,
    readonly tokens: number,
  ) {}
  /** A tensor of `perToken` bytes per token (none when 0). */
  a(perToken: number): H {
    return perToken > 0 ? this.al.alloc(Math.ceil(perToken * this.tokens)) : 0;
  }
  /** A tensor of `bytes` bytes (none when 0), on `stream`. */
  p(bytes: number, stream = 0): H {
    return bytes > 0 ? this.al.alloc(Math.ceil(bytes), stream) : 0;
  }
  f(...hs: H[]): void {
    for (const h of hs) if (h) this.al.free(h);
  }
}

/** Where a kept tensor is released in the backward pass: the node that saved it. */
export type Stage = 'attn-norm' | 'attn-in' | 'attn' | 'attn-out' | 'mlp-norm' | 'mlp-in' | 'mlp-mid' | 'mlp-act';

/** The tensors one block keeps from its forward to its backward pass. */
export interface KeptBlock {
  kept: Array<{ h: H; bytes: number; stage: Stage }>;
  /** Bytes per token the block keeps (the check against activations.ts). */
  keptPerToken: number;
}

/** Weight gradients made this step (param.grad), by name. */
export type GradStore = Map<string, H>;

export interface Lin extends LinearModule {
  trains: boolean;
  adapted: boolean;
}

/** The block's linear layers with their tensor-parallel share, whether each trains and whether it is adapted. */
export function modules(x: BlockContext, moe: boolean): Lin[] {
  const m = x.m;
  const ls = linearModules(m, moe);
  if (moe && m.moe) {
    // the experts a token is routed to, as one SwiGLU of their joint width (activations.ts counts them so)
    const f = (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate;
    ls.push(
      { path: 'experts.gate_proj', in: m.hidden, out: f, site: 'mlp-norm' },
      { path: 'experts.up_proj', in: m.hidden, out: f, site: 'mlp-norm' },
      { path: 'experts.down_proj', in: f, out: m.hidden, site: 'mlp-act' },
    );
  }
  return ls.map((l) => {
    const split = l.site === 'attn-out' || l.site === 'mlp-act' ? { in: l.in / x.tp } : { out: l.out / x.tp };
    return { ...l, ...split, trains: x.full, adapted: !!x.lora?.paths.has(l.path) };
  });
}

/**
 * The forward pass's bookkeeping: what is kept, by stage. Under a checkpoint's first pass (no autograd) nothing is
 * kept: a tensor lives until the ops that read it are done, here until the end of its half of the block.
 */
class Keeper {
  readonly block: KeptBlock = { kept: [], keptPerToken: 0 };
  private pending: H[] = [];
  constructor(
    private readonly t: Tape,
    private readonly grad: boolean,
    /** The block's input when the block does not own it (a checkpoint holds it): never freed here. */
    private readonly borrowed: H,
  ) {}
  /** Keeps `h` (bytes per token) for `stage`, or holds it until flush() when autograd records nothing. */
  keep(h: H, bytes: number, stage: Stage): void {
    if (h === this.borrowed) h = 0;
    if (!this.grad) return void this.pending.push(h);
    this.block.kept.push({ h, bytes, stage });
    this.block.keptPerToken += bytes;
  }
  get recording(): boolean {
    return this.grad;
  }
  /** Frees what a pass without autograd held (a no-op when recording). */
  flush(): void {
    this.t.f(...this.pending);
    this.pending = [];
  }
}

/**
 * One block's forward pass from `input` (the residual stream, R bytes per value). `grad` false: a checkpoint's first
 * pass, where only the output stays. `owns`: the block frees or keeps its input; false where a checkpoint holds it.
 * Answers the output.
 */
export function blockForward(t: Tape, x: BlockContext, input: H, grad: boolean, moe = false, owns = true): { out: H; block: KeptBlock } {
  const k = new Keeper(t, grad, owns ? -1 : input);
  const free = (h: H): void => (h === input && !owns ? undefined : t.f(h));
  const out = x.m.family === 'gpt' ? gptForward(t, x, input, k, free) : llamaForward(t, x, input, k, moe, free);
  return { out, block: k.block };
}

function llamaForward(t: Tape, x: BlockContext, input: H, k: Keeper, moe: boolean, free: (h: H) => void): H {
  const { R, C, m } = x;
  const h = m.hidden;
  const lins = modules(x, moe);
  const site = (s: InputSite): Lin[] => lins.filter((l) => l.site === s);
  const { qDim, kDim, vDim, f } = dims(x, moe);
  const n1 = rmsNorm(t, x, input, k, 'attn-norm');
  const outs = linears(t, x, n1, R, site('attn-norm'), k, 'attn-in');
  if (m.mla) {
    // latent attention: the projections' outputs become the queries, keys and values SDPA reads
    t.f(...outs.splice(0));
    outs.push(t.a(C * qDim), t.a(C * kDim), t.a(C * vDim));
  }
  // one fused q,k,v projection: q and k are views RoPE copies, v a view that keeps the whole output alive
  const fused = outs.length === 1;
  const qe = rope(t, x, fused ? 0 : outs[0]!, qDim);
  let ke = rope(t, x, fused ? 0 : outs[1]!, kDim);
  let vv = fused ? outs[0]! : outs[2]!;
  if (x.kvCacheCopies) {
    const kc = t.a(C * kDim);
    const vc = t.a(C * vDim);
    t.f(ke, vv);
    ke = kc;
    vv = vc;
  }
  const heads = m.heads / x.tp;
  const attn = t.a(C * qDim);
  k.keep(qe, C * qDim, 'attn');
  k.keep(ke, C * kDim, 'attn');
  k.keep(vv, C * (fused && !x.kvCacheCopies ? qDim + kDim + vDim : vDim), 'attn');
  k.keep(attn, C * qDim, 'attn');
  k.keep(t.a(4 * heads), 4 * heads, 'attn');
  if (!x.fusedAttention) k.keep(t.p(scoreBytes(x) * x.batch * heads * x.seq * x.seq), 0, 'attn');
  const [o] = linears(t, x, attn, C, site('attn-out'), k, 'attn-out', true);
  const r1 = t.a(R * h);
  t.f(o!);
  // the block's input is the fp32 copy RMSNorm keeps when the residual stream is fp32 (the keeper owns it then)
  if (R !== 4) free(input);
  k.flush();
  const n2 = rmsNorm(t, x, r1, k, 'mlp-norm');
  const readers = site('mlp-norm');
  const ups = linears(t, x, n2, R, readers, k, 'mlp-in');
  // a mixture-of-experts block's router reads the same input: its logits are small and go into the routing
  const router = readers.findIndex((l) => l.path === 'mlp.gate');
  if (router >= 0) t.f(...ups.splice(router, 1));
  let mid: H;
  if (ups.length >= 2 || m.gatedMlp) {
    // SwiGLU: the gate's output (or the fused gate_up output it is a view of), SiLU's output and the up projection
    const [gate, up] = ups;
    const act = t.a(C * f);
    k.keep(gate!, C * (up ? f : 2 * f), 'mlp-mid');
    k.keep(act, C * f, 'mlp-mid');
    if (up) k.keep(up, C * f, 'mlp-mid');
    mid = t.a(C * f);
  } else {
    // a plain MLP: GELU keeps its input, its output is the down projection's input
    k.keep(ups[0]!, C * f, 'mlp-mid');
    mid = t.a(C * f);
  }
  const [d] = linears(t, x, mid, C, site('mlp-act'), k, 'mlp-act');
  const r2 = t.a(R * h);
  t.f(d!);
  if (R !== 4) t.f(r1);
  k.flush();
  return r2;
}

/** Widths per token of the block's attention and MLP tensors on this GPU. */
function dims(x: BlockContext, moe: boolean): { qDim: number; kDim: number; vDim: number; f: number } {
  const m = x.m;
  const mla = m.mla;
  const qDim = (mla ? m.heads * (mla.qkNopeHeadDim + mla.qkRopeHeadDim) : m.heads * m.headDim) / x.tp;
  const kDim = mla ? qDim : (m.kvHeads * m.headDim) / x.tp;
  const vDim = mla ? (m.heads * mla.vHeadDim) / x.tp : kDim;
  const f = (moe && m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate) / x.tp;
  return { qDim, kDim, vDim, f };
}

/** GPT-2's block: LayerNorm, the fused c_attn, its cache's key and value copies, tanh GELU, dropout. */
function gptForward(t: Tape, x: BlockContext, input: H, k: Keeper, free: (h: H) => void): H {
  const { R, C, m } = x;
  const h = m.hidden;
  const ln = x.autocast ? 4 : R;
  const gelu = x.autocast ? 4 : C;
  const lins = modules(x, false);
  const site = (s: InputSite): Lin[] => lins.filter((l) => l.site === s);
  const qDim = (m.heads * m.headDim) / x.tp;
  const kDim = (m.kvHeads * m.headDim) / x.tp;
  // LayerNorm keeps its input: the residual stream itself where it is already in the norm's dtype
  k.keep(ln === R ? input : t.a(ln * h), ln * h, 'attn-norm');
  const n1 = t.a(ln * h);
  const [qkv] = linears(t, x, n1, ln, site('attn-norm'), k, 'attn-in');
  k.keep(qkv!, C * (qDim + 2 * kDim), 'attn');
  k.keep(t.a(2 * C * kDim), 2 * C * kDim, 'attn');
  const attn = t.a(C * qDim);
  k.keep(attn, C * qDim, 'attn');
  k.keep(t.a(4 * (m.heads / x.tp)), 4 * (m.heads / x.tp), 'attn');
  const [o] = linears(t, x, attn, C, site('attn-out'), k, 'attn-out', true);
  if (m.dropout) k.keep(t.a(h), h, 'attn-out');
  const r1 = t.a(R * h);
  t.f(o!);
  if (ln !== R) free(input);
  k.flush();
  k.keep(ln === R ? r1 : t.a(ln * h), ln * h, 'mlp-norm');
  const n2 = t.a(ln * h);
  const up = site('mlp-norm');
  const f = up[0]?.out ?? 0;
  const [fc] = linears(t, x, n2, ln, up, k, 'mlp-in');
  k.keep(fc!, C * f, 'mlp-mid');
  // 0.5 * x * (1 + tanh(c * (x + 0.044715 x^3))): four transients, three kept
  const tmp = [t.a(gelu * f), t.a(gelu * f), t.a(gelu * f)];
  for (let i = 0; i < 3; i++) k.keep(t.a(gelu * f), gelu * f, 'mlp-mid');
  t.f(...tmp);
  const act = t.a(gelu * f);
  const [d] = linears(t, x, act, gelu, site('mlp-act'), k, 'mlp-act');
  if (m.dropout) k.keep(t.a(h), h, 'mlp-act');
  const r2 = t.a(R * h);
  t.f(d!);
  if (ln !== R) t.f(r1);
  k.flush();
  return r2;
}

const scoreBytes = (x: BlockContext): number => {
  const s = x.C === 4 ? 4 : 2;
  return x.m.dropout ? 2 * s + 1 : s;
};

/**
 * RMSNorm as transformers runs it: the input cast to fp32 (kept; under fp32 the input itself), squared (a
 * transient), scaled, cast back (kept when the weight trains) and multiplied by the weight. Answers the output.
 */
function rmsNorm(t: Tape, x: BlockContext, input: H, k: Keeper, stage: Stage): H {
  const h = x.m.hidden;
  const R = x.R;
  const f32 = R === 4 ? input : t.a(4 * h);
  t.f(t.a(4 * h));
  const scaled = t.a(4 * h);
  let cast = scaled;
  if (R !== 4) {
    cast = t.a(R * h);
    t.f(scaled);
  }
  const out = t.a(R * h);
  k.keep(f32, 4 * h, stage);
  if (x.full) k.keep(cast, R * h, stage);
  else t.f(cast);
  return out;
}

/** RoPE on a query or key projection (frees it): q*cos, the rotated half (a negated half, a concatenation), *sin, the sum. */
function rope(t: Tape, x: BlockContext, q: H, dim: number): H {
  const C = x.C;
  const a = t.a(C * dim);
  const neg = t.a((C * dim) / 2);
  const cat = t.a(C * dim);
  t.f(neg, q);
  const b = t.a(C * dim);
  t.f(cat);
  const out = t.a(C * dim);
  t.f(a, b);
  return out;
}

/**
 * Linear layers reading one input of `xb` bytes per value (it is kept here or freed here, unless `shared`: kept
 * already by another op). Each allocates its output; a training weight keeps the input (under autocast its own bf16
 * copy of an fp32 input); an adapter keeps the input cast to its dtype (with lora_dropout, the mask and the dropped
 * copy; under autocast, autocast's own bf16 copy), then makes its output, the scaled output and the sum.
 */
function linears(t: Tape, x: BlockContext, input: H, xb: number, ls: Lin[], k: Keeper, stage: Stage, shared = false): H[] {
  const outs: H[] = [];
  let inputKept = shared;
  const keepInput = (): void => {
    if (inputKept) return;
    k.keep(input, xb * (ls[0]?.in ?? 0), stage);
    inputKept = true;
  };
  for (const l of ls) {
    const w = l.in;
    const own = x.autocast && xb !== 2 ? t.a(2 * w) : 0;
    // autocast's bf16 copy of an fp32 weight: saved by the matmul for the input's gradient; without autograd
    // recording, cached until autocast exits when the weight trains, else dropped at once
    if (x.autocast && x.weightBytes === 4) {
      const wc = t.p(2 * l.in * l.out);
      if (k.recording) k.keep(wc, 0, stage);
      else if (l.trains) x.autocastCache.push(wc);
      else t.f(wc);
    }
    let out = t.a(x.C * l.out);
    if (l.trains) {
      if (own) k.keep(own, 2 * w, stage);
      else keepInput();
    } else {
      t.f(own);
      if (x.lora?.baseKeepsInput) keepInput();
    }
    const lo = x.lora;
    if (l.adapted && lo) {
      const ab = lo.adapterBytes;
      const cb = x.autocast ? 2 : ab;
      const cast = ab !== xb ? t.a(ab * w) : 0;
      if (lo.dropout) {
        k.keep(t.a(w), w, stage);
        const dropped = t.a(ab * w);
        t.f(cast);
        if (x.autocast) {
          k.keep(t.a(2 * w), 2 * w, stage);
          t.f(dropped);
        } else k.keep(dropped, ab * w, stage);
      } else if (x.autocast && !(ab === 2 && xb === 2)) {
        k.keep(t.a(2 * w), 2 * w, stage);
        t.f(cast);
      } else if (cast) k.keep(cast, ab * w, stage);
      else keepInput();
      k.keep(t.a(cb * lo.rank), 0, stage);
      const b = t.a(cb * l.out);
      const scaled = t.a(cb * l.out);
      t.f(b);
      const wide = Math.max(cb, x.C);
      const sum = t.a(wide * l.out);
      t.f(scaled, out);
      out = sum;
      if (wide !== x.C) {
        out = t.a(x.C * l.out);
        t.f(sum);
      }
      if (lo.dora) k.keep(t.a((ab + x.C) * l.out), (ab + x.C) * l.out, stage);
      if (x.autocast && ab === 4) {
        const ac = t.p(2 * lo.rank * (l.in + l.out));
        if (k.recording) k.keep(ac, 0, stage);
        else x.autocastCache.push(ac);
      }
    }
    outs.push(out);
  }
  if (!inputKept) t.f(input);
  return outs;
}

/**
 * The final norm after the last block (owns `input`): what it keeps, and its output, which the output layer keeps
 * when its weight trains. Answers the output and the kept tensors (freed after the output layer's backward pass).
 */
export function finalNorm(t: Tape, x: BlockContext, input: H): { out: H; kept: H[] } {
  const k = new Keeper(t, true, -1);
  let out: H;
  if (x.m.family === 'gpt') {
    const ln = x.autocast ? 4 : x.R;
    k.keep(ln === x.R ? input : t.a(ln * x.m.hidden), ln * x.m.hidden, 'mlp-norm');
    out = t.a(ln * x.m.hidden);
    if (ln !== x.R) t.f(input);
  } else {
    out = rmsNorm(t, x, input, k, 'mlp-norm');
    if (x.R !== 4) t.f(input);
  }
  return { out, kept: k.block.kept.map((e) => e.h) };
}
