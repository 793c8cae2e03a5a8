"""The simulator and `trl-kgps simulate`: deterministic, counting every rollout, writing what it promises."""

import json
from pathlib import Path

import numpy as np
import pytest

from trl_kgps.demo.cli import main
from trl_kgps.demo.simulator import SCENARIOS, Scenario, simulate, summarize


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
    kgps, uniform = simulate("kgps_paper", SCENARIOS["static"], 100), simulate("uniform", SCENARIOS["static"], 100)
    assert np.mean(kgps.mae_true) < 0.5 * np.mean(uniform.mae_true)
    assert np.mean(kgps.informative_share) > np.mean(uniform.informative_share)


def test_the_default_finds_more_informative_groups_than_uniform_without_repeating_batches():
    kgps, uniform = simulate("kgps", SCENARIOS["static"], 100), simulate("uniform", SCENARIOS["static"], 100)
    assert np.mean(kgps.informative_share) > np.mean(uniform.informative_share) + 0.05
    assert np.mean(kgps.repeats) < 0.1


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


@pytest.mark.parametrize(
    "flag, value, says",
    [("--seeds", "0", "0 is below 1"), ("--steps", "0", "0 is below 1"), ("--steps", "-5", "-5 is below 1")],
)
def test_cli_refuses_no_seeds_or_steps_before_writing_anything(tmp_path, capsys, flag, value, says):
    with pytest.raises(SystemExit) as refused:
        main(["simulate", flag, value, "--out", str(tmp_path / "out")])
    assert refused.value.code == 2 and f"argument {flag}: {says}: give at least 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_names_an_out_folder_it_cannot_create(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match=r"^--out .*file/x: cannot create this folder \(Not a directory\); name a"):
        main(["simulate", "--steps", "1", "--seeds", "1", "--out", str(tmp_path / "file" / "x")])


LEVELS = Scenario(
    num_prompts=8, batch_size=8, rollouts=4, level_means=(2.0, -1.0), initial_spread=0.5, learning_rate=0.1,
    shared_drift=0.0, shared_noise=0.0, prompt_noise=0.0, trained_drift=0.0, level_transfer=3.0, ceiling=2.5,
    forgetting=0.7, heldout_prompts=3, norm_scale=1.0, schedule="linear",
)  # fmt: skip


def test_one_level_step_against_a_hand_computation():
    trace = simulate("uniform", LEVELS, steps=1, seed=0)  # the warmup step trains all 8 prompts
    # Replay the world's draws in the simulator's order.
    world = np.random.default_rng([0, 1])
    level = np.arange(8) % 2
    psi = world.normal(np.array([2.0, -1.0])[level], 0.5)
    order = np.random.default_rng([0, 2]).permutation(8)
    s = world.binomial(4, 1 / (1 + np.exp(-psi[order])))
    v = np.zeros(8)
    v[order] = (s / 4) * (1 - s / 4)
    g = np.array([4 * v[level == 0].sum(), 4 * v[level == 1].sum()]) / 8
    eta = 0.1 * (1 - 0 / 2)  # linear schedule, step 0 of 2
    moved = psi + eta * (3.0 * g[level] * (2.5 - psi) - 0.7 * (g.sum() - g[level]))
    p = 1 / (1 + np.exp(-moved))
    np.testing.assert_allclose(trace.level_success[1], [p[level == 0].mean(), p[level == 1].mean()], rtol=1e-12)
    held = np.random.default_rng([0, 3]).normal(np.array([2.0, -1.0])[[0, 0, 0, 1, 1, 1]], 0.5)
    held_level = np.array([0, 0, 0, 1, 1, 1])
    held += eta * (3.0 * g[held_level] * (2.5 - held) - 0.7 * (g.sum() - g[held_level]))
    assert trace.heldout[1] == pytest.approx(np.mean(1 / (1 + np.exp(-held))), rel=1e-12)
    assert len(trace.heldout) == len(trace.level_success) == 3  # initial state, warmup step, one step


def test_held_out_prompts_learn_only_through_their_level():
    frozen = simulate("uniform", Scenario(**{**vars(LEVELS), "level_transfer": 0.0, "forgetting": 0.0}), steps=20)
    assert frozen.heldout[0] == frozen.heldout[-1]
    learning = simulate("uniform", LEVELS, steps=20)
    assert learning.heldout[-1] > learning.heldout[0]


