/**
 * The model states' layout every strategy shares: bytes per parameter by precision (precision.ts), a frozen base and
 * its adapters under LoRA, each state sharded over the data-parallel GPUs where the strategy shards it (ZeRO's stages:
 * optimizer states, then gradients, then parameters; Rajbhandari et al. 2020), offloading to pinned host memory,
 * paged states in CUDA managed memory.
 */
import { formatCount } from '../../units.js';
import type { ParamTensor } from '../program/params-table.js';
import { tensorsOf, trainableParams } from '../program/params-table.js';
import {
  adapterBytes,
  baseBytesPerWeight,
  eightBitOptimizer,
  optimizerStateBytes,
  pagedOptimizer,
  quantisedBase,
  type StateBytes,
  stateBytes,
} from '../precision.js';
import type { LayoutInput, StateLayout } from './types.js';

/** Which states a strategy shards over the data-parallel GPUs, and its own bytes per parameter if it has them. */
export interface Sharded {
  params: boolean;
  grads: boolean;
  states: boolean;
  /** Bytes per parameter of full fine-tuning (default: precision.ts for PyTorch). */
  bytes?: StateBytes | undefined;
  /** The optimizer step is fused (Megatron's fused Adam): no foreach temporaries. */
  fusedStep?: boolean | undefined;
  /** Bytes per value the blocks read weights in (FSDP's mixed precision gathers bf16). */
  gatheredBytes?: number | undefined;
  /** What the optimizer line says the sharding is. */
  stateName?: string | undefined;
}

/** The layout of `input`'s run under `sharded`. */
export function stateLayout(input: LayoutInput, sharded: Sharded): StateLayout {
  const { o, table, dp } = input;
  const lora = o.lora;
  const by = (on: boolean): number => (on ? dp : 1);
  const onGpuParams = o.offload !== 'params';
  const onGpuStates = o.offload === 'none';
  const paged = pagedOptimizer(o.optimizer);
  const full = sharded.bytes ?? stateBytes(o.precision, o.optimizer);
  const ab = lora ? adapterBytes(lora) : 0;
  const quantised = quantisedBase(lora);
  const weightOf = (t: ParamTensor): number => {
    if (!lora) return full.weights;
    if (t.adapter) return ab;
    if (t.quantised) return baseBytesPerWeight(lora, t.inFeatures);
    return quantised ? 2 : baseBytesPerWeight(lora, 1);
  };
  const gradOf = lora ? ab : full.grads;
  const stateOf = lora ? optimizerStateBytes(o.optimizer, ab) : full.optimizer;
  const stepOf = lora ? ab : full.step;
  const foreach = onGpuStates && !o.fusedOptimizer && !sharded.fusedStep && o.optimizer !== 'sgd' && !eightBitOptimizer(o.optimizer) && !o.optimizerInBackward;
  const trainable = trainableParams(table);
  const paramBytes = tensorsOf(table).reduce((s, { t, count }) => s + t.numel * count * weightOf(t), 0);
  const optimizerBytes = trainable * stateOf;
  const notes = layoutNotes(input, sharded, { weightOf, gradOf, stateOf, trainable, paged, onGpuStates });
  return {
    paramBytes: (t) => (onGpuParams ? (t.numel * weightOf(t)) / by(sharded.params) : 0),
    stateBytes: (t) => (onGpuStates && t.trains ? (t.numel * stateOf) / by(sharded.states) : 0),
    statesPerParam: o.optimizer === 'sgd' ? 1 : 2,
    stepBytes: (t) => (foreach && t.trains ? (t.numel * stepOf) / by(sharded.states) : 0),
    foreach,
    weightBytes: sharded.gatheredBytes ?? (lora ? (quantised ? 2 : baseBytesPerWeight(lora, 1)) : full.weights),
    gradBytes: sharded.gatheredBytes ?? gradOf,
    keptGradBytes: gradOf,
    hostParamBytes: onGpuParams ? 0 : paramBytes / by(sharded.params),
    hostStateBytes: onGpuStates ? 0 : optimizerBytes / by(sharded.states),
    offloadBytesPerStep:
      o.offload === 'none'
        ? 0
        : o.offload === 'optimizer'
          ? (trainable * (gradOf + full.weights)) / by(sharded.states)
          : (trainable * gradOf + 3 * paramBytes) / by(sharded.states),
    notes,
  };
}

interface Per {
  weightOf: (t: ParamTensor) => number;
  gradOf: number;
  stateOf: number;
  trainable: number;
  paged: boolean;
  onGpuStates: boolean;
}

/** The parameter and optimizer lines' names and notes. */
function layoutNotes(input: LayoutInput, sharded: Sharded, p: Per): Map<string, string> {
  const { o, table, dp } = input;
  const lora = o.lora;
  const notes = new Map<string, string>();
  const shard = (on: boolean, what: string): string => (on && dp > 1 ? ` / ${dp} (${what})` : '');
  const all = tensorsOf(table);
  const base = all.filter(({ t }) => !t.adapter);
  const n = base.reduce((s, { t, count }) => s + t.numel * count, 0);
  if (lora) {
    const q = base.filter(({ t }) => t.quantised).reduce((s, { t, count }) => s + t.numel * count, 0);
    notes.set('parameters:name', `parameters: frozen base (${lora.base}${lora.doubleQuant ? ', double quantisation' : ''})`);
    notes.set(
      'parameters',
      q > 0
        ? `${formatCount(q)} quantised weights (${lora.base === 'int8' ? 'int8 and an fp32 scale per row' : `4-bit, absmax per 64${lora.doubleQuant ? ' in 8 bits, fp32 per 256 blocks' : ' in fp32'}`}) + ${formatCount(n - q)} others x 2 bytes (as loaded; TRL's prepare_model_for_kbit_training would make them fp32)${shard(sharded.params, 'sharded')}`
        : `${formatCount(n)} parameters x ${baseBytesPerWeight(lora, 1)} bytes, frozen${shard(sharded.params, 'sharded')}`,
    );
    notes.set('adapters:name', `parameters: adapters (LoRA r=${lora.rank}${lora.dora ? ', DoRA' : ''}, ${lora.dtype ?? 'fp32'})`);
    notes.set('adapters', `${formatCount(p.trainable)} trainable parameters x ${adapterBytes(lora)} bytes`);
  } else {
    const w = p.weightOf(base[0]?.t ?? ({} as ParamTensor));
    notes.set(
      'parameters',
      `${formatCount(n)} parameters here x ${w} bytes${shard(sharded.params, sharded.stateName ?? 'ZeRO-3')}${o.offload === 'params' ? ' (offloaded to host)' : ''}`,
    );
  }
  notes.set(
    'optimizer',
    `${formatCount(p.trainable)} trainable parameters x ${p.stateOf.toFixed(2)} bytes${!lora && (sharded.bytes?.master ?? stateBytes(o.precision, o.optimizer).master) ? ' (fp32 master weights included)' : ''}${shard(sharded.states, sharded.stateName ?? 'ZeRO-1')}${p.onGpuStates ? '' : ' (offloaded to pinned host memory)'}${p.paged ? "; outside PyTorch's allocator, paged to host memory when the GPU runs short" : ''}`,
  );
  return notes;
}
