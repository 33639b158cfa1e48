/**
 * uploadFile through cuFile, in a process of its own (a fault inside libcufile cannot take the bench with it), for
 * `gpumem bench --only transfer`: the file read into device memory with `path: 'cufile'`, from the page cache and cold
 * (its pages dropped before each run), timed from the call until the promise resolves. Prints one JSON line:
 * {"cached": [ms...], "cold": [ms...], "verified": bool} or {"fallback": why}.
 *   node cufile-child.js DEVICE FILE BYTES REPS
 */
import { closeSync, openSync, readFileSync } from 'node:fs';

const [deviceArg = '0', file = '', bytesArg = '0', repsArg = '3'] = process.argv.slice(2);
const bytes = Number(bytesArg);
const { openRuntime } = await import('../../runtime/runtime.js');
const rt = openRuntime({ backend: 'cuda' });
try {
  const dev = rt.device(Number(deviceArg));
  const dst = dev.alloc(bytes);
  const first = await rt.uploadFile(dst, file, { path: 'cufile' });
  if (first.path !== 'cufile') {
    process.stdout.write(`${JSON.stringify({ fallback: first.fallback ?? first.path })}\n`);
  } else {
    const copier = rt.defaultStager(dev.index).copier();
    const run = async (cold: boolean): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < Number(repsArg); i++) {
        if (cold) {
          const fd = openSync(file, 'r');
          copier.dropCache?.(fd, 0, bytes);
          closeSync(fd);
        }
        const t0 = performance.now();
        await rt.uploadFile(dst, file, { path: 'cufile' });
        out.push(performance.now() - t0);
      }
      return out;
    };
    const cached = await run(false);
    const cold = await run(true);
    const back = new Uint8Array(bytes);
    await rt.download(back, dst);
    const verified = Buffer.from(back.buffer).equals(readFileSync(file));
    process.stdout.write(`${JSON.stringify({ cached, cold, verified })}\n`);
  }
} finally {
  rt[Symbol.dispose]();
}
