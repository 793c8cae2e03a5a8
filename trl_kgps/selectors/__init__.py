"""Prompt selectors: KGPS and, behind the same interface, the paper's baselines."""

from .kgps import KGPSSelector


__all__ = ["KGPSSelector"]
