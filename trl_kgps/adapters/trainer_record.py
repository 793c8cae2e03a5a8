"""
What a KGPS state records of the trainer that wrote it, and what a resume checks against it: which loop wrote it (the
synchronous trainers' sampler or `AsyncGRPOTrainer`'s worker), the trainer's `global_step`, and the arguments that
map its steps to generation batches. `engine.state_file` stores the record as it is given; this module reads it.
"""

from typing import Any

import numpy as np

from ..engine import older_states
from ..engine.state_file import STATE_FILE


# The record's key that says which loop wrote the state: 1 for `AsyncGRPOTrainer`'s, 0 for the others'.
ASYNCHRONOUS = "asynchronous"
TRAINERS = {False: "GRPOTrainer (or RLOOTrainer)", True: "AsyncGRPOTrainer"}


class OtherTrainerState(ValueError):
    """
    A state saved by the other loop, at another step of training than the checkpoint resumed, or with other arguments
    mapping the trainer's steps to generation batches: its message says what to resume with.
    """


def saved(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, int]:
    """The record a state file's `arrays` and `meta` hold, its loop inferred for a state that does not name it."""
    return {ASYNCHRONOUS: int(older_states.saved_asynchronously(arrays)), **(meta.get("trainer") or {})}


def check_same_loop(path: str, saved: dict[str, int], current: dict[str, int]) -> None:
    """Raises `OtherTrainerState` if the state at `path` was saved by the other kind of trainer than `current`'s."""
    if ASYNCHRONOUS not in current or saved[ASYNCHRONOUS] == current[ASYNCHRONOUS]:
        return
    source, this = (TRAINERS[bool(record[ASYNCHRONOUS])] for record in (saved, current))
    raise OtherTrainerState(
        f"{path} was saved by {source}, and this run is {this}: KGPS's state does not pass from one to the other (the "
        "synchronous trainers' sampler keeps the epoch's batches, the asynchronous worker's the groups in flight). "
        f"Resume it with {source}; to go on with {this}, move {STATE_FILE} out of the checkpoint and pass "
        "KGPSConfig(restart_on_missing_state=True), which starts KGPS afresh from it."
    )


def check_same_steps(path: str, saved: dict[str, int], current: dict[str, int]) -> None:
    """Raises `OtherTrainerState` unless the records `saved` (in the file at `path`) and `current` agree on the step
    and on the arguments that map steps to generation batches."""
    if "global_step" in saved and "global_step" in current and saved["global_step"] != current["global_step"]:
        raise OtherTrainerState(
            f"{path} holds KGPS's state at step {saved['global_step']} of training, and this checkpoint resumes the "
            f"trainer at step {current['global_step']} (its trainer_state.json): the file was written at another step "
            f"(copied from another checkpoint?), and its beliefs and batches belong to step {saved['global_step']}. "
            f"Resume from the checkpoint of step {saved['global_step']}, or put back the {STATE_FILE} saved with this "
            "one."
        )
    mapping = [name for name in current if name not in ("global_step", ASYNCHRONOUS)]
    differ = [name for name in mapping if name in saved and saved[name] != current[name]]
    if differ:
        changes = ", ".join(f"{name}={saved[name]} (this run: {current[name]})" for name in differ)
        fix = ", ".join(f"{name}={saved[name]}" for name in differ)
        raise OtherTrainerState(
            f"{path} was saved by a run with {changes}: the trainer maps its steps to generation batches by "
            f"{', '.join(mapping)}, so with other values it would resume on "
            f"other batches than those KGPS chose and observed. Resume with {fix}; to change "
            f"{'it' if len(differ) == 1 else 'them'}, move {STATE_FILE} out of the checkpoint and pass "
            "KGPSConfig(restart_on_missing_state=True), which starts KGPS afresh from it."
        )
