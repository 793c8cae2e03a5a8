"""
The prompt features KGPS shares across prompts: the train dataset's metadata columns, found by `find_metadata` or
named by `feature_columns`, read by `read_features`.
"""

import dataclasses
import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import NO_METADATA, KGPSConfig
from ..engine.protocol import PromptSelector
from .registry import build_selector


# Columns that hold the model's input (the prompt, a conversation, media), never metadata about the prompt.
INPUT_COLUMNS = frozenset(
    {"prompt", "messages", "completion", "chosen", "rejected", "image", "images", "video", "audio"}
)
# A metadata column groups prompts: at most this many distinct values ...
MAX_METADATA_VALUES = 64
# ... and at most one distinct value per this many rows on average; more, and it names prompts rather than groups.
MIN_ROWS_PER_VALUE = 2


@dataclasses.dataclass
class Metadata:
    """
    What `find_metadata` read from a dataset.

    Attributes:
        columns (`list[str]`): the metadata columns, in the dataset's order.
        values (`dict[str, int]`): the distinct values of each.
        skipped (`dict[str, str]`): every other column, with why it is not metadata.
    """

    columns: list[str]
    values: dict[str, int]
    skipped: dict[str, str]

    def describe(self) -> str:
        """One line for the log: what KGPS shares by, and what it does not read."""
        skipped = "; ".join(f"`{c}`: {why}" for c, why in self.skipped.items())
        if self.columns:
            read = ", ".join(f"`{c}` ({self.values[c]} values)" for c in self.columns)
            said = f"KGPS shares what it learns across prompts by {read}"
        else:
            said = "KGPS found no metadata column to share by, and keeps one filter per prompt"
        return said + (f" (not read: {skipped})" if skipped else "")


def find_metadata(dataset: Any, reward_funcs: Sequence[Any] = ()) -> Metadata:
    """
    The columns of `dataset` that say which prompts are alike: labels (strings, integers, booleans) with at least 2
    and at most `MAX_METADATA_VALUES` distinct values, each shared by `MIN_ROWS_PER_VALUE` rows on average, no value
    missing. Never the model's input (`INPUT_COLUMNS`), and never a column a reward function reads: one whose name
    its signature lists (e.g. `answer`, `solution`), since it may give the answer away.

    Args:
        dataset: a map-style dataset with `column_names` (a `datasets.Dataset`).
        reward_funcs (`Sequence`): the trainer's reward functions (callables, models or model ids).
    """
    read_by_rewards = {name: _name(f) for f in reward_funcs for name in _parameter_names(f)}
    kinds = getattr(dataset, "features", None) or {}
    columns, values, skipped = [], {}, {}
    for column in getattr(dataset, "column_names", None) or []:
        if column in INPUT_COLUMNS:
            skipped[column] = "the model's input"
        elif column in read_by_rewards:
            skipped[column] = f"the reward function {read_by_rewards[column]} reads it"
        elif (why := _not_labels(kinds.get(column))) is not None:
            skipped[column] = why
        else:
            distinct, why = _groups(dataset[column], len(dataset))
            if why is None:
                columns.append(column)
                values[column] = distinct
            else:
                skipped[column] = why
    return Metadata(columns, values, skipped)


def _parameter_names(reward_func: Any) -> list[str]:
    """The arguments a reward function names in its signature (none for a reward model or a model id)."""
    if not callable(reward_func) or hasattr(reward_func, "forward"):
        return []
    try:
        parameters = inspect.signature(reward_func).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _name(reward_func: Any) -> str:
    return getattr(reward_func, "__name__", None) or type(reward_func).__name__


def _not_labels(kind: Any) -> str | None:
    """Why a column of this `datasets` feature type holds no labels; `None` for labels (or an unknown type)."""
    if kind is None or type(kind).__name__ == "ClassLabel":
        return None
    dtype = getattr(kind, "dtype", None)
    if type(kind).__name__ == "Value" and (dtype in ("string", "large_string", "bool") or dtype.startswith("int")):
        return None
    return f"holds {dtype or type(kind).__name__} values, not labels"


