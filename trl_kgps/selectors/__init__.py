"""Prompt selectors: KGPS and, behind the same interface, the paper's baselines."""

from .baselines import GRESOSelector, MoPPSSelector, UniformSelector
from .kgps import KGPSSelector


__all__ = ["GRESOSelector", "KGPSSelector", "MoPPSSelector", "UniformSelector"]
