"""A drop-in replacement for TRL's `RepeatSampler` whose generation batches are chosen by a prompt selector."""

import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sized

import numpy as np
from torch.utils.data import Sampler

from .selectors import KGPSSelector
from .selectors.base import PromptSelector


class KGPSRepeatSampler(Sampler[int]):
    """
    [`trl.trainer.utils.RepeatSampler`]'s layout, with each generation batch's prompts chosen by a selector.

    Like `RepeatSampler`, it yields generation batches of `batch_size` distinct prompts, each prompt repeated
    `mini_repeat_count` times (the group of completions), each whole batch repeated `repeat_count` times (TRL's
    `num_iterations * steps_per_generation`, so that every step of the batch reads the same rows). Its `__len__` is
    `RepeatSampler`'s. The prompts of a batch are:

    - for the first `warmup_epochs` epochs' worth of batches, consecutive slices of a seeded random permutation of
      the dataset per epoch (what TRL's sampler does);
    - afterwards, `selector.select(batch_size, exclude=pending)`, decided only when the data loader asks for the
      batch's first index, so that it uses every observation that exists at that moment.

    Every batch yielded stays in `pending` until the trainer has scored it (`pop_scored()`), and pending prompts are
    never selected again: the data loader asks for the next batch before the current one is scored (the lag).
    Every rank builds the same sampler and, fed the same observations, yields the same indices.

    `times_selected` (`np.ndarray` of shape `(N,)`, int32) counts the generation batches each prompt was chosen
    for, warmup included; it sums to `batches_chosen * batch_size`.

    Args:
        data_source (`Sized`): the dataset.
        mini_repeat_count (`int`): completions per prompt (`num_generations`).
        batch_size (`int`): distinct prompts per generation batch.
        repeat_count (`int`, *optional*, defaults to `1`): repetitions of each generation batch.
        selector (`KGPSSelector` or any `PromptSelector`, *optional*): chooses the prompts;
            `KGPSSelector(len(data_source))` by default.
        warmup_epochs (`int`, *optional*, defaults to `1`): uniform epochs before the selector takes over.
        seed (`int`, *optional*, defaults to `0`): seeds the warmup permutations.

    Example:

    ```python
    >>> sampler = KGPSRepeatSampler(range(6), mini_repeat_count=2, batch_size=3, repeat_count=2)
    >>> list(sampler)  # warmup epoch: a permutation, as RepeatSampler
    [3, 3, 2, 2, 5, 5, 3, 3, 2, 2, 5, 5, 4, 4, 0, 0, 1, 1, 4, 4, 0, 0, 1, 1]
    ```
    """

    def __init__(
        self,
        data_source: Sized,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int = 1,
        selector: PromptSelector | None = None,
        warmup_epochs: int = 1,
        seed: int = 0,
    ):
        num_prompts = len(data_source)
        if batch_size > num_prompts:
            raise ValueError(
                f"A generation batch needs {batch_size} distinct prompts, but the dataset has only {num_prompts}. "
                "Use a larger dataset, or fewer prompts per generation batch (per_device_train_batch_size * "
                "num_processes * steps_per_generation / num_generations)."
            )
        if selector is None:
            selector = KGPSSelector(num_prompts)
        elif selector.num_prompts != num_prompts:
            raise ValueError(
                f"The selector tracks {selector.num_prompts} prompts but the dataset has {num_prompts}. Build the "
                "selector with `KGPSSelector(len(train_dataset))`."
            )
        self.data_source = data_source
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count
        self.selector = selector
        self.warmup_epochs = warmup_epochs
        self.seed = seed
        self.num_samples = num_prompts
        self.epoch = 0
        self.pending: deque[np.ndarray] = deque()  # batches yielded and not yet scored, oldest first
        self.on_new_batch: Callable[[np.ndarray, int], None] | None = None  # (batch, lag) after each choice
        self.batches_chosen = 0
        self.times_selected = np.zeros(num_prompts, dtype=np.int32)
        self.last_select_seconds = 0.0
        self.epoch_batches: list[np.ndarray] = []  # the batches of the epoch being iterated, in order
        self._replay: list[np.ndarray] = []
        self._warned_small_pool = False
        self._warmup_order: tuple[int, np.ndarray | None] = (-1, None)  # (epoch, its permutation)

    def set_epoch(self, epoch: int) -> None:
        """Kept for the `RepeatSampler` contract; the warmup counts batches, so it needs no epoch number."""
        self.epoch = epoch

    @property
    def batches_per_epoch(self) -> int:
        return self.num_samples // self.batch_size

    @property
    def warmup_batches(self) -> int:
        """How many generation batches the warmup takes: `warmup_epochs` uniform epochs."""
        return self.warmup_epochs * self.batches_per_epoch

    def __len__(self) -> int:
        return self.batches_per_epoch * self.batch_size * self.mini_repeat_count * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        # After a resume, the epoch starts with the batches it had chosen before the checkpoint: the trainer skips
        # those it had trained on and trains on the others, which are still pending.
        replay, self._replay = self._replay, []
        self.epoch_batches = []
        for position in range(self.batches_per_epoch):
            if position < len(replay):
                batch = replay[position]
            else:
                batch = self._next_batch()
                lag = len(self.pending)
                self.pending.append(batch)
                self.batches_chosen += 1
                self.times_selected[batch] += 1
                if self.on_new_batch is not None:
                    self.on_new_batch(batch, lag)
            self.epoch_batches.append(batch)
            # e.g. batch [4, 7], mini_repeat_count 2, repeat_count 2 -> 4 4 7 7 4 4 7 7
            for _ in range(self.repeat_count):
                for index in batch.tolist():
                    for _ in range(self.mini_repeat_count):
                        yield index

    def _next_batch(self) -> np.ndarray:
        """The warmup's next slice of a seeded permutation, then the selector's choice."""
        if self.batches_chosen >= self.warmup_batches:
            return self._select()
        # e.g. permutation [2, 4, 3, 1, 0, 6, 5], batch_size 3 -> [2, 4, 3], then [1, 0, 6] (the tail is dropped)
        epoch, position = divmod(self.batches_chosen, self.batches_per_epoch)
        if self._warmup_order[0] != epoch:
            self._warmup_order = (epoch, np.random.default_rng([self.seed, epoch]).permutation(self.num_samples))
        return self._warmup_order[1][position * self.batch_size : (position + 1) * self.batch_size]

    def _select(self) -> np.ndarray:
        exclude = np.unique(np.concatenate(self.pending)) if self.pending else None
        if exclude is not None and self.num_samples - exclude.size < self.batch_size:
            if not self._warned_small_pool:
                warnings.warn(
                    f"{len(self.pending)} generation batches await their rewards, which leaves "
                    f"{self.num_samples - exclude.size} of {self.num_samples} prompts to choose {self.batch_size} from: "
                    "KGPS may select prompts whose last rewards it has not seen yet. Use a larger dataset, fewer "
                    "prompts per generation batch, or fewer dataloader workers (each prefetched batch awaits rewards).",
                    stacklevel=2,
                )
                self._warned_small_pool = True
            exclude = None
        start = time.perf_counter()
        batch = self.selector.select(self.batch_size, exclude=exclude)
        self.last_select_seconds = time.perf_counter() - start
        return batch

    def state_dict(self) -> dict[str, np.ndarray | int]:
        """
        Where the sampler stands: batches chosen so far, how often each prompt was chosen (`(N,)` int32), this epoch's
        batches and those awaiting rewards (`(batches, batch_size)` int64 each).
        """
        return {
            "batches_chosen": self.batches_chosen,
            "times_selected": self.times_selected.copy(),
            "epoch_batches": np.asarray(self.epoch_batches, dtype=np.int64).reshape(-1, self.batch_size),
            "pending": np.asarray(list(self.pending), dtype=np.int64).reshape(-1, self.batch_size),
        }

    def load_state_dict(self, state: dict[str, np.ndarray | int]) -> None:
        """Restores a `state_dict()`; the next epoch iterated starts by replaying the saved epoch's batches."""
        for name in ("epoch_batches", "pending"):
            rows = np.asarray(state[name])
            if (
                rows.ndim != 2
                or rows.shape[1] != self.batch_size
                or (rows.size and (rows.min() < 0 or rows.max() >= self.num_samples))
            ):
                raise ValueError(
                    f"The saved sampler's {name} has shape {rows.shape}, for batches of {self.batch_size} prompts "
                    f"out of {self.num_samples}: it was saved for another dataset or batch size."
                )
        batches_chosen, times_selected = int(state["batches_chosen"]), np.asarray(state["times_selected"])
        if (
            times_selected.shape != (self.num_samples,)
            or times_selected.dtype.kind not in "iu"
            or times_selected.min() < 0
            or times_selected.sum() != batches_chosen * self.batch_size
        ):
            raise ValueError(
                f"The saved sampler's times_selected (shape {times_selected.shape}, dtype {times_selected.dtype}) "
                f"does not count {batches_chosen} batches of {self.batch_size} prompts out of {self.num_samples}: it "
                "was saved for another dataset or batch size, or is corrupted."
            )
        self.batches_chosen = batches_chosen
        self.times_selected = times_selected.astype(np.int32)
        self._replay = list(np.asarray(state["epoch_batches"]))
        self.epoch_batches = list(self._replay)
        self.pending = deque(np.asarray(state["pending"]))

    def pop_scored(self) -> np.ndarray:
        """The oldest batch awaiting its rewards, which the trainer has just scored."""
        if not self.pending:
            raise RuntimeError(
                "The trainer scored a generation batch that KGPSRepeatSampler never yielded: the train dataloader "
                "does not draw from this sampler. Build the trainer's dataloader with `trainer._get_train_sampler()`."
            )
        return self.pending.popleft()
