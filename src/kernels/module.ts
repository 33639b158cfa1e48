/**
 * Compiled kernels and typed launches. A module is compiled once per device (and cached on disk); a kernel checks
 * its arguments against the declared parameter types and that every pointer is a live allocation the device can
 * reach, before anything is handed to the driver.
 */
import { DisposedError, ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Backend, Handle, KernelArg, KernelArgType, KernelSource, LaunchConfig } from '../backend/backend.js';
import type { Allocation } from '../memory/allocation.js';
import type { Stream } from '../stream/stream.js';

/** A pointer argument: an allocation, or an allocation and a byte offset into it. */
export type PointerArg = Allocation | { allocation: Allocation; offset: number };
/** A launch argument, by parameter type. */
export type LaunchArg = PointerArg | number | bigint;

export type Dim3 = number | readonly [number, number?, number?];

export interface LaunchOptions {
  grid: Dim3;
  block: Dim3;
  sharedBytes?: number;
  /** Defaults to the device's default stream. */
  stream?: Stream;
}

/** What kernels need from the runtime. */
export interface KernelOwner {
  readonly backend: Backend;
  assertOpen(): void;
  /** @internal The device address of a pointer argument, after checking it is live, ours and reachable from `device`. */
  devicePointer(arg: PointerArg, device: number, what: string): number;
  /** @internal */
  defaultStream(device: number): Stream;
}

function dim3(d: Dim3, what: string, maxX: number): [number, number, number] {
  const v = typeof d === 'number' ? [d, 1, 1] : [d[0], d[1] ?? 1, d[2] ?? 1];
  const limits = [maxX, 65535, 65535];
  v.forEach((x, i) => {
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 1 || x > limits[i]!) {
      throw new InvalidArgumentError(`${what}: dimension ${'xyz'[i]} must be a whole number from 1 to ${limits[i]}, got ${String(x)}`);
    }
  });
  return v as [number, number, number];
}

/** A loaded module on one device. */
export class KernelModule implements Disposable {
  private live = true;
  private readonly kernels = new Map<string, Kernel>();

  constructor(
    private readonly owner: KernelOwner,
    readonly device: number,
    readonly source: KernelSource,
    readonly handle: Handle,
    /** How the binary was obtained: compile time, or from the disk cache. */
    readonly compile: { cached: boolean; compileMs?: number | undefined },
  ) {}

  /**
   * The kernel called `name`.
   * @throws InvalidArgumentError when the source declares no such kernel.
   */
  kernel(name: string): Kernel {
    this.assertLive();
    let k = this.kernels.get(name);
    if (!k) {
      const params = this.source.kernels[name];
      if (!params) throw new InvalidArgumentError(`no kernel named "${name}" in ${this.source.name} (it has: ${Object.keys(this.source.kernels).join(', ')})`);
      k = new Kernel(this.owner, this, name, params, this.owner.backend.getFunction(this.handle, name));
      this.kernels.set(name, k);
    }
    return k;
  }

  assertLive(): void {
    if (!this.live) throw new DisposedError(`the module ${this.source.name} was unloaded`);
    this.owner.assertOpen();
  }

  [Symbol.dispose](): void {
    if (!this.live) return;
    this.live = false;
    if (this.owner.backend.unusableReason === undefined) this.owner.backend.unloadModule(this.handle);
  }
}

/** A launch whose arguments were checked and packed once, for repeated launches in timing loops. */
export interface PreparedLaunch {
  /** Enqueues the kernel; re-checks only that every pointer is still live. */
  launch(stream?: Stream): void;
}

/** One kernel of a module. */
export class Kernel {
  constructor(
    private readonly owner: KernelOwner,
    readonly module: KernelModule,
    readonly name: string,
    readonly params: readonly KernelArgType[],
    private readonly fn: Handle,
  ) {}

  /** Checks and packs a launch once; see {@link PreparedLaunch}. */
  prepare(options: LaunchOptions, ...args: LaunchArg[]): PreparedLaunch {
    this.module.assertLive();
    const device = this.module.device;
    if (args.length !== this.params.length) {
      throw new InvalidArgumentError(`${this.name} takes ${this.params.length} arguments (${this.params.join(', ')}), got ${args.length}`);
    }
    const pointers: Allocation[] = [];
    const packed: KernelArg[] = this.params.map((type, i) => {
      const a = args[i];
      const what = `${this.name} argument ${i} (${type})`;
      if (type === 'ptr') {
        const p = a as PointerArg;
        const address = this.owner.devicePointer(p, device, what);
        pointers.push('allocation' in p ? p.allocation : p);
        return { type, value: address };
      }
      if (type === 'u64' || type === 'i64') {
        if (typeof a === 'bigint') return { type, value: a };
        if (typeof a !== 'number' || !Number.isInteger(a)) throw new InvalidArgumentError(`${what}: expected an integer, got ${String(a)}`);
        return { type, value: a };
      }
      if (typeof a !== 'number' || Number.isNaN(a)) throw new InvalidArgumentError(`${what}: expected a number, got ${String(a)}`);
      if ((type === 'u32' || type === 'i32') && !Number.isInteger(a)) throw new InvalidArgumentError(`${what}: expected an integer, got ${a}`);
      return { type, value: a } as KernelArg;
    });
    const grid = dim3(options.grid, `${this.name} grid`, 2 ** 31 - 1);
    const block = dim3(options.block, `${this.name} block`, 1024);
    if (block[0] * block[1] * block[2] > 1024) throw new InvalidArgumentError(`${this.name}: a block has at most 1024 threads, got ${block.join('x')}`);
    const sharedBytes = options.sharedBytes ?? 0;
    if (!Number.isInteger(sharedBytes) || sharedBytes < 0 || sharedBytes > 228 * 1024) {
      throw new InvalidArgumentError(`${this.name}: sharedBytes must be 0 to 233472, got ${sharedBytes}`);
    }
    const defaultStream = options.stream;
    const packedArgs = this.owner.backend.packArgs(packed);
    const config: LaunchConfig = { grid, block, sharedBytes, stream: 0 };
    return {
      launch: (stream?: Stream) => {
        for (const p of pointers) p.assertLive(`${this.name} launch`);
        const s = stream ?? defaultStream ?? this.owner.defaultStream(device);
        s.assertLive('launch');
        if (s.device !== device) {
          throw new InvalidArgumentError(`${this.name}: the module is on device ${device}, the stream on device ${s.device}`, ErrorCode.WRONG_DEVICE);
        }
        config.stream = s.handle;
        this.owner.backend.launch(this.fn, config, packedArgs);
      },
    };
  }

  /** Checks the arguments and enqueues one launch. */
  launch(options: LaunchOptions, ...args: LaunchArg[]): void {
    this.prepare(options, ...args).launch();
  }
}
