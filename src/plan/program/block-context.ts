/**
 * What a transformer block's ops need to know to emit their tensors: the model's shape on this GPU, the dtypes, which
 * weights train and which carry adapters, the attention kernel, and how the forward pass records (the save policy).
 * Tensors are sized per token of the micro-batch on this GPU (`a`) or absolutely (`p`).
 */
import { type LinearModule, linearModules } from '../adapters.js';
import type { ModelConfig } from '../model-config.js';
import type { Precision } from '../options.js';
import type { H, Mem, Tag } from './mem.js';

/** Adapters on a frozen base, as the block's linear layers see them. */
export interface BlockLora {
  /** The wrapped layers' module paths inside a block. */
  paths: ReadonlySet<string>;
  rank: number;
  /** The adapters' bytes per value. */
  adapterBytes: number;
  dropout: boolean;
  dora: boolean;
  /** bitsandbytes before 0.43.2: each 4-bit matmul keeps its input (MatMul4Bit's ctx.tensors = (A, B)). */
  baseKeepsInput: boolean;
  /** The output layer is wrapped too (PEFT's lm_head target). */
  output: boolean;
  /** PEFT's ParamWrapper on the fused experts (all-linear on transformers 5): merged weights kept (moe-adapters.ts). */
  experts: ReadonlyArray<{ in: number; out: number }>;
  /** The frozen base's bytes per value as the blocks read it (16, or 32 for an fp32 base). */
  baseBytes: number;
}

/**
 * How a block's forward pass records: `eager` autograd saves what each op saves; `nograd` a checkpoint's first pass
 * (nothing saved; each tensor lives to the end of its half of the block); `compiled` inductor's partitioner saves its
 * own set (compiled.ts) and the eager ops' saves are dropped; `inference` generate's prefill under torch.no_grad():
 * nothing saved, each tensor freed where the modules let go of it (block.ts, blockInference).
 */
export type RecordMode = 'eager' | 'nograd' | 'compiled' | 'inference';

/** The lines a block's tensors count in. */
export interface BlockTags {
  kept: Tag;
  scores: Tag;
  transient: Tag;
  grads: Tag;
  /** param.grad: the weight gradients kept to the optimizer step. */
  paramGrads: Tag;
  autocast: Tag;
  expertWeights: Tag;
  expertInputs: Tag;
  /** A quantised layer's matmul transients (MatmulExtras.matmulBytes), where they have a line of their own. */
  matmul?: Tag;
}

export interface BlockContext {
  m: ModelConfig;
  /** The GPU's share of the micro-batch's tokens for activations: batch x seq / tp (closed-form TP, as sequence parallel). */
  tokens: number;
  batch: number;
  seq: number;
  tp: number;
  /** Residual stream and matmul-output bytes per value; autocast casts to bf16. */
  R: number;
  C: number;
  autocast: boolean;
  /** The run's precision (the MoE router's tensors follow it). */
  precision: Precision;
  /**
   * Autograd makes the blocks' base weights' gradients: full fine-tuning, or a frozen base sharing its unit with the
   * adapters where the strategy makes the whole unit's gradient (FSDP1 under use_orig_params, strategies/fsdp1.ts).
   */
  full: boolean;
  /** Bytes per value of the weights the matmuls read (autocast copies an fp32 weight to bf16). */
  weightBytes: number;
  /** Bytes per value of a weight gradient as the backward pass makes it (before any reduce-scatter). */
  gradBytes: number;
  /** Parameters of one block on this GPU besides its linear layers and experts (norms, biases): their gradients. */
  restParams: { dense: number; moe: number };
  /** Parameters of one MoE layer's experts on this GPU (every routed and shared expert). */
  expertParams: number;
  lora: BlockLora | undefined;
  /** A fused attention kernel (no s x s matrix); else the math kernel keeps its scores. */
  fusedAttention: boolean;
  /** Bytes the math kernel keeps per attention score (softmax, dropout's mask and copy, a softcap's tanh). */
  scoreBytes: number;
  /** The attention matrix is recomputed in the backward pass (selective recomputation): not kept. */
  scoresRecomputed: boolean;
  /** Hugging Face's DynamicCache copies keys and values in a training forward pass. */
  kvCacheCopies: boolean;
  /** Weight gradients leave at once (the optimizer step in the backward pass). */
  gradsLeave: boolean;
  /** Where a block's weight gradients go instead of param.grad (FSDP's reduce-scatter), while set. */
  gradSink: H[] | undefined;
  /** torch.autocast's cache of bf16 weight copies made without autograd recording: freed when autocast exits. */
  autocastCache: H[];
  tags: BlockTags;
  /** The linear layers, made on first use (modules()). */
  lins: { dense?: Lin[]; moe?: Lin[] };
  sites: Map<string, Lin[]>;
}

/** Widths per token of the block's attention and MLP tensors on this GPU. */
export interface BlockDims {
  qDim: number;
  kDim: number;
  vDim: number;
  oDim: number;
  heads: number;
  f: number;
}

/**
 * The block's widths per token. Activations are counted at the model's full widths over the GPU's share of the
 * tokens (BlockContext.tokens: the micro-batch's tokens / tp), as tensor and sequence parallelism split them.
 */
export function blockDims(x: BlockContext, moe: boolean): BlockDims {
  const m = x.m;
  const mla = m.mla;
  const qDim = mla ? m.heads * (mla.qkNopeHeadDim + mla.qkRopeHeadDim) : m.heads * m.headDim;
  const kDim = mla ? qDim : m.kvHeads * m.headDim;
  const vDim = mla ? m.heads * mla.vHeadDim : kDim;
  const oDim = mla ? vDim : qDim;
  const f = moe && m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  return { qDim, kDim, vDim, oDim, heads: m.heads, f };
}

