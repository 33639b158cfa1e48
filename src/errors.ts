/**
 * Errors thrown by gpumem. Every error is a {@link GpuError} with a stable `code`; match on the code, not the message.
 * Bad input is rejected in TypeScript before any native call, so a wrong size or a freed pointer never reaches the driver.
 */

/** Stable error codes. New codes may be added; existing ones never change meaning. */
export const ErrorCode = {
  /** A native call failed; `status` and `statusName` carry the runtime's own code and name. */
  NATIVE: 'GPUMEM_NATIVE_ERROR',
  /** The device or pool has not enough free memory for the request. */
  OUT_OF_MEMORY: 'GPUMEM_OUT_OF_MEMORY',
  /** An argument is malformed: a size, an offset, an option. */
  INVALID_ARGUMENT: 'GPUMEM_INVALID_ARGUMENT',
  /** A size is negative, fractional, NaN, zero where zero is not allowed, or beyond what can be addressed. */
  INVALID_SIZE: 'GPUMEM_INVALID_SIZE',
  /** An offset or length reaches outside the allocation. */
  OUT_OF_BOUNDS: 'GPUMEM_OUT_OF_BOUNDS',
  /** An address that gpumem did not allocate (or that belongs to another runtime or pool). */
  FOREIGN_ADDRESS: 'GPUMEM_FOREIGN_ADDRESS',
  /** An object (allocation, stream, event, pool, runtime) was used after it was freed or disposed. */
  DISPOSED: 'GPUMEM_DISPOSED',
  /** `free()` called on an allocation that was already freed. */
  DOUBLE_FREE: 'GPUMEM_DOUBLE_FREE',
  /** A stream, event or allocation of one device was used with another device. */
  WRONG_DEVICE: 'GPUMEM_WRONG_DEVICE',
  /** The requested operation is not supported by this backend or device (see `capabilities`). */
  UNSUPPORTED: 'GPUMEM_UNSUPPORTED',
  /** A library could not be found or loaded, or the runtime answered that no device is usable. */
  BACKEND_UNAVAILABLE: 'GPUMEM_BACKEND_UNAVAILABLE',
  /** A sticky device error (illegal address, launch failure...) happened earlier; the backend can no longer be used. */
  DEVICE_UNUSABLE: 'GPUMEM_DEVICE_UNUSABLE',
  /** A blocking call would wait for a host callback that needs this thread to run. */
  WOULD_DEADLOCK: 'GPUMEM_WOULD_DEADLOCK',
  /** A kernel failed to compile; `log` holds the compiler's output. */
  COMPILE_FAILED: 'GPUMEM_COMPILE_FAILED',
  /** An input file (trace, config, bench JSON) is malformed. */
  BAD_INPUT: 'GPUMEM_BAD_INPUT',
  /** The monitor's HTTP server could not listen (the port is in use, or the address cannot be bound). */
  LISTEN_FAILED: 'GPUMEM_LISTEN_FAILED',
  /** Memory is in use by a transfer still in flight: freeing it is refused until the transfer settles. */
  BUSY: 'GPUMEM_BUSY',
  /** A transfer or other long operation stopped because its AbortSignal fired. */
  ABORTED: 'GPUMEM_ABORTED',
  /** The call does not fit the object's state (a stream being captured synchronized, a graph launched after disposal). */
  INVALID_STATE: 'GPUMEM_INVALID_STATE',
  /** A worker thread stopped or threw an unexpected error (the message names its input). */
  WORKER_FAILED: 'GPUMEM_WORKER_FAILED',
  /**
   * A file read or write failed (the errno's value and name in `status` / `statusName`), or the file ended before
   * the bytes a transfer needed (`statusName` EOF: it was shorter than when the transfer was checked).
   */
  IO_ERROR: 'GPUMEM_IO_ERROR',
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Fields common to every gpumem error. */
export interface GpuErrorOptions {
  backend?: string | undefined;
  /** The runtime's raw status code (cudaError_t, hipError_t, ...). */
  status?: number | undefined;
  /** The runtime's name for `status` (cudaErrorMemoryAllocation, ...). */
  statusName?: string | undefined;
  cause?: unknown;
}

/** Base class of every error gpumem throws. */
export class GpuError extends Error {
  readonly code: ErrorCodeValue;
  readonly backend: string | undefined;
  readonly status: number | undefined;
  readonly statusName: string | undefined;

  constructor(code: ErrorCodeValue, message: string, options: GpuErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GpuError';
    this.code = code;
    this.backend = options.backend;
    this.status = options.status;
    this.statusName = options.statusName;
  }
}

/** Facts attached to an out-of-memory error. Pools add their statistics. */
export interface OutOfMemoryDetails {
  requestedBytes: number;
  device?: number | undefined;
  freeBytes?: number | undefined;
  totalBytes?: number | undefined;
  /** A pool's statistics at the time of the failure. */
  poolStats?: Record<string, unknown> | undefined;
  largestFreeBlockBytes?: number | undefined;
}

/** Thrown only for a real out-of-memory condition: the runtime or a pool's limit refused the request. */
export class OutOfMemoryError extends GpuError {
  readonly requestedBytes: number;
  readonly device: number | undefined;
  readonly freeBytes: number | undefined;
  readonly totalBytes: number | undefined;
  readonly poolStats: Record<string, unknown> | undefined;
  readonly largestFreeBlockBytes: number | undefined;

  constructor(message: string, details: OutOfMemoryDetails, options: GpuErrorOptions = {}) {
    super(ErrorCode.OUT_OF_MEMORY, message, options);
    this.name = 'OutOfMemoryError';
    this.requestedBytes = details.requestedBytes;
    this.device = details.device;
    this.freeBytes = details.freeBytes;
    this.totalBytes = details.totalBytes;
    this.poolStats = details.poolStats;
    this.largestFreeBlockBytes = details.largestFreeBlockBytes;
  }
}

/** A malformed argument, rejected before any native call. */
export class InvalidArgumentError extends GpuError {
  constructor(message: string, code: ErrorCodeValue = ErrorCode.INVALID_ARGUMENT, options: GpuErrorOptions = {}) {
    super(code, message, options);
    this.name = 'InvalidArgumentError';
  }
}

/** Use of an object after it was freed or disposed, or a second `free()`. */
export class DisposedError extends GpuError {
  constructor(message: string, code: ErrorCodeValue = ErrorCode.DISPOSED, options: GpuErrorOptions = {}) {
    super(code, message, options);
    this.name = 'DisposedError';
  }
}

/** A backend cannot be used here: a library is missing or broken, or the runtime reports no usable device. */
export class BackendUnavailableError extends GpuError {
  /** The library file that failed, when one did. */
  readonly library: string | undefined;
  /** The environment variable that overrides the library's path. */
  readonly envVar: string | undefined;

  constructor(message: string, details: { library?: string; envVar?: string } = {}, options: GpuErrorOptions = {}) {
    super(ErrorCode.BACKEND_UNAVAILABLE, message, options);
    this.name = 'BackendUnavailableError';
    this.library = details.library;
    this.envVar = details.envVar;
  }
}

/** An input file that cannot be read as what it claims to be. `file` names it. */
export class BadInputError extends GpuError {
  readonly file: string | undefined;
  constructor(message: string, file?: string, options: GpuErrorOptions = {}) {
    super(ErrorCode.BAD_INPUT, file ? `${file}: ${message}` : message, options);
    this.name = 'BadInputError';
    this.file = file;
  }
}

/** True when `e` is a GpuError, optionally with the given code. */
export function isGpuError(e: unknown, code?: ErrorCodeValue): e is GpuError {
  return e instanceof GpuError && (code === undefined || e.code === code);
}
