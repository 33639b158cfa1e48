/**
 * `gpumem plan`: does the model fit, how, and where does each byte live. Builds the estimate for the most-loaded
 * GPU, compares it with the GPU's capacity, places each part (device, pinned host, NVMe, managed), prices
 * offloading from the link's bandwidth, and when it does not fit, tries the cheapest changes that make it fit.
 */
import { torchtitanUnitsNote } from './frameworks/torchtitan-commits.js';
import { catalogueGpu, type GpuSpec, gpuFromMemory } from '../catalogue/gpus.js';
import { InvalidArgumentError } from '../errors.js';
import {
  compilesLoss,
  estimate,
  fieldsOf,
  LINE_FIELDS,
  type Estimate,
  type InferOptions,
  type Line,
  type Moment,
  type PerGpuBytes,
  type PlanOptions,
  type TrainOptions,
} from './estimate.js';
import type { ModelConfig } from './model-config.js';
import { rankNotes } from './adapters.js';
import { countParams, type ParamCounts } from './params.js';
import type { ServeEstimate } from './serve.js';
import type { Suggestion } from './search/suggestion.js';

export type { Suggestion } from './search/suggestion.js';

export interface Machine {
  name: string;
  capacityBytes: number;
  capacitySource: string;
  /** Host link one way, GB/s, and where the figure came from. */
  hostLinkGBps: number;
  hostLinkSource: string;
  hostMemoryBytes: number | undefined;
  nvmeGBps: number;
  /** GPU to GPU bandwidth one way, GB/s, where GPUs are joined by NVLink or Infinity Fabric; undefined: over PCIe. */
  peerGBps?: number | undefined;
}

export interface Placement {
  part: string;
  bytes: number;
  location: 'device' | 'pinned-host' | 'nvme' | 'managed';
  why: string;
  /** Time per training step (or per decode step) that the placement costs, in seconds, when it moves data. */
  secondsPerStep?: number;
}

export interface PlanResult {
  schema: 'gpumem.plan/1';
  model: { name: string; parameters: number; activeParameters: number; layers: number; hidden: number; heads: number; kvHeads: number; vocab: number };
  options: PlanOptions;
  machine: Machine;
  /**
   * Each kind at its full size; totalBytes the device's peak (see PerGpuBytes), allocatedPeakBytes what
   * torch.cuda.max_memory_allocated() reports (tensors only), reservedPeakBytes what max_memory_reserved() reports.
   */
  perGpu: PerGpuBytes & { allocatedPeakBytes: number; reservedPeakBytes: number };
  /** The peak moment's lines by field: they add up to perGpu.totalBytes. */
  atPeak: PerGpuBytes;
  peakPhase: Estimate['peakPhase'];
  sumBytes: number;
  /** The lines held at the peak, then the overhead lines: perGpu's fields are their sums by field. */
  lines: Line[];
  /** What the other moment of the step holds (training: backward or optimizer step; inference: prefill or decode). */
  otherMoment: Moment | undefined;
  capacityBytes: number;
  fits: boolean;
  /** capacity - total (negative: missing bytes). */
  marginBytes: number;
  placement: Placement[];
  /** The cheapest changes that make it fit (search/: filled by planAsked), in the order shown. */
  suggestions: Suggestion[];
  /** --fit: the input turned and the largest value that fits, which this plan is at. */
  fit?: { target: string; input: string; value: number };
  largest: { batch?: number; seq?: number; context?: number };
  /** vLLM or SGLang: the KV cache the engine would size, as it prints it at start-up. */
  serving?: ServeEstimate;
  notes: string[];
}

/** A machine of the GPU `g` from the catalogue, or of a capacity given. */
function machineOf(g: GpuSpec): Machine {
  return {
    name: g.name,
    capacityBytes: g.memoryBytes,
    capacitySource: g.memorySource,
    hostLinkGBps: g.hostLinkGBps,
    hostLinkSource: g.assumed[0] ?? 'catalogue: theoretical host link, one way',
    hostMemoryBytes: undefined,
    nvmeGBps: 5,
    peerGBps: g.peerGBps,
  };
}

