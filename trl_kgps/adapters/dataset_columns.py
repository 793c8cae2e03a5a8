"""
What KGPS reads from the train dataset: its columns through Arrow (whole columns, never value by value, whatever
format `set_format` gave the dataset), the metadata columns the one line shares by (`find_metadata`,
`with_metadata`), the values of the columns it shares by (`read_features`), and where copies of one prompt disagree
on them (`copies_that_differ`).
"""

import dataclasses
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import NO_METADATA, KGPSConfig
from ..engine.copies import PromptCopies
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
# ... each carried by at least this many distinct prompts (rows, where no row repeats another's prompt); a value that
# fewer carry names a prompt rather than a group.
MIN_ROWS_PER_VALUE = 2
# A column with more distinct values than the limit in its first rows (a text, an id) is refused from those alone.
_FIRST_ROWS = 4096
# What names a column of success rates another model measured (Big-Math's `llama8b_solve_rate`, INTELLECT-3-RL's
# `avg@8_qwen3_4b`), read over a name's words (`name_words`): one of these phrases, words before it (a model's name),
# after it only words that hold a digit (a model, its size), and none of `_QUALIFIERS`. The one line names such a
# column whose values lie in [0, 1] in its log line (`find_metadata`), and starts from it when `prior_column` names it
# (measured: docs/benchmarks.md).
_SUCCESS_PHRASES = (
    *((word, rate) for word in ("solve", "pass", "success") for rate in ("rate", "rates")),
    ("solverate",),
    ("passrate",),
    ("successrate",),
    ("accuracy",),
)
_SUCCESS_AT_K = re.compile(r"(pass|avg)@(\d+|k)")  # pass@8, avg@k: the share of k samples that were right
# Words that make a success phrase name something else: `accuracy_threshold`, `min_pass_rate`, `solve_rate_std`.
_QUALIFIERS = frozenset(
    {"threshold", "thresh", "min", "max", "target", "std", "stderr", "var", "variance", "delta", "gap", "err", "error"}
)
# Words that name a difficulty, whose direction (1 the hardest, or the easiest?) the name does not say.
_DIFFICULTY_WORDS = frozenset({"difficulty", "difficulties", "hardness", "hard", "complexity", "fail", "failure"})


def name_words(name: str) -> list[str]:
    """A column name's words, lower case: `"avg@8_qwen3_4b"` -> `["avg@8", "qwen3", "4b"]`, `"solveRate"` ->
    `["solve", "rate"]`."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return re.findall(r"[a-z]+@(?:\d+|k)(?![a-z0-9])|[a-z0-9]+", spaced)


def says_success_rate(name: str) -> bool:
    """Whether a column's name says it holds success rates (see `_SUCCESS_PHRASES`): `llama8b_solve_rate`,
    `pass@8`, `avg@8_qwen3_4b`, `accuracy`; not `accuracy_threshold`, `min_pass_rate` or `model_difficulty`."""
    words = name_words(name)
    if _QUALIFIERS.intersection(words):
        return False
    for start, word in enumerate(words):
        sizes = [len(p) for p in _SUCCESS_PHRASES if tuple(words[start : start + len(p)]) == p]
        size = sizes[0] if sizes else int(_SUCCESS_AT_K.fullmatch(word) is not None)
        if size and all(re.search(r"\d", after) for after in words[start + size :]):
            return True
    return False


def says_difficulty(name: str) -> bool:
    """Whether a column's name says it holds a difficulty (`difficulty`, `model_difficulty`, `fail_rate`)."""
    return not _DIFFICULTY_WORDS.isdisjoint(name_words(name))


