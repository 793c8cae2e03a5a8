r"""
The arcsine coordinate's math (`arcus.ArcusSelector`): a Gaussian belief over \\(\psi = \arcsin\sqrt{p}\\), held on
\\([0, \pi/2]\\), observed through groups of binomial rollouts. Numpy only.

A prompt's success rate is \\(p = \sin^2\psi\\), \\(\psi \in [0, \pi/2]\\) (radians). Its belief is the Gaussian
\\(\mathcal{N}(m, v)\\) restricted to \\([0, \pi/2]\\): density \\(\propto \exp(-(\psi - m)^2 / (2v))\\) there, 0
elsewhere (\\(m\\) in radians, \\(v\\) in radians squared). A group of \\(n\\) rollouts with \\(s\\) successes,
\\(s \sim \mathrm{Binomial}(n, \sin^2\psi)\\), updates it:

- mixed, \\(0 < s < n\\): \\(y = \arcsin\sqrt{s/n}\\) has variance \\(\approx 1/(4n)\\) at every \\(p\\) (the
  variance-stabilising transform), so the update is Kalman's (`kalman_update`):

      R = 1 / (4n),   K = v / (v + R),   m' = m + K (y - m),   v' = (1 - K) v

  (\\(m'\\) lies between \\(m\\) and \\(y\\), so inside \\([0, \pi/2]\\));
- unanimous, \\(s = 0\\) or \\(s = n\\) (the boundary layer, where \\(y\\) sits on an edge and the transform's noise is
  not \\(1/(4n)\\)): the exact likelihood \\(\cos^{2n}\psi\\) or \\(\sin^{2n}\psi\\) times the restricted prior, whose
  log density is, for any \\(s\\),

      f(psi) = -(psi - m)^2 / (2v) + 2s log sin(psi) + 2(n - s) log cos(psi),

  moment-matched: \\(m', v'\\) are its mean and variance (`posterior_moments`).

Quadrature. On \\((0, \pi/2)\\), \\(-f'' = 1/v + 2s / \sin^2\psi + 2(n - s) / \cos^2\psi \ge 1/v + 2n = 1/w^2\\): the
posterior falls at least as fast as a Gaussian of standard deviation \\(w\\) away from its mode \\(\hat\psi\\), which
bisection on the decreasing \\(f'\\) finds. Beyond \\(\hat\psi \pm 12 w\\) the density is below \\(e^{-72}\\) of its
peak, so `NODES`-point Gauss–Legendre quadrature on \\([\hat\psi - 12w, \hat\psi + 12w] \cap [0, \pi/2]\\) gives the
moments (to about 1e-8 of the posterior's spread; Gauss–Hermite would put nodes outside the interval). With
\\(n = 0\\) the same rule gives expectations under the belief itself (`expectation`).
"""

import math
from collections.abc import Callable

import numpy as np


PSI_MAX = math.pi / 2  # psi of a prompt always solved
NODES = 64
WINDOW = 12.0  # half-width of the quadrature window, in units of w
BISECTION_STEPS = 60  # pi/2 * 2^-60: the mode to float64 resolution
_X, _W = np.polynomial.legendre.leggauss(NODES)
_LOG_W = np.log(_W)


def success_rate(psi: np.ndarray) -> np.ndarray:
    r"""\\(p = \sin^2\psi\\), elementwise."""
    return np.sin(psi) ** 2


def arcsine(p: np.ndarray) -> np.ndarray:
    r"""\\(\psi = \arcsin\sqrt{p}\\), elementwise, in \\([0, \pi/2]\\)."""
    return np.arcsin(np.sqrt(p))


def informative_probability(psi: np.ndarray, group_size: int) -> np.ndarray:
    r"""
    \\(u(\psi) = 1 - p^G - (1 - p)^G\\), \\(p = \sin^2\psi\\): the chance that a group of \\(G\\) rollouts holds a
    success and a failure (GRPO learns only from those). Shape of `psi`, values in \\([0, 1)\\).
    """
    return 1.0 - np.sin(psi) ** (2 * group_size) - np.cos(psi) ** (2 * group_size)


