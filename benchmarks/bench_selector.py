"""
Time and memory of one KGPS selection round, for the default and for the paper's rule, each against a
straightforward numpy version.

A round is what a trainer does per step: `predict` (every prompt's variance grows), `update` the 256 prompts
just rolled out, then `select` the next 256.

**The default** (`KGPSConfig()`) draws the batch over the whole pool in proportion to score ** (1 / selection_temperature),
exactly, by rejection (`_draw.whole_pool_draw`): it scores only the prompts it proposes, so its round costs
O(B / acceptance + B D^2 + D^3) whatever N. It is timed with no feature (one factor shared by the pool) and with 35
groups (one column of 35 values: D = 36). Its baseline, `whole-pool numpy`, is the same draw written plainly: score every
prompt (Gauss–Hermite in float64, on its logit mean and variance, shared part included) and take the `B` largest
`log(score) / temperature + Gumbel noise` over all `N` prompts.

**The paper's rule** (`KGPSConfig.paper()`) is an exact top-B over all prompts. Two kinds of state:

- `tied`: right after a warmup epoch with 8 rollouts per prompt, when whole groups of prompts share one belief
  (`s/8` takes 9 values), so thousands tie at the top;
- `spread`: continuous beliefs, as after many rounds of updates.

Baselines measured in the same run:

- `numpy`: the textbook version in float64 — `P += Q`, the Kalman update, 5 full-array sigmoid evaluations,
  `argpartition` and a sort of the top 256;
- `floor`: the time to read each prompt's mean and variance once (8 bytes a prompt in float32) at the array-copy
  bandwidth measured here. The KGPS round reads 4 bytes a prompt (its score bounds) and can beat it.

**Many groups.** The default sharing by one categorical column of `G` values (`D = G + 1`), over the largest `N`:
its round against the same filter with the textbook update of the shared part, the information form
`Sigma <- (Sigma^-1 + Z^T V^-1 Z)^-1` with two `D x D` inverses and dense feature rows (O(D^3) a round). A column of
more than `MAX_CATEGORICAL_VALUES` values is refused when the selector is built: that row gives the time to refuse.

**DPS** (`selector="dps"`), with the authors' MATH recipe (32 candidates per selected prompt, decay 0.7) and their
Countdown recipe (8, decay 0.5), in the steady state: after an epoch of candidates, when every candidate drawn was
last read an epoch of rounds ago and catches up on the steps it missed. Its baseline, `eager numpy`, is the authors'
loop vectorised as it stands: every prompt ever drawn moved at every step, over the whole `(N, 3, 3)` array.

Run: `python benchmarks/bench_selector.py` (add `--sizes 1e4 1e5 --groups` for a quick look).
"""

import argparse
import statistics
import time
import tracemalloc

import numpy as np

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors import DPSSelector
from trl_kgps.selectors.shared_factor import MAX_CATEGORICAL_VALUES, SharedFactor


B, K, NORM = 256, 8, 0.05  # batch, rollouts per prompt, parameter-update norm per round (Q = 0.1 * NORM)


class NumpySelector:
    """The straightforward implementation: float64, full passes, argpartition."""

    def __init__(self, mean, variance):
        self.m, self.P = mean.astype(np.float64), variance.astype(np.float64)
        x, w = np.polynomial.hermite.hermgauss(5)
        self.nodes, self.weights = x, w / np.sqrt(np.pi)

    def predict(self, q):
        self.P += q

    def update(self, idx, s, k):
        m, P = self.m[idx], self.P[idx]
        delta = 0.5 / k
        p = np.clip(1 / (1 + np.exp(-m)), delta, 1 - delta)
        R = 1 / (k * p * (1 - p))
        phi = np.clip(s / k, delta, 1 - delta)
        gain = P / (P + R)
        self.m[idx] = m + gain * (np.log(phi / (1 - phi)) - m)
        self.P[idx] = (1 - gain) * P

    def select(self, batch_size):
        scores = np.zeros_like(self.m)
        spread = np.sqrt(2 * self.P)
        for x, w in zip(self.nodes, self.weights):
            sig = 1 / (1 + np.exp(-(self.m + spread * x)))
            scores += w * sig * (1 - sig)
        top = np.argpartition(-scores, batch_size)[:batch_size]
        return top[np.argsort(-scores[top])]


