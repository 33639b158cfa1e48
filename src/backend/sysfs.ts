/**
 * What Linux's sysfs says about a PCI device: the link's speed and width (current and maximum) and the NUMA node
 * it hangs off. Works for AMD and NVIDIA alike; a value the kernel does not expose stays undefined.
 */
import { readFileSync } from 'node:fs';
import type { PcieLink } from './backend.js';

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** PCIe generation from a per-lane transfer rate in GT/s. */
export function pcieGeneration(gts: number | undefined): number | undefined {
  if (gts === undefined) return undefined;
  const table: Array<[number, number]> = [
    [2.5, 1],
    [5, 2],
    [8, 3],
    [16, 4],
    [32, 5],
    [64, 6],
    [128, 7],
  ];
  for (const [rate, gen] of table) if (Math.abs(gts - rate) < 0.01 * rate) return gen;
  return undefined;
}

/** Parses "16.0 GT/s PCIe" or "32 GT/s" into GT/s. */
export function parseLinkSpeed(text: string | undefined): number | undefined {
  const m = text ? /([\d.]+)\s*GT\/s/.exec(text) : null;
  return m ? Number(m[1]) : undefined;
}

/** Normalises a PCI bus id to sysfs's form: "0000:3b:00.0". */
export function normalisePciBusId(id: string): string {
  const m = /^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])$/i.exec(id.trim());
  if (!m) return id.toLowerCase();
  const domain = (m[1] ?? '0000').slice(-4);
  return `${domain}:${m[2]}:${m[3]}.${m[4]}`.toLowerCase();
}

/** Link state and NUMA node of the PCI device with this bus id. `root` is for tests. */
export function pciFacts(busId: string, root = '/sys/bus/pci/devices'): { link?: PcieLink; numaNode?: number } {
  const dir = `${root}/${normalisePciBusId(busId)}`;
  const speed = parseLinkSpeed(read(`${dir}/current_link_speed`));
  const maxSpeed = parseLinkSpeed(read(`${dir}/max_link_speed`));
  const width = Number(read(`${dir}/current_link_width`));
  const maxWidth = Number(read(`${dir}/max_link_width`));
  const link: PcieLink = {};
  if (speed !== undefined) {
    link.speedGTs = speed;
    link.generation = pcieGeneration(speed);
  }
  if (maxSpeed !== undefined) {
    link.maxSpeedGTs = maxSpeed;
    link.maxGeneration = pcieGeneration(maxSpeed);
  }
  if (Number.isInteger(width) && width > 0) link.width = width;
  if (Number.isInteger(maxWidth) && maxWidth > 0) link.maxWidth = maxWidth;
  const numaText = read(`${dir}/numa_node`);
  const numa = numaText === undefined ? NaN : Number(numaText);
  const out: { link?: PcieLink; numaNode?: number } = {};
  if (Object.keys(link).length > 0) out.link = link;
  // -1 means the platform did not say: absent, not node -1.
  if (Number.isInteger(numa) && numa >= 0) out.numaNode = numa;
  return out;
}

/** Theoretical one-way PCIe bandwidth in GB/s for a generation and width, after line encoding. */
export function pcieBandwidthGBps(generation: number, width: number): number | undefined {
  const perLaneGTs: Record<number, number> = { 1: 2.5, 2: 5, 3: 8, 4: 16, 5: 32, 6: 64 };
  const gts = perLaneGTs[generation];
  if (gts === undefined) return undefined;
  const encoding = generation <= 2 ? 8 / 10 : generation <= 5 ? 128 / 130 : 242 / 256;
  return (gts * encoding * width) / 8;
}

/** The host's NUMA nodes, from sysfs (at least [0] when sysfs says nothing). */
export function numaNodes(root = '/sys/devices/system/node'): number[] {
  const online = read(`${root}/online`);
  if (!online) return [0];
  const nodes: number[] = [];
  for (const part of online.split(',')) {
    const [a, b] = part.split('-').map(Number);
    if (a === undefined || !Number.isInteger(a)) continue;
    for (let n = a; n <= (b ?? a); n++) nodes.push(n);
  }
  return nodes.length ? nodes : [0];
}
