"""
What KGPS reads from the train dataset: its columns through Arrow (whole columns, never value by value, whatever
format `set_format` gave the dataset), the metadata columns the one line shares by (`find_metadata`,
`with_metadata`), and the values of the columns it shares by (`read_features`).
"""

import dataclasses
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import NO_METADATA, KGPSConfig
from ..engine.protocol import PromptSelector
from ..selectors.prior_rates import Rates
from ..selectors.registry import build_selector
from ..selectors.shared_factor import MAX_CATEGORICAL_VALUES
from .reward_reads import ColumnReaders


# Columns that hold the model's input (the prompt, a conversation, media), never metadata about the prompt.
INPUT_COLUMNS = frozenset(
    {"prompt", "messages", "completion", "chosen", "rejected", "image", "images", "video", "audio"}
)
# A metadata column groups prompts: at most this many distinct values ...
MAX_METADATA_VALUES = 64
# ... each shared by at least this many rows; a value on one row names a prompt rather than a group.
MIN_ROWS_PER_VALUE = 2
# A column with more distinct values than the limit in its first rows (a text, an id) is refused from those alone.
_FIRST_ROWS = 4096
# What names a column of success rates another model measured (Big-Math's `llama8b_solve_rate`, Polaris's
# `difficulty`, INTELLECT-3-RL's `avg@8_qwen3_4b`): the one line names such a column whose values lie in [0, 1] in its
# log line (`find_metadata`), and starts from it when `prior_column` names it (measured: docs/benchmarks.md).
RATE_NAMES = re.compile(r"solve_?rate|pass_?rate|pass@|avg@|accuracy|success_?rate|difficulty", re.IGNORECASE)


@dataclasses.dataclass
class Metadata:
    """
    What `find_metadata` read from a dataset.

    Attributes:
        columns (`list[str]`): the metadata columns, in the dataset's order.
        values (`dict[str, int]`): the distinct values of each.
        skipped (`dict[str, str]`): every other column, with why it is not metadata.
        prior (`str` or `None`): the column of success rates KGPS starts its beliefs from (`prior_column`), if any.
        rates (`str` or `None`): a column found that looks like another model's success rates, when none is named.
        per_prompt (`dict[str, float]`): with no column, the per-prompt filter's prior, temperature and gamma's
            calibration step in use.
    """

    columns: list[str]
    values: dict[str, int]
    skipped: dict[str, str]
    prior: str | None = None
    rates: str | None = None
    per_prompt: dict[str, float] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        """One line for the log: what KGPS shares by, and what it does not read."""
        skipped = "; ".join(f"`{c}`: {why}" for c, why in self.skipped.items())
        if self.columns or self.prior:
            read = ", ".join(f"`{c}` ({self.values[c]} values)" for c in self.columns)
            prior = f"the bins of the success rates in `{self.prior}`, each starting at its rate" if self.prior else ""
            said = f"KGPS shares what it learns across prompts by {' and '.join(filter(None, (read, prior)))}"
        else:
            said = "KGPS found no metadata column to share by, and keeps one filter per prompt"
            if self.per_prompt:
                fields = ", ".join(f"{name}={value!r}" for name, value in self.per_prompt.items())
                said += f" ({fields}; to set them, pass KGPSConfig.per_prompt(candidates=0, ...))"
        if self.rates and not self.prior:
            said += (
                f"; `{self.rates}` looks like another model's success rates: "
                f"KGPSConfig(prior_column={self.rates!r}) starts each prompt from them"
            )
        return said + (f" (not read: {skipped})" if skipped else "")


