"""
The KGPS state inside the trainer's checkpoints: written beside every model the trainer saves, and restored, whole or
not at all, when a run resumes. `engine.state_file` owns the file's format; this module owns what a run may resume
from.
"""

import copy
import dataclasses
import json
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..config import WITH_METADATA, KGPSConfig
from ..engine import older_states, state_file
from ..engine.copies import PromptCopies
from ..engine.protocol import PromptSelector
from ..selectors import KGPSSelector
from ..selectors.registry import unregistered_module
from . import trainer_record


logger = logging.getLogger(__name__)

# Fields that only say how rewards are read, how the norm is measured or which rows are copies of one prompt (the
# prompts a state holds are checked by their number and digest): a run may resume with other values.
RESUMABLE_FIELDS = {
    "success_reward",
    "success_threshold",
    "delta_norm_sample",
    "restart_on_missing_state",
    "prompt_key",
}


class Stateful(Protocol):
    """What a run saves beside its selector: the engine's `BatchLedger`, directly (the asynchronous adapter) or through
    the synchronous `KGPSRepeatSampler`, which restarts its epoch on load."""

    batch_size: int

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def save(
    directory: str,
    selector: PromptSelector,
    ledger: Stateful,
    prompts: dict[str, Any] | None,
    trainer: dict[str, int] | None = None,
    copies: PromptCopies | None = None,
) -> None:
    """
    Writes `directory/kgps_state.npz`: the states of the selector and of the run's `ledger`, the digest of the
    `prompts` (the train dataset's rows), the `trainer`'s record (its `global_step`, and the arguments that map its
    steps to generation batches, `gradient_accumulation_steps`, ...) and the rows that are `copies` of one prompt,
    which a resume checks.
    """
    state_file.write(directory, selector, ledger.state_dict(), prompts, trainer, copies)


def saved_by_row(directory: str, copies: PromptCopies) -> bool:
    """
    Whether the state in `directory` keeps one belief per row of a dataset in which this run found `copies` of
    prompts: saved with `prompt_key=None`, or by a release that kept beliefs by row. The run then resumes by row.
    """
    path = os.path.join(directory, state_file.STATE_FILE)
    if not copies.copies or not os.path.isfile(path):
        return False
    try:
        arrays, meta = state_file.load(path)
    except state_file.UnreadableState:
        return False  # `resume` says why
    return state_file.COPIES not in arrays and int(meta.get("num_prompts", -1)) == copies.num_rows


def _check_same_copies(arrays: dict[str, Any], meta: dict[str, Any], copies: PromptCopies | None) -> None:
    """Raises unless the state's prompts are this run's: the same rows, the same of them copies of one prompt, naming
    what changed and how to resume."""
    saved = state_file.saved_copies(arrays, meta)
    current = None if copies is None or not copies.copies else copies
    if saved is None and current is None:
        return
    if saved is not None and current is not None and np.array_equal(saved.prompt_of_row, current.prompt_of_row):
        return
    saved_rows = saved.num_rows if saved is not None else int(meta.get("num_prompts", -1))
    rows = copies.num_rows if copies is not None else saved_rows
    said = "one belief per row" if saved is None else f"one belief per distinct {saved.identity}"
    run = "one per row" if current is None else f"one per distinct {current.identity}"
    if saved_rows != rows:
        change = f"{abs(rows - saved_rows):,} rows {'added' if rows > saved_rows else 'removed'}"
        if saved is not None and current is None and rows == saved.num_prompts:
            change += ", as when copies are de-duplicated away"
        raise ValueError(
            f"it was saved over {saved_rows:,} rows and this run's dataset has {rows:,} ({change}): its beliefs are "
            "about the rows it was saved with. Resume with that dataset; to train on these rows, start a new run "
            "from the checkpoint's weights (without resume_from_checkpoint)"
        )
    if saved is None or current is None or saved.key != current.key:
        fix = f"KGPSConfig(prompt_key={None if saved is None else saved.key!r})"
    elif saved.columns != current.columns:
        read = ", ".join(map(repr, saved.columns)) or "no column"
        fix = f"the reward functions and environments it was saved with (they read {read})"
    else:
        fix = None
    if fix is not None:
        raise ValueError(f"it keeps {said} and this run {run} over the same {rows:,} rows: resume with {fix}")
    raise ValueError(
        f"it keeps {said} and this run {run} over the same {rows:,} rows, grouped differently: the rows' values "
        "changed since it was saved. Resume with the dataset it was saved with"
    )


