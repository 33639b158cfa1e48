/**
 * Devices by the names drivers and frameworks print for them (nvidia-smi, torch.cuda.get_device_name, rocm-smi,
 * rocprofv3's agent table): each model's memory sizes as sold and the link that carries its host copies (PCIe
 * generation and width, NVLink-C2C for Grace Hopper / Blackwell, or memory shared with the CPU). A name is reduced
 * to its model tokens (vendor and brand words, form factor and memory size set aside) and looked up whole: a
 * name whose tokens are not a catalogue model is an unknown device, never the closest-looking one. Figures are
 * the vendors' product specifications.
 */

/** How a device's host copies travel. */
export type HostLink =
  | { kind: 'pcie'; gen: 3 | 4 | 5 | 6; lanes: 4 | 8 | 16 }
  /** NVLink-C2C to the Grace CPU: `GBps` one way. */
  | { kind: 'nvlink-c2c'; GBps: number }
  /** An APU: the CPU and GPU share one memory, so a host copy crosses no link. */
  | { kind: 'unified' };

export interface DeviceModel {
  /** The model as its vendor names it. */
  name: string;
  vendor: 'nvidia' | 'amd';
  /** Memory sizes the model was sold with, in GB as the vendor states them. */
  memoryGB: readonly number[];
  link: HostLink;
  /** Other names the same model is printed under (rocm-smi's combined names, marketing variants). */
  aliases?: readonly string[];
  /** Why the link is what it is, where the product sheet alone could mislead. */
  note?: string;
}

/** GB/s one way per lane after encoding (8b/10b to PCIe 2, 128b/130b from PCIe 3, FLIT from PCIe 6). */
const PCIE_LANE_GBPS = { 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563 } as const;

/** The link's theoretical one-way bandwidth in GB/s (1e9 bytes); undefined for shared memory. */
export function hostLinkGBps(link: HostLink): number | undefined {
  if (link.kind === 'pcie') return +(PCIE_LANE_GBPS[link.gen] * link.lanes).toFixed(1);
  if (link.kind === 'nvlink-c2c') return link.GBps;
  return undefined;
}

/** "PCIe 4.0 x8", "NVLink-C2C (450 GB/s each way)", "memory shared with the CPU". */
export function describeLink(link: HostLink): string {
  if (link.kind === 'pcie') return `PCIe ${link.gen}.0 x${link.lanes}`;
  if (link.kind === 'nvlink-c2c') return `NVLink-C2C (${link.GBps} GB/s each way)`;
  return 'memory shared with the CPU (no host link)';
}

const pcie = (gen: 3 | 4 | 5 | 6, lanes: 4 | 8 | 16 = 16): HostLink => ({ kind: 'pcie', gen, lanes });
const C2C: HostLink = { kind: 'nvlink-c2c', GBps: 450 };
const nv = (name: string, memoryGB: number[], link: HostLink, extra: Partial<DeviceModel> = {}): DeviceModel => ({
  name: `NVIDIA ${name}`,
  vendor: 'nvidia',
  memoryGB,
  link,
  ...extra,
});
const amd = (name: string, memoryGB: number[], link: HostLink, extra: Partial<DeviceModel> = {}): DeviceModel => ({
  name: `AMD ${name}`,
  vendor: 'amd',
  memoryGB,
  link,
  ...extra,
});

