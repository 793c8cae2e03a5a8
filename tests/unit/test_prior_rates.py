"""A column of another model's success rates as each prompt's prior (`prior_rates`), against hand computations."""

import math

import numpy as np
import pytest
from datasets import Dataset, Value

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.adapters.dataset_columns import find_metadata, selector_for, with_metadata
from trl_kgps.adapters.reward_reads import ColumnReaders
from trl_kgps.selectors.prior_rates import Rates
from trl_kgps.selectors.shared_factor import design


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
    level = rng.integers(1, 4, 300)
    for features in ({"r": Rates("r", rates)}, {"level": level, "r": Rates("r", rates)}):
        rows = design(300, features)
        start = rows.rows[rows.row_of] @ rows.prior_mean  # z_i^T mu_0
        labels = Rates("r", rates).labels()
        expected = [logit(np.clip(rates[labels == label].mean(), 0.02, 0.98)) for label in labels]
        np.testing.assert_allclose(start, expected, rtol=1e-12)
    selector = KGPSSelector(300, KGPSConfig(), features={"r": Rates("r", rates)})
    np.testing.assert_allclose(selector.mean, expected, rtol=1e-6)  # the prompt's logit mean, shared part included


def test_a_wrong_prior_is_learned_away_from_the_policys_own_results():
    """Every prompt at p = 0.5 whatever its rate says: after 30 rounds each bin's prompts predict 0.5, and its prompts
    never observed have moved most of the way from where their rate started them."""
    rates = np.repeat([0.05, 0.5, 0.95], 40)
    selector = KGPSSelector(120, KGPSConfig(), seed=0, features={"r": Rates("r", rates)})
    rng = np.random.default_rng(1)
    np.testing.assert_allclose(selector.shared.group_success(), [0.05, 0.5, 0.95], atol=1e-9)
    for _ in range(30):
        batch = rng.choice(np.arange(120)[np.arange(120) % 40 != 0], 16, replace=False)  # prompts 0, 40, 80 unseen
        selector.update(batch, rng.binomial(8, 0.5, 16), np.full(16, 8))
    predicted = selector.predicted_success()
    np.testing.assert_allclose([predicted[i * 40 + 1 : (i + 1) * 40].mean() for i in range(3)], 0.5, atol=0.03)
    assert 0.3 < predicted[0] < 0.5 < predicted[80] < 0.7


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
        ("solveRate", lambda rng, n: [None if i % 5 == 0 else i / 64 for i in range(n)], True),
        ("pass@k", lambda rng, n: rng.uniform(0, 1, n).tolist(), True),
        # In [0, 1], and its name does not say success: the direction of a difficulty, or a threshold, a weight
        ("difficulty", lambda rng, n: [None if i % 5 == 0 else i / 64 for i in range(n)], False),
        ("model_difficulty", lambda rng, n: rng.uniform(0, 1, n).tolist(), False),
        ("accuracy_threshold", lambda rng, n: rng.uniform(0, 1, n).tolist(), False),
        ("min_pass_rate", lambda rng, n: rng.uniform(0, 1, n).tolist(), False),
        ("difficulty", lambda rng, n: rng.uniform(1, 10, n).tolist(), False),  # a scale, not a rate
        ("pass@8", lambda rng, n: rng.integers(0, 9, n).tolist(), False),  # counts: labels, not rates
        ("temperature", lambda rng, n: rng.uniform(0, 1, n).tolist(), False),  # its name does not say it is a rate
        ("solve_rate", lambda rng, n: [0.5] * n, False),  # one value says nothing
    ],
)
def test_the_one_line_names_a_rate_column_by_its_name_and_its_range(name, values, found):
    metadata = find_metadata(math_rows(**{name: values}), ColumnReaders.of([reward]))
    assert (metadata.rates == name) is found
    assert metadata.prior is None and "level" in metadata.columns


def test_a_difficulty_in_0_1_is_not_read_and_the_log_says_its_direction_is_unknown_and_how_to_turn_it():
    rows = math_rows(difficulty=lambda rng, n: rng.uniform(0, 1, n).tolist())
    config, metadata = with_metadata(rows, KGPSConfig(), ColumnReaders.of([reward]))
    assert config.feature_columns == ["level"] and metadata.rates is None
    said = metadata.describe()
    assert "looks like another model's success rates" not in said
    assert (
        "`difficulty`: values in [0, 1] whose direction KGPS does not know (is 1 the hardest or the easiest?), so it "
        "reads none of them: if 1 minus each is a success rate, `dataset.map(lambda row: {'solve_rate': 1 - "
        "row['difficulty']})` and KGPSConfig(prior_column='solve_rate') start each prompt from it"
    ) in said


