/**
 * The training step as one program: the weights and states on the GPU, then each micro-batch's forward pass (each
 * block under the save policy, the final norm, the loss), its backward pass (the loss, each block, recomputed first
 * under a checkpoint, its saved tensors back from host memory under offloading) and the optimizer step. The
 * strategy (strategies/) says where the states live and when units are gathered, resharded and reduced; the
 * framework (frameworks/) runs the loss and anything its loop holds. The liveness walk reads the allocated peak and
 * its lines from this program, the caching-allocator replay reads reserved memory from it.
 */
import type { BlockRun } from './block-context.js';
import { blockBackward, blockForward, type BlockPass } from './block.js';
import { perOpKept } from './compiled.js';
import { type GradStore, weightGrad } from './linear.js';
import type { H, Mem, Runs } from './mem.js';
import { blockMode } from './policies.js';
import type { StepSetup } from './step-setup.js';
import type { EndUnit } from '../strategies/types.js';

/** How a run reaches its measured step: the states already there (the walk), or loaded and stepped (the replay). */
export interface RunShape {
  /** Steps replayed; the last is the measured one. */
  steps: number;
  /** The optimizer states exist before the first step (a steady-state step) or are made on the first step. */
  steadyState: boolean;
  /** Built in fp32 on the GPU and cast to bf16 with model.to(), the cache kept (the fit runs' script). */
  fp32Cast: boolean;
  /** Called before the measured step (torch.cuda.reset_peak_memory_stats). */
  beforeLastStep?: (() => void) | undefined;
  /**
   * The whole run's micro-batches in order, where they differ in length (run-lengths.ts): the same weights, states
   * and gradients, each micro-batch's activations at its own tokens, `gradAccum` of them a step (the last step what
   * is left). Undefined: every micro-batch is `s`.
   */
  micro?: readonly StepSetup[] | undefined;
}

/** What the run holds from one step to the next. */
interface Held {
  /** Optimizer states by unit, made on the first step. */
  states: H[][] | undefined;
}

/** Runs the training program of `s` through `mem`. */
export function trainProgram(mem: Mem, s: StepSetup, shape: RunShape): void {
  mem.phase('load');
  loadWeights(mem, s, shape.fp32Cast);
  mem.alloc(16 * s.x.tokens, s.tags.inputs); // token ids and labels, int64
  if (s.framework.cublasWorkspace) mem.alloc(s.constants.cublasWorkspaceBytes, s.tags.workspace);
  // the optimizer in the backward pass makes each parameter's states at its first step, before any optimizer step
  const held: Held = { states: shape.steadyState || s.o.optimizerInBackward ? allocStates(mem, s) : undefined };
  s.framework.beforeStep?.(mem, s);
  const g = s.o.gradAccum;
  for (let step = 0; step < shape.steps; step++) {
    if (step === shape.steps - 1) shape.beforeLastStep?.();
    const grads = new GradStores();
    // gradient accumulation: the micro-batches before the last skip the strategy's gradient sync (no_sync)
    const run = shape.micro;
    if (run) {
      const last = Math.min(run.length, (step + 1) * g) - 1;
      for (let k = step * g; k <= last; k++) microStep(mem, run[k]!, grads, k === last);
    } else {
      if (g > 1) microStep(mem, s, grads, false);
      if (g > 2) mem.repeat(g - 2, () => microStep(mem, s, grads, false));
      microStep(mem, s, grads, true);
    }
    if (!s.o.optimizerInBackward) optimizerStep(mem, s, held);
    freeGrads(mem, s, grads);
  }
}

/**
 * The weights as they arrive: each unit's tensors; a quantised weight in 16 bits first, quantised on the GPU. Built in
 * fp32 and cast (`fp32Cast`): the whole model is made in fp32 first, then model.to() makes each bf16 copy and frees
 * its fp32 tensor in turn (torch.nn.Module._apply), so the freed fp32 blocks stay cached beside the bf16 weights.
 */
function loadWeights(mem: Mem, s: StepSetup, fp32Cast: boolean): void {
  const wide = s.units.map((u) => (fp32Cast ? mem.repeat(u.count, () => u.tensors.map((t) => mem.alloc(t.numel * 4, s.tags.transient))) : undefined));
  s.units.forEach((u, k) =>
    mem.repeat(u.count, (i) =>
      u.tensors.forEach((t, j) => {
        const q = t.quantised && !fp32Cast ? mem.alloc(2 * t.numel, s.tags.transient) : 0;
        mem.alloc(s.layout.paramBytes(t), s.tags.param(t));
        mem.free(q, wide[k]?.at(i)[j] ?? 0);
      }),
    ),
  );
}