/** Every model gpumem knows. Desktop GeForce parts only: a laptop GPU's link depends on the laptop. */
export const DEVICE_MODELS: readonly DeviceModel[] = [
  // GeForce 10 and 16 series, TITANs (PCIe 3.0 x16)
  nv('GeForce GTX 1050', [2, 3], pcie(3)),
  nv('GeForce GTX 1050 Ti', [4], pcie(3)),
  nv('GeForce GTX 1060', [3, 6], pcie(3)),
  nv('GeForce GTX 1070', [8], pcie(3)),
  nv('GeForce GTX 1070 Ti', [8], pcie(3)),
  nv('GeForce GTX 1080', [8], pcie(3)),
  nv('GeForce GTX 1080 Ti', [11], pcie(3)),
  nv('GeForce GTX 1650', [4], pcie(3)),
  nv('GeForce GTX 1650 SUPER', [4], pcie(3)),
  nv('GeForce GTX 1660', [6], pcie(3)),
  nv('GeForce GTX 1660 SUPER', [6], pcie(3)),
  nv('GeForce GTX 1660 Ti', [6], pcie(3)),
  nv('GeForce GTX TITAN X', [12], pcie(3)),
  nv('TITAN X (Pascal)', [12], pcie(3)),
  nv('TITAN Xp', [12], pcie(3)),
  nv('TITAN V', [12], pcie(3)),
  nv('TITAN RTX', [24], pcie(3)),
  // GeForce RTX 20 (PCIe 3.0 x16)
  nv('GeForce RTX 2060', [6, 12], pcie(3)),
  nv('GeForce RTX 2060 SUPER', [8], pcie(3)),
  nv('GeForce RTX 2070', [8], pcie(3)),
  nv('GeForce RTX 2070 SUPER', [8], pcie(3)),
  nv('GeForce RTX 2080', [8], pcie(3)),
  nv('GeForce RTX 2080 SUPER', [8], pcie(3)),
  nv('GeForce RTX 2080 Ti', [11], pcie(3)),
  // GeForce RTX 30 (PCIe 4.0; the 3050 uses 8 lanes)
  nv('GeForce RTX 3050', [6, 8], pcie(4, 8)),
  nv('GeForce RTX 3060', [8, 12], pcie(4)),
  nv('GeForce RTX 3060 Ti', [8], pcie(4)),
  nv('GeForce RTX 3070', [8], pcie(4)),
  nv('GeForce RTX 3070 Ti', [8], pcie(4)),
  nv('GeForce RTX 3080', [10, 12], pcie(4)),
  nv('GeForce RTX 3080 Ti', [12], pcie(4)),
  nv('GeForce RTX 3090', [24], pcie(4)),
  nv('GeForce RTX 3090 Ti', [24], pcie(4)),
  // GeForce RTX 40 (PCIe 4.0; the 4060 and 4060 Ti use 8 lanes)
  nv('GeForce RTX 4060', [8], pcie(4, 8)),
  nv('GeForce RTX 4060 Ti', [8, 16], pcie(4, 8)),
  nv('GeForce RTX 4070', [12], pcie(4)),
  nv('GeForce RTX 4070 SUPER', [12], pcie(4)),
  nv('GeForce RTX 4070 Ti', [12], pcie(4)),
  nv('GeForce RTX 4070 Ti SUPER', [16], pcie(4)),
  nv('GeForce RTX 4080', [16], pcie(4)),
  nv('GeForce RTX 4080 SUPER', [16], pcie(4)),
  nv('GeForce RTX 4090', [24], pcie(4)),
  nv('GeForce RTX 4090 D', [24], pcie(4)),
  // GeForce RTX 50 (PCIe 5.0; the 5050, 5060 and 5060 Ti use 8 lanes)
  nv('GeForce RTX 5050', [8], pcie(5, 8)),
  nv('GeForce RTX 5060', [8], pcie(5, 8)),
  nv('GeForce RTX 5060 Ti', [8, 16], pcie(5, 8)),
  nv('GeForce RTX 5070', [12], pcie(5)),
  nv('GeForce RTX 5070 Ti', [16], pcie(5)),
  nv('GeForce RTX 5080', [16], pcie(5)),
  nv('GeForce RTX 5090', [32], pcie(5)),
  // Quadro and RTX workstation parts
  nv('Quadro P4000', [8], pcie(3)),
  nv('Quadro P5000', [16], pcie(3)),
  nv('Quadro P6000', [24], pcie(3)),
  nv('Quadro GP100', [16], pcie(3)),
  nv('Quadro GV100', [32], pcie(3)),
  nv('Quadro RTX 4000', [8], pcie(3)),
  nv('Quadro RTX 5000', [16], pcie(3)),
  nv('Quadro RTX 6000', [24], pcie(3)),
  nv('Quadro RTX 8000', [48], pcie(3)),
  nv('RTX A2000', [6, 12], pcie(4)),
  nv('RTX A4000', [16], pcie(4)),
  nv('RTX A4500', [20], pcie(4)),
  nv('RTX A5000', [24], pcie(4)),
  nv('RTX A5500', [24], pcie(4)),
  nv('RTX A6000', [48], pcie(4)),
  nv('RTX 2000 Ada Generation', [16], pcie(4, 8)),
  nv('RTX 4000 SFF Ada Generation', [20], pcie(4)),
  nv('RTX 4000 Ada Generation', [20], pcie(4)),
  nv('RTX 4500 Ada Generation', [24], pcie(4)),
  nv('RTX 5000 Ada Generation', [32], pcie(4)),
  nv('RTX 6000 Ada Generation', [48], pcie(4)),
  nv('RTX PRO 6000 Blackwell Workstation Edition', [96], pcie(5), {
    aliases: ['NVIDIA RTX PRO 6000 Blackwell Server Edition', 'NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition'],
  }),
  // Tesla and data-centre parts
  nv('Tesla K40', [12], pcie(3)),
  nv('Tesla K80', [12], pcie(3), { note: 'two GPUs of 12 GB on one PCIe 3.0 x16 board' }),
  nv('Tesla M40', [12, 24], pcie(3)),
  nv('Tesla M60', [8], pcie(3), { note: 'two GPUs of 8 GB on one PCIe 3.0 x16 board' }),
  nv('Tesla P4', [8], pcie(3)),
  nv('Tesla P40', [24], pcie(3)),
  nv('Tesla P100', [12, 16], pcie(3)),
  nv('Tesla V100', [16, 32], pcie(3), { note: 'PCIe, SXM2, SXM3 and DGXS boards all reach the host over PCIe 3.0 x16' }),
  nv('Tesla V100S', [32], pcie(3)),
  nv('Tesla T4', [16], pcie(3)),
  nv('A2', [16], pcie(4, 8)),
  nv('A10', [24], pcie(4)),
  nv('A10G', [24], pcie(4)),
  nv('A16', [16], pcie(4), { note: 'four GPUs of 16 GB behind one PCIe 4.0 x16 link' }),
  nv('A30', [24], pcie(4)),
  nv('A40', [48], pcie(4)),
  nv('A100', [40, 80], pcie(4), { note: 'PCIe and SXM4 boards both reach the host over PCIe 4.0 x16' }),
  nv('A800', [40, 80], pcie(4)),
  nv('L4', [24], pcie(4)),
  nv('L20', [48], pcie(4)),
  nv('L40', [48], pcie(4)),
  nv('L40S', [48], pcie(4)),
  nv('H20', [96], pcie(5)),
  nv('H100', [80, 94], pcie(5), { note: 'PCIe, SXM5 and NVL boards all reach the host over PCIe 5.0 x16' }),
  nv('H800', [80], pcie(5)),
  nv('H200', [141], pcie(5), { note: 'SXM and NVL boards reach the host over PCIe 5.0 x16' }),
  nv('GH200', [96, 144], C2C, { note: 'the Hopper GPU of a Grace Hopper superchip: 900 GB/s NVLink-C2C to the Grace CPU' }),
  nv('B200', [180, 192], pcie(5), {
    note: 'the GPU is PCIe 6.0 capable, but the HGX B200 and DGX B200 hosts it ships in have PCIe 5.0 x16 slots',
  }),
  nv('GB200', [186, 192], C2C, { note: 'the Blackwell GPU of a Grace Blackwell superchip: 900 GB/s NVLink-C2C to the Grace CPU' }),
  // AMD Instinct
  amd('Instinct MI25', [16], pcie(3)),
  amd('Instinct MI50', [16, 32], pcie(4)),
  amd('Instinct MI60', [32], pcie(4)),
  amd('Instinct MI100', [32], pcie(4)),
  amd('Instinct MI210', [64], pcie(4)),
  amd('Instinct MI250', [64], pcie(4), { note: 'the runtime shows each of the two GCDs as a device of 64 GB' }),
  amd('Instinct MI250X', [64], pcie(4), {
    aliases: ['AMD Instinct MI250X/MI250'],
    note: 'the runtime shows each of the two GCDs as a device of 64 GB',
  }),
  amd('Instinct MI300A', [128], { kind: 'unified' }, { note: 'an APU: CPU and GPU share 128 GB of HBM3' }),
  amd('Instinct MI300X', [192], pcie(5)),
  amd('Instinct MI308X', [128], pcie(5)),
  amd('Instinct MI325X', [256], pcie(5)),
  amd('Instinct MI350X', [288], pcie(5)),
  amd('Instinct MI355X', [288], pcie(5)),
  // AMD Radeon
  amd('Radeon VII', [16], pcie(3)),
  amd('Radeon RX 6800 XT', [16], pcie(4)),
  amd('Radeon RX 6900 XT', [16], pcie(4)),
  amd('Radeon RX 7900 XT', [20], pcie(4)),
  amd('Radeon RX 7900 XTX', [24], pcie(4)),
  amd('Radeon PRO W6800', [32], pcie(4)),
  amd('Radeon PRO W7800', [32], pcie(4)),
  amd('Radeon PRO W7900', [48], pcie(4)),
];

