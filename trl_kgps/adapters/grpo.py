r"""
KGPS in TRL's `GRPOTrainer` and `RLOOTrainer`, per generation batch:

1. the trainer's data loader draws from a `KGPSRepeatSampler`, whose engine chooses the next batch;
2. the rewards the trainer computes (gathered over all ranks) become successes `s` and scored rollouts `k` per
   prompt, which the engine feeds to the selector;
3. after every optimizer step, \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over the trainable parameters
   (all shards) widens every belief (`predict`);
4. every model the trainer saves gets the whole KGPS state (`kgps_state.npz`), which a resumed run continues from.

Every rank feeds identical observations and norms to its own engine, and a checksum of each batch is compared across
ranks before any belief changes.
"""

import logging
import math
from typing import Any

import torch
from transformers import Trainer, TrainerCallback

from ..config import KGPSConfig
from ..engine.copies import PromptCopies
from ..engine.outcomes import SuccessRule
from ..engine.prompts_digest import same_rows
from ..engine.protocol import PromptSelector
from ..sampler import PROMPTS_PER_BATCH, KGPSRepeatSampler
from . import trl_private
from .distributed import check_ranks_agree, fingerprint, gather_indices
from .reward_reads import ColumnReaders
from .trainer_adapter import TrainerAdapter, check_batch_arguments, check_map_style


logger = logging.getLogger(__name__)


def _check_columns_kept(args: Any, changed_after_init: bool = False) -> None:
    """Refuses `remove_unused_columns=True`, checked when the adapter is built and again when the data loader is."""
    if args.remove_unused_columns:
        when = " (set on trainer.args after the trainer was built)" if changed_after_init else ""
        raise ValueError(
            f"remove_unused_columns=True{when} would drop the {trl_private.INDEX_COLUMN!r} column by which KGPS "
            "attributes rewards to prompts: set remove_unused_columns=False (GRPOConfig's and RLOOConfig's "
            "default)."
        )


