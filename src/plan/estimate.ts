/**
 * The memory estimates behind `gpumem plan`, for the most-loaded GPU.
 *
 * Training, framework "pytorch" (PyTorch eager, Hugging Face models, as measured on an H200):
 * - weights, gradients and optimizer states by precision (fp32 and amp-bf16 keep fp32 weights and gradients;
 *   bf16 and fp8 keep 16-bit weights and gradients with fp32 master weights and Adam states: ZeRO's K = 12);
 *   ZeRO stage 1/2/3 shards optimizer, then gradients, then parameters over the data-parallel GPUs.
 * - activations per layer and token counted tensor by tensor for the block (LayerNorm + GELU-tanh + dropout for
 *   GPT, RMSNorm + SwiGLU + RoPE + repeated KV heads for Llama) at the element sizes autocast uses, times a factor
 *   measured on real runs for what the count misses (PyTorch's contiguous copies and temporaries): 1.04 for fp32,
 *   1.10 for 16-bit. Framework choices enter explicitly: a fused attention kernel (flash / memory-efficient SDPA)
 *   stores no s x s matrix, the math kernel stores the softmax; the loss keeps fp32 log-probabilities (4 bytes x
 *   vocabulary per token, as Hugging Face upcasts logits before cross-entropy) and the backward pass briefly holds
 *   two more such tensors; autocast caches a bf16 copy of every matmul weight; AdamW's default foreach step needs
 *   a parameter-sized temporary (fused: none).
 * - the peak is the larger of two moments of a step: the start of the backward pass (activations held,
 *   gradients not yet) and the optimizer step (gradients held, activations freed).
 * Framework "megatron": Korthikanti et al. 2022, activations per layer sbh(34 + 5as/h) with its tensor-parallel,
 * sequence-parallel and recomputation forms, 16-bit activations.
 *
 * Inference: weights by their format, the KV cache (keys and values per layer and token, or MLA's latent; a
 * sliding window caps it; paged blocks round it up), and the prefill workspace.
 */
import { InvalidArgumentError } from '../errors.js';
import type { ModelConfig } from './model-config.js';
import { countParams, kvBytesPerTokenPerLayer, type ParamCounts } from './params.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

export type Precision = 'fp32' | 'amp-bf16' | 'bf16' | 'fp8';
export type OptimizerName = 'adamw' | 'adam' | 'sgd' | 'adam8bit';
export type Recompute = 'none' | 'selective' | 'full';
export type Framework = 'pytorch' | 'megatron';
export type WeightFormat = 'fp32' | 'bf16' | 'fp16' | 'fp8' | 'int8' | 'int4';
export type KvDtype = 'fp32' | 'bf16' | 'fp16' | 'fp8' | 'int8' | 'int4';

export interface Parallelism {
  gpus: number;
  nodes: number;
  /** ZeRO stage (FSDP full sharding is stage 3). */
  zero: 0 | 1 | 2 | 3;
  tp: number;
  sp: boolean;
  pp: number;
  ep: number;
  /** Micro-batches in flight on the first pipeline stage (1F1B: the number of stages). */
  inFlight: number;
}

export interface TrainOptions {
  mode: 'train';
  precision: Precision;
  optimizer: OptimizerName;
  fusedOptimizer: boolean;
  batch: number;
  seq: number;
  gradAccum: number;
  recompute: Recompute;
  flashAttention: boolean;
  framework: Framework;
  parallel: Parallelism;
  offload: 'none' | 'optimizer' | 'params';
  /** Share of the estimate set aside for allocator fragmentation. */
  fragmentation: number;
}

export interface InferOptions {
  mode: 'infer';
  batch: number;
  prompt: number;
  newTokens: number;
  kvDtype: KvDtype;
  /** Paged KV cache block size in tokens (vLLM's default is 16); undefined for a contiguous cache. */
  blockSize: number | undefined;
  weights: WeightFormat;
  flashAttention: boolean;
  parallel: Parallelism;
  fragmentation: number;
}

export type PlanOptions = TrainOptions | InferOptions;

