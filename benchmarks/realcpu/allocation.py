r"""
An allocation oracle: what deciding how many rollouts each chosen prompt gets is worth, on top of choosing the
prompts, when both know every prompt's true success rate `p`.

The oracle chooses a step's `B` prompts as `oracle` does; the step keeps its `B x G` rollouts, and each chosen prompt
gets one group of `n` in `(0, *SIZES)`, trained with one baseline over its `n` completions, as GRPO trains a group of
`n`. The sizes are chosen greedily by marginal value: the value of `n` rollouts of a prompt is the chance that they hold
both outcomes, \(u_n = 1 - p^n - (1 - p)^n\) (the oracle's own weight: the chance the prompt gives any gradient), and
the budget goes to the move that adds most value per rollout: a chosen prompt's first pair, or its group doubled.
\(u_n\) is concave in `n`, so a prompt's next doubling never adds more per rollout than its last, and the greedy fill
is the best split (the tests check it against every split of small batches). A prompt near `p = 1/2` needs few
rollouts (a pair is mixed half the time, four seven times in eight), one near `p = 0.1` many (16 are mixed 81 % of
the time), one at 0 or 1 none. Keeping `G` for each chosen prompt is one of the splits, so its value per step is
never below the oracle's. It is not a ceiling: in the suite it kept that split on 69-95 % of steps.

In the trainer a group of `n` is `n / UNIT` adjacent groups of `UNIT` (`num_generations=UNIT`, each chosen prompt
repeated), and `AllocationTrainer` recomputes the advantages over each prompt's rows together (`pooled_advantages`).
"""

import numpy as np
import torch
from trl import GRPOTrainer


# The group sizes a prompt can get, and the trainer's group: every size is a multiple of it.
SIZES = (2, 4, 8, 16)
UNIT = 2


def mixed_chance(p: np.ndarray, n) -> np.ndarray:
    """The chance that `n` rollouts of a prompt of success `p` hold both outcomes, `1 - p^n - (1 - p)^n` (0 for n = 0)."""
    n = np.asarray(n)
    return np.where(n > 0, 1 - p**n - (1 - p) ** n, 0.0)


def group_sizes(p: np.ndarray, rollouts: int, rng: np.random.Generator) -> np.ndarray:
    """
    Each prompt's group size, shape `(B,)` int64 in `{0, *SIZES}`, summing to `rollouts` (a multiple of `UNIT`): the
    greedy fill of the module docstring over prompts of true success `p` (shape `(B,)`), ties broken at random.
    """
    if rollouts % UNIT:
        raise ValueError(f"rollouts={rollouts}: a multiple of the unit group, {UNIT}.")
    ladder = np.array([0, *SIZES])
    rung = np.zeros(p.size, np.int64)  # each prompt's size as an index into `ladder`
    order = rng.permutation(p.size)  # ties go to the prompt first in a random order
    left = rollouts
    while left > 0:
        n, bigger = ladder[rung], ladder[np.minimum(rung + 1, len(SIZES))]
        cost = bigger - n
        gain = (mixed_chance(p, bigger) - mixed_chance(p, n)) / np.maximum(cost, 1)
        gain = np.where((cost > 0) & (cost <= left), gain, -np.inf)[order]
        if gain.max() == -np.inf:
            raise ValueError(f"{rollouts} rollouts do not fit {p.size} prompts of at most {SIZES[-1]} each.")
        best = int(order[np.argmax(gain)])
        rung[best] += 1
        left -= cost[best]
    return ladder[rung]


def unit_groups(prompts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The batch the sampler draws: each of `prompts` once per `UNIT` of its size in `sizes` (both `(B,)`), adjacent."""
    return np.repeat(np.asarray(prompts, np.int64), np.asarray(sizes) // UNIT)


def pooled_advantages(rewards: torch.Tensor, prompt_ids: torch.Tensor) -> torch.Tensor:
    """
    GRPO's advantages with rewards scaled within each group (`scale_rewards="group"`), one group per distinct prompt
    id however many rows it has: `(r - mean) / (std + 1e-4)` over the prompt's rows, `std` with Bessel's correction,
    as `GRPOTrainer` computes over groups of equal size. `rewards`, `prompt_ids`: shape `(N,)`; returns shape `(N,)`.
    """
    _, group = torch.unique(prompt_ids, return_inverse=True)
    count = torch.zeros(int(group.max()) + 1, dtype=rewards.dtype).index_add_(0, group, torch.ones_like(rewards))
    mean = torch.zeros_like(count).index_add_(0, group, rewards) / count
    squares = torch.zeros_like(count).index_add_(0, group, (rewards - mean[group]) ** 2)
    std = torch.sqrt(squares / (count - 1).clamp(min=1))
    return (rewards - mean[group]) / (std[group] + 1e-4)


class AllocationTrainer(GRPOTrainer):
    """
    `GRPOTrainer` whose groups are each prompt's rows however many there are: the rows of one prompt (its `kgps_index`)
    share one baseline and one scale (`pooled_advantages`). Single process, one reward function, rewards summed.
    """

    # The share of a step's prompts whose rows hold both outcomes, which the benchmark reports as `informative`.
    informative_metric = "allocation/informative"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.accelerator.num_processes != 1 or self.scale_rewards != "group":
            raise ValueError("AllocationTrainer runs one process with scale_rewards='group'.")
        self._rewards = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        rewards = self._rewards.detach().float().nan_to_num(0.0).sum(dim=1).cpu()
        prompt_ids = torch.tensor([int(row["kgps_index"]) for row in inputs])
        output["advantages"] = pooled_advantages(rewards, prompt_ids).to(output["advantages"])
        mixed = [(r := rewards[prompt_ids == i]).max() > r.min() for i in prompt_ids.unique()]
        self._metrics["train"]["allocation/prompts"].append(float(len(mixed)))
        self._metrics["train"]["allocation/informative"].append(float(np.mean(mixed)))
        return output
