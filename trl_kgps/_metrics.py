"""The paper's estimation metrics, with numpy only."""

from collections import deque

import numpy as np


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks `0 .. n-1` of `x`, ties given their average rank (e.g. [0.5, 0.2, 0.5] -> [1.5, 0, 1.5])."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size)
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=ranks) / counts)[group]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation; NaN when either side is constant (the correlation is undefined)."""
    ra, rb = _average_ranks(np.asarray(a, dtype=np.float64)), _average_ranks(np.asarray(b, dtype=np.float64))
    if a.size < 2 or ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


class RecentBatches:
    """
    Locking metrics over a sliding window of the last `window` batches, in O(batch size) per batch:
    `repeats`, the share of a new batch chosen in the batch before it, and `unique_prompts`, the distinct prompts
    of the window.

    Args:
        num_prompts (`int`): `N`.
        window (`int`): batches kept (e.g. an epoch's worth, `N // B`).
    """

    def __init__(self, num_prompts: int, window: int):
        self._counts = np.zeros(num_prompts, dtype=np.int32)
        self._batches: deque[np.ndarray] = deque()
        self._window = max(1, window)
        self.unique_prompts = 0

    def add(self, batch: np.ndarray) -> float:
        """Adds `batch` (distinct indices) and returns its `repeats`; `unique_prompts` then covers it."""
        previous = self._batches[-1] if self._batches else np.empty(0, dtype=np.int64)
        repeats = float(np.isin(batch, previous).mean()) if batch.size else 0.0
        self._batches.append(batch)
        self.unique_prompts += int(np.count_nonzero(self._counts[batch] == 0))
        self._counts[batch] += 1
        if len(self._batches) > self._window:
            old = self._batches.popleft()
            self._counts[old] -= 1
            self.unique_prompts -= int(np.count_nonzero(self._counts[old] == 0))
        return repeats
