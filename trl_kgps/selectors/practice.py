r"""
What practitioners pick instead of a learnt selector, behind `KGPSSelector`'s interface.

- `GaussianCurriculumSelector` (`"gaussian"`): FG-ExPO's Gaussian Curriculum Sampling (Lin et al., arXiv 2605.11403,
  §3.4, Algorithm 1, settings in §4.1): a smoothed pass rate per prompt, a Gaussian weight around 1/2, a batch drawn
  in proportion to the weights.
- `InSightSelector` (`"insight"`): InSight's weighted mutual information (Zhou et al., arXiv 2603.01907, §3, §5,
  Algorithm 1, settings in Appendix D): a Beta belief per prompt, scored by a difficulty weight of its mean times the
  information a group of `K` rollouts carries about its success rate, the top `B` of random candidates.
- `OfflineFilterSelector` (`"offline_filter"`): the common practice (Polaris, Skywork-OR1, DAPO-Math-17k): profile the
  starting model's pass rate of every prompt with `k` samples, drop the prompts it never or always solved, and train
  on the rest in TRL's order.

Each is built as `Name(num_prompts, ..., seed=0)` and offers what the other baselines offer (`select`,
`initialize`, `update`, `predict`, `predicted_success`, `state_dict` / `load_state_dict`, `from_state_dict`,
`from_pretrained`); every method checks its input before any state changes, and a state saved mid-epoch continues
bit for bit. The first observation of a prompt is an update like any other; repeated indices in one call are pooled
into one group of their summed counts.
"""

import math
from typing import Any

import numpy as np

from ._checks import as_batch_size, as_index_array, as_num_prompts, as_observations
from ._draw import draw, random_candidates
from .baselines import _Epochs, _Selector


def _is_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


