r"""
Exact top-B of the prompt utilities without scoring every prompt every round.

Every round adds the same process noise to all variances, so every score moves and the textbook selection
rescores all `N` prompts. It need not: a score can rise by at most `L * dc` when the shared variance offset
grows by `dc` (`L = 1/48` for the Gauss–Hermite utility, `0` for the point estimate, see `_utility`).
`UtilityRanking` keeps, for every prompt, an upper bound `U_i` referred to the offset `c_ref`, so that at any
later offset `c`

    A_i(c) <= U_i + L * (c - c_ref) + slack.

A round then (1) takes a threshold `tau` no larger than the true B-th best score, from the exact scores of a
small pool of last round's leaders, (2) keeps as candidates the prompts whose bound reaches `tau` — one
vectorised comparison over `U`, 4 bytes a prompt — and (3) scores the candidates exactly and tightens their
bounds to those scores. Every prompt that scores at least the B-th best is a candidate, so the result is exactly
the full top-B, ties included. Prompts whose belief changes get their bound recomputed at once. All bounds are
recomputed when the candidates that fresh bounds would have pruned add up to `N` (a ski-rental rule: at most
twice the cost of the best refresh schedule).
"""

import numpy as np

from ._utility import Utility


# Covers float32 rounding of the utility (values <= 0.25, a few ulps of 1.5e-8) with a wide margin.
_SLACK = 1e-5


