"""A phase change in the real GRPOTrainer: a long run of unanimous groups, then unseen prompts that all go the other way."""

import numpy as np
import pytest
from harness import build_model, prompt_dataset, trainer_args

from trl_kgps import KGPSCallback


trl = pytest.importorskip("trl")

PROMPTS_PER_STEP, COMPLETIONS = 8, 64  # 512 failures a step: the shared part is soon very sure of failure
SWITCH = 20  # the step whose batch, the first to go the other way, holds prompts not yet seen


class PhaseReward:
    """Every completion gets `before` until optimizer step `SWITCH`, `after` from then on."""

    __name__ = "phase_reward"

    def __init__(self, before, after):
        self.before, self.after = before, after

    def __call__(self, prompts, completions, trainer_state, **kwargs):
        return [self.before if trainer_state.global_step < SWITCH else self.after] * len(completions)


@pytest.mark.parametrize("before, after", [(0.0, 1.0), (1.0, 0.0)], ids=["failures_then_successes", "the_reverse"])
def test_a_phase_change_keeps_every_number_of_the_selector_finite(tmp_path, tokenizer, before, after):
    # The one line, on a dataset whose `level` column it shares by: KGPS's default shared filter with its residual
    # prior learnt online. Unanimous groups give GRPO no gradient, so the policy stays put (Q = 0) and 20 steps of
    # 8 x 64 failures make the shared part certain enough that the first successes of unseen prompts have a
    # normalized innovation squared above 2e4. Before, exp(0.05 (NIS - 1)) overflowed: OverflowError at step 21.
    rows = prompt_dataset(256).add_column("level", [f"L{i % 2}" for i in range(256)])
    kgps = KGPSCallback()
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=PhaseReward(before, after),
        args=trainer_args(
            tmp_path,
            max_steps=SWITCH + 3,
            per_device_train_batch_size=PROMPTS_PER_STEP * COMPLETIONS,
            num_generations=COMPLETIONS,
            max_completion_length=2,
            logging_steps=SWITCH + 3,
        ),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    trainer.train()

    selector = kgps.selector
    assert selector.shared.design.names == ["level=L0", "level=L1"]
    assert selector.residual_prior == 100.0 * selector.config.initial_variance  # the surprise widened it to its bound
    state = selector.state_dict()
    numbers = {
        "mean": selector.mean,
        "variance": selector.variance,
        "predicted_success": selector.predicted_success(),
        "scores": selector.scores(),
        **{
            key: state[key]
            for key in ("variance_base", "variance_offset", "shared_mu", "shared_Sigma", "unseen_extra")
        },
    }
    float32 = np.finfo(np.float32).max
    for name, value in numbers.items():
        value = np.asarray(value, dtype=np.float64)
        assert np.isfinite(value).all() and (np.abs(value) <= float32).all(), name
