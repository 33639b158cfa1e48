/**
 * The HIP backend for AMD GPUs: libamdhip64 and hiprtc, with AMD's own allocation options: fine-grained and
 * uncached device memory (hipExtMallocWithFlags), coherent / non-coherent / NUMA-placed pinned host memory
 * (hipHostMalloc flags). HIP's enums and status codes are HIP's own, from hip_runtime_api.h.
 */
import type {
  Address,
  Backend,
  BackendCapabilities,
  DeviceInfo,
  DeviceMallocFlags,
  DeviceMemoryUse,
  Handle,
  MemLocation,
  PeerLink,
  PinnedFlags,
  ProcessMemoryUse,
} from '../backend.js';
import { xnackState } from '../device-info.js';
import { cString } from '../native/ffi.js';
import { LazyManagement, readRecords } from '../native/management.js';
import { NativeBackend, nativeCapabilities, type DeviceAttributeIds } from '../native/native-backend.js';
import type { RtcCompiler } from '../native/rtc.js';
import { RUNTIME_FLAGS, type StatusTable } from '../native/runtime-api.js';
import { matchRsmiDevices, type HipDevice, type RsmiDevice } from './rocm-smi-devices.js';
import {
  loadHip,
  RSMI_IOLINK_TYPE_PCIEXPRESS,
  RSMI_IOLINK_TYPE_XGMI,
  RSMI_MEM_TYPE_VRAM,
  RSMI_PROCESS_INFO_BYTES,
  RSMI_STATUS_INSUFFICIENT_SIZE,
  RSMI_STATUS_SUCCESS,
  type HipBindings,
} from './ffi.js';

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
  /** ROCm SMI, initialised on first use. */
  private readonly rsmi = new LazyManagement({
    init: () => {
      const status = this.b.rsmi!.rsmi_init!(0) as number;
      return status === RSMI_STATUS_SUCCESS ? true : `rsmi_init: ${this.rsmiError(status)}`;
    },
    shutdown: () => void this.b.rsmi?.rsmi_shut_down?.(),
  });

  constructor(b: HipBindings) {
    const driverVersion = [0];
    b.rt.DriverGetVersion?.(driverVersion);
    const major = Math.floor(b.runtimeVersion / 10_000_000);
    const minor = Math.floor((b.runtimeVersion % 10_000_000) / 100_000);
    let rtc: RtcCompiler | undefined;
    if (b.rtc?.CompileProgram) {
      const maj = [0];
      const min = [0];
      b.rtc.Version?.(maj, min);
      rtc = { backend: 'hip', version: `hiprtc ${maj[0]}.${min[0]} (${b.runtimeVersion})`, fns: b.rtc, codeSize: 'GetCodeSize', code: 'GetCode', ext: 'hsaco' };
    }
    // hipMemAllocationProp took its CUDA-compatible layout in ROCm 6; older layouts are not bound.
    const vmm = !!b.rt.MemCreate && b.vmmLayoutOk && major >= 6;
    super({
      name: 'hip',
      deviceAttributes: ATTR,
      batchFailIndex: true,
      fns: b.rt,
      status: HIP_STATUS,
      runtimeVersion: formatHipVersion(b.runtimeVersion),
      driverVersion: driverVersion[0]! > 0 ? String(driverVersion[0]) : undefined,
      libraries: b.libraries,
      capabilities: withoutWriteCombining(
        nativeCapabilities(b.rt, vmm, {
          kernels: !!b.rt.ModuleLoadData && !!rtc,
          fineGrainedDeviceMemory: !!b.rt.ExtMallocWithFlags,
          // hipDeviceMallocUncached first appears in ROCm 5.3's headers.
          uncachedDeviceMemory: !!b.rt.ExtMallocWithFlags && major * 100 + minor >= 503,
          coherentHostMemory: true,
          numaHostMemory: true,
        }),
      ),
      modules: b.rt.ModuleLoadData ? { fns: b.rt, launch: 'ModuleLaunchKernel' } : undefined,
      rtc,
      vmm: vmm ? { fns: b.rt } : undefined,
    });
    this.b = b;
    this.installRoot = b.install;
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
   * Memory from ROCm SMI (VRAM total and use), matched to the HIP device by PCI bus id, and the processes using the
   * device; the runtime's memGetInfo, with a note saying why, where ROCm SMI is absent or refuses. ROCm SMI counts a
   * process's VRAM over all its devices: it is given for a process on one device only, and left unknown otherwise.
   */
  override memoryUse(device: number): DeviceMemoryUse {
    this.guard();
    const dv = this.rsmiDevice(device);
    if (typeof dv === 'string') return { ...super.memoryUse(device), note: dv };
    const r = this.b.rsmi!;
    const total = [0];
    const used = [0];
    let status = r.rsmi_dev_memory_total_get!(dv, RSMI_MEM_TYPE_VRAM, total) as number;
    if (status === RSMI_STATUS_SUCCESS) status = r.rsmi_dev_memory_usage_get!(dv, RSMI_MEM_TYPE_VRAM, used) as number;
    if (status !== RSMI_STATUS_SUCCESS) return { ...super.memoryUse(device), note: `rsmi_dev_memory_*_get: ${this.rsmiError(status)}` };
    const totalBytes = Number(total[0]);
    const usedBytes = Number(used[0]);
    return {
      name: this.deviceName(device),
      totalBytes,
      usedBytes,
      freeBytes: Math.max(0, totalBytes - usedBytes),
      processes: this.rsmiProcesses(dv),
      source: 'rocm-smi',
      ...this.rsmiActivity(dv),
    };
  }

  /** XGMI or PCIe and the hop count from ROCm SMI; the runtime's answer alone where ROCm SMI is absent or refuses. */
  override peerLink(device: number, peer: number): PeerLink {
    const base = super.peerLink(device, peer);
    const r = this.b.rsmi;
    const a = this.rsmiDevice(device);
    const b = this.rsmiDevice(peer);
    if (!r?.rsmi_topo_get_link_type || typeof a === 'string' || typeof b === 'string') return base;
    const hops = [0];
    const type = [0];
    if ((r.rsmi_topo_get_link_type(a, b, hops, type) as number) !== RSMI_STATUS_SUCCESS) return base;
    const kind = type[0] === RSMI_IOLINK_TYPE_XGMI ? 'xgmi' : type[0] === RSMI_IOLINK_TYPE_PCIEXPRESS ? 'pcie' : 'unknown';
    return { ...base, kind, detail: `${Number(hops[0])} hop${Number(hops[0]) === 1 ? '' : 's'}`, source: 'rocm-smi' };
  }

  /** Unique id and busy percent, each left out where ROCm SMI refuses it. */
  private rsmiActivity(dv: number): Pick<DeviceMemoryUse, 'uuid' | 'utilizationPercent'> {
    const r = this.b.rsmi!;
    const out: Pick<DeviceMemoryUse, 'uuid' | 'utilizationPercent'> = {};
    const id = [0];
    if (r.rsmi_dev_unique_id_get && (r.rsmi_dev_unique_id_get(dv, id) as number) === RSMI_STATUS_SUCCESS) out.uuid = `0x${BigInt(id[0]!).toString(16)}`;
    const busy = [0];
    if (r.rsmi_dev_busy_percent_get && (r.rsmi_dev_busy_percent_get(dv, busy) as number) === RSMI_STATUS_SUCCESS) out.utilizationPercent = busy[0]!;
    return out;
  }

  /** The ROCm SMI index of a HIP device (partitions matched as rocm-smi-devices.ts says), or why there is none. */
  private rsmiDevice(device: number): number | string {
    const r = this.b.rsmi;
    if (!r?.rsmi_init || !r.rsmi_num_monitor_devices || !r.rsmi_dev_pci_id_get || !r.rsmi_dev_memory_total_get || !r.rsmi_dev_memory_usage_get)
      return 'ROCm SMI (librocm_smi64) not found';
    return this.rsmi.handle(device, () => {
      const count = [0];
      if ((r.rsmi_num_monitor_devices!(count) as number) !== RSMI_STATUS_SUCCESS) return 'rsmi_num_monitor_devices failed';
      const smi: RsmiDevice[] = [];
      for (let i = 0; i < count[0]!; i++) {
        const id = [0];
        if ((r.rsmi_dev_pci_id_get!(i, id) as number) !== RSMI_STATUS_SUCCESS) continue;
        const part = [0];
        const partition = r.rsmi_dev_partition_id_get && (r.rsmi_dev_partition_id_get(i, part) as number) === RSMI_STATUS_SUCCESS ? part[0] : undefined;
        smi.push({ index: i, bdfid: BigInt(id[0]!), partition });
      }
      const hip: HipDevice[] = [];
      for (let d = 0; d < this.deviceCount(); d++) hip.push({ index: d, pciBusId: this.pciBusId(d) });
      const found = matchRsmiDevices(hip, smi).get(device);
      return found ?? `ROCm SMI lists no device matching HIP device ${device} (PCI ${this.pciBusId(device) ?? 'unknown'})`;
    });
  }

  /** Processes using ROCm SMI device `dv`; undefined when ROCm SMI refuses. */
  private rsmiProcesses(dv: number): ProcessMemoryUse[] | undefined {
    const r = this.b.rsmi!;
    if (!r.rsmi_compute_process_info_get || !r.rsmi_compute_process_gpus_get) return undefined;
    const codes = { success: RSMI_STATUS_SUCCESS, insufficient: RSMI_STATUS_INSUFFICIENT_SIZE };
    const list = readRecords((buf, count) => r.rsmi_compute_process_info_get!(buf, count) as number, RSMI_PROCESS_INFO_BYTES, codes);
    if (!list) return undefined;
    const out: ProcessMemoryUse[] = [];
    for (let i = 0; i < list.count; i++) {
      const at = i * RSMI_PROCESS_INFO_BYTES;
      const pid = list.buffer.readUInt32LE(at);
      const gpus = readRecords((buf, count) => r.rsmi_compute_process_gpus_get!(pid, buf, count) as number, 4, codes);
      if (!gpus) continue;
      const devices = Array.from({ length: gpus.count }, (_, k) => gpus.buffer.readUInt32LE(4 * k));
      if (!devices.includes(dv)) continue;
      out.push({ pid, usedBytes: this.processVram(pid, dv) ?? (devices.length === 1 ? Number(list.buffer.readBigUInt64LE(at + 8)) : undefined) });
    }
    return out;
  }

  /** A process's VRAM on one device (rsmi_compute_process_info_by_device_get, ROCm >= 6.0), where ROCm SMI has it. */
  private processVram(pid: number, dv: number): number | undefined {
    const f = this.b.rsmi?.rsmi_compute_process_info_by_device_get;
    if (!f) return undefined;
    const info = Buffer.alloc(RSMI_PROCESS_INFO_BYTES);
    return (f(pid, dv, info) as number) === RSMI_STATUS_SUCCESS ? Number(info.readBigUInt64LE(8)) : undefined;
  }

  private rsmiError(status: number): string {
    const out: (string | null)[] = [null];
    try {
      if ((this.b.rsmi?.rsmi_status_string?.(status, out) as number) === RSMI_STATUS_SUCCESS && out[0]) return `${out[0]} (${status})`;
    } catch {
      // fall through
    }
    return `rsmi_status_t ${status}`;
  }

  override dispose(): void {
    this.rsmi.close('ROCm SMI shut down');
    super.dispose();
  }

  protected deviceName(device: number): string | undefined {
    const buf = Buffer.alloc(256);
    return this.b.rt.DeviceGetName && (this.b.rt.DeviceGetName(buf, buf.length, device) as number) === 0 ? cString(buf) || undefined : undefined;
  }

  protected addVendorDeviceInfo(device: number, info: DeviceInfo): void {
    info.archName = this.archName(device);
    info.arch = info.archName?.split(':')[0];
    info.xnack = xnackState(info.archName);
  }

  protected deviceMallocStatus(out: number[], bytes: number, flags: DeviceMallocFlags): number {
    if (flags.uncached) return this.b.rt.ExtMallocWithFlags!(out, bytes, DEVICE_MALLOC_UNCACHED) as number;
    if (flags.fineGrained) return this.b.rt.ExtMallocWithFlags!(out, bytes, DEVICE_MALLOC_FINEGRAINED) as number;
    return this.b.rt.Malloc!(out, bytes) as number;
  }

  protected hostAllocStatus(out: number[], bytes: number, flags: PinnedFlags): number {
    // No write-combined flag: HIP declares hipHostMallocWriteCombined for CUDA source compatibility only.
    let f = (flags.portable ? RUNTIME_FLAGS.hostAllocPortable : 0) | (flags.mapped ? RUNTIME_FLAGS.hostAllocMapped : 0);
    if (flags.numaUser) f |= HOST_MALLOC_NUMA_USER;
    if (flags.coherent === true) f |= HOST_MALLOC_COHERENT;
    if (flags.coherent === false) f |= HOST_MALLOC_NON_COHERENT;
    return this.b.rt.HostMalloc!(out, bytes, f >>> 0) as number;
  }

  protected hostFreeStatus(address: Address): number {
    return this.b.rt.HostFree!(address) as number;
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
