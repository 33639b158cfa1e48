/**
 * Device identification on names as nvidia-smi, torch.cuda.get_device_name, rocm-smi and profilers print them
 * (many taken from the traces of ../shared/traces: Kineto deviceProperties and Nsight TARGET_INFO_GPU), each with
 * the model and host link it is, and names that must stay unknown: laptop parts, other vendors, and near-misses a
 * substring match would take for a neighbour.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEVICE_MODELS, describeLink, hostLinkGBps, identifyDevice, modelTokens } from './devices.js';

const GB = 1e9;
const GiB = 2 ** 30;

/** [name as printed, memory the runtime reports (bytes) or undefined, catalogue model, memory as sold, link]. */
const KNOWN: Array<[string, number | undefined, string, number | undefined, string]> = [
  // from the shared traces
  ['NVIDIA A100-SXM4-80GB', 84_990_623_744, 'NVIDIA A100', 80, 'PCIe 4.0 x16'],
  ['NVIDIA A100-SXM4-40GB', 42_297_524_224, 'NVIDIA A100', 40, 'PCIe 4.0 x16'],
  ['NVIDIA A100-PG509-200', 42_297_524_224, 'NVIDIA A100', 40, 'PCIe 4.0 x16'],
  ['Tesla V100-SXM2-32GB', 34_079_637_504, 'NVIDIA Tesla V100', 32, 'PCIe 3.0 x16'],
  ['Tesla V100-DGXS-32GB', 34_084_028_416, 'NVIDIA Tesla V100', 32, 'PCIe 3.0 x16'],
  ['NVIDIA H100 80GB HBM3', 85_018_279_936, 'NVIDIA H100', 80, 'PCIe 5.0 x16'],
  ['NVIDIA B200', 191_503_138_816, 'NVIDIA B200', 180, 'PCIe 5.0 x16'],
  ['AMD Instinct MI300X', 206_141_652_992, 'AMD Instinct MI300X', 192, 'PCIe 5.0 x16'],
  ['AMD Instinct MI300X VF', 205_571_227_648, 'AMD Instinct MI300X', 192, 'PCIe 5.0 x16'],
  ['AMD Instinct MI210', 68_702_699_520, 'AMD Instinct MI210', 64, 'PCIe 4.0 x16'],
  ['Quadro GP100', 17_069_309_952, 'NVIDIA Quadro GP100', 16, 'PCIe 3.0 x16'],
  ['NVIDIA H200', 150_109_880_320, 'NVIDIA H200', 141, 'PCIe 5.0 x16'],
  // nvidia-smi / torch.cuda.get_device_name
  ['NVIDIA A100-PCIE-40GB', undefined, 'NVIDIA A100', 40, 'PCIe 4.0 x16'],
  ['NVIDIA A100 80GB PCIe', undefined, 'NVIDIA A100', 80, 'PCIe 4.0 x16'],
  ['NVIDIA A10G', 23_836_229_632, 'NVIDIA A10G', 24, 'PCIe 4.0 x16'],
  ['NVIDIA A10', undefined, 'NVIDIA A10', 24, 'PCIe 4.0 x16'],
  ['NVIDIA L4', undefined, 'NVIDIA L4', 24, 'PCIe 4.0 x16'],
  ['NVIDIA L40S', undefined, 'NVIDIA L40S', 48, 'PCIe 4.0 x16'],
  ['NVIDIA L40', undefined, 'NVIDIA L40', 48, 'PCIe 4.0 x16'],
  ['NVIDIA H100 PCIe', 85_520_809_984, 'NVIDIA H100', 80, 'PCIe 5.0 x16'],
  ['NVIDIA H100 NVL', 100_485_038_080, 'NVIDIA H100', 94, 'PCIe 5.0 x16'],
  ['NVIDIA H200 NVL', undefined, 'NVIDIA H200', 141, 'PCIe 5.0 x16'],
  ['NVIDIA GH200 480GB', 102_005_473_280, 'NVIDIA GH200', 96, 'NVLink-C2C (450 GB/s each way)'],
  ['NVIDIA GH200 144G HBM3e', undefined, 'NVIDIA GH200', 144, 'NVLink-C2C (450 GB/s each way)'],
  ['NVIDIA GH200 120GB', 97871 * 2 ** 20, 'NVIDIA GH200', 96, 'NVLink-C2C (450 GB/s each way)'],
  ['NVIDIA L20', 47_677_177_856, 'NVIDIA L20', 48, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 3090', 25_438_126_080, 'NVIDIA GeForce RTX 3090', 24, 'PCIe 4.0 x16'],
  ['NVIDIA RTX A5000', 25_283_526_656, 'NVIDIA RTX A5000', 24, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 4060', 8_181_776_384, 'NVIDIA GeForce RTX 4060', 8, 'PCIe 4.0 x8'],
  ['Tesla V100-SXM2-16GB', 16_945_512_448, 'NVIDIA Tesla V100', 16, 'PCIe 3.0 x16'],
  ['NVIDIA GB200', undefined, 'NVIDIA GB200', undefined, 'NVLink-C2C (450 GB/s each way)'],
  ['Tesla T4', 15_843_721_216, 'NVIDIA Tesla T4', 16, 'PCIe 3.0 x16'],
  ['Tesla V100-PCIE-16GB', undefined, 'NVIDIA Tesla V100', 16, 'PCIe 3.0 x16'],
  ['Tesla V100S-PCIE-32GB', undefined, 'NVIDIA Tesla V100S', 32, 'PCIe 3.0 x16'],
  ['Tesla P100-PCIE-16GB', undefined, 'NVIDIA Tesla P100', 16, 'PCIe 3.0 x16'],
  ['Tesla K80', 11_996_954_624, 'NVIDIA Tesla K80', 12, 'PCIe 3.0 x16'],
  ['Tesla P40', undefined, 'NVIDIA Tesla P40', 24, 'PCIe 3.0 x16'],
  ['NVIDIA A800-SXM4-80GB', undefined, 'NVIDIA A800', 80, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 4060 Ti', 17_175_150_592, 'NVIDIA GeForce RTX 4060 Ti', 16, 'PCIe 4.0 x8'],
  ['NVIDIA GeForce RTX 4060', undefined, 'NVIDIA GeForce RTX 4060', 8, 'PCIe 4.0 x8'],
  ['NVIDIA GeForce RTX 4090', 25_393_692_672, 'NVIDIA GeForce RTX 4090', 24, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 4090 D', undefined, 'NVIDIA GeForce RTX 4090 D', 24, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 4070 Ti SUPER', undefined, 'NVIDIA GeForce RTX 4070 Ti SUPER', 16, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 3090', undefined, 'NVIDIA GeForce RTX 3090', 24, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 3060', 12_884_901_888, 'NVIDIA GeForce RTX 3060', 12, 'PCIe 4.0 x16'],
  ['NVIDIA GeForce RTX 3050', undefined, 'NVIDIA GeForce RTX 3050', undefined, 'PCIe 4.0 x8'],
  ['NVIDIA GeForce RTX 2080 Ti', undefined, 'NVIDIA GeForce RTX 2080 Ti', 11, 'PCIe 3.0 x16'],
  ['GeForce GTX 1080 Ti', undefined, 'NVIDIA GeForce GTX 1080 Ti', 11, 'PCIe 3.0 x16'],
  ['NVIDIA GeForce GTX 1060 6GB', undefined, 'NVIDIA GeForce GTX 1060', 6, 'PCIe 3.0 x16'],
  ['NVIDIA GeForce RTX 5090', undefined, 'NVIDIA GeForce RTX 5090', 32, 'PCIe 5.0 x16'],
  ['NVIDIA GeForce RTX 5060 Ti', undefined, 'NVIDIA GeForce RTX 5060 Ti', undefined, 'PCIe 5.0 x8'],
  ['NVIDIA TITAN RTX', undefined, 'NVIDIA TITAN RTX', 24, 'PCIe 3.0 x16'],
  ['NVIDIA TITAN Xp', undefined, 'NVIDIA TITAN Xp', 12, 'PCIe 3.0 x16'],
  ['NVIDIA TITAN X (Pascal)', undefined, 'NVIDIA TITAN X (Pascal)', 12, 'PCIe 3.0 x16'],
  ['NVIDIA RTX A6000', 51_041_271_808, 'NVIDIA RTX A6000', 48, 'PCIe 4.0 x16'],
  ['NVIDIA RTX A4000', undefined, 'NVIDIA RTX A4000', 16, 'PCIe 4.0 x16'],
  ['NVIDIA RTX 6000 Ada Generation', undefined, 'NVIDIA RTX 6000 Ada Generation', 48, 'PCIe 4.0 x16'],
  ['NVIDIA RTX 4000 SFF Ada Generation', undefined, 'NVIDIA RTX 4000 SFF Ada Generation', 20, 'PCIe 4.0 x16'],
  ['NVIDIA RTX 2000 Ada Generation', undefined, 'NVIDIA RTX 2000 Ada Generation', 16, 'PCIe 4.0 x8'],
  ['Quadro RTX 8000', undefined, 'NVIDIA Quadro RTX 8000', 48, 'PCIe 3.0 x16'],
  ['Quadro RTX 6000', undefined, 'NVIDIA Quadro RTX 6000', 24, 'PCIe 3.0 x16'],
  ['NVIDIA RTX PRO 6000 Blackwell Server Edition', undefined, 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition', 96, 'PCIe 5.0 x16'],
  ['NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition', undefined, 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition', 96, 'PCIe 5.0 x16'],
  // rocm-smi, torch on ROCm, rocprofv3 agents
  ['AMD Instinct MI250X/MI250', 68_702_699_520, 'AMD Instinct MI250X', 64, 'PCIe 4.0 x16'],
  ['AMD Instinct MI100', undefined, 'AMD Instinct MI100', 32, 'PCIe 4.0 x16'],
  ['AMD Radeon Instinct MI50', 34_342_961_152, 'AMD Instinct MI50', 32, 'PCIe 4.0 x16'],
  ['AMD Instinct MI325X', undefined, 'AMD Instinct MI325X', 256, 'PCIe 5.0 x16'],
  ['AMD Instinct MI355X', undefined, 'AMD Instinct MI355X', 288, 'PCIe 5.0 x16'],
  ['AMD Instinct MI300A', undefined, 'AMD Instinct MI300A', 128, 'memory shared with the CPU (no host link)'],
  ['AMD Instinct MI300X (gfx942)', undefined, 'AMD Instinct MI300X', 192, 'PCIe 5.0 x16'],
  ['gfx942', 192 * GiB, 'AMD Instinct MI300X', 192, 'PCIe 5.0 x16'],
  ['gfx942', 256 * GiB, 'AMD Instinct MI325X', 256, 'PCIe 5.0 x16'],
  ['AMD Radeon RX 7900 XTX', undefined, 'AMD Radeon RX 7900 XTX', 24, 'PCIe 4.0 x16'],
  ['AMD Radeon PRO W7900', undefined, 'AMD Radeon PRO W7900', 48, 'PCIe 4.0 x16'],
];

/** Names that are no catalogue model, each with what the reason must say. */
const UNKNOWN: Array<[string, number | undefined, RegExp]> = [
  ['GeForce GTX 1060 with Max-Q Design', 6_442_450_944, /laptop/],
  ['NVIDIA GeForce RTX 4060 Laptop GPU', undefined, /laptop/],
  ['NVIDIA GeForce RTX 3080 Ti Laptop GPU', undefined, /laptop/],
  ['NVIDIA GeForce RTX 4060 Laptop GPU', 8_585_216_000, /laptop/],
  ['AMD Radeon Graphics', 68_702_699_520, /no model/],
  ['AMD Radeon Graphics (gfx90a)', 68_702_699_520, /gfx90a is the architecture of several devices/],
  ['gfx942', undefined, /does not record its memory/],
  ['gfx942', 96 * GB, /records 96\.0 GB/],
  ['ARTEMIS', undefined, /not in gpumem's device catalogue/],
  ['Intel(R) HD Graphics 630', 0, /not in gpumem's device catalogue/],
  ['Intel(R) Data Center GPU Max 1550', undefined, /not in gpumem's device catalogue/],
  ['NVIDIA GeForce MX450', undefined, /not in gpumem's device catalogue/],
  ['NVIDIA Jetson AGX Orin', undefined, /not in gpumem's device catalogue/],
  // near-misses: each shares a substring with a catalogue model and is none of them
  ['NVIDIA GeForce RTX 4060 Ti SUPER', undefined, /not in gpumem's device catalogue/],
  ['NVIDIA A100X', undefined, /not in gpumem's device catalogue/],
  ['NVIDIA H100 Extreme', undefined, /not in gpumem's device catalogue/],
  ['NVIDIA RTX', undefined, /not in gpumem's device catalogue/],
  ['', undefined, /no model/],
];

test('real device names are identified as their model, memory size and host link', () => {
  for (const [name, bytes, model, memoryGB, link] of KNOWN) {
    const id = identifyDevice(name, bytes);
    assert.ok(id.known, `${name}: ${id.known ? '' : id.reason}`);
    assert.equal(id.model.name, model, name);
    assert.equal(id.memoryGB, memoryGB, `${name}: memory as sold`);
    assert.equal(describeLink(id.model.link), link, `${name}: link`);
  }
});

test('names that are no catalogue model are unknown, with the reason, never the nearest model', () => {
  for (const [name, bytes, reason] of UNKNOWN) {
    const id = identifyDevice(name, bytes);
    assert.ok(!id.known, `${name} was taken for ${id.known ? id.model.name : ''}`);
    assert.match(id.reason, reason, name);
  }
});

test('every catalogue model is found by its own name and aliases, and no two models share tokens', () => {
  const seen = new Map<string, string>();
  for (const m of DEVICE_MODELS) {
    for (const n of [m.name, ...(m.aliases ?? [])]) {
      const id = identifyDevice(n);
      assert.ok(id.known && id.model === m, `${n} is found as itself`);
      const key = modelTokens(n).key;
      assert.ok(!seen.has(key) || seen.get(key) === m.name, `${n} and ${seen.get(key)} share "${key}"`);
      seen.set(key, m.name);
    }
    assert.ok(m.memoryGB.length > 0 && m.memoryGB.every((g) => g > 0), `${m.name}: memory sizes`);
  }
});

test('link bandwidths are PCIe lanes times the per-lane rate of their generation, one way', () => {
  assert.equal(hostLinkGBps({ kind: 'pcie', gen: 3, lanes: 16 }), 15.8);
  assert.equal(hostLinkGBps({ kind: 'pcie', gen: 4, lanes: 16 }), 31.5);
  assert.equal(hostLinkGBps({ kind: 'pcie', gen: 4, lanes: 8 }), 15.8);
  assert.equal(hostLinkGBps({ kind: 'pcie', gen: 5, lanes: 16 }), 63);
  assert.equal(hostLinkGBps({ kind: 'nvlink-c2c', GBps: 450 }), 450);
  assert.equal(hostLinkGBps({ kind: 'unified' }), undefined);
});
