/**
 * The CUDA backend: libcudart for memory, streams and events; libcuda for modules, launches and virtual memory;
 * libnvrtc for kernels. AMD's allocation options are reported unsupported through `capabilities`.
 */
import type {
  Address,
  Backend,
  DeviceInfo,
  DeviceMallocFlags,
  DeviceMemoryUse,
  Handle,
  MemLocation,
  PeerLink,
  PinnedFlags,
  ProcessMemoryUse,
} from '../backend.js';
import { LazyManagement, readRecords } from '../native/management.js';
import { NativeBackend, nativeCapabilities, type DeviceAttributeIds } from '../native/native-backend.js';
import type { RtcCompiler } from '../native/rtc.js';
import { RUNTIME_FLAGS, type StatusTable } from '../native/runtime-api.js';
import { memLocation } from '../native/ffi.js';
import {
  loadCuda,
  NVML_ERROR_INSUFFICIENT_SIZE,
  NVML_MEMORY_BYTES,
  NVML_MEMORY_V2_BYTES,
  NVML_MEMORY_V2_VERSION,
  NVML_P2P_CAPS_INDEX_NVLINK,
  NVML_P2P_STATUS_OK,
  NVML_PCIE_UTIL_RX_BYTES,
  NVML_PCIE_UTIL_TX_BYTES,
  NVML_PROCESS_INFO_BYTES,
  NVML_SUCCESS,
  NVML_TOPOLOGY_LEVELS,
  NVML_UUID_BYTES,
  type CudaBindings,
} from './ffi.js';

/** CUDA status codes (driver_types.h; the driver API's CUresult agrees for these). */
export const CUDA_STATUS: StatusTable = {
  success: 0,
  notReady: 600,
  outOfMemory: [2],
  noDevice: [100, 35, 3],
  peerAccessAlreadyEnabled: 704,
  peerAccessNotEnabled: 705,
  hostMemoryAlreadyRegistered: 712,
  // illegal address, launch timeout, assert, hardware stack error, illegal instruction, misaligned address,
  // invalid address space, invalid pc, launch failure, ECC uncorrectable
  sticky: [700, 702, 710, 714, 715, 716, 717, 718, 719, 214],
};

/** cudaDeviceAttr values (driver_types.h of CUDA 13; unchanged since CUDA 11). */
const ATTR: DeviceAttributeIds = {
  multiprocessorCount: 16,
  integrated: 18,
  canMapHostMemory: 19,
  memoryClockRate: 36,
  memoryBusWidth: 37,
  l2CacheSize: 38,
  asyncEngineCount: 40,
  ccMajor: 75,
  ccMinor: 76,
  managedMemory: 83,
  pageableMemoryAccess: 88,
  concurrentManagedAccess: 89,
};

const LOCATION_DEVICE = 1;
const LOCATION_HOST = 2;

function formatCudaVersion(v: number): string | undefined {
  return v > 0 ? `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}` : undefined;
}

/** usedGpuMemory when NVML cannot tell (NVML_VALUE_NOT_AVAILABLE). */
const NVML_NOT_AVAILABLE = 0xffff_ffff_ffff_ffffn;

class CudaBackend extends NativeBackend {
  private readonly b: CudaBindings;
  /** NVML, initialised on first use. */
  private readonly nvml = new LazyManagement({
    init: () => {
      const status = this.b.nvml!.nvmlInit_v2!() as number;
      return status === NVML_SUCCESS ? true : `nvmlInit_v2: ${this.nvmlError(status)}`;
    },
    shutdown: () => void this.b.nvml?.nvmlShutdown?.(),
  });

  /**
   * cudaErrorInsufficientDriver (35) reads as a broken driver; on a machine without libcuda it means that no NVIDIA
   * driver is installed at all (the CUDA toolkit alone brings libcudart, not the driver).
   */
  protected override explainNoDevice(status: number, described: { name: string; text: string }): string {
    const plain = super.explainNoDevice(status, described);
    if (status !== 35) return plain;
    const driver = this.b.libraries.find((l) => l.role === 'driver');
    if (driver && !driver.loaded)
      return `no NVIDIA driver is installed (${driver.name} was not found; the CUDA toolkit's libcudart is there, the driver is not); the runtime answered ${described.name}`;
    return `the NVIDIA driver is older than this CUDA runtime (${this.runtimeVersion}) needs; the runtime answered ${plain}`;
  }

