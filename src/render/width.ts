/**
 * Fitting text to the terminal: prose wrapped at word boundaries, and tables that give up their least important
 * columns, one at a time, until the rows fit. The width is the terminal's (stdout's columns) where there is one,
 * else $COLUMNS, else 80.
 */

/** The default width where no terminal says otherwise. */
export const DEFAULT_WIDTH = 80;

/** The width to render for: a terminal's columns, else $COLUMNS, else 80 (never below 40). */
export function outputWidth(stream: { isTTY?: boolean; columns?: number } = process.stdout, env: NodeJS.ProcessEnv = process.env): number {
  const tty = stream.isTTY === true && typeof stream.columns === 'number' && stream.columns > 0 ? stream.columns : undefined;
  const fromEnv = env.COLUMNS !== undefined && /^\d+$/.test(env.COLUMNS) ? Number(env.COLUMNS) : undefined;
  return Math.max(40, tty ?? fromEnv ?? DEFAULT_WIDTH);
}

/**
 * Wraps one paragraph at `width` on spaces; continuation lines start with `indent` (by default the paragraph's own
 * leading spaces, plus two after a "- " or "1. " list marker). A word longer than the line is left whole.
 */
export function wrapLine(line: string, width: number, indent?: string): string[] {
  if (line.length <= width) return [line];
  const lead = /^(\s*)((?:[-*]|\d+\.)\s+)?/.exec(line);
  const cont = indent ?? `${lead?.[1] ?? ''}${' '.repeat(lead?.[2]?.length ?? 0)}`;
  const out: string[] = [];
  let cur = '';
  const head = lead?.[0] ?? '';
  for (const word of line.slice(head.length).split(/ +/)) {
    const prefix = out.length === 0 && cur === '' ? head : '';
    const candidate = cur === '' ? `${prefix || (out.length ? cont : '')}${word}` : `${cur} ${word}`;
    if (cur !== '' && candidate.length > width) {
      out.push(cur);
      cur = `${cont}${word}`;
    } else cur = candidate;
  }
  if (cur !== '') out.push(cur);
  return out;
}

/** Wraps every line of `text` at `width` (see wrapLine). */
export function wrapText(text: string, width: number): string {
  return text
    .split('\n')
    .flatMap((l) => wrapLine(l, width))
    .join('\n');
}

/** A table column: its header, whether it is right-aligned, and how much it matters (higher stays longer). */
export interface Column {
  header: string;
  right?: boolean;
  /** Columns of the lowest priority are dropped first when the table does not fit; undefined: never dropped. */
  priority?: number;
}

/**
 * Renders rows as an aligned table no wider than `width` where dropping columns can make it so (columns without a
 * priority are kept whatever the width). Returns the lines and the headers that were left out.
 */
export function fitTable(columns: readonly Column[], rows: readonly (readonly string[])[], width: number): { lines: string[]; dropped: string[] } {
  const keep = columns.map((_, i) => i);
  const widths = columns.map((c, i) => Math.max(c.header.length, ...rows.map((r) => (r[i] ?? '').length)));
  const total = (): number => keep.reduce((s, i) => s + (widths[i] ?? 0), 0) + 2 * Math.max(0, keep.length - 1);
  const dropped: string[] = [];
  while (total() > width) {
    let victim = -1;
    for (const i of keep) {
      const p = columns[i]?.priority;
      if (p === undefined) continue;
      if (victim < 0 || p < (columns[victim]?.priority ?? 0)) victim = i;
    }
    if (victim < 0) break;
    keep.splice(keep.indexOf(victim), 1);
    dropped.push(columns[victim]?.header ?? '');
  }
  const line = (cells: readonly string[]): string =>
    keep
      .map((i) => {
        const c = cells[i] ?? '';
        const w = widths[i] ?? 0;
        return columns[i]?.right ? c.padStart(w) : c.padEnd(w);
      })
      .join('  ')
      .trimEnd();
  return {
    lines: [line(columns.map((c) => c.header)), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)],
    dropped,
  };
}

/**
 * Lines no wider than `width`: prose wraps at spaces (continuation lines indented as the line's list marker), and a
 * word longer than a line (a file path) is broken where it must be.
 */
export function fitLines(text: string, width: number | undefined): string {
  if (width === undefined) return text;
  return text
    .split('\n')
    .flatMap((line) =>
      wrapLine(line, width).flatMap((l) => {
        if (l.length <= width) return [l];
        const indent = /^\s*/.exec(l)?.[0] ?? '';
        const room = Math.max(10, width - indent.length);
        const out = [l.slice(0, width)];
        for (let at = width; at < l.length; at += room) out.push(`${indent}${l.slice(at, at + room)}`);
        return out;
      }),
    )
    .join('\n');
}