/** The optimizer states of every trainable tensor, in the order the optimizer makes them (two per Adam parameter). */
function allocStates(mem: Mem, s: StepSetup): H[][] {
  const out: H[][] = [];
  for (const u of s.units) {
    const one = mem.repeat(u.count, () =>
      u.tensors.flatMap((t) => {
        const b = s.layout.stateBytes(t);
        if (!t.trains || b <= 0) return [];
        const halves = s.layout.statesPerParam;
        return Array.from({ length: halves }, () => mem.alloc(b / halves, s.tags.states));
      }),
    );
    out.push(one.at(0));
  }
  return out;
}

/** One micro-batch: forward, loss, backward; gradients land in `grads` (param.grad, or the strategy's shards). */
function microStep(mem: Mem, s: StepSetup, grads: GradStores, sync: boolean): void {
  const { x } = s;
  mem.phase('forward');
  const root = s.strategy.gatherRoot(mem, s);
  const { embedding, head } = s.ends;
  // the embedding's own unit (FSDP2 under torchtitan from 83e6941) around its forward pass, resharded after it
  let embedded = embedding ? gatherEnd(mem, s, embedding) : [];
  let hidden = mem.alloc(x.R * x.m.hidden * x.tokens, s.tags.transient);
  if (embedding && !embedding.keepsAfterForward) embedded = reshardEnd(mem, s, embedded);
  const forwards = s.layers.map((run) =>
    mem.repeat(run.count, () => {
      const r = layerForward(mem, s, run, hidden);
      hidden = r.out;
      return r;
    }),
  );
  // micro-batches in flight on a pipeline stage (1F1B: the stages): their blocks' saved tensors too
  const inFlight = s.inFlight > 1 ? mem.repeat(s.inFlight - 1, () => otherInFlight(mem, s)) : undefined;
  // the head's unit (final norm, output layer) gathered before the final norm, kept to its backward pass
  const headGathered = head ? gatherEnd(mem, s, head) : [];
  const loss = s.table.last ? s.framework.lossForward(mem, s, hidden) : (mem.free(hidden), undefined);
  // leaving autocast clears its cache of weight copies nothing saved (each layer's, as its run repeats)
  s.layers.forEach((run, r) => mem.repeat(run.count, (j) => mem.free(...(forwards[r] as Runs<LayerForward>).at(j).autocast)));
  mem.free(...x.autocastCache.splice(0));
  mem.phase('backward');
  if (loss) s.framework.lossBackward(mem, s, loss, grads.of(-1, 0));
  // its post_backward once the final norm's gradients are made, before the last block's backward pass
  if (head) s.strategy.releaseEnd?.(mem, s, head, headGathered, grads.of(-1, 0), sync);
  let g = mem.alloc(x.R * x.m.hidden * x.tokens, s.tags.grads);
  for (let r = s.layers.length - 1; r >= 0; r--) {
    const run = s.layers[r]!;
    const fwd = forwards[r]!;
    firstApart(mem, run.count, (j) => {
      const gi = layerBackward(mem, s, run, fwd.at(run.count - 1 - j), grads.of(r, j), sync);
      mem.free(g);
      g = gi;
    });
  }
  if (inFlight) mem.repeat(inFlight.count, (j) => releaseInFlight(mem, inFlight.at(j)));
  // the embedding's unit gathered again when its output's gradient arrives (FSDP2's pre_backward unshards it,
  // whether or not its weight makes a gradient)
  if (embedding && !embedded.length) embedded = gatherEnd(mem, s, embedding);
  mem.free(g);
  const rootGrads = grads.of(-1, 0);
  const embed = s.table.ends.find((t) => t.key === 'embed');
  if (embed && s.endsGrads) weightGrad(mem, x, 'embed', embed.numel * x.gradBytes, 0, rootGrads);
  if (embedding) s.strategy.releaseEnd?.(mem, s, embedding, embedded, rootGrads, sync);
  s.strategy.releaseRoot(mem, s, root, rootGrads, sync);
}

/** An end's unit gathered (Sharding.gatherEnd). */
function gatherEnd(mem: Mem, s: StepSetup, unit: EndUnit): H[] {
  return s.strategy.gatherEnd?.(mem, s, unit) ?? [];
}

