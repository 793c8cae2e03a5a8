"""The CPU testbed's own arithmetic (benchmarks/realcpu): the headline metric, the pairing, the power checks, the
oracles' rules, the environment record and the committed warm start."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch


BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from realcpu import methods, report, results_file, setting  # noqa: E402
from realcpu.environment import PACKAGES, describe, environment  # noqa: E402

from benchmarks.realcpu import allocation  # noqa: E402


def test_rollouts_to_reach_interpolates_the_first_crossing():
    rollouts, accuracy = [0, 100, 200, 300], [0.3, 0.5, 0.4, 0.7]
    assert report.rollouts_to_reach(rollouts, accuracy, 0.45) == pytest.approx(75.0)  # 0 + (0.15 / 0.2) * 100
    assert report.rollouts_to_reach(rollouts, accuracy, 0.6) == pytest.approx(200 + (0.2 / 0.3) * 100)
    assert report.rollouts_to_reach(rollouts, accuracy, 0.2) == 0.0
    assert report.rollouts_to_reach(rollouts, accuracy, 0.9) == float("inf")


def _run(final, gain=0.3):
    return {
        "heldout_accuracy": [final - gain, final - gain / 2, final],
        "rollouts": [0, 50, 100],
        "steps": [0, 50, 100],
        "summary": {"heldout_gain": gain},
    }


def test_paired_compares_runs_of_the_same_seed():
    runs = {"uniform": {"0": _run(0.5), "1": _run(0.6)}, "oracle": {"0": _run(0.6), "1": _run(0.6)}}
    pairs = report.paired(runs)
    np.testing.assert_allclose(pairs["oracle"]["difference"], [0.1, 0.0])
    # seed 0: 0.5 is reached between 50 (0.45) and 100 (0.6), a third of the way; seed 1: exactly at the end
    np.testing.assert_allclose(pairs["oracle"]["rollouts_to_baseline_final"], [(50 + 50 / 3) / 100, 1.0])


def test_paired_reads_the_early_difference_a_quarter_into_the_run():
    def run(accuracy):
        return {"heldout_accuracy": accuracy, "rollouts": [0, 10, 20, 30, 40], "steps": [0, 25, 50, 75, 100]}

    pairs = report.paired(
        {"uniform": {"0": run([0.2, 0.3, 0.4, 0.5, 0.6])}, "kgps": {"0": run([0.2, 0.36, 0.4, 0.5, 0.6])}}
    )
    assert pairs["kgps"]["early_step"] == 25
    np.testing.assert_allclose(pairs["kgps"]["early_difference"], [0.06])


def test_power_needs_a_uniform_gain_and_an_oracle_margin_beyond_twice_its_spread():
    runs = {
        "uniform": {"0": _run(0.50, gain=0.10), "1": _run(0.52, gain=0.08)},
        "oracle": {"0": _run(0.53), "1": _run(0.54)},  # differences 0.03 and 0.02: mean 0.025, std 0.005
    }
    checks = report.power(runs, report.paired(runs))
    assert checks["uniform_gain"]["value"] == pytest.approx(0.09) and checks["uniform_gain"]["passed"]
    assert checks["oracle_margin"]["value"] == pytest.approx(0.025)
    assert checks["oracle_margin"]["spread"] == pytest.approx(0.005) and checks["oracle_margin"]["passed"]
    runs["oracle"]["1"] = _run(0.50)  # differences 0.03 and -0.02: mean 0.005, std 0.025
    assert not report.power(runs, report.paired(runs))["oracle_margin"]["passed"]


def _oracle(p, rule="proportional", levels=None, refresh=1):
    p = np.asarray(p, float)
    return methods.Oracle(len(p), lambda: p, group_size=8, refresh=refresh, seed=0, rule=rule, levels=levels)


def test_greedy_oracle_takes_the_prompts_most_likely_to_give_a_mixed_group():
    oracle = _oracle([0.99, 0.5, 0.0, 0.3, 0.7, 0.95], "greedy")
    assert sorted(oracle.select(3).tolist()) == [1, 3, 4]
    assert sorted(oracle.select(3, exclude=[1]).tolist()) == [3, 4, 5]


def test_proportional_oracle_draws_in_proportion_to_the_mixed_group_probability():
    p = np.array([0.5, 0.9, 0.97, 0.0, 1.0])
    mixed = 1 - p**8 - (1 - p) ** 8
    oracle = _oracle(p)
    draws = np.array([oracle.select(1)[0] for _ in range(20_000)])
    np.testing.assert_allclose(np.bincount(draws, minlength=5) / draws.size, mixed / mixed.sum(), atol=0.015)
    assert set(oracle.select(2, exclude=[0]).tolist()) == {1, 2}  # never a prompt whose group cannot be mixed


def _best_sizes(p, rollouts):
    """The exhaustive optimum: every assignment of sizes in {0, 2, 4, 8, 16} spending `rollouts`, the most mixed."""
    best = (-1.0, None)
    for sizes in itertools.product((0, *allocation.SIZES), repeat=len(p)):
        if sum(sizes) == rollouts:
            best = max(best, (float(allocation.mixed_chance(p, np.array(sizes)).sum()), sizes), key=lambda b: b[0])
    return best


@pytest.mark.parametrize(
    "p", [[0.5, 0.05, 1.0, 0.0], [0.5, 0.5, 0.3, 0.1], [0.02, 0.04, 0.97, 0.6], [0.2, 0.8, 0.5, 0.35]]
)
@pytest.mark.parametrize("rollouts", [8, 16, 32])
def test_allocation_spends_the_steps_rollouts_where_they_add_most_chance_of_a_mixed_group(p, rollouts):
    p = np.array(p)
    sizes = allocation.group_sizes(p, rollouts, np.random.default_rng(0))
    assert sizes.sum() == rollouts and set(sizes) <= {0, *allocation.SIZES}
    best, _ = _best_sizes(p, rollouts)
    assert allocation.mixed_chance(p, sizes).sum() == pytest.approx(best, abs=1e-12)


def test_allocation_by_hand_and_each_prompts_units_adjacent():
    # per rollout: p = 0.5 adds 0.25 for its pair, 0.1875 for its second pair, 0.029 for 4 more; p = 0.05 adds 0.0475
    # for its pair, then 0.045: 8 rollouts go 4 and 4; p = 0 and p = 1 can never be mixed
    p = np.array([0.5, 0.05, 1.0, 0.0])
    np.testing.assert_array_equal(allocation.group_sizes(p, 8, np.random.default_rng(0)), [4, 4, 0, 0])
    # 32 rollouts: whatever a doubling adds beats the nothing that p = 0 and p = 1 can ever add
    np.testing.assert_array_equal(allocation.group_sizes(p, 32, np.random.default_rng(0)), [16, 16, 0, 0])
    np.testing.assert_array_equal(allocation.unit_groups([7, 3, 5, 9], [4, 0, 2, 8]), [7, 7, 5, 9, 9, 9, 9])
    with pytest.raises(ValueError, match="multiple of the unit group"):
        allocation.group_sizes(p, 7, np.random.default_rng(0))
    with pytest.raises(ValueError, match="do not fit 4 prompts"):
        allocation.group_sizes(p, 66, np.random.default_rng(0))


def test_pooled_advantages_are_grpos_over_groups_of_any_size():
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    ids = torch.tensor([3, 3, 3, 3, 7, 7, 7, 7])  # two groups of 4: GRPOTrainer's own formula is the oracle
    grouped = rewards.view(2, 4)
    expected = (grouped - grouped.mean(1, keepdim=True)) / (nanstd(grouped, dim=1).unsqueeze(1) + 1e-4)
    torch.testing.assert_close(allocation.pooled_advantages(rewards, ids), expected.flatten())
    ids = torch.tensor([5, 5, 9, 9, 9, 9, 9, 9])  # a pair and a group of 6 (unequal): by hand with numpy
    r = rewards.numpy()
    expected = np.concatenate(
        [(r[:2] - r[:2].mean()) / (r[:2].std(ddof=1) + 1e-4), (r[2:] - r[2:].mean()) / (r[2:].std(ddof=1) + 1e-4)]
    )
    np.testing.assert_allclose(allocation.pooled_advantages(rewards, ids).numpy(), expected, rtol=1e-6)


def test_the_wide_oracle_draws_half_the_prompts_for_groups_twice_as_large():
    regime = setting.REGIMES["base"]
    fake = type("Setting", (), {"regime": regime, "train": [0] * 8, "true_levels": None})()
    oracle, _ = methods.build("oracle_wide", fake, model=None, seed=0)
    assert oracle.group_size == 2 * regime.num_generations and oracle.rule == "proportional"
    oracle, _ = methods.build("oracle_sizes", fake, model=None, seed=0)
    # it draws the prompts as `oracle` draws for groups of G, and the trainer's groups are its units
    assert oracle.group_size == regime.num_generations and methods.num_generations("oracle_sizes", regime) == 2
    assert oracle.rule == "sizes"


def test_level_oracle_knows_each_levels_mean_chance_of_a_mixed_group_and_nothing_per_prompt():
    p = np.array([0.5, 0.99, 0.0, 0.2, 0.3, 1.0])
    levels = np.array([1, 1, 1, 2, 2, 2])
    mixed = 1 - p**8 - (1 - p) ** 8
    oracle = _oracle(p, levels=levels)
    oracle.select(1)
    known = oracle.known_success()
    u = 1 - known**8 - (1 - known) ** 8  # the chance of a mixed group it acts on, per prompt
    np.testing.assert_allclose(u[:3], mixed[:3].mean(), rtol=1e-9)  # by hand: the level's mean
    np.testing.assert_allclose(u[3:], mixed[3:].mean(), rtol=1e-9)
    # its draws: every prompt of a level equally often, levels in proportion to their mean chance
    draws = np.array([oracle.select(1)[0] for _ in range(30_000)])
    frequency = np.bincount(draws, minlength=6) / draws.size
    expected = np.repeat([mixed[:3].mean(), mixed[3:].mean()], 3)
    np.testing.assert_allclose(frequency, expected / expected.sum(), atol=0.012)
    # its prediction is each level's mean success, not the per-prompt truth
    np.testing.assert_allclose(oracle.predicted_success(), np.repeat([p[:3].mean(), p[3:].mean()], 3))


def test_a_stale_oracle_measures_the_truth_only_every_refresh_batches():
    calls = []
    truth = lambda: calls.append(1) or np.full(4, 0.5)  # noqa: E731
    oracle = methods.Oracle(4, truth, group_size=8, refresh=25, seed=0)
    for _ in range(60):
        oracle.select(1)
    assert len(calls) == 3  # batches 0, 25 and 50


def test_chosen_ahead_returns_each_batch_k_choices_after_it_was_made_never_one_queued():
    from trl_kgps import KGPSSelector

    def batches(selector, count, exclude_last):
        out = []
        for _ in range(count):
            out.append(selector.select(4, exclude=out[-1] if exclude_last and out else None))
        return out

    # ahead 1 is the selector itself
    np.testing.assert_array_equal(
        batches(methods.ChosenAhead(KGPSSelector(40, seed=0), 1), 5, True), batches(KGPSSelector(40, seed=0), 5, True)
    )
    # ahead 3: the inner selector is asked 2 extra times up front; each batch returned is its oldest choice, and no
    # choice takes a prompt of a batch queued or excluded (pending)
    inner = KGPSSelector(40, seed=0)
    asked = []
    select = inner.select
    inner.select = lambda batch_size, exclude=None: (
        asked.append((select(batch_size, exclude), exclude)) or asked[-1][0]
    )
    ahead = methods.ChosenAhead(inner, 3)
    returned = batches(ahead, 5, True)
    assert len(asked) == 7 and [b.tolist() for b in returned] == [b.tolist() for b, _ in asked[:5]]
    for i, (batch, exclude) in enumerate(asked):
        assert not set(batch) & set(exclude if exclude is not None else ())
        queued = {int(x) for b, _ in asked[max(0, i - 2) : i] for x in b}
        assert queued <= set(exclude if exclude is not None else ())
    assert ahead.predicted_success(np.arange(3)).shape == (3,)  # everything else is the selector's


def test_build_names_every_suite_method():
    assert all(methods.known(m) for m in methods.SUITE + methods.OTHERS)
    assert methods.known("oracle_level@10") and methods.known("kgps_paper")
    assert not methods.known("oracle@") and not methods.known("oracle@0") and not methods.known("kgps@2")


def test_a_run_of_its_own_length_trains_a_multiple_of_the_regimes_steps():
    from types import SimpleNamespace

    regime = setting.REGIMES["base"]
    lengths = ("one_line", "one_line_x2", "one_line_long", "uniform_long", "uniform_ds", "uniform_ds_half")
    base = SimpleNamespace(regime=regime, train=setting.splits(regime)[0])
    assert [methods.steps(m, base) for m in lengths] == [400, 800, 1200, 1200, 400, 200]
    # The filter's budget: 8 profiling rollouts of each of 512 (or 1,024) prompts buy 128 (256) steps of 4 x 8.
    wide = SimpleNamespace(
        regime=setting.REGIMES["mostly_solved"], train=setting.splits(setting.REGIMES["mostly_solved"])[0]
    )
    assert methods.steps("one_line_filter_budget", base) == 400 + 8 * 512 // 32 == 528
    assert methods.steps("one_line_filter_budget", wide) == 400 + 8 * 1024 // 32 == 656
    assert methods.base_method("one_line_filter_budget") == "one_line" and methods.known("one_line_filter_budget")
    # it profiles nothing: its budget goes to steps
    assert methods.profiling_rollouts("one_line_filter_budget", base) == 0
    assert methods.base_method("uniform_long") == "uniform" and methods.known("uniform_long")
    assert methods.base_method("uniform_ds_half") == "uniform" and "uniform_ds_half" in methods.DYNAMIC_SAMPLING
    assert methods.base_method("one_line_x2") == methods.base_method("one_line_ds3") == "one_line"
    assert methods.ROUNDS_OF.get("uniform_ds3") == 3 and methods.base_method("uniform_ds3") == "uniform"


def test_the_environment_names_packages_python_cpu_threads_and_commit():
    from importlib import metadata

    env = environment(threads=1)
    assert set(PACKAGES) <= set(env["packages"])
    assert env["packages"]["numpy"] == metadata.version("numpy")
    assert env["torch_threads"] == 1 and env["cpu"] and env["cpu_capability"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=BENCHMARKS).stdout.strip()
    if head:  # a git checkout
        assert env["commit"].split("+")[0] == head
    line = describe(env)
    assert env["cpu_capability"] in line and f"numpy {env['packages']['numpy']}" in line


def test_every_committed_benchmark_result_names_its_environment():
    files = sorted({*(BENCHMARKS / "results").rglob("*.json"), *(BENCHMARKS / "results").rglob("*.json.xz")})
    files = [path for path in files if path.name != "INDEX.json"]  # the index of the results, no result itself
    assert files
    for path in files:
        env = results_file.load(str(path)).get("environment")
        assert env is not None, f"{path} does not record its environment"
        if env.get("recorded") is False:  # measured before results recorded it: says what is known instead
            assert len(env["note"]) > 80, path
        else:
            assert {"packages", "python", "cpu", "cpu_capability", "torch_threads", "commit"} <= set(env), path
            assert env["packages"]["torch"] and env["packages"]["trl"], path


@pytest.mark.parametrize("seed", sorted({regime.warm_start for regime in setting.REGIMES.values()}))
def test_each_committed_warm_start_is_the_one_its_record_describes(seed):
    record = json.loads(Path(setting.warm_start_path(seed)).with_suffix(".json").read_text())
    assert record["seed"] == seed and setting.warm_start_digest(seed) == record["sha256"]
    from trl_kgps.tasks.evaluation import answer_probabilities

    model, tokenizer = setting.policy(seed)
    _, test = setting.splits(setting.REGIMES["base"])
    heldout = answer_probabilities(model, tokenizer, test["prompt"], test["answer"]).mean()
    assert heldout == pytest.approx(record["heldout_accuracy"], abs=1e-4)


@pytest.mark.parametrize("name, level", [("out_of_reach", 4), ("mostly_solved", 1)])
def test_regimes_share_the_held_out_set_and_extend_the_pool_with_unseen_prompts_of_one_level(name, level):
    base_train, base_test = setting.splits(setting.REGIMES["base"])
    regime = setting.REGIMES[name]
    train, test = setting.splits(regime)
    assert test["prompt"] == base_test["prompt"]
    assert train["prompt"][: len(base_train)] == base_train["prompt"]
    extra = train.select(range(len(base_train), len(train)))
    assert len(extra) == regime.out_of_reach + regime.solved == 512 and set(extra["level"]) == {level}
    assert len(set(train["prompt"])) == len(train) and not set(train["prompt"]) & set(test["prompt"])


@pytest.mark.parametrize("column", ["wrong_labels", "merged_levels", "unrelated"])
def test_a_wrong_column_changes_only_the_labels_the_selectors_read(column):
    base_train, _ = setting.splits(setting.REGIMES["base"])
    regime = next(r for r in setting.CORRUPTED.values() if r.column == column and not r.out_of_reach)
    train, _ = setting.splits(regime)
    truth, labels = np.asarray(train["true_level"]), np.asarray(train["level"])
    assert train["prompt"] == base_train["prompt"] and truth.tolist() == base_train["level"]
    agree = (truth == labels).mean()
    if column == "wrong_labels":  # exactly half moved, each to another level
        assert agree == 0.5 and set(labels) == {1, 2, 3, 4}
    elif column == "merged_levels":
        assert (labels == np.where(truth <= 2, 1, 3)).all()
    else:  # independent of the level: about a quarter agree by chance, and each label holds every level
        assert abs(agree - 0.25) < 0.05 and all(set(truth[labels == label]) == {1, 2, 3, 4} for label in range(1, 5))


@pytest.mark.parametrize("regime", ["base", "wrong_labels"])
def test_the_one_line_sees_a_users_columns_and_finds_the_level_never_the_answer_or_the_truth(regime):
    from trl_kgps import KGPSConfig
    from trl_kgps.adapters.dataset_columns import with_metadata
    from trl_kgps.adapters.reward_reads import ColumnReaders
    from trl_kgps.tasks.arithmetic import arithmetic_reward

    train, _ = setting.splits(setting.ALL_REGIMES[regime])
    one_line = methods.dataset_for("one_line", train)
    assert one_line.column_names == ["prompt", "answer", "level"] and one_line["level"] == train["level"]
    config, metadata = with_metadata(one_line, KGPSConfig(), ColumnReaders.of([arithmetic_reward]))
    assert config.feature_columns == ["level"] and "answer" in metadata.skipped
    config, _ = with_metadata(
        methods.dataset_for("one_line_no_metadata", train), KGPSConfig(), ColumnReaders.of([arithmetic_reward])
    )
    assert config == KGPSConfig.per_prompt(candidates=0.0)
    assert methods.dataset_for("uniform", train) is train
    assert methods.build("one_line", None, None, 0) == (None, KGPSConfig())


def test_the_one_line_from_the_profile_reads_the_filters_profile_and_counts_its_rollouts():
    from types import SimpleNamespace

    from trl_kgps import KGPSConfig

    train, _ = setting.splits(setting.ALL_REGIMES["base"])
    pool = SimpleNamespace(train=train)  # 512 distinct prompts, 8 profiling samples each
    assert methods.profiling_rollouts("one_line_profiled", pool) == methods.profiling_rollouts("offline_filter", pool)
    assert (
        methods.profiling_rollouts("offline_filter", pool) == 8 * 512
        and methods.profiling_rollouts("one_line", pool) == 0
    )
    assert methods.build("one_line_profiled", None, None, 0) == (None, KGPSConfig(prior_column="pass_rate"))
    assert methods.dataset_for("one_line_profiled", train).column_names == ["prompt", "answer", "level"]


def test_the_one_line_on_the_filtered_rows_trains_on_what_the_filter_keeps_and_counts_its_profiling(monkeypatch):
    from types import SimpleNamespace

    from trl_kgps import KGPSConfig

    train, _ = setting.splits(setting.ALL_REGIMES["base"])
    levels = np.asarray(train["level"])
    # The warm start solves level 1 always, level 4 never, the others half the time: profiling drops every row of
    # levels 1 and 4 and keeps a row of levels 2-3 unless its 8 samples all agree (2/256 of them, on average).
    truth = np.select([levels == 1, levels == 4], [1.0, 0.0], 0.5)
    monkeypatch.setattr(setting.Setting, "true_success", lambda self, model, dataset: truth)
    pool = setting.Setting(setting.ALL_REGIMES["base"], None, None, train, None, None)
    kept = methods.filtered(pool, None, seed=3).train
    middle = [prompt for prompt, level in zip(train["prompt"], levels) if level in (2, 3)]
    assert set(kept["level"]) == {2, 3} and set(kept["prompt"]) <= set(middle)
    assert len(middle) - 8 <= len(kept) < len(middle)  # at 2/256 a row, 256 rows lose about 2
    offline_filter, _ = methods.build("offline_filter", pool, None, 3)  # the same profile: the same rows
    assert kept["prompt"] == [train["prompt"][i] for i in offline_filter.kept]
    assert methods.profiling_rollouts("one_line_filtered", SimpleNamespace(train=train)) == 8 * 512
    assert methods.known("one_line_filtered")
    assert methods.build("one_line_filtered", None, None, 0) == (None, KGPSConfig())  # the one line, as users write it
    assert methods.dataset_for("one_line_filtered", kept).column_names == ["prompt", "answer", "level"]


def _committed(curve, fingerprint, packages):
    return {
        "environment": {"packages": packages, "python": "3.11.7", "cpu": "a CPU", "cpu_capability": "AVX512"},
        "regimes": {
            "base": {
                "regime": {"learning_rate": 1e-4},
                "fingerprint": fingerprint,
                "runs": {"uniform": {"0": {"heldout_accuracy": curve}}},
            }
        },
    }


def test_the_reproduction_check_passes_within_its_tolerance_and_names_what_differs():
    from realcpu import check

    curve = [0.36, 0.45, 0.55]
    fingerprint = {"train": "a", "test": "b", "warm_start": "c"}
    packages = dict.fromkeys(PACKAGES, "1.0")
    committed = _committed(curve, fingerprint, packages)
    here = {"packages": {**packages, "trl": "2.0"}, "python": "3.11.7", "cpu": "a CPU", "cpu_capability": "AVX2"}
    mine = {"heldout_accuracy": [0.36, 0.45, 0.55 + 0.9 * check.TOLERANCE], "steps": [0, 200, 400]}
    passed, text = check.compare(committed, mine, fingerprint, here)
    assert passed and "REPRODUCES" in text
    assert "trl 2.0 (committed 1.0)" in text and "cpu_capability AVX2 (committed AVX512)" in text
    mine["heldout_accuracy"][1] += 1.2 * check.TOLERANCE  # beyond it at one snapshot
    passed, text = check.compare(committed, mine, fingerprint, here)
    assert not passed and "does NOT reproduce" in text and "at step 200" in text


def test_the_reproduction_check_fails_when_the_data_or_the_warm_start_changed():
    from realcpu import check

    fingerprint = {"train": "a", "test": "b", "warm_start": "c"}
    packages = dict.fromkeys(PACKAGES, "1.0")
    committed = _committed([0.36, 0.55], fingerprint, packages)
    here = {"packages": packages, "python": "3.11.7", "cpu": "a CPU", "cpu_capability": "AVX512"}
    mine = {"heldout_accuracy": [0.36, 0.55], "steps": [0, 400]}
    passed, text = check.compare(committed, mine, {**fingerprint, "warm_start": "d"}, here)
    assert not passed and "warm_start differ" in text


def test_the_default_is_paired_with_each_baseline_on_the_same_seed():
    runs = {
        "uniform": {"0": _run(0.50), "1": _run(0.60)},
        "mopps": {"0": _run(0.53), "1": _run(0.61)},
        "kgps": {"0": _run(0.54), "1": _run(0.60)},
    }
    table = report.default_versus_baselines(
        {"regimes": {"r": {"runs": runs}}}, ["r"], baselines=("uniform", "mopps", "greso")
    )
    assert "| uniform | +0.020 ± 0.020 |" in table  # +0.04 and 0.00
    assert "| mopps | +0.000 ± 0.010 |" in table  # +0.01 and -0.01
    assert "| greso | – |" in table  # not run


def test_the_level_trace_gives_each_level_its_share_of_the_scores_and_adds_up_the_process_noise(capsys):
    from types import SimpleNamespace

    from trace_levels import LevelTrace

    from trl_kgps import KGPSConfig, KGPSSelector

    levels = np.array([1, 1, 2, 2, 2, 4])
    selector = KGPSSelector(6, KGPSConfig(feature_columns=["level"]), features={"level": levels})
    selector.update([0, 2, 5], successes=[8, 4, 0], trials=[8, 8, 8])
    truth = np.array([0.9, 0.7, 0.5, 0.4, 0.3, 0.0])
    run = SimpleNamespace(
        train={"level": levels.tolist()},
        true_success=lambda model, dataset: truth,
        regime=SimpleNamespace(snapshot_every=20),
    )
    trace = LevelTrace(run, SimpleNamespace(selector=selector))
    for noise in (0.25, 0.5):
        trace.on_log(None, None, None, logs={"kgps/process_noise": noise, "loss": 1.0})
    trace.line(model=None, step=20)
    line = capsys.readouterr().out
    scores = selector.scores()
    for level, members in ((1, [0, 1]), (2, [2, 3, 4]), (4, [5])):
        assert f"L{level} true {truth[members].mean():.3f}" in line
        assert f"draw {scores[members].sum() / scores.sum():.3f}" in line
    assert line.startswith("step  20 |") and line.rstrip().endswith("Q 0.75")


def _lr_sweep_module():
    sys.path.insert(0, str(BENCHMARKS.parent))
    from benchmarks import lr_sweep

    return lr_sweep


def test_the_sweeps_rule_takes_the_rate_of_the_highest_mean_final_accuracy():
    sweep = _lr_sweep_module()
    final = lambda accuracy: {"heldout_accuracy": [0.3, accuracy]}  # noqa: E731
    runs = {
        "0.0001": {"0": final(0.50), "1": final(0.52)},  # mean 0.51
        "0.0002": {"0": final(0.60), "1": final(0.44)},  # the best seed, but mean 0.52
        "0.0004": {"0": final(0.53), "1": final(0.525)},  # mean 0.5275: the choice
    }
    assert sweep.best_rate(runs) == "0.0004"


def test_each_regime_trains_at_the_rate_its_committed_sweep_chose_and_a_wrong_column_at_its_twins():
    sweep = _lr_sweep_module()
    results = results_file.load(str(BENCHMARKS / "results" / "lr_sweep" / sweep.SCHEDULE / "lr_sweep.json"))
    assert results["schedule"] == sweep.SCHEDULE and results["seeds"] == list(sweep.TUNING_SEEDS)
    # Countdown's regimes have a sweep of their own (tests/unit/test_countdown_suite.py)
    sums = {name: regime for name, regime in setting.REGIMES.items() if regime.family == "sums"}
    assert set(results["regimes"]) == set(sums)
    for name, regime in sums.items():
        assert regime.lr_scheduler_type == sweep.SCHEDULE
        assert regime.learning_rate == float(sweep.best_rate(results["regimes"][name]["runs"])), name
    from benchmarks.verdicts.one_line import TWIN

    for name, twin in TWIN.items():
        assert setting.CORRUPTED[name].learning_rate == setting.REGIMES[twin].learning_rate
    # the rule's choice beats the grid's neighbours on either side, so the grid reached past the best
    for name, entry in results["regimes"].items():
        rates = sorted(entry["runs"], key=float)
        assert 0 < rates.index(sweep.best_rate(entry["runs"])) < len(rates) - 1, name


def test_a_setting_trains_at_another_rate_but_never_on_other_data():
    import dataclasses

    built = setting.Setting(setting.REGIMES["base"], None, None, None, None, None, {})
    faster = dataclasses.replace(built.regime, learning_rate=1e-3, lr_scheduler_type="constant_with_warmup")
    moved = setting.with_regime(built, faster)
    assert moved.grpo["learning_rate"] == 1e-3 and moved.grpo["lr_scheduler_type"] == "constant_with_warmup"
    with pytest.raises(ValueError, match="other data"):
        setting.with_regime(built, dataclasses.replace(built.regime, out_of_reach=512))
