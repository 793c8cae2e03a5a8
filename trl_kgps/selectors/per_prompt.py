r"""
The per-prompt filter: one independent Gaussian belief \\(\psi_i \sim \mathcal{N}(m_i, P_i)\\) per prompt over the
logit of its success rate \\(\sigma(\psi_i)\\), with the paper's two steps and two observation models.

    predict:   P_i <- P_i + Q                                 every prompt, in O(1) (`_beliefs.PromptBeliefs`)
    update, observation="logit" (the paper's Kalman update on the clipped logit, `logit_update`):
               p~ = clip(sigmoid(m), delta, 1 - delta),        delta = 1 / (2k)
               R  = 1 / (k p~ (1 - p~))                        observation variance, logit units
               y  = logit(clip(s / k, delta, 1 - delta)) - m   innovation
               K  = P / (P + R)
               m <- m + K y,   P <- (1 - K) P
    update, observation="binomial": (m, P) <- the mean and variance of the exact posterior
               p(psi | s) ~ N(psi; m, P) sigmoid(psi)^s (1 - sigmoid(psi))^(k - s)   (`_binomial.posterior_moments`)
    warmup:    "logit": m = logit(clip(s / k, delta, 1 - delta)), P = P0;   "binomial": the update from N(0, P0)

`KGPSConfig.paper()` is the "logit" model, `KGPSConfig.per_prompt()` the "binomial" one. With a drift share
\\(\rho > 0\\) (`shared_drift`), every prompt's mean also moves by \\(\rho\\) times the batch's mean change
\\(\overline{m' - m}\\): \\(m_i\\) = `m[i] + drift`.
"""

from typing import Any

import numpy as np

from ._beliefs import PromptBeliefs
from ._binomial import innovations_squared, posterior_moments
from ._checks import check_scalar


