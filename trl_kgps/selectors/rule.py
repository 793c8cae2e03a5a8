r"""
How `KGPSSelector` chooses a batch from its beliefs: `SelectionRule`, the utility
\\(A_i = \mathbb{E}[\sigma(\psi_i)(1 - \sigma(\psi_i))]\\) of each prompt, its exact fast top-B (`_ranking`) where
beliefs change only where observed, and the draw `config.selection` and `config.candidates` ask for (`_draw`).

It is `KGPSSelector`'s extension point for how a batch is chosen: a variant of KGPS subclasses `SelectionRule` and
names its subclass in `KGPSSelector.rule_class` (`trl_kgps.selectors.experimental` is one).
"""

import math
from typing import Any

import numpy as np

from ..config import KGPSConfig
from ._draw import draw, random_candidates, whole_pool_draw
from ._ranking import UtilityRanking
from ._utility import Utility
from .per_prompt import PerPromptFilter
from .shared_filter import SharedFilter


class SelectionRule:
    r"""
    How a batch is chosen from the beliefs `beliefs`, which the selector owns and changes: `choose` draws it, `scores`
    gives every prompt's utility, and the selector tells the rule when beliefs change (`changed`, `predicted`) and
    what was observed (`observed`).

    This class is the extension point of `KGPSSelector` for how a batch is chosen. A subclass may override, and only
    these: `points` (the utility's quadrature), `score_bound` and `score` (a prompt's score in the draws), `ranks`
    (when the exact fast top-B holds), `choose` (the batch), `observed` (what an observation tells the rule), and
    `state_dict` and `restored` (what it keeps across a resume, saved in the selector's state). Every method receives
    what it needs; the selector's own attributes are not part of the extension point.

    Args:
        beliefs (`PerPromptFilter` or `SharedFilter`): the selector's filter, read through `moments`,
            `utility_moments` and its arrays `m`, `P` (float32 of shape `(N,)`) and offset `c`.
        config (`KGPSConfig`): the selector's config, every field decided.
        num_prompts (`int`): `N`.
        row_weight (`np.ndarray` of shape `(N,)`, float64, *optional*): each prompt's weight in the draw,
            \\(w_i = \mathrm{rows}_i^T\\) (`config.copies_weight="rows"`); unset, one each.
    """

    # The largest score `score` gives: `whole_pool_draw`'s rejection bound.
    score_bound = 0.25

    def __init__(
        self,
        beliefs: PerPromptFilter | SharedFilter,
        config: KGPSConfig,
        num_prompts: int,
        row_weight: np.ndarray | None = None,
    ):
        self.beliefs, self.config, self.num_prompts, self.row_weight = beliefs, config, num_prompts, row_weight
        self.utility = Utility(self.points)
        self.ranking = UtilityRanking(self.utility)

    @property
    def points(self) -> int | None:
        """The Gauss–Hermite nodes of the utility's expectation (`None`: its value at the mean)."""
        return self.config.quadrature_points

    @property
    def ranks(self) -> bool:
        """
        Whether beliefs change only where observed, so that the exact fast top-B (`_ranking`) holds: the per-prompt
        filter only, since an update of the shared part moves every prompt of its group.
        """
        return isinstance(self.beliefs, PerPromptFilter)

    def score(self, indices: np.ndarray) -> np.ndarray:
        """The posterior expectation of \\(p(1-p)\\) for `indices` (float64 of shape `(n,)`)."""
        m, P = self.beliefs.utility_moments(indices)
        return self.utility(m, P.astype(np.float32)).astype(np.float64)

    def scores(self) -> np.ndarray:
        """Every prompt's utility: float32 of shape `(N,)`, in `[0, 0.25]`."""
        if self.ranks:
            b = self.beliefs
            return self.ranking.refresh(b.m, b.P, b.c).copy()
        return self.score(np.arange(self.num_prompts)).astype(np.float32)

    def choose(self, batch_size: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """
        `batch_size` distinct prompts, none of `excluded` (sorted and unique, `batch_size` prompts left besides), drawn
        with the selector's generator `rng`: `(B,)` int64.
        """
        config = self.config
        if config.selection == "top" and config.candidates == 0 and self.ranks:  # the paper's, exact fast
            b = self.beliefs
            return self.ranking.select(b.m, b.P, b.c, batch_size, excluded, rng)
        score, bound = self.score, self.score_bound
        if self.row_weight is not None:  # copies weigh by their rows: each score times w_i = rows_i^T
            score, bound = self._score_by_rows, self.score_bound * float(self.row_weight.max())
        if config.selection == "sample" and config.candidates == 0:  # the default, in O(B): `_draw.whole_pool_draw`
            return whole_pool_draw(
                self.num_prompts, score, bound, batch_size, excluded, rng, config.selection_temperature
            )
        pool = self.candidates(batch_size, excluded, rng)
        return draw(pool, score(pool), batch_size, config.selection, rng, config.selection_temperature)

    def _score_by_rows(self, indices: np.ndarray) -> np.ndarray:
        """`score` times each prompt's rows to the power `T`: the draw's probabilities then grow with the rows."""
        return self.score(indices) * self.row_weight[indices]

    def candidates(self, batch_size: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """`ceil(candidates * batch_size)` prompts drawn at random, or every prompt not excluded with
        `candidates=0`."""
        if self.config.candidates > 0:
            count = math.ceil(self.config.candidates * batch_size)
            return random_candidates(self.num_prompts, count, excluded, rng)
        return np.setdiff1d(np.arange(self.num_prompts), excluded, assume_unique=True)

    def observed(self, indices: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> None:
        """An update observed `successes` in `trials` rollouts of the prompts `indices` (each `(n,)`); KGPS's rule
        reads none of it."""

    def changed(self, indices: np.ndarray) -> None:
        """The beliefs of `indices` just changed: keeps the fast top-B's bounds valid for them."""
        if self.ranks:
            b = self.beliefs
            self.ranking.on_update(indices, b.m, b.P, b.c)

    def predicted(self, folded: float) -> None:
        """The prediction step moved `folded` from the shared variance offset into every stored variance."""
        if folded and self.ranks:
            self.ranking.shift_offset(folded)

    def state_dict(self) -> dict[str, Any]:
        """What the rule keeps across a resume, saved in the selector's state: nothing for KGPS's rule."""
        return {}

    def restored(self, state: dict[str, Any], beliefs: PerPromptFilter | SharedFilter) -> "SelectionRule":
        """
        A new rule like this one over the restored `beliefs`, holding what `state` (the selector's state, entries that
        version 1 lacks filled in) saved of it. Raises `ValueError` for a corrupted state, and leaves this rule as it
        is either way.
        """
        return type(self)(beliefs, self.config, self.num_prompts, self.row_weight)
