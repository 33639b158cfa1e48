/**
 * The runtime's batched copy (cudaMemcpyBatchAsync, hipMemcpyBatchAsync) called the way the loaded release takes it:
 * with one attribute per run of copies that share their operands' locations, or with none where the release refuses
 * any (ROCm 7.1 to 7.12 answer hipErrorNotSupported to numAttrs > 0), in calls of at most `maxCopies` copies (ROCm's
 * runtime faults above 8192 in one call), and one copy call each where the batch call itself is refused. What was
 * done is answered as a {@link BatchOutcome}, one object per way, so that a prepared batch allocates nothing per run.
 */
import type { Address, BatchOutcome, Handle, NativeCopyBatch } from '../backend.js';
import type { NativeFn } from './ffi.js';
import { RUNTIME_FLAGS } from './runtime-api.js';

/** How a release takes the batch call. */
export interface BatchPolicy {
  /** The bound prototype has the failIdx out-parameter (CUDA 12.8-12.9, every ROCm release so far). */
  failIndex: boolean;
  /** 'per-run': one attribute per run of copies; 'none': zero attributes. */
  attributes: 'per-run' | 'none';
  /** The most copies one call may carry; larger batches are split. */
  maxCopies: number;
  /** The status by which the release refuses a call as a whole, before it enqueues anything; the next way is tried. */
  refused?: number | undefined;
}

/** What the caller needs from its backend. */
export interface BatchHooks {
  /** The typed error for a failed status. */
  fail(status: number, call: string): Error;
  /** One copy on the stream (the direction from the addresses, as under unified addressing). */
  copy(dst: Address, src: Address, bytes: number, stream: Handle): void;
  name: string;
}

type Mode = 'per-run' | 'none' | 'loop';

/** One call's share of a batch: views of the batch's arrays and the attributes for its copies. */
interface Chunk {
  first: number;
  count: number;
  dsts: Uint32Array;
  srcs: Uint32Array;
  sizes: Uint32Array;
  attrs: Buffer | null;
  idx: Uint32Array | null;
  numAttrs: number;
}

const U32 = 2 ** 32;
/** sizeof(cudaMemcpyAttributes) = sizeof(hipMemcpyAttributes): srcAccessOrder, srcLocHint {type, id}, dstLocHint {type, id}, flags. */
const ATTR_BYTES = 24;

/** Calls the batch copy as the policy says, stepping down to the next way when the release refuses one. */
export class BatchCaller {
  private mode: Mode;
  private readonly plans = new WeakMap<NativeCopyBatch, { mode: Mode; chunks: Chunk[] }>();
  private readonly outcomes: Record<Mode, BatchOutcome>;
  private readonly outFail: number[] = [0];

  constructor(
    private readonly fn: NativeFn,
    private readonly policy: BatchPolicy,
    private readonly hooks: BatchHooks,
  ) {
    this.mode = policy.attributes;
    const copiesPerCall = Number.isFinite(policy.maxCopies) ? policy.maxCopies : undefined;
    this.outcomes = {
      'per-run': Object.freeze({ path: 'batch', attributes: 'per-run', copiesPerCall }),
      none: Object.freeze({ path: 'batch', attributes: 'none', copiesPerCall }),
      loop: Object.freeze({ path: 'loop' }),
    };
  }

  /** The way the next batch goes: 'per-run', 'none' or 'loop'. */
  get way(): Mode {
    return this.mode;
  }

