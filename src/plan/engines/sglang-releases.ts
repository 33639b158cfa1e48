/**
 * SGLang's default mem_fraction_static release by release (python/sglang/srt/server_args.py at each tag; read in the
 * tags v0.3.0 to v0.5.18). Post releases (0.4.5.post3, 0.4.6.post2, 0.4.7.post1, 0.5.4.post1) follow the next
 * release's row here: `--engine-version` takes major.minor.patch.
 */

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** The fraction by tensor-parallel size (0.3 to 0.4.5): TP 16, 8, 4, 2, 1. */
const byTp =
  (tp8: number) =>
  (ps: number): number =>
    ps >= 16 ? 0.79 : ps >= 8 ? tp8 : ps >= 4 ? 0.85 : ps >= 2 ? 0.87 : 0.88;

/** chunked_prefill_size and cuda_graph_max_bs by GPU memory and TP (0.5.3 on). */
export function sglangBuckets(capacityBytes: number, tp: number, smallGraphBs: number): { chunk: number; graphBs: number } {
  const gib = capacityBytes / GiB;
  if (gib < 20) return { chunk: 2048, graphBs: 8 };
  if (gib < 35) return { chunk: 2048, graphBs: tp < 4 ? smallGraphBs : 80 };
  if (gib < 60) return { chunk: 4096, graphBs: tp < 4 ? 32 : 160 };
  if (gib < 160) return { chunk: 8192, graphBs: tp < 4 ? 256 : 512 };
  return { chunk: 16384, graphBs: 512 };
}

/** The reserve formula of 0.5.3 on, in bytes: 512 MiB + 1.5 x max(chunk, 2048) + 2 x graph batch + ps / 8 GiB. */
const formulaReserve =
  (smallGraphBs: number) =>
  (capacityBytes: number, ps: number): number => {
    const { chunk, graphBs } = sglangBuckets(capacityBytes, ps, smallGraphBs);
    const mib = 512 + 1.5 * Math.max(chunk, 2048) + 2 * graphBs + (ps / 8) * 1024;
    return Math.max(mib * MiB, capacityBytes > 60 * GiB ? 10 * GiB : 0);
  };

export interface SglangRelease {
  from: string;
  /** The default mem_fraction_static for a GPU of `capacityBytes` at ps = tp x pp. */
  fraction: (capacityBytes: number, ps: number) => number;
  /** Where the default comes from, for the note. */
  rule: string;
}

const fromReserve =
  (reserve: (c: number, ps: number) => number) =>
  (c: number, ps: number): number =>
    Math.round(((c - reserve(c, ps)) / c) * 1000) / 1000;

export const SGLANG_RELEASES: readonly SglangRelease[] = [
  { from: '0.3', fraction: (_c, ps) => byTp(0.83)(ps), rule: 'a table by tensor-parallel size (TP 8: 0.83)' },
  { from: '0.3.6', fraction: (_c, ps) => byTp(0.82)(ps), rule: 'a table by tensor-parallel size (TP 8: 0.82)' },
  { from: '0.4', fraction: (_c, ps) => byTp(0.81)(ps), rule: 'a table by tensor-parallel size (TP 8: 0.81)' },
  // 0.4.5.post3: GPUs above 80 GiB keep 13 GiB
  { from: '0.4.6', fraction: (c, ps) => (c <= 81920 * MiB ? byTp(0.81)(ps) : (c - 13 * GiB) / c), rule: 'the TP table up to 80 GiB, 13 GiB kept above' },
  // 0.4.6.post2 and 0.4.7: 0.88 above 80 GiB, lifted by 48 GiB above 96 GiB, capped at 18 GiB kept; 0.79 above 180 GB
  {
    from: '0.4.7',
    fraction: (c, ps) => {
      if (c > 180_000 * MiB) return 0.79;
      let f = c <= 81920 * MiB ? byTp(0.81)(ps) : 0.88;
      if (c > 96 * GiB) f = Math.min(f + (48 * GiB * (1 - f)) / c, (c - 18 * GiB) / c);
      return f;
    },
    rule: 'by GPU memory (0.88 above 80 GiB, lifted above 96 GiB; 0.79 above 180 GB)',
  },
  // 0.4.7.post1 to 0.5.2: a reserve by GPU memory
  {
    from: '0.4.8',
    fraction: fromReserve((c, ps) => {
      const gib = c / GiB;
      const r = gib < 35 ? 2.8 + ps / 10 : gib < 90 ? 9.5 + ps / 2 : gib < 160 ? 12 + ps / 2 : 32;
      return r * GiB;
    }),
    rule: 'capacity less a reserve by GPU memory ((9.5 + TP / 2) GiB on 80 GiB GPUs, (12 + TP / 2) on H200s)',
  },
  {
    from: '0.5.3',
    fraction: fromReserve(formulaReserve(16)),
    rule: 'capacity less 512 MiB + 1.5 x chunked_prefill_size + 2 x cuda_graph_max_bs + TP / 8 GiB, at least 10 GiB above 60 GiB',
  },
  { from: '0.5.5', fraction: fromReserve(formulaReserve(24)), rule: 'as 0.5.3, cuda_graph_max_bs 24 on small GPUs' },
];
