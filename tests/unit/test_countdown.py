"""Countdown: the verifier against hand-computed cases, and every generated puzzle against a brute-force solver."""

import itertools
from fractions import Fraction

import pytest

from trl_kgps.tasks.countdown import (
    MAX_NUMBER,
    MAX_TARGET,
    NUMBER_COUNTS,
    countdown_reward,
    evaluate,
    make_dataset,
    make_problems,
)


def reward(text, numbers, target):
    """The reward of one conversational completion whose content is `text`."""
    return countdown_reward([[{"role": "assistant", "content": text}]], [numbers], [target])[0]


@pytest.mark.parametrize(
    "answer, numbers, target, expected",
    [
        ("2 * 7 + 3", [2, 3, 7], 17, 1.0),
        ("(7 * 2) + 3", [2, 3, 7], 17, 1.0),
        (" 3+7*2 ", [2, 3, 7], 17, 1.0),
        ("6 / (1 - 3 / 4)", [1, 3, 4, 6], 24, 1.0),  # a fractional intermediate result (1/4) is allowed
        ("(8 - 3) * (8 - 3)", [3, 3, 8, 8], 25, 1.0),  # repeated numbers, each used as often as given
        ("2 * 7 - 3", [2, 3, 7], 17, 0.0),  # wrong value: 11
        ("7 + 7 + 3", [2, 3, 7], 17, 0.0),  # 7 reused (and 2 missing), though it makes 17
        ("2 * 7 + 3", [1, 2, 3, 7], 17, 0.0),  # 1 missing
        ("2 * 7 + 3 * 1", [2, 3, 7], 17, 0.0),  # 1 added
        ("20 - 3", [2, 3, 7], 17, 0.0),  # 20 is not 2 and 7
        ("5 / (3 - 3)", [3, 3, 5], 0, 0.0),  # division by zero
        ("-3 + 5 + 2", [2, 3, 5], 4, 0.0),  # a unary minus
        ("2 ** 7 - 3", [2, 3, 7], 125, 0.0),  # ** is not an operation of the game
        ("7 // 2 + 3", [2, 3, 7], 6, 0.0),
        ("2.0 * 7 + 3", [2, 3, 7], 17, 0.0),
        ("2 * 7 + 3 = 17", [2, 3, 7], 17, 0.0),  # the expression alone, as the prompt asks
        ("(2 * 7 + 3", [2, 3, 7], 17, 0.0),  # malformed
        ("", [2, 3, 7], 17, 0.0),
    ],
)
def test_hand_computed_answers(answer, numbers, target, expected):
    assert reward(f"<think>...</think> <answer>{answer}</answer>", numbers, target) == expected


@pytest.mark.parametrize(
    "answer",
    [
        "__import__('pathlib').Path({path!r}).touch() or 2 * 7 + 3",
        "[__import__('pathlib').Path({path!r}).touch() for _ in 'x'] and 2 * 7 + 3",
        "(lambda: __import__('pathlib').Path({path!r}).touch())() or 17",
    ],
)
def test_code_is_never_executed(answer, tmp_path):
    path = tmp_path / "executed"
    assert reward(f"<answer>{answer.format(path=str(path))}</answer>", [2, 3, 7], 17) == 0.0
    assert not path.exists()


@pytest.mark.parametrize("text", ["1" + "+1" * 20_000, "-" * 100_000 + "1", "(" * 300 + "1" + ")" * 300])
def test_huge_answers_are_refused_without_parsing(text):
    """Each of these makes `ast.parse` itself raise (RecursionError, MemoryError, SyntaxError)."""
    assert evaluate(text, [1, 1]) is None


def test_the_last_answer_counts():
    assert reward("<answer>2 * 7 - 3</answer> no: <answer>2 * 7 + 3</answer>", [2, 3, 7], 17) == 1.0
    assert reward("<answer>2 * 7 + 3</answer> no: <answer>2 * 7 - 3</answer>", [2, 3, 7], 17) == 0.0
    assert reward("2 * 7 + 3", [2, 3, 7], 17) == 0.0  # no tags


def test_plain_text_and_conversational_completions():
    completions = ["<answer>2 * 7 + 3</answer>", [{"role": "assistant", "content": "<answer>2 * 7 + 3</answer>"}]]
    assert countdown_reward(completions, [[2, 3, 7]] * 2, [17, 17]) == [1.0, 1.0]


def test_evaluate_is_exact():
    assert evaluate("1 / 3 + 1 / 3", [1, 1, 3, 3]) == Fraction(2, 3)
    assert evaluate("1 / 3 * 3", [1, 3, 3]) == 1  # floats would give 1.0000000000000002 or 0.9999999999999999


def solve(values, target):
    """
    Brute force: an expression over all `values` (pairs of exact value and text) equal to `target`, or None. Combines
    every ordered pair with + - * / (no division by zero) until one value is left.
    """
    if len(values) == 1:
        return values[0][1] if values[0][0] == target else None
    for i, j in itertools.permutations(range(len(values)), 2):
        (a, left), (b, right) = values[i], values[j]
        rest = [value for k, value in enumerate(values) if k not in (i, j)]
        for value, sign in [(a + b, "+"), (a - b, "-"), (a * b, "*")] + ([(a / b, "/")] if b else []):
            expression = solve([*rest, (value, f"({left} {sign} {right})")], target)
            if expression is not None:
                return expression
    return None


def test_every_generated_puzzle_is_solvable():
    problems = make_problems(200, seed=3)
    for numbers, target in zip(problems["numbers"], problems["target"]):
        expression = solve([(Fraction(n), str(n)) for n in numbers], target)
        assert expression is not None, (numbers, target)
        assert reward(f"<answer>{expression}</answer>", numbers, target) == 1.0


def test_generated_puzzles():
    problems = make_problems(500, seed=0)
    counts = {len(numbers) for numbers in problems["numbers"]}
    assert counts == set(NUMBER_COUNTS)
    assert all(1 <= n <= MAX_NUMBER for numbers in problems["numbers"] for n in numbers)
    assert all(1 <= target <= MAX_TARGET for target in problems["target"])
    keys = {(tuple(sorted(n)), t) for n, t in zip(problems["numbers"], problems["target"])}
    assert len(keys) == 500  # distinct puzzles
    system, user = problems["prompt"][0]
    assert (system["role"], user["role"]) == ("system", "user")
    assert f"numbers {problems['numbers'][0]}" in user["content"]
    assert f"equals {problems['target'][0]}." in user["content"]
    assert "<answer>" in user["content"]


def test_generation_is_seeded():
    assert make_problems(20, seed=1) == make_problems(20, seed=1)
    assert make_problems(20, seed=1) != make_problems(20, seed=2)


def test_dataset():
    dataset = make_dataset(4)
    assert dataset.column_names == ["prompt", "numbers", "target"]
    assert dataset[0]["numbers"] == make_problems(4)["numbers"][0]


def test_no_problems_is_refused():
    with pytest.raises(ValueError, match="num_problems=0"):
        make_problems(0)
