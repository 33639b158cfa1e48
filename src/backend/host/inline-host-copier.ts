/**
 * The host backend's host copier: its addresses are synthetic (ArrayBuffers placed in its own address space), so no
 * thread can reach them; copies run on the JS thread, in the order they were asked for, each after the event loop
 * turns (as a thread pool's would finish later). `threads` is kept only to be reported.
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
    if (this.disposed) return Promise.reject(new DisposedError('the host copier was disposed'));
    const run = this.chain.then(
      () =>
        new Promise<void>((resolve, reject) =>
          setImmediate(() => {
            if (this.disposed) return reject(new DisposedError('the host copier was disposed before the copy started'));
            try {
              this.copyNow(dst, src, bytes);
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
