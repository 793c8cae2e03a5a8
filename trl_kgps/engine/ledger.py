r"""
The ledger of KGPS's rounds, numpy only: which generation batches were chosen and await their rewards, what was
predicted for them, which prompts have been observed, the warmup's order, and all of it as a `state_dict`. It holds
no selector: the `SelectionEngine` (`engine.py`) chooses with the selector and feeds it, and records each step here.

A round is: the engine chooses a batch of `B` distinct prompts (`warmup_batch`, a slice of a seeded permutation,
during the warmup, else the selector's choice among the prompts not pending, `exclude`) and the ledger records it
(`add_chosen`); the trainer generates and scores it; the ledger finds its pending record (`take_scored`), the engine
feeds the outcomes to the selector, and the ledger records them (`add_scored`). The data loader asks for the next
batch before the current one is scored, so several batches may be pending at once; the synchronous trainers score
them in the order they were chosen, except after a resume, which may skip or regenerate one (`take_scored` says
which); the asynchronous trainer scores them in any order, naming each.

Each batch chosen has one record, a `ChosenBatch`, from its choice to its outcomes: `BatchLedger.pending` holds those
awaiting rewards and, where the sampler iterates epochs, `BatchLedger.epoch` the same records in the order yielded.
"""

import warnings
from collections import deque
from dataclasses import dataclass

import numpy as np

from . import older_states


class RecentBatches:
    """
    Locking metrics over a sliding window of the last `window` batches, in O(batch size) per batch:
    `repeats`, the share of a new batch chosen in the batch before it, and `unique_prompts`, the distinct prompts
    of the window. Adding the batches of `batches` to a new window, in order, rebuilds it (a resume).

    Args:
        num_prompts (`int`): `N`.
        window (`int`): batches kept (e.g. an epoch's worth, `N // B`).

    Attributes:
        batches (`deque[np.ndarray]`): the window's batches, `(B,)` int64 each, oldest first.
        unique_prompts (`int`): distinct prompts over `batches`.
    """

    def __init__(self, num_prompts: int, window: int):
        self._counts = np.zeros(num_prompts, dtype=np.int32)
        self.batches: deque[np.ndarray] = deque()
        self._window = max(1, window)
        self.unique_prompts = 0

    def add(self, batch: np.ndarray) -> float:
        """Adds `batch` (distinct indices) and returns its `repeats`; `unique_prompts` then covers it."""
        previous = self.batches[-1] if self.batches else np.empty(0, dtype=np.int64)
        repeats = float(np.isin(batch, previous).mean()) if batch.size else 0.0
        self.batches.append(batch)
        self.unique_prompts += int(np.count_nonzero(self._counts[batch] == 0))
        self._counts[batch] += 1
        if len(self.batches) > self._window:
            old = self.batches.popleft()
            self._counts[old] -= 1
            self.unique_prompts -= int(np.count_nonzero(self._counts[old] == 0))
        return repeats


@dataclass(slots=True)
class ChosenBatch:
    """
    A chosen generation batch: the one record of its life, from its choice to its outcomes. The asynchronous
    trainer's worker, handed it under an id, scores its groups one at a time and in any order; the synchronous
    trainers score it whole.
    """

    indices: np.ndarray  # (B,) int64, the prompts
    predicted: np.ndarray  # (B,) float64, their predicted success when chosen
    lag: int = 0  # batches already pending when it was chosen
    select_seconds: float | None = None  # how long the selector took to choose it; None during the warmup
    handed_as: int | None = None  # the id the asynchronous worker was handed it under; None: not handed (yet, again)
    rewards: list[np.ndarray | None] | None = None  # once handed out: per position, its group's (G, F) rewards
    versions: list[int] | None = None  # once handed out: per position, the model version that generated the group
    dropped: int = 0  # its groups the asynchronous worker kept from the optimizer (zero advantage)
    turns: np.ndarray | None = None  # (B,) int64, the batches each prompt was chosen for before this one

    def hand_out(self, batch_id: int | None) -> None:
        """Handed to the asynchronous worker under `batch_id`, no group scored yet; `None` takes it back (a new worker
        is handed it again)."""
        self.handed_as = batch_id
        self.rewards = None if batch_id is None else [None] * len(self.indices)
        self.versions = None if batch_id is None else [0] * len(self.indices)
        self.dropped = 0

    @property
    def complete(self) -> bool:
        """Every group of the handed batch scored."""
        return bool(self.rewards) and all(r is not None for r in self.rewards)


