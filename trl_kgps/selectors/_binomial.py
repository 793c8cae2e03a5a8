r"""
The binomial observation of a Gaussian logit belief, handled exactly: the posterior's moments and the predictive
distribution of the successes, by adaptive Gauss–Hermite quadrature.

A prompt with belief \\(\psi \sim \mathcal{N}(m, P)\\) is rolled out \\(k\\) times and succeeds \\(s\\) times,
\\(s \sim \mathrm{Binomial}(k, \sigma(\psi))\\). Its log posterior, up to a constant, is

    f(psi) = -(psi - m)^2 / (2P) + s log sigma(psi) + (k - s) log(1 - sigma(psi)),
    f'(psi) = -(psi - m) / P + s - k sigma(psi),        f''(psi) = -1/P - k sigma(psi)(1 - sigma(psi)) < 0.

`posterior_moments` finds the mode \\(\hat\psi\\) by Newton's method (\\(f\\) is strictly concave), then integrates
the exact posterior on Gauss–Hermite nodes centred at \\(\hat\psi\\) and scaled by the Laplace width
\\(\ell = (-f''(\hat\psi))^{-1/2}\\):

    psi_j = psi_hat + sqrt(2) l x_j,    W_j = w_j exp(x_j^2 + f(psi_j) - f(psi_hat)),
    m' = sum_j W_j psi_j / sum_j W_j,    P' = sum_j W_j (psi_j - m')^2 / sum_j W_j.

This is the Gaussian closest to the true posterior in KL(true || Gaussian) (moment matching, as in assumed-density
filtering). Unlike the paper's update through \\(\mathrm{logit}(\mathrm{clip}(s/k))\\), repeated unanimous groups
keep moving the belief outwards: a prompt that succeeded 8/8 five times in a row is believed more solved than one
that did once.

`predictive_moments` gives the prior-predictive mean and variance of \\(s\\) (what the normalized innovation
squared divides by):

    E[s] = k E[sigma(psi)],    Var[s] = k E[sigma(psi)(1 - sigma(psi))] + k^2 Var[sigma(psi)].
"""

import numpy as np


NEWTON_STEPS = 50  # at most; it stops when a step falls below 1e-12
NODES = 48
_X, _W = np.polynomial.hermite.hermgauss(NODES)
_LOG_W = np.log(_W)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(_log_sigmoid(x))


def posterior_moments(m: np.ndarray, P: np.ndarray, s: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""
    The mean and variance of
    \\(p(\psi \mid s) \propto \mathcal{N}(\psi; m, P)\, \sigma(\psi)^s (1 - \sigma(\psi))^{k-s}\\).

    Args:
        m, P, s, k (`np.ndarray` of shape `(n,)`, float64): prior means and variances (\\(P > 0\\)), successes and
            trials (\\(0 \le s \le k\\)).

    Returns:
        `(mean, variance)`, each `np.ndarray` of shape `(n,)`, float64.
    """
    m, P, s, k = (np.asarray(a, dtype=np.float64) for a in (m, P, s, k))
    mode = m.copy()
    for _ in range(NEWTON_STEPS):
        p = _sigmoid(mode)
        gradient = -(mode - m) / P + s - k * p
        curvature = 1.0 / P + k * p * (1.0 - p)  # -f''
        # Newton's step, capped at 4 logits: the first steps from far-off starts overshoot otherwise.
        step = np.clip(gradient / curvature, -4.0, 4.0)
        mode = mode + step
        if np.max(np.abs(step), initial=0.0) < 1e-12:  # quadratic convergence: the next step is below 1e-24
            break
    p = _sigmoid(mode)
    width = 1.0 / np.sqrt(1.0 / P + k * p * (1.0 - p))
    nodes = mode[:, None] + np.sqrt(2.0) * width[:, None] * _X[None, :]
    log_f = _log_posterior(nodes, m[:, None], P[:, None], s[:, None], k[:, None])
    log_f -= _log_posterior(mode[:, None], m[:, None], P[:, None], s[:, None], k[:, None])
    log_weight = _LOG_W + _X**2 + log_f
    weight = np.exp(log_weight - log_weight.max(axis=1, keepdims=True))
    weight /= weight.sum(axis=1, keepdims=True)
    mean = np.sum(weight * nodes, axis=1)
    variance = np.sum(weight * (nodes - mean[:, None]) ** 2, axis=1)
    return mean, variance


def _log_posterior(psi, m, P, s, k):
    return -0.5 * (psi - m) ** 2 / P + s * _log_sigmoid(psi) + (k - s) * _log_sigmoid(-psi)


def predictive_moments(m: np.ndarray, P: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""
    The prior-predictive mean and variance of the successes \\(s\\) in \\(k\\) rollouts, by `NODES`-point
    Gauss–Hermite quadrature over \\(\psi \sim \mathcal{N}(m, P)\\).

    Returns:
        `(E[s], Var[s])`, each `np.ndarray` of shape `(n,)`, float64.
    """
    m, P, k = (np.asarray(a, dtype=np.float64) for a in (m, P, k))
    nodes = m[:, None] + np.sqrt(2.0 * P)[:, None] * _X[None, :]
    w = _W / np.sqrt(np.pi)
    p = _sigmoid(nodes)
    mean_p = p @ w
    var_p = np.maximum((p**2) @ w - mean_p**2, 0.0)
    bernoulli = (p * (1.0 - p)) @ w
    return k * mean_p, k * bernoulli + k**2 * var_p


def innovations_squared(m: np.ndarray, P: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
    r"""
    Each prompt's normalized innovation squared \\((s - \mathbb{E}[s])^2 / \mathrm{Var}[s]\\) under its prior
    \\(\mathcal{N}(m, P)\\) (`predictive_moments`): shape `(n,)`, float64, 1 on average when the prior is right.
    """
    predicted, spread = predictive_moments(m, P, k)
    return (s - predicted) ** 2 / spread
