/**
 * Reading a Hugging Face config.json from disk, or the config.json of a model folder as the Hub lays it out (Node
 * only; the browser page parses pasted text).
 */
import { readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { BadInputError } from '../errors.js';
import { type ModelConfig, parseConfigText } from './model-config.js';

/** A config.json's text, where it was read from, and the model's name (its folder's). */
export interface ConfigSource {
  file: string;
  name: string;
  text: string;
}

/**
 * Reads the config.json at `path`, or in the folder `path`.
 * @throws BadInputError when nothing readable is there, naming the path and why.
 */
export function readConfigSource(path: string): ConfigSource {
  let file = path;
  let folder: string;
  let isDir = false;
  try {
    isDir = statSync(path).isDirectory();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new BadInputError(code === 'ENOENT' ? 'no such file or folder' : `cannot read it (${code ?? 'unknown error'})`, path);
  }
  if (isDir) {
    file = join(path, 'config.json');
    folder = resolve(path);
  } else folder = dirname(resolve(path));
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (isDir && code === 'ENOENT') throw new BadInputError('the folder holds no config.json (a Hugging Face model folder has one)', path);
    throw new BadInputError(`cannot read the file (${code ?? 'unknown error'})`, file);
  }
  return { file, name: basename(folder) || 'custom', text };
}

/**
 * Reads a config.json, or a model folder's; the model is named after its folder.
 * @throws BadInputError naming the file and the field.
 */
export function readConfigFile(path: string): ModelConfig {
  const s = readConfigSource(path);
  return parseConfigText(s.text, s.file, s.name);
}
