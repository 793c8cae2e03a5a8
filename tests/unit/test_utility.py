"""The Gauss-Hermite posterior utility against numpy's rule in float64 and against scipy's adaptive quadrature."""

import math

import numpy as np
import pytest
from reference import expected_success_by_quadrature, gauss_hermite_utility, sigmoid
from scipy import integrate, special

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors._utility import UTILITY_MAX_RISE_PER_VARIANCE, WIDE_VARIANCE, Utility, expected_success
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector


def utility(mean, variance, points=5):
    return Utility(points)(np.asarray(mean, np.float32), np.asarray(variance, np.float32))


def test_papers_rounded_nodes_and_weights_are_numpys_five_point_rule():
    x, w = np.polynomial.hermite.hermgauss(5)
    order = np.argsort(x)
    paper = [(-2.0202, 0.0200), (-0.9586, 0.3936), (0.0, 0.9453), (0.9586, 0.3936), (2.0202, 0.0200)]
    np.testing.assert_allclose(x[order], [p[0] for p in paper], atol=5e-5)
    np.testing.assert_allclose(w[order], [p[1] for p in paper], atol=5e-5)
    # The paper's 4-digit weights sum to 1.7725, full precision to sqrt(pi): we use full precision.
    assert w.sum() == pytest.approx(math.sqrt(math.pi), rel=1e-14)


@pytest.mark.parametrize("points", [2, 3, 5, 8, 20])
def test_matches_the_gauss_hermite_sum_in_float64(points):
    grid_m, grid_P = np.meshgrid(np.linspace(-12, 12, 49), np.concatenate([[0.0], np.geomspace(1e-4, 1e4, 40)]))
    got = utility(grid_m.ravel(), grid_P.ravel(), points)
    want = [gauss_hermite_utility(float(m), float(P), points) for m, P in zip(grid_m.ravel(), grid_P.ravel())]
    # float32 inputs and arithmetic: a few ulps of values <= 0.25
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-8)


def test_point_estimate_is_h_of_the_mean():
    m = np.linspace(-20, 20, 101)
    got = Utility(None)(m.astype(np.float32), np.full(101, 7.0, np.float32))
    np.testing.assert_allclose(got, special.expit(m) * special.expit(-m), rtol=2e-6, atol=1e-12)


def _exact_expectation(m, P):
    if P == 0:
        return sigmoid(m) * sigmoid(-m)
    sd = math.sqrt(P)

    def integrand(z):
        return special.expit(m + sd * z) * special.expit(-m - sd * z) * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    return integrate.quad(integrand, -40, 40, points=[-m / sd], limit=200, epsabs=1e-13)[0]


# The five-point rule's error against the exact expectation grows with the variance, as its nodes spread past
# the width of h. Bounds asserted, each ~1.5x the largest error measured on the grid of m in [-8, 8]:
QUADRATURE_ERROR_BOUNDS = [
    ((0.0, 0.1), 1e-7),
    ((0.1, 0.5), 3e-5),
    ((0.5, 1.0), 4e-4),
    ((1.0, 2.0), 3e-3),
    ((2.0, 4.0), 1.2e-2),
    ((4.0, 10.0), 4.5e-2),
    ((10.0, 100.0), 0.15),
]


@pytest.mark.parametrize("variance_range, bound", QUADRATURE_ERROR_BOUNDS)
def test_five_point_rule_against_adaptive_quadrature(variance_range, bound):
    m, P = np.meshgrid(np.linspace(-8, 8, 33), np.linspace(*variance_range, 11))
    got = utility(m.ravel(), P.ravel())
    want = np.array([_exact_expectation(float(a), float(b)) for a, b in zip(m.ravel(), P.ravel())])
    assert np.abs(got - want).max() <= bound


