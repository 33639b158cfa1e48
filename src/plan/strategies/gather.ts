/**
 * All-gathers and reduce-scatters as the sharded strategies make them: a unit's parameters gathered into one flat
 * buffer on the all-gather stream and copied out to its unsharded tensors (FSDP2's foreach_all_gather and
 * foreach_all_gather_copy_out, torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py), its gradients reduced from
 * one buffer on the reduce-scatter stream into this GPU's shard.
 */
import type { GradStore } from '../program/linear.js';
import type { H, Mem, Tag } from '../program/mem.js';
import type { CommState } from './types.js';

/** FSDP2's all-gather and reduce-scatter streams: blocks freed on one are not reused by another. */
export const ALL_GATHER_STREAM = 1;
export const REDUCE_SCATTER_STREAM = 2;

/** Gathers tensors of `numels` elements at `bytes` per value; answers the unsharded copies (tagged `tag`). */
export function allGather(mem: Mem, numels: readonly number[], bytes: number, tag: Tag, transient: Tag): H[] {
  const flat = mem.alloc(numels.reduce((a, n) => a + n, 0) * bytes, transient, ALL_GATHER_STREAM);
  const out = numels.map((n) => mem.alloc(n * bytes, tag));
  mem.free(flat);
  return out;
}

/**
 * A unit's unsharded gradients (`sink`, freed) reduced into this GPU's shard of `numel / dp` values at `bytes` each,
 * through a buffer of `bufferBytes` per value; the shard kept as `key` (or added into it on later micro-batches).
 * FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py post_backward, _fsdp_collectives.py
 * foreach_reduce): the previous unit's input is dropped (comm_ctx.reduce_scatter_state = None), this unit's input is
 * allocated on the current stream (outside `with device_handle.stream(reduce_scatter_stream)`) and the gradients
 * copied in and freed, the output (the shard param.grad views) allocated on the reduce-scatter stream; the input
 * is kept in `comm` until the next unit's reduce or the end of the backward pass (dropReduceScatterInput).
 */
export function reduceScatter(
  mem: Mem,
  sink: H[],
  numel: number,
  dp: number,
  bytes: { buffer: number; shard: number },
  key: string,
  grads: GradStore,
  tags: { grads: Tag; kept: Tag },
  comm: CommState,
): void {
  dropReduceScatterInput(mem, comm);
  const input = mem.alloc(numel * bytes.buffer, tags.grads);
  mem.free(...sink);
  sink.length = 0;
  const shard = mem.alloc((numel * bytes.shard) / dp, tags.grads, REDUCE_SCATTER_STREAM);
  comm.reduceScatterInput = input;
  if (grads.has(key)) mem.free(shard);
  else {
    mem.retag(shard, tags.kept);
    grads.set(key, shard);
  }
}

/** The last reduce-scatter's input dropped: the next unit's post_backward, or the root's final callback. */
export function dropReduceScatterInput(mem: Mem, comm: CommState): void {
  mem.free(comm.reduceScatterInput);
  comm.reduceScatterInput = 0;
}
