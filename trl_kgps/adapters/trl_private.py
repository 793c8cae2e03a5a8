"""
The one place where trl-kgps reaches into TRL's and transformers' trainers beyond their public API.

Every member KGPS replaces, wraps or reads is in `SEAM`, with what KGPS does with it; `docs/trl.md` shows the table.
Each was checked, for both `GRPOTrainer` and `RLOOTrainer`, on the TRL releases in `TESTED` (same names and
signatures), and CI runs the integration tests on both ends of that range. `check(trainer)` runs when the callback
attaches, before anything changes, and raises naming the installed TRL if a member is missing or has another
signature. Wrappers pass their arguments through (`*args, **kwargs`).

Rewards are read in the wrapped `_calculate_rewards`, not in a callback event: TRL's `on_step_end` (like every
`TrainerCallback` event) receives `args`, `state` and `control`, never the rewards, which exist only inside the
trainer's scoring of a generation batch and reach its logs as means. The one-line form, `KGPSCallback()`, finds the
trainer it was passed to on the call stack (`trainer_being_built`), since `Trainer.__init__` calls `on_init_end`
without passing itself; `KGPSCallback(trainer=trainer)` or `trainer.add_callback(...)` need no frame.
"""

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from torch.utils.data import Dataset
from transformers import Trainer

from .reward_reads import ColumnReaders
from .seam import UsedMember


# TRL releases whose trainers were checked against everything below; CI runs the integration tests on both ends.
TESTED = ("0.29.1", "1.16.0")

INDEX_COLUMN = "kgps_index"

# Every member of the trainer KGPS replaces, wraps or reads. `check()` verifies the leading parameters of those that
# name them; `parameters=None`: read as attributes, or checked where they are read.
SEAM = (
    UsedMember("Trainer.get_train_dataloader", (), use="wrapped: each row carries its dataset index as `kgps_index`, "
               "which reward functions receive like any column"),
    UsedMember("GRPOTrainer._get_train_sampler", ("dataset",), use="replaced: returns `KGPSRepeatSampler` instead "
               "of TRL's `RepeatSampler`"),
    UsedMember("GRPOTrainer._calculate_rewards", ("inputs", "prompts", "completions", "completion_ids_list"),
               use="wrapped: the rewards, gathered over all ranks, reach the selector (training batches only)"),
    UsedMember("Trainer._load_optimizer_and_scheduler", ("checkpoint",), use="wrapped: also restores the KGPS state "
               "of the checkpoint a run resumes from"),
    UsedMember("Trainer.save_model", ("output_dir",), use="wrapped: also writes `kgps_state.npz`, into every "
               "checkpoint and saved model"),
    UsedMember("Trainer.create_model_card", (), use="wrapped: also adds a `## KGPS` section and the tags `kgps`, "
               "`trl-kgps`"),
    UsedMember("GRPOTrainer._metrics", use="appended to: KGPS's metrics reach the trainer's logs"),
    UsedMember("GRPOTrainer.num_generations, num_iterations, args.steps_per_generation, args.generation_batch_size, "
               "reward_funcs, reward_func_names, reward_weights",
               use="read when training starts: the batch layout, the success rule, which columns a reward reads"),
    UsedMember("GRPOTrainer._environment_pool (TRL 1.16), else environment_factories", use="read when training "
               "starts: the environments whose `reset(**row)` may read a column"),
    UsedMember("GRPOTrainer._multi_environment (TRL 1.16; absent: False)", use="read when training starts: rows "
               "routed by their `environment` column, which then tells copies apart"),
    UsedMember("Trainer.__init__ (its frame)", use="the one-line form finds its trainer on the call stack at "
               "`on_init_end` (`trainer_being_built`)"),
)  # fmt: skip


def _trl_version() -> str:
    import trl

    return trl.__version__


def check(trainer: Trainer) -> None:
    """
    Raises `TypeError` if `trainer` is not a trainer KGPS can drive: one that scores groups of completions with
    reward functions (TRL's `GRPOTrainer`, `RLOOTrainer`) and whose members have the signatures KGPS was checked on.
    """
    missing = [name for name in ("_get_train_sampler", "_calculate_rewards") if not hasattr(trainer, name)]
    if missing:
        raise TypeError(
            f"KGPS selects prompts for trainers that score groups of completions with reward functions "
            f"(trl.GRPOTrainer, trl.RLOOTrainer); {type(trainer).__name__} has no {' or '.join(missing)}."
        )
    for member in SEAM:
        if member.parameters is None:
            continue
        name, expected = member.path.rpartition(".")[2], member.parameters
        method = getattr(type(trainer), name, None)
        parameters = [] if method is None else list(inspect.signature(method).parameters)[1 : 1 + len(expected)]
        if method is None or tuple(parameters) != expected:
            found = "missing" if method is None else f"{name}({', '.join(parameters)}, ...)"
            raise TypeError(
                f"KGPSCallback hooks into {type(trainer).__name__}.{name}({', '.join(expected)}), but in the "
                f"installed TRL {_trl_version()} it is {found}. trl-kgps is tested with TRL {TESTED[0]} to "
                f'{TESTED[1]}: install one of those (`pip install "trl>={TESTED[0]},<={TESTED[1]}"`), or report the '
                "new signature at https://github.com/trl-kgps/trl-kgps/issues."
            )


