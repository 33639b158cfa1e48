/**
 * The training estimate: model states (train-states.ts), activations, the loss, at the moments of a step that can
 * peak. See estimate.ts. Each moment is a list of lines, each line in one field; the peak is the largest moment, and
 * its lines (with the overhead lines) are the estimate: the fields, the total and the text all add up the same lines.
 */
import { formatCount } from '../units.js';
import { korthikantiLayerBytes, dtypes, finalSavedBytesPerToken, pytorchCorrection, savedBytesPerToken, type SavedContext } from './activations.js';
import { adaptedModules, adapterBytes, linearModules, outputAdapted } from './adapters.js';
import { compiledFinalBytesPerToken, compiledPerOpKeptPerToken, compiledSavedBytesPerToken } from './compile-activations.js';
import { finalSoftcapLines, softcapScoreBytes } from './family-activations.js';
import { isLitgpt, litgptFusedAttention, litgptLossLines, litgptModel, litgptPreviousStep, litgptScoreBytes } from './litgpt.js';
import type { ModelConfig } from './model-config.js';
import { fsdpMixedPrecision, isLastStageOf } from './model-states.js';
import { expertAdapterLines } from './moe-adapters.js';
import {
  checkParallel,
  compilesBlocks,
  compilesLoss,
  fieldsOf,
  fieldsOver,
  fusedAttention,
  type Estimate,
  type Line,
  type Moment,
  type TrainOptions,
} from './options.js';
import { CUBLAS_WORKSPACE_BYTES, overheads } from './overheads.js';
import { countParams } from './params.js';
import { replayTraining } from './step-replay.js';
import { trainStates } from './train-states.js';

const total = (lines: readonly Line[]): number => lines.reduce((s, l) => s + l.bytes, 0);

/** The loss's kept line as it stands before the loss runs: only the new logits exist (half of logits + log-probs). */
const newLogits = (l: Line): Line => ({
  ...l,
  name: 'logits of this micro-batch (LitGPT, 128-token chunks)',
  bytes: l.bytes / 2,
  note: 'the output layer has run; the loss not yet',
});

/** What autograd keeps of the blocks under `o`, as SavedContext. */
export function savedContext(m: ModelConfig, o: TrainOptions): SavedContext {
  const l = o.lora;
  if (!l) return { precision: fsdpMixedPrecision(o) ? 'bf16-pure' : o.precision };
  const paths = new Set([...adaptedModules(m, l), ...(m.moe ? adaptedModules(m, l, true) : [])].map((x) => x.path));
  return {
    precision: o.precision,
    lora: {
      paths,
      adapterBytes: adapterBytes(l.dtype ?? 'fp32'),
      dropout: l.dropout,
      dora: l.dora,
      baseBytes: l.base === 'fp32' ? 4 : 2,
      output: outputAdapted(m, l),
      baseKeepsInput: !!l.quantKeepsInput,
    },
  };
}

/**
 * Activation lines: what the backward pass finds kept, and (with recomputation) the moment a layer is recomputed,
 * with the gradient flowing through it; bytes moved to host memory by activation offloading.
 */
