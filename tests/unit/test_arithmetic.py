"""The generated arithmetic task: problems against an independent parse, the reward against hand-made cases."""

import pytest

from trl_kgps.tasks.arithmetic import LEVELS, arithmetic_reward, make_problems


# The operand digits of each level, as the module's docstring tables them.
DIGITS = {1: [1, 1], 2: [1, 1, 1], 3: [1, 1, 1, 1], 4: [2, 2]}


def test_every_problem_is_distinct_and_answered_by_its_sum():
    problems = make_problems(600, seed=3)
    assert len(set(problems["prompt"])) == 600
    for prompt, answer, level in zip(problems["prompt"], problems["answer"], problems["level"]):
        assert prompt.endswith("=")
        operands = prompt[:-1].split("+")
        assert [len(o) for o in operands] == DIGITS[level]
        assert all(o == "0" or not o.startswith("0") for o in operands)
        assert answer == str(sum(int(o) for o in operands))


def test_levels_are_drawn_evenly_and_seeded():
    problems = make_problems(2000, seed=0)
    counts = [problems["level"].count(level) for level in LEVELS]
    assert counts[0] == 100  # level 1 holds only 10 x 10 distinct problems: all of them are drawn
    assert all(450 <= c <= 750 for c in counts[1:])  # a repeated draw is redrawn: small levels get fewer
    assert make_problems(50, seed=7) == make_problems(50, seed=7)
    assert make_problems(50, seed=7) != make_problems(50, seed=8)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_problems=0), "num_problems must be >= 1"),
        (dict(num_problems=5, levels=(5,)), "subset of"),
        (dict(num_problems=5, levels=()), "non-empty"),
        (dict(num_problems=101, levels=(1,)), "hold 100 distinct problems"),
    ],
)
def test_bad_requests_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_problems(**kwargs)


def test_reward_reads_the_first_word_of_plain_and_conversational_completions():
    completions = ["12", " 12 and more", "13", "", "1 2", "12.0", [{"role": "assistant", "content": "12"}]]
    assert arithmetic_reward(completions, answer=["12"] * len(completions)) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
