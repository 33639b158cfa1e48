/** What `gpumem info` reports: backend, versions, libraries and each device's facts. */
import type { DeviceInfo, LibraryRecord, PeerLink } from '../backend/backend.js';
import type { BackendAttempt } from '../backend/select.js';
import type { Runtime } from '../runtime/runtime.js';

/** The JSON shape of `gpumem info --json`. Values that could not be read are absent. */
export interface InfoReport {
  backend: string;
  runtimeVersion?: string | undefined;
  driverVersion?: string | undefined;
  /** The vendor install the libraries came from (ROCm), where it is one folder. */
  install?: string | undefined;
  libraries: LibraryRecord[];
  capabilities: Record<string, boolean>;
  /** Why the backend has no device, when it has none. */
  noDevice?: string | undefined;
  /** What detection tried before choosing this backend. */
  detection: BackendAttempt[];
  devices: DeviceInfo[];
  /** What connects each ordered pair of devices (from one device to another), where there are two or more. */
  links: DeviceLink[];
}

export interface DeviceLink extends PeerLink {
  from: number;
  to: number;
}

/** Every ordered pair's link: peer access is asked per direction, and a runtime may grant one way only. */
export function deviceLinks(rt: Runtime): DeviceLink[] {
  const out: DeviceLink[] = [];
  const n = rt.devices.length;
  for (let from = 0; from < n; from++) for (let to = 0; to < n; to++) if (from !== to) out.push({ from, to, ...rt.backend.peerLink(from, to) });
  return out;
}

/** Collects the info report from an open runtime. */
export function collectInfo(rt: Runtime): InfoReport {
  const b = rt.backend;
  const report: InfoReport = {
    backend: b.name,
    runtimeVersion: b.runtimeVersion,
    driverVersion: b.driverVersion,
    install: b.installRoot,
    libraries: [...b.libraries],
    capabilities: { ...b.capabilities },
    noDevice: rt.devices.length === 0 ? (b.noDeviceReason() ?? 'no device') : undefined,
    detection: rt.selection.attempts,
    devices: rt.devices.map((d) => d.info()),
    links: deviceLinks(rt),
  };
  for (const k of ['runtimeVersion', 'driverVersion', 'install', 'noDevice'] as const) if (report[k] === undefined) delete report[k];
  return report;
}
