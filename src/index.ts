/** gpumem: GPU memory management for AMD ROCm (HIP) and NVIDIA CUDA. */
export * from './errors.js';
export * from './units.js';
export type {
  Backend,
  BackendName,
  BackendCapabilities,
  DeviceInfo,
  DeviceMemoryUse,
  ProcessMemoryUse,
  PcieLink,
  LibraryRecord,
  KernelSource,
  KernelArgType,
  HostKernel,
  MemAdvice,
} from './backend/backend.js';
export { openBackend, isBackendChoice, type BackendSelection, type BackendAttempt, type OpenBackendOptions } from './backend/select.js';
export { createHostBackend } from './backend/host/host-backend.js';
export {
  Allocation,
  DeviceAllocation,
  PinnedAllocation,
  MappedAllocation,
  ManagedAllocation,
  PageableAllocation,
  MEMORY_KINDS,
  type MemoryKind,
  type PinnedOptions,
  type ManagedTarget,
} from './memory/allocation.js';
export { copyDirection, memorySide, type CopyDirection, type CopyOptions, type FillOptions, type MemoryRef } from './memory/copy.js';
export { Device, type DeviceAllocOptions, type ManagedAllocOptions } from './memory/device.js';
export { MemoryRuntime } from './memory/runtime.js';
export {
  Runtime,
  openRuntime,
  type OpenRuntimeOptions,
  type PageableAllocOptions,
  type LiveMemory,
  type PreparedCopy,
} from './runtime/runtime.js';
export { Stream, type StreamCreateOptions } from './stream/stream.js';
export { GpuEvent, type EventCreateOptions } from './stream/event.js';
export { KernelModule, Kernel, type LaunchOptions, type LaunchArg, type PointerArg, type PreparedLaunch } from './kernels/module.js';
export { BENCH_KERNELS, patternWord } from './kernels/bench-kernels.js';
export * from './pool/index.js';
export * from './replay/index.js';
export * from './monitor/index.js';
export {
  Stager,
  type StagerOptions,
  type TransferOptions,
  type TransferResult,
  type TransferPath,
  type UploadItem,
  type DownloadItem,
  type ManyOptions,
  type ManyResult,
  type FileTransferOptions,
  type FileTransferResult,
} from './transfer/stager.js';
export type { FileRef } from './transfer/file-source.js';
export type { HostBuffer } from './transfer/host-buffer.js';
export { transferDefaults, type TransferSettings } from './transfer/defaults.js';
export type { BatchCopy, BatchResult, PreparedBatch } from './transfer/batch.js';
export { CapturedGraph, type CaptureScope } from './transfer/graph.js';
export type { PipelineOptions, PipelineResult, PipelineChunk } from './transfer/pipeline.js';
export { StagedCommunicator, type Communicator } from './collectives/staged.js';
export { NcclBuffer, NcclCommunicator, loadNccl, openCommunicator, type NcclLibrary } from './collectives/nccl.js';
export {
  COLLECTIVES,
  DTYPES,
  REDUCTIONS,
  bufferBytes,
  ncclTestsSize,
  type Collective,
  type CollectiveCall,
  type DType,
  type Reduction,
} from './collectives/types.js';
export {
  SAFETENSORS_DTYPES,
  SAFETENSORS_MAX_HEADER_BYTES,
  SafetensorsError,
  dtypeBits,
  isSafetensorsDtype,
  layoutSafetensors,
  parseHeader as parseSafetensorsHeader,
  parseSafetensors,
  serializeSafetensors,
  tensorByteSize,
  type SafetensorsDtype,
  type SafetensorsEntry,
  type SafetensorsHeader,
  type SafetensorsHostTensor,
  type SafetensorsLayout,
  type SafetensorsProblem,
  type SafetensorsTensorInfo,
} from './formats/safetensors.js';
export { parseShardIndex, type SafetensorsIndex } from './formats/safetensors-index.js';
export {
  loadSafetensors,
  saveSafetensors,
  type DeviceTensor,
  type LoadedSafetensors,
  type LoadSafetensorsOptions,
  type SafetensorsData,
  type SaveResult,
  type SaveSafetensorsOptions,
  type SaveTensor,
} from './runtime/safetensors.js';
export type { FilePath, FileRange } from './runtime/safetensors-io.js';