def column(dataset: Any, name: str) -> pa.ChunkedArray:
    """
    The values of column `name` of `dataset`, one per row in the dataset's order, as Arrow. A `datasets.Dataset` is
    read from its Arrow table (through its indices after `select`, `shuffle` or `filter`), so its format (`"pandas"`,
    `"torch"`) and its size cost nothing: a million rows in milliseconds. Any other dataset's `dataset[name]` is
    converted once.

    Raises:
        `pa.ArrowInvalid`, `pa.ArrowTypeError`: a column of another dataset whose values Arrow cannot hold in one
            type (e.g. strings mixed with ints).
    """
    table = getattr(dataset, "data", None)
    if hasattr(table, "column") and name in getattr(table, "column_names", ()):
        values = table.column(name)
        indices = getattr(dataset, "_indices", None)  # `datasets`' row mapping: None until rows are selected
        values = values if indices is None else values.take(indices.column(0))
    else:
        values = dataset[name]
        values = values.tolist() if hasattr(values, "tolist") else list(values)  # pandas, numpy, torch; a list
        values = pa.chunked_array([pa.array(values)])
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def find_metadata(dataset: Any, readers: ColumnReaders | None = None) -> Metadata:
    """
    The columns of `dataset` that say which prompts are alike: labels (strings, integers of any width, booleans,
    `ClassLabel`s) with at least 2 and at most `MAX_METADATA_VALUES` distinct values, each value on at least
    `MIN_ROWS_PER_VALUE` rows, none missing, and at most `MAX_CATEGORICAL_VALUES` distinct values over the columns
    kept (in the dataset's order). Never the model's input (`INPUT_COLUMNS`), and never a column that `readers` (the
    trainer's reward functions and environments) may read, since it may give the answer away.

    Args:
        dataset: a map-style dataset with `column_names` (a `datasets.Dataset`).
        readers (`ColumnReaders`, *optional*): what the trainer's reward functions and environments read.
    """
    kinds = getattr(dataset, "features", None) or {}
    names = list(getattr(dataset, "column_names", None) or [])
    read = readers.reasons(names) if readers is not None else {}
    columns, values, skipped, rates = [], {}, {}, None
    for name in names:
        if name in INPUT_COLUMNS:
            skipped[name] = "the model's input"
        elif name in read:
            skipped[name] = read[name]
        elif rates is None and RATE_NAMES.search(name) and _is_rates(dataset, name):
            rates = name
            skipped[name] = "success rates, not labels"
        else:
            distinct, why = _groups(dataset, name, kinds.get(name))
            total = sum(values.values()) + distinct
            if why is None and total > MAX_CATEGORICAL_VALUES:
                why = (
                    f"with the columns before it, {total:,} distinct values in all, more than the "
                    f"{MAX_CATEGORICAL_VALUES:,} KGPS shares across"
                )
            if why is None:
                columns.append(name)
                values[name] = distinct
            else:
                skipped[name] = why
    return Metadata(columns, values, skipped, rates=rates)


def _is_rates(dataset: Any, name: str) -> bool:
    """Whether column `name` holds floats in `[0, 1]` (missing values aside), at least two distinct ones."""
    try:
        values = column(dataset, name)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    if not pa.types.is_floating(values.type) or values.null_count == len(values):
        return False
    low, high = pc.min_max(values).values()
    return 0 <= low.as_py() <= 1 and 0 <= high.as_py() <= 1 and low.as_py() < high.as_py()


def _groups(dataset: Any, name: str, feature: Any) -> tuple[int, str | None]:
    """`(distinct values, why they do not group the rows)` for column `name`: the reason is `None` when they do."""
    try:
        values = column(dataset, name)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return 0, "holds values other than labels"
    kind = values.type
    if not any(
        is_(kind) for is_ in (pa.types.is_integer, pa.types.is_boolean, pa.types.is_string, pa.types.is_large_string)
    ):
        return 0, f"holds {_type_name(feature, kind)} values, not labels"
    if values.null_count:
        return 0, "some values are missing"
    if len(pc.unique(values.slice(0, _FIRST_ROWS))) > MAX_METADATA_VALUES:
        return 0, f"more than {MAX_METADATA_VALUES} distinct values"
    counts = pc.value_counts(values).field("counts")
    distinct = len(counts)
    if distinct < 2:
        return distinct, "one value"
    if distinct > MAX_METADATA_VALUES:
        return distinct, f"more than {MAX_METADATA_VALUES} distinct values"
    single = int(pc.sum(pc.less(counts, MIN_ROWS_PER_VALUE)).as_py() or 0)
    if single:
        return distinct, (
            f"{single} of its {distinct} values label fewer than {MIN_ROWS_PER_VALUE} rows each: it names prompts "
            "rather than grouping them"
        )
    return distinct, None


def _type_name(feature: Any, kind: pa.DataType) -> str:
    """The type of a column's values as `datasets` names it (`float64`, `List`), else as Arrow does."""
    if feature is None:
        return str(kind)
    return getattr(feature, "dtype", None) if type(feature).__name__ == "Value" else type(feature).__name__


