/** When uploadFile may try cuFile: decided from the backend's capabilities and the memory, before any library is loaded. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Backend } from '../backend/backend.js';
import { createHostBackend } from '../backend/host/host-backend.js';
import { Runtime } from '../runtime/runtime.js';
import { cufileUnavailable } from './cufile-path.js';

const runtimeWith = (gpuDirectStorage: boolean): Runtime => {
  const host = createHostBackend({ devices: 1, deviceBytes: 64 << 20 });
  const backend: Backend = Object.create(host, { capabilities: { value: Object.freeze({ ...host.capabilities, gpuDirectStorage }) } });
  return new Runtime({ backend, how: 'requested', attempts: [] });
};

test('a backend without GPUDirect Storage is never offered cuFile, whatever the memory; one with it is refused only managed memory first', () => {
  {
    using rt = runtimeWith(false);
    using dst = rt.device(0).alloc(4096);
    assert.equal(cufileUnavailable(rt.backend, dst, false), "cuFile is NVIDIA's (the host backend has none)");
  }
  using rt = runtimeWith(true);
  using managed = rt.device(0).allocManaged(4096);
  assert.equal(cufileUnavailable(rt.backend, managed, false), 'cuFile moves files to and from device memory, not managed memory');
});
