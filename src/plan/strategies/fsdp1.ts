/**
 * FSDP1 (torch.distributed.fsdp.FullyShardedDataParallel) as HF Trainer / accelerate's FSDP plugin and LitGPT's
 * FSDPStrategy wrap a transformer: one FlatParameter per block and a root unit (embeddings, final norm, output layer);
 * FULL_SHARD shards parameters, gradients and optimizer states over the data-parallel GPUs. Read in
 * torch/distributed/fsdp/_runtime_utils.py and _flat_param.py (docs/plan-training.md, "Distributed strategies"):
 *
 * - a unit is all-gathered into one flat buffer (`_full_param_padded`) on FSDP's unshard stream, under mixed precision
 *   from a low-precision copy of the shard (`_mp_shard`, on the pre-unshard stream); freed after its forward pass,
 *   but for the root, which `_post_forward_reshard` keeps for the backward pass; gathered again for each block's
 *   backward pass;
 * - the gradient arrives unsharded in the parameter's dtype, is cast to the reduce dtype where they differ (accelerate's
 *   bf16 policy reduces in bf16: no copy), reduce-scattered into a new shard on the post-backward stream, and cast to
 *   the parameter's dtype where that differs (an fp32 copy of the shard for fp32 parameters);
 * - with gradient accumulation, `no_sync` (HF Trainer, LitGPT's `fabric.no_backward_sync`) keeps every unit's
 *   unsharded gradient between micro-batches;
 * - under `use_orig_params=True` (Lightning's FSDPStrategy sets it) a FlatParameter may mix frozen and trainable
 *   tensors, and it requires grad as soon as one of them does (_flat_param.py,
 *   FlatParamHandle._reset_flat_param_grad_info_if_needed: "As long as one parameter requires gradient, then the flat
 *   parameter must require gradient"). The forward pass runs on views of it (_use_unsharded_views), so every view
 *   requires grad: autograd makes the frozen weights' gradients as well, each frozen linear layer keeps its input for
 *   them, and the unit's gradient is the whole unit's, unsharded through no_sync and reduce-scattered whole. The FSDP
 *   docs (FullyShardedDataParallel, "use_orig_params") say as much: "the gradient memory usage will be higher than
 *   expected (namely, equivalent to not freezing those parameters)". The optimizer still steps the trainable ones
 *   only. A LoRA block under LitGPT's FSDPStrategy (auto_wrap_policy={Block}) is such a unit.
 */
import { formatCount } from '../../units.js';
import type { LoraOptions, Precision } from '../options.js';
import { basePrecision, quantisedBase } from '../precision.js';
import type { StepSetup } from '../program/step-setup.js';
import type { H, Mem } from '../program/mem.js';
import { commLines } from './comm.js';
import { stateLayout } from './layout.js';
import type { Sharding } from './types.js';

/** FSDP1's streams (fsdp/_init_utils.py _init_streams): blocks freed on one are not reused by another. */
const UNSHARD_STREAM = 3;
const PRE_UNSHARD_STREAM = 4;
const POST_BACKWARD_STREAM = 5;

const unitNumel = (s: StepSetup, moe: boolean): number => (moe ? s.table.moe : s.table.dense).tensors.reduce((a, t) => a + t.numel, 0);
/**
 * accelerate's bf16 policy: param_dtype = reduce_dtype = bf16 over fp32 parameters (amp-bf16), for every
 * FlatParameter, a frozen base's under adapters as well (huggingface/accelerate src/accelerate/utils/dataclasses.py,
 * FullyShardedDataParallelPlugin.set_mixed_precision: MixedPrecision(param_dtype, reduce_dtype, buffer_dtype) from
 * the Accelerator's mixed_precision). A bitsandbytes base keeps its packed storage (Params4bit is not cast).
 */
const mixed = (o: { precision: Precision; lora?: Pick<LoraOptions, 'base'> | undefined }): boolean =>
  basePrecision(o.precision) === 'amp-bf16' && !quantisedBase(o.lora);

/** One unit's flat parameter gathered: a low-precision copy of the shard first under mixed precision. */
function gatherFlat(mem: Mem, s: StepSetup, numel: number, tagName: string): H[] {
  const b = s.layout.weightBytes;
  const low = mixed(s.o) ? mem.alloc((numel * b) / s.dp, s.tags.transient, PRE_UNSHARD_STREAM) : 0;
  const flat = mem.alloc(
    numel * b,
    s.tags.line(tagName, 'parametersBytes', (bytes) => `the unit's FlatParameter all-gathered: ${formatCount(Math.round(bytes))} bytes`),
    UNSHARD_STREAM,
  );
  mem.free(low);
  return [flat];
}

