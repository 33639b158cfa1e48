/**
 * A value from a file quoted in a message: at most a few hundred characters of it, in JSON quotes (so that quotes,
 * newlines and control characters in it show as escapes), with its full length said when it was cut.
 */

/** The most characters of a value a message quotes. */
export const QUOTE_MAX = 200;

/** `value` as a JSON string of at most `max` characters of it, then "... (N characters)" when it is longer. */
export function quoteValue(value: string, max = QUOTE_MAX): string {
  if (value.length <= max) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, max))}... (${value.length} characters)`;
}
