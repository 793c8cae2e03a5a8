r"""
`KGPSCallback`: Kalman-Guided Prompt Selection inside TRL's `GRPOTrainer` and `RLOOTrainer`.

What it connects, per generation batch:

1. the trainer's data loader draws from a `KGPSRepeatSampler`, which asks the selector for the next batch;
2. the rewards the trainer computes (gathered over all ranks) become successes `s` and scored rollouts `k` per
   prompt, which update the selector (`initialize` on a prompt's first observation during warmup);
3. after every optimizer step, \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over the trainable parameters
   (all shards) inflates every prompt's variance by \\(Q\\) (`predict`), once the warmup's batches are scored;
4. every checkpoint, and every model the trainer saves, gets the whole KGPS state (`kgps_state.npz`); a resumed run
   continues from it, and `push_to_hub` uploads it with a `## KGPS` section in the model card.

Every rank feeds identical observations and norms to its own selector, and a checksum of each new batch is compared
across ranks.
"""

import logging
import math
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import IterableDataset
from transformers import Trainer, TrainerCallback

from . import _async_trl, _trl
from . import _checkpoint as checkpoint
from ._distributed import ParameterDelta, check_ranks_agree, fingerprint, gather_indices
from ._engine import SelectionEngine
from ._features import selector_for
from ._outcomes import SuccessRule
from ._prompts_digest import prompts_digest
from ._report import add_kgps_section, difficulty_dataset
from ._rounds import Rounds
from .config import KGPSConfig
from .sampler import KGPSRepeatSampler
from .selectors import SELECTORS
from .selectors.base import PromptSelector


if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

_ATTACH_FIX = "Attach it explicitly: `trainer.add_callback(KGPSCallback(config, trainer=trainer))`."
_ONE_PER_TRAINER = (
    "A trainer takes one KGPSCallback, and this one has two: each would choose the prompts and learn from the same "
    "rewards. Keep one; to compare selectors, train one trainer for each, e.g. with "
    '`KGPSCallback(selector="uniform")`.'
)
_REUSED = (
    "This KGPSCallback belongs to another trainer: a callback binds to the first trainer it is passed to, and "
    "holds that run's beliefs and sampler. Pass a new one to each trainer, e.g. "
    "`GRPOTrainer(..., callbacks=[KGPSCallback(config)])`; to continue a run, resume it from its checkpoint."
)