/** A linear layer of the block: its widths, this GPU's share of its weight, whether it trains, whether adapted. */
export interface Lin extends LinearModule {
  /** Elements of its weight on this GPU (in x out / tp). */
  weight: number;
  trains: boolean;
  adapted: boolean;
}

/** The block's linear layers (a mixture's experts are not among them: moe.ts runs them), made once per context. */
export function modules(x: BlockContext, moe: boolean): Lin[] {
  const key = moe ? 'moe' : 'dense';
  let ls = x.lins[key];
  if (!ls) {
    ls = linearModules(x.m, moe).map((l) => ({ ...l, weight: (l.in * l.out) / x.tp, trains: x.full, adapted: !!x.lora?.paths.has(l.path) }));
    x.lins[key] = ls;
  }
  return ls;
}

/** The block's linear layers reading from one site. */
export function site(x: BlockContext, moe: boolean, at: Lin['site']): Lin[] {
  const key = `${moe ? 'moe' : 'dense'}:${at}`;
  let ls = x.sites.get(key);
  if (!ls) x.sites.set(key, (ls = modules(x, moe).filter((l) => l.site === at)));
  return ls;
}

/** Where a saved tensor is released in the backward pass: the node that saved it. */
export type Stage = 'attn-norm' | 'attn-in' | 'attn' | 'attn-out' | 'mlp-norm' | 'mlp-in' | 'mlp-mid' | 'mlp-act' | 'post';

/** One tensor a block saved for its backward pass. */
export interface Saved {
  h: H;
  /** Bytes per token (0 for a tensor sized by its weight: an autocast copy). */
  perToken: number;
  /** Bytes in all. */
  bytes: number;
  stage: Stage;
}

/** What a block's forward pass left for its backward pass. */
export interface BlockRun {
  saved: Saved[];
  /** Bytes per token the block saved (autograd's tensors, the partitioner's under compile). */
  keptPerToken: number;
}

/**
 * The forward pass's bookkeeping. `keep` is a tensor's last use in the forward pass: recorded for the backward pass
 * when the mode saves it, else freed (without autograd, at the end of its half of the block).
 */
export class Keeper {
  readonly run: BlockRun = { saved: [], keptPerToken: 0 };
  private pending: H[] = [];
  private readonly held = new Set<H>();
  constructor(
    readonly mem: Mem,
    readonly x: BlockContext,
    readonly mode: RecordMode,
    /** The block's input when the block does not own it (a checkpoint holds it): never freed here. */
    private readonly borrowed: H,
  ) {}

  /** A tensor of `perToken` bytes per token, in the transient line. */
  a(perToken: number): H {
    return this.mem.alloc(perToken * this.x.tokens, this.x.tags.transient);
  }

  /** Frees tensors (the borrowed input is left alone). */
  f(...hs: H[]): void {
    for (const h of hs) if (h && h !== this.borrowed) this.mem.free(h);
  }

  /** The last forward use of `h` (`perToken` bytes per token): autograd saves it when recording eagerly. */
  keep(h: H, perToken: number, stage: Stage): void {
    this.save(h, perToken, perToken * this.x.tokens, stage, this.mode === 'eager', this.x.tags.kept);
  }

  /** Like keep, for a tensor of `bytes` in all (an autocast weight copy, an attention matrix), not counted per token. */
  keepBytes(h: H, bytes: number, stage: Stage, tag: Tag = this.x.tags.autocast): void {
    this.save(h, 0, bytes, stage, this.mode === 'eager', tag);
  }

  /** True when `h` was kept (saved for the backward pass, or held to the end of this half of the block). */
  owned(h: H): boolean {
    return this.held.has(h);
  }

  /** A tensor the partitioner saves under compile (compiled.ts): `perToken` bytes per token. */
  keepCompiled(perToken: number, stage: Stage): void {
    if (this.mode !== 'compiled' || !(perToken > 0)) return;
    const h = this.mem.alloc(perToken * this.x.tokens, this.x.tags.kept);
    this.run.saved.push({ h, perToken, bytes: perToken * this.x.tokens, stage });
    this.run.keptPerToken += perToken;
  }

  get recording(): boolean {
    return this.mode === 'eager';
  }

  /**
   * A keeper for layers whose inputs another op keeps (a one-norm parallel block's MLP): their own per-token saves are
   * dropped, what is kept by the weight (an autocast copy) stays this keeper's.
   */
  withoutInputs(): Keeper {
    const inner = new Keeper(this.mem, this.x, this.mode, this.borrowed);
    inner.keep = (h: H): void => {
      if (h !== this.borrowed) this.pending.push(h);
    };
    inner.keepBytes = (h: H, bytes: number, stage: Stage, tag?: Tag): void => this.keepBytes(h, bytes, stage, tag);
    return inner;
  }

  /** Frees what a pass without autograd held (a no-op when recording). */
  flush(): void {
    this.f(...this.pending);
    this.pending = [];
  }

  private save(h: H, perToken: number, bytes: number, stage: Stage, recorded: boolean, tag?: Tag): void {
    this.held.add(h);
    if (h === this.borrowed) {
      // the checkpoint's input: kept by the checkpoint, counted where it saves it
      if (recorded) this.countOnly(perToken);
      return;
    }
    if (!recorded) {
      if (h) this.pending.push(h);
      return;
    }
    if (h) this.mem.retag(h, tag ?? this.x.tags.kept);
    this.run.saved.push({ h, perToken, bytes, stage });
    this.run.keptPerToken += perToken;
  }

  private countOnly(perToken: number): void {
    this.run.keptPerToken += perToken;
  }
}