/** An end's unit resharded after its forward pass: nothing of it is held after. */
function reshardEnd(mem: Mem, s: StepSetup, gathered: H[]): H[] {
  s.strategy.reshard(mem, gathered);
  return [];
}

/**
 * `n` iterations with the first apart from the rest. A run's first layer in the backward pass finds no
 * reduce-scatter input of its own unit's size held (CommState: none, or the previous run's), the others find their
 * predecessor's, so each part repeats identically and folds exactly.
 */
function firstApart(mem: Mem, n: number, body: (i: number) => void): void {
  mem.repeat(Math.min(n, 1), body);
  mem.repeat(Math.max(n - 1, 0), (j) => body(j + 1));
}

/** What one layer's forward pass leaves: its output, what it saved, the input a checkpoint holds. */
interface LayerForward {
  out: H;
  run: BlockRun;
  input: H;
  cached: H[];
  cachedBytes: number[];
  gathered: H[];
  offloaded: boolean;
  /** The autocast copies this layer's pass without autograd cached (freed when the forward pass leaves autocast). */
  autocast: H[];
}

function layerForward(mem: Mem, s: StepSetup, run: StepSetup['layers'][number], input: H): LayerForward {
  const { x, policy } = s;
  if (s.framework.formulaBlock) return formulaForward(mem, s, run, input);
  const gathered = s.strategy.gatherUnit(mem, s, run.moe);
  const pass: BlockPass = { mode: blockMode(policy.forward, run.moe, !!x.lora?.dora), moe: run.moe, owns: !policy.keepsInput, extras: s.extras };
  if (policy.keepsInput) mem.retag(input, s.tags.checkpoint);
  const { out, run: saved } = blockForward(mem, x, input, pass);
  const cachedBytes = policy.perOp ? perOpKept(x, run.moe, pass.mode === 'compiled' || policy.recompute === 'compiled').map((t) => t.bytes * x.tokens) : [];
  const cached = cachedBytes.map((b) => mem.alloc(b, s.tags.checkpoint));
  // activation offloading: the saved tensors go to pinned host memory; about two layers' worth stay on the GPU
  if (run.offloaded) {
    for (const e of saved.saved) mem.free(e.h);
    mem.free(...cached);
    if (policy.keepsInput) mem.free(input);
  }
  const keep = run.keepGathered;
  if (!keep) s.strategy.reshard(mem, gathered);
  return {
    out,
    run: saved,
    input: policy.keepsInput ? input : 0,
    cached,
    cachedBytes,
    gathered: keep ? gathered : [],
    offloaded: run.offloaded,
    autocast: x.autocastCache.splice(0),
  };
}

function layerBackward(mem: Mem, s: StepSetup, run: StepSetup['layers'][number], f: LayerForward, grads: GradStore, sync: boolean): H {
  const { x, policy } = s;
  if (s.framework.formulaBlock) return formulaBackward(mem, s, run, f, grads);
  const gathered = f.gathered.length ? f.gathered : s.strategy.gatherUnit(mem, s, run.moe);
  const pass: BlockPass = { mode: 'eager', moe: run.moe, owns: false, extras: s.extras };
  // blockBackward releases what it reads from its run: a copy, so the forward's record stands for every repeat
  let saved: BlockRun = { ...f.run, saved: f.run.saved.slice() };
  let redone: H = 0;
  // offloaded: what the layer kept comes back from pinned host memory first
  const back = (bytes: number, tag = s.tags.checkpoint): H => mem.alloc(bytes, tag);
  const input = f.offloaded && f.input ? back(x.R * x.m.hidden * x.tokens) : f.input;
  const cached = f.offloaded ? f.cachedBytes.map((b) => back(b)) : f.cached;
  if (policy.recompute) {
    // the checkpoint runs the block again with autograd: its output only feeds the block's own backward pass
    const again = blockForward(mem, x, input, { ...pass, mode: blockMode(policy.recompute, run.moe, !!x.lora?.dora) });
    saved = again.run;
    redone = again.out;
  } else if (f.offloaded) saved = { ...saved, saved: saved.saved.map((e) => ({ ...e, h: mem.alloc(e.bytes, s.tags.kept) })) };
  const sink: H[] = [];
  const collects = s.strategy.collectsGrads(s.o);
  x.gradSink = collects ? sink : undefined;
  blockBackward(mem, x, saved, grads, pass);
  if (x.full) weightGrad(mem, x, 'rest', (run.moe ? x.restParams.moe : x.restParams.dense) * x.gradBytes, 0, grads);
  x.gradSink = undefined;
  // the input's gradient: the output's, and what the two branches add to it
  const gi = mem.alloc(x.R * x.m.hidden * x.tokens, s.tags.grads);
  mem.free(input, redone, ...cached);
  if (collects) s.strategy.reduce(mem, s, run.moe, sink, grads, sync);
  s.strategy.reshard(mem, gathered);
  return gi;
}

