"""
ARCUS's arcsine-coordinate filter against independent oracles: the boundary layer's moment-matched update against a
dense grid posterior (prior times scipy's binomial likelihood, normalised on 200,001 points of [0, pi/2]), the Kalman
update of mixed groups against the same grid within the Gaussian approximation's stated error, the score and the
predicted success against scipy's quadrature and a Monte-Carlo draw; and the selector behind the interface: its
draws, its drift, its state.
"""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from trl_kgps.selectors import ArcusSelector, _arcsine, build_selector
from trl_kgps.selectors.arcus import PRIOR_MEAN


GRID = np.linspace(0.0, math.pi / 2, 200_001)


def grid_posterior(m, v, s, n):
    """Mean and variance of N(psi; m, v) Binomial(s; n, sin^2 psi) on [0, pi/2], by the trapezoid rule on `GRID`."""
    density = stats.norm.pdf(GRID, m, math.sqrt(v)) * stats.binom.pmf(s, n, np.sin(GRID) ** 2)
    mass = np.trapezoid(density, GRID)
    mean = np.trapezoid(density * GRID, GRID) / mass
    return mean, np.trapezoid(density * (GRID - mean) ** 2, GRID) / mass


def observed(m, v, s, n):
    """One prompt's belief after `ArcusSelector.update` from the belief N(m, v)."""
    selector = ArcusSelector(1)
    selector.mean[:], selector.variance[:] = m, v
    selector.update([0], [s], [n])
    return selector.mean[0], selector.variance[0]


def restricted(m, v):
    """scipy's Gaussian N(m, v) restricted to [0, pi/2]."""
    sd = math.sqrt(v)
    return stats.truncnorm((0.0 - m) / sd, (math.pi / 2 - m) / sd, loc=m, scale=sd)


def random_beliefs(rng, count):
    """Means over [0, pi/2] and variances from 1e-4 to 1 (log-uniform): sharp and vague beliefs, edges included."""
    return rng.uniform(0.0, math.pi / 2, count), np.exp(rng.uniform(math.log(1e-4), 0.0, count))


@pytest.mark.parametrize("n", [1, 4, 8, 32])
@pytest.mark.parametrize("unanimous", ["all right", "all wrong"])
def test_the_boundary_layer_is_the_exact_posteriors_mean_and_variance(n, unanimous):
    rng = np.random.default_rng(n)
    for m, v in zip(*random_beliefs(rng, 12)):
        s = n if unanimous == "all right" else 0
        mean, variance = observed(m, v, s, n)
        expected_mean, expected_variance = grid_posterior(m, v, s, n)
        # to the grid's precision: 1e-6 of the posterior's spread
        assert abs(mean - expected_mean) <= 1e-6 * math.sqrt(expected_variance)
        assert variance == pytest.approx(expected_variance, rel=1e-5)


def test_mixed_groups_are_kalmans_update_on_the_arcsine_of_the_rate():
    # y = arcsin(sqrt(3/8)), R = 1/32, K = v / (v + R)
    m, v = 0.3, 0.05
    y, R = math.asin(math.sqrt(3 / 8)), 1 / 32
    K = v / (v + R)
    mean, variance = observed(m, v, 3, 8)
    assert mean == pytest.approx(m + K * (y - m), rel=1e-15)
    assert variance == pytest.approx((1 - K) * v, rel=1e-15)