def trainer_being_built(callback: Any) -> Trainer:
    """
    The `Trainer` whose `__init__` is running and whose callbacks include `callback`: found on the call stack, since
    `Trainer.__init__` calls `on_init_end` without passing itself. Only its methods are wrapped at this point; what
    KGPS reads from it, it reads when training starts, once the trainer is whole.
    """
    frame = inspect.currentframe()
    try:
        while frame is not None:
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, Trainer) and callback in candidate.callback_handler.callbacks:
                return candidate
            frame = frame.f_back
    finally:
        del frame
    raise RuntimeError(
        "KGPSCallback could not find the trainer it was passed to. Attach it explicitly: "
        "`trainer.add_callback(KGPSCallback(config, trainer=trainer))`."
    )


def wrap(trainer: Trainer, name: str, wrapper: Callable[[Callable], Callable]) -> None:
    """Replaces `trainer.<name>` on this instance (not its class) by `wrapper(original)`."""
    setattr(trainer, name, wrapper(getattr(trainer, name)))


def bind(
    trainer: Trainer,
    *,
    train_sampler: Callable[..., Any],
    observe: Callable[[Any, list[dict[str, Any]]], None],
    resume_from: Callable[[str], None],
    save_state: Callable[[str], None],
    add_to_model_card: Callable[[], None],
) -> None:
    """
    Wraps the six methods of `SEAM` on `trainer` (this instance, not its class): its sampler becomes
    `train_sampler(dataset=None)`; each row its data loader reads carries its dataset index; the rewards it computes
    in training reach `observe(rewards_per_func, inputs)`; resuming from a checkpoint folder also calls
    `resume_from(folder)`; every save also calls `save_state(folder)`; and writing its model card also calls
    `add_to_model_card()`.
    """
    wrap(trainer, "_get_train_sampler", lambda original: train_sampler)

    def get_train_dataloader(original):
        def wrapped(*args, **kwargs):
            rows = trainer.train_dataset
            trainer.train_dataset = IndexedRows(rows)
            try:
                return original(*args, **kwargs)
            finally:
                trainer.train_dataset = rows

        return wrapped

    def calculate_rewards(original):
        def wrapped(*args, **kwargs):
            rewards_per_func = original(*args, **kwargs)
            if trainer.model.training:
                observe(rewards_per_func, scored_inputs(args, kwargs))
            return rewards_per_func

        return wrapped

    wrap(trainer, "get_train_dataloader", get_train_dataloader)
    wrap(trainer, "_calculate_rewards", calculate_rewards)
    bind_saves(trainer, resume_from=resume_from, save_state=save_state, add_to_model_card=add_to_model_card)


def bind_saves(
    trainer: Trainer,
    *,
    resume_from: Callable[[str], None],
    save_state: Callable[[str], None],
    add_to_model_card: Callable[[], None],
) -> None:
    """
    Wraps the three methods of `SEAM` through which KGPS's state travels with the model, on `trainer` (this
    instance; TRL's asynchronous trainer too): resuming from a checkpoint folder also calls `resume_from(folder)`;
    every save also calls `save_state(folder)`; and writing its model card also calls `add_to_model_card()`.
    """

    def load_optimizer_and_scheduler(original):
        def wrapped(checkpoint_dir, *args, **kwargs):
            original(checkpoint_dir, *args, **kwargs)
            if checkpoint_dir is not None:
                resume_from(checkpoint_dir)

        return wrapped

    # `_save_checkpoint` and `push_to_hub` both save through `save_model`, so writing here puts the state, once, into
    # every checkpoint, the final model and the folder `push_to_hub` uploads (before it uploads).
    def save_model(original):
        def wrapped(output_dir=None, *args, **kwargs):
            original(output_dir, *args, **kwargs)
            save_state(trainer.args.output_dir if output_dir is None else output_dir)

        return wrapped

    def create_model_card(original):
        def wrapped(*args, **kwargs):
            original(*args, **kwargs)
            add_to_model_card()

        return wrapped

    wrap(trainer, "_load_optimizer_and_scheduler", load_optimizer_and_scheduler)
    wrap(trainer, "save_model", save_model)
    wrap(trainer, "create_model_card", create_model_card)


