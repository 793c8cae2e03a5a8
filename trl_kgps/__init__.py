"""trl-kgps: Kalman-Guided Prompt Selection for RL fine-tuning with Hugging Face TRL."""

# Before the imports: every state the library saves records the release that wrote it (`engine.state_file`).
__version__ = "0.3.0"

from typing import TYPE_CHECKING

from .config import KGPSConfig
from .engine.protocol import PromptSelector
from .hub import difficulty_table, load_selector
from .selectors import KGPSSelector
from .selectors.registry import register_selector


if TYPE_CHECKING:
    from .callback import KGPSCallback
    from .plots import plot_rollouts
    from .sampler import KGPSRepeatSampler
    from .script_args import KGPSScriptArguments

__all__ = [
    "KGPSCallback",
    "KGPSConfig",
    "KGPSRepeatSampler",
    "KGPSScriptArguments",
    "KGPSSelector",
    "PromptSelector",
    "__version__",
    "difficulty_table",
    "load_selector",
    "plot_rollouts",
    "register_selector",
]

# The estimator is numpy only; the TRL integration imports torch and transformers on first use, the plots matplotlib.
_LAZY = {
    "KGPSCallback": ".callback",
    "KGPSRepeatSampler": ".sampler",
    "KGPSScriptArguments": ".script_args",
    "plot_rollouts": ".plots",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
