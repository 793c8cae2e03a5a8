"""Independent scalar oracles, written from the paper's equations with `math` only."""

import math

import numpy as np


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
