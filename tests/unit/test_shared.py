"""
The shared factor (`trl_kgps.selectors.shared_factor`) against the exact joint Kalman filter with a dense covariance
over the shared factor and every residual, and its feature rows against their definition.
"""

import numpy as np
import pytest
from reference import DenseKalman, gauss_hermite_utility

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.engine.lexicographic import row_keys
from trl_kgps.selectors.shared_factor import SharedFactor, design


def _pool(num_groups=4, per_group=10):
    level = np.repeat(np.arange(num_groups), per_group)
    return level, design(level.size, {"level": level})


def _factor_moments(factor: SharedFactor, m: np.ndarray, P: np.ndarray):
    shared_mean, shared_variance = factor.moments()
    return shared_mean + m, shared_variance + P


def test_one_batch_from_the_prior_matches_the_exact_joint_filter():
    # From a factorised belief, one batch of Gaussian observations: every prompt's posterior mean, and the variance
    # of every prompt the batch did not hold, are the exact joint posterior's; an observed prompt's variance is
    # over-stated (the dropped covariance between beta and its residual is negative).
    level, rows = _pool()
    N = level.size
    factor = SharedFactor(rows, variance=1.0)
    dense = DenseKalman(rows.rows[rows.row_of], 1.0, 0.7)
    m, P = np.zeros(N), np.full(N, 0.7)
    batch = np.array([0, 3, 11, 25, 26, 27])
    y, R = np.array([1.5, 0.5, -1.0, 2.0, 1.0, 1.7]), np.array([0.4, 0.5, 0.3, 0.6, 0.4, 0.5])
    m[batch], P[batch] = factor.absorb(batch, m[batch], P[batch], y, R)
    dense.absorb(batch, y, R)
    mean, variance = _factor_moments(factor, m, P)
    exact_mean, exact_variance = dense.moments()
    np.testing.assert_allclose(mean, exact_mean, atol=1e-12)
    unobserved = np.setdiff1d(np.arange(N), batch)
    np.testing.assert_allclose(variance[unobserved], exact_variance[unobserved], rtol=1e-12)
    assert (variance[batch] > exact_variance[batch]).all()
    # The shared factor's moments are the exact marginal's.
    np.testing.assert_allclose(factor.mu, dense.x[: rows.dimension], atol=1e-12)
    np.testing.assert_allclose(factor.Sigma, dense.C[: rows.dimension, : rows.dimension], atol=1e-12)


def test_every_update_with_many_groups_is_the_exact_joint_update():
    # Two columns of 150 and 3 values (D = 154), 12 rounds of process noise and batches of 40 prompts with several of a
    # group in one batch. Each round, the factor's update (one pooled observation per row, covariance form, one-hot
    # gathers) against the dense Kalman update of (beta, the batch's residuals) from the same factorised prior: beta's
    # moments and each residual's marginal.
    rng = np.random.default_rng(0)
    N = 450
    rows = design(N, {"source": np.arange(N) % 150, "type": rng.integers(0, 3, N)})
    assert rows.dimension == 154 and rows.active.shape == (rows.num_cells, 3)
    factor = SharedFactor(rows, variance=1.0)
    m, P = np.zeros(N), np.full(N, 0.7)
    for _ in range(12):
        factor.predict(0.05)
        P += 0.05
        batch = rng.choice(N, 40, replace=False)
        y, R = rng.normal(0, 1.5, 40), rng.uniform(0.2, 1.0, 40)
        joint = DenseKalman(rows.rows[rows.row_of[batch]], 1.0, 1.0)
        joint.x[:154], joint.x[154:] = factor.mu, m[batch]
        joint.C = np.zeros_like(joint.C)
        joint.C[:154, :154], joint.C[154:, 154:] = factor.Sigma, np.diag(P[batch])
        joint.absorb(np.arange(40), y, R)
        m[batch], P[batch] = factor.absorb(batch, m[batch], P[batch], y, R)
        np.testing.assert_allclose(factor.mu, joint.x[:154], atol=1e-10)
        np.testing.assert_allclose(factor.Sigma, joint.C[:154, :154], atol=1e-10)
        np.testing.assert_allclose(m[batch], joint.x[154:], atol=1e-10)
        np.testing.assert_allclose(P[batch], np.diag(joint.C)[154:], atol=1e-10)
    assert np.abs(factor.Sigma - np.diag(np.diag(factor.Sigma))).max() > 1e-3  # the groups did become correlated


