/**
 * CUPTI's callback ids of the CUDA runtime and driver calls gpumem's rules tell apart (copies, fills,
 * synchronisations, allocations, launches, prefetches), as nvprof's databases (.nvvp, .nvprof) name calls: by
 * cbid, not by name. The ids are CUPTI's (cupti_runtime_cbid.h and cupti_driver_cbid.h of CUDA 13.0, which only
 * ever append); a call of any other id is named by its number and counts as an other call.
 */
const RUNTIME =
  '13 cudaLaunch,20 cudaMalloc,21 cudaMallocPitch,22 cudaFree,25 cudaMallocHost,26 cudaFreeHost,' +
  '27 cudaHostAlloc,31 cudaMemcpy,32 cudaMemcpy2D,39 cudaMemcpyToSymbol,40 cudaMemcpyFromSymbol,' +
  '41 cudaMemcpyAsync,42 cudaMemcpyToArrayAsync,43 cudaMemcpyFromArrayAsync,44 cudaMemcpy2DAsync,' +
  '45 cudaMemcpy2DToArrayAsync,46 cudaMemcpy2DFromArrayAsync,47 cudaMemcpyToSymbolAsync,' +
  '48 cudaMemcpyFromSymbolAsync,49 cudaMemset,50 cudaMemset2D,51 cudaMemsetAsync,52 cudaMemset2DAsync,' +
  '126 cudaThreadSynchronize,131 cudaStreamSynchronize,137 cudaEventSynchronize,142 cudaMemset3D,' +
  '143 cudaMemset3DAsync,144 cudaMemcpy3D,145 cudaMemcpy3DAsync,152 cudaHostRegister,160 cudaMemcpyPeer,' +
  '161 cudaMemcpyPeerAsync,163 cudaMemcpy3DPeerAsync,165 cudaDeviceSynchronize,206 cudaMallocManaged,' +
  '211 cudaLaunchKernel,213 cudaLaunch_ptsz,214 cudaLaunchKernel_ptsz,215 cudaMemcpy_ptds,' +
  '216 cudaMemcpy2D_ptds,223 cudaMemcpyToSymbol_ptds,224 cudaMemcpyFromSymbol_ptds,' +
  '225 cudaMemcpyAsync_ptsz,226 cudaMemcpyToArrayAsync_ptsz,227 cudaMemcpyFromArrayAsync_ptsz,' +
  '228 cudaMemcpy2DAsync_ptsz,229 cudaMemcpy2DToArrayAsync_ptsz,230 cudaMemcpy2DFromArrayAsync_ptsz,' +
  '231 cudaMemcpyToSymbolAsync_ptsz,232 cudaMemcpyFromSymbolAsync_ptsz,233 cudaMemset_ptds,' +
  '234 cudaMemset2D_ptds,235 cudaMemsetAsync_ptsz,236 cudaMemset2DAsync_ptsz,' +
  '239 cudaStreamSynchronize_ptsz,243 cudaMemset3D_ptds,244 cudaMemset3DAsync_ptsz,245 cudaMemcpy3D_ptds,' +
  '246 cudaMemcpy3DAsync_ptsz,250 cudaMemcpy3DPeerAsync_ptsz,252 cudaMemPrefetchAsync,' +
  '253 cudaMemPrefetchAsync_ptsz,269 cudaLaunchCooperativeKernel,270 cudaLaunchCooperativeKernel_ptsz,' +
  '272 cudaLaunchCooperativeKernelMultiDevice,311 cudaGraphLaunch,312 cudaGraphLaunch_ptsz,' +
  '373 cudaMallocAsync,374 cudaMallocAsync_ptsz,375 cudaFreeAsync,376 cudaFreeAsync_ptsz,' +
  '391 cudaMallocFromPoolAsync,392 cudaMallocFromPoolAsync_ptsz,430 cudaLaunchKernelExC,' +
  '431 cudaLaunchKernelExC_ptsz,449 cudaMemPrefetchAsync,450 cudaMemPrefetchAsync_ptsz,' +
  '482 cudaMemcpyBatchAsync,483 cudaMemcpyBatchAsync_ptsz,484 cudaMemcpy3DBatchAsync,' +
  '485 cudaMemcpy3DBatchAsync_ptsz,487 cudaMemPrefetchBatchAsync,488 cudaMemPrefetchBatchAsync_ptsz,' +
  '509 cudaMemcpyBatchAsync,510 cudaMemcpyBatchAsync_ptsz,511 cudaMemcpy3DBatchAsync,' +
  '512 cudaMemcpy3DBatchAsync_ptsz';