/** One named line of the estimate. */
export interface Line {
  name: string;
  bytes: number;
  note: string;
}

/** The byte totals of one GPU, as the plan's JSON prints them. */
export interface PerGpuBytes {
  parametersBytes: number;
  gradientsBytes: number;
  optimizerBytes: number;
  activationsBytes: number;
  kvCacheBytes: number;
  overheadBytes: number;
  /** The predicted peak (see peakPhase) plus the overhead lines. */
  totalBytes: number;
}

export interface Estimate extends PerGpuBytes {
  /** Everything added up as if all of it were held at once (an upper bound). */
  sumBytes: number;
  peakPhase: 'backward' | 'optimizer-step' | 'inference';
  /** Bytes kept in host memory by offloading: parameters, optimizer states. */
  hostBytes: number;
  hostParametersBytes: number;
  hostOptimizerBytes: number;
  /** Bytes moved across the host link per step by offloading (training) or 0. */
  offloadBytesPerStep: number;
  lines: Line[];
  params: ParamCounts;
  /** Parameters held on this GPU (before ZeRO sharding of the parameters themselves). */
  localParams: number;
}

/** Bytes per parameter of weights, gradients and optimizer state (master weights included) by precision. */
export function bytesPerParam(precision: Precision, optimizer: OptimizerName): { weights: number; grads: number; optimizer: number; master: number } {
  const fp32Weights = precision === 'fp32' || precision === 'amp-bf16';
  const weights = fp32Weights ? 4 : precision === 'fp8' ? 3 : 2; // fp8: bf16 weights plus fp8 copies for the matmuls
  const grads = fp32Weights ? 4 : 2;
  const master = fp32Weights ? 0 : 4;
  const states = optimizer === 'sgd' ? 4 : optimizer === 'adam8bit' ? 2 : 8;
  return { weights, grads, optimizer: states + master, master };
}

/**
 * Model-state bytes (parameters, gradients, optimizer states) of `params` parameters under ZeRO stage `zero` over
 * `dp` data-parallel GPUs, as ZeRO (Rajbhandari et al. 2020) defines them.
 */
export function modelStateBytes(params: number, precision: Precision, optimizer: OptimizerName, dp: number, zero: number): { parameters: number; gradients: number; optimizer: number } {
  const b = bytesPerParam(precision, optimizer);
  return {
    parameters: (params * b.weights) / (zero >= 3 ? dp : 1),
    gradients: (params * b.grads) / (zero >= 2 ? dp : 1),
    optimizer: (params * b.optimizer) / (zero >= 1 ? dp : 1),
  };
}

/** Bytes per weight for inference formats (int8 / int4 include per-group scales: one 2-byte scale per 128 / 64). */
export function weightBytes(format: WeightFormat): number {
  return { fp32: 4, bf16: 2, fp16: 2, fp8: 1, int8: 1 + 2 / 128, int4: 0.5 + 2 / 64 }[format];
}

export function kvBytes(d: KvDtype): number {
  return { fp32: 4, bf16: 2, fp16: 2, fp8: 1, int8: 1, int4: 0.5 }[d];
}

/**
 * Activation bytes saved per token in one layer by PyTorch autograd (Hugging Face blocks), before the measured
 * correction. h: hidden size, f: MLP intermediate size.
 */
