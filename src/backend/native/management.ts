/** What the management libraries (NVML, ROCm SMI) share: opening once on first use, and reading their record lists. */

/**
 * A management library (NVML, ROCm SMI) opened on first use: initialised once, or the reason it cannot be; each
 * device's handle found once and kept; shut down with the backend.
 */
export class LazyManagement {
  private state: true | string | undefined;
  private readonly handles = new Map<number, number>();

  constructor(private readonly hooks: { init: () => true | string; shutdown: () => void }) {}

  /** The handle of `device` (`find` looks it up the first time), or why there is none. */
  handle(device: number, find: () => number | string): number | string {
    this.state ??= this.hooks.init();
    if (this.state !== true) return this.state;
    const known = this.handles.get(device);
    if (known !== undefined) return known;
    const found = find();
    if (typeof found === 'number') this.handles.set(device, found);
    return found;
  }

  /** Shuts the library down if it was initialised; later calls answer `reason`. */
  close(reason: string): void {
    if (this.state === true) this.hooks.shutdown();
    this.state = reason;
  }
}

/** The most records a management library's list is believed to hold. */
const MAX_RECORDS = 65_536;

/**
 * Reads a list a management library fills into a caller's buffer of fixed-size records (NVML's and ROCm SMI's
 * process lists): `call(buffer, count)` with `count[0]` the capacity in records on input and the records written
 * on output. Grows the buffer while the library answers `insufficient`; answers the buffer and the record count, or
 * undefined when the call fails.
 */
export function readRecords(
  call: (buffer: Buffer, count: number[]) => number,
  recordBytes: number,
  codes: { success: number; insufficient: number },
): { buffer: Buffer; count: number } | undefined {
  let capacity = 64;
  for (let attempt = 0; attempt < 4; attempt++) {
    const count = [capacity];
    const buffer = Buffer.alloc(capacity * recordBytes);
    const status = call(buffer, count);
    if (status === codes.insufficient) {
      // A process list beyond MAX_RECORDS is not believed (and not allocated for).
      capacity = Math.max(capacity * 2, (count[0] ?? 0) + 16);
      if (!Number.isSafeInteger(capacity) || capacity > MAX_RECORDS) return undefined;
      continue;
    }
    return status === codes.success ? { buffer, count: Math.min(count[0]!, capacity) } : undefined;
  }
  return undefined;
}
