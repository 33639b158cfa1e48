/**
 * The liveness walk over a step program: bytes live after every event, the peak of each moment (phase) and what is
 * live then, by tag. Repeats are folded (mem.ts): a body runs once, its peak and net bytes count for every iteration,
 * so a 126-layer model costs what one layer costs. `exact` unrolls them instead (the check that folding is exact).
 */
import { LINE_FIELDS, type LineField } from '../options.js';
import { type H, type Mem, type Phase, type Runs, type Tag, unrolled } from './mem.js';

/** The peak of one moment: its bytes and the bytes of each tag then. */
export interface PhasePeak {
  bytes: number;
  byTag: Map<Tag, number>;
}

const PHASES: readonly Phase[] = ['load', 'forward', 'backward', 'optimizer-step', 'prefill', 'decode'];
const PHASE_INDEX = new Map(PHASES.map((p, i) => [p, i]));
const FIELD_INDEX = new Map(LINE_FIELDS.map((f, i) => [f, i]));

/** One level of repeats being walked: bytes relative to its start, by tag id; each phase's peak and tags then. */
class Frame {
  cur = 0;
  /** Bytes of each field now, and the most each held (relative to the frame's start). */
  readonly fields = new Float64Array(LINE_FIELDS.length);
  readonly fieldMax = new Float64Array(LINE_FIELDS.length);
  tags: Float64Array;
  /** The most each tag held (relative to the frame's start). */
  tagMax: Float64Array;
  readonly peak = new Float64Array(PHASES.length).fill(Number.NEGATIVE_INFINITY);
  readonly peakTags: Float64Array[] = [];
  constructor(size: number) {
    this.tags = new Float64Array(size);
    this.tagMax = new Float64Array(size);
  }

  /** Records the current bytes as phase `i`'s peak. */
  mark(i: number): void {
    this.peak[i] = this.cur;
    const t = this.peakTags[i];
    if (t && t.length === this.tags.length) t.set(this.tags);
    else this.peakTags[i] = this.tags.slice();
  }
}

/** A liveness walk: feed it a program, then read `peaks`. */
export class Walk implements Mem {
  private readonly frames: Frame[] = [];
  private size = 64;
  private sizes = new Float64Array(1024);
  private tagOf = new Int32Array(1024);
  private count = 1;
  private readonly tagList: Tag[] = [];
  private readonly fieldOfTag: number[] = [];
  private current = 0;

  constructor(private readonly exact = false) {
    this.frames.push(new Frame(this.size));
  }

  alloc(bytes: number, tag: Tag, _stream = 0): H {
    if (!(bytes > 0)) return 0;
    this.see(tag);
    if (this.count === this.sizes.length) this.growHandles();
    const h = this.count++;
    this.sizes[h] = bytes;
    this.tagOf[h] = tag.id;
    this.move(bytes, tag.id);
    return h;
  }

  free(...hs: H[]): void {
    for (const h of hs) if (h) this.move(-(this.sizes[h] as number), this.tagOf[h] as number);
  }

  retag(h: H, tag: Tag): void {
    if (!h || this.tagOf[h] === tag.id) return;
    this.see(tag);
    const f = this.top();
    const b = this.sizes[h] as number;
    const from = this.tagOf[h] as number;
    f.tags[from] = (f.tags[from] as number) - b;
    f.tags[tag.id] = (f.tags[tag.id] as number) + b;
    if ((f.tags[tag.id] as number) > (f.tagMax[tag.id] as number)) f.tagMax[tag.id] = f.tags[tag.id] as number;
    this.moveField(f, this.fieldOfTag[from] as number, -b);
    this.moveField(f, this.fieldOfTag[tag.id] as number, b);
    this.tagOf[h] = tag.id;
  }

  private moveField(f: Frame, i: number, bytes: number): void {
    f.fields[i] = (f.fields[i] as number) + bytes;
    if ((f.fields[i] as number) > (f.fieldMax[i] as number)) f.fieldMax[i] = f.fields[i] as number;
  }

  phase(p: Phase): void {
    this.current = PHASE_INDEX.get(p) as number;
    // the moment starts with what is live: its peak is at least that
    const f = this.top();
    if (f.cur > (f.peak[this.current] as number)) f.mark(this.current);
  }

  repeat<T>(n: number, body: (i: number) => T): Runs<T> {
    if (this.exact || n <= 1) return unrolled(n, body);
    const child = new Frame(this.size);
    this.frames.push(child);
    const one = body(0);
    this.frames.pop();
    this.fold(child, n);
    return { count: n, at: () => one };
  }

