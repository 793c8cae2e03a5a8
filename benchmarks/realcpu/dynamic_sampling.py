r"""
DAPO's dynamic sampling in the real `GRPOTrainer`, as the field runs it (verl's and OpenRLHF's `filter_groups`): a
step generates and scores rounds of `rounds_of * B` prompts (the first holds the data loader's `B`), drops every group
whose rewards are all equal, and stops after the first round that leaves `B` mixed groups kept, or after `max_batches`
rounds. The optimizer then trains on exactly the `B` first groups kept. Every completion generated counts as a
rollout, the dropped ones included. `rounds_of=1` generates `B` prompts a round; DAPO's recipe generates `3B`
(`gen_batch_size` 1536 for a train batch of 512).

- **Where the further prompts come from**: the same selector the `KGPSCallback` of the run holds, excluding the
  prompts already generated this step and those pending. With the uniform selector that is DAPO (a uniform stream);
  with `KGPSCallback()`'s own selector it is KGPS choosing the prompts the filter screens, and the selector learns from
  every group generated, the dropped ones too.
- **The cap**: `max_batches` rounds (10 by default: verl's DAPO recipe, `max_num_gen_batches=10`, where verl raises
  an error). Here a capped step trains on the mixed groups it has; if it has none, on the last batch generated, whose
  advantages are all zero: no gradient, but an optimizer step all the same, so that every method runs the regime's
  steps. `capped_steps` counts them.
- The first batch is the data loader's, which `KGPSCallback` awaits and observes itself; the further batches are not
  the sampler's, so their rewards go to the selector here (`selector.update`), past the callback's ledger. It is
  benchmark code: the library's path is the callback, and `KGPSCallback(drop_zero_advantage=True)` is the same filter
  in TRL's `AsyncGRPOTrainer`.

Single-process only (the benchmark's runs), with one generation batch a step (`steps_per_generation=1`).
"""

import contextlib

import numpy as np
import torch
from trl import GRPOTrainer


# verl's DAPO recipe: at most 10 generation batches a step.
MAX_BATCHES = 10


class DynamicSamplingTrainer(GRPOTrainer):
    """
    `GRPOTrainer` with DAPO's dynamic sampling (see the module docstring). `kgps` is the run's `KGPSCallback`: its
    selector draws the further prompts and learns from their groups. `max_batches`: the cap in rounds, `MAX_BATCHES`
    unset. `rounds_of`: a round's prompts in batches of `B`.

    Attributes:
        rollouts_beyond (`int`): completions generated beyond the data loader's batches (the further batches).
        groups_generated, groups_dropped (`int`): every group generated, and those of equal rewards.
        capped_steps (`int`): steps that reached the cap with fewer than `B` mixed groups.
    """

    def __init__(self, *args, kgps, max_batches: int | None = None, rounds_of: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args.steps_per_generation != 1 or self.accelerator.num_processes != 1:
            raise ValueError("DynamicSamplingTrainer runs one process, one generation batch a step.")
        if rounds_of < 1:
            raise ValueError(f"rounds_of={rounds_of}: a round holds at least the data loader's batch (1).")
        self.kgps, self.max_batches, self.rounds_of = kgps, max_batches or MAX_BATCHES, rounds_of
        self.rollouts_beyond = self.groups_generated = self.groups_dropped = self.capped_steps = 0
        self._rewards = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._rewards

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        G = self.num_generations
        B = len(inputs) // G
        dataset = self.kgps.adapter.dataset
        selector = self.kgps.selector
        generated = [int(row["kgps_index"]) for row in inputs[::G]]
        kept, batches = [], 0
        while True:
            if batches:
                exclude = np.concatenate([generated, *(p.indices for p in self.kgps.ledger.pending)])
                indices = np.asarray(selector.select(B, exclude=np.unique(exclude)), np.int64)
                generated += indices.tolist()
                inputs = [dict(dataset[int(i)]) for i in indices for _ in range(G)]
                with self._unobserved():
                    output = super()._generate_and_score_completions(inputs)
                s, k = self.kgps.adapter.engine.outcomes(self._rewards.detach().float().cpu().numpy(), G)
                selector.update(indices, s, k)
                self.rollouts_beyond += len(inputs)
            else:
                output = super()._generate_and_score_completions(inputs)
            batches += 1
            rewards = self._rewards.detach().float().nan_to_num(0.0).sum(dim=1).reshape(B, G)
            mixed = (rewards.amax(dim=1) > rewards.amin(dim=1)).cpu().numpy()
            self.groups_generated += B
            self.groups_dropped += int(B - mixed.sum())
            kept += [(output, group) for group in np.flatnonzero(mixed)]
            if batches % self.rounds_of == 0 and (len(kept) >= B or batches >= self.max_batches * self.rounds_of):
                break
        self.capped_steps += len(kept) < B
        metrics = self._metrics["train"]
        metrics["ds/batches_generated"].append(float(batches))
        metrics["ds/dropped_share"].append(self.groups_dropped / self.groups_generated)
        if not kept:  # at the cap with no mixed group: the last batch, all zero advantage
            return output
        return concatenate_groups(kept[:B], G, self.processing_class.pad_token_id)

    @contextlib.contextmanager
    def _unobserved(self):
        """Generates past `KGPSCallback`'s reward wrapper (on the instance), which awaits only the sampler's batches."""
        wrapped = self.__dict__.pop("_calculate_rewards", None)
        try:
            yield
        finally:
            if wrapped is not None:
                self._calculate_rewards = wrapped


# The tensors of `GRPOTrainer._generate_and_score_completions`'s output, by how their rows are padded.
LEFT_PADDED = ("prompt_ids", "prompt_mask")
RIGHT_PADDED = ("completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps")
PER_ROW = ("advantages",)


def concatenate_groups(groups: list[tuple[dict, int]], G: int, pad_token_id: int) -> dict:
    """
    One generation batch of the groups `groups` (each `(output, g)`: group `g`, rows `g*G` to `(g+1)*G`, of a
    `_generate_and_score_completions` output), in that order: prompts left-padded and completions right-padded to the
    longest (with `pad_token_id`, masks and log-probabilities with 0), `num_items_in_batch` the completion tokens kept.
    Raises `KeyError` for an output key it does not know how to join.
    """
    keys = set(groups[0][0])
    unknown = keys - {*LEFT_PADDED, *RIGHT_PADDED, *PER_ROW, "num_items_in_batch"}
    if unknown:
        raise KeyError(f"concatenate_groups does not know how to join {sorted(unknown)}.")
    joined = {}
    for key in keys - {"num_items_in_batch"}:
        parts = [output[key][g * G : (g + 1) * G] for output, g in groups]
        if key in PER_ROW:
            joined[key] = torch.cat(parts)
            continue
        width = max(part.shape[1] for part in parts)
        fill = pad_token_id if key.endswith("_ids") else 0
        padded = []
        for part in parts:
            pad = torch.full((part.shape[0], width - part.shape[1]), fill, dtype=part.dtype, device=part.device)
            padded.append(torch.cat([pad, part] if key in LEFT_PADDED else [part, pad], dim=1))
        joined[key] = torch.cat(padded)
    joined["num_items_in_batch"] = joined["completion_mask"].sum()
    return joined