@dataclasses.dataclass
class Metadata:
    """
    What `find_metadata` read from a dataset.

    Attributes:
        columns (`list[str]`): the metadata columns, in the dataset's order.
        values (`dict[str, int]`): the distinct values of each.
        skipped (`dict[str, str]`): every other column, with why it is not metadata (the prior column aside).
        prior (`str` or `None`): the column of success rates KGPS starts its beliefs from (`prior_column`), if any.
        rates (`str` or `None`): a column found whose name says it holds another model's success rates, and whose
            values lie in `[0, 1]`, when none is named.
        per_prompt (`dict[str, float]`): with no column, the values in use of the fields a dataset without metadata
            decides (`config.NO_METADATA`'s, where the config leaves them unset).
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
            shares = self.per_prompt.get("shared_variance", 0.0)
            said = "KGPS found no metadata column to share by, and " + (
                "shares one factor across all prompts" if shares else "keeps one filter per prompt"
            )
            if self.per_prompt:
                fields = ", ".join(
                    f"{name}={value!r}"
                    for name, value in self.per_prompt.items()
                    if name != "shared_variance" or shares
                )
                said += f" ({fields}: the fields KGPSConfig leaves unset take these values, those set keep theirs)"
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


def find_metadata(
    dataset: Any, readers: ColumnReaders | None = None, copies: PromptCopies | None = None, prior: str | None = None
) -> Metadata:
    """
    The columns of `dataset` that say which prompts are alike: labels (strings, integers of any width, booleans,
    `ClassLabel`s) with at least 2 and at most `MAX_METADATA_VALUES` distinct values, each value carried by at least
    `MIN_ROWS_PER_VALUE` distinct prompts, none missing, and at most `MAX_CATEGORICAL_VALUES` distinct values over
    the columns kept (in the dataset's order). Never the model's input (`INPUT_COLUMNS`), never a column that `readers`
    (the trainer's reward functions and environments) may read, since it may give the answer away, and never the
    `prior` column (`prior_column`), which KGPS reads as rates.

    Args:
        dataset: a map-style dataset with `column_names` (a `datasets.Dataset`).
        readers (`ColumnReaders`, *optional*): what the trainer's reward functions and environments read.
        copies (`PromptCopies`, *optional*): which rows hold one prompt; unset, every row is its own. A value counts
            the distinct prompts that carry it, so that an id repeated over a prompt's copies (`problem_id`) still
            names prompts.
        prior (`str`, *optional*): the column `prior_column` names.
    """
    kinds = getattr(dataset, "features", None) or {}
    names = [name for name in getattr(dataset, "column_names", None) or [] if name != prior]
    read = readers.reasons(names) if readers is not None else {}
    columns, values, skipped, rates = [], {}, {}, None
    for name in names:
        if name in INPUT_COLUMNS:
            skipped[name] = "the model's input"
        elif name in read:
            skipped[name] = read[name]
        elif says_success_rate(name) and _is_rates(dataset, name):
            rates = rates or name
            skipped[name] = "success rates, not labels"
        elif says_difficulty(name) and _is_rates(dataset, name):
            skipped[name] = (
                "values in [0, 1] whose direction KGPS does not know (is 1 the hardest or the easiest?), so it reads "
                "none of them: if 1 minus each is a success rate, `dataset.map(lambda row: {'solve_rate': 1 - "
                f"row[{name!r}]}})` and KGPSConfig(prior_column='solve_rate') start each prompt from it"
            )
        else:
            distinct, why = _groups(dataset, name, kinds.get(name), copies)
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
    return Metadata(columns, values, skipped, prior=prior, rates=rates)


def _is_rates(dataset: Any, name: str) -> bool:
    """Whether column `name` holds floats in `[0, 1]` (missing values aside), at least two distinct ones."""
    try:
        values = column(dataset, name)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    if not pa.types.is_floating(values.type) or values.null_count == len(values):
        return False
    low, high = pc.min_max(values.cast(pa.float64())).values()  # Arrow computes nothing on float16
    return 0 <= low.as_py() <= 1 and 0 <= high.as_py() <= 1 and low.as_py() < high.as_py()


def _groups(dataset: Any, name: str, feature: Any, copies: PromptCopies | None) -> tuple[int, str | None]:
    """`(distinct values, why they do not group the prompts)` for column `name`: the reason is `None` when they do."""
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
    code, distinct = _codes(values)
    if distinct < 2:
        return distinct, "one value"
    if distinct > MAX_METADATA_VALUES:
        return distinct, f"more than {MAX_METADATA_VALUES} distinct values"
    if copies is None:
        prompts_per_value = np.bincount(code, minlength=distinct)
    else:  # the distinct (value, prompt) pairs, counted by value
        pairs = np.unique(code * np.int64(copies.num_prompts) + copies.prompt_of_row)
        prompts_per_value = np.bincount(pairs // copies.num_prompts, minlength=distinct)
    single = int((prompts_per_value < MIN_ROWS_PER_VALUE).sum())
    if single:
        return distinct, (
            f"{single} of its {distinct} values label fewer than {MIN_ROWS_PER_VALUE} distinct prompts each: it names "
            "prompts rather than grouping them"
        )
    return distinct, None


def _codes(values: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """`(code, distinct)`: each row's value numbered `0 .. distinct - 1` (`(N,)` int64; a missing value is one of its
    own, NaN too), and how many distinct values there are. `pa.ArrowNotImplementedError` for vectors."""
    encoded = pc.dictionary_encode(values.combine_chunks(), null_encoding="encode")
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(encoded.dictionary)


def _type_name(feature: Any, kind: pa.DataType) -> str:
    """The type of a column's values as `datasets` names it (`float64`, `List`), else as Arrow does."""
    if feature is None:
        return str(kind)
    return getattr(feature, "dtype", None) if type(feature).__name__ == "Value" else type(feature).__name__


def check_prior_column(dataset: Any, prior_column: str | None, readers: ColumnReaders | None = None) -> None:
    """
    Raises `ValueError` unless `prior_column` is `None` or names a column of `dataset` that KGPS may read as success
    rates: never the model's input (`INPUT_COLUMNS`) and never a column a reward function or an environment reads
    (its signature or its code names it), which may give the answer away. Checked before any log line.
    """
    if prior_column is None:
        return
    available = list(getattr(dataset, "column_names", None) or [])
    if prior_column not in available:
        raise ValueError(
            f"prior_column={prior_column!r} names a column the train dataset does not have (its columns: "
            f"{available}): name its column of success rates in [0, 1], or leave prior_column unset."
        )
    if prior_column in INPUT_COLUMNS:
        raise ValueError(
            f"prior_column={prior_column!r} names the model's input, not success rates another model measured: name "
            "the train dataset's column of rates in [0, 1] (e.g. 'llama8b_solve_rate'), or leave prior_column unset."
        )
    why = None if readers is None else readers.names_column(prior_column)
    if why is not None:
        raise ValueError(
            f"prior_column={prior_column!r} names a column that {why}: what a reward reads may give the answer away, "
            "and KGPS never starts its beliefs from it. Name a column of success rates no reward function reads, or "
            "leave prior_column unset."
        )


def with_metadata(
    dataset: Any, config: KGPSConfig, readers: ColumnReaders | None = None, copies: PromptCopies | None = None
) -> tuple[KGPSConfig, Metadata | None]:
    """
    `(config, metadata)`: `config` for `dataset`, every field it leaves to the dataset decided
    (`KGPSConfig.resolved`) and the feature columns KGPS reads named, and what `find_metadata` found (`copies`, which
    rows hold one prompt, as it takes them). It looks only when `config.feature_columns` is unset and
    `shared_variance` is not 0; else `metadata` is `None` and the fields left unset take `WITH_METADATA`'s values. The
    columns it finds are named, and `config.prior_column` starts the beliefs (refused first when KGPS may not read it:
    `check_prior_column`); when there are neither, the fields left unset take `NO_METADATA`'s values, the per-prompt
    filter's. A field set keeps its value, whatever it is.
    """
    check_prior_column(dataset, config.prior_column, readers)
    if config.feature_columns is not None or config.shared_variance == 0:
        return config.resolved(has_metadata=True), None
    metadata = find_metadata(dataset, readers, copies, prior=config.prior_column)
    found = bool(metadata.columns or metadata.prior)
    config = config.resolved(has_metadata=found)
    if found:
        return dataclasses.replace(config, feature_columns=metadata.columns), metadata
    metadata.per_prompt = {name: getattr(config, name) for name in NO_METADATA}
    return config, metadata


def selector_for(
    name: str,
    dataset: Any,
    config: KGPSConfig,
    seed: int,
    rows: np.ndarray | None = None,
    rows_per_prompt: np.ndarray | None = None,
) -> PromptSelector:
    """
    The selector `name` (see `selectors.SELECTORS`) over the prompts of `dataset` at `rows` (`(P,)`, each distinct
    prompt's first row; unset: every row); KGPS shares across them by the columns `config.feature_columns` (none when
    unset or `[]`; `with_metadata` names the ones a dataset holds), each prompt by its first row's values
    (`copies_that_differ` finds the prompts whose copies disagree), each weighing by its `rows_per_prompt` (`(P,)`)
    where `config.copies_weight="rows"`. Raises `ValueError` for a column the dataset lacks
    or values KGPS cannot use.
    """
    num_prompts = len(dataset) if rows is None else len(rows)
    if name not in ("kgps", "offline_filter"):  # the selectors that read columns: KGPS, and the filter its rates
        return build_selector(name, num_prompts, config, seed)
    columns = config.feature_columns or None if name == "kgps" else None
    features = read_features(dataset, columns, config.prior_column)
    if features is not None and rows is not None and num_prompts != len(dataset):
        features = {name: _at(values, rows) for name, values in features.items()}
    return build_selector(name, num_prompts, config, seed, features, rows_per_prompt)


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
        check_prior_column(dataset, prior_column)
        rates = column(dataset, prior_column)
        if pa.types.is_floating(rates.type):  # float16 too, which numpy reads but Arrow computes nothing on
            rates = rates.cast(pa.float64())
        features[prior_column] = Rates(prior_column, rates.to_numpy(zero_copy_only=False))
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


def copies_that_differ(dataset: Any, columns: list[str], copies: PromptCopies | None) -> dict[str, int]:
    """
    `{column: prompts}`: for each of `columns` (the feature columns and the prior column KGPS reads), how many prompts
    have copies (`copies`, the rows that hold one prompt) that carry different values in it, where any do. KGPS keeps
    one belief per prompt and reads its values from its first row (`selector_for`), so the other rows' values go
    unread; missing values (None, NaN) count as equal to each other.
    """
    if copies is None or not copies.copies:
        return {}
    first = copies.first_row[copies.prompt_of_row]  # (N,): the first row of each row's prompt
    differ = {}
    for name in columns:
        try:
            values = column(dataset, name)
            if pa.types.is_floating(values.type):  # NaN and None both say "missing"
                values = values.cast(pa.float64())
                values = pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float64()), values)
            code, _ = _codes(values)
            same = code == code[first]
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # an embedding: compare its vectors
            vectors = np.asarray(_feature(dataset, name), dtype=np.float64)  # (N, E)
            same = ((vectors == vectors[first]) | (np.isnan(vectors) & np.isnan(vectors[first]))).all(axis=1)
        prompts = np.unique(copies.prompt_of_row[~same]).size
        if prompts:
            differ[name] = prompts
    return differ


def describe_differing(differ: dict[str, int], copies: PromptCopies) -> str:
    """The log's warning for `copies_that_differ`'s `differ`: which columns, how many prompts, and what to do."""
    where = ", ".join(f"`{name}` ({count:,} prompt{'s' * (count != 1)})" for name, count in differ.items())
    return (
        f"Copies of one prompt (rows with equal {copies.identity}) carry different values in {where}: KGPS keeps one "
        "belief per prompt and reads its values from its first row, so the other rows' values go unread. To read "
        "each row's own, give every copy of a prompt the same value, or keep one belief per row "
        "(KGPSConfig(prompt_key=None))."
    )
