"""
The testbed's calibration measures (benchmarks/realcpu/calibration.py) against independent oracles: the ECE by hand,
the intervals against scipy's normal, Beta and truncated normal, each selector's intervals against truths drawn from
its own belief (a calibrated belief covers them at its nominal level), and the per-snapshot bookkeeping by hand.
"""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats


sys.path.insert(0, str(Path(__file__).parents[2]))

from benchmarks.realcpu import calibration, methods, report  # noqa: E402
from trl_kgps import KGPSConfig, KGPSSelector  # noqa: E402
from trl_kgps.selectors import ArcusSelector, DPSSelector, GRESOSelector, MoPPSSelector, UniformSelector  # noqa: E402


def test_the_ece_by_hand():
    predicted = np.array([0.05, 0.15, 0.12, 0.95, 0.55, 1.0])
    true = np.array([0.0, 0.3, 0.1, 0.9, 0.35, 0.8])
    # bins [0, .1): +.05;  [.1, .2): -.15 + .02;  [.5, .6): +.2;  [.9, 1]: +.05 + .2 -> (.05 + .13 + .2 + .25) / 6
    assert calibration.expected_calibration_error(predicted, true) == pytest.approx(0.63 / 6)
    # weighted by draws 2, 0, 1, 1, 0, 0: (2 * .05 + .02 + .05) / 4
    weights = np.array([2, 0, 1, 1, 0, 0])
    assert calibration.expected_calibration_error(predicted, true, weights) == pytest.approx(0.17 / 4)
    assert calibration.expected_calibration_error(true, true) == 0.0


def test_coverage_counts_the_truths_inside_their_intervals_with_their_weights():
    lower, upper = np.array([-1.0, 0.0, -np.inf, 2.0]), np.array([1.0, 0.5, 0.0, 3.0])
    truth = np.array([1.0, 0.7, -50.0, -np.inf])
    assert calibration.coverage(lower, upper, truth) == 0.5
    assert calibration.coverage(lower, upper, truth, weights=[3, 1, 0, 0]) == 0.75


