/**
 * The model states of a training step on the most-loaded GPU, as lines: parameters (a frozen base and adapters
 * under LoRA), gradients, optimizer states, the optimizer step's temporaries; with ZeRO / FSDP sharding, FSDP2's
 * root unit and its unsharded gradients under accumulation, paged and 8-bit optimizers, offloading.
 */
import { formatCount } from '../units.js';
import { isLitgpt, litgptDequantised, quantisesOutput } from './litgpt.js';
import { adapterBytes, adapterParams, linearModules, outputAdapted, quantisableParams, quantisedBase, quantisedBytesPerWeight } from './adapters.js';
import type { ModelConfig } from './model-config.js';
import { bytesPerParam, fsdpMixedPrecision, isLastStageOf, localParams, modelStateBytes, optimizerStateBytes, pagedOptimizer } from './model-states.js';
import type { Line, TrainOptions } from './options.js';
import type { ParamCounts } from './params.js';

export interface TrainStates {
  /** Parameters held on this GPU before ZeRO shards them (the frozen base included). */
  P: number;
  /** Trainable parameters on this GPU (all of P, or the adapters). */
  trainable: number;
  /** Bytes of one trainable parameter's gradient, and the largest trainable tensor (parameters). */
  gradBytesPerParam: number;
  largestTrainable: number;
  /** Bytes per parameter of the weights the layers compute with (for FSDP's all-gathers and the autocast cache). */
  weightBytes: number;
  parameters: Line[];
  gradients: (why: string) => Line;
  gradientsBytes: number;
  optimizer: Line;
  /** The foreach step's parameter-sized temporaries (0 for fused, 8-bit, SGD, Megatron, offloaded or in-backward steps). */
  stepTemporaries: Line | undefined;
  /** A transient of the backward pass: bitsandbytes' dequantised weight of the largest quantised layer. */
  dequantised: Line | undefined;
  hostParametersBytes: number;
  hostOptimizerBytes: number;
  offloadBytesPerStep: number;
  /** The model states' bytes on this GPU (parameters, gradients, optimizer). */
  modelStates: { parametersBytes: number; gradientsBytes: number; optimizerBytes: number };
}

