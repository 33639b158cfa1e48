/**
 * Text bound for a terminal, made inert: control characters (C0 but newline and tab, DEL, C1) and the bidirectional
 * overrides are written as `\u001b`-style escapes, so that a name read from a file (a tensor's, a device's, a file's
 * own) can neither set the window title, clear the screen, move the cursor to forge a line, nor reorder what is
 * shown. The escape is also a valid JSON escape, so JSON output keeps its meaning.
 */

// C0 without \t (09) and \n (0a), DEL, C1, and U+202A-202E / U+2066-2069 (embeddings, overrides, isolates).
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** `text` with every character a terminal would act on written as a visible `\uXXXX` escape. */
export function terminalText(text: string): string {
  UNSAFE.lastIndex = 0;
  if (!UNSAFE.test(text)) return text;
  return text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