def test_ten_thousand_distinct_values_are_refused_at_once_with_the_fix():
    # Refused before anything of size D^2 is built: the rows alone would take 800 MB, the covariance as much again.
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(ValueError) as refused:
        KGPSSelector(10_000, KGPSConfig(feature_columns=["id"]), features={"id": np.arange(10_000)})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10e6
    message = str(refused.value)
    assert message.startswith("feature columns with 10,000 distinct values in all ('id' 10,000): KGPS shares across ")
    assert "give an embedding column" in message and "set feature_columns=[]" in message


def test_a_level_s_unobserved_prompts_follow_its_observed_ones():
    level, rows = _pool()
    selector = KGPSSelector(level.size, KGPSConfig(feature_columns=["level"]), features={"level": level})
    before = selector.predicted_success()
    selector.update([0, 1, 2], successes=[8, 8, 7], trials=[8, 8, 8])  # level 0 is easy
    after = selector.predicted_success()
    assert (after[3:10] > before[3:10] + 0.1).all()  # its unseen prompts rise
    np.testing.assert_allclose(after[10:], after[10], rtol=1e-12)  # the other levels move together, and less
    assert abs(after[10] - before[10]) < after[3] - before[3]


@pytest.mark.parametrize("features", [None, "level"])
def test_scores_and_the_top_b_see_the_shared_part(features):
    # The utility of every prompt is taken on its whole belief, shared part included: a level observed easy scores
    # low on its unseen prompts too, and the top-B follows. (The per-prompt filter's cached ranking sees only the
    # residuals, so a shared selector must not use it.)
    level, _ = _pool()
    config = KGPSConfig(selection="top", feature_columns=None if features is None else [features])
    selector = KGPSSelector(level.size, config, features=None if features is None else {"level": level})
    selector.predict(0.3)
    selector.update([0, 1, 2, 10], successes=[8, 8, 7, 4], trials=[8, 8, 8, 8])
    want = [gauss_hermite_utility(float(m), float(P)) for m, P in zip(selector.mean, selector.variance)]
    np.testing.assert_allclose(selector.scores(), want, rtol=2e-5)
    top = selector.select(6)
    rest = np.setdiff1d(np.arange(level.size), top)
    assert selector.scores()[top].min() >= selector.scores()[rest].max()
    if features:
        assert not np.isin(top, np.arange(10)).any()  # level 0 looks solved: none of its prompts is near the top


