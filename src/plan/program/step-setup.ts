/**
 * A training run's program inputs, worked out once from the model and the options: the framework and the strategy,
 * the parameter table and the states' layout, the blocks' context (dtypes, adapters, attention), the save policy, the
 * runs of identical layers the program repeats, and the tags its lines are counted in.
 */
import { adaptedModules, outputAdapted } from '../adapters.js';
import { CONSTANTS } from '../constants.js';
import type { AttentionRun, Framework } from '../frameworks/types.js';
import type { ModelConfig } from '../model-config.js';
import { adaptedExpertParams } from '../moe-adapters.js';
import type { TrainOptions } from '../options.js';
import { countParams, type ParamCounts } from '../params.js';
import { adapterBytes, computeDtypes, float8Linears, pagedOptimizer, quantisedBase } from '../precision.js';
import type { CommState, EndUnit, Sharding, StateLayout } from '../strategies/types.js';
import type { BlockContext, BlockLora } from './block-context.js';
import type { MatmulExtras } from './linear.js';
import { type ParamTable, type ParamTensor, paramTable } from './params-table.js';
import { blockForward } from './block.js';
import { perOpKept } from './compiled.js';
import { blockMode, type SavePolicy, savePolicy } from './policies.js';
import { Walk } from './walk.js';
import { type NoteContext, StepTags } from './step-tags.js';

/** A run of identical layers: the program repeats one of them `count` times. */
export interface LayerRun {
  count: number;
  moe: boolean;
  /** Activation offloading moves this run's saved tensors to host memory. */
  offloaded: boolean;
  /** The strategy keeps the unit gathered after its forward pass (FSDP2's last block). */
  keepGathered: boolean;
  /** Bytes per token one of its layers keeps through the forward pass (for other micro-batches in flight). */
  keptPerToken: number;
}

/** A group of parameter tensors the GPU holds `count` times (a kind of layer, or the ends). */
export interface ParamUnit {
  count: number;
  tensors: readonly ParamTensor[];
}

export interface StepSetup {
  m: ModelConfig;
  o: TrainOptions;
  c: ParamCounts;
  framework: Framework;
  strategy: Sharding;
  table: ParamTable;
  layout: StateLayout;
  /** Data-parallel GPUs. */
  dp: number;
  x: BlockContext;
  policy: SavePolicy;
  extras: MatmulExtras;
  tags: StepTags;
  units: ParamUnit[];
  layers: LayerRun[];
  /** Micro-batches in flight on this pipeline stage. */
  inFlight: number;
  /** The micro-batch's tokens (the loss's logits span them all on every tensor-parallel rank). */
  tokens: number;
  /**
   * The ends' own weights (embedding, final norm, output layer) make gradients: full fine-tuning, or the strategy's
   * unit of the ends holding a trainable adapter where autograd makes the whole unit's (Sharding.gradsWholeUnit).
   */
  endsGrads: boolean;
  constants: { cublasWorkspaceBytes: number };
  /** What the strategy's collectives hold from one unit to the next (gather.ts). */
  comm: CommState;
  /** The ends' units apart from the root (Sharding.endUnits): none where the root holds them. */
  ends: { embedding?: EndUnit | undefined; head?: EndUnit | undefined };
}

/** The ends' units by name. */
function endUnitsOf(units: readonly EndUnit[]): StepSetup['ends'] {
  return { embedding: units.find((u) => u.name === 'embedding'), head: units.find((u) => u.name === 'head') };
}

/** The adapters as the blocks see them. */
function blockLora(m: ModelConfig, o: TrainOptions): BlockLora | undefined {
  const l = o.lora;
  if (!l) return undefined;
  const paths = new Set([...adaptedModules(m, l), ...(m.moe ? adaptedModules(m, l, true) : [])].map((x) => x.path));
  return {
    paths,
    rank: l.rank,
    adapterBytes: adapterBytes(l),
    dropout: l.dropout,
    dora: l.dora,
    baseKeepsInput: !!l.quantKeepsInput,
    output: outputAdapted(m, l),
    experts: adaptedExpertParams(m, l),
    baseBytes: l.base === 'fp32' ? 4 : 2,
  };
}

/** The runs of identical layers on this GPU: dense then MoE, split where offloading or the strategy treat a layer apart. */
function layerRuns(t: ParamTable, policy: SavePolicy, strategy: Sharding, o: TrainOptions): Omit<LayerRun, 'keptPerToken'>[] {
  const n = t.denseLayers + t.moeLayers;
  const runs: Omit<LayerRun, 'keptPerToken'>[] = [];
  for (let i = 0; i < n; i++) {
    const r = {
      count: 1,
      moe: i >= t.denseLayers,
      offloaded: policy.offload && i < n - CONSTANTS.offloadLayersOnGpu.value,
      keepGathered: strategy.keepsAfterForward(i === n - 1, o),
    };
    const prev = runs[runs.length - 1];
    if (prev && prev.moe === r.moe && prev.offloaded === r.offloaded && prev.keepGathered === r.keepGathered) prev.count++;
    else runs.push(r);
  }
  return runs;
}

/** Bytes per token one layer keeps through the forward pass under `policy` (a probe walk of its forward pass). */
function keptPerToken(x: BlockContext, o: TrainOptions, policy: SavePolicy, moe: boolean, framework: Framework): number {
  if (framework.formulaBlock) return framework.formulaBlock(x, o, moe) / x.tokens;
  if (policy.keepsInput) return x.R * x.m.hidden + (policy.perOp ? perOpKept(x, moe, policy.recompute === 'compiled').reduce((a, t) => a + t.bytes, 0) : 0);
  const probe = new Walk();
  const mode = blockMode(policy.forward, moe, !!x.lora?.dora);
  const run = blockForward(probe, { ...x, autocastCache: [] }, probe.alloc(x.R * x.m.hidden * x.tokens, x.tags.transient), {
    mode,
    moe,
    owns: true,
    extras: { dequantisedBytes: 0, fp8: false },
  }).run;
  return run.keptPerToken;
}

