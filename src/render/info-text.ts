/** `gpumem info`: backend, versions, libraries and every device's memory facts. */
import type { DeviceInfo } from '../backend/backend.js';
import type { InfoReport } from '../report/info.js';
import { formatBytes } from '../units.js';
import { known, yesNo } from './text.js';

function linkText(d: DeviceInfo): string {
  const l = d.link;
  if (!l) return 'unknown';
  const cur = `gen ${known(l.generation)} x${known(l.width)}`;
  const max = l.maxGeneration !== undefined || l.maxWidth !== undefined ? ` (max gen ${known(l.maxGeneration)} x${known(l.maxWidth)})` : '';
  return cur + max;
}

/** Renders the info report as text. */
export function renderInfo(r: InfoReport): string {
  const out: string[] = [];
  out.push(`backend: ${r.backend}${r.runtimeVersion ? `  runtime ${r.runtimeVersion}` : ''}${r.driverVersion ? `  driver ${r.driverVersion}` : ''}`);
  if (r.backend === 'host') out.push('  (the host backend: CPU memory standing in for a GPU; no figure it gives is a GPU figure)');
  if (r.install) out.push(`install: ${r.install}`);
  if (r.libraries.length) {
    out.push('libraries:');
    for (const l of r.libraries) {
      out.push(
        `  ${l.role.padEnd(10)} ${l.loaded ? (l.path ?? l.name) : `${l.name}: not loaded${l.error && !l.error.includes('\n') ? ` (${l.error})` : ''}`}  [${l.envVar}]`,
      );
    }
  }
  const caps = Object.entries(r.capabilities)
    .filter(([, v]) => v)
    .map(([k]) => k);
  out.push(`capabilities: ${caps.join(', ') || 'none'}`);
  if (r.noDevice) out.push(`no device: ${r.noDevice}`);
  for (const d of r.devices) {
    out.push('');
    out.push(
      `device ${d.index}: ${known(d.name)}  (${known(d.arch)}${d.archName && d.archName !== d.arch ? `, ${d.archName}` : ''}${d.computeCapability ? `, compute ${d.computeCapability}` : ''})`,
    );
    out.push(`  memory          ${known(d.totalBytes, formatBytes)} total, ${known(d.freeBytes, formatBytes)} free`);
    if (d.memorySource) out.push(`                  ${d.memorySource}`);
    out.push(`  compute units   ${known(d.multiprocessors)}    L2 ${known(d.l2Bytes, formatBytes)}    async copy engines ${known(d.asyncEngines)}`);
    out.push(
      `  managed memory  ${yesNo(d.managedMemory)}; concurrent managed access ${yesNo(d.concurrentManagedAccess)}; pageable memory access ${yesNo(d.pageableMemoryAccess)}`,
    );
    if (d.xnack)
      out.push(
        `  XNACK           ${d.xnack.enabled === undefined ? 'unknown' : d.xnack.enabled ? 'on' : 'off'}${d.xnack.source === 'runtime' ? ' (the runtime: pageable memory access)' : d.xnack.source === 'arch' ? ' (the target ID)' : ''}; target ${d.xnack.arch === undefined ? 'has no xnack setting' : d.xnack.arch ? 'xnack+' : 'xnack-'}; HSA_XNACK=${d.xnack.env ?? '(unset)'}`,
      );
    out.push(`  integrated      ${yesNo(d.integrated)}    maps host memory ${yesNo(d.canMapHostMemory)}`);
    if (d.memoryBusWidthBits !== undefined)
      out.push(`  memory bus      ${d.memoryBusWidthBits} bits at ${known(d.memoryClockKHz, (k) => `${(k / 1000).toFixed(0)} MHz`)}`);
    out.push(`  PCI             ${known(d.pciBusId)}  link ${linkText(d)}  NUMA node ${known(d.numaNode)}`);
  }
  if (r.links.length) {
    out.push('');
    out.push('links between devices:');
    for (const l of r.links)
      out.push(`  ${l.from} -> ${l.to}  ${l.kind.padEnd(7)}  peer access ${yesNo(l.peerAccess)}${l.detail ? `  ${l.detail}` : ''}  (${l.source})`);
  }
  return out.join('\n');
}
