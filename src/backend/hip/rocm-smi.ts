/**
 * ROCm SMI (librocm_smi64) as one of the HIP backend's management readers: VRAM total and use, the processes on a
 * device, its unique id, busy percent and the link between two devices, matched to HIP devices by PCI address
 * (partitions as rocm-smi-devices.ts says). From ROCm 6.1 it is the fallback behind AMD SMI (amd-smi.ts).
 */
import type { DeviceMemoryUse, PeerLink, ProcessMemoryUse } from '../backend.js';
import { LazyManagement, readRecords } from '../native/management.js';
import type { NativeFn } from '../native/ffi.js';
import {
  RSMI_IOLINK_TYPE_PCIEXPRESS,
  RSMI_IOLINK_TYPE_XGMI,
  RSMI_MEM_TYPE_VRAM,
  RSMI_PROCESS_INFO_BYTES,
  RSMI_STATUS_INSUFFICIENT_SIZE,
  RSMI_STATUS_SUCCESS,
} from './ffi.js';
import { type HipDevice, matchRsmiDevices, type RsmiDevice } from './rocm-smi-devices.js';

/** A management library's view of one HIP device, as the HIP backend asks it. */
export interface SmiReader {
  readonly source: 'amd-smi' | 'rocm-smi';
  /** Memory use of a HIP device (without name and processes, which the backend adds), or why it cannot say. */
  memory(device: number): Omit<DeviceMemoryUse, 'name' | 'processes'> | string;
  /** Processes using a HIP device; undefined where the library cannot list them. */
  processes(device: number): ProcessMemoryUse[] | undefined;
  /** The link between two HIP devices, where the library says. */
  link(device: number, peer: number): Pick<PeerLink, 'kind' | 'detail'> | undefined;
  /** The host NUMA node a HIP device (or partition) is attached to, where the library says. */
  numaNode(device: number): number | undefined;
  close(): void;
}

/** ROCm SMI over its bound functions; `hip` lists the HIP devices for matching. */
export class RocmSmi implements SmiReader {
  readonly source = 'rocm-smi' as const;
  private readonly state: LazyManagement;

  constructor(
    private readonly r: Record<string, NativeFn>,
    private readonly hip: () => HipDevice[],
  ) {
    this.state = new LazyManagement({
      init: () => {
        const status = r.rsmi_init!(0) as number;
        return status === RSMI_STATUS_SUCCESS ? true : `rsmi_init: ${this.error(status)}`;
      },
      shutdown: () => void r.rsmi_shut_down?.(),
    });
  }

  /** The ROCm SMI index of a HIP device, or why there is none. */
  private index(device: number): number | string {
    const r = this.r;
    if (!r.rsmi_init || !r.rsmi_num_monitor_devices || !r.rsmi_dev_pci_id_get || !r.rsmi_dev_memory_total_get || !r.rsmi_dev_memory_usage_get)
      return 'ROCm SMI (librocm_smi64) not found';
    return this.state.handle(device, () => {
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
      const hip = this.hip();
      const found = matchRsmiDevices(hip, smi).get(device);
      return found ?? `ROCm SMI lists no device matching HIP device ${device} (PCI ${hip[device]?.pciBusId ?? 'unknown'})`;
    });
  }

  memory(device: number): Omit<DeviceMemoryUse, 'name' | 'processes'> | string {
    const dv = this.index(device);
    if (typeof dv === 'string') return dv;
    const r = this.r;
    const total = [0];
    const used = [0];
    let status = r.rsmi_dev_memory_total_get!(dv, RSMI_MEM_TYPE_VRAM, total) as number;
    if (status === RSMI_STATUS_SUCCESS) status = r.rsmi_dev_memory_usage_get!(dv, RSMI_MEM_TYPE_VRAM, used) as number;
    if (status !== RSMI_STATUS_SUCCESS) return `rsmi_dev_memory_*_get: ${this.error(status)}`;
    const totalBytes = Number(total[0]);
    const usedBytes = Number(used[0]);
    const out: Omit<DeviceMemoryUse, 'name' | 'processes'> = { totalBytes, usedBytes, freeBytes: Math.max(0, totalBytes - usedBytes), source: 'rocm-smi' };
    const id = [0];
    if (r.rsmi_dev_unique_id_get && (r.rsmi_dev_unique_id_get(dv, id) as number) === RSMI_STATUS_SUCCESS) out.uuid = `0x${BigInt(id[0]!).toString(16)}`;
    const busy = [0];
    if (r.rsmi_dev_busy_percent_get && (r.rsmi_dev_busy_percent_get(dv, busy) as number) === RSMI_STATUS_SUCCESS) out.utilizationPercent = busy[0]!;
    return out;
  }

  link(device: number, peer: number): Pick<PeerLink, 'kind' | 'detail'> | undefined {
    const a = this.index(device);
    const b = this.index(peer);
    if (!this.r.rsmi_topo_get_link_type || typeof a === 'string' || typeof b === 'string') return undefined;
    const hops = [0];
    const type = [0];
    if ((this.r.rsmi_topo_get_link_type(a, b, hops, type) as number) !== RSMI_STATUS_SUCCESS) return undefined;
    const kind = type[0] === RSMI_IOLINK_TYPE_XGMI ? 'xgmi' : type[0] === RSMI_IOLINK_TYPE_PCIEXPRESS ? 'pcie' : 'unknown';
    return { kind, detail: `${Number(hops[0])} hop${Number(hops[0]) === 1 ? '' : 's'}` };
  }

  numaNode(device: number): number | undefined {
    const dv = this.index(device);
    const node = [0];
    if (typeof dv === 'string' || !this.r.rsmi_topo_get_numa_node_number) return undefined;
    return (this.r.rsmi_topo_get_numa_node_number(dv, node) as number) === RSMI_STATUS_SUCCESS ? node[0] : undefined;
  }

  /**
   * Processes using the device. ROCm SMI counts a process's VRAM over all its devices: it is given for a process on
   * one device only, or per device where rsmi_compute_process_info_by_device_get exists (ROCm 6.0), else unknown.
   */
  processes(device: number): ProcessMemoryUse[] | undefined {
    const dv = this.index(device);
    const r = this.r;
    if (typeof dv === 'string' || !r.rsmi_compute_process_info_get || !r.rsmi_compute_process_gpus_get) return undefined;
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

  private processVram(pid: number, dv: number): number | undefined {
    const f = this.r.rsmi_compute_process_info_by_device_get;
    if (!f) return undefined;
    const info = Buffer.alloc(RSMI_PROCESS_INFO_BYTES);
    return (f(pid, dv, info) as number) === RSMI_STATUS_SUCCESS ? Number(info.readBigUInt64LE(8)) : undefined;
  }

  private error(status: number): string {
    const out: (string | null)[] = [null];
    try {
      if ((this.r.rsmi_status_string?.(status, out) as number) === RSMI_STATUS_SUCCESS && out[0]) return `${out[0]} (${status})`;
    } catch {
      // fall through
    }
    return `rsmi_status_t ${status}`;
  }

  close(): void {
    this.state.close('ROCm SMI shut down');
  }
}