  /** The peak of each moment the program reached, with the tags live then. */
  peaks(): Map<Phase, PhasePeak> {
    const top = this.top();
    const out = new Map<Phase, PhasePeak>();
    PHASES.forEach((phase, i) => {
      const bytes = top.peak[i] as number;
      if (bytes === Number.NEGATIVE_INFINITY) return;
      const byTag = new Map<Tag, number>();
      (top.peakTags[i] as Float64Array).forEach((b, id) => {
        const tag = this.tagList[id];
        if (b > 0.5 && tag) byTag.set(tag, b);
      });
      out.set(phase, { bytes, byTag });
    });
    return out;
  }

  /** The most each tag held at any moment of the run: each line at its full size. */
  tagMaxima(): Map<Tag, number> {
    const top = this.top();
    const out = new Map<Tag, number>();
    top.tagMax.forEach((b, id) => {
      const tag = this.tagList[id];
      if (b > 0.5 && tag) out.set(tag, b);
    });
    return out;
  }

  /** The most each field held at any moment of the run: each kind at its full size. */
  fieldMaxima(): Record<LineField, number> {
    const top = this.top();
    return Object.fromEntries(LINE_FIELDS.map((f, i) => [f, top.fieldMax[i] as number])) as Record<LineField, number>;
  }

  /** Bytes live now (at the end of a run: what outlives the step). */
  get liveBytes(): number {
    return this.top().cur;
  }

  private top(): Frame {
    return this.frames[this.frames.length - 1] as Frame;
  }

  private see(tag: Tag): void {
    this.tagList[tag.id] = tag;
    this.fieldOfTag[tag.id] = FIELD_INDEX.get(tag.field) as number;
    if (tag.id < this.size) return;
    while (tag.id >= this.size) this.size *= 2;
    for (const f of this.frames) {
      const t = new Float64Array(this.size);
      t.set(f.tags);
      f.tags = t;
      const tm = new Float64Array(this.size);
      tm.set(f.tagMax);
      f.tagMax = tm;
      f.peakTags.forEach((p, i) => {
        const q = new Float64Array(this.size);
        q.set(p);
        f.peakTags[i] = q;
      });
    }
  }

  private growHandles(): void {
    const s = new Float64Array(this.sizes.length * 2);
    s.set(this.sizes);
    this.sizes = s;
    const t = new Int32Array(this.tagOf.length * 2);
    t.set(this.tagOf);
    this.tagOf = t;
  }

  private move(bytes: number, tag: number): void {
    const f = this.top();
    f.cur += bytes;
    f.tags[tag] = (f.tags[tag] as number) + bytes;
    if ((f.tags[tag] as number) > (f.tagMax[tag] as number)) f.tagMax[tag] = f.tags[tag] as number;
    this.moveField(f, this.fieldOfTag[tag] as number, bytes);
    if (bytes > 0 && f.cur > (f.peak[this.current] as number)) f.mark(this.current);
  }

  /** Folds `n` iterations of a walked body into the frame that holds the repeat. */
  private fold(child: Frame, n: number): void {
    const parent = this.top();
    const growth = Math.max(0, child.cur) * (n - 1);
    const grows = child.cur > 0;
    for (let i = 0; i < PHASES.length; i++) {
      const p = child.peak[i] as number;
      if (p === Number.NEGATIVE_INFINITY) continue;
      const bytes = parent.cur + p + growth;
      if (bytes <= (parent.peak[i] as number)) continue;
      const at = child.peakTags[i] as Float64Array;
      const tags = new Float64Array(this.size);
      for (let j = 0; j < tags.length; j++) tags[j] = (parent.tags[j] as number) + (at[j] ?? 0) + (grows ? (child.tags[j] as number) * (n - 1) : 0);
      parent.peak[i] = bytes;
      parent.peakTags[i] = tags;
    }
    parent.cur += child.cur * n;
    for (let j = 0; j < child.tags.length; j++) {
      const d = child.tags[j] as number;
      const most = (parent.tags[j] as number) + (child.tagMax[j] as number) + Math.max(0, d) * (n - 1);
      if (most > (parent.tagMax[j] as number)) parent.tagMax[j] = most;
      parent.tags[j] = (parent.tags[j] as number) + d * n;
    }
    for (let i = 0; i < LINE_FIELDS.length; i++) {
      const d = child.fields[i] as number;
      const most = (parent.fields[i] as number) + (child.fieldMax[i] as number) + Math.max(0, d) * (n - 1);
      if (most > (parent.fieldMax[i] as number)) parent.fieldMax[i] = most;
      parent.fields[i] = (parent.fields[i] as number) + d * n;
    }
  }
}
