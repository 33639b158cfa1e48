/** The shapes the transfer engine works with (flow.ts): transfers, their pieces, chunks, and what a stager gives it. */
import type { HostCopier } from '../backend/backend.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';
import type { Ring, Slot } from './ring.js';

/** How a transfer's pieces move. */
export type JobMode = 'staged' | 'direct' | 'file';

/** A transfer in the engine. */
export interface Job {
  readonly direction: 'upload' | 'download';
  readonly mode: JobMode;
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
  /** Called once, when every piece landed or, after a failure, when its chunks in flight have settled. */
  finish(error: unknown): void;
}

/**
 * A piece of a transfer: `bytes` between host memory at `host` (a file offset for file transfers) and device memory
 * at `dev`. `key` names the host buffer (or file) for the hazard check.
 */
export interface Piece {
  job: Job;
  host: number;
  dev: number;
  bytes: number;
  /** The device side is managed memory (copied with the runtime's default kind, never batched). */
  managed: boolean;
  /** The host side is memory the runtime pinned or registered (a direct piece may go into a batched copy). */
  pinned: boolean;
  /** The host buffer (or file) for the hazard check, and the address of its first byte (0 for a file). */
  key: object | string;
  keyBase: number;
}

/** A piece (or part of one) placed in a chunk. */
export interface Segment extends Piece {
  /** Offset in the slot (staged and file chunks). */
  at: number;
}

export interface Chunk {
  direction: 'upload' | 'download';
  mode: JobMode;
  stream: Stream;
  slot: Slot | undefined;
  event: GpuEvent;
  segs: Segment[];
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
