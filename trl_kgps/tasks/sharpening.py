"""
The CPU benchmark's task: sums that a small policy half knows, so that RL has much to sharpen and prompt selection
has much to choose from.

RL with verifiable rewards mostly sharpens what a policy can already sometimes do. Here the supervised warm start
shows the right answer only part of the time, at a rate set by the level, and never shows level 4 at all:

| level | problem | warm-start answers that are right | the warmed-up policy |
|---|---|---|---|
| 1 | `a+b+c`, one digit each | all | solves it (success ~0.96) |
| 2 | `a+b+c+d`, one digit each | half | sometimes right: RL can sharpen it |
| 3 | `a+b+c+d+e`, one digit each | a quarter | rarely right: RL can sharpen it |
| 4 | `ab+cd+ef`, two digits each | none (never shown) | out of reach (success ~0) |

A wrong answer is the right one moved by -10, -2, -1, +1, +2 or +10 (a mistake a policy could make; moved up
instead when it would be negative). A pool drawn evenly over the levels then mixes prompts that are already solved,
prompts the policy can learn, and prompts out of its reach, so that about half of a uniform sampler's GRPO groups
are unanimous (all right or all wrong), as on MATH for small models.

`make_splits` draws the RL pool, the held-out set and the warm-start data so that no held-out prompt is ever seen in
the warm start or in RL. The reward is [`~trl_kgps.tasks.arithmetic.arithmetic_reward`].
"""

from typing import TYPE_CHECKING

import numpy as np

from .arithmetic import distinct_problems, problem_count, sum_problem


if TYPE_CHECKING:
    from datasets import Dataset

# Digits of each operand, per level.
LEVELS = {1: (1, 1, 1), 2: (1, 1, 1, 1), 3: (1, 1, 1, 1, 1), 4: (2, 2, 2)}
# Share of right answers in the warm start, per level; a level missing here is not in the warm start.
WARM_START_ACCURACY = {1: 1.0, 2: 0.5, 3: 0.25}
WRONG_ANSWER_OFFSETS = (-10, -2, -1, 1, 2, 10)


def make_splits(
    num_train: int, num_eval: int, num_warm_start: int, seed: int = 0
) -> tuple["Dataset", "Dataset", dict[str, list]]:
    """
    The RL pool, the held-out set and the warm-start data, with levels drawn evenly.

    Args:
        num_train (`int`): distinct prompts in the RL pool.
        num_eval (`int`): distinct held-out prompts, none of them in the pool or the warm start.
        num_warm_start (`int`): warm-start examples, levels drawn evenly from `WARM_START_ACCURACY`, problems drawn
            with replacement among those in neither split, answers right at the level's rate.

    Returns:
        `(train, eval, warm_start)`: two `datasets.Dataset` with columns `prompt` (`"3+5+9="`), `answer` (`"17"`)
        and `level`, and a dict of lists with the same keys whose answers are the warm start's (partly wrong) targets.
    """
    from datasets import Dataset

    if min(num_train, num_eval, num_warm_start) < 1:
        raise ValueError(
            f"make_splits(num_train={num_train}, num_eval={num_eval}, num_warm_start={num_warm_start}): each must be "
            ">= 1."
        )
    smallest = min(problem_count(digits) for digits in LEVELS.values())
    if (num_train + num_eval) // len(LEVELS) + 1 > smallest // 2:
        raise ValueError(
            f"num_train + num_eval = {num_train + num_eval} would take over half of the {smallest} distinct problems "
            "of the smallest level, leaving too few for the warm start: ask for fewer prompts."
        )
    rng = np.random.default_rng(seed)
    held = distinct_problems(num_train + num_eval, sorted(LEVELS), LEVELS, rng)
    train = {key: values[:num_train] for key, values in held.items()}
    heldout = {key: values[num_train:] for key, values in held.items()}
    taken = set(held["prompt"])
    warm = {"prompt": [], "answer": [], "level": []}
    levels = sorted(WARM_START_ACCURACY)
    while len(warm["prompt"]) < num_warm_start:
        level = int(rng.choice(levels))
        prompt, answer = sum_problem(LEVELS[level], rng)
        while prompt in taken:  # redrawn within the level, which keeps the levels even
            prompt, answer = sum_problem(LEVELS[level], rng)
        warm["prompt"].append(prompt)
        warm["answer"].append(answer if rng.random() < WARM_START_ACCURACY[level] else wrong_answer(answer, rng))
        warm["level"].append(level)
    return Dataset.from_dict(train), Dataset.from_dict(heldout), warm


def wrong_answer(answer: str, rng: np.random.Generator) -> str:
    """The right `answer` moved by one of `WRONG_ANSWER_OFFSETS`, moved up instead when it would be negative."""
    offset = int(rng.choice(WRONG_ANSWER_OFFSETS))
    value = int(answer)
    return str(value + offset if value + offset >= 0 else value - offset)
