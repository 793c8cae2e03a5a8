r"""
`KGPSCallback`: Kalman-Guided Prompt Selection inside TRL's `GRPOTrainer` and `RLOOTrainer`.

What it connects, per generation batch:

1. the trainer's data loader draws from a `KGPSRepeatSampler`, which asks the selector for the next batch;
2. the rewards the trainer computes (gathered over all ranks) become successes `s` and scored rollouts `k` per
   prompt, which update the selector (`initialize` on a prompt's first observation during warmup);
3. after every optimizer step, \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over the trainable parameters
   (all shards) inflates every prompt's variance by \\(Q\\) (`predict`), from the first selection round on.

Every rank feeds identical observations and norms to its own selector, and a checksum of each new batch is compared
across ranks.
"""

import inspect
import logging
from collections import deque
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset
from transformers import Trainer, TrainerCallback

from ._distributed import ParameterDelta, check_ranks_agree, fingerprint
from ._metrics import spearman
from ._outcomes import SuccessRule
from .config import KGPSConfig
from .sampler import KGPSRepeatSampler
from .selectors import KGPSSelector


logger = logging.getLogger(__name__)

_ATTACH_FIX = "Attach it explicitly: `trainer.add_callback(KGPSCallback(config, trainer=trainer))`."


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

    Binding replaces two methods on that trainer instance (not its class): `_get_train_sampler`, which now returns
    a [`KGPSRepeatSampler`], and `_calculate_rewards`, which hands the gathered rewards to the selector on their
    way to the loss. Nothing else in the trainer changes.

    Args:
        config (`KGPSConfig`, *optional*): KGPS's hyperparameters and the success rule; the paper's by default.
        selector (`KGPSSelector`, *optional*): a selector to use (e.g. restored from a state); by default one is
            built for `len(train_dataset)` prompts, seeded with `args.seed`.
        trainer (`Trainer`, *optional*): the trainer, for the explicit form.

    Attributes:
        selector (`KGPSSelector`): the selector in use (`None` until the trainer builds its data loader).
        sampler (`KGPSRepeatSampler`): the sampler in use.

    Metrics, logged with the trainer's own (so wandb, trackio, TensorBoard receive them), per generation batch:
    `kgps/mae` and `kgps/spearman` (predicted success before the rollouts against the empirical `s/k`, after
    warmup), `kgps/informative` (share of groups with `0 < s < k`), `kgps/predicted_success`, `kgps/coverage`
    (share of prompts observed at least once), `kgps/lag` (batches awaiting rewards when this one was chosen),
    `kgps/select_ms`; per optimizer step: `kgps/delta_norm` and `kgps/process_noise` (the `Q` applied).
    """

    def __init__(
        self, config: KGPSConfig | None = None, *, selector: KGPSSelector | None = None, trainer: Trainer | None = None
    ):
        if config is None:
            config = selector.config if selector is not None else KGPSConfig()
        if not isinstance(config, KGPSConfig):
            raise TypeError(f"config must be a KGPSConfig, got {type(config).__name__}.")
        self.config = config
        self.selector = selector
        self.trainer: Trainer | None = None
        self.sampler: KGPSRepeatSampler | None = None
        self.rule: SuccessRule | None = None
        self._delta: ParameterDelta | None = None
        self._observed: np.ndarray | None = None  # bool (N,): prompts with at least one scored rollout
        self._predictions: deque[np.ndarray] = deque()  # sigmoid(m) of each pending batch, when it was chosen
        self._batches_scored = 0
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
        return self

    def on_init_end(self, args, state, control, **kwargs):
        if self.trainer is None:
            self.attach(self._find_trainer())

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
        if self.selector is None:
            self.selector = KGPSSelector(len(dataset), self.config, seed=trainer.args.seed)
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
        self._observed = np.zeros(len(dataset), dtype=bool)
        self.rule = SuccessRule(
            trainer.reward_func_names,
            trainer.reward_weights.tolist(),
            self.config.success_reward,
            self.config.success_threshold,
        )
        return self.sampler

    @property
    def in_warmup(self) -> bool:
        """Until the warmup's last batch is scored: observations initialise means, and no process noise is added."""
        return self.sampler is None or self._batches_scored < self.sampler.warmup_batches

    def _on_new_batch(self, batch: np.ndarray, lag: int) -> None:
        selector = self.selector
        self._predictions.append(selector.predicted_success(batch))
        check_ranks_agree(
            f"the prompts of generation batch {self.sampler.batches_chosen}",
            fingerprint(batch, selector.mean[batch]),
            self.trainer.accelerator.device,
        )
        metrics = {"kgps/lag": lag}
        if self.sampler.batches_chosen > self.sampler.warmup_batches:  # chosen by the selector, not the warmup
            metrics["kgps/select_ms"] = 1e3 * self.sampler.last_select_seconds
        self._log(metrics)

    # Observations ----------------------------------------------------------------------------------------------

    def _observe(self, rewards_per_func: torch.Tensor, inputs: list[dict[str, Any]]) -> None:
        """Feeds one scored generation batch (rewards of every rank, shape `(B * G, F)`) to the selector."""
        warmup = self.in_warmup
        batch = self.sampler.pop_scored()
        predicted = self._predictions.popleft()
        G = self.sampler.mini_repeat_count
        rewards = rewards_per_func.detach().float().cpu().numpy()
        if rewards.shape[0] != batch.size * G:
            raise RuntimeError(
                f"The trainer scored {rewards.shape[0]} completions, but the generation batch KGPS chose has "
                f"{batch.size} prompts x {G} generations. KGPS cannot attribute these rewards to prompts."
            )
        self._check_alignment(np.repeat(batch, G), inputs)
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
        scored = k > 0
        self._observed[batch[scored]] = True
        metrics = {"kgps/coverage": float(self._observed.mean()), "kgps/predicted_success": float(predicted.mean())}
        if scored.any():
            empirical = s[scored] / k[scored]
            metrics["kgps/informative"] = float(np.mean((s[scored] > 0) & (s[scored] < k[scored])))
            if not warmup:
                metrics["kgps/mae"] = float(np.abs(predicted[scored] - empirical).mean())
                rho = spearman(predicted[scored], empirical)
                if np.isfinite(rho):
                    metrics["kgps/spearman"] = rho
        self._log(metrics)

    def _check_alignment(self, expected: np.ndarray, inputs: list[dict[str, Any]]) -> None:
        """This rank's first and last scored prompt must be the dataset's rows at their positions in the batch."""
        start = self.trainer.accelerator.process_index * len(inputs)
        dataset = self.sampler.data_source
        for position in (0, len(inputs) - 1):
            row = inputs[position]
            if "prompt" not in row:
                return
            index = int(expected[start + position])
            if dataset[index]["prompt"] != row["prompt"]:
                raise RuntimeError(
                    f"KGPS expected the trainer to score dataset row {index} at position {start + position} of the "
                    "generation batch, but it scored another prompt: the data loader does not follow the sampler's "
                    "order (a custom dataloader or collator that reorders rows?)."
                )

    # Process noise ---------------------------------------------------------------------------------------------

    def on_optimizer_step(self, args, state, control, **kwargs):
        norm = self._delta.step()
        metrics = {"kgps/delta_norm": norm}
        if not self.in_warmup:
            metrics["kgps/process_noise"] = self.selector.process_noise(norm)
            self.selector.predict(norm)
        self._log(metrics)

    def _log(self, metrics: dict[str, float]) -> None:
        logged = getattr(self.trainer, "_metrics", None)
        if logged is not None:
            for key, value in metrics.items():
                logged["train"][key].append(value)
