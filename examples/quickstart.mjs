// gpumem in one page: run with `node examples/quickstart.mjs` (a GPU through cuda or hip, else the host backend).
import { CachingPool, DeviceResource, openRuntime } from 'gpumem';

const rt = openRuntime(); // hip, cuda, or the host backend (CPU memory) when there is no GPU
try {
  const gpu = rt.device(0);
  console.log(`backend ${rt.backend.name}, device 0: ${gpu.info().name}`);

  // A JS array to the GPU and back: staged through pinned chunks on threads.
  const n = 1 << 22; // 4 Mi floats, 16 MiB
  const weights = Float32Array.from({ length: n }, (_, i) => i % 1000);
  const dev = gpu.alloc(weights.byteLength);
  const up = await rt.upload(dev, weights);
  console.log(`upload: ${up.path}, ${up.gbps.toFixed(1)} GB/s`);

  // A kernel: CUDA/HIP source compiled at run time for the GPU, and its JavaScript twin for the host backend.
  const scale = gpu
    .loadModule({
      name: 'quickstart',
      source: `extern "C" __global__ void scale(float *x, float k, unsigned long long n) {
        unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
        if (i < n) x[i] *= k;
      }`,
      kernels: { scale: ['ptr', 'f32', 'u64'] },
      host: {
        scale: (mem, _config, [x, k, count]) => {
          const b = mem.bytes(Number(x), Number(count) * 4);
          const a = new Float32Array(b.buffer, b.byteOffset, Number(count));
          for (let i = 0; i < a.length; i++) a[i] *= Number(k);
        },
      },
    })
    .kernel('scale');

  // Small copies batched into one call, and a chain of work captured once and replayed in one call.
  const stream = gpu.createStream();
  const pinned = rt.allocPinned(64 * 4096);
  pinned.typed(Float32Array).fill(1);
  rt.copyBatch(
    Array.from({ length: 64 }, (_, i) => ({ dst: dev, src: pinned, dstOffset: i * 4096, srcOffset: i * 4096, bytes: 4096 })),
    { stream },
  );
  let steps = 0;
  const step = rt.capture(stream, (g) => {
    scale.launch({ grid: n / 256, block: 256, stream }, dev, 2, n);
    g.onHost(() => steps++);
  });
  await step.launch();
  await step.launch();

  const back = new Float32Array(n);
  await rt.download(back, dev);
  console.log(`after two steps: x[0] = ${back[0]} (the batch wrote 1, scaled twice), x[${n - 1}] = ${back[n - 1]}; host steps ${steps}`);
  step[Symbol.dispose]();
  stream[Symbol.dispose]();
  pinned[Symbol.dispose]();
  dev[Symbol.dispose]();

  // A caching pool: the second allocation of a size is served from the cache, with no native call.
  const pool = new CachingPool(new DeviceResource(gpu));
  const a = pool.allocate(1 << 20);
  pool.deallocate(a, 1 << 20);
  const b = pool.allocate(1 << 20);
  pool.deallocate(b, 1 << 20);
  console.log(`pool: ${pool.stats().cacheHits} cache hit(s), ${pool.stats().cacheMisses} miss(es)`);
  pool[Symbol.dispose]();
} finally {
  rt[Symbol.dispose](); // frees whatever is still allocated
}
