r"""
The training utility of a prompt under its Gaussian logit belief, evaluated fast and in float32; and the belief's
predicted success, `expected_success`.

For a prompt with logit mean \\(m\\) and variance \\(P\\) the paper scores

    A(m, P) = E_{psi ~ N(m, P)}[h(psi)],    h(psi) = sigmoid(psi) * (1 - sigmoid(psi)) = 1 / (2 + 2 cosh psi)

by Gauss–Hermite quadrature with nodes \\(x_j\\) and weights \\(w_j\\):

    A(m, P) ~= (1 / sqrt(pi)) * sum_j w_j h(m + sqrt(2P) x_j).

The nodes come in pairs \\(\pm x_j\\) (plus \\(x = 0\\) when their number is odd), and for such a pair, with
\\(d = \sqrt{2P} x_j\\), \\(C = \cosh m\\) and \\(D = \cosh d\\),

    h(m + d) + h(m - d) = (1 + C D) / (C + D)^2,

which costs one `exp` per pair instead of one per node (three instead of five for the paper's rule).

`UTILITY_MAX_RISE_PER_VARIANCE` bounds how fast the quadrature estimate can *rise* when \\(P\\) grows. With
\\(h'' = h - 6h^2 \in [-1/8, 1/24]\\), a pair's derivative in \\(P\\) is
\\(\omega_j x_j (h'(m + d) - h'(m - d)) / \sqrt{2P} \le \omega_j x_j^2 / 12\\) (\\(\omega_j = w_j / \sqrt{\pi}\\)), and
the rule is exact for \\(x^2\\), \\(\sum_j \omega_j x_j^2 = 1/2\\), so \\(\partial A / \partial P \le 1/48\\) for any
rule with two or more nodes (and \\(\ge -1/16\\)). Both bounds are attained as \\(P \to 0\\). The point estimate
\\(h(m)\\) does not depend on \\(P\\) at all.
"""

import math

import numpy as np


# Below these magnitudes the arithmetic stays inside float32 ((2 e^43)^2 < 3.4e38); beyond them h < 1e-18.
# The logit mean never gets near: it is a convex combination of observed logits, |logit| <= log(2k - 1).
_MAX_ABS_LOGIT = 43.0
_CHUNK = 1 << 15  # prompts per block: the block's eight float32 work arrays stay in L2 cache

UTILITY_MAX_RISE_PER_VARIANCE = 1.0 / 48.0


