"""
The real CPU testbed's snapshots in the real `GRPOTrainer` (`benchmarks/realcpu/runner.py`): each records the
selector's belief as intervals (or none, for a selector without a posterior) and the draws so far, and a run's
curves carry its calibration as a few numbers per snapshot, JSON-ready.
"""

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest


sys.path.insert(0, str(Path(__file__).parents[2]))

from benchmarks.realcpu import calibration, report, runner, setting  # noqa: E402


@pytest.mark.parametrize("method, posterior", [("arcus", True), ("uniform", False)])
def test_snapshots_record_the_beliefs_intervals_and_the_draws_and_curves_summarise_them(method, posterior):
    regime = dataclasses.replace(setting.REGIMES["base"], steps=8, snapshot_every=4)
    outcome = runner.run(setting.build(regime), method, seed=0)
    records = outcome["records"]
    assert [r["step"] for r in records] == [0, 4, 8]
    N = len(outcome["levels"])
    for r in records:
        assert r["selected"].shape == (N,)
        if not posterior:
            assert r["intervals"] is None
            continue
        for level in calibration.LEVELS:
            lower, upper = r["intervals"][level]
            assert lower.shape == upper.shape == (N,) and (lower <= upper).all()
        # the 50 % interval lies inside the 90 % one
        assert (r["intervals"][0.9][0] <= r["intervals"][0.5][0]).all()
    # every batch chosen so far, B prompts each (the last one chosen ahead of training)
    assert records[-1]["selected"].sum() % regime.prompts_per_step == 0
    assert records[-1]["selected"].sum() >= regime.steps * regime.prompts_per_step
    curves = report.curves(outcome)
    json.dumps(curves)
    assert all(len(values) == len(records) for values in curves["calibration"].values())
    assert (curves["summary"]["coverage_90"] is not None) == posterior
    assert 0 <= curves["summary"]["ece"] <= 1 and np.isfinite(curves["summary"]["ece_drawn"])
