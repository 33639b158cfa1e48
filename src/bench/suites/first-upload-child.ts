/**
 * One fresh process's first upload, for `gpumem bench --only transfer`, timed from the call until its promise
 * resolves. ORDER `source-first`: the source is filled before gpumem is loaded, then the runtime opens, the destination
 * is allocated and the upload starts at once (nothing had time to start in the background). `runtime-first`: the
 * runtime opens and the destination is allocated first, then the program fills its source (as one that opens the
 * runtime, then reads or computes its data), then uploads. Prints one JSON line: {"ms": ..., "verified": ..., "threads": ..., "chunkBytes": ...}, with
 * where the time before it went (opening, allocating, the host threads' start), when the first device copy was
 * enqueued, the same upload again in the same process (secondMs: the steady rate there and then), and what pinning
 * costs here.
 *   node first-upload-child.js BACKEND DEVICE BYTES [source-first|runtime-first]
 */
const [backend = 'cuda', deviceArg = '0', bytesArg = String(2 ** 30), order = 'source-first'] = process.argv.slice(2);
const bytes = Number(bytesArg);
let src: Uint8Array | undefined;
function fillSource(): Uint8Array {
  const u = new Uint8Array(bytes);
  const words = new Uint32Array(u.buffer);
  for (let i = 0; i < words.length; i++) words[i] = (Math.imul(i, 2654435761) ^ 0x1f) >>> 0;
  return u;
}
if (order === 'source-first') src = fillSource();

const { openRuntime } = await import('../../runtime/runtime.js');
const tOpen = performance.now();
const rt = openRuntime({ backend: backend as 'cuda' | 'hip' | 'host', warmTransfers: process.env.GPUMEM_FIRST_WARM !== '0' });
const openMs = performance.now() - tOpen;
let threadsUpMs: number | undefined;
try {
  const device = Number(deviceArg);
  void rt
    .defaultStager(device)
    .copier()
    .ready?.then(() => {
      threadsUpMs = performance.now() - tOpen;
    });
  const tAlloc = performance.now();
  const dst = rt.device(device).alloc(bytes);
  const allocMs = performance.now() - tAlloc;
  src ??= fillSource();
  // When the first chunk's device copy is enqueued (the engine's test hook, taken off after that chunk): the time
  // before it is what a first call pays that a later one does not (the pipeline behind it runs as in any call).
  const flow = rt.defaultStager(device).flow;
  let firstCopyAt: number | undefined;
  flow.beforeDeviceCopy = () => {
    firstCopyAt = performance.now();
    flow.beforeDeviceCopy = undefined;
  };
  const t0 = performance.now();
  const r = await rt.upload(dst, src);
  const ms = performance.now() - t0;
  const startMs = t0 - tOpen;
  const firstCopyMs = firstCopyAt === undefined ? undefined : firstCopyAt - t0;
  // The same upload again in the same process: the steady rate on this machine at this moment.
  const t1 = performance.now();
  await rt.upload(dst, src);
  const secondMs = performance.now() - t1;
  const back = new Uint8Array(bytes);
  await rt.download(back, dst);
  const verified = Buffer.from(back.buffer).equals(Buffer.from(src.buffer));
  const pin = (n: number): number => {
    const t = performance.now();
    const p = rt.allocPinned(n);
    const took = performance.now() - t;
    p.free();
    return took;
  };
  const pin8Ms = pin(8 * 2 ** 20);
  const pin64Ms = pin(64 * 2 ** 20);
  const facts = {
    order,
    openMs,
    allocMs,
    startMs,
    threadsUpMs,
    firstCopyMs,
    secondMs,
    pin8Ms,
    pin64Ms,
    chunks: r.chunks,
    ringSlots: rt.defaultStager(device).ring.size,
  };
  process.stdout.write(`${JSON.stringify({ ms, verified, path: r.path, threads: r.threads, chunkBytes: r.chunkBytes, ...facts })}\n`);
} finally {
  rt[Symbol.dispose]();
}
