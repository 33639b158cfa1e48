/**
 * What a stager's engine uses (flow.ts's FlowHost): the host threads (shared with other stagers, or its own), the
 * stream, the ring, events for chunks without a slot and for ordering across streams, and file I/O on the JS side
 * where the threads have none (the host backend). Disposed with the stager, after the work on them has ended.
 */
import { fstatSync, read as fsRead, write as fsWrite } from 'node:fs';
import { ErrorCode, GpuError } from '../errors.js';
import type { HostCopier } from '../backend/backend.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';
import type { FlowHost } from './flow-types.js';
import type { Pinner, Ring } from './ring.js';

export class StagerResources implements FlowHost {
  private hostCopier: HostCopier | undefined;
  private readonly shared: boolean;
  private ownStream: Stream | undefined;
  private readonly spareEvents: GpuEvent[] = [];
  private readonly events: GpuEvent[] = [];
  private handoff: GpuEvent | undefined;

  constructor(
    readonly rt: MemoryRuntime,
    readonly device: number,
    readonly ring: Ring,
    private readonly threads: number,
    copier: HostCopier | undefined,
  ) {
    this.hostCopier = copier;
    this.shared = copier !== undefined;
  }

  /** The host threads, started on first use. */
  copier(): HostCopier {
    if (!this.hostCopier) {
      this.hostCopier = this.rt.backend.createHostCopier(this.threads);
    }
    return this.hostCopier;
  }

  /** Pins memory on the host threads, where they can. */
  pinner(): Pinner | undefined {
    const c = this.copier();
    if (!c.canPin || !c.pinHost) return undefined;
    return { pin: (bytes, landed) => c.pinHost!(bytes, landed), poll: () => c.poll?.() };
  }

  /** The stager's own stream, made on first use. */
  stream(): Stream {
    this.ownStream ??= this.rt.device(this.device).createStream({ nonBlocking: true });
    return this.ownStream;
  }

  takeEvent(): GpuEvent {
    const e = this.spareEvents.pop();
    if (e) return e;
    const made = this.rt.device(this.device).createEvent({ timing: false, blockingSync: true });
    this.events.push(made);
    return made;
  }

  giveEvent(e: GpuEvent): void {
    if (!e.disposed) this.spareEvents.push(e);
  }

  handoffEvent(): GpuEvent {
    this.handoff ??= this.rt.device(this.device).createEvent({ timing: false });
    return this.handoff;
  }

  /** File reads where the copier has none (the host backend): Node's fs into a view of the chunk. */
  async readInto(fd: number, address: number, bytes: number, offset: number, need: number): Promise<void> {
    const view = this.rt.backend.hostView(address, bytes);
    let done = 0;
    while (done < bytes) {
      const n = await new Promise<number>((resolve, reject) => fsRead(fd, view, done, bytes - done, offset + done, (e, r) => (e ? reject(e) : resolve(r))));
      if (n === 0) break;
      done += n;
    }
    if (done < need) {
      // A read past the new end finds nothing at its own offset: the file says where it ends now.
      let end = offset + done;
      try {
        end = Math.min(end, fstatSync(fd).size);
      } catch {
        // closed meanwhile: keep the offset this read reached
      }
      throw new GpuError(
        ErrorCode.IO_ERROR,
        `the file ended at byte ${end}, before byte ${offset + need} the read needed (was it truncated during the read?)`,
        {
          statusName: 'EOF',
        },
      );
    }
  }

  /** File writes where the copier has none. */
  async writeFrom(fd: number, address: number, bytes: number, offset: number): Promise<void> {
    const view = this.rt.backend.hostView(address, bytes);
    let done = 0;
    while (done < bytes) {
      done += await new Promise<number>((resolve, reject) => fsWrite(fd, view, done, bytes - done, offset + done, (e, r) => (e ? reject(e) : resolve(r))));
    }
  }

  /**
   * Waits on this thread for the host threads' work in flight (stopping them unless shared) and the stream's, then
   * frees the ring, the events and the stream.
   */
  dispose(): void {
    if (!this.shared) this.hostCopier?.dispose();
    else this.hostCopier?.waitIdle?.();
    const live = !this.rt.disposed && this.rt.backend.unusableReason === undefined;
    if (live && this.ownStream && !this.ownStream.disposed) {
      try {
        this.ownStream.waitSync();
      } catch {
        // the stream's work failed: nothing more can land in the ring
      }
    }
    this.ring.dispose();
    for (const e of this.events) e[Symbol.dispose]();
    this.handoff?.[Symbol.dispose]();
    this.ownStream?.[Symbol.dispose]();
  }
}
