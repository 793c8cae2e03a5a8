r"""
How well a selector knows each prompt's success rate, against the exact truth the testbed measures: the expected
calibration error of its predicted success, and how often the true logit falls inside its belief's central intervals
(over-confidence made visible: a 90 % interval that holds the truth 40 % of the time is 20 times too narrow, roughly).

What belief each selector holds, as a central interval of logits at `level` (`belief_intervals`):

- `KGPSSelector` (and `ExperimentalSelector`): a Gaussian on the logit, \\(\mathcal{N}(m, P)\\) (`mean`, `variance`,
  the shared part included): \\(m \pm z \sqrt{P}\\), \\(z = \Phi^{-1}((1 + \text{level}) / 2)\\).
- `ArcusSelector`: a Gaussian on \\(\psi = \arcsin\sqrt{p}\\) restricted to \\([0, \pi/2]\\) (`mean`, `variance`): the
  restricted Gaussian's quantiles, mapped to logits by \\(\mathrm{logit}(\sin^2\psi) = 2 \log\tan\psi\\).
- `MoPPSSelector`: a Beta(\\(\alpha, \beta\\)) on \\(p\\) (`alpha`, `beta`): its quantiles, mapped to logits.
- No posterior over \\(p\\), so no interval (coverage is reported absent): `UniformSelector` and `GRESOSelector` keep a
  prompt's last observed rate; `DPSSelector` a distribution over its next group's outcome (all wrong, mixed, all
  right), not over \\(p\\); the oracles know \\(p\\) (a point); dynamic sampling keeps the last screened rate.

A monotone map carries quantiles to quantiles, so each interval is exact in logits, and "the true logit lies in the
interval" is the same event as "the true success rate lies in its image". Numpy and the standard library only: scipy,
which the tests check these against, is not a dependency of the benchmark.
"""

import math
from statistics import NormalDist

import numpy as np

from trl_kgps.selectors import ArcusSelector, KGPSSelector, MoPPSSelector
from trl_kgps.selectors._arcsine import PSI_MAX


LEVELS = (0.5, 0.9)  # the central intervals reported
BINS = 10  # equal-width bins of the predicted success, for the ECE
_NORMAL = NormalDist()
_cdf = np.frompyfunc(_NORMAL.cdf, 1, 1)
_inverse_cdf = np.frompyfunc(_NORMAL.inv_cdf, 1, 1)
_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def bin_of(predicted: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Each prediction's equal-width bin, `[0, 1/bins)` ... `[1 - 1/bins, 1]`: integers in `[0, bins)`, shape of
    `predicted`."""
    return np.minimum((predicted * bins).astype(int), bins - 1)


def expected_calibration_error(predicted, true, weights=None, bins: int = BINS) -> float:
    r"""
    \\(\sum_b |\sum_{i \in b} w_i (\hat p_i - p_i)| / \sum_i w_i\\): over `bins` equal-width bins of the predicted
    success \\(\hat p\\) (`[0, 0.1)`, ..., `[0.9, 1]`), the gap between a bin's mean prediction and its mean true
    success \\(p\\), weighted by the bin's share. Arrays of shape `(n,)`; `weights` (e.g. times drawn) default to 1.
    """
    predicted, true = np.asarray(predicted, float), np.asarray(true, float)
    weights = np.ones_like(predicted) if weights is None else np.asarray(weights, float)
    gaps = np.bincount(bin_of(predicted, bins), weights * (predicted - true), minlength=bins)
    return float(np.abs(gaps).sum() / weights.sum())


def reliability(predicted, true, bins: int = BINS) -> list[list[float]]:
    """
    The reliability diagram's sums over `bins` equal-width bins of the predicted success (as in
    `expected_calibration_error`): `[counts, sums of the predictions, sums of the truths]`, each a list of `bins`
    floats, so that snapshots and seeds pool by adding. Arrays of shape `(n,)`.
    """
    predicted, true = np.asarray(predicted, float), np.asarray(true, float)
    b = bin_of(predicted, bins)
    return [np.bincount(b, weights, minlength=bins).tolist() for weights in (None, predicted, true)]


def pooled_reliability(per_snapshot: dict[str, list]) -> np.ndarray | None:
    """`reliability`'s sums added over the snapshots after the first (as `run_calibration` averages), shape
    `(3, bins)`; `None` where the selector never predicted (or the run predates the measure)."""
    present = [r for r in per_snapshot.get("reliability", [])[1:] if r is not None]
    return np.sum(present, axis=0) if present else None


def coverage(lower, upper, true_logit, weights=None) -> float:
    """The (weighted) share of prompts whose true logit lies in `[lower, upper]`; arrays of shape `(n,)`."""
    inside = (np.asarray(lower) <= true_logit) & (true_logit <= np.asarray(upper))
    return float(np.average(inside, weights=weights))


def logit(p) -> np.ndarray:
    """`log(p / (1 - p))`, `-inf` at 0 and `inf` at 1."""
    p = np.asarray(p, float)
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def gaussian_interval(mean, variance, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The central `level` interval of `N(mean, variance)`, elementwise: `(lower, upper)`, each the shape of `mean`."""
    half = _NORMAL.inv_cdf((1 + level) / 2) * np.sqrt(np.asarray(variance, float))
    return np.asarray(mean, float) - half, np.asarray(mean, float) + half


