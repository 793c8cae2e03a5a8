"""
Graded arithmetic: `"47+8="` → `"55"`. The package's own task for the demo, the tests and the CPU benchmark.

Difficulty is set by the level, so success rates spread between 0 and 1 for a small model:

| level | problem | example |
|---|---|---|
| 1 | `a+b`, one digit each | `3+5=` → `8` |
| 2 | `a+b+c`, one digit each | `3+5+9=` → `17` |
| 3 | `a+b+c+d`, one digit each | `3+5+9+4=` → `21` |
| 4 | `a+b`, two digits each | `47+38=` → `85` |

Prompts are plain text (no chat template), so any causal LM can continue them; the answer is the completion's first
whitespace-separated word.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np


if TYPE_CHECKING:
    from datasets import Dataset

LEVELS = (1, 2, 3, 4)
LEVEL_NAMES = {1: "a+b", 2: "a+b+c", 3: "a+b+c+d", 4: "ab+cd"}  # what each level's problems are, as in the table
ALPHABET = "0123456789+="  # every character a prompt or an answer can hold


def make_problems(num_problems: int, seed: int = 0, levels: tuple[int, ...] = LEVELS) -> dict[str, list]:
    """
    `num_problems` distinct problems, levels drawn uniformly from `levels`.

    Returns:
        `dict` with `prompt` (`"47+8="`), `answer` (`"55"`) and `level` lists, each of length `num_problems`.
    """
    unknown = sorted(set(levels) - set(LEVELS))
    if num_problems < 1 or unknown or not levels:
        raise ValueError(
            f"make_problems(num_problems={num_problems}, levels={levels}): num_problems must be >= 1 and levels a "
            f"non-empty subset of {LEVELS}."
        )
    if num_problems > _capacity(levels):
        raise ValueError(
            f"levels {levels} hold {_capacity(levels)} distinct problems, fewer than num_problems={num_problems}; "
            "add a harder level."
        )
    return distinct_problems(num_problems, levels, _DIGITS, np.random.default_rng(seed))


def distinct_problems(
    count: int, levels: Sequence[int], digits: dict[int, tuple[int, ...]], rng: np.random.Generator
) -> dict[str, list]:
    """
    `count` distinct sums, each of a level drawn uniformly from `levels` (a repeated problem is redrawn, level
    included), with the operand digits `digits[level]`.

    Returns:
        `dict` with `prompt`, `answer` and `level` lists, each of length `count`.
    """
    seen, columns = set(), {"prompt": [], "answer": [], "level": []}
    while len(columns["prompt"]) < count:
        level = int(rng.choice(levels))
        prompt, answer = sum_problem(digits[level], rng)
        if prompt in seen:
            continue
        seen.add(prompt)
        columns["prompt"].append(prompt)
        columns["answer"].append(answer)
        columns["level"].append(level)
    return columns


def make_dataset(num_problems: int, seed: int = 0, levels: tuple[int, ...] = LEVELS) -> "Dataset":
    """[`make_problems`] as a `datasets.Dataset` with columns `prompt`, `answer`, `level`."""
    from datasets import Dataset

    return Dataset.from_dict(make_problems(num_problems, seed, levels))


# The digits of each operand, per level.
_DIGITS = {1: (1, 1), 2: (1, 1, 1), 3: (1, 1, 1, 1), 4: (2, 2)}


def sum_problem(digits: tuple[int, ...], rng: np.random.Generator) -> tuple[str, str]:
    """A sum of operands with the given numbers of digits (no leading zeros), e.g. `(2, 1)` -> `("47+8=", "55")`."""
    operands = [int(rng.integers(0 if d == 1 else 10 ** (d - 1), 10**d)) for d in digits]
    return "+".join(map(str, operands)) + "=", str(sum(operands))


def _capacity(levels: tuple[int, ...]) -> int:
    """How many distinct prompts `levels` hold."""
    return sum(problem_count(_DIGITS[level]) for level in levels)


def problem_count(digits: tuple[int, ...]) -> int:
    """How many distinct sums have operands of these numbers of digits (no leading zeros)."""
    return int(np.prod([10 if d == 1 else 9 * 10 ** (d - 1) for d in digits]))


def completion_text(completion: "str | list[dict[str, str]]") -> str:
    """The text of a completion, plain (`str`) or conversational (a list of messages)."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def arithmetic_reward(completions: list, answer: list[str], **kwargs) -> list[float]:
    """
    1.0 where a completion's first word is the answer, else 0.0 — a TRL reward function (the dataset's `answer`
    column arrives as a keyword).
    """
    rewards = []
    for completion, expected in zip(completions, answer):
        words = completion_text(completion).split()
        rewards.append(float(bool(words) and words[0] == expected))
    return rewards
