"""A drop-in replacement for TRL's `RepeatSampler` whose generation batches are chosen by a prompt selector."""

from collections.abc import Iterator, Sized

import numpy as np
from torch.utils.data import Sampler

from .engine.copies import PromptCopies
from .engine.engine import build_engine
from .engine.ledger import BatchLedger, check_batch_size
from .engine.protocol import PromptSelector
from .selectors import KGPSSelector


# How `GRPOTrainer` and `RLOOTrainer` set the prompts of a generation batch, which this sampler draws.
PROMPTS_PER_BATCH = "per_device_train_batch_size x processes x steps_per_generation / num_generations"


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

    The sampler owns the layout; `engine` (a `trl_kgps.engine.engine.SelectionEngine`, the same as the asynchronous
    trainer's) owns the selector, the choice (`engine.choose`) and its record, `ledger`: the epoch's batches in order
    (`ledger.epoch`), and those awaiting rewards (`ledger.pending`) until the trainer has scored them
    (`engine.observe`). Pending prompts are not selected again, since the data loader asks for the next batch before
    the current one is scored (the lag). Every rank builds the same sampler and, fed the same observations, yields the
    same indices.

    Args:
        data_source (`Sized`): the dataset.
        mini_repeat_count (`int`): completions per prompt (`num_generations`).
        batch_size (`int`): distinct prompts per generation batch.
        repeat_count (`int`, *optional*, defaults to `1`): repetitions of each generation batch.
        selector (`KGPSSelector` or any `PromptSelector`, *optional*): chooses the prompts;
            `KGPSSelector(len(data_source))` by default.
        warmup_epochs (`int`, *optional*): uniform epochs before the selector takes over; unset, the selector's
            `config.warmup_epochs` (0 for `KGPSConfig()`, 1 for `KGPSConfig.paper()`), or 0 for a baseline.
        seed (`int`, *optional*, defaults to `0`): seeds the warmup permutations.
        copies (`PromptCopies`, *optional*): which rows hold one prompt; the selector tracks the distinct prompts and
            the sampler yields each one's rows in turn. Unset: every row is its own prompt.

    Example:

    ```python
    >>> sampler = KGPSRepeatSampler(range(6), mini_repeat_count=2, batch_size=3, repeat_count=2, warmup_epochs=1)
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
        warmup_epochs: int | None = None,
        seed: int = 0,
        copies: PromptCopies | None = None,
    ):
        self.copies = PromptCopies.by_row(len(data_source)) if copies is None else copies
        if self.copies.num_rows != len(data_source):
            raise ValueError(
                f"copies maps {self.copies.num_rows} rows, and the dataset has {len(data_source)}: find them in it."
            )
        num_prompts = self.copies.num_prompts
        if selector is None:
            # the batch's fit is checked before a selector is built for the rows: an empty dataset gets that message
            check_batch_size(batch_size, num_prompts, PROMPTS_PER_BATCH)
            selector = KGPSSelector(num_prompts)
        self.engine = build_engine(selector, num_prompts, batch_size, warmup_epochs, seed, PROMPTS_PER_BATCH)
        self.data_source = data_source
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count
        self.selector = selector
        self.seed = seed
        self.num_samples = len(data_source)  # TRL's epoch: the rows' worth of batches, copies included
        self.engine.ledger.begin_epoch()
        self._resume_epoch = False  # the next epoch iterated goes on with the epoch restored by `load_state_dict`

    @property
    def ledger(self) -> BatchLedger:
        """The engine's record of the run: the epoch's batches, those pending, the counters, the prompts observed."""
        return self.engine.ledger

    def set_epoch(self, epoch: int) -> None:
        """Accelerate's data loader calls it each epoch; KGPS counts batches, not epochs, so it ignores it."""

    @property
    def batches_per_epoch(self) -> int:
        return self.num_samples // self.batch_size

    def __len__(self) -> int:
        return self.batches_per_epoch * self.batch_size * self.mini_repeat_count * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        # After a resume, the epoch starts with the batches it had chosen before the checkpoint: the trainer skips
        # those it had trained on and trains on the others, which are still pending.
        if not self._resume_epoch:
            self.ledger.begin_epoch()
        self._resume_epoch = False
        epoch = self.ledger.epoch
        for position in range(self.batches_per_epoch):
            if position == len(epoch):
                self.engine.choose()
            rows = self.copies.rows(epoch[position].indices, epoch[position].turns).tolist()
            # e.g. rows [4, 7], mini_repeat_count 2, repeat_count 2 -> 4 4 7 7 4 4 7 7
            for _ in range(self.repeat_count):
                for index in rows:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def choose_as(self, other: "KGPSRepeatSampler") -> None:
        """
        Chooses from now on as `other`, a sampler over the same rows, does: its engine, selector and copies. A resume
        from a state that keeps one belief per row turns the sampler the data loader holds to rows so.
        """
        self.engine, self.selector, self.copies = other.engine, other.selector, other.copies

    def start_next_epoch(self) -> None:
        """
        Resumed from the last step of an epoch, the trainer skips nothing and starts the next epoch, whose batches are
        chosen afresh: the restored epoch is not replayed.
        """
        self._resume_epoch = False

    def state_dict(self) -> dict[str, np.ndarray | int]:
        """
        The ledger's `state_dict()`: batches chosen, scored, pending with their predictions, lags and selection times,
        prompts observed and chosen, the last epoch's worth of batches scored, and this epoch's batches,
        `epoch_batches` `(batches, batch_size)` int64.
        """
        return self.ledger.state_dict()

    def load_state_dict(self, state: dict[str, np.ndarray | int]) -> None:
        """
        Restores a `state_dict()`, or raises `ValueError` before changing anything; the next epoch iterated starts
        by replaying the saved epoch's batches.
        """
        self.ledger.load_state_dict(state)
        self._resume_epoch = True