function activationLines(m: ModelConfig, o: TrainOptions, fused: boolean, last: boolean): { kept: Line[]; recompute: Line[]; hostBytes: number } {
  const p = o.parallel;
  const tokens = o.batch * o.seq;
  const layersHere = m.layers / p.pp;
  const inFlight = p.pp > 1 ? Math.min(p.inFlight, p.pp) : 1;
  const line = (name: string, bytes: number, note: string): Line => ({ name, bytes, note, field: 'activationsBytes' });
  if (o.framework === 'megatron') {
    const per = korthikantiLayerBytes(
      o.seq,
      o.batch,
      m.hidden,
      m.heads,
      p.tp,
      p.sp,
      fused && o.recompute === 'none' ? 'selective' : o.recompute === 'op' ? 'selective' : o.recompute,
    );
    const kept = [
      line(
        'activations (Korthikanti et al. 2022)',
        per * layersHere * inFlight,
        `per layer ${per} bytes (s=${o.seq}, b=${o.batch}, h=${m.hidden}, a=${m.heads}, t=${p.tp}${p.sp ? ', sequence parallel' : ''}, recompute ${o.recompute}) x ${layersHere} layers x ${inFlight} micro-batches in flight`,
      ),
    ];
    return { kept, recompute: [], hostBytes: 0 };
  }
  const ctx = savedContext(m, o);
  const { R, C } = dtypes(ctx);
  const c = countParams(m);
  // compiled without a checkpoint, inductor's partitioner decides what the blocks keep (compile-activations.ts)
  const compiled = compilesBlocks(o) && o.recompute === 'none';
  // the final norm and the output layer sit outside the blocks: compiled only with the loss (--compile all)
  const finalCompiled = compiled && compilesLoss(o);
  const rank = o.lora?.rank ?? 0;
  const perBlock = (moe: boolean) => (compiled ? compiledSavedBytesPerToken(m, ctx, rank, moe) : savedBytesPerToken(m, ctx, moe));
  const perToken = (c.denseLayers * perBlock(false) + c.moeLayers * perBlock(true)) / m.layers;
  const correction = o.activationCorrection ?? pytorchCorrection(o.precision);
  const perLayer = (perToken * correction * tokens) / p.tp;
  const scoreBytes = o.precision === 'fp32' ? 4 : 2;
  // the math kernel keeps the softmax (and the dropout mask and dropped copy); Gemma 2's softcap its tanh output too
  const perScore = isLitgpt(o) ? litgptScoreBytes(o) : (m.dropout ? 2 * scoreBytes + 1 : scoreBytes) + softcapScoreBytes(m, o.precision);
  const scores = fused ? 0 : perScore * o.batch * (m.heads / p.tp) * o.seq * o.seq;
  const final = last ? ((finalCompiled ? compiledFinalBytesPerToken(m, ctx, o.seq) : finalSavedBytesPerToken(m, ctx)) * tokens) / p.tp : 0;
  const what = `${formatCount(Math.round(perToken))} bytes per token and layer, counted tensor by tensor${compiled ? " as torch.compile's min-cut partitioner keeps them" : ''}${ctx.lora ? ' (frozen base: only what the adapters and the gradient flowing to them need)' : ''}`;
  const kernel =
    o.attention === 'sdpa'
      ? fused
        ? 'SDPA runs a fused kernel: no s x s matrix'
        : 'SDPA runs the math kernel here (fp32 with grouped-query attention)'
      : o.attention;
  let kept: Line[];
  let perKept: number; // what one layer keeps through the forward pass (for offloading)
  let recompute: Line[] = [];
  const gradFlow = line('gradient flowing through the recomputed layer', (2 * R * m.hidden * tokens) / p.tp, 'the gradient of its output and of its input');
  if (o.recompute === 'full' || o.recompute === 'op') {
    const input = (R * m.hidden * tokens) / p.tp;
    // torchtitan's per-op policy keeps SDPA's output and every other aten.mm's output besides the layer's input
    // (torchao's float8 linears too: the policy sees their aten.mm before the float8 tensors turn it into _scaled_mm)
    const mm = linearModules(m).reduce((s, l) => s + l.out, 0);
    // compiled, the partitioner saves only what of that the backward reads (compile-activations.ts)
    const compiledOp = compilesBlocks(o) && o.recompute === 'op' ? compiledPerOpKeptPerToken(m, ctx) : undefined;
    const opPerToken = compiledOp ? compiledOp.reduce((s, t) => s + t.bytes, 0) : C * (m.heads * m.headDim + 0.5 * mm) + 4 * m.heads;
    const op = o.recompute === 'op' ? (opPerToken * tokens) / p.tp : 0;
    perKept = input + op;
    kept = [
      line(
        `activations: ${o.recompute === 'op' ? `layer inputs, SDPA outputs and every other matmul's output (per-op checkpointing${compiledOp ? '; compiled: those the backward reads' : ''})` : 'layer inputs (full recomputation)'}`,
        perKept * layersHere * inFlight,
        `${layersHere} layers x ${inFlight} micro-batches in flight; each layer's other activations are recomputed in the backward pass`,
      ),
    ];
    // compiled, the block's recomputation runs inside its backward graph, where inductor fuses the pointwise chains into
    // their readers: what it materialises is what a non-fusible op reads, the set the partitioner keeps without a
    // checkpoint (compile-activations.ts)
    const recomputed = compilesBlocks(o)
      ? ((c.denseLayers * compiledSavedBytesPerToken(m, ctx, rank, false) + c.moeLayers * compiledSavedBytesPerToken(m, ctx, rank, true)) / m.layers) *
        correction *
        (tokens / p.tp)
      : perLayer;
    recompute = [
      line(
        'activations of the layer being recomputed',
        recomputed + scores,
        compilesBlocks(o)
          ? `${formatCount(Math.round(recomputed / correction / (tokens / p.tp)))} bytes per token, what its compiled backward graph materialises (the tensors non-fusible ops read)`
          : what,
      ),
      gradFlow,
    ];
  } else {
    perKept = perLayer + (o.recompute === 'none' ? scores : 0);
    kept = [
      line(
        'activations per layer',
        perLayer * layersHere * inFlight,
        `${what}; ${layersHere} layers x ${inFlight} micro-batches in flight; attention: ${kernel}`,
      ),
    ];
    if (scores && o.recompute === 'none')
      kept.push(
        line(
          'activations: attention matrices (math kernel)',
          scores * layersHere * inFlight,
          `${perScore} bytes per score x ${o.batch} x ${m.heads / p.tp} heads x ${o.seq}^2 per layer`,
        ),
      );
  }
  let hostBytes = 0;
  if (o.activationOffload) {
    const all = total(kept);
    // torchtune's OffloadActivations streams kept tensors to pinned host memory; about two layers' worth stay in flight
    const stay = Math.min(all, 2 * perKept * inFlight);
    hostBytes = all - stay;
    kept = [
      line(
        'activations on the GPU (offloading: two layers in flight)',
        stay,
        `${formatCount(hostBytes)} bytes offloaded to pinned host memory and brought back for the backward pass`,
      ),
    ];
  }
  if (final) kept.push(line('activations: final norm and output layer input', final, 'kept once, after the last layer'));
  // LoRA on fused experts (PEFT's all-linear on transformers 5): merged expert weights and expert inputs kept
  if (o.lora && o.recompute === 'none')
    kept.push(...expertAdapterLines(m, o.lora, (c.moeLayers / p.pp) * inFlight, tokens / p.tp, ctx.lora?.baseBytes ?? 2, C));
  return { kept, recompute, hostBytes };
}

