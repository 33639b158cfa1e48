/**
 * The copy bandwidths savings are computed with: measured by `gpumem bench` (--from-bench FILE), or built in per
 * device. Every figure carries where it came from, and the output prints it.
 */
import { BadInputError } from '../errors.js';
import { largestCopyRows, readBenchReport } from '../formats/bench-file.js';
import { GPUS, type GpuSpec } from '../catalogue/gpus.js';

export interface CopyRates {
  /** Pinned host to device, GB/s (1e9 bytes). */
  HtoD: number;
  /** Device to pinned host, GB/s. */
  DtoH: number;
  /** Where the figures come from. */
  source: string;
  /**
   * True when the figures were not measured on the machine the trace comes from (built-in figures): the output then
   * says that the savings rest on an assumption, and whose.
   */
  assumed: boolean;
}

/** Pinned copies on an H200 (PCIe 5.0 x16) at 1 GiB, measured by `gpumem bench` (fixtures/bench/h200-bench.json). */
const H200_MEASURED = { HtoD: 55.5, DtoH: 55.4 };
/** What those measured figures are of the theoretical 63 GB/s link: the factor applied to other devices' links. */
export const LINK_EFFICIENCY = 0.88;

/** The catalogue GPU a trace's device name refers to, if any. */
export function gpuForDeviceName(name: string): GpuSpec | undefined {
  const n = name.toLowerCase();
  const hits = Object.values(GPUS).filter((g) => {
    const short = g.name
      .toLowerCase()
      .replace(/^(nvidia|amd)\s+(geforce\s+|instinct\s+)?/, '')
      .split(/[\s(]/)[0]!;
    return n.includes(short);
  });
  return hits.find((g) => n.includes(g.name.toLowerCase())) ?? hits.find((g) => /pcie/.test(n) === /pcie/i.test(g.name)) ?? hits[0];
}

/** Built-in rates for a device name (or for an unknown device). */
export function defaultRates(deviceName: string | undefined): CopyRates {
  const g = deviceName ? gpuForDeviceName(deviceName) : undefined;
  if (g?.name === 'NVIDIA H200')
    return {
      ...H200_MEASURED,
      assumed: true,
      source:
        'assumed: pinned copies that gpumem bench measured on another NVIDIA H200, PCIe 5.0 x16 (55.5 / 55.4 GB/s); pass --from-bench with a bench of this machine',
    };
  if (g) {
    const r = +(g.hostLinkGBps * LINK_EFFICIENCY).toFixed(1);
    return {
      HtoD: r,
      DtoH: r,
      assumed: true,
      source: `assumed: ${LINK_EFFICIENCY * 100}% of the ${g.name}'s ${g.hostLinkGBps} GB/s host link, the share of its link that gpumem bench measured on an NVIDIA H200 (not measured on ${g.vendor === 'amd' ? 'any AMD GPU' : `a ${g.name}`}); pass --from-bench with a bench of this machine`,
    };
  }
  const r = +(31.5 * LINK_EFFICIENCY).toFixed(1);
  return {
    HtoD: r,
    DtoH: r,
    assumed: true,
    source: `assumed: ${deviceName ? `device "${deviceName}" is not in gpumem's catalogue` : 'the trace does not name its device'}, so ${LINK_EFFICIENCY * 100}% of a PCIe 4.0 x16 link (31.5 GB/s); measure it with gpumem bench --json and pass --from-bench`,
  };
}

/**
 * Rates measured by gpumem bench: the pinned copy rows at the largest size of the first device.
 * @throws BadInputError when the file is not bench JSON or has no pinned copy rows.
 */
export function ratesFromBench(file: string, device = 0): CopyRates {
  const report = readBenchReport(file);
  const dev = report.environment.devices.find((d) => d.index === device) ?? report.environment.devices[0];
  const index = dev?.index ?? 0;
  const h = largestCopyRows(report, index, 'HtoD', 'pinned')[0];
  const d = largestCopyRows(report, index, 'DtoH', 'pinned')[0];
  if (!h?.medianGBps || !d?.medianGBps)
    throw new BadInputError('the bench JSON has no pinned HtoD / DtoH copy rows (run gpumem bench without --only, or with the copy group)', file);
  return {
    HtoD: h.medianGBps,
    DtoH: d.medianGBps,
    assumed: false,
    source: `${file}: pinned copies of ${h.bytes} bytes measured by gpumem bench on ${dev?.name ?? `device ${index}`} (${report.environment.date.slice(0, 10)})`,
  };
}
