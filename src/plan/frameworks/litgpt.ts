/**
 * `--framework litgpt`: what LitGPT's fine-tuning scripts do differently from a Hugging Face + PEFT run, each from the
 * code that ran for LitGPT's published table (Lightning-AI/litgpt at 00af8b0, Lightning 2.4.0.dev20240728 as it pins,
 * bitsandbytes 0.42.0 as it pins; docs/plan-training.md names file and line):
 *
 * - the model is LitGPT's own (litgpt/model.py): its MLPs call `torch.nn.functional.gelu` (tanh approximation for Phi,
 *   Gemma), one fused op that keeps its input, where transformers' `gelu_new` is a Python formula of several tensors;
 *   its LLaMAMLP keeps gate and up as two linear layers (fc_1, fc_2) where a checkpoint fuses them (Phi-3);
 * - it calls SDPA except under attention softcapping (Gemma 2), where it computes the scores itself and keeps tanh's
 *   output, softmax's fp32 output and its cast back;
 * - under `quantize: bnb.*` Lightning's BitsandbytesPrecision replaces every `torch.nn.Linear` while the model is
 *   built, the output layer too, and quantises each weight from an fp16 copy, so bitsandbytes dequantises to fp16 and
 *   MatMul4Bit casts that to the bf16 input: two copies of the layer's weight while it runs;
 * - the training loop keeps `logits` and `loss` of a micro-batch until the next micro-batch's are assigned, so the
 *   previous graph lives through the next forward pass: its logits, and (bitsandbytes before 0.43.2, whose MatMul4Bit
 *   keeps its input as a ctx attribute that the backward pass does not free) every quantised layer's input;
 * - the output layer and the cross-entropy run in chunks of 128 tokens of the sequence, in the logits' dtype (no fp32
 *   upcast): the logits and their log-probabilities kept, the backward pass adding two chunk-sized gradients.
 */
import { CONSTANTS } from '../constants.js';
import type { ModelConfig } from '../model-config.js';
import type { TrainOptions } from '../options.js';
import { float8Linears, quantisedBase } from '../precision.js';
import { linearModules } from '../adapters.js';
import { finalNorm, type LossState, outputGrads } from '../program/loss.js';
import type { H, Mem } from '../program/mem.js';
import type { StepSetup } from '../program/step-setup.js';
import type { Framework } from './types.js';

/** Bytes per value of the logits and of the blocks' outputs (the compute dtype). */
const computeBytes = (o: TrainOptions): number => (o.precision === 'fp32' ? 4 : 2);

/** What the previous micro-batch leaves alive into the next one (the loop's `logits` and `loss`). */
const previous = new WeakMap<StepSetup, H[]>();

/** Bytes per token of the distinct inputs of the quantised linear layers one block runs (one tensor per site). */
function quantInputsPerToken(m: ModelConfig, C: number): number {
  const shared = m.arch.parallelResidual && m.arch.normsPerLayer === 1; // Phi, Falcon-7B: one norm feeds both
  const sites = new Map<string, number>();
  for (const l of linearModules(m)) sites.set(shared && l.site === 'mlp-norm' ? 'attn-norm' : l.site, l.in);
  let sum = 0;
  for (const w of sites.values()) sum += w;
  return sum * C;
}

/** The dequantised output layer while its matmul runs (fp16, and its cast to the input's dtype). */
function dequantisedOutput(mem: Mem, s: StepSetup): H {
  if (!quantisedBase(s.o.lora)) return 0;
  const m = s.x.m;
  return mem.alloc((m.vocab * m.hidden * litgpt.dequantisedBytes(s.o)) / s.x.tp, s.tags.transient);
}

/** The previous micro-batch's tensors the loop holds: its logits, and its quantised layers' inputs before 0.43.2. */
function holdPrevious(mem: Mem, s: StepSetup, logits: H): void {
  mem.retag(logits, previousLogitsTag(s));
  const held = [logits];
  if (quantisedBase(s.o.lora) && s.o.lora?.quantKeepsInput) {
    const perToken = s.table.denseLayers * quantInputsPerToken(s.x.m, computeBytes(s.o));
    held.push(
      mem.alloc(
        perToken * s.x.tokens,
        s.tags.line(
          "previous micro-batch: quantised layers' inputs (bitsandbytes < 0.43.2)",
          'activationsBytes',
          "MatMul4Bit keeps its input as ctx.tensors, freed only with the graph, which the loop's `loss` holds until the next loss is assigned",
        ),
      ),
    );
  }
  previous.set(s, held);
}

