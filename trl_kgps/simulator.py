"""The synthetic-task simulator (`trl-kgps simulate`); it lives in `trl_kgps.demo.simulator`."""

from .demo.simulator import LEVEL, METHODS, SCENARIOS, oracle_batch, simulate, summarize


__all__ = ["LEVEL", "METHODS", "SCENARIOS", "oracle_batch", "simulate", "summarize"]