  constructor(b: CudaBindings) {
    const driverVersion = [0];
    b.rt.DriverGetVersion!(driverVersion);
    let rtc: RtcCompiler | undefined;
    if (b.nvrtc?.CompileProgram) {
      const maj = [0];
      const min = [0];
      b.nvrtc.Version?.(maj, min);
      rtc = { backend: 'cuda', version: `nvrtc ${maj[0]}.${min[0]}`, fns: b.nvrtc, codeSize: 'GetCUBINSize', code: 'GetCUBIN', ext: 'cubin' };
    }
    const statusName = (status: number): string => {
      const out: (string | null)[] = [null];
      try {
        if ((b.driver!.GetErrorName!(status, out) as number) === 0 && out[0]) return out[0];
      } catch {
        // fall through
      }
      return `CUresult ${status}`;
    };
    const vmm = !!b.driver?.MemCreate && b.vmmLayoutOk;
    super({
      name: 'cuda',
      pinnedAllocator: 'cudaHostAlloc',
      deviceAttributes: ATTR,
      batch: b.rt.MemcpyBatchAsync ? { failIndex: b.batchFailIndex, attributes: 'per-run', maxCopies: Number.POSITIVE_INFINITY } : undefined,
      fns: b.rt,
      status: CUDA_STATUS,
      runtimeVersion: formatCudaVersion(b.runtimeVersion),
      driverVersion: formatCudaVersion(driverVersion[0]!),
      libraries: b.libraries,
      capabilities: nativeCapabilities(b.rt, vmm, {
        kernels: !!b.driver?.ModuleLoadData && !!rtc,
        fineGrainedDeviceMemory: false,
        uncachedDeviceMemory: false,
        coherentHostMemory: false,
        numaHostMemory: false,
        coherencyControl: false,
        gpuDirectStorage: true,
      }),
      modules: b.driver?.ModuleLoadData ? { fns: b.driver, launch: 'LaunchKernel', statusName } : undefined,
      rtc,
      vmm: vmm ? { fns: b.driver!, statusName } : undefined,
    });
    this.b = b;
    b.driver?.Init?.(0);
  }

  protected addVendorDeviceInfo(_device: number, info: DeviceInfo): void {
    if (info.computeCapability) info.arch = `sm_${info.computeCapability.replace('.', '')}`;
  }

  protected deviceName(device: number): string | undefined {
    if (!this.b.driver?.DeviceGet || !this.b.driver.DeviceGetName) return undefined;
    const dev = [0];
    const buf = Buffer.alloc(256);
    if ((this.b.driver.DeviceGet(dev, device) as number) !== 0 || (this.b.driver.DeviceGetName(buf, buf.length, dev[0]) as number) !== 0) return undefined;
    return buf.toString('utf8', 0, Math.max(0, buf.indexOf(0)));
  }

  /**
   * Memory and processes from NVML, matched to the CUDA device by PCI bus id (CUDA's order and NVML's may differ);
   * the runtime's memGetInfo, with a note saying why, where NVML is absent or refuses.
   */
  override memoryUse(device: number): DeviceMemoryUse {
    this.guard();
    const handle = this.nvmlDevice(device);
    if (typeof handle === 'string') return { ...super.memoryUse(device), note: handle };
    const memory = this.nvmlMemory(handle);
    if (typeof memory === 'string') return { ...super.memoryUse(device), note: memory };
    const processes = new Map<number, ProcessMemoryUse>();
    for (const fn of ['nvmlDeviceGetComputeRunningProcesses_v3', 'nvmlDeviceGetGraphicsRunningProcesses_v3']) {
      for (const p of this.nvmlProcesses(fn, handle) ?? []) if (!processes.has(p.pid)) processes.set(p.pid, p);
    }
    return { name: this.deviceName(device), ...memory, processes: [...processes.values()], source: 'nvml', ...this.nvmlActivity(handle) };
  }

