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
  ) {}

  copy(dst: Address, src: Address, bytes: number): Promise<void> {
    return this.later(() => this.copyNow(dst, src, bytes));
  }

  copyMany(dsts: ArrayLike<Address>, srcs: ArrayLike<Address>, sizes: ArrayLike<number>): Promise<void> {
    // The lists are read now (the caller may reuse them once this returns), the copies done later.
    const n = sizes.length;
    const list = new Float64Array(3 * n);
    for (let i = 0; i < n; i++) {
      list[3 * i] = dsts[i]!;
      list[3 * i + 1] = srcs[i]!;
      list[3 * i + 2] = sizes[i]!;
    }
    return this.later(() => {
      for (let i = 0; i < n; i++) if (list[3 * i + 2]! > 0) this.copyNow(list[3 * i]!, list[3 * i + 1]!, list[3 * i + 2]!);
    });
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
