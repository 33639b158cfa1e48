/**
 * `gpumem/plan`: the LLM memory planner. Pure TypeScript: importing it loads no GPU library and no native addon.
 *
 * ```ts
 * import { catalogueModel, machineFromCatalogue, plan } from 'gpumem/plan';
 * const r = plan(catalogueModel('llama-3.1-8b'), options, machineFromCatalogue('h100'));
 * ```
 */
export { plan, machineFromBench, machineFromCatalogue, type Machine, type Placement, type PlanResult, type Suggestion } from './plan.js';
export { catalogueModel, catalogueGpu, MODEL_CONFIGS, GPUS, type GpuSpec } from './catalogue.js';
export { readConfigFile, normaliseConfig, type ModelConfig, type MoeShape, type MlaShape } from './model-config.js';
export * from './estimate.js';
