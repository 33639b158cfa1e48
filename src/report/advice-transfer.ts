/** Advice from the transfer engine's rows (gpumem bench --only transfer) against the plain ways. */
import type { BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { batchCall, f1, type RuleContext } from './figures.js';
import { transferProgramAdvice } from './transfer-advice.js';

/** rt.upload against the runtime's pageable copy, copyBatch against one-by-one copies, captured chains. */
export function transferAdvice(c: RuleContext): void {
  const { bench, F, add } = c;
  const ev = F.ev.bind(F);
  // The transfer engine against the plain ways (gpumem bench --only transfer).
  const pick = (direction: string, src: string, dst: string, engine: (e: string) => boolean): BenchResult | undefined =>
    F.pick('transfer', direction, src, dst, engine);
  const upDirect = pick('HtoD', 'pageable', 'device', (e) => e === 'runtime-direct');
  const upStaged = pick('HtoD', 'pageable', 'device', (e) => e.startsWith('gpumem-upload'));
  const downDirect = pick('DtoH', 'device', 'pageable', (e) => e === 'runtime-direct');
  const downStaged = pick('DtoH', 'device', 'pageable', (e) => e.startsWith('gpumem-download'));
  if (upDirect?.medianGBps && upStaged?.medianGBps) {
    const x = upStaged.medianGBps / upDirect.medianGBps;
    const down = downDirect?.medianGBps && downStaged?.medianGBps ? downStaged.medianGBps / downDirect.medianGBps : undefined;
    add({
      id: 'stage-pageable-transfers',
      workloads: ['training', 'inference', 'preprocessing'],
      title:
        x >= 1.2
          ? `rt.upload: ${f1(x)}x the direct pageable copy here (${f1(upStaged.medianGBps)} against ${f1(upDirect.medianGBps)} GB/s)`
          : `Staged and direct pageable uploads are close here (${f1(upStaged.medianGBps)} against ${f1(upDirect.medianGBps)} GB/s)`,
      recommendation:
        x >= 1.2
          ? `Move ordinary JS buffers with rt.upload / rt.download: they go through pinned chunks filled by ${upStaged.threads ?? 'several'} threads while the copy engine moves the previous chunk, ${f1(upStaged.medianGBps)} GB/s against ${f1(upDirect.medianGBps)} GB/s for the runtime's own pageable copy${down ? `; downloads ${f1(downStaged!.medianGBps!)} against ${f1(downDirect!.medianGBps!)} GB/s` : ''}. Buffers reused for many transfers can be pinned once instead (allocPinned, or allocPageable with register: true).`
          : `rt.upload moved ${f1(upStaged.medianGBps)} GB/s and the runtime's pageable copy ${f1(upDirect.medianGBps)} GB/s: on this machine the host copies limit both; pin the buffers you reuse.`,
      evidence: [
        ev('HtoD pageable, rt.upload', upStaged),
        ev('HtoD pageable, runtime copy', upDirect),
        ev('DtoH pageable, rt.download', downStaged),
        ev('DtoH pageable, runtime copy', downDirect),
      ],
    });
  }
  const oneByOne = pick('HtoD-small', 'pinned', 'device', (e) => e === 'one-by-one');
  const batched = pick('HtoD-small', 'pinned', 'device', (e) => e === 'copyBatch');
  const graphed = pick('HtoD-small', 'pinned', 'device', (e) => e === 'graph');
  if (oneByOne?.medianGBps && batched?.medianGBps) {
    const x = batched.medianGBps / oneByOne.medianGBps;
    add({
      id: 'batch-copies-call',
      workloads: ['preprocessing', 'inference', 'training'],
      title: x >= 1.2 ? `rt.copyBatch: ${f1(x)}x copies enqueued one by one` : 'One batch call and one call per copy are close here',
      recommendation: `${oneByOne.copies ?? 'Many'} copies of ${formatBytes(oneByOne.bytes / (oneByOne.copies ?? 1), 0)} from pinned memory moved ${f1(batched.medianGBps)} GB/s as one copyBatch${graphed?.medianGBps ? `, ${f1(graphed.medianGBps)} GB/s as one captured graph` : ''} and ${f1(oneByOne.medianGBps)} GB/s one by one. When small tensors cannot be packed into one buffer, enqueue them with rt.copyBatch${batchCall(bench)}.`,
      evidence: [ev('small copies, copyBatch', batched), ev('small copies, graph', graphed), ev('small copies, one by one', oneByOne)],
    });
  }
  const chainOne = pick('chain-100', 'device', 'device', (e) => e === 'one-by-one');
  const chainGraph = pick('chain-100', 'device', 'device', (e) => e === 'graph');
  if (chainOne?.medianUs && chainGraph?.medianUs) {
    add({
      id: 'capture-chains',
      workloads: ['inference', 'training'],
      title: `A captured chain costs ${f1(chainGraph.medianUs)} µs per operation against ${f1(chainOne.medianUs)} µs one by one`,
      recommendation: `A fixed sequence of small operations repeated every step (a decode step's copies and kernels) costs ${f1(chainOne.medianUs)} µs per operation when enqueued one by one and ${f1(chainGraph.medianUs)} µs when captured once with rt.capture and launched as one graph.`,
      evidence: [ev('chain of 100, per operation, graph', chainGraph, 'µs'), ev('chain of 100, per operation, one by one', chainOne, 'µs')],
    });
  }
  transferProgramAdvice(c);
}
