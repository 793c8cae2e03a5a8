"""The interface the selection engine drives: what every prompt selector offers."""

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class PromptSelector(Protocol):
    """
    The interface `KGPSCallback(selector=...)` accepts: a prompt selector over `num_prompts` prompts, numbered
    `0 .. num_prompts - 1` (the train dataset's rows). `KGPSSelector` and the baselines in `trl_kgps.selectors`
    implement it; a selector of one's own needs these members and nothing else (`isinstance(obj, PromptSelector)`
    checks their names):

    - `select(batch_size, exclude=None)`: `batch_size` distinct prompt indices for the next generation batch, an int
      array of shape `(batch_size,)`, none of them in `exclude` (the indices chosen and not yet scored);
    - `initialize(indices, successes, trials)`: a prompt's warmup observations; `update(indices, successes, trials)`:
      the later ones. Each argument has shape `(n,)`: the prompts scored, their successful completions and their
      completions;
    - `predict(delta_norm)`: the policy moved by this parameter-update norm (the L2 norm over every trainable
      parameter, a float >= 0), called once per optimizer step;
    - `predicted_success(indices=None)`: each prompt's predicted success rate in `[0, 1]`, before its rollouts,
      shape `(num_prompts,)` or `(len(indices),)`;
    - `state_dict()` / `load_state_dict(state)`: everything needed to continue bit for bit, as numpy arrays and
      Python scalars (saved in `kgps_state.npz` with every checkpoint).
    """

    num_prompts: int

    def select(self, batch_size: int, exclude: Any = None) -> np.ndarray: ...

    def initialize(self, indices: Any, successes: Any, trials: Any) -> None: ...

    def update(self, indices: Any, successes: Any, trials: Any) -> None: ...

    def predict(self, delta_norm: Any) -> None: ...

    def predicted_success(self, indices: Any = None) -> np.ndarray: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