/** The estimate's view of a machine. */
const deviceOf = (mc: Machine) => ({ name: mc.name, capacityBytes: mc.capacityBytes, nvlink: (mc.peerGBps ?? 0) > mc.hostLinkGBps });

/** A catalogue GPU's machine. @throws BadInputError for a name the catalogue lacks, listing the closest. */
export const machineFromCatalogue = (name: string): Machine => machineOf(catalogueGpu(name));

/** A machine for any other GPU: the capacity its runtime reports (`--gpu-memory 24GiB`), the host link assumed. */
export const machineFromMemory = (text: string): Machine => machineOf(gpuFromMemory(text));

/** Where inference's parts live: weights, KV cache and the steps' transients, all on the device. */
function inferPlacements(e: Estimate): Placement[] {
  return [
    { part: 'weights', bytes: e.parametersBytes, location: 'device', why: 'read once per decode step: they belong in the fastest memory' },
    {
      part: 'KV cache',
      bytes: e.kvCacheBytes,
      location: 'device',
      why: 'read every decode step; if it does not fit, a quantised cache (fp8) halves it before offloading pays',
    },
    {
      part: 'workspace',
      bytes: e.activationsBytes + e.logitsBytes + e.workspaceBytes,
      location: 'device',
      why: 'transient buffers of the prefill and decode steps',
    },
  ];
}

function placements(m: ModelConfig, o: PlanOptions, e: Estimate, mc: Machine): Placement[] {
  const link = mc.hostLinkGBps * 1e9;
  const out: Placement[] = [];
  if (o.mode === 'train') {
    const hostParams = o.offload === 'params';
    out.push({
      part: 'parameters',
      bytes: hostParams ? e.hostParametersBytes : e.modelStates.parametersBytes,
      location: hostParams ? 'pinned-host' : 'device',
      why: hostParams ? 'offloaded: fetched layer by layer for the forward and the backward pass' : 'read by every forward and backward pass',
    });
    out.push({ part: 'gradients', bytes: e.modelStates.gradientsBytes, location: 'device', why: 'written by the backward pass, read by the optimizer' });
    out.push({
      part: 'optimizer states',
      bytes: o.offload === 'none' ? e.modelStates.optimizerBytes : e.hostOptimizerBytes,
      location: o.offload === 'none' ? 'device' : 'pinned-host',
      why:
        o.offload === 'none'
          ? 'updated once per step on the device'
          : 'offloaded: the step runs on the CPU; gradients go down and parameters come back every step',
      ...(o.offload === 'none' ? {} : { secondsPerStep: e.offloadBytesPerStep / link }),
    });
    const backward = e.peakPhase === 'backward' ? e.lines : (e.otherMoment?.lines ?? []);
    out.push({
      part: 'activations',
      bytes: backward.filter((l) => l.field === 'activationsBytes').reduce((a, l) => a + l.bytes, 0),
      location: 'device',
      why: o.recompute === 'none' ? 'kept from the forward to the backward pass' : `reduced by ${o.recompute} recomputation (recomputed in the backward pass)`,
    });
    if (e.hostActivationsBytes)
      out.push({
        part: 'offloaded activations',
        bytes: e.hostActivationsBytes,
        location: 'pinned-host',
        why: 'activation offloading: copied out in the forward pass and back in the backward pass, overlapped with compute',
        secondsPerStep: (2 * e.hostActivationsBytes) / link,
      });
  } else out.push(...inferPlacements(e));
  if (m.moe && o.parallel.ep === 1) {
    out.push({
      part: 'inactive experts',
      bytes: 0,
      location: 'managed',
      why: `only ${m.moe.expertsPerToken} of ${m.moe.experts} experts run per token: with managed memory and prefetch by router statistics, cold experts can live in host memory (costs link bandwidth per miss)`,
    });
  }
  return out;
}

