/**
 * GPUs gpumem knows by name: the memory the runtime reports, the memory bandwidth and the host link. Shared by the
 * planner (what fits) and the analyzer (the ceiling a trace's copies are judged against), so it sits below both.
 *
 * Memory is the total the runtime reports (cudaMemGetInfo's total, torch.cuda.get_device_properties().total_memory,
 * hipMemGetInfo's total): less than the size on the box, which counts memory the driver keeps. Each entry says where
 * its figure comes from, with the text quoted, and whether it was printed by a runtime (`runtime`) or derived from a
 * sibling part's printed figure (`derived`, and how). The figure moves by up to ~0.2 GiB with the driver and with a
 * display attached; the evidence lists the spread seen. The host link comes from the device catalogue (devices.ts),
 * found by the name the runtime prints, so the two catalogues cannot disagree. Bandwidths are the vendors' figures.
 */
import { BadInputError, ErrorCode, InvalidArgumentError } from '../errors.js';
import { GiB, MiB, parseBytes } from '../units.js';
import { type DeviceModel, describeLink, type HostLink, hostLinkGBps, identifyDevice } from './devices.js';

/** A published figure: where it is (a URL, or repository@commit path) and the text quoted from it. */
export interface Evidence {
  where: string;
  quote: string;
}

/** How memoryBytes was obtained: printed by a runtime, derived from another part's printed figure, or given by the user. */
export type MemoryFigure = 'runtime' | 'derived' | 'given';

/** A GPU's memory, bandwidths and host link. */
export interface GpuSpec {
  name: string;
  vendor: 'nvidia' | 'amd' | 'unknown';
  /** The name the runtime prints for it (torch.cuda.get_device_name, rocm-smi), when the model is known. */
  deviceName: string | undefined;
  /** The total the runtime reports, in bytes. */
  memoryBytes: number;
  memoryFigure: MemoryFigure;
  /** One line: the figure and where it comes from. */
  memorySource: string;
  /** The published figures behind memoryBytes, quoted; empty only for a capacity the user gave. */
  evidence: readonly Evidence[];
  /** Device memory bandwidth, GB/s (vendor figure); undefined where the model is unknown. */
  memoryGBps: number | undefined;
  link: HostLink;
  /** Host link bandwidth one way, GB/s (theoretical PCIe after encoding, or the vendor's host link). */
  hostLinkGBps: number;
  /** GPU-to-GPU bandwidth one way, GB/s (vendor figure), where the part has a scale-up link. */
  peerGBps?: number;
  /** Other names it is asked for by (matched without case, spaces or punctuation). */
  aliases: readonly string[];
  /** What is assumed rather than known, each with the value used (a capacity the user gave). */
  assumed: readonly string[];
  /**
   * Device memory a process's CUDA primary context takes on this part (driver state, local-memory and heap
   * reservations, lazily loaded modules at creation), as published; undefined where no figure is known.
   */
  cudaContext?: CudaContextFigure;
}

/** A CUDA context's size on one part: published for it, or derived from a sibling part's figure (and how). */
export interface CudaContextFigure {
  bytes: number;
  figure: 'published' | 'derived';
  source: string;
  evidence: readonly Evidence[];
}

/** A catalogue row: the vendor and the link are looked up from deviceName in the device catalogue. */
interface Row {
  name: string;
  deviceName: string;
  memoryBytes: number;
  figure: 'runtime' | 'derived';
  memoryGBps: number;
  peerGBps: number | undefined;
  aliases: string[];
  source: string;
  /** [where, the text quoted]. */
  evidence: Array<[string, string]>;
  context?: CudaContextFigure;
}

const HTA = 'facebookresearch/HolisticTraceAnalysis@f4d0062c382f';
const TRACELENS = 'AMD-AGI/TraceLens@171dd74721ca';
const THAMADA = 'thamada/nvidia-smi@b09ef139265f';
const PARAM = 'facebookresearch/param@1e115ffc62c6';
const KINETO = 'pytorch/kineto@041e7ce99f15';
const KERNELFORGE = 'marcalph/kernelforge@fc016e8f4cc6';
const gib = (n: number): string => `${(n / GiB).toFixed(2)} GiB`;

/**
 * CUDA primary contexts as published (each a process's use on a card it had not touched before, CUDA 12 with lazy
 * module loading). The A800 is the A100's GA100 with 108 SMs and NVLink cut to 400 GB/s: its figure is the A100s'.
 */
const TORCHCOMMS_777 = 'https://github.com/meta-pytorch/torchcomms/pull/777';
const MOONCAKE_3973 = 'https://github.com/kvcache-ai/Mooncake/pull/3973';
const H100_CONTEXT: CudaContextFigure = {
  bytes: 534 * MiB,
  figure: 'published',
  source: 'a primary context on an H100: ~534 MiB (meta-pytorch/torchcomms#777)',
  evidence: [{ where: TORCHCOMMS_777, quote: 'On H100, each primary context costs ~534 MiB.' }],
};
const H200_CONTEXT: CudaContextFigure = {
  bytes: 520 * MiB,
  figure: 'published',
  source: 'a primary context on an H200: ~520 MiB (kvcache-ai/Mooncake#3973, CUDA 12.9)',
  evidence: [{ where: MOONCAKE_3973, quote: 'several hundred MiB per process (~520 MiB on H200, ~414 MiB on A800)' }],
};
const A100_CONTEXT: CudaContextFigure = {
  bytes: 414 * MiB,
  figure: 'derived',
  source: "derived: a primary context on an A800 (the A100's GA100, 108 SMs): ~414 MiB (kvcache-ai/Mooncake#3973, CUDA 12.9)",
  evidence: [{ where: MOONCAKE_3973, quote: 'several hundred MiB per process (~520 MiB on H200, ~414 MiB on A800)' }],
};
const A800_CONTEXT: CudaContextFigure = {
  bytes: 414 * MiB,
  figure: 'published',
  source: 'a primary context on an A800: ~414 MiB (kvcache-ai/Mooncake#3973, CUDA 12.9)',
  evidence: [{ where: MOONCAKE_3973, quote: 'several hundred MiB per process (~520 MiB on H200, ~414 MiB on A800)' }],
};
const derivedFrom = (f: CudaContextFigure, why: string): CudaContextFigure => ({ ...f, figure: 'derived', source: `derived (${why}): ${f.source}` });

/**
 * The catalogue. Notes on single figures: the A10G's bandwidth is the A10's (AWS publishes none: the same GA102 with
 * 384-bit GDDR6 at 12.5 Gb/s); the A100 40GB's PCIe and SXM4 boards have the same memory, bandwidth and host link and
 * both pair over NVLink at 600 GB/s; `a100` is the SXM4 80GB, the A100 people rent and publish traces of most (DGX/HGX
 * A100 80GB); the B200's 8000 GB/s is NVIDIA's figure, while the bus its driver reports (7680 bits at 3996 MHz) gives
 * 7.67 TB/s (pytorch/ao#4002). `v100` is the SXM2 16GB, the V100 the clouds rent most (AWS p3, Google Cloud, Colab);
 * the V100 PCIe boards have no NVLink. Peer figures of PCIe cards with an NVLink bridge (RTX 2080 Ti, RTX A5000/A6000,
 * A30, A40) are the bridge's. Cards whose runtime total moves with ECC (the 48 GB Ada and Ampere parts) say which
 * setting their figure is for.
 */
