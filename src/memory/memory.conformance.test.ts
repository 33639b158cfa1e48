/** Runs the memory conformance suite on every backend that has a device here: host always, cuda and hip where present. */
import { test } from 'node:test';
import { openRuntime } from './runtime.js';
import { memoryConformance } from './memory.case.js';

memoryConformance('host', () => openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 30 } }));
memoryConformance('host, 2 devices', () => openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 30 } }));

for (const name of ['cuda', 'hip'] as const) {
  let devices = 0;
  let why = '';
  try {
    using rt = openRuntime({ backend: name });
    devices = rt.devices.length;
    why = rt.backend.noDeviceReason() ?? '';
  } catch (e) {
    why = (e as Error).message.split('\n')[0]!;
  }
  if (devices > 0) memoryConformance(name, () => openRuntime({ backend: name }));
  else test(`${name}: memory conformance`, { skip: `no ${name} device here (${why})` }, () => {});
}
