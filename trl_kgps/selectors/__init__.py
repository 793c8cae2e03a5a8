"""Prompt selectors: KGPS and, behind the same interface, the paper's baselines; `SELECTORS` names them all."""

from .arcus import ArcusSelector
from .baselines import GRESOSelector, MoPPSSelector, UniformSelector
from .dps import DPSSelector
from .kgps import KGPSSelector
from .practice import GaussianCurriculumSelector, InSightSelector, OfflineFilterSelector
from .registry import SELECTORS, build_selector, class_named


__all__ = [
    "ArcusSelector",
    "DPSSelector",
    "GRESOSelector",
    "GaussianCurriculumSelector",
    "InSightSelector",
    "KGPSSelector",
    "MoPPSSelector",
    "OfflineFilterSelector",
    "SELECTORS",
    "UniformSelector",
    "build_selector",
    "class_named",
]
