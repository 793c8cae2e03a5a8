"""
What both TRL adapters share: one selection engine bound to one trainer, its state saved with every model the
trainer saves and restored on resume, the model card's `## KGPS` section, and the run's reports.
"""

import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset
from transformers import Trainer, TrainerCallback

from ..config import WITH_METADATA, KGPSConfig
from ..engine import state_file
from ..engine.copies import PromptCopies
from ..engine.engine import SelectionEngine
from ..engine.ledger import BatchLedger
from ..engine.prompts_digest import prompts_digest
from ..engine.protocol import PromptSelector
from ..selectors import SELECTORS
from . import checkpoint, trainer_record
from .dataset_columns import Metadata, copies_that_differ, describe_differing, selector_for, with_metadata
from .dataset_copies import find_copies
from .distributed import ParameterDelta
from .report import add_kgps_section, difficulty_dataset
from .reward_reads import ColumnReaders


if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

ATTACH = (
    "KGPSCallback is not attached to a trainer. Attach it explicitly: "
    "`trainer.add_callback(KGPSCallback(config, trainer=trainer))`."
)
REUSED = (
    "This KGPSCallback belongs to another trainer: a callback binds to the first trainer it is passed to, and "
    "holds that run's beliefs and sampler. Pass a new one to each trainer, e.g. "
    "`GRPOTrainer(..., callbacks=[KGPSCallback(config)])`; to continue a run, resume it from its checkpoint."
)
ONE_PER_TRAINER = (
    "A trainer takes one KGPSCallback, and this one has two: each would choose the prompts and learn from the same "
    "rewards. Keep one; to compare selectors, train one trainer for each, e.g. with "
    '`KGPSCallback(selector="uniform")`.'
)


def requested_config(config: KGPSConfig | None, selector: "str | PromptSelector | None") -> KGPSConfig:
    """
    The config of a run asked for with `config` and `selector` (`KGPSCallback`'s arguments): `config`, else that of a
    `selector` instance that holds one, else `KGPSConfig()`. Raises, before any trainer is built, `TypeError` for a
    `config` that is not a `KGPSConfig`, and `ValueError` for a selector name that is not one of `SELECTORS` or a
    `config` that a selector instance's own contradicts (`check_one_config`).
    """
    if config is None:
        config = getattr(selector, "config", None) or KGPSConfig()
    if not isinstance(config, KGPSConfig):
        raise TypeError(f"config must be a KGPSConfig, got {type(config).__name__}.")
    if isinstance(selector, str) and selector not in SELECTORS:
        raise ValueError(f"selector={selector!r} is not one of {sorted(SELECTORS)}; pass a name or an instance.")
    check_one_config(config, selector)
    return config


def check_one_config(config: KGPSConfig, selector: "str | PromptSelector | None") -> None:
    """
    Raises `ValueError` when `selector` is an instance holding a KGPS config that `config` (the callback's)
    contradicts, naming each field's two values and the fix: the engine would score rewards, run the warmup and
    measure the update norm by `config`, while the selector runs by its own, which its state file saves and the model
    card and `effective_config` report. A field `config` leaves to the dataset (`None`) is the selector's to decide;
    a field the selector's config lacks (a variant's, under a plain `KGPSSelector`) it runs at that field's default.
    """
    held = getattr(selector, "config", None)
    if held is config or isinstance(selector, str) or not isinstance(held, KGPSConfig):
        return
    left_to_the_dataset = {*WITH_METADATA, "feature_columns"}
    differ = {}
    for field in dataclasses.fields(config):
        given = getattr(config, field.name)
        if given is None and field.name in left_to_the_dataset:
            continue
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        runs = getattr(held, field.name, default)
        if field.name == "feature_columns":  # no column is read either way
            given, runs = given or [], runs or []
        if given != runs:
            differ[field.name] = (given, runs)
    if differ:
        name = type(selector).__name__
        values = ", ".join(
            f"{field}={given!r} (the callback's) and {runs!r} (the selector's)"
            for field, (given, runs) in differ.items()
        )
        raise ValueError(
            f"KGPSCallback was given a config and a {name} whose own config differs from it: {values}. The callback's "
            "would score the rewards, run the warmup and measure the update norm, while the selector, its state file, "
            "the model card and effective_config hold the selector's. Pass the config once: "
            f"`KGPSCallback(config, selector={name}(num_prompts, config=config))`, or leave config out "
            f"(`KGPSCallback(selector=selector)` runs with the selector's)."
        )


