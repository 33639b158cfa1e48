/**
 * `--torchtitan <date|release>`: which torchtitan commit a run trains with, and the row of its commit table: how that
 * commit's parallelize applies FSDP2 (torchtitan/models/llama3/infra/parallelize.py `apply_fsdp`, the same in its
 * other models' parallelize.py). torchtitan's model code is planned as the Hugging Face layout of the same shapes;
 * what changes between commits is a row here, read by strategies/fsdp2.ts as its unit layout.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { Fsdp2Units } from '../options.js';

export interface TorchtitanCommit {
  /** The commit's date (YYYY-MM-DD, its committer date on main): the row holds from it until the next row's. */
  from: string;
  /** The commit that made the change. */
  commit: string;
  /** How apply_fsdp groups the parameters into fully_shard units (options.ts Fsdp2Units). */
  fsdpUnits: Fsdp2Units;
  /** What the commit's apply_fsdp does, as the plan's note says it. */
  says: string;
}

/** torchtitan's commits that changed the FSDP2 unit layout, oldest first. */
export const TORCHTITAN_COMMITS: readonly TorchtitanCommit[] = [
  // apply_fsdp at 9dec370 (torchtitan/parallelisms/parallelize_llama.py) and up to 83e6941's parent
  // (torchtitan/models/llama3/infra/parallelize.py): fully_shard(transformer_block, reshard_after_forward=
  // int(layer_id) < len(model.layers) - 1) for each block, then fully_shard(model, reshard_after_forward=not
  // pp_enabled): tok_embeddings, norm and output are the root's parameters, which FSDP2 never reshards after the
  // forward pass (torch/distributed/fsdp/_fully_shard/_fsdp_state.py FSDPState._lazy_init: post_forward_mesh_info =
  // None for the root's group)
  {
    from: '2024-12-26',
    commit: '9dec370',
    fsdpUnits: 'root-ends',
    says: 'torchtitan before 83e6941: the embeddings, the final norm and the output layer in the root unit; the last block kept gathered after its forward pass',
  },
  // 83e6941 (2025-07-28, "Improve reshard_after_forward logic", pytorch/torchtitan#1094): apply_fsdp shards
  // model.tok_embeddings on its own (reshard_after_forward = not pp_enabled under the default policy), every block
  // with the same reshard_after_forward (the last one too), then fully_shard([model.norm, model.output],
  // reshard_after_forward=reshard_after_forward_policy == "always"): False by default, "since FSDP would prefetch
  // them immediately after the forward pass"; the root fully_shard(model) is left with no parameters of its own.
  // Unchanged at 2c8b594 and 6fc499f (the torchao benchmarks' commits) and at v0.2.0 to v0.2.2. The MoE models'
  // apply_fsdp (torchtitan/experiments/llama4/infra/parallelize.py) took the same layout at 7354848 (2025-08-13):
  // an MoE run between the two dates is planned with the dense models' layout.
  {
    from: '2025-07-28',
    commit: '83e6941',
    fsdpUnits: 'ends-apart',
    says: 'torchtitan from 83e6941: the embeddings their own unit (resharded after the forward pass), [final norm, output layer] one unit kept from its forward to its backward pass, every block resharded; the root unit holds nothing (a tied output layer: the embeddings, norm and output one kept unit)',
  },
];

/** What the plan says of a unit layout: the first commit row that uses it. */
export function torchtitanUnitsNote(units: Fsdp2Units): string | undefined {
  return TORCHTITAN_COMMITS.find((r) => r.fsdpUnits === units)?.says;
}

/** torchtitan's releases, by the date of the commit each tags. */
const RELEASES: Readonly<Record<string, string>> = { '0.1.0': '2025-06-17', '0.2.0': '2025-10-17', '0.2.1': '2025-12-26', '0.2.2': '2026-02-20' };

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The row that torchtitan at `v` follows: `v` a commit's date (YYYY-MM-DD) or a release (0.2.0, v0.2.0).
 * @throws InvalidArgumentError for anything else, or a date before the oldest row.
 */
export function torchtitanCommit(v: string): TorchtitanCommit {
  const text = v.trim().replace(/^v/, '');
  const date = DATE.test(text) ? text : RELEASES[text];
  if (!date) throw new InvalidArgumentError(`--torchtitan takes a commit's date (YYYY-MM-DD) or a release (${Object.keys(RELEASES).join(', ')}), got "${v}"`);
  const first = TORCHTITAN_COMMITS[0] as TorchtitanCommit;
  if (date < first.from) throw new InvalidArgumentError(`--torchtitan ${v}: gpumem follows torchtitan from ${first.from}`);
  let row = first;
  for (const r of TORCHTITAN_COMMITS) if (date >= r.from) row = r;
  return row;
}
