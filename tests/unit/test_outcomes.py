"""Rewards to binomial outcomes, and the estimation metrics."""

import logging

import numpy as np
import pytest
from scipy import stats

from trl_kgps.engine.metrics import spearman
from trl_kgps.engine.outcomes import SuccessRule


NAN = np.nan


def test_single_reward_threshold_and_missing_rewards():
    rule = SuccessRule(["accuracy"], [1.0], None, 0.5)
    success, counted = rule(np.array([[1.0], [0.0], [NAN], [1.0]]))
    np.testing.assert_array_equal(success, [True, False, False, True])
    np.testing.assert_array_equal(counted, [True, True, False, True])


def test_weighted_sum_counts_a_completion_unless_every_reward_is_missing(caplog):
    with caplog.at_level(logging.WARNING):
        rule = SuccessRule(["accuracy", "format"], [1.0, 0.5], None, 1.0)
    assert "success_reward" in caplog.text
    rewards = np.array([[1.0, 0.0], [0.0, 1.0], [NAN, 1.0], [NAN, NAN], [1.0, NAN]])
    success, counted = rule(rewards)
    # totals: 1.0, 0.5, 0.5 (accuracy missing), none, 1.0
    np.testing.assert_array_equal(success, [True, False, False, False, True])
    np.testing.assert_array_equal(counted, [True, True, True, False, True])


def test_named_reward_decides_and_its_missing_values_do_not_count():
    rule = SuccessRule(["format", "accuracy"], [1.0, 1.0], "accuracy", 0.5)
    success, counted = rule(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, NAN]]))
    np.testing.assert_array_equal(success, [False, True, False])
    np.testing.assert_array_equal(counted, [True, True, False])


def test_unknown_reward_name_is_refused():
    with pytest.raises(ValueError, match="'correctness' is not one of the trainer's reward functions"):
        SuccessRule(["accuracy"], [1.0], "correctness", 0.5)


def test_non_binary_rewards_warn_once_with_the_fix(caplog):
    rule = SuccessRule(["score"], [1.0], None, 0.5)
    with caplog.at_level(logging.WARNING):
        rule(np.array([[0.3], [0.9]]))
        rule(np.array([[0.7]]))
    assert caplog.text.count("not all 0 or 1") == 1
    assert "success_reward" in caplog.text


def test_rewards_above_1_warn_that_a_partial_credit_of_1_succeeds(caplog):
    rule = SuccessRule(["score"], [1.0], None, 0.5)  # a 0-10 scale whose partial credit is 1
    with caplog.at_level(logging.WARNING):
        success, _ = rule(np.array([[0.0], [1.0]]))  # indistinguishable from 0/1 rewards: no warning yet
        assert not caplog.text
        success, _ = rule(np.array([[0.0], [1.0], [10.0]]))
    assert success.tolist() == [False, True, True]
    assert caplog.text.count("KGPS reads rewards up to 10 and counts a completion as a success when score >= 0.5") == 1
    assert "set success_threshold to the least reward a correct answer gets (e.g. 10)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        SuccessRule(["score"], [1.0], None, 10.0)(np.array([[0.0], [1.0], [10.0]]))  # the fix: no warning about it
    assert "partial credit" not in caplog.text


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, 40).astype(float)
    b = a + rng.integers(0, 3, 40)
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)


def test_spearman_is_nan_for_a_constant_side():
    assert np.isnan(spearman(np.ones(5), np.arange(5.0)))


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_an_infinite_reward_is_named_as_a_fault_of_its_reward_function(bad):
    rule = SuccessRule(["format", "accuracy"], [1.0, 1.0], "accuracy", 1.0)
    rewards = np.array([[0.0, 1.0], [bad, 0.0]])
    with pytest.raises(ValueError, match=rf"reward function 'format' returned {bad} for completion 1 .*finite"):
        rule(rewards)


def test_a_threshold_no_reward_reaches_warns_once_after_a_few_batches(caplog):
    from trl_kgps.engine.outcomes import BATCHES_BEFORE_NO_SUCCESS_WARNING

    rule = SuccessRule(["accuracy"], [1.0], None, 50.0)  # 0/1 rewards, a threshold none reaches
    with caplog.at_level(logging.WARNING):
        for batch in range(BATCHES_BEFORE_NO_SUCCESS_WARNING + 3):
            assert not caplog.text or batch >= BATCHES_BEFORE_NO_SUCCESS_WARNING
            success, _ = rule(np.array([[0.0], [1.0], [NAN]]))
            assert not success.any()
    assert caplog.text.count("reached accuracy >= 50 (the largest reward was 1)") == 1
    assert "set success_threshold" in caplog.text


def test_a_threshold_reached_once_is_never_warned_about(caplog):
    from trl_kgps.engine.outcomes import BATCHES_BEFORE_NO_SUCCESS_WARNING

    rule = SuccessRule(["accuracy"], [1.0], None, 1.0)
    with caplog.at_level(logging.WARNING):
        rule(np.array([[1.0], [0.0]]))
        for _ in range(2 * BATCHES_BEFORE_NO_SUCCESS_WARNING):
            rule(np.array([[0.0], [0.0]]))  # a hard stretch after a success: no warning
            rule(np.array([[NAN], [NAN]]))  # no usable reward: not a batch without success either
    assert not caplog.text