def check_bound(trainer: Trainer | None, args: Any) -> None:
    """Raises unless a callback bound to `trainer` (`None`: to none, `ATTACH`) gets that trainer's event, whose
    arguments are `args` (another trainer's: `REUSED`)."""
    if trainer is None:
        raise RuntimeError(ATTACH)
    if args is not trainer.args:
        raise RuntimeError(REUSED)


def check_map_style(dataset: Any) -> None:
    """
    Raises `ValueError` unless `dataset` is map-style and has rows: KGPS selects prompts by their index. A stream (a
    `datasets.IterableDataset`, from `load_dataset(..., streaming=True)` or `Dataset.to_iterable_dataset()`, or a
    torch `IterableDataset`) has no index, and TRL builds no sampler for it.
    """
    if isinstance(dataset, IterableDataset) or not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise ValueError(
            f"KGPS needs a map-style train dataset, and this one is a {type(dataset).__module__}."
            f"{type(dataset).__qualname__}, a stream: KGPS chooses each generation batch's prompts by their index in "
            "the dataset, and a stream has no index (TRL builds no sampler for it). Load the dataset without "
            "`streaming=True`, or make the stream map-style before training: `Dataset.from_generator(lambda: (yield "
            "from stream), features=stream.features)` writes its rows to an Arrow file on disk (`stream.take(n)` "
            "first keeps its first n)."
        )
    if len(dataset) == 0:
        raise ValueError(
            "The train dataset has no rows, and KGPS chooses the prompts of each generation batch among its rows. "
            "Pass a dataset with at least one generation batch of prompts (a filter, a split or a select may have "
            "left it empty)."
        )


def check_batch_arguments(args: Any, formula: str) -> None:
    """Raises `ValueError` when the trainer's arguments put no prompt in a generation batch, whose prompts `formula`
    counts: `per_device_train_batch_size` 0."""
    if args.per_device_train_batch_size < 1:
        raise ValueError(
            f"per_device_train_batch_size={args.per_device_train_batch_size} puts no prompt in a generation batch "
            f"(KGPS chooses {formula} prompts for each): set per_device_train_batch_size to 1 or more (on the "
            "command line, --per_device_train_batch_size 8)."
        )


