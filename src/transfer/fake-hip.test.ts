/**
 * The transfer engine's conformance suite on the real HIP backend over a fake libamdhip64 (backend/hip/fake: built
 * with cc here; "device" memory is host memory and copies are memcpy at the call; no GPU involved). Where the host
 * backend copies on the JS thread, here the engine runs as on a GPU: the library loaded through koffi, the host
 * copier's worker threads pinning the ring's slots with hipHostMalloc and doing the chunks' host copies and file
 * reads, hipMemcpyBatchAsync (ROCm 7.1: without attributes) carrying chunks of many pieces. The cases that compile
 * kernels or replay captured graphs are left out (the fake has no compiler and runs no graph).
 */
import { after } from 'node:test';
import { FakeRocm, haveCompiler, RELEASES, useFakeEnvironment } from '../backend/hip/fake/fake-rocm.js';
import { openRuntime } from '../runtime/runtime.js';
import { fileConformance } from './file.case.js';
import { manyConformance } from './many.case.js';
import { transferConformance } from './transfer.case.js';

if (haveCompiler()) {
  const fake = new FakeRocm();
  const restore = useFakeEnvironment({ GPUMEM_LIBAMDHIP64: fake.install('rocm-7.1.0', RELEASES['7.1']!).hip });
  after(() => {
    restore();
    fake.dispose();
  });
  const open = () => openRuntime({ backend: 'hip' });
  transferConformance('hip (fake ROCm 7.1 library)', open, { graphs: false });
  manyConformance('hip (fake ROCm 7.1 library)', open);
  fileConformance('hip (fake ROCm 7.1 library)', open);
} else {
  const { test } = await import('node:test');
  test('transfer conformance on a fake ROCm library', { skip: 'no C compiler (cc) to build the fake ROCm libraries' }, () => {});
}