@pytest.mark.parametrize("level", calibration.LEVELS)
def test_gaussian_intervals_are_scipys_and_cover_draws_from_the_belief_at_their_level(level):
    rng = np.random.default_rng(0)
    mean, variance = rng.normal(0, 2, 20_000), np.exp(rng.uniform(-4, 2, 20_000))
    lower, upper = calibration.gaussian_interval(mean, variance, level)
    expected_lower, expected_upper = stats.norm.interval(level, mean, np.sqrt(variance))
    np.testing.assert_allclose(lower, expected_lower, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(upper, expected_upper, rtol=1e-12, atol=1e-12)
    truth = stats.norm.rvs(mean, np.sqrt(variance), random_state=rng)
    # 4 standard errors of a share of 20,000
    assert calibration.coverage(lower, upper, truth) == pytest.approx(level, abs=4 * math.sqrt(0.25 / 20_000))


def test_beta_quantiles_and_distribution_are_scipys():
    rng = np.random.default_rng(1)
    a, b = np.exp(rng.uniform(math.log(0.3), math.log(3000), (2, 500)))
    u = np.array([0.005, 0.05, 0.25, 0.5, 0.75, 0.95, 0.995])[:, None]
    quantiles = calibration.beta_quantile(a, b, u)
    np.testing.assert_allclose(special.expit(quantiles), stats.beta.ppf(u, a, b), rtol=1e-8, atol=1e-300)
    np.testing.assert_allclose(quantiles, special.logit(stats.beta.ppf(u, a, b)), atol=1e-7)
    x = rng.uniform(0, 1, 500)
    np.testing.assert_allclose(calibration.beta_cdf(x, a, b), special.betainc(a, b, x), atol=1e-12)


def test_restricted_gaussian_quantiles_are_scipys_truncated_normal():
    rng = np.random.default_rng(2)
    mean, variance = rng.uniform(0, math.pi / 2, 300), np.exp(rng.uniform(math.log(1e-4), 0.0, 300))
    u = np.array([0.05, 0.25, 0.75, 0.95])[:, None]
    sd = np.sqrt(variance)
    expected = stats.truncnorm.ppf(u, -mean / sd, (math.pi / 2 - mean) / sd, loc=mean, scale=sd)
    quantiles = calibration.restricted_gaussian_quantile(mean, variance, 0.0, math.pi / 2, u)
    np.testing.assert_allclose(quantiles, expected, rtol=1e-9, atol=1e-12)


def beliefs_covered(selector, truth):
    """The share of `truth` (success rates, `(N,)`) inside `selector`'s intervals at each level."""
    intervals = calibration.belief_intervals(selector)
    return {level: calibration.coverage(*intervals[level], calibration.logit(truth)) for level in calibration.LEVELS}


def test_each_selectors_intervals_cover_truths_drawn_from_its_own_belief_at_their_level():
    rng = np.random.default_rng(3)
    n = 20_000
    observations = rng.integers(0, 9, n), np.full(n, 8)
    kgps = KGPSSelector(n, KGPSConfig.paper())
    arcus, mopps = ArcusSelector(n), MoPPSSelector(n)
    for selector in (kgps, arcus, mopps):
        selector.update(np.arange(n), *observations)
    draws = {
        kgps: special.expit(rng.normal(kgps.mean, np.sqrt(kgps.variance))),
        mopps: rng.beta(mopps.alpha, mopps.beta),
        arcus: np.sin(
            stats.truncnorm.rvs(
                -arcus.mean / np.sqrt(arcus.variance),
                (math.pi / 2 - arcus.mean) / np.sqrt(arcus.variance),
                loc=arcus.mean,
                scale=np.sqrt(arcus.variance),
                random_state=rng,
            )
        )
        ** 2,
    }
    for selector, truth in draws.items():
        for level, covered in beliefs_covered(selector, truth).items():
            assert covered == pytest.approx(level, abs=4 * math.sqrt(0.25 / n)), (type(selector).__name__, level)


def test_selectors_without_a_posterior_over_the_rate_have_no_interval_and_a_chosen_ahead_one_has_its_own():
    for selector in (UniformSelector(10), GRESOSelector(10), DPSSelector(10)):
        assert calibration.belief_intervals(selector) is None
    kgps = KGPSSelector(10)
    ahead = calibration.belief_intervals(methods.ChosenAhead(kgps, 4))
    for level, (lower, upper) in calibration.belief_intervals(kgps).items():
        np.testing.assert_array_equal(ahead[level][0], lower)
        np.testing.assert_array_equal(ahead[level][1], upper)


def test_the_boundary_is_where_a_group_is_more_likely_unanimous_than_mixed():
    # G = 8: p^8 + (1 - p)^8 = 1/2 at p = 0.0830 (and 0.9170)
    np.testing.assert_array_equal(
        calibration.boundary([0.0, 0.08, 0.086, 0.5, 0.914, 0.92, 1.0], 8),
        [True, True, False, False, False, True, True],
    )


def record(predicted, intervals, selected, true=(0.5, 0.02, 0.9, 0.3)):
    return dict(
        true=np.asarray(true),
        predicted=None if predicted is None else np.asarray(predicted),
        intervals=intervals,
        selected=None if selected is None else np.asarray(selected),
    )


def test_each_snapshot_is_measured_over_every_prompt_the_prompts_drawn_next_and_the_boundary():
    wide = {level: (np.full(4, -10.0), np.full(4, 10.0)) for level in calibration.LEVELS}
    # the 50 % interval holds prompts 0 and 3 only; the 90 % one all but prompt 1 (logit(0.02) = -3.9)
    narrow = {0.5: (np.array([-1.0, -1, 5, -1]), np.array([1.0, 1, 6, 1])), 0.9: (np.full(4, -3.0), np.full(4, 3.0))}
    records = [
        record(None, None, None),  # before the selector predicts (a warmup), no ledger yet
        record([0.5, 0.5, 0.5, 0.5], wide, [1, 1, 0, 0]),
        record([0.45, 0.05, 0.8, 0.3], narrow, [3, 1, 0, 2]),
        record([0.5, 0.02, 0.9, 0.3], None, [3, 2, 0, 2]),
    ]
    measured = calibration.snapshot_calibration(records, group_size=8)
    assert measured["boundary_share"] == [0.25] * 4  # prompt 1 (p = 0.02)
    # snapshot 1, one bin: |4 * 0.5 - 1.72| / 4; snapshot 2, one prompt a bin: (.05 + .03 + .1 + 0) / 4
    assert measured["ece"] == pytest.approx([None, 0.28 / 4, 0.18 / 4, 0.0])
    # snapshot 2's bins: 0 holds 0.05 (truth 0.02), 3 holds 0.3 (0.3), 4 holds 0.45 (0.5), 8 holds 0.8 (0.9)
    counts, predicted, true = np.asarray(measured["reliability"][2])
    assert np.flatnonzero(counts).tolist() == [0, 3, 4, 8] and counts.sum() == 4
    np.testing.assert_allclose(predicted[[0, 3, 4, 8]], [0.05, 0.3, 0.45, 0.8])
    np.testing.assert_allclose(true[[0, 3, 4, 8]], [0.02, 0.3, 0.5, 0.9])
    # pooled over the snapshots after the first: bin 5 holds snapshot 1's four predictions of 0.5 and snapshot 3's one
    pooled = calibration.pooled_reliability(measured)
    assert pooled[0].tolist() == [2, 0, 0, 2, 1, 5, 0, 0, 1, 1]
    assert pooled[2, 5] == pytest.approx(1.72 + 0.5)
    # drawn after snapshot 1: prompts 0 and 3 twice each, (2 * 0 + 2 * 0.2) / 4; after snapshot 2: prompt 1 once
    assert measured["ece_drawn"] == pytest.approx([None, 0.1, 0.03, None])
    assert measured["coverage_50"] == [None, 1.0, 0.5, None]
    assert measured["coverage_90"] == [None, 1.0, 0.75, None]
    assert measured["coverage_drawn_50"] == [None, 1.0, 0.0, None]
    assert measured["coverage_drawn_90"] == [None, 1.0, 0.0, None]
    assert measured["coverage_boundary_90"] == [None, 1.0, 0.0, None]
    # averaged over the snapshots after the first that have a value
    means = calibration.run_calibration(measured)
    assert means["coverage_90"] == pytest.approx(0.875) and means["ece_drawn"] == pytest.approx((0.1 + 0.03) / 2)


def test_coverage_where_the_truth_is_resolvable_leaves_out_rates_too_near_0_or_1_to_tell_apart():
    # logit(1e-6) = -13.8 and logit(0.9999) = 9.2 fall outside [-3, 3]; so does logit(0.02) = -3.9, which counts
    true = (0.5, 1e-6, 0.9999, 0.02)
    intervals = {level: (np.full(4, -3.0), np.full(4, 3.0)) for level in calibration.LEVELS}
    measured = calibration.snapshot_calibration([record([0.5] * 4, intervals, [0] * 4, true)] * 2, group_size=8)
    assert measured["resolvable_share"] == [0.5, 0.5]  # prompts 0 and 3
    assert measured["coverage_90"] == [0.25, 0.25]
    assert measured["coverage_resolvable_90"] == [0.5, 0.5]


def test_the_calibration_table_marks_a_selector_without_posterior_and_runs_from_before_the_measures():
    def run(coverage):
        measured = {key: [None, value] for key, value in {"ece": 0.1, "ece_drawn": 0.2, "boundary_share": 0.4}.items()}
        measured |= {key: [None, coverage] for _, key, _ in report.CALIBRATION_COLUMNS[2:]}
        return {"calibration": measured, "summary": calibration.run_calibration(measured)}

    runs = {"kgps": {"0": run(0.3), "1": run(0.5)}, "uniform": {"0": run(None)}, "old": {"0": {"summary": {}}}}
    lines = report.calibration_table(runs, report.summarize(runs))
    assert "| kgps | 0.100 ± 0.000 | 0.200 ± 0.000 | 0.40 ± 0.10 |" in "\n".join(lines)
    assert lines[-3].startswith("| uniform | 0.100 ± 0.000 | 0.200 ± 0.000 | — |")
    assert lines[-1] == "Not measured (runs from a results file before these measures): old."
