"""trl-kgps: Kalman-Guided Prompt Selection for RL fine-tuning with Hugging Face TRL."""

from .config import KGPSConfig
from .selectors import KGPSSelector


__version__ = "0.1.0.dev0"

__all__ = ["KGPSConfig", "KGPSSelector", "__version__"]
