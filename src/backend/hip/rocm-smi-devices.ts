/**
 * Which ROCm SMI device is which HIP device. Both name a device by its PCI address, but a partitioned GPU (MI300
 * in DPX or CPX mode) shows the operating system one PCI address for all its partitions, and HIP gives every
 * partition that address, while ROCm SMI tells them apart: from ROCm 6.2 its BDF id carries the partition in bits
 * [31:28] (rocm_smi.h: BDFID = DOMAIN << 32 | PARTITION << 28 | BUS << 8 | DEVICE << 3 | FUNCTION), and some releases
 * put it in the function bits instead (reported on partitioned MI300A with ROCm 6.1: 0001:02:00.1 and
 * 0001:02:00.2 for the second and third partitions of 0001:02:00.0, addresses lspci does not list; the ROCm 7.0
 * header says so too). rsmi_dev_partition_id_get (ROCm 6.1) says it directly where present.
 *
 * The match: devices are grouped by domain, bus and device number; inside a group, HIP's devices in HIP's order are
 * paired with ROCm SMI's in partition order. A group whose counts differ is left unmatched rather than guessed.
 */

/** A PCI address and the partition number ROCm SMI gives it. */
export interface DecodedBdf {
  domain: number;
  bus: number;
  device: number;
  fn: number;
  /** Bits [31:28] of the BDF id (0 on an unpartitioned GPU and in releases that use the function bits). */
  partition: number;
}

/** Decodes a ROCm SMI BDF id. */
export function decodeBdfId(id: bigint): DecodedBdf {
  return {
    domain: Number((id >> 32n) & 0xffffffffn),
    partition: Number((id >> 28n) & 0xfn),
    bus: Number((id >> 8n) & 0xffn),
    device: Number((id >> 3n) & 0x1fn),
    fn: Number(id & 0x7n),
  };
}

/** Parses a PCI bus id as HIP gives it ("0000:03:00.0"). */
export function parsePciBusId(pciBusId: string): Omit<DecodedBdf, 'partition'> | undefined {
  const m = /^([0-9a-f]+):([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$/i.exec(pciBusId.trim());
  if (!m) return undefined;
  const [domain, bus, device, fn] = m.slice(1).map((x) => Number.parseInt(x, 16)) as [number, number, number, number];
  if (device > 0x1f) return undefined;
  return { domain, bus, device, fn };
}

/** One ROCm SMI device: its index, BDF id, and partition id where rsmi_dev_partition_id_get answered. */
export interface RsmiDevice {
  index: number;
  bdfid: bigint;
  partition?: number | undefined;
}

/** One HIP device: its index and PCI bus id. */
export interface HipDevice {
  index: number;
  pciBusId: string | undefined;
}

const groupKey = (d: { domain: number; bus: number; device: number }): string => `${d.domain}:${d.bus}:${d.device}`;

/** HIP device index → ROCm SMI device index, for every HIP device that can be matched. */
export function matchRsmiDevices(hip: readonly HipDevice[], rsmi: readonly RsmiDevice[]): Map<number, number> {
  const out = new Map<number, number>();
  const hipGroups = new Map<string, Array<{ index: number; fn: number }>>();
  for (const h of hip) {
    const p = h.pciBusId ? parsePciBusId(h.pciBusId) : undefined;
    if (!p) continue;
    const k = groupKey(p);
    hipGroups.set(k, [...(hipGroups.get(k) ?? []), { index: h.index, fn: p.fn }]);
  }
  const rsmiGroups = new Map<string, Array<{ index: number; order: number }>>();
  for (const r of rsmi) {
    const d = decodeBdfId(r.bdfid);
    const k = groupKey(d);
    // The partition, wherever this release keeps it: the query, else bits [31:28], else the function bits.
    const order = r.partition ?? (d.partition > 0 ? d.partition : d.fn);
    rsmiGroups.set(k, [...(rsmiGroups.get(k) ?? []), { index: r.index, order: order * 4096 + r.index }]);
  }
  for (const [k, hs] of hipGroups) {
    const rs = rsmiGroups.get(k);
    if (!rs) continue;
    hs.sort((a, b) => a.fn - b.fn || a.index - b.index);
    rs.sort((a, b) => a.order - b.order);
    if (hs.length === rs.length) hs.forEach((h, i) => out.set(h.index, rs[i]!.index));
  }
  return out;
}
