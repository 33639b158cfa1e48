/**
 * What the interactive plan page runs in the browser: the planner itself (no GPU, no Node API), bundled by
 * tools/bundle-plan.mjs into dist/plan/browser.bundle.js and inlined into the page as the global `gpumemPlan`.
 */
export { catalogueModel, MODEL_CONFIGS } from './catalogue.js';
export { catalogueGpu, GPUS } from '../catalogue/gpus.js';
export { planOptionsFrom } from './inputs.js';
export { DEFAULT_INPUTS, SCHEMA } from './schema.js';
export { parseBytes } from '../units.js';
export { parseConfigText } from './model-config.js';
export { PRECISIONS } from './options.js';
export { machineFromCatalogue, machineFromMemory, plan } from './plan.js';
export { planAsked } from './search/ask.js';
