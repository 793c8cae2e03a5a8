"""
How KGPS's default turns scores into a batch: candidates, then a draw among them.

- `random_candidates` draws `C` distinct prompts uniformly at random each round (the default), in `O(C)`.
- `CandidatePass` (`candidate_pass=True`) deals the prompts out in a seeded random order, `C` at a time, and starts
  a new order when one is used up: every prompt is a candidate exactly once per pass, whatever its score
  (coverage). A pass costs one permutation of `N`, amortised over `N / C` rounds.
- `whole_pool_draw` (`candidates=0` with `selection="sample"`) draws `B` of all `N` prompts, exactly as `draw` would
  over the whole pool, by rejection: it scores only the prompts it proposes, `O(B / acceptance)` of them.
- `draw` chooses `B` of the candidates: `"sample"` draws them without replacement with probabilities proportional
  to their scores raised to `1 / temperature` (Gumbel top-k), `"top"` takes the `B` best (ties in random order).
"""

from collections.abc import Callable
from typing import Any

import numpy as np


# whole_pool_draw scores at most this share of the pool by rejection before it scores the rest all at once.
_MAX_PROPOSED_SHARE = 0.25


class CandidatePass:
    """
    Successive slices of seeded random permutations of `0 .. num_prompts - 1`.

    Args:
        num_prompts (`int`): `N`.
    """

    def __init__(self, num_prompts: int):
        self.num_prompts = num_prompts
        self.order = np.empty(0, dtype=np.int64)  # the current pass's permutation (empty before the first)
        self.position = 0  # how much of it has been dealt

    def next(self, count: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """
        The next `count` candidates, distinct and none of `excluded` (sorted, unique); fewer only when fewer than
        `count` prompts are not excluded. Excluded prompts met on the way are passed over for this pass.
        """
        count = min(count, self.num_prompts - excluded.size)
        chosen: list[np.ndarray] = []
        taken = 0
        while taken < count:
            if self.position >= self.order.size:
                self.order = rng.permutation(self.num_prompts)
                self.position = 0
            end = min(self.position + (count - taken), self.order.size)
            piece = self.order[self.position : end]
            self.position = end
            keep = ~_isin_sorted(piece, excluded)
            if chosen:  # across a pass boundary the new pass may deal a prompt the old one just dealt
                keep &= ~np.isin(piece, np.concatenate(chosen))
            piece = piece[keep]
            chosen.append(piece)
            taken += piece.size
        return np.concatenate(chosen) if chosen else np.empty(0, dtype=np.int64)

    def state_dict(self) -> dict[str, Any]:
        return {"pass_order": self.order.copy(), "pass_position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        order = np.asarray(state["pass_order"])
        position = int(state["pass_position"])
        if order.size and (
            order.shape != (self.num_prompts,)
            or order.dtype.kind not in "iu"
            or not np.array_equal(np.sort(order), np.arange(self.num_prompts))
        ):
            raise ValueError(
                f"state['pass_order'] is not a permutation of {self.num_prompts} prompts; it is corrupted."
            )
        if not 0 <= position <= order.size:
            raise ValueError(f"state['pass_position']={position} lies outside its pass of {order.size} prompts.")
        self.order, self.position = order.astype(np.int64), position


def random_candidates(num_prompts: int, count: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """
    `min(count, N - len(excluded))` distinct prompts drawn uniformly at random, none of `excluded` (sorted, unique),
    in `O(count + len(excluded))`.
    """
    count = min(count, num_prompts - excluded.size)
    pool = rng.choice(num_prompts, min(num_prompts, count + excluded.size), replace=False)
    return pool[~_isin_sorted(pool, excluded)][:count]


def draw(
    candidates: np.ndarray,
    scores: np.ndarray,
    batch_size: int,
    rule: str,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> np.ndarray:
    """
    `batch_size` distinct entries of `candidates` (shape `(C,)`), by their `scores` (shape `(C,)`, non-negative).

    `"sample"`: without replacement, each draw proportional to the scores left raised to `1 / temperature` (Gumbel
    top-k: the `batch_size` largest `log(score) / temperature + Gumbel noise`). Prompts of score 0
    come last, in random order. `"top"` (and `"thompson"`, whose scores are already random): the largest scores,
    ties in random order. As `temperature` goes to 0, `"sample"` becomes `"top"`, and a tiny one (1e-310) draws it.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if rule == "sample":
        with np.errstate(divide="ignore"):
            log_scores = np.log(scores)
        noise = rng.gumbel(size=scores.size)
        # Both keys order the prompts alike (one is the other times T > 0); each is used where it cannot overflow.
        # Below T = 1, log(score) / T is -inf for every score once T is tiny (1e-310), and the batch would fall to
        # the random tie-break below instead of the top-B, the draw's limit.
        key = log_scores + temperature * noise if temperature < 1 else log_scores / temperature + noise
        key[~np.isfinite(key)] = -np.inf
        # zero scores: below every positive one, random among themselves
        tie = rng.random(scores.size)
        order = np.lexsort((-tie, -key))
    else:
        order = np.lexsort((rng.random(scores.size), -scores))
    return candidates[order[:batch_size]]


def whole_pool_draw(
    num_prompts: int,
    score: Callable[[np.ndarray], np.ndarray],
    bound: float,
    batch_size: int,
    excluded: np.ndarray,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> np.ndarray:
    r"""
    `batch_size` distinct prompts of `0 .. num_prompts - 1`, none of `excluded` (sorted, unique), drawn without
    replacement with probabilities proportional to \\(w_i = \mathrm{score}_i^{1/T}\\): each next prompt \\(i\\) with
    probability \\(w_i / \sum_{j \text{ left}} w_j\\) — the distribution of `draw(all prompts, ..., "sample")`.

    By rejection: a proposal \\(i\\), uniform over the pool, is accepted with probability \\(w_i / w_{\max}\\),
    \\(w_{\max} = \mathrm{bound}^{1/T} \ge w_i\\), and proposals already chosen or excluded are rejected. Each accepted
    proposal is then distributed as \\(w_i / \sum_{j \text{ left}} w_j\\), whatever came before, so the successive
    acceptances are the sequential draw itself. It costs `score` on \\(B\, w_{\max} / \bar w\\) prompts on average;
    once it has proposed `N / 4` of them without finishing (a pool of near-zero scores), it draws the rest of the
    batch exactly over the whole pool at once (Gumbel top-k on the prompts left). Prompts of score 0 come last, in
    random order, as in `draw`.

    Args:
        score (`Callable`): prompt indices of shape `(n,)` -> their scores, shape `(n,)`, in `[0, bound]`.
        bound (`float`): an upper bound of every score.
    """
    w_max = bound ** (1.0 / temperature)
    chosen: list[int] = []
    taken = set(excluded.tolist())
    available = num_prompts - len(taken)
    batch_size = min(batch_size, available)
    proposed, acceptance = 0, 0.5
    while len(chosen) < batch_size and proposed < _MAX_PROPOSED_SHARE * num_prompts:
        need = batch_size - len(chosen)
        count = int(min(max(2 * need / acceptance, 64), num_prompts))
        proposals = rng.integers(num_prompts, size=count)
        w = score(proposals) ** (1.0 / temperature)
        accepted = proposals[rng.random(count) * w_max < w]
        proposed += count
        acceptance = max(accepted.size / count, 1e-3)
        for index in accepted.tolist():
            if index not in taken:
                taken.add(index)
                chosen.append(index)
                if len(chosen) == batch_size:
                    break
    if len(chosen) < batch_size:
        rest = np.setdiff1d(np.arange(num_prompts), np.fromiter(taken, np.int64, len(taken)), assume_unique=True)
        chosen.extend(draw(rest, score(rest), batch_size - len(chosen), "sample", rng, temperature).tolist())
    return np.asarray(chosen, dtype=np.int64)


def _isin_sorted(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    if sorted_unique.size == 0:
        return np.zeros(values.shape, dtype=bool)
    position = np.minimum(np.searchsorted(sorted_unique, values), sorted_unique.size - 1)
    return sorted_unique[position] == values
