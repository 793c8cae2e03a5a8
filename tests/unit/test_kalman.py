"""The vectorised filter against hand computations and against a scalar loop of Algorithm 1."""

import math

import numpy as np
import pytest
from reference import ScalarKGPS, expected_success_by_quadrature

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors import build_selector
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector


def test_one_update_from_a_known_prior_by_hand():
    selector = KGPSSelector(1, KGPSConfig.paper(warmup_epochs=0))
    # prior m = 0, P = 1; k = 8, s = 6 -> delta = 1/16, p~ = 1/2, R = 1/(8 * 1/4) = 1/2,
    # y = logit(3/4) = ln 3, K = 1 / (1 + 1/2) = 2/3 -> m = (2/3) ln 3, P = 1/3
    selector.update([0], [6], [8])
    assert selector.mean[0] == pytest.approx(2 / 3 * math.log(3), rel=1e-6)
    assert selector.variance[0] == pytest.approx(1 / 3, rel=1e-6)


def test_update_uses_the_plug_in_of_the_prior_mean():
    selector = KGPSSelector(1, KGPSConfig.paper())
    selector.initialize([0], [1], [4])  # m = logit(1/4) = -ln 3, P = 1
    # k = 4: delta = 1/8, p~ = 1/4, R = 1 / (4 * 3/16) = 4/3, K = 1 / (1 + 4/3) = 3/7
    # s = 2: y = logit(1/2) + ln 3 = ln 3 -> m = -ln 3 + (3/7) ln 3 = -(4/7) ln 3, P = 4/7
    selector.update([0], [2], [4])
    assert selector.mean[0] == pytest.approx(-4 / 7 * math.log(3), rel=1e-6)
    assert selector.variance[0] == pytest.approx(4 / 7, rel=1e-6)


@pytest.mark.parametrize("s, observed_logit", [(0, -math.log(15)), (8, math.log(15))])
def test_all_wrong_and_all_right_groups_are_clipped_not_infinite(s, observed_logit):
    selector = KGPSSelector(1, KGPSConfig.paper(warmup_epochs=0))
    # k = 8: phi_hat = clip(s/8, 1/16, 15/16), logit = -+ln 15; R = 1/2, K = 2/3
    selector.update([0], [s], [8])
    assert selector.mean[0] == pytest.approx(2 / 3 * observed_logit, rel=1e-6)
    assert selector.variance[0] == pytest.approx(1 / 3, rel=1e-6)
    selector.initialize([0], [s], [8])
    assert selector.mean[0] == pytest.approx(observed_logit, rel=1e-6)


def test_trials_may_differ_per_prompt():
    selector = KGPSSelector(2, KGPSConfig.paper(warmup_epochs=0))
    selector.update([0, 1], [3, 3], [4, 16])
    # k = 4: R = 1, K = 1/2, y = ln 3;  k = 16: R = 1/4, K = 4/5, y = logit(3/16) = ln(3/13)
    np.testing.assert_allclose(selector.mean, [0.5 * math.log(3), 0.8 * math.log(3 / 13)], rtol=1e-6)
    np.testing.assert_allclose(selector.variance, [0.5, 0.2], rtol=1e-6)


def test_variance_grows_by_q_without_observations():
    selector = KGPSSelector(3, KGPSConfig.paper(gamma=0.1))
    selector.predict(0.5)
    np.testing.assert_allclose(selector.variance, 1.05, rtol=1e-7)
    selector.predict([0.3, 0.4])  # two optimizer steps: the variances of the random walk add
    np.testing.assert_allclose(selector.variance, 1.12, rtol=1e-7)
    np.testing.assert_array_equal(selector.mean, 0.0)