def test_over_a_run_the_mean_field_filter_stays_close_to_the_exact_joint_filter():
    # 40 prompts in 4 levels, 60 rounds of 4 prompts x 8 rollouts with process noise, outcomes from drifting true
    # rates: the factorised filter against the dense one fed the same outcomes (both moment-match each outcome from
    # its marginal; what differs is the mean field alone). Measured: a mean gap of 0.09-0.15 logits (0.75 at worst,
    # on a prompt observed while its level was still uncertain), variances 0.92-2.6 times the exact ones (1.0-1.4 after
    # 60 rounds), and an error against the true logits within 9 % of the exact filter's. docs/algorithm.md quotes
    # these figures.
    rng = np.random.default_rng(0)
    level, rows = _pool()
    N = level.size
    config = KGPSConfig(feature_columns=["level"], shared_variance=1.0, initial_variance=1.0, residual_adaptation=0.0)
    selector = KGPSSelector(N, config, features={"level": level})
    dense = DenseKalman(rows.rows[rows.row_of], 1.0, 1.0)
    truth = np.array([-2.0, -0.5, 0.5, 2.0])[level] + rng.normal(0, 0.8, N)
    gaps, ratios, errors = [], [], []
    for _ in range(60):
        batch = selector.select(4)
        Q = selector.process_noise(0.05)
        selector.predict(0.05)
        dense.predict(config.shared_noise_share * Q, (1 - config.shared_noise_share) * Q)
        truth += rng.normal(0, 0.05, N) + 0.03
        s = rng.binomial(8, 1 / (1 + np.exp(-truth[batch])))
        selector.update(batch, s, [8] * 4)
        dense.update(batch, s.astype(float), np.full(4, 8.0))
        exact_mean, exact_variance = dense.moments()
        gaps.append(np.abs(selector.mean - exact_mean))
        ratios.append(selector.variance / exact_variance)
        errors.append([np.abs(selector.mean - truth).mean(), np.abs(exact_mean - truth).mean()])
    gaps, ratios, errors = np.array(gaps), np.array(ratios), np.array(errors)
    assert gaps.mean(axis=1).max() < 0.2 and gaps.max() < 1.0, (gaps.mean(axis=1).max(), gaps.max())
    assert 0.9 < ratios.min() and ratios.max() < 3.0 and ratios[-1].max() < 1.6, (ratios.min(), ratios.max())
    mean_field, exact = errors[10:].mean(axis=0)
    assert exact <= mean_field < 1.15 * exact, (mean_field, exact)


def test_rows_of_categorical_features_are_an_intercept_and_one_indicator_per_column():
    rows = design(4, {"level": [1, 2, 1, 2], "type": ["a", "a", "b", "a"]})
    assert rows.num_cells == 3 and rows.dimension == 1 + 2 + 2
    np.testing.assert_allclose(np.linalg.norm(rows.rows, axis=1), 1.0)
    z = rows.rows[rows.row_of] * np.sqrt(3)
    np.testing.assert_array_equal(z, [[1, 1, 0, 1, 0], [1, 0, 1, 1, 0], [1, 1, 0, 0, 1], [1, 0, 1, 1, 0]])
    assert rows.names[rows.row_of[2]] == "level=1, type=b"
    np.testing.assert_array_equal(design(3).rows[design(3).row_of], np.ones((3, 1)))