def test_the_kalman_update_of_a_mixed_group_is_close_to_the_exact_posterior_away_from_the_edges():
    # Where the Gaussian approximation is good (beliefs at p in [0.23, 0.77], at most the prior's variance, groups of
    # 8 or 16 with a rate in [1/4, 3/4]), the constant-noise update errs by < 0.1 posterior sd in the mean and < 15 %
    # in the variance (measured: 0.08 and 11 %).
    rng = np.random.default_rng(7)
    for _ in range(60):
        m, v, n = rng.uniform(0.5, 1.07), math.exp(rng.uniform(math.log(0.005), math.log(0.15))), rng.choice([8, 16])
        s = int(rng.integers(n // 4, 3 * n // 4 + 1))
        mean, variance = observed(m, v, s, n)
        expected_mean, expected_variance = grid_posterior(m, v, s, n)
        assert abs(mean - expected_mean) < 0.1 * math.sqrt(expected_variance)
        assert variance == pytest.approx(expected_variance, rel=0.15)


def test_repeated_unanimous_groups_keep_moving_the_belief_to_the_edge_and_narrowing_it():
    selector = ArcusSelector(1)
    means, variances = [], []
    for _ in range(6):
        selector.update([0], [8], [8])
        means.append(selector.mean[0])
        variances.append(selector.variance[0])
    assert np.all(np.diff(means) > 0) and means[-1] < math.pi / 2
    assert np.all(np.diff(variances) < 0)


@pytest.mark.parametrize("G", [2, 8])
def test_the_score_is_the_chance_of_a_mixed_group_under_the_restricted_belief(G):
    rng = np.random.default_rng(G)
    selector = ArcusSelector(20, group_size=G)
    selector.mean[:], selector.variance[:] = random_beliefs(rng, 20)
    scores = selector.scores()
    for i in range(20):
        belief = restricted(selector.mean[i], selector.variance[i])
        a, b = belief.support()
        expected, _ = integrate.quad(
            lambda psi, belief=belief: belief.pdf(psi) * (1 - np.sin(psi) ** (2 * G) - np.cos(psi) ** (2 * G)),
            a,
            b,
            points=[selector.mean[i]],
            epsabs=1e-12,
        )
        assert scores[i] == pytest.approx(expected, abs=1e-7)


def test_the_score_and_the_predicted_success_agree_with_a_monte_carlo_draw_of_p():
    rng = np.random.default_rng(3)
    selector = ArcusSelector(3, group_size=8)
    selector.mean[:], selector.variance[:] = [0.2, 0.9, 1.5], [0.01, 0.1, 0.05]
    for i in range(3):
        p = np.sin(restricted(selector.mean[i], selector.variance[i]).rvs(400_000, random_state=rng)) ** 2
        # 5 standard errors of the Monte-Carlo means (at most 0.5 / sqrt(400,000) each)
        assert selector.scores([i])[0] == pytest.approx(np.mean(1 - p**8 - (1 - p) ** 8), abs=0.004)
        assert selector.predicted_success([i])[0] == pytest.approx(p.mean(), abs=0.004)


def test_the_predicted_success_is_the_posterior_mean_of_sin_squared():
    rng = np.random.default_rng(5)
    selector = ArcusSelector(10)
    selector.mean[:], selector.variance[:] = random_beliefs(rng, 10)
    for i, predicted in enumerate(selector.predicted_success()):
        expected = restricted(selector.mean[i], selector.variance[i]).expect(lambda psi: np.sin(psi) ** 2)
        assert predicted == pytest.approx(expected, abs=1e-8)


def test_the_prior_spreads_psi_as_a_uniform_success_rate_does():
    # psi = arcsin(sqrt(p)), p ~ U(0, 1): density sin(2 psi) on [0, pi/2], mean pi/4, variance (pi^2 - 8) / 16
    belief = restricted(PRIOR_MEAN, ArcusSelector(1).initial_variance)
    assert belief.var() == pytest.approx((math.pi**2 - 8) / 16, abs=0.002)
    assert ArcusSelector(1).predicted_success()[0] == pytest.approx(0.5, abs=1e-12)


def test_predict_relaxes_each_belief_toward_the_prior_by_the_policys_movement():
    selector = ArcusSelector(2, drift=0.5)
    selector.mean[:], selector.variance[:] = [0.1, 1.5], [1e-3, 0.4]
    before_mean, before_variance = selector.mean.copy(), selector.variance.copy()
    selector.predict(0.3)
    a = math.exp(-0.5 * 0.3)
    np.testing.assert_allclose(selector.mean, PRIOR_MEAN + a * (before_mean - PRIOR_MEAN), rtol=1e-15)
    np.testing.assert_allclose(selector.variance, a**2 * before_variance + (1 - a**2) * 0.15, rtol=1e-15)
    # the sharp belief widens, the one wider than the prior narrows: both toward v_0
    assert selector.variance[0] > before_variance[0] and selector.variance[1] < before_variance[1]


def test_the_drift_of_several_steps_is_their_drifts_one_after_the_other():
    together, apart = ArcusSelector(3, drift=0.1), ArcusSelector(3, drift=0.1)
    for selector in (together, apart):
        selector.update([0, 1, 2], [0, 3, 8], [8, 8, 8])
    together.predict([0.2, 0.5, 0.1])
    for norm in (0.2, 0.5, 0.1):
        apart.predict(norm)
    np.testing.assert_allclose(together.mean, apart.mean, rtol=1e-14)
    np.testing.assert_allclose(together.variance, apart.variance, rtol=1e-14)


def test_no_drift_or_no_movement_leaves_every_belief_as_it_is():
    for drift, norm in ((0.0, 1.0), (0.1, 0.0)):
        selector = ArcusSelector(3, drift=drift)
        selector.update([0, 1], [8, 2], [8, 8])
        state = selector.state_dict()
        selector.predict(norm)
        np.testing.assert_array_equal(selector.mean, state["mean"])
        np.testing.assert_array_equal(selector.variance, state["variance"])


@pytest.mark.parametrize("selection", ["sample", "top"])
def test_select_returns_distinct_prompts_none_excluded(selection):
    rng = np.random.default_rng(0)
    selector = ArcusSelector(30, selection=selection, seed=2)
    for _ in range(20):
        exclude = rng.choice(30, 6, replace=False)
        batch = selector.select(8, exclude=exclude)
        assert batch.dtype == np.int64 and batch.size == 8 == np.unique(batch).size
        assert not np.isin(batch, exclude).any()
        selector.update(batch, rng.binomial(8, 0.5, 8), np.full(8, 8))
    assert np.array_equal(np.sort(selector.select(24, exclude=np.arange(6))), np.arange(6, 30))


def test_top_takes_the_best_scores_and_sample_draws_in_proportion_to_them():
    selector = ArcusSelector(4, selection="top", group_size=8)
    selector.update([0, 1, 2, 3], [8, 0, 4, 8], [16, 16, 16, 16])
    scores = selector.scores()
    assert set(selector.select(2).tolist()) == set(np.argsort(-scores)[:2].tolist())
    state = selector.state_dict()
    sampler = ArcusSelector.from_state_dict(
        {**state, "hyperparameters": {**state["hyperparameters"], "selection": "sample"}}
    )
    draws = np.bincount([sampler.select(1)[0] for _ in range(20_000)], minlength=4) / 20_000
    np.testing.assert_allclose(draws, scores / scores.sum(), atol=0.015)


def test_the_group_size_of_the_score_is_the_latest_observations_unless_set():
    learned, fixed = ArcusSelector(5), ArcusSelector(5, group_size=4)
    assert learned.scored_group_size == 8 and fixed.scored_group_size == 4
    for selector in (learned, fixed):
        selector.update([0, 1], [1, 2], [16, 16])
    assert learned.scored_group_size == 16 and fixed.scored_group_size == 4
    psi = learned.mean[[2]]
    assert learned.scores([2])[0] == pytest.approx(
        _arcsine.expectation(psi, learned.variance[[2]], lambda x: _arcsine.informative_probability(x, 16))[0]
    )


def test_the_state_continues_bit_for_bit_with_the_saved_hyperparameters():
    rng = np.random.default_rng(4)
    selector = ArcusSelector(40, drift=0.05, group_size=6, seed=3)
    for _ in range(6):
        batch = selector.select(5)
        selector.predict(rng.uniform(0, 1))
        selector.update(batch, rng.binomial(6, 0.4, 5), np.full(5, 6))
    twin = build_selector("arcus", 40, seed=99)  # other hyperparameters and seed: the state's win
    twin.load_state_dict(selector.state_dict())
    assert (twin.drift, twin.group_size) == (0.05, 6)
    restored = ArcusSelector.from_state_dict(selector.state_dict())
    for _ in range(6):
        norm = rng.uniform(0, 1)
        batches = [s.select(5, exclude=[0, 1]) for s in (selector, twin, restored)]
        successes = rng.binomial(6, 0.4, 5)
        for s, batch in zip((selector, twin, restored), batches):
            np.testing.assert_array_equal(batch, batches[0])
            s.predict(norm)
            s.update(batch, successes, np.full(5, 6))
    for s in (twin, restored):
        np.testing.assert_array_equal(s.mean, selector.mean)
        np.testing.assert_array_equal(s.variance, selector.variance)
        np.testing.assert_array_equal(s.predicted_success(), selector.predicted_success())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda state: state.update(mean=np.full(10, 2.0)), "outside"),
        (lambda state: state.update(variance=np.zeros(10)), "positive"),
        (lambda state: state.update(group_size_seen=0), "group_size_seen"),
        (lambda state: state.update(selector="mopps"), "ArcusSelector"),
        (lambda state: state.update(hyperparameters={"drift": -1.0}), "drift"),
    ],
)
def test_a_corrupted_state_is_refused_before_any_change(change, message):
    selector = ArcusSelector(10)
    selector.update([0, 1], [8, 3], [8, 8])
    state = selector.state_dict()
    change(state)
    before = ArcusSelector(10, seed=5)
    expected = before.state_dict()
    with pytest.raises(ValueError, match=message):
        before.load_state_dict(state)
    np.testing.assert_array_equal(before.mean, expected["mean"])
    assert before.state_dict()["rng_state"] == expected["rng_state"]


@pytest.mark.parametrize(
    "arguments",
    [{"initial_variance": 0.0}, {"drift": float("inf")}, {"group_size": 0}, {"group_size": True}, {"selection": "x"}],
)
def test_bad_hyperparameters_are_refused(arguments):
    with pytest.raises(ValueError):
        ArcusSelector(5, **arguments)
