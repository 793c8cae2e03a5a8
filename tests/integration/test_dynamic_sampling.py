"""
DAPO's dynamic sampling in the real `GRPOTrainer`, as the benchmark runs it (`benchmarks/realcpu/dynamic_sampling.py`):
the optimizer trains on `B` mixed groups a step, every completion generated is counted, and with `KGPSCallback()`
the selector learns from every group generated, the dropped ones too.
"""

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback


sys.path.insert(0, str(Path(__file__).parents[2]))

from benchmarks.realcpu import dynamic_sampling, runner, setting  # noqa: E402
from benchmarks.realcpu.dynamic_sampling import DynamicSamplingTrainer, concatenate_groups  # noqa: E402


def _output(prompt_ids, completion_ids, advantages):
    prompt_ids, completion_ids = torch.tensor(prompt_ids), torch.tensor(completion_ids)
    return dict(
        prompt_ids=prompt_ids,
        prompt_mask=(prompt_ids != 0).long(),
        completion_ids=completion_ids,
        completion_mask=(completion_ids != 0).long(),
        advantages=torch.tensor(advantages),
        num_items_in_batch=torch.tensor(99),
    )


def test_groups_are_joined_prompts_padded_left_completions_right_and_their_tokens_counted():
    G = 2
    a = _output([[0, 5, 6], [0, 5, 6], [7, 8, 9], [7, 8, 9]], [[1, 2], [1, 0], [3, 0], [3, 0]], [0.5, -0.5, 0.0, 0.0])
    b = _output([[4, 4], [4, 4]], [[2, 2, 2], [2, 0, 0]], [1.0, -1.0])
    joined = concatenate_groups([(a, 0), (b, 0)], G, pad_token_id=0)  # a's first group, then b's
    torch.testing.assert_close(joined["prompt_ids"], torch.tensor([[0, 5, 6], [0, 5, 6], [0, 4, 4], [0, 4, 4]]))
    torch.testing.assert_close(joined["prompt_mask"], torch.tensor([[0, 1, 1], [0, 1, 1], [0, 1, 1], [0, 1, 1]]))
    torch.testing.assert_close(joined["completion_ids"], torch.tensor([[1, 2, 0], [1, 0, 0], [2, 2, 2], [2, 0, 0]]))
    torch.testing.assert_close(joined["advantages"], torch.tensor([0.5, -0.5, 1.0, -1.0]))
    assert int(joined["num_items_in_batch"]) == 2 + 1 + 3 + 1  # the completion tokens kept, not a's 99
    with pytest.raises(KeyError, match="pixel_values"):
        concatenate_groups([({**a, "pixel_values": torch.zeros(4)}, 0)], G, 0)


class _CountObservations(TrainerCallback):
    """Counts the rollouts the selector is fed, from the moment training starts (the selector exists then)."""

    def __init__(self, kgps):
        self.kgps, self.trials = kgps, 0

    def on_train_begin(self, args, state, control, **kwargs):
        update = self.kgps.selector.update

        def counted(indices, successes, trials):
            self.trials += int(sum(trials))
            return update(indices, successes, trials)

        self.kgps.selector.update = counted


@pytest.mark.parametrize("method", ["uniform_ds", "one_line_ds"])
def test_each_step_trains_on_b_mixed_groups_and_every_rollout_generated_is_counted(method, monkeypatch):
    regime = dataclasses.replace(setting.REGIMES["base"], steps=6, snapshot_every=3)
    trained, trainers = [], []
    generate = DynamicSamplingTrainer._generate_and_score_completions

    def spy(self, inputs):
        output = generate(self, inputs)
        if self.model.training:
            trained.append(output)
            trainers.append(self)
        return output

    monkeypatch.setattr(DynamicSamplingTrainer, "_generate_and_score_completions", spy)
    counters = []

    def count(_, kgps):
        counters.append(_CountObservations(kgps))
        return counters[-1]

    outcome = runner.run(setting.build(regime), method, seed=0, observers=[count])
    trainer = trainers[-1]
    B, G = regime.prompts_per_step, regime.num_generations
    assert len(trained) == regime.steps
    for output in trained:  # B groups, none of them of equal rewards (equal advantages)
        advantages = output["advantages"].reshape(B, G)
        assert (advantages.amax(dim=1) > advantages.amin(dim=1)).all()
        assert int(output["num_items_in_batch"]) == int(output["completion_mask"].sum())
    assert trainer.groups_generated > regime.steps * B  # this policy's groups are often unanimous: some were dropped
    assert trainer.rollouts_beyond == G * (trainer.groups_generated - regime.steps * B)
    assert outcome["records"][-1]["rollouts"] == regime.steps * B * G + trainer.rollouts_beyond
    assert outcome["dropped_share"] == pytest.approx(trainer.groups_dropped / trainer.groups_generated)
    # the selector is fed every rollout generated: the sampler's batches and the further ones, dropped or kept
    assert counters[0].trials == G * trainer.groups_generated


def test_at_the_cap_a_step_trains_on_the_mixed_groups_it_has(monkeypatch):
    regime = dataclasses.replace(setting.REGIMES["base"], steps=4, snapshot_every=4)
    monkeypatch.setattr(dynamic_sampling, "MAX_BATCHES", 1)
    rows = []
    generate = DynamicSamplingTrainer._generate_and_score_completions

    def spy(self, inputs):
        output = generate(self, inputs)
        if self.model.training:
            rows.append((output["advantages"].numel(), self.groups_dropped))
        return output

    monkeypatch.setattr(DynamicSamplingTrainer, "_generate_and_score_completions", spy)
    outcome = runner.run(setting.build(regime), "uniform_ds", seed=0)
    B, G = regime.prompts_per_step, regime.num_generations
    assert outcome["records"][-1]["rollouts"] == regime.steps * B * G  # one batch a step: nothing beyond
    assert rows[-1][1] > 0  # groups were dropped
    dropped_before, short = 0, 0
    for trained, dropped in rows:
        kept = B - (dropped - dropped_before)
        assert trained == G * (kept or B)  # the kept groups, or the whole batch when none is mixed
        short += kept < B
        dropped_before = dropped
    assert outcome["capped_steps"] == short > 0  # every step short of B mixed groups, and only those


def test_rounds_of_3b_prompts_generate_whole_rounds_and_train_on_b_mixed_groups(monkeypatch):
    regime = dataclasses.replace(setting.REGIMES["base"], steps=4, snapshot_every=4)
    rounds = []
    generate = DynamicSamplingTrainer._generate_and_score_completions

    def spy(self, inputs):
        before = self.groups_generated
        output = generate(self, inputs)
        if self.model.training:
            rounds.append((self.groups_generated - before, output["advantages"].numel()))
        return output

    monkeypatch.setattr(DynamicSamplingTrainer, "_generate_and_score_completions", spy)
    outcome = runner.run(setting.build(regime), "uniform_ds3", seed=0)
    B, G = regime.prompts_per_step, regime.num_generations
    assert len(rounds) == regime.steps and outcome["capped_steps"] == 0
    for generated, trained in rounds:  # whole rounds of 3B prompts, the first holding the data loader's B
        assert generated % (3 * B) == 0 and generated >= 3 * B
        assert trained == B * G
