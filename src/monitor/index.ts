export { MemoryMonitor, type MonitorOptions, type MonitorSample, type DeviceSample, type ProcessSample, type PoolSample, type PoolLike } from './monitor.js';
export { toPrometheus, PROMETHEUS_CONTENT_TYPE } from './prometheus.js';
export { MonitorServer, type MonitorServerOptions } from './server.js';
export { MONITOR_SAMPLE_SCHEMA } from './schema.js';