def test_process_noise_variants():
    assert KGPSSelector(1, KGPSConfig.paper(gamma=0.2)).process_noise(3.0) == pytest.approx(0.6)
    assert ExperimentalSelector(1, ExperimentalConfig.paper(gamma=0.2, process_noise_power=2)).process_noise(
        [1.0, 2.0]
    ) == pytest.approx(1.0)
    assert (
        ExperimentalSelector(1, ExperimentalConfig.paper(fixed_process_noise=0.03)).process_noise([5.0, 7.0]) == 0.03
    )


def test_zero_trials_leave_a_prompt_unchanged():
    selector = KGPSSelector(2, KGPSConfig.paper())
    selector.update([0, 1], [0, 3], [0, 4])
    assert selector.mean[0] == 0.0 and selector.variance[0] == 1.0
    assert selector.mean[1] != 0.0


def test_empty_observations_change_nothing():
    selector = KGPSSelector(3, KGPSConfig.paper())
    before = selector.state_dict()
    selector.update([], [], [])
    selector.initialize(np.empty(0, np.int64), [], [])
    np.testing.assert_array_equal(selector.mean, before["mean"])
    np.testing.assert_array_equal(selector.variance, before["variance_base"])


def test_repeated_indices_pool_into_one_observation():
    pooled, split = KGPSSelector(4, KGPSConfig.paper()), KGPSSelector(4, KGPSConfig.paper())
    pooled.update([2], [3], [8])
    split.update([2, 2], [1, 2], [4, 4])
    np.testing.assert_array_equal(pooled.mean, split.mean)
    np.testing.assert_array_equal(pooled.variance, split.variance)
    pooled.initialize([1], [5], [8])
    split.initialize([1, 1, 1], [3, 2, 0], [4, 4, 0])
    np.testing.assert_array_equal(pooled.mean, split.mean)


def test_initialize_resets_the_variance_after_predictions():
    selector = KGPSSelector(2, KGPSConfig.paper(initial_variance=0.7))
    selector.predict(3.0)
    selector.initialize([1], [2], [8])
    np.testing.assert_allclose(selector.variance, [1.0, 0.7], rtol=1e-6)
    assert selector.mean[1] == pytest.approx(math.log(1 / 3), rel=1e-6)


@pytest.mark.parametrize(
    "config, scalar_kwargs",
    [
        (KGPSConfig.paper(), {}),
        (
            ExperimentalConfig.paper(gamma=0.5, initial_variance=2.0, process_noise_power=2.0),
            dict(gamma=0.5, initial_variance=2.0, power=2.0),
        ),
        (ExperimentalConfig.paper(fixed_process_noise=0.07), dict(fixed_q=0.07)),
    ],
)
def test_vectorised_filter_matches_a_scalar_loop(config, scalar_kwargs, rng):
    N = 300
    selector, scalar = build_selector("kgps", N, config), ScalarKGPS(N, **scalar_kwargs)
    k0 = rng.integers(1, 17, N)
    s0 = rng.binomial(k0, rng.uniform(size=N))
    selector.initialize(np.arange(N), s0, k0)
    for i in range(N):
        scalar.initialize(i, s0[i], k0[i])
    for _ in range(60):
        norms = rng.uniform(0, 0.8, rng.integers(1, 4))
        selector.predict(norms)
        scalar.predict(norms)
        idx = rng.choice(N, 32, replace=False)
        k = rng.integers(0, 17, 32)
        s = rng.binomial(k, rng.uniform(size=32))
        selector.update(idx, s, k)
        for i, si, ki in zip(idx, s, k):
            if ki:
                scalar.update(i, si, ki)
    # float32 state: means to 1e-6 relative; variances to 3e-8 absolute (the folded offset) plus 1e-6 relative
    np.testing.assert_allclose(selector.mean, scalar.m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(selector.variance, scalar.P, rtol=1e-5, atol=1e-6)
    expected = [expected_success_by_quadrature(m, P) for m, P in zip(scalar.m, scalar.P)]
    np.testing.assert_allclose(selector.predicted_success(), expected, rtol=1e-5)
