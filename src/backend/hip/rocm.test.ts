/**
 * What differs between ROCm versions, tested without an AMD GPU: matching ROCm SMI devices to HIP devices on
 * partitioned GPUs, finding one install's libraries, the capabilities HIP lacks, and naming a missing hipRTC.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { installRootOf, libraryCandidates, rocmLibraryDirs } from '../library-search.js';
import { hiprtcMissing } from './ffi.js';
import { withoutWriteCombining } from './hip-backend.js';
import { decodeBdfId, matchRsmiDevices, parsePciBusId } from './rocm-smi-devices.js';

/** A BDF id as rocm_smi.h (ROCm >= 6.2) lays it out. */
const bdf = (domain: number, bus: number, device: number, fn: number, partition = 0): bigint =>
  (BigInt(domain) << 32n) | (BigInt(partition) << 28n) | (BigInt(bus) << 8n) | (BigInt(device) << 3n) | BigInt(fn);

test('BDF ids and PCI bus ids decode as rocm_smi.h and HIP write them', () => {
  assert.deepEqual(decodeBdfId(bdf(1, 0xc1, 0x1f, 7, 5)), { domain: 1, partition: 5, bus: 0xc1, device: 0x1f, fn: 7 });
  assert.deepEqual(parsePciBusId('0000:03:00.0'), { domain: 0, bus: 3, device: 0, fn: 0 });
  assert.deepEqual(parsePciBusId('00000000:83:00.1'), { domain: 0, bus: 0x83, device: 0, fn: 1 });
  for (const bad of ['', '03:00.0', '0000:03:00', '0000:03:20.0', '0000:zz:00.0', '0000:03:00.8']) assert.equal(parsePciBusId(bad), undefined, bad);
});

test('unpartitioned GPUs match by PCI address, in any enumeration order', () => {
  const hip = [
    { index: 0, pciBusId: '0000:05:00.0' },
    { index: 1, pciBusId: '0000:15:00.0' },
    { index: 2, pciBusId: '0000:65:00.0' },
  ];
  const smi = [
    { index: 0, bdfid: bdf(0, 0x65, 0, 0) },
    { index: 1, bdfid: bdf(0, 0x05, 0, 0) },
    { index: 2, bdfid: bdf(0, 0x15, 0, 0) },
  ];
  assert.deepEqual([...matchRsmiDevices(hip, smi)].sort(), [
    [0, 1],
    [1, 2],
    [2, 0],
  ]);
});

test('an MI300X in CPX mode: 8 partitions on one PCI address, told apart by the partition bits', () => {
  // Two GPUs, each in CPX mode: HIP lists 16 devices, 8 per PCI address; ROCm SMI interleaves them differently.
  const hip = Array.from({ length: 16 }, (_, i) => ({ index: i, pciBusId: i < 8 ? '0000:05:00.0' : '0000:15:00.0' }));
  const smi = Array.from({ length: 16 }, (_, i) => ({ index: i, bdfid: bdf(0, i % 2 === 0 ? 0x05 : 0x15, 0, 0, i >> 1) }));
  const m = matchRsmiDevices(hip, smi);
  assert.equal(m.size, 16);
  for (let p = 0; p < 8; p++) {
    assert.equal(m.get(p), 2 * p, `partition ${p} of the first GPU`);
    assert.equal(m.get(8 + p), 2 * p + 1, `partition ${p} of the second GPU`);
  }
  // Before this matching, every partition was given partition 0's memory: now each has its own.
  assert.equal(new Set(m.values()).size, 16);
});

test('an MI300A partitioned under ROCm 6.1: the partition in the function bits (0001:02:00.0, .1, .2 as reported)', () => {
  // rocm_smi_lib issue 208: rocm-smi --showbus gave 0001:02:00.1 and 0001:02:00.2 for the second and third
  // partitions of 0001:02:00.0, addresses lspci does not list; HIP gives each partition the real address.
  const hip = [0, 1, 2].map((i) => ({ index: i, pciBusId: '0001:02:00.0' }));
  const smi = [
    { index: 0, bdfid: bdf(1, 2, 0, 2) },
    { index: 1, bdfid: bdf(1, 2, 0, 0) },
    { index: 2, bdfid: bdf(1, 2, 0, 1) },
  ];
  assert.deepEqual([...matchRsmiDevices(hip, smi)].sort(), [
    [0, 1],
    [1, 2],
    [2, 0],
  ]);
});

test('rsmi_dev_partition_id_get, where it answers, decides the order; counts that differ leave a group unmatched', () => {
  const hip = [0, 1].map((i) => ({ index: i, pciBusId: '0000:05:00.0' }));
  const smi = [
    { index: 0, bdfid: bdf(0, 5, 0, 0), partition: 1 },
    { index: 1, bdfid: bdf(0, 5, 0, 0), partition: 0 },
  ];
  assert.deepEqual([...matchRsmiDevices(hip, smi)].sort(), [
    [0, 1],
    [1, 0],
  ]);
  // DPX on the HIP side (2 devices) but only one listed by ROCm SMI: nothing is guessed.
  assert.equal(matchRsmiDevices(hip, [{ index: 0, bdfid: bdf(0, 5, 0, 0) }]).size, 0);
  assert.equal(matchRsmiDevices([{ index: 0, pciBusId: undefined }], smi).size, 0);
});

