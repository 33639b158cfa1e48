/**
 * The HIP backend for AMD GPUs: libamdhip64 and hiprtc, with AMD's own allocation options: fine-grained and
 * uncached device memory (hipExtMallocWithFlags), coherent / non-coherent / NUMA-placed pinned host memory
 * (hipHostMalloc flags). HIP's enums and status codes are HIP's own, from hip_runtime_api.h.
 */
import type {
  Address,
  CoherencyMode,
  Backend,
  BackendCapabilities,
  DeviceInfo,
  DeviceMallocFlags,
  DeviceMemoryUse,
  Handle,
  MemLocation,
  PeerLink,
  PinnedFlags,
} from '../backend.js';
import { OutOfMemoryError } from '../../errors.js';
import { cString } from '../native/ffi.js';
import { NativeBackend, nativeCapabilities, type DeviceAttributeIds } from '../native/native-backend.js';
import { allocateUnderPolicy } from '../native/numa-memory.js';
import type { RtcCompiler } from '../native/rtc.js';
import { RUNTIME_FLAGS, type StatusTable } from '../native/runtime-api.js';
import { AmdSmi } from './amd-smi.js';
import { type HipBindings, loadHip } from './ffi.js';
import {
  HIP_ATTR_MEMORY_POOLS_SUPPORTED,
  HIP_ATTR_VIRTUAL_MEMORY_SUPPORTED,
  mallocAsyncNeedsStream,
  managementOrder,
  memoryPools,
  uncachedDeviceMemory,
  virtualMemory,
} from './releases.js';
import { RocmSmi, type SmiReader } from './rocm-smi.js';
import type { HipDevice } from './rocm-smi-devices.js';
import { xnackDecision } from './xnack.js';

/** hipError_t values (hip_runtime_api.h, identical in ROCm 5.2 and 6.x for these). */
export const HIP_STATUS: StatusTable = {
  success: 0,
  notReady: 600,
  outOfMemory: [2],
  noDevice: [100, 35],
  peerAccessAlreadyEnabled: 704,
  peerAccessNotEnabled: 705,
  hostMemoryAlreadyRegistered: 712,
  // illegal address, launch timeout, assert, launch failure, ECC not correctable
  sticky: [700, 702, 710, 719, 214],
};

/** hipDeviceAttribute_t values (read from the ROCm 5.2 and 6.3 headers, which agree). */
const ATTR: DeviceAttributeIds = {
  asyncEngineCount: 2,
  canMapHostMemory: 3,
  concurrentManagedAccess: 9,
  integrated: 16,
  l2CacheSize: 19,
  ccMajor: 23,
  managedMemory: 24,
  memoryBusWidth: 59,
  memoryClockRate: 60,
  ccMinor: 61,
  multiprocessorCount: 63,
  pageableMemoryAccess: 65,
};

/** hipMemRangeGetAttribute's hipMemRangeAttributeCoherencyMode, and hipMemRangeCoherencyMode's values in order. */
const RANGE_ATTR_COHERENCY_MODE = 100;
const COHERENCY_MODES: readonly CoherencyMode[] = ['fine-grained', 'coarse-grained', 'indeterminate'];

/** hipExtMallocWithFlags flags. */
const DEVICE_MALLOC_FINEGRAINED = 0x1;
const DEVICE_MALLOC_UNCACHED = 0x3;
/** hipHostMalloc flags beyond the CUDA-compatible ones. */
const HOST_MALLOC_NUMA_USER = 0x20000000;
const HOST_MALLOC_COHERENT = 0x40000000;
const HOST_MALLOC_NON_COHERENT = 0x80000000;

/**
 * Where gcnArchName (char[256]) sits in hipDeviceProp_t, and the struct's size, per ABI:
 * offsetof/sizeof read from ROCm 5.2's header (legacy layout) and from ROCm 6.3's (hipDeviceProp_tR0600).
 */
const PROPS_R0600 = { symbol: 'GetDevicePropertiesR0600', size: 1472, gcnArchName: 1160 };
const PROPS_R0000 = { symbol: 'GetDeviceProperties', size: 792, gcnArchName: 396 };

/** "50221153" → "5.2.21153" (HIP_VERSION = major * 10^7 + minor * 10^5 + patch). */
export function formatHipVersion(v: number): string | undefined {
  if (!(v > 0)) return undefined;
  return `${Math.floor(v / 10_000_000)}.${Math.floor((v % 10_000_000) / 100_000)}.${v % 100_000}`;
}