/** The estimate, or undefined for a layout the model does not divide (a variant tried for a suggestion). */
function tryEstimate(m: ModelConfig, o: PlanOptions, mc?: Machine): Estimate | undefined {
  try {
    const e = estimate(m, o, mc && deviceOf(mc));
    return mc?.hostMemoryBytes !== undefined && e.hostBytes > mc.hostMemoryBytes ? undefined : e;
  } catch (err) {
    if (err instanceof InvalidArgumentError) return undefined;
    throw err;
  }
}

/**
 * The peaks PyTorch reports: allocated (tensors: every line but the overhead and what lives outside its allocator)
 * and reserved (plus what the caching allocator holds without tensors).
 */
export function allocatorPeaks(lines: readonly Line[]): { allocatedPeakBytes: number; reservedPeakBytes: number } {
  const allocated = lines.filter((l) => l.field !== 'overheadBytes' && !l.outsideAllocator).reduce((a, l) => a + l.bytes, 0);
  const cached = lines.filter((l) => l.cached).reduce((a, l) => a + l.bytes, 0);
  return { allocatedPeakBytes: allocated, reservedPeakBytes: allocated + cached };
}

/** The largest value of `key` (1..limit) for which the plan fits, by bisection. */
function largestFitting(m: ModelConfig, o: PlanOptions, cap: number, set: (o: PlanOptions, n: number) => PlanOptions, limit: number): number | undefined {
  const fits = (n: number): boolean => (tryEstimate(m, set(o, n))?.totalBytes ?? Infinity) <= cap;
  if (!fits(1)) return undefined;
  let lo = 1;
  let hi = 2;
  while (hi <= limit && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  hi = Math.min(hi, limit + 1);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

const rounded = (l: Line): Line => ({ ...l, bytes: Math.round(l.bytes) });

/** The model as a plan names it: its size and shape. */
function modelSummary(m: ModelConfig, c: ParamCounts): PlanResult['model'] {
  return {
    name: m.name,
    parameters: c.total,
    activeParameters: c.activePerToken,
    layers: m.layers,
    hidden: m.hidden,
    heads: m.heads,
    kvHeads: m.kvHeads,
    vocab: m.vocab,
  };
}
function roundedFields(e: Estimate): PerGpuBytes {
  const out = {} as PerGpuBytes;
  for (const k of [...LINE_FIELDS, 'totalBytes'] as const) out[k] = Math.round(e[k]);
  // the total is the rounded lines' sum, as the text and the page show it
  out.totalBytes = e.lines.reduce((a, l) => a + Math.round(l.bytes), 0);
  return out;
}
const gibText = (b: number): string => `${(b / 2 ** 30).toFixed(2)} GiB`;

/** The KV cache vLLM or SGLang would give the model on this machine, and what would let it start or hold more. */
function planServe(m: ModelConfig, o: InferOptions, mc: Machine, engine: 'vllm' | 'sglang'): PlanResult {
  const e = estimate(m, o, deviceOf(mc));
  const s = e.serving!;
  const lines = e.lines;
  const total = lines.reduce((a, l) => a + l.bytes, 0);
  const c = countParams(m);
  const suggestions: Suggestion[] = [];
  const notes = [
    `${engine === 'vllm' ? 'vLLM' : 'SGLang'} ${s.version} (--engine-version) takes ${(s.memoryFraction * 100).toFixed(0)}% of the GPU (${s.memoryFractionSource}) and gives the KV cache what the weights and its working memory leave`,
    `estimated, not exact: ${s.estimated.join(', ')}; the engine measures them at start-up and prints them`,
  ];
  notes.push(...(m.defaults ?? []));
  if (!s.starts)
    notes.push(`one request of ${s.maxModelLen} tokens needs ${s.maxModelLen * s.kvBytesPerToken} bytes of KV cache: the engine would refuse to start`);
  return {
    schema: 'gpumem.plan/1',
    model: modelSummary(m, c),
    options: o,
    machine: mc,
    perGpu: { ...fieldsOf(lines), ...allocatorPeaks(lines) },
    atPeak: fieldsOf(lines),
    peakPhase: 'inference',
    sumBytes: total,
    lines,
    otherMoment: undefined,
    capacityBytes: mc.capacityBytes,
    fits: s.starts,
    marginBytes: mc.capacityBytes - total,
    placement: [
      { part: 'weights', bytes: lines[0]!.bytes, location: 'device', why: 'read once per decode step' },
      {
        part: 'KV cache',
        bytes: Math.round(s.kvCacheBytes),
        location: 'device',
        why: `${s.kvBlocks} blocks of ${s.blockSize} tokens, shared by the running requests`,
      },
    ],
    suggestions,
    largest: { batch: Math.floor(s.maxConcurrency), context: s.kvTokens },
    serving: s,
    notes,
  };
}

/** Refuses an offload whose pinned host memory `--host-memory` cannot hold. */
function checkHostMemory(e: Estimate, mc: Machine): void {
  if (mc.hostMemoryBytes === undefined || e.hostBytes <= mc.hostMemoryBytes) return;
  const parts = [
    e.hostOptimizerBytes ? `optimizer states ${gibText(e.hostOptimizerBytes)}` : '',
    e.hostParametersBytes ? `parameters ${gibText(e.hostParametersBytes)}` : '',
    e.hostActivationsBytes ? `activations ${gibText(e.hostActivationsBytes)}` : '',
  ].filter(Boolean);
  throw new InvalidArgumentError(
    `offloading places ${gibText(e.hostBytes)} in pinned host memory (${parts.join(', ')}); --host-memory ${gibText(mc.hostMemoryBytes)} cannot hold it`,
  );
}

/** The largest batch and sequence (training) or batch and context (inference) that fit `cap`. */
function largestValues(m: ModelConfig, o: PlanOptions, e: Estimate, cap: number): PlanResult['largest'] {
  const largest: PlanResult['largest'] = {};
  if (o.mode === 'train') {
    // these try many variants: they set aside the share of the peak the replay through the caching allocator found
    // for this plan instead of replaying each variant
    const cachedShare = e.lines.filter((l) => l.cached).reduce((a, l) => a + l.bytes, 0) / Math.max(1, e.allocatedPeakBytes);
    const q: PlanOptions = o.fragmentation === undefined ? { ...o, fragmentation: cachedShare } : o;
    const b = largestFitting(m, q, cap, (x, n) => ({ ...(x as TrainOptions), batch: n }), 4096);
    if (b !== undefined) largest.batch = b;
    const s = largestFitting(m, q, cap, (x, n) => ({ ...(x as TrainOptions), seq: n }), m.maxPositions ?? 1 << 20);
    if (s !== undefined) largest.seq = s;
    return largest;
  }
  const b = largestFitting(m, o, cap, (x, n) => ({ ...(x as InferOptions), batch: n }), 1 << 16);
  if (b !== undefined) largest.batch = b;
  const context = (x: PlanOptions, n: number): PlanOptions => {
    const i = x as InferOptions;
    return { ...i, prompt: Math.max(1, n - i.newTokens), newTokens: Math.min(i.newTokens, n) };
  };
  const c = largestFitting(m, o, cap, context, m.maxPositions ?? 1 << 20);
  if (c !== undefined) largest.context = c;
  return largest;
}

/** What a training plan says beside its lines: the peak's moment, the model of the activations, adapters, compile. */
function trainNotes(m: ModelConfig, o: TrainOptions, e: Estimate): string[] {
  const notes: string[] = [];
  const other = e.otherMoment;
  notes.push(
    `total = the lines above: what the GPU holds at the peak of a step (${e.peakPhase === 'backward' ? 'the start of the backward pass: activations held, gradients not yet' : 'the optimizer step: gradients held, activations freed'}) plus the overhead lines${other ? `; at the ${other.phase === 'backward' ? 'start of the backward pass' : 'optimizer step'} it holds ${gibText(other.bytes)} before overhead` : ''}`,
  );
  if (o.framework === 'pytorch')
    notes.push('activations follow PyTorch eager with Hugging Face blocks (see the note on each line); --framework megatron uses Korthikanti et al. 2022');
  if (o.lora) notes.push(...rankNotes(m, o.lora));
  if (o.compile) notes.push(compileNote(o));
  const units = o.sharding === 'fsdp2' && o.fsdpUnits ? torchtitanUnitsNote(o.fsdpUnits) : undefined;
  if (units) notes.push(`FSDP2 units (--torchtitan): ${units}`);
  return notes;
}

/** The note on torch.compile: what it compiles and what the blocks then keep. */
function compileNote(o: TrainOptions): string {
  const op = o.recompute === 'op' ? " (the MLP's last matmul output)" : '';
  if (!compilesLoss(o))
    return `torch.compile on the transformer blocks only (--compile blocks, as torchtitan's apply_compile wraps each block): ${
      o.recompute === 'none'
        ? "the blocks keep what inductor's min-cut partitioner saves"
        : `the checkpoint (--recompute ${o.recompute}) decides what the blocks keep, less what the backward never reads${op}, and a recomputed block holds what its compiled backward graph materialises`
    }; the final norm, the output layer and the cross-entropy run eager (fp32 log-probabilities)`;
  return o.recompute === 'none'
    ? "torch.compile on the model without a checkpoint: the blocks keep what inductor's min-cut partitioner saves (matmul and SDPA outputs, the inputs of the matmuls whose weights train, the residual stream at each norm; pointwise chains recomputed), and the compiled cross-entropy keeps the 16-bit logits and a log-sum-exp"
    : `torch.compile on the blocks and the loss: the checkpoint (--recompute ${o.recompute}) decides what the blocks keep, less what the backward never reads${op}, and a recomputed block holds what its compiled backward graph materialises; the compiled cross-entropy keeps the 16-bit logits and a log-sum-exp instead of fp32 log-probabilities`;
}

/** Plans `m` under `o` on `mc`. @throws InvalidArgumentError for layouts that do not divide the model. */
export function plan(m: ModelConfig, o: PlanOptions, mc: Machine): PlanResult {
  if (o.mode === 'infer' && o.engine !== 'hf') return planServe(m, o, mc, o.engine);
  const e = estimate(m, o, deviceOf(mc));
  checkHostMemory(e, mc);
  // rounded once: the fields are sums of the rounded lines, so the JSON, the text and the page add up alike
  const lines = e.lines.map(rounded);
  const cap = mc.capacityBytes;
  const total = lines.reduce((a, l) => a + l.bytes, 0);
  const fits = total <= cap;
  const suggestions: Suggestion[] = [];
  const largest = largestValues(m, o, e, cap);
  const notes: string[] = [...(m.defaults ?? []), ...(o.mode === 'train' ? trainNotes(m, o, e) : [])];
  if (o.mode === 'infer' && m.maxPositions && o.prompt + o.newTokens > m.maxPositions)
    notes.push(`the context ${o.prompt + o.newTokens} exceeds the model's ${m.maxPositions} positions`);
  return {
    schema: 'gpumem.plan/1',
    model: modelSummary(m, e.params),
    options: o,
    machine: mc,
    perGpu: { ...roundedFields(e), allocatedPeakBytes: e.allocatedPeakBytes, reservedPeakBytes: e.reservedPeakBytes },
    atPeak: fieldsOf(lines),
    peakPhase: e.peakPhase,
    sumBytes: e.sumBytes,
    lines,
    otherMoment: e.otherMoment && { ...e.otherMoment, bytes: Math.round(e.otherMoment.bytes), lines: e.otherMoment.lines.map(rounded) },
    capacityBytes: cap,
    fits,
    marginBytes: cap - total,
    placement: placements(m, o, e, mc),
    suggestions,
    largest,
    notes,
  };
}