/**
 * A unit's gradients as FSDP1 makes them: autograd collects its views' gradients (`sink`) and forms the
 * FlatParameter's gradient whole (a unit-sized tensor in the parameter's dtype) once all of them are in; before the
 * last micro-batch (no_sync) it is added into the unsharded gradient kept from the micro-batches before; on the last,
 * it is cast to the reduce dtype where that differs, reduce-scattered into a new shard on the post-backward stream and
 * cast to the parameter's dtype where that differs; the shard is kept as `key` (or added into it).
 */
function reduceUnit(mem: Mem, s: StepSetup, sink: H[], numel: number, key: string, grads: Map<string, H>, sync: boolean): void {
  const gradBytes = s.layout.gradBytes;
  const flat = mem.alloc(numel * gradBytes, s.tags.grads);
  mem.free(...sink);
  sink.length = 0;
  const held = grads.get(`${key}.unsharded`);
  if (!sync) {
    if (held) mem.free(flat);
    else {
      mem.retag(flat, s.o.lora && s.x.full ? frozenGradsTag(s) : s.tags.block.paramGrads);
      grads.set(`${key}.unsharded`, flat);
    }
    return;
  }
  if (held) {
    mem.free(held);
    grads.delete(`${key}.unsharded`);
  }
  const reduceBytes = s.layout.weightBytes;
  const cast = gradBytes !== reduceBytes ? mem.alloc(numel * reduceBytes, s.tags.grads, POST_BACKWARD_STREAM) : 0;
  const shard = mem.alloc((numel * reduceBytes) / s.dp, s.tags.grads, POST_BACKWARD_STREAM);
  mem.free(flat, cast);
  const kept = s.layout.keptGradBytes !== reduceBytes ? mem.alloc((numel * s.layout.keptGradBytes) / s.dp, s.tags.grads, POST_BACKWARD_STREAM) : shard;
  if (kept !== shard) mem.free(shard);
  if (grads.has(key)) mem.free(kept);
  else {
    mem.retag(kept, s.tags.block.paramGrads);
    grads.set(key, kept);
  }
}

/** The gradients a frozen base makes beside its adapters (use_orig_params), kept unsharded between micro-batches. */
function frozenGradsTag(s: StepSetup) {
  return s.tags.line(
    'gradients: each unit whole, frozen weights too (FSDP1 use_orig_params, no_sync)',
    'gradientsBytes',
    (b) =>
      `${formatCount(Math.round(b))} bytes: a FlatParameter holding an adapter requires grad, so autograd makes its frozen weights' gradients as well; no_sync keeps them unsharded until the last micro-batch`,
  );
}

export const fsdp1: Sharding = {
  name: 'fsdp1',
  bf16Params: mixed,
  layout: (input) => {
    const l = stateLayout(input, { params: true, grads: true, states: true, stateName: 'FSDP', gatheredBytes: mixed(input.o) ? 2 : undefined });
    return l;
  },
  gatherRoot: (mem, s) =>
    gatherFlat(
      mem,
      s,
      s.table.ends.reduce((a, t) => a + t.numel, 0),
      'parameters: root unit gathered (FSDP1, not resharded after the forward pass)',
    ),
  releaseRoot: (mem, s, root, grads, sync) => {
    // the root's views' gradients (the output layer's, made first, and the embedding's) wait for one another
    const withGrads = s.table.ends.filter((t) => t.trains || s.endsGrads);
    const keys = withGrads.map((t) => t.key);
    const sink = keys.map((k) => grads.get(k) ?? 0).filter((h) => h !== 0);
    for (const k of keys) grads.delete(k);
    const n = withGrads.reduce((a, t) => a + t.numel, 0);
    if (n > 0) reduceUnit(mem, s, sink, n, 'root.shard', grads, sync);
    mem.free(...root);
  },
  gradsWholeUnit: (framework) => framework.fsdpOrigParams,
  gatherUnit: (mem, s, moe) => gatherFlat(mem, s, unitNumel(s, moe), 'parameters: a block gathered (FSDP1 FlatParameter)'),
  reshard: (mem, gathered) => mem.free(...gathered),
  keepsAfterForward: () => false,
  collectsGrads: () => true,
  reduce: (mem, s, moe, sink, grads, sync) =>
    reduceUnit(
      mem,
      s,
      sink,
      // every tensor of the unit where the blocks' base makes gradients (full fine-tuning, or use_orig_params)
      (moe ? s.table.moe : s.table.dense).tensors.filter((t) => t.trains || s.x.full).reduce((a, t) => a + t.numel, 0),
      `${moe ? 'moe' : 'dense'}.shard`,
      grads,
      sync,
    ),
  // limit_all_gathers lets two all-gathers be in flight (_limiter_utils.py: _max_num_inflight_all_gathers = 2)
  overheads: (s) => {
    const unit = Math.max(unitNumel(s, false), s.table.moeLayers > 0 ? unitNumel(s, true) : 0);
    return commLines(s.o.parallel.gpus, unit * s.layout.weightBytes, ' + a second unit all-gathered ahead (limit_all_gathers: two in flight)');
  },
};