def _groups_by_sorting(features: dict) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The oracle of `design`'s categorical rows: each column's labels sorted, the combinations sorted as tuples."""
    labels = {name: sorted(set(values)) for name, values in features.items()}
    offsets = np.cumsum([1] + [len(level) for level in labels.values()])
    codes = [[labels[name].index(v) for v in values] for name, values in features.items()]
    combinations = list(zip(*codes))
    distinct = sorted(set(combinations))
    rows = np.zeros((len(distinct), offsets[-1]))
    rows[:, 0] = 1.0
    for c, combination in enumerate(distinct):
        rows[c, offsets[:-1] + combination] = 1.0
    names = [", ".join(f"{name}={labels[name][code]}" for name, code in zip(labels, combo)) for combo in distinct]
    position = {combination: c for c, combination in enumerate(distinct)}
    return rows / np.sqrt(1 + len(features)), np.array([position[c] for c in combinations]), names


@pytest.mark.parametrize("columns", [3, 25], ids=["three_columns", "25_columns_past_int64_in_mixed_radix"])
def test_categorical_groups_are_those_of_sorting_the_labels_and_their_combinations(columns):
    rng = np.random.default_rng(columns)
    N = 6000
    labels = [
        [1, 3, 5, 7, 9],
        ["Algebra", "Geometry", "Number Theory", "ä", "😀", "b", ""],
        [f"s{j}" for j in range(9)],
    ]
    features = {f"c{j}": rng.choice(labels[j % 3], N).tolist() for j in range(columns)}
    features["c0"][5000] = 11  # a label first seen after the rows it looks the others up among
    features["c1"][N - 1] = "late"
    rows = design(N, {name: np.asarray(values) for name, values in features.items()})
    expected_rows, expected_row_of, expected_names = _groups_by_sorting(features)
    np.testing.assert_array_equal(rows.rows, expected_rows)
    np.testing.assert_array_equal(rows.row_of, expected_row_of)
    assert rows.row_of.dtype == np.int64 and rows.names == expected_names
    assert (np.prod([len(set(v)) for v in features.values()], dtype=object) > 2**63) == (columns == 25)


def test_row_keys_order_rows_lexicographically_past_int64():
    rng = np.random.default_rng(0)
    sizes = [2**40, 2**30, 3, 2**40, 5]  # their product is far past 2**63
    codes = [rng.integers(0, n, 500) for n in sizes]
    codes = [np.concatenate([c, c[:100]]) for c in codes]  # repeated rows
    keys = row_keys(codes, sizes)
    rows = list(zip(*(c.tolist() for c in codes)))
    assert [rows[i] for i in np.argsort(keys, kind="stable")] == sorted(rows)
    assert all((keys[i] == keys[j]) == (rows[i] == rows[j]) for i in range(0, 600, 7) for j in range(0, 600, 11))


def test_an_embedding_gives_each_prompt_its_unit_direction_beside_the_intercept():
    x = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 1.0]])  # mean (2, 1/3)
    rows = design(3, {"embedding": x})
    centred = x - x.mean(axis=0)
    expected = np.hstack([np.ones((3, 1)), centred / np.linalg.norm(centred, axis=1, keepdims=True)]) / np.sqrt(2)
    np.testing.assert_allclose(rows.rows[rows.row_of], expected)
    wide = design(100, {"embedding": np.random.default_rng(0).normal(size=(100, 80))})
    assert wide.dimension == 1 + 64


@pytest.mark.parametrize(
    "features, message",
    [
        ({"level": [1, 2]}, r"feature 'level' has 2 values for 3 prompts"),
        ({"level": [1, None, 2]}, r"feature 'level' is missing at prompt 1 \(1 prompts in all\)"),
        ({"level": [1.0, float("nan"), 2.0]}, r"feature 'level' is NaN or infinite at prompt 1"),
        ({"level": [1.5, 2.0, 2.0]}, r"feature 'level' holds fractional numbers"),
        ({"level": [{"a": 1}, {"a": 2}, {"a": 3}]}, r"feature 'level' holds values of type dict"),
        (
            {"e": [[1.0, 2.0], [1.0, float("nan")], [0.0, 1.0]]},
            r"feature 'e' holds NaN or infinite values at prompt 1",
        ),
        ({"e": np.ones((3, 2)), "level": [1, 2, 3]}, r"cannot be combined with other features"),
        ({}, r"empty dict"),
        ({"level": [1, "1", 2]}, r"feature 'level' mixes strings with values of type int \(e.g. 1\)"),
        (
            {"id": np.arange(3), "type": ["a", "b", "c"]},
            r"feature columns with 6 distinct values in all \('id' 3, 'type' 3\): KGPS shares across at most 5",
        ),
    ],
)
def test_bad_features_are_refused_by_name(features, message, monkeypatch):
    monkeypatch.setattr("trl_kgps.selectors.shared_factor.MAX_CATEGORICAL_VALUES", 5)
    with pytest.raises(ValueError, match=message):
        design(3, features)


def test_features_need_a_shared_part():
    with pytest.raises(ValueError, match=r"shared_variance is 0"):
        KGPSSelector(3, KGPSConfig(shared_variance=0.0), features={"level": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"feature_columns=\['level'\] needs shared_variance > 0"):
        KGPSConfig(feature_columns=["level"], shared_variance=0.0)


@pytest.mark.parametrize("spread, direction", [(3.0, "wider"), (0.2, "narrower")])
def test_the_residual_prior_follows_how_far_prompts_spread_around_their_group(spread, direction):
    # Prompts far more (less) spread than the residual prior says give first outcomes with NIS > 1 (< 1): the prior
    # of the prompts not yet seen widens (narrows) towards the true spread, and the new prompts' NIS comes to ~1.
    rng = np.random.default_rng(0)
    N = 3000
    selector = KGPSSelector(N, KGPSConfig(initial_variance=1.0), seed=0)
    psi = rng.normal(0.0, spread, N)
    for start in range(0, 2000, 20):  # 100 batches of 20 prompts, each seen once
        batch = np.arange(start, start + 20)
        selector.update(batch, rng.binomial(8, 1 / (1 + np.exp(-psi[batch]))), np.full(20, 8))
    unseen_prior = selector.variance[-1] - selector.shared.moments(np.array([N - 1]))[1][0]
    if direction == "wider":
        assert unseen_prior > 3.0
    else:
        assert unseen_prior < 0.5
    rest = np.arange(2000, N)
    selector.update(rest, rng.binomial(8, 1 / (1 + np.exp(-psi[rest]))), np.full(rest.size, 8))
    assert selector.last_nis == pytest.approx(1.0, abs=0.25)


def _run(selector, rounds: int, batch_size: int, delta_norm: float):
    """`rounds` rounds of select, predict and update, the outcomes Binomial(8, 0.3) from a seeded generator."""
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        batch = selector.select(batch_size)
        selector.predict(delta_norm)
        selector.update(batch, rng.binomial(8, 0.3, batch_size), np.full(batch_size, 8))


def _through_state_file(selector, tmp_path):
    """`selector` saved to a state file under `tmp_path` and loaded back as its own class."""
    from trl_kgps.engine import state_file

    state_file.save(str(tmp_path / "state.npz"), *state_file.pack_selector(selector.state_dict()))
    arrays, meta = state_file.load(str(tmp_path / "state.npz"))
    return type(selector).from_state_dict(state_file.unpack_selector(arrays, {"selector": meta}))


@pytest.mark.parametrize(
    "features",
    [
        None,
        {"level": np.arange(30) % 4, "type": ["a", "b", "c"] * 10},
        {"e": np.random.default_rng(1).normal(size=(30, 5))},
    ],
    ids=["global", "categorical", "embedding"],
)
def test_a_shared_state_round_trips_through_the_state_file(tmp_path, features):
    selector = KGPSSelector(30, KGPSConfig(), seed=2, features=features)
    _run(selector, rounds=6, batch_size=5, delta_norm=0.1)
    restored = _through_state_file(selector, tmp_path)
    np.testing.assert_array_equal(restored.predicted_success(), selector.predicted_success())
    np.testing.assert_array_equal(restored.select(5), selector.select(5))
    assert restored.shared.design.kind == selector.shared.design.kind


def test_the_card_and_the_metrics_say_what_was_shared():
    from trl_kgps.adapters.report import card_section
    from trl_kgps.engine.ledger import ChosenBatch, Observed
    from trl_kgps.engine.metrics import shared_metrics

    def card(selector):
        return card_section(
            selector,
            selector.config,
            batches_chosen=1,
            batches_scored=1,
            warmup_batches=0,
            observed=1,
            metrics={},
            location="out",
        )

    level = np.array(["easy", "hard"] * 5)
    by_level = KGPSSelector(10, KGPSConfig(feature_columns=["level"]), features={"level": level})
    by_level.update([0, 1, 2], [8, 0, 7], [8, 8, 8])
    text = card(by_level)
    assert "- shared across prompts: the feature columns `level`, 2 groups" in text
    easy, hard = by_level.shared.group_success()
    assert f"| level=easy | 5 | {easy:.3f} |" in text and f"| level=hard | 5 | {hard:.3f} |" in text and easy > hard
    assert "one factor for the whole pool" in card(KGPSSelector(10))
    assert "nothing (one independent filter per prompt)" in card(KGPSSelector(10, KGPSConfig.paper()))

    chosen = ChosenBatch(indices=np.array([0, 1, 2]), predicted=np.full(3, 0.5), lag=0, select_seconds=None)
    scored = Observed(
        chosen, np.array([8, 0, 7]), np.array([8, 8, 8]), warmup=False, skipped=0, repeats=0.0, unique_prompts=3
    )
    metrics = shared_metrics(by_level, scored)
    assert metrics["kgps/residual_prior"] == by_level.residual_prior
    # Five easy and five hard prompts: the spread of their shared logits is half the gap between the two groups'.
    gap = np.log(easy / (1 - easy)) - np.log(hard / (1 - hard))
    assert metrics["kgps/shared_spread"] == pytest.approx(gap / 2)
    assert shared_metrics(KGPSSelector(10), scored)["kgps/shared_spread"] == 0.0
    assert metrics["kgps/group/level=easy/observed_success"] == pytest.approx(15 / 16)
    assert metrics["kgps/group/level=hard/observed_success"] == 0.0
    assert metrics["kgps/group/level=easy/predicted_success"] == pytest.approx(easy)
    # Prompts 0 and 2 are easy, prompt 1 hard: two thirds of the batch from the easy group.
    assert metrics["kgps/group/level=easy/batch_share"] == pytest.approx(2 / 3)
    assert metrics["kgps/group/level=hard/batch_share"] == pytest.approx(1 / 3)


def _predictive(m, P, k):
    """E[s] and Var[s] for s ~ Binomial(k, sigmoid(psi)), psi ~ N(m, P), by scipy's adaptive quadrature."""
    from scipy.integrate import quad

    def moment(power):  # E[sigmoid(psi)^power]
        def integrand(x):
            return (1 / (1 + np.exp(-x))) ** power * np.exp(-((x - m) ** 2) / (2 * P)) / np.sqrt(2 * np.pi * P)

        return quad(integrand, m - 12 * np.sqrt(P), m + 12 * np.sqrt(P))[0]

    p1, p2 = moment(1), moment(2)
    return k * p1, k * (p1 - p2) + k**2 * (p2 - p1**2)


