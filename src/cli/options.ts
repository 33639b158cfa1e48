/** Option parsers and the options several commands share. Each parser throws commander's usage error naming the option. */
import { InvalidArgumentError, Option } from 'commander';
import { parseBytes } from '../units.js';

/** `--backend`: auto (hip, then cuda, then host), cuda, hip or host. */
export const backendOption = (): Option =>
  new Option('-b, --backend <name>', 'backend: auto (hip, then cuda, then host), cuda, hip or host; default $GPUMEM_BACKEND or auto').default(undefined);

/** Options shared by bench and report. */
export interface BenchCliOptions {
  backend?: string;
  quick?: boolean;
  device?: number[];
  only?: string[];
  maxSize?: number;
  gated?: boolean;
  json?: boolean;
  html?: string;
  wide?: boolean;
}

/** What --wide means, said once for every command that has it. */
export const WIDE_HELP =
  'print tables at their full width, every column kept (default: fit the terminal, or 80 columns when piped: the columns least needed go first, those that tell rows apart wrap)';

/** A repeatable whole-number option. */
export function collectInts(name: string, options: { distinct?: boolean } = {}): (v: string, prev: number[] | undefined) => number[] {
  return (v, prev) => {
    const n = parseIntOption(v, name);
    if (options.distinct && prev?.includes(n)) throw new InvalidArgumentError(`${name} ${n} is given twice: name each one once`);
    return [...(prev ?? []), n];
  };
}

/** Parses a byte size ("64MiB", "1GB", "4096"). */
export function parseSizeOption(v: string, name: string): number {
  const n = parseBytes(v);
  if (n === undefined || n < 1) throw new InvalidArgumentError(`${name} must be a size of at least 1 byte such as 64MiB, got "${v}"`);
  return n;
}

/** A whole number of at least 1. */
export function parsePositive(v: string, name: string): number {
  const n = parseIntOption(v, name);
  if (n < 1) throw new InvalidArgumentError(`${name} must be at least 1, got ${v}`);
  return n;
}

/** Seconds from 0.1 to 3600. */
export function parseSeconds(v: string, name: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0.1 || n > 3600)
    throw new InvalidArgumentError(`${name} must be a number of seconds from 0.1 to 3600, got "${v}"`);
  return n;
}

/** A TCP port from 0 to 65535. */
export function parsePort(v: string): number {
  const n = parseIntOption(v, '--port');
  if (n > 65535) throw new InvalidArgumentError(`--port must be from 0 to 65535, got ${v}`);
  return n;
}

/** A percentage from 0 to 100, as a fraction. */
export function parsePercent(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || n > 100) throw new InvalidArgumentError(`${name} must be a percentage from 0 to 100, got "${v}"`);
  // 0.9 is almost always a fraction meant as 90%, not 0.9%: say so rather than watch for 0.9% full
  if (n > 0 && n < 1)
    throw new InvalidArgumentError(`${name} takes a percentage: ${name} ${Math.round(n * 100)} for ${Math.round(n * 100)}%, not a fraction ("${v}")`);
  return n / 100;
}

/** A whole number. */
export function parseIntOption(v: string, name: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}"`);
  return n;
}
