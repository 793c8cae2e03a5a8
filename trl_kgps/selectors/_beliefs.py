r"""
One Gaussian belief per prompt over a logit, \\(\mathcal{N}(m_i, P_i)\\), stored so that the prediction step costs
O(1) whatever the number of prompts.

A prediction adds the same variance to every prompt. `PromptBeliefs` keeps it in one offset \\(c\\) shared by all
prompts, so that prompt \\(i\\)'s variance is \\(P_i\\) = `P[i] + c`, and folds \\(c\\) into `P` once it reaches
`MAX_VARIANCE_OFFSET`: that keeps the float32 absolute error of every variance below \\(2^{-25}\\) (3e-8). Both filters
hold their per-prompt beliefs this way: `per_prompt.PerPromptFilter` each prompt's logit, `shared_filter.SharedFilter`
each prompt's residual around the shared part.
"""

from typing import Any

import numpy as np

from ._checks import check_finite_state, check_scalar


MAX_VARIANCE_OFFSET = 0.25


class PromptBeliefs:
    r"""
    The means and variances of `num_prompts` Gaussian beliefs, in logit units.

    Args:
        num_prompts (`int`): `N`.
        initial_variance (`float`): \\(P_0\\), every prompt's variance to start with (logit units squared).

    Attributes:
        m (`np.ndarray` of shape `(N,)`, float32): the means.
        P (`np.ndarray` of shape `(N,)`, float32): the variances less `c`.
        c (`float`): the variance every prompt shares, in `[0, MAX_VARIANCE_OFFSET)`; \\(P_i\\) = `P[i] + c`.
    """

    def __init__(self, num_prompts: int, initial_variance: float):
        self.num_prompts = num_prompts
        self.m = np.zeros(num_prompts, dtype=np.float32)
        self.P = np.full(num_prompts, initial_variance, dtype=np.float32)
        self.c = 0.0

    def add_variance(self, Q: float) -> float:
        r"""
        \\(P_i \mathrel{+}= Q\\) for every prompt, in O(1) until `c` is folded into `P`.

        Returns:
            `float`: the offset folded into `P` by this call (what a score bound referred to `c` must shift by), or
            `0.0` when none was.
        """
        self.c += Q
        if self.c < MAX_VARIANCE_OFFSET:
            return 0.0
        folded, self.c = self.c, 0.0
        self.P += np.float32(folded)
        return folded

    def beliefs_state(self) -> dict[str, Any]:
        """`m`, `P` and `c` under the state format's names (copies)."""
        return {"mean": self.m.copy(), "variance_base": self.P.copy(), "variance_offset": self.c}

    def load_beliefs(self, state: dict[str, Any]) -> None:
        """Sets `m`, `P` and `c` from a `beliefs_state()`, checked whole first (`ValueError` if it does not fit)."""
        m = check_finite_state("mean", state["mean"], self.num_prompts)
        P = check_finite_state("variance_base", state["variance_base"], self.num_prompts)
        c = check_scalar("variance_offset", state["variance_offset"])
        if not (0.0 <= c < MAX_VARIANCE_OFFSET) or (P + np.float32(c) < -1e-6).any():
            raise ValueError("state holds negative variances or an out-of-range variance_offset; it is corrupted.")
        self.m, self.P, self.c = m, P, c
