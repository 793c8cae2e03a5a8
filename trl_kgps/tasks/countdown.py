"""
Countdown (CD-34, the paper's planning task): combine 3 or 4 given numbers, each exactly once, with `+ - * /` to
reach a target.

```text
Using the numbers [44, 19, 35], create an equation that equals 98. ...  ->  <answer> 44 + 19 + 35 </answer>
```

Every puzzle is solvable by construction: its target is the value of a random expression over its numbers whose
intermediate results are all positive integers (classic Countdown rules). The verifier is more lenient about the
route than the generator: any expression over exactly the given numbers counts, intermediate fractions and negative
values included (`6 / (1 - 3 / 4)` reaches 24 from 1, 3, 4, 6), evaluated exactly with fractions. Prompts are
conversational (a system and a user message); the expression is read from the completion's last
`<answer>...</answer>`.
"""

import ast
import operator
import random
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from .arithmetic import completion_text


if TYPE_CHECKING:
    from datasets import Dataset

NUMBER_COUNTS = (3, 4)  # CD-34: three or four numbers a puzzle
MAX_NUMBER = 99  # numbers are drawn uniformly from 1..MAX_NUMBER
MAX_TARGET = 100  # targets lie in 1..MAX_TARGET

SYSTEM_PROMPT = (
    "You are a helpful assistant. You first think about the reasoning process in the mind and then provide the user "
    "with the answer."
)

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_EXPRESSION = re.compile(r"[0-9+\-*/()\s]+")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def make_problems(num_problems: int, seed: int = 0) -> dict[str, list]:
    """
    `num_problems` distinct, solvable puzzles (no two share both their numbers and their target).

    Returns:
        `dict` with `prompt` (the conversation), `numbers` (`[44, 19, 35]`) and `target` (`98`) lists, each of
        length `num_problems`.
    """
    if num_problems < 1:
        raise ValueError(f"make_problems(num_problems={num_problems}): num_problems must be >= 1.")
    rng = random.Random(seed)
    seen, columns = set(), {"prompt": [], "numbers": [], "target": []}
    while len(columns["target"]) < num_problems:
        numbers, target = _puzzle(rng.choice(NUMBER_COUNTS), rng)
        key = (tuple(sorted(numbers)), target)
        if key in seen:
            continue
        seen.add(key)
        columns["prompt"].append(_prompt(numbers, target))
        columns["numbers"].append(numbers)
        columns["target"].append(target)
    return columns


def make_dataset(num_problems: int, seed: int = 0) -> "Dataset":
    """[`make_problems`] as a `datasets.Dataset` with columns `prompt`, `numbers`, `target`."""
    from datasets import Dataset

    return Dataset.from_dict(make_problems(num_problems, seed))


def _puzzle(count: int, rng: random.Random) -> tuple[list[int], int]:
    """`count` numbers and a target in 1..MAX_TARGET that a random expression over them reaches."""
    while True:  # about one draw in four stays within MAX_TARGET
        numbers = [rng.randint(1, MAX_NUMBER) for _ in range(count)]
        values = list(numbers)
        while len(values) > 1:
            # Two values at random, a >= b, combined by an operation whose result is again a positive integer:
            # [44, 19, 35] -> (44, 35) -> [19, 79] -> (79, 19) -> [98].
            i, j = rng.sample(range(len(values)), 2)
            a, b = max(values[i], values[j]), min(values[i], values[j])
            results = [a + b, a * b] + ([a - b] if a > b else []) + ([a // b] if a % b == 0 else [])
            values = [value for k, value in enumerate(values) if k not in (i, j)] + [rng.choice(results)]
        if values[0] <= MAX_TARGET:
            return numbers, values[0]


def _prompt(numbers: list[int], target: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"Using the numbers {numbers}, create an equation that equals {target}. You can use basic "
            "arithmetic operations (+, -, *, /) and each number must be used exactly once. Show your work in <think> "
            "</think> tags. And return the final expression, alone, in <answer> </answer> tags, for example "
            "<answer> (1 + 2) / 3 </answer>.",
        },
    ]


def evaluate(expression: str, numbers: Sequence[int]) -> Fraction | None:
    """
    The exact value of `expression` if it combines exactly `numbers`, each once, with binary `+ - * /` and
    parentheses; otherwise `None`: another character (names, calls, `**`, `.`, `=`), a unary sign, a number missing,
    reused or added, a division by zero, or a malformed expression. Nothing is executed: the expression is parsed
    with `ast` and its tree evaluated node by node over `Fraction`s.
    """
    # Only digits, operators, parentheses and spaces, and exactly one binary operator fewer than numbers. This also
    # keeps the parser's input small: a long run of operators makes `ast.parse` raise RecursionError or MemoryError.
    if not _EXPRESSION.fullmatch(expression) or len(re.findall(r"[-+*/]", expression)) != len(numbers) - 1:
        return None
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
        literals = []
        value = _value(tree, literals)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None
    return value if sorted(literals) == sorted(numbers) else None


def _value(node: ast.AST, literals: list[int]) -> Fraction:
    """Evaluates an integer literal or a binary `+ - * /` of two such trees; collects the literals it meets."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        literals.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left, literals), _value(node.right, literals))
    raise ValueError(f"{type(node).__name__} is not allowed in a Countdown answer")


def countdown_reward(completions: list, numbers: list[list[int]], target: list[int], **kwargs) -> list[float]:
    """
    1.0 where the completion's last `<answer>...</answer>` holds an expression over exactly the puzzle's numbers
    (see [`evaluate`]) equal to its target, else 0.0. A TRL reward function: completions plain (`str`) or
    conversational (a list of messages); the dataset's `numbers` and `target` columns arrive as keywords.
    """
    rewards = []
    for completion, given, goal in zip(completions, numbers, target):
        answers = _ANSWER.findall(completion_text(completion))
        value = evaluate(answers[-1], given) if answers else None
        rewards.append(float(value is not None and value == goal))
    return rewards