const ROWS: Record<string, Row> = {
  'rtx-3090': {
    name: 'NVIDIA GeForce RTX 3090',
    deviceName: 'NVIDIA GeForce RTX 3090',
    memoryBytes: 25_327_697_920,
    figure: 'runtime',
    memoryGBps: 936,
    peerGBps: 56.25,
    aliases: ['3090'],
    source: 'totalGlobalMem in a PyTorch profiler trace of two RTX 3090s: 23.59 GiB (bclarkson-code/flow_matching)',
    evidence: [
      ['bclarkson-code/flow_matching@080a3c35f31b pytorch_trace.json', '"name": "NVIDIA GeForce RTX 3090", "totalGlobalMem": 25327697920'],
      ['Jumperkables/cuda-benchmarking 00_deviceQuery/README.md (a desktop with a display)', 'Global Memory:                      25286672384 bytes'],
    ],
  },
  'rtx-4090': {
    name: 'NVIDIA GeForce RTX 4090',
    deviceName: 'NVIDIA GeForce RTX 4090',
    memoryBytes: 25_386_352_640,
    figure: 'runtime',
    memoryGBps: 1008,
    peerGBps: undefined,
    aliases: ['4090'],
    source: 'deviceQuery on an 8 x RTX 4090 server, driver 12.4: 23.64 GiB (thamada/nvidia-smi); torch prints 23.52-23.65 GiB on other machines',
    evidence: [
      [`${THAMADA} gls/RTX4090_deviceQuery.py`, 'Total amount of global memory:                 24210 MBytes (25386352640 bytes)'],
      ['https://github.com/3DTopia/Phidias-Diffusion/issues/8', 'GPU 0 has a total capacty of 23.64 GiB'],
    ],
  },
  'rtx-5090': {
    name: 'NVIDIA GeForce RTX 5090',
    deviceName: 'NVIDIA GeForce RTX 5090',
    memoryBytes: 33_680_457_728,
    figure: 'runtime',
    memoryGBps: 1792,
    peerGBps: undefined,
    aliases: ['5090'],
    source: 'deviceQuery on two RTX 5090s, driver 12.8: 31.37 GiB (NVIDIA/nccl#1637); torch out-of-memory messages print the same',
    evidence: [
      ['https://github.com/NVIDIA/nccl/issues/1637', 'Total amount of global memory:                 32120 MBytes (33680457728 bytes)'],
      ['https://github.com/Wan-Video/Wan2.1/issues/465', 'GPU 0 has a total capacity of 31.37 GiB'],
    ],
  },
  'rtx-2080-ti': {
    name: 'NVIDIA GeForce RTX 2080 Ti',
    deviceName: 'NVIDIA GeForce RTX 2080 Ti',
    memoryBytes: 11_554_586_624,
    figure: 'runtime',
    memoryGBps: 616,
    peerGBps: 50,
    aliases: ['2080ti', 'rtx2080ti'],
    source: 'totalGlobalMem in a PyTorch profiler trace of eight RTX 2080 Ti: 10.76 GiB (facebookresearch/param)',
    evidence: [[`${PARAM} et_replay/tests/inputs/resnet_kineto.json.gz`, '"name": "NVIDIA GeForce RTX 2080 Ti", "totalGlobalMem": 11554586624']],
  },
  'rtx-3060': {
    name: 'NVIDIA GeForce RTX 3060 12GB',
    deviceName: 'NVIDIA GeForce RTX 3060',
    memoryBytes: 12_629_508_096,
    figure: 'runtime',
    memoryGBps: 360,
    peerGBps: undefined,
    aliases: ['3060', 'rtx-3060-12gb'],
    source:
      'deviceQuery on an RTX 3060 12GB, driver 12.2: 11.76 GiB; torch prints 11.65-11.76 GiB (less with a display attached), and deviceQuery on Windows and WSL 12 GiB less 512 KiB',
    evidence: [
      [
        'a deviceQuery print in a CUDA sample README in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA GeForce RTX 3060" ... Total amount of global memory:                 12044 MBytes (12629508096 bytes)',
      ],
      [
        'a PyTorch device check in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='NVIDIA GeForce RTX 3060', major=8, minor=6, total_memory=11931MB, multi_processor_count=28)",
      ],
      [
        'a deviceQuery print on a Linux desktop in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA GeForce RTX 3060" ... Total amount of global memory:                 12004 MBytes (12587106304 bytes)',
      ],
    ],
  },
  'rtx-3080': {
    name: 'NVIDIA GeForce RTX 3080 10GB',
    deviceName: 'NVIDIA GeForce RTX 3080',
    memoryBytes: 10_472_390_656,
    figure: 'runtime',
    memoryGBps: 760,
    peerGBps: undefined,
    aliases: ['3080', 'rtx-3080-10gb'],
    source: 'deviceQuery on an RTX 3080 10GB, driver 12.0: 9.75 GiB; Windows deviceQuery prints 10 GiB less 512 KiB (the WDDM figure)',
    evidence: [
      [
        'a deviceQuery print in a blog post in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA GeForce RTX 3080" ... Total amount of global memory:                 9987 MBytes (10472390656 bytes)',
      ],
      [
        'a Windows deviceQuery print in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA GeForce RTX 3080" ... Total amount of global memory:                 10240 MBytes (10736893952 bytes)',
      ],
    ],
  },
  'rtx-4080': {
    name: 'NVIDIA GeForce RTX 4080',
    deviceName: 'NVIDIA GeForce RTX 4080',
    memoryBytes: 16_049 * MiB,
    figure: 'runtime',
    memoryGBps: 716.8,
    peerGBps: undefined,
    aliases: ['4080'],
    source: "torch's device properties on an RTX 4080: total_memory=16049MB, 15.67 GiB (to the MiB torch prints)",
    evidence: [
      [
        'a PyTorch install check in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='NVIDIA GeForce RTX 4080', major=8, minor=9, total_memory=16049MB, multi_processor_count=76)",
      ],
    ],
  },
  'rtx-a4000': {
    name: 'NVIDIA RTX A4000',
    deviceName: 'NVIDIA RTX A4000',
    memoryBytes: Math.round(15.61 * GiB),
    figure: 'runtime',
    memoryGBps: 448,
    peerGBps: undefined,
    aliases: ['a4000'],
    source:
      "torch's out-of-memory message on an RTX A4000: 15.61 GiB total capacity (DengKaiCQ/VGGT-Long#6); Windows deviceQuery prints 15.99 GiB (the WDDM figure)",
    evidence: [
      ['https://github.com/DengKaiCQ/VGGT-Long/issues/6', 'GPU 0 has a total capacity of 15.61 GiB'],
      [
        'a Windows deviceQuery print in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA RTX A4000" ... Total amount of global memory:                 16376 MBytes (17174683648 bytes)',
      ],
    ],
  },
  'rtx-a5000': {
    name: 'NVIDIA RTX A5000',
    deviceName: 'NVIDIA RTX A5000',
    memoryBytes: 25_402_343_424,
    figure: 'runtime',
    memoryGBps: 768,
    peerGBps: 56.25,
    aliases: ['a5000'],
    source: "totalGlobalMem as a CUDA course's device query prints it on an RTX A5000: 23.66 GiB; torch prints 23.55-23.57 GiB on other machines",
    evidence: [
      [
        'a CUDA course page in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA RTX A5000" with Compute 8.6 capability ... Total amount of global memory:      24226 MBytes (25402343424 bytes)',
      ],
      [
        'a PyTorch device check in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='NVIDIA RTX A5000', major=8, minor=6, total_memory=24138MB, multi_processor_count=64",
      ],
    ],
  },
  'rtx-a6000': {
    name: 'NVIDIA RTX A6000',
    deviceName: 'NVIDIA RTX A6000',
    memoryBytes: 51_160_023_040,
    figure: 'runtime',
    memoryGBps: 768,
    peerGBps: 56.25,
    aliases: ['a6000'],
    source: 'deviceQuery on an 8 x RTX A6000 server, driver 12.7: 47.65 GiB; torch prints total_memory=48676MB (47.54 GiB) on other machines',
    evidence: [
      [
        'a cluster documentation page with deviceQuery output in public code (repository not resolved by the code index)',
        'Device 0: "NVIDIA RTX A6000" ... Total amount of global memory:                 48790 MBytes (51160023040 bytes)',
      ],
      [
        'a kernel benchmark README in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='NVIDIA RTX A6000', major=8, minor=6, total_memory=48676MB, multi_processor_count=84)",
      ],
    ],
  },
  'rtx-6000-ada': {
    name: 'NVIDIA RTX 6000 Ada Generation',
    deviceName: 'NVIDIA RTX 6000 Ada Generation',
    memoryBytes: 51_002_867_712,
    figure: 'runtime',
    memoryGBps: 960,
    peerGBps: undefined,
    aliases: ['6000-ada', 'rtx6000ada'],
    source:
      'deviceQuery on an 8 x RTX 6000 Ada server, driver 12.4, ECC off: 47.50 GiB (thamada/nvidia-smi); with ECC on torch prints 44.43 GiB (nvidia-smi 46068 MiB)',
    evidence: [
      [`${THAMADA} gls/RTX6000Ada_x8_deviceQuery.py`, 'Total amount of global memory:                 48640 MBytes (51002867712 bytes)'],
      ['https://github.com/DINGYANB/MTVCrafter/issues/21 (ECC on)', 'GPU 0 has a total capacity of 44.43 GiB ... NVIDIA RTX 6000 Ada Gene...   46068MiB'],
    ],
  },
  p40: {
    name: 'NVIDIA Tesla P40',
    deviceName: 'Tesla P40',
    memoryBytes: 24_032_378_880,
    figure: 'runtime',
    memoryGBps: 346,
    peerGBps: undefined,
    aliases: [],
    source: "deviceQuery on a Tesla P40, CUDA 9.2 and 10.0 drivers: 22.38 GiB; torch's out-of-memory message on four P40s prints the same",
    evidence: [
      [
        'deviceQuery prints in public code (repository not resolved by the code index)',
        'Device 0: "Tesla P40" ... Total amount of global memory:                 22919 MBytes (24032378880 bytes)',
      ],
      ['https://github.com/LinkSoul-AI/Chinese-Llama-2-7b/issues/56', '(GPU 0; 22.38 GiB total capacity; 22.18 GiB already allocated'],
    ],
  },
  p100: {
    name: 'NVIDIA Tesla P100 PCIe 16GB',
    deviceName: 'Tesla P100-PCIE-16GB',
    memoryBytes: 17_071_734_784,
    figure: 'runtime',
    memoryGBps: 732,
    peerGBps: undefined,
    aliases: ['p100-16', 'p100-pcie', 'p100-pcie-16gb'],
    source:
      "deviceQuery on a P100 PCIe 16GB, drivers 11.2 and 11.4: 15.90 GiB (an HPC centre's and a cloud's documentation); torch prints total_memory=16280MB",
    evidence: [
      [
        "deviceQuery prints in an HPC centre's and a cloud's documentation in public code (repository not resolved by the code index)",
        'Device 0: "Tesla P100-PCIE-16GB" ... Total amount of global memory:                 16281 MBytes (17071734784 bytes)',
      ],
      [
        'PyTorch set-up logs in public notebooks (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='Tesla P100-PCIE-16GB', major=6, minor=0, total_memory=16280MB, multi_processor_count=56)",
      ],
    ],
  },
  'v100-16': {
    name: 'NVIDIA Tesla V100 SXM2 16GB',
    deviceName: 'Tesla V100-SXM2-16GB',
    memoryBytes: 16_945_512_448,
    figure: 'runtime',
    memoryGBps: 900,
    peerGBps: 150,
    aliases: ['v100', 'v100-sxm2', 'v100-16gb', 'v100-sxm2-16gb', 'v100-16-sxm'],
    source: "deviceQuery on a V100-SXM2-16GB, CUDA 9.0 and 10.2 drivers: 15.78 GiB; torch's out-of-memory message on a 16GB V100 prints the same",
    evidence: [
      [
        'deviceQuery prints in public documentation (repository not resolved by the code index)',
        'Device 0: "Tesla V100-SXM2-16GB" ... Total amount of global memory:                 16160 MBytes (16945512448 bytes)',
      ],
      ['https://github.com/kchengiva/Shift-GCN/issues/34', '(GPU 0; 15.78 GiB total capacity; 14.25 GiB already allocated'],
      ['YOLOv5 logs on Colab in public notebooks (repository not resolved by the code index)', 'CUDA:0 (Tesla V100-SXM2-16GB, 16160MiB)'],
    ],
  },
  'v100-16-pcie': {
    name: 'NVIDIA Tesla V100 PCIe 16GB',
    deviceName: 'Tesla V100-PCIE-16GB',
    memoryBytes: 16_945_512_448,
    figure: 'derived',
    memoryGBps: 900,
    peerGBps: undefined,
    aliases: ['v100-pcie', 'v100-pcie-16gb'],
    source:
      "derived: the V100 SXM2 16GB's runtime total (15.78 GiB), the same 16 GB of HBM2; torch on a V100 PCIe 16GB prints total_memory=16160MB, the same to the MiB",
    evidence: [
      [
        'deviceQuery prints in public documentation (the SXM2 board; repository not resolved by the code index)',
        'Device 0: "Tesla V100-SXM2-16GB" ... Total amount of global memory:                 16160 MBytes (16945512448 bytes)',
      ],
      [
        'a PyTorch check on a cluster in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='Tesla V100-PCIE-16GB', major=7, minor=0, total_memory=16160MB, multi_processor_count=80)",
      ],
    ],
  },
  'v100-32': {
    name: 'NVIDIA Tesla V100 SXM2 32GB',
    deviceName: 'Tesla V100-SXM2-32GB',
    memoryBytes: 34_079_637_504,
    figure: 'runtime',
    memoryGBps: 900,
    peerGBps: 150,
    aliases: ['v100-32gb', 'v100-sxm2-32gb', 'v100-32-sxm'],
    source:
      "totalGlobalMem in a PyTorch profiler trace of a V100-SXM2-32GB: 31.74 GiB (facebookresearch/HolisticTraceAnalysis); torch's out-of-memory message prints the same; a DGX Station's V100-DGXS-32GB 31.74 GiB",
    evidence: [
      [`${HTA} tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz`, '"name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34079637504'],
      ['https://github.com/liucongg/ChatGLM-Finetuning/issues/73', '(GPU 0; 31.74 GiB total capacity; 30.41 GiB already allocated'],
      [
        `${KINETO} tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz`,
        '"name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34084028416',
      ],
    ],
  },
  'v100-32-pcie': {
    name: 'NVIDIA Tesla V100 PCIe 32GB',
    deviceName: 'Tesla V100-PCIE-32GB',
    memoryBytes: 34_058_272_768,
    figure: 'runtime',
    memoryGBps: 900,
    peerGBps: undefined,
    aliases: ['v100-pcie-32gb'],
    source: 'deviceQuery on a V100-PCIE-32GB, driver 10.1: 31.72 GiB; torch prints total_memory=32510MB (31.75 GiB) on another machine',
    evidence: [
      [
        'a deviceQuery print in public documentation (repository not resolved by the code index)',
        'Device 0: "Tesla V100-PCIE-32GB" ... Total amount of global memory:\t32480 MBytes (34058272768 bytes)',
      ],
      [
        'a PyTorch tutorial in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='Tesla V100-PCIE-32GB', major=7, minor=0, total_memory=32510MB, multi_processor_count=80)",
      ],
      [
        `${HTA} tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz (the SXM2 board)`,
        '"name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34079637504',
      ],
    ],
  },
  t4: {
    name: 'NVIDIA Tesla T4',
    deviceName: 'Tesla T4',
    memoryBytes: 15_637_086_208,
    figure: 'runtime',
    memoryGBps: 320,
    peerGBps: undefined,
    aliases: [],
    source:
      "totalGlobalMem in a PyTorch profiler trace of a T4, driver 13.0: 14.56 GiB (marcalph/kernelforge); torch's out-of-memory message on a GCP T4 prints the same",
    evidence: [
      [`${KERNELFORGE} log/bfeed93fe629_2566.1773933981558265129.pt.trace.json`, '"name": "Tesla T4", "totalGlobalMem": 15637086208'],
      ['https://github.com/Zheng-Chong/CatVTON/issues/133', 'GPU 0 has a total capacity of 14.56 GiB'],
    ],
  },
  a10: {
    name: 'NVIDIA A10',
    deviceName: 'NVIDIA A10',
    memoryBytes: 23_609_475_072,
    figure: 'runtime',
    memoryGBps: 600,
    peerGBps: undefined,
    aliases: [],
    source: 'CUDA device properties on an A10, driver 12.2: 21.99 GiB (aalanwyr/face2cuda); other drivers print up to 22.18 GiB',
    evidence: [
      ['aalanwyr/face2cuda@9ad81566c5da step2cuda/README.md', 'Total amount of global memory:                21.99 GBytes (23609475072 bytes)'],
      ['https://github.com/OpenBMB/MiniCPM-V/issues/640', 'GPU 0 has a total capacity of 22.18 GiB'],
    ],
  },
  a10g: {
    name: 'NVIDIA A10G',
    deviceName: 'NVIDIA A10G',
    memoryBytes: Math.round(22.2 * GiB),
    figure: 'runtime',
    memoryGBps: 600,
    peerGBps: undefined,
    aliases: [],
    source: "torch's out-of-memory message on a g5.12xlarge (4 x A10G): 22.20 GiB total capacity (XavierXiao/Dreambooth-Stable-Diffusion#18)",
    evidence: [['https://github.com/XavierXiao/Dreambooth-Stable-Diffusion/issues/18', '(GPU 0; 22.20 GiB total capacity; 3.25 GiB already allocated']],
  },
  l4: {
    name: 'NVIDIA L4',
    deviceName: 'NVIDIA L4',
    memoryBytes: 23_612_293_120,
    figure: 'runtime',
    memoryGBps: 300,
    peerGBps: undefined,
    aliases: [],
    source: 'deviceQuery on an L4, driver 525 (nvidia-smi 23034 MiB): 21.99 GiB (Alawaji214/GPU-Median-Blurring); newer drivers print 22.03 GiB',
    evidence: [
      ['Alawaji214/GPU-Median-Blurring@0c46d0bf689d README.md', 'Total amount of global memory:                 22518 MBytes (23612293120 bytes)'],
      ['https://github.com/ArcInstitute/evo2/issues/190', 'GPU 0 has a total capacity of 22.03 GiB'],
    ],
  },
  l40s: {
    name: 'NVIDIA L40S',
    deviceName: 'NVIDIA L40S',
    memoryBytes: 47_803_596_800,
    figure: 'runtime',
    memoryGBps: 864,
    peerGBps: undefined,
    aliases: [],
    source: 'deviceQuery on an L40S, driver 12.4: 44.52 GiB (thamada/nvidia-smi); other drivers print 44.31-44.42 GiB (nvidia-smi shows 46068 MiB)',
    evidence: [
      ['thamada/nvidia-smi@c768aedc1e0b nvsim/L40S_deviceQuery.py', 'Total amount of global memory:                 45589 MBytes (47803596800 bytes)'],
      ['https://github.com/stepfun-ai/Step-Video-T2V/issues/8', 'GPU  has a total capacity of 44.42 GiB'],
    ],
  },
  a30: {
    name: 'NVIDIA A30',
    deviceName: 'NVIDIA A30',
    memoryBytes: Math.round(23.53 * GiB),
    figure: 'runtime',
    memoryGBps: 933,
    peerGBps: 100,
    aliases: [],
    source: "torch's out-of-memory message on an A30: 23.53 GiB total capacity (google/RB-Modulation#5)",
    evidence: [['https://github.com/google/RB-Modulation/issues/5', 'GPU 0 has a total capacty of 23.53 GiB of which 64.00 KiB is free. ... only 24G in A30']],
  },
  a40: {
    name: 'NVIDIA A40',
    deviceName: 'NVIDIA A40',
    memoryBytes: 47_608_692_736,
    figure: 'runtime',
    memoryGBps: 696,
    peerGBps: 56.25,
    aliases: [],
    source: 'deviceQuery on a 10 x A40 server, driver 12.4, ECC on: 44.34 GiB (thamada/nvidia-smi)',
    evidence: [
      ['thamada/nvidia-smi@5f6b772848f8 nvsim/A40x10_deviceQuery.py', 'Total amount of global memory:                 45403 MBytes (47608692736 bytes)'],
    ],
  },
  l20: {
    name: 'NVIDIA L20',
    deviceName: 'NVIDIA L20',
    memoryBytes: Math.round(44.53 * GiB),
    figure: 'runtime',
    memoryGBps: 864,
    peerGBps: undefined,
    aliases: [],
    source:
      "torch's out-of-memory message on an 8 x L20 server: 44.53 GiB total capacity (Tencent-Hunyuan/HunyuanCustom#36), as the L40S of the same AD102 and 48 GB prints",
    evidence: [
      ['https://github.com/Tencent-Hunyuan/HunyuanCustom/issues/36', 'GPU 0 has a total capacity of 44.53 GiB of which 1.29 GiB is free.'],
      ['https://github.com/Wan-Video/Wan2.1/issues/205 (an L40S)', 'GPU 0 has a total capacity of 44.53 GiB'],
    ],
  },
  l40: {
    name: 'NVIDIA L40',
    deviceName: 'NVIDIA L40',
    memoryBytes: Math.round(44.4 * GiB),
    figure: 'runtime',
    memoryGBps: 864,
    peerGBps: undefined,
    aliases: [],
    source:
      "torch's out-of-memory message on an L40: 44.40 GiB total capacity (QwenLM/Qwen3-VL#2097); the L40S of the same AD102 and 48 GB prints 44.31-44.52 GiB",
    evidence: [
      ['https://github.com/QwenLM/Qwen3-VL/issues/2097', 'GPU 0 has a total capacity of 44.40 GiB of which 33.26 GiB is free.'],
      [
        'thamada/nvidia-smi@c768aedc1e0b nvsim/L40S_deviceQuery.py (the L40S)',
        'Total amount of global memory:                 45589 MBytes (47803596800 bytes)',
      ],
    ],
  },
  'a100-40': {
    name: 'NVIDIA A100 40GB (SXM4 or PCIe)',
    deviceName: 'NVIDIA A100-SXM4-40GB',
    memoryBytes: 79 * 2 ** 29,
    figure: 'runtime',
    memoryGBps: 1555,
    peerGBps: 300,
    aliases: ['a100-40gb', 'a100-sxm4-40gb', 'a100-pcie-40gb', 'a100-40-pcie', 'a100-40-sxm'],
    source:
      'total the runtime reports on an A100 40GB, as vLLM and torch print it: 39.50 GiB (vllm-project/vllm#12330, TianheWu/CoSeR#10); traces show 39.39-39.59 GiB on SXM4 and 39.44 GiB on PCIe',
    context: A100_CONTEXT,
    evidence: [
      ['https://github.com/TianheWu/CoSeR/issues/10', 'GPU 0 has a total capacity of 39.50 GiB'],
      [
        `${HTA} tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz`,
        '"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224',
      ],
      ['harryjmoss/particle_transformer@466d60845dd2 profiler_trace_single_sample.json', '"name": "NVIDIA A100-PCIE-40GB", "totalGlobalMem": 42346610688'],
    ],
  },
  'a100-80': {
    name: 'NVIDIA A100 SXM4 80GB',
    deviceName: 'NVIDIA A100-SXM4-80GB',
    memoryBytes: 84_990_623_744,
    figure: 'runtime',
    memoryGBps: 2039,
    peerGBps: 300,
    aliases: ['a100', 'a100-sxm', 'a100-sxm4', 'a100-80gb', 'a100-sxm4-80gb', 'a100-80-sxm'],
    source: 'totalGlobalMem in a PyTorch profiler trace of an A100-SXM4-80GB: 79.15 GiB (facebookresearch/HolisticTraceAnalysis); driver 12.5 prints 79.26 GiB',
    context: A100_CONTEXT,
    evidence: [
      [`${HTA} tests/data/negative_queue_length_values_check/rank0.json.gz`, '"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 84990623744'],
      [`${THAMADA} gls/A100SXMx4_deviceQuery.py`, 'Total amount of global memory:                 81158 MBytes (85100068864 bytes)'],
    ],
  },
  'a100-80-pcie': {
    name: 'NVIDIA A100 80GB PCIe',
    deviceName: 'NVIDIA A100 80GB PCIe',
    memoryBytes: 84_990_623_744,
    figure: 'derived',
    memoryGBps: 1935,
    peerGBps: 300,
    aliases: ['a100-80gb-pcie', 'a100-pcie-80gb'],
    source:
      "derived: the A100 SXM4 80GB's runtime total (79.15 GiB), the same 80 GB of HBM2e; a deviceQuery on an A100 80GB PCIe (driver 12.4) prints 79.14 GiB",
    context: A100_CONTEXT,
    evidence: [
      [`${HTA} tests/data/negative_queue_length_values_check/rank0.json.gz (the SXM4 board)`, '"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 84990623744'],
      [
        'a cluster deviceQuery log in public code (repository not resolved by the code index)',
        'Device 3: "NVIDIA A100 80GB PCIe" ... Total amount of global memory:                 81038 MBytes (84974239744 bytes)',
      ],
    ],
  },
  a800: {
    name: 'NVIDIA A800 SXM4 80GB',
    deviceName: 'NVIDIA A800-SXM4-80GB',
    memoryBytes: Math.round(79.33 * GiB),
    figure: 'runtime',
    memoryGBps: 2039,
    peerGBps: 200,
    aliases: ['a800-80', 'a800-80gb', 'a800-sxm4', 'a800-sxm4-80gb'],
    source:
      "torch's out-of-memory message on an A800 80GB: 79.33 GiB total capacity (hahnyuan/PB-LLM#3); a hardware record of an A800-SXM4-80GB says 79.25 GiB, the A100 SXM4 80GB 79.15-79.26 GiB",
    context: A800_CONTEXT,
    evidence: [
      ['https://github.com/hahnyuan/PB-LLM/issues/3', 'GPU 0 has a total capacty of 79.33 GiB of which 49.81 MiB is free.'],
      [
        "a test fixture's hardware record in public code (repository not resolved by the code index)",
        "dict(name='NVIDIA A800-SXM4-80GB',memory_bytes=85094825984,free_bytes=78*2**30)",
      ],
    ],
  },
  h100: {
    name: 'NVIDIA H100 SXM 80GB',
    deviceName: 'NVIDIA H100 80GB HBM3',
    memoryBytes: Math.round(79.22 * GiB),
    figure: 'runtime',
    memoryGBps: 3350,
    peerGBps: 450,
    aliases: ['h100-sxm', 'h100-sxm5', 'h100-80gb', 'h100-80gb-hbm3'],
    source: 'total the runtime reports, as vLLM printed it on H100 80GB GPUs: 79.22 GiB (vllm-project/vllm#10511); other drivers print 79.11-79.22 GiB',
    context: H100_CONTEXT,
    evidence: [
      ['https://github.com/vllm-project/vllm/pull/10511', 'INFO 12-13 19:54:18 worker.py:243] total_gpu_memory     79.22GiB'],
      [`${TRACELENS} tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz`, '"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936'],
      ['thamada/nvidia-smi@03fbe6e68c0b nvsim/H100SXMx8_deviceQuery.py', 'Total amount of global memory:                 81106 MBytes (85045477376 bytes)'],
      ['https://github.com/vllm-project/vllm/issues/27508 (driver 535)', 'GPU 0 has a total capacity of 79.11 GiB'],
    ],
  },
  'h100-pcie': {
    name: 'NVIDIA H100 PCIe 80GB',
    deviceName: 'NVIDIA H100 PCIe',
    memoryBytes: Math.round(79.22 * GiB),
    figure: 'derived',
    memoryGBps: 2000,
    peerGBps: 300,
    aliases: [],
    source:
      "derived: the H100 SXM's runtime total (79.22 GiB), the same 80 GB; torch 2.0.1 on an H100 PCIe printed total_memory=81008MB (79.11 GiB, the older drivers' figure on the SXM too)",
    context: derivedFrom(H100_CONTEXT, "the SXM board's GH100; the PCIe board has 114 SMs to its 132"),
    evidence: [
      ['https://github.com/vllm-project/vllm/pull/10511 (the SXM board)', 'total_gpu_memory     79.22GiB'],
      [
        'a PyTorch check script in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='NVIDIA H100 PCIe', major=9, minor=0, total_memory=81008MB, multi_processor_count=114)",
      ],
    ],
  },
  'h100-nvl': {
    name: 'NVIDIA H100 NVL 94GB',
    deviceName: 'NVIDIA H100 NVL',
    memoryBytes: 99_861_594_112,
    figure: 'runtime',
    memoryGBps: 3900,
    peerGBps: 300,
    aliases: [],
    source: 'deviceQuery on two H100 NVL, driver 12.4: 93.00 GiB (thamada/nvidia-smi; nvidia-smi shows 95830 MiB)',
    context: derivedFrom(H100_CONTEXT, "the SXM board's GH100 with its 132 SMs"),
    evidence: [[`${THAMADA} gls/H100NVLx2_deviceQuery.py`, 'Total amount of global memory:                 95235 MBytes (99861594112 bytes)']],
  },
  h800: {
    name: 'NVIDIA H800 SXM 80GB',
    deviceName: 'NVIDIA H800',
    memoryBytes: Math.round(79.22 * GiB),
    figure: 'derived',
    memoryGBps: 3350,
    peerGBps: 200,
    aliases: ['h800-sxm', 'h800-80gb'],
    source:
      "derived: the H100 SXM's runtime total (79.22 GiB), the same 80 GB of HBM3: nvidia-smi shows 81559 MiB on both; no printed H800 runtime total found",
    context: derivedFrom(H100_CONTEXT, "the H100 SXM's GH100 with its 132 SMs"),
    evidence: [
      ['https://github.com/vllm-project/vllm/pull/10511 (the H100 SXM)', 'total_gpu_memory     79.22GiB'],
      ['an H800 cluster run log in public code (repository not resolved by the code index)', 'NVIDIA H800, 81559 MiB, 570.158.01'],
      ['nvidia-smi output of an H100 SXM in public code (repository not resolved by the code index)', '0, NVIDIA H100 80GB HBM3, 81559 MiB'],
    ],
  },
  h20: {
    name: 'NVIDIA H20 96GB',
    deviceName: 'NVIDIA H20',
    memoryBytes: 95 * GiB,
    figure: 'runtime',
    memoryGBps: 4000,
    peerGBps: 450,
    aliases: [],
    source: "torch's out-of-memory message on an H20 96G: 95.00 GiB total capacity (modelscope/DiffSynth-Studio#1238)",
    evidence: [
      ['https://github.com/modelscope/DiffSynth-Studio/issues/1238', 'GPU  has a total capacity of 95.00 GiB'],
      [
        'a Triton kernel comment in public code (repository not resolved by the code index)',
        "_CudaDeviceProperties(name='NVIDIA H20', major=9, minor=0, total_memory=97285MB, multi_processor_count=78)",
      ],
    ],
  },
  h200: {
    name: 'NVIDIA H200',
    deviceName: 'NVIDIA H200',
    memoryBytes: 150_109_880_320,
    figure: 'runtime',
    memoryGBps: 4800,
    peerGBps: 450,
    aliases: ['h200-sxm', 'h200-141gb'],
    source: 'cudaMemGetInfo total, measured on one H200 (SXM), driver 580.159.04, 2026-12-01: 139.80 GiB (nvidia-smi shows 143771 MiB)',
    context: H200_CONTEXT,
    evidence: [
      ['gpumem docs/evidence/2026-12-01-1x-h200/info.json (gpumem info --json, backend cuda)', '"name": "NVIDIA H200", ... "totalBytes": 150109880320'],
    ],
  },
  'h200-nvl': {
    name: 'NVIDIA H200 NVL',
    deviceName: 'NVIDIA H200 NVL',
    memoryBytes: 150_109_880_320,
    figure: 'derived',
    memoryGBps: 4800,
    peerGBps: 450,
    aliases: [],
    source: 'derived: nvidia-smi shows 143771 MiB on H200 NVL boards, as on the H200 SXM whose runtime total was measured here (139.80 GiB); taken as the same',
    context: derivedFrom(H200_CONTEXT, "the SXM board's GH100"),
    evidence: [
      ['gpumem docs/evidence/2026-12-01-1x-h200/info.json (the SXM board)', '"totalBytes": 150109880320'],
      ['gpumem docs/evidence/2026-12-01-1x-h200/lora-fit/log (the SXM board)', 'NVIDIA H200, 143771 MiB, 580.159.04'],
      ['an H200 NVL run log in public code (repository not resolved by the code index)', 'gpu: NVIDIA H200 NVL, compute capability 9.0, 143771 MiB'],
    ],
  },
  b200: {
    name: 'NVIDIA B200',
    deviceName: 'NVIDIA B200',
    memoryBytes: 191_503_138_816,
    figure: 'runtime',
    memoryGBps: 8000,
    peerGBps: 900,
    aliases: [],
    source:
      'totalGlobalMem in a PyTorch profiler trace of a B200: 178.35 GiB (AMD-AGI/TraceLens; pytorch/ao#4002 prints the same; nvidia-smi shows 183359 MiB)',
    evidence: [
      [`${TRACELENS} tests/traces/b200/eager_trace.json.gz`, '"name": "NVIDIA B200", "totalGlobalMem": 191503138816'],
      ['https://github.com/pytorch/ao/pull/4002', 'Total Global Memory: 178.35 GB'],
      ['https://github.com/NVIDIA/TensorRT-LLM/issues/10278 (nvidia-smi)', '166593MiB / 183359MiB'],
    ],
  },
  gb200: {
    name: 'NVIDIA GB200 (one Blackwell GPU)',
    deviceName: 'NVIDIA GB200',
    memoryBytes: 197_912_035_328,
    figure: 'derived',
    memoryGBps: 8000,
    peerGBps: 900,
    aliases: [],
    source:
      "derived: nvidia-smi's 189471 MiB less the 727.4 MiB the driver keeps on a B200 (183359 MiB shown, 178.35 GiB reported) = 184.32 GiB; a public record of torch's total on a GB200 says 184.31 GiB",
    evidence: [
      [
        'nvidia-smi output in public code (repository not resolved by the code index)',
        '{"name": "NVIDIA GB200", "driver": "580.126.16", "memory": "189471 MiB"}',
      ],
      [`${TRACELENS} tests/traces/b200/eager_trace.json.gz (B200 runtime total)`, '"totalGlobalMem": 191503138816'],
      ['https://github.com/NVIDIA/TensorRT-LLM/issues/10278 (B200 nvidia-smi)', '166593MiB / 183359MiB'],
      [
        "a test fixture's hardware record in public code (repository not resolved by the code index)",
        '"name": "NVIDIA GB200", ... "total_memory_bytes": 197897617408',
      ],
    ],
  },
  gh200: {
    name: 'NVIDIA GH200 96GB (one Hopper GPU)',
    deviceName: 'NVIDIA GH200 480GB',
    memoryBytes: 101_468_602_368,
    figure: 'runtime',
    memoryGBps: 4000,
    peerGBps: 450,
    aliases: ['gh200-480gb'],
    source: 'totalGlobalMem in a PyTorch profiler trace of a GH200 480GB: 94.50 GiB (marcalph/kernelforge)',
    evidence: [
      [
        'marcalph/kernelforge@fc016e8f4cc6 lambda-logs/log/transformer/192-222-51-72_4336.1774353536539013415.pt.trace.json',
        '"name": "NVIDIA GH200 480GB", "totalGlobalMem": 101468602368',
      ],
    ],
  },
  mi100: {
    name: 'AMD Instinct MI100',
    deviceName: 'AMD Instinct MI100',
    memoryBytes: 32 * GiB - 16 * MiB,
    figure: 'runtime',
    memoryGBps: 1228.8,
    peerGBps: undefined,
    aliases: [],
    source:
      "rocminfo's device pool on a gfx908 (the MI100's architecture, and no other part's): 31.98 GiB, 32 GiB less 16 MiB, as every Instinct part reports its HBM",
    evidence: [
      [
        'rocminfo prints of gfx908 agents in public code (repository not resolved by the code index)',
        'Size:                    33538048(0x1ffc000) KB ... Name:                    amdgcn-amd-amdhsa--gfx908:sramecc+:xnack-',
      ],
    ],
  },
  mi210: {
    name: 'AMD Instinct MI210',
    deviceName: 'AMD Instinct MI210',
    memoryBytes: 68_702_699_520,
    figure: 'runtime',
    memoryGBps: 1638.4,
    peerGBps: undefined,
    aliases: [],
    source: 'totalGlobalMem in a PyTorch profiler trace of an MI210: 63.98 GiB, 64 GiB less 16 MiB (AMD-AGI/TraceLens)',
    evidence: [[`${TRACELENS} tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz`, '"name": "AMD Instinct MI210", "totalGlobalMem": 68702699520']],
  },
  mi250x: {
    name: 'AMD Instinct MI250X (one GCD, as the runtime shows it)',
    deviceName: 'AMD Instinct MI250X',
    memoryBytes: 68_702_699_520,
    figure: 'derived',
    memoryGBps: 1638.4,
    peerGBps: 50,
    aliases: ['mi250'],
    source:
      "derived: an MI250 GCD's runtime total, 63.98 GiB (facebookresearch/HolisticTraceAnalysis; rocminfo agrees): the MI250X's GCDs have the same 64 GB, and rocm-smi names both 'MI250X/MI250'",
    evidence: [
      [`${HTA} tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz`, '"name": "AMD Radeon Graphics", "totalGlobalMem": 68702699520'],
      ['https://github.com/ROCm/rocm_smi_lib/issues/160 (rocminfo on an MI250)', 'Size:                    67092480(0x3ffc000) KB'],
    ],
  },
  mi300x: {
    name: 'AMD Instinct MI300X',
    deviceName: 'AMD Instinct MI300X',
    memoryBytes: 206_141_652_992,
    figure: 'runtime',
    memoryGBps: 5300,
    peerGBps: 64,
    aliases: ['mi300'],
    source: 'totalGlobalMem in PyTorch profiler traces of MI300X: 191.98 GiB, 192 GiB less 16 MiB (AMD-AGI/TraceLens; hipDeviceProp prints 196592 MB)',
    evidence: [
      [`${TRACELENS} tests/traces/mi300/resnet_act_checkpoint.json.gz`, '"name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992'],
      ['thamada/nvidia-smi@a296cf1dff86 nvsim/MI300X_x4_deviceQuery.py', '[GPU 0] 196592: Total Global Memory (MB)'],
      ['https://github.com/ROCm/legacy-rocm-build/issues/4414 (rocminfo)', 'Size:                    201310208(0xbffc000) KB'],
    ],
  },
  mi325x: {
    name: 'AMD Instinct MI325X',
    deviceName: 'AMD Instinct MI325X',
    memoryBytes: 256 * GiB - 16 * MiB,
    figure: 'derived',
    memoryGBps: 6000,
    peerGBps: 64,
    aliases: [],
    source:
      'derived: 256 GiB less 16 MiB, as every Instinct part with a printed figure reports its HBM (MI210 64 GiB - 16 MiB, MI250 GCD likewise, MI300X 192 GiB - 16 MiB); no printed MI325X total found',
    evidence: [
      [`${TRACELENS} tests/traces/mi300/resnet_act_checkpoint.json.gz (MI300X, same gfx942)`, '"name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992'],
      [`${TRACELENS} tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz (MI210)`, '"name": "AMD Instinct MI210", "totalGlobalMem": 68702699520'],
    ],
  },
  mi355x: {
    name: 'AMD Instinct MI355X',
    deviceName: 'AMD Instinct MI355X',
    memoryBytes: 288 * GiB - 16 * MiB,
    figure: 'derived',
    memoryGBps: 8000,
    peerGBps: 76.8,
    aliases: [],
    source: 'derived: 288 GiB less 16 MiB, as the other Instinct parts report their HBM; OpenCL on a 256-CU gfx950 shows 294896 MB, the same figure',
    evidence: [
      [`${TRACELENS} tests/traces/mi300/resnet_act_checkpoint.json.gz (MI300X: 192 GiB - 16 MiB)`, '"totalGlobalMem": 206141652992'],
      [
        'OpenCL-Benchmark output for a gfx950 with 256 CUs at 2400 MHz, in public code (repository not resolved by the code index)',
        '| Memory, Cache  | 294896 MB VRAM, 32 KB global / 160 KB local                |',
      ],
    ],
  },
  w7900: {
    name: 'AMD Radeon PRO W7900',
    deviceName: 'AMD Radeon PRO W7900',
    memoryBytes: 48 * GiB - 16 * MiB,
    figure: 'derived',
    memoryGBps: 864,
    peerGBps: undefined,
    aliases: ['pro-w7900'],
    source:
      'derived: 48 GiB less 16 MiB, as ROCm reports the RX 7900 XTX of the same Navi 31 chip (24 GiB - 16 MiB); public records of a W7900D print 51522830336 bytes (Windows shows 45 GiB)',
    evidence: [
      ['https://github.com/ROCm/legacy-rocm-build/issues/3518 (rocminfo, RX 7900 XTX)', 'Size:                    25149440(0x17fc000) KB'],
      [
        'a rocm-smi check of an AMD Radeon Pro W7900D in public code (repository not resolved by the code index)',
        '`VRAM Total Memory (B): 51522830336` = 47.98 GiB',
      ],
      ['https://github.com/unslothai/unsloth/issues/9551 (Windows)', 'AMD Radeon PRO W7900 · 45 GiB'],
    ],
  },
  'rx-7900-xtx': {
    name: 'AMD Radeon RX 7900 XTX',
    deviceName: 'AMD Radeon RX 7900 XTX',
    memoryBytes: 24 * GiB - 16 * MiB,
    figure: 'runtime',
    memoryGBps: 960,
    peerGBps: undefined,
    aliases: ['7900-xtx', 'rx7900xtx'],
    source: "rocminfo's device pool on an RX 7900 XTX, the memory HIP allocates from: 23.98 GiB, 24 GiB less 16 MiB (ROCm/legacy-rocm-build#3518)",
    evidence: [
      [
        'https://github.com/ROCm/legacy-rocm-build/issues/3518',
        'Segment:                 GLOBAL; FLAGS: COARSE GRAINED ... Size:                    25149440(0x17fc000) KB',
      ],
    ],
  },
};

