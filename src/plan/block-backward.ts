/**
 * One transformer block's backward pass as tensor allocations and frees (the forward pass is block-replay.ts): each
 * gradient allocated where autograd makes it, each tensor the forward pass kept freed when the node that saved it
 * has run, weight gradients kept as param.grad (or handed to FSDP's reduce-scatter).
 */
import type { InputSite } from './adapters.js';
import { modules, type BlockContext, type GradStore, type H, type KeptBlock, type Lin, type Stage, type Tape } from './block-replay.js';

/**
 * One block's backward pass from `g`, the gradient of its output (R bytes per value, which the block's input
 * gradient accumulates into). Each linear layer makes its input's gradient and, for a training weight, its weight's
 * gradient (param.grad when it is the step's first, a transient added into it otherwise); each kept tensor is freed
 * when its node has run.
 */
export function blockBackward(t: Tape, x: BlockContext, block: KeptBlock, grads: GradStore, id: string, moe = false): void {
  const { R, C, m } = x;
  const h = m.hidden;
  const lins = modules(x, moe);
  const site = (s: InputSite): Lin[] => lins.filter((l) => l.site === s);
  const release = (stage: Stage): void => {
    for (const e of block.kept) if (e.stage === stage && e.h) t.f(e.h);
    block.kept = block.kept.filter((e) => e.stage !== stage);
  };
  const linearBack = (l: Lin): H => {
    const gin = t.a(C * l.in);
    if (l.trains) {
      const bytes = l.in * l.out * x.weightBytes;
      const low = x.autocast && x.weightBytes !== 2 ? t.p(2 * l.in * l.out) : 0;
      const made = t.p(bytes);
      t.f(low);
      const key = `${id}.${l.path}`;
      if (x.gradSink) x.gradSink.push(made);
      else if (x.gradsLeave || grads.has(key)) t.f(made);
      else grads.set(key, made);
    }
    if (l.adapted && x.lora) {
      const ab = x.lora.adapterBytes;
      const gi = t.a(ab * l.in);
      const back = ab !== C ? t.a(C * l.in) : 0;
      t.f(gi, back);
      const key = `${id}.${l.path}.lora`;
      if (!x.gradsLeave && !grads.has(key)) grads.set(key, t.p(x.lora.rank * (l.in + l.out) * ab + (x.lora.dora ? l.out * ab : 0)));
    }
    return gin;
  };
  // ---- MLP
  const down = site('mlp-act');
  const up = site('mlp-norm').filter((l) => l.path !== 'mlp.gate');
  const router = site('mlp-norm').filter((l) => l.path === 'mlp.gate');
  const f = up[0]?.out ?? 0;
  const gd = R !== C ? t.a(C * h) : 0;
  const gmid = linearBack(down[0]!);
  t.f(gd);
  release('mlp-act');
  const gact = t.a((m.family === 'gpt' && x.autocast ? 4 : C) * f);
  const gup = up.length >= 2 ? t.a(C * f) : 0;
  t.f(gmid);
  const gpre = t.a(C * f);
  t.f(gact, gup);
  release('mlp-mid');
  const gx = linearBack(up[0]!);
  for (const l of [...up.slice(1), ...router]) t.f(linearBack(l));
  t.f(gpre);
  release('mlp-in');
  t.f(normBack(t, x, gx));
  release('mlp-norm');
  // ---- attention
  const go = R !== C ? t.a(C * h) : 0;
  const attnOut = site('attn-out');
  const gattn = attnOut[0] ? linearBack(attnOut[0]) : t.a(C * h);
  t.f(go);
  release('attn-out');
  const dims = site('attn-norm').map((l) => l.out);
  const qDim = m.family === 'gpt' ? (m.heads * m.headDim) / x.tp : dims[0]!;
  const kDim = m.family === 'gpt' ? (m.kvHeads * m.headDim) / x.tp : dims[1]!;
  const accum = t.a(4 * qDim);
  const gq = t.a(C * qDim);
  const gk = t.a(C * kDim);
  const gv = t.a(C * kDim);
  t.f(accum, gattn);
  release('attn');
  const gins: H[] = [];
  if (m.family === 'gpt') {
    const gqkv = t.a(C * (qDim + 2 * kDim));
    t.f(gq, gk, gv);
    gins.push(linearBack(site('attn-norm')[0]!));
    t.f(gqkv);
  } else {
    const gq0 = ropeBack(t, x, gq, qDim);
    const gk0 = ropeBack(t, x, gk, kDim);
    const inputs = [gq0, gk0, gv];
    for (const [i, l] of site('attn-norm').entries()) {
      gins.push(linearBack(l));
      t.f(inputs[i] ?? 0);
    }
  }
  release('attn-in');
  t.f(...gins.slice(1));
  t.f(normBack(t, x, gins[0]!));
  release('attn-norm');
  for (const e of block.kept) t.f(e.h);
  block.kept = [];
}

/** RoPE's backward pass (frees the gradient it is given): the gradient times cos and the rotated gradient times sin. */
function ropeBack(t: Tape, x: BlockContext, g: H, dim: number): H {
  const a = t.a(x.C * dim);
  const b = t.a(x.C * dim);
  const out = t.a(x.C * dim);
  t.f(a, b, g);
  return out;
}

/** A norm's backward pass from the gradient of its output (frees it): fp32 temporaries, the input's gradient. */
function normBack(t: Tape, x: BlockContext, g: H): H {
  const h = x.m.hidden;
  const g32 = x.R !== 4 ? t.a(4 * h) : 0;
  t.f(g);
  const tmp = t.a(4 * h);
  t.f(tmp);
  const gh = t.a(4 * h);
  const pow = t.a(4 * h);
  t.f(pow, g32);
  if (x.R === 4) return gh;
  const out = t.a(x.R * h);
  t.f(gh);
  return out;
}
