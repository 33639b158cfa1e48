/**
 * The classic overlap: upload a chunk, run the kernel on it, download the result, over N chunks on two streams
 * with two sets of device buffers, so that one chunk's upload runs while the previous chunk computes and the one
 * before downloads. The result says how much of the serial time the overlap hid, from device events around each
 * stage (device clock) and the wall clock around the whole run.
 */
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Allocation, DeviceAllocation } from '../memory/allocation.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import { checkSize } from '../memory/validate.js';
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';

/** One chunk's work, enqueued by `compute` on `stream`. */
export interface PipelineChunk {
  index: number;
  /** Device buffer holding this chunk's input (its first `bytes` bytes). */
  input: DeviceAllocation;
  /** Device buffer for this chunk's output (its first `outputBytes` bytes go back to the host). */
  output: DeviceAllocation;
  bytes: number;
  outputBytes: number;
  stream: Stream;
}

export interface PipelineOptions {
  /** Host memory to upload (pinned or mapped: pageable memory cannot overlap). */
  input: Allocation;
  /** Host memory the results go to (pinned or mapped). */
  output: Allocation;
  /** Input bytes per chunk. */
  chunkBytes: number;
  /** Enqueues the work on one chunk on `chunk.stream` (a kernel launch, usually). */
  compute: (chunk: PipelineChunk) => void;
  /** Output bytes of a chunk of `bytes` input bytes (default: the same). */
  outputBytes?: (bytes: number) => number;
  device?: number;
}

export interface PipelineResult {
  chunks: number;
  /** Wall-clock seconds of the whole run. */
  wallSeconds: number;
  /** Device time of each stage, summed over the chunks. */
  stageSeconds: { upload: number; compute: number; download: number };
  /** The three stages one after another, as without overlap. */
  serialSeconds: number;
  /** The longest stage: no overlap can beat it. */
  boundSeconds: number;
  /** Share of the serial time the overlap hid: 1 - wall / serial (0: none; the most possible is 1 - bound / serial). */
  overlap: number;
}

/**
 * Runs the pipeline and resolves once every result is in `output`.
 * @throws InvalidArgumentError (host memory that is not pinned or mapped, sizes that do not fit), OutOfMemoryError
 */
export async function runPipeline(rt: MemoryRuntime, o: PipelineOptions): Promise<PipelineResult> {
  rt.assertOpen();
  const dev = rt.device(o.device ?? 0);
  for (const [what, a] of [
    ['pipeline input', o.input],
    ['pipeline output', o.output],
  ] as const) {
    rt.resolve(a, what);
    if (a.kind !== 'pinned' && a.kind !== 'mapped') {
      throw new InvalidArgumentError(
        `${what}: pinned or mapped host memory is needed for copies to overlap compute (got ${a.kind}); allocate it with rt.allocPinned`,
      );
    }
  }
  if (typeof o.compute !== 'function') throw new InvalidArgumentError("pipeline: compute must be a function that enqueues a chunk's work");
  const chunk = checkSize(o.chunkBytes, 'pipeline chunk');
  const outOf = o.outputBytes ?? ((b: number) => b);
  const n = Math.ceil(o.input.bytes / chunk);
  const sizes = Array.from({ length: n }, (_, i) => Math.min(chunk, o.input.bytes - i * chunk));
  const outSizes = sizes.map((b) => checkSize(outOf(b), 'pipeline output chunk'));
  const outOffsets: number[] = [];
  let total = 0;
  for (const b of outSizes) {
    outOffsets.push(total);
    total += b;
  }
  if (total > o.output.bytes) {
    throw new InvalidArgumentError(`pipeline output: ${total} bytes of results do not fit in ${o.output.bytes} bytes`, ErrorCode.OUT_OF_BOUNDS);
  }
  const maxOut = Math.max(...outSizes);
  using s0 = dev.createStream({ nonBlocking: true });
  using s1 = dev.createStream({ nonBlocking: true });
  using in0 = dev.alloc(chunk);
  using in1 = dev.alloc(chunk);
  using out0 = dev.alloc(maxOut);
  using out1 = dev.alloc(maxOut);
  const streams = [s0, s1];
  const ins = [in0, in1];
  const outs = [out0, out1];
  const marks: GpuEvent[][] = [];
  try {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const k = i % 2;
      const s = streams[k]!;
      const e = [0, 1, 2, 3].map(() => dev.createEvent());
      marks.push(e);
      e[0]!.record(s);
      rt.copy(ins[k]!, o.input, { srcOffset: i * chunk, bytes: sizes[i]!, stream: s });
      e[1]!.record(s);
      o.compute({ index: i, input: ins[k]!, output: outs[k]!, bytes: sizes[i]!, outputBytes: outSizes[i]!, stream: s });
      e[2]!.record(s);
      rt.copy(o.output, outs[k]!, { dstOffset: outOffsets[i]!, bytes: outSizes[i]!, stream: s });
      e[3]!.record(s);
    }
    await Promise.all(streams.map((s) => s.synchronize()));
    const wallSeconds = (performance.now() - t0) / 1e3;
    const stage = { upload: 0, compute: 0, download: 0 };
    for (const e of marks) {
      stage.upload += e[1]!.elapsedSince(e[0]!) / 1e3;
      stage.compute += e[2]!.elapsedSince(e[1]!) / 1e3;
      stage.download += e[3]!.elapsedSince(e[2]!) / 1e3;
    }
    const serialSeconds = stage.upload + stage.compute + stage.download;
    return {
      chunks: n,
      wallSeconds,
      stageSeconds: stage,
      serialSeconds,
      boundSeconds: Math.max(stage.upload, stage.compute, stage.download),
      overlap: serialSeconds > 0 ? Math.max(0, 1 - wallSeconds / serialSeconds) : 0,
    };
  } finally {
    for (const e of marks.flat()) e[Symbol.dispose]();
  }
}
