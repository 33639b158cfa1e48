/**
 * The step program's events: a program (step.ts, generate.ts) is code that allocates and frees tagged tensors through
 * a `Mem`, and each interpreter is a `Mem`: the liveness walk (walk.ts) for the allocated peak and the lines held at
 * it, the caching-allocator replay (replay.ts) for what max_memory_reserved() reports. One program, so the figures
 * cannot disagree about what a step holds.
 *
 * `repeat(n, body)` runs identical iterations: the replay unrolls it; the walk runs the body once and folds its peak
 * and its net bytes n times, which is exact when the iterations are identical (every block of a run of layers, every
 * micro-batch after the first). A body may free tensors made before the repeat only where each iteration frees its
 * own equal counterpart: the value carried from the iteration before (a block's input), or what the same iteration of
 * an earlier repeat of the same count kept (a block's saved tensors, freed by its backward pass).
 */
import type { LineField } from '../options.js';

/** A live tensor of a program run (0: nothing allocated). */
export type H = number;

/** The moments of a run the figures are given for. */
export type Phase = 'load' | 'forward' | 'backward' | 'optimizer-step' | 'prefill' | 'decode';

/** What a tensor is: the line it counts in at the peak, that line's field, and how the line is explained. */
export interface Tag {
  readonly id: number;
  readonly name: string;
  readonly field: LineField;
  /** The line's note, from its bytes at the peak. */
  readonly note: (bytes: number) => string;
  /** Held outside PyTorch's caching allocator (CUDA managed memory): not in max_memory_allocated. */
  readonly outsideAllocator?: boolean;
}

/** The tags of one program, in the order its lines are shown. */
export class Tags {
  readonly all: Tag[] = [];
  private readonly byName = new Map<string, Tag>();

  /** The tag named `name` (made on first use with this field and note). */
  get(name: string, field: LineField, note: string | ((bytes: number) => string) = '', outsideAllocator = false): Tag {
    let t = this.byName.get(name);
    if (!t) {
      t = { id: this.all.length, name, field, note: typeof note === 'string' ? () => note : note, ...(outsideAllocator ? { outsideAllocator } : {}) };
      this.all.push(t);
      this.byName.set(name, t);
    }
    return t;
  }
}

/** The results of the iterations of a repeat, by iteration. */
export interface Runs<T> {
  readonly count: number;
  at(i: number): T;
}

/** Where a program's events go. */
export interface Mem {
  /** A tensor of `bytes` bytes (none when 0) on `stream` (0, the default stream). */
  alloc(bytes: number, tag: Tag, stream?: number): H;
  free(...hs: H[]): void;
  /** `h` counts in `tag`'s line from now on (a transient that autograd saves becomes a kept activation). */
  retag(h: H, tag: Tag): void;
  /** The moment the events from here on belong to. */
  phase(p: Phase): void;
  /** `n` identical iterations of `body` (none when n is 0). */
  repeat<T>(n: number, body: (i: number) => T): Runs<T>;
}

/** Runs every iteration: the replay's (and the exact walk's) repeat. */
export function unrolled<T>(n: number, body: (i: number) => T): Runs<T> {
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(body(i));
  return { count: n, at: (i) => out[i] as T };
}
