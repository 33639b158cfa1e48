/** Runs the memory conformance suite on every backend that has a device here: host always, cuda and hip where present. */
import { forEachGpuBackend } from '../testing/harness.js';
import { openRuntime } from '../runtime/runtime.js';
import { memoryConformance } from './memory.case.js';

memoryConformance('host', () => openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 30 } }));
memoryConformance('host, 2 devices', () => openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 30 } }));

await forEachGpuBackend('memory conformance', (name, open) => memoryConformance(name, open));