def test_rewards_that_all_sit_on_the_threshold_warn_once_that_every_completion_succeeds(caplog):
    from trl_kgps.engine.outcomes import BATCHES_BEFORE_ON_THRESHOLD_WARNING

    rule = SuccessRule(["constant"], [1.0], None, 0.5)  # a reward of 0.5 on every completion, the default threshold
    with caplog.at_level(logging.WARNING):
        for batch in range(BATCHES_BEFORE_ON_THRESHOLD_WARNING + 3):
            assert not caplog.text or batch >= BATCHES_BEFORE_ON_THRESHOLD_WARNING
            success, _ = rule(np.array([[0.5], [0.5], [NAN]]))
            assert success[:2].all()
    assert caplog.text.count("equals success_threshold, 0.5, exactly, so every completion counts as a success") == 1
    assert "set success_threshold above it" in caplog.text
    assert "not all 0 or 1" not in caplog.text  # one cause, one warning
    # The trainer's rewards are float32: 0.3 there is 0.3 + 1.2e-8, a success at a threshold of 0.3, and on it.
    caplog.clear()
    rule = SuccessRule(["constant"], [1.0], None, 0.3)
    with caplog.at_level(logging.WARNING):
        for _ in range(BATCHES_BEFORE_ON_THRESHOLD_WARNING):
            assert rule(np.full((2, 1), 0.3, dtype=np.float32))[0].all()
    assert "equals success_threshold, 0.3, exactly" in caplog.text


def test_rewards_off_the_threshold_once_are_never_warned_about_as_on_it(caplog):
    from trl_kgps.engine.outcomes import BATCHES_BEFORE_ON_THRESHOLD_WARNING

    rule = SuccessRule(["accuracy"], [1.0], None, 1.0)
    with caplog.at_level(logging.WARNING):
        rule(np.array([[1.0], [0.0]]))
        for _ in range(2 * BATCHES_BEFORE_ON_THRESHOLD_WARNING):
            rule(np.array([[1.0], [1.0]]))  # an easy stretch after a failure: every completion solved, no warning
    assert not caplog.text


@pytest.mark.parametrize(
    "success_reward, named, not_named",
    [
        ("accuracy", "the reward function 'accuracy' (success_reward) returned None or NaN", "'format'"),
        (None, "the reward functions 'accuracy', 'format' returned None or NaN", "(success_reward)"),
    ],
)
def test_a_batch_without_rewards_warns_naming_the_functions_that_returned_none(success_reward, named, not_named):
    from trl_kgps import KGPSConfig, KGPSSelector
    from trl_kgps.engine.engine import SelectionEngine

    engine = SelectionEngine(KGPSSelector(8, KGPSConfig(), seed=0), batch_size=2)
    engine.rule = SuccessRule(["accuracy", "format"], [1.0, 1.0], success_reward, 0.5)
    batch = engine.choose()
    rewards = np.full((2 * 4, 2), np.nan)  # 2 prompts x 4 completions, (accuracy, format)
    if success_reward is not None:
        rewards[:, 1] = 1.0  # the format reward scored every completion; accuracy, which decides, none
    with pytest.warns(UserWarning, match="KGPS observed no reward for generation batch 1") as caught:
        engine.observe(batch, *engine.outcomes(rewards, 4))
    message = str(caught[0].message)
    assert named in message and not_named not in message


@pytest.mark.parametrize("returned", [None, float("nan")], ids=["None", "NaN"])
def test_a_batch_of_none_or_nan_rewards_is_reported_as_none_or_nan(returned):
    """
    The trainer stores a reward function's `None` as NaN (TRL's `_calculate_rewards`), so the rewards KGPS reads are
    NaN for both: the warning names both. Before, a function that returned NaN was said to have returned None.
    """
    import torch

    from trl_kgps import KGPSConfig, KGPSSelector
    from trl_kgps.engine.engine import SelectionEngine

    engine = SelectionEngine(KGPSSelector(8, KGPSConfig(), seed=0), batch_size=2)
    engine.rule = SuccessRule(["accuracy"], [1.0], None, 0.5)
    batch = engine.choose()
    returned_by_function = [returned] * 8  # 2 prompts x 4 completions
    # As TRL converts them: `[reward if reward is not None else torch.nan for reward in output_reward_func]`
    stored = torch.tensor([r if r is not None else torch.nan for r in returned_by_function], dtype=torch.float32)
    with pytest.warns(UserWarning) as caught:
        engine.observe(batch, *engine.outcomes(stored.numpy()[:, None].astype(np.float64), 4))
    message = str(caught[0].message)
    assert "the reward function 'accuracy' returned None or NaN for every completion" in message, message
    assert "cannot tell which" in message, message
