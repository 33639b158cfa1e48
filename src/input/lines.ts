/**
 * A line reader for untrusted text that never holds more than `maxLine` characters of one line: a file that is a
 * gigabyte of one line ends in a BadInputError, not in memory exhaustion (node:readline buffers the whole line).
 */
import { StringDecoder } from 'node:string_decoder';
import { BadInputError } from '../errors.js';
import { openInput, readFailure } from './files.js';

export interface LineOptions {
  /** Longest line accepted, in characters (default 1 MiB). */
  maxLine?: number;
  /** Called with the count of input bytes read so far. */
  progress?: (bytes: number) => void;
}

/**
 * Yields the file's lines (gunzipped when gzip) without their line ends, with 1-based line numbers.
 * @throws BadInputError when a line is longer than `maxLine` or the input cannot be read.
 */
export async function* readLines(file: string, options: LineOptions = {}): AsyncGenerator<[string, number]> {
  const maxLine = options.maxLine ?? 1 << 20;
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let lineNo = 0;
  let bytes = 0;
  const input = openInput(file);
  try {
    for await (const chunk of input) {
      bytes += (chunk as Buffer).length;
      options.progress?.(bytes);
      pending += decoder.write(chunk as Buffer);
      let at = 0;
      for (let nl = pending.indexOf('\n', at); nl >= 0; nl = pending.indexOf('\n', at)) {
        lineNo++;
        if (nl - at > maxLine) throw new BadInputError(`line ${lineNo} is longer than ${maxLine} characters`, file);
        yield [pending.slice(at, nl > at && pending.charCodeAt(nl - 1) === 13 ? nl - 1 : nl), lineNo];
        at = nl + 1;
      }
      pending = pending.slice(at);
      if (pending.length > maxLine) throw new BadInputError(`line ${lineNo + 1} is longer than ${maxLine} characters`, file);
    }
  } catch (e) {
    throw readFailure(e, file);
  } finally {
    input.destroy();
  }
  pending += decoder.end();
  if (pending.length > 0) yield [pending.endsWith('\r') ? pending.slice(0, -1) : pending, lineNo + 1];
}
