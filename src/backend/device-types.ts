/**
 * What a backend says about its devices and libraries: the facts `gpumem info` prints, the memory use a monitor samples,
 * the links between devices. Part of the Backend interface (backend.ts re-exports every type here).
 */

/** One loaded (or tried) native library. */
export interface LibraryRecord {
  /** What it is for: runtime, driver, compiler, management. */
  role: 'runtime' | 'driver' | 'compiler' | 'management' | 'collectives';
  /** Library name searched for, e.g. libcudart.so.13. */
  name: string;
  /** Resolved file path, when known. */
  path?: string | undefined;
  /** The environment variable that overrides this library's path. */
  envVar: string;
  loaded: boolean;
  /** Why it could not be loaded, when it could not. */
  error?: string | undefined;
}

/** Facts about one device. A value that cannot be read is absent, never zero. */
export interface DeviceInfo {
  index: number;
  name?: string | undefined;
  /** Architecture: sm_90, gfx942, x86_64 (host). */
  arch?: string | undefined;
  /** AMD: the full architecture name with its features, e.g. gfx942:sramecc+:xnack-. */
  archName?: string | undefined;
  totalBytes?: number | undefined;
  freeBytes?: number | undefined;
  /** Where `totalBytes` comes from when it is not the memory of a real device (the host backend's share of RAM). */
  memorySource?: string | undefined;
  /** Streaming multiprocessors (NVIDIA) or compute units (AMD) or CPU cores (host). */
  multiprocessors?: number | undefined;
  l2Bytes?: number | undefined;
  asyncEngines?: number | undefined;
  managedMemory?: boolean | undefined;
  concurrentManagedAccess?: boolean | undefined;
  pageableMemoryAccess?: boolean | undefined;
  /**
   * AMD: XNACK (retry on page fault), which lets kernels fault on managed and pageable memory and have it migrated.
   * `enabled` is decided as the runtime decides it: hipDeviceAttributePageableMemoryAccess (the runtime's own answer,
   * HSA's SVM_ACCESSIBLE_BY_DEFAULT), else the target's xnack+ / xnack- suffix, which HSA_XNACK set for this process;
   * `source` says which. `arch` is the suffix, `env` what HSA_XNACK asks for.
   */
  xnack?: XnackState | undefined;
  integrated?: boolean | undefined;
  canMapHostMemory?: boolean | undefined;
  pciBusId?: string | undefined;
  link?: PcieLink | undefined;
  numaNode?: number | undefined;
  /** Memory bus width in bits and peak memory clock, where the runtime tells. */
  memoryBusWidthBits?: number | undefined;
  memoryClockKHz?: number | undefined;
  computeCapability?: string | undefined;
  streamPriorityRange?: { least: number; greatest: number } | undefined;
}

/** XNACK as a device reports it; see DeviceInfo.xnack. */
export interface XnackState {
  arch?: boolean | undefined;
  env?: string | undefined;
  enabled?: boolean | undefined;
  source?: 'runtime' | 'arch' | undefined;
}

/** Memory a process holds on a device, as the management library reports it. */
export interface ProcessMemoryUse {
  pid: number;
  /** Bytes, or undefined where the library cannot say (NVML inside some containers). */
  usedBytes: number | undefined;
}

/** A device's memory as a monitor sees it: totals, and the processes holding memory where they can be listed. */
export interface DeviceMemoryUse {
  name?: string | undefined;
  totalBytes: number;
  freeBytes: number;
  usedBytes: number;
  /** Memory the driver and firmware set aside (NVML's memory v2), neither used nor free; undefined where unknown. */
  reservedBytes?: number | undefined;
  /** Processes with memory on the device; undefined where this backend cannot list them. */
  processes: ProcessMemoryUse[] | undefined;
  /**
   * Where the figures come from: `nvml` or `rocm-smi` (the management libraries: no context is created on the
   * device), `runtime`
   * (the runtime's memGetInfo: creates this process's context on the device, itself a few hundred MiB), `host`.
   */
  source: 'nvml' | 'amd-smi' | 'rocm-smi' | 'runtime' | 'host';
  /**
   * AMD: GTT memory (system memory mapped for the GPU), as AMD SMI counts it. On an APU it is most of the GPU's memory
   * and is counted in the totals above as well.
   */
  gttTotalBytes?: number | undefined;
  gttUsedBytes?: number | undefined;
  /** Why the figures come from a fallback (the management library's error), when they do. */
  note?: string | undefined;
  /**
   * The device's identity across machines and reboots: NVML's UUID (GPU-xxxxxxxx-...), ROCm SMI's unique id (0x...),
   * or on the host backend one made from the machine id and the device index. Undefined where it cannot be read.
   */
  uuid?: string | undefined;
  /** Percent of the last sample period a kernel ran (NVML utilization.gpu, ROCm SMI busy percent). */
  utilizationPercent?: number | undefined;
  /** PCIe throughput in bytes per second, device to host (tx) and host to device (rx), where the library gives it without blocking. */
  pcieTxBytesPerSecond?: number | undefined;
  pcieRxBytesPerSecond?: number | undefined;
}

/** The link between two devices. */
export interface PeerLink {
  /** nvlink, xgmi, pcie, host (the host backend's logical devices share CPU memory), or unknown. */
  kind: 'nvlink' | 'xgmi' | 'pcie' | 'host' | 'unknown';
  /** The runtime lets one device address the other's memory. */
  peerAccess: boolean;
  /** How the devices meet on PCIe (NVML's topology level), or AMD SMI's / ROCm SMI's hop count. */
  detail?: string | undefined;
  source: 'nvml' | 'amd-smi' | 'rocm-smi' | 'runtime' | 'host';
}

/** PCIe link state read from sysfs: generation (from the transfer rate), width in lanes, current and maximum. */
export interface PcieLink {
  generation?: number | undefined;
  width?: number | undefined;
  maxGeneration?: number | undefined;
  maxWidth?: number | undefined;
  /** Transfer rate per lane in GT/s, as sysfs gives it. */
  speedGTs?: number | undefined;
  maxSpeedGTs?: number | undefined;
}