def test_the_residual_prior_moves_by_the_first_outcomes_normalized_innovation():
    # tau^2 <- clip(tau^2 exp(rate (NIS_new - 1))), NIS_new the mean of (s - E[s])^2 / Var[s] over the batch's
    # prompts seen for the first time, under each one's prior N(m, P) (shared part included): here E[s] and Var[s]
    # by scipy's adaptive quadrature, independent of the selector's Gauss-Hermite nodes
    config = KGPSConfig(feature_columns=["level"], residual_adaptation=0.05)
    selector = KGPSSelector(9, config, features={"level": [0, 0, 0, 1, 1, 1, 2, 2, 2]}, seed=0)
    tau2, seen = selector.config.initial_variance, set()  # the with-metadata 1.0: built without a dataset
    for batch, s in (([0, 3, 6], [0, 8, 8]), ([0, 1, 4, 7], [2, 8, 0, 1])):  # prompt 0 again: not a first outcome
        m, P = selector.mean.astype(np.float64)[batch], selector.variance.astype(np.float64)[batch]
        first = [j for j, i in enumerate(batch) if i not in seen]
        nis = [(s[j] - e) ** 2 / v for j, (e, v) in zip(first, (_predictive(m[j], P[j], 8) for j in first))]
        tau2 = float(np.clip(tau2 * np.exp(0.05 * (np.mean(nis) - 1)), 1e-3, 100.0))
        seen |= set(batch)
        selector.update(batch, s, np.full(len(batch), 8))
        assert selector.residual_prior == pytest.approx(tau2, rel=1e-5)
    assert tau2 > selector.config.initial_variance  # outcomes far from their groups' predictions: the prior widened