/** The device catalogue's model for the name the runtime prints. @throws Error for a row no model matches. */
function modelOf(row: Row): DeviceModel {
  const id = identifyDevice(row.deviceName, row.memoryBytes);
  if (!id.known) throw new Error(`gpus.ts: ${row.deviceName} is not in the device catalogue (${id.reason})`);
  return id.model;
}

function specOf(row: Row): GpuSpec {
  const model = modelOf(row);
  return {
    name: row.name,
    vendor: model.vendor,
    deviceName: row.deviceName,
    memoryBytes: row.memoryBytes,
    memoryFigure: row.figure,
    memorySource: row.source,
    evidence: row.evidence.map(([where, quote]) => ({ where, quote })),
    memoryGBps: row.memoryGBps,
    link: model.link,
    hostLinkGBps: hostLinkGBps(model.link) ?? 0,
    ...(row.peerGBps === undefined ? {} : { peerGBps: row.peerGBps }),
    aliases: row.aliases,
    assumed: [],
    ...(row.context === undefined ? {} : { cudaContext: row.context }),
  };
}

/** Every catalogue GPU by its name (`h100`, `a100-80`, `rtx-4090`, `mi300x`, ...). */
export const GPUS: Record<string, GpuSpec> = Object.fromEntries(Object.entries(ROWS).map(([key, row]) => [key, specOf(row)]));

