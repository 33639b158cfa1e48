/** A machine from a gpumem bench JSON (Node only: it reads the file). */
import { largestCopyRows, readBenchReport } from '../formats/bench-file.js';
import { BadInputError } from '../errors.js';
import type { Machine } from './plan.js';

/** Reads a gpumem bench JSON for capacity and measured bandwidths. @throws BadInputError */
export function machineFromBench(file: string): Machine {
  const report = readBenchReport(file);
  if (report.environment.backend === 'host')
    throw new BadInputError(
      "the bench was measured on the host backend (no GPU): its capacity is this machine's RAM and its copies are memcpy. Give --gpu NAME, or a bench run on the GPU",
      file,
    );
  const dev = report.environment.devices[0];
  if (!dev?.totalBytes) throw new BadInputError('the bench JSON has no device capacity', file);
  const rows = [...largestCopyRows(report, dev.index, 'HtoD', 'pinned'), ...largestCopyRows(report, dev.index, 'DtoH', 'pinned')];
  const top = Math.max(0, ...rows.map((r) => r.bytes));
  const atTop = rows.filter((r) => r.bytes === top).map((r) => r.medianGBps!);
  const link = atTop.length ? Math.min(...atTop) : (dev.peaks.linkGBps ?? 16);
  return {
    name: `${dev.name ?? 'device'} (measured by gpumem bench, ${report.environment.date})`,
    capacityBytes: dev.totalBytes,
    capacitySource: `${file}: device ${dev.index} total memory`,
    hostLinkGBps: link,
    hostLinkSource: atTop.length ? `${file}: pinned copies at ${top} bytes, the slower direction` : `${file}: theoretical link`,
    hostMemoryBytes: undefined,
    nvmeGBps: 5,
  };
}