export function pytorchLayerBytesPerToken(m: ModelConfig, precision: Precision): { perToken: number; hCoef: number; fCoef: number } {
  const fp32 = precision === 'fp32';
  const amp = precision === 'amp-bf16';
  let hCoef: number;
  let fCoef: number;
  if (m.family === 'gpt') {
    // fp32: LN inputs 2x4, LN output/linear inputs 2x4, qkv 12, attention out 4, merged heads 4, dropout masks 2;
    //       MLP: fc out, tanh, 0.5x, 1+tanh, GELU out: 5 x 4 bytes per intermediate element.
    // 16-bit (autocast): residual stream and LayerNorm stay fp32 (8), bf16 casts of linear inputs (4), qkv 6,
    //       out 2, merged 2, masks 2; MLP: fc out 2, pow/tanh promoted to fp32 (tanh 4, 1+tanh 4), 0.5x 2, cast 2.
    hCoef = fp32 ? 38 : amp ? 24 : 20;
    fCoef = fp32 ? 20 : amp ? 14 : 10;
    if (!m.dropout) hCoef -= 2;
  } else {
    // fp32: RMSNorm input + normalised output 2 x 8, q after RoPE 4, repeated k and v 8, attention out 4, merged 4;
    //       MLP: gate, up, SiLU out, product: 4 x 4 bytes per intermediate element.
    // 16-bit: RMSNorm computes in fp32 (input 4, normalised 4, bf16 cast 2, twice), attention 5 x 2; MLP 4 x 2.
    // (Hugging Face repeats K and V to every head before SDPA, so keys and values cost as much as queries.)
    hCoef = fp32 ? 16 + 4 + 8 + 8 : 20 + 10;
    fCoef = fp32 ? 16 : 8;
  }
  const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  return { perToken: hCoef * m.hidden + fCoef * f, hCoef, fCoef };
}

/** The measured correction of the tensor count (see the module comment). */
export function pytorchCorrection(precision: Precision): number {
  return precision === 'fp32' ? 1.04 : 1.1;
}

/**
 * Korthikanti et al. 2022, activation memory of one transformer layer in bytes (16-bit activations).
 * s sequence, b micro-batch, h hidden, a heads, t tensor-parallel size.
 */
export function korthikantiLayerBytes(s: number, b: number, h: number, a: number, t: number, sp: boolean, recompute: Recompute): number {
  const sbh = s * b * h;
  if (recompute === 'full') return 2 * sbh;
  const attn = recompute === 'selective' ? 0 : (5 * a * s) / (h * t);
  if (sp) return sbh * (34 / t + attn);
  if (t === 1) return sbh * (34 + attn);
  return sbh * (10 + 24 / t + attn);
}

/** Checks the parallel layout against the model; throws naming the field and the constraint. */
export function checkParallel(m: ModelConfig, p: Parallelism): void {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  if (m.heads % p.tp !== 0) fail(`--tp ${p.tp} does not divide the ${m.heads} attention heads`);
  if (m.kvHeads % p.tp !== 0 && p.tp % m.kvHeads !== 0) fail(`--tp ${p.tp} and the ${m.kvHeads} key/value heads do not divide one another`);
  if (m.layers % p.pp !== 0) fail(`--pp ${p.pp} does not divide the ${m.layers} layers`);
  if (p.gpus % p.nodes !== 0) fail(`--gpus ${p.gpus} is not divisible by --nodes ${p.nodes}`);
  if (p.gpus % (p.tp * p.pp) !== 0) fail(`--gpus ${p.gpus} is not divisible by --tp x --pp = ${p.tp * p.pp}`);
  if (p.sp && p.tp === 1) fail('--sp (sequence parallelism) needs --tp above 1');
  if (p.ep > 1) {
    if (!m.moe) fail(`--ep ${p.ep}: the model has no experts`);
    else if (m.moe.experts % p.ep !== 0) fail(`--ep ${p.ep} does not divide the ${m.moe.experts} experts`);
    if ((p.gpus / (p.tp * p.pp)) % p.ep !== 0) fail(`--ep ${p.ep} does not divide the data-parallel size ${p.gpus / (p.tp * p.pp)}`);
  }
}

/** Parameters held by the most-loaded GPU before ZeRO shards them: a pipeline stage's layers over TP and EP. */
function localParams(c: ParamCounts, m: ModelConfig, p: Parallelism): number {
  const perStage = m.layers / p.pp;
  const denseShare = Math.min(c.denseLayers, perStage);
  const moeShare = perStage - denseShare;
  const expertParams = m.moe ? (m.moe.experts * c.expert) / p.ep : 0;
  const moeNonExpert = c.moeLayer - (m.moe ? m.moe.experts * c.expert : 0);
  const layers = (denseShare * c.denseLayer + moeShare * moeNonExpert) / p.tp + (moeShare * expertParams) / p.tp;
  const ends = p.pp === 1 ? c.embedding + c.lmHead + c.finalNorm : Math.max(c.embedding, c.lmHead + c.finalNorm);
  return layers + ends / p.tp;
}

