"""
A user's helpers in a module of their own, which reward functions in `test_column_readers` call: the answer column's
name lives in a config object here, so neither the reward's code nor the helper's names it.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Columns:
    answer: str = "cop"  # MedMCQA's answer column: the index of the correct option
    subject: str = "subject_name"


COLUMNS = Columns()


def gold(kwargs):
    """The answer column of a batch, from a reward function's `**kwargs`."""
    return kwargs[COLUMNS.answer]


def gold_of_row(row):
    """The answer of one row, as a `{column: value}` dict."""
    return row[COLUMNS.answer]