class HipBackend extends NativeBackend {
  private readonly b: HipBindings;
  private readonly archNames = new Map<number, string | undefined>();
  /** The management libraries, in the order they are asked (AMD SMI first from ROCm 6.1, then ROCm SMI). */
  private readonly smi: SmiReader[] = [];
  /** ROCm 5.2: the stream hipMallocAsync is given in place of the null stream, per device. */
  private readonly allocStreams = new Map<number, number>();
  /** A non-null user-data word for host functions: ROCm 5.3 and 5.4 refuse a captured one with null user data. */
  private readonly hostFnUser = Buffer.alloc(8);

  constructor(b: HipBindings) {
    const driverVersion = [0];
    b.rt.DriverGetVersion?.(driverVersion);
    let rtc: RtcCompiler | undefined;
    if (b.rtc?.CompileProgram) {
      const maj = [0];
      const min = [0];
      b.rtc.Version?.(maj, min);
      rtc = { backend: 'hip', version: `hiprtc ${maj[0]}.${min[0]} (${b.runtimeVersion})`, fns: b.rtc, codeSize: 'GetCodeSize', code: 'GetCode', ext: 'hsaco' };
    }
    // The virtual memory API and memory pools are each device's to have: ask every device, not the symbols alone.
    const say = (attr: number): Array<number | undefined> => deviceAttribute(b, attr);
    const vmm = virtualMemory(b.runtimeVersion, !!b.rt.MemCreate && b.vmmLayoutOk, say(HIP_ATTR_VIRTUAL_MEMORY_SUPPORTED));
    const caps = nativeCapabilities(b.rt, vmm, {
      kernels: !!b.rt.ModuleLoadData && !!rtc,
      fineGrainedDeviceMemory: !!b.rt.ExtMallocWithFlags,
      uncachedDeviceMemory: !!b.rt.ExtMallocWithFlags && uncachedDeviceMemory(b.runtimeVersion),
      coherentHostMemory: true,
      numaHostMemory: true,
      coherencyControl: !!b.rt.MemAdvise && !!b.rt.MemRangeGetAttribute,
      // AMD's counterpart (hipFile) is not bound: files go through the ring.
      gpuDirectStorage: false,
    });
    caps.streamOrderedAllocator &&= memoryPools(true, say(HIP_ATTR_MEMORY_POOLS_SUPPORTED));
    super({
      name: 'hip',
      pinnedAllocator: 'hipHostMalloc',
      deviceAttributes: ATTR,
      batch: b.batch,
      fns: b.rt,
      status: HIP_STATUS,
      runtimeVersion: formatHipVersion(b.runtimeVersion),
      driverVersion: driverVersion[0]! > 0 ? String(driverVersion[0]) : undefined,
      libraries: b.libraries,
      capabilities: withoutWriteCombining(caps),
      modules: b.rt.ModuleLoadData ? { fns: b.rt, launch: 'ModuleLaunchKernel' } : undefined,
      rtc,
      vmm: vmm ? { fns: b.rt } : undefined,
    });
    this.b = b;
    this.installRoot = b.install;
    const hip = (): HipDevice[] => Array.from({ length: this.deviceCount() }, (_, d) => ({ index: d, pciBusId: this.pciBusId(d) }));
    for (const which of managementOrder(b.runtimeVersion)) {
      if (which === 'amd-smi' && b.amdsmi) this.smi.push(new AmdSmi(b.amdsmi, hip, (d) => this.attribute(ATTR.integrated, d) === 1));
      if (which === 'rocm-smi' && b.rsmi) this.smi.push(new RocmSmi(b.rsmi, hip));
    }
  }

  /** The ROCm install the libraries came from. */
  readonly installRoot: string | undefined;

  /** gcnArchName with its features, e.g. "gfx942:sramecc+:xnack-". */
  private archName(device: number): string | undefined {
    if (this.archNames.has(device)) return this.archNames.get(device);
    const layout = this.b.rt[PROPS_R0600.symbol] ? PROPS_R0600 : PROPS_R0000;
    const fn = this.b.rt[layout.symbol];
    let name: string | undefined;
    if (fn) {
      const props = Buffer.alloc(4096);
      if ((fn(props, device) as number) === 0) name = cString(props.subarray(layout.gcnArchName, layout.gcnArchName + 256)) || undefined;
    }
    this.archNames.set(device, name);
    return name;
  }