/** Words that name a vendor or brand, not a model: `NVIDIA GeForce RTX 4090` is asked for as `rtx4090`. */
const BRAND = /\b(nvidia|amd|geforce|radeon|instinct|tesla)\b/g;

/** A name as the catalogue matches it: lower case, brand words, spaces and punctuation dropped (`RTX-4090` is `rtx4090`). */
export function gpuKey(name: string): string {
  return name
    .toLowerCase()
    .replace(BRAND, ' ')
    .replace(/[^a-z0-9]+/g, '');
}

/** Every name a GPU is asked for by: its key, its aliases and the name the runtime prints. */
function namesOf(key: string, g: GpuSpec): string[] {
  return [key, ...g.aliases, ...(g.deviceName ? [g.deviceName] : [])];
}

/** Catalogue keys by every matched name (gpus.test.ts checks that no name matches two GPUs). */
const BY_NAME = new Map<string, string>(Object.entries(GPUS).flatMap(([key, g]) => namesOf(key, g).map((n) => [gpuKey(n), key] as const)));

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest known names to `name`. */
export function closest(name: string, known: readonly string[], n = 3): string[] {
  const q = name.toLowerCase();
  return [...known].sort((x, y) => distance(q, x) - distance(q, y) || x.localeCompare(y)).slice(0, n);
}

