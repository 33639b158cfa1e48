/**
 * The training estimate: the step program (program/train-step.ts) walked for the allocated peak and the lines held
 * at it, and replayed through PyTorch's caching allocator for the reserved peak. Both read the same program, so the
 * figures cannot disagree about what a step holds.
 */
import { CONSTANTS } from './constants.js';
import { frameworkOf } from './frameworks/registry.js';
import type { ModelConfig } from './model-config.js';
import { checkParallel, type Estimate, fieldsOf, fieldsOver, type Line, type Moment, type TrainOptions } from './options.js';
import { contextLines } from './overheads.js';
import type { PhasePeak } from './program/walk.js';
import { Walk } from './program/walk.js';
import { Replay } from './program/replay.js';
import { type AllocConf, formatAllocConf } from '../allocator-model/alloc-conf.js';
import { TorchAllocatorModel } from '../allocator-model/torch-caching.js';
import { allocatorCapacity } from './overheads.js';
import { type StepSetup, stepSetup } from './program/step-setup.js';
import { trainProgram } from './program/train-step.js';
import { tensorsOf } from './program/params-table.js';
import { shardingOf } from './strategies/registry.js';

/** The program inputs of a run: its framework's and its strategy's. */
export function setupOf(model: ModelConfig, o: TrainOptions): StepSetup {
  return stepSetup(model, o, frameworkOf(o.framework), shardingOf(o));
}

/** The lines of one moment's peak: every tag held then, in the order the program named them. */
function linesOf(p: PhasePeak | undefined): Line[] {
  if (!p) return [];
  return [...p.byTag.entries()]
    .sort(([a], [b]) => a.id - b.id)
    .map(([t, bytes]) => ({ name: t.name, bytes, note: t.note(bytes), field: t.field, ...(t.outsideAllocator ? { outsideAllocator: true } : {}) }));
}

const sum = (lines: readonly Line[]): number => lines.reduce((a, l) => a + l.bytes, 0);

/** The allocator replay's figures for the run, or undefined where its framework's tensors are not replayed. */
export function replayRun(model: ModelConfig, o: TrainOptions, fp32Cast = false, capacityBytes?: number): ReturnType<Replay['figures']> | undefined {
  const s = setupOf(model, o);
  if (!s.framework.replay) return undefined;
  const r = new Replay(new TorchAllocatorModel({ capacityBytes: allocatorCapacity(capacityBytes), conf: o.allocConf }));
  // the whole run: each micro-batch at its own length through the one allocator, the peak over all of them
  const run = o.runBatches;
  if (run?.length) {
    const setups = new Map<string, StepSetup>();
    const micro = run.map(({ batch, seq }) => {
      const key = `${batch}x${seq}`;
      let m = setups.get(key);
      if (!m) setups.set(key, (m = batch === o.batch && seq === o.seq ? s : setupOf(model, { ...o, batch, seq })));
      return m;
    });
    trainProgram(r, s, { steps: Math.ceil(run.length / o.gradAccum), steadyState: false, fp32Cast, micro });
    return r.figures();
  }
  trainProgram(r, s, { steps: 3, steadyState: false, fp32Cast, beforeLastStep: () => r.resetPeaks() });
  return r.figures();
}