/** A framework's own block counted by its formula (Megatron-LM): what a layer keeps, as one tensor. */
function formulaForward(mem: Mem, s: StepSetup, run: StepSetup['layers'][number], input: H): LayerForward {
  const bytes = s.framework.formulaBlock!(s.x, s.o, run.moe);
  const kept = mem.alloc(bytes, s.tags.formula);
  const out = mem.alloc(s.x.R * s.x.m.hidden * s.x.tokens, s.tags.transient);
  mem.free(input);
  return {
    out,
    run: { saved: [{ h: kept, perToken: bytes / s.x.tokens, bytes, stage: 'attn-norm' }], keptPerToken: bytes / s.x.tokens },
    input: 0,
    cached: [],
    cachedBytes: [],
    gathered: [],
    offloaded: false,
    autocast: [],
  };
}

/** Its backward pass: the layer's weight gradients, its kept tensor freed. */
function formulaBackward(mem: Mem, s: StepSetup, run: StepSetup['layers'][number], f: LayerForward, grads: GradStore): H {
  const numel = (run.moe ? s.table.moe : s.table.dense).tensors.filter((t) => t.trains).reduce((a, t) => a + t.numel, 0);
  weightGrad(mem, s.x, 'layer', numel * s.x.gradBytes, 0, grads);
  const gi = mem.alloc(s.x.R * s.x.m.hidden * s.x.tokens, s.tags.grads);
  for (const e of f.run.saved) mem.free(e.h);
  return gi;
}

/** Another micro-batch in flight on this pipeline stage: what its blocks keep, held until its backward pass. */
function otherInFlight(mem: Mem, s: StepSetup): H[] {
  const perToken = s.layers.reduce((a, r) => a + r.count * r.keptPerToken, 0);
  const tag = s.framework.formulaBlock ? s.tags.formula : s.policy.keepsInput ? s.tags.checkpoint : s.tags.kept;
  return [mem.alloc(perToken * s.x.tokens, tag)];
}

function releaseInFlight(mem: Mem, hs: H[]): void {
  mem.free(...hs);
}

/**
 * The gradients kept to the optimizer step (param.grad, or the shards a strategy reduced them to), by layer run and
 * layer within it (-1: the ends). The walk runs one layer of a run for all of them: its store stands for each.
 */
class GradStores {
  private readonly stores = new Map<string, GradStore>();
  of(run: number, layer: number): GradStore {
    const key = `${run}:${layer}`;
    let g = this.stores.get(key);
    if (!g) this.stores.set(key, (g = new Map()));
    return g;
  }
  has(run: number, layer: number): boolean {
    return this.stores.has(`${run}:${layer}`);
  }
}

/**
 * The optimizer step: its states on the first step (between the gradients), a foreach step's temporaries: torch's
 * _multi_tensor_adamw makes one for every parameter at once (torch._foreach_sqrt of the second moments), frees them
 * after the update.
 */
function optimizerStep(mem: Mem, s: StepSetup, held: Held): void {
  mem.phase('optimizer-step');
  held.states ??= allocStates(mem, s);
  if (!s.layout.foreach) return;
  const made = s.units.map((u) => mem.repeat(u.count, () => u.tensors.map((t) => (t.trains ? mem.alloc(s.layout.stepBytes(t), s.tags.stepTemporaries) : 0))));
  s.units.forEach((u, i) => mem.repeat(u.count, (j) => mem.free(...(made[i] as Runs<H[]>).at(j))));
}

/** zero_grad(set_to_none=True): the gradients go after the step (or, in the backward pass, as they are stepped). */
function freeGrads(mem: Mem, s: StepSetup, grads: GradStores): void {
  s.layers.forEach((run, r) =>
    mem.repeat(run.count, (j) => {
      if (grads.has(r, j)) for (const h of grads.of(r, j).values()) mem.free(h);
    }),
  );
  for (const h of grads.of(-1, 0).values()) mem.free(h);
}
