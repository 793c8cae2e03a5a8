"""
Each filter class on its own, without the `KGPSSelector` facade, against the independent oracles of `reference.py`:
the paper's filter against a scalar loop of Algorithm 1, the binomial update against the exact posterior by
quadrature, the shared filter against the exact joint Kalman filter.
"""

import numpy as np
import pytest
from reference import DenseKalman, ScalarKGPS, posterior_by_quadrature
from scipy import integrate, stats

from trl_kgps.selectors.per_prompt import PerPromptFilter
from trl_kgps.selectors.shared_factor import design
from trl_kgps.selectors.shared_filter import SharedFilter


def test_the_logit_filter_is_algorithm_1_one_prompt_at_a_time(rng):
    N, P0, gamma = 200, 2.0, 0.5
    kalman, scalar = PerPromptFilter(N, P0, "logit"), ScalarKGPS(N, gamma=gamma, initial_variance=P0)
    k0 = rng.integers(1, 17, N)
    s0 = rng.binomial(k0, rng.uniform(size=N)).astype(float)
    assert kalman.initialize(np.arange(N), s0, k0.astype(float)) is None  # a warmup, not an update
    for i in range(N):
        scalar.initialize(i, s0[i], k0[i])
    folded = 0.0
    for _ in range(40):
        norms = rng.uniform(0, 0.8, 2)
        folded += kalman.predict(gamma * norms.sum())
        scalar.predict(norms)
        idx = np.sort(rng.choice(N, 24, replace=False))
        k = rng.integers(1, 17, 24).astype(float)
        s = rng.binomial(k.astype(int), rng.uniform(size=24)).astype(float)
        assert kalman.update(idx, s, k).shape == (24,)
        for i, si, ki in zip(idx, s, k):
            scalar.update(i, si, ki)
    assert folded > 0  # the variance offset was folded into P along the way
    m, P = kalman.moments(np.arange(N))
    # float32 state: means to 1e-6 relative; variances to 3e-8 absolute (the folded offset) plus 1e-6 relative
    np.testing.assert_allclose(m, scalar.m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(P, scalar.P, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(kalman.mean, scalar.m, rtol=1e-5, atol=1e-6)  # float32, the facade's `mean`
    np.testing.assert_allclose(kalman.variance, scalar.P, rtol=1e-5, atol=1e-6)


def test_the_binomial_filter_is_the_exact_posterior_and_its_warmup_starts_from_the_prior():
    exact = PerPromptFilter(4, 1.5, "binomial")
    s, k = np.array([0.0, 3.0, 8.0]), np.array([8.0, 4.0, 8.0])
    exact.initialize(np.array([0, 1, 2]), s, k)
    for i in range(3):
        want = posterior_by_quadrature(0.0, 1.5, s[i], k[i])
        np.testing.assert_allclose(exact.moments(np.array([i])), np.array(want)[:, None], rtol=2e-5, atol=1e-5)
    exact.predict(0.3)
    prior = exact.moments(np.array([1, 3]))
    exact.update(np.array([1, 3]), np.array([5.0, 1.0]), np.array([16.0, 16.0]))
    for j, (i, si) in enumerate(((1, 5), (3, 1))):
        want = posterior_by_quadrature(prior[0][j], prior[1][j], si, 16)
        np.testing.assert_allclose(exact.moments(np.array([i])), np.array(want)[:, None], rtol=2e-5, atol=1e-5)


def test_the_drift_moves_every_prompt_by_its_share_of_the_batch_s_mean_change():
    drifting = PerPromptFilter(5, 1.0, "binomial", drift_share=0.25)
    prior = drifting.moments(np.arange(5))
    drifting.update(np.array([0, 1]), np.array([8.0, 7.0]), np.array([8.0, 8.0]))
    posterior = posterior_by_quadrature(0.0, 1.0, 8, 8)[0], posterior_by_quadrature(0.0, 1.0, 7, 8)[0]
    shift = 0.25 * np.mean(posterior)
    m, P = drifting.moments(np.arange(5))
    np.testing.assert_allclose(m[:2], posterior, rtol=2e-5)  # the observed prompts: their own posterior
    np.testing.assert_allclose(m[2:], shift, rtol=1e-6)  # the others: the share of the batch's change
    np.testing.assert_array_equal(P[2:], prior[1][2:])


@pytest.mark.parametrize("noise_share", [0.0, 0.5, 1.0])
def test_the_shared_filter_is_the_exact_joint_filter_after_one_batch(noise_share):
    # From a factorised belief, one batch: every prompt's mean, the shared factor's moments and the variance of every
    # prompt the batch did not hold are the exact joint posterior's (shared_factor.py says why an observed prompt's
    # is not).
    level = np.repeat(np.arange(4), 10)
    rows = design(level.size, {"level": level})
    shared = SharedFilter(rows, 1.0, 0.7, noise_share, residual_adaptation=0.0)
    dense = DenseKalman(rows.rows[rows.row_of], 1.0, 0.7)
    shared.predict(0.4)
    dense.predict(noise_share * 0.4, (1 - noise_share) * 0.4)
    np.testing.assert_allclose(shared.variance, dense.moments()[1], rtol=1e-6)  # each logit variance grew by Q
    batch = np.array([0, 3, 11, 25, 26, 27])
    s, k = np.array([8.0, 6.0, 1.0, 7.0, 4.0, 8.0]), np.full(6, 8.0)
    shared.update(batch, s, k)
    dense.update(batch, s, k)
    mean, variance = shared.moments(np.arange(level.size))
    exact_mean, exact_variance = dense.moments()
    np.testing.assert_allclose(mean, exact_mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(shared.factor.mu, dense.x[: rows.dimension], atol=1e-12)
    np.testing.assert_allclose(shared.factor.Sigma, dense.C[: rows.dimension, : rows.dimension], atol=1e-12)
    unobserved = np.setdiff1d(np.arange(level.size), batch)
    np.testing.assert_allclose(variance[unobserved], exact_variance[unobserved], rtol=1e-6)
    assert (variance[batch] > exact_variance[batch]).all()


def test_the_shared_filter_s_innovations_are_each_outcome_s_under_its_prior_marginal():
    rows = design(6, {"level": [0, 0, 0, 1, 1, 1]})
    shared = SharedFilter(rows, 1.0, 0.7, 0.5, residual_adaptation=0.0)
    shared.update(np.array([0, 3]), np.array([8.0, 0.0]), np.array([8.0, 8.0]))
    batch, s, k = np.array([1, 3, 5]), np.array([6.0, 1.0, 0.0]), np.array([8.0, 4.0, 8.0])
    a, S = shared.moments(batch)
    nis = shared.update(batch, s, k)
    for j in range(batch.size):  # E[s] and Var[s] of the binomial mixture over N(a, S), by adaptive quadrature
        pmf = np.array([_binomial_mixture(a[j], S[j], k[j], successes) for successes in range(int(k[j]) + 1)])
        values = np.arange(k[j] + 1)
        expected, spread = values @ pmf, values**2 @ pmf - (values @ pmf) ** 2
        assert nis[j] == pytest.approx((s[j] - expected) ** 2 / spread, rel=1e-5)


def test_the_shared_filter_s_warmup_resets_a_residual_to_its_prior_and_keeps_what_the_factor_learnt():
    rows = design(6, {"level": [0, 0, 0, 1, 1, 1]})
    warm, by_hand = (SharedFilter(rows, 1.0, 0.7, 0.5, residual_adaptation=0.0) for _ in range(2))
    for shared in (warm, by_hand):
        shared.predict(0.3)
        shared.update(np.array([0, 3]), np.array([8.0, 0.0]), np.array([8.0, 8.0]))
    nis = warm.initialize(np.array([0]), np.array([2.0]), np.array([8.0]))
    by_hand.m[0], by_hand.P[0] = 0.0, 0.7 - by_hand.c  # the residual's prior N(0, P0), the factor as it was
    np.testing.assert_array_equal(nis, by_hand.update(np.array([0]), np.array([2.0]), np.array([8.0])))
    np.testing.assert_array_equal(warm.m, by_hand.m)
    np.testing.assert_array_equal(warm.P, by_hand.P)
    np.testing.assert_array_equal(warm.factor.Sigma, by_hand.factor.Sigma)


def _binomial_mixture(m: float, P: float, k: float, s: int) -> float:
    """P(s | k) for s ~ Binomial(k, sigmoid(psi)), psi ~ N(m, P), by adaptive quadrature."""
    return integrate.quad(
        lambda x: stats.norm.pdf(x, m, np.sqrt(P)) * stats.binom.pmf(s, k, 1 / (1 + np.exp(-x))),
        m - 15 * np.sqrt(P),
        m + 15 * np.sqrt(P),
    )[0]
