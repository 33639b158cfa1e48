/**
 * Choosing a backend: `--backend` / GPUMEM_BACKEND when given, else detection (hip, then cuda, each only when it
 * sees a device), else the host backend with a notice saying why.
 */
import { BackendUnavailableError, ErrorCode, InvalidArgumentError } from '../errors.js';
import { BACKEND_NAMES, type Backend, type BackendName } from './backend.js';
import { createCudaBackend } from './cuda/cuda-backend.js';
import { createHipBackend } from './hip/hip-backend.js';
import { createHostBackend, type HostBackendOptions } from './host/host-backend.js';

/** What detection tried, for `gpumem info` and the notice. */
export interface BackendAttempt {
  name: BackendName;
  devices?: number | undefined;
  error?: string | undefined;
}

export interface BackendSelection {
  backend: Backend;
  /** How it was chosen. */
  how: 'requested' | 'detected' | 'fallback';
  attempts: BackendAttempt[];
  /** Set when detection fell back to the host backend: print it on stderr. */
  notice?: string | undefined;
}

export interface OpenBackendOptions {
  /** A backend name, or 'auto' (the default: GPUMEM_BACKEND, else detection). */
  backend?: string | undefined;
  host?: HostBackendOptions | undefined;
}

const FACTORIES: Record<BackendName, (o: OpenBackendOptions) => Backend> = {
  hip: () => createHipBackend(),
  cuda: () => createCudaBackend(),
  host: (o) => createHostBackend(o.host),
};

/** True when `name` is a backend name or 'auto'. */
export function isBackendChoice(name: string): name is BackendName | 'auto' {
  return name === 'auto' || (BACKEND_NAMES as readonly string[]).includes(name);
}

/**
 * Opens a backend.
 * @throws InvalidArgumentError for an unknown backend name.
 * @throws BackendUnavailableError when a requested backend's library cannot be loaded, or it sees no device.
 */
export function openBackend(options: OpenBackendOptions = {}): BackendSelection {
  const choice = options.backend ?? process.env.GPUMEM_BACKEND ?? 'auto';
  if (!isBackendChoice(choice)) {
    throw new InvalidArgumentError(`unknown backend "${choice}" (expected one of: auto, ${BACKEND_NAMES.join(', ')})`, ErrorCode.INVALID_ARGUMENT);
  }
  if (choice !== 'auto') {
    const backend = FACTORIES[choice](options);
    const devices = backend.deviceCount();
    if (devices === 0 && choice !== 'host') {
      // An explicit backend that cannot reach a device is unavailable: failing here says why, where an empty backend
      // would only fail later at the first device call.
      const why = backend.noDeviceReason() ?? 'no device';
      backend.dispose();
      throw new BackendUnavailableError(`${choice}: the backend was asked for but has no device (${why})`, {}, { backend: choice });
    }
    return { backend, how: 'requested', attempts: [{ name: choice, devices }] };
  }
  const attempts: BackendAttempt[] = [];
  for (const name of ['hip', 'cuda'] as const) {
    let backend: Backend | undefined;
    try {
      backend = FACTORIES[name](options);
      const devices = backend.deviceCount();
      if (devices > 0) {
        attempts.push({ name, devices });
        return { backend, how: 'detected', attempts };
      }
      attempts.push({ name, devices: 0, error: backend.noDeviceReason() ?? 'no device' });
    } catch (e) {
      const message = e instanceof BackendUnavailableError ? e.message.split('\n')[0]! : (e as Error).message;
      attempts.push({ name, error: message });
    }
    backend?.dispose();
  }
  const why = attempts.map((a) => `${a.name}: ${a.error}`).join('; ');
  return {
    backend: createHostBackend(options.host),
    how: 'fallback',
    attempts,
    notice: `gpumem: no GPU found (${why}); using the host backend (CPU memory, not GPU figures)`,
  };
}