/** The tags of a step: the lines the walk's tensors are counted under, named for what keeps them. */
function stepTags(
  o: TrainOptions,
  layers: number,
  inFlight: number,
  paramNotes: NoteContext['paramNotes'],
  policy: SavePolicy,
  frozenBase: boolean,
  kernel: string,
): StepTags {
  const compiled = policy.forward === 'compiled' ? " as torch.compile's min-cut partitioner keeps them" : '';
  const frozen = frozenBase ? ' (frozen base: only what the adapters and the gradient flowing to them need)' : '';
  return new StepTags(
    { tokens: (o.batch * o.seq) / o.parallel.tp, layers, inFlight, paramNotes, kernel, keptHow: `${compiled}${frozen}` },
    o.optimizer,
    pagedOptimizer(o.optimizer),
  );
}

/** What every block op of the step reads: the model, the shapes, the dtypes, where weights and gradients live. */
function blockContext(
  m: ModelConfig,
  o: TrainOptions,
  s: {
    table: ParamTable;
    layout: StateLayout;
    attention: AttentionRun;
    policy: SavePolicy;
    tags: StepTags;
    lora: BlockLora | undefined;
    bf16Params: boolean;
    baseGrads: boolean;
  },
): BlockContext {
  const { table, layout, attention, policy } = s;
  const rest = (k: 'dense' | 'moe'): number => table[k].tensors.find((t) => t.key === 'rest')?.numel ?? 0;
  return {
    m,
    tokens: (o.batch * o.seq) / o.parallel.tp,
    batch: o.batch,
    seq: o.seq,
    tp: o.parallel.tp,
    ...computeDtypes(o.precision, o.lora, s.bf16Params),
    precision: o.precision,
    full: s.baseGrads,
    weightBytes: layout.weightBytes,
    gradBytes: layout.gradBytes,
    restParams: { dense: rest('dense'), moe: rest('moe') },
    expertParams: table.moe.tensors.find((t) => t.key === 'experts')?.numel ?? 0,
    lora: s.lora,
    fusedAttention: attention.fused,
    scoreBytes: attention.scoreBytes,
    scoresRecomputed: policy.scoresRecomputed,
    kvCacheCopies: o.recompute === 'none' && o.loss !== 'chunked',
    gradsLeave: !!o.optimizerInBackward,
    gradSink: undefined,
    autocastCache: [],
    tags: s.tags.block,
    lins: {},
    sites: new Map(),
  };
}

/** The program inputs of `model` trained under `o` with `framework` and `strategy`. */
export function stepSetup(model: ModelConfig, o: TrainOptions, framework: Framework, strategy: Sharding): StepSetup {
  const m = framework.model(model);
  const p = o.parallel;
  const c = countParams(m);
  const dp = p.gpus / (p.tp * p.pp);
  const table = paramTable(m, c, p, o.lora, framework.name === 'litgpt' && quantisedBase(o.lora));
  const layout = strategy.layout({ o, table, dp });
  const attention = framework.attention(m, o);
  const policy = savePolicy(o);
  const inFlight = p.pp > 1 ? Math.min(p.inFlight, p.pp) : 1;
  const lora = blockLora(m, o);
  // a unit with a trainable tensor makes every tensor's gradient where the strategy's wrapper says so (FSDP1 under
  // use_orig_params): the blocks' base then makes gradients as in full fine-tuning
  const whole = !!o.lora && !!strategy.gradsWholeUnit?.(framework);
  const trainsIn = (ts: readonly ParamTensor[]): boolean => ts.some((t) => t.trains);
  const blockKinds = [table.denseLayers > 0 ? table.dense : undefined, table.moeLayers > 0 ? table.moe : undefined].filter((k) => k !== undefined);
  const baseGrads = !o.lora || (whole && blockKinds.every((k) => trainsIn(k.tensors)));
  const endsGrads = !o.lora || (whole && trainsIn(table.ends));
  const tags = stepTags(o, table.denseLayers + table.moeLayers, inFlight, layout.notes, policy, !baseGrads, attention.kernel);
  const x = blockContext(m, o, { table, layout, attention, policy, tags, lora, bf16Params: strategy.bf16Params(o), baseGrads });
  const units: ParamUnit[] = [
    { count: table.denseLayers, tensors: table.dense.tensors },
    { count: table.moeLayers, tensors: table.moe.tensors },
    { count: 1, tensors: table.ends },
  ].filter((u) => u.count > 0);
  const layers = layerRuns(table, policy, strategy, o).map((r) => ({ ...r, keptPerToken: keptPerToken(x, o, policy, r.moe, framework) }));
  return {
    m,
    o,
    c,
    framework,
    strategy,
    table,
    layout,
    dp,
    x,
    policy,
    extras: { dequantisedBytes: framework.dequantisedBytes(o), fp8: float8Linears(o.precision) },
    tags,
    units,
    layers,
    inFlight,
    tokens: o.batch * o.seq,
    endsGrads,
    constants: { cublasWorkspaceBytes: CONSTANTS.cublasWorkspaceBytes.value },
    comm: { reduceScatterInput: 0 },
    ends: endUnitsOf(strategy.endUnits?.(o, table) ?? []),
  };
}
