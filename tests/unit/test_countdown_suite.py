"""The CPU suite's Countdown family (benchmarks/realcpu/countdown.py): the operator strings' values against two
independent evaluators, the puzzles' solvability, the exact success against per-string teacher forcing and against
sampling, and the regimes as registered and committed."""

import itertools
import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch


BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS.parent))

from benchmarks.realcpu import countdown, methods, setting  # noqa: E402


COUNTDOWN = {name: regime for name, regime in setting.REGIMES.items() if regime.family == "countdown"}


@pytest.mark.parametrize(
    "numbers, operators, expected",
    [
        ([7, 3, 2], "*+", 23),  # 21 + 2
        ([8, 4, 2], "-/", 6),  # 8 - 2: the quotient first
        ([3, 5, 2], "/*", Fraction(6, 5)),  # (3 / 5) * 2, left to right
        ([2, 3, 4, 5], "+*-", 9),  # 2 + 12 - 5
        ([2, 3, 4, 5], "-*/", Fraction(-2, 5)),  # 2 - 12 / 5
        ([9, 3, 3, 1], "/-*", 0),  # 3 - 3
        ([6, 0, 1], "/+", None),  # a division by zero
    ],
)
def test_an_operator_string_is_read_with_the_standard_precedence_as_by_hand(numbers, operators, expected):
    assert countdown.value(numbers, operators) == expected


def test_every_operator_string_agrees_with_pythons_eval_and_the_librarys_countdown_verifier():
    from trl_kgps.tasks.countdown import evaluate

    rng = np.random.default_rng(0)
    for count in (3, 4):
        strings = countdown.operator_strings(count)
        assert len(strings) == 4 ** (count - 1) == len(set(strings))
        for _ in range(20):
            numbers = rng.integers(1, 10, count).tolist()
            for ops in strings:
                text = "".join(f"{n}{op}" for n, op in zip(numbers, ops)) + str(numbers[-1])
                expression = "".join(f"Fraction({n}){op}" for n, op in zip(numbers, ops)) + f"Fraction({numbers[-1]})"
                by_eval = eval(expression, {"Fraction": Fraction})  # Python's own precedence, exact
                assert countdown.value(numbers, ops) == by_eval == evaluate(text, numbers), text


def test_every_puzzle_is_solvable_and_the_splits_are_disjoint():
    train, test, taken, warm = setting.countdown_base(4096)
    assert len(train["prompt"]) == setting.BASE_POOL and len(test["prompt"]) == setting.COUNTDOWN_EVAL_PROMPTS
    assert len(set(train["prompt"]) | set(test["prompt"])) == len(train["prompt"]) + len(test["prompt"])
    assert taken == set(train["prompt"]) | set(test["prompt"]) and not set(warm["prompt"]) & taken
    for split in (train, test):
        for prompt, equation, level in zip(split["prompt"], split["answer"], split["level"]):
            numbers, target = countdown.parse(prompt)
            assert len(numbers) == level and 0 <= target <= countdown.MAX_TARGET
            assert countdown.parse(equation) == (numbers, target)
            assert equation.split("=")[0][1::2] in countdown.solutions(numbers, target)  # the reference is right
        assert abs(np.mean(split["level"]) - 3.5) < 0.05  # an even mix of 3 and 4 numbers
    for prompt, ops in zip(warm["prompt"], warm["answer"]):
        assert ops in countdown.solutions(*countdown.parse(prompt))


def test_the_sharpened_warm_start_is_shown_right_strings_at_its_rate_and_wrong_ones_drawn_evenly():
    _, _, _, warm = setting.countdown_base(8000)
    shown = countdown.warm_start_answers(warm["prompt"], warm["answer"], "sharpened", np.random.default_rng(0))
    right = {3: [], 4: []}
    wrong_3 = []  # the wrong strings shown for 3-number puzzles, by their index among the puzzle's wrong ones
    for prompt, reference, ops in zip(warm["prompt"], warm["answer"], shown):
        numbers, target = countdown.parse(prompt)
        right[len(numbers)].append(ops == reference)
        if ops != reference:  # never another right string: a wrong one, of the right length
            assert ops in countdown.operator_strings(len(numbers)) and countdown.value(numbers, ops) != target
        if ops != reference and len(numbers) == 3:
            wrong = [s for s in countdown.operator_strings(3) if countdown.value(numbers, s) != target]
            wrong_3.append(wrong.index(ops) / len(wrong))
    for count, rate in countdown.WARM_START_ACCURACY["sharpened"].items():
        kept = np.asarray(right[count])
        assert abs(kept.mean() - rate) < 4 * np.sqrt(rate * (1 - rate) / kept.size), count
    # uniform among the wrong strings: their relative index is Uniform[0, 1) up to the discreteness of 1/len(wrong)
    assert abs(np.mean(wrong_3) - 0.5) < 0.05
    with pytest.raises(ValueError, match="recipe='noisy' is not one of"):
        countdown.warm_start_answers(warm["prompt"], warm["answer"], "noisy", np.random.default_rng(0))


