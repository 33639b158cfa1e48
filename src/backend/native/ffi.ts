/**
 * The koffi helpers shared by the CUDA and HIP bindings: loading a library from its candidates, declaring functions
 * from signature templates, host views, callbacks and kernel-argument packing. Only files named ffi.ts under
 * backend/ import koffi.
 */
import { createRequire } from 'node:module';
import type { LibraryHandle, TypeObject } from 'koffi';
import { BackendUnavailableError } from '../../errors.js';
import type { KernelArg, LibraryRecord } from '../backend.js';
import { libraryCandidates, mappedPathOf, realPath, type LibrarySpec } from '../library-search.js';

type Koffi = typeof import('koffi').default;
let loaded: Koffi | undefined;

/**
 * koffi itself, loaded on first use: importing gpumem loads no native addon until a CUDA or HIP backend is opened
 * (the planner, the analyzer and the host backend never need one).
 */
export function koffiModule(): Koffi {
  if (!loaded) {
    loaded = createRequire(import.meta.url)('koffi') as Koffi;
    declareStructs(loaded);
  }
  return loaded;
}

let vmmLayout = false;
let hostFnType: TypeObject | undefined;

/**
 * Structs of the virtual memory API and of CUDA 13's prefetch/advise, declared once by name so that prototypes can
 * use them. CUDA (cuda.h, driver_types.h of 13.0) and HIP (hip_runtime_api.h of 6.x) lay them out identically; the
 * offsets below were read from those headers with offsetof and are checked against koffi's layout here.
 */
function declareStructs(koffi: Koffi): void {
  const MemLocation = koffi.struct('GpumemMemLocation', { type: 'int', id: 'int' });
  const AllocFlags = koffi.struct('GpumemMemAllocFlags', {
    compressionType: 'uint8',
    gpuDirectRDMACapable: 'uint8',
    usage: 'uint16',
    reserved: koffi.array('uint8', 4),
  });
  const AllocationProp = koffi.struct('GpumemMemAllocationProp', {
    type: 'int',
    requestedHandleTypes: 'int',
    location: MemLocation,
    win32HandleMetaData: 'void *',
    allocFlags: AllocFlags,
  });
  const AccessDesc = koffi.struct('GpumemMemAccessDesc', { location: MemLocation, flags: 'int' });
  vmmLayout =
    koffi.sizeof(MemLocation) === 8 &&
    koffi.sizeof(AllocationProp) === 32 &&
    koffi.offsetof(AllocationProp, 'location') === 8 &&
    koffi.offsetof(AllocationProp, 'win32HandleMetaData') === 16 &&
    koffi.offsetof(AllocationProp, 'allocFlags') === 24 &&
    koffi.sizeof(AccessDesc) === 12 &&
    koffi.offsetof(AccessDesc, 'flags') === 8;
  hostFnType = koffi.pointer(koffi.proto('void GpumemHostFn(void *user)'));
}

/** True when koffi lays the VMM structs out as the headers do (8, 32 and 12 bytes, fields at the headers' offsets). */
export function vmmLayoutOk(): boolean {
  koffiModule();
  return vmmLayout;
}

/** A cudaMemLocation / CUmemLocation / hipMemLocation value (type 1 = device, 2 = host). */
export function memLocation(type: number, id: number): { type: number; id: number } {
  return { type, id };
}

/** An allocation property for pinned (non-migratable) device memory on `device`. */
export function allocationProp(device: number): Record<string, unknown> {
  return {
    type: 1, // CU_MEM_ALLOCATION_TYPE_PINNED / hipMemAllocationTypePinned
    requestedHandleTypes: 0,
    location: { type: 1, id: device }, // ..._LOCATION_TYPE_DEVICE
    win32HandleMetaData: null,
    allocFlags: { compressionType: 0, gpuDirectRDMACapable: 0, usage: 0, reserved: [0, 0, 0, 0] },
  };
}

/** An access descriptor giving `device` read-write access (PROT_READWRITE = 3). */
export function accessDesc(device: number): Record<string, unknown> {
  return { location: { type: 1, id: device }, flags: 3 };
}

/** A loaded library and its record for `gpumem info`. */
export interface LoadedLibrary {
  lib: LibraryHandle;
  record: LibraryRecord;
}

/**
 * Loads the first candidate of `spec` that dlopen accepts.
 * @throws BackendUnavailableError naming the files tried and the variable that overrides the path.
 */
