"""
The suite's second task family: Countdown at the character level, with every prompt's success rate exact.

A puzzle is 3 or 4 one-digit numbers in a fixed order and a target; the answer is the operator string that joins
them, read with the standard precedence (`*` and `/` before `+` and `-`, each left to right, over exact fractions):

| prompt | answer | equation |
|---|---|---|
| `7 3 2=23` | `*+` | 7 * 3 + 2 = 23 |
| `8 4 2 6=10` | `/*+`, `+*-`, `*/-` or `/++` | 8 / 4 * 2 + 6 = 8 + 4 * 2 - 6 = 8 * 4 / 2 - 6 = 8 / 4 + 2 + 6 = 10 |

TinyZero's rule (each number used once, the value equal to the target) with the numbers' order fixed by the prompt,
so the answer space is the `4^(n-1)` operator strings (16 or 64) and a prompt's exact success rate is the sum, over the
strings that reach its target, of the policy's teacher-forced probability of that string followed by `<eos>`
(`exact_success`). The reward is 1 for a correct string and 0 otherwise: the format is fixed (a completion either is
an operator string of the right length or is wrong), so TinyZero's 0.1 format reward does not apply.

The warm start is shown right operator strings only; the `"sharpened"` recipe (`WARM_START_ACCURACY`) shows the right
string at a rate set by the number count and otherwise a wrong one drawn uniformly, as the sums' warm start shows right
answers at a rate set by the level, so that RL has more to sharpen (`warm_start_answers`).

Every target is reachable by construction: it is the value of an operator string drawn uniformly, redrawn until the
value is an integer in `0..MAX_TARGET`. The level of a puzzle is its count of numbers: 4-number puzzles have four
times as many strings to choose from and fewer of them right, so they are the harder ones.
"""

import itertools
import re
from collections.abc import Sequence
from fractions import Fraction
from functools import cache

import numpy as np


OPERATORS = "+-*/"
NUMBER_COUNTS = (3, 4)
MAX_TARGET = 99
# The sums' alphabet (`trl_kgps.tasks.arithmetic.ALPHABET`) with the other operators and the space between numbers:
# a superset, so the sums' tokenizer and warm starts stay as they are.
VOCABULARY = "0123456789+=" + " -*/"
# The share of a warm start's examples whose operator string is right, per number count, by recipe (the family's own
# warm start: all of them).
WARM_START_ACCURACY = {"sharpened": {3: 0.75, 4: 0.4}}
_PROMPT = re.compile(r"([1-9](?: [1-9])+)=(\d+)")


def value(numbers: Sequence[int], operators: str) -> Fraction | None:
    """
    The exact value of `numbers[0] operators[0] numbers[1] ...` with `*` and `/` before `+` and `-` (each left to
    right), `None` on a division by zero.

    >>> value([7, 3, 2], "*+"), value([8, 4, 2], "-/"), value([3, 5, 2], "/*")
    (Fraction(23, 1), Fraction(6, 1), Fraction(6, 5))
    """
    if len(operators) != len(numbers) - 1 or set(operators) - set(OPERATORS):
        raise ValueError(f"{operators!r} is not {len(numbers) - 1} of {OPERATORS!r} for {len(numbers)} numbers.")
    terms, term = [], Fraction(numbers[0])
    # 8 - 4 / 2 -> terms [8, -2]: a product or quotient grows the current term, `+` or `-` starts a new one
    for operator, number in zip(operators, numbers[1:]):
        if operator == "*":
            term *= number
        elif operator == "/":
            if number == 0:
                return None
            term /= number
        else:
            terms.append(term)
            term = Fraction(number if operator == "+" else -number)
    return sum(terms, term)


def operator_strings(count: int) -> list[str]:
    """The `4^(count-1)` operator strings for `count` numbers, in lexicographic order of `OPERATORS`."""
    return ["".join(ops) for ops in itertools.product(OPERATORS, repeat=count - 1)]


@cache
def solutions(numbers: tuple[int, ...], target: int) -> tuple[str, ...]:
    """Every operator string that makes `numbers` equal `target`, in `operator_strings` order."""
    return tuple(ops for ops in operator_strings(len(numbers)) if value(numbers, ops) == target)


def prompt_text(numbers: Sequence[int], target: int) -> str:
    """`[7, 3, 2], 23` -> `"7 3 2=23"`."""
    return " ".join(map(str, numbers)) + f"={target}"


def parse(prompt: str) -> tuple[tuple[int, ...], int]:
    """`"7 3 2=23"` -> `((7, 3, 2), 23)`; also reads a reference equation, `"7*3+2=23"`."""
    match = _PROMPT.fullmatch(re.sub(r"[-+*/]", " ", prompt))
    if match is None:
        raise ValueError(f"{prompt!r} is not a Countdown prompt such as '7 3 2=23'.")
    return tuple(int(n) for n in match.group(1).split()), int(match.group(2))