def kalman_update(m: np.ndarray, v: np.ndarray, s: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""
    The update by mixed groups (\\(0 < s < n\\)): Kalman's, observing \\(y = \arcsin\sqrt{s/n}\\) with noise
    \\(R = 1/(4n)\\).

    Args:
        m, v, s, n (`np.ndarray` of shape `(k,)`, float64): prior means (radians) and variances (radians squared),
            successes and trials.

    Returns:
        `(mean, variance)`, each `np.ndarray` of shape `(k,)`, float64.
    """
    y = arcsine(s / n)
    R = 1.0 / (4.0 * n)
    K = v / (v + R)
    # m' = m + K (y - m),   v' = (1 - K) v
    return m + K * (y - m), (1.0 - K) * v


def posterior_moments(m: np.ndarray, v: np.ndarray, s: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""
    The mean and variance of \\(p(\psi \mid s) \propto \mathcal{N}(\psi; m, v)\, \sin^{2s}\psi \cos^{2(n-s)}\psi\\) on
    \\([0, \pi/2]\\), by quadrature (the module docstring); the boundary layer's update for \\(s \in \{0, n\}\\).

    Args:
        m, v, s, n (`np.ndarray` of shape `(k,)`, float64): prior means in \\([0, \pi/2]\\), variances \\(> 0\\),
            successes and trials (\\(0 \le s \le n\\); \\(n = 0\\) gives the moments of the belief itself).

    Returns:
        `(mean, variance)`, each `np.ndarray` of shape `(k,)`, float64.
    """
    psi, W = _nodes(m, v, s, n)
    mean = np.sum(W * psi, axis=1)
    return mean, np.sum(W * (psi - mean[:, None]) ** 2, axis=1)


def expectation(m: np.ndarray, v: np.ndarray, g: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    r"""
    \\(\mathbb{E}[g(\psi)]\\) under each belief \\(\mathcal{N}(m, v)\\) restricted to \\([0, \pi/2]\\): `g` maps nodes
    of shape `(k, NODES)` to values of that shape. Returns shape `(k,)`, float64.
    """
    zero = np.zeros_like(m)
    psi, W = _nodes(m, v, zero, zero)
    return np.sum(W * g(psi), axis=1)


def _nodes(m: np.ndarray, v: np.ndarray, s: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The quadrature's nodes and normalised weights on each posterior's window, `(k, NODES)` each."""
    m, v, s, n = (np.asarray(a, dtype=np.float64) for a in (m, v, s, n))
    mode = _mode(m, v, s, n)
    w = 1.0 / np.sqrt(1.0 / v + 2.0 * n)
    lo, hi = np.maximum(mode - WINDOW * w, 0.0), np.minimum(mode + WINDOW * w, PSI_MAX)
    psi = ((lo + hi) / 2)[:, None] + ((hi - lo) / 2)[:, None] * _X
    log_f = _log_posterior(psi, m[:, None], v[:, None], s[:, None], n[:, None])
    # Legendre's weights times the density; the window's half-width is the same along a row and cancels
    log_weight = _LOG_W + log_f
    W = np.exp(log_weight - log_weight.max(axis=1, keepdims=True))
    return psi, W / W.sum(axis=1, keepdims=True)


def _mode(m: np.ndarray, v: np.ndarray, s: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The maximiser of `f` on `[0, pi/2]`: `m` itself where `n = 0`, else by bisection on the decreasing `f'`."""
    observed = n > 0
    mode = np.clip(m, 0.0, PSI_MAX)
    if not observed.any():
        return mode
    m, v, s, n = m[observed], v[observed], s[observed], n[observed]
    lo, hi = np.zeros_like(m), np.full_like(m, PSI_MAX)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2  # never an end point: cot and tan are finite
        # f'(psi) = -(psi - m) / v + 2s cot(psi) - 2(n - s) tan(psi)
        rising = -(mid - m) / v + 2.0 * s / np.tan(mid) - 2.0 * (n - s) * np.tan(mid) > 0
        lo, hi = np.where(rising, mid, lo), np.where(rising, hi, mid)
    mode[observed] = (lo + hi) / 2
    return mode


def _log_posterior(psi, m, v, s, n):
    # the nodes lie inside (0, pi/2): both logarithms are finite, and a zero count zeroes its term
    return -0.5 * (psi - m) ** 2 / v + 2.0 * s * np.log(np.sin(psi)) + 2.0 * (n - s) * np.log(np.cos(psi))
