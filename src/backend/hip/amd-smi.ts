/**
 * AMD SMI (libamd_smi), ROCm SMI's successor from ROCm 6.1, as the HIP backend's first management reader there. Bound
 * from amdsmi.h as published in ROCm/amdsmi (rocm-6.1.0 and rocm-6.2.0 tags, and the amd_smi_lib 6.4 changelog for
 * the enumeration info): processors are listed per socket; each partition of an MI300 in CPX/DPX mode is a processor
 * of its own, with its own VRAM total and NUMA node, so a HIP device (a partition) reads its own figures. On an APU the
 * GPU's memory is mostly GTT (system memory mapped for the GPU) beside a small VRAM carve-out: both are counted.
 */
import type { DeviceMemoryUse, PeerLink, ProcessMemoryUse } from '../backend.js';
import { LazyManagement } from '../native/management.js';
import type { NativeFn } from '../native/ffi.js';
import { type HipDevice, matchRsmiDevices, type RsmiDevice } from './rocm-smi-devices.js';
import type { SmiReader } from './rocm-smi.js';

/** amdsmi.h values read here. */
export const AMDSMI = {
  success: 0,
  initAmdGpus: 1 << 1,
  memVram: 0,
  memGtt: 2,
  ioLinkPcie: 1,
  ioLinkXgmi: 2,
  /** amdsmi_enumeration_info_t: drm_render, drm_card, hsa_id, hip_id (offset 12), hip_uuid[256] = 272 bytes. */
  enumerationBytes: 272,
  enumerationHipId: 12,
  /** amdsmi_kfd_info_t: kfd_id u64, node_id u32, current_partition_id u32 (offset 12), reserved[12] = 64 bytes. */
  kfdBytes: 64,
  kfdPartition: 12,
  /** amdsmi_engine_usage_t: gfx_activity, umc_activity, mm_activity, reserved[13] as u32 = 64 bytes. */
  engineBytes: 64,
  uuidBytes: 64,
} as const;

/** amdsmi_bdf_t (function 3 bits, device 5, bus 8, domain 48) in ROCm SMI's BDF id layout, with a partition number. */
export function amdsmiBdfToRsmi(bdf: bigint, partition = 0): bigint {
  const fn = bdf & 0x7n;
  const device = (bdf >> 3n) & 0x1fn;
  const bus = (bdf >> 8n) & 0xffn;
  const domain = (bdf >> 16n) & 0xffffffffn;
  return (domain << 32n) | (BigInt(partition) << 28n) | (bus << 8n) | (device << 3n) | fn;
}

/** AMD SMI over its bound functions; `hip` lists the HIP devices for matching. */
export class AmdSmi implements SmiReader {
  readonly source = 'amd-smi' as const;
  private readonly state: LazyManagement;

  constructor(
    private readonly f: Record<string, NativeFn>,
    private readonly hip: () => HipDevice[],
    /** True when the HIP device is an APU (hipDeviceAttributeIntegrated): GTT is counted with VRAM. */
    private readonly integrated: (device: number) => boolean,
  ) {
    this.state = new LazyManagement({
      init: () => {
        const status = f.amdsmi_init!(AMDSMI.initAmdGpus) as number;
        return status === AMDSMI.success ? true : `amdsmi_init: ${this.error(status)}`;
      },
      shutdown: () => void f.amdsmi_shut_down?.(),
    });
  }

  /** Every GPU processor handle, socket by socket (user-space pointers, below 2^53). */
  private processors(): number[] {
    const f = this.f;
    const count = [0];
    if ((f.amdsmi_get_socket_handles!(count, null) as number) !== AMDSMI.success) return [];
    const sockets = new BigUint64Array(count[0]!);
    if ((f.amdsmi_get_socket_handles!(count, sockets) as number) !== AMDSMI.success) return [];
    const out: number[] = [];
    for (const socket of sockets.subarray(0, count[0]!)) {
      const n = [0];
      if ((f.amdsmi_get_processor_handles!(Number(socket), n, null) as number) !== AMDSMI.success) continue;
      const handles = new BigUint64Array(n[0]!);
      if ((f.amdsmi_get_processor_handles!(Number(socket), n, handles) as number) === AMDSMI.success)
        for (const h of handles.subarray(0, n[0]!)) out.push(Number(h));
    }
    return out;
  }

