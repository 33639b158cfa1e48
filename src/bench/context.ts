/**
 * What every bench test shares: the device, a stream, the bench kernels, timing with device events (warm-up, then
 * one event pair per repeat, as a native CUDA C benchmark times), pattern fill and verification, and the result rows.
 */
import { ErrorCode, GpuError } from '../errors.js';
import { BENCH_KERNELS } from '../kernels/bench-kernels.js';
import type { KernelModule, LaunchArg } from '../kernels/module.js';
import type { Allocation } from '../memory/allocation.js';
import type { Device } from '../memory/device.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Stream } from '../stream/stream.js';
import type { BenchResult, Counted } from '../formats/bench-schema.js';
import { summarize } from './stats.js';

export interface BenchOptions {
  quick: boolean;
  /** Devices to measure (default: all). */
  devices?: number[] | undefined;
  /** Test groups to run (default: all). */
  only?: string[] | undefined;
  /** Largest copy / working-set size in bytes. */
  maxBytes?: number | undefined;
  /**
   * Time each run behind a gate kernel, so that figures are the device's time without the host's submission.
   * Off by default: the default times as a native program does (see timeDevice).
   */
  gated?: boolean | undefined;
  signal?: AbortSignal | undefined;
  progress?: ((message: string) => void) | undefined;
}

/** Thrown when the run was interrupted (Ctrl-C). */
export class BenchAborted extends Error {
  constructor() {
    super('interrupted');
  }
}

export interface RowFields {
  test: string;
  direction: string;
  srcKind: string;
  dstKind: string;
  engine: string;
  bytes: number;
  peerAccess?: boolean;
  peer?: number;
  /** Transfer rows: host threads and chunk size of the stager, copies in a batch. */
  threads?: number;
  chunkBytes?: number;
  copies?: number;
  ranks?: number;
}

export class BenchContext implements Disposable {
  readonly dev: Device;
  readonly stream: Stream;
  readonly module: KernelModule | undefined;
  readonly multiprocessors: number;
  readonly results: BenchResult[] = [];
  readonly failures: Array<{ test: string; direction: string; bytes: number; reason: string }> = [];
  private readonly errCount: Allocation | undefined;
  private readonly errHost: Allocation | undefined;
  /** Mapped word the gate kernel polls; the host sets it once a timed run is fully enqueued. */
  private readonly gateFlag: Allocation | undefined;
  private readonly gateWord: Uint32Array | undefined;

  constructor(
    readonly rt: Runtime,
    device: number,
    readonly options: BenchOptions,
  ) {
    this.dev = rt.device(device);
    this.stream = this.dev.createStream({ nonBlocking: true });
    const info = this.dev.info();
    this.multiprocessors = rt.backend.name === 'host' ? 1 : Math.max(1, info.multiprocessors ?? 1);
    if (rt.backend.capabilities.kernels) {
      this.module = this.dev.loadModule(BENCH_KERNELS);
      this.errCount = this.dev.alloc(8);
      this.errHost = rt.allocPinned(8);
      if (rt.backend.capabilities.mappedMemory) {
        this.gateFlag = rt.allocMapped(64);
        this.gateWord = this.gateFlag.typed(Uint32Array, 0, 1);
      }
    }
  }

  get host(): boolean {
    return this.rt.backend.name === 'host';
  }

  /** Grid size for grid-stride kernels: enough blocks to fill the device. */
  grid(perSm = 8, elements = Number.POSITIVE_INFINITY, block = 256): number {
    return Math.max(1, Math.min(this.multiprocessors * perSm, Math.ceil(elements / block)));
  }

  checkAbort(): void {
    if (this.options.signal?.aborted) throw new BenchAborted();
  }

  progress(message: string): void {
    this.options.progress?.(`[device ${this.dev.index}] ${message}`);
  }

  /** A bench kernel launch checked and packed once, as a timing op (one native call per run). */
  prepared(name: string, grid: number, args: LaunchArg[], stream: Stream = this.stream, block = 256): () => void {
    if (!this.module) throw new GpuError(ErrorCode.UNSUPPORTED, `the ${this.rt.backend.name} backend cannot run kernels here`);
    const p = this.module.kernel(name).prepare({ grid, block, stream }, ...args);
    return () => p.launch();
  }

  /** Launches a bench kernel on the context's stream (or `stream`). */
  launch(name: string, grid: number, args: LaunchArg[], stream: Stream = this.stream, block = 256): void {
    if (!this.module) throw new GpuError(ErrorCode.UNSUPPORTED, `the ${this.rt.backend.name} backend cannot run kernels here`);
    this.module.kernel(name).launch({ grid, block, stream }, ...args);
  }

