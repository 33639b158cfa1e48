/**
 * `gpumem/plan`: the LLM memory planner. Pure TypeScript: importing it loads no GPU library and no native addon.
 *
 * ```ts
 * import { catalogueModel, machineFromCatalogue, plan } from 'gpumem/plan';
 * const r = plan(catalogueModel('llama-3.1-8b'), options, machineFromCatalogue('h100'));
 * ```
 */
export { plan, machineFromCatalogue, type Machine, type Placement, type PlanResult, type Suggestion } from './plan.js';
export { catalogueModel, MODEL_CONFIGS } from './catalogue.js';
export { catalogueGpu, GPUS, type GpuSpec } from '../catalogue/gpus.js';
export { machineFromBench } from './bench-machine.js';
export { readConfigFile } from './config-file.js';
export { planOptionsFrom, DEFAULT_INPUTS, type PlanInputs } from './inputs.js';
export { parseConfigText, normaliseConfig, type ModelConfig, type MoeShape, type MlaShape } from './model-config.js';
export * from './estimate.js';
