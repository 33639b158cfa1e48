/**
 * The fuzz run's worker (see fuzz.ts): runs the CLI in-process on each job of a JSON file (an array of argument
 * lists), one after another, and reports on stdout a line before each ({ start }) and one after it ({ i, code,
 * maxRssKiB, err }). An exception that escapes a command is a crash: the worker dies of it, and the supervisor names
 * the input it was on.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { main } from '../cli/program.js';

/**
 * The peak resident memory since the last reset, in KiB (Linux: VmHWM; writing 5 to clear_refs resets it). Not
 * getrusage's maxRSS: Linux carries that over from the parent across exec.
 */
function peakKiB(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : process.resourceUsage().maxRSS;
}
function resetPeak(): void {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // not Linux, or not allowed: the peak is then the worker's so far
  }
}

const jobs = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as string[][];
const say = (o: object): boolean => process.stdout.write(`${JSON.stringify(o)}\n`);

for (const [i, args] of jobs.entries()) {
  resetPeak();
  say({ start: i });
  let err = '';
  const code = await main(args, { out: () => {}, err: (s) => (err.length < 2000 ? (err += s) : undefined) });
  say({ i, code, maxRssKiB: peakKiB(), err: err.slice(0, 600) });
}