@dataclass
class Observed:
    """A scored generation batch, as `SelectionEngine.observe` fed it to the selector."""

    chosen: ChosenBatch  # the batch as it was chosen: its prompts, their predicted success, lag and selection time
    successes: np.ndarray  # (B,) int64, s
    trials: np.ndarray  # (B,) int64, k: completions with a usable reward
    warmup: bool  # observed during the warmup: first observations initialised the beliefs
    skipped: int  # older pending batches dropped: the trainer skipped them without scoring (a resume)
    repeats: float  # share of its prompts that were in the batch scored before it
    unique_prompts: int  # distinct prompts of the last `batches_per_epoch` batches scored, this one included

    @property
    def indices(self) -> np.ndarray:
        """(B,) int64: the prompts."""
        return self.chosen.indices

    @property
    def predicted(self) -> np.ndarray:
        """(B,) float64: their predicted success before the rollouts."""
        return self.chosen.predicted


class BatchLedger:
    """
    The ledger of one run's rounds over `num_prompts` prompts, `batch_size` prompts a batch.

    Args:
        num_prompts (`int`): `N`, the prompts the selector tracks.
        batch_size (`int`): `B`, distinct prompts per generation batch (`B <= num_prompts`).
        warmup_batches (`int`, *optional*, defaults to `0`): batches chosen uniformly first — slices of a seeded
            permutation per epoch of `num_prompts // B` batches, TRL's order — whose outcomes initialise each prompt's
            belief on its first observation; no process noise is added until they are all scored.
        seed (`int`, *optional*, defaults to `0`): seeds the warmup permutations (`warmup_order`).

    Attributes:
        pending (`deque[ChosenBatch]`): chosen batches not yet scored, oldest first.
        epoch (`list[ChosenBatch]` or `None`): where the sampler iterates epochs (`begin_epoch`), every batch chosen
            in the current one, in order, scored or not, which a resumed run replays; `None` where batches have no
            epochs (the asynchronous trainer).
        batches_chosen, batches_scored (`int`): counters; `rollouts` follow from them.
        times_selected (`np.ndarray` of shape `(N,)`, int32): batches each prompt was chosen for; sums to
            `batches_chosen * B`.
        observed (`np.ndarray` of shape `(N,)`, bool): prompts with at least one scored rollout.
        recent (`RecentBatches`): the last `batches_per_epoch` batches scored, whose locking metrics (`repeats`,
            `unique_prompts`) each `Observed` carries.
    """

    def __init__(self, num_prompts: int, batch_size: int, warmup_batches: int = 0, seed: int = 0):
        check_batch_size(batch_size, num_prompts)
        self.batch_size = batch_size
        self.warmup_batches = warmup_batches
        self.seed = seed
        self.pending: deque[ChosenBatch] = deque()
        self.epoch: list[ChosenBatch] | None = None
        self.batches_chosen = 0
        self.batches_scored = 0
        self.times_selected = np.zeros(num_prompts, dtype=np.int32)
        self.observed = np.zeros(num_prompts, dtype=bool)
        self.observed_count = 0
        self.recent = RecentBatches(num_prompts, self.batches_per_epoch)
        self.last_scored: np.ndarray | None = None  # TRL regenerates this batch when it resumes inside its steps
        self._warned_small_pool = False
        self._warmup_order: tuple[int, np.ndarray | None] = (-1, None)  # (epoch, its permutation)

    @property
    def num_prompts(self) -> int:
        return self.times_selected.size

    @property
    def batches_per_epoch(self) -> int:
        return self.num_prompts // self.batch_size

    @property
    def in_warmup(self) -> bool:
        """Until the warmup's last batch is scored: observations initialise beliefs, no process noise is added."""
        return self.batches_scored < self.warmup_batches

    @property
    def coverage(self) -> float:
        """The share of prompts observed at least once."""
        return self.observed_count / self.num_prompts

    # Choosing ------------------------------------------------------------------------------------------------

    def warmup_order(self, epoch: int) -> np.ndarray:
        """The permutation of the prompts, `(N,)`, whose consecutive slices are warmup epoch `epoch`'s batches: seeded
        by `[seed, epoch]`, as TRL's sampler seeds each epoch's."""
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_prompts)

    def begin_epoch(self) -> None:
        """The sampler starts an epoch whose batches are all chosen afresh."""
        self.epoch = []

    def warmup_batch(self) -> np.ndarray | None:
        """The next batch's prompts, `(B,)`, while the warmup's batches are chosen: a slice of `warmup_order`; `None`
        after."""
        if self.batches_chosen >= self.warmup_batches:
            return None
        # e.g. permutation [2, 4, 3, 1, 0, 6, 5], B = 3 -> [2, 4, 3], then [1, 0, 6] (the tail is dropped)
        epoch, position = divmod(self.batches_chosen, self.batches_per_epoch)
        if self._warmup_order[0] != epoch:
            self._warmup_order = (epoch, np.asarray(self.warmup_order(epoch)))
        return self._warmup_order[1][position * self.batch_size : (position + 1) * self.batch_size]

    def add_chosen(self, batch: np.ndarray, predicted: np.ndarray, select_seconds: float | None) -> ChosenBatch:
        """Records `batch` (`(B,)` int64), just chosen, with its prompts' `predicted` success (`(B,)`) and the time the
        selector took (`None` during the warmup): now pending, and the epoch's next batch."""
        chosen = ChosenBatch(
            batch, predicted, len(self.pending), select_seconds, turns=self.times_selected[batch].astype(np.int64)
        )
        self.pending.append(chosen)
        if self.epoch is not None:
            self.epoch.append(chosen)
        self.batches_chosen += 1
        self.times_selected[batch] += 1
        return chosen

    def exclude(self) -> np.ndarray | None:
        """The pending prompts, unless excluding them would leave fewer than `B` to choose from (then a warning)."""
        if not self.pending:
            return None
        exclude = np.unique(np.concatenate([batch.indices for batch in self.pending]))
        if self.num_prompts - exclude.size >= self.batch_size:
            return exclude
        if not self._warned_small_pool:
            warnings.warn(
                f"{len(self.pending)} generation batches await their rewards, which leaves "
                f"{self.num_prompts - exclude.size} of {self.num_prompts} prompts to choose {self.batch_size} from: "
                "KGPS may select prompts whose last rewards it has not seen yet. Use a larger dataset, fewer "
                "prompts per generation batch, or fewer batches in flight: fewer dataloader workers (each prefetched "
                "batch awaits rewards), or in AsyncGRPOTrainer a lower max_staleness or max_inflight_tasks.",
                stacklevel=3,
            )
            self._warned_small_pool = True
        return None

    # Scoring -------------------------------------------------------------------------------------------------

    def take_scored(self, batch: np.ndarray, chosen: ChosenBatch | None = None) -> tuple[ChosenBatch, int] | None:
        """
        The pending record of the scored batch of prompts `batch` (`(B,)` int64), which stops pending, and how many
        older pending batches were skipped. `chosen`, its pending record, names the batch where batches finish in any
        order (the asynchronous trainer): only it stops pending. Without it (the synchronous trainers, which score in
        order), the batch is the oldest pending one with these prompts, and pending batches before it were skipped by
        a resumed trainer: they stop pending too. The last batch scored, scored again (TRL regenerates it when resumed
        inside its steps), is to be ignored: its outcomes were observed before the checkpoint. Returns `None` then,
        and raises `ValueError` for a batch that was never chosen, before anything changes.
        """
        in_order = chosen is None
        if in_order:
            position = next((i for i, p in enumerate(self.pending) if np.array_equal(p.indices, batch)), None)
        else:
            position = next((i for i, p in enumerate(self.pending) if p is chosen), None)
        if position is None:
            if self.last_scored is not None and np.array_equal(self.last_scored, batch):
                return None
            awaited = ", ".join(str(p.indices.tolist()) for p in self.pending) or "none"
            raise ValueError(
                f"The trainer scored prompts {batch.tolist()}, which is none of the generation batches KGPS chose and "
                f"awaits ({awaited}): the data loader does not draw from KGPS's sampler in its order (a custom "
                "dataloader or sampler?), so KGPS cannot attribute these rewards."
            )
        skipped = position if in_order else 0
        for _ in range(skipped):
            self.pending.popleft()
        chosen = self.pending[position - skipped]
        del self.pending[position - skipped]
        return chosen, skipped

    def add_scored(
        self, chosen: ChosenBatch, batch: np.ndarray, s: np.ndarray, k: np.ndarray, warmup: bool, skipped: int
    ) -> Observed:
        """
        Records the outcomes the selector was fed for the prompts `batch` of `chosen` (`(B,)` int64 each: successes
        `s`, scored rollouts `k`), during the warmup or not, `skipped` older batches dropped: the prompts with a
        scored rollout are observed, and the batch joins `recent`.
        """
        seen = batch[k > 0]
        self.observed_count += int(np.count_nonzero(~self.observed[seen]))
        self.observed[seen] = True
        self.batches_scored += 1
        self.last_scored = batch
        repeats = self.recent.add(batch)
        return Observed(chosen, s, k, warmup, skipped, repeats, self.recent.unique_prompts)

    def drop_pending(self) -> None:
        """Forgets the batches awaiting rewards, e.g. chosen ahead by a `train()` that ended first."""
        self.pending.clear()

    # State ---------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, np.ndarray | int]:
        """
        Everything but the selector's own state: the counters, `times_selected` `(N,)` int32, `observed` `(N,)` bool,
        the pending batches and their predictions `(P, B)`, their lags `pending_lags` `(P,)` int64 and selection
        times `pending_select_seconds` `(P,)` float64 (NaN for the warmup's), `last_scored` `(B,)` (or `(0,)`), and
        `recent_batches` `(R, B)` int64, the window of `recent`, oldest first (`R <= batches_per_epoch`); where the
        sampler iterates epochs, `epoch_batches` `(E, B)` int64, the epoch's batches in order.
        """
        state = {
            "batches_chosen": self.batches_chosen,
            "batches_scored": self.batches_scored,
            "times_selected": self.times_selected.copy(),
            "observed": self.observed.copy(),
            "pending": np.asarray([p.indices for p in self.pending], dtype=np.int64).reshape(-1, self.batch_size),
            "predictions": np.asarray([p.predicted for p in self.pending], dtype=np.float64).reshape(
                -1, self.batch_size
            ),
            "pending_lags": np.asarray([p.lag for p in self.pending], dtype=np.int64),
            "pending_select_seconds": np.asarray(
                [np.nan if p.select_seconds is None else p.select_seconds for p in self.pending], dtype=np.float64
            ),
            "last_scored": np.asarray([] if self.last_scored is None else self.last_scored, dtype=np.int64),
            "recent_batches": np.asarray(self.recent.batches, dtype=np.int64).reshape(-1, self.batch_size),
        }
        if self.epoch is not None:
            epoch = [chosen.indices for chosen in self.epoch]
            state["epoch_batches"] = np.asarray(epoch, dtype=np.int64).reshape(-1, self.batch_size)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray | int]) -> None:
        """
        Restores a `state_dict()`, or raises `ValueError` naming what does not fit, before changing anything; a state
        of an earlier release is read as `older_states.ledger_arrays` fills it in. Where the sampler iterates epochs,
        the state's `epoch_batches` become the epoch, whose last batches are the pending records they were.
        """
        state = older_states.ledger_arrays(state)
        N, B = self.num_prompts, self.batch_size
        pending, predictions = np.asarray(state["pending"]), np.asarray(state["predictions"], dtype=np.float64)
        last_scored = np.asarray(state["last_scored"])
        check_batches("pending", pending, N, B)
        check_batches("last_scored", last_scored.reshape(-1, B) if last_scored.size else pending[:0], N, B)
        if predictions.shape != pending.shape:
            raise ValueError(f"its predictions have shape {predictions.shape}, its pending batches {pending.shape}")
        P = pending.shape[0]
        lags, select_seconds = np.asarray(state["pending_lags"]), np.asarray(state["pending_select_seconds"])
        recent = np.asarray(state["recent_batches"])
        if lags.shape != (P,) or lags.dtype.kind not in "iu" or (lags < 0).any():
            raise ValueError(
                f"its pending_lags (shape {lags.shape}, dtype {lags.dtype}) are not {P} counts, one per pending batch"
            )
        if (
            select_seconds.shape != (P,)
            or select_seconds.dtype.kind != "f"
            or ((select_seconds < 0) | np.isinf(select_seconds)).any()
        ):
            raise ValueError(
                f"its pending_select_seconds (shape {select_seconds.shape}, dtype {select_seconds.dtype}) are not {P} "
                "durations (or NaN), one per pending batch"
            )
        check_batches("recent_batches", recent, N, B)
        epoch = None if self.epoch is None else np.asarray(state["epoch_batches"])
        if epoch is not None:
            check_batches("epoch_batches", epoch, N, B)
        if recent.shape[0] > self.batches_per_epoch or (np.diff(np.sort(recent, axis=1), axis=1) == 0).any():
            raise ValueError(
                f"its recent_batches are {recent.shape[0]} batches, but the window holds at most "
                f"{self.batches_per_epoch} (an epoch's worth), each of distinct prompts"
            )
        batches_chosen, batches_scored = int(state["batches_chosen"]), int(state["batches_scored"])
        times_selected, observed = np.asarray(state["times_selected"]), np.asarray(state["observed"])
        if (
            times_selected.shape != (N,)
            or times_selected.dtype.kind not in "iu"
            or times_selected.min() < 0
            or times_selected.sum() != batches_chosen * B
        ):
            raise ValueError(
                f"its times_selected (shape {times_selected.shape}, dtype {times_selected.dtype}) does not count "
                f"{batches_chosen} batches of {B} prompts out of {N}"
            )
        if observed.shape != (N,) or not 0 <= batches_scored <= batches_chosen:
            raise ValueError(
                f"its observed flags have shape {observed.shape} (not ({N},)), or it scored {batches_scored} of "
                f"{batches_chosen} batches chosen"
            )
        self.batches_chosen, self.batches_scored = batches_chosen, batches_scored
        self.times_selected = times_selected.astype(np.int32)
        self.observed = observed.astype(bool)
        self.observed_count = int(self.observed.sum())
        self.pending = deque(
            ChosenBatch(i, p, int(lag), None if np.isnan(seconds) else float(seconds))
            for i, p, lag, seconds in zip(pending.astype(np.int64), predictions, lags, select_seconds)
        )
        if epoch is not None:
            # e.g. epoch [a, b, c], pending [c]: a and b were scored (their predictions are not kept), c is awaited
            unknown = np.full(B, np.nan)
            self.epoch = [ChosenBatch(indices, unknown) for indices in epoch.astype(np.int64)]
            position = len(self.epoch) - 1
            for chosen in reversed(self.pending):
                if position < 0 or not np.array_equal(self.epoch[position].indices, chosen.indices):
                    break
                self.epoch[position] = chosen
                position -= 1
            _count_turns(self.epoch, self.times_selected)
        _count_turns(self.pending, self.times_selected)
        self.last_scored = last_scored.astype(np.int64) if last_scored.size else None
        self.recent = RecentBatches(N, self.batches_per_epoch)
        for batch in recent.astype(np.int64):
            self.recent.add(batch)


