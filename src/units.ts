/** Byte units and formatting. GB = 1e9 and GiB = 2^30; every printed figure names which one it uses. */

export const KiB = 1024;
export const MiB = 1024 * KiB;
export const GiB = 1024 * MiB;
export const GB = 1e9;

/** Formats a byte count with binary units: 1536 → "1.5 KiB". */
export function formatBytes(bytes: number, digits = 1): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const sign = bytes < 0 ? '-' : '';
  let v = Math.abs(bytes);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${sign}${i === 0 ? v.toFixed(0) : v.toFixed(digits)} ${units[i]}`;
}

/** Formats a byte count with decimal units chosen by its size: 4194304 → "4.19 MB", 2.1e9 → "2.10 GB". */
export function formatDecimalBytes(bytes: number, digits = 2): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let v = Math.abs(bytes);
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${bytes < 0 ? '-' : ''}${i === 0 ? v.toFixed(0) : v.toFixed(digits)} ${units[i]}`;
}

/** Formats a byte count in decimal GB (1e9), the unit of bandwidth figures. */
export function formatGB(bytes: number, digits = 2): string {
  return `${(bytes / GB).toFixed(digits)} GB`;
}

/**
 * Parses a size such as "64MiB", "1.5 GiB", "4096", "2GB", "512k" into bytes.
 * Binary suffixes (KiB, MiB, GiB, TiB; K, M, G, T) are powers of 1024; KB, MB, GB, TB are powers of 1000.
 * Returns undefined when the text is not a size.
 */
export function parseBytes(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)(b?)\s*$/i.exec(text);
  if (!m) return undefined;
  const value = Number(m[1]);
  const prefix = (m[2] ?? '').toLowerCase();
  const binary = m[3] !== '' || (m[4] === '' && prefix !== '');
  const power = ['', 'k', 'm', 'g', 't', 'p'].indexOf(prefix);
  const bytes = value * (binary ? 1024 : 1000) ** power;
  return Number.isFinite(bytes) ? Math.round(bytes) : undefined;
}

/** Bandwidth in GB/s (1e9 bytes per second) from bytes and seconds. */
export function gbps(bytes: number, seconds: number): number {
  return bytes / seconds / GB;
}

/** Formats nanoseconds with the unit that suits them: 950 → "950 ns", 12_300 → "12.3 µs", 4.2e9 → "4.20 s". */
export function formatNs(ns: number): string {
  if (!Number.isFinite(ns)) return String(ns);
  const a = Math.abs(ns);
  if (a < 1e3) return `${ns.toFixed(0)} ns`;
  if (a < 1e6) return `${(ns / 1e3).toFixed(a < 1e4 ? 2 : 1)} µs`;
  if (a < 1e9) return `${(ns / 1e6).toFixed(a < 1e7 ? 2 : 1)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

/** A count with a unit suffix: 7.00B, 1.2M, 3.50T. */
export function formatCount(n: number): string {
  if (n >= 1e12) return `${(n / 1e12).toFixed(2)}T`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  return String(Math.round(n));
}
