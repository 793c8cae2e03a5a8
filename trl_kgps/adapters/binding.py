"""
What both TRL adapters share: one selection engine bound to one trainer, its state saved with every model the
trainer saves and restored on resume, the model card's `## KGPS` section, and the run's reports.
"""

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from transformers import Trainer, TrainerCallback

from ..config import KGPSConfig
from ..engine.engine import SelectionEngine
from ..engine.prompts_digest import prompts_digest
from ..engine.protocol import PromptSelector
from ..engine.rounds import Rounds
from ..selectors.features import Metadata, selector_for, with_metadata
from .distributed import ParameterDelta
from .report import add_kgps_section, difficulty_dataset


if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

ONE_PER_TRAINER = (
    "A trainer takes one KGPSCallback, and this one has two: each would choose the prompts and learn from the same "
    "rewards. Keep one; to compare selectors, train one trainer for each, e.g. with "
    '`KGPSCallback(selector="uniform")`.'
)


class Binding:
    """
    One run's selection, bound to `trainer` for the callback `owner`.

    Args:
        trainer (`Trainer`): the trainer; the subclass checks it and wraps its members.
        owner (`TrainerCallback`): the `KGPSCallback` this binding serves (a trainer takes one).
        config (`KGPSConfig`): KGPS's hyperparameters and the success rule.
        selector (`str`, `PromptSelector` or `None`): a selector name or instance; built when training starts.

    Attributes:
        engine (`SelectionEngine` or `None`): the engine choosing the prompts, once training started.
        delta (`ParameterDelta` or `None`): the update norm's reference copy, once training started.
        metadata (`Metadata` or `None`): the metadata columns KGPS found in the dataset, when it looked for them.
    """

    def __init__(
        self, trainer: Trainer, owner: TrainerCallback, config: KGPSConfig, selector: "str | PromptSelector | None"
    ):
        self.trainer = trainer
        self.owner = owner
        self.config = config
        self.selector = selector
        self.engine: SelectionEngine | None = None
        self.delta: ParameterDelta | None = None
        self.metadata: Metadata | None = None
        self._prompts: dict[str, str] | None = None

    def build_selector(self, dataset: Any, reward_funcs: Sequence[Any]) -> PromptSelector:
        """
        The selector named by `selector` (KGPS by default) over `dataset`. Unless `config.feature_columns` names them,
        KGPS shares by the metadata columns it finds (`selectors.features.with_metadata`), and says which in the main
        process's log.
        """
        name = self.selector or "kgps"
        config = self.config
        if name == "kgps":
            config, self.metadata = with_metadata(dataset, config, reward_funcs)
            if self.metadata is not None and self.trainer.is_world_process_zero():
                logger.warning(self.metadata.describe())
        return selector_for(name, dataset, config, self.trainer.args.seed)

    # What the callback reads -----------------------------------------------------------------------------------

    @property
    def dataset(self) -> Any:
        """The rows the engine chooses among."""
        return self.trainer.train_dataset

    @property
    def rounds(self) -> Rounds | None:
        return None if self.engine is None else self.engine.rounds

    @property
    def rollouts(self) -> int:
        """Completions scored so far, over all ranks."""
        if self.engine is None:
            return 0
        return self.rounds.batches_scored * self.engine.batch_size * self.trainer.args.num_generations

    def difficulty_table(self) -> "datasets.Dataset":
        """The run's per-prompt table (`KGPSCallback.difficulty_table`), once training started."""
        columns = getattr(self.dataset, "column_names", None) or ()
        prompts = self.dataset["prompt"] if "prompt" in columns else None
        return difficulty_dataset(self.selector, self.rounds.times_selected, prompts)

    # The trainer's events (the callback forwards them) -----------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs) -> None:
        self.delta = ParameterDelta(self.trainer.model.parameters(), self.config.delta_norm_sample, seed=args.seed)
        self.delta.reset()

    def on_optimizer_step(self, args, state, control, **kwargs) -> None:
        pass

    def on_step_end(self, args, state, control, **kwargs) -> None:
        pass

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        pass

    # Saves and the model card ----------------------------------------------------------------------------------

    def check_one_per_trainer(self) -> None:
        """Raises if the trainer's callbacks hold another callback of the owner's class, or the owner twice."""
        kind = type(self.owner)
        callbacks = [c for c in self.trainer.callback_handler.callbacks if isinstance(c, kind)]
        if any(c is not self.owner for c in callbacks) or callbacks.count(self.owner) > 1:
            raise ValueError(ONE_PER_TRAINER)

    def prompts_digest(self) -> dict[str, str] | None:
        """The digest of the prompts the engine chooses among, which a checkpoint records and a resume checks."""
        if self._prompts is None:
            self._prompts = prompts_digest(self.dataset)
        return self._prompts

    def add_to_model_card(self) -> None:
        """Adds the `## KGPS` section and tags to the README.md that `create_model_card` wrote (main process)."""
        if self.engine is not None and self.trainer.is_world_process_zero():
            # KGPS's own config is the one it ran with (the columns it found, or its per-prompt filter without them).
            config = getattr(self.selector, "config", self.config)
            add_kgps_section(self.trainer, self.selector, config, self.rounds, self.dataset, self.metadata)