def test_oracle_selects_from_the_start_and_finds_the_mixed_groups():
    cpu = SCENARIOS["cpu"]
    oracle, uniform = simulate("oracle", cpu, 100, seed=1), simulate("uniform", cpu, 100, seed=1)
    assert np.mean(oracle.informative_share) > 0.8 > 0.6 > np.mean(uniform.informative_share)
    assert oracle.rollouts == uniform.rollouts and oracle.heldout[-1] > uniform.heldout[-1]
    assert oracle.level_success[1] != uniform.level_success[1]  # no uniform warmup for the oracle


def test_cpu_scenario_holds_the_calibrated_knobs():
    path = Path(__file__).parents[2] / "benchmarks" / "results" / "calibration.json"
    calibration = json.loads(path.read_text())
    cpu = SCENARIOS["cpu"]
    assert list(cpu.level_means) == calibration["level_means"] and cpu.initial_spread == calibration["initial_spread"]
    assert {name: getattr(cpu, name) for name in calibration["knobs"]} == calibration["knobs"]


def test_simulate_help_describes_every_flag_with_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines at the terminal width
    for flag, default in (
        ("--scenario", "base"),
        ("--selectors", "kgps,kgps_paper"),
        ("--seeds", "3"),
        ("--out", "simulation"),
    ):
        assert flag in text and f"(default: {default}" in text, flag


def test_simulate_says_where_it_wrote_its_files(tmp_path, capsys):
    out = tmp_path / "sim"
    main(
        [
            "simulate",
            "--scenario",
            "static",
            "--selectors",
            "uniform",
            "--seeds",
            "1",
            "--steps",
            "5",
            "--out",
            str(out),
        ]
    )
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("wrote results.json, results.md") and last.endswith(str(out.resolve()))


def test_plot_helpers_by_hand():
    from trl_kgps.demo.plots import compact_number, moving_average

    np.testing.assert_allclose(moving_average([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(moving_average([5, 1, 3], 10), [5, 3, 3])
    assert [compact_number(v) for v in (950, 25000, 1_500_000, 0)] == ["950", "25k", "1.5M", "0"]


def test_a_variant_shares_by_level_only_where_the_scenario_has_levels():
    import dataclasses

    cpu = dataclasses.replace(SCENARIOS["cpu"], num_prompts=64, heldout_prompts=8)
    by_level, alone = simulate("kgps:level", cpu, steps=20, seed=0), simulate("kgps", cpu, steps=20, seed=0)
    assert len(by_level.heldout) == len(alone.heldout) and by_level.heldout != alone.heldout  # other selections
    with pytest.raises(ValueError, match=r"'kgps:level' shares by level, but scenario 'base' has no levels"):
        simulate("kgps:level", SCENARIOS["base"], steps=2)


@pytest.mark.parametrize("method", ["kgps", "kgps_paper", "mopps", "ds", "oracle"])
def test_the_trace_measures_what_the_selection_engine_returns(monkeypatch, method):
    from trl_kgps.engine.engine import SelectionEngine

    scored, norms = [], []
    observe, predict = SelectionEngine.observe, SelectionEngine.predict

    def observe_spy(self, batch, successes, trials, **kwargs):
        result = observe(self, batch, successes, trials, **kwargs)
        scored.append(result[1])
        return result

    def predict_spy(self, delta_norm):
        norms.append(delta_norm)
        return predict(self, delta_norm)

    monkeypatch.setattr(SelectionEngine, "observe", observe_spy)
    monkeypatch.setattr(SelectionEngine, "predict", predict_spy)
    trace = simulate(method, SMALL, 12, seed=3)
    warmup = SMALL.num_prompts // SMALL.batch_size
    assert len(scored) == warmup + 12 and all(m["kgps/lag"] == 0 for m in scored)  # each scored before the next
    # Methods with a warmup start widening after it; the oracle and KGPS without one, from the first step.
    assert len(norms) == (warmup + 12 if method in ("kgps", "oracle") else 12)
    after = scored[warmup:]
    assert trace.mae == [m["kgps/mae"] for m in after]
    np.testing.assert_equal(trace.spearman, [m.get("kgps/spearman", np.nan) for m in after])
    assert trace.informative_share == [m["kgps/informative"] for m in after]
    assert trace.repeats == [m["kgps/repeats"] for m in after]
    assert trace.coverage == [m["kgps/coverage"] for m in after]
