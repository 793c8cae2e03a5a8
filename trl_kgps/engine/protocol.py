"""The interface the selection engine drives: what every prompt selector offers."""

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class PromptSelector(Protocol):
    """
    A prompt selector over `num_prompts` prompts, numbered `0 .. num_prompts - 1`.

    - `select(batch_size, exclude=None)`: distinct prompts for the next generation batch;
    - `initialize(indices, successes, trials)` / `update(...)`: a prompt's first (warmup) and later observations;
    - `predict(delta_norm)`: the policy moved by this parameter-update norm;
    - `predicted_success(indices=None)`: the predicted success rate, before rollouts;
    - `state_dict()` / `load_state_dict(state)`: everything needed to continue bit for bit.
    """

    num_prompts: int

    def select(self, batch_size: int, exclude: Any = None) -> np.ndarray: ...

    def initialize(self, indices: Any, successes: Any, trials: Any) -> None: ...

    def update(self, indices: Any, successes: Any, trials: Any) -> None: ...

    def predict(self, delta_norm: Any) -> None: ...

    def predicted_success(self, indices: Any = None) -> np.ndarray: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