def scored_inputs(args: tuple, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """The `inputs` argument of a `_calculate_rewards(inputs, prompts, completions, completion_ids_list)` call."""
    return kwargs["inputs"] if "inputs" in kwargs else args[0]


def check_index_column(dataset: Any) -> None:
    """Raises `ValueError` when `dataset` has a column named `INDEX_COLUMN`, which `IndexedRows` would replace."""
    if INDEX_COLUMN in (getattr(dataset, "column_names", None) or ()):
        raise ValueError(
            f"The train dataset has a column named {INDEX_COLUMN!r}, the name under which KGPS adds each row's "
            "dataset index to attribute rewards to prompts: its values would be replaced by the index. Rename the "
            f'column, e.g. dataset.rename_column("{INDEX_COLUMN}", "row_id").'
        )


class IndexedRows(Dataset):
    """
    A map-style dataset's rows as the data loader reads them, each with its dataset index under `kgps_index`: the
    rewards of a generation batch are attributed by index, whatever the prompts' texts (duplicates, images). Reward
    functions receive it among their keyword arguments, as any dataset column.
    """

    def __init__(self, rows: Dataset):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {**self.rows[index], INDEX_COLUMN: int(index)}

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        # `datasets.Dataset` reads a batch of rows at once, which the data loader uses when it is offered.
        rows = (
            self.rows.__getitems__(indices) if hasattr(self.rows, "__getitems__") else [self.rows[i] for i in indices]
        )
        return [{**row, INDEX_COLUMN: int(i)} for row, i in zip(rows, indices)]


def input_indices(inputs: list[dict[str, Any]]) -> np.ndarray:
    """The dataset index of each of this rank's scored rows, `(len(inputs),)` int64."""
    if inputs and INDEX_COLUMN not in inputs[0]:
        raise RuntimeError(
            f"The trainer scored rows without the {INDEX_COLUMN!r} column KGPS adds to identify prompts: the train "
            "data loader was not built by `trainer.get_train_dataloader()`, or a collator dropped the column."
        )
    return np.fromiter((row[INDEX_COLUMN] for row in inputs), dtype=np.int64, count=len(inputs))


def generation_layout(trainer: Trainer, G: int) -> tuple[int, int]:
    """(prompts per generation batch, repetitions of each batch) for groups of `G`, as `RepeatSampler` gets them."""
    return trainer.args.generation_batch_size // G, trainer.num_iterations * trainer.args.steps_per_generation


def column_readers(trainer: Trainer) -> ColumnReaders:
    """What reads the dataset's columns in `trainer`: its reward functions, and its environments' `reset(**row)`
    (one probed instance of each, kept in `_environment_pool` by TRL releases with `environment_factory`)."""
    pool = getattr(trainer, "_environment_pool", None)
    if isinstance(pool, dict):
        environments = [instances[0] for instances in pool.values() if instances]
    else:  # a release that keeps no probed instances: its factories
        environments = list((getattr(trainer, "environment_factories", None) or {}).values())
    return ColumnReaders.of(trainer.reward_funcs, environments)


def routing_columns(trainer: Trainer) -> tuple[str, ...]:
    """The columns `trainer` routes each row by: `environment` with several environments (`environment_factory` a
    dict), which picks the row's environment."""
    return ("environment",) if getattr(trainer, "_multi_environment", False) else ()


def reward_functions(trainer: Trainer) -> tuple[list[str], list[float]]:
    """The reward functions' names and weights, in the order of the columns of the rewards KGPS receives."""
    return list(trainer.reward_func_names), trainer.reward_weights.tolist()


class MetricsLog:
    """
    KGPS's metrics on their way to the trainer's logs: appended to `trainer._metrics["train"]`, which TRL's
    `log()` averages into every log (so wandb, trackio, TensorBoard get them). `verify(logs)` at each `on_log` warns
    once if metrics were appended and none arrived.
    """

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self.sent = False
        self.warned = False

    def add(self, metrics: dict[str, float]) -> None:
        logged = getattr(self.trainer, "_metrics", None)
        if isinstance(logged, dict) and "train" in logged:
            for key, value in metrics.items():
                logged["train"][key].append(value)
            self.sent = True
        else:
            self._warn(f"{type(self.trainer).__name__} has no `_metrics['train']` to add them to")

    def verify(self, logs: dict[str, Any] | None) -> None:
        if self.sent and logs is not None and "loss" in logs and not any(key.startswith("kgps/") for key in logs):
            self._warn("they were added to `_metrics['train']` and did not appear in the trainer's log")
        self.sent = False

    def _warn(self, why: str) -> None:
        if not self.warned:
            warnings.warn(
                f"KGPS's metrics (kgps/*) do not reach the trainer's logs: {why}. Selection is unaffected. trl-kgps "
                f"is tested with TRL {TESTED[0]} to {TESTED[1]}; this is TRL {_trl_version()}.",
                stacklevel=3,
            )
            self.warned = True