class TrainerAdapter(TrainerCallback):
    """
    One run's selection, bound to `trainer` for the callback `owner`, which forwards the trainer's events to it. A
    subclass names its trainers' loop (`ASYNCHRONOUS`) and how they set the prompts of a generation batch
    (`BATCH_FORMULA`), which messages give, and handles the events its trainers need.

    Args:
        trainer (`Trainer`): the trainer; the subclass checks it and wraps its members.
        owner (`TrainerCallback`): the `KGPSCallback` this adapter serves (a trainer takes one).
        config (`KGPSConfig`): KGPS's hyperparameters and the success rule.
        selector (`str`, `PromptSelector` or `None`): a selector name or instance; built when training starts.

    Attributes:
        engine (`SelectionEngine` or `None`): the engine choosing the prompts, once training started.
        delta (`ParameterDelta` or `None`): the update norm's reference copy, once training started.
        metadata (`Metadata` or `None`): the metadata columns KGPS found in the dataset, when it looked for them.
        copies (`PromptCopies` or `None`): which rows hold one prompt, once training started.
        requested_selector (`str`, `PromptSelector` or `None`): the `selector` passed, from which a fresh start (a
            `train()` on other rows) builds the selector again.
        best_checkpoint (`str` or `None`): after a `train()` whose end loaded the best checkpoint's weights
            (`load_best_model_at_end`), that checkpoint, whose KGPS state is the one saved beside them.
    """

    ASYNCHRONOUS = False
    BATCH_FORMULA = ""

    def __init__(
        self, trainer: Trainer, owner: TrainerCallback, config: KGPSConfig, selector: "str | PromptSelector | None"
    ):
        self.trainer = trainer
        self.owner = owner
        self.config = config
        self.selector = selector
        self.requested_selector = selector
        self.best_checkpoint: str | None = None
        self.engine: SelectionEngine | None = None
        self.delta: ParameterDelta | None = None
        self.metadata: Metadata | None = None
        self.copies: PromptCopies | None = None
        self._prompts: dict[str, Any] | None = None

    def find_copies(
        self, dataset: Any, batch_size: int, readers: ColumnReaders, routing: tuple[str, ...] = ()
    ) -> PromptCopies:
        """
        The rows of `dataset` that hold one prompt (`dataset_copies.find_copies`, by `config.prompt_key` and the
        columns `readers` may read or the trainer routes rows by, `routing`), said in the main process's log when
        there are copies. `selector="uniform"`, TRL's order, and a selector instance passed to the callback that tracks
        one belief per row keep the rows: each row keeps its weight.
        """
        copies, notes = find_copies(dataset, self.config.prompt_key, batch_size, readers, routing)
        tracked = getattr(self.requested_selector, "num_prompts", None)
        if copies.copies and (self.requested_selector == "uniform" or tracked == copies.num_rows):
            copies, notes = PromptCopies.by_row(copies.num_rows), []
        if copies.copies:
            by_rows = self.requested_selector in (None, "kgps") and self.config.copies_weight == "rows"
            notes.insert(0, copies.describe(weigh_by_rows=by_rows))
        if self.trainer.is_world_process_zero():
            for note in notes:
                logger.warning(note)
        return copies

    def build_selector(self, dataset: Any, readers: ColumnReaders, copies: PromptCopies) -> PromptSelector:
        """
        The selector named by `selector` (KGPS by default) over the distinct prompts of `dataset` (`copies`). KGPS runs
        with `config` resolved for `dataset` (`dataset_columns.with_metadata`; the selector's `config`): unless
        `config.feature_columns` names them, it shares by the metadata columns it finds, never one that `readers` (the
        trainer's reward functions and environments) may read, and says which in the main process's log, with the
        columns it reads whose values differ between copies of one prompt.
        """
        name = self.selector or "kgps"
        config = self.config
        main = self.trainer.is_world_process_zero()
        if name == "kgps":
            config, self.metadata = with_metadata(dataset, config, readers, copies)
            if self.metadata is not None and main:
                logger.warning(self.metadata.describe())
        selector = selector_for(
            name, dataset, config, self.trainer.args.seed, copies.first_row, copies.rows_per_prompt
        )
        if name == "kgps" and main:
            read = [*(config.feature_columns or []), *([config.prior_column] if config.prior_column else [])]
            differ = copies_that_differ(dataset, read, copies)
            if differ:
                logger.warning(describe_differing(differ, copies))
        return selector

    # What the callback reads -----------------------------------------------------------------------------------

    @property
    def dataset(self) -> Any:
        """The rows the engine chooses among."""
        return self.trainer.train_dataset

    @property
    def ledger(self) -> BatchLedger | None:
        return None if self.engine is None else self.engine.ledger

    @property
    def effective_config(self) -> KGPSConfig | None:
        """The config KGPS runs with (`KGPSCallback.effective_config`): the selector's, resolved for the dataset, or,
        for a selector without a KGPS config (a baseline), `config` as passed; `None` before training starts."""
        if self.engine is None:
            return None
        selector_config = getattr(self.selector, "config", None)
        return selector_config if isinstance(selector_config, KGPSConfig) else self.config

    @property
    def rollouts(self) -> int:
        """Completions scored so far, over all ranks."""
        if self.engine is None:
            return 0
        return self.ledger.batches_scored * self.ledger.batch_size * self.group_size

    @property
    def group_size(self) -> int:
        """`G`, the completions of each prompt in a generation batch: the one place KGPS reads `num_generations`."""
        return self.trainer.args.num_generations

    def difficulty_table(self) -> "datasets.Dataset":
        """The run's per-prompt table (`KGPSCallback.difficulty_table`), once training started."""
        columns = getattr(self.dataset, "column_names", None) or ()
        prompts = self.dataset["prompt"] if "prompt" in columns else None
        return difficulty_dataset(self.selector, self.ledger.times_selected, prompts, self.copies)

    # The trainer's events --------------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs) -> None:
        self.delta = ParameterDelta(self.trainer.model.parameters(), self.config.delta_norm_sample, seed=args.seed)
        self.delta.reset()
        self.best_checkpoint = None

    def on_train_end(self, args, state, control, **kwargs) -> None:
        # `Trainer` has just loaded the best checkpoint's weights; the run's beliefs stay those of its last step.
        if args.load_best_model_at_end and state.best_model_checkpoint is not None:
            self.best_checkpoint = state.best_model_checkpoint

    # Saves and the model card ----------------------------------------------------------------------------------

    def check_one_per_trainer(self) -> None:
        """Raises if the trainer's callbacks hold another callback of the owner's class, or the owner twice."""
        kind = type(self.owner)
        callbacks = [c for c in self.trainer.callback_handler.callbacks if isinstance(c, kind)]
        if any(c is not self.owner for c in callbacks) or callbacks.count(self.owner) > 1:
            raise ValueError(ONE_PER_TRAINER)

    def trainer_record(self) -> dict[str, int]:
        """What a checkpoint records of the trainer and a resume checks: its loop and its `global_step`."""
        return {trainer_record.ASYNCHRONOUS: int(self.ASYNCHRONOUS), "global_step": self.trainer.state.global_step}

    def by_row_for(self, directory: str) -> PromptCopies | None:
        """
        Every row its own prompt, where the state in `directory` keeps one belief per row (`checkpoint.saved_by_row`)
        and this run found copies: the run resumes as it was saved, and says so. `None` otherwise.
        """
        if self.copies is None or not checkpoint.saved_by_row(directory, self.copies):
            return None
        if self.trainer.is_world_process_zero():
            logger.warning(
                "%s keeps one KGPS belief per row (saved with prompt_key=None, or by a release without it): the run "
                "resumes so, and %d rows repeat another row's prompt.",
                directory,
                self.copies.copies,
            )
        return PromptCopies.by_row(self.copies.num_rows)

    def resume(self, directory: str, ledger: checkpoint.Stateful) -> None:
        """Restores the state saved in `directory` into the selector and `ledger`, or raises before changing
        anything (`checkpoint.resume`)."""
        checkpoint.resume(
            directory,
            self.config,
            self.selector,
            ledger,
            self.prompts_digest,
            self.trainer_record(),
            batch_formula=self.BATCH_FORMULA,
            copies=self.copies,
        )

    def save(self, directory: str, ledger: checkpoint.Stateful) -> None:
        """Writes `directory/kgps_state.npz` (`checkpoint.save`), or copies the best checkpoint's
        (`copy_best_state`)."""
        if self.trainer.args.should_save and not self.copy_best_state(directory):
            checkpoint.save(
                directory, self.selector, ledger, self.prompts_digest(), self.trainer_record(), self.copies
            )

    def copy_best_state(self, directory: str) -> bool:
        """
        After a `train()` whose end loaded the best checkpoint's weights (`load_best_model_at_end`), a model saved
        from them gets that checkpoint's KGPS state, the beliefs of the step those weights are from, not the run's
        last: copies it into `directory` and says so in the main process's log; whether it did. Without it (deleted),
        the caller saves the run's last state, and the log says that the two steps differ.
        """
        if self.best_checkpoint is None:
            return False
        source = os.path.join(self.best_checkpoint, state_file.STATE_FILE)
        target = os.path.join(directory, state_file.STATE_FILE)
        if os.path.exists(target) and os.path.exists(source) and os.path.samefile(source, target):
            return True
        step = self.trainer.state.global_step
        if not os.path.isfile(source):
            logger.warning(
                "%s holds no %s, so the KGPS state saved in %s beside the best model's weights "
                "(load_best_model_at_end) is this run's at step %d, not that of the step the weights are from.",
                self.best_checkpoint,
                state_file.STATE_FILE,
                directory,
                step,
            )
            return False
        state_file.copy(source, directory)
        logger.warning(
            "KGPS saved in %s the state of %s, the best model whose weights TRL loaded (load_best_model_at_end): the "
            "beliefs at that step, not at this run's last step (%d), which the callback still holds "
            "(`callback.difficulty_table()`).",
            directory,
            self.best_checkpoint,
            step,
        )
        return True

    def prompts_digest(self) -> dict[str, Any] | None:
        """The digest of the rows the engine chooses among, which a checkpoint records and a resume checks."""
        if self._prompts is None:
            self._prompts = prompts_digest(self.dataset)
        return self._prompts

    def add_to_model_card(self) -> None:
        """Adds the `## KGPS` section and tags to the README.md that `create_model_card` wrote (main process)."""
        if self.engine is not None and self.trainer.is_world_process_zero():
            # KGPS's own config is the one it ran with (the columns it found, or its per-prompt filter without them).
            config = getattr(self.selector, "config", self.config)
            best = self.best_checkpoint
            if best is not None and not os.path.isfile(os.path.join(best, state_file.STATE_FILE)):
                best = None  # the run's last state was saved (`copy_best_state`)
            add_kgps_section(
                self.trainer, self.selector, config, self.ledger, self.dataset, self.metadata, best, self.copies
            )
