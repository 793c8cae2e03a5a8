r"""
The KGPS estimator: the paper's Gaussian filter per prompt over the logit of its success rate, with the default's
named departures — a factor shared across prompts (`shared.py`), the exact binomial update, and a batch drawn over
the whole pool in proportion to the posterior-expected utility instead of the paper's exact top-B. Framework-free
(numpy only) and vectorised over all prompts.
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import KGPSConfig
from ._binomial import posterior_moments, predictive_moments
from ._checks import (
    as_batch_size,
    as_delta_norms,
    as_index_array,
    as_num_prompts,
    as_observations,
    check_finite_state,
    check_scalar,
)
from ._draw import CandidatePass, draw, random_candidates, whole_pool_draw
from ._ranking import UtilityRanking
from ._utility import Utility, expected_mixed_group_probability, mixed_group_probability
from .base import FromPretrainedMixin
from .shared import SharedFactor, design


STATE_VERSION = 3
# The calibrated gamma stays within this factor of the configured one.
_MAX_GAMMA_SCALE = 1e3
_DEFAULT_GROUP_SIZE = 8
# The learnt residual prior stays within [initial_variance / 1e3, initial_variance * 100].
_MIN_RESIDUAL_PRIOR_SCALE, _MAX_RESIDUAL_PRIOR_SCALE = 1e-3, 100.0
# The shared variance offset is folded into the stored variances once it reaches this, which keeps the float32
# absolute error of every variance below 2^-25 (3e-8).
_MAX_VARIANCE_OFFSET = 0.25

_VERSION_1_DEFAULTS = {
    "pass_order": np.empty(0, dtype=np.int64),
    "pass_position": 0,
    "gamma_scale": 1.0,
    "drift": 0.0,
    "group_size_seen": _DEFAULT_GROUP_SIZE,
    "last_nis": float("nan"),
}

ArrayLike = Sequence[int] | Sequence[float] | np.ndarray


class KGPSSelector(FromPretrainedMixin):
    r"""
    Kalman-Guided Prompt Selection over a pool of `num_prompts` prompts.

    Each prompt \\(i\\) has a Gaussian belief \\(\psi_i \sim \mathcal{N}(m_i, P_i)\\) over the logit of its success
    rate \\(\phi_i = \sigma(\psi_i)\\); by default (`shared_variance > 0`) that belief is a shared part
    \\(z_i^T \beta\\), from the prompt's `features`, plus its own residual (`shared.SharedFactor`). One selection round is:

    1. `predict(delta_norm)`: \\(P_i \mathrel{+}= Q\\) for every prompt, \\(Q = \gamma \lVert \Delta\theta
       \rVert_2^p\\) (summed over the optimizer steps since the last round), split between the shared part and the
       residuals;
    2. `update(indices, successes, trials)`: the prompts that were rolled out — by default the exact binomial
       posterior, moment-matched to a Gaussian, which also moves the shared part; with `KGPSConfig.paper()` the
       paper's Kalman update on \\(\mathrm{logit}(s/k)\\);
    3. `select(B)`: by default `B` prompts of the whole pool drawn without replacement in proportion to
       \\(A_i^{1/T}\\); with the paper's config the `B` prompts of largest \\(A_i\\), where
       \\(A_i = \mathbb{E}[\sigma(\psi_i)(1 - \sigma(\psi_i))]\\).

    `initialize(...)` feeds a warmup epoch's observations (`warmup_epochs > 0`; the paper's sets \\(m_i\\)
    directly). A selector a training run saved comes back with `KGPSSelector.from_pretrained(output_dir_or_repo_id)`.
    docs/algorithm.md gives every equation, and each departure of the default from the paper with its measurement.

    Args:
        num_prompts (`int`): `N`, the size of the prompt pool; prompts are the integers `0 .. N-1`.
        config (`KGPSConfig`, *optional*): hyperparameters; `KGPSConfig()` (the measured default) if omitted,
            `KGPSConfig.paper()` for the paper's method.
        seed (`int`, *optional*, defaults to `0`): seeds the generator of the draws (and of ties between scores).
        features (*optional*): what the prompts share (`shared.design`): a dict from names (e.g. dataset columns)
            to one label per prompt, or to one embedding per prompt; `None` shares one factor by the whole pool.
            `KGPSCallback` reads them from the train dataset's `config.feature_columns`.

    Attributes:
        mean (`np.ndarray` of shape `(N,)`, float32, read-only): logit means \\(m\\) (shared part included).
        variance (`np.ndarray` of shape `(N,)`, float32): logit variances \\(P\\) (a fresh array; shared part included).
        shared (`SharedFactor` or `None`): the factor shared across prompts.
        gamma (`float`): the process-noise scale in use (calibrated online when `process_noise_adaptation > 0`).
        last_nis (`float`): the normalized innovation squared of the latest `update`, averaged over its prompts.

    Repeated indices in one `initialize` or `update` call are pooled: their successes and trials are summed into
    one observation, as if all those rollouts came from one group. Indices with zero trials leave their prompt
    unchanged. Every method validates all of its input before it changes any state.

    Example:

    ```python
    >>> from trl_kgps import KGPSSelector
    >>> selector = KGPSSelector(num_prompts=1000)
    >>> batch = selector.select(32)
    >>> selector.predict(delta_norm=0.05)
    >>> selector.update(batch, successes=[4] * 32, trials=[8] * 32)
    ```
    """

    def __init__(self, num_prompts: int, config: KGPSConfig | None = None, seed: int = 0, features: Any = None):
        num_prompts = as_num_prompts(num_prompts)
        if config is None:
            config = KGPSConfig()
        elif not isinstance(config, KGPSConfig):
            raise TypeError(f"config must be a KGPSConfig, got {type(config).__name__}.")
        self._features_given = features is not None
        if features is not None and config.shared_variance == 0:
            raise ValueError(
                "features were given, but config.shared_variance is 0, so nothing is shared across prompts: set "
                "shared_variance > 0 (the default is 1.0), or drop the features."
            )
        # The factor shared across prompts (config.shared_variance > 0): then _mean and _variance are the residuals.
        self._shared = (
            SharedFactor(design(num_prompts, features), config.shared_variance) if config.shared_variance > 0 else None
        )
        self.num_prompts = num_prompts
        self.config = config
        self.seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))
        # m: logit means; P = _variance + _offset: logit variances, the shared _offset making `predict` O(1).
        self._mean = np.zeros(self.num_prompts, dtype=np.float32)
        self._variance = np.full(self.num_prompts, config.initial_variance, dtype=np.float32)
        self._offset = 0.0
        self._drift = 0.0  # the logit shift shared by every prompt (config.shared_drift): m_i = _mean[i] + _drift
        points = config.quadrature_points if config.utility == "posterior" else None
        self._points = points
        self._utility = Utility(points)
        self._ranking = UtilityRanking(self._utility)
        self._pass = CandidatePass(num_prompts)
        # With the shared factor: which prompts were observed, and the residual prior variance of the others, minus
        # initial_variance (config.residual_adaptation).
        self._seen = np.zeros(num_prompts, dtype=bool) if self._shared is not None else None
        self._unseen_extra = 0.0
        self._gamma_scale = 1.0  # gamma's calibrated multiplier (process_noise_adaptation)
        self._group_size_seen = _DEFAULT_GROUP_SIZE  # k of the latest observation
        self.last_nis = float("nan")  # the normalized innovation squared of the latest `update`, over its prompts

    @property
    def mean(self) -> np.ndarray:
        if self._shared is not None:
            view = (self._mean + self._shared.moments()[0]).astype(np.float32)
        else:
            view = self._mean.view() if self._drift == 0 else self._mean + np.float32(self._drift)
        view.flags.writeable = False
        return view

    @property
    def variance(self) -> np.ndarray:
        variance = self._variance + np.float32(self._offset)
        if self._shared is not None:
            variance = (variance + self._shared.moments()[1] + self._unseen_extra * ~self._seen).astype(np.float32)
        return variance

    @property
    def shared(self) -> "SharedFactor | None":
        """The factor shared across prompts (`config.shared_variance > 0`), or `None` (one filter per prompt)."""
        return self._shared

    @property
    def residual_prior(self) -> float:
        r"""\\(\tau^2\\): the residual prior variance of a prompt not yet observed (`residual_adaptation` learns it)."""
        return self.config.initial_variance + self._unseen_extra

    def _moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each of `indices`' logit mean and variance, float64 of shape `(n,)`: residual plus shared part."""
        m = self._mean[indices].astype(np.float64) + self._drift
        P = self._variance[indices].astype(np.float64) + self._offset
        if self._shared is not None:
            shared_mean, shared_variance = self._shared.moments(indices)
            m, P = m + shared_mean, P + shared_variance + self._unseen_extra * ~self._seen[indices]
        return m, P

    def initialize(self, indices: ArrayLike, successes: ArrayLike, trials: ArrayLike) -> None:
        r"""
        Warmup observations, which reset each observed prompt's belief. The paper's (`observation="logit"`):
        \\(m_i = \mathrm{logit}(\mathrm{clip}(s_i / k_i, \delta_i, 1 - \delta_i))\\), \\(\delta_i = 1 / (2 k_i)\\),
        and \\(P_i = P_0\\). With `observation="binomial"`: the exact update (see `update`) from the prior
        \\(\mathcal{N}(0, P_0)\\).

        Args:
            indices (`ArrayLike` of shape `(n,)`): prompt indices.
            successes (`ArrayLike` of shape `(n,)`): successful rollouts \\(s_i\\) of each.
            trials (`ArrayLike` of shape `(n,)`): scored rollouts \\(k_i\\) of each (`0`: no observation).
        """
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if self.config.observation == "logit":
            self._mean[idx] = _clipped_logit(s, k) - self._drift
            self._variance[idx] = self.config.initial_variance - self._offset
        elif self._shared is not None:  # from the prior: the residual's N(0, P0) and the shared part's belief
            self._mean[idx] = 0.0
            self._variance[idx] = self.config.initial_variance - self._offset
            self.update(idx, s, k)
            return
        else:  # the exact update from the prior N(0, P0)
            P0 = np.full(idx.size, self.config.initial_variance)
            mean, variance = posterior_moments(np.zeros(idx.size), P0, s, k)
            self._mean[idx] = mean - self._drift
            self._variance[idx] = variance - self._offset
        self._ranking.on_update(idx, self._mean, self._variance, self._offset)

    def predict(self, delta_norm: float | ArrayLike) -> None:
        r"""
        The prediction step for every prompt, \\(P_i \mathrel{+}= Q\\), in O(1).

        Args:
            delta_norm (`float` or `ArrayLike` of shape `(steps,)`):
                \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over the trainable parameters, or one norm per optimizer
                step since the last round; their variances add, \\(Q = \gamma \sum_s \lVert \Delta\theta_s
                \rVert_2^p\\). With `fixed_process_noise` set, \\(Q\\) is that constant and the norms are only checked.
        """
        norms = as_delta_norms(delta_norm)
        Q = self.process_noise(norms)
        if self._shared is not None:
            share = self.config.shared_noise_share
            self._shared.predict(share * Q)
            Q = (1.0 - share) * Q
        self._offset += Q
        if self._offset >= _MAX_VARIANCE_OFFSET:
            self._variance += np.float32(self._offset)
            self._ranking.shift_offset(self._offset)
            self._offset = 0.0

    def process_noise(self, delta_norm: float | ArrayLike) -> float:
        r"""\\(Q\\) for the given update norm(s), without applying it."""
        if self.config.fixed_process_noise is not None:
            as_delta_norms(delta_norm)
            return float(self.config.fixed_process_noise)
        norms = as_delta_norms(delta_norm)
        return float(self.config.gamma * self._gamma_scale * np.sum(norms**self.config.process_noise_power))

    @property
    def gamma(self) -> float:
        """The process-noise scale in use: `config.gamma`, times its calibration when `process_noise_adaptation > 0`."""
        return self.config.gamma * self._gamma_scale

    @property
    def group_size(self) -> int:
        """\\(k\\) of the 'mixed' objective: `config.group_size`, or the trials of the latest observation."""
        return self.config.group_size or self._group_size_seen

    def update(self, indices: ArrayLike, successes: ArrayLike, trials: ArrayLike) -> None:
        r"""
        The update of the observed prompts, from the prior \\((m, P)\\) held before this call.

        `observation="binomial"` (the default): \\((m, P)\\) become the mean and variance of the exact posterior
        \\(p(\psi \mid s) \propto \mathcal{N}(\psi; m, P)\, \sigma(\psi)^s (1 - \sigma(\psi))^{k - s}\\), by adaptive
        Gauss–Hermite quadrature (`_binomial.posterior_moments`).

        `observation="logit"` (the paper's Kalman update):

            p~ = clip(sigmoid(m), delta, 1 - delta),        delta = 1 / (2k)
            R  = 1 / (k p~ (1 - p~))                        observation variance, logit units
            y  = logit(clip(s / k, delta, 1 - delta)) - m   innovation
            K  = P / (P + R)
            m <- m + K y,   P <- (1 - K) P

        Either way `last_nis` becomes the batch's normalized innovation squared, the mean over its prompts of
        \\((s - \mathbb{E}[s])^2 / \mathrm{Var}[s]\\) under the prior; with `process_noise_adaptation` \\(= \eta > 0\\),
        \\(\gamma \leftarrow \gamma\, e^{\eta (\mathrm{NIS} - 1)}\\); with `shared_drift` \\(= \rho > 0\\), every prompt's mean
        moves by \\(\rho\\) times the batch's mean change \\(\overline{m' - m}\\).

        Args:
            indices (`ArrayLike` of shape `(n,)`): prompt indices.
            successes (`ArrayLike` of shape `(n,)`): successful rollouts \\(s\\) of each.
            trials (`ArrayLike` of shape `(n,)`): scored rollouts \\(k\\) of each (`0`: no observation).
        """
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if idx.size == 0:
            return
        if self._shared is not None:
            self._shared_update(idx, s, k)
            return
        m = self._mean[idx].astype(np.float64) + self._drift
        P = self._variance[idx].astype(np.float64) + self._offset
        self.last_nis = float(np.mean(_innovations_squared(m, P, s, k)))
        if self.config.observation == "logit":
            delta = 0.5 / k
            p_tilde = np.minimum(np.maximum(_sigmoid(m), delta), 1.0 - delta)
            R = 1.0 / (k * p_tilde * (1.0 - p_tilde))
            y = _clipped_logit(s, k) - m
            K = P / (P + R)
            mean, variance = m + K * y, (1.0 - K) * P
        else:
            mean, variance = posterior_moments(m, P, s, k)
        if self.config.shared_drift > 0:  # every prompt follows a share of the batch's mean surprise
            self._drift += self.config.shared_drift * float(np.mean(mean - m))
        self._mean[idx] = mean - self._drift
        self._variance[idx] = variance - self._offset
        self._ranking.on_update(idx, self._mean, self._variance, self._offset)
        self._group_size_seen = int(k.max())
        self._adapt_gamma()

    def _shared_update(self, idx: np.ndarray, s: np.ndarray, k: np.ndarray) -> None:
        """`update` with the shared factor: `shared.SharedFactor.update` moves it and returns the residuals."""
        first = ~self._seen[idx]
        m = self._mean[idx].astype(np.float64)
        P = self._variance[idx].astype(np.float64) + self._offset + self._unseen_extra * first
        mean, variance, (a, S) = self._shared.update(idx, m, P, s, k)
        nis = _innovations_squared(a, S, s, k)
        self.last_nis = float(np.mean(nis))
        self._mean[idx] = mean
        self._variance[idx] = variance - self._offset
        self._seen[idx] = True
        self._group_size_seen = int(k.max())
        self._adapt_gamma()
        if self.config.residual_adaptation > 0 and first.any():
            # Empirical Bayes for the spread of prompts around what their features predict: widen the prior of the
            # prompts not yet seen when first outcomes deviate more than it predicts (NIS > 1), narrow it when less.
            nis_first = float(np.mean(nis[first]))
            tau2 = self.residual_prior * math.exp(self.config.residual_adaptation * (nis_first - 1.0))
            P0 = self.config.initial_variance
            self._unseen_extra = min(max(tau2, _MIN_RESIDUAL_PRIOR_SCALE * P0), _MAX_RESIDUAL_PRIOR_SCALE * P0) - P0

    def _adapt_gamma(self) -> None:
        if self.config.process_noise_adaptation > 0:
            step = self.config.process_noise_adaptation * (self.last_nis - 1.0)
            self._gamma_scale = float(
                np.clip(self._gamma_scale * np.exp(step), 1 / _MAX_GAMMA_SCALE, _MAX_GAMMA_SCALE)
            )

    def scores(self) -> np.ndarray:
        r"""
        The utility of every prompt.

        Returns:
            `np.ndarray` of shape `(N,)`, float32: the posterior expectation (Gauss–Hermite) of the objective — the
            chance \\(1 - p^k - (1-p)^k\\) of a mixed group, in `[0, 1)`, or the paper's \\(p(1-p)\\), in
            `[0, 0.25]` — or its value at the mean with `utility="point"`.
        """
        if self._uses_ranking:
            return self._ranking.refresh(self._mean, self._variance, self._offset).copy()
        return self._score(np.arange(self.num_prompts)).astype(np.float32)

    @property
    def _uses_ranking(self) -> bool:
        """
        Whether scores are the paper's, on beliefs that change only where observed (the exact fast top-B): the
        per-prompt filter only, since an update of the shared part moves every prompt of its group.
        """
        return self._shared is None and self.config.objective == "variance" and self.config.shared_drift == 0

    def _score(self, indices: np.ndarray) -> np.ndarray:
        """The objective's posterior expectation for `indices` (float64 of shape `(n,)`)."""
        if self._shared is not None:
            m, P = self._moments(indices)
            m = m.astype(np.float32)
        else:
            m = self._mean[indices] + np.float32(self._drift)
            P = self._variance[indices].astype(np.float64) + self._offset
        if self.config.objective == "variance":
            return self._utility(m, P.astype(np.float32)).astype(np.float64)
        return expected_mixed_group_probability(m, P, self.group_size, self._points)

    def _thompson_score(self, indices: np.ndarray) -> np.ndarray:
        r"""The objective at one draw \\(\tilde\psi_i \sim \mathcal{N}(m_i, P_i)\\) per prompt."""
        m, P = self._moments(indices)
        psi = m + np.sqrt(np.maximum(P, 0.0)) * self._rng.standard_normal(indices.size)
        if self.config.objective == "variance":
            return 1.0 / (2.0 + 2.0 * np.cosh(psi))
        return mixed_group_probability(psi, self.group_size)

    def select(self, batch_size: int, exclude: ArrayLike | None = None) -> np.ndarray:
        """
        The next batch: `batch_size` distinct prompts, chosen by `config.selection` among
        `ceil(config.candidates * batch_size)` candidates — drawn at random, or the next ones of a seeded pass over
        the pool with `candidate_pass=True` — or among all prompts when `candidates=0`.

        With the paper's rule (`selection="top"`, `candidates=0`) these are the prompts of largest utility. Prompts
        of equal utility are chosen among, and ordered, by the seeded generator, never by their index.

        Args:
            batch_size (`int`): `B`.
            exclude (`ArrayLike`, *optional*): prompts that may not be selected (e.g. still awaiting rewards).

        Returns:
            `np.ndarray` of shape `(B,)`, int64: distinct prompt indices.
        """
        excluded = np.unique(as_index_array("exclude", [] if exclude is None else exclude, self.num_prompts))
        batch_size = as_batch_size(batch_size, self.num_prompts - excluded.size)
        config = self.config
        if config.selection == "top" and config.candidates == 0 and self._uses_ranking:
            return self._ranking.select(self._mean, self._variance, self._offset, batch_size, excluded, self._rng)
        count = math.ceil(config.candidates * batch_size)
        if config.candidates > 0 and config.candidate_pass:
            pool = self._pass.next(count, excluded, self._rng)
        elif config.candidates > 0:
            pool = random_candidates(self.num_prompts, count, excluded, self._rng)
        elif config.selection == "sample":  # exact and in O(B) expected time: see `_draw.whole_pool_draw`
            bound = 0.25 if config.objective == "variance" else 1.0
            return whole_pool_draw(
                self.num_prompts, self._score, bound, batch_size, excluded, self._rng, config.selection_temperature
            )
        else:
            pool = np.setdiff1d(np.arange(self.num_prompts), excluded, assume_unique=True)
        if config.selection == "thompson":
            return draw(pool, self._thompson_score(pool), batch_size, "top", self._rng)
        return draw(pool, self._score(pool), batch_size, config.selection, self._rng, config.selection_temperature)

    def predicted_success(self, indices: ArrayLike | None = None) -> np.ndarray:
        r"""
        \\(\sigma(m_i)\\), the predicted success rate.

        Args:
            indices (`ArrayLike`, *optional*): which prompts; all by default.

        Returns:
            `np.ndarray` of shape `(n,)` (or `(N,)`), float64, in `(0, 1)`.
        """
        idx = np.arange(self.num_prompts) if indices is None else as_index_array("indices", indices, self.num_prompts)
        return _sigmoid(self._moments(idx)[0])

    def state_dict(self) -> dict[str, Any]:
        """
        Everything needed to continue bit for bit: the beliefs, the variance offset and the generator's state, with
        the config and seed the selector was built with (`from_state_dict` builds a selector from them).

        The variance of prompt `i` is `variance_base[i] + variance_offset`; they are saved apart because their
        float32 sum is not exactly what the filter continues from.
        """
        return {
            "version": STATE_VERSION,
            "num_prompts": self.num_prompts,
            "mean": self._mean.copy(),
            "variance_base": self._variance.copy(),
            "variance_offset": self._offset,
            "rng_state": self._rng.bit_generator.state,
            **self._pass.state_dict(),
            "gamma_scale": self._gamma_scale,
            "drift": self._drift,
            "group_size_seen": self._group_size_seen,
            "last_nis": self.last_nis,
            **(
                {}
                if self._shared is None
                else {**self._shared.state_dict(), "seen": self._seen.copy(), "unseen_extra": self._unseen_extra}
            ),
            "config": dataclasses.asdict(self.config),
            "seed": self.seed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """
        Restores a `state_dict()`. Checks it whole first: a state of another version or number of prompts, or a
        corrupted one, raises `ValueError` and leaves this selector unchanged. The config is this selector's own.
        """
        if not isinstance(state, dict):
            raise ValueError(
                f"state must be a dict returned by KGPSSelector.state_dict(), got {type(state).__name__}."
            )
        missing = {"version", "num_prompts", "mean", "variance_base", "variance_offset", "rng_state"} - state.keys()
        if missing:
            raise ValueError(f"state is missing {sorted(missing)}; it was not written by KGPSSelector.state_dict().")
        if state["version"] not in (1, 2, STATE_VERSION):
            raise ValueError(
                f"state has version {state['version']!r}, but this trl-kgps reads versions 1 to {STATE_VERSION}. "
                "Load it with the trl-kgps release that saved it."
            )
        # Version 1 (trl-kgps 0.1) had only the paper's selector: no pass, no calibration, no drift.
        state = {**_VERSION_1_DEFAULTS, **state}
        if state["num_prompts"] != self.num_prompts:
            raise ValueError(
                f"state is for {state['num_prompts']!r} prompts, but this selector has {self.num_prompts}. Load a "
                "state saved for the same dataset, or build the selector with the saved number of prompts."
            )
        mean = check_finite_state("mean", state["mean"], self.num_prompts)
        variance = check_finite_state("variance_base", state["variance_base"], self.num_prompts)
        offset = check_scalar("variance_offset", state["variance_offset"])
        if not (0.0 <= offset < _MAX_VARIANCE_OFFSET) or (variance + np.float32(offset) < -1e-6).any():
            raise ValueError("state holds negative variances or an out-of-range variance_offset; it is corrupted.")
        rng = np.random.Generator(np.random.PCG64())
        try:
            rng.bit_generator.state = state["rng_state"]
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"state['rng_state'] is not a PCG64 generator state ({error}).") from None
        gamma_scale = check_scalar("gamma_scale", state["gamma_scale"])
        if not 1 / _MAX_GAMMA_SCALE <= gamma_scale <= _MAX_GAMMA_SCALE:
            raise ValueError(f"state['gamma_scale']={gamma_scale} is outside [1e-3, 1e3]; it is corrupted.")
        group_size_seen = int(state["group_size_seen"])
        if group_size_seen < 1:
            raise ValueError(
                f"state['group_size_seen']={group_size_seen} is not a number of rollouts; it is corrupted."
            )
        drift = check_scalar("drift", state["drift"])
        last_nis = float(state["last_nis"])  # NaN before the first update
        candidate_pass = CandidatePass(self.num_prompts)
        candidate_pass.load_state_dict(state)
        shared = None
        if self._shared is not None:
            if "shared_mu" not in state:
                raise ValueError(
                    "state holds no shared factor, but this selector has one (shared_variance > 0): it was saved by a "
                    "per-prompt KGPS. Build the selector with the config it was saved with."
                )
            shared = SharedFactor.from_state_dict(state, self.num_prompts)
            seen = np.asarray(state["seen"])
            unseen_extra = check_scalar("unseen_extra", state["unseen_extra"])
            if seen.shape != (self.num_prompts,) or seen.dtype != bool:
                raise ValueError(f"state['seen'] is not one flag per prompt ({self.num_prompts}); it is corrupted.")
            if self.config.initial_variance + unseen_extra <= 0:
                raise ValueError(f"state['unseen_extra']={unseen_extra} makes a negative prior; it is corrupted.")
            if self._features_given and not self._shared.design.same_as(shared.design):
                raise ValueError(
                    "state was saved with other prompt features than this selector's (another dataset, or its "
                    "feature columns changed): resume with the dataset and feature_columns it was saved with."
                )
        elif "shared_mu" in state:
            raise ValueError(
                "state holds a shared factor, but this selector has none (shared_variance=0): build it with the config "
                "it was saved with."
            )
        # Everything checked: only now does this selector change.
        self._mean, self._variance, self._offset, self._rng = mean, variance, offset, rng
        self._pass, self._gamma_scale, self._group_size_seen = candidate_pass, gamma_scale, group_size_seen
        self._drift, self.last_nis = drift, last_nis
        if shared is not None:
            self._shared, self._seen, self._unseen_extra = shared, seen.copy(), unseen_extra
        self._ranking.invalidate()

    @classmethod
    def _init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        saved = state["config"]
        # A version-1 state was saved by the paper's selector, before the fields it lacks existed; a version-2 state
        # by a per-prompt filter, before the shared factor existed.
        if state.get("version") == 1:
            config = KGPSConfig.paper(**saved)
        elif state.get("version") == 2:
            config = KGPSConfig(**{"shared_variance": 0.0, **saved})
        else:
            config = KGPSConfig(**saved)
        return {"num_prompts": state["num_prompts"], "config": config, "seed": state["seed"]}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_prompts={self.num_prompts}, config={self.config}, seed={self.seed})"


def _innovations_squared(m: np.ndarray, P: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
    r"""Each prompt's \\((s - \mathbb{E}[s])^2 / \mathrm{Var}[s]\\) under its prior \\(\mathcal{N}(m, P)\\), shape `(n,)`."""
    predicted, spread = predictive_moments(m, P, k)
    return (s - predicted) ** 2 / spread


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _clipped_logit(s: np.ndarray, k: np.ndarray) -> np.ndarray:
    r"""\\(\mathrm{logit}(\mathrm{clip}(s / k, \delta, 1 - \delta))\\) with \\(\delta = 1 / (2k)\\): finite for
    \\(s = 0\\) and \\(s = k\\), where the paper's \\(\mathrm{logit}(s / k)\\) is not."""
    delta = 0.5 / k
    phi_hat = np.minimum(np.maximum(s / k, delta), 1.0 - delta)
    return np.log(phi_hat) - np.log1p(-phi_hat)
