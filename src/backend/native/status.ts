/** A runtime's status codes as gpumem's typed errors: names and texts from the runtime, and which codes mean what. */
import { BackendUnavailableError, ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import type { NativeFn } from './ffi.js';
import type { StatusTable } from './runtime-api.js';

/** Names and texts of status codes, through the runtime's GetErrorName and GetErrorString. */
export class StatusNames {
  constructor(private readonly fn: Record<string, NativeFn>) {}

  /** The runtime's name for a status code. */
  name(status: number): string {
    try {
      return (this.fn.GetErrorName!(status) as string | null) ?? `error ${status}`;
    } catch {
      return `error ${status}`;
    }
  }

  /** The name, and the runtime's text or '' when the text only repeats the name (ROCm 5 does). */
  describe(status: number): { name: string; text: string } {
    const name = this.name(status);
    let text = '';
    try {
      text = (this.fn.GetErrorString!(status) as string | null) ?? '';
    } catch {
      // no text
    }
    return { name, text: text === name ? '' : text };
  }
}

/**
 * The typed error for a failed call: OutOfMemoryError, BackendUnavailableError, DEVICE_UNUSABLE for a sticky status
 * (then `sticky` holds the reason the backend can no longer be used), else NATIVE.
 */
export function errorForStatus(
  backend: string,
  table: StatusTable,
  status: number,
  call: string,
  described: { name: string; text: string },
): { error: GpuError; sticky: string | undefined } {
  const opts = { backend, status, statusName: described.name };
  const message = `${call} failed: ${described.name}${described.text ? ` (${described.text})` : ''}`;
  if (table.sticky.includes(status)) {
    const error = new GpuError(
      ErrorCode.DEVICE_UNUSABLE,
      `${message}; the ${backend} device context is corrupt and the backend can no longer be used (restart the process)`,
      opts,
    );
    return { error, sticky: message };
  }
  if (table.outOfMemory.includes(status)) return { error: new OutOfMemoryError(message, { requestedBytes: NaN }, opts), sticky: undefined };
  if (table.noDevice.includes(status)) return { error: new BackendUnavailableError(message, {}, opts), sticky: undefined };
  return { error: new GpuError(ErrorCode.NATIVE, message, opts), sticky: undefined };
}
