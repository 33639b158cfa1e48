/** The CLI's own errors and the exit code each kind of failure gets. */
import { ErrorCode, GpuError } from '../errors.js';
import { STOP_SIGNALS, type StopSignal } from './signals.js';

/** A usage error raised by a command's own option checks: the CLI prints it and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Thrown after an interrupt has been reported; the CLI exits 130 (143 when SIGTERM stopped it). */
export class Interrupted extends Error {
  override readonly name = 'Interrupted';
  constructor(readonly signal: StopSignal = 'SIGINT') {
    super('interrupted');
  }

  /** 128 + the signal's number, as a shell reports a process the signal ended. */
  get exitCode(): number {
    return STOP_SIGNALS[this.signal];
  }
}

const USAGE_CODES = new Set<string>([
  ErrorCode.INVALID_ARGUMENT,
  ErrorCode.INVALID_SIZE,
  ErrorCode.OUT_OF_BOUNDS,
  ErrorCode.BAD_INPUT,
  ErrorCode.UNSUPPORTED,
  ErrorCode.FOREIGN_ADDRESS,
  ErrorCode.WRONG_DEVICE,
]);

/** Errors of the file system that come from the paths a user gave (whichever command meets them): exit 2. */
const PATH_ERRNOS = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EROFS', 'ELOOP', 'ENAMETOOLONG']);

/**
 * Exit code for an error: 130 for an interrupt, 2 for bad input or an impossible request (a path that cannot be read
 * or written included, whether a check before the work or the write after it meets it), 1 for anything else.
 */
export function exitCodeFor(e: unknown): number {
  if (e instanceof Interrupted) return e.exitCode;
  const errno = (e as NodeJS.ErrnoException | undefined)?.code;
  if (!(e instanceof GpuError) && typeof errno === 'string' && PATH_ERRNOS.has(errno)) return 2;
  if (e instanceof GpuError && USAGE_CODES.has(e.code)) return 2;
  if (e instanceof UsageError) return 2;
  return 1;
}
