/** The training estimate: model states, activations at the two peaks of a step, offloading. See estimate.ts. */
import { formatCount } from '../units.js';
import type { ModelConfig } from './model-config.js';
import { korthikantiLayerBytes, pytorchCorrection, pytorchLayerBytesPerToken } from './activations.js';
import { bytesPerParam, isLastStageOf, localParams, modelStateBytes } from './model-states.js';
import { checkParallel, type Estimate, type Line, type TrainOptions } from './options.js';
import { overheads } from './overheads.js';
import { countParams } from './params.js';

/** The training estimate for the most-loaded GPU. */
export function estimateTrain(m: ModelConfig, o: TrainOptions): Estimate {
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const P = localParams(c, m, p);
  const dp = p.gpus / (p.tp * p.pp);
  const b = bytesPerParam(o.precision, o.optimizer);
  const shard = (stage: number): number => (p.zero >= stage ? dp : 1);
  const onGpuOptimizer = o.offload === 'none';
  const onGpuParams = o.offload !== 'params';
  const states = modelStateBytes(P, o.precision, o.optimizer, dp, p.zero);
  const parametersBytes = onGpuParams ? states.parameters : 0;
  const gradientsBytes = states.gradients;
  const optimizerStates = states.optimizer;
  const optimizerBytes = onGpuOptimizer ? optimizerStates : 0;
  const tokens = o.batch * o.seq;
  const layersHere = m.layers / p.pp;
  const inFlight = p.pp > 1 ? Math.min(p.inFlight, p.pp) : 1;
  const lines: Line[] = [];
  const logitsBytes = (4 * m.vocab * tokens) / p.tp;
  let layerActs: number;
  let attnScores = 0;
  if (o.framework === 'megatron') {
    const per = korthikantiLayerBytes(o.seq, o.batch, m.hidden, m.heads, p.tp, p.sp, o.flashAttention && o.recompute === 'none' ? 'selective' : o.recompute);
    layerActs = per * layersHere * inFlight;
    lines.push({
      name: 'activations (Korthikanti et al. 2022)',
      bytes: layerActs,
      note: `per layer ${per} bytes (s=${o.seq}, b=${o.batch}, h=${m.hidden}, a=${m.heads}, t=${p.tp}${p.sp ? ', sequence parallel' : ''}, recompute ${o.recompute}) x ${layersHere} layers x ${inFlight} micro-batches in flight`,
    });
  } else {
    const count = pytorchLayerBytesPerToken(m, o.precision);
    const perLayer = (count.perToken * pytorchCorrection(o.precision) * tokens) / p.tp;
    const scoreBytes = o.precision === 'fp32' ? 4 : 2;
    attnScores = o.flashAttention || o.recompute !== 'none' ? 0 : (m.dropout ? 2 * scoreBytes + 1 : scoreBytes) * o.batch * (m.heads / p.tp) * o.seq * o.seq;
    if (o.recompute === 'full') {
      const inputs = (m.hidden * (o.precision === 'bf16' || o.precision === 'fp8' ? 2 : 4) * tokens) / p.tp;
      layerActs = (inputs * layersHere + perLayer) * inFlight;
      lines.push({
        name: 'activations: layer inputs (full recomputation)',
        bytes: layerActs,
        note: `${layersHere} layer inputs kept, one layer's activations recomputed at a time`,
      });
    } else {
      layerActs = (perLayer + attnScores) * layersHere * inFlight;
      lines.push({
        name: 'activations per layer',
        bytes: layerActs,
        note: `${count.hCoef}h + ${count.fCoef}f bytes per token x ${pytorchCorrection(o.precision)} (measured correction)${attnScores ? ` + the attention matrix (math kernel: ${m.dropout ? 2 * scoreBytes + 1 : scoreBytes} bytes per score)` : o.flashAttention ? '; fused attention stores no s x s matrix' : ''}; ${layersHere} layers x ${inFlight} micro-batches in flight`,
      });
    }
  }
  const isLastStage = isLastStageOf(c, p);
  const logits = isLastStage ? logitsBytes : 0;
  if (logits)
    lines.push({
      name: 'loss: fp32 log-probabilities',
      bytes: logits,
      note: `4 bytes x ${m.vocab} vocabulary x ${tokens} tokens${p.tp > 1 ? ` / tp ${p.tp}` : ''}`,
    });
  // Every matmul weight: all but the embeddings (a tied output layer is a matmul on the embedding, so it counts).
  const matmulParams = P - c.embedding / p.tp + (m.tiedEmbeddings && isLastStageOf(c, p) ? (m.vocab * m.hidden) / p.tp : 0);
  const autocastCache = o.precision === 'amp-bf16' ? 2 * matmulParams : 0;
  if (autocastCache)
    lines.push({
      name: 'autocast bf16 copies of the weights',
      bytes: autocastCache,
      note: 'torch.autocast caches a bf16 copy of each matmul weight for the step',
    });
  const activationsBytes = layerActs + logits + autocastCache;
  const backwardTransient = isLastStage ? 2 * logitsBytes : 0;
  const heldGrads = o.gradAccum > 1 ? gradientsBytes : 0;
  const backwardPeak = parametersBytes + optimizerBytes + heldGrads + activationsBytes + backwardTransient;
  const optimizerTemp = onGpuOptimizer && !o.fusedOptimizer && o.optimizer !== 'sgd' ? (P * 4) / shard(1) + (c.largestTensor * 4) / p.tp : 0;
  const optimizerPeak = parametersBytes + gradientsBytes + optimizerBytes + optimizerTemp;
  const peak = Math.max(backwardPeak, optimizerPeak);
  const phase = backwardPeak >= optimizerPeak ? 'backward' : 'optimizer-step';
  lines.unshift(
    {
      name: 'parameters',
      bytes: parametersBytes,
      note: `${formatCount(P)} parameters here x ${b.weights} bytes${p.zero >= 3 ? ` / ${dp} (ZeRO-3)` : ''}${onGpuParams ? '' : ' (offloaded to host)'}`,
    },
    {
      name: 'gradients',
      bytes: gradientsBytes,
      note: `x ${b.grads} bytes${p.zero >= 2 ? ` / ${dp} (ZeRO-2)` : ''}${o.gradAccum > 1 ? `, held through ${o.gradAccum} accumulated micro-batches` : ', held from the backward pass to the optimizer step'}`,
    },
    {
      name: `optimizer states (${o.optimizer}${b.master ? ', fp32 master weights' : ''})`,
      bytes: optimizerBytes,
      note: `x ${b.optimizer} bytes${p.zero >= 1 ? ` / ${dp} (ZeRO-1)` : ''}${onGpuOptimizer ? '' : ' (offloaded to pinned host memory)'}`,
    },
  );
  if (backwardTransient)
    lines.push({
      name: 'backward transient: gradient of the logits',
      bytes: backwardTransient,
      note: 'two fp32 logit-sized tensors at the start of the backward pass',
    });
  if (optimizerTemp)
    lines.push({
      name: 'optimizer step temporaries',
      bytes: optimizerTemp,
      note: 'foreach AdamW: a parameter-sized fp32 temporary plus the largest tensor (fused: none)',
    });
  const weightsPer = b.weights;
  const largestLayer = Math.max(c.denseLayer, c.moeLayer) / p.tp;
  const over = overheads(o, P, weightsPer, largestLayer, peak);
  const overheadBytes = over.reduce((a, l) => a + l.bytes, 0);
  lines.push(...over);
  const hostOptimizerBytes = onGpuOptimizer ? 0 : optimizerStates;
  const hostParametersBytes = onGpuParams ? 0 : states.parameters;
  const hostBytes = hostOptimizerBytes + hostParametersBytes;
  const offloadBytesPerStep =
    o.offload === 'none' ? 0 : o.offload === 'optimizer' ? (P * (b.grads + b.weights)) / shard(1) : (P * (b.grads + 3 * b.weights)) / shard(1);
  const sum = parametersBytes + gradientsBytes + optimizerBytes + activationsBytes + backwardTransient + optimizerTemp;
  return {
    parametersBytes,
    gradientsBytes,
    optimizerBytes,
    activationsBytes: activationsBytes + (phase === 'backward' ? backwardTransient : 0),
    kvCacheBytes: 0,
    overheadBytes,
    totalBytes: Math.round(peak + overheadBytes),
    sumBytes: Math.round(sum + overheadBytes),
    peakPhase: phase,
    hostBytes,
    hostParametersBytes,
    hostOptimizerBytes,
    offloadBytesPerStep,
    lines,
    params: c,
    localParams: P,
  };
}