const DRIVER =
  '17 cuCtxSynchronize,29 cuMemAlloc,33 cuMemFree,37 cuMemAllocHost,38 cuMemFreeHost,39 cuMemHostAlloc,' +
  '43 cuMemcpyHtoD,45 cuMemcpyDtoH,47 cuMemcpyDtoD,56 cuMemcpy2D,58 cuMemcpy3D,60 cuMemcpyHtoDAsync,' +
  '62 cuMemcpyDtoHAsync,64 cuMemcpyDtoDAsync,66 cuMemcpyHtoAAsync,67 cuMemcpyAtoHAsync,' +
  '68 cuMemcpy2DAsync,69 cuMemcpy3DAsync,71 cuMemsetD8,73 cuMemsetD16,75 cuMemsetD32,77 cuMemsetD2D8,' +
  '79 cuMemsetD2D16,81 cuMemsetD2D32,115 cuLaunch,121 cuEventSynchronize,126 cuStreamSynchronize,' +
  '216 cuMemsetD8Async,218 cuMemsetD16Async,220 cuMemsetD32Async,222 cuMemsetD2D8Async,' +
  '224 cuMemsetD2D16Async,226 cuMemsetD2D32Async,243 cuMemAlloc,245 cuMemFree,248 cuMemcpy,' +
  '249 cuMemsetD8,250 cuMemsetD16,251 cuMemsetD32,252 cuMemsetD2D8,253 cuMemsetD2D16,254 cuMemsetD2D32,' +
  '271 cuMemHostAlloc,276 cuMemcpyHtoD,277 cuMemcpyHtoDAsync,278 cuMemcpyDtoH,279 cuMemcpyDtoHAsync,' +
  '280 cuMemcpyDtoD,281 cuMemcpyDtoDAsync,283 cuMemcpyAtoHAsync,287 cuMemcpy2D,289 cuMemcpy2DAsync,' +
  '290 cuMemcpy3D,291 cuMemcpy3DAsync,293 cuMemcpyHtoAAsync,294 cuMemAllocHost,301 cuMemHostRegister,' +
  '305 cuMemcpy,306 cuMemcpyAsync,307 cuLaunchKernel,318 cuMemcpyPeer,319 cuMemcpyPeerAsync,' +
  '321 cuMemcpy3DPeerAsync,371 cuMemAllocManaged,379 cuMemHostRegister,408 cuMemcpy_ptds,' +
  '409 cuMemcpyPeer_ptds,411 cuMemsetD8_v2_ptds,412 cuMemsetD16_v2_ptds,413 cuMemsetD32_v2_ptds,' +
  '414 cuMemsetD2D8_v2_ptds,415 cuMemsetD2D16_v2_ptds,416 cuMemsetD2D32_v2_ptds,418 cuMemcpyAsync_ptsz,' +
  '426 cuMemcpyPeerAsync_ptsz,427 cuMemcpy3DPeerAsync_ptsz,428 cuMemsetD8Async_ptsz,' +
  '429 cuMemsetD16Async_ptsz,430 cuMemsetD32Async_ptsz,431 cuMemsetD2D8Async_ptsz,' +
  '432 cuMemsetD2D16Async_ptsz,433 cuMemsetD2D32Async_ptsz,440 cuStreamSynchronize_ptsz,' +
  '442 cuLaunchKernel_ptsz,467 cuMemPrefetchAsync,468 cuMemPrefetchAsync_ptsz,' +
  '477 cuLaunchCooperativeKernel,478 cuLaunchCooperativeKernel_ptsz,' +
  '480 cuLaunchCooperativeKernelMultiDevice,514 cuGraphLaunch,515 cuGraphLaunch_ptsz,549 cuMemCreate,' +
  '550 cuMemRelease,551 cuMemMap,552 cuMemUnmap,598 cuMemAllocAsync,599 cuMemAllocAsync_ptsz,' +
  '600 cuMemFreeAsync,601 cuMemFreeAsync_ptsz,652 cuLaunchKernelEx,653 cuLaunchKernelEx_ptsz,' +
  '716 cuMemPrefetchAsync,776 cuMemcpyBatchAsync,777 cuMemcpyBatchAsync_ptsz,778 cuMemcpy3DBatchAsync,' +
  '779 cuMemcpy3DBatchAsync_ptsz,784 cuMemPrefetchBatchAsync,785 cuMemPrefetchBatchAsync_ptsz,' +
  '796 cuMemcpyBatchAsync,798 cuMemcpy3DBatchAsync,800 cuCtxSynchronize';

/** "20 cudaMalloc,22 cudaFree" as a map from id to name. */
const parse = (list: string): ReadonlyMap<number, string> =>
  new Map(
    list.split(',').map((e) => {
      const [id, name] = e.split(' ');
      return [Number(id), name!] as const;
    }),
  );

/** Runtime API (CUPTI_ACTIVITY_KIND_RUNTIME) callback ids to names. */
export const RUNTIME_CBID = parse(RUNTIME);
/** Driver API (CUPTI_ACTIVITY_KIND_DRIVER) callback ids to names. */
export const DRIVER_CBID = parse(DRIVER);