  /**
   * The processor of a HIP device: by the HIP id AMD SMI gives (amdsmi_get_gpu_enumeration_info, from 6.4), else by
   * PCI address and partition as rocm-smi-devices.ts matches them. Answers why where none matches.
   */
  private handle(device: number): number | string {
    const f = this.f;
    if (!f.amdsmi_init || !f.amdsmi_get_socket_handles || !f.amdsmi_get_processor_handles || !f.amdsmi_get_gpu_memory_total)
      return 'AMD SMI (libamd_smi) not found';
    return this.state.handle(device, () => {
      const all = this.processors();
      if (f.amdsmi_get_gpu_enumeration_info) {
        const info = Buffer.alloc(AMDSMI.enumerationBytes);
        const h = all.find(
          (h) => (f.amdsmi_get_gpu_enumeration_info!(h, info) as number) === AMDSMI.success && info.readUInt32LE(AMDSMI.enumerationHipId) === device,
        );
        if (h !== undefined) return h;
      }
      const smi: RsmiDevice[] = [];
      all.forEach((h, index) => {
        const bdf = [0];
        if (!f.amdsmi_get_gpu_device_bdf || (f.amdsmi_get_gpu_device_bdf(h, bdf) as number) !== AMDSMI.success) return;
        const kfd = Buffer.alloc(AMDSMI.kfdBytes);
        const partition =
          f.amdsmi_get_gpu_kfd_info && (f.amdsmi_get_gpu_kfd_info(h, kfd) as number) === AMDSMI.success ? kfd.readUInt32LE(AMDSMI.kfdPartition) : undefined;
        smi.push({ index, bdfid: amdsmiBdfToRsmi(BigInt(bdf[0]!), 0), partition });
      });
      const hip = this.hip();
      const index = matchRsmiDevices(hip, smi).get(device);
      return index !== undefined ? all[index]! : `AMD SMI lists no processor matching HIP device ${device} (PCI ${hip[device]?.pciBusId ?? 'unknown'})`;
    });
  }

  memory(device: number): Omit<DeviceMemoryUse, 'name' | 'processes'> | string {
    const h = this.handle(device);
    if (typeof h === 'string') return h;
    const vram = this.pair(h, AMDSMI.memVram);
    if (typeof vram === 'string') return vram;
    const out: Omit<DeviceMemoryUse, 'name' | 'processes'> = {
      totalBytes: vram.total,
      usedBytes: vram.used,
      freeBytes: Math.max(0, vram.total - vram.used),
      source: 'amd-smi',
    };
    const gtt = this.pair(h, AMDSMI.memGtt);
    if (typeof gtt !== 'string') {
      out.gttTotalBytes = gtt.total;
      out.gttUsedBytes = gtt.used;
      if (this.integrated(device)) {
        // An APU's GPU memory is its VRAM carve-out and the GTT it maps from system memory.
        out.totalBytes = vram.total + gtt.total;
        out.usedBytes = vram.used + gtt.used;
        out.freeBytes = Math.max(0, out.totalBytes - out.usedBytes);
      }
    }
    const len = [AMDSMI.uuidBytes];
    const uuid = Buffer.alloc(AMDSMI.uuidBytes);
    if (this.f.amdsmi_get_gpu_device_uuid && (this.f.amdsmi_get_gpu_device_uuid(h, len, uuid) as number) === AMDSMI.success)
      out.uuid = uuid.toString('latin1', 0, Math.max(0, uuid.indexOf(0)));
    const usage = Buffer.alloc(AMDSMI.engineBytes);
    if (this.f.amdsmi_get_gpu_activity && (this.f.amdsmi_get_gpu_activity(h, usage) as number) === AMDSMI.success)
      out.utilizationPercent = usage.readUInt32LE(0);
    return out;
  }

  private pair(h: number, type: number): { total: number; used: number } | string {
    const total = [0];
    const used = [0];
    let status = this.f.amdsmi_get_gpu_memory_total!(h, type, total) as number;
    if (status === AMDSMI.success && this.f.amdsmi_get_gpu_memory_usage) status = this.f.amdsmi_get_gpu_memory_usage(h, type, used) as number;
    return status === AMDSMI.success ? { total: Number(total[0]), used: Number(used[0]) } : `amdsmi_get_gpu_memory_*: ${this.error(status)}`;
  }

  /** Processes are left to ROCm SMI: amdsmi_proc_info_t changed layout between 6.1 and 6.2. */
  processes(_device: number): ProcessMemoryUse[] | undefined {
    return undefined;
  }

  link(device: number, peer: number): Pick<PeerLink, 'kind' | 'detail'> | undefined {
    const a = this.handle(device);
    const b = this.handle(peer);
    if (!this.f.amdsmi_topo_get_link_type || typeof a === 'string' || typeof b === 'string') return undefined;
    const hops = [0];
    const type = [0];
    if ((this.f.amdsmi_topo_get_link_type(a, b, hops, type) as number) !== AMDSMI.success) return undefined;
    const kind = type[0] === AMDSMI.ioLinkXgmi ? 'xgmi' : type[0] === AMDSMI.ioLinkPcie ? 'pcie' : 'unknown';
    return { kind, detail: `${Number(hops[0])} hop${Number(hops[0]) === 1 ? '' : 's'}` };
  }

  numaNode(device: number): number | undefined {
    const h = this.handle(device);
    const node = [0];
    if (typeof h === 'string' || !this.f.amdsmi_topo_get_numa_node_number) return undefined;
    return (this.f.amdsmi_topo_get_numa_node_number(h, node) as number) === AMDSMI.success ? node[0] : undefined;
  }

  private error(status: number): string {
    const out: (string | null)[] = [null];
    try {
      if ((this.f.amdsmi_status_code_to_string?.(status, out) as number) === AMDSMI.success && out[0]) return `${out[0]} (${status})`;
    } catch {
      // fall through
    }
    return `amdsmi_status_t ${status}`;
  }

  close(): void {
    this.state.close('AMD SMI shut down');
  }
}
