/** Reading a Hugging Face config.json from disk (Node only; the browser page parses pasted text). */
import { readFileSync } from 'node:fs';
import { BadInputError } from '../errors.js';
import { parseConfigText, type ModelConfig } from './model-config.js';

/**
 * Reads a config.json; the model is named after its folder.
 * @throws BadInputError naming the file and the field.
 */
export function readConfigFile(file: string): ModelConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new BadInputError('cannot read the file', file);
  }
  const base = file.replace(/\\/g, '/').split('/');
  return parseConfigText(text, file, base.length > 1 ? base[base.length - 2]! : 'custom');
}
