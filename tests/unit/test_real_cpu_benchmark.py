"""The CPU benchmark's own arithmetic: the headline metric's interpolation and the oracle's two rules."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench():
    path = Path(__file__).parents[2] / "benchmarks" / "real_cpu.py"
    spec = importlib.util.spec_from_file_location("real_cpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rollouts_to_reach_interpolates_the_first_crossing(bench):
    rollouts, accuracy = [0, 100, 200, 300], [0.3, 0.5, 0.4, 0.7]
    assert bench.rollouts_to_reach(rollouts, accuracy, 0.45) == pytest.approx(75.0)  # 0 + (0.15 / 0.2) * 100
    assert bench.rollouts_to_reach(rollouts, accuracy, 0.6) == pytest.approx(200 + (0.2 / 0.3) * 100)
    assert bench.rollouts_to_reach(rollouts, accuracy, 0.2) == 0.0
    assert bench.rollouts_to_reach(rollouts, accuracy, 0.9) == float("inf")


def test_paired_compares_runs_of_the_same_seed(bench):
    def run(final, curve_rollouts=(0, 50, 100)):
        return {
            "heldout_accuracy": [0.2, (0.2 + final) / 2, final],
            "rollouts": list(curve_rollouts),
            "steps": [0, 50, 100],
        }

    results = {"runs": {"uniform": {"0": run(0.5), "1": run(0.6)}, "oracle": {"0": run(0.6), "1": run(0.6)}}}
    pairs = bench.paired(results)
    np.testing.assert_allclose(pairs["oracle"]["difference"], [0.1, 0.0])
    # seed 0: 0.5 is reached between 50 (0.4) and 100 (0.6), halfway; seed 1: exactly at the end
    np.testing.assert_allclose(pairs["oracle"]["rollouts_to_baseline_final"], [0.75, 1.0])


def test_paired_reads_the_early_difference_a_quarter_into_the_run(bench):
    def run(accuracy):
        return {"heldout_accuracy": accuracy, "rollouts": [0, 10, 20, 30, 40], "steps": [0, 25, 50, 75, 100]}

    results = {
        "runs": {"uniform": {"0": run([0.2, 0.3, 0.4, 0.5, 0.6])}, "kgps": {"0": run([0.2, 0.36, 0.4, 0.5, 0.6])}}
    }
    pairs = bench.paired(results)
    assert pairs["kgps"]["early_step"] == 25
    np.testing.assert_allclose(pairs["kgps"]["early_difference"], [0.06])
    np.testing.assert_allclose(pairs["kgps"]["difference"], [0.0])


def _oracle(bench, p, rule, seed=0):
    return bench.Oracle(len(p), lambda: np.asarray(p, float), group_size=8, refresh=1, seed=seed, rule=rule)


def test_greedy_oracle_takes_the_prompts_most_likely_to_give_a_mixed_group(bench):
    p = np.array([0.99, 0.5, 0.0, 0.3, 0.7, 0.95])
    oracle = _oracle(bench, p, "greedy")
    assert sorted(oracle.select(3).tolist()) == [1, 3, 4]
    assert sorted(oracle.select(3, exclude=[1]).tolist()) == [3, 4, 5]


def test_proportional_oracle_draws_in_proportion_to_the_mixed_group_probability(bench):
    p = np.array([0.5, 0.9, 0.97, 0.0, 1.0])
    mixed = 1 - p**8 - (1 - p) ** 8
    oracle = _oracle(bench, p, "proportional")
    draws = np.array([oracle.select(1)[0] for _ in range(20_000)])
    frequency = np.bincount(draws, minlength=5) / draws.size
    np.testing.assert_allclose(frequency, mixed / mixed.sum(), atol=0.015)  # > 4 binomial standard deviations
    assert set(oracle.select(2, exclude=[0]).tolist()) == {1, 2}  # never a prompt whose group cannot be mixed
