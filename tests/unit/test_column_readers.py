"""
The one line never shares by a column a reward function or an environment may read, however it reaches the column:
TRL hands every column to every reward function as a keyword argument, and most read them through `**kwargs`.
"""

import dataclasses
import functools
import operator

import answer_columns
import numpy as np
import pytest
from answer_columns import gold

from trl_kgps.adapters.dataset_columns import find_metadata
from trl_kgps.adapters.reward_reads import ColumnReaders, says_answer


datasets = pytest.importorskip("datasets")

N = 60


def dataset_with(column: str):
    """`prompt`, `level` (4 values), `source` (2) and `column`, ten values 0-9 that give the answer away."""
    return datasets.Dataset.from_dict(
        {
            "prompt": [f"problem {i}" for i in range(N)],
            column: [i % 10 for i in range(N)],
            "level": [1 + i % 4 for i in range(N)],
            "source": ["a", "b"] * (N // 2),
        }
    )


def found(column, *reward_funcs, environments=()):
    return find_metadata(dataset_with(column), ColumnReaders.of(reward_funcs, environments))


# The faults as users write them: the answer read through **kwargs under five names.
READ_THROUGH_KWARGS = {
    "answer": lambda completions, **kwargs: [float(a < 3) for a in kwargs["answer"]],
    "solution": lambda completions, **kwargs: [float(a < 3) for a in kwargs["solution"]],
    "ground_truth": lambda completions, **kwargs: [float(a < 3) for a in kwargs.get("ground_truth")],
    "label": lambda completions, **kwargs: [float(a < 3) for a in kwargs["label"]],
    "target": lambda completions, **kwargs: [float(a < 3) for a in kwargs["target"]],
}


@pytest.mark.parametrize("column", sorted(READ_THROUGH_KWARGS))
def test_a_column_a_reward_reads_through_kwargs_is_never_shared_by(column):
    metadata = found(column, READ_THROUGH_KWARGS[column])
    assert metadata.columns == ["level", "source"]
    assert metadata.skipped[column] == "the reward function <lambda> takes **kwargs and names it in its code"


def score_y(completions, **kwargs):
    return [float(y < 3) for y in kwargs["y"]]


def _helper(kwargs):
    return [float(y < 3) for y in kwargs["y"]]


def calls_a_helper(completions, **kwargs):
    return _helper(kwargs)


async def async_reward(completions, **kwargs):
    return [float(y < 3) for y in kwargs["y"]]


class CallableReward:
    """A reward as a class whose `__call__` takes `**kw`, reading the column its constructor was given."""

    def __init__(self, key):
        self.key = key

    def __call__(self, completions, **kw):
        return [float(y < 3) for y in kw[self.key]]


def without_wraps(func):
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


@without_wraps
def decorated_by_name(completions, y, **kwargs):
    return [float(v < 3) for v in y]


def by_key(completions, key, **kwargs):
    return [float(v < 3) for v in kwargs[key]]


class Environment:
    """A TRL environment whose `reset(**row)` keeps the answer."""

    def reset(self, **row):
        self.answer = row["y"]

    def get_reward(self):
        return 1.0


def make_environment():
    return Environment()


@pytest.mark.parametrize("reward", [score_y, async_reward], ids=["kwargs", "async"])
def test_a_column_with_a_neutral_name_is_excluded_by_what_the_code_names(reward):
    metadata = found("y", reward)
    assert metadata.skipped["y"].endswith("names it in its code")
    assert metadata.columns == ["level", "source"]


def may_read_any_column(reward_name):
    return f"the reward function {reward_name} uses **kwargs other than as kwargs['name'] or kwargs.get('name') ("


@pytest.mark.parametrize(
    "reward, name",
    [
        (calls_a_helper, "calls_a_helper"),  # a function of its own module that it hands kwargs to
        (CallableReward("y"), "CallableReward"),  # the name the object holds
        (decorated_by_name, "wrapper"),  # a decorator without functools.wraps, which passes **kwargs on
        (without_wraps(score_y), "wrapper"),
        (functools.partial(by_key, key="y"), "partial"),
    ],
    ids=["helper", "callable_object", "decorated_signature", "decorated_kwargs", "partial"],
)
def test_a_reward_that_passes_kwargs_on_or_reads_a_computed_name_may_read_every_column(reward, name):
    metadata = found("y", reward)
    assert metadata.columns == []
    for column in ("y", "level", "source"):
        assert metadata.skipped[column].startswith(may_read_any_column(name))
        assert metadata.skipped[column].endswith("), so it may read any column")


# The ways a reward reaches MedMCQA's answer column `cop` (on no list of answer words) that reading its code cannot
# follow to the name: the one line must not share by `cop`, nor by any other column it cannot rule out.
class ClassAttributeReward:
    column = "cop"

    def __call__(self, completions, **kwargs):
        return [float(c == str(a)) for c, a in zip(completions, kwargs[self.column])]


def gold_by_module_attribute(completions, **kwargs):
    return [float(c == str(a)) for c, a in zip(completions, answer_columns.gold(kwargs))]


def gold_by_imported_name(completions, **kwargs):
    return [float(c == str(a)) for c, a in zip(completions, gold(kwargs))]


def gold_per_row(completions, **kwargs):
    rows = [dict(zip(kwargs, values)) for values in zip(*kwargs.values())]
    return [float(c == str(answer_columns.gold_of_row(row))) for c, row in zip(completions, rows)]


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    answer_column: str = "cop"


CFG = TaskConfig()
ANSWER = operator.itemgetter("cop")


def gold_by_config_object(completions, **kwargs):
    return [float(c == str(a)) for c, a in zip(completions, kwargs[CFG.answer_column])]


def gold_by_itemgetter(completions, **kwargs):
    return [float(c == str(a)) for c, a in zip(completions, ANSWER(kwargs))]


@pytest.mark.parametrize(
    "reward, name",
    [
        (ClassAttributeReward(), "ClassAttributeReward"),
        (gold_by_module_attribute, "gold_by_module_attribute"),
        (gold_by_imported_name, "gold_by_imported_name"),
        (gold_per_row, "gold_per_row"),
        (gold_by_config_object, "gold_by_config_object"),
        (gold_by_itemgetter, "gold_by_itemgetter"),
    ],
    ids=["class_attribute", "helper_module_attribute", "helper_imported_by_name", "helper_per_row", "config_object",
         "itemgetter"],
)  # fmt: skip
def test_an_answer_column_a_reward_reaches_by_a_path_the_code_reading_cannot_follow_is_never_shared_by(reward, name):
    metadata = found("cop", reward)
    assert "cop" not in metadata.columns and metadata.columns == []
    assert metadata.skipped["cop"].startswith(may_read_any_column(name))
    assert "test_column_readers.py, line " in metadata.skipped["cop"]  # where the reward's code uses kwargs so
    assert "(not read: " in metadata.describe() and name in metadata.describe()


def test_rewards_that_read_constant_names_still_leave_the_metadata_to_share_by():
    # TRL's own reward functions, which take **kwargs and use none of it, a `solution` parameter, and kwargs["answer"]
    # (with .get, in a comprehension, in a nested lambda): only what they name is left out.
    from trl.rewards import (
        accuracy_reward,
        get_cosine_scaled_reward,
        get_repetition_penalty_reward,
        get_soft_overlong_punishment,
        reasoning_accuracy_reward,
        think_format_reward,
    )

    def solution_reward(completions, solution, **kwargs):
        return [float(c == s) for c, s in zip(completions, solution)]

    def answer_reward(completions, **kwargs):
        answers, fallback = kwargs["answer"], kwargs.get("answer", [])
        return [float(c == answers[i] or (lambda: kwargs["answer"])() == fallback) for i, c in enumerate(completions)]

    trl_rewards = [
        accuracy_reward,
        reasoning_accuracy_reward,
        think_format_reward,
        get_cosine_scaled_reward(max_len=100),
    ]
    trl_rewards += [get_repetition_penalty_reward(), get_soft_overlong_punishment(100, 20)]
    from trl_kgps.demo.train import accuracy_reward as demo_reward  # trl-kgps train's, around TRL's

    metadata = found("answer", answer_reward, solution_reward, demo_reward, *trl_rewards)
    assert metadata.columns == ["level", "source"]
    assert metadata.skipped["answer"] == "the reward function answer_reward takes **kwargs and names it in its code"


def test_an_environment_that_reads_the_row_in_reset_is_a_reader_too():
    reward = lambda completions, **kwargs: [0.0] * len(completions)  # noqa: E731
    assert "y" in found("y", reward).columns  # nothing reads it: ten values, six rows each, a label
    for environment in (Environment(), Environment):  # an instance TRL probed, or the class
        metadata = found("y", reward, environments=[environment])
        assert metadata.skipped["y"] == "the environment Environment takes **kwargs and names it in its code"
    # A factory, as the asynchronous trainer keeps it: the environments it builds are not there to read.
    metadata = found("y", reward, environments=[make_environment])
    assert metadata.columns == []
    assert metadata.skipped["level"] == (
        "the environment factory make_environment builds environments whose reset(**row) KGPS cannot read before "
        "training, so it may read any column"
    )


def test_what_a_reward_does_not_read_is_still_shared_by():
    # A **kwargs reward that names `answer` leaves `level` and `source`; a vocabulary it holds (a library object, a
    # big dict) names every word and is not read as the columns it reads.
    vocabulary = {f"word{i}": i for i in range(1000)} | {"level": 1000, "source": 1001}

    def reward(completions, **kwargs):
        return [float(len(vocabulary) > a) for a in kwargs["answer"]]

    metadata = found("answer", reward, np.mean)
    assert metadata.columns == ["level", "source"]
    assert "answer" in metadata.skipped


def test_a_reward_that_computes_the_name_it_reads_may_read_every_column():
    names = ["ans", "wer"]

    def reward(completions, **kwargs):
        return [float(a < 3) for a in kwargs["".join(names)]]

    for column in ("answer", "y"):
        metadata = found(column, reward)
        assert metadata.columns == [] and metadata.skipped[column].startswith(may_read_any_column("reward"))


@pytest.mark.parametrize(
    "column, answer",
    [
        ("answer", True),
        ("final_answer", True),
        ("ground_truth", True),
        ("goldLabel", True),
        ("test_cases", True),
        ("expected_output", True),
        ("level", False),
        ("type", False),
        ("source", False),
        ("difficulty", False),
        ("subject", False),
    ],
)
def test_a_column_name_says_answer_by_its_words(column, answer):
    assert says_answer(column) is answer