def with_metadata(
    dataset: Any, config: KGPSConfig, readers: ColumnReaders | None = None
) -> tuple[KGPSConfig, Metadata | None]:
    """
    `(config, metadata)`: `config` naming the feature columns KGPS reads from `dataset`, and what `find_metadata`
    found. It looks only when `config.feature_columns` is unset and `shared_variance > 0` (else `metadata` is `None`
    and `config` is returned as it is). The columns it finds are named, and `config.prior_column` starts the beliefs;
    when there are neither, KGPS keeps one filter per prompt: the fields of `NO_METADATA` that `config` leaves at their
    defaults take its values (a field set to its default's value is taken as left unset:
    `KGPSConfig.per_prompt(candidates=0, ...)` sets them all).
    """
    if config.feature_columns is not None or config.shared_variance == 0:
        return config, None
    metadata = find_metadata(dataset, readers)
    if config.prior_column is not None:
        metadata.skipped.pop(config.prior_column, None)
        metadata.prior = config.prior_column
    if metadata.columns or metadata.prior:
        return dataclasses.replace(config, feature_columns=metadata.columns, prior_column=metadata.prior), metadata
    defaults = {f.name: f.default for f in dataclasses.fields(KGPSConfig)}
    unset = {name: value for name, value in NO_METADATA.items() if getattr(config, name) == defaults[name]}
    config = dataclasses.replace(config, **unset)
    metadata.per_prompt = {name: getattr(config, name) for name in NO_METADATA if name != "shared_variance"}
    return config, metadata


def selector_for(
    name: str, dataset: Any, config: KGPSConfig, seed: int, rows: np.ndarray | None = None
) -> PromptSelector:
    """
    The selector `name` (see `selectors.SELECTORS`) over the prompts of `dataset` at `rows` (`(P,)`, each distinct
    prompt's first row; unset: every row); KGPS shares across them by the columns `config.feature_columns` (none when
    unset or `[]`; `with_metadata` names the ones a dataset holds). Raises `ValueError` for a column the dataset lacks
    or values KGPS cannot use.
    """
    num_prompts = len(dataset) if rows is None else len(rows)
    if name != "kgps":
        return build_selector(name, num_prompts, config, seed)
    features = read_features(dataset, config.feature_columns or None, config.prior_column)
    if features is not None and rows is not None and num_prompts != len(dataset):
        features = {name: _at(values, rows) for name, values in features.items()}
    return build_selector(name, num_prompts, config, seed, features)


def _at(values: Any, rows: np.ndarray) -> Any:
    """A feature's values at `rows`: an array's, a list's or `Rates`'."""
    if isinstance(values, Rates):
        return Rates(values.name, values.values[rows])
    return values[rows] if isinstance(values, np.ndarray) else [values[i] for i in rows.tolist()]


def read_features(
    dataset: Any, columns: list[str] | None, prior_column: str | None = None
) -> dict[str, np.ndarray | Rates] | None:
    """
    `{column: values}` for `KGPSSelector(features=...)`, one value per row of `dataset` in its order (so identical on
    every rank), or `None` when `columns` is `None` and there is no `prior_column`: labels as an `(N,)` array (ints,
    bools or strings), an embedding as `(N, E)` float64, the `prior_column` as `Rates`. The values' checks (missing
    values, types) are `shared.design`'s and `Rates`'.

    Raises:
        `ValueError`: a column the dataset does not have, naming the columns it has.
    """
    if columns is None and prior_column is None:
        return None
    available = list(getattr(dataset, "column_names", None) or [])
    missing = [name for name in columns or [] if name not in available]
    if missing:
        raise ValueError(
            f"feature_columns names {missing}, which the train dataset does not have (its columns: {available}). "
            "Name columns it has, e.g. MATH's 'level' and 'type'; feature_columns=[] reads none (one factor shared "
            "by all prompts), and leaving it unset lets KGPS find them."
        )
    features = {name: _feature(dataset, name) for name in columns or []}
    if prior_column is not None:
        if prior_column not in available:
            raise ValueError(
                f"prior_column={prior_column!r} names a column the train dataset does not have (its columns: "
                f"{available}): name its column of success rates in [0, 1], or leave prior_column unset."
            )
        features[prior_column] = Rates(prior_column, column(dataset, prior_column).to_numpy(zero_copy_only=False))
    return features


def _feature(dataset: Any, name: str) -> np.ndarray | list:
    try:
        values = column(dataset, name)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return list(dataset[name])  # mixed types: `shared.design` names them
    if (
        pa.types.is_list(values.type)
        or pa.types.is_large_list(values.type)
        or pa.types.is_fixed_size_list(values.type)
    ):  # an embedding column: one vector per row
        try:
            return np.asarray(values.to_pylist(), dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"feature column {name!r} holds vectors that are not all numbers of one length: an embedding column "
                "needs a float vector of the same length in every row."
            ) from None
    array = values.to_numpy(zero_copy_only=False)
    if (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) and not values.null_count:
        array = array.astype(str)
    return array
