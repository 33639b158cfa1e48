/**
 * The host backend's host copier: its addresses are synthetic (ArrayBuffers placed in its own address space), so no
 * thread can reach them; copies run on the JS thread, in the order they were asked for, each request after the event
 * loop turns (as a thread pool's would finish later). A list of copies is one request, as it is one job per thread
 * on the threaded copier. `threads` is kept only to be reported.
 */
import { DisposedError } from '../../errors.js';
import type { Address, HostCopier } from '../backend.js';

export class InlineHostCopier implements HostCopier {
  private disposed = false;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    readonly threads: number,
    private readonly copyNow: (dst: Address, src: Address, bytes: number) => void,
    /** Runs `n` copies listed as (destination, source, bytes) triples, in order. */
    private readonly copyListNow: (list: Float64Array, n: number) => void = (list, n) => {
      for (let i = 0; i < n; i++) copyNow(list[3 * i]!, list[3 * i + 1]!, list[3 * i + 2]!);
    },
  ) {}

  copy(dst: Address, src: Address, bytes: number): Promise<void> {
    return this.later(() => this.copyNow(dst, src, bytes));
  }

  copyMany(dsts: ArrayLike<Address>, srcs: ArrayLike<Address>, sizes: ArrayLike<number>): Promise<void> {
    // The lists are read now (the caller may reuse them once this returns), the copies done later.
    // Copies of no bytes are left out.
    const list = new Float64Array(3 * sizes.length);
    let n = 0;
    for (let i = 0; i < sizes.length; i++) {
      if (!(sizes[i]! > 0)) continue;
      list[3 * n] = dsts[i]!;
      list[3 * n + 1] = srcs[i]!;
      list[3 * n + 2] = sizes[i]!;
      n++;
    }
    return this.later(() => this.copyListNow(list, n));
  }

  /** Runs `work` after the requests before it, once the event loop has turned. */
  private later(work: () => void): Promise<void> {
    if (this.disposed) return Promise.reject(new DisposedError('the host copier was disposed'));
    const run = this.chain.then(
      () =>
        new Promise<void>((resolve, reject) =>
          setImmediate(() => {
            if (this.disposed) return reject(new DisposedError('the host copier was disposed before the copy started'));
            try {
              work();
              resolve();
            } catch (e) {
              reject(e);
            }
          }),
        ),
    );
    this.chain = run.catch(() => {});
    return run;
  }

  dispose(): void {
    this.disposed = true;
  }
}
