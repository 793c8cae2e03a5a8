"""
What a training run saved, loaded back: the selector, and the per-prompt difficulty table.

`trainer.save_model(output_dir)` — which `trainer.push_to_hub()` calls — writes `kgps_state.npz` beside the model,
and every `checkpoint-N` folder holds one too. Each function here reads it from a local directory (or the file's own
path), or else fetches it from the Hub repo of that id (`huggingface_hub` is imported only then).
"""

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .adapters.report import difficulty_dataset
from .engine import older_states
from .engine import state_file as _state_file
from .engine.protocol import PromptSelector
from .selectors import SELECTORS, class_named
from .selectors.registry import unregistered_module


if TYPE_CHECKING:
    from datasets import Dataset


def load_selector(
    path_or_repo_id: str | os.PathLike[str],
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    token: str | bool | None = None,
    selector_class: type | None = None,
) -> PromptSelector:
    """
    The selector a training run saved — a `KGPSSelector` or a baseline, whichever the state holds — restored bit for
    bit. `KGPSSelector.from_pretrained(...)` is this with `selector_class=KGPSSelector`.

    Args:
        path_or_repo_id (`str` or `os.PathLike`): a local directory holding `kgps_state.npz` (a trainer's
            `output_dir` after `save_model()`, or a `checkpoint-N` folder), that `kgps_state.npz` itself, or a Hub
            repo id. A `str` that could be a repo id and names no local path is fetched from the Hub.
        revision (`str`, *optional*): branch, tag or commit of the Hub repo; ignored for a local directory.
        cache_dir (`str` or `os.PathLike`, *optional*): the Hub cache to download into.
        token (`str` or `bool`, *optional*): the Hub token, for private repos.
        selector_class (`type`, *optional*): the class the state must hold; any of trl-kgps's selectors by default.

    Raises:
        `FileNotFoundError`: the local directory holds no `kgps_state.npz`, or a local path (one that cannot be a
            repo id) does not exist.
        `ValueError`: a local file other than `kgps_state.npz`; the state holds another class than `selector_class`,
            or is not a readable KGPS state.
        `OSError`: not a local directory, and the Hub repo could not be reached or holds no `kgps_state.npz`.
    """
    arrays, meta = _state_file.read(path_or_repo_id, revision, cache_dir, token)
    return _restore(path_or_repo_id, arrays, meta, selector_class)


def difficulty_table(
    path_or_repo_id: str | os.PathLike[str],
    prompts: Sequence[Any] | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    token: str | bool | None = None,
) -> "Dataset":
    """
    The per-prompt difficulty table of a saved run, as a `datasets.Dataset` with one row per prompt: `index` (its
    row; where rows repeat prompts, its first, and `rows`, how many hold it), `prompt` (only when `prompts` is given),
    `predicted_success`, `variance` (the logit variance; NaN for the baselines) and `times_selected` (generation
    batches the prompt was chosen for, warmup included); for a run that
    shared by categorical `feature_columns`, also `group`, `group_predicted_success` and `own_logit`. A live run's
    is `KGPSCallback.difficulty_table()`.

    Args:
        path_or_repo_id (`str` or `os.PathLike`): as for `load_selector`.
        prompts (`Sequence`, *optional*): the train dataset's prompts in its order, e.g. `train_dataset["prompt"]`,
            or, where rows repeat prompts, its distinct prompts in order of first appearance; conversational prompts
            become the text of their last user message.
        revision (`str`, *optional*): as for `load_selector`.
        cache_dir (`str` or `os.PathLike`, *optional*): as for `load_selector`.
        token (`str` or `bool`, *optional*): as for `load_selector`.

    Example:

    ```python
    table = difficulty_table("username/my-grpo-model", prompts=train_dataset["prompt"])
    table.sort("predicted_success").select(range(10))  # the ten hardest prompts
    ```
    """
    arrays, meta = _state_file.read(path_or_repo_id, revision, cache_dir, token)
    selector = _restore(path_or_repo_id, arrays, meta)
    times_selected = arrays.get("times_selected")
    if times_selected is None or times_selected.shape != (selector.num_prompts,):
        raise ValueError(
            f"The KGPS state of {os.fspath(path_or_repo_id)!r} holds no per-prompt selection count of "
            f"{selector.num_prompts} prompts: it is not a whole state. Load its selector with `load_selector`, which "
            "needs no count."
        )
    return difficulty_dataset(selector, times_selected, prompts, _state_file.saved_copies(arrays, meta))


def _restore(
    path_or_repo_id: str | os.PathLike[str],
    arrays: dict[str, np.ndarray],
    meta: dict[str, Any],
    expected: type | None = None,
) -> PromptSelector:
    """The selector a state file's `arrays` and `meta` describe, built and loaded; or a `ValueError` naming the fix."""
    location = os.fspath(path_or_repo_id)
    if expected is None:
        name = older_states.selector_class(meta)
        try:
            expected = class_named(name)
        except KeyError:
            module = unregistered_module(name)
            if module is not None:
                raise ValueError(
                    f"The KGPS state of {location!r} holds {_state_file.held(meta)}, a selector that registers when "
                    f"its module is imported: `import {module}` first."
                ) from None
            raise ValueError(
                f"The KGPS state of {location!r} holds {_state_file.held(meta)}, which is not one of trl-kgps's "
                f"selectors {sorted(known.__name__ for known in SELECTORS.values())}: build that selector yourself "
                "and pass it the state with `load_state_dict`."
            ) from None
    return expected.from_state_file(location, arrays, meta)