class KGPSCallback(TrainerCallback):
    r"""
    Selects the prompts of every generation batch with KGPS. Attach it as TRL's callbacks that need their trainer:

    ```python
    trainer = GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=dataset)
    trainer.add_callback(KGPSCallback(KGPSConfig(), trainer=trainer))
    ```

    or in one line, `GRPOTrainer(..., callbacks=[KGPSCallback()])`: then, at `on_init_end`, it finds the trainer
    being built on the call stack (a callback is not given its trainer) and binds to it.

    Binding wraps six methods on that trainer instance (not its class), each listed with the TRL versions it was
    checked on in `trl_kgps._trl`: `get_train_dataloader`, so that each row the data loader reads carries its
    dataset index; `_get_train_sampler`, which returns a [`KGPSRepeatSampler`]; `_calculate_rewards`, which hands
    the gathered rewards to the selector on their way to the loss; `_load_optimizer_and_scheduler`, which also
    restores the KGPS state of the checkpoint a run resumes from; `save_model`, which also writes that state beside
    the model — into every checkpoint, the final model and what `push_to_hub` uploads; and `create_model_card`,
    which adds a `## KGPS` section and the tags `kgps`, `trl-kgps`. Nothing else in the trainer changes. A callback
    belongs to one trainer: passing it to a second raises.

    In TRL 1.16's `AsyncGRPOTrainer` (`trl.experimental.async_grpo`), the same callback makes the trainer's rollout
    worker read the prompts KGPS chooses, on rank 0, and learn from every group it scores (`trl_kgps._async`); it
    refuses any other TRL release, whose private rollout loop it was not checked on.

    Args:
        config (`KGPSConfig`, *optional*): KGPS's hyperparameters and the success rule; `KGPSConfig()` by default.
        selector (`str` or selector, *optional*): `"kgps"` (the default), or a baseline to compare with:
            `"uniform"` (TRL's order), `"mopps"`, `"greso"`, `"dps"` — built for `len(train_dataset)` prompts,
            seeded with `args.seed`; or an instance with the same interface (e.g. a `KGPSSelector` restored from a
            state).
        trainer (`Trainer`, *optional*): the trainer, for the explicit form.

    Attributes:
        selector (`KGPSSelector` or a baseline): the selector in use (until the trainer builds its data loader,
            what was passed).
        sampler (`KGPSRepeatSampler`): the sampler in use.

    Metrics, logged with the trainer's own (so wandb, trackio, TensorBoard receive them), per generation batch:
    `kgps/mae` and `kgps/spearman` (predicted success before the rollouts against the empirical `s/k`, after
    warmup), `kgps/nis` (the normalized innovation squared of the batch's outcomes under the beliefs they were
    predicted from: about 1 when the filter's uncertainty is calibrated, above 1 when it is overconfident),
    `kgps/informative` (share of groups with `0 < s < k`), `kgps/predicted_success`, `kgps/coverage` (share of
    prompts observed at least once), `kgps/repeats` (share of the batch that was in the batch before it),
    `kgps/unique_prompts` (distinct prompts over the last epoch's worth of batches: a selector that locks onto a few
    prompts shows it here), `kgps/lag` (batches awaiting rewards when this one was chosen), `kgps/select_ms`; per
    optimizer step: `kgps/delta_norm` and `kgps/process_noise` (the `Q` applied). With the shared factor (the default):
    `kgps/residual_prior` (the learnt prior variance of an unseen prompt's residual: it grows when first outcomes
    show the filter overconfident) and, with `feature_columns` of at most 20 groups, per group
    `kgps/group/<group>/predicted_success`, `kgps/group/<group>/batch_share` (the share of the batch from the group)
    and, when the batch holds the group, `kgps/group/<group>/observed_success`.

    After training, `difficulty_table()` gives each prompt's predicted success, variance and selection count, and
    `KGPSSelector.from_pretrained(output_dir_or_repo_id)` restores the selector the run saved.
    """

    def __init__(
        self,
        config: KGPSConfig | None = None,
        *,
        selector: "str | PromptSelector | None" = None,
        trainer: Trainer | None = None,
    ):
        if config is None:
            config = getattr(selector, "config", None) or KGPSConfig()
        if not isinstance(config, KGPSConfig):
            raise TypeError(f"config must be a KGPSConfig, got {type(config).__name__}.")
        if isinstance(selector, str) and selector not in SELECTORS:
            raise ValueError(f"selector={selector!r} is not one of {sorted(SELECTORS)}; pass a name or an instance.")
        self.config = config
        self.selector = selector
        self.trainer: Trainer | None = None
        self.sampler: KGPSRepeatSampler | None = None
        self._delta: ParameterDelta | None = None
        self._metrics_log: _trl.MetricsLog | None = None
        self._prompts: dict[str, str] | None = None  # the digest of the sampler's prompts, computed when first needed
        self._async = None  # the `_async.AsyncBinding` when the trainer is TRL's AsyncGRPOTrainer
        if trainer is not None:
            self.attach(trainer)

    # Binding ---------------------------------------------------------------------------------------------------

    def attach(self, trainer: Trainer) -> "KGPSCallback":
        """
        Binds to `trainer`: its data loader will draw from KGPS, and its rewards will reach the selector. Checks the
        trainer first and changes nothing if it does not fit; wraps its methods only (see `trl_kgps._trl`), and
        reads the rest of what it needs when training starts.
        """
        if self.trainer is trainer:
            return self
        if self.trainer is not None:
            raise RuntimeError(_REUSED)
        if _async_trl.is_async_trainer(trainer):
            from ._async import AsyncBinding

            _check_one_per_trainer(trainer, self)
            self._async = AsyncBinding(self, trainer)
            self.trainer = trainer
            return self
        _trl.check(trainer)
        _check_one_per_trainer(trainer, self)
        if getattr(trainer.args, "shuffle_dataset", True) is False:
            raise ValueError(
                "shuffle_dataset=False asks the trainer to read the prompts in the dataset's order, but KGPS chooses "
                "the order of the prompts (every selector, uniform too, draws its own seeded order): leave "
                "shuffle_dataset at its default."
            )
        if isinstance(trainer.train_dataset, IterableDataset):
            raise ValueError(
                "KGPS needs a map-style train dataset: it selects prompts by index, and an IterableDataset has none. "
                "Load the dataset without `streaming=True` (or convert it with `Dataset.from_generator`)."
            )
        if trainer.args.remove_unused_columns:
            raise ValueError(
                f"remove_unused_columns=True would drop the {_trl.INDEX_COLUMN!r} column by which KGPS attributes "
                "rewards to prompts: set remove_unused_columns=False (GRPOConfig's and RLOOConfig's default)."
            )
        self.trainer = trainer
        _trl.bind(
            trainer,
            train_sampler=self._train_sampler,
            observe=self._observe,
            resume_from=self._resume_from,
            save_state=self._save_state,
            add_to_model_card=self._add_to_model_card,
        )
        self._metrics_log = _trl.MetricsLog(trainer)
        return self

    def on_init_end(self, args, state, control, **kwargs):
        if self.trainer is None:
            self.attach(_trl.trainer_being_built(self))
        elif args is not self.trainer.args:  # passed to a second trainer (a notebook cell run twice)
            raise RuntimeError(_REUSED)

    def on_train_begin(self, args, state, control, **kwargs):
        trainer = self.trainer
        if trainer is None:
            raise RuntimeError(f"KGPSCallback is not attached to a trainer. {_ATTACH_FIX}")
        if args is not trainer.args:
            raise RuntimeError(_REUSED)
        if self._async is not None:
            self._async.on_train_begin(args, state, control, **kwargs)
            return
        if self.sampler is None:
            raise RuntimeError(
                "The trainer's data loader does not draw from KGPS: its `_get_train_sampler` was replaced after "
                "KGPSCallback attached. Attach KGPSCallback last."
            )
        self._delta = ParameterDelta(trainer.model.parameters(), self.config.delta_norm_sample, seed=args.seed)
        self._delta.reset()
        # The trainer skips the steps it trained in the epoch it resumes (`global_step % steps_per_epoch`, as in
        # `Trainer`), which the sampler replays; resumed from an epoch's last step, it skips none and starts the next.
        dataloader = kwargs.get("train_dataloader")
        batches = (
            len(dataloader) if dataloader is not None else self.sampler.batches_per_epoch * self.sampler.repeat_count
        )
        steps_per_epoch = max(1, math.ceil(batches / args.gradient_accumulation_steps))
        if args.ignore_data_skip or state.global_step % steps_per_epoch == 0:
            self.sampler.start_next_epoch()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.trainer is not None and self._async is None:
            self._metrics_log.verify(logs)

    # The sampler -----------------------------------------------------------------------------------------------

    def _train_sampler(self, dataset=None) -> KGPSRepeatSampler:
        trainer = self.trainer
        if self not in trainer.callback_handler.callbacks:
            raise RuntimeError(
                "KGPSCallback is attached to this trainer but not among its callbacks, so it would never see an "
                "optimizer step. Add it too: `trainer.add_callback(callback)`."
            )
        _check_one_per_trainer(trainer, self)
        dataset = trainer.train_dataset if dataset is None else dataset
        if isinstance(dataset, _trl.IndexedRows):
            dataset = dataset.rows
        if isinstance(dataset, IterableDataset):
            raise ValueError("KGPS needs a map-style train dataset: an IterableDataset has no indices to select.")
        self._prompts = None
        if self.sampler is not None and self.sampler.num_samples == len(dataset):
            # Another `train()` on this trainer: the batch its predecessor chose ahead was never generated.
            self.rounds.drop_pending()
            self.sampler.data_source = dataset
            return self.sampler
        if self.selector is None or isinstance(self.selector, str):
            self.selector = selector_for(self.selector or "kgps", dataset, self.config, trainer.args.seed)
        batch_size, G, repeat_count = _trl.generation_layout(trainer)
        self.sampler = KGPSRepeatSampler(
            dataset,
            mini_repeat_count=G,
            batch_size=batch_size,
            repeat_count=repeat_count,
            selector=self.selector,
            warmup_epochs=self.config.warmup_epochs,
            seed=trainer.args.seed,
        )
        self.sampler.engine.rule = SuccessRule(
            *_trl.reward_functions(trainer), self.config.success_reward, self.config.success_threshold
        )
        return self.sampler

    @property
    def engine(self) -> "SelectionEngine | None":
        """The selection engine that chooses the prompts (the sampler's, or the asynchronous trainer's rank 0's);
        `None` before training."""
        if self._async is not None:
            return self._async.engine
        return None if self.sampler is None else self.sampler.engine

    @property
    def rounds(self) -> "Rounds | None":
        """The rounds' bookkeeping (pending batches, counters, observed prompts); `None` before training."""
        return None if self.engine is None else self.engine.rounds

    @property
    def coverage(self) -> float:
        """The share of prompts observed at least once (with a scored rollout); 0 before training."""
        return 0.0 if self.engine is None else self.rounds.coverage

    @property
    def rollouts(self) -> int:
        """Completions scored so far, over all ranks: the rollout budget spent."""
        if self.engine is None:
            return 0
        return self.rounds.batches_scored * self.engine.batch_size * self.trainer.args.num_generations

    @property
    def in_warmup(self) -> bool:
        """Until the warmup's last batch is scored: observations initialise means, and no process noise is added."""
        return self.engine is None or self.rounds.in_warmup

    # Observations ----------------------------------------------------------------------------------------------

    def _observe(self, rewards_per_func: torch.Tensor, inputs: list[dict[str, Any]]) -> None:
        """Feeds one scored generation batch (rewards of every rank, shape `(B * G, F)`) to the selector."""
        G = self.sampler.mini_repeat_count
        device = self.trainer.accelerator.device
        # Every rank's oldest pending batch and its predictions must agree: ranks that chose differently, or whose
        # beliefs diverged, stop here, before any belief changes.
        oldest = self.rounds.pending[0] if self.rounds.pending else None
        check_ranks_agree(
            f"generation batch {self.rounds.batches_scored + 1} and its predictions",
            fingerprint(*(() if oldest is None else (oldest.indices, oldest.predicted))),
            device,
        )
        rewards = rewards_per_func.detach().float().cpu().numpy()
        groups = gather_indices(_trl.input_indices(inputs), device).reshape(-1, G)
        if groups.shape[0] * G != rewards.shape[0] or (groups != groups[:, :1]).any():
            raise RuntimeError(
                f"The trainer scored {rewards.shape[0]} completions whose rows are not {self.sampler.batch_size} "
                f"groups of {G} completions of one prompt each (dataset indices {groups.tolist()}): the data loader "
                "does not follow KGPS's sampler, so KGPS cannot attribute the rewards."
            )
        s, k = self.engine.outcomes(rewards, G)
        scored, metrics = self.engine.score(groups[:, 0], s, k)
        if scored is None:
            # TRL does not checkpoint its generation counter: resumed inside a batch's steps, it generates and
            # scores that batch again. Its outcomes were observed before the checkpoint; counting them twice
            # would tell the filter it saw twice the rollouts.
            logger.warning("KGPS ignores the rewards of a generation batch regenerated after resuming.")
            return
        if scored.skipped:
            logger.warning(
                "The trainer skipped %d generation batch%s that KGPS had chosen, so KGPS stopped waiting for %s "
                "rewards; nothing to do unless it recurs without a resume.",
                scored.skipped,
                "es" * (scored.skipped > 1),
                "their" if scored.skipped > 1 else "its",
            )
        self._log(metrics)

    # Process noise ---------------------------------------------------------------------------------------------

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self._async is None:
            self._log(self.engine.predict(self._delta.step()))

    def on_step_end(self, args, state, control, **kwargs):
        if self._async is not None:
            self._async.on_step_end(args, state, control, **kwargs)

    # Checkpoints and saved models -----------------------------------------------------------------------------

    def _save_state(self, directory: str) -> None:
        """Writes `directory/kgps_state.npz` where the trainer writes models (the main process), once training began."""
        if self.sampler is not None and self.trainer.args.should_save:
            checkpoint.save(directory, self.selector, self.sampler, self._prompts_digest())

    def _resume_from(self, directory: str) -> None:
        """Restores the state saved in `directory`, or raises before changing anything."""
        checkpoint.resume(directory, self.config, self.selector, self.sampler, self._prompts_digest)

    def _prompts_digest(self) -> dict[str, str] | None:
        """The digest of the prompts the sampler selects among, which a checkpoint records and a resume checks."""
        if self._prompts is None:
            self._prompts = prompts_digest(self.sampler.data_source)
        return self._prompts

    # Reports -------------------------------------------------------------------------------------------------

    def difficulty_table(self) -> "datasets.Dataset":
        """
        The per-prompt difficulty table of this run so far, as a `datasets.Dataset` with one row per prompt:
        `index`, `prompt` (from the train dataset's `"prompt"` column; a conversation becomes the text of its last
        user message; absent if the dataset has no such column), `predicted_success`, `variance` (the logit variance;
        NaN for the baselines) and `times_selected` (generation batches the prompt was chosen for, warmup included);
        for a run that shares by categorical `feature_columns`, also `group`, `group_predicted_success` and
        `own_logit`. A saved run's is `trl_kgps.difficulty_table(output_dir_or_repo_id)`.
        """
        if self.engine is None:
            raise RuntimeError(
                "KGPSCallback has no difficulty table before the trainer builds its data loader: call it after "
                "`trainer.train()`."
            )
        dataset = self.trainer.train_dataset if self._async is not None else self.sampler.data_source
        prompts = dataset["prompt"] if "prompt" in getattr(dataset, "column_names", ()) else None
        return difficulty_dataset(self.selector, self.rounds.times_selected, prompts)

    def _add_to_model_card(self) -> None:
        """Adds the `## KGPS` section and tags to the README.md that `create_model_card` wrote (main process)."""
        if self.sampler is not None and self.trainer.is_world_process_zero():
            add_kgps_section(self.trainer, self.selector, self.config, self.rounds, self.sampler.data_source)

    def _log(self, metrics: dict[str, float]) -> None:
        self._metrics_log.add(metrics)


def _check_one_per_trainer(trainer: Trainer, callback: KGPSCallback) -> None:
    """Raises if `trainer`'s callbacks hold a KGPSCallback other than `callback`, or `callback` twice."""
    callbacks = [c for c in trainer.callback_handler.callbacks if isinstance(c, KGPSCallback)]
    if any(c is not callback for c in callbacks) or callbacks.count(callback) > 1:
        raise ValueError(_ONE_PER_TRAINER)
