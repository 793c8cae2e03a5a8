"""Prompt selectors: KGPS and, behind the same interface, the paper's baselines."""

from .baselines import GRESOSelector, MoPPSSelector, UniformSelector
from .kgps import KGPSSelector


# Selectors by name, each built from (number of prompts, KGPSConfig, seed); the config only matters to KGPS.
SELECTORS = {
    "kgps": lambda n, config, seed: KGPSSelector(n, config, seed=seed),
    "uniform": lambda n, config, seed: UniformSelector(n, seed=seed),
    "mopps": lambda n, config, seed: MoPPSSelector(n, seed=seed),
    "greso": lambda n, config, seed: GRESOSelector(n, seed=seed),
}

__all__ = ["GRESOSelector", "KGPSSelector", "MoPPSSelector", "SELECTORS", "UniformSelector"]