  /**
   * Memory from the first management library that answers (AMD SMI, then ROCm SMI), matched to the HIP device by its
   * HIP id or PCI address; processes from the first that lists them; the runtime's memGetInfo, with a note saying
   * why, where none answers.
   */
  override memoryUse(device: number): DeviceMemoryUse {
    this.guard();
    const why: string[] = [];
    for (const smi of this.smi) {
      const m = smi.memory(device);
      if (typeof m === 'string') {
        why.push(m);
        continue;
      }
      let processes: DeviceMemoryUse['processes'];
      for (const s of this.smi) processes ??= s.processes(device);
      return { name: this.deviceName(device), ...m, processes };
    }
    if (this.smi.length === 0) why.push(`no management library found (${managementOrder(this.b.runtimeVersion).join(', ')})`);
    return { ...super.memoryUse(device), note: why.join('; ') };
  }

  /** XGMI or PCIe and the hop count from the management library; the runtime's answer alone where none says. */
  override peerLink(device: number, peer: number): PeerLink {
    const base = super.peerLink(device, peer);
    for (const smi of this.smi) {
      const link = smi.link(device, peer);
      if (link) return { ...base, ...link, source: smi.source };
    }
    return base;
  }

  override dispose(): void {
    for (const smi of this.smi) smi.close();
    super.dispose();
  }

  protected deviceName(device: number): string | undefined {
    const buf = Buffer.alloc(256);
    return this.b.rt.DeviceGetName && (this.b.rt.DeviceGetName(buf, buf.length, device) as number) === 0 ? cString(buf) || undefined : undefined;
  }

  protected addVendorDeviceInfo(device: number, info: DeviceInfo): void {
    info.archName = this.archName(device);
    info.arch = info.archName?.split(':')[0];
    info.xnack = xnackDecision(info.archName, info.pageableMemoryAccess);
    // A partition's NUMA node from the management library (sysfs gives the whole GPU's PCI function).
    for (const smi of this.smi) {
      const node = smi.numaNode(device);
      if (node !== undefined && node >= 0) {
        info.numaNode = node;
        break;
      }
    }
  }

  protected deviceMallocStatus(out: number[], bytes: number, flags: DeviceMallocFlags): number {
    if (flags.uncached) return this.b.rt.ExtMallocWithFlags!(out, bytes, DEVICE_MALLOC_UNCACHED) as number;
    if (flags.fineGrained) return this.b.rt.ExtMallocWithFlags!(out, bytes, DEVICE_MALLOC_FINEGRAINED) as number;
    return this.b.rt.Malloc!(out, bytes) as number;
  }

  /**
   * hipHostMalloc with the coherence always named: hipHostMallocCoherent unless `coherent: false`. Left to itself the
   * runtime makes memory coherent for flags 0, mapped or NUMA-placed memory, but coarse-grained for any other flags
   * (hipHostMallocPortable alone) unless HIP_HOST_COHERENT=1 (ROCm/clr hipamd/src/hip_memory.cpp, ihipHostMalloc):
   * naming it keeps one kind of pinned memory one kind. Portable is not passed: CLR never reads it (every GPU may
   * reach pinned memory already), and passing it is what turned the default coarse-grained.
   */
  protected hostAllocStatus(out: number[], bytes: number, flags: PinnedFlags): number {
    // No write-combined flag: HIP declares hipHostMallocWriteCombined for CUDA source compatibility only.
    let f = flags.mapped ? RUNTIME_FLAGS.hostAllocMapped : 0;
    if (flags.numaUser) f |= HOST_MALLOC_NUMA_USER;
    f |= flags.coherent === false ? HOST_MALLOC_NON_COHERENT : HOST_MALLOC_COHERENT;
    return this.b.rt.HostMalloc!(out, bytes, f >>> 0) as number;
  }

  /**
   * Pinned memory on NUMA node `node`: hipHostMallocNumaUser follows the calling thread's NUMA policy, so the policy
   * is set to prefer the node for the call and put back after it. A runtime built without NUMA policy support
   * (ROCCLR_SUPPORT_NUMA_POLICY unset) places the memory near the GPU instead: the page's node is checked, and memory
   * placed elsewhere is given back and taken again as an mbind-bound mapping pinned with hipHostRegister.
   */
  protected override hostAllocNuma(bytes: number, node: number, flags: PinnedFlags): Address {
    const { result, placedOn } = allocateUnderPolicy(
      node,
      this.name,
      () => this.hostAllocPlain(bytes, { ...flags, numaUser: true }),
      (a) => a,
    );
    if (placedOn === node) return result;
    this.hostFree(result);
    return this.hostAllocOnNode(bytes, node, flags);
  }

