// The built gpumem the benchmark scripts and tools load: this checkout's dist/, or GPUMEM_DIST (on a GPU machine,
// the bundle's .gpu/app/dist), with koffi from that same install.
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dist = process.env.GPUMEM_DIST ? pathToFileURL(`${process.env.GPUMEM_DIST}/`) : new URL('../dist/', import.meta.url);

/** A module of the built package, by its path under dist/ (default: the main entry). */
export const fromDist = (path = 'index.js') => import(new URL(path, dist).href);

/** koffi, as the built package resolves it. */
export const koffiOfDist = () => createRequire(fileURLToPath(new URL('../package.json', dist)))('koffi');