/** The training estimate for the most-loaded GPU. */
export function estimateTrain(model: ModelConfig, o: TrainOptions, capacityBytes?: number): Estimate {
  checkParallel(model, o.parallel);
  // a whole run's lines are those of its largest micro-batch (the replay below reaches it among the others)
  const widest = o.runBatches?.reduce((a, b) => (b.batch * b.seq > a.batch * a.seq ? b : a));
  const s = setupOf(model, widest ? { ...o, batch: widest.batch, seq: widest.seq } : o);
  const walk = new Walk();
  trainProgram(walk, s, { steps: 1, steadyState: true, fp32Cast: false });
  const peaks = walk.peaks();
  const pick = (...ps: Array<PhasePeak | undefined>): PhasePeak | undefined => ps.reduce((a, b) => (b && (!a || b.bytes > a.bytes) ? b : a), undefined);
  const backward = pick(peaks.get('forward'), peaks.get('backward'), peaks.get('load'));
  const step = peaks.get('optimizer-step');
  const moments: Array<{ phase: Moment['phase']; lines: Line[] }> = [{ phase: 'backward', lines: linesOf(backward) }];
  if (step) moments.push({ phase: 'optimizer-step', lines: linesOf(step) });
  const peak = moments.reduce((a, b) => (sum(b.lines) > sum(a.lines) ? b : a));
  const other = moments.find((x) => x !== peak);
  const tensors = sum(peak.lines);
  const outside = sum(peak.lines.filter((l) => l.outsideAllocator));
  const replay = o.fragmentation === undefined ? replayRun(model, o, false, capacityBytes) : undefined;
  const allocated = replay ? replay.peakAllocatedBytes : tensors - outside;
  const cached = replay
    ? Math.max(0, replay.peakReservedBytes - (tensors - outside))
    : (tensors - outside) * (o.fragmentation ?? CONSTANTS.fragmentationShare.value);
  const over = [...contextLines(o), ...s.strategy.overheads(s), cachedLine(cached, replay !== undefined, o.fragmentation, o.allocConf, o.runBatches?.length)];
  const lines = [...peak.lines, ...over];
  // each kind at its full size: the most the walk saw of it at any moment of the step
  const fields = { ...fieldsOver([peak.lines], over), ...Object.fromEntries(Object.entries(walk.fieldMaxima()).filter(([k]) => k !== 'overheadBytes')) };
  return {
    ...fields,
    totalBytes: Math.round(fields.totalBytes),
    sumBytes: Math.round(
      fields.parametersBytes +
        fields.gradientsBytes +
        fields.optimizerBytes +
        fields.activationsBytes +
        fields.autocastCacheBytes +
        fields.logitsBytes +
        fields.optimizerTemporariesBytes +
        fields.workspaceBytes +
        sum(over),
    ),
    peakPhase: peak.phase === 'optimizer-step' ? 'optimizer-step' : 'backward',
    lines,
    atPeak: fieldsOf(lines),
    otherMoment: other && { phase: other.phase, bytes: sum(other.lines), lines: other.lines },
    modelStates: { parametersBytes: fields.parametersBytes, gradientsBytes: fields.gradientsBytes, optimizerBytes: fields.optimizerBytes },
    hostBytes: s.layout.hostParamBytes + s.layout.hostStateBytes + offloadedBytes(s),
    hostParametersBytes: s.layout.hostParamBytes,
    hostOptimizerBytes: s.layout.hostStateBytes,
    hostActivationsBytes: offloadedBytes(s),
    offloadBytesPerStep: s.layout.offloadBytesPerStep + 2 * offloadedBytes(s),
    params: s.c,
    localParams: tensorsOf(s.table).reduce((a, { t, count }) => a + (t.adapter ? 0 : t.numel * count), 0),
    fullLines: [...walk.tagMaxima().entries()]
      .sort(([a], [b]) => a.id - b.id)
      .map(([t, bytes]) => ({ name: t.name, bytes, note: t.note(bytes), field: t.field })),
    allocatedPeakBytes: Math.round(allocated),
    reservedPeakBytes: Math.round(allocated + cached),
  };
}

/** Saved activations offloaded to pinned host memory (torchtune's activation offloading). */
function offloadedBytes(s: StepSetup): number {
  return s.layers.filter((r) => r.offloaded).reduce((a, r) => a + r.count * r.keptPerToken * s.x.tokens, 0) * s.inFlight;
}

/** What the caching allocator holds without a tensor in it at the peak: replayed, or a flat allowance. */
function cachedLine(bytes: number, replayed: boolean, share: number | undefined, conf: AllocConf | undefined, run: number | undefined): Line {
  const settings = conf ? formatAllocConf(conf) : '';
  const over = run ? `the whole run's ${run} micro-batches of their own lengths` : 'the step';
  return replayed
    ? {
        name: 'caching allocator: reserved, no tensor in it',
        bytes,
        note: run
          ? `PyTorch's caching allocator${settings ? ` under PYTORCH_CUDA_ALLOC_CONF=${settings}` : ''} replayed through ${over}: what max_memory_reserved() holds above the tensors at the end of the run (segments cut for one length stay cached)`
          : settings
            ? `PyTorch's caching allocator under PYTORCH_CUDA_ALLOC_CONF=${settings}, replayed through the step: what max_memory_reserved() holds above the tensors`
            : "PyTorch's caching allocator replayed through the step (its 2 MiB and 20 MiB segments, blocks rounded and split, never merged across segments): what max_memory_reserved() holds above the tensors",
        field: 'overheadBytes',
        cached: true,
      }
    : {
        name: 'fragmentation allowance',
        bytes,
        note: `${Math.round((share ?? CONSTANTS.fragmentationShare.value) * 100)}% of the estimate for the caching allocator's split blocks (gpumem pool replay measures yours)`,
        field: 'overheadBytes',
        cached: true,
      };
}
