/**
 * Linear layers as PyTorch eager and PEFT run them, forward and backward: what each matmul allocates, what autograd
 * saves for it (the input for a training weight, under autocast its own bf16 cast of an fp32 input; an adapter's cast
 * input, lora_dropout's mask and dropped copy, lora_A's output, DoRA's layer output), autocast's bf16 weight copies,
 * bitsandbytes' dequantised weight and torchao's fp8 casts while a matmul runs, and the weight gradients.
 */
import type { BlockContext, Keeper, Lin, Stage } from './block-context.js';
import type { H, Mem } from './mem.js';

/** What a quantised or fp8 matmul makes while it runs, for the layer's weight of `in x out` values. */
export interface MatmulExtras {
  /** bitsandbytes: the weight dequantised to 16 bits (bytes per value; 0 for an unquantised base). */
  dequantisedBytes: number;
  /** torchao float8: the weight and the input cast to fp8 while the matmul runs. */
  fp8: boolean;
  /** A quantised checkpoint's kernel (GPTQ, AWQ, bitsandbytes under generate): what the layer's matmul makes while it runs. */
  matmulBytes?: (l: Lin) => number;
  /** The same for the experts of a mixture's layer (their matmuls over the rows routed to each). */
  expertMatmulBytes?: number;
}

/** The transients of one matmul of `l` reading `tokens` rows: made and freed around it. */
function matmulTransients(mem: Mem, x: BlockContext, l: Lin, extras: MatmulExtras): void {
  const d = extras.dequantisedBytes ? mem.alloc(extras.dequantisedBytes * l.weight, x.tags.transient) : 0;
  const w8 = extras.fp8 ? mem.alloc(l.weight, x.tags.transient) : 0;
  const i8 = extras.fp8 ? mem.alloc(l.in * x.tokens, x.tags.transient) : 0;
  const q = extras.matmulBytes ? mem.alloc(extras.matmulBytes(l), x.tags.matmul ?? x.tags.transient) : 0;
  mem.free(d, w8, i8, q);
}

/**
 * Linear layers reading one input of `xb` bytes per value. The input is kept or freed here unless `shared` (kept
 * already by another op: SDPA's output read by the attention's output projection). Each layer allocates its output;
 * a training weight keeps the input (under autocast its own bf16 copy of an fp32 input); a frozen weight keeps it only
 * for bitsandbytes before 0.43.2; an adapter keeps the input cast to its dtype (with lora_dropout, the 1-byte mask and
 * the dropped copy; under autocast, autocast's bf16 copy), lora_A's output (lora_B's gradient reads it), and makes its
 * output, the scaled output and the sum. Answers the outputs.
 */
export function linears(k: Keeper, input: H, xb: number, ls: Lin[], stage: Stage, extras: MatmulExtras, shared = false, freeInput = true): H[] {
  const { x, mem } = k;
  const outs: H[] = [];
  let inputKept = shared;
  const keepInput = (): void => {
    if (inputKept) return;
    k.keep(input, xb * (ls[0]?.in ?? 0), stage);
    inputKept = true;
  };
  for (const l of ls) {
    const w = l.in;
    const own = x.autocast && xb !== 2 ? k.a(2 * w) : 0;
    // autocast's bf16 copy of an fp32 weight: saved by the matmul for the input's gradient; without autograd
    // recording, cached until autocast exits when the weight trains, else dropped at once. A Float8Linear casts its
    // fp32 weight to fp8 itself, outside autocast's cache (matmulTransients)
    if (x.autocast && x.weightBytes === 4 && !extras.fp8) autocastCopy(k, 2 * l.weight, l.trains, stage);
    matmulTransients(mem, x, l, extras);
    let out = k.a(x.C * l.out);
    if (l.trains) {
      if (own) k.keep(own, 2 * w, stage);
      else keepInput();
    } else {
      k.f(own);
      if (x.lora?.baseKeepsInput) keepInput();
    }
    if (l.adapted && x.lora) out = adapter(k, l, input, xb, out, stage, keepInput);
    outs.push(out);
  }
  if (!inputKept && freeInput) k.f(input);
  return outs;
}

/** autocast's bf16 copy of a weight: kept by the matmul when recording, else cached (trainable) or dropped. */
function autocastCopy(k: Keeper, bytes: number, trains: boolean, stage: Stage): void {
  const wc = k.mem.alloc(bytes, k.x.tags.autocast);
  if (k.recording) k.keepBytes(wc, bytes, stage);
  else if (trains) k.x.autocastCache.push(wc);
  else k.mem.free(wc);
}

