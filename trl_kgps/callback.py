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

import copy
import dataclasses
import inspect
import logging
import os
import warnings
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import IterableDataset
from transformers import Trainer, TrainerCallback

from . import _checkpoint as checkpoint
from ._distributed import ParameterDelta, check_ranks_agree, fingerprint, ranks_all
from ._metrics import RecentBatches, spearman
from ._outcomes import SuccessRule
from ._report import add_to_card, card_section, difficulty_dataset, last_metrics
from .config import KGPSConfig
from .sampler import KGPSRepeatSampler
from .selectors import SELECTORS, KGPSSelector
from .selectors.base import PromptSelector


if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

_ATTACH_FIX = "Attach it explicitly: `trainer.add_callback(KGPSCallback(config, trainer=trainer))`."
_REUSED = (
    "This KGPSCallback belongs to another trainer: a callback binds to the first trainer it is passed to, and "
    "holds that run's beliefs and sampler. Pass a new one to each trainer, e.g. "
    "`GRPOTrainer(..., callbacks=[KGPSCallback(config)])`; to continue a run, resume it from its checkpoint."
)


class KGPSCallback(TrainerCallback):
    r"""
    Selects the prompts of every generation batch with KGPS. One line in a TRL script:

    ```python
    trainer = GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=dataset,
                          callbacks=[KGPSCallback(KGPSConfig())])
    ```

    A callback is not given its trainer, so at `on_init_end` — which `Trainer.__init__` calls — this one looks up
    the call stack for the `Trainer` being built and binds to it only if that trainer's callback list holds this
    very callback; otherwise it raises. TRL's explicit form needs no lookup:
    `trainer.add_callback(KGPSCallback(config, trainer=trainer))`, or `callback.attach(trainer)`.

    Binding wraps five methods on that trainer instance (not its class): `_get_train_sampler`, which now returns
    a [`KGPSRepeatSampler`]; `_calculate_rewards`, which hands the gathered rewards to the selector on their way to
    the loss; `_load_optimizer_and_scheduler`, which also restores the KGPS state of the checkpoint a run resumes
    from; `save_model`, which also writes that state beside the model — into every checkpoint, the final model and
    what `push_to_hub` uploads; and `create_model_card`, which adds a `## KGPS` section and the tags `kgps`,
    `trl-kgps` to the card. Nothing else in the trainer changes.

    Args:
        config (`KGPSConfig`, *optional*): KGPS's hyperparameters and the success rule; the paper's by default.
        selector (`str` or selector, *optional*): `"kgps"` (the default), or a baseline to compare with:
            `"uniform"` (TRL's order), `"mopps"`, `"greso"` — built for `len(train_dataset)` prompts, seeded with
            `args.seed`; or an instance with the same interface (e.g. a `KGPSSelector` restored from a state).
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
    optimizer step: `kgps/delta_norm` and `kgps/process_noise` (the `Q` applied).

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
        self.rule: SuccessRule | None = None
        self._delta: ParameterDelta | None = None
        self._recent: RecentBatches | None = None  # kgps/repeats and kgps/unique_prompts
        self._observed: np.ndarray | None = None  # bool (N,): prompts with at least one scored rollout
        self._observed_count = 0
        self._predictions: deque[np.ndarray] = deque()  # sigmoid(m) of each pending batch, when it was chosen
        self._batches_scored = 0
        self._warned_no_rewards = False
        self._last_scored: np.ndarray | None = None  # the last batch observed, which TRL may regenerate on resume
        if trainer is not None:
            self.attach(trainer)

    # Binding ---------------------------------------------------------------------------------------------------

    def attach(self, trainer: Trainer) -> "KGPSCallback":
        """Binds to `trainer`: its data loader will draw from KGPS, and its rewards will reach the selector."""
        if self.trainer is trainer:
            return self
        if self.trainer is not None:
            raise RuntimeError("This KGPSCallback is already attached to another trainer; build one per trainer.")
        missing = [name for name in ("_get_train_sampler", "_calculate_rewards") if not hasattr(trainer, name)]
        if missing:
            raise TypeError(
                f"KGPS selects prompts for trainers that score groups of completions with reward functions "
                f"(trl.GRPOTrainer, trl.RLOOTrainer); {type(trainer).__name__} has no {' or '.join(missing)}."
            )
        if isinstance(trainer.train_dataset, IterableDataset):
            raise ValueError(
                "KGPS needs a map-style train dataset: it selects prompts by index, and an IterableDataset has none. "
                "Load the dataset without `streaming=True` (or convert it with `Dataset.from_generator`)."
            )
        self.trainer = trainer
        trainer._get_train_sampler = self._train_sampler
        calculate_rewards = trainer._calculate_rewards

        def _calculate_rewards(inputs, prompts, completions, completion_ids_list):
            rewards_per_func = calculate_rewards(inputs, prompts, completions, completion_ids_list)
            if trainer.model.training:
                self._observe(rewards_per_func, inputs)
            return rewards_per_func

        trainer._calculate_rewards = _calculate_rewards
        load_optimizer_and_scheduler = trainer._load_optimizer_and_scheduler

        def _load_optimizer_and_scheduler(directory):
            load_optimizer_and_scheduler(directory)
            if directory is not None:
                self._resume_from(directory)

        trainer._load_optimizer_and_scheduler = _load_optimizer_and_scheduler
        save_model = trainer.save_model

        # `_save_checkpoint` and `push_to_hub` both save through `save_model`, so writing here puts the state, once,
        # into every checkpoint, the final model and the folder `push_to_hub` uploads (before it uploads).
        def _save_model(output_dir=None, *args, **kwargs):
            save_model(output_dir, *args, **kwargs)
            self._save_state(trainer.args.output_dir if output_dir is None else output_dir)

        trainer.save_model = _save_model
        create_model_card = trainer.create_model_card

        def _create_model_card(*args, **kwargs):
            create_model_card(*args, **kwargs)
            self._add_to_model_card()

        trainer.create_model_card = _create_model_card
        return self

    def on_init_end(self, args, state, control, **kwargs):
        if self.trainer is None:
            self.attach(self._find_trainer())
        elif args is not self.trainer.args:  # passed to a second trainer (a notebook cell run twice)
            raise RuntimeError(_REUSED)

    def _find_trainer(self) -> Trainer:
        """The `Trainer` whose `__init__` is on the call stack and whose callbacks include this one."""
        frame = inspect.currentframe()
        try:
            while frame is not None:
                candidate = frame.f_locals.get("self")
                if isinstance(candidate, Trainer) and self in candidate.callback_handler.callbacks:
                    return candidate
                frame = frame.f_back
        finally:
            del frame
        raise RuntimeError(f"KGPSCallback could not find the trainer it was passed to. {_ATTACH_FIX}")

    def on_train_begin(self, args, state, control, **kwargs):
        trainer = self.trainer
        if trainer is None:
            raise RuntimeError(f"KGPSCallback is not attached to a trainer. {_ATTACH_FIX}")
        if args is not trainer.args:
            raise RuntimeError(_REUSED)
        if self.sampler is None:
            raise RuntimeError(
                "The trainer's data loader does not draw from KGPS: its `_get_train_sampler` was replaced after "
                "KGPSCallback attached. Attach KGPSCallback last."
            )
        self._delta = ParameterDelta(trainer.model.parameters(), self.config.delta_norm_sample, seed=args.seed)
        self._delta.reset()

    # The sampler -----------------------------------------------------------------------------------------------

    def _train_sampler(self, dataset=None) -> KGPSRepeatSampler:
        trainer = self.trainer
        if self not in trainer.callback_handler.callbacks:
            raise RuntimeError(
                "KGPSCallback is attached to this trainer but not among its callbacks, so it would never see an "
                "optimizer step. Add it too: `trainer.add_callback(callback)`."
            )
        dataset = trainer.train_dataset if dataset is None else dataset
        if isinstance(dataset, IterableDataset):
            raise ValueError("KGPS needs a map-style train dataset: an IterableDataset has no indices to select.")
        if self.sampler is not None and self.sampler.num_samples == len(dataset):
            self.sampler.data_source = dataset
            return self.sampler
        if self.selector is None or isinstance(self.selector, str):
            build = SELECTORS[self.selector or "kgps"]
            self.selector = build(len(dataset), self.config, trainer.args.seed)
        self.sampler = KGPSRepeatSampler(
            dataset,
            mini_repeat_count=trainer.num_generations,
            batch_size=trainer.args.generation_batch_size // trainer.num_generations,
            repeat_count=trainer.num_iterations * trainer.args.steps_per_generation,
            selector=self.selector,
            warmup_epochs=self.config.warmup_epochs,
            seed=trainer.args.seed,
        )
        self.sampler.on_new_batch = self._on_new_batch
        self._recent = RecentBatches(len(dataset), self.sampler.batches_per_epoch)
        self._observed = np.zeros(len(dataset), dtype=bool)
        self._observed_count = 0
        self.rule = SuccessRule(
            trainer.reward_func_names,
            trainer.reward_weights.tolist(),
            self.config.success_reward,
            self.config.success_threshold,
        )
        return self.sampler

    @property
    def coverage(self) -> float:
        """The share of prompts observed at least once (with a scored rollout); 0 before training."""
        return 0.0 if self._observed is None else self._observed_count / self._observed.size

    @property
    def rollouts(self) -> int:
        """Completions scored for training so far, over all ranks: the rollout budget spent."""
        if self.sampler is None:
            return 0
        return self._batches_scored * self.sampler.batch_size * self.sampler.mini_repeat_count

    @property
    def in_warmup(self) -> bool:
        """Until the warmup's last batch is scored: observations initialise means, and no process noise is added."""
        return self.sampler is None or self._batches_scored < self.sampler.warmup_batches

    def _on_new_batch(self, batch: np.ndarray, lag: int) -> None:
        selector = self.selector
        self._predictions.append(selector.predicted_success(batch))
        check_ranks_agree(
            f"the prompts of generation batch {self.sampler.batches_chosen}",
            fingerprint(batch, selector.predicted_success(batch)),
            self.trainer.accelerator.device,
        )
        metrics = {
            "kgps/lag": lag,
            "kgps/repeats": self._recent.add(batch),
            "kgps/unique_prompts": self._recent.unique_prompts,
        }
        if self.sampler.batches_chosen > self.sampler.warmup_batches:  # chosen by the selector, not the warmup
            metrics["kgps/select_ms"] = 1e3 * self.sampler.last_select_seconds
        self._log(metrics)

    # Observations ----------------------------------------------------------------------------------------------

    def _observe(self, rewards_per_func: torch.Tensor, inputs: list[dict[str, Any]]) -> None:
        """Feeds one scored generation batch (rewards of every rank, shape `(B * G, F)`) to the selector."""
        warmup = self.in_warmup
        G = self.sampler.mini_repeat_count
        rewards = rewards_per_func.detach().float().cpu().numpy()
        scored = self._pop_scored(rewards.shape[0], inputs)
        if scored is None:
            return
        batch, predicted = scored
        success, counted = self.rule(rewards)
        s = success.reshape(-1, G).sum(axis=1)
        k = counted.reshape(-1, G).sum(axis=1)
        if warmup:
            first = ~self._observed[batch]
            self.selector.initialize(batch[first], s[first], k[first])
            self.selector.update(batch[~first], s[~first], k[~first])
        else:
            self.selector.update(batch, s, k)
        self._batches_scored += 1
        if not k.any() and not self._warned_no_rewards:
            warnings.warn(
                f"KGPS observed no reward for generation batch {self._batches_scored}: the reward functions returned "
                "None for every completion, so no prompt's belief changed. KGPS learns only from scored completions: "
                "check that a reward function scores these prompts (or set success_reward to one that does).",
                stacklevel=2,
            )
            self._warned_no_rewards = True
        nis = getattr(self.selector, "last_nis", None)
        seen = k > 0
        self._observed_count += int(np.count_nonzero(~self._observed[batch[seen]]))
        self._observed[batch[seen]] = True
        metrics = {
            "kgps/coverage": self.coverage,
            "kgps/predicted_success": float(predicted.mean()),
        }
        if seen.any():
            empirical = s[seen] / k[seen]
            metrics["kgps/informative"] = float(np.mean((s[seen] > 0) & (s[seen] < k[seen])))
            if not warmup and nis is not None:
                metrics["kgps/nis"] = nis
            if not warmup:
                metrics["kgps/mae"] = float(np.abs(predicted[seen] - empirical).mean())
                rho = spearman(predicted[seen], empirical)
                if np.isfinite(rho):
                    metrics["kgps/spearman"] = rho
        self._log(metrics)

    def _pop_scored(self, completions: int, inputs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray] | None:
        """
        The pending batch the trainer has just scored, and its predicted success. It is the oldest one, except when a
        run resumed without KGPS state: the batches the trainer skipped to reach its step were never scored, and
        are dropped. Every rank checks its own slice of the batch and all must agree, or this raises.
        """
        G = self.sampler.mini_repeat_count
        device = self.trainer.accelerator.device

        def scored(batch: np.ndarray) -> bool:
            fits = batch.size * G == completions and self._is_scored(np.repeat(batch, G), inputs)
            return ranks_all(fits, device)

        position = next((i for i, batch in enumerate(self.sampler.pending) if scored(batch)), None)
        if position is None:
            if self._last_scored is not None and scored(self._last_scored):
                # TRL does not checkpoint its generation counter: resumed inside a batch's steps, it generates and
                # scores that batch again. Its outcomes were observed before the checkpoint; counting them twice
                # would tell the filter it saw twice the rollouts.
                logger.warning("KGPS ignores the rewards of a generation batch regenerated after resuming.")
                return None
            raise RuntimeError(
                f"The trainer scored {completions} completions that match none of the {len(self.sampler.pending)} "
                "generation batches KGPS chose and awaits: the data loader does not follow the sampler's order (a "
                "custom dataloader or collator that reorders rows?), so KGPS cannot attribute rewards to prompts."
            )
        if position:
            logger.warning("KGPS drops %d generation batches the trainer skipped without scoring them.", position)
        for _ in range(position):
            self.sampler.pop_scored()
            self._predictions.popleft()
        self._last_scored = self.sampler.pop_scored()
        return self._last_scored, self._predictions.popleft()

    def _is_scored(self, expected: np.ndarray, inputs: list[dict[str, Any]]) -> bool:
        """Whether this rank's first and last scored prompts are the dataset rows `expected` puts there."""
        start = self.trainer.accelerator.process_index * len(inputs)
        dataset = self.sampler.data_source
        for position in (0, len(inputs) - 1):
            if "prompt" not in inputs[position]:
                return True
            if dataset[int(expected[start + position])]["prompt"] != inputs[position]["prompt"]:
                return False
        return True

    # Process noise ---------------------------------------------------------------------------------------------

    def on_optimizer_step(self, args, state, control, **kwargs):
        norm = self._delta.step()
        metrics = {"kgps/delta_norm": norm}
        if not self.in_warmup:
            if hasattr(self.selector, "process_noise"):
                metrics["kgps/process_noise"] = self.selector.process_noise(norm)
            self.selector.predict(norm)
        self._log(metrics)

    # Checkpoints and saved models -----------------------------------------------------------------------------

    def _save_state(self, directory: str) -> None:
        """Writes `directory/kgps_state.npz` where the trainer writes models (the main process), once training began."""
        if self.sampler is None or not self.trainer.args.should_save:
            return
        os.makedirs(directory, exist_ok=True)
        checkpoint.save(os.path.join(directory, checkpoint.STATE_FILE), *self._state())

    def _state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Everything a resumed run needs to continue exactly: the selector, the sampler, the observations."""
        sampler = self.sampler.state_dict()
        arrays, selector_meta = checkpoint.pack_selector(self.selector.state_dict())
        arrays.update(
            observed=self._observed,
            predictions=np.asarray(list(self._predictions), dtype=np.float64).reshape(-1, self.sampler.batch_size),
            epoch_batches=sampler["epoch_batches"],
            pending=sampler["pending"],
            times_selected=sampler["times_selected"],
            last_scored=np.asarray([] if self._last_scored is None else self._last_scored, dtype=np.int64),
        )
        meta = {
            "selector": selector_meta,
            "selector_class": type(self.selector).__name__,
            "num_prompts": self.sampler.num_samples,
            "batch_size": self.sampler.batch_size,
            "batches_chosen": sampler["batches_chosen"],
            "batches_scored": self._batches_scored,
        }
        return arrays, meta

    def _resume_from(self, directory: str) -> None:
        """Restores the state saved in `directory`, or raises before changing anything."""
        path = os.path.join(directory, checkpoint.STATE_FILE)
        if not os.path.exists(path) and self.config.restart_on_missing_state:
            logger.warning(
                "%s holds no KGPS state: the estimator starts afresh (restart_on_missing_state).", directory
            )
            return
        arrays, meta = checkpoint.load(path)
        try:
            num_prompts, batch_size = int(meta["num_prompts"]), int(meta["batch_size"])
            if (num_prompts, batch_size) != (self.sampler.num_samples, self.sampler.batch_size):
                raise ValueError(
                    f"it was saved for {num_prompts} prompts in batches of {batch_size}, but this run has "
                    f"{self.sampler.num_samples} prompts in batches of {self.sampler.batch_size}"
                )
            if meta["selector_class"] != type(self.selector).__name__:
                raise ValueError(
                    f"it holds a {meta['selector_class']}, but this run uses {type(self.selector).__name__}"
                )
            observed, predictions = arrays["observed"].astype(bool), arrays["predictions"]
            if observed.shape != (num_prompts,) or predictions.shape != arrays["pending"].shape:
                raise ValueError("its arrays do not fit together")
            selector_state = checkpoint.unpack_selector(arrays, meta)
            _check_same_method(selector_state, self.selector)
            sampler_state = {key: arrays[key] for key in ("epoch_batches", "pending", "times_selected")}
            sampler_state["batches_chosen"] = meta["batches_chosen"]
            batches_scored, last_scored = int(meta["batches_scored"]), arrays["last_scored"]
            # A dry run on a copy of the selector, then the sampler, which checks everything before it changes:
            # a state that does not load leaves this run untouched.
            copy.deepcopy(self.selector).load_state_dict(selector_state)
            self.sampler.load_state_dict(sampler_state)
        except (KeyError, ValueError, TypeError) as error:
            raise ValueError(
                f"{path} does not fit this run: {error}. Resume with the dataset, batch size and selector it was saved "
                "with."
            ) from None
        self.selector.load_state_dict(selector_state)
        self._observed = observed
        self._observed_count = int(observed.sum())
        self._predictions = deque(predictions)
        self._batches_scored = batches_scored
        self._last_scored = last_scored if last_scored.size else None

    # Reports -------------------------------------------------------------------------------------------------

    def difficulty_table(self) -> "datasets.Dataset":
        """
        The per-prompt difficulty table of this run so far, as a `datasets.Dataset` with one row per prompt:
        `index`, `prompt` (from the train dataset's `"prompt"` column; a conversation becomes the text of its last
        user message; absent if the dataset has no such column), `predicted_success`, `variance` (the logit variance;
        NaN for the baselines) and `times_selected` (generation batches the prompt was chosen for, warmup included).
        A saved run's is `trl_kgps.difficulty_table(output_dir_or_repo_id)`.
        """
        if self.sampler is None:
            raise RuntimeError(
                "KGPSCallback has no difficulty table before the trainer builds its data loader: call it after "
                "`trainer.train()`."
            )
        dataset = self.sampler.data_source
        prompts = dataset["prompt"] if "prompt" in getattr(dataset, "column_names", ()) else None
        return difficulty_dataset(self.selector, self.sampler.times_selected, prompts)

    def _add_to_model_card(self) -> None:
        """Adds the `## KGPS` section and tags to the README.md that `create_model_card` wrote (main process)."""
        trainer = self.trainer
        if self.sampler is None or not trainer.is_world_process_zero():
            return
        section = card_section(
            self.selector,
            self.config,
            batches_chosen=self.sampler.batches_chosen,
            warmup_batches=self.sampler.warmup_batches,
            observed=self._observed_count,
            metrics=last_metrics(trainer.state.log_history),
            location=trainer.hub_model_id or trainer.args.output_dir,
        )
        add_to_card(os.path.join(trainer.args.output_dir, "README.md"), section)

    def _log(self, metrics: dict[str, float]) -> None:
        logged = getattr(self.trainer, "_metrics", None)
        if logged is not None:
            for key, value in metrics.items():
                logged["train"][key].append(value)


# Fields that only say how rewards are read or how the norm is measured: a run may resume with other values.
_RESUMABLE_FIELDS = {"success_reward", "success_threshold", "delta_norm_sample", "restart_on_missing_state"}


def _check_same_method(state: dict[str, Any], selector: "PromptSelector") -> None:
    """Raises if a saved KGPS state was written with a selection method other than `selector`'s config."""
    if "config" not in state or not isinstance(selector, KGPSSelector):
        return
    saved = dataclasses.asdict(KGPSSelector._init_arguments(state)["config"])
    current = dataclasses.asdict(selector.config)
    differ = sorted(name for name in current if name not in _RESUMABLE_FIELDS and saved.get(name) != current[name])
    if differ:
        changes = ", ".join(f"{name}={saved.get(name)!r} (this run: {current[name]!r})" for name in differ)
        hint = (
            "pass KGPSCallback(KGPSConfig.paper()): its state version 1 was written by trl-kgps 0.1, whose only "
            "method was the paper's"
            if state.get("version") == 1
            else "pass the KGPSConfig it was saved with"
        )
        raise ValueError(f"it was saved with {changes}, and resuming with another method would mix two: {hint}")
