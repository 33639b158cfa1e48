/**
 * Pool replay's what-ifs of a memory snapshot, per GPU, as the analyzer's fragmentation rule takes them: what the
 * recording allocator reserved at its peak, and what each default pool configuration reserves at its peak when the
 * same allocations are replayed against it.
 */
import type { PoolWhatIf } from '../analyze/model.js';
import { deviceTrace, type PytorchSnapshot } from '../formats/pytorch-snapshot.js';
import { EventKind } from '../formats/trace-events.js';
import { replay, replayPeaks, type ReplayReport } from './replay.js';

/** Each GPU's replay, for the GPUs of the snapshot that have allocation events. */
export function replaysOf(snap: PytorchSnapshot): Map<number, ReplayReport> {
  const out = new Map<number, ReplayReport>();
  if (!snap.hasDeviceTraces) return out;
  for (const d of snap.devices) if (d.events.count(EventKind.Alloc) > 0) out.set(d.device, replay(deviceTrace(snap, d.device)));
  return out;
}

/** A replay as the what-if a finding rests on; undefined where the trace does not say what the recording allocator reserved. */
export function whatIfOf(r: ReplayReport): PoolWhatIf | undefined {
  if (r.trace.peakReservedBytes === undefined) return undefined;
  return {
    device: r.trace.device,
    recordedPeakReservedBytes: r.trace.peakReservedBytes,
    configurations: r.configurations.map((c) => ({ name: c.name, description: c.description, peakReservedBytes: c.peakReservedBytes })),
  };
}

/** The what-ifs of every GPU of the snapshot with allocation events, from one replay per configuration each. */
export function whatIfsOf(snap: PytorchSnapshot): PoolWhatIf[] {
  const out: PoolWhatIf[] = [];
  if (!snap.hasDeviceTraces) return out;
  for (const d of snap.devices) {
    if (d.events.count(EventKind.Alloc) === 0) continue;
    const p = replayPeaks(deviceTrace(snap, d.device));
    if (p.recordedPeakReservedBytes !== undefined)
      out.push({ device: d.device, recordedPeakReservedBytes: p.recordedPeakReservedBytes, configurations: p.configurations });
  }
  return out;
}