/** The loss's lines: what the forward pass keeps for it, and what the backward pass starts with. */
function lossLines(m: ModelConfig, o: TrainOptions, gradBytes: number): { kept: Line[]; backward: Line[] } {
  const p = o.parallel;
  const tokens = o.batch * o.seq;
  const V = m.vocab / p.tp;
  const logits = 4 * V * tokens;
  const tp = p.tp > 1 ? ` / tp ${p.tp}` : '';
  const kind = o.loss ?? 'standard';
  const field = 'logitsBytes' as const;
  if (kind === 'fused') {
    const kept: Line[] = [
      {
        name: 'loss: fused linear cross-entropy',
        bytes: (dtypes(savedContext(m, o)).R * m.hidden * tokens) / p.tp,
        note: "Liger's fused kernel computes the loss and the input's gradient chunk by chunk in the forward pass: no logits are kept",
        field,
      },
    ];
    if (!o.lora)
      kept.push({
        name: "loss: the output layer's gradient, computed in the forward pass",
        bytes: (m.vocab * m.hidden * gradBytes) / p.tp,
        note: `${m.vocab} x ${m.hidden} x ${gradBytes} bytes`,
        field,
      });
    return { kept, backward: [] };
  }
  const chunks = kind === 'chunked' ? 8 : 1;
  // compiled with the blocks only (--compile blocks), the loss runs eager: the fp32 lines below
  if (compilesLoss(o)) {
    // a compiled cross-entropy keeps its input, the 16-bit logits, and a log-sum-exp per token, and makes the logits'
    // gradient in 16 bits from them: no fp32 logit-sized tensor is kept or made
    const C = dtypes(savedContext(m, o)).C;
    // compiled without a checkpoint, the loss's backward runs in the model's graph and makes two logit-sized buffers
    // (1.04 and 1.13 GiB above the kept tensors in the fit runs of fixtures/plan/measured-peaks-h200-compile.json)
    const whole = o.recompute === 'none' ? 2 : 1;
    return {
      kept: [
        {
          name: 'loss: logits and log-sum-exp (compiled cross-entropy)',
          bytes: (C * V + 4) * tokens,
          note: `${C} bytes x ${m.vocab} vocabulary x ${tokens} tokens${tp}, and 4 bytes per token; torch.compile fuses the fp32 upcast and the softmax`,
          field,
        },
      ],
      backward: [
        {
          name: 'loss backward: gradient of the logits',
          bytes: (whole * C * V * tokens) / chunks,
          note: `${whole === 2 ? `two ${C}-byte logit-sized buffers (the whole model compiled as one graph with its loss, as torch.compile(model) runs a Hugging Face model given labels: measured on an H200)` : `one ${C}-byte logit-sized tensor`}${chunks > 1 ? ` of one of ${chunks} chunks` : ''}, made from the logits and the log-sum-exp`,
          field,
        },
      ],
    };
  }
  return {
    kept: [
      {
        name: 'loss: fp32 log-probabilities',
        bytes: logits,
        note: `4 bytes x ${m.vocab} vocabulary x ${tokens} tokens${tp}${chunks > 1 ? ', every chunk' : ''}`,
        field,
      },
      ...finalSoftcapLines(m, o.precision, tokens / p.tp),
    ],
    backward: [
      {
        name: 'loss backward: gradient of the logits',
        bytes: (2 * logits) / chunks,
        note:
          chunks > 1
            ? `two fp32 tensors the size of one of ${chunks} chunks (torchtune's chunked cross-entropy)`
            : 'two fp32 logit-sized tensors at the start of the backward pass',
        field,
      },
    ],
  };
}

