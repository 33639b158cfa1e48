/** The shapes of the transfer engine's calls and results (stager.ts, and the runtime facade's rt.upload & co.). */
import type { HostCopier } from '../backend/backend.js';
import type { MemoryRef } from '../memory/copy.js';
import type { Stream } from '../stream/stream.js';
import type { HostBuffer } from './host-buffer.js';

/** How a stager is shaped. Defaults come from the machine (see defaults.ts). */
export interface StagerOptions {
  /** The device whose memory it transfers to and from (default 0). */
  device?: number;
  /** Host threads that copy between pageable memory and the pinned chunks. */
  threads?: number;
  /** Bytes of one pinned chunk (at least 4 KiB). */
  chunkBytes?: number;
  /** Chunks in the ring (2 to 64). */
  depth?: number;
  /**
   * A transfer smaller than this that finds the stager idle takes the runtime's pageable copy (0: always stage).
   * Small transfers queued behind others are packed into the ring's chunks instead.
   */
  directBelow?: number;
  /** Place the pinned ring on the device's NUMA node when the machine has several (default true). */
  numaLocal?: boolean;
  /** @internal Host threads shared with other stagers (not stopped when this stager is disposed). */
  copier?: HostCopier;
}

/** One transfer's options. */
export interface TransferOptions {
  /** Bytes to transfer (default: the rest of the source after its offset). */
  bytes?: number;
  srcOffset?: number;
  dstOffset?: number;
  /** The device copies go on this stream, after the work already on it (default: the stager's own stream). */
  stream?: Stream;
  /** 'auto' (default) picks as StagerOptions.directBelow says; 'staged' and 'direct' force a path for pageable memory. */
  path?: 'auto' | 'staged' | 'direct';
  /** Aborting stops after the chunks in flight; the promise rejects with ABORTED. */
  signal?: AbortSignal;
}

/**
 * The way a transfer went. Memory: 'staged' (through the pinned ring), 'direct' (the runtime's pageable copy),
 * 'registered' and 'pinned' (copied from where it is). Files: 'direct' (O_DIRECT into the ring), 'buffered' (pread
 * through the page cache into the ring), 'cufile' (GPUDirect Storage).
 */
export type TransferPath = 'staged' | 'direct' | 'registered' | 'pinned' | 'buffered' | 'cufile';

/** What a transfer did. */
export interface TransferResult {
  direction: 'upload' | 'download';
  path: TransferPath;
  bytes: number;
  /** Device copies it took (pinned chunks for a staged transfer, 1 for a direct copy). */
  chunks: number;
  /** Host threads that copied (0 for a direct copy). */
  threads: number;
  chunkBytes: number;
  /** Wall-clock seconds from the call to the promise settling (GB = 1e9 bytes; one-way bytes). */
  seconds: number;
  gbps: number;
}

/** One upload of a list: as rt.upload's arguments. */
export interface UploadItem {
  dst: MemoryRef;
  src: HostBuffer;
  dstOffset?: number;
  srcOffset?: number;
  bytes?: number;
}

/** One download of a list: as rt.download's arguments. */
export interface DownloadItem {
  dst: HostBuffer;
  src: MemoryRef;
  dstOffset?: number;
  srcOffset?: number;
  bytes?: number;
}

/** Options of a list of transfers: the same for every item. */
export interface ManyOptions {
  stream?: Stream;
  path?: 'auto' | 'staged' | 'direct';
  signal?: AbortSignal;
}

/** What a list of transfers did: the whole, and the path of each item in the list's order. */
export interface ManyResult extends Omit<TransferResult, 'path'> {
  /** 'staged' when any item went through the ring, else the path they all took. */
  path: TransferPath;
  items: number;
  paths: TransferPath[];
}

/** The options of rt.uploadFile / rt.downloadFile. */
export interface FileTransferOptions {
  /** Offset in the file (default 0). */
  offset?: number;
  /** Bytes to transfer (upload default: the rest of the file; download default: the rest of the device memory). */
  bytes?: number;
  /** Offset in the device memory (upload: the destination's). */
  dstOffset?: number;
  /** Offset in the device memory (download: the source's). */
  srcOffset?: number;
  stream?: Stream;
  signal?: AbortSignal;
  /**
   * 'auto' (default): cuFile where GPUDirect Storage really runs (the nvidia-fs driver is loaded), else O_DIRECT
   * when most of the range is not in the page cache, else buffered. The others force a way; one that cannot be
   * taken falls back to buffered with the reason in `fallback`.
   */
  path?: 'auto' | 'direct' | 'buffered' | 'cufile';
}

/** What a file transfer did, and why it did not take the way asked (or O_DIRECT), when it did not. */
export type FileTransferResult = TransferResult & { path: 'cufile' | 'direct' | 'buffered'; fallback?: string | undefined };