  /**
   * Enqueues every copy of `batch` on `stream`.
   * @throws GpuError for a failed call (naming the copy where the runtime says which).
   */
  run(batch: NativeCopyBatch, stream: Handle): BatchOutcome {
    for (;;) {
      if (this.mode === 'loop') {
        this.loop(batch, 0, stream);
        return this.outcomes.loop;
      }
      const chunks = this.plan(batch);
      let refusedAt = -1;
      for (const c of chunks) {
        const status = this.call(c, stream);
        if (status === 0) continue;
        if (status === this.policy.refused) {
          refusedAt = c.first;
          break;
        }
        const at = this.policy.failIndex && this.outFail[0]! < c.count ? `, copy ${c.first + this.outFail[0]!} of the batch` : '';
        const done = c.first > 0 ? `; copies 0 to ${c.first - 1} were enqueued` : '';
        throw this.hooks.fail(
          status,
          `${this.hooks.name}MemcpyBatchAsync of ${batch.count} copies (copies ${c.first} to ${c.first + c.count - 1}${at})${done}`,
        );
      }
      if (refusedAt < 0) return this.outcomes[this.mode];
      const refusedMode = this.mode;
      this.mode = this.mode === 'per-run' ? 'none' : 'loop';
      this.outcomes[this.mode] = Object.freeze({
        ...this.outcomes[this.mode],
        note: `${this.hooks.name}MemcpyBatchAsync refused ${refusedMode === 'per-run' ? 'copy attributes' : 'the batch'} (status ${this.policy.refused})`,
      });
      if (refusedAt > 0) {
        // Copies before the refused call are enqueued: the rest go one by one, in this run only.
        this.loop(batch, refusedAt, stream);
        return this.outcomes.loop;
      }
    }
  }

  private call(c: Chunk, stream: Handle): number {
    return (
      this.policy.failIndex
        ? this.fn(c.dsts, c.srcs, c.sizes, c.count, c.attrs, c.idx, c.numAttrs, this.outFail, stream)
        : this.fn(c.dsts, c.srcs, c.sizes, c.count, c.attrs, c.idx, c.numAttrs, stream)
    ) as number;
  }

  private loop(batch: NativeCopyBatch, from: number, stream: Handle): void {
    const at = (a: Uint32Array, i: number): number => a[2 * i]! + a[2 * i + 1]! * U32;
    for (let i = from; i < batch.count; i++) this.hooks.copy(at(batch.dsts, i), at(batch.srcs, i), at(batch.sizes, i), stream);
  }

  /** The calls for a batch in the current way, made once per batch object and way. */
  private plan(batch: NativeCopyBatch): Chunk[] {
    const known = this.plans.get(batch);
    if (known && known.mode === this.mode) return known.chunks;
    const chunks = planChunks(batch, this.mode === 'per-run', this.policy.maxCopies);
    this.plans.set(batch, { mode: this.mode, chunks });
    return chunks;
  }
}

/**
 * Splits a batch into calls of at most `maxCopies` copies, each with the attributes of the runs it covers (indices
 * relative to its first copy) when `withAttributes`.
 */
export function planChunks(batch: NativeCopyBatch, withAttributes: boolean, maxCopies: number): Chunk[] {
  const chunks: Chunk[] = [];
  const step = Math.max(1, Math.min(batch.count, maxCopies));
  for (let first = 0; first < batch.count; first += step) {
    const count = Math.min(step, batch.count - first);
    const view = (a: Uint32Array): Uint32Array => a.subarray(2 * first, 2 * (first + count));
    let attrs: Buffer | null = null;
    let idx: Uint32Array | null = null;
    let numAttrs = 0;
    if (withAttributes) {
      const runs = batch.runs.filter((r, i) => r.first < first + count && (batch.runs[i + 1]?.first ?? batch.count) > first);
      numAttrs = runs.length;
      attrs = Buffer.alloc(ATTR_BYTES * numAttrs);
      idx = new Uint32Array(2 * numAttrs);
      runs.forEach((r, i) => {
        const o = ATTR_BYTES * i;
        attrs!.writeInt32LE(RUNTIME_FLAGS.srcAccessOrderStream, o);
        attrs!.writeInt32LE(r.src.type === 'device' ? RUNTIME_FLAGS.memLocationDevice : RUNTIME_FLAGS.memLocationHost, o + 4);
        attrs!.writeInt32LE(r.src.type === 'device' ? r.src.device : 0, o + 8);
        attrs!.writeInt32LE(r.dst.type === 'device' ? RUNTIME_FLAGS.memLocationDevice : RUNTIME_FLAGS.memLocationHost, o + 12);
        attrs!.writeInt32LE(r.dst.type === 'device' ? r.dst.device : 0, o + 16);
        idx![2 * i] = Math.max(r.first, first) - first;
      });
    }
    chunks.push({ first, count, dsts: view(batch.dsts), srcs: view(batch.srcs), sizes: view(batch.sizes), attrs, idx, numAttrs });
  }
  return chunks;
}