export const litgpt: Framework = {
  name: 'litgpt',
  model: (m) => ({ ...m, arch: { ...m.arch, fusedActivation: true, separateGateUp: true } }),
  attention: (m, o) => {
    const C = o.precision === 'fp32' ? 4 : 2;
    const fused = m.arch.attnSoftcap ? false : o.attention === 'eager' ? false : o.precision !== 'fp32' || o.attention === 'flash';
    // softcapped attention keeps tanh's output, softmax's fp32 output and its cast back (kept by `scores @ v`)
    return { fused, scoreBytes: C + 4 + (C === 4 ? 0 : C), kernel: fused ? 'SDPA (a fused kernel)' : "LitGPT's own scores (softcapping: no SDPA)" };
  },
  beforeStep: (mem, s) => {
    // the steady state: the last micro-batch of the step before is still held by the loop
    if (!s.table.last) return;
    const m = s.x.m;
    holdPrevious(mem, s, mem.alloc((computeBytes(s.o) * m.vocab * s.tokens) / s.x.tp, previousLogitsTag(s)));
  },
  lossForward: (mem, s, hidden) => {
    const x = s.x;
    const V = x.m.vocab / x.tp;
    const C = computeBytes(s.o);
    const final = finalNorm(mem, s, hidden);
    const d = dequantisedOutput(mem, s);
    const logits = mem.alloc(
      C * V * s.tokens,
      s.tags.line('loss: logits (LitGPT, 128-token chunks)', 'logitsBytes', "the loop's `logits` list, in the logits' dtype"),
    );
    mem.free(d);
    // the loop's `logits` is reassigned once the forward pass returns, `loss` once the new loss exists
    mem.free(...(previous.get(s) ?? []));
    previous.delete(s);
    const logprobs = mem.alloc(
      C * V * s.tokens,
      s.tags.line("loss: log-probabilities (LitGPT, in the logits' dtype)", 'logitsBytes', "cross_entropy's log_softmax output: no fp32 upcast"),
    );
    return { kind: 'chunked', chunks: [logprobs, logits], final, lse: 0 };
  },
  lossBackward: (mem, s, loss: LossState, grads) => {
    const x = s.x;
    const V = x.m.vocab / x.tp;
    const C = computeBytes(s.o);
    const chunk = (x.tokens * Math.min(CONSTANTS.litgptChunkTokens.value, s.o.seq)) / s.o.seq;
    // every chunk's cross-entropy runs backward before the output layer's: one chunk of log-probability and logit gradients
    const tag = s.tags.line('loss backward: gradients of one chunk', 'logitsBytes', 'one 128-token chunk of log-probability and logit gradients');
    const g = [mem.alloc(C * V * chunk * x.tp, tag), mem.alloc(C * V * chunk * x.tp, tag)];
    mem.free(loss.chunks[0] as H);
    const d = dequantisedOutput(mem, s);
    mem.free(d, ...g);
    outputGrads(mem, s, grads, false);
    mem.free(...loss.final);
    holdPrevious(mem, s, loss.chunks[1] as H);
  },
  // Lightning quantised from fp16: the weight dequantised to fp16 and cast to the input's dtype, both for a moment
  dequantisedBytes: (o) => (quantisedBase(o.lora) ? (o.precision === 'fp32' ? 2 + 4 : 2 + 2) : 0),
  cublasWorkspace: true,
  replay: true,
  fsdp: 'fsdp1',
  // Lightning's FSDPStrategy.__init__: `self._fsdp_kwargs.setdefault("use_orig_params", True)` on PyTorch >= 2.0
  // (Lightning-AI/pytorch-lightning src/lightning/fabric/strategies/fsdp.py at 2.1.0 and 71aed751, which Lit-GPT
  // 8641822 pins, and at 2.4.0); LitGPT's finetune/lora.py passes FSDPStrategy(auto_wrap_policy={Block}, ...) without it,
  // so each Block's FlatParameter holds its frozen weights and its LoRA matrices together
  fsdpOrigParams: true,
  refuse: (i, given) => {
    // LitGPT's fine-tuning scripts always chunk the output layer and the loss (finetune/lora.py, full.py at 00af8b0)
    if (given('loss') && i.loss !== 'chunked') return `--framework litgpt runs its own chunked loss: it contradicts --loss ${i.loss}`;
    const refused: Array<[boolean, string]> = [
      [!!i.compile, i.compile === 'blocks' ? '--compile blocks' : '--compile'],
      [i.activationOffload, '--activation-offload'],
      [i.optimizerInBackward, '--optimizer-in-backward'],
      [i.recompute === 'op', '--recompute op'],
      [float8Linears(i.precision), `--precision ${i.precision}`],
    ];
    const hit = refused.find(([on]) => on);
    return hit ? `${hit[1]} is not something LitGPT's fine-tuning scripts do: it contradicts --framework litgpt` : undefined;
  },
  // the chunked loss; adapters made under fabric.init_module in the precision's dtype; the bitsandbytes it pins
  defaults: (i) => ({ loss: 'chunked', loraDtype: i.precision === 'bf16-pure' ? 'bf16' : undefined, bnbVersion: '0.42' }),
  note: () => "LitGPT's fine-tuning scripts: its model code, its 128-token chunked loss, Lightning's bitsandbytes handling",
};

function previousLogitsTag(s: StepSetup) {
  return s.tags.line(
    'previous micro-batch: its logits (LitGPT loop)',
    'logitsBytes',
    "the loop's `logits` list is reassigned only after the next forward pass returns",
  );
}
