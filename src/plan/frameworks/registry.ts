/** The frameworks by name: a new one is a file here and a line below. */
import type { Framework as FrameworkName } from '../options.js';
import { litgpt } from './litgpt.js';
import { megatron } from './megatron.js';
import { pytorch } from './pytorch.js';
import type { Framework } from './types.js';

export const FRAMEWORKS: Record<FrameworkName, Framework> = { pytorch, litgpt, megatron };

export const frameworkOf = (name: FrameworkName): Framework => FRAMEWORKS[name];
