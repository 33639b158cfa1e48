/**
 * Kernels as a backend compiles and launches them: sources (CUDA C++ for nvrtc / hiprtc, JavaScript for the host
 * backend), arguments, launch configurations, compiled modules. Part of the Backend interface (backend.ts re-exports
 * every type here).
 */
import type { Address, Handle } from './backend.js';

/** A kernel argument as the backend marshals it. */
export type KernelArg =
  | { type: 'ptr'; value: Address }
  | { type: 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: number | bigint };

/** A kernel launch configuration. */
export interface LaunchConfig {
  grid: [number, number, number];
  block: [number, number, number];
  sharedBytes: number;
  stream: Handle;
}

/**
 * Source of a set of kernels. `source` is CUDA C++ that hiprtc also compiles; `host` holds the same kernels as
 * JavaScript for the host backend.
 */
export interface KernelSource {
  name: string;
  source: string;
  /** Each kernel's parameter types, in order. */
  kernels: Readonly<Record<string, readonly KernelArgType[]>>;
  host: Readonly<Record<string, HostKernel>>;
}

/** Types a kernel parameter can have. */
export type KernelArgType = KernelArg['type'];

/** Memory the host backend hands to a JS kernel: the bytes at an address, up to the end of its allocation. */
export interface HostMemoryResolver {
  /** A DataView/bytes of `bytes` bytes at `address`. Throws if the range is not inside one allocation. */
  bytes(address: Address, bytes: number): Uint8Array;
}

/** A kernel implemented in JavaScript for the host backend. Arguments are the raw values of `KernelArg`s. */
export type HostKernel = (
  mem: HostMemoryResolver,
  config: { grid: [number, number, number]; block: [number, number, number] },
  args: ReadonlyArray<number | bigint>,
) => void;

/** A compiled module's binary and how it was obtained. */
export interface CompiledModule {
  image: Uint8Array;
  /** True when the binary came from the on-disk cache. */
  cached: boolean;
  compileMs?: number | undefined;
  log?: string | undefined;
}
