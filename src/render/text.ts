/** Plain-text rendering helpers for the CLI: aligned tables and "unknown" for values that could not be read. */

/** Renders rows as an aligned table. Columns whose header starts with '>' are right-aligned. */
export function table(headers: readonly string[], rows: readonly (readonly (string | number | undefined)[])[]): string {
  const right = headers.map((h) => h.startsWith('>'));
  const head = headers.map((h) => h.replace(/^>/, ''));
  const cells = rows.map((r) => head.map((_, i) => fmtCell(r[i])));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (r: readonly string[]): string =>
    r
      .map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
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
