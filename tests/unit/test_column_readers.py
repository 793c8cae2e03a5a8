"""
The one line never shares by a column a reward function or an environment may read, however it reaches the column:
TRL hands every column to every reward function as a keyword argument, and most read them through `**kwargs`.
"""

import functools

import numpy as np
import pytest

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


@pytest.mark.parametrize(
    "reward, why",
    [
        (score_y, "names it in its code"),
        (calls_a_helper, "names it in its code"),  # a function of its own module that it calls
        (async_reward, "names it in its code"),
        (CallableReward("y"), "names it in its code"),  # the name the object holds
        (decorated_by_name, "names it in its code"),  # a decorator without functools.wraps hides the signature
        (without_wraps(score_y), "names it in its code"),
        (functools.partial(by_key, key="y"), "names it in its code"),
    ],
    ids=["kwargs", "helper", "async", "callable_object", "decorated_signature", "decorated_kwargs", "partial"],
)
def test_a_column_with_a_neutral_name_is_excluded_by_what_the_code_names(reward, why):
    metadata = found("y", reward)
    assert "y" not in metadata.columns and metadata.skipped["y"].endswith(why)
    assert metadata.columns == ["level", "source"]


def test_an_environment_that_reads_the_row_in_reset_is_a_reader_too():
    reward = lambda completions, **kwargs: [0.0] * len(completions)  # noqa: E731
    assert "y" in found("y", reward).columns  # nothing reads it: ten values, six rows each, a label
    for environment in (Environment(), Environment):  # an instance TRL probed, or the class
        metadata = found("y", reward, environments=[environment])
        assert metadata.skipped["y"] == "the environment Environment takes **kwargs and names it in its code"
    metadata = found("y", reward, environments=[make_environment])  # a factory, as the asynchronous trainer keeps it
    assert metadata.skipped["y"] == "the environment factory make_environment takes **kwargs and names it in its code"


def test_what_a_reward_does_not_read_is_still_shared_by():
    # A **kwargs reward that names `answer` leaves `level` and `source`; a vocabulary it holds (a library object, a
    # big dict) names every word and is not read as the columns it reads.
    vocabulary = {f"word{i}": i for i in range(1000)} | {"level": 1000, "source": 1001}

    def reward(completions, **kwargs):
        return [float(len(vocabulary) > a) for a in kwargs["answer"]]

    metadata = found("answer", reward, np.mean)
    assert metadata.columns == ["level", "source"]
    assert "answer" in metadata.skipped


def test_a_reward_that_computes_the_name_it_reads_is_caught_by_the_name_only():
    names = ["ans", "wer"]

    def reward(completions, **kwargs):
        return [float(a < 3) for a in kwargs["".join(names)]]

    assert found("answer", reward).skipped["answer"].endswith("the column's name says it may hold the answer")
    assert "y" in found("y", reward).columns  # the documented limit: name feature_columns yourself then


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
