/** Plain-text rendering helpers for the CLI: aligned tables and "unknown" for values that could not be read. */
import { fitTable, wrapLine, type Column } from './width.js';

/**
 * Renders rows as an aligned table. Columns whose header starts with '>' are right-aligned. With a `width`, columns
 * with a priority give way, lowest first, until the table fits, and a last line names them.
 */
export function table(
  headers: readonly string[],
  rows: readonly (readonly (string | number | undefined)[])[],
  options: { width?: number | undefined; priorities?: readonly (number | undefined)[]; wrap?: readonly boolean[] } = {},
): string {
  const columns: Column[] = headers.map((h, i) => ({
    header: h.replace(/^>/, ''),
    right: h.startsWith('>'),
    priority: options.priorities?.[i],
    wrap: options.wrap?.[i] === true,
  }));
  const cells = rows.map((r) => columns.map((_, i) => fmtCell(r[i])));
  const { lines, dropped } = fitTable(columns, cells, options.width ?? Number.POSITIVE_INFINITY);
  if (dropped.length)
    lines.push(...wrapLine(`(left out to fit ${options.width} columns: ${dropped.join(', ')})`, options.width ?? Number.POSITIVE_INFINITY, ' '));
  return lines.join('\n');
}

function fmtCell(v: string | number | undefined): string {
  if (v === undefined) return '-';
  return typeof v === 'number' ? String(v) : v;
}

/** yes / no / unknown. */
export function yesNo(v: boolean | undefined): string {
  return v === undefined ? 'unknown' : v ? 'yes' : 'no';
}

/** A value, or "unknown" when it could not be read. */
export function known<T>(v: T | undefined, f: (x: T) => string = String): string {
  return v === undefined ? 'unknown' : f(v);
}
