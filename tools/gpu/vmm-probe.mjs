// Probes the virtual memory API through gpumem's cuda backend: granularity, reserve, create, map, access, unmap.
import { openRuntime } from '../../dist/index.js';
const rt = openRuntime({ backend: 'cuda' });
const v = rt.backend.vmm;
const g = v.granularity(0);
console.log('granularity', g, typeof g);
for (const [bytes, align] of [[g, 0], [g, g], [4 * 2 ** 30, g], [4 * 2 ** 30, 0]]) {
  try {
    const a = v.reserve(bytes, align);
    console.log('reserve', bytes, align, '->', a.toString(16));
    v.free(a, bytes);
  } catch (e) {
    console.log('reserve', bytes, align, 'failed', e.message);
  }
}
rt.device(0).memGetInfo();
try {
  const a = v.reserve(4 * 2 ** 30, g);
  const h = v.create(0, g);
  v.map(a, g, h);
  v.setAccess(a, g, 0);
  console.log('mapped at', a.toString(16));
  v.unmap(a, g);
  v.release(h);
  v.free(a, 4 * 2 ** 30);
  console.log('vmm ok after context init');
} catch (e) {
  console.log('after context init failed', e.message);
}
rt[Symbol.dispose]();
