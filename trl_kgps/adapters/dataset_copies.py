"""
Which rows of the train dataset are copies of one prompt (`find_copies`): rows that hold equal values in the key
column, the `prompt` the trainer formats by default, and in every column a reward function or an environment may read
(two rows with one question and two reference answers are two prompts). Read through Arrow, a million rows in a
fraction of a second.
"""

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine.copies import PromptCopies
from .dataset_columns import column
from .reward_reads import ColumnReaders


# Columns that are part of the model's input beside the prompt: a prompt's text is not the whole prompt then.
MEDIA_COLUMNS = frozenset({"image", "images", "video", "audio"})


def find_copies(
    dataset: Any,
    key: str | None,
    batch_size: int,
    readers: ColumnReaders | None = None,
    routing: Sequence[str] = (),
) -> tuple[PromptCopies, list[str]]:
    """
    `(copies, notes)`: the copies of `dataset`, rows with equal values in its column `key` and in every column that
    `readers` (the trainer's reward functions and environments) may read or that the trainer routes rows by
    (`routing`, e.g. TRL's `environment`), and the lines the log owes the user about them. Every row is its own prompt
    (`PromptCopies.by_row`) when `key` is `None`, when `key` is `"prompt"` and the dataset has no such column (a bare
    sampler over a `range`) or holds images, video or audio beside it (one instruction over many images), and when the
    distinct prompts are fewer than `batch_size`, the prompts of one generation batch (a note says so).

    Raises:
        `ValueError`: a `key` other than `"prompt"` that the dataset does not have, naming the columns it has.
    """
    names = list(getattr(dataset, "column_names", None) or [])
    by_row = PromptCopies.by_row(len(dataset))
    if key is None or not len(dataset) or (key == "prompt" and (key not in names or MEDIA_COLUMNS & set(names))):
        return by_row, []
    if key not in names:
        raise ValueError(
            f"prompt_key={key!r} names a column the train dataset does not have (its columns: {names}). Name the "
            "column whose equal values mark copies of one prompt (e.g. an id), 'prompt' (the default), or None to "
            "keep one belief per row."
        )
    readers = readers or ColumnReaders()
    read = readers.reasons([name for name in names if name != key])
    read.update({name: "the trainer routes each row by it" for name in routing if name in names and name != key})
    codes = _codes(dataset, key)
    notes = []
    if key != "prompt" and "prompt" in names and readers.reasons([key]):
        merged = _first_appearance(_pair(codes, _codes(dataset, "prompt"))).max() - codes.max()
        if merged:
            notes.append(
                f"prompt_key={key!r} names a column that decides rewards ({readers.reasons([key])[key]}): rows "
                f"with equal {key!r} share one belief whatever their 'prompt' ({merged:,} distinct prompts merged "
                "into others), and train in turn"
            )
    by_key = int(codes.max()) + 1
    for name in read:
        codes = _first_appearance(_pair(codes, _codes(dataset, name)))
    copies = PromptCopies(codes, key=key, columns=tuple(read))
    if copies.num_prompts > by_key:
        why = "; ".join(f"{name!r}: {reason}" for name, reason in read.items())
        notes.append(
            f"{copies.num_prompts - by_key:,} rows hold a {key!r} of an earlier row but differ from it in a column "
            f"that decides their rewards ({why}): KGPS keeps them apart, one belief each"
        )
    if copies.copies and copies.num_prompts < batch_size:
        notes.append(
            f"the {copies.num_prompts:,} distinct prompts (by {copies.identity}) are fewer than the {batch_size:,} of "
            "a generation batch: KGPS keeps one belief per row"
        )
        return by_row, notes
    return copies, notes


def _codes(dataset: Any, name: str) -> np.ndarray:
    """`(N,)` int64: each row's value of column `name`, numbered by first appearance."""
    try:
        values = pa.chunked_array([_comparable(chunk) for chunk in column(dataset, name).chunks], type=None)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # values of mixed types: compared as sorted JSON
        values = pa.chunked_array([pa.array([json.dumps(v, sort_keys=True, default=str) for v in dataset[name]])])
    # Each row's position among the distinct values, which `unique` lists in the order they first appear.
    return pc.index_in(values, value_set=pc.unique(values), skip_nulls=False).to_numpy(zero_copy_only=False)


def _pair(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """`(N,)` int64 codes, equal where both `first` and `second` (each numbered from 0) are."""
    return first.astype(np.int64) * (int(second.max()) + 1) + second


def _first_appearance(codes: np.ndarray) -> np.ndarray:
    """`codes` renumbered `0, 1, ...` in the order their values first appear (`[7, 3, 7, 5]` -> `[0, 1, 0, 2]`)."""
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty_like(first)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def _comparable(values: pa.Array) -> pa.Array:
    """`values` as an array Arrow can encode as a dictionary, equal where the values are equal: labels as they are, a
    conversation (`[{"role", "content"}, ...]` with text fields) as one string, anything else as sorted JSON."""
    kind = values.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_type
        if pa.types.is_struct(item) and all(_is_text(item.field(i).type) for i in range(item.num_fields)):
            messages = pc.list_flatten(values)
            fields = [pc.fill_null(messages.field(i), "") for i in range(item.num_fields)]
            text = pc.binary_join_element_wise(*fields, "\x1f") if len(fields) > 1 else fields[0]
            lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), type=pa.int64())
            return pc.binary_join(pa.LargeListArray.from_arrays(offsets, text), "\x1e")
    if any(is_(kind) for is_ in (pa.types.is_integer, pa.types.is_boolean, _is_text, pa.types.is_binary)):
        return values
    return pa.array([json.dumps(value, sort_keys=True, default=str) for value in values.to_pylist()])


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)