/** The model states of `o` for `m` on the most-loaded GPU. */
export function trainStates(m: ModelConfig, c: ParamCounts, o: TrainOptions): TrainStates {
  const p = o.parallel;
  const P = localParams(c, m, p);
  const dp = p.gpus / (p.tp * p.pp);
  const shard = (stage: number): number => (p.zero >= stage ? dp : 1);
  const megatron = o.framework === 'megatron';
  const layerShare = m.layers / p.pp / m.layers / p.tp;
  const onGpuOptimizer = o.offload === 'none';
  const onGpuParams = o.offload !== 'params';
  const paged = pagedOptimizer(o.optimizer);
  const lora = o.lora;
  let parameters: Line[];
  let trainable: number;
  let weightBytes: number;
  let grads: number; // bytes per trainable parameter
  let optimizerBytes: number; // bytes of optimizer states before sharding
  let optimizerNote: string;
  let stepBytes: number;
  let paramBytes: number;
  if (lora) {
    const ab = adapterBytes(lora.dtype ?? 'fp32');
    trainable = adapterParams(m, c, lora) * layerShare;
    const quantised = quantisedBase(lora.base);
    // LitGPT: Lightning quantises the output layer too (litgpt.ts)
    const Q = quantised ? quantisableParams(m, c) * layerShare + (quantisesOutput(o) && isLastStageOf(c, p) ? (m.vocab * m.hidden) / p.tp : 0) : 0;
    // a quantised model's other parameters (embeddings, norms, the output layer) stay as loaded, in 16 bits: that is
    // what from_pretrained with a BitsAndBytesConfig, torchtune and LitGPT do. PEFT's prepare_model_for_kbit_training
    // (which TRL's SFTTrainer runs, a plain Transformers + PEFT script does not) would cast them to fp32.
    const rest = quantised ? 2 : quantisedBytesPerWeight(lora.base, false, 1);
    const q = quantised ? quantisedBytesPerWeight(lora.base, lora.doubleQuant, m.hidden) : 0;
    const baseBytes = Q * q + (P - Q) * rest;
    weightBytes = quantised ? 2 : rest;
    paramBytes = baseBytes + trainable * ab;
    parameters = [
      {
        name: `parameters: frozen base (${lora.base}${lora.doubleQuant ? ', double quantisation' : ''})`,
        bytes: onGpuParams ? baseBytes / shard(3) : 0,
        note: quantised
          ? `${formatCount(Q)} quantised weights x ${q.toFixed(4)} bytes (${lora.base === 'int8' ? 'int8 and an fp32 scale per row' : `4-bit, absmax per 64${lora.doubleQuant ? ' in 8 bits, fp32 per 256 blocks' : ' in fp32'}`}) + ${formatCount(P - Q)} others x 2 bytes (as loaded; TRL's prepare_model_for_kbit_training would make them fp32)${p.zero >= 3 ? ` / ${dp}` : ''}`
          : `${formatCount(P)} parameters x ${rest} bytes, frozen${p.zero >= 3 ? ` / ${dp}` : ''}`,
        field: 'parametersBytes',
      },
      {
        name: `parameters: adapters (LoRA r=${lora.rank}${lora.dora ? ', DoRA' : ''}, ${lora.dtype ?? 'fp32'})`,
        bytes: (trainable * ab) / shard(3),
        note: `${formatCount(trainable)} trainable parameters x ${ab} bytes`,
        field: 'parametersBytes',
      },
    ];
    grads = ab;
    optimizerBytes = trainable * optimizerStateBytes(o.optimizer, ab);
    optimizerNote = `${formatCount(trainable)} adapter parameters x ${optimizerStateBytes(o.optimizer, ab).toFixed(2)} bytes`;
    stepBytes = ab;
  } else {
    const b = megatron ? { weights: 2, grads: 4, optimizer: o.optimizer === 'sgd' ? 8 : 12, master: 4 } : bytesPerParam(o.precision, o.optimizer);
    trainable = P;
    weightBytes = b.weights;
    paramBytes = P * b.weights;
    parameters = [
      {
        name: 'parameters',
        bytes: onGpuParams ? paramBytes / shard(3) : 0,
        note: `${formatCount(P)} parameters here x ${b.weights} bytes${p.zero >= 3 ? ` / ${dp} (ZeRO-3)` : ''}${onGpuParams ? '' : ' (offloaded to host)'}`,
        field: 'parametersBytes',
      },
    ];
    grads = b.grads;
    optimizerBytes = megatron ? P * b.optimizer : modelStateBytes(P, o.precision, o.optimizer, 1, 0).optimizer;
    optimizerNote = `x ${b.optimizer.toFixed(2)} bytes${b.master ? ' (fp32 master weights included)' : ''}`;
    stepBytes = b.master || o.precision === 'fp32' || o.precision === 'amp-bf16' ? 4 : 2;
  }
  if (p.zero >= 3 && !megatron && onGpuParams) {
    // FSDP2 (torchtitan, torchtune) keeps the root unit, the embeddings and the output layer, gathered for the step:
    // unsharded tensors of their own beside the shards, in bf16 under its mixed precision
    const root = ((c.embedding + c.lmHead + c.finalNorm) / p.tp) * (fsdpMixedPrecision(o) ? 2 : weightBytes);
    if (root > 0)
      parameters.push({
        name: 'parameters: root unit gathered (FSDP)',
        bytes: root,
        note: 'the embeddings and the output layer are all-gathered once and held for the whole step',
        field: 'parametersBytes',
      });
  }
  // FSDP2 with gradient accumulation holds unsharded gradients between micro-batches (no reduce-scatter until the last)
  const unsharded = p.zero >= 3 && !megatron && o.gradAccum > 1;
  const gradientsBytes = (trainable * grads) / (unsharded ? 1 : shard(2));
  const optimizerLine: Line = {
    name: `optimizer states (${o.optimizer}${paged ? ', paged: CUDA managed memory' : ''})`,
    bytes: onGpuOptimizer ? optimizerBytes / shard(1) : 0,
    note: `${optimizerNote}${p.zero >= 1 ? ` / ${dp} (${megatron ? "Megatron's distributed optimizer" : 'ZeRO-1'})` : ''}${onGpuOptimizer ? '' : ' (offloaded to pinned host memory)'}${paged ? "; outside PyTorch's allocator, paged to host memory when the GPU runs short" : ''}`,
    field: 'optimizerBytes',
    ...(paged ? { outsideAllocator: true } : {}),
  };
  const eightBit = o.optimizer.includes('8bit');
  const foreach = onGpuOptimizer && !o.fusedOptimizer && !megatron && o.optimizer !== 'sgd' && !eightBit && !o.optimizerInBackward;
  const largestTrainable = lora
    ? Math.max(...linearModules(m).map((l) => lora.rank * Math.max(l.in, l.out)), outputAdapted(m, lora) ? lora.rank * m.vocab : 0)
    : c.largestTensor;
  const temp = foreach ? (trainable * stepBytes) / shard(1) + (largestTrainable * stepBytes) / p.tp : 0;
  const quantLayer = lora && quantisedBase(lora.base) ? Math.max(...linearModules(m).map((l) => l.in * l.out)) / p.tp : 0;
  const offloadBytesPerStep =
    o.offload === 'none' ? 0 : o.offload === 'optimizer' ? (trainable * (grads + weightBytes)) / shard(1) : (trainable * grads + 3 * paramBytes) / shard(1);
  return {
    P,
    trainable,
    gradBytesPerParam: grads,
    largestTrainable,
    weightBytes,
    parameters,
    gradients: (why) => ({
      name: 'gradients',
      bytes: gradientsBytes,
      note: `${formatCount(trainable)} trainable x ${grads} bytes${megatron ? ' (fp32 main gradients)' : ''}${unsharded ? ', unsharded (FSDP2 accumulates without reduce-scatter)' : p.zero >= 2 ? ` / ${dp} (ZeRO-2)` : ''}, ${why}`,
      field: 'gradientsBytes',
    }),
    gradientsBytes,
    optimizer: optimizerLine,
    stepTemporaries: temp
      ? {
          name: 'optimizer step temporaries',
          bytes: temp,
          note: `foreach ${o.optimizer}: a ${stepBytes === 4 ? 'fp32' : '16-bit'} temporary the size of the trainable parameters plus the largest tensor (fused, 8-bit: none)`,
          field: 'optimizerTemporariesBytes',
        }
      : undefined,
    dequantised: isLitgpt(o)
      ? litgptDequantised(m, o)
      : quantLayer
        ? {
            name: 'bitsandbytes: a dequantised weight',
            bytes: quantLayer * 2,
            note: 'the largest quantised layer dequantised to 16 bits for its matmul (forward and backward), one at a time',
            field: 'workspaceBytes',
          }
        : undefined,
    hostParametersBytes: onGpuParams ? 0 : paramBytes / shard(3),
    hostOptimizerBytes: onGpuOptimizer ? 0 : optimizerBytes / shard(1),
    offloadBytesPerStep,
    modelStates: {
      parametersBytes: parameters.reduce((s, l) => s + l.bytes, 0),
      gradientsBytes,
      optimizerBytes: optimizerLine.bytes,
    },
  };
}
