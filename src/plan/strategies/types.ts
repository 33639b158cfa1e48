/**
 * A distributed strategy (single GPU or DDP, DeepSpeed ZeRO, FSDP1, FSDP2, Megatron's distributed optimizer): where a
 * training run's parameters, gradients and optimizer states live, and when the step gathers, reshards and reduces
 * them. One file each (registry.ts lists them); a strategy never edits a block: the step program (train-step.ts)
 * calls its hooks around the blocks.
 */
import type { Line, TrainOptions } from '../options.js';
import type { GradStore } from '../program/linear.js';
import type { H, Mem } from '../program/mem.js';
import type { ParamTable, ParamTensor } from '../program/params-table.js';
import type { StepSetup } from '../program/step-setup.js';

/** Where a run's model states live, tensor by tensor, on the most-loaded GPU (and in host memory). */
export interface StateLayout {
  /** The parameter's bytes held on the GPU through the step (0 when offloaded). */
  paramBytes(t: ParamTensor): number;
  /** Its optimizer states' bytes on the GPU (0 when offloaded); paged states live outside the allocator. */
  stateBytes(t: ParamTensor): number;
  /** The states an optimizer makes per parameter (Adam's exp_avg and exp_avg_sq: 2; SGD's momentum: 1). */
  statesPerParam: number;
  /** A foreach step's temporary for the parameter (0 for fused, 8-bit, SGD, offloaded or in-backward steps). */
  stepBytes(t: ParamTensor): number;
  foreach: boolean;
  /** Bytes per value of the weights the blocks read, and of the weight gradients the backward pass makes. */
  weightBytes: number;
  gradBytes: number;
  /** Bytes per value of param.grad as the optimizer reads it (after any reduce). */
  keptGradBytes: number;
  /** Pinned host memory the states take when offloaded, and what crosses the link per step. */
  hostParamBytes: number;
  hostStateBytes: number;
  offloadBytesPerStep: number;
  /** The parameter and optimizer lines' names and notes. */
  notes: Map<string, string>;
}

/** What a strategy knows of the run when it lays out the states. */
export interface LayoutInput {
  o: TrainOptions;
  table: ParamTable;
  /** Data-parallel GPUs: gpus / (tp x pp). */
  dp: number;
}

/**
 * What a strategy's collectives hold from one unit to the next within a backward pass (FSDP2's comm_ctx): the last
 * reduce-scatter's input, which FSDPParamGroup.post_backward keeps as comm_ctx.reduce_scatter_state until the next
 * unit's post_backward drops it (or the root's post-backward final callback, at the end of the backward pass).
 */
export interface CommState {
  reduceScatterInput: H;
}

/**
 * A unit of the ends apart from the root (FSDP2 as torchtitan applies it from 83e6941): the embedding's, gathered for
 * its forward pass and again for its gradient; the head's (final norm, output layer and its adapter), gathered before
 * the final norm. Each is resharded after its backward pass and its gradients reduce-scattered.
 */
export interface EndUnit {
  name: 'embedding' | 'head';
  tensors: readonly ParamTensor[];
  /** Kept gathered from its forward pass to its backward pass (fully_shard's reshard_after_forward=False). */
  keepsAfterForward: boolean;
}

export interface Sharding {
  readonly name: string;
  /** The blocks compute in bf16 from gathered bf16 weights (FSDP's mixed precision under amp-bf16): no autocast. */
  bf16Params(o: TrainOptions): boolean;
  layout(input: LayoutInput): StateLayout;
  /**
   * The ends' units apart from the root, by the run's options (FSDP2's unit layout); absent or empty: the root unit
   * holds every end.
   */
  endUnits?(o: TrainOptions, table: ParamTable): EndUnit[];
  /** Gathers an end's unit before its forward pass or its backward pass; answers what reshard or releaseEnd frees. */
  gatherEnd?(mem: Mem, s: StepSetup, unit: EndUnit): H[];
  /** After an end unit's backward pass: its gathered tensors freed, then its gradients (in `grads`) reduced (`sync` as for releaseRoot). */
  releaseEnd?(mem: Mem, s: StepSetup, unit: EndUnit, gathered: H[], grads: GradStore, sync: boolean): void;
  /** Gathers what a micro-batch holds for all of its blocks (FSDP2's root unit); answers what releaseRoot frees. */
  gatherRoot(mem: Mem, s: StepSetup): H[];
  /**
   * After the micro-batch's backward pass: the root's gradients reduced (`sync`: the last micro-batch of the step;
   * before it a strategy may skip the sync, as no_sync does), its gathered tensors freed.
   */
  releaseRoot(mem: Mem, s: StepSetup, root: H[], grads: GradStore, sync: boolean): void;
  /** Gathers one block's unit before its forward or backward pass; answers what reshard frees. */
  gatherUnit(mem: Mem, s: StepSetup, moe: boolean): H[];
  reshard(mem: Mem, gathered: H[]): void;
  /** The unit is kept gathered after the forward pass (FSDP2 keeps the last block's for its backward pass, by its unit layout). */
  keepsAfterForward(lastLayer: boolean, o: TrainOptions): boolean;
  /**
   * Autograd makes a gradient for every tensor of a unit that holds a trainable one, the frozen ones too, under the
   * framework's wrapper settings (FSDP1 under use_orig_params); absent: only the trainable tensors get gradients.
   */
  gradsWholeUnit?(framework: { fsdpOrigParams: boolean }): boolean;
  /** The blocks' weight gradients go to reduce() instead of param.grad. */
  collectsGrads(o: TrainOptions): boolean;
  /** A block's gradients (its unit's) reduced to this GPU's shard, kept in `grads` (`sync` as for releaseRoot). */
  reduce(mem: Mem, s: StepSetup, moe: boolean, sink: H[], grads: GradStore, sync: boolean): void;
  /** What the strategy holds outside the tensors the step makes: communication buffers (overhead lines). */
  overheads(s: StepSetup): Line[];
}