class PerPromptFilter(PromptBeliefs):
    r"""
    One Gaussian filter per prompt, vectorised over the `N` prompts.

    Args:
        num_prompts (`int`): `N`.
        initial_variance (`float`): \\(P_0\\), every prompt's logit variance before its first observation.
        observation (`str`): `"logit"` (the paper's Kalman update) or `"binomial"` (the exact posterior's moments).
        drift_share (`float`): \\(\rho \ge 0\\), the share of each batch's mean change every prompt follows; `0` is
            off.

    Attributes:
        m (`np.ndarray` of shape `(N,)`, float32): logit means less `drift`.
        P (`np.ndarray` of shape `(N,)`, float32): logit variances less `c`.
        c (`float`): the variance offset every prompt shares: \\(P_i\\) = `P[i] + c`.
        drift (`float`): the logit shift every prompt shares: \\(m_i\\) = `m[i] + drift`.
    """

    def __init__(self, num_prompts: int, initial_variance: float, observation: str, drift_share: float = 0.0):
        super().__init__(num_prompts, initial_variance)
        self.initial_variance, self.observation, self.drift_share = initial_variance, observation, drift_share
        self.drift = 0.0

    @property
    def mean(self) -> np.ndarray:
        """Every prompt's \\(m_i\\): float32 of shape `(N,)`, read-only (a view of `m` while `drift` is 0)."""
        view = self.m.view() if self.drift == 0 else self.m + np.float32(self.drift)
        view.flags.writeable = False
        return view

    @property
    def variance(self) -> np.ndarray:
        """Every prompt's \\(P_i\\): float32 of shape `(N,)`, a fresh array."""
        return self.P + np.float32(self.c)

    @property
    def residual_prior(self) -> float:
        r"""\\(P_0\\): the logit variance of a prompt not yet observed (its whole logit is its own)."""
        return float(self.initial_variance)

    def moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""\\((m_i, P_i)\\) of `indices` (shape `(n,)`), each float64 of shape `(n,)`."""
        m = self.m[indices].astype(np.float64) + self.drift
        P = self.P[indices].astype(np.float64) + self.c
        return m, P

    def utility_moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""\\((m_i, P_i)\\) of `indices` as the utility takes them: `m` float32 (as `mean`), `P` float64."""
        return self.m[indices] + np.float32(self.drift), self.P[indices].astype(np.float64) + self.c

    def initialize(self, indices: np.ndarray, s: np.ndarray, k: np.ndarray) -> None:
        """
        The warmup: each of `indices` (distinct, int64) gets the belief of its `s` successes in `k > 0` trials
        (float64, each of shape `(n,)`) alone, whatever it held. Not an update: it returns no innovation.
        """
        if self.observation == "logit":
            m = clipped_logit(s, k)
            P = self.initial_variance
        else:
            m, P = posterior_moments(np.zeros(indices.size), np.full(indices.size, self.initial_variance), s, k)
        self.m[indices] = m - self.drift
        self.P[indices] = P - self.c

    def predict(self, Q: float) -> float:
        r"""
        \\(P_i \leftarrow P_i + Q\\) for every prompt, `Q` the process noise in logit units squared. Returns the
        offset folded into `P` (`PromptBeliefs.add_variance`).
        """
        return self.add_variance(Q)

    def update(self, indices: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
        """
        The update of `indices` (distinct, int64) by `s` successes in `k > 0` trials (float64, each of shape `(n,)`).

        Returns:
            `np.ndarray` of shape `(n,)`, float64: each prompt's normalized innovation squared under its prior.
        """
        m, P = self.moments(indices)
        nis = innovations_squared(m, P, s, k)
        if self.observation == "logit":
            m_new, P_new = logit_update(m, P, s, k)
        else:
            m_new, P_new = posterior_moments(m, P, s, k)
        if self.drift_share > 0:  # every prompt follows a share of the batch's mean surprise
            self.drift += self.drift_share * float(np.mean(m_new - m))
        self.m[indices] = m_new - self.drift
        self.P[indices] = P_new - self.c
        return nis

    def state_dict(self) -> dict[str, Any]:
        """`m`, `P`, `c` and `drift` under the state format's names."""
        return {**self.beliefs_state(), "drift": self.drift}

    def restored(self, state: dict[str, Any]) -> "PerPromptFilter":
        """
        A filter with this one's hyperparameters holding `state` (a `KGPSSelector.state_dict()`), checked whole:
        `ValueError` if it does not fit, and this filter is left unchanged either way.
        """
        if "shared_mu" in state:
            raise ValueError(
                "state holds a shared factor, but this selector has none (shared_variance=0): build it with the "
                "config it was saved with."
            )
        restored = PerPromptFilter(self.num_prompts, self.initial_variance, self.observation, self.drift_share)
        restored.load_beliefs(state)
        restored.drift = check_scalar("drift", state["drift"])
        return restored


def logit_update(m: np.ndarray, P: np.ndarray, s: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""
    The paper's Kalman update of \\(\mathcal{N}(m, P)\\) by \\(s\\) successes in \\(k\\) trials, observed through
    \\(\mathrm{logit}(\mathrm{clip}(s / k))\\). All of shape `(n,)`, float64; returns the posterior's `(m, P)`.
    """
    delta = 0.5 / k
    # p~ = clip(sigmoid(m), delta, 1 - delta): the plug-in of the prior mean
    p_tilde = np.minimum(np.maximum(sigmoid(m), delta), 1.0 - delta)
    # R = 1 / (k p~ (1 - p~)): the delta-method variance of logit(s / k)
    R = 1.0 / (k * p_tilde * (1.0 - p_tilde))
    # y = logit(clip(s / k)) - m
    y = clipped_logit(s, k) - m
    # K = P / (P + R)
    K = P / (P + R)
    # m <- m + K y,  P <- (1 - K) P
    return m + K * y, (1.0 - K) * P


def clipped_logit(s: np.ndarray, k: np.ndarray) -> np.ndarray:
    r"""
    \\(\mathrm{logit}(\mathrm{clip}(s / k, \delta, 1 - \delta))\\) with \\(\delta = 1 / (2k)\\): finite for
    \\(s = 0\\) and \\(s = k\\), where the paper's \\(\mathrm{logit}(s / k)\\) is not.
    """
    delta = 0.5 / k
    phi_hat = np.minimum(np.maximum(s / k, delta), 1.0 - delta)
    return np.log(phi_hat) - np.log1p(-phi_hat)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))
