"""
Independent oracles: the paper's equations one prompt at a time with `math` only, the exact binomial posterior by
scipy's adaptive quadrature, and the exact joint Kalman filter with a dense covariance (fed the same moment-matched
observations as the shared factor, so that what differs is the mean field alone).
"""

import math

import numpy as np
from scipy import integrate, stats

from trl_kgps.selectors._binomial import posterior_moments
from trl_kgps.selectors.shared_factor import pseudo_observations


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    return math.exp(x) / (1.0 + math.exp(x))


def clipped_logit(s: float, k: float) -> float:
    delta = 1.0 / (2.0 * k)
    phi = min(max(s / k, delta), 1.0 - delta)
    return math.log(phi / (1.0 - phi))


class ScalarKGPS:
    """Algorithm 1 of the paper, one prompt at a time, in float64."""

    def __init__(self, num_prompts, gamma=0.1, initial_variance=1.0, power=1.0, fixed_q=None):
        self.m = [0.0] * num_prompts
        self.P = [initial_variance] * num_prompts
        self.gamma, self.P0, self.power, self.fixed_q = gamma, initial_variance, power, fixed_q

    def initialize(self, i, s, k):
        self.m[i] = clipped_logit(s, k)
        self.P[i] = self.P0

    def predict(self, norms):
        q = self.fixed_q if self.fixed_q is not None else sum(self.gamma * n**self.power for n in norms)
        self.P = [p + q for p in self.P]

    def update(self, i, s, k):
        delta = 1.0 / (2.0 * k)
        p_tilde = min(max(sigmoid(self.m[i]), delta), 1.0 - delta)
        R = 1.0 / (k * p_tilde * (1.0 - p_tilde))
        K = self.P[i] / (self.P[i] + R)
        self.m[i] = self.m[i] + K * (clipped_logit(s, k) - self.m[i])
        self.P[i] = (1.0 - K) * self.P[i]


def gauss_hermite_utility(m: float, P: float, n: int = 5) -> float:
    """(1/sqrt(pi)) sum_j w_j h(m + sqrt(2P) x_j), with numpy's Gauss-Hermite rule, in float64."""
    x, w = np.polynomial.hermite.hermgauss(n)
    return sum(
        wj * sigmoid(m + math.sqrt(2 * P) * xj) * sigmoid(-(m + math.sqrt(2 * P) * xj)) for xj, wj in zip(x, w)
    ) / math.sqrt(math.pi)


def posterior_by_quadrature(m: float, P: float, s: int, k: int) -> tuple[float, float]:
    """The mean and variance of N(psi; m, P) Binomial(s | k, sigmoid(psi)), normalised, by adaptive quadrature."""

    def density(psi):
        return stats.norm.pdf(psi, m, np.sqrt(P)) * stats.binom.pmf(s, k, 1 / (1 + np.exp(-psi)))

    lo, hi = m - 15 * np.sqrt(P) - 2, m + 15 * np.sqrt(P) + 2
    Z = integrate.quad(density, lo, hi, limit=400, epsabs=1e-13)[0]
    mean = integrate.quad(lambda x: x * density(x), lo, hi, limit=400, epsabs=1e-13)[0] / Z
    var = integrate.quad(lambda x: (x - mean) ** 2 * density(x), lo, hi, limit=400, epsabs=1e-13)[0] / Z
    return mean, var


def expected_success_by_quadrature(m: float, P: float) -> float:
    """E[sigmoid(psi)] for psi ~ N(m, P), by adaptive quadrature split at 0 and at m (sigmoid at P = 0)."""
    if P == 0:
        return sigmoid(m)
    sd = math.sqrt(P)
    points = sorted({0.0, float(m)})
    return integrate.quad(
        lambda t: stats.norm.pdf(t, m, sd) * sigmoid(t), m - 40 * sd, m + 40 * sd, points=points, limit=2000,
        epsabs=1e-14, epsrel=1e-12,
    )[0]  # fmt: skip


class DenseKalman:
    """The exact Kalman filter over x = (beta, r_1 .. r_N), with its full covariance; psi_i = z_i^T beta + r_i."""

    def __init__(self, rows: np.ndarray, shared_variance: float, residual_variance: float):
        N, D = rows.shape
        self.H = np.hstack([rows, np.eye(N)])  # (N, D + N): psi = H x
        self.D = D
        self.x = np.zeros(D + N)
        self.C = np.diag([shared_variance] * D + [residual_variance] * N)

    def predict(self, shared_noise: float, residual_noise: float) -> None:
        self.C += np.diag([shared_noise] * self.D + [residual_noise] * (self.C.shape[0] - self.D))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        return self.H @ self.x, np.einsum("nd,de,ne->n", self.H, self.C, self.H)

    def absorb(self, indices: np.ndarray, y: np.ndarray, R: np.ndarray) -> None:
        H = self.H[indices]
        S = H @ self.C @ H.T + np.diag(R)
        K = np.linalg.solve(S, H @ self.C).T
        self.x = self.x + K @ (y - H @ self.x)
        self.C = self.C - K @ H @ self.C
        self.C = (self.C + self.C.T) / 2

    def update(self, indices: np.ndarray, s: np.ndarray, k: np.ndarray) -> None:
        """The binomial outcomes, each moment-matched from its marginal as the shared factor does (one site each)."""
        mean, variance = self.moments()
        a, S = mean[indices], variance[indices]
        self.absorb(indices, *pseudo_observations(a, S, *posterior_moments(a, S, s, k)))