/** The catalogue keys closest to `name`, each judged by the nearest of its names. */
export function closestGpus(name: string, n = 3): string[] {
  const q = gpuKey(name);
  const near = (key: string): number => Math.min(...namesOf(key, GPUS[key]!).map((m) => distance(q, gpuKey(m))));
  return Object.keys(GPUS)
    .map((key) => [key, near(key)] as const)
    .sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))
    .slice(0, n)
    .map(([key]) => key);
}

/**
 * A catalogue GPU by its key, an alias or the name the runtime prints, without regard to case, spaces or punctuation
 * (`h100`, `RTX 4090`, `4090`, `NVIDIA A100-SXM4-80GB`). `a100` is the A100 SXM4 80GB; `a100-40` the 40GB.
 * @throws BadInputError for an unknown name, listing the closest names and --gpu-memory for any other GPU.
 */
export function catalogueGpu(name: string): GpuSpec {
  const key = BY_NAME.get(gpuKey(name));
  if (key) return GPUS[key]!;
  throw new BadInputError(`unknown GPU "${name}". Closest: ${closestGpus(name).join(', ')}. For any other GPU, give its memory: --gpu-memory 24GiB`);
}

/**
 * The link a GPU gets when only its memory is known: PCIe 4.0 x16, the link of most of the catalogue's cards. The PCIe
 * 3.0 cards (V100, T4, P100, P40, RTX 20) have half of it, so for one of those given by its memory the offload and swap
 * times are understated; the PCIe 5.0 cards have twice it.
 */
