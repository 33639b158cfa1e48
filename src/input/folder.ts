/**
 * The files of a folder given as input (a profiler's output folder, a folder of one trace per rank), walked without
 * leaving it: links to folders are not followed (so `ln -s . self` cannot count a trace five times, nor a link into
 * /proc walk the system), a link to a file is followed only when the file lies inside the folder, every file is
 * listed once however many names it has, and an entry that cannot be read, a dangling link or a special file is
 * skipped with a note instead of ending the walk.
 */
import { lstatSync, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { join, sep } from 'node:path';
import { fsReason } from './fs-errors.js';

export interface FolderFiles {
  /** Regular, non-empty files, depth first in name order. */
  files: string[];
  /** What was skipped and why, one line per kind (with up to three of its paths). */
  notes: string[];
}

/** How deep under the folder files are looked for (a rocprofv3 output folder is DIR/HOST/files). */
const MAX_DEPTH = 4;
/** The most entries a walk looks at: a folder beyond it is not a trace folder. */
const MAX_ENTRIES = 100_000;

/** Why entries were skipped, with examples. */
class Skipped {
  private readonly kinds = new Map<string, string[]>();
  add(why: string, path: string): void {
    const list = this.kinds.get(why) ?? [];
    list.push(path);
    this.kinds.set(why, list);
  }
  notes(root: string): string[] {
    return [...this.kinds].map(([why, paths]) => {
      const shown = paths.slice(0, 3).join(', ');
      return `${root}: skipped ${paths.length} ${why}: ${shown}${paths.length > 3 ? ', ...' : ''}`;
    });
  }
}

/**
 * The files under `dir` (a folder that exists), without leaving it.
 * @throws the file system's error when `dir` itself cannot be listed.
 */
export function filesInFolder(dir: string): FolderFiles {
  const root = realpathSync(dir);
  const skipped = new Skipped();
  const seen = new Set<string>();
  const files: string[] = [];
  const folders = new Set<string>();
  let entries = 0;
  let entryOf: (p: string) => Stats | undefined;
  const inside = (real: string): boolean => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep);
  const walk = (folder: string, depth: number): void => {
    let names: string[];
    try {
      names = readdirSync(folder).sort();
    } catch (e) {
      if (depth === 0) throw e;
      skipped.add(`folder(s) that cannot be read (${fsReason(e)})`, folder);
      return;
    }
    for (const name of names) {
      if (++entries > MAX_ENTRIES) {
        skipped.add(`entries past the first ${MAX_ENTRIES}`, join(folder, name));
        continue;
      }
      const p = join(folder, name);
      const st = entryOf(p);
      if (!st) continue;
      if (st.isDirectory()) {
        const id = `${st.dev}:${st.ino}`;
        if (depth + 1 > MAX_DEPTH) skipped.add(`folder(s) deeper than ${MAX_DEPTH} levels`, p);
        else if (folders.has(id)) skipped.add('folder(s) met before (a mount of a folder inside itself)', p);
        else {
          folders.add(id);
          walk(p, depth + 1);
        }
        continue;
      }
      if (!st.isFile()) {
        skipped.add('special file(s) (a pipe, socket or device)', p);
        continue;
      }
      // a link to a file of the folder counts only when the file itself was not found under its own name
      if (st.size > 0) (linked.has(p) ? links : plain).push({ path: p, id: `${st.dev}:${st.ino}` });
    }
  };
  const plain: Array<{ path: string; id: string }> = [];
  const links: Array<{ path: string; id: string }> = [];
  const linked = new Set<string>();
  entryOf = (p) => entry(p, inside, skipped, linked);
  walk(dir, 0);
  for (const f of [...plain, ...links]) {
    if (seen.has(f.id)) continue;
    seen.add(f.id);
    files.push(f.path);
  }
  return { files, notes: skipped.notes(dir) };
}

/**
 * What an entry is, following a link only to a file inside the folder (its path then goes into `linked`); undefined
 * (with a note) when skipped.
 */
function entry(p: string, inside: (real: string) => boolean, skipped: Skipped, linked: Set<string>): Stats | undefined {
  let st: Stats;
  try {
    st = lstatSync(p);
  } catch (e) {
    skipped.add(`entr(ies) that cannot be read (${fsReason(e)})`, p);
    return undefined;
  }
  if (!st.isSymbolicLink()) return st;
  let target: Stats;
  let real: string;
  try {
    real = realpathSync(p);
    target = statSync(real);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    skipped.add(code === 'ENOENT' ? 'dangling link(s)' : `link(s) that cannot be followed (${fsReason(e)})`, p);
    return undefined;
  }
  if (target.isDirectory()) {
    skipped.add('link(s) to folders (not followed)', p);
    return undefined;
  }
  if (!inside(real)) {
    skipped.add('link(s) to files outside the folder (not followed)', p);
    return undefined;
  }
  linked.add(p);
  return target;
}