  protected hostFreeStatus(address: Address): number {
    return this.b.rt.HostFree!(address) as number;
  }

  /**
   * ROCm 5.2's hipMallocAsync crashes on the null stream (releases.ts): there the allocation is made on a blocking
   * stream of gpumem's own for the device, which the null stream waits for, so the memory is ready in its order too.
   */
  override mallocAsync(device: number, bytes: number, stream: Handle): Address {
    if (stream !== 0 || !mallocAsyncNeedsStream(this.b.runtimeVersion)) return this.checkedMallocAsync(device, bytes, stream);
    let own = this.allocStreams.get(device);
    if (own === undefined) {
      own = this.createStream(device, { nonBlocking: false });
      this.allocStreams.set(device, own);
    }
    return this.checkedMallocAsync(device, bytes, own);
  }

  /** ROCm 5.2 answers hipSuccess with a null pointer when its pool cannot grow (no check after AllocateMemory): out of memory. */
  private checkedMallocAsync(device: number, bytes: number, stream: Handle): Address {
    const address = super.mallocAsync(device, bytes, stream);
    if (address === 0)
      throw new OutOfMemoryError(
        `out of memory: stream-ordered allocation of ${bytes} bytes on device ${device}: hipMallocAsync answered success with a null pointer`,
        {
          requestedBytes: bytes,
          device,
        },
        { backend: 'hip' },
      );
    return address;
  }

  protected override hostFnUserData(): Buffer {
    return this.hostFnUser;
  }

  override coherencyMode(address: Address, bytes: number): CoherencyMode | undefined {
    this.guard();
    const out = Buffer.alloc(4);
    if (!this.b.rt.MemRangeGetAttribute || (this.b.rt.MemRangeGetAttribute(out, 4, RANGE_ATTR_COHERENCY_MODE, address, bytes) as number) !== 0)
      return undefined;
    return COHERENCY_MODES[out.readInt32LE(0)];
  }

  protected prefetchStatus(address: Address, bytes: number, to: MemLocation, stream: Handle): number {
    return this.b.rt.MemPrefetchAsync!(address, bytes, to.type === 'device' ? to.device : RUNTIME_FLAGS.cpuDeviceId, stream) as number;
  }

  protected adviseStatus(address: Address, bytes: number, advice: number, location: MemLocation): number {
    return this.b.rt.MemAdvise!(address, bytes, advice, location.type === 'device' ? location.device : RUNTIME_FLAGS.cpuDeviceId) as number;
  }

  protected compileTarget(device: number): { arch: string; options: string[] } {
    // hiprtc takes the target ID with its features (gfx90a:xnack+), so code matches the device's XNACK mode.
    const arch = this.archName(device) ?? 'gfx900';
    return { arch, options: [`--offload-arch=${arch}`, '-O3', '-std=c++17'] };
  }
}

/** An integer attribute of every device, undefined where the runtime refuses it (or the count). */
function deviceAttribute(b: HipBindings, attr: number): Array<number | undefined> {
  const count = [0];
  if (!b.rt.GetDeviceCount || (b.rt.GetDeviceCount(count) as number) !== 0 || !b.rt.DeviceGetAttribute) return [];
  return Array.from({ length: count[0]! }, (_, d) => {
    const v = [0];
    return (b.rt.DeviceGetAttribute!(v, attr, d) as number) === 0 ? v[0] : undefined;
  });
}

/**
 * HIP's capabilities lack write-combined pinned memory: hip_runtime_api.h keeps hipHostMallocWriteCombined "only for
 * CUDA source compatibility but not functional within HIP runtime", and CLR's hipHostMalloc never reads it. Bench and
 * report then show no write-combined row rather than plain pinned memory under that name.
 */
export function withoutWriteCombining(c: BackendCapabilities): BackendCapabilities {
  return { ...c, writeCombined: false };
}

/**
 * Creates the HIP backend.
 * @throws BackendUnavailableError when libamdhip64 cannot be loaded (the message names the files and GPUMEM_LIBAMDHIP64).
 */
export function createHipBackend(): Backend {
  return new HipBackend(loadHip());
}