/** One adapter's forward pass beside its base layer (whose output is `out`); answers the layer's output. */
function adapter(k: Keeper, l: Lin, _input: H, xb: number, out: H, stage: Stage, keepInput: () => void): H {
  const x = k.x;
  const lo = x.lora!;
  const w = l.in;
  const ab = lo.adapterBytes;
  const cb = x.autocast ? 2 : ab;
  const cast = ab !== xb ? k.a(ab * w) : 0;
  if (lo.dropout) {
    k.keep(k.a(w), w, stage);
    const dropped = k.a(ab * w);
    k.f(cast);
    if (x.autocast) {
      k.keep(k.a(2 * w), 2 * w, stage);
      k.f(dropped);
    } else k.keep(dropped, ab * w, stage);
  } else if (x.autocast && !(ab === 2 && xb === 2)) {
    k.keep(k.a(2 * w), 2 * w, stage);
    k.f(cast);
  } else if (cast) k.keep(cast, ab * w, stage);
  else keepInput();
  k.keep(k.a(cb * lo.rank), cb * lo.rank, stage);
  const b = k.a(cb * l.out);
  const scaled = k.a(cb * l.out);
  k.f(b);
  const wide = Math.max(cb, x.C);
  const sum = k.a(wide * l.out);
  k.f(scaled, out);
  let result = sum;
  if (wide !== x.C) {
    result = k.a(x.C * l.out);
    k.f(sum);
  }
  if (lo.dora) k.keep(k.a((ab + x.C) * l.out), (ab + x.C) * l.out, stage);
  if (x.autocast && ab === 4) autocastCopy(k, (2 * lo.rank * (l.in + l.out)) / x.tp, true, stage);
  return result;
}

/**
 * Bytes autograd keeps of one input (w values per token, x bytes each) for the linear layers that read it, as
 * linears() keeps them: the closed form the output layer's input uses (loss.ts).
 */
export function keptInputBytes(w: number, xb: number, readers: Array<{ trains: boolean; adapted: boolean }>, x: BlockContext): number {
  let shared = false;
  let bytes = 0;
  for (const r of readers) {
    if (!r.trains && x.lora?.baseKeepsInput) shared = true;
    if (r.trains) {
      if (x.autocast && xb !== 2) bytes += 2 * w;
      else shared = true;
    }
    if (r.adapted && x.lora) {
      const a = x.lora.adapterBytes;
      if (x.lora.dropout) bytes += w + (x.autocast ? 2 : a) * w;
      else if (x.autocast) {
        if (a === 2 && xb === 2) shared = true;
        else bytes += 2 * w;
      } else if (a !== xb) bytes += a * w;
      else shared = true;
    }
  }
  return bytes + (shared ? xb * w : 0);
}

/** Weight gradients made this micro-batch (param.grad), by module path within a block (or a name outside). */
export type GradStore = Map<string, H>;

/**
 * One linear layer's backward pass: its input's gradient, and for a training weight its gradient (param.grad on the
 * step's first micro-batch, a transient added into it after; stepped and freed at once with the optimizer in the
 * backward pass; handed to FSDP's reduce-scatter where the strategy collects them); the adapters' gradients.
 * Answers the input's gradient.
 */
export function linearBack(mem: Mem, x: BlockContext, l: Lin, grads: GradStore, extras: MatmulExtras): H {
  const gin = mem.alloc(x.C * l.in * x.tokens, x.tags.grads);
  matmulTransients(mem, x, l, extras);
  if (l.trains) weightGrad(mem, x, l.path, l.weight * x.gradBytes, x.autocast && x.weightBytes !== 2 ? 2 * l.weight : 0, grads);
  if (l.adapted && x.lora) {
    const ab = x.lora.adapterBytes;
    const gi = mem.alloc(ab * l.in * x.tokens, x.tags.grads);
    const back = ab !== x.C ? mem.alloc(x.C * l.in * x.tokens, x.tags.grads) : 0;
    mem.free(gi, back);
    const bytes = ((x.lora.rank * (l.in + l.out) + (x.lora.dora ? l.out : 0)) * ab) / x.tp;
    weightGrad(mem, x, `${l.path}.lora`, bytes, 0, grads);
  }
  return gin;
}

/**
 * A weight's gradient of `bytes`: made in `low` bytes first (autocast's bf16 matmul, then cast to the weight's dtype),
 * then kept as param.grad, added into it, sent to the strategy's reduce-scatter, or stepped at once.
 */
export function weightGrad(mem: Mem, x: BlockContext, key: string, bytes: number, low: number, grads: GradStore): void {
  const lo = low ? mem.alloc(low, x.tags.grads) : 0;
  const made = mem.alloc(bytes, x.tags.grads);
  mem.free(lo);
  if (x.gradSink) x.gradSink.push(made);
  else if (x.gradsLeave) {
    // the optimizer in the backward pass: the step's temporary, then the gradient is gone
    mem.free(mem.alloc(bytes, x.tags.grads), made);
  } else if (grads.has(key)) mem.free(made);
  else {
    mem.retag(made, x.tags.paramGrads);
    grads.set(key, made);
  }
}
