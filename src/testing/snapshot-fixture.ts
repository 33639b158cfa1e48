/**
 * A PyTorch memory snapshot built from its documented structure (torch/cuda/memory.py, `_snapshot`: segments with
 * blocks, device_traces of TraceEntry with action / addr / size / stream / frames / time_us, allocator_settings), for
 * tests: three GPUs, expandable segments on, and every figure a test checks is stated here with how it follows.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writePickle, Tuple, type PickleInput } from './pickle-writer.js';

export const MiB = 2 ** 20;

/** Virtual bases of the expandable segments, one per GPU. */
export const BASE = [0x7f0000000000, 0x7f4000000000, 0x7f8000000000] as const;

/** Stack traces as PyTorch records them (innermost first). */
export const FRAMES = {
  embed: [
    { name: 'torch::unwind::unwind()', filename: '??', line: 0 },
    { name: 'forward', filename: 'model.py', line: 41 },
    { name: 'train_step', filename: 'train.py', line: 12 },
  ],
  mlp: [
    { name: 'forward', filename: 'mlp.py', line: 7 },
    { name: 'train_step', filename: 'train.py', line: 13 },
  ],
};

/**
 * GPU 0: a 20 MiB range mapped, filled by 8 + 8 + 4 MiB, the middle 8 MiB freed and unmapped (two mapped ranges
 * left), then 2 MiB more mapped and allocated. Reserved: 20, then 12, then 14 MiB; requested peaks at 20 MiB.
 * Nothing was live before the first event.
 * GPU 1: a 1 GiB range mapped, 100 MiB and 900 MiB allocated, the 900 MiB freed: it and the 24 MiB never used make
 * one free block of 924 MiB beside a live one, stranded.
 * GPU 2: a 2 MiB range mapped, 1 MiB allocated: 1 MiB free beside it, too little to matter.
 */
export const EXPECTED = {
  peakReserved: [20 * MiB, 1024 * MiB, 2 * MiB],
  peakRequested: [20 * MiB, 1000 * MiB, 1 * MiB],
  strandedOnGpu1: 924 * MiB,
  allocs: [4, 2, 1],
} as const;

type Entry = Record<string, PickleInput>;

function entry(action: string, addr: number, size: number, t: number | undefined, frames: PickleInput = []): Entry {
  const e: Entry = { action, addr, size, stream: 0, frames };
  if (t !== undefined) e.time_us = t;
  return e;
}

/** The snapshot as a dict; `timed: false` drops time_us everywhere, as PyTorch before 2.1 wrote it. */
export function snapshotFixture(options: { timed?: boolean } = {}): Record<string, PickleInput> {
  const timed = options.timed !== false;
  let clock = 1_700_000_000_000_000;
  const t = (): number | undefined => (timed ? (clock += 250) : undefined);
  const [a, b, c] = BASE;
  const block = (address: number, size: number, state: string, frames: PickleInput = []): PickleInput => ({
    address,
    size,
    requested_size: size,
    state,
    frames,
  });
  const segment = (device: number, address: number, size: number, blocks: PickleInput[]): PickleInput => ({
    device,
    address,
    total_size: size,
    allocated_size: 0,
    active_size: 0,
    requested_size: 0,
    stream: 0,
    segment_type: 'large',
    segment_pool_id: new Tuple([0, 0]),
    is_expandable: true,
    frames: [],
    blocks,
  });
  return {
    segments: [
      segment(0, a, 8 * MiB, [block(a, 8 * MiB, 'active_allocated', FRAMES.embed)]),
      segment(0, a + 16 * MiB, 6 * MiB, [block(a + 16 * MiB, 4 * MiB, 'active_allocated'), block(a + 20 * MiB, 2 * MiB, 'active_allocated', FRAMES.mlp)]),
      segment(1, b, 1024 * MiB, [block(b, 100 * MiB, 'active_allocated'), block(b + 100 * MiB, 924 * MiB, 'inactive')]),
      segment(2, c, 2 * MiB, [block(c, MiB, 'active_allocated'), block(c + MiB, MiB, 'inactive')]),
    ],
    device_traces: [
      [
        entry('segment_map', a, 20 * MiB, t()),
        entry('alloc', a, 8 * MiB, t(), FRAMES.embed),
        entry('alloc', a + 8 * MiB, 8 * MiB, t(), FRAMES.mlp),
        entry('alloc', a + 16 * MiB, 4 * MiB, t()),
        entry('free_requested', a + 8 * MiB, 8 * MiB, t()),
        entry('free_completed', a + 8 * MiB, 8 * MiB, t()),
        entry('segment_unmap', a + 8 * MiB, 8 * MiB, t()),
        entry('segment_map', a + 20 * MiB, 2 * MiB, t()),
        entry('alloc', a + 20 * MiB, 2 * MiB, t(), FRAMES.mlp),
        { action: 'snapshot', addr: 0, size: 0, stream: 0, frames: [], ...(timed ? { time_us: (clock += 250) } : {}) },
      ],
      [
        entry('segment_map', b, 1024 * MiB, t()),
        entry('alloc', b, 100 * MiB, t()),
        entry('alloc', b + 100 * MiB, 900 * MiB, t(), FRAMES.mlp),
        entry('free_requested', b + 100 * MiB, 900 * MiB, t()),
        entry('free_completed', b + 100 * MiB, 900 * MiB, t()),
      ],
      [entry('segment_map', c, 2 * MiB, t()), entry('alloc', c, MiB, t())],
    ],
    allocator_settings: {
      PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True',
      max_split_size: -1,
      garbage_collection_threshold: 0,
      expandable_segments: true,
      roundup_power2_divisions: { '1': 0, '2': 0 },
    },
    external_annotations: [],
  };
}

/** Writes the fixture as a pickle (as `_dump_snapshot()` does) and as JSON; returns both paths. */
export function writeSnapshotFixture(dir: string, options: { timed?: boolean; protocol?: 2 | 3 | 4 | 5 } = {}): { pickle: string; json: string } {
  const snap = snapshotFixture(options);
  const pickle = join(dir, `fixture${options.timed === false ? '-untimed' : ''}.pickle`);
  const json = join(dir, `fixture${options.timed === false ? '-untimed' : ''}.json`);
  writeFileSync(pickle, writePickle(snap, options.protocol ?? 4));
  writeFileSync(
    json,
    JSON.stringify(snap, (_k, v: unknown) => (v instanceof Tuple ? v.items : v)),
  );
  return { pickle, json };
}
