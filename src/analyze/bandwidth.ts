/**
 * The copy bandwidths savings are computed with: measured by `gpumem bench` (--from-bench FILE), or the host link of
 * the trace's device as the catalogue knows it, or, for a device it does not know, the trace's own fastest copies
 * (never another GPU's figures). Every figure carries where it came from, and the output prints it.
 */
import { BadInputError } from '../errors.js';
import { largestCopyRows, readBenchReport } from '../formats/bench-file.js';
import { describeLink, hostLinkGBps, identifyDevice, type Identified } from '../catalogue/devices.js';
import { Direction, MemKind, TraceModel } from './model.js';

export interface CopyRates {
  /** Pinned host to device, GB/s (1e9 bytes); null where nothing gives a figure (no catalogue device, no sized copy). */
  HtoD: number | null;
  /** Device to pinned host, GB/s; null as HtoD. */
  DtoH: number | null;
  /** Where the figures come from. */
  source: string;
  /**
   * True when the figures were not measured on the machine the trace comes from (catalogue figures): the output
   * then says that the savings rest on an assumption, and whose.
   */
  assumed: boolean;
  /** What the figures are: a bench of this machine, the catalogue's link for the device, or the trace's own copies. */
  basis: 'bench' | 'catalogue' | 'trace';
}

/** Pinned copies on an H200 (PCIe 5.0 x16) at 1 GiB, measured by `gpumem bench` (fixtures/bench/h200-bench.json). */
const H200_MEASURED = { HtoD: 55.5, DtoH: 55.4 };
/** What those measured figures are of the theoretical 63 GB/s link: the factor applied to other devices' links. */
export const LINK_EFFICIENCY = 0.88;
/** Copies at least this large show a link's rate; smaller ones mostly their fixed cost. */
const RATE_COPY_BYTES = 1 << 20;

/**
 * The fastest host copies of a trace per direction, GB/s: of 1 MiB or more where there are any, else of any size;
 * and the fastest copies of 1 MiB or more known to be from or to pinned memory (what the link gave this machine).
 * Copies from or to pageable memory are left out: they show what the driver's staging gave, not what a copy from
 * pinned memory would, and savings are priced at the pinned rate.
 */
export function fastestCopies(model: TraceModel): {
  HtoD: number | null;
  DtoH: number | null;
  from: string;
  pinned: { HtoD: number | null; DtoH: number | null };
  /** Sized host copies left out as pageable. */
  pageable: number;
} {
  const c = model.copies;
  const best = { large: [0, 0], any: [0, 0], pinned: [0, 0] };
  let pageable = 0;
  for (let i = 0; i < c.length; i++) {
    const dir = c.get(i, 'dir');
    const d = dir === Direction.HtoD ? 0 : dir === Direction.DtoH ? 1 : -1;
    const bytes = c.get(i, 'bytes');
    const ns = c.get(i, 'end') - c.get(i, 'start');
    if (d < 0 || !(bytes > 0) || !(ns > 0)) continue;
    const host = c.get(i, d === 0 ? 'src' : 'dst');
    if (host === MemKind.pageable) {
      pageable++;
      continue;
    }
    const rate = bytes / ns;
    if (bytes >= RATE_COPY_BYTES) {
      best.large[d] = Math.max(best.large[d]!, rate);
      if (host === MemKind.pinned) best.pinned[d] = Math.max(best.pinned[d]!, rate);
    }
    best.any[d] = Math.max(best.any[d]!, rate);
  }
  // two decimals, or two significant digits for a rate below 0.01 GB/s (tiny copies), never rounded to 0
  const round = (r: number): number => (+r.toFixed(2) > 0 ? +r.toFixed(2) : +r.toPrecision(2));
  const pick = (d: 0 | 1): number | null => {
    const r = best.large[d]! > 0 ? best.large[d]! : best.any[d]!;
    return r > 0 ? round(r) : null;
  };
  const pinned = (d: 0 | 1): number | null => (best.pinned[d]! > 0 ? round(best.pinned[d]!) : null);
  const large = best.large[0]! > 0 || best.large[1]! > 0;
  const left = pageable > 0 ? ` (its ${pageable} copies from or to pageable memory left out: they show the driver's staging, not a pinned copy)` : '';
  return {
    HtoD: pick(0),
    DtoH: pick(1),
    from: `${large ? 'its fastest host copies of 1 MiB or more' : 'its fastest host copies (none of 1 MiB or more)'}${left}`,
    pinned: { HtoD: pinned(0), DtoH: pinned(1) },
    pageable,
  };
}

/** The device whose copies the savings are about: the one with most host copies, else the first named. */
function copyDevice(model: TraceModel): number | undefined {
  const counts = new Map<number, number>();
  const c = model.copies;
  for (let i = 0; i < c.length; i++) {
    const dir = c.get(i, 'dir');
    if (dir === Direction.HtoD || dir === Direction.DtoH) counts.set(c.get(i, 'device'), (counts.get(c.get(i, 'device')) ?? 0) + 1);
  }
  const busiest = [...counts].sort((a, b) => b[1] - a[1]).find(([d]) => model.devices.has(d))?.[0];
  return busiest ?? [...model.devices.keys()][0];
}

/** The trace's device identified in the catalogue, or why it is not. */
export function traceDevice(model: TraceModel): Identified | undefined {
  const d = copyDevice(model);
  if (d === undefined) return undefined;
  return identifyDevice(model.devices.get(d) ?? '', model.deviceMemory.get(d));
}