def restricted_gaussian_quantile(mean, variance, low: float, high: float, u) -> np.ndarray:
    r"""
    The `u`-quantile of \\(\mathcal{N}(m, v)\\) restricted to `[low, high]`:
    \\(m + \sigma \Phi^{-1}(\Phi(a) + u (\Phi(b) - \Phi(a)))\\), \\(a = (\text{low} - m)/\sigma\\),
    \\(b = (\text{high} - m)/\sigma\\). `mean` in `[low, high]`; arrays broadcast.
    """
    mean, sd = np.asarray(mean, float), np.sqrt(np.asarray(variance, float))
    below, above = _cdf((low - mean) / sd).astype(float), _cdf((high - mean) / sd).astype(float)
    level = np.clip(below + np.asarray(u, float) * (above - below), 1e-300, 1 - 1e-16)
    return np.clip(mean + sd * _inverse_cdf(level).astype(float), low, high)


def beta_cdf(x, a, b) -> np.ndarray:
    r"""
    The regularised incomplete beta function \\(I_x(a, b)\\), elementwise, by its continued fraction (Lentz), on the
    side where it converges fast (\\(x < (a + 1)/(a + b + 2)\\); else \\(1 - I_{1-x}(b, a)\\)).
    """
    x, a, b = np.broadcast_arrays(*(np.asarray(v, float) for v in (x, a, b)))
    return _beta_cdf(x, 1.0 - x, a, b, _log_beta(a, b))


def beta_quantile(a, b, u, tolerance: float = 1e-12) -> np.ndarray:
    r"""
    The `u`-quantile of Beta(`a`, `b`) as a logit, elementwise: the root \(t\) of \(I_{\sigma(t)}(a, b) = u\).

    For \(u \le 1/2\), Newton's method on \(g(t) = \log I_{\sigma(t)}(a, b) - \log u\) from the mean: the density of
    \(t\), \(\sigma(t)^a \sigma(-t)^b / B(a, b)\), is log-concave, so \(g\) is concave and increasing, and Newton's
    iterates reach the root from its left, monotonically. For \(u > 1/2\), the `1 - u` quantile of Beta(`b`, `a`),
    negated (\(1 - p\) is Beta(`b`, `a`)).
    """
    a, b, u = np.broadcast_arrays(*(np.asarray(v, float) for v in (a, b, u)))
    upper = u > 0.5
    a, b, u = np.where(upper, b, a), np.where(upper, a, b), np.where(upper, 1.0 - u, u)
    log_beta = _log_beta(a, b)
    t = logit(a / (a + b))  # the mean
    for _ in range(100):
        x, y = _sigmoid(t), _sigmoid(-t)  # x and 1 - x, each without cancellation
        F = _beta_cdf(x, y, a, b, log_beta)
        # g'(t) = (dI/dt) / I, dI/dt = x^a (1 - x)^b / B(a, b): the density in p times dp/dt = x (1 - x)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            step = (np.log(F) - np.log(u)) * F / np.exp(a * np.log(x) + b * np.log(y) - log_beta)
        step = np.where(np.isfinite(step), step, 0.0)
        t = np.clip(t - step, -60.0, 60.0)
        if np.max(np.abs(step), initial=0.0) < tolerance:
            break
    return np.where(upper, -t, t)