@pytest.mark.parametrize("first, then", [(0, 16), (16, 0)], ids=["failures_then_successes", "the_reverse"])
def test_a_phase_change_widens_the_residual_prior_to_its_bound_and_nothing_overflows(first, then):
    # A format reward first: 200 batches of 16 unseen prompts with no success (or all solved), then unseen prompts
    # with the opposite outcome. The first outcomes' NIS passes 1e4, where tau^2 exp(rate (NIS - 1)) overflows a
    # float: tau^2 lands on its upper bound, 100 P0, as the clip of the exact step says, and every number stays finite.
    config = KGPSConfig()
    selector = KGPSSelector(16 * 202, config, seed=0)
    for batch in range(200):
        selector.predict(0.01)
        selector.update(np.arange(16 * batch, 16 * batch + 16), np.full(16, first), np.full(16, 16))
    selector.predict(0.01)
    surprised = np.arange(16 * 200, 16 * 201)
    selector.update(surprised, np.full(16, then), np.full(16, 16))
    assert selector.last_nis > 1e4
    assert selector.residual_prior == 100.0 * selector.config.initial_variance
    for _ in range(20):  # and it keeps selecting and updating
        batch = selector.select(16)
        selector.predict(0.01)
        selector.update(batch, np.full(16, then), np.full(16, 16))
    state = selector.state_dict()
    assert all(np.isfinite(np.asarray(state[key], dtype=np.float64)).all() for key in ("mean", "variance_base"))
    assert np.isfinite(selector.scores()).all() and np.isfinite(selector.predicted_success()).all()


