"""Validation of what callers hand to a selector: every check runs before any state changes."""

import math
import numbers
import operator

import numpy as np


def as_num_prompts(num_prompts) -> int:
    """`num_prompts` as a positive int: the size of a selector's prompt pool."""
    if isinstance(num_prompts, bool) or not isinstance(num_prompts, (int, np.integer)) or num_prompts <= 0:
        raise ValueError(
            f"num_prompts must be a positive integer (the size of the prompt pool), got {num_prompts!r}. Pass "
            "`len(train_dataset)`."
        )
    return int(num_prompts)


def as_index_array(name: str, values, num_prompts: int) -> np.ndarray:
    """`values` as a 1-D int64 array of prompt indices in `[0, num_prompts)`."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of prompt indices, got an array of shape {array.shape}.")
    if array.size == 0:
        return np.empty(0, dtype=np.int64)
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            f"{name} must hold integer prompt indices, got dtype {array.dtype} (first value {array[0]!r}). Pass the "
            "dataset indices themselves, e.g. `np.asarray(indices, dtype=np.int64)`."
        )
    array = array.astype(np.int64, copy=False)
    bad = (array < 0) | (array >= num_prompts)
    if bad.any():
        raise ValueError(
            f"{name} must lie in [0, {num_prompts}) (the number of prompts), got {array[bad][0]} at position "
            f"{int(np.flatnonzero(bad)[0])}. Pass indices into the dataset this selector was built for."
        )
    return array


def as_count_array(name: str, values, length: int) -> np.ndarray:
    """`values` as a 1-D float64 array of `length` whole, non-negative counts."""
    array = np.asarray(values)
    if array.ndim != 1 or array.shape[0] != length:
        raise ValueError(
            f"{name} must be a 1-D sequence with one count per index ({length}), got shape {array.shape}. Pass "
            "indices, successes and trials of equal length."
        )
    if length and array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold numbers, got dtype {array.dtype}.")
    array = array.astype(np.float64, copy=False)
    bad = ~np.isfinite(array) | (array < 0) | (array != np.round(array))
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must be whole, non-negative, finite counts of rollouts, got {float(array[position])!r} at "
            f"position {position}. Count a rollout whose reward is missing (None/NaN) in neither successes nor trials."
        )
    return array


def as_observations(indices, successes, trials, num_prompts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Checks one batch of observations and pools repeated indices into one observation of their summed counts.

    Returns:
        `(indices, successes, trials)`: distinct ascending int64 indices with `trials > 0`, and float64 counts.
    """
    indices = as_index_array("indices", indices, num_prompts)
    successes = as_count_array("successes", successes, indices.size)
    trials = as_count_array("trials", trials, indices.size)
    bad = successes > trials
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"successes ({successes[position]:g}) exceed trials ({trials[position]:g}) for prompt "
            f"{indices[position]} at position {position}. Each success is one of that prompt's scored rollouts."
        )
    if indices.size == 0:
        return indices, successes, trials
    order = np.argsort(indices, kind="stable")
    indices = indices[order]
    # e.g. sorted indices [2, 5, 5, 9] -> group starts [0, 1, 3] -> pooled indices [2, 5, 9]
    starts = np.flatnonzero(np.concatenate([[True], indices[1:] != indices[:-1]]))
    indices = indices[starts]
    successes = np.add.reduceat(successes[order], starts)
    trials = np.add.reduceat(trials[order], starts)
    observed = trials > 0
    return indices[observed], successes[observed], trials[observed]


def as_batch_size(batch_size, available: int) -> int:
    """`batch_size` as a positive int no larger than the `available` prompts."""
    if isinstance(batch_size, bool):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    try:
        batch_size = operator.index(batch_size)
    except TypeError:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.") from None
    if batch_size <= 0 or batch_size > available:
        raise ValueError(
            f"batch_size must lie in [1, {available}] (the prompts that can be selected: all prompts minus the "
            f"excluded ones), got {batch_size}. Ask for fewer prompts or exclude fewer."
        )
    return batch_size


def as_delta_norms(delta_norm) -> np.ndarray:
    """One parameter-update norm, or one per optimizer step, as a 1-D float64 array of finite values >= 0."""
    try:
        given = np.asarray(delta_norm)
        # numpy would read "0.5" as 0.5, True as 1.0 and None as NaN: only numbers are norms
        if given.dtype.kind not in "iuf" and not (given.dtype.kind == "O" and all(map(_is_real, given.flat))):
            raise TypeError(f"dtype {given.dtype}")
        norms = np.atleast_1d(given.astype(np.float64))
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(
            f"delta_norm must be a number or a 1-D sequence of numbers, got {delta_norm!r} ({error}). Pass the update "
            "norm as a float, e.g. `float(norm)` (also for a tensor on an accelerator)."
        ) from None
    if norms.ndim != 1:
        raise ValueError(f"delta_norm must be a number or a 1-D sequence of numbers, got shape {norms.shape}.")
    bad = ~np.isfinite(norms) | (norms < 0)
    if bad.any():
        raise ValueError(
            f"delta_norm must be finite and >= 0 (an L2 norm of the parameter update), got {float(norms[bad][0])!r}. "
            "A NaN or infinite norm means the optimizer step itself diverged: skip the step rather than feed it here."
        )
    return norms


def _is_real(value) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_finite_state(name: str, array: np.ndarray, num_prompts: int) -> np.ndarray:
    """A saved per-prompt array: shape `(num_prompts,)`, finite, as float32."""
    array = np.asarray(array)
    if array.shape != (num_prompts,):
        raise ValueError(
            f"state_dict[{name!r}] has shape {array.shape}, but this selector has {num_prompts} prompts. Load a "
            "state saved for the same dataset, or build the selector with the saved number of prompts."
        )
    if array.dtype.kind != "f" or not np.isfinite(array).all():
        raise ValueError(f"state_dict[{name!r}] must hold finite floats; this state is corrupted.")
    return array.astype(np.float32)


def check_scalar(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"state_dict[{name!r}] must be a number, got {value!r}; this state is corrupted.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"state_dict[{name!r}] must be finite, got {value!r}; this state is corrupted.")
    return value
