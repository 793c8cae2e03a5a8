r"""
ARCUS (arXiv 2609.38018, September 2026; no code published), built from the preprint's text as a peer of KGPS:
a Gaussian belief per prompt over the arcsine coordinate \\(\psi = \arcsin\sqrt{p}\\) of its success rate.

The preprint names KGPS a special case "with a mismatched coordinate": on the logit, a group's noise depends on the
success rate and is unbounded where groups are all right or all wrong, and a clipped observation there makes the
filter over-confident. In \\(\psi\\), a group of \\(n\\) rollouts observes \\(\arcsin\sqrt{s/n}\\) with the same noise
\\(1/(4n)\\) at every rate; all-right and all-wrong groups go through a separate boundary-layer likelihood; beliefs
drift as the policy moves; prompts are scored by the chance that their next group is informative. The equations are
in `_arcsine`'s docstring.

Choices made here where the preprint's text leaves one open:

- **The belief's support.** \\(\psi_i \sim \mathcal{N}(m_i, v_i)\\) restricted to \\([0, \pi/2]\\): every expectation
  (the boundary layer's update, the score, the predicted success) is over the restricted Gaussian, and its
  intervals are those of the restricted Gaussian. The Kalman step of a mixed group is the preprint's, on the
  unrestricted Gaussian.
- **The boundary layer.** For \\(s = n\\) (or \\(s = 0\\)) the exact binomial likelihood \\(\sin^{2n}\psi\\) (or
  \\(\cos^{2n}\psi\\)) times the restricted prior, moment-matched to a Gaussian (assumed-density filtering) by 64-point
  Gauss–Legendre quadrature on a window that strong log-concavity bounds; not a clipped Gaussian observation.
  Repeated unanimous groups keep moving the belief toward the edge and narrowing it.
- **The prior.** \\(m_0 = \pi/4\\) (\\(p = 1/2\\)) and `initial_variance` \\(v_0 = 0.15\\): restricted to
  \\([0, \pi/2]\\), its variance is 0.117, that of \\(\psi\\) under a uniform success rate (MoPPS's Beta(1, 1)).
- **The drift.** An Ornstein–Uhlenbeck relaxation toward the prior whose clock is the policy's movement: for update
  norms \\(\lVert\Delta\theta_t\rVert\\) since the last call,
  \\(a = \exp(-\kappa \sum_t \lVert\Delta\theta_t\rVert)\\),

      m <- m_0 + a (m - m_0),    v <- a^2 v + (1 - a^2) v_0

  (\\(\kappa\\) = `drift`). A stale belief widens toward the prior and never beyond it (on a bounded coordinate an
  unbounded random walk means nothing), and its mean returns toward \\(p = 1/2\\), so a prompt solved or failed long
  ago is tried again. Steps compose exactly. The default \\(\kappa = 0.02\\) widens a sharp belief at \\(p = 1/2\\) as
  fast as KGPS's \\(\gamma = 0.1\\): \\(d\psi / d\,\mathrm{logit} = \sqrt{p(1-p)}/2 = 1/4\\) there, so
  \\(2 \kappa v_0 = \gamma / 16\\).
- **The score and \\(G\\).** \\(A_i = \mathbb{E}[1 - p^G - (1 - p)^G]\\) under the belief, the chance that a group
  of \\(G\\) is mixed, by Gauss–Legendre quadrature over \\([0, \pi/2]\\) (Gauss–Hermite's nodes would fall outside
  it). \\(G\\) is `group_size`, or when unset the trials of the latest observation (TRL's
  `num_generations`; 8 before any), as `ExperimentalSelector`'s `objective="mixed"` learns it.
- **The selection.** `"sample"` (default): `B` prompts of the whole pool drawn without replacement in proportion to
  \\(A_i\\), seeded (KGPS's default rule, and the benchmark oracles' on the true rate); `"top"`: the `B` largest
  \\(A_i\\), ties in seeded random order.
- **The predicted success.** The posterior mean \\(\mathbb{E}[\sin^2\psi]\\), as KGPS reports
  \\(\mathbb{E}[\sigma(\psi)]\\).
- **Observations.** The first observation of a prompt is an update like any other (no warmup estimate); repeated
  indices in one call are pooled into one group of their summed counts.
"""