def _capped_pair():
    """The default with gamma and tau^2 fixed, and the same with `residual_cap`, after one identical update."""
    from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector

    fields = dict(process_noise_adaptation=0.0, residual_adaptation=0.0)  # Q = 0.1 ||dtheta||, tau^2 = P0 = 1
    features = {"level": [0] * 6 + [1] * 6}
    plain = KGPSSelector(12, KGPSConfig(**fields), seed=0, features=features)
    capped = ExperimentalSelector(12, ExperimentalConfig(residual_cap=True, **fields), seed=0, features=features)
    for selector in (plain, capped):  # below the cap, an update is the default's
        selector.update([0, 1, 6], [8, 3, 0], [8, 8, 8])
    return plain, capped


def test_with_residual_cap_the_drift_widens_a_residual_up_to_the_prior_and_no_further():
    plain, capped = _capped_pair()
    np.testing.assert_array_equal(capped.variance, plain.variance)
    # 20 rounds of ||dtheta|| = 1: Q = 0.1, the residuals' half 0.05 a round, 1.0 in all; the shared part's half
    # (Sigma += 0.05 I a round) is the same in both, since no update came between.
    for _ in range(20):
        plain.predict(1.0)
        capped.predict(1.0)
    shared = plain.shared.moments()[1]
    np.testing.assert_allclose(capped.shared.moments()[1], shared)
    residual = plain.variance.astype(np.float64) - shared
    assert residual.min() > 1.0  # every residual, seen or not, has drifted past tau^2 = 1
    np.testing.assert_allclose(capped.variance, shared + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(capped.mean, plain.mean)

    # What a prompt's next outcome is predicted from: E[sigmoid(psi)], psi ~ N(m, shared + 1), by scipy's quadrature.
    m = capped.mean.astype(np.float64)
    oracle = [_predictive(m[i], shared[i] + 1.0, 1)[0] for i in range(12)]
    np.testing.assert_allclose(capped.predicted_success(), oracle, atol=2e-3)


@pytest.mark.parametrize(
    "fields",
    [
        dict(residual_cap=True),
        dict(residual_prior_by_group=True),
        dict(residual_cap=True, residual_prior_by_group=True),
    ],
    ids=["cap", "by_group", "both"],
)
def test_a_residual_variant_s_state_file_restores_its_filter_and_continues_bit_for_bit(fields, tmp_path):
    from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector

    config = ExperimentalConfig(**fields)
    selector = ExperimentalSelector(12, config, seed=3, features={"level": [0] * 6 + [1] * 6})
    _run(selector, rounds=8, batch_size=3, delta_norm=1.0)
    restored = _through_state_file(selector, tmp_path)
    assert (restored._filter.cap, restored._filter.by_group) == (config.residual_cap, config.residual_prior_by_group)
    np.testing.assert_array_equal(restored._filter.group_extra, selector._filter.group_extra)
    if config.residual_prior_by_group:  # the levels' priors moved apart
        assert np.ptp(selector._filter.group_extra) > 0
    np.testing.assert_array_equal(restored.variance, selector.variance)
    np.testing.assert_array_equal(restored.select(4), selector.select(4))


@pytest.mark.parametrize("name", ["residual_cap", "residual_prior_by_group"])
def test_a_residual_variant_is_refused_where_it_cannot_apply(name):
    from trl_kgps.selectors.experimental import ExperimentalConfig

    with pytest.raises(ValueError, match=f"{name} must be True or False, got 1"):
        ExperimentalConfig(**{name: 1})
    with pytest.raises(ValueError, match=f"{name}=True acts on the residuals of the shared filter, but shared_varia"):
        ExperimentalConfig(shared_variance=0.0, **{name: True})


def test_retire_after_stops_drawing_a_prompt_solved_in_its_last_groups_and_its_state_file_keeps_the_count(tmp_path):
    from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector

    selector = ExperimentalSelector(
        12, ExperimentalConfig(retire_after=2), seed=0, features={"level": [0] * 6 + [1] * 6}
    )
    # prompt 0: 8/8 twice, retired; prompt 1: 8/8, 7/8, 8/8, one in a row; prompt 2: 8/8 once; prompt 3: 4/8
    for batch, s in (([0, 1, 2, 3], [8, 8, 8, 4]), ([0, 1], [8, 7]), ([1], [8])):
        selector.update(batch, s, np.full(len(batch), 8))
    np.testing.assert_array_equal(selector._rule.solved_streak[:4], [2, 1, 1, 0])
    assert selector.scores()[0] == 0 and (np.delete(selector.scores(), 0) > 0).all()
    drawn = np.concatenate([selector.select(5) for _ in range(40)])
    assert 0 not in drawn and {1, 2, 3} <= set(drawn.tolist())
    assert 0 in selector.select(12)  # drawn last, once no other prompt is left

    restored = _through_state_file(selector, tmp_path)
    np.testing.assert_array_equal(restored._rule.solved_streak, selector._rule.solved_streak)
    np.testing.assert_array_equal(restored.select(5), selector.select(5))


def test_the_dealt_rule_deals_the_selectors_scores_and_its_state_file_continues_the_deal(tmp_path):
    from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector, batch_shares

    config = ExperimentalConfig(dealt=True, selection_temperature=0.5)
    selector = ExperimentalSelector(30, config, seed=0, features={"level": [0] * 15 + [1] * 15})
    _run(selector, rounds=5, batch_size=4, delta_norm=0.1)
    # each prompt accrues its share of the squared scores (T = 1/2), the 4 due soonest pay one each
    share = batch_shares(selector.scores().astype(np.float64) ** 2, 4)
    credit = selector._rule.credit + share
    batch = selector.select(4)
    np.testing.assert_array_equal(batch, np.argsort((1 - credit) / share, kind="stable")[:4])
    credit[batch] -= 1.0
    np.testing.assert_allclose(selector._rule.credit, credit)

    restored = _through_state_file(selector, tmp_path)
    np.testing.assert_array_equal(restored._rule.credit, selector._rule.credit)
    for _ in range(3):
        np.testing.assert_array_equal(restored.select(4), selector.select(4))


@pytest.mark.parametrize("value", [-1, 1.5])
def test_retire_after_is_refused_unless_a_count(value):
    from trl_kgps.selectors.experimental import ExperimentalConfig

    with pytest.raises(ValueError, match=f"retire_after must be an integer >= 0, got {value}"):
        ExperimentalConfig(retire_after=value)
