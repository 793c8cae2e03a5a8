"""The simulator and `trl-kgps simulate`: deterministic, counting every rollout, writing what it promises."""

import json

import numpy as np
import pytest

from trl_kgps.cli import main
from trl_kgps.simulator import SCENARIOS, Scenario, simulate, summarize


SMALL = Scenario(num_prompts=256, batch_size=16)


def test_a_seed_fixes_the_run():
    a, b = simulate("kgps", SMALL, 30, seed=4), simulate("kgps", SMALL, 30, seed=4)
    np.testing.assert_equal(vars(a), vars(b))  # NaN Spearman (a constant batch) equals NaN here
    assert simulate("kgps", SMALL, 30, seed=5).rollouts == a.rollouts
    assert simulate("kgps", SMALL, 30, seed=5).mae != a.mae


def test_dynamic_sampling_keeps_only_informative_groups_and_pays_for_it():
    ds, uniform = simulate("ds", SMALL, 40), simulate("uniform", SMALL, 40)
    assert np.mean(ds.informative_share) == 1.0
    assert ds.rollouts[-1] > uniform.rollouts[-1] == (256 // 16 + 40) * 16 * 8


def test_kgps_tracks_a_static_pool_better_than_the_last_observation():
    kgps, uniform = simulate("kgps", SCENARIOS["static"], 100), simulate("uniform", SCENARIOS["static"], 100)
    assert np.mean(kgps.mae_true) < 0.5 * np.mean(uniform.mae_true)
    assert np.mean(kgps.informative_share) > np.mean(uniform.informative_share)


def test_summary_has_mean_and_spread_of_every_metric():
    summary = summarize([simulate("mopps", SMALL, 20, seed) for seed in range(3)])
    for name in (
        "mae",
        "spearman",
        "mae_true",
        "informative_share",
        "coverage",
        "repeats",
        "rollouts",
        "final_success",
    ):
        assert set(summary[name]) == {"mean", "std"} and np.isfinite(summary[name]["mean"])


def test_cli_writes_results_table_and_plots(tmp_path, capsys):
    main(
        [
            "simulate",
            "--scenario",
            "static",
            "--selectors",
            "kgps,uniform,ds",
            "--seeds",
            "2",
            "--steps",
            "20",
            "--out",
            str(tmp_path),
        ]
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["selectors"]) == {"kgps", "uniform", "ds"} and results["seeds"] == 2
    assert "| kgps |" in (tmp_path / "results.md").read_text() and "| kgps |" in capsys.readouterr().out
    for name in ("mae.png", "informative_share.png", "success_vs_rollouts.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_cli_refuses_an_unknown_selector(tmp_path):
    with pytest.raises(SystemExit, match="unknown \\['random'\\]"):
        main(["simulate", "--selectors", "kgps,random", "--out", str(tmp_path)])