export function loadLibrary(spec: LibrarySpec, role: LibraryRecord['role'], backend: string): LoadedLibrary {
  const tried: string[] = [];
  for (const c of libraryCandidates(spec)) {
    try {
      const lib = koffiModule().load(c.path);
      const path = c.viaLoader ? mappedPathOf(c.name) : realPath(c.path);
      return { lib, record: { role, name: c.name, path, envVar: spec.envVar, loaded: true } };
    } catch (e) {
      tried.push(`${c.path}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  const names = spec.names.join(', ');
  throw new BackendUnavailableError(
    `${backend}: could not load ${names} (set ${spec.envVar} to the library's path). Tried:\n  ${tried.join('\n  ')}`,
    { library: spec.names[0]!, envVar: spec.envVar },
    { backend },
  );
}

/** Like {@link loadLibrary} but answers undefined and a record of the failure instead of throwing. */
export function tryLoadLibrary(spec: LibrarySpec, role: LibraryRecord['role'], backend: string): { loaded?: LoadedLibrary; record: LibraryRecord } {
  try {
    const loaded = loadLibrary(spec, role, backend);
    return { loaded, record: loaded.record };
  } catch (e) {
    return { record: { role, name: spec.names[0]!, envVar: spec.envVar, loaded: false, error: (e as Error).message } };
  }
}

/** A declared native function. */
export type NativeFn = ReturnType<LibraryHandle['func']>;

/**
 * Declares functions from C prototypes. `{P}` in a prototype is replaced by `prefix` (cuda, hip), so one list of
 * prototypes serves both runtimes. A function the library lacks is left out of the result rather than failing
 * the whole load; callers check for it.
 */
export function declare(lib: LibraryHandle, prototypes: readonly string[], prefix = ''): Record<string, NativeFn> {
  const out: Record<string, NativeFn> = {};
  for (const proto of prototypes) {
    const text = proto.replaceAll('{P}', prefix);
    const name = /\b([A-Za-z_][A-Za-z0-9_]*)\s*\(/.exec(text)?.[1];
    if (!name) throw new Error(`bad prototype: ${proto}`);
    const key = name.startsWith(prefix) && prefix ? name.slice(prefix.length) : name;
    try {
      out[key] = lib.func(text);
    } catch {
      // symbol missing in this version: the backend reports the capability as absent
    }
  }
  return out;
}

/** The bytes of native memory at an address, without copying. Valid only while the memory is allocated. */
export function viewOf(address: number, bytes: number): ArrayBuffer {
  return koffiModule().view(BigInt(address), bytes);
}

/** The address of a JS ArrayBuffer's backing store. */
export function addressOf(buffer: ArrayBuffer): number {
  return Number(koffiModule().address(buffer));
}

/** A C string read from a NUL-terminated buffer. */
export function cString(buf: Buffer): string {
  const end = buf.indexOf(0);
  return buf.toString('utf8', 0, end < 0 ? buf.length : end);
}

/** A native function pointer that calls `fn` on the JS thread; release it with {@link unregisterCallback}. */
export function registerHostCallback(fn: () => void): bigint {
  const koffi = koffiModule();
  return koffi.register(fn, hostFnType!) as unknown as bigint;
}

/** Releases a pointer made by {@link registerHostCallback}. */
export function unregisterCallback(ptr: bigint): void {
  koffiModule().unregister(ptr);
}

/**
 * Kernel arguments packed once for cuLaunchKernel / hipModuleLaunchKernel's kernelParams: one ArrayBuffer holding
 * every argument's bytes in an 8-byte slot, then the array of pointers to those slots; the answer is a view of that
 * pointer array, which koffi passes as it is (no copy, no conversion per call). Measured on an H200 against koffi
 * building the pointer array from an array of Buffers on every call: 3.06 against 3.58 us per launch call
 * (benchmarks/issue-gap.mjs). An ArrayBuffer's backing store never moves, so the addresses stay valid while the view
 * is held.
 */
export function packKernelArgs(args: readonly KernelArg[]): Uint8Array {
  const n = args.length;
  const block = new ArrayBuffer(16 * Math.max(n, 1));
  const d = new DataView(block);
  const base = koffiModule().address(block) as bigint;
  args.forEach((a, i) => {
    const o = 8 * i;
    switch (a.type) {
      case 'ptr':
      case 'u64':
        d.setBigUint64(o, BigInt(a.value), true);
        break;
      case 'i64':
        d.setBigInt64(o, BigInt(a.value), true);
        break;
      case 'u32':
        d.setUint32(o, a.value >>> 0, true);
        break;
      case 'i32':
        d.setInt32(o, a.value | 0, true);
        break;
      case 'f32':
        d.setFloat32(o, a.value, true);
        break;
      case 'f64':
        d.setFloat64(o, a.value, true);
        break;
    }
    d.setBigUint64(8 * n + o, base + BigInt(o), true);
  });
  return new Uint8Array(block, 8 * n, 8 * Math.max(n, 1));
}

let memcpyFn: NativeFn | undefined;

/** libc's memcpy over raw addresses (the host copier's threads call it; it releases no lock and needs none). */
export function libcMemcpy(): NativeFn {
  if (!memcpyFn) {
    const libc = koffiModule().load('libc.so.6');
    memcpyFn = libc.func('void *memcpy(uintptr_t dst, uintptr_t src, size_t n)');
  }
  return memcpyFn;
}

/** libc's mapping calls and the mbind system call, for pinned memory placed on a NUMA node. */
export interface LibcMemory {
  /** An anonymous private read-write mapping of `bytes`; 0 when it failed. */
  mmap(bytes: number): number;
  munmap(address: number, bytes: number): number;
  /** MPOL_BIND of the range to `node` (moving pages already there); 0 on success, else errno. */
  mbind(address: number, bytes: number, node: number): number;
  memset(address: number, value: number, bytes: number): void;
  /** The calling thread's memory policy: mode and the first 64 nodes' mask; undefined when refused. */
  getPolicy(): { mode: number; mask: bigint } | undefined;
  /** Sets the calling thread's policy (MPOL_DEFAULT = 0 takes no mask); 0 on success, else errno. */
  setPolicy(mode: number, mask: bigint): number;
  /** The NUMA node holding the page at `address` (get_mempolicy with MPOL_F_NODE | MPOL_F_ADDR); undefined when refused. */
  nodeOf(address: number): number | undefined;
}

/** The mbind system call's number by architecture (asm/unistd.h); undefined where gpumem does not know it. */
const SYS_MBIND: Partial<Record<string, number>> = { x64: 237, arm64: 235 };
/** set_mempolicy and get_mempolicy by architecture (asm/unistd.h). */
const SYS_SET_MEMPOLICY: Partial<Record<string, number>> = { x64: 238, arm64: 237 };
const SYS_GET_MEMPOLICY: Partial<Record<string, number>> = { x64: 239, arm64: 236 };

let libcMemoryFns: LibcMemory | undefined;

/** libc's memory calls, or undefined on an architecture whose mbind number is not known here. */
export function libcMemory(): LibcMemory | undefined {
  const sys = SYS_MBIND[process.arch];
  if (sys === undefined) return undefined;
  if (!libcMemoryFns) {
    const koffi = koffiModule();
    const libc = koffi.load('libc.so.6');
    const mmap = libc.func('uintptr_t mmap(uintptr_t addr, size_t len, int prot, int flags, int fd, long off)');
    const munmap = libc.func('int munmap(uintptr_t addr, size_t len)');
    const syscall = libc.func(
      'long syscall(long n, uintptr_t addr, unsigned long len, int mode, const void *nodemask, unsigned long maxnode, unsigned int flags)',
    );
    const memset = libc.func('void *memset(uintptr_t p, int v, size_t n)');
    // One name per prototype: koffi declares each once, and `syscall` is variadic in C.
    const setPolicy = libc.func('long syscall(long n, int mode, const void *nodemask, unsigned long maxnode)');
    const getPolicy = libc.func('long syscall(long n, _Out_ int *mode, void *nodemask, unsigned long maxnode, uintptr_t addr, unsigned long flags)');
    const MAP_FAILED = 2 ** 64 - 1;
    libcMemoryFns = {
      mmap: (bytes) => {
        const p = mmap(0, bytes, 3 /* PROT_READ | PROT_WRITE */, 0x22 /* MAP_PRIVATE | MAP_ANONYMOUS */, -1, 0) as number;
        return p === MAP_FAILED || p >= Number.MAX_SAFE_INTEGER ? 0 : p;
      },
      munmap: (address, bytes) => munmap(address, bytes) as number,
      mbind: (address, bytes, node) => {
        const words = Math.floor(node / 64) + 1;
        const mask = new BigUint64Array(words);
        mask[Math.floor(node / 64)] = 1n << BigInt(node % 64);
        const r = syscall(sys, address, bytes, 2 /* MPOL_BIND */, mask, words * 64 + 1, 2 /* MPOL_MF_MOVE */) as number;
        return r === 0 ? 0 : koffi.errno();
      },
      memset: (address, value, bytes) => void memset(address, value, bytes),
      getPolicy: () => {
        const mode = [0];
        // The kernel refuses a mask shorter than its node count: ask with 1024 bits, keep the first 64.
        const mask = new BigUint64Array(16);
        const r = getPolicy(SYS_GET_MEMPOLICY[process.arch]!, mode, mask, 1024, 0, 0) as number;
        return r === 0 ? { mode: mode[0]!, mask: mask[0]! } : undefined;
      },
      setPolicy: (mode, mask) => {
        const words = new BigUint64Array([mask]);
        const r = setPolicy(SYS_SET_MEMPOLICY[process.arch]!, mode, mode === 0 ? null : words, mode === 0 ? 0 : 65) as number;
        return r === 0 ? 0 : koffi.errno();
      },
      nodeOf: (address) => {
        const node = [0];
        // MPOL_F_NODE | MPOL_F_ADDR: the node of the page at addr.
        const r = getPolicy(SYS_GET_MEMPOLICY[process.arch]!, node, null, 0, address, 3) as number;
        return r === 0 ? node[0] : undefined;
      },
    };
  }
  return libcMemoryFns;
}