test('one ROCm install at a time: ROCM_PATH wins over a newer version elsewhere, and each install is searched whole', () => {
  const opt = mkdtempSync(join(tmpdir(), 'gpumem-rocm-'));
  try {
    const lib = (install: string, ...files: string[]): void => {
      mkdirSync(join(opt, install, 'lib'), { recursive: true });
      for (const f of files) writeFileSync(join(opt, install, 'lib', f), '');
    };
    lib('rocm-6.2.0', 'libamdhip64.so.6', 'libhiprtc.so.6', 'librocm_smi64.so.7');
    lib('rocm-7.0.0', 'libamdhip64.so.7', 'libhiprtc.so.7', 'librocm_smi64.so.1');
    lib('rocm-5.7.1', 'libamdhip64.so.5');
    const names = ['libamdhip64.so.7', 'libamdhip64.so.6', 'libamdhip64.so.5', 'libamdhip64.so'];
    const first = (env: NodeJS.ProcessEnv, order: 'dirs-first' | 'names-first' = 'dirs-first') =>
      libraryCandidates({ envVar: 'GPUMEM_TEST_UNSET', names, dirs: rocmLibraryDirs(env, opt), order })[0]!.path;
    // ROCM_PATH names 6.2: its .so.6 is taken although 7.0 has a .so.7.
    assert.equal(first({ ROCM_PATH: join(opt, 'rocm-6.2.0') }), join(opt, 'rocm-6.2.0/lib/libamdhip64.so.6'));
    // Searching by name first (the old order) would have taken 7.0's from another install:
    assert.equal(first({ ROCM_PATH: join(opt, 'rocm-6.2.0') }, 'names-first'), join(opt, 'rocm-7.0.0/lib/libamdhip64.so.7'));
    // Without ROCM_PATH the newest versioned install comes first, then the older ones.
    const all = libraryCandidates({ envVar: 'GPUMEM_TEST_UNSET', names, dirs: rocmLibraryDirs({}, opt), order: 'dirs-first' }).filter((c) => !c.viaLoader);
    assert.deepEqual(
      all.map((c) => c.path.slice(opt.length + 1)),
      ['rocm-7.0.0/lib/libamdhip64.so.7', 'rocm-6.2.0/lib/libamdhip64.so.6', 'rocm-5.7.1/lib/libamdhip64.so.5'],
    );
    // hipRTC and ROCm SMI then come from the install HIP came from, before any other.
    const hipDir = join(opt, 'rocm-6.2.0/lib');
    const smi = libraryCandidates({
      envVar: 'GPUMEM_TEST_UNSET',
      names: ['librocm_smi64.so.7', 'librocm_smi64.so.6', 'librocm_smi64.so.5', 'librocm_smi64.so.1'],
      dirs: [hipDir, ...rocmLibraryDirs({}, opt)],
      order: 'dirs-first',
    })[0]!;
    assert.equal(smi.path, join(hipDir, 'librocm_smi64.so.7'));
    assert.equal(installRootOf(join(hipDir, 'libamdhip64.so.6.2.60200')), join(opt, 'rocm-6.2.0'));
    assert.equal(installRootOf('libamdhip64.so.6'), undefined);
  } finally {
    rmSync(opt, { recursive: true, force: true });
  }
});

test('HIP has no write-combined pinned memory; a missing hipRTC is named for the ROCm version', () => {
  const caps = withoutWriteCombining({
    managedMemory: true,
    mappedMemory: true,
    hostRegister: true,
    writeCombined: true,
    streamOrderedAllocator: true,
    virtualMemory: true,
    peerAccess: true,
    kernels: true,
    blockingHostCallbacks: true,
    fineGrainedDeviceMemory: true,
    uncachedDeviceMemory: true,
    coherentHostMemory: true,
    numaHostMemory: true,
    coherencyControl: true,
    batchCopies: false,
    graphs: true,
    hostCopierThreads: true,
    gpuDirectStorage: false,
    gpuMemory: true,
    vendorCollectives: true,
  });
  assert.equal(caps.writeCombined, false);
  assert.match(hiprtcMissing(7, '/opt/rocm-7.0.0/lib'), /^libhiprtc\.so\.7 not found in \/opt\/rocm-7\.0\.0\/lib .*ROCm 7 ships hipRTC as its own library/);
  assert.match(hiprtcMissing(6, undefined), /neither libhiprtc on the loader's path nor hipRTC inside libamdhip64/);
});