export const ASSUMED_LINK: HostLink = { kind: 'pcie', gen: 4, lanes: 16 };
/** No GPU the planner is for has less; a bare number below it is most likely a size without its unit. */
const MIN_GPU_BYTES = 512 * MiB;
/** More than any GPU has by far: a figure above it is most likely TB for GB. */
const MAX_GPU_BYTES = 4 * 1024 * GiB;

/**
 * A GPU memory size: 24GiB, 80GB, 81920MiB, 24576MB, 25769803776 (bytes) or `25769803776 bytes`. GiB, MiB (and G, M,
 * T) are powers of 1024, GB and MB powers of 1000, as units.ts parses them.
 * @throws InvalidArgumentError naming `option` for text that is no size (INVALID_ARGUMENT), or a size no GPU has
 *   (INVALID_SIZE: below 512 MiB, which is most often a number without its unit, or above 4 TiB).
 */
export function parseGpuMemory(text: string, option = '--gpu-memory'): number {
  const t = text.trim().replace(/\s*bytes?$/i, '');
  const bytes = t === '' ? undefined : parseBytes(t);
  if (bytes === undefined || !Number.isSafeInteger(bytes))
    throw new InvalidArgumentError(`${option} must be a memory size such as 24GiB, 80GB or 81920MiB, got "${text}"`);
  const bare = /^\d+(\.\d+)?$/.test(t);
  if (bytes < MIN_GPU_BYTES)
    throw new InvalidArgumentError(
      `${option} ${text.trim()} is ${bytes} bytes, less than any GPU has (512 MiB)${bare && bytes > 0 ? `: give a unit, e.g. ${t}GiB or ${t}GB` : ''}`,
      ErrorCode.INVALID_SIZE,
    );
  if (bytes > MAX_GPU_BYTES)
    throw new InvalidArgumentError(
      `${option} ${text.trim()} is ${(bytes / GiB / 1024).toFixed(1)} TiB, more than any GPU has (at most 4 TiB)`,
      ErrorCode.INVALID_SIZE,
    );
  return bytes;
}