def _resumed_step(directory: str, step: int) -> int:
    """
    The step the trainer resumes at: the `global_step` of the checkpoint's `trainer_state.json` (which transformers
    4.x reads only after the checkpoint's other files, so its `trainer.state` still says 0 here), else `step`.
    """
    try:
        with open(os.path.join(directory, "trainer_state.json")) as f:
            return int(json.load(f)["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return step


def resume(
    directory: str,
    config: KGPSConfig,
    selector: PromptSelector,
    ledger: Stateful,
    prompts: Callable[[], dict[str, Any] | None],
    trainer: dict[str, int] | None = None,
    batch_formula: str = "",
    copies: PromptCopies | None = None,
) -> None:
    """
    Restores the state saved in `directory` into `selector` and `ledger`, or raises before changing either. A
    missing state raises too, unless `config.restart_on_missing_state`; `prompts()` gives this run's rows digest, and
    `trainer` the resuming trainer's record (as `save` takes it), which must match the saved one; `batch_formula` says
    how the trainer sets the prompts of a generation batch, and `copies` which rows hold one prompt (unset: none).
    """
    path = os.path.join(directory, state_file.STATE_FILE)
    if not os.path.exists(path) and config.restart_on_missing_state:
        logger.warning("%s holds no KGPS state: the estimator starts afresh (restart_on_missing_state).", directory)
        return
    if trainer is not None and "global_step" in trainer:
        trainer = {**trainer, "global_step": _resumed_step(directory, trainer["global_step"])}
    try:
        arrays, meta = state_file.load(path)
        saved = trainer_record.saved(arrays, meta)
        trainer_record.check_same_loop(path, saved, trainer or {})
        _check_same_copies(arrays, meta, copies)
        _check_registered(meta, selector)
        _check_release(path, meta, selector)
        selector_state, ledger_state = state_file.read_run(
            path, arrays, meta, selector, ledger.batch_size, prompts(), batch_formula
        )
        trainer_record.check_same_steps(path, saved, trainer or {})
    except (state_file.UnreadableState, trainer_record.OtherTrainerState):
        raise  # its message says what to resume from
    except (KeyError, ValueError, TypeError) as error:
        raise _does_not_fit(path, error) from None
    _check_same_method(path, selector_state, selector, config)
    try:
        # A dry run on a copy of the selector, then the ledger, which checks everything before it changes: a state
        # that does not load leaves this run untouched.
        copy.deepcopy(selector).load_state_dict(selector_state)
        ledger.load_state_dict(ledger_state)
    except (KeyError, ValueError, TypeError) as error:
        raise _does_not_fit(path, error) from None
    selector.load_state_dict(selector_state)


def _check_registered(meta: dict[str, Any], selector: PromptSelector) -> None:
    """Raises if the state holds another selector than `selector`, one that registers when its module is imported and
    is not yet, naming the import."""
    saved = older_states.selector_class(meta)
    module = unregistered_module(saved) if saved != type(selector).__name__ else None
    if module is not None:
        raise ValueError(
            f"it holds {state_file.held(meta)}, a selector that registers when its module is imported: "
            f"`import {module}` first, then resume with the config it was saved with"
        )


def _check_release(path: str, meta: dict[str, Any], selector: PromptSelector) -> None:
    """Raises `UnreadableState` for a KGPS state that a development build of 0.3 wrote, naming its version and the
    fix."""
    saved = meta.get("selector", {})
    refusal = older_states.written_by_a_development_build(saved) if isinstance(selector, KGPSSelector) else None
    if refusal is not None:
        raise state_file.UnreadableState(f"{path}: {refusal}. {older_states.DEVELOPMENT_RESUME_FIX}.")


def _does_not_fit(path: str, error: Exception) -> ValueError:
    return ValueError(
        f"{path} does not fit this run: {error}; resume with the dataset, batch size and selector it was saved with."
    )


def _method(config: KGPSConfig) -> dict[str, Any]:
    """The fields of a selector's config that make its method. A selector's `feature_columns` of `None` reads no
    column, as `[]` does (the columns to find were found before it was built)."""
    fields = dataclasses.asdict(config)
    fields["feature_columns"] = fields["feature_columns"] or []
    return {name: value for name, value in fields.items() if name not in RESUMABLE_FIELDS}


def _hint(passed: KGPSConfig, saved: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """
    The fields to pass so that `passed`, the config the user gave, runs as the `saved` method: each field set
    otherwise, and each field left to the dataset (`None`) that the config so corrected would decide otherwise than
    saved (this run decided `current`).
    """
    settings = {n: v for n, v in saved.items() if getattr(passed, n) is not None and getattr(passed, n) != v}
    if passed.feature_columns is None and current["feature_columns"] != saved["feature_columns"]:
        settings["feature_columns"] = saved["feature_columns"]
    # Columns named (or nothing shared) decide as with metadata; else this run's dataset decides, as it did.
    hinted = {**dataclasses.asdict(passed), **settings}
    decided = WITH_METADATA if hinted["feature_columns"] is not None or hinted["shared_variance"] == 0 else current
    left = [n for n in saved if getattr(passed, n) is None and n not in settings]
    return {**settings, **{n: saved[n] for n in left if decided.get(n) != saved[n]}}


def _read_as(config: KGPSConfig, config_class: type[KGPSConfig]) -> KGPSConfig:
    """`config` as a `config_class` (the config a variant of KGPS reads): itself, or with the fields it lacks at their
    defaults."""
    if isinstance(config, config_class):
        return config
    return config_class(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})


def _check_same_method(path: str, state: dict[str, Any], selector: PromptSelector, config: KGPSConfig) -> None:
    """
    Raises if the KGPS state saved at `path` was written with a selection method other than `selector`'s config,
    naming the fields that differ and the config to pass: `config` (the callback's) with the saved values of the
    fields where they differ.
    """
    if "config" not in state or not isinstance(selector, KGPSSelector):
        return
    try:
        saved = _method(type(selector).init_arguments(state)["config"])
    except (KeyError, ValueError, TypeError) as error:
        raise _does_not_fit(path, error) from None
    current = _method(selector.config)
    differ = sorted(name for name in current if saved.get(name) != current[name])
    if differ:
        changes = ", ".join(f"{name}={saved.get(name)!r} (this run: {current[name]!r})" for name in differ)
        hint = older_states.config_hint(state)
        if hint is None:
            passed = _read_as(config, type(selector.config))
            settings = _hint(passed, saved, current)
            # The config class the resuming selector reads: a variant of KGPS is built for a config of that class.
            kind = type(selector.config).__name__
            settings = f"{kind}({', '.join(f'{name}={value!r}' for name, value in settings.items())})"
            hint = f"pass KGPSCallback({settings}), the config it was saved with"
        raise ValueError(f"{path} was saved with {changes}, and resuming with another method would mix two: {hint}.")