def puzzle(count: int, rng: np.random.Generator) -> tuple[str, str, int]:
    """
    A puzzle of `count` numbers from `rng`: `(prompt, reference equation, count)`, e.g. `("7 3 2=23", "7*3+2=23", 3)`.
    The numbers are drawn from 1..9 and an operator string uniformly, both redrawn until the value is an integer in
    `0..MAX_TARGET`.
    """
    while True:
        numbers = rng.integers(1, 10, count).tolist()
        operators = "".join(rng.choice(list(OPERATORS), count - 1))
        result = value(numbers, operators)
        if result.denominator == 1 and 0 <= result <= MAX_TARGET:
            target = int(result)
            equation = "".join(f"{n}{op}" for n, op in zip(numbers, operators)) + f"{numbers[-1]}={target}"
            return prompt_text(numbers, target), equation, count


def distinct_puzzles(count: int, levels: Sequence[int], taken: set, rng: np.random.Generator) -> dict[str, list]:
    """
    `count` distinct puzzles not in `taken` (which grows by them), each of a number count drawn uniformly from
    `levels`: `{"prompt", "answer" (a reference equation), "level" (the number count)}` lists.
    """
    columns = {"prompt": [], "answer": [], "level": []}
    while len(columns["prompt"]) < count:
        prompt, equation, level = puzzle(int(rng.choice(levels)), rng)
        if prompt in taken:
            continue
        taken.add(prompt)
        for key, item in zip(columns, (prompt, equation, level)):
            columns[key].append(item)
    return columns


def warm_start_answers(
    prompts: Sequence[str], answers: Sequence[str], recipe: str, rng: np.random.Generator
) -> list[str]:
    """
    The operator strings a warm start of `recipe` is shown for `prompts`: each right answer kept at the rate
    `WARM_START_ACCURACY[recipe]` gives its number count, otherwise replaced by one of the puzzle's wrong strings drawn
    uniformly. One uniform draw per example, then one more per replaced example, from `rng`.
    """
    if recipe not in WARM_START_ACCURACY:
        raise ValueError(f"recipe={recipe!r} is not one of {sorted(WARM_START_ACCURACY)}.")
    shown = []
    for prompt, right in zip(prompts, answers):
        numbers, target = parse(prompt)
        if rng.random() < WARM_START_ACCURACY[recipe][len(numbers)]:
            shown.append(right)
            continue
        wrong = [ops for ops in operator_strings(len(numbers)) if ops not in solutions(numbers, target)]
        shown.append(wrong[rng.integers(len(wrong))])
    return shown


def countdown_reward(completions: list, answer: list[str], **kwargs) -> list[float]:
    """
    1.0 where the completion is an operator string that makes the puzzle's numbers (in their order) equal its target,
    else 0.0 — a TRL reward function. It reads the numbers and the target from the `answer` column, a reference
    equation (`"7*3+2=23"`), and accepts any string that reaches the target, not only the reference's: the column is
    named `answer` because the suite's methods hand a reward that column (the one line keeps `prompt`, `answer` and
    `level`).
    """
    rewards = []
    for completion, equation in zip(completions, answer):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        numbers, target = parse(equation)
        right = len(text) == len(numbers) - 1 and not set(text) - set(OPERATORS) and value(numbers, text) == target
        rewards.append(float(right))
    return rewards


def exact_success(model, tokenizer, prompts: Sequence[str], batch_size: int = 512) -> np.ndarray:
    r"""
    Each prompt's success rate under sampling at temperature 1, shape `(len(prompts),)`: the sum over the operator
    strings `s` that reach its target of \(\pi(s \cdot \text{eos} \mid x)\), each by one teacher-forced pass
    (`trl_kgps.tasks.evaluation.answer_probabilities`), so without sampling noise. What `countdown_reward` accepts
    and this sum counts differ only by completions that interleave special tokens, as for the sums.
    """
    from trl_kgps.tasks.evaluation import answer_probabilities

    prompts = list(prompts)  # a `datasets` column indexed row by row is slow
    pairs = [(row, ops) for row, prompt in enumerate(prompts) for ops in solutions(*parse(prompt))]
    rows = np.array([row for row, _ in pairs], dtype=np.int64)
    p = answer_probabilities(
        model, tokenizer, [prompts[row] for row, _ in pairs], [ops for _, ops in pairs], batch_size
    )
    return np.bincount(rows, weights=p, minlength=len(prompts))


def build_tokenizer():
    """The character tokenizer over `VOCABULARY` (the sums' tokens and `' -*/'`)."""
    from trl_kgps.tasks import tiny

    return tiny.build_tokenizer(VOCABULARY)