/** True when the most-loaded GPU holds the output layer (and so the loss). */
function isLastStageOf(c: ParamCounts, p: Parallelism): boolean {
  return p.pp === 1 || c.lmHead + c.finalNorm >= c.embedding;
}

/** Overhead lines: context, communication buffers, fragmentation allowance. */
function overheads(o: PlanOptions, localParamsCount: number, weightBytesPer: number, largestLayerParams: number, peak: number): Line[] {
  const lines: Line[] = [{ name: 'CUDA/HIP context and library workspaces', bytes: 512 * MiB, note: 'estimate: driver context, cuBLAS/hipBLASLt and NCCL/RCCL init; read yours as total - free at start (gpumem info)' }];
  if (o.parallel.gpus > 1) {
    let comm = 256 * MiB;
    let note = 'NCCL/RCCL buffers';
    if (o.mode === 'train') {
      if (o.parallel.zero >= 3) {
        comm += 2 * largestLayerParams * weightBytesPer;
        note += ' + all-gather of the two largest layers in flight (ZeRO-3/FSDP prefetch)';
      } else {
        comm += 2 * 25 * MiB;
        note += ' + two 25 MiB gradient buckets (DDP)';
      }
    }
    lines.push({ name: 'communication buffers', bytes: comm, note });
  }
  const frag = Math.round(peak * o.fragmentation);
  lines.push({ name: 'fragmentation allowance', bytes: frag, note: `${Math.round(o.fragmentation * 100)}% of the estimate for the caching allocator's split blocks (gpumem pool replay measures yours)` });
  void localParamsCount;
  return lines;
}

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
    lines.push({ name: 'activations (Korthikanti et al. 2022)', bytes: layerActs, note: `per layer ${per} bytes (s=${o.seq}, b=${o.batch}, h=${m.hidden}, a=${m.heads}, t=${p.tp}${p.sp ? ', sequence parallel' : ''}, recompute ${o.recompute}) x ${layersHere} layers x ${inFlight} micro-batches in flight` });
  } else {
    const count = pytorchLayerBytesPerToken(m, o.precision);
    const perLayer = (count.perToken * pytorchCorrection(o.precision) * tokens) / p.tp;
    const scoreBytes = o.precision === 'fp32' ? 4 : 2;
    attnScores = o.flashAttention || o.recompute !== 'none' ? 0 : ((m.dropout ? 2 * scoreBytes + 1 : scoreBytes) * o.batch * (m.heads / p.tp) * o.seq * o.seq);
    if (o.recompute === 'full') {
      const inputs = (m.hidden * (o.precision === 'bf16' || o.precision === 'fp8' ? 2 : 4) * tokens) / p.tp;
      layerActs = (inputs * layersHere + perLayer) * inFlight;
      lines.push({ name: 'activations: layer inputs (full recomputation)', bytes: layerActs, note: `${layersHere} layer inputs kept, one layer's activations recomputed at a time` });
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
  if (logits) lines.push({ name: 'loss: fp32 log-probabilities', bytes: logits, note: `4 bytes x ${m.vocab} vocabulary x ${tokens} tokens${p.tp > 1 ? ` / tp ${p.tp}` : ''}` });
  // Every matmul weight: all but the embeddings (a tied output layer is a matmul on the embedding, so it counts).
  const matmulParams = P - c.embedding / p.tp + (m.tiedEmbeddings && isLastStageOf(c, p) ? (m.vocab * m.hidden) / p.tp : 0);
  const autocastCache = o.precision === 'amp-bf16' ? 2 * matmulParams : 0;
  if (autocastCache) lines.push({ name: 'autocast bf16 copies of the weights', bytes: autocastCache, note: 'torch.autocast caches a bf16 copy of each matmul weight for the step' });
  const activationsBytes = layerActs + logits + autocastCache;
  const backwardTransient = isLastStage ? 2 * logitsBytes : 0;
  const heldGrads = o.gradAccum > 1 ? gradientsBytes : 0;
  const backwardPeak = parametersBytes + optimizerBytes + heldGrads + activationsBytes + backwardTransient;
  const optimizerTemp = onGpuOptimizer && !o.fusedOptimizer && o.optimizer !== 'sgd' ? (P * 4) / shard(1) + c.largestTensor * 4 / p.tp : 0;
  const optimizerPeak = parametersBytes + gradientsBytes + optimizerBytes + optimizerTemp;
  const peak = Math.max(backwardPeak, optimizerPeak);
  const phase = backwardPeak >= optimizerPeak ? 'backward' : 'optimizer-step';
  lines.unshift(
    { name: 'parameters', bytes: parametersBytes, note: `${fmtCount(P)} parameters here x ${b.weights} bytes${p.zero >= 3 ? ` / ${dp} (ZeRO-3)` : ''}${onGpuParams ? '' : ' (offloaded to host)'}` },
    { name: 'gradients', bytes: gradientsBytes, note: `x ${b.grads} bytes${p.zero >= 2 ? ` / ${dp} (ZeRO-2)` : ''}${o.gradAccum > 1 ? `, held through ${o.gradAccum} accumulated micro-batches` : ', held from the backward pass to the optimizer step'}` },
    {
      name: `optimizer states (${o.optimizer}${b.master ? ', fp32 master weights' : ''})`,
      bytes: optimizerBytes,
      note: `x ${b.optimizer} bytes${p.zero >= 1 ? ` / ${dp} (ZeRO-1)` : ''}${onGpuOptimizer ? '' : ' (offloaded to pinned host memory)'}`,
    },
  );
  if (backwardTransient) lines.push({ name: 'backward transient: gradient of the logits', bytes: backwardTransient, note: 'two fp32 logit-sized tensors at the start of the backward pass' });
  if (optimizerTemp) lines.push({ name: 'optimizer step temporaries', bytes: optimizerTemp, note: 'foreach AdamW: a parameter-sized fp32 temporary plus the largest tensor (fused: none)' });
  const weightsPer = b.weights;
  const largestLayer = Math.max(c.denseLayer, c.moeLayer) / p.tp;
  const over = overheads(o, P, weightsPer, largestLayer, peak);
  const overheadBytes = over.reduce((a, l) => a + l.bytes, 0);
  lines.push(...over);
  const hostOptimizerBytes = onGpuOptimizer ? 0 : optimizerStates;
  const hostParametersBytes = onGpuParams ? 0 : states.parameters;
  const hostBytes = hostOptimizerBytes + hostParametersBytes;
  const offloadBytesPerStep = o.offload === 'none' ? 0 : o.offload === 'optimizer' ? (P * (b.grads + b.weights)) / shard(1) : (P * (b.grads + 3 * b.weights)) / shard(1);
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

/** The inference estimate for the most-loaded GPU. */
export function estimateInfer(m: ModelConfig, o: InferOptions): Estimate {
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const P = localParams(c, m, p);
  const wb = weightBytes(o.weights);
  const parametersBytes = P * wb;
  const ctx = o.prompt + o.newTokens;
  const cached = Math.min(ctx, m.slidingWindow ?? ctx);
  const blocks = o.blockSize ? Math.ceil(cached / o.blockSize) * o.blockSize : cached;
  const kvPerToken = kvBytesPerTokenPerLayer(m, kvBytes(o.kvDtype));
  const kvSplit = m.mla ? 1 : Math.min(p.tp, m.kvHeads);
  const layersHere = m.layers / p.pp;
  const kvCacheBytes = (kvPerToken * layersHere * o.batch * blocks) / kvSplit;
  const e = o.weights === 'fp32' ? 4 : 2;
  const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  const kvAt = (tokens: number): number => {
    const t = Math.min(tokens, m.slidingWindow ?? tokens);
    return (kvPerToken * layersHere * o.batch * (o.blockSize ? Math.ceil(t / o.blockSize) * o.blockSize : t)) / kvSplit;
  };
  // Hugging Face repeats keys and values to every head for the attention call: one layer at a time.
  const repeatKv = (tokens: number): number => (m.kvHeads < m.heads && !m.mla ? (2 * o.batch * tokens * m.heads * m.headDim * e) / p.tp : 0);
  const logits = o.batch * m.vocab * 4;
  // Prefill: hidden and MLP buffers for every prompt token, the prompt's attention matrix without a fused kernel.
  const prefillTokens = o.batch * o.prompt;
  const prefillWork = (prefillTokens * (4 * m.hidden + 3 * f) * e) / p.tp + repeatKv(o.prompt) + (o.flashAttention ? 0 : o.batch * (m.heads / p.tp) * o.prompt * o.prompt * 4) + logits;
  const prefillPeak = kvAt(o.prompt) + prefillWork;
  // Last decode step: the whole cache, plus one layer's cache being copied as it grows (a contiguous cache grows by
  // concatenation; a paged cache does not), repeated heads and the logits.
  const growth = o.blockSize ? 0 : kvAt(ctx) / layersHere;
  const decodeWork = growth + repeatKv(ctx) + logits;
  const decodePeak = kvCacheBytes + decodeWork;
  const atDecode = decodePeak >= prefillPeak;
  const workspace = atDecode ? decodeWork : prefillWork;
  const kvHeld = atDecode ? kvCacheBytes : kvAt(o.prompt);
  const lines: Line[] = [
    { name: `weights (${o.weights})`, bytes: parametersBytes, note: `${fmtCount(P)} parameters here x ${wb.toFixed(3)} bytes` },
    {
      name: atDecode ? `KV cache (${o.kvDtype})` : `KV cache (${o.kvDtype}) during prefill: the prompt only`,
      bytes: kvHeld,
      note: `${kvPerToken} bytes per token per layer${m.mla ? ' (MLA latent)' : ''} x ${layersHere} layers x ${o.batch} sequences x ${atDecode ? blocks : o.prompt} tokens${m.slidingWindow && ctx > m.slidingWindow ? ` (sliding window ${m.slidingWindow})` : ''}${o.blockSize ? ` (rounded to ${o.blockSize}-token blocks)` : ''}${kvSplit > 1 ? ` / ${kvSplit} (tensor parallel)` : ''}`,
    },
    atDecode
      ? { name: 'decode workspace', bytes: workspace, note: `at the last step: ${growth ? "one layer's cache copied as it grows, " : ''}${repeatKv(ctx) ? 'keys and values repeated to every head for one layer, ' : ''}fp32 logits` }
      : { name: 'prefill workspace', bytes: workspace, note: `hidden and MLP buffers for ${prefillTokens} prompt tokens${o.flashAttention ? '' : ', the prompt attention matrix (math kernel)'}, fp32 logits` },
  ];
  // The JSON's kvCacheBytes is the cache at full context (what it reaches); the lines follow the peak's moment.
  const kvReported = kvCacheBytes;
  void kvHeld;
  const peak = parametersBytes + Math.max(decodePeak, prefillPeak);
  const over = overheads(o, P, wb, Math.max(c.denseLayer, c.moeLayer) / p.tp, peak);
  const overheadBytes = over.reduce((a, l) => a + l.bytes, 0);
  lines.push(...over);
  return {
    parametersBytes,
    gradientsBytes: 0,
    optimizerBytes: 0,
    activationsBytes: workspace,
    kvCacheBytes: kvReported,
    overheadBytes,
    totalBytes: Math.round(peak + overheadBytes),
    sumBytes: Math.round(peak + overheadBytes),
    peakPhase: 'inference',
    hostBytes: 0,
    hostParametersBytes: 0,
    hostOptimizerBytes: 0,
    offloadBytesPerStep: 0,
    lines,
    params: c,
    localParams: P,
  };
}

export function estimate(m: ModelConfig, o: PlanOptions): Estimate {
  return o.mode === 'train' ? estimateTrain(m, o) : estimateInfer(m, o);
}

export function fmtCount(n: number): string {
  if (n >= 1e12) return `${(n / 1e12).toFixed(2)}T`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  return String(Math.round(n));
}

export { GiB };
