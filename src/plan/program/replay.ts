/**
 * A step program replayed through PyTorch's caching allocator (allocator-model/torch-caching.ts): every repeat
 * unrolled, every tensor a block of the allocator, so that the figures are what torch.cuda.max_memory_allocated()
 * (blocks as the allocator rounds them) and max_memory_reserved() report.
 */
import { type AllocatorStats, TorchAllocatorModel } from '../../allocator-model/torch-caching.js';
import { type H, type Mem, type Phase, type Runs, type Tag, unrolled } from './mem.js';

/** The allocator's figures, and the peak of the tensors' own bytes (unrounded) over the same run. */
export interface ReplayFigures extends AllocatorStats {
  peakTensorBytes: number;
}

export class Replay implements Mem {
  readonly allocator: TorchAllocatorModel;
  private readonly handles: number[] = [0];
  private readonly sizes: number[] = [0];
  private live = 0;
  private peakLive = 0;

  constructor(allocator: TorchAllocatorModel = new TorchAllocatorModel()) {
    this.allocator = allocator;
  }

  alloc(bytes: number, tag: Tag, stream = 0): H {
    if (!(bytes > 0) || tag.outsideAllocator) return 0;
    this.handles.push(this.allocator.alloc(Math.ceil(bytes), stream));
    this.sizes.push(bytes);
    this.live += bytes;
    this.peakLive = Math.max(this.peakLive, this.live);
    return this.handles.length - 1;
  }

  free(...hs: H[]): void {
    for (const h of hs) {
      if (!h) continue;
      this.allocator.free(this.handles[h] as number);
      this.live -= this.sizes[h] as number;
    }
  }

  retag(_h: H, _tag: Tag): void {}

  phase(_p: Phase): void {}

  repeat<T>(n: number, body: (i: number) => T): Runs<T> {
    return unrolled(n, body);
  }

  /** torch.cuda.reset_peak_memory_stats(): the figures from here on (the measured step). */
  resetPeaks(): void {
    this.allocator.resetPeaks();
    this.peakLive = this.live;
  }

  figures(): ReplayFigures {
    return { ...this.allocator.stats(), peakTensorBytes: this.peakLive };
  }
}