class GaussianCurriculumSelector(_Selector):
    r"""
    FG-ExPO's Gaussian Curriculum Sampling (GCS; Lin et al., arXiv 2605.11403, §3.4).

    Each prompt keeps a smoothed pass rate \\(\tilde p_q\\), 1/2 before its first group (the authors' initialisation,
    under which the first batches are uniform). A group of `k` rollouts with `s` successes moves it by the authors'
    exponential moving average (their Eq. 6; a prompt not observed keeps its rate):

        p~_q <- alpha p~_q + (1 - alpha) s / k

    A batch is `B` prompts drawn without replacement, each next one with probability proportional to its weight among
    the allowed prompts left (their Eq. 7, over the whole pool; pending prompts are not allowed):

        w_q = exp(-(p~_q - 1/2)^2 / (2 sigma^2))

    The defaults are the authors' (§4.1): \\(\sigma = 0.35\\), \\(\alpha = 0.9\\), centre 1/2. `smoothing=0` weighs
    each prompt by the share of its last group that succeeded. The paper does not say whether a batch is drawn with
    or without replacement; without is how every other selector here fills a batch of distinct prompts.

    Args:
        num_prompts (`int`): `N`, the pool size.
        width (`float`, *optional*, defaults to `0.35`): \\(\sigma\\), the Gaussian's standard deviation in pass rate.
        smoothing (`float`, *optional*, defaults to `0.9`): \\(\alpha\\) in `[0, 1)`, the weight of the previous rate.
        seed (`int`, *optional*, defaults to `0`): seeds the draws.

    Attributes:
        pass_rate (`np.ndarray` of shape `(N,)`, float64): \\(\tilde p\\), in `[0, 1]`.
    """

    name = "gaussian"
    hyperparameters = ("width", "smoothing")
    CENTER = 0.5  # the frontier mu, fixed by the authors; also every prompt's rate before its first group

    def __init__(self, num_prompts: int, width: float = 0.35, smoothing: float = 0.9, seed: int = 0):
        if not (_is_number(width) and 0 < width < math.inf):
            raise ValueError(
                f"width must be a finite number > 0 (sigma, the Gaussian's standard deviation in pass rate; FG-ExPO "
                f"uses 0.35), got {width!r}."
            )
        if not (_is_number(smoothing) and 0 <= smoothing < 1):
            raise ValueError(
                f"smoothing must lie in [0, 1) (the moving average's weight of the previous rate; FG-ExPO uses 0.9, "
                f"0 keeps the last group's share), got {smoothing!r}."
            )
        super().__init__(num_prompts, seed)
        self.width, self.smoothing = float(width), float(smoothing)
        self.pass_rate = np.full(self.num_prompts, self.CENTER)

    def weights(self, indices=None) -> np.ndarray:
        """Each prompt's sampling weight `w` in `(0, 1]`: shape `(N,)` or `(len(indices),)`, float64."""
        p = self.pass_rate if indices is None else self.pass_rate[as_index_array("indices", indices, self.num_prompts)]
        # w_q = exp(-(p~_q - mu)^2 / (2 sigma^2))
        return np.exp(-((p - self.CENTER) ** 2) / (2.0 * self.width**2))

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        """`batch_size` distinct prompts, none in `exclude`, drawn in proportion to their weights: shape `(B,)`."""
        batch_size, excluded = self._excluded(batch_size, exclude)
        allowed = np.setdiff1d(np.arange(self.num_prompts), excluded, assume_unique=True)
        return draw(allowed, self.weights(allowed), batch_size, "sample", self._rng)

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        # p~ <- alpha p~ + (1 - alpha) s / k
        self.pass_rate[idx] = self.smoothing * self.pass_rate[idx] + (1.0 - self.smoothing) * s / k

    def predicted_success(self, indices=None) -> np.ndarray:
        """\\(\tilde p\\): shape `(N,)` or `(len(indices),)`, float64."""
        if indices is None:
            return self.pass_rate.copy()
        return self.pass_rate[as_index_array("indices", indices, self.num_prompts)]

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(pass_rate=self.pass_rate.copy())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a `state_dict()`, with the hyperparameters it was saved with; checked whole before any change."""
        rng = self._open(state, {"pass_rate": ((self.num_prompts,), "f")})
        rate = np.asarray(state["pass_rate"], dtype=np.float64)
        if not ((rate >= 0) & (rate <= 1)).all():
            raise ValueError("state holds pass rates outside [0, 1]; it is corrupted.")
        hyperparameters = self._saved_hyperparameters(state)
        self._adopt(hyperparameters)
        self._rng, self.pass_rate = rng, rate.copy()


DEFAULT_GROUP_SIZE = 8  # K before any observation when `group_size` is unset: the authors' k = 8


class InSightSelector(_Selector):
    r"""
    InSight (Zhou et al., arXiv 2603.01907): weighted mutual information over a Beta belief per prompt.

    Each prompt's success rate \\(\phi\\) has the belief Beta(\\(\alpha, \beta\\)), from Beta(1, 1) (the authors'
    uniform prior). A group of `k` rollouts with `s` successes updates it by their Eq. 6, MoPPS's decay toward the
    prior (\\(\lambda\\) = `decay`; the authors run \\(\lambda = 1\\), the exact conjugate update):

        alpha <- lambda alpha + (1 - lambda) + s,    beta <- lambda beta + (1 - lambda) + (k - s)

    A prompt's score is its acquisition (their Eqs. 13, 15, 16), with \\(\bar\phi = \alpha / (\alpha + \beta)\\):

        A = w(phi_bar) I(S; Phi),     w(phi_bar) = phi_bar (1 - phi_bar) exp(-eta (phi_bar - mu)^2),
        I(S; Phi) = H(Beta(alpha, beta)) - sum_s P(S = s) H(Beta(alpha + s, beta + K - s)),

    where \\(S \sim\\) BetaBinomial(\\(K, \alpha, \beta\\)) counts the successes of the next group of \\(K\\),
    \\(H\\) is the differential entropy (nats). The mutual information is the evidence term: it falls like
    \\(K / (2n)\\) as \\(n = \alpha + \beta\\) grows, where a difficulty term alone never falls. The weight is the
    difficulty term: the paper's "high variance filter" times a Gaussian bias toward \\(\mu\\). A round takes
    `candidate_ratio * B` candidates uniformly at random among the allowed prompts (all of them when that is more)
    and keeps the `B` best scores (ties in seeded random order): the authors' top-M of a random candidate set.

    The defaults are the authors' (Appendix D and §7.3): \\(\eta = 3\\), \\(\mu = 0.3\\), 16 candidates per selected
    prompt, \\(\lambda = 1\\), Beta(1, 1). Two readings: Appendix D prints \\(\mu = 3.0\\), but a success rate of 3
    is out of range and the ablation (Table 5) runs its main results at \\(\mu = 0.3\\); and the extracted text of
    their Eq. 15 does not show whether the first factor is \\(\bar\phi(1 - \bar\phi)\\) or its square root, so it is
    taken as the variance of a reward, the factor their Eq. 8 (which they cite as its inspiration) multiplies.

    Args:
        num_prompts (`int`): `N`, the pool size.
        group_size (`int`, *optional*): \\(K\\), the rollouts of a group the score counts on (TRL's
            `num_generations`); unset, the trials of the latest observation (8, the authors', before any).
        sharpness (`float`, *optional*, defaults to `3.0`): \\(\eta \ge 0\\).
        target (`float`, *optional*, defaults to `0.3`): \\(\mu\\) in `[0, 1]`.
        candidate_ratio (`float`, *optional*, defaults to `16.0`): candidates per selected prompt, `>= 1`
            (`float("inf")`: every allowed prompt).
        decay (`float`, *optional*, defaults to `1.0`): \\(\lambda\\) in `[0, 1]`.
        seed (`int`, *optional*, defaults to `0`): seeds the candidates and the ties.

    Attributes:
        alpha, beta (`np.ndarray` of shape `(N,)`, float64): the Beta parameters, `> 0`.
    """

    name = "insight"
    hyperparameters = ("group_size", "sharpness", "target", "candidate_ratio", "decay")

    def __init__(
        self,
        num_prompts: int,
        group_size: int | None = None,
        sharpness: float = 3.0,
        target: float = 0.3,
        candidate_ratio: float = 16.0,
        decay: float = 1.0,
        seed: int = 0,
    ):
        if group_size is not None and (
            isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1
        ):
            raise ValueError(
                f"group_size must be a whole number >= 1 (TRL's num_generations) or None, got {group_size!r}."
            )
        if not (_is_number(sharpness) and 0 <= sharpness < math.inf):
            raise ValueError(f"sharpness must be a finite number >= 0 (eta; InSight uses 3.0), got {sharpness!r}.")
        for name, value in (("target", target), ("decay", decay)):
            if not (_is_number(value) and 0 <= value <= 1):
                raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")
        if not (_is_number(candidate_ratio) and candidate_ratio >= 1):
            raise ValueError(
                f"candidate_ratio must be >= 1 (candidates per selected prompt; InSight uses 16), got "
                f"{candidate_ratio!r}."
            )
        super().__init__(num_prompts, seed)
        self.group_size = None if group_size is None else int(group_size)
        self.sharpness, self.target = float(sharpness), float(target)
        self.candidate_ratio, self.decay = float(candidate_ratio), float(decay)
        self.alpha = np.ones(self.num_prompts)
        self.beta = np.ones(self.num_prompts)
        self._group_size_seen = DEFAULT_GROUP_SIZE

    @property
    def scored_group_size(self) -> int:
        r"""\\(K\\) of the score: `group_size`, or the trials of the latest observation (8 before any)."""
        return self.group_size or self._group_size_seen

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if not idx.size:
            return
        keep = 1.0 - self.decay  # the share of the prior Beta(1, 1) the decay restores
        # alpha <- lambda alpha + (1 - lambda) alpha_0 + s,   beta <- lambda beta + (1 - lambda) beta_0 + (k - s)
        self.alpha[idx] = self.decay * self.alpha[idx] + keep + s
        self.beta[idx] = self.decay * self.beta[idx] + keep + (k - s)
        self._group_size_seen = int(k.max())

    def predicted_success(self, indices=None) -> np.ndarray:
        r"""\\(\bar\phi = \alpha / (\alpha + \beta)\\): shape `(N,)` or `(len(indices),)`, float64."""
        idx = self._indices(indices)
        return self.alpha[idx] / (self.alpha[idx] + self.beta[idx])

    def scores(self, indices=None) -> np.ndarray:
        """The acquisition `A = w I` of each prompt: shape `(N,)` or `(len(indices),)`, float64, `>= 0`."""
        return self._score(self._indices(indices))

    def _score(self, idx: np.ndarray) -> np.ndarray:
        a, b = self.alpha[idx], self.beta[idx]
        mean = a / (a + b)
        # w = phi_bar (1 - phi_bar) exp(-eta (phi_bar - mu)^2)
        weight = mean * (1.0 - mean) * np.exp(-self.sharpness * (mean - self.target) ** 2)
        return weight * mutual_information(a, b, self.scored_group_size)

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        """The `batch_size` best scores among random candidates, none in `exclude`. Shape `(B,)`, int64."""
        batch_size, excluded = self._excluded(batch_size, exclude)
        allowed, wanted = self.num_prompts - excluded.size, self.candidate_ratio * batch_size
        count = allowed if wanted >= allowed else math.ceil(wanted)
        candidates = random_candidates(self.num_prompts, count, excluded, self._rng)
        return draw(candidates, self._score(candidates), batch_size, "top", self._rng)

    def _indices(self, indices) -> np.ndarray:
        return np.arange(self.num_prompts) if indices is None else as_index_array("indices", indices, self.num_prompts)

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(alpha=self.alpha.copy(), beta=self.beta.copy(), group_size_seen=self._group_size_seen)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a `state_dict()`, with the hyperparameters it was saved with; checked whole before any change."""
        n = self.num_prompts
        rng = self._open(state, {"alpha": ((n,), "f"), "beta": ((n,), "f")})
        alpha, beta = (np.asarray(state[key], dtype=np.float64) for key in ("alpha", "beta"))
        if not (np.isfinite(alpha).all() and np.isfinite(beta).all() and (alpha > 0).all() and (beta > 0).all()):
            raise ValueError("state holds Beta parameters that are not finite and positive; it is corrupted.")
        seen = state.get("group_size_seen")
        if isinstance(seen, bool) or not isinstance(seen, (int, np.integer)) or seen < 1:
            raise ValueError(f"state['group_size_seen']={seen!r} is not a number of rollouts; it is corrupted.")
        hyperparameters = self._saved_hyperparameters(state)
        self._adopt(hyperparameters)
        self._rng, self.alpha, self.beta, self._group_size_seen = rng, alpha.copy(), beta.copy(), int(seen)


def mutual_information(alpha: np.ndarray, beta: np.ndarray, rollouts: int) -> np.ndarray:
    r"""
    \\(I(S; \Phi)\\) in nats, for \\(\Phi \sim\\) Beta(`alpha`, `beta`) and \\(S \mid \Phi \sim\\)
    Binomial(`rollouts`, \\(\Phi\\)), elementwise over `alpha`, `beta` of shape `(n,)`:

        I = H(Beta(a, b)) - sum_{s=0}^{K} P(S = s) H(Beta(a + s, b + K - s)),
        P(S = s) = C(K, s) B(a + s, b + K - s) / B(a, b),
        H(Beta(a, b)) = ln B(a, b) - (a - 1) psi(a) - (b - 1) psi(b) + (a + b - 2) psi(a + b).

    The ratios of Beta functions are products of rising factorials, \\(B(a+s, b+K-s)/B(a, b) =
    (a)_s (b)_{K-s} / (a+b)_K\\), so \\(\ln B(a, b)\\) cancels and only the digamma function is needed.
    """
    a, b = np.asarray(alpha, dtype=np.float64)[None, :], np.asarray(beta, dtype=np.float64)[None, :]  # (1, n)
    K = int(rollouts)
    s = np.arange(K + 1)[:, None]  # (K + 1, 1)
    steps = np.arange(K)[:, None]  # (K, 1)
    zero = np.zeros_like(a)
    # ln (a)_s for s = 0..K, and likewise for b: (K + 1, n)
    rising_a = np.concatenate([zero, np.cumsum(np.log(a + steps), axis=0)])
    rising_b = np.concatenate([zero, np.cumsum(np.log(b + steps), axis=0)])
    rising_ab = np.log(a + b + steps).sum(axis=0, keepdims=True)  # ln (a + b)_K, (1, n)
    log_ratio = rising_a + rising_b[::-1] - rising_ab  # ln B(a + s, b + K - s) - ln B(a, b), (K + 1, n)
    log_comb = np.array([math.lgamma(K + 1) - math.lgamma(i + 1) - math.lgamma(K - i + 1) for i in range(K + 1)])
    probability = np.exp(log_comb[:, None] + log_ratio)  # P(S = s), (K + 1, n)
    # every entropy less ln B(a, b)
    prior = _entropy_less_log_beta(a, b)
    posterior = log_ratio + _entropy_less_log_beta(a + s, b + K - s)
    return (prior - (probability * posterior).sum(axis=0))[0]


def _entropy_less_log_beta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """H(Beta(a, b)) - ln B(a, b) = -(a - 1) psi(a) - (b - 1) psi(b) + (a + b - 2) psi(a + b)."""
    return -(a - 1) * digamma(a) - (b - 1) * digamma(b) + (a + b - 2) * digamma(a + b)


def digamma(x: np.ndarray) -> np.ndarray:
    r"""
    \\(\psi(x)\\) for `x > 0`, elementwise (numpy has none, and the library does not depend on scipy): the
    recurrence \\(\psi(x) = \psi(x + 1) - 1/x\\) up to `x >= 10`, then the asymptotic series to \\(x^{-12}\\),
    whose next term is below \\(10^{-14}\\) there.
    """
    x = np.array(x, dtype=np.float64)
    result = np.zeros_like(x)
    small = x < 10
    while small.any():
        result[small] -= 1.0 / x[small]
        x[small] += 1.0
        small = x < 10
    inverse_square = 1.0 / (x * x)
    # psi(x) ~ ln x - 1/(2x) - 1/(12x^2) + 1/(120x^4) - 1/(252x^6) + 1/(240x^8) - 1/(132x^10) + 691/(32760x^12)
    z = inverse_square
    series = z * (1 / 12 - z * (1 / 120 - z * (1 / 252 - z * (1 / 240 - z * (1 / 132 - z * 691 / 32760)))))
    return result + np.log(x) - 0.5 / x - series


class OfflineFilterSelector(_Selector):
    r"""
    Offline pass-rate filtering, the common practice: the prompts whose profiled pass rate lies strictly between 0
    and 1 (for `k` samples of the starting model, neither 0/k nor k/k), in TRL's order.

    `pass_rates` holds each prompt's share of `k` samples of the starting model that were right (e.g. 3/8). The
    prompts at 0 or 1 are dropped for good; the kept ones are walked in epochs of seeded random permutations, each
    kept prompt once an epoch (`UniformSelector`'s walk over them). A prompt pending (in `exclude`) when its turn
    comes waits for a later batch of the same epoch. The filter reads no rollout of training: its
    `predicted_success` is each prompt's last observed rate, its profiled rate before any. The profiling rollouts
    (`k` per prompt) are spent before training, outside the selector.

    Args:
        num_prompts (`int`): `N`, the pool size.
        pass_rates (`ArrayLike` of shape `(N,)`): each prompt's profiled pass rate, in `[0, 1]`.
        seed (`int`, *optional*, defaults to `0`): seeds the epochs' order.

    Raises:
        `ValueError`: rates that are not `N` numbers in `[0, 1]`, or rates that keep no prompt; `select` refuses a
            batch larger than the kept prompts not pending, naming how many were kept and dropped.

    Attributes:
        pass_rates (`np.ndarray` of shape `(N,)`, float64): the profiled rates.
        kept (`np.ndarray` of shape `(K,)`, int64): the prompts kept, ascending.
    """

    name = "offline_filter"

    def __init__(self, num_prompts: int, pass_rates, seed: int = 0):
        num_prompts = as_num_prompts(num_prompts)
        rates = _as_pass_rates(pass_rates, num_prompts)
        kept = np.flatnonzero((rates > 0) & (rates < 1))
        if not kept.size:
            raise ValueError(
                f"pass_rates keep no prompt: of {num_prompts}, {int(np.sum(rates == 0))} were never solved and "
                f"{int(np.sum(rates == 1))} always. The offline filter trains on the prompts the starting model "
                "sometimes solves; profile with more samples per prompt, or use selector='uniform'."
            )
        super().__init__(num_prompts, seed)
        self.pass_rates, self.kept = rates, kept
        # TRL's order over the kept prompts (positions into `kept`), on the selector's one generator
        self._walk = _Epochs(kept.size, seed)
        self._rng = self._walk._rng
        self._last = rates.copy()

    @classmethod
    def init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        return {"num_prompts": state["num_prompts"], "pass_rates": state["pass_rates"], "seed": state["seed"]}

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        """The next `batch_size` kept prompts of the walk, none in `exclude`. Shape `(B,)`, int64."""
        excluded = np.unique(as_index_array("exclude", [] if exclude is None else exclude, self.num_prompts))
        pending = np.flatnonzero(np.isin(self.kept, excluded))  # positions into `kept`, ascending
        available = self.kept.size - pending.size
        batch_size = as_batch_size(batch_size, _NO_BOUND)  # a positive int; the bound is the filter's, below
        if batch_size > available:
            dropped = self.num_prompts - self.kept.size
            raise ValueError(
                f"batch_size={batch_size}, but the offline filter keeps {self.kept.size} of {self.num_prompts} "
                f"prompts ({dropped} dropped as never or always solved), {pending.size} of them pending: {available} "
                f"can be chosen. Ask for at most {available} prompts a batch (a smaller generation batch), keep "
                "more prompts (profile a larger pool), or use selector='uniform'."
            )
        return self.kept[self._walk._walk(batch_size, pending)]

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        self._last[idx] = s / k

    def predicted_success(self, indices=None) -> np.ndarray:
        """The last observed success rate (the profiled one before any): shape `(N,)` or `(len(indices),)`."""
        if indices is None:
            return self._last.copy()
        return self._last[as_index_array("indices", indices, self.num_prompts)]

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(**self._walk._walk_state(), pass_rates=self.pass_rates.copy(), last=self._last.copy())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a `state_dict()` saved over the same profiled rates; checked whole before any change."""
        n, k = self.num_prompts, self.kept.size
        rng = self._open(state, {"order": ((k,), "i"), "pass_rates": ((n,), "f"), "last": ((n,), "f")})
        if not np.array_equal(np.asarray(state["pass_rates"], dtype=np.float64), self.pass_rates):
            raise ValueError(
                "state was saved over other profiled pass rates: it keeps other prompts. Build the selector with the "
                "rates it was saved with (OfflineFilterSelector.from_state_dict(state) does)."
            )
        last = np.asarray(state["last"], dtype=np.float64)
        if not ((last >= 0) & (last <= 1)).all():
            raise ValueError("state holds success rates outside [0, 1]; it is corrupted.")
        self._walk._load_walk(state)  # checks before it changes anything
        self._rng = self._walk._rng = rng
        self._last = last.copy()


_NO_BOUND = np.iinfo(np.int64).max


def _as_pass_rates(pass_rates, num_prompts: int) -> np.ndarray:
    """`pass_rates` as `num_prompts` float64 rates in `[0, 1]`, or a `ValueError` naming the value and the fix."""
    try:
        rates = np.asarray(pass_rates, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            "pass_rates must be numbers in [0, 1], one per prompt (each prompt's share of k samples that were "
            f"right), got {pass_rates!r:.80}."
        ) from None
    if rates.shape != (num_prompts,):
        raise ValueError(
            f"pass_rates must hold one rate per prompt, shape ({num_prompts},), got shape {rates.shape}. Profile "
            "every prompt of the dataset, in its order."
        )
    bad = ~((rates >= 0) & (rates <= 1))  # NaN included
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"pass_rates[{position}] is {float(rates[position])!r}, not a pass rate in [0, 1]: give the share of the "
            "k samples of the starting model that were right (successes / k); profile the prompts that have none."
        )
    return rates
