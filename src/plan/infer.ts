/**
 * The inference estimate for Hugging Face generate: the program of program/generate.ts walked for the peak of the
 * prefill and of the last decode step, and replayed step by step through PyTorch's caching allocator for the reserved
 * peak (a contiguous cache grows by concatenation: the copies leave segments the next, longer copy cannot reuse).
 */
import type { ModelConfig } from './model-config.js';
import { generateRelease } from './engines/transformers-releases.js';
import { kvBytes, localParams } from './model-states.js';
import { checkParallel, type Estimate, fieldsOf, fieldsOver, type InferOptions, type Line } from './options.js';
import { allocatorCapacity, contextLines } from './overheads.js';
import { TorchAllocatorModel } from '../allocator-model/torch-caching.js';
import { countParams, kvBytesPerTokenPerLayer } from './params.js';
import { elementBytes, type GenerateSetup, generateProgram, generateTags } from './program/generate.js';
import type { PhasePeak } from './program/walk.js';
import { Replay } from './program/replay.js';
import { Walk } from './program/walk.js';
import { servedWeights } from './quantised-weights.js';
import { commLines } from './strategies/comm.js';

/** The generate program's inputs for `m` under `o` on the most-loaded GPU. */
export function generateSetup(m: ModelConfig, o: InferOptions): GenerateSetup {
  const p = o.parallel;
  const layers = m.layers / p.pp;
  const w = servedWeights(m, o);
  const kvSplit = m.mla ? 1 : Math.min(p.tp, m.kvHeads);
  const sliding = m.slidingWindow && m.slidingLayers ? Math.round((m.slidingLayers * layers) / m.layers) : 0;
  const c = countParams(m);
  const base = {
    m,
    o,
    layerWeightBytes: Math.max(0, w.totalBytes - w.endBytes) / layers,
    endWeightBytes: Math.min(w.totalBytes, w.endBytes),
    // the embeddings in 16 bits (32 under fp32) on one stage; under pipeline parallelism the ends stay one tensor
    embeddingBytes: p.pp === 1 ? Math.min(w.totalBytes, w.endBytes, (c.embedding / p.tp) * elementBytes(o)) : 0,
    quant: w,
    layers,
    denseLayers: Math.min(c.denseLayers, layers),
    slidingLayers: sliding,
    window: m.slidingWindow ?? 0,
    // AutoAWQ's WindowedCache is fp16 whatever --kv-dtype says (cache.py: .half())
    kvPerTokenLayer: kvBytesPerTokenPerLayer(m, kvBytes(o.kvCache === 'awq-fused' ? 'fp16' : o.kvDtype)) / kvSplit,
    cacheLen: o.cacheLen ?? o.prompt + o.newTokens,
    release: generateRelease(o.serve.engineVersion),
  };
  return { ...base, tags: generateTags(base) };
}

const sum = (lines: readonly Line[]): number => lines.reduce((a, l) => a + l.bytes, 0);

function linesOf(p: PhasePeak | undefined): Line[] {
  if (!p) return [];
  return [...p.byTag.entries()].sort(([a], [b]) => a.id - b.id).map(([t, bytes]) => ({ name: t.name, bytes, note: t.note(bytes), field: t.field }));
}

/** Reserved memory over the run: every decode step replayed through the caching allocator. */
function replayGenerate(m: ModelConfig, o: InferOptions, capacityBytes?: number): ReturnType<Replay['figures']> {
  const r = new Replay(new TorchAllocatorModel({ capacityBytes: allocatorCapacity(capacityBytes), conf: o.allocConf }));
  generateProgram(r, generateSetup(m, o), true);
  return r.figures();
}

/** The inference estimate for the most-loaded GPU. */
export function estimateInfer(m: ModelConfig, o: InferOptions, capacityBytes?: number): Estimate {
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const s = generateSetup(m, o);
  const walk = new Walk();
  generateProgram(walk, s, false);
  const peaks = walk.peaks();
  // the moments: the load (a weight quantised as it loads, bitsandbytes), the prefill and the last decode step; the
  // peak is the largest, the other moment the larger of the prefill and the decode step that is not it
  const moments = (['decode', 'prefill', 'load'] as const).map((phase) => ({ phase, lines: linesOf(peaks.get(phase)) }));
  const [peak, ...rest] = [...moments].sort((a, b) => sum(b.lines) - sum(a.lines)) as [(typeof moments)[number], ...(typeof moments)[number][]];
  const other = rest.find((x) => x.phase !== 'load') as (typeof moments)[number];
  const peakLines = peak.lines;
  const otherLines = other.lines;
  const tensors = sum(peakLines);
  const replay = o.fragmentation === undefined ? replayGenerate(m, o, capacityBytes) : undefined;
  const share = o.fragmentation ?? 0;
  const cached = replay ? Math.max(0, replay.peakReservedBytes - tensors) : tensors * share;
  const over: Line[] = [
    ...contextLines(o),
    ...commLines(p.gpus),
    replay
      ? {
          name: 'caching allocator: reserved, no tensor in it',
          bytes: cached,
          note: "PyTorch's caching allocator replayed through every decode step: a cache grown by concatenation leaves segments the next, longer copy cannot reuse",
          field: 'overheadBytes',
          cached: true,
        }
      : {
          name: 'fragmentation allowance',
          bytes: Math.round(cached),
          note: `${Math.round(share * 100)}% of the estimate for the caching allocator's split blocks (gpumem pool replay measures yours)`,
          field: 'overheadBytes',
          cached: true,
        },
  ];
  const lines = [...peakLines, ...over];
  const fields = { ...fieldsOver([peakLines], over), ...Object.fromEntries(Object.entries(walk.fieldMaxima()).filter(([k]) => k !== 'overheadBytes')) };
  return {
    ...fields,
    totalBytes: Math.round(fields.totalBytes),
    sumBytes: Math.round(fields.totalBytes),
    peakPhase: 'inference',
    lines,
    atPeak: fieldsOf(lines),
    otherMoment: { phase: other.phase as 'prefill' | 'decode', bytes: sum(otherLines), lines: otherLines },
    modelStates: { parametersBytes: fields.parametersBytes, gradientsBytes: 0, optimizerBytes: 0 },
    hostBytes: 0,
    hostParametersBytes: 0,
    hostOptimizerBytes: 0,
    offloadBytesPerStep: 0,
    params: c,
    localParams: localParams(c, m, p),
    fullLines: [...walk.tagMaxima().entries()]
      .sort(([a], [b]) => a.id - b.id)
      .map(([t, bytes]) => ({ name: t.name, bytes, note: t.note(bytes), field: t.field })),
    allocatedPeakBytes: replay ? replay.peakAllocatedBytes : Math.round(tensors),
    reservedPeakBytes: replay ? replay.peakReservedBytes : Math.round(tensors + cached),
  };
}
