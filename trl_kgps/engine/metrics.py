"""The `kgps/*` metrics of a scored batch: the paper's estimation metrics and the locking ones, with numpy only."""

import numpy as np

from .ledger import Observed


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


# Per-group metrics are logged when the features make at most this many groups.
MAX_LOGGED_GROUPS = 20


def shared_metrics(selector, scored: Observed) -> dict[str, float]:
    """
    For a KGPS selector with a shared factor: `kgps/residual_prior` (the learnt prior variance of the residual of a
    prompt not yet seen), `kgps/shared_spread` (`shared_spread`: how far the features set prompts apart) and, over at
    most `MAX_LOGGED_GROUPS` categorical groups, `kgps/group/<group>/predicted_success` (what the shared part predicts
    for the group, after this batch) and `kgps/group/<group>/batch_share` (the share of this batch's prompts from the
    group: set beside the group's share of the pool, a group the selector has stopped drawing shows here, while its
    prediction, which only its own outcomes correct, may be stale) for every group, and
    `kgps/group/<group>/observed_success` (the pooled `s / k` of this batch's prompts of the group) for the groups the
    batch observed.
    """
    shared = selector.shared
    design = shared.design
    metrics = {"kgps/residual_prior": selector.residual_prior, "kgps/shared_spread": shared_spread(shared)}
    if design.kind != "categorical" or design.num_cells > MAX_LOGGED_GROUPS:
        return metrics
    metrics |= {
        f"kgps/group/{name}/predicted_success": float(p) for name, p in zip(design.names, shared.group_success())
    }
    cell = design.row_of[scored.indices]
    chosen = np.bincount(cell, minlength=design.num_cells)
    metrics |= {f"kgps/group/{name}/batch_share": float(n / cell.size) for name, n in zip(design.names, chosen)}
    successes = np.bincount(cell, weights=scored.successes, minlength=design.num_cells)
    trials = np.bincount(cell, weights=scored.trials, minlength=design.num_cells)
    for c in np.flatnonzero(trials):
        metrics[f"kgps/group/{design.names[c]}/observed_success"] = float(successes[c] / trials[c])
    return metrics


def shared_spread(shared) -> float:
    r"""
    How far a `SharedFactor`'s features set the prompts apart, in logits: the standard deviation over the `N` prompts
    of their shared part's mean, \(\sqrt{rac1N \sum_i (z_i^T\mu - \overline{z^T\mu})^2}\). 0 with one factor for the
    whole pool, or while the features predict no difference between prompts.
    """
    mean, _ = shared.cell_moments()
    counts = shared.design.counts
    average = float(counts @ mean) / counts.sum()
    return float(np.sqrt(counts @ (mean - average) ** 2 / counts.sum()))


def batch_metrics(scored: Observed, coverage: float, nis: float | None) -> dict[str, float]:
    """
    The metrics of one scored generation batch: `kgps/lag`, `repeats`, `unique_prompts` (as the ledger counted them,
    `BatchLedger.add_scored`), `coverage`, `predicted_success`, `select_ms` (chosen by the selector), and for its
    prompts with a scored rollout `informative`, then after the warmup `nis` (the selector's `last_nis`), `mae` and
    `spearman` (predicted against empirical success `s / k`).
    """
    s, k, predicted = scored.successes, scored.trials, scored.predicted
    metrics = {
        "kgps/lag": scored.chosen.lag,
        "kgps/repeats": scored.repeats,
        "kgps/unique_prompts": scored.unique_prompts,
        "kgps/coverage": coverage,
        "kgps/predicted_success": float(predicted.mean()),
    }
    if scored.chosen.select_seconds is not None:  # chosen by the selector, not the warmup
        metrics["kgps/select_ms"] = 1e3 * scored.chosen.select_seconds
    seen = k > 0
    if not seen.any():
        return metrics
    empirical = s[seen] / k[seen]
    metrics["kgps/informative"] = float(np.mean((s[seen] > 0) & (s[seen] < k[seen])))
    if not scored.warmup:
        if nis is not None:
            metrics["kgps/nis"] = nis
        metrics["kgps/mae"] = float(np.abs(predicted[seen] - empirical).mean())
        rho = spearman(predicted[seen], empirical)
        if np.isfinite(rho):
            metrics["kgps/spearman"] = rho
    return metrics
