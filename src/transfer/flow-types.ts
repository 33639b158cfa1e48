/** The shapes the transfer engine works with (flow.ts): transfers, chunks, and what a stager gives it. */
import type { HostCopier } from '../backend/backend.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';
import type { Ring, Slot } from './ring.js';
import type { SegmentList } from './segment-list.js';

/** How a transfer's pieces move: through the ring's slots, straight between their memories, or from or to a file. */
export type TransferMode = 'staged' | 'direct' | 'file';

/**
 * A transfer in the engine: one rt.upload or rt.download call, the items of one path of a list (uploadMany's staged
 * items are one transfer, its pinned items another), or one file call. Its pieces wait in the flow's queue; parts of
 * them travel in chunks.
 */
export interface Transfer {
  readonly direction: 'upload' | 'download';
  readonly mode: TransferMode;
  /** For file transfers: the open file and whether it was opened with O_DIRECT. */
  readonly file?: { fd: number; direct: boolean; key: string } | undefined;
  readonly stream: Stream;
  readonly signal: AbortSignal | undefined;
  /** Bytes not landed yet. */
  left: number;
  /** Chunks that carried part of it. */
  chunks: number;
  /** Chunks in flight that carry part of it. */
  inFlight: number;
  /** The first failure (or the abort). */
  failed: unknown;
  settled: boolean;
  /** Told once, when every piece landed or, after a failure, when its chunks in flight have settled. */
  readonly owner: TransferOwner;
}

/** Who is told that a transfer finished: the call it belongs to. */
export interface TransferOwner {
  transferFinished(t: Transfer, error: unknown): void;
}

/** One slot's worth of segments on its way: filled, copied, waited for, drained (flow.ts). */
export interface Chunk {
  direction: 'upload' | 'download';
  mode: TransferMode;
  stream: Stream;
  slot: Slot | undefined;
  event: GpuEvent;
  segs: SegmentList;
  /** For a file chunk: the aligned file range read into (or written from) the slot. */
  fileStart: number;
  fileBytes: number;
  /** Host operations of earlier chunks this one must wait for. */
  deps: Array<Promise<void>>;
  release: () => void;
}

/** What the engine needs from its stager. */
export interface FlowHost {
  readonly rt: MemoryRuntime;
  readonly device: number;
  readonly ring: Ring;
  copier(): HostCopier;
  /** A blocking-sync event for a chunk that uses no slot (taken back with {@link giveEvent}). */
  takeEvent(): GpuEvent;
  giveEvent(e: GpuEvent): void;
  /** An event used to order the stager's copies across streams. */
  handoffEvent(): GpuEvent;
  /** Host work the stager does itself where the copier cannot (file reads on the host backend). */
  readInto(fd: number, address: number, bytes: number, offset: number, need: number): Promise<void>;
  writeFrom(fd: number, address: number, bytes: number, offset: number): Promise<void>;
}