def test_rates_of_any_float_width_are_read_float16_included():
    rows = math_rows(pass_rate=lambda rng, n: rng.uniform(0, 1, n).tolist())
    half = rows.cast_column("pass_rate", Value("float16"))
    assert find_metadata(half, ColumnReaders.of([reward])).rates == "pass_rate"  # Arrow's min_max has no float16
    config, metadata = with_metadata(half, KGPSConfig(prior_column="pass_rate"), ColumnReaders.of([reward]))
    assert metadata.prior == "pass_rate"
    # The float16 values, read as the float64 numbers they are: the beliefs of the same rates stored as float64.
    wide = half.cast_column("pass_rate", Value("float64"))
    np.testing.assert_array_equal(
        selector_for("kgps", half, config, 0).predicted_success(),
        selector_for("kgps", wide, config, 0).predicted_success(),
    )


def test_a_prior_column_of_0_and_1_is_read_as_rates_never_also_as_labels():
    rows = math_rows(solved=lambda rng, n: [i % 2 for i in range(n)])  # integers 0 and 1: labels on their own
    assert "solved" in find_metadata(rows, ColumnReaders.of([reward])).columns
    config, metadata = with_metadata(rows, KGPSConfig(prior_column="solved"), ColumnReaders.of([reward]))
    assert (config.feature_columns, config.prior_column) == (["level"], "solved")
    assert "solved" not in metadata.skipped and metadata.describe().startswith(
        "KGPS shares what it learns across prompts by `level` (4 values) and the bins of the success rates in `solved`"
    )


def test_a_prior_column_that_is_the_models_input_or_that_a_reward_reads_is_refused():
    def graded(completions, solve_rate, **kwargs):
        return [float(r > 0.5) for r in solve_rate]

    rows = math_rows(solve_rate=lambda rng, n: rng.uniform(0, 1, n).tolist())
    for config in (KGPSConfig(prior_column="prompt"), KGPSConfig(prior_column="prompt", feature_columns=["level"])):
        with pytest.raises(ValueError) as refused:
            with_metadata(rows, config, ColumnReaders.of([reward]))
        assert str(refused.value) == (
            "prior_column='prompt' names the model's input, not success rates another model measured: name the train "
            "dataset's column of rates in [0, 1] (e.g. 'llama8b_solve_rate'), or leave prior_column unset."
        )
    with pytest.raises(ValueError) as refused:
        with_metadata(rows, KGPSConfig(prior_column="solve_rate"), ColumnReaders.of([reward, graded]))
    assert str(refused.value) == (
        "prior_column='solve_rate' names a column that the reward function graded reads: what a reward reads may give "
        "the answer away, and KGPS never starts its beliefs from it. Name a column of success rates no reward "
        "function reads, or leave prior_column unset."
    )


def test_a_rate_column_a_reward_reads_is_never_named():
    def graded(completions, solve_rate, **kwargs):
        return [float(r > 0.5) for r in solve_rate]

    rows = math_rows(solve_rate=lambda rng, n: rng.uniform(0, 1, n).tolist())
    metadata = find_metadata(rows, ColumnReaders.of([reward, graded]))
    assert metadata.rates is None and "graded" in metadata.skipped["solve_rate"]


def test_the_one_line_says_how_to_start_from_a_rate_column_and_the_config_does():
    rows = math_rows(solve_rate=lambda rng, n: rng.uniform(0, 1, n).round(2).tolist())
    config, metadata = with_metadata(rows, KGPSConfig(), ColumnReaders.of([reward]))
    assert (config.feature_columns, config.prior_column) == (["level"], None)
    assert metadata.describe().startswith(
        "KGPS shares what it learns across prompts by `level` (4 values); `solve_rate` looks like another model's "
        "success rates: KGPSConfig(prior_column='solve_rate') starts each prompt from them (not read:"
    )
    config, metadata = with_metadata(rows, KGPSConfig(prior_column="solve_rate"), ColumnReaders.of([reward]))
    assert (config.feature_columns, config.prior_column) == (["level"], "solve_rate")
    assert "and the bins of the success rates in `solve_rate`, each starting at its rate" in metadata.describe()
    assert "looks like" not in metadata.describe()
    selector = selector_for("kgps", rows, config, 0)
    assert np.corrcoef(selector.predicted_success(), rows["solve_rate"])[0, 1] > 0.9
    # Without metadata columns the rates alone are shared by, instead of one filter per prompt.
    config, _ = with_metadata(rows.remove_columns("level"), KGPSConfig(prior_column="solve_rate"))
    assert (config.feature_columns, config.prior_column, config.shared_variance) == ([], "solve_rate", 1.0)


def test_a_named_prior_column_is_read_and_a_missing_one_refused():
    rows = math_rows(score=lambda rng, n: rng.uniform(0, 1, n).tolist())
    config, metadata = with_metadata(rows, KGPSConfig(prior_column="score"), ColumnReaders.of([reward]))
    assert config.prior_column == "score" and "score" not in metadata.skipped
    with pytest.raises(ValueError, match=r"prior_column='uid' names a column the train dataset does not have"):
        selector_for("kgps", rows, KGPSConfig(prior_column="uid", feature_columns=[]), 0)
    with pytest.raises(ValueError, match=r"prior_column='score' needs shared_variance > 0"):
        KGPSConfig(prior_column="score", shared_variance=0.0)
