"""A column of another model's success rates as each prompt's prior (`prior_rates`), against hand computations."""

import math

import numpy as np
import pytest
from datasets import Dataset

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.adapters.dataset_columns import find_metadata, selector_for, with_metadata
from trl_kgps.adapters.reward_reads import ColumnReaders
from trl_kgps.selectors.prior_rates import Rates


def logit(p):
    return math.log(p / (1 - p))


def test_rates_fall_in_their_bins_by_hand():
    rates = Rates("solve_rate", [0.0, 0.05, 0.1, 0.11, 0.5, 0.95, 1.0, None, float("nan")])
    assert rates.labels().tolist() == [
        "0", "(0, 0.1]", "(0, 0.1]", "(0.1, 0.2]", "(0.4, 0.5]", "(0.9, 1)", "1", "missing", "missing",
    ]  # fmt: skip
    starts = rates.logits(rates.labels())
    assert starts["0"] == pytest.approx(logit(0.02)) and starts["1"] == pytest.approx(logit(0.98))
    assert starts["(0, 0.1]"] == pytest.approx(logit(0.075)) and starts["missing"] == 0.0


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.3", float("inf")])
def test_a_value_that_is_not_a_rate_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=rf"prior_column 'solve_rate' holds {bad!r}, which is not a success rate"):
        Rates("solve_rate", [0.2, bad])


def test_each_prompt_starts_at_its_bins_logit_whatever_the_other_columns():
    rng = np.random.default_rng(0)
    rates = rng.uniform(0, 1, 300).round(3)
    labels = Rates("r", rates).labels()
    expected = [logit(np.clip(rates[labels == label].mean(), 0.02, 0.98)) for label in labels]
    np.testing.assert_allclose(Rates("r", rates).start(), expected, rtol=1e-12)
    for features in ({"r": Rates("r", rates)}, {"level": rng.integers(1, 4, 300), "r": Rates("r", rates)}):
        selector = KGPSSelector(300, KGPSConfig(), features=features)
        np.testing.assert_allclose(selector.mean, expected, rtol=1e-6)  # the shared part starts at 0
        assert selector.shared.design.kind == ("categorical" if "level" in features else "global")
        restored = KGPSSelector(300, KGPSConfig(), features=features)
        restored.load_state_dict(selector.state_dict())
        np.testing.assert_array_equal(restored.mean, selector.mean)


def test_a_policy_better_than_the_rates_moves_every_prompt_of_its_group_up():
    """The rates of one model, a policy that succeeds more on every prompt of level 1: after 30 rounds on the observed
    prompts, those never observed of level 1 predict more than their rate said, those of level 2 as their rate."""
    rates = np.tile([0.1, 0.3, 0.5], 40)
    level = np.repeat([1, 2], 60)
    truth = np.where(level == 1, np.minimum(rates + 0.4, 0.95), rates)
    features = {"level": level, "r": Rates("r", rates)}
    selector = KGPSSelector(120, KGPSConfig(), seed=0, features=features)
    rng = np.random.default_rng(1)
    unseen = np.array([0, 1, 2, 60, 61, 62])
    for _ in range(30):
        batch = rng.choice(np.setdiff1d(np.arange(120), unseen), 16, replace=False)
        selector.update(batch, rng.binomial(8, truth[batch]), np.full(16, 8))
    predicted = selector.predicted_success(unseen)
    assert (predicted[:3] > rates[:3] + 0.2).all()
    np.testing.assert_allclose(predicted[3:], rates[60:63], atol=0.1)


def reward(completions, answer, **kwargs):
    return [float(c == a) for c, a in zip(completions, answer)]


def math_rows(**columns):
    n = 64
    rng = np.random.default_rng(0)
    base = {
        "prompt": [f"q{i}" for i in range(n)],
        "answer": [str(i) for i in range(n)],
        "level": [i % 4 for i in range(n)],
    }
    return Dataset.from_dict({**base, **{name: make(rng, n) for name, make in columns.items()}})


@pytest.mark.parametrize(
    "name, values, found",
    [
        ("llama8b_solve_rate", lambda rng, n: rng.uniform(0, 1, n).tolist(), True),
        ("avg@8_qwen3_4b", lambda rng, n: (rng.integers(0, 9, n) / 8).tolist(), True),
        ("difficulty", lambda rng, n: [None if i % 5 == 0 else i / 64 for i in range(n)], True),
        ("difficulty", lambda rng, n: rng.uniform(1, 10, n).tolist(), False),  # a scale, not a rate
        ("pass@8", lambda rng, n: rng.integers(0, 9, n).tolist(), False),  # counts: labels, not rates
        ("temperature", lambda rng, n: rng.uniform(0, 1, n).tolist(), False),  # its name does not say it is a rate
        ("solve_rate", lambda rng, n: [0.5] * n, False),  # one value says nothing
    ],
)
def test_the_one_line_finds_a_rate_column_by_its_name_and_its_range(name, values, found):
    metadata = find_metadata(math_rows(**{name: values}), ColumnReaders.of([reward]))
    assert (metadata.prior == name) is found
    assert "level" in metadata.columns


def test_a_rate_column_a_reward_reads_is_never_a_prior():
    def graded(completions, solve_rate, **kwargs):
        return [float(r > 0.5) for r in solve_rate]

    rows = math_rows(solve_rate=lambda rng, n: rng.uniform(0, 1, n).tolist())
    metadata = find_metadata(rows, ColumnReaders.of([reward, graded]))
    assert metadata.prior is None and "graded" in metadata.skipped["solve_rate"]


def test_the_one_line_starts_from_a_rate_column_it_finds_and_says_so():
    rows = math_rows(solve_rate=lambda rng, n: rng.uniform(0, 1, n).round(2).tolist())
    config, metadata = with_metadata(rows, KGPSConfig(), ColumnReaders.of([reward]))
    assert (config.feature_columns, config.prior_column) == (["level"], "solve_rate")
    assert metadata.describe().startswith(
        "KGPS shares what it learns across prompts by `level` (4 values), and starts each prompt from its success "
        "rate in `solve_rate` (not read:"
    )
    selector = selector_for("kgps", rows, config, 0)
    assert np.corrcoef(selector.predicted_success(), rows["solve_rate"])[0, 1] > 0.9
    # Without metadata columns the rates alone are shared by, instead of one filter per prompt.
    config, _ = with_metadata(rows.remove_columns("level"), KGPSConfig(), ColumnReaders.of([reward]))
    assert (config.feature_columns, config.prior_column, config.shared_variance) == ([], "solve_rate", 1.0)


def test_a_named_prior_column_is_read_and_a_missing_one_refused():
    rows = math_rows(score=lambda rng, n: rng.uniform(0, 1, n).tolist())
    config, metadata = with_metadata(rows, KGPSConfig(prior_column="score"), ColumnReaders.of([reward]))
    assert config.prior_column == "score" and "score" not in metadata.skipped
    with pytest.raises(ValueError, match=r"prior_column='uid' names a column the train dataset does not have"):
        selector_for("kgps", rows, KGPSConfig(prior_column="uid", feature_columns=[]), 0)
    with pytest.raises(ValueError, match=r"prior_column='score' needs shared_variance > 0"):
        KGPSConfig(prior_column="score", shared_variance=0.0)