class Utility:
    r"""
    Vectorised \\(A(m, P)\\) for arrays of prompts.

    Args:
        quadrature_points (`int` or `None`):
            Number of Gauss–Hermite nodes; `None` evaluates the point estimate \\(h(m)\\).
    """

    def __init__(self, quadrature_points: int | None):
        self.quadrature_points = quadrature_points
        if quadrature_points is None:
            self.max_rise_per_variance = 0.0
            self._center_weight = np.float32(1.0)
            self._pairs = []
            return
        x, w = np.polynomial.hermite.hermgauss(quadrature_points)
        w = w / np.sqrt(np.pi)
        self.max_rise_per_variance = UTILITY_MAX_RISE_PER_VARIANCE
        # Odd rules have a node at exactly 0 (hermgauss returns it as +-1e-16 at most).
        self._center_weight = np.float32(w[np.abs(x) < 1e-12].sum())
        self._pairs = [(np.float32(xj), np.float32(wj)) for xj, wj in zip(x, w) if xj > 1e-12]

    def __call__(self, mean: np.ndarray, variance: np.ndarray, variance_offset: float = 0.0) -> np.ndarray:
        """
        Args:
            mean (`np.ndarray` of shape `(n,)`, float32): logit means \\(m\\).
            variance (`np.ndarray` of shape `(n,)`, float32): logit variances \\(P\\), before the offset.
            variance_offset (`float`): added to every variance (the selector's pending process noise).

        Returns:
            `np.ndarray` of shape `(n,)`, float32: utilities in `[0, 0.25]`.
        """
        n = mean.shape[0]
        out = np.empty(n, dtype=np.float32)
        work = np.empty((6, min(n, _CHUNK)), dtype=np.float32)
        offset = np.float32(variance_offset)
        for lo in range(0, n, _CHUNK):
            hi = min(lo + _CHUNK, n)
            self._block(mean[lo:hi], variance[lo:hi], offset, out[lo:hi], work[:, : hi - lo])
        return out

    def _block(self, m, P, offset, acc, work):
        C2, s, D2, num, den, tmp = work  # C2 = 2 cosh(m), D2 = 2 cosh(d), s = sqrt(2P)
        np.clip(m, -_MAX_ABS_LOGIT, _MAX_ABS_LOGIT, out=tmp)
        np.exp(tmp, out=tmp)
        np.reciprocal(tmp, out=C2)
        np.add(C2, tmp, out=C2)
        # h(m) = 1 / (2 + 2 cosh m)
        np.add(C2, np.float32(2.0), out=acc)
        np.divide(self._center_weight, acc, out=acc)
        if not self._pairs:
            return
        np.add(P, offset, out=s)
        np.maximum(s, np.float32(0.0), out=s)  # float32 rounding of base + offset can dip below 0
        np.multiply(s, np.float32(2.0), out=s)
        np.sqrt(s, out=s)
        for x_j, w_j in self._pairs:
            # d = sqrt(2P) x_j;  D2 = e^d + e^-d
            np.multiply(s, x_j, out=tmp)
            np.minimum(tmp, np.float32(_MAX_ABS_LOGIT), out=tmp)
            np.exp(tmp, out=tmp)
            np.reciprocal(tmp, out=D2)
            np.add(D2, tmp, out=D2)
            # h(m + d) + h(m - d) = (1 + C D) / (C + D)^2 = (4 + C2 D2) / (C2 + D2)^2
            np.multiply(C2, D2, out=num)
            np.add(num, np.float32(4.0), out=num)
            np.add(C2, D2, out=den)
            np.multiply(den, den, out=den)
            np.divide(num, den, out=num)
            np.multiply(num, w_j, out=num)
            np.add(acc, num, out=acc)


def mixed_group_probability(psi: np.ndarray, group_size: int) -> np.ndarray:
    r"""
    \\(u(\psi) = 1 - \sigma(\psi)^k - (1 - \sigma(\psi))^k\\): the chance that a group of \\(k\\) rollouts holds both a
    success and a failure — the only groups from which GRPO learns (a unanimous group has zero advantage).

    Computed as \\(1 - e^{-k\,\mathrm{softplus}(-\psi)} - e^{-k\,\mathrm{softplus}(\psi)}\\), accurate for any
    \\(\psi\\). Shape and float type of `psi`, values in `[0, 1)`.
    """
    return -np.expm1(-group_size * np.logaddexp(0.0, -psi)) - np.exp(-group_size * np.logaddexp(0.0, psi))


def expected_mixed_group_probability(
    mean: np.ndarray, variance: np.ndarray, group_size: int, quadrature_points: int | None
) -> np.ndarray:
    r"""
    \\(\mathbb{E}_{\psi \sim \mathcal{N}(m, P)}[u(\psi)]\\) by `quadrature_points`-point Gauss–Hermite quadrature, or
    \\(u(m)\\) when `quadrature_points` is `None`.

    Args:
        mean, variance (`np.ndarray` of shape `(n,)`): logit means \\(m\\) and variances \\(P\\).
        group_size (`int`): \\(k\\), rollouts per prompt.

    Returns:
        `np.ndarray` of shape `(n,)`, float64, in `[0, 1)`.
    """
    mean = np.asarray(mean, dtype=np.float64)
    if quadrature_points is None:
        return mixed_group_probability(mean, group_size)
    x, w = np.polynomial.hermite.hermgauss(quadrature_points)
    nodes = mean[:, None] + np.sqrt(2.0 * np.maximum(np.asarray(variance, dtype=np.float64), 0.0))[:, None] * x
    return mixed_group_probability(nodes, group_size) @ (w / np.sqrt(np.pi))