  /**
   * NVLink where NVML's peer status for the NVLink capability is OK, PCIe otherwise, with the nearest common PCIe
   * ancestor as nvidia-smi topo names it; the runtime's answer alone where NVML is absent or refuses.
   */
  override peerLink(device: number, peer: number): PeerLink {
    const base = super.peerLink(device, peer);
    const nvml = this.b.nvml;
    const a = this.nvmlDevice(device);
    const b = this.nvmlDevice(peer);
    if (!nvml?.nvmlDeviceGetP2PStatus || typeof a === 'string' || typeof b === 'string') return base;
    const status = [0];
    if ((nvml.nvmlDeviceGetP2PStatus(a, b, NVML_P2P_CAPS_INDEX_NVLINK, status) as number) !== NVML_SUCCESS) return base;
    const level = [0];
    const ancestor =
      nvml.nvmlDeviceGetTopologyCommonAncestor && (nvml.nvmlDeviceGetTopologyCommonAncestor(a, b, level) as number) === NVML_SUCCESS
        ? NVML_TOPOLOGY_LEVELS[level[0]!]
        : undefined;
    return { ...base, kind: status[0] === NVML_P2P_STATUS_OK ? 'nvlink' : 'pcie', detail: ancestor, source: 'nvml' };
  }

  /** UUID, utilisation and PCIe throughput, each left out where NVML refuses it (not every board reports all). */
  private nvmlActivity(handle: number): Pick<DeviceMemoryUse, 'uuid' | 'utilizationPercent' | 'pcieTxBytesPerSecond' | 'pcieRxBytesPerSecond'> {
    const nvml = this.b.nvml!;
    const out: Pick<DeviceMemoryUse, 'uuid' | 'utilizationPercent' | 'pcieTxBytesPerSecond' | 'pcieRxBytesPerSecond'> = {};
    if (nvml.nvmlDeviceGetUUID) {
      const buf = Buffer.alloc(NVML_UUID_BYTES);
      if ((nvml.nvmlDeviceGetUUID(handle, buf, buf.length) as number) === NVML_SUCCESS) out.uuid = buf.toString('latin1', 0, Math.max(0, buf.indexOf(0)));
    }
    if (nvml.nvmlDeviceGetUtilizationRates) {
      const u = Buffer.alloc(8);
      if ((nvml.nvmlDeviceGetUtilizationRates(handle, u) as number) === NVML_SUCCESS) out.utilizationPercent = u.readUInt32LE(0);
    }
    if (nvml.nvmlDeviceGetPcieThroughput) {
      const v = [0];
      if ((nvml.nvmlDeviceGetPcieThroughput(handle, NVML_PCIE_UTIL_TX_BYTES, v) as number) === NVML_SUCCESS) out.pcieTxBytesPerSecond = v[0]! * 1024;
      if ((nvml.nvmlDeviceGetPcieThroughput(handle, NVML_PCIE_UTIL_RX_BYTES, v) as number) === NVML_SUCCESS) out.pcieRxBytesPerSecond = v[0]! * 1024;
    }
    return out;
  }

  /**
   * Total, free and used bytes; with memory v2 (as nvidia-smi reads it) the driver's reserved memory apart, so that
   * used is what processes hold. Version 1 counts the reserved memory as used.
   */
  private nvmlMemory(handle: number): { totalBytes: number; freeBytes: number; usedBytes: number; reservedBytes?: number } | string {
    const nvml = this.b.nvml!;
    if (nvml.nvmlDeviceGetMemoryInfo_v2) {
      const m = Buffer.alloc(NVML_MEMORY_V2_BYTES);
      m.writeUInt32LE(NVML_MEMORY_V2_VERSION, 0);
      if ((nvml.nvmlDeviceGetMemoryInfo_v2(handle, m) as number) === NVML_SUCCESS) {
        const u = (off: number): number => Number(m.readBigUInt64LE(off));
        return { totalBytes: u(8), reservedBytes: u(16), freeBytes: u(24), usedBytes: u(32) };
      }
    }
    const m = Buffer.alloc(NVML_MEMORY_BYTES);
    const status = nvml.nvmlDeviceGetMemoryInfo!(handle, m) as number;
    if (status !== NVML_SUCCESS) return `nvmlDeviceGetMemoryInfo: ${this.nvmlError(status)}`;
    const u = (off: number): number => Number(m.readBigUInt64LE(off));
    return { totalBytes: u(0), freeBytes: u(8), usedBytes: u(16) };
  }

