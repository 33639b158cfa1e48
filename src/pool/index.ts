export * from './memory-resource.js';
export { ResourceAllocation, ResourceBase } from './resource-base.js';
export { DeviceResource, ManagedResource, PinnedResource, AsyncPoolResource, SimulatedResource } from './sources.js';
export { GrowableSource, VmmSource, SimulatedGrowableSource } from './growable.js';
export { CachingPool, type CachingPoolOptions } from './caching-pool.js';
export type { PoolSnapshot, SnapshotSegment, SnapshotBlock } from './snapshot.js';
export { Adaptor, StatisticsAdaptor, LimitingAdaptor, LoggingAdaptor, TrackingAdaptor, type LogLine, type TrackedAllocation } from './adaptors.js';
export { fragmentation, type PoolStats, type StatJSON } from './stats.js';
export type { TraceEntry, TraceAction } from './trace-ring.js';