/**
 * Rates for a trace: its device's host link from the catalogue (or what gpumem bench measured on an H200), raised
 * to the trace's own fastest copies where those ran faster; for a device the catalogue does not know, the trace's
 * own fastest copies alone.
 */
export function ratesForModel(model: TraceModel): CopyRates {
  const id = traceDevice(model);
  const seen = fastestCopies(model);
  const fromTrace = (why: string): CopyRates => ({
    HtoD: seen.HtoD,
    DtoH: seen.DtoH,
    assumed: false,
    basis: 'trace',
    source:
      seen.HtoD === null && seen.DtoH === null
        ? `none: ${why}, and the trace has no sized host copy ${seen.pageable > 0 ? `other than ${seen.pageable} from or to pageable memory (which show the driver's staging, not a pinned copy) ` : ''}to take a ceiling from; pass --from-bench with a gpumem bench of this machine`
        : `${why}, so the ceiling is the trace's own: ${seen.from} (a lower bound of the link's rate); pass --from-bench with a gpumem bench of this machine`,
  });
  if (!id) return fromTrace('the trace does not name its device');
  if (!id.known) return fromTrace(`device "${id.name}" is not in gpumem's catalogue (${id.reason})`);
  const m = id.model;
  const link = hostLinkGBps(m.link);
  if (link === undefined) return fromTrace(`the ${m.name} shares its memory with the CPU (${describeLink(m.link)})`);
  let HtoD: number;
  let DtoH: number;
  let source: string;
  if (m.name === 'NVIDIA H200') {
    ({ HtoD, DtoH } = H200_MEASURED);
    source = `assumed: pinned copies that gpumem bench measured on another NVIDIA H200, PCIe 5.0 x16 (${HtoD} / ${DtoH} GB/s)`;
  } else {
    HtoD = DtoH = +(link * LINK_EFFICIENCY).toFixed(1);
    const measuredOn = m.vendor === 'amd' ? 'any AMD GPU' : `a ${m.name}`;
    source = `assumed: ${LINK_EFFICIENCY * 100}% of the ${m.name}'s ${describeLink(m.link)} host link (${link} GB/s), the share of its link that gpumem bench measured on an NVIDIA H200 over PCIe 5.0 x16 (not measured on ${measuredOn})`;
  }
  const raised: string[] = [];
  if (seen.HtoD !== null && seen.HtoD > HtoD) raised.push(`HtoD to ${(HtoD = seen.HtoD)}`);
  if (seen.DtoH !== null && seen.DtoH > DtoH) raised.push(`DtoH to ${(DtoH = seen.DtoH)}`);
  if (raised.length > 0) source += `; raised to the trace's own fastest copies (${raised.join(', ')} GB/s)`;
  // Large pinned copies that never came near the assumed rate show what this machine's link gave (a shared PCIe
  // switch, a link trained narrower): savings are priced at that, not at a rate the machine did not show
  const lowered: string[] = [];
  if (seen.pinned.HtoD !== null && seen.pinned.HtoD < HtoD) lowered.push(`HtoD ${(HtoD = seen.pinned.HtoD)}`);
  if (seen.pinned.DtoH !== null && seen.pinned.DtoH < DtoH) lowered.push(`DtoH ${(DtoH = seen.pinned.DtoH)}`);
  if (lowered.length > 0) {
    source += `; lowered to the trace's own fastest pinned copies of 1 MiB or more (${lowered.join(', ')} GB/s), which never reached it`;
    model.note(
      `pinned copies of 1 MiB or more reached at most ${lowered.join(', ')} GB/s, below the ${(link * LINK_EFFICIENCY).toFixed(1)} GB/s the ${m.name}'s ${describeLink(m.link)} link gives: the link may be shared (a PCIe switch) or trained slower or narrower (gpumem info shows the trained link); savings are priced at what this trace shows`,
    );
  }
  return { HtoD, DtoH, assumed: true, basis: 'catalogue', source: `${source}; pass --from-bench with a bench of this machine` };
}

/**
 * Rates for a device name alone (no trace): its catalogue link, or none for a device the catalogue does not know.
 * Kept for callers of gpumem/analyze that have only a name; analysis uses ratesForModel.
 */
export function defaultRates(deviceName: string | undefined, memoryBytes?: number): CopyRates {
  const model = new TraceModel();
  if (deviceName !== undefined) model.devices.set(0, deviceName);
  if (memoryBytes !== undefined) model.deviceMemory.set(0, memoryBytes);
  return ratesForModel(model);
}

/**
 * Rates measured by gpumem bench: the pinned copy rows at the largest size of the first device.
 * @throws BadInputError when the file is not bench JSON, was measured on the host backend (no GPU), or has no pinned
 *   copy rows.
 */
export function ratesFromBench(file: string, device = 0): CopyRates {
  const report = readBenchReport(file);
  if (report.environment.backend === 'host')
    throw new BadInputError(
      "the bench was measured on the host backend (no GPU): its copies are memcpy within this machine's RAM, not a GPU's link. Give a bench run on the GPU, or leave --from-bench out",
      file,
    );
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
    basis: 'bench',
    source: `${file}: pinned copies of ${h.bytes} bytes measured by gpumem bench on ${dev?.name ?? `device ${index}`} (${report.environment.date.slice(0, 10)})`,
  };
}
