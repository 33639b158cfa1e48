/** The command line that plans given inputs: the schema's flags that differ from the defaults, after a prefix. */
import { DEFAULT_INPUTS, flagOf, type OptionSpec, type PlanInputs, SCHEMA } from '../schema.js';

/** A shell word: quoted when it holds anything a shell would read. */
export const shellWord = (w: string): string => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);

/** One input as its flag's words (none where it is at its default or unset). */
export function flagWords(k: string, v: unknown): string[] {
  const s = (SCHEMA as Record<string, OptionSpec>)[k];
  if (!s || v === undefined || v === false || k === 'fit') return [];
  const f = flagOf(k);
  if (v === true) return [f];
  if (s.kind === 'bytes') return [f, `${(v as number) / 2 ** 30}GiB`];
  if (s.kind === 'percent') return [f, String((v as number) * 100)];
  return [f, String(v)];
}

/** The flags of `inputs` that differ from the defaults, in the schema's order. */
export function flagsOf(inputs: PlanInputs): string[] {
  const d = DEFAULT_INPUTS as unknown as Record<string, unknown>;
  const v = inputs as unknown as Record<string, unknown>;
  // a context given sets the prompt: the prompt is not repeated
  return Object.keys(SCHEMA).flatMap((k) => (v[k] === d[k] || (k === 'prompt' && v.context !== undefined) ? [] : flagWords(k, v[k])));
}

/** The command that plans `inputs`: `prefix` (gpumem plan --model ... --gpu ...) and the flags. */
export const commandOf = (prefix: readonly string[], inputs: PlanInputs): string => [...prefix, ...flagsOf(inputs)].map(shellWord).join(' ');