def test_a_warm_starts_file_is_named_by_its_family_recipe_and_seed():
    assert Path(setting.warm_start_path(1)).name == "warm_start_1.safetensors"
    assert Path(setting.warm_start_path(0, "countdown")).name == "warm_start_countdown_0.safetensors"
    path = setting.warm_start_path(0, "countdown", "sharpened")
    assert Path(path).name == "warm_start_countdown_sharpened_0.safetensors"
    with pytest.raises(ValueError, match="recipe='sharpened' is not one of sums's warm-start recipes"):
        setting.warm_start_path(0, "sums", "sharpened")


def test_the_reward_accepts_every_string_that_reaches_the_target_and_nothing_else():
    equation = "8/4*2+6=10"  # every one of the 64 strings judged against the value each reaches
    numbers, target = countdown.parse(equation)
    strings = countdown.operator_strings(4)
    rewards = countdown.countdown_reward(strings, answer=[equation] * len(strings))
    right = {ops for ops, reward in zip(strings, rewards) if reward == 1.0}
    assert right == set(countdown.solutions(numbers, target)) and "/*+" in right and len(right) > 1
    assert set(rewards) == {0.0, 1.0}
    wrong = ["/*", "/*++", " /*+", "/*+ ", "", "10", "/x+"]
    assert countdown.countdown_reward(wrong, answer=[equation] * len(wrong)) == [0.0] * len(wrong)
    conversation = [[{"role": "assistant", "content": "/*+"}]]
    assert countdown.countdown_reward(conversation, answer=[equation]) == [1.0]


