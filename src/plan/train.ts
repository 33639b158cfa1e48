/**
 * The training estimate: model states, activations at the two moments of a step that can peak, offloading. See
 * estimate.ts. Each moment is a list of lines, each line in one field; the peak is the larger moment, and its lines
 * (with the overhead lines) are the estimate: the fields, the total and the text all add up the same lines.
 */
import { formatCount } from '../units.js';
import type { ModelConfig } from './model-config.js';
import { korthikantiLayerBytes, pytorchCorrection, pytorchLayerBytesPerToken } from './activations.js';
import { finalSoftcapLines, softcapScoreBytes } from './family-activations.js';
import { bytesPerParam, isLastStageOf, localParams, modelStateBytes } from './model-states.js';
import { checkParallel, fieldsOf, fieldsOver, fusedAttention, type Estimate, type Line, type Moment, type TrainOptions } from './options.js';
import { overheads } from './overheads.js';
import { countParams } from './params.js';

const total = (lines: readonly Line[]): number => lines.reduce((s, l) => s + l.bytes, 0);

/** The training estimate for the most-loaded GPU. */
export function estimateTrain(m: ModelConfig, o: TrainOptions): Estimate {
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const P = localParams(c, m, p);
  const dp = p.gpus / (p.tp * p.pp);
  const megatron = o.framework === 'megatron';
  // Megatron-LM keeps bf16 parameters with fp32 main gradients and fp32 master weights and Adam states, which its
  // distributed optimizer (--zero 1 here) shards over the data-parallel ranks; it casts no weights through autocast
  // and its fused Adam needs no parameter-sized temporaries.
  const b = megatron ? { weights: 2, grads: 4, optimizer: o.optimizer === 'sgd' ? 8 : 12, master: 4 } : bytesPerParam(o.precision, o.optimizer);
  const shard = (stage: number): number => (p.zero >= stage ? dp : 1);
  const onGpuOptimizer = o.offload === 'none';
  const onGpuParams = o.offload !== 'params';
  const states = megatron
    ? { parameters: (P * b.weights) / shard(3), gradients: (P * b.grads) / shard(2), optimizer: (P * b.optimizer) / shard(1) }
    : modelStateBytes(P, o.precision, o.optimizer, dp, p.zero);
  const parametersBytes = onGpuParams ? states.parameters : 0;
  const gradientsBytes = states.gradients;
  const optimizerBytes = onGpuOptimizer ? states.optimizer : 0;
  const tokens = o.batch * o.seq;
  const layersHere = m.layers / p.pp;
  const inFlight = p.pp > 1 ? Math.min(p.inFlight, p.pp) : 1;
  const sixteenBit = o.precision !== 'fp32' && o.precision !== 'amp-bf16';
  const fused = fusedAttention(m, o.attention, o.precision);

  const parametersLine: Line = {
    name: 'parameters',
    bytes: parametersBytes,
    note: `${formatCount(P)} parameters here x ${b.weights} bytes${p.zero >= 3 ? ` / ${dp} (ZeRO-3)` : ''}${onGpuParams ? '' : ' (offloaded to host)'}`,
    field: 'parametersBytes',
  };
  const optimizerLine: Line = {
    name: `optimizer states (${o.optimizer}${b.master ? ', fp32 master weights' : o.precision === 'bf16-pure' ? ', bf16' : ''})`,
    bytes: optimizerBytes,
    note: `x ${b.optimizer} bytes${p.zero >= 1 ? ` / ${dp} (${megatron ? "Megatron's distributed optimizer" : 'ZeRO-1'})` : ''}${onGpuOptimizer ? '' : ' (offloaded to pinned host memory)'}`,
    field: 'optimizerBytes',
  };
  const gradientsLine = (why: string): Line => ({
    name: 'gradients',
    bytes: gradientsBytes,
    note: `x ${b.grads} bytes${megatron ? ' (fp32 main gradients)' : ''}${p.zero >= 2 ? ` / ${dp} (ZeRO-2)` : ''}, ${why}`,
    field: 'gradientsBytes',
  });

  // Activations kept for the backward pass.
  const activations: Line[] = [];
  if (o.framework === 'megatron') {
    const per = korthikantiLayerBytes(o.seq, o.batch, m.hidden, m.heads, p.tp, p.sp, fused && o.recompute === 'none' ? 'selective' : o.recompute);
    activations.push({
      name: 'activations (Korthikanti et al. 2022)',
      bytes: per * layersHere * inFlight,
      note: `per layer ${per} bytes (s=${o.seq}, b=${o.batch}, h=${m.hidden}, a=${m.heads}, t=${p.tp}${p.sp ? ', sequence parallel' : ''}, recompute ${o.recompute}) x ${layersHere} layers x ${inFlight} micro-batches in flight`,
      field: 'activationsBytes',
    });
  } else {
    const count = pytorchLayerBytesPerToken(m, o.precision);
    const correction = o.activationCorrection ?? pytorchCorrection(o.precision);
    const perLayer = (count.perToken * correction * tokens) / p.tp;
    const scoreBytes = o.precision === 'fp32' ? 4 : 2;
    const perScore = (m.dropout ? 2 * scoreBytes + 1 : scoreBytes) + softcapScoreBytes(m, o.precision);
    const attnScores = fused || o.recompute !== 'none' ? 0 : perScore * o.batch * (m.heads / p.tp) * o.seq * o.seq;
    const kernel =
      o.attention === 'sdpa'
        ? fused
          ? 'SDPA runs a fused kernel: no s x s matrix'
          : 'SDPA runs the math kernel here (fp32 with grouped-query attention)'
        : o.attention;
    if (o.recompute === 'full') {
      const inputs = (m.hidden * (sixteenBit ? 2 : 4) * tokens) / p.tp;
      activations.push({
        name: 'activations: layer inputs (full recomputation)',
        bytes: (inputs * layersHere + perLayer) * inFlight,
        note: `${layersHere} layer inputs kept, one layer's activations recomputed at a time`,
        field: 'activationsBytes',
      });
    } else {
      activations.push({
        name: 'activations per layer',
        bytes: perLayer * layersHere * inFlight,
        note: `${count.hCoef}h + ${count.fCoef}f bytes per token x ${correction} (measured correction); ${layersHere} layers x ${inFlight} micro-batches in flight; attention: ${kernel}`,
        field: 'activationsBytes',
      });
      if (attnScores)
        activations.push({
          name: 'activations: attention matrices (math kernel)',
          bytes: attnScores * layersHere * inFlight,
          note: `${perScore} bytes per score x ${o.batch} x ${m.heads / p.tp} heads x ${o.seq}^2 per layer`,
          field: 'activationsBytes',
        });
    }
  }

  const isLastStage = isLastStageOf(c, p);
  const logitsBytes = isLastStage ? (4 * m.vocab * tokens) / p.tp : 0;
  // Every matmul weight: all but the embeddings (a tied output layer is a matmul on the embedding, so it counts).
  const matmulParams = P - c.embedding / p.tp + (m.tiedEmbeddings && isLastStage ? (m.vocab * m.hidden) / p.tp : 0);
  const largestLayer = Math.max(c.denseLayer, c.moeLayer) / p.tp;
  // Under FSDP / ZeRO-3 a unit's full weights exist only while it runs: the cache holds the bf16 copies of the units
  // gathered at once (the running one and the one prefetched), not of the whole model.
  const autocastCache = megatron || o.precision !== 'amp-bf16' ? 0 : p.zero >= 3 ? 2 * 2 * largestLayer : 2 * matmulParams;
  const backward: Line[] = [parametersLine];
  if (o.gradAccum > 1) backward.push(gradientsLine(`held through ${o.gradAccum} accumulated micro-batches`));
  backward.push(optimizerLine, ...activations);
  if (autocastCache)
    backward.push({
      name: 'autocast bf16 copies of the weights',
      bytes: autocastCache,
      note:
        p.zero >= 3
          ? 'torch.autocast caches a bf16 copy of each matmul weight it casts; under ZeRO-3/FSDP, of the two units gathered at a time'
          : 'torch.autocast caches a bf16 copy of each matmul weight for the step',
      field: 'autocastCacheBytes',
    });
  if (logitsBytes)
    backward.push(
      {
        name: 'loss: fp32 log-probabilities',
        bytes: logitsBytes,
        note: `4 bytes x ${m.vocab} vocabulary x ${tokens} tokens${p.tp > 1 ? ` / tp ${p.tp}` : ''}`,
        field: 'logitsBytes',
      },
      {
        name: 'loss backward: gradient of the logits',
        bytes: 2 * logitsBytes,
        note: 'two fp32 logit-sized tensors at the start of the backward pass',
        field: 'logitsBytes',
      },
      ...finalSoftcapLines(m, o.precision, tokens / p.tp),
    );

  // The optimizer step: gradients held, activations freed; a foreach step needs parameter-sized temporaries in the
  // dtype the step computes in (fp32 master weights, or the parameters' own dtype).
  const stepBytes = b.master || o.precision === 'fp32' || o.precision === 'amp-bf16' ? 4 : 2;
  const optimizerTemp =
    onGpuOptimizer && !o.fusedOptimizer && !megatron && o.optimizer !== 'sgd' ? (P * stepBytes) / shard(1) + (c.largestTensor * stepBytes) / p.tp : 0;
  const step: Line[] = [parametersLine, gradientsLine('held from the backward pass to the optimizer step'), optimizerLine];
  if (optimizerTemp)
    step.push({
      name: 'optimizer step temporaries',
      bytes: optimizerTemp,
      note: `foreach ${o.optimizer}: a parameter-sized ${stepBytes === 4 ? 'fp32' : 'bf16'} temporary plus the largest tensor (fused: none)`,
      field: 'optimizerTemporariesBytes',
    });

  const atBackward = total(backward) >= total(step);
  const peakLines = (atBackward ? backward : step).filter((l) => l.bytes > 0);
  const other: Moment = {
    phase: atBackward ? 'optimizer-step' : 'backward',
    bytes: total(atBackward ? step : backward),
    lines: (atBackward ? step : backward).filter((l) => l.bytes > 0),
  };
  const over = overheads(o, P, b.weights, largestLayer, total(peakLines));
  const lines = [...peakLines, ...over];
  const hostOptimizerBytes = onGpuOptimizer ? 0 : states.optimizer;
  const hostParametersBytes = onGpuParams ? 0 : states.parameters;
  const offloadBytesPerStep =
    o.offload === 'none' ? 0 : o.offload === 'optimizer' ? (P * (b.grads + b.weights)) / shard(1) : (P * (b.grads + 3 * b.weights)) / shard(1);
  const fields = fieldsOver([backward, step], over);
  // everything either moment holds, as if held at once
  const everything = parametersBytes + gradientsBytes + optimizerBytes + total(activations) + autocastCache + 3 * logitsBytes + optimizerTemp;
  return {
    ...fields,
    totalBytes: Math.round(fields.totalBytes),
    sumBytes: Math.round(everything + total(over)),
    peakPhase: atBackward ? 'backward' : 'optimizer-step',
    lines,
    atPeak: fieldsOf(lines),
    otherMoment: other,
    modelStates: { parametersBytes, gradientsBytes, optimizerBytes },
    hostBytes: hostOptimizerBytes + hostParametersBytes,
    hostParametersBytes,
    hostOptimizerBytes,
    offloadBytesPerStep,
    params: c,
    localParams: P,
  };
}
