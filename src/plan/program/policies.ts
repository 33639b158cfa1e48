/**
 * Save policies: filters over what a block's backward pass finds kept. Eager keeps what autograd saves; selective
 * recomputation drops the attention matrix; a full checkpoint keeps the block's input and runs the block again in
 * the backward pass; torchtitan's per-op checkpoint keeps the input and caches the outputs its policy names;
 * torch.compile's partitioner keeps its own set (compiled.ts), and under a checkpoint decides what the recomputed
 * block materialises; activation offloading moves what a block saved to pinned host memory until its backward pass.
 */
import { type CompileScope, compilesBlocks, type Recompute } from '../options.js';
import type { RecordMode } from './block-context.js';

export interface SavePolicy {
  /** How each block's forward pass records. */
  forward: RecordMode;
  /** A checkpoint holds each block's input through the forward pass. */
  keepsInput: boolean;
  /** torchtitan's per-op policy: the outputs it caches per block. */
  perOp: boolean;
  /** The block runs again before its backward pass, recording so (undefined: no recomputation). */
  recompute: RecordMode | undefined;
  /** The attention matrix of the math kernel is recomputed rather than kept. */
  scoresRecomputed: boolean;
  /** Saved tensors (a checkpoint's input too) go to pinned host memory after each block's forward pass, but for the last two blocks'. */
  offload: boolean;
}

/** The policy of a run: its recomputation, torch.compile and activation offloading. */
export function savePolicy(o: { recompute: Recompute; compile?: boolean | CompileScope | undefined; activationOffload?: boolean | undefined }): SavePolicy {
  const compiled = compilesBlocks(o);
  const checkpoint = o.recompute === 'full' || o.recompute === 'op';
  return {
    forward: checkpoint ? 'nograd' : compiled ? 'compiled' : 'eager',
    keepsInput: checkpoint,
    perOp: o.recompute === 'op',
    // compiled, the recomputation runs inside the block's backward graph, which materialises what the partitioner keeps
    recompute: checkpoint ? (compiled ? 'compiled' : 'eager') : undefined,
    scoresRecomputed: o.recompute === 'selective',
    // torchtune's OffloadActivations wraps the whole forward in saved-tensor hooks: a checkpoint's saved input goes too
    offload: !!o.activationOffload,
  };
}

/** The mode a block records in: a MoE layer or DoRA keeps what PyTorch eager keeps under compile (not measured there). */
export function blockMode(mode: RecordMode, moe: boolean, dora: boolean): RecordMode {
  return mode === 'compiled' && (moe || dora) ? 'eager' : mode;
}