def initial_state(n, kind, rng):
    if kind == "tied":
        s = rng.binomial(K, rng.uniform(size=n))
        phi = np.clip(s / K, 1 / (2 * K), 1 - 1 / (2 * K))
        return np.log(phi / (1 - phi)), np.ones(n)
    return rng.normal(0, 1.5, n), rng.uniform(0.05, 1.0, n)


class WholePoolNumpy(KGPSSelector):
    """The default's draw in plain numpy: score all N prompts, Gumbel top-B over all of them."""

    def select(self, batch_size, exclude=None):
        m = self.mean.astype(np.float64)
        P = self.variance.astype(np.float64)
        x, w = np.polynomial.hermite.hermgauss(self.config.quadrature_points)
        scores = np.zeros_like(m)
        spread = np.sqrt(2 * P)
        for xj, wj in zip(x, w / np.sqrt(np.pi)):
            p = 1 / (1 + np.exp(-(m + spread * xj)))
            scores += wj * p * (1 - p)
        key = np.log(scores) / self.config.selection_temperature + self._rng.gumbel(size=m.size)
        top = np.argpartition(-key, batch_size)[:batch_size]
        return top[np.argsort(-key[top])]


class InformationForm(SharedFactor):
    """The shared factor updated in information form, with dense feature rows: the textbook O(D^3) round."""

    def absorb(self, indices, m, P, y, R):
        seen = np.isfinite(R)
        m_new, P_new = m.copy(), P.copy()
        z, m, P, y, R = self.design.rows[self.design.row_of[indices[seen]]], m[seen], P[seen], y[seen], R[seen]
        weight = 1.0 / (P + R)
        Sigma = np.linalg.inv(np.linalg.inv(self.Sigma) + (z.T * weight) @ z)
        self.Sigma = (Sigma + Sigma.T) / 2
        self.mu = self.mu + self.Sigma @ (z.T @ (weight * (y - z @ self.mu - m)))
        g = P / (P + R)
        m_new[seen] = m + g * (y - z @ self.mu - m)
        P_new[seen] = (1.0 - g) * P + g**2 * np.einsum("nd,de,ne->n", z, self.Sigma, z)
        return m_new, P_new


def information_form(selector):
    """`selector` with its shared factor turned into `InformationForm` (dense rows: no one-hot gathers)."""
    selector.shared.__class__ = InformationForm
    selector.shared.design.active = None
    return selector


class EagerDPS(DPSSelector):
    """DPS as the authors' loop runs it, vectorised: every registered prompt moves at every step, O(N) a round."""

    def _advanced(self, indices, to_step):
        return self.A[indices], self.pi[indices], self.pi_before[indices]

    def update(self, indices, successes, trials):
        registered = self.touched >= 0
        super().update(indices, successes, trials)
        moving = registered & (self.touched < self.steps)  # every registered prompt not observed now: one step
        A = self.decay * self.A[moving] + (1.0 - self.decay) * self.A0
        T = A / A.sum(axis=1, keepdims=True)
        self.pi_before[moving] = self.pi[moving]
        pi = np.einsum("nij,nj->ni", T, self.pi[moving])
        self.A[moving], self.pi[moving] = A, pi / pi.sum(axis=1, keepdims=True)
        self.touched[moving] = self.steps