  /**
   * Times `op` with device events: `warmup` runs, then `reps` runs each between two events, each waited for on
   * this thread, as a native benchmark does. A run then includes the time the host takes to enqueue it when
   * that is longer than the device's work (small copies); from JavaScript that is a few microseconds more than
   * from C. With the `gated` option each run waits behind a kernel spinning on a mapped word until the start
   * event, `op` and the end event are all enqueued: the figure is then the device's time (but a copy-engine copy
   * after a kernel pays an engine switch). Answers milliseconds per run. Nothing in it awaits until the event loop
   * turns at its end, so Ctrl-C is seen between measurements.
   *
   * `gated: false` is required for work that blocks the host until the device has done it (copies from or to
   * pageable memory): behind a closed gate it would never start, and the host would never open it.
   */
  async timeDevice(op: () => void, reps: number, warmup = 3, stream: Stream = this.stream, gated = true): Promise<number[]> {
    this.checkAbort();
    for (let i = 0; i < warmup; i++) op();
    // The warm-up is waited for on this thread, as a native benchmark does: waiting on a worker thread instead made
    // the small copies timed next 10-20% slower on H200s (measured, 4 interleaved runs of each; docs/performance.md).
    stream.waitSync();
    using a = this.dev.createEvent();
    using b = this.dev.createEvent();
    const gate =
      gated && this.options.gated && this.gateWord && stream.device === this.dev.index ? this.prepared('wait_flag', 1, [this.gateFlag!], stream, 1) : undefined;
    const out: number[] = [];
    for (let i = 0; i < reps; i++) {
      if (gate) {
        this.gateWord![0] = 0;
        gate();
      }
      try {
        a.record(stream);
        op();
        b.record(stream);
      } finally {
        if (gate) this.gateWord![0] = 1;
      }
      b.waitSync();
      out.push(b.elapsedSince(a));
    }
    await new Promise((resolve) => setImmediate(resolve));
    this.checkAbort();
    return out;
  }

  /** Times `op` (awaited) with the host clock: allocation calls, host reads, whole transfers. Milliseconds per run. */
  async timeHost(op: () => unknown, reps: number, warmup = 1): Promise<number[]> {
    for (let i = 0; i < warmup; i++) await op();
    const out: number[] = [];
    for (let i = 0; i < reps; i++) {
      this.checkAbort();
      const t0 = performance.now();
      await op();
      out.push(performance.now() - t0);
    }
    return out;
  }

  /**
   * Fills `target` with the verification pattern of `seed`. Device-reachable memory is filled by a kernel; host
   * memory through `via` (a device buffer at least as large) when given, else by the CPU.
   */
  async fillPattern(target: Allocation, seed: number, bytes: number, via?: Allocation): Promise<void> {
    const words = bytes / 4;
    if (target.kind === 'device' || target.kind === 'managed') {
      this.launch('fill_pattern', this.grid(8, words), [target, words, seed]);
    } else if (via && this.module) {
      this.launch('fill_pattern', this.grid(8, words), [via, words, seed]);
      this.rt.copy(target, via, { bytes, stream: this.stream });
    } else {
      const u = target.typed(Uint32Array, 0, words);
      for (let i = 0; i < words; i++) u[i] = (Math.imul(i, 2654435761 | 0) ^ seed) >>> 0;
    }
    await this.stream.synchronize();
  }

  /** True when the first `bytes` of `target` hold the pattern of `seed`. */
  async verifyPattern(target: Allocation, seed: number, bytes: number, via?: Allocation): Promise<boolean> {
    const words = bytes / 4;
    let on: Allocation = target;
    if (target.kind !== 'device' && target.kind !== 'managed') {
      if (!via || !this.module) {
        const u = target.typed(Uint32Array, 0, words);
        for (let i = 0; i < words; i++) if (u[i] !== (Math.imul(i, 2654435761 | 0) ^ seed) >>> 0) return false;
        return true;
      }
      this.rt.copy(via, target, { bytes, stream: this.stream });
      on = via;
    }
    this.rt.fill(this.errCount!, 0, { stream: this.stream });
    this.launch('verify_pattern', this.grid(8, words), [on, words, seed, this.errCount!]);
    this.rt.copy(this.errHost!, this.errCount!, { stream: this.stream });
    await this.stream.synchronize();
    return this.errHost!.typed(BigUint64Array)[0] === 0n;
  }

  /** Adds a bandwidth row from per-run milliseconds; `countedBytes` is what one run moves as `counted` says. */
  addBandwidth(row: RowFields, ms: readonly number[], countedBytes: number, counted: Counted, verified: boolean): BenchResult {
    const gbps = ms.map((t) => countedBytes / (t * 1e-3) / 1e9);
    const s = summarize(gbps);
    const r: BenchResult = {
      ...row,
      device: this.dev.index,
      counted,
      medianGBps: round(s.median),
      minGBps: round(s.min),
      maxGBps: round(s.max),
      cv: round(s.cv, 4),
      repeats: ms.length,
      verified,
    };
    if (!verified) {
      this.failures.push({ test: row.test, direction: row.direction, bytes: row.bytes, reason: 'verification failed: the data did not arrive intact' });
      return r;
    }
    this.results.push(r);
    return r;
  }

  /** Adds a latency row from per-operation microseconds. */
  addLatency(row: RowFields, us: readonly number[], verified: boolean): BenchResult {
    const s = summarize(us);
    const r: BenchResult = {
      ...row,
      device: this.dev.index,
      counted: 'latency',
      medianUs: round(s.median, 4),
      minUs: round(s.min, 4),
      maxUs: round(s.max, 4),
      cv: round(s.cv, 4),
      repeats: us.length,
      verified,
    };
    if (!verified) {
      this.failures.push({ test: row.test, direction: row.direction, bytes: row.bytes, reason: 'verification failed' });
      return r;
    }
    this.results.push(r);
    return r;
  }

  [Symbol.dispose](): void {
    this.errCount?.[Symbol.dispose]();
    this.errHost?.[Symbol.dispose]();
    this.gateFlag?.[Symbol.dispose]();
    this.stream[Symbol.dispose]();
  }
}

function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Power-of-two sizes from `lo` to `hi` bytes, stepping by `factor`. */
export function sizes(lo: number, hi: number, factor = 4): number[] {
  const out: number[] = [];
  for (let s = lo; s <= hi; s *= factor) out.push(s);
  return out;
}