def _per_string_probability(model, tokenizer, prompt: str, ops: str) -> float:
    """`pi(ops + eos | prompt)`, one unpadded forward pass and a product over the answer's tokens."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    target_ids = tokenizer(ops + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + target_ids])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
    return float(np.exp(sum(log_probs[len(prompt_ids) + t - 1, token].item() for t, token in enumerate(target_ids))))


def test_exact_success_is_the_sum_over_the_right_strings_of_their_teacher_forced_probability():
    from trl_kgps.tasks import tiny

    tokenizer = countdown.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=0)  # untrained
    prompts = ["7 3 2=23", "8 4 2 6=10", "2 2 2=6", "1 1 1 1=1", "9 8 7 6=0"]
    expected = [
        sum(_per_string_probability(model, tokenizer, p, ops) for ops in countdown.solutions(*countdown.parse(p)))
        for p in prompts
    ]
    np.testing.assert_allclose(countdown.exact_success(model, tokenizer, prompts), expected, rtol=1e-4)
    assert countdown.exact_success(model, tokenizer, ["9 9 9=99"])[0] == 0.0  # no string reaches it
    assert len(countdown.solutions((1, 1, 1, 1), 1)) > 10 and countdown.solutions((2, 2, 2), 6) == ("++", "+*", "*+")


def test_exact_success_matches_sampled_success_from_the_warm_start():
    from trl_kgps.tasks.evaluation import success_rates

    model, tokenizer = setting.policy(0, "countdown")
    train, _, _, _ = setting.countdown_base()
    prompts, equations = train["prompt"][:8], train["answer"][:8]
    exact = countdown.exact_success(model, tokenizer, prompts)
    samples = 2000
    sampled = success_rates(
        model, tokenizer, prompts, countdown.countdown_reward, {"answer": equations}, samples=samples,
        max_new_tokens=4, batch_size=4000, seed=0,
    )  # fmt: skip
    assert exact.max() > 0.1  # the comparison has something to compare
    sigma = np.sqrt(exact * (1 - exact) / samples) + 1e-3
    assert np.all(np.abs(sampled - exact) < 4 * sigma), (sampled, exact)


def test_the_countdown_regimes_are_registered_with_their_family_and_the_level_the_one_line_reads():
    from trl_kgps import KGPSConfig
    from trl_kgps.adapters.dataset_columns import with_metadata
    from trl_kgps.adapters.reward_reads import ColumnReaders

    assert len(COUNTDOWN) >= 3 and all(name.startswith("countdown") for name in COUNTDOWN)
    assert {"countdown", "countdown_out_of_reach", "countdown_mostly_solved"} <= set(COUNTDOWN)
    assert all(r.family == "sums" for name, r in setting.ALL_REGIMES.items() if name not in COUNTDOWN)
    train, _ = setting.splits(COUNTDOWN["countdown"])
    assert train.column_names == ["prompt", "answer", "level"] and set(train["level"]) == {3, 4}
    one_line = methods.dataset_for("one_line", train)
    config, _ = with_metadata(one_line, KGPSConfig(), ColumnReaders.of([countdown.countdown_reward]))
    assert config.feature_columns == ["level"]  # the answer column is the reward's, never a feature


# What each Countdown regime trains on: a change in the data or the warm start changes these.
WARM_START = "5546caa4a621a3d00f1d778d6a429755998693f964a08286a63e624f17aab35b"
SHARPENED = "e13e9e94a2e111165090cefce6e04a07f558619771174a31be5b89521bd528ca"
FINGERPRINTS = {
    "countdown": dict(train="414bd918a67b257a", test="a8cfa365584d2bc0", warm_start=WARM_START),
    "countdown_out_of_reach": dict(train="865dbbcf4da53c24", test="a8cfa365584d2bc0", warm_start=WARM_START),
    "countdown_mostly_solved": dict(train="ddaa9fd5366ddfa1", test="a8cfa365584d2bc0", warm_start=WARM_START),
    "countdown_sharpened": dict(train="414bd918a67b257a", test="a8cfa365584d2bc0", warm_start=SHARPENED),
    "countdown_sharpened_out_of_reach": dict(train="160483ba92dcf1c7", test="a8cfa365584d2bc0", warm_start=SHARPENED),
}


@pytest.mark.parametrize("name", sorted(FINGERPRINTS))
def test_each_countdown_regimes_data_and_warm_start_are_the_committed_ones(name):
    regime = COUNTDOWN[name]
    built = setting.build(regime)
    assert built.fingerprint() == FINGERPRINTS[name]
    truth, levels = built.true_success(built.model, built.train), np.asarray(built.train["level"])
    pool, extra = np.arange(setting.BASE_POOL), np.arange(setting.BASE_POOL, len(built.train))
    assert extra.size == regime.out_of_reach + regime.solved
    assert built.train.select(pool)["prompt"] == setting.splits(COUNTDOWN["countdown"])[0]["prompt"]
    if regime.out_of_reach:  # every extra below the pool's least solved quarter of 4-number puzzles, most near 0
        assert set(levels[extra]) == {4}
        assert truth[extra].max() < np.quantile(truth[pool][levels[pool] == 4], 0.25) and truth[extra].mean() < 0.03
    if regime.solved:  # every extra above the pool's median 3-number puzzle
        assert set(levels[extra]) == {3}
        assert truth[extra].min() > np.median(truth[pool][levels[pool] == 3])
    assert len(set(built.train["prompt"])) == len(built.train)
    assert not set(built.train["prompt"]) & set(built.test["prompt"])


@pytest.mark.parametrize("name", ["countdown", "countdown_sharpened"])
def test_each_committed_countdown_warm_start_is_the_one_its_record_describes(name):
    regime = COUNTDOWN[name]
    path = setting.warm_start_path(0, "countdown", regime.recipe)
    record = json.loads(Path(path).with_suffix(".json").read_text())
    assert record["family"] == "countdown" and record["seed"] == 0 and record.get("recipe", "") == regime.recipe
    assert setting.warm_start_digest(0, "countdown", regime.recipe) == record["sha256"]
    built = setting.build(regime)
    heldout = built.true_success(built.model, built.test).mean()
    assert heldout == pytest.approx(record["heldout_accuracy"], abs=1e-4)


def test_each_countdown_regime_trains_at_the_rate_its_committed_sweep_chose():
    sys.path.insert(0, str(BENCHMARKS.parent))
    from benchmarks import lr_sweep
    from benchmarks.realcpu import results_file

    swept = {}  # the three regimes' sweep, and one of its own for each regime from another warm-start recipe
    own = [f"lr_sweep_{name}" for name, regime in COUNTDOWN.items() if regime.recipe]
    for folder in ("lr_sweep_countdown", *own):
        results = results_file.load(str(BENCHMARKS / "results" / folder / lr_sweep.SCHEDULE / "lr_sweep.json"))
        assert results["schedule"] == lr_sweep.SCHEDULE and results["seeds"] == list(lr_sweep.TUNING_SEEDS)
        assert not set(results["regimes"]) & set(swept)
        swept |= {name: entry["runs"] for name, entry in results["regimes"].items()}
    assert set(swept) == set(COUNTDOWN)
    for name, regime in COUNTDOWN.items():
        runs = swept[name]
        assert regime.learning_rate == float(lr_sweep.best_rate(runs)), name
        rates = sorted(runs, key=float)
        assert 0 < rates.index(lr_sweep.best_rate(runs)) < len(rates) - 1, name  # the grid reached past the best


def test_a_countdown_prompt_fits_the_completion_length_and_the_tokenizer_extends_the_sums():
    from trl_kgps.tasks import tiny

    sums, tokenizer = tiny.build_tokenizer().get_vocab(), countdown.build_tokenizer()
    assert set(sums) < set(tokenizer.get_vocab())
    assert all(tokenizer.unk_token_id not in tokenizer(ops)["input_ids"] for ops in countdown.operator_strings(4))
    longest = max(len(ops) for ops in itertools.chain(countdown.operator_strings(3), countdown.operator_strings(4)))
    assert longest + 1 == setting.grpo_arguments(COUNTDOWN["countdown"])["max_completion_length"]