_HERMITE_X, _HERMITE_W = np.polynomial.hermite.hermgauss(32)
_HERMITE_W = _HERMITE_W / np.sqrt(np.pi)
_LAGUERRE_X, _LAGUERRE_W = np.polynomial.laguerre.laggauss(32)
_LAGUERRE_SIGMOID = 1.0 / (1.0 + np.exp(-_LAGUERRE_X))  # sigma(-t) / e^-t at the Laguerre nodes
_erfc = np.frompyfunc(math.erfc, 1, 1)
WIDE_VARIANCE = 1.0  # above it, sigma is a step on the belief's scale and the split rule takes over


def expected_success(mean: np.ndarray, variance: np.ndarray) -> np.ndarray:
    r"""
    \\(\mathbb{E}_{\psi \sim \mathcal{N}(m, P)}[\sigma(\psi)]\\): the chance that a prompt's next rollout succeeds
    under its belief (the posterior predictive), within 1e-6 for any \\(P \ge 0\\).

    For \\(P \le\\) `WIDE_VARIANCE`, 32-point Gauss–Hermite quadrature (\\(\sigma\\) is smooth on the belief's
    scale). Wider, \\(\sigma\\) is a step on that scale, which Gauss–Hermite resolves badly; so the step
    \\(H(t) = [t > 0]\\) is taken out exactly, \\(\mathbb{E}[H(\psi)] = \Phi(m / \sqrt{P})\\), and the rest,
    \\(\sigma(t) - H(t)\\) (odd about 0, at most \\(e^{-|t|}\\)), integrates by 32-point Gauss–Laguerre quadrature
    (weight \\(e^{-t}\\)):

        E[sigma(psi)] = Phi(m / sqrt(P)) + int_0^inf sigma(-t) (phi_P(-t - m) - phi_P(t - m)) dt,

    \\(\phi_P\\) the \\(\mathcal{N}(0, P)\\) density.

    Args:
        mean, variance (`np.ndarray` of shape `(n,)`): logit means \\(m\\) and variances \\(P \ge 0\\).

    Returns:
        `np.ndarray` of shape `(n,)`, float64, in `[0, 1]`.
    """
    m = np.asarray(mean, dtype=np.float64)
    P = np.maximum(np.asarray(variance, dtype=np.float64), 0.0)
    out = np.empty(m.shape)
    for lo in range(0, m.size, _CHUNK):
        block, mm, PP = out[lo : lo + _CHUNK], m[lo : lo + _CHUNK], P[lo : lo + _CHUNK]
        narrow = PP <= WIDE_VARIANCE
        nodes = mm[narrow, None] + np.sqrt(2.0 * PP[narrow, None]) * _HERMITE_X
        block[narrow] = np.exp(-np.logaddexp(0.0, -nodes)) @ _HERMITE_W
        block[~narrow] = _split_rule(mm[~narrow], np.sqrt(PP[~narrow]))
    return out


def _split_rule(m: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """`expected_success` for wide beliefs: the step's expectation plus the rest by Gauss–Laguerre; shape `(n,)`."""
    m, sd = m[:, None], sd[:, None]

    def density(t):
        return np.exp(-0.5 * ((t - m) / sd) ** 2) / (sd * np.sqrt(2.0 * np.pi))

    rest = (density(-_LAGUERRE_X) - density(_LAGUERRE_X)) * _LAGUERRE_SIGMOID @ _LAGUERRE_W
    step = 0.5 * _erfc(-m[:, 0] / (sd[:, 0] * np.sqrt(2.0))).astype(np.float64)
    return np.clip(step + rest, 0.0, 1.0)
