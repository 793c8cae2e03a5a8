r"""
The KGPS estimator's public class: a facade over the filter its config picks — `per_prompt.PerPromptFilter` (the
paper's, `shared_variance=0`) or `shared_filter.SharedFilter` (the default: a factor shared across prompts) — that
validates every input, selects over the filter's moments (`_utility`, `_ranking`, `_draw`), calibrates the process
noise, and assembles the state dict. Framework-free (numpy only) and vectorised over all prompts.
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import MAX_LOGIT_VARIANCE, KGPSConfig
from ..engine import older_states
from ._checks import (
    as_batch_size,
    as_delta_norms,
    as_index_array,
    as_num_prompts,
    as_observations,
    check_scalar,
)
from ._draw import CandidatePass, draw, random_candidates, whole_pool_draw
from ._ranking import UtilityRanking
from ._utility import Utility, expected_mixed_group_probability, mixed_group_probability
from .base import FromPretrainedMixin
from .experimental import ExperimentalConfig, config_from_fields, experimental
from .per_prompt import PerPromptFilter, sigmoid
from .shared_factor import SharedFactor, design
from .shared_filter import SharedFilter


STATE_VERSION = 3
# The calibrated gamma stays within this factor of the configured one.
_MAX_GAMMA_SCALE = 1e3
_DEFAULT_GROUP_SIZE = 8

ArrayLike = Sequence[int] | Sequence[float] | np.ndarray


class KGPSSelector(FromPretrainedMixin):
    r"""
    Kalman-Guided Prompt Selection over a pool of `num_prompts` prompts.

    Each prompt \\(i\\) has a Gaussian belief \\(\psi_i \sim \mathcal{N}(m_i, P_i)\\) over the logit of its success
    rate \\(\phi_i = \sigma(\psi_i)\\); by default (`shared_variance > 0`) that belief is a shared part
    \\(z_i^T \beta\\), from the prompt's `features`, plus its own residual (`shared_filter.SharedFilter`); with
    `shared_variance=0`, one independent filter per prompt (`per_prompt.PerPromptFilter`). One selection round is:

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
        self._variant = experimental(config)  # the experimental fields, at their defaults for a KGPSConfig
        self._features_given = features is not None
        if features is not None and config.shared_variance == 0:
            raise ValueError(
                "features were given, but config.shared_variance is 0, so nothing is shared across prompts: set "
                "shared_variance > 0 (the default is 1.0), or drop the features."
            )
        self._filter: PerPromptFilter | SharedFilter
        if config.shared_variance > 0:
            self._filter = SharedFilter(
                design(num_prompts, features),
                config.shared_variance,
                config.initial_variance,
                config.shared_noise_share,
                config.residual_adaptation,
            )
        else:
            self._filter = PerPromptFilter(
                num_prompts, config.initial_variance, config.observation, self._variant.shared_drift
            )
        self.num_prompts = num_prompts
        self.config = config
        self.seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))
        points = config.quadrature_points if self._variant.utility == "posterior" else None
        self._points = points
        self._utility = Utility(points)
        self._ranking = UtilityRanking(self._utility)
        self._pass = CandidatePass(num_prompts)
        self._gamma_scale = 1.0  # gamma's calibrated multiplier (process_noise_adaptation)
        self._group_size_seen = _DEFAULT_GROUP_SIZE  # k of the latest observation
        self.last_nis = float("nan")  # the normalized innovation squared of the latest `update`, over its prompts

    @property
    def mean(self) -> np.ndarray:
        return self._filter.mean

    @property
    def variance(self) -> np.ndarray:
        return self._filter.variance

    @property
    def shared(self) -> "SharedFactor | None":
        """The factor shared across prompts (`config.shared_variance > 0`), or `None` (one filter per prompt)."""
        return self._filter.factor if isinstance(self._filter, SharedFilter) else None

    @property
    def residual_prior(self) -> float:
        r"""\\(\tau^2\\): the residual prior variance of a prompt not yet observed (`residual_adaptation` learns it)."""
        return self._filter.residual_prior

    def initialize(self, indices: ArrayLike, successes: ArrayLike, trials: ArrayLike) -> None:
        r"""
        Warmup observations, which reset each observed prompt's belief. The paper's (`observation="logit"`):
        \\(m_i = \mathrm{logit}(\mathrm{clip}(s_i / k_i, \delta_i, 1 - \delta_i))\\), \\(\delta_i = 1 / (2 k_i)\\),
        and \\(P_i = P_0\\). With `observation="binomial"`: the exact update (see `update`) from the prior
        \\(\mathcal{N}(0, P_0)\\); with the shared factor, that update also moves the shared part and counts as one
        (`last_nis`, the calibrations).

        Args:
            indices (`ArrayLike` of shape `(n,)`): prompt indices.
            successes (`ArrayLike` of shape `(n,)`): successful rollouts \\(s_i\\) of each.
            trials (`ArrayLike` of shape `(n,)`): scored rollouts \\(k_i\\) of each (`0`: no observation).
        """
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if idx.size == 0:
            return
        nis = self._filter.initialize(idx, s, k)
        if nis is not None:
            self._observed(nis, k)
        self._rescore(idx)

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
        if not Q <= MAX_LOGIT_VARIANCE:
            norm = ("an update norm of " if norms.size == 1 else "the update norms ") + ", ".join(
                f"{n:g}" for n in norms
            )
            raise ValueError(
                f"The process noise Q = {Q:g} for {norm}, is above {MAX_LOGIT_VARIANCE:g}, the largest logit variance "
                "KGPS adds: it would erase every prompt's evidence, and the float32 beliefs overflow to NaN soon "
                "after. Lower gamma (the paper's 0.1 suits update norms near 1), or set fixed_process_noise; check the "
                "learning rate if the norm itself is unexpected. No belief changed."
            )
        folded = self._filter.predict(Q)
        if folded and self._uses_ranking:
            self._ranking.shift_offset(folded)

    def process_noise(self, delta_norm: float | ArrayLike) -> float:
        r"""\\(Q\\) for the given update norm(s), without applying it."""
        if self._variant.fixed_process_noise is not None:
            as_delta_norms(delta_norm)
            return float(self._variant.fixed_process_noise)
        norms = as_delta_norms(delta_norm)
        return float(self.config.gamma * self._gamma_scale * np.sum(norms**self._variant.process_noise_power))

    @property
    def gamma(self) -> float:
        """The process-noise scale in use: `config.gamma`, times its calibration when `process_noise_adaptation > 0`."""
        return self.config.gamma * self._gamma_scale

    @property
    def group_size(self) -> int:
        """\\(k\\) of the 'mixed' objective: `config.group_size`, or the trials of the latest observation."""
        return self._variant.group_size or self._group_size_seen

    def update(self, indices: ArrayLike, successes: ArrayLike, trials: ArrayLike) -> None:
        r"""
        The update of the observed prompts, from the prior \\((m, P)\\) held before this call.

        `observation="binomial"` (the default): \\((m, P)\\) become the mean and variance of the exact posterior
        \\(p(\psi \mid s) \propto \mathcal{N}(\psi; m, P)\, \sigma(\psi)^s (1 - \sigma(\psi))^{k - s}\\), by adaptive
        Gauss–Hermite quadrature (`_binomial.posterior_moments`); with the shared factor, through
        `shared.SharedFactor.update`, which also moves the shared part. `observation="logit"`: the paper's Kalman
        update on \\(\mathrm{logit}(s/k)\\) (`per_prompt.logit_update` gives its equations).

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
        nis = self._filter.update(idx, s, k)
        self._observed(nis, k)
        self._rescore(idx)

    def _observed(self, nis: np.ndarray, k: np.ndarray) -> None:
        """What an update of the filter tells the selector: `last_nis`, the group size, gamma's calibration."""
        self.last_nis = float(np.mean(nis))
        self._group_size_seen = int(k.max())
        if self._variant.process_noise_adaptation > 0:
            step = self._variant.process_noise_adaptation * (self.last_nis - 1.0)
            self._gamma_scale = float(
                np.clip(self._gamma_scale * np.exp(step), 1 / _MAX_GAMMA_SCALE, _MAX_GAMMA_SCALE)
            )

    def _rescore(self, indices: np.ndarray) -> None:
        """Keeps the cached ranking's bounds valid for `indices`, whose beliefs just changed."""
        if self._uses_ranking:
            self._ranking.on_update(indices, self._filter.m, self._filter.P, self._filter.c)

    def scores(self) -> np.ndarray:
        r"""
        The utility of every prompt.

        Returns:
            `np.ndarray` of shape `(N,)`, float32: the posterior expectation (Gauss–Hermite) of the objective —
                the chance \\(1 - p^k - (1-p)^k\\) of a mixed group, in `[0, 1)`, or the paper's \\(p(1-p)\\), in
                `[0, 0.25]` — or its value at the mean with `utility="point"`.
        """
        if self._uses_ranking:
            return self._ranking.refresh(self._filter.m, self._filter.P, self._filter.c).copy()
        return self._score(np.arange(self.num_prompts)).astype(np.float32)

    @property
    def _uses_ranking(self) -> bool:
        """
        Whether scores are the paper's, on beliefs that change only where observed (the exact fast top-B): the
        per-prompt filter only, since an update of the shared part moves every prompt of its group.
        """
        return (
            isinstance(self._filter, PerPromptFilter)
            and self._variant.objective == "variance"
            and self._variant.shared_drift == 0
        )

    def _score(self, indices: np.ndarray) -> np.ndarray:
        """The objective's posterior expectation for `indices` (float64 of shape `(n,)`)."""
        m, P = self._filter.utility_moments(indices)
        if self._variant.objective == "variance":
            return self._utility(m, P.astype(np.float32)).astype(np.float64)
        return expected_mixed_group_probability(m, P, self.group_size, self._points)

    def _thompson_score(self, indices: np.ndarray) -> np.ndarray:
        r"""The objective at one draw \\(\tilde\psi_i \sim \mathcal{N}(m_i, P_i)\\) per prompt."""
        m, P = self._filter.moments(indices)
        psi = m + np.sqrt(np.maximum(P, 0.0)) * self._rng.standard_normal(indices.size)
        if self._variant.objective == "variance":
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
        config = self._variant
        if config.selection == "top" and config.candidates == 0 and self._uses_ranking:
            f = self._filter
            return self._ranking.select(f.m, f.P, f.c, batch_size, excluded, self._rng)
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
        return sigmoid(self._filter.moments(idx)[0])

    def state_dict(self) -> dict[str, Any]:
        """
        Everything needed to continue bit for bit: the beliefs, the variance offset and the generator's state, with
        the config and seed the selector was built with (`from_state_dict` builds a selector from them).

        The variance of prompt `i` is `variance_base[i] + variance_offset`; they are saved apart because their
        float32 sum is not exactly what the filter continues from.
        """
        beliefs = self._filter.state_dict()
        # The beliefs every filter has first; what only one filter holds (the per-prompt filter's drift, the shared
        # filter's factor, `seen` and `unseen_extra`) after the calibrations.
        return {
            "version": STATE_VERSION,
            "num_prompts": self.num_prompts,
            "mean": beliefs.pop("mean"),
            "variance_base": beliefs.pop("variance_base"),
            "variance_offset": beliefs.pop("variance_offset"),
            "rng_state": self._rng.bit_generator.state,
            **self._pass.state_dict(),
            "gamma_scale": self._gamma_scale,
            "group_size_seen": self._group_size_seen,
            "last_nis": self.last_nis,
            **beliefs,
            "config": dataclasses.asdict(self.config),
            "config_class": type(self.config).__name__,
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
        if state["version"] not in (*older_states.KGPS_STATE_VERSIONS, STATE_VERSION):
            raise ValueError(
                f"state has version {state['version']!r}, but this trl-kgps reads versions 1 to {STATE_VERSION}. "
                "Load it with the trl-kgps release that saved it."
            )
        state = older_states.kgps_state(state)
        if state["num_prompts"] != self.num_prompts:
            raise ValueError(
                f"state is for {state['num_prompts']!r} prompts, but this selector has {self.num_prompts}. Load a "
                "state saved for the same dataset, or build the selector with the saved number of prompts."
            )
        filter_ = self._filter.restored(state)
        # Features were given, so both are shared filters.
        if self._features_given and not self._filter.factor.design.same_as(filter_.factor.design):
            raise ValueError(
                "state was saved with other prompt features than this selector's (another dataset, or its "
                "feature columns changed): resume with the dataset and feature_columns it was saved with."
            )
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
        last_nis = float(state["last_nis"])  # NaN before the first update
        candidate_pass = CandidatePass(self.num_prompts)
        candidate_pass.load_state_dict(state)
        # Everything checked: only now does this selector change.
        self._filter, self._rng, self._pass = filter_, rng, candidate_pass
        self._gamma_scale, self._group_size_seen, self.last_nis = gamma_scale, group_size_seen, last_nis
        self._ranking.invalidate()

    @classmethod
    def init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        if state.get("config_class") == ExperimentalConfig.__name__:
            config = ExperimentalConfig(**state["config"])
        else:
            config = config_from_fields(older_states.kgps_config_fields(state))
        return {"num_prompts": state["num_prompts"], "config": config, "seed": state["seed"]}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_prompts={self.num_prompts}, config={self.config}, seed={self.seed})"
