/**
 * The lines a training step's tensors count in, named once: each tag is a line of `gpumem plan` at the peak, its
 * field, and how its note explains the bytes it holds then.
 */
import { formatCount } from '../../units.js';
import type { BlockTags } from './block-context.js';
import { type Tag, Tags } from './mem.js';
import type { ParamTensor } from './params-table.js';

/** What the notes need to know of the run. */
export interface NoteContext {
  /** Tokens of a micro-batch on this GPU. */
  tokens: number;
  /** Layers on this GPU and micro-batches in flight. */
  layers: number;
  inFlight: number;
  /** The parameter lines' explanations, by line (set by the strategy's layout). */
  paramNotes: Map<string, string>;
  /** The attention kernel, as the activations' note names it. */
  kernel: string;
  /** What the blocks' kept tensors follow (eager autograd, the partitioner, a frozen base's adapters). */
  keptHow: string;
}

/** A training step's tags. */
export class StepTags {
  readonly set = new Tags();
  readonly block: BlockTags;
  readonly checkpoint: Tag;
  readonly recomputed: Tag;
  readonly final: Tag;
  readonly formula: Tag;
  readonly inputs: Tag;
  readonly workspace: Tag;
  readonly transient: Tag;
  readonly states: Tag;
  readonly stepTemporaries: Tag;

  constructor(
    private readonly n: NoteContext,
    optimizer: string,
    paged: boolean,
  ) {
    const t = this.set;
    const perLayer = (b: number): number => Math.round(b / Math.max(1, n.tokens * n.layers * n.inFlight));
    const kept = t.get(
      'activations per layer',
      'activationsBytes',
      (b) =>
        `${formatCount(perLayer(b))} bytes per token and layer, counted tensor by tensor${n.keptHow}; ${n.layers} layers x ${n.inFlight} micro-batches in flight; attention: ${n.kernel}`,
    );
    this.checkpoint = t.get(
      'activations: layer inputs kept by the checkpoints',
      'activationsBytes',
      (b) => `${formatCount(perLayer(b))} bytes per token and layer; each layer's other activations are recomputed in the backward pass`,
    );
    this.recomputed = t.get(
      'activations of the layer being recomputed',
      'activationsBytes',
      (b) => `${formatCount(Math.round(b / n.tokens))} bytes per token, one layer at a time`,
    );
    const scores = t.get(
      'activations: attention matrices (math kernel)',
      'activationsBytes',
      'the s x s softmax (and its dropout mask and copy) kept per head and layer',
    );
    this.formula = t.get(
      'activations (Korthikanti et al. 2022)',
      'activationsBytes',
      (b) =>
        `${formatCount(Math.round(b / Math.max(1, n.layers * n.inFlight)))} bytes per layer: sbh(34 + 5as/h) with its tensor-parallel, sequence-parallel and recomputation forms; ${n.layers} layers x ${n.inFlight} micro-batches in flight`,
    );
    this.final = t.get('activations: final norm and output layer input', 'activationsBytes', 'kept once, after the last layer');
    const expertWeights = t.get(
      'activations: merged expert weights (LoRA on fused experts)',
      'activationsBytes',
      "PEFT's ParamWrapper adds its delta to each fused expert parameter for the step; autograd keeps the merged copy",
    );
    const expertInputs = t.get(
      'activations: expert inputs kept for the merged weights',
      'activationsBytes',
      "every routed token's input to the wrapped experts",
    );
    const autocast = t.get(
      'autocast bf16 copies of the weights',
      'autocastCacheBytes',
      'torch.autocast caches a bf16 copy of each fp32 matmul weight it casts, for the step',
    );
    this.transient = t.get('transients of the running op (forward)', 'workspaceBytes', 'made and freed within one op');
    const grads = t.get('gradients in flight (backward)', 'workspaceBytes', "the running op's gradients, freed as the next op runs");
    const paramGrads = t.get('gradients', 'gradientsBytes', (b) => `param.grad of the trainable parameters made so far: ${formatCount(Math.round(b))} bytes`);
    this.states = t.get(
      `optimizer states (${optimizer}${paged ? ', paged: CUDA managed memory' : ''})`,
      'optimizerBytes',
      () => n.paramNotes.get('optimizer') ?? '',
      paged,
    );
    this.stepTemporaries = t.get(
      'optimizer step temporaries',
      'optimizerTemporariesBytes',
      `foreach ${optimizer}: a temporary the size of each trainable parameter (fused, 8-bit: none)`,
    );
    this.inputs = t.get('input token ids and labels', 'workspaceBytes', 'int64, 16 bytes per token');
    this.workspace = t.get(
      'cuBLAS workspace',
      'workspaceBytes',
      "PyTorch's cuBLAS/cuBLASLt workspace for the stream, allocated through its caching allocator (32 MiB on Hopper)",
    );
    this.block = { kept, scores, transient: this.transient, grads, paramGrads, autocast, expertWeights, expertInputs };
  }

  private readonly params: Tag[] = [];

  /** The line a parameter tensor counts in: the frozen base or the adapters under LoRA, else the parameters. */
  param(t: ParamTensor): Tag {
    const i = t.adapter ? 1 : 0;
    let tag = this.params[i];
    if (!tag) {
      const name = t.adapter ? 'adapters' : 'parameters';
      tag = this.set.get(this.n.paramNotes.get(`${name}:name`) ?? name, 'parametersBytes', () => this.n.paramNotes.get(name) ?? '');
      this.params[i] = tag;
    }
    return tag;
  }

  /** A line of its own (a loss tensor, a framework's or a strategy's), made on first use. */
  line(name: string, field: Tag['field'], note: string | ((bytes: number) => string) = ''): Tag {
    return this.set.get(name, field, note);
  }

  get kept(): Tag {
    return this.block.kept;
  }
  get grads(): Tag {
    return this.block.grads;
  }
}