/** AMD architecture names (what rocprofv3 and hipDeviceProp_t.gcnArchName give) and the models each is, by memory. */
const ARCH_MODELS: Readonly<Record<string, ReadonlyArray<readonly [number, string]>>> = {
  gfx906: [],
  gfx908: [[32, 'AMD Instinct MI100']],
  gfx90a: [],
  gfx942: [
    [128, 'AMD Instinct MI300A'],
    [192, 'AMD Instinct MI300X'],
    [256, 'AMD Instinct MI325X'],
  ],
  gfx950: [],
};

/** Words that name a vendor, brand or family, not a model. */
const BRAND = new Set(['nvidia', 'amd', 'ati', 'geforce', 'tesla', 'quadro', 'radeon', 'instinct', 'corporation', 'graphics', 'with', 'design', 'edition']);
/** Form-factor words: the same model on another board, with the same host link. */
const FORM = new Set(['pcie', 'sxm', 'sxm2', 'sxm3', 'sxm4', 'sxm5', 'sxm6', 'dgxs', 'oam', 'vf', 'nvl', 'hbm2', 'hbm2e', 'hbm3', 'hbm3e', 'generation']);

export interface ModelTokens {
  /** The model tokens, space-separated: "rtx 4060 ti", "a100", "mi300x", "gtx 1060 laptop". */
  key: string;
  /** A memory size written in the name ("80GB", "144G"), in GB. */
  memoryGB: number | undefined;
  /** An AMD architecture name in it (gfx942). */
  arch: string | undefined;
  /** A laptop part (Laptop GPU, Mobile, Max-Q). */
  laptop: boolean;
}

