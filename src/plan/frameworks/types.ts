/**
 * A training framework: the model code, the loop and the loss a run executes (Hugging Face + PyTorch eager, LitGPT's
 * scripts, Megatron-LM). It decides how the blocks' attention and activations run, what the loss keeps, what the
 * loop holds between micro-batches, and which options it refuses. One file each (registry.ts lists them).
 */
import type { ModelConfig } from '../model-config.js';
import type { LoraOptions, TrainOptions } from '../options.js';
import type { InputName, PlanInputs } from '../schema.js';
import type { BlockContext } from '../program/block-context.js';
import type { GradStore } from '../program/linear.js';
import type { LossState } from '../program/loss.js';
import type { H, Mem } from '../program/mem.js';
import type { StepSetup } from '../program/step-setup.js';

/** How a framework runs attention: a fused kernel or not, and what the math kernel keeps per score. */
export interface AttentionRun {
  fused: boolean;
  scoreBytes: number;
  /** The kernel as the activations' note names it. */
  kernel: string;
}

export interface Framework {
  readonly name: 'pytorch' | 'litgpt' | 'megatron';
  /** The model as the framework's code builds it. */
  model(m: ModelConfig): ModelConfig;
  attention(m: ModelConfig, o: TrainOptions): AttentionRun;
  /** The loss's forward pass from the last block's output. */
  lossForward(mem: Mem, s: StepSetup, hidden: H): LossState;
  lossBackward(mem: Mem, s: StepSetup, loss: LossState, grads: GradStore): void;
  /** What the loop holds from the step before when a step starts (LitGPT's previous micro-batch). */
  beforeStep?(mem: Mem, s: StepSetup): void;
  /** bitsandbytes' dequantised weight while a 4-bit matmul runs, bytes per value (0: the base is not quantised). */
  dequantisedBytes(o: TrainOptions): number;
  /** PyTorch's cuBLAS workspace is allocated through the caching allocator. */
  readonly cublasWorkspace: boolean;
  /** The step's tensors follow PyTorch's ops closely enough to replay them through the caching allocator. */
  readonly replay: boolean;
  /** The distributed strategy the framework runs for --fsdp (LitGPT's FSDPStrategy is FSDP1). */
  readonly fsdp: 'fsdp1' | 'fsdp2';
  /**
   * FSDP1's `use_orig_params` as the framework's FSDP wrapper passes it. True: a FlatParameter may hold frozen and
   * trainable tensors, and it requires grad when any of them does (strategies/fsdp1.ts: the frozen ones' gradients are
   * made too); false: every FlatParameter is all frozen or all trainable.
   */
  readonly fsdpOrigParams: boolean;
  /**
   * The framework's own blocks, counted by a formula (Megatron-LM: Korthikanti et al.): the bytes one layer keeps
   * from its forward to its backward pass, held as one tensor. Undefined: transformers' blocks (program/block.ts).
   */
  formulaBlock?: ((x: BlockContext, o: TrainOptions, moe: boolean) => number) | undefined;
  /** What the framework refuses of the inputs a person set (`given`), with the reason; undefined: nothing. */
  refuse(i: PlanInputs, given: (k: InputName) => boolean): string | undefined;
  /** The defaults the framework's scripts set where the inputs leave them. */
  defaults?(i: PlanInputs): { loss?: TrainOptions['loss']; loraDtype?: LoraOptions['dtype']; bnbVersion?: string };
  /** A note on how the blocks' activations are counted. */
  note(o: TrainOptions): string | undefined;
}