  /** The NVML handle of a CUDA device, or why there is none. */
  private nvmlDevice(device: number): number | string {
    const nvml = this.b.nvml;
    if (!nvml?.nvmlInit_v2 || !nvml.nvmlDeviceGetHandleByPciBusId_v2 || !nvml.nvmlDeviceGetMemoryInfo) return 'NVML (libnvidia-ml) not found';
    return this.nvml.handle(device, () => {
      const bus = this.pciBusId(device);
      if (!bus) return `no PCI bus id for CUDA device ${device}`;
      const out = [0];
      const status = nvml.nvmlDeviceGetHandleByPciBusId_v2!(bus, out) as number;
      return status === NVML_SUCCESS ? out[0]! : `nvmlDeviceGetHandleByPciBusId_v2(${bus}): ${this.nvmlError(status)}`;
    });
  }

  /** One of NVML's process lists; undefined when refused. */
  private nvmlProcesses(fn: string, handle: number): ProcessMemoryUse[] | undefined {
    const call = this.b.nvml![fn];
    if (!call) return undefined;
    const list = readRecords((buf, count) => call(handle, count, buf) as number, NVML_PROCESS_INFO_BYTES, {
      success: NVML_SUCCESS,
      insufficient: NVML_ERROR_INSUFFICIENT_SIZE,
    });
    if (!list) return undefined;
    const out: ProcessMemoryUse[] = [];
    for (let i = 0; i < list.count; i++) {
      const at = i * NVML_PROCESS_INFO_BYTES;
      const used = list.buffer.readBigUInt64LE(at + 8);
      out.push({ pid: list.buffer.readUInt32LE(at), usedBytes: used === NVML_NOT_AVAILABLE ? undefined : Number(used) });
    }
    return out;
  }

  private nvmlError(status: number): string {
    try {
      const text = this.b.nvml?.nvmlErrorString?.(status) as string | null | undefined;
      return text ? `${text} (${status})` : `nvmlReturn ${status}`;
    } catch {
      return `nvmlReturn ${status}`;
    }
  }

  override dispose(): void {
    this.nvml.close('NVML shut down');
    super.dispose();
  }

  protected deviceMallocStatus(out: number[], bytes: number, _flags: DeviceMallocFlags): number {
    return this.b.rt.Malloc!(out, bytes) as number;
  }

  protected hostAllocStatus(out: number[], bytes: number, flags: PinnedFlags): number {
    const f =
      (flags.portable ? RUNTIME_FLAGS.hostAllocPortable : 0) |
      (flags.mapped ? RUNTIME_FLAGS.hostAllocMapped : 0) |
      (flags.writeCombined ? RUNTIME_FLAGS.hostAllocWriteCombined : 0);
    return this.b.rt.HostAlloc!(out, bytes, f) as number;
  }

  protected hostFreeStatus(address: Address): number {
    return this.b.rt.FreeHost!(address) as number;
  }

  protected prefetchStatus(address: Address, bytes: number, to: MemLocation, stream: Handle): number {
    if (this.b.locationStruct) {
      const loc = to.type === 'device' ? memLocation(LOCATION_DEVICE, to.device) : memLocation(LOCATION_HOST, 0);
      return this.b.rt.MemPrefetchAsync!(address, bytes, loc, 0, stream) as number;
    }
    return this.b.rt.MemPrefetchAsync!(address, bytes, to.type === 'device' ? to.device : RUNTIME_FLAGS.cpuDeviceId, stream) as number;
  }

  protected adviseStatus(address: Address, bytes: number, advice: number, location: MemLocation): number {
    if (this.b.locationStruct) {
      const loc = location.type === 'device' ? memLocation(LOCATION_DEVICE, location.device) : memLocation(LOCATION_HOST, 0);
      return this.b.rt.MemAdvise!(address, bytes, advice, loc) as number;
    }
    return this.b.rt.MemAdvise!(address, bytes, advice, location.type === 'device' ? location.device : RUNTIME_FLAGS.cpuDeviceId) as number;
  }

  protected compileTarget(device: number): { arch: string; options: string[] } {
    const arch = this.deviceInfo(device).arch ?? 'sm_52';
    return { arch, options: [`--gpu-architecture=${arch}`, '--std=c++17'] };
  }

  /** The driver API needs the primary context current on this thread: cudaFree(0) makes it so. */
  protected override prepareContext(device: number): void {
    super.prepareContext(device);
    this.check(this.b.rt.Free!(0) as number, 'cudaFree(0)');
  }
}

/**
 * Creates the CUDA backend.
 * @throws BackendUnavailableError when libcudart cannot be loaded (the message names the file and GPUMEM_LIBCUDART).
 */
export function createCudaBackend(): Backend {
  return new CudaBackend(loadCuda());
}