def dps_rounds(sizes, rounds):
    print(f"\nDPS (selector='dps'), {B} prompts selected per round, in the steady state\n")
    print("| recipe | N | candidates | DPS median | DPS mean | eager numpy median | speed-up | state bytes/prompt |")
    print("|---|---|---|---|---|---|---|---|")
    for recipe, ratio, decay in (("MATH", 32.0, 0.7), ("Countdown", 8.0, 0.5)):
        for n in sizes:
            timed = []
            for cls in (DPSSelector, EagerDPS):
                selector = cls(n, decay=decay, candidate_ratio=ratio, seed=0)
                rng = np.random.default_rng(1)
                warmup = -(-n // int(ratio * B)) + 2  # an epoch of candidates, and a little more
                for _ in range(warmup):
                    batch = selector.select(B)
                    selector.update(batch, rng.binomial(K, 0.5, B), np.full(B, K))
                count = rounds if cls is DPSSelector else max(3, min(rounds, int(2e7 // n)))
                timed.append(time_rounds(selector, count, rng, NORM))
            state = sum(v.nbytes for v in selector.state_dict().values() if isinstance(v, np.ndarray))
            (_, median, mean_t), (_, eager, _) = timed
            print(
                f"| {recipe} | {n:.0e} | {int(ratio * B):,} | {median * 1e3:.2f} ms | {mean_t * 1e3:.2f} ms | "
                f"{eager * 1e3:.1f} ms | {eager / median:.1f}x | {state / n:.0f} |"
            )


def kgps_from(mean, variance, config=None, selector_class=KGPSSelector, features=None):
    selector = selector_class(mean.size, config or KGPSConfig.paper(), features=features)
    state = selector.state_dict()
    state["mean"], state["variance_base"] = mean.astype(np.float32), variance.astype(np.float32)
    selector.load_state_dict(state)
    return selector


def time_rounds(selector, rounds, rng, q_or_norm):
    """Median and mean seconds of `select -> predict -> update` rounds; the first call is timed apart."""
    outcomes = rng.binomial(K, 0.5, (rounds + 1, B))
    t0 = time.perf_counter()
    batch = selector.select(B)
    first = time.perf_counter() - t0
    times = []
    for r in range(rounds):
        t0 = time.perf_counter()
        selector.predict(q_or_norm)
        selector.update(batch, outcomes[r], np.full(B, K))
        batch = selector.select(B)
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times), statistics.fmean(times)


def copy_bandwidth():
    """Bytes per second moved (read + written) by numpy's array copy, over 256 MB."""
    src = np.ones(1 << 26, dtype=np.float32)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
    return 2 * src.nbytes / best


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_bytes(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6, 1e7])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--groups", nargs="*", type=int, default=[35, 256, MAX_CATEGORICAL_VALUES, 10_000], help="values of the column"
    )
    parser.add_argument("--dps", action=argparse.BooleanOptionalAction, default=True, help="time DPS too")
    args = parser.parse_args()

    print(f"Default (KGPSConfig()): {B} prompts selected per round\n")
    print(
        "| N | features | default median | default mean | whole-pool numpy median | speed-up | "
        "peak round bytes/prompt |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in map(int, args.sizes):
        for name, features in (("none", None), ("35 groups", {"group": np.arange(n) % 35})):
            mean, variance = initial_state(n, "spread", np.random.default_rng(0))
            config = KGPSConfig(feature_columns=None if features is None else ["group"])
            selector = kgps_from(mean, variance, config, features=features)
            _, median, mean_t = time_rounds(selector, args.rounds, np.random.default_rng(1), NORM)
            warm = kgps_from(mean, variance, config, features=features)
            round_peak = peak_bytes(lambda warm=warm: time_rounds(warm, 3, np.random.default_rng(2), NORM))
            baseline = kgps_from(mean, variance, config, WholePoolNumpy, features=features)
            numpy_rounds = max(3, min(args.rounds, int(2e7 // n)))
            _, numpy_median, _ = time_rounds(baseline, numpy_rounds, np.random.default_rng(1), NORM)
            print(
                f"| {n:.0e} | {name} | {median * 1e3:.2f} ms | {mean_t * 1e3:.2f} ms | {numpy_median * 1e3:.1f} ms | "
                f"{numpy_median / median:.0f}x | {round_peak / n:.3f} |"
            )
    if args.groups:
        many_groups(int(max(args.sizes)), args.groups, args.rounds)
    if args.dps:
        dps_rounds([int(n) for n in args.sizes if n <= 1e6], args.rounds)
    print("\nThe paper's rule (KGPSConfig.paper()):\n")

    bandwidth = copy_bandwidth()
    print(f"array-copy bandwidth: {bandwidth / 1e9:.1f} GB/s (read + write); {B} prompts selected per round\n")
    print(
        "| N | state | KGPS median | KGPS mean | first select | numpy median | speed-up vs numpy | floor | "
        "KGPS / floor | state bytes/prompt | peak round bytes/prompt |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in map(int, args.sizes):
        floor = 8 * n / (bandwidth / 2)  # reading 8 B/prompt at the copy's read rate
        for kind in ("tied", "spread"):
            rng = np.random.default_rng(0)
            mean, variance = initial_state(n, kind, rng)
            selector = kgps_from(mean, variance)
            first, median, mean_t = time_rounds(selector, args.rounds, np.random.default_rng(1), NORM)
            state_bytes = sum(v.nbytes for v in selector.state_dict().values() if isinstance(v, np.ndarray))
            state_bytes += selector._rule.ranking._bound.nbytes  # the score bounds, part of the working state
            warm = kgps_from(mean, variance)
            warm.select(B)
            round_peak = peak_bytes(lambda warm=warm: time_rounds(warm, 3, np.random.default_rng(2), NORM))
            numpy_rounds = max(3, min(args.rounds, int(2e7 // n)))
            baseline = NumpySelector(mean, variance)
            _, numpy_median, _ = time_rounds(baseline, numpy_rounds, np.random.default_rng(1), 0.1 * NORM)
            print(
                f"| {n:.0e} | {kind} | {median * 1e3:.2f} ms | {mean_t * 1e3:.2f} ms | {first * 1e3:.1f} ms | "
                f"{numpy_median * 1e3:.1f} ms | {numpy_median / median:.1f}x | {floor * 1e3:.2f} ms | "
                f"{median / floor:.2f}x | {state_bytes / n:.1f} | {round_peak / n:.2f} |"
            )


def many_groups(n, groups, rounds):
    print(f"\nMany groups: the default sharing by one column of G values, N = {n:.0e}, {B} prompts a round\n")
    print("| G | D | default median | default mean | information form median | speed-up | covariance bytes |")
    print("|---|---|---|---|---|---|---|")
    mean, variance = initial_state(n, "spread", np.random.default_rng(0))
    config = KGPSConfig(feature_columns=["group"])
    for g in groups:
        features = {"group": np.arange(n) % g}
        if g > MAX_CATEGORICAL_VALUES:
            t0 = time.perf_counter()
            try:
                kgps_from(mean, variance, config, features=features)
            except ValueError:
                print(f"| {g:,} | {g + 1:,} | refused in {(time.perf_counter() - t0) * 1e3:.1f} ms | | | | |")
            continue
        selector = kgps_from(mean, variance, config, features=features)
        _, median, mean_t = time_rounds(selector, rounds, np.random.default_rng(1), NORM)
        baseline = information_form(kgps_from(mean, variance, config, features=features))
        _, dense_median, _ = time_rounds(baseline, 3, np.random.default_rng(1), NORM)
        print(
            f"| {g:,} | {g + 1:,} | {median * 1e3:.2f} ms | {mean_t * 1e3:.2f} ms | {dense_median * 1e3:.1f} ms | "
            f"{dense_median / median:.0f}x | {selector.shared.Sigma.nbytes:,} |"
        )


if __name__ == "__main__":
    main()