/** A device name reduced to its model tokens. */
export function modelTokens(name: string): ModelTokens {
  let s = ` ${name.toLowerCase().replace(/\(r\)|\(tm\)|®|™/g, ' ')} `;
  s = s.replace(/[_\-/,()[\]]/g, ' ');
  let memoryGB: number | undefined;
  s = s.replace(/\s(\d+(?:\.\d+)?)\s*g(?:b|ib)?(?=\s)/, (_, n: string) => {
    memoryGB = Number(n);
    return ' ';
  });
  let arch: string | undefined;
  s = s.replace(/\s(gfx[0-9a-f]{3,4})(?=\s)/, (_, a: string) => {
    arch = a;
    return ' ';
  });
  // NVIDIA board numbers (PG509-200 is an A100 SXM4 board) name no model
  s = s.replace(/\spg\d{3}\s+\d{3}(?=\s)/, ' ');
  // Max-Q is a laptop design, except on a workstation card (RTX PRO 6000 Max-Q Workstation Edition)
  s = s.replace(/\smax\s*q\s+workstation\s/, ' workstation ');
  const laptop = /\s(laptop|mobile|max\s*q|maxq)\s/.test(s);
  s = s.replace(/\s(laptop\s+gpu|laptop|mobile|max\s*q|maxq)(?=\s)/g, ' ');
  // "rtx4090", "4060ti": model numbers apart from their series and suffix
  s = s.replace(/\b(rtx|gtx|gt|rx|mx)(\d)/g, '$1 $2').replace(/(\d)(ti|super|xtx|xt)\b/g, '$1 $2');
  const words = s.split(/\s+/).filter((w) => w !== '' && !BRAND.has(w) && !FORM.has(w));
  if (laptop) words.push('laptop');
  return { key: words.join(' '), memoryGB, arch, laptop };
}