import math
from typing import Any

import numpy as np

from . import _arcsine
from ._arcsine import PSI_MAX
from ._checks import as_delta_norms, as_index_array, as_observations
from ._draw import draw, whole_pool_draw
from .baselines import _Selector


PRIOR_MEAN = math.pi / 4  # psi of p = 1/2
DEFAULT_GROUP_SIZE = 8  # G before any observation, when `group_size` is unset
SELECTIONS = ("sample", "top")


class ArcusSelector(_Selector):
    r"""
    ARCUS: a Gaussian belief over \\(\psi = \arcsin\sqrt{p}\\) per prompt, a Kalman update of constant noise for
    mixed groups, a boundary-layer likelihood for unanimous ones, and a draw by the chance of an informative group.
    The module docstring gives the choices made where the preprint leaves one open.

    Args:
        num_prompts (`int`): `N`, the pool size.
        initial_variance (`float`, *optional*, defaults to `0.15`): \\(v_0\\), every prompt's prior variance of
            \\(\psi\\) (radians squared) around \\(\pi/4\\), and where the drift takes a stale belief.
        drift (`float`, *optional*, defaults to `0.02`): \\(\kappa\\), the relaxation toward the prior per unit of
            parameter-update norm; 0 keeps beliefs as they are between observations.
        group_size (`int`, *optional*): \\(G\\) of the score; unset, the trials of the latest observation.
        selection (`str`, *optional*, defaults to `"sample"`): `"sample"` or `"top"`.
        seed (`int`, *optional*, defaults to `0`): seeds the draws.

    Attributes:
        mean (`np.ndarray` of shape `(N,)`, float64): \\(m\\), in radians, in \\([0, \pi/2]\\).
        variance (`np.ndarray` of shape `(N,)`, float64): \\(v\\), in radians squared, \\(> 0\\).
    """

    name = "arcus"
    hyperparameters = ("initial_variance", "drift", "group_size", "selection")

    def __init__(
        self,
        num_prompts: int,
        initial_variance: float = 0.15,
        drift: float = 0.02,
        group_size: int | None = None,
        selection: str = "sample",
        seed: int = 0,
    ):
        if isinstance(initial_variance, bool) or not (
            isinstance(initial_variance, (int, float)) and 0 < initial_variance < math.inf
        ):
            raise ValueError(
                f"initial_variance must be a finite number > 0 (radians squared; 0.15 matches a uniform success "
                f"rate), got {initial_variance!r}."
            )
        if isinstance(drift, bool) or not (isinstance(drift, (int, float)) and 0 <= drift < math.inf):
            raise ValueError(f"drift must be a finite number >= 0 (0: no drift), got {drift!r}.")
        if group_size is not None and (
            isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1
        ):
            raise ValueError(
                f"group_size must be a whole number >= 1 (TRL's num_generations) or None, got {group_size!r}."
            )
        if not isinstance(selection, str) or selection not in SELECTIONS:
            raise ValueError(f"selection={selection!r} is not one of {list(SELECTIONS)}; pass one of those.")
        super().__init__(num_prompts, seed)
        self.initial_variance, self.drift, self.selection = float(initial_variance), float(drift), selection
        self.group_size = None if group_size is None else int(group_size)
        self.mean = np.full(self.num_prompts, PRIOR_MEAN)
        self.variance = np.full(self.num_prompts, self.initial_variance)
        self._group_size_seen = DEFAULT_GROUP_SIZE

    @property
    def scored_group_size(self) -> int:
        r"""\\(G\\) of the score: `group_size`, or the trials of the latest observation (8 before any)."""
        return self.group_size or self._group_size_seen

    # Observing -----------------------------------------------------------------------------------------------------

    def update(self, indices, successes, trials) -> None:
        r"""
        Mixed groups by Kalman's update on \\(\arcsin\sqrt{s/n}\\); unanimous ones by the boundary layer.

        Args:
            indices, successes, trials (`ArrayLike` of shape `(k,)`): the prompts, their successes \\(s\\) and
                scored rollouts \\(n\\) (`0`: no observation).
        """
        idx, s, n = as_observations(indices, successes, trials, self.num_prompts)
        if not idx.size:
            return
        m, v = self.mean[idx], self.variance[idx]
        mixed = (s > 0) & (s < n)
        mean, variance = np.empty_like(m), np.empty_like(v)
        mean[mixed], variance[mixed] = _arcsine.kalman_update(m[mixed], v[mixed], s[mixed], n[mixed])
        edge = ~mixed
        mean[edge], variance[edge] = _arcsine.posterior_moments(m[edge], v[edge], s[edge], n[edge])
        self.mean[idx], self.variance[idx] = mean, variance
        self._group_size_seen = int(n.max())

    def predict(self, delta_norm) -> None:
        r"""
        The drift: each belief relaxes toward the prior by \\(a = \exp(-\kappa \sum_t \lVert\Delta\theta_t\rVert)\\).

        Args:
            delta_norm (`float` or `ArrayLike` of shape `(steps,)`): the parameter-update norm, or one per optimizer
                step since the last call.
        """
        a = math.exp(-self.drift * float(np.sum(as_delta_norms(delta_norm))))
        if a == 1.0:
            return
        # m <- m_0 + a (m - m_0),   v <- a^2 v + (1 - a^2) v_0
        self.mean = PRIOR_MEAN + a * (self.mean - PRIOR_MEAN)
        self.variance = a * a * self.variance + (1.0 - a * a) * self.initial_variance

    # Reading and choosing ------------------------------------------------------------------------------------------

    def predicted_success(self, indices=None) -> np.ndarray:
        r"""\\(\mathbb{E}[\sin^2\psi]\\) under each belief: shape `(N,)` or `(len(indices),)`, float64, in `[0, 1]`."""
        idx = self._indices(indices)
        return _arcsine.expectation(self.mean[idx], self.variance[idx], _arcsine.success_rate)

    def scores(self, indices=None) -> np.ndarray:
        r"""
        \\(A_i = \mathbb{E}[1 - p^G - (1 - p)^G]\\) under each belief, \\(G\\) = `scored_group_size`: shape `(N,)` or
        `(len(indices),)`, float64, in `[0, 1)`.
        """
        return self._score(self._indices(indices))

    def _score(self, idx: np.ndarray) -> np.ndarray:
        G = self.scored_group_size
        return _arcsine.expectation(
            self.mean[idx], self.variance[idx], lambda psi: _arcsine.informative_probability(psi, G)
        )

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        """
        `batch_size` distinct prompts, none in `exclude`: drawn in proportion to their scores (`"sample"`), or the
        best scores (`"top"`). Returns shape `(batch_size,)`, int64.
        """
        batch_size, excluded = self._excluded(batch_size, exclude)
        if self.selection == "sample":
            return whole_pool_draw(self.num_prompts, self._score, 1.0, batch_size, excluded, self._rng)
        allowed = np.setdiff1d(np.arange(self.num_prompts), excluded, assume_unique=True)
        return draw(allowed, self._score(allowed), batch_size, "top", self._rng)

    def _indices(self, indices) -> np.ndarray:
        return np.arange(self.num_prompts) if indices is None else as_index_array("indices", indices, self.num_prompts)

    # State ---------------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(
            mean=self.mean.copy(), variance=self.variance.copy(), group_size_seen=self._group_size_seen
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a `state_dict()`, with the hyperparameters it was saved with; checked whole before any change."""
        n = self.num_prompts
        rng = self._open(state, {"mean": ((n,), "f"), "variance": ((n,), "f")})
        mean, variance = (np.asarray(state[key], dtype=np.float64) for key in ("mean", "variance"))
        if not (
            np.isfinite(mean).all()
            and np.isfinite(variance).all()
            and ((mean >= 0) & (mean <= PSI_MAX)).all()
            and (variance > 0).all()
        ):
            raise ValueError(
                "state holds means outside [0, pi/2] or variances that are not finite and positive; it is corrupted."
            )
        seen = state.get("group_size_seen")
        if isinstance(seen, bool) or not isinstance(seen, (int, np.integer)) or seen < 1:
            raise ValueError(f"state['group_size_seen']={seen!r} is not a number of rollouts; it is corrupted.")
        hyperparameters = self._saved_hyperparameters(state)
        self._adopt(hyperparameters)
        self._rng, self.mean, self.variance, self._group_size_seen = rng, mean.copy(), variance.copy(), int(seen)