def belief_intervals(selector, levels=LEVELS) -> dict[float, tuple[np.ndarray, np.ndarray]] | None:
    """
    `{level: (lower, upper)}`, each of shape `(P,)` (the selector's prompts), the logits of the central interval of
    the selector's belief at each level; `None` for a selector with no posterior over the success rate (the module
    docstring). A selector chosen ahead (`methods.ChosenAhead`) is the one it wraps.
    """
    selector = getattr(selector, "selector", selector)
    intervals = {}
    for level in levels:
        tails = np.array([(1 - level) / 2, (1 + level) / 2])[:, None]
        if isinstance(selector, KGPSSelector):
            intervals[level] = gaussian_interval(selector.mean.astype(float), selector.variance.astype(float), level)
        elif isinstance(selector, ArcusSelector):
            psi = restricted_gaussian_quantile(selector.mean, selector.variance, 0.0, PSI_MAX, tails)
            with np.errstate(divide="ignore"):
                lower, upper = 2 * np.log(np.tan(psi))  # logit(sin^2 psi)
            intervals[level] = lower, upper
        elif isinstance(selector, MoPPSSelector):
            lower, upper = beta_quantile(selector.alpha, selector.beta, tails)
            intervals[level] = lower, upper
        else:
            return None
    return intervals


# Where the truth can be told apart from 0 and 1 at all: at p = 1e-3 a prompt's 112 rollouts (14 groups of 8, the most
# a suite run gives one prompt) are all wrong 89 % of the time, and p = 1e-3 and 1e-12 look the same to any selector.
RESOLVABLE = (1e-3, 1 - 1e-3)


def boundary(true, group_size: int) -> np.ndarray:
    """Where zero-variance groups live: prompts whose group of `group_size` is more likely unanimous than mixed."""
    true = np.asarray(true, float)
    return true**group_size + (1 - true) ** group_size > 0.5


def _sigmoid(t: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -t))