/** Models by their tokens (devices.test.ts checks that no two models share tokens). */
const BY_KEY = new Map<string, DeviceModel>(DEVICE_MODELS.flatMap((m) => [m.name, ...(m.aliases ?? [])].map((n) => [modelTokens(n).key, m] as const)));

export type Identified = { known: true; model: DeviceModel; memoryGB: number | undefined; name: string } | { known: false; name: string; reason: string };

/**
 * The size as sold (in GB) that a size the runtime reports is: labels count GiB in practice, and the runtime shows
 * 85-101% of the label (what the driver keeps for itself). Of the sizes in that range, the closest to 98.5%.
 */
function nominalOf(bytes: number, sizes: readonly number[]): number | undefined {
  const ratio = (gb: number): number => bytes / (gb * 2 ** 30);
  const near = sizes.filter((gb) => ratio(gb) >= 0.85 && ratio(gb) <= 1.01);
  return near.sort((a, b) => Math.abs(ratio(a) - 0.985) - Math.abs(ratio(b) - 0.985))[0];
}

/**
 * Identifies a device from the name a trace records and, where it says, its memory in bytes: the catalogue model
 * whose tokens the name's are, and the memory size as sold. A name that is no catalogue model, or a laptop part,
 * or an architecture several models share at that memory size, is unknown, with the reason.
 */
export function identifyDevice(name: string, memoryBytes?: number): Identified {
  const t = modelTokens(name);
  if (t.laptop) return { known: false, name, reason: 'a laptop GPU: its PCIe link width depends on the laptop' };
  let model = t.key === '' ? undefined : BY_KEY.get(t.key);
  if (!model && t.key === '' && t.arch) {
    const byMemory = ARCH_MODELS[t.arch] ?? [];
    const hit =
      memoryBytes === undefined
        ? undefined
        : byMemory.find(([gb]) => nominalOf(memoryBytes, [gb]) !== undefined || (t.memoryGB !== undefined && t.memoryGB === gb));
    if (!hit)
      return {
        known: false,
        name,
        reason:
          byMemory.length === 0
            ? `${t.arch} is the architecture of several devices that its name does not tell apart`
            : `${t.arch} is ${byMemory.map(([, n]) => n).join(', ')} by memory size, and the trace ${memoryBytes === undefined ? 'does not record its memory' : `records ${(memoryBytes / 1e9).toFixed(1)} GB`}`,
      };
    model = BY_KEY.get(modelTokens(hit[1]).key);
  }
  if (!model) return { known: false, name, reason: t.key === '' ? 'the name gives no model' : "not in gpumem's device catalogue" };
  const fromName = t.memoryGB !== undefined && model.memoryGB.includes(t.memoryGB) ? t.memoryGB : undefined;
  const fromRuntime = memoryBytes !== undefined ? nominalOf(memoryBytes, model.memoryGB) : undefined;
  const memoryGB = fromName ?? fromRuntime ?? (model.memoryGB.length === 1 ? model.memoryGB[0] : undefined);
  return { known: true, model, memoryGB, name };
}