/**
 * A GPU known only by its memory (`--gpu-memory 24GiB` for a card the catalogue lacks). The size is taken as the total
 * the runtime reports; the host link is assumed (ASSUMED_LINK) and the memory bandwidth unknown, and `name` and
 * `assumed` say so.
 * @throws InvalidArgumentError as parseGpuMemory does.
 */
export function gpuFromMemory(text: string, option = '--gpu-memory'): GpuSpec {
  const bytes = parseGpuMemory(text, option);
  const given = `${option} ${text.trim()}`;
  const linkGBps = hostLinkGBps(ASSUMED_LINK) ?? 0;
  return {
    name: `GPU of ${gib(bytes)} (${given}; model unknown, host link assumed ${describeLink(ASSUMED_LINK)})`,
    vendor: 'unknown',
    deviceName: undefined,
    memoryBytes: bytes,
    memoryFigure: 'given',
    memorySource: `given by ${given}, taken as the total the runtime reports (cudaMemGetInfo / hipMemGetInfo), which is 1-9% below the size on the box`,
    evidence: [],
    memoryGBps: undefined,
    link: ASSUMED_LINK,
    hostLinkGBps: linkGBps,
    aliases: [],
    assumed: [
      `host link: ${describeLink(ASSUMED_LINK)}, ${linkGBps} GB/s each way (the link of most of the catalogue's cards: a PCIe 3.0 card has half of it, so its offload and swap times would be understated)`,
      'memory bandwidth: unknown',
    ],
  };
}

/** The smallest CUDA context the catalogue has a figure for: what a part without one is assumed to take. */
const SMALLEST_CONTEXT = Object.values(GPUS)
  .flatMap((g) => (g.cudaContext ? [g.cudaContext] : []))
  .reduce((a, b) => (b.bytes < a.bytes ? b : a));

/**
 * The CUDA primary context of the GPU named `name` (a catalogue key, alias, runtime name or catalogue name): its
 * catalogue figure, or, for a part without one (or a name the catalogue does not know), the smallest figure the
 * catalogue has, marked assumed. Never throws: a planner asked about an unknown part still needs a figure.
 */
export function cudaContextFor(name: string): { bytes: number; source: string; assumed: boolean } {
  const g = Object.values(GPUS).find((x) => x.name === name) ?? GPUS[BY_NAME.get(gpuKey(name)) ?? ''];
  if (g?.cudaContext) return { bytes: g.cudaContext.bytes, source: g.cudaContext.source, assumed: false };
  return {
    bytes: SMALLEST_CONTEXT.bytes,
    source: `no published figure for ${name || 'this GPU'}: the smallest the catalogue has, ${SMALLEST_CONTEXT.source}`,
    assumed: true,
  };
}