class GRPOAdapter(TrainerAdapter):
    """
    Binds the selection engine to a `GRPOTrainer` or `RLOOTrainer`: checks the trainer and its arguments, changing
    nothing if they do not fit, then wraps its members (`trl_private.bind`). Its sampler is built when the trainer
    builds its data loader, and reads the rest of what it needs when training starts.

    Attributes:
        sampler (`KGPSRepeatSampler` or `None`): the sampler the trainer's data loader draws from.
    """

    BATCH_FORMULA = PROMPTS_PER_BATCH

    def __init__(
        self, trainer: Trainer, owner: TrainerCallback, config: KGPSConfig, selector: "str | PromptSelector | None"
    ):
        trl_private.check(trainer)
        super().__init__(trainer, owner, config, selector)
        self.check_one_per_trainer()
        if getattr(trainer.args, "shuffle_dataset", True) is False:
            raise ValueError(
                "shuffle_dataset=False asks the trainer to read the prompts in the dataset's order, but KGPS chooses "
                "the order of the prompts (every selector, uniform too, draws its own seeded order): leave "
                "shuffle_dataset at its default."
            )
        check_map_style(trainer.train_dataset)
        trl_private.check_index_column(trainer.train_dataset)
        check_batch_arguments(trainer.args, PROMPTS_PER_BATCH)
        _check_columns_kept(trainer.args)
        if getattr(owner, "drop_zero_advantage", False):
            raise ValueError(
                f"KGPSCallback(drop_zero_advantage=True) needs TRL's AsyncGRPOTrainer: {type(trainer).__name__} "
                "generates and trains on whole generation batches, and dropping a group would need a patch of its "
                "generation. Here a group of equal rewards has zero advantage and gives no gradient already; KGPS "
                "makes such groups rarer. Leave drop_zero_advantage unset, or train with AsyncGRPOTrainer."
            )
        self.sampler: KGPSRepeatSampler | None = None
        trl_private.bind(
            trainer,
            train_sampler=self._train_sampler,
            observe=self._observe,
            resume_from=self._resume_from,
            save_state=self._save_state,
            add_to_model_card=self.add_to_model_card,
        )
        self._metrics_log = trl_private.MetricsLog(trainer)

    @property
    def dataset(self) -> Any:
        return self.sampler.data_source

    # The sampler -----------------------------------------------------------------------------------------------

    def _train_sampler(self, dataset=None) -> KGPSRepeatSampler:
        trainer = self.trainer
        if self.owner not in trainer.callback_handler.callbacks:
            raise RuntimeError(
                "KGPSCallback is attached to this trainer but not among its callbacks, so it would never see an "
                "optimizer step. Add it too: `trainer.add_callback(callback)`."
            )
        self.check_one_per_trainer()
        _check_columns_kept(trainer.args, changed_after_init=True)
        dataset = trainer.train_dataset if dataset is None else dataset
        if isinstance(dataset, trl_private.IndexedRows):
            dataset = dataset.rows
        check_map_style(dataset)
        trl_private.check_index_column(dataset)
        if self.sampler is not None:
            if same_rows(self.sampler.data_source, dataset):
                # Another `train()` on the same rows: the batch its predecessor chose ahead was never generated.
                self.ledger.drop_pending()
                self.sampler.data_source = dataset
                return self.sampler
            self._start_afresh(dataset)
        self._prompts = None
        G = self.group_size
        batch_size, repeat_count = trl_private.generation_layout(trainer, G)
        readers = trl_private.column_readers(trainer)
        copies = self.find_copies(dataset, batch_size, readers, trl_private.routing_columns(trainer))
        self.sampler = self._sampler(dataset, copies, batch_size, repeat_count, readers)
        return self.sampler

    def _sampler(
        self, dataset: Any, copies: PromptCopies, batch_size: int, repeat_count: int, readers: ColumnReaders
    ) -> KGPSRepeatSampler:
        """The sampler over the distinct prompts of `dataset` (`copies`), with the selector built for them; `readers`
        read the dataset's columns."""
        trainer = self.trainer
        if self.selector is None or isinstance(self.selector, str):
            self.selector = self.build_selector(dataset, readers, copies)
        sampler = KGPSRepeatSampler(
            dataset,
            mini_repeat_count=self.group_size,
            batch_size=batch_size,
            repeat_count=repeat_count,
            selector=self.selector,
            warmup_epochs=self.config.warmup_epochs,
            seed=trainer.args.seed,
            copies=copies,
        )
        self.copies, self.engine = copies, sampler.engine
        self.engine.rule = SuccessRule(
            *trl_private.reward_functions(trainer), self.config.success_reward, self.config.success_threshold
        )
        return sampler

    def _start_afresh(self, dataset: Any) -> None:
        """
        Another `train()` after `trainer.train_dataset` was replaced by other rows (a curriculum's next stage): every
        belief is about a row of the previous dataset, so KGPS starts afresh on the new rows, as a new run would, and
        says so. A selector instance passed to the callback holds beliefs about the previous rows: refused, before
        anything changes.
        """
        previous = self.sampler.num_samples
        if self.requested_selector is not None and not isinstance(self.requested_selector, str):
            raise ValueError(
                f"trainer.train_dataset was replaced by other rows ({len(dataset)}, where the last train() had "
                f"{previous}), and this KGPSCallback selects with the {type(self.requested_selector).__name__} it was "
                "given, whose beliefs are about the previous rows. To start afresh on the new rows, build the "
                'callback with a selector name, e.g. KGPSCallback(config) or KGPSCallback(config, selector="mopps"); '
                "to go on with these beliefs, train on the dataset they are about."
            )
        if self.trainer.is_world_process_zero():
            logger.warning(
                "trainer.train_dataset was replaced by other rows (%d, where the last train() had %d): KGPS starts "
                "afresh on them, as a new run would, and leaves the beliefs about the previous rows (the last "
                "checkpoint of that train() keeps them).",
                len(dataset),
                previous,
            )
        self.selector = self.requested_selector
        self.sampler = self.engine = self.metadata = None

    # The trainer's events --------------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs) -> None:
        if self.sampler is None:
            raise RuntimeError(
                "The trainer's data loader does not draw from KGPS: its `_get_train_sampler` was replaced after "
                "KGPSCallback attached. Attach KGPSCallback last."
            )
        super().on_train_begin(args, state, control, **kwargs)
        # The trainer skips the steps it trained in the epoch it resumes (`global_step % steps_per_epoch`, as in
        # `Trainer`), which the sampler replays; resumed from an epoch's last step, it skips none and starts the next.
        dataloader = kwargs.get("train_dataloader")
        batches = (
            len(dataloader) if dataloader is not None else self.sampler.batches_per_epoch * self.sampler.repeat_count
        )
        steps_per_epoch = max(1, math.ceil(batches / args.gradient_accumulation_steps))
        if args.ignore_data_skip or state.global_step % steps_per_epoch == 0:
            self.sampler.start_next_epoch()

    def on_optimizer_step(self, args, state, control, **kwargs) -> None:
        self._metrics_log.add(self.engine.predict(self.delta.step()))

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        self._metrics_log.verify(logs)

    # Observations ----------------------------------------------------------------------------------------------

    def _observe(self, rewards_per_func: torch.Tensor, inputs: list[dict[str, Any]]) -> None:
        """Feeds one scored generation batch (rewards of every rank, shape `(B * G, F)`) to the engine."""
        G = self.group_size
        device = self.trainer.accelerator.device
        # Every rank's oldest pending batch and its predictions must agree: ranks that chose differently, or whose
        # beliefs diverged, stop here, before any belief changes.
        oldest = self.ledger.pending[0] if self.ledger.pending else None
        check_ranks_agree(
            f"generation batch {self.ledger.batches_scored + 1} and its predictions",
            fingerprint(*(() if oldest is None else (oldest.indices, oldest.predicted))),
            device,
        )
        rewards = rewards_per_func.detach().float().cpu().numpy()
        groups = gather_indices(trl_private.input_indices(inputs), device).reshape(-1, G)
        if groups.shape[0] * G != rewards.shape[0] or (groups != groups[:, :1]).any():
            raise RuntimeError(
                f"The trainer scored {rewards.shape[0]} completions whose rows are not {self.sampler.batch_size} "
                f"groups of {G} completions of one prompt each (dataset indices {groups.tolist()}): the data loader "
                "does not follow KGPS's sampler, so KGPS cannot attribute the rewards."
            )
        s, k = self.engine.outcomes(rewards, G)
        observed, metrics = self.engine.observe(self.copies.prompts(groups[:, 0]), s, k)
        if observed is None:
            # TRL does not checkpoint its generation counter: resumed inside a batch's steps, it generates and
            # scores that batch again. Its outcomes were observed before the checkpoint; counting them twice
            # would tell the filter it saw twice the rollouts.
            logger.warning("KGPS ignores the rewards of a generation batch regenerated after resuming.")
            return
        if observed.skipped:
            logger.warning(
                "The trainer skipped %d generation batch%s that KGPS had chosen, so KGPS stopped waiting for %s "
                "rewards; nothing to do unless it recurs without a resume.",
                observed.skipped,
                "es" * (observed.skipped > 1),
                "their" if observed.skipped > 1 else "its",
            )
        self._metrics_log.add(metrics)

    # Checkpoints -----------------------------------------------------------------------------------------------

    def trainer_record(self) -> dict[str, int]:
        """The trainer's `global_step`, and the arguments by which its steps read the sampler's generation batches."""
        args = self.trainer.args
        return {
            **super().trainer_record(),
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "steps_per_generation": args.steps_per_generation,
            "num_iterations": self.trainer.num_iterations,
        }

    def _save_state(self, directory: str) -> None:
        """Writes `directory/kgps_state.npz` where the trainer writes models (the main process), once training
        began."""
        if self.sampler is not None:
            self.save(directory, self.sampler)

    def _resume_from(self, directory: str) -> None:
        """Restores the state saved in `directory`, or raises before changing anything: a state that keeps one belief
        per row first turns this run's sampler to rows (`by_row_for`)."""
        by_row = self.by_row_for(directory)
        if by_row is not None:
            if not isinstance(self.requested_selector, str | None):
                raise ValueError(
                    f"{directory} keeps one belief per row, and the {type(self.selector).__name__} passed to "
                    "KGPSCallback one per distinct prompt: pass it built over every row, or "
                    "KGPSConfig(prompt_key=None)."
                )
            self.selector = self.requested_selector
            sampler = self._sampler(
                self.sampler.data_source,
                by_row,
                self.sampler.batch_size,
                self.sampler.repeat_count,
                trl_private.column_readers(self.trainer),
            )
            self.sampler.choose_as(sampler)  # the data loader holds this sampler
        self.resume(directory, self.sampler)