def _log_beta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`log B(a, b)`, elementwise (symmetric in `a`, `b`)."""
    return (_lgamma(a) + _lgamma(b) - _lgamma(a + b)).astype(float)


def _beta_cdf(x: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, log_beta: np.ndarray) -> np.ndarray:
    """`I_x(a, b)` given `x` and `y = 1 - x` (each accurate) and `log B(a, b)`, all of one shape."""
    flip = x > (a + 1) / (a + b + 2)
    xs, ys = np.where(flip, y, x), np.where(flip, x, y)
    As, Bs = np.where(flip, b, a), np.where(flip, a, b)
    with np.errstate(divide="ignore"):
        front = np.exp(As * np.log(xs) + Bs * np.log(ys) - log_beta) / As
    value = front * _continued_fraction(xs, As, Bs)
    return np.where(flip, 1.0 - value, value)


def _continued_fraction(x: np.ndarray, a: np.ndarray, b: np.ndarray, steps: int = 100_000) -> np.ndarray:
    """
    The continued fraction of `I_x(a, b)` by the modified Lentz method (Numerical Recipes' `betacf`), each entry
    iterated until its factor is 1 to float64 precision (those converged leave the arrays every 16 steps).
    """
    tiny = 1e-300

    def guard(v):
        return np.where(np.abs(v) < tiny, tiny, v)

    shape = np.shape(x)
    x, a, b = (np.ravel(v) for v in (x, a, b))
    c = np.ones_like(x)
    d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    h = d.copy()
    out = np.empty_like(x)
    live = np.arange(x.size)  # the entries still iterating
    for m in range(1, steps + 1):
        # the even step, then the odd one
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 / guard(1.0 + even * d)
        c = guard(1.0 + even / c)
        h *= d * c
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 / guard(1.0 + odd * d)
        c = guard(1.0 + odd / c)
        delta = d * c
        h *= delta
        if m % 16 == 0 or m == steps:
            converged = np.abs(delta - 1.0) < 1e-15
            out[live[converged]] = h[converged]
            keep = ~converged
            live, x, a, b, c, d, h = live[keep], x[keep], a[keep], b[keep], c[keep], d[keep], h[keep]
            if not live.size:
                break
    out[live] = h
    return out.reshape(shape)


def snapshot_calibration(records: list[dict], group_size: int) -> dict[str, list]:
    """
    Per snapshot (a run's `records`, see `runner.Snapshots`), JSON-ready: `ece` over every row; `ece_drawn` over the
    rows drawn between this snapshot and the next, each weighted by its draws, against this snapshot's prediction
    and truth (`None` for the last snapshot); `reliability`, the reliability diagram's sums over every row;
    `coverage_<level>` (e.g. `coverage_90`), `coverage_drawn_<level>`, `coverage_boundary_<level>` and
    `coverage_resolvable_<level>`, the share of rows whose true logit lies in the belief's interval, over every row,
    the rows drawn, the rows where a group of `group_size` is more likely unanimous than mixed (`boundary_share` of
    them), and the rows whose true success lies in `RESOLVABLE` (`resolvable_share` of them). `None` before a
    selector predicts, and for coverage where it holds no posterior.
    """
    parts = ("", "_drawn", "_boundary", "_resolvable")
    out: dict[str, list] = {
        key: [] for key in ("ece", "ece_drawn", "boundary_share", "resolvable_share", "reliability")
    }
    out |= {f"coverage{part}_{round(100 * level)}": [] for part in parts for level in LEVELS}
    for k, record in enumerate(records):
        true, predicted, intervals = record["true"], record["predicted"], record.get("intervals")
        following = records[k + 1] if k + 1 < len(records) else None
        drawn = None
        if following is not None and following["selected"] is not None and record["selected"] is not None:
            drawn = following["selected"] - record["selected"]
            drawn = drawn if drawn.any() else None
        at_edge = boundary(true, group_size)
        resolvable = (RESOLVABLE[0] <= true) & (true <= RESOLVABLE[1])
        out["boundary_share"].append(float(at_edge.mean()))
        out["resolvable_share"].append(float(resolvable.mean()))
        out["ece"].append(None if predicted is None else expected_calibration_error(predicted, true))
        out["reliability"].append(None if predicted is None else reliability(predicted, true))
        out["ece_drawn"].append(
            None if predicted is None or drawn is None else expected_calibration_error(predicted, true, drawn)
        )
        true_logit = logit(true)
        for level in LEVELS:
            lower, upper = (None, None) if intervals is None else intervals[level]
            for part, weights in (("", None), ("_drawn", drawn), ("_boundary", at_edge), ("_resolvable", resolvable)):
                value = None
                if lower is not None and (part == "" or (weights is not None and weights.any())):
                    value = coverage(lower, upper, true_logit, weights)
                out[f"coverage{part}_{round(100 * level)}"].append(value)
    return out


def run_calibration(per_snapshot: dict[str, list]) -> dict[str, float | None]:
    """Each of `snapshot_calibration`'s measures averaged over the snapshots after the first (the prior's own says
    nothing of what a selector learned) where it has a value; `None` where it has none."""
    means = {}
    for key, values in per_snapshot.items():
        if key == "reliability":  # sums per bin: `pooled_reliability`
            continue
        present = [v for v in values[1:] if v is not None]
        means[key] = float(np.mean(present)) if present else None
    return means
