r"""
The shared filter, KGPS's default: each prompt's logit is a part shared across prompts plus its own residual,

    psi_i = z_i^T beta + r_i,        beta ~ N(mu, Sigma)  (`shared.SharedFactor`),        r_i ~ N(m_i, P_i),

updated by the exact binomial observation, with the residual prior \\(\tau^2\\) of the prompts not yet seen learnt
online (empirical Bayes).

    predict:   Sigma <- Sigma + rho Q I,   P_i <- P_i + (1 - rho) Q     rho = noise_share: each logit variance grows
               by Q
    update:    a prompt seen for the first time starts from P_i = tau^2; `SharedFactor.update` moves beta by each
               prompt's exact binomial posterior and gives each residual its marginal under the joint posterior
               (the equations: `shared_factor.py`)
    tau^2:     tau^2 <- clip(tau^2 exp(eta (NIS_first - 1)), P0 / 1e3, 100 P0)    eta = residual_adaptation, NIS_first
               the mean normalized innovation squared of the batch's first observations
    warmup:    each observed residual back to N(0, P0), then the update
"""

import math
from typing import Any

import numpy as np

from ._beliefs import PromptBeliefs
from ._binomial import innovations_squared
from ._checks import check_scalar
from .shared_factor import Design, SharedFactor


# The learnt residual prior stays within [initial_variance / 1e3, initial_variance * 100].
_MIN_RESIDUAL_PRIOR_SCALE, _MAX_RESIDUAL_PRIOR_SCALE = 1e-3, 100.0


def adapted_prior(tau2: float, nis_first: float, P0: float, rate: float) -> float:
    r"""
    \\(\tau^2 \exp(\eta (\mathrm{NIS} - 1))\\) within \\([P_0 / 10^3, 100 P_0]\\): the residual prior `tau2` after
    first outcomes of mean normalized innovation squared `nis_first`, at step size `rate` (\\(\eta\\)).
    """
    # Empirical Bayes for the spread of prompts around what their features predict: widen the prior of the prompts
    # not yet seen when first outcomes deviate more than it predicts (NIS > 1), narrow it when less. The step is on
    # log tau^2: a surprise that would carry it past the upper bound (a phase change can make NIS reach 1e4 and more,
    # and exp() overflow) lands on the bound itself.
    low, high = _MIN_RESIDUAL_PRIOR_SCALE * P0, _MAX_RESIDUAL_PRIOR_SCALE * P0
    step = rate * (nis_first - 1.0)
    new = high if step > math.log(high / tau2) else tau2 * math.exp(step)
    return min(max(new, low), high)