def test_more_nodes_converge_to_the_exact_expectation():
    want = _exact_expectation(1.3, 3.0)
    errors = [abs(float(utility([1.3], [3.0], n)[0]) - want) for n in (5, 10, 20, 40)]
    assert errors == sorted(errors, reverse=True)
    assert errors[-1] < 1e-6


def test_extreme_beliefs_stay_finite_and_in_range():
    m = np.array([-1e6, -60, -43, 0, 43, 60, 1e6, 5, -5], np.float32)
    P = np.array([1e12, 0, 1e6, 1e9, 0, 1e6, 0, 1e30, 1e-30], np.float32)
    with np.errstate(all="raise"):
        got = utility(m, P)
    assert np.isfinite(got).all() and (got >= 0).all() and (got <= 0.25).all()


@pytest.mark.parametrize("points", [2, 5, 9])
def test_utility_rises_at_most_one_48th_per_unit_of_variance(points):
    """dA/dP <= 1/48 (and >= -1/16), the bounds the exact top-B relies on (proof in `_utility`'s docstring)."""
    m = np.linspace(-10, 10, 401)[:, None]
    P = np.concatenate([[0.0], np.geomspace(1e-6, 1e3, 400)])[None, :]
    x, w = np.polynomial.hermite.hermgauss(points)
    spread = np.sqrt(2 * P)
    A = sum(wj * special.expit(m + spread * xj) * special.expit(-m - spread * xj) for xj, wj in zip(x, w)) / np.sqrt(
        np.pi
    )
    slope = np.diff(A, axis=1) / np.diff(P, axis=1)
    assert slope.max() <= UTILITY_MAX_RISE_PER_VARIANCE
    assert slope.max() >= 0.6 * UTILITY_MAX_RISE_PER_VARIANCE
    assert slope.min() >= -1 / 16


def test_selector_scores_use_the_configured_utility():
    selector = KGPSSelector(3, KGPSConfig.paper(initial_variance=2.0))
    selector.initialize([0, 1, 2], [0, 4, 8], [8, 8, 8])
    m = [math.log(1 / 15), 0.0, math.log(15)]
    np.testing.assert_allclose(selector.scores(), [gauss_hermite_utility(v, 2.0) for v in m], rtol=2e-6)
    point = ExperimentalSelector(3, ExperimentalConfig.paper(utility="point"))
    point.initialize([0, 1, 2], [0, 4, 8], [8, 8, 8])
    np.testing.assert_allclose(point.scores(), [sigmoid(v) * sigmoid(-v) for v in m], rtol=2e-6)


@pytest.mark.parametrize(
    "variance", [0.0, 1e-6, 0.01, 0.5, WIDE_VARIANCE, WIDE_VARIANCE * (1 + 1e-4), 2.0, 16.0, 1e3, 1e4]
)
def test_expected_success_against_adaptive_quadrature(variance):
    # Both rules, and the switch between them: Gauss-Hermite up to WIDE_VARIANCE, the split rule above.
    means = np.linspace(-15.0, 15.0, 31)
    expected = [expected_success_by_quadrature(m, variance) for m in means]
    np.testing.assert_allclose(expected_success(means, np.full_like(means, variance)), expected, rtol=0, atol=1e-6)


def test_expected_success_is_symmetric_and_nearer_one_half_than_the_median():
    m, P = np.array([-3.0, -0.5, 0.0, 2.0, 40.0]), np.array([4.0, 0.3, 1e6, 9.0, 1e8])
    p = expected_success(m, P)
    np.testing.assert_allclose(p + expected_success(-m, P), 1.0, atol=1e-12)  # sigma(-x) = 1 - sigma(x)
    assert p[2] == 0.5
    median = np.array([sigmoid(v) for v in m])
    assert np.all(np.abs(p - 0.5) <= np.abs(median - 0.5))  # a wider belief pulls the mean of sigma towards 1/2
    assert p[-1] == pytest.approx(special.ndtr(40.0 / 1e4), abs=1e-6)  # a step on this scale: Phi(m / sqrt(P))
