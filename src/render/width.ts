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
  /**
   * A column that names what a row is (never dropped): when the table still does not fit, its cells wrap onto
   * more lines of the row instead (at spaces, hyphens and arrows, down to its longest piece or 8 characters).
   */
  wrap?: boolean;
}

/** The narrowest a wrapping column is made. */
const MIN_WRAP = 8;

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
      if (p === undefined || columns[i]?.wrap) continue;
      if (victim < 0 || p < (columns[victim]?.priority ?? 0)) victim = i;
    }
    if (victim < 0) break;
    keep.splice(keep.indexOf(victim), 1);
    dropped.push(columns[victim]?.header ?? '');
  }
  narrowWrapping(columns, rows, widths, keep, total() - width);
  const cellLines = (cells: readonly string[], i: number): string[] => {
    const c = cells[i] ?? '';
    return columns[i]?.wrap && c.length > (widths[i] ?? 0) ? wrapCell(c, widths[i] ?? 0) : [c];
  };
  const line = (cells: readonly string[]): string[] => {
    const split = keep.map((i) => cellLines(cells, i));
    const height = Math.max(1, ...split.map((l) => l.length));
    return Array.from({ length: height }, (_, k) =>
      keep
        .map((i, j) => {
          const c = split[j]?.[k] ?? '';
          const w = widths[i] ?? 0;
          return columns[i]?.right ? c.padStart(w) : c.padEnd(w);
        })
        .join('  ')
        .trimEnd(),
    );
  };
  return {
    lines: [...line(columns.map((c) => c.header)), ...line(widths.map((w) => '-'.repeat(w))), ...rows.flatMap(line)],
    dropped,
  };
}

/** A cell's pieces for wrapping: words, split after a hyphen, a plus or an arrow too ("first-", "copy+", "device->"). */
const cellTokens = (text: string): string[] => text.match(/[^ ]*?(?:->|[-+](?!>)|(?= )|$) */g)?.filter((t) => t !== '') ?? [text];

/** Wraps a table cell to `width`: at spaces, hyphens, pluses and arrows, continuation lines indented by one space. */
export function wrapCell(text: string, width: number): string[] {
  const out: string[] = [];
  let cur = '';
  for (const t of cellTokens(text)) {
    if (cur !== '' && `${cur}${t}`.trimEnd().length > width) {
      out.push(cur.trimEnd());
      cur = ` ${t}`;
    } else cur += t;
  }
  if (cur.trim() !== '') out.push(cur.trimEnd());
  return out;
}

/** Takes `excess` characters off the wrapping columns, a character at a time from the widest (so they end up even), none below its longest piece or MIN_WRAP. */
function narrowWrapping(columns: readonly Column[], rows: readonly (readonly string[])[], widths: number[], keep: readonly number[], excess: number): void {
  const floor = (i: number): number =>
    Math.max(MIN_WRAP, columns[i]?.header.length ?? 0, ...rows.map((r) => Math.max(0, ...cellTokens(r[i] ?? '').map((w) => w.trimEnd().length + 1))));
  const floors = new Map(keep.filter((i) => columns[i]?.wrap).map((i) => [i, floor(i)] as const));
  for (let left = excess; left > 0; left--) {
    let widest = -1;
    for (const [i, f] of floors) if ((widths[i] ?? 0) > f && (widest < 0 || (widths[i] ?? 0) > (widths[widest] ?? 0))) widest = i;
    if (widest < 0) return;
    widths[widest] = (widths[widest] ?? 0) - 1;
  }
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