def _groups(values: Sequence[Any], rows: int) -> tuple[int, str | None]:
    """`(distinct values, why they do not group the rows)`: the reason is `None` when they do."""
    if any(v is None or (isinstance(v, float) and v != v) for v in values):
        return 0, "some values are missing"
    if not all(isinstance(v, (str, int, np.integer)) for v in values):  # bools are ints
        return 0, "holds values other than labels"
    distinct = len(set(values))
    if distinct < 2:
        return distinct, "one value"
    if distinct > MAX_METADATA_VALUES:
        return distinct, f"{distinct} distinct values, more than {MAX_METADATA_VALUES}"
    if distinct * MIN_ROWS_PER_VALUE > rows:
        return distinct, f"{distinct} distinct values in {rows} rows: it names prompts rather than grouping them"
    return distinct, None


def with_metadata(
    dataset: Any, config: KGPSConfig, reward_funcs: Sequence[Any] = ()
) -> tuple[KGPSConfig, Metadata | None]:
    """
    `(config, metadata)`: `config` naming the feature columns KGPS reads from `dataset`, and what `find_metadata`
    found. It looks only when `config.feature_columns` is unset and `shared_variance > 0` (else `metadata` is `None`
    and `config` is returned as it is). The columns it finds are named; when it finds none, KGPS keeps one filter per
    prompt: the fields of `NO_METADATA` that `config` leaves at their defaults take its values.
    """
    if config.feature_columns is not None or config.shared_variance == 0:
        return config, None
    metadata = find_metadata(dataset, reward_funcs)
    if metadata.columns:
        return dataclasses.replace(config, feature_columns=metadata.columns), metadata
    defaults = {f.name: f.default for f in dataclasses.fields(KGPSConfig)}
    unset = {name: value for name, value in NO_METADATA.items() if getattr(config, name) == defaults[name]}
    return dataclasses.replace(config, **unset), metadata


def selector_for(name: str, dataset: Any, config: KGPSConfig, seed: int) -> PromptSelector:
    """
    The selector `name` (see `selectors.SELECTORS`) over the rows of `dataset`; KGPS shares across them by the
    columns `config.feature_columns` (none when unset or `[]`; `with_metadata` names the ones a dataset holds). Raises
    `ValueError` for a column the dataset lacks or values KGPS cannot use.
    """
    if name != "kgps":
        return build_selector(name, len(dataset), config, seed)
    config = dataclasses.replace(config, feature_columns=config.feature_columns or None)
    return build_selector(name, len(dataset), config, seed, read_features(dataset, config.feature_columns))


def read_features(dataset: Any, columns: list[str] | None) -> dict[str, np.ndarray] | None:
    """
    `{column: values}` for `KGPSSelector(features=...)`, one value per row of `dataset` in its order (so identical on
    every rank), or `None` when `columns` is `None`. The values' checks (missing values, types) are `design`'s.

    Raises:
        `ValueError`: a column the dataset does not have, naming the columns it has.
    """
    if columns is None:
        return None
    available = list(getattr(dataset, "column_names", None) or [])
    missing = [column for column in columns if column not in available]
    if missing:
        raise ValueError(
            f"feature_columns names {missing}, which the train dataset does not have (its columns: {available}). "
            "Name columns it has, e.g. MATH's 'level' and 'type', or leave feature_columns unset for one factor "
            "shared by all prompts."
        )
    features = {}
    for column in columns:
        values = dataset[column]
        if values and isinstance(values[0], (list, tuple)):  # an embedding column: one vector per row
            try:
                values = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    f"feature column {column!r} holds vectors that are not all numbers of one length: an embedding "
                    "column needs a float vector of the same length in every row."
                ) from None
        else:
            values = np.asarray(values, dtype=object if any(v is None for v in values) else None)
        features[column] = values
    return features