class SharedFilter(PromptBeliefs):
    r"""
    The shared part \\(\beta\\) of the prompts in `design` and every prompt's residual \\(r_i\\).

    Args:
        design (`Design`): the prompts' feature rows \\(z_i\\) (`shared.design`).
        shared_variance (`float`): \\(\sigma^2\\), the shared part's prior \\(\Sigma_0 = \sigma^2 I\\).
        initial_variance (`float`): \\(P_0\\), the residual prior variance \\(\tau^2\\) starts from.
        noise_share (`float`): \\(\rho \in [0, 1]\\), the share of the process noise that goes to the shared part.
        residual_adaptation (`float`): \\(\eta \ge 0\\), the step size of \\(\tau^2\\); `0` keeps \\(P_0\\).

    Attributes:
        factor (`SharedFactor`): \\(\beta \sim \mathcal{N}(\mu, \Sigma)\\).
        m (`np.ndarray` of shape `(N,)`, float32): the residuals' means.
        P (`np.ndarray` of shape `(N,)`, float32): the residuals' variances less `c`, \\(P_i\\) = `P[i] + c`
            (`+ unseen_extra` for a prompt not yet seen).
        c (`float`): the variance offset every residual shares.
        seen (`np.ndarray` of shape `(N,)`, bool): which prompts were observed.
        unseen_extra (`float`): \\(\tau^2 - P_0\\), added to the variance of every prompt not yet seen.
    """

    def __init__(
        self,
        design: Design,
        shared_variance: float,
        initial_variance: float,
        noise_share: float,
        residual_adaptation: float,
    ):
        super().__init__(design.row_of.size, initial_variance)
        self.shared_variance, self.initial_variance = shared_variance, initial_variance
        self.noise_share, self.residual_adaptation = noise_share, residual_adaptation
        self.factor = SharedFactor(design, shared_variance)
        self.seen = np.zeros(self.num_prompts, dtype=bool)
        self.unseen_extra = 0.0

    @property
    def residual_prior(self) -> float:
        r"""\\(\tau^2\\): the residual prior variance of a prompt not yet observed."""
        return self.initial_variance + self.unseen_extra

    @property
    def mean(self) -> np.ndarray:
        r"""Every prompt's logit mean \\(z_i^T \mu + m_i\\): float32 of shape `(N,)`, read-only."""
        view = (self.m + self.factor.moments()[0]).astype(np.float32)
        view.flags.writeable = False
        return view

    @property
    def variance(self) -> np.ndarray:
        r"""Every prompt's logit variance \\(z_i^T \Sigma z_i + P_i\\): float32 of shape `(N,)`, a fresh array."""
        variance = self.P + np.float32(self.c)
        return (variance + self.factor.moments()[1] + self.unseen_extra * ~self.seen).astype(np.float32)

    def moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The logit mean and variance of `indices` (shape `(n,)`), shared part included: each float64 of shape
        `(n,)`."""
        m = self.m[indices].astype(np.float64)
        P = self.P[indices].astype(np.float64) + self.c
        shared_mean, shared_variance = self.factor.moments(indices)
        return m + shared_mean, P + shared_variance + self.unseen_extra * ~self.seen[indices]

    def residual_variance(self, indices: np.ndarray) -> np.ndarray:
        r"""
        The residuals' variances \\(P_i\\) of `indices` (shape `(n,)`), float64, as an update reads them: `P[i] + c`
        for a prompt seen, \\(\tau^2\\) = `P0 + unseen_extra` plus the drift since the start for one not yet seen.
        Extension point, with `adapt_residual_prior`, for the residual variants of `selectors.experimental`.
        """
        return self.P[indices].astype(np.float64) + self.c + self.unseen_extra * ~self.seen[indices]

    def utility_moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`moments` as the utility takes them: the mean float32, the variance float64."""
        m, P = self.moments(indices)
        return m.astype(np.float32), P

    def initialize(self, indices: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
        r"""
        The warmup: each residual of `indices` back to its prior \\(\mathcal{N}(0, P_0)\\), then `update`, which
        also moves the shared part. Returns `update`'s innovations.
        """
        self.m[indices] = 0.0
        self.P[indices] = self.initial_variance - self.c
        return self.update(indices, s, k)

    def predict(self, Q: float) -> float:
        r"""
        Every prompt's logit variance grows by `Q` (logit units squared), split between the shared part and the
        residuals. Returns the offset folded into `P` (`PromptBeliefs.add_variance`).
        """
        # Sigma <- Sigma + rho Q I
        self.factor.predict(self.noise_share * Q)
        # P_i <- P_i + (1 - rho) Q
        return self.add_variance((1.0 - self.noise_share) * Q)

    def update(self, indices: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
        """
        The update of `indices` (distinct, int64) by `s` successes in `k > 0` trials (float64, each of shape `(n,)`).

        Returns:
            `np.ndarray` of shape `(n,)`, float64: each prompt's normalized innovation squared under its prior.
        """
        first = ~self.seen[indices]
        m = self.m[indices].astype(np.float64)
        P = self.residual_variance(indices)
        m_new, P_new, (a, S) = self.factor.update(indices, m, P, s, k)
        nis = innovations_squared(a, S, s, k)
        self.m[indices] = m_new
        self.P[indices] = P_new - self.c
        self.seen[indices] = True
        if self.residual_adaptation > 0 and first.any():
            self.adapt_residual_prior(indices[first], nis[first])
        return nis

    def adapt_residual_prior(self, first: np.ndarray, nis: np.ndarray) -> None:
        r"""
        \\(\tau^2\\) moved by the normalized innovations squared `nis` of the prompts `first`, each seen for the first
        time (shape `(n,)` each), as the module's docstring says.
        """
        tau2 = adapted_prior(self.residual_prior, float(np.mean(nis)), self.initial_variance, self.residual_adaptation)
        self.unseen_extra = tau2 - self.initial_variance

    def state_dict(self) -> dict[str, Any]:
        """The residuals, the shared factor, `seen` and `unseen_extra` under the state format's names."""
        return {
            **self.beliefs_state(),
            **self.factor.state_dict(),
            "seen": self.seen.copy(),
            "unseen_extra": self.unseen_extra,
        }

    def restored(self, state: dict[str, Any]) -> "SharedFilter":
        """
        A filter with this one's hyperparameters holding `state` (a `KGPSSelector.state_dict()`), checked whole:
        `ValueError` if it does not fit, and this filter is left unchanged either way.
        """
        if "shared_mu" not in state:
            raise ValueError(
                "state holds no shared factor, but this selector has one (shared_variance > 0): it was saved by a "
                "per-prompt KGPS. Build the selector with the config it was saved with."
            )
        factor = SharedFactor.from_state_dict(state, self.num_prompts)
        seen = np.asarray(state["seen"])
        unseen_extra = check_scalar("unseen_extra", state["unseen_extra"])
        if seen.shape != (self.num_prompts,) or seen.dtype != bool:
            raise ValueError(f"state['seen'] is not one flag per prompt ({self.num_prompts}); it is corrupted.")
        if self.initial_variance + unseen_extra <= 0:
            raise ValueError(f"state['unseen_extra']={unseen_extra} makes a negative prior; it is corrupted.")
        restored = type(self)(
            factor.design, self.shared_variance, self.initial_variance, self.noise_share, self.residual_adaptation
        )
        restored.load_beliefs(state)
        restored.factor, restored.seen, restored.unseen_extra = factor, seen.copy(), unseen_extra
        return restored