def _count_turns(batches: "list[ChosenBatch] | deque[ChosenBatch]", times_selected: np.ndarray) -> None:
    """
    Sets the `turns` of restored `batches`, the last chosen in order, that have none: a prompt's turn in a batch is
    the times it was chosen (`times_selected`) less its choices from that batch on. (A pending batch of the
    asynchronous trainer, chosen before batches already scored, gets a later turn: another of its prompt's rows.)
    """
    later = np.zeros_like(times_selected, dtype=np.int64)
    for chosen in reversed(batches):
        later[chosen.indices] += 1
        if chosen.turns is None:
            chosen.turns = times_selected[chosen.indices] - later[chosen.indices]


def check_batch_size(batch_size: int, num_prompts: int, formula: str = "") -> None:
    """
    Raises `ValueError` unless a generation batch of `batch_size` distinct prompts fits in `num_prompts`; `formula`
    says how the trainer sets `batch_size` (each adapter checks with its own before building the engine).
    """
    if not 1 <= batch_size <= num_prompts:
        by = f" ({formula})" if formula else ""
        raise ValueError(
            f"A generation batch needs {batch_size} distinct prompts{by} and the dataset has {num_prompts}: use a "
            "larger dataset or fewer prompts per generation batch."
        )


def check_batches(name: str, rows: np.ndarray, num_prompts: int, batch_size: int) -> None:
    """Raises unless `rows` are batches `(P, batch_size)` of prompt indices below `num_prompts`."""
    fits = rows.ndim == 2 and rows.shape[1] == batch_size and rows.dtype.kind in "iu"
    if not fits or (rows.size and (rows.min() < 0 or rows.max() >= num_prompts)):
        raise ValueError(
            f"its {name} has shape {rows.shape} ({rows.dtype}), for batches of {batch_size} prompts out of "
            f"{num_prompts}: it was saved for another dataset or batch size"
        )
