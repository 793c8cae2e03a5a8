r"""
The KGPS estimator's public class: a facade over the filter its config picks — `per_prompt.PerPromptFilter` (the
paper's, `shared_variance=0`) or `shared_filter.SharedFilter` (the default: a factor shared across prompts) — that
validates every input, chooses batches from the filter's moments through its `rule.SelectionRule` and assembles the
state dict. Framework-free (numpy only) and vectorised over all prompts. The variants measured and left out of the
default extend it through its extension point, in `experimental.py`.
"""

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import __version__
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
from ._utility import expected_success
from .base import FromPretrainedMixin
from .per_prompt import PerPromptFilter
from .rule import SelectionRule
from .shared_factor import SharedFactor, design
from .shared_filter import SharedFilter


# The version of the state this release writes; `older_states` reads those of earlier releases.
STATE_VERSION = 3
# The calibrated gamma stays within this factor of `config.gamma` (`process_noise_adaptation`).
MAX_GAMMA_SCALE = 1e3

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
       residuals; by default \\(\gamma\\) is calibrated after each update, \\(\gamma \leftarrow \gamma\,
       e^{\eta (\mathrm{NIS} - 1)}\\) (`process_noise_adaptation` \\(= \eta\\); 0 in the paper's config);
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
            `KGPSConfig.paper()` for the paper's method. A field left to the dataset (`None`) takes its value with
            metadata columns (`config.WITH_METADATA`); `KGPSCallback` decides them from the train dataset first.
        seed (`int`, *optional*, defaults to `0`): seeds the generator of the draws (and of ties between scores).
        features (*optional*): what the prompts share (`shared.design`): a dict from names (e.g. dataset columns)
            to one label per prompt, or to one embedding per prompt; `None` shares one factor by the whole pool.
            `KGPSCallback` reads them from the train dataset's `config.feature_columns`.
        rows_per_prompt (`ArrayLike` of shape `(N,)`, *optional*): each prompt's rows in the train dataset (its
            copies); with `config.copies_weight="rows"` the draw's probability of a prompt, \(u^{1/T}\), is
            multiplied by them. Unset: one row each.

    Attributes:
        config (`KGPSConfig`): the config it runs with, every field decided (`KGPSConfig.resolved`).
        mean (`np.ndarray` of shape `(N,)`, float32, read-only): logit means \\(m\\) (shared part included).
        variance (`np.ndarray` of shape `(N,)`, float32): logit variances \\(P\\) (a fresh array; shared part
            included).
        shared (`SharedFactor` or `None`): the factor shared across prompts.
        gamma (`float`): the process-noise scale in use, `config.gamma` times its calibration, in
            `[1e-3, 1e3]` times `config.gamma`.
        last_nis (`float`): the normalized innovation squared of the latest `update`, averaged over its prompts.

    Repeated indices in one `initialize` or `update` call are pooled: their successes and trials are summed into
    one observation, as if all those rollouts came from one group. Indices with zero trials leave their prompt
    unchanged. Every method validates all of its input before it changes any state.

    Extension point: a variant of KGPS subclasses `KGPSSelector` and changes these, and only these: `config_class`
    (the `KGPSConfig` subclass holding its own fields), `rule_class` (a `rule.SelectionRule` subclass: how a batch is
    chosen, and what that keeps in the state), `new_filter` (the beliefs' filter) and `process_noise` (\\(Q\\)); it
    reads its rule as `self._rule`. It is picked by name once registered (`trl_kgps.register_selector`), and for a
    config of its `config_class` wherever KGPS is asked for. `trl_kgps.selectors.experimental` is one.

    Example:

    ```python
    >>> from trl_kgps import KGPSSelector
    >>> selector = KGPSSelector(num_prompts=1000)
    >>> batch = selector.select(32)
    >>> selector.predict(delta_norm=0.05)
    >>> selector.update(batch, successes=[4] * 32, trials=[8] * 32)
    ```
    """

    # Extension point: the config class whose fields this selector reads, and how it chooses a batch.
    config_class: type[KGPSConfig] = KGPSConfig
    rule_class: type[SelectionRule] = SelectionRule

    def __init__(
        self,
        num_prompts: int,
        config: KGPSConfig | None = None,
        seed: int = 0,
        features: Any = None,
        rows_per_prompt: Any = None,
    ):
        num_prompts = as_num_prompts(num_prompts)
        if config is None:
            config = KGPSConfig()
        elif not isinstance(config, KGPSConfig):
            raise TypeError(f"config must be a KGPSConfig, got {type(config).__name__}.")
        unread = sorted({f.name for f in dataclasses.fields(config)} - self.config_class.__dataclass_fields__.keys())
        if unread:
            readers = _readers(lambda c: c.config_class is type(config))
            raise TypeError(
                f"{type(config).__name__} has fields {unread} that {type(self).__name__} does not read: build "
                f"{readers} for it (build_selector and KGPSCallback do)."
            )
        # Without the train dataset, what it would decide is the with-metadata value (`KGPSConfig.resolved`); a
        # config `with_metadata` resolved already is kept as it is.
        config = config.resolved(has_metadata=True)
        self._features_given = features is not None
        if features is not None and config.shared_variance == 0:
            raise ValueError(
                "features were given, but config.shared_variance is 0, so nothing is shared across prompts: set "
                "shared_variance > 0 (1.0, the default where the dataset has metadata columns), or drop the features."
            )
        self.num_prompts = num_prompts
        self.config = config
        self.seed = seed
        # w_i = rows_i^T, which multiplies a prompt's score in the draw: its probability u_i^(1/T) times rows_i.
        row_weight = None
        if config.copies_weight == "rows" and rows_per_prompt is not None:
            rows = np.asarray(rows_per_prompt)
            if rows.shape != (num_prompts,) or rows.dtype.kind not in "iu" or (rows < 1).any():
                raise ValueError(
                    f"rows_per_prompt must hold one count >= 1 per prompt ({num_prompts}), got shape {rows.shape} "
                    f"({rows.dtype}): pass each prompt's number of rows (PromptCopies.rows_per_prompt)."
                )
            row_weight = rows.astype(np.float64) ** config.selection_temperature
        self._filter = self.new_filter(features)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._rule = self.rule_class(self._filter, config, num_prompts, row_weight)
        self.last_nis = float("nan")  # the normalized innovation squared of the latest `update`, over its prompts
        self._gamma_scale = 1.0  # gamma's calibrated multiplier (process_noise_adaptation)

    def new_filter(self, features: Any) -> PerPromptFilter | SharedFilter:
        """
        Extension point: the filter `self.config` asks for, the shared factor's (`shared_variance > 0`) or one per
        prompt, over `self.num_prompts` prompts of `features` (see the class's arguments).
        """
        config = self.config
        if config.shared_variance > 0:
            return SharedFilter(
                design(self.num_prompts, features),
                config.shared_variance,
                config.initial_variance,
                config.shared_noise_share,
                config.residual_adaptation,
            )
        return PerPromptFilter(self.num_prompts, config.initial_variance, config.observation)

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
        r"""\\(\tau^2\\): the residual prior variance of a prompt not yet observed (`residual_adaptation` learns
        it)."""
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
            self._observed(nis, idx, s, k)
        self._rule.changed(idx)

    def predict(self, delta_norm: float | ArrayLike) -> None:
        r"""
        The prediction step for every prompt, \\(P_i \mathrel{+}= Q\\), in O(1).

        Args:
            delta_norm (`float` or `ArrayLike` of shape `(steps,)`):
                \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over the trainable parameters, or one norm per optimizer
                step since the last round; their variances add, \\(Q = \gamma \sum_s \lVert \Delta\theta_s
                \rVert_2\\).
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
                "after. Lower gamma (the paper's 0.1 suits update norms near 1), or set fixed_process_noise; check "
                "the learning rate if the norm itself is unexpected. No belief changed."
            )
        self._rule.predicted(self._filter.predict(Q))

    def process_noise(self, delta_norm: float | ArrayLike) -> float:
        r"""\\(Q\\) for the given update norm(s), without applying it. Extension point: `predict` applies this."""
        return float(self.gamma * np.sum(as_delta_norms(delta_norm)))

    @property
    def gamma(self) -> float:
        """The process-noise scale in use: `config.gamma` times its calibration (1 with process_noise_adaptation=0)."""
        return self.config.gamma * self._gamma_scale

    def update(self, indices: ArrayLike, successes: ArrayLike, trials: ArrayLike) -> None:
        r"""
        The update of the observed prompts, from the prior \\((m, P)\\) held before this call.

        `observation="binomial"` (the default): \\((m, P)\\) become the mean and variance of the exact posterior
        \\(p(\psi \mid s) \propto \mathcal{N}(\psi; m, P)\, \sigma(\psi)^s (1 - \sigma(\psi))^{k - s}\\), by adaptive
        Gauss–Hermite quadrature (`_binomial.posterior_moments`); with the shared factor, through
        `shared.SharedFactor.update`, which also moves the shared part. `observation="logit"`: the paper's Kalman
        update on \\(\mathrm{logit}(s/k)\\) (`per_prompt.logit_update` gives its equations).

        Either way `last_nis` becomes the batch's normalized innovation squared, the mean over its prompts of
        \\((s - \mathbb{E}[s])^2 / \mathrm{Var}[s]\\) under the prior.

        Args:
            indices (`ArrayLike` of shape `(n,)`): prompt indices.
            successes (`ArrayLike` of shape `(n,)`): successful rollouts \\(s\\) of each.
            trials (`ArrayLike` of shape `(n,)`): scored rollouts \\(k\\) of each (`0`: no observation).
        """
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if idx.size == 0:
            return
        nis = self._filter.update(idx, s, k)
        self._observed(nis, idx, s, k)
        self._rule.changed(idx)

    def _observed(self, nis: np.ndarray, idx: np.ndarray, s: np.ndarray, k: np.ndarray) -> None:
        r"""
        What an update of the filter tells the selector (`nis` of shape `(n,)`, each prompt's normalized innovation
        squared; `idx`, `s`, `k` the prompts, their successes and trials): `last_nis`, their mean, and with
        `process_noise_adaptation` \\(= \eta > 0\\) gamma's calibration
        \\(\gamma \leftarrow \gamma\, e^{\eta (\mathrm{NIS} - 1)}\\), within `[1e-3, 1e3]` times `config.gamma`: a
        batch more surprising than the beliefs predicted (NIS > 1) means the policy moved them more than `Q` allowed,
        so `Q` grows; a less surprising one shrinks it. The rule hears of the observations last (`observed`).
        """
        self.last_nis = float(np.mean(nis))
        eta = self.config.process_noise_adaptation
        if eta > 0 and not math.isnan(self.last_nis):
            step = eta * (self.last_nis - 1.0)
            # A surprise that would carry the scale past its upper bound (a phase change can make NIS reach 1e4 and
            # more, and exp() overflow) lands on the bound itself.
            if step > math.log(MAX_GAMMA_SCALE / self._gamma_scale):
                scale = MAX_GAMMA_SCALE
            else:
                scale = self._gamma_scale * np.exp(step)
            self._gamma_scale = float(np.clip(scale, 1 / MAX_GAMMA_SCALE, MAX_GAMMA_SCALE))
        self._rule.observed(idx, s, k)

    def scores(self) -> np.ndarray:
        r"""
        The utility of every prompt.

        Returns:
            `np.ndarray` of shape `(N,)`, float32: the posterior expectation (Gauss–Hermite) of \\(p(1-p)\\), in
                `[0, 0.25]`.
        """
        return self._rule.scores()

    def select(self, batch_size: int, exclude: ArrayLike | None = None) -> np.ndarray:
        """
        The next batch: `batch_size` distinct prompts, chosen by `config.selection` among
        `ceil(config.candidates * batch_size)` candidates drawn at random, or among all prompts when `candidates=0`.

        With the paper's rule (`selection="top"`, `candidates=0`) these are the prompts of largest utility; by default
        (`selection="sample"`, `candidates=0`) a draw over the whole pool in proportion to the tempered utility.
        Prompts of equal utility are chosen among, and ordered, by the seeded generator, never by their index.

        Args:
            batch_size (`int`): `B`.
            exclude (`ArrayLike`, *optional*): prompts that may not be selected (e.g. still awaiting rewards).

        Returns:
            `np.ndarray` of shape `(B,)`, int64: distinct prompt indices.
        """
        excluded = np.unique(as_index_array("exclude", [] if exclude is None else exclude, self.num_prompts))
        batch_size = as_batch_size(batch_size, self.num_prompts - excluded.size)
        return self._rule.choose(batch_size, excluded, self._rng)

    def predicted_success(self, indices: ArrayLike | None = None) -> np.ndarray:
        r"""
        The predicted success rate: \\(\mathbb{E}[\sigma(\psi_i)]\\) under the belief \\(\mathcal{N}(m_i, P_i)\\), the
        chance that the prompt's next rollout succeeds (`_utility.expected_success`). It lies nearer 1/2 than
        \\(\sigma(m_i)\\), the belief's median, by as much as the belief is unsure.

        Args:
            indices (`ArrayLike`, *optional*): which prompts; all by default.

        Returns:
            `np.ndarray` of shape `(n,)` (or `(N,)`), float64, in `(0, 1)`.
        """
        idx = np.arange(self.num_prompts) if indices is None else as_index_array("indices", indices, self.num_prompts)
        return expected_success(*self._filter.moments(idx))

    def state_dict(self) -> dict[str, Any]:
        """
        Everything needed to continue bit for bit: the beliefs, the variance offset and the generator's state, with
        the config and seed the selector was built with (`from_state_dict` builds a selector from them), its state
        version and the release that wrote it (`trl_kgps`, which `older_states` reads).

        The variance of prompt `i` is `variance_base[i] + variance_offset`; they are saved apart because their
        float32 sum is not exactly what the filter continues from.
        """
        beliefs = self._filter.state_dict()
        # The beliefs every filter has first; what only one filter holds (the per-prompt filter's drift, the shared
        # filter's factor, `seen` and `unseen_extra`) after the calibrations.
        return {
            "version": STATE_VERSION,
            older_states.RELEASE: __version__,
            "num_prompts": self.num_prompts,
            "mean": beliefs.pop("mean"),
            "variance_base": beliefs.pop("variance_base"),
            "variance_offset": beliefs.pop("variance_offset"),
            "rng_state": self._rng.bit_generator.state,
            "last_nis": self.last_nis,
            "gamma_scale": self._gamma_scale,
            **beliefs,
            "config": dataclasses.asdict(self.config),
            "seed": self.seed,
            **self._rule.state_dict(),
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
        _check_version(state)
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
        last_nis = float(state["last_nis"])  # NaN before the first update
        gamma_scale = check_scalar("gamma_scale", state["gamma_scale"])  # 1.0 in a state saved before it
        if not 1 / MAX_GAMMA_SCALE <= gamma_scale <= MAX_GAMMA_SCALE:
            raise ValueError(
                f"state_dict['gamma_scale'] must lie in [1e-3, 1e3] (gamma's calibration), got {gamma_scale!r}; this "
                "state is corrupted."
            )
        rule = self._rule.restored(state, filter_)
        # Everything checked: only now does this selector change.
        self._filter, self._rule, self._rng = filter_, rule, rng
        self.last_nis, self._gamma_scale = last_nis, gamma_scale

    @classmethod
    def init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        """The constructor's keyword arguments that built the selector whose `state_dict()` is `state`: its config is
        a `config_class`, which must read every field the state's config holds."""
        num_prompts, seed = state["num_prompts"], state["seed"]  # a `KeyError` for what is no selector's state
        _check_version(state)
        read = cls.config_class.__dataclass_fields__
        fields = older_states.kgps_config_fields(state, read)
        unread = sorted(fields.keys() - read.keys())
        if unread:
            readers = _readers(lambda c: set(unread) <= c.config_class.__dataclass_fields__.keys())
            raise ValueError(
                f"its config holds {unread}, which {cls.config_class.__name__} does not: it was saved by a variant of "
                f"KGPS: load it with {readers}"
            )
        return {"num_prompts": num_prompts, "config": cls.config_class(**fields), "seed": seed}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_prompts={self.num_prompts}, config={self.config}, seed={self.seed})"


def _check_version(state: dict[str, Any]) -> None:
    """Raises `ValueError` for a `state` of a version this release does not read, naming it, the release that wrote it
    where the state records one, and the fix."""
    refusal = older_states.written_by_a_development_build(state)
    if refusal is not None:
        raise ValueError(f"{refusal}. {older_states.DEVELOPMENT_LOAD_FIX}.")
    version, release = state.get("version"), state.get(older_states.RELEASE)
    if version not in (*older_states.KGPS_STATE_VERSIONS, STATE_VERSION):
        writer = "the trl-kgps release that saved it" if release is None else f"trl-kgps {release}, which saved it"
        raise ValueError(
            f"state has version {version!r}, but this trl-kgps ({__version__}) reads versions 1 to {STATE_VERSION}. "
            f"Load it with {writer}."
        )


def _readers(reads: Callable[[type], bool]) -> str:
    """The variants of KGPS imported so far whose config class `reads` approves, by module and name, for messages."""
    names = [f"{c.__module__}.{c.__name__}" for c in _variants(KGPSSelector) if reads(c)]
    return " or ".join(names) or "the selector that reads them"


def _variants(cls: type) -> list[type]:
    """Every subclass of `cls` defined so far, at any depth: the variants of KGPS whose modules were imported."""
    return [variant for sub in cls.__subclasses__() for variant in (sub, *_variants(sub))]