/** The training estimate for the most-loaded GPU. */
export function estimateTrain(model: ModelConfig, o: TrainOptions): Estimate {
  const m = isLitgpt(o) ? litgptModel(model) : model;
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const s = trainStates(m, c, o);
  const fused = isLitgpt(o) ? litgptFusedAttention(m, o) : fusedAttention(m, o.attention, o.precision);
  const last = isLastStageOf(c, p);
  const act = activationLines(m, o, fused, last);
  const loss = last ? (isLitgpt(o) ? litgptLossLines(m, o) : lossLines(m, o, s.gradBytesPerParam)) : { kept: [], backward: [] };
  const largestLayer = Math.max(c.denseLayer, c.moeLayer) / p.tp;
  const matmulParams = s.P - c.embedding / p.tp + (m.tiedEmbeddings && last ? (m.vocab * m.hidden) / p.tp : 0);
  let autocastCache = 0;
  if (o.framework !== 'megatron' && o.precision === 'amp-bf16' && !fsdpMixedPrecision(o)) {
    // torch.autocast caches a bf16 copy of each fp32 matmul weight it casts; a 16-bit or quantised base needs none,
    // its fp32 adapters do (FSDP's mixed precision gathers bf16 weights instead: no autocast)
    const base = o.lora ? (o.lora.base === 'fp32' ? matmulParams : 0) : matmulParams;
    autocastCache = 2 * base + (o.lora ? 2 * s.trainable : 0);
  }
  const cacheLine: Line[] = autocastCache
    ? [
        {
          name: 'autocast bf16 copies of the weights',
          bytes: autocastCache,
          note: 'torch.autocast caches a bf16 copy of each fp32 matmul weight it casts, for the step',
          field: 'autocastCacheBytes',
        },
      ]
    : [];
  const extra: Line[] = s.dequantised ? [s.dequantised] : [];
  if (o.precision === 'fp8-torchao') {
    const big = Math.max(...linearModules(m).map((l) => l.in * l.out));
    const maxIn = Math.max(...linearModules(m).map((l) => l.in));
    extra.push({
      name: 'torchao float8: fp8 casts of the running matmul',
      bytes: (big + o.batch * o.seq * maxIn) / p.tp,
      note: "one matmul's weight and input cast to fp8 (1 byte each) while it runs",
      field: 'workspaceBytes',
    });
  }
  if (o.optimizerInBackward)
    extra.push({
      name: 'gradient of the parameter being stepped (optimizer in backward)',
      bytes: (s.gradBytesPerParam * s.largestTrainable * 2) / p.tp,
      note: 'each gradient is stepped and freed as the backward pass makes it: one gradient and its step temporary at a time',
      field: 'gradientsBytes',
    });
  if (o.framework !== 'megatron')
    extra.push({
      name: 'cuBLAS workspace',
      bytes: CUBLAS_WORKSPACE_BYTES,
      note: "PyTorch's cuBLAS/cuBLASLt workspace for the stream, allocated through its caching allocator (32 MiB on Hopper)",
      field: 'workspaceBytes',
    });
  const held: Line[] = [...s.parameters];
  if (o.gradAccum > 1) held.push(s.gradients(`held through ${o.gradAccum} accumulated micro-batches`));
  held.push(s.optimizer);
  const start = [...held, ...act.kept, ...cacheLine, ...extra, ...loss.kept, ...loss.backward];
  const recomputing = act.recompute.length ? [...held, ...act.kept, ...cacheLine, ...extra, ...act.recompute] : undefined;
  // LitGPT: the end of the next micro-batch's forward pass, the previous graph still held by the loop (litgpt.ts)
  const forwardEnd = isLitgpt(o) && last ? [...held, ...act.kept, ...cacheLine, ...extra, ...loss.kept.map(newLogits), ...litgptPreviousStep(m, o)] : undefined;
  const candidates = [start, recomputing, forwardEnd].filter((x): x is Line[] => x !== undefined);
  const backward = candidates.reduce((a, b) => (total(b) > total(a) ? b : a));
  const moments: Array<{ phase: Moment['phase']; lines: Line[] }> = [{ phase: 'backward', lines: backward }];
  if (!o.optimizerInBackward) {
    const step: Line[] = [...s.parameters, s.gradients('held from the backward pass to the optimizer step'), s.optimizer];
    if (s.stepTemporaries) step.push(s.stepTemporaries);
    step.push(...extra.filter((l) => l.name === 'cuBLAS workspace'));
    moments.push({ phase: 'optimizer-step', lines: step });
  }
  const peak = moments.reduce((a, b) => (total(b.lines) > total(a.lines) ? b : a));
  const otherM = moments.find((x) => x !== peak);
  const peakLines = peak.lines.filter((l) => l.bytes > 0);
  // what the caching allocator holds without tensors: the step replayed through it (unless a flat share is asked for)
  const replay = o.fragmentation === undefined ? replayTraining(m, o) : undefined;
  const cached = replay && Math.max(0, replay.peakReservedBytes - replay.peakAllocatedBytes);
  const over = overheads(o, s.P, fsdpMixedPrecision(o) ? 2 : s.weightBytes, largestLayer, total(peakLines), cached);
  const lines = [...peakLines, ...over];
  const fields = fieldsOver(
    moments.map((x) => x.lines),
    over,
  );
  const allActivations = total(act.kept) + total(act.recompute);
  const everything =
    s.modelStates.parametersBytes +
    s.gradientsBytes +
    s.optimizer.bytes +
    allActivations +
    autocastCache +
    total(loss.kept) +
    total(loss.backward) +
    (s.stepTemporaries?.bytes ?? 0) +
    total(extra);
  return {
    ...fields,
    totalBytes: Math.round(fields.totalBytes),
    sumBytes: Math.round(everything + total(over)),
    peakPhase: peak.phase === 'optimizer-step' ? 'optimizer-step' : 'backward',
    lines,
    atPeak: fieldsOf(lines),
    otherMoment: otherM && { phase: otherM.phase, bytes: total(otherM.lines), lines: otherM.lines.filter((l) => l.bytes > 0) },
    modelStates: s.modelStates,
    hostBytes: s.hostOptimizerBytes + s.hostParametersBytes + act.hostBytes,
    hostParametersBytes: s.hostParametersBytes,
    hostOptimizerBytes: s.hostOptimizerBytes,
    hostActivationsBytes: act.hostBytes,
    offloadBytesPerStep: s.offloadBytesPerStep + 2 * act.hostBytes,
    params: c,
    localParams: s.P,
  };
}
