/**
 * A host runtime whose backend records the name of every call that reaches it: the tests that say a bad argument is
 * refused before any backend call read `calls`.
 */
import type { Backend } from '../backend/backend.js';
import { createHostBackend } from '../backend/host/host-backend.js';
import { Runtime } from '../runtime/runtime.js';

/** A runtime over a host backend of `devices` devices of 64 MiB, and the calls its backend saw. */
export function spiedRuntime(devices = 1): { rt: Runtime; calls: string[] } {
  const calls: string[] = [];
  const inner = createHostBackend({ devices, deviceBytes: 1 << 26 });
  const backend = new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as Backend;
  return { rt: new Runtime({ backend, how: 'requested', attempts: [] }), calls };
}
