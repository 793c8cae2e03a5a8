"""How a saved selector is rebuilt: from its `state_dict()`, or from the `kgps_state.npz` a training run wrote."""

import os
from typing import Any, TypeVar

import numpy as np

from ..engine import state_file as _state_file


_SelectorT = TypeVar("_SelectorT", bound="FromPretrainedMixin")


class FromPretrainedMixin:
    """
    How a selector is rebuilt from what it saved: `from_state_dict(state)` builds the selector a `state_dict()` was
    taken from (its number of prompts, hyperparameters and seed) and loads it; `from_pretrained(path_or_repo_id)`
    does so from the `kgps_state.npz` a training run wrote. Each class says how it is built in
    `init_arguments(state)`.
    """

    @classmethod
    def init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        """The constructor's keyword arguments that built the selector whose `state_dict()` is `state`."""
        raise NotImplementedError

    @classmethod
    def from_state_dict(cls: type[_SelectorT], state: dict[str, Any]) -> _SelectorT:
        """A new selector, built as the one that returned `state` from `state_dict()` was, holding that state."""
        try:
            selector = cls(**cls.init_arguments(state))
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"state does not say how to build a {cls.__name__} ({type(error).__name__}: {error}): pass a dict "
                f"returned by {cls.__name__}.state_dict()."
            ) from None
        selector.load_state_dict(state)
        return selector

    @classmethod
    def from_pretrained(
        cls: type[_SelectorT],
        path_or_repo_id: str | os.PathLike[str],
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        token: str | bool | None = None,
    ) -> _SelectorT:
        """
        The selector a training run saved, restored bit for bit (beliefs, generator, hyperparameters).

        Args:
            path_or_repo_id (`str` or `os.PathLike`): a local directory holding `kgps_state.npz` — a trainer's
                `output_dir` after `save_model()`/`push_to_hub()`, or one of its `checkpoint-N` folders — or the id
                of a Hub repo it was pushed to, e.g. `"username/my-grpo-model"`.
            revision (`str`, *optional*): branch, tag or commit of the Hub repo; ignored for a local directory.
            cache_dir (`str` or `os.PathLike`, *optional*): the Hub cache to download into.
            token (`str` or `bool`, *optional*): the Hub token, for private repos.

        Raises:
            `FileNotFoundError`: the local directory holds no `kgps_state.npz`.
            `ValueError`: the file holds another selector class (the message names the one to load it with), or is
                not a readable KGPS state.
            `OSError`: not a local directory, and the Hub repo could not be reached or holds no `kgps_state.npz`.
        """
        location = os.fspath(path_or_repo_id)
        return cls.from_state_file(location, *_state_file.read(location, revision, cache_dir, token))

    @classmethod
    def from_state_file(
        cls: type[_SelectorT], location: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]
    ) -> _SelectorT:
        """The selector a state file read from `location` holds, if it is a `cls`; else a `ValueError` naming the
        fix."""
        state = _state_file.selector_state(location, arrays, meta, cls)
        try:
            return cls.from_state_dict(state)
        except (KeyError, ValueError) as error:
            raise ValueError(
                f"The KGPS state of {location!r} is not a readable {cls.__name__} state: {error}"
            ) from None
