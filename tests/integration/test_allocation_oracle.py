"""
The allocation oracle (the method `oracle_sizes`, `benchmarks/realcpu/allocation.py`: what sizing each prompt's
rollouts is worth when every `p` is known, not a ceiling on it) in the real `GRPOTrainer`: each prompt's rollouts are
one group of its size, trained with one baseline, and a step keeps the regime's `B x G` rollouts.
"""

import dataclasses
import sys
from collections import Counter
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).parents[2]))

from benchmarks.realcpu import allocation, runner, setting  # noqa: E402
from benchmarks.realcpu.allocation import AllocationTrainer  # noqa: E402


def test_each_prompt_trains_as_one_group_of_its_size_within_the_steps_rollouts(monkeypatch):
    regime = dataclasses.replace(setting.REGIMES["groups_of_4"], steps=4, snapshot_every=4)
    steps = []
    generate = AllocationTrainer._generate_and_score_completions

    def spy(self, inputs):
        output = generate(self, inputs)
        if self.model.training:
            rewards = self._rewards.sum(dim=1)
            steps.append(([int(row["kgps_index"]) for row in inputs], rewards, output["advantages"]))
        return output

    monkeypatch.setattr(AllocationTrainer, "_generate_and_score_completions", spy)
    outcome = runner.run(setting.build(regime), "oracle_sizes", seed=0)
    assert len(steps) == regime.steps
    assert outcome["records"][-1]["rollouts"] == regime.steps * regime.rollouts_per_step
    for ids, rewards, advantages in steps:
        assert len(ids) == regime.rollouts_per_step
        assert set(Counter(ids).values()) <= set(allocation.SIZES)
        assert len(set(ids)) <= regime.prompts_per_step  # the oracle's prompts, none added
        for prompt in set(ids):  # one baseline and one scale over the prompt's rows, however many
            rows = torch.tensor([i == prompt for i in ids])
            r = rewards[rows]
            expected = (r - r.mean()) / (r.std() + 1e-4)
            torch.testing.assert_close(advantages[rows], expected)
    # somewhere a prompt got other than the regime's G: the allocation is not the oracle's groups
    assert any(set(Counter(ids).values()) != {regime.num_generations} for ids, _, _ in steps)