class UtilityRanking:
    """
    Selects the `B` prompts of largest utility, exactly, with ties broken by a seeded generator.

    Args:
        utility (`Utility`): the score \\(A(m, P)\\).
    """

    def __init__(self, utility: Utility):
        self._utility = utility
        self._bound: np.ndarray | None = None  # U, float32 of shape (N,)
        self._bound_offset = 0.0  # c_ref
        self._pool = np.empty(0, dtype=np.int64)  # last round's leaders, ascending
        self._wasted = 0
        self._mask: np.ndarray | None = None  # reused flags of `_at_least`, padded to whole 8-byte words

    def _at_least(self, threshold) -> np.ndarray:
        """Indices whose bound is `>= threshold`, ascending: the one pass over all prompts a round makes."""
        n = self._bound.size
        if self._mask is None or self._mask.size < n:
            self._mask = np.zeros(-(-n // 8) * 8, dtype=bool)  # the tail past `n` stays False
        np.greater_equal(self._bound, np.float32(threshold), out=self._mask[:n])  # a float64 threshold: 5x slower
        return _flatnonzero_sparse(self._mask)

    def invalidate(self) -> None:
        """Forget the bounds: the next `select` rescores every prompt."""
        self._bound = None
        self._pool = np.empty(0, dtype=np.int64)

    def shift_offset(self, shift: float) -> None:
        """The owner moved `shift` from the shared offset into every stored variance."""
        self._bound_offset -= shift

    def refresh(self, mean: np.ndarray, variance: np.ndarray, offset: float) -> np.ndarray:
        """Rescores every prompt exactly and returns the scores (float32 of shape `(N,)`, not a copy)."""
        self._bound = self._utility(mean, variance, offset)
        self._bound_offset = offset
        self._wasted = 0
        return self._bound

    def on_update(self, indices: np.ndarray, mean: np.ndarray, variance: np.ndarray, offset: float) -> None:
        """Keeps the bounds of prompts whose `(m, P)` just changed valid."""
        if self._bound is not None and indices.size:
            self._tighten(indices, self._utility(mean[indices], variance[indices], offset), offset)

    def _tighten(self, indices: np.ndarray, exact: np.ndarray, offset: float) -> None:
        """`U_i = A_i(c) - L (c - c_ref)`: the tightest bound, given the exact score at the current offset."""
        rise = self._utility.max_rise_per_variance * (offset - self._bound_offset)
        self._bound[indices] = exact.astype(np.float64) - rise

    def select(
        self,
        mean: np.ndarray,
        variance: np.ndarray,
        offset: float,
        batch_size: int,
        excluded: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """
        Args:
            mean, variance (`np.ndarray` of shape `(N,)`, float32): the beliefs, variance before `offset`.
            offset (`float`): the shared variance offset `c`.
            batch_size (`int`): `B`, at most `N - len(excluded)` (checked by the caller).
            excluded (`np.ndarray` of int64): distinct indices that may not be selected.
            rng (`np.random.Generator`): breaks ties.

        Returns:
            `np.ndarray` of shape `(B,)`, int64: indices by decreasing score, equal scores in random order.
        """
        pool = self._pool[~np.isin(self._pool, excluded)]
        fresh = self._bound is None or pool.size < batch_size
        if fresh:
            self.refresh(mean, variance, offset)
        bound = self._bound
        saved = bound[excluded]
        bound[excluded] = -np.inf
        try:
            if fresh:
                margin = 0.0
                tau = _kth_largest(bound, batch_size)
            else:
                margin = self._utility.max_rise_per_variance * (offset - self._bound_offset) + _SLACK
                tau = _kth_largest(self._utility(mean[pool], variance[pool], offset), batch_size)
            candidates = self._at_least(tau - margin)
        finally:
            bound[excluded] = saved
        scores = bound[candidates] if fresh else self._utility(mean[candidates], variance[candidates], offset)

        v_b = _kth_largest(scores, batch_size)
        if not fresh:
            # Candidates that cannot make the cut were let in by a stale bound: tighten theirs so they are not again.
            wasted = scores < v_b - _SLACK
            self._tighten(candidates[wasted], scores[wasted], offset)
            self._wasted += int(np.count_nonzero(wasted))
            if self._wasted >= bound.size:
                self.invalidate()
        self._pool = _leaders(candidates, scores, 4 * batch_size + excluded.size)
        return _top_b(candidates, scores, v_b, batch_size, rng)


def _flatnonzero_sparse(mask: np.ndarray) -> np.ndarray:
    """`np.flatnonzero` of a boolean array of length divisible by 8, scanning 8 flags per machine word."""
    words = mask.view(np.uint64)
    hits = np.flatnonzero(words != 0)  # numpy's nonzero is 10x slower on integers than on flags
    if hits.size * 64 > mask.size:  # dense: the plain scan is cheaper
        return np.flatnonzero(mask)
    # e.g. flags set at 3 and 17 -> words [0, 2] -> their 16 flags set at 3 and 9 -> 0*8+3, 2*8+1
    flags = np.flatnonzero(words[hits].view(np.bool_))
    return hits[flags >> 3] * 8 + (flags & 7)


def _kth_largest(values: np.ndarray, k: int):
    """
    The `k`-th largest entry of `values`, by quickselect with three-way splits.

    Whole groups of prompts share one belief (after warmup, every prompt with the same `s/k`), so scores tie by
    the thousand, and numpy's introselect slows down tenfold on such input. Each pass here estimates the answer
    from a sorted sample of 1024 entries and keeps only the side that holds it; ties end the search at once.
    """
    while values.size > 4096:
        sample = np.sort(values[:: values.size // 1024])
        pivot = sample[max(0, sample.size - 1 - (k * sample.size) // values.size)]
        above = values[values > pivot]
        if above.size >= k:
            values = above
            continue
        ties = int(np.count_nonzero(values == pivot))
        if above.size + ties >= k:
            return pivot
        k -= above.size + ties
        values = values[values < pivot]
    return np.partition(values, values.size - k)[values.size - k]


def _leaders(indices: np.ndarray, scores: np.ndarray, size: int) -> np.ndarray:
    """`size` entries of `indices` (ascending) with the best scores, which seed the next round's threshold."""
    if indices.size <= size:
        return indices
    threshold = _kth_largest(scores, size)
    above = np.flatnonzero(scores > threshold)
    tied = np.flatnonzero(scores == threshold)[: size - above.size]
    return indices[np.sort(np.concatenate([above, tied]))]


def _top_b(indices: np.ndarray, scores: np.ndarray, v_b, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """
    The `batch_size` entries of `indices` with the largest `scores`, where `v_b` is the `batch_size`-th largest
    score and `indices` is ascending, so that the random choice among the prompts tied at `v_b` never depends on
    how the candidates were found.
    """
    above = scores > v_b
    tied = indices[scores == v_b]
    need = batch_size - int(np.count_nonzero(above))
    chosen = rng.choice(tied, size=need, replace=False)
    selected = np.concatenate([indices[above], chosen])
    selected_scores = np.concatenate([scores[above], np.full(need, v_b, dtype=scores.dtype)])
    # e.g. scores [0.2, 0.1, 0.2] -> shuffled [0.1, 0.2, 0.2] -> stably by decreasing score [0.2, 0.2, 0.1]
    shuffle = rng.permutation(batch_size)
    order = np.argsort(-selected_scores[shuffle], kind="stable")
    return selected[shuffle[order]]
