"""`KGPSCallback`: Kalman-Guided Prompt Selection in TRL's `GRPOTrainer`, `RLOOTrainer` and `AsyncGRPOTrainer`."""

from typing import TYPE_CHECKING

from transformers import Trainer, TrainerCallback

from .adapters import trl_private
from .adapters.async_grpo import AsyncGRPOAdapter, check_drop_zero_advantage
from .adapters.grpo import GRPOAdapter
from .adapters.trainer_adapter import REUSED, TrainerAdapter, check_bound, check_one_config, requested_config
from .config import KGPSConfig
from .engine.engine import SelectionEngine
from .engine.ledger import BatchLedger
from .engine.protocol import PromptSelector
from .sampler import KGPSRepeatSampler


if TYPE_CHECKING:
    import datasets


class KGPSCallback(TrainerCallback):
    r"""
    Selects the prompts of every generation batch with KGPS: `GRPOTrainer(..., callbacks=[KGPSCallback()])`.

    At `on_init_end` it binds to the trainer being built (one trainer per callback; `trainer=` binds explicitly), whose
    adapter does the work: `adapters.grpo` for `GRPOTrainer` and `RLOOTrainer`, `adapters.async_grpo` for
    `AsyncGRPOTrainer`. The KGPS state (`kgps_state.npz`) is saved with every model the trainer saves, restored on
    resume and described in the model card; the `kgps/*` metrics reach the trainer's logs (docs/trl.md lists them).

    Args:
        config (`KGPSConfig`, *optional*): KGPS's hyperparameters and the success rule; `KGPSConfig()` by default,
            or the config of a `selector` instance. The fields it leaves to the dataset (`None`) are decided when
            training starts; `effective_config` holds the config that runs. With a selector instance, a config that
            the selector's own contradicts is refused: pass the config once.
        selector (`str` or `PromptSelector`, *optional*): `"kgps"` (the default); a baseline to compare with,
            `"uniform"` (TRL's order), `"mopps"`, `"greso"`, `"dps"`, `"arcus"`, `"gaussian"`, `"insight"` or
            `"offline_filter"` (its pass rates in the column `config.prior_column`), built for the train dataset and
            seeded with `args.seed`; or any `PromptSelector`, such as a selector of one's own or a restored
            `KGPSSelector`.
        trainer (`Trainer`, *optional*): the trainer, for the explicit form.
        drop_zero_advantage (`bool`, *optional*, defaults to `False`): under `AsyncGRPOTrainer`, a group whose
            completions all get the same reward never reaches the optimizer (KGPS still learns from it) and the worker
            generates on to fill the batch (docs/trl.md); other trainers refuse it. Fixed once the trainer is built.
    """

    def __init__(
        self,
        config: KGPSConfig | None = None,
        *,
        selector: "str | PromptSelector | None" = None,
        trainer: Trainer | None = None,
        drop_zero_advantage: bool = False,
    ):
        self.trainer: Trainer | None = None
        self.adapter: TrainerAdapter | None = None  # `GRPOAdapter` or `AsyncGRPOAdapter`, once attached
        self.config, self._selector = requested_config(config, selector), selector
        self.drop_zero_advantage = drop_zero_advantage
        if trainer is not None:
            self.attach(trainer)

    def attach(self, trainer: Trainer) -> "KGPSCallback":
        """Binds to `trainer`: checks it first and changes nothing if it does not fit, then wraps its methods."""
        if self.trainer is trainer:
            return self
        if self.trainer is not None:
            raise RuntimeError(REUSED)
        check_one_config(self.config, self._selector)  # `config` may have been replaced since the callback was built
        adapter = AsyncGRPOAdapter if AsyncGRPOAdapter.fits(trainer) else GRPOAdapter
        self.adapter = adapter(trainer, self, self.config, self._selector)
        self.trainer = trainer
        return self

    @property
    def drop_zero_advantage(self) -> bool:
        """Whether groups of zero advantage are kept from the optimizer (`AsyncGRPOTrainer`); fixed once attached."""
        return self._drop_zero_advantage

    @drop_zero_advantage.setter
    def drop_zero_advantage(self, value: bool) -> None:
        check_drop_zero_advantage(value, None if self.adapter is None else self._drop_zero_advantage)
        self._drop_zero_advantage = value

    @property
    def selector(self) -> "str | PromptSelector | None":
        """The selector in use; until training builds it, what was passed."""
        return self._selector if self.adapter is None else self.adapter.selector

    @property
    def effective_config(self) -> KGPSConfig | None:
        """The config KGPS runs with, as the selector holds it, its state file saves it and a resume compares it:
        `config` with the fields it left to the dataset (`None`) decided (`KGPSConfig.resolved`), the feature columns
        found named; `config` as passed for a selector without a KGPS config (a baseline). `None` before training."""
        return None if self.adapter is None else self.adapter.effective_config

    @property
    def sampler(self) -> KGPSRepeatSampler | None:
        """The sampler the data loader draws from (`GRPOTrainer`, `RLOOTrainer`); `None` before training."""
        return getattr(self.adapter, "sampler", None)

    @property
    def engine(self) -> SelectionEngine | None:
        """The selection engine that chooses the prompts; `None` before training."""
        return None if self.adapter is None else self.adapter.engine

    @property
    def ledger(self) -> BatchLedger | None:
        """The engine's bookkeeping (pending batches, counters, observed prompts); `None` before training."""
        return None if self.adapter is None else self.adapter.ledger

    @property
    def coverage(self) -> float:
        """The share of prompts observed at least once; 0 before training."""
        return 0.0 if self.engine is None else self.ledger.coverage

    @property
    def rollouts(self) -> int:
        """Completions scored so far, over all ranks: the rollout budget spent."""
        return 0 if self.adapter is None else self.adapter.rollouts

    @property
    def in_warmup(self) -> bool:
        """Until the warmup's last batch is scored: observations initialise means, and no process noise is added."""
        return self.engine is None or self.ledger.in_warmup

    def difficulty_table(self) -> "datasets.Dataset":
        """This run's per-prompt table (see `trl_kgps.difficulty_table`, which reads a saved run's)."""
        if self.engine is None:
            raise RuntimeError("KGPSCallback has no difficulty table before training: call it after trainer.train().")
        return self.adapter.difficulty_table()

    def on_init_end(self, args, state, control, **kwargs):
        if self.trainer is None:
            self.attach(trl_private.trainer_being_built(self))
        check_bound(self.trainer, args)  # another trainer's event: passed to a second one (a notebook cell run twice)

    def on_train_begin(self, args, state, control, **kwargs):
        check_bound(self.trainer, args)
        self.adapter.on_train_begin(args, state, control, **kwargs)

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.adapter.on_optimizer_step(args, state, control, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        self.adapter.on_step_end(args, state, control, **kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        self.adapter.on_train_end(args, state, control, **kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.adapter is not None:
            self.adapter.on_log(args, state, control, logs=logs, **kwargs)
