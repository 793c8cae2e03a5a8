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
    """`values` as an array Arrow can encode as a dictionary, equal where and only where the values are equal: labels
    as they are, a conversation (`[{"role", "content", ...}, ...]` whose fields hold texts, integers, booleans, lists
    and structs of them, or nothing on every row) as bytes written by Arrow (`_keys`), anything else as sorted JSON."""
    kind = values.type
    if any(is_(kind) for is_ in (pa.types.is_integer, pa.types.is_boolean, _is_text, pa.types.is_binary)):
        return values
    if pa.types.is_floating(kind):  # a score or a rate a reward reads; NaNs equal, as sorted JSON had them
        return values.cast(pa.float64())
    if _has_key(kind):
        return _keys(values)
    return pa.array([json.dumps(value, sort_keys=True, default=str) for value in values.to_pylist()])


# Bytes that no UTF-8 text holds, which mark where the texts of one value begin and end in its key (`_key`).
_END, _MISSING, _STRUCT, _LIST, _LIST_END = b"\xff", b"\xfe", b"\xfd", b"\xfc", b"\xfb"


def _has_key(kind: pa.DataType) -> bool:
    """Whether Arrow writes every value of type `kind` as its key (`_key`)."""
    if pa.types.is_struct(kind):
        return all(_has_key(field.type) for field in kind)
    if _is_list(kind):
        return _has_key(kind.value_type)
    return any(is_(kind) for is_ in (pa.types.is_null, _is_text, pa.types.is_integer, pa.types.is_boolean))


def _keys(values: pa.Array) -> pa.Array:
    """`(n,)` large_binary: each of `values`, of a type `_has_key` accepts, as its key (`_key`); a list as its items'
    keys alone (`_joined`), a missing one missing: its brackets tell nothing more at the top."""
    if _is_list(values.type):
        return _joined(values)
    return _concatenated(_key(values), len(values))


def _key(values: pa.Array) -> list[pa.Array | bytes]:
    """
    The pieces of each value's key, bytes read back to the value alone by its type, so that two keys are equal where
    and only where the values are: a text (its UTF-8 bytes), an integer or a boolean (its text) and `_END`; a struct as
    `_STRUCT` and its fields in order; a list as `_LIST`, its items and `_LIST_END`. A missing value is `_MISSING` (a
    missing text, integer or boolean `_MISSING` and `_END`), as is every value of a field missing on every row.
    """
    kind = values.type
    if pa.types.is_null(kind):
        return [_MISSING]
    if _is_text(kind):
        return [values.cast(pa.large_binary()), _END]
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return [values.cast(pa.large_string()).cast(pa.large_binary()), _END]  # -3, true
    if pa.types.is_struct(kind):
        pieces = [_STRUCT, *(piece for i in range(kind.num_fields) for piece in _key(values.field(i)))]
    else:
        pieces = [_LIST, _joined(values), _LIST_END]
    if not values.null_count:
        return pieces
    missing = pa.scalar(_MISSING, pa.large_binary())
    return [pc.if_else(pc.is_valid(values), _concatenated(pieces, len(values)), missing)]


def _joined(values: pa.Array) -> pa.Array:
    """`(n,)` large_binary: the keys of each list's items one after the other, as they lie among all the items' keys
    (uncopied), a missing list missing."""
    lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(values)
    items = _concatenated(_key(flat), len(flat))
    ends = np.frombuffer(items.buffers()[1], dtype=np.int64)[: len(items) + 1]  # where each item's key ends
    offsets = pa.py_buffer(ends[np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])])
    data = items.buffers()[2] or pa.py_buffer(b"")
    joined = pa.Array.from_buffers(pa.large_binary(), len(values), [None, offsets, data])
    return pc.if_else(pc.is_valid(values), joined, pa.scalar(None, pa.large_binary())) if values.null_count else joined


def _concatenated(pieces: list[pa.Array | bytes], n: int) -> pa.Array:
    """`(n,)` large_binary: the pieces (arrays, or bytes on every row) in turn, a missing value `_MISSING`."""
    merged: list[pa.Array | bytes] = []
    for piece in pieces:  # neighbouring bytes as one
        if isinstance(piece, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += piece
        else:
            merged.append(piece)
    if all(isinstance(piece, bytes) for piece in merged):
        return pa.repeat(pa.scalar(b"".join(merged), pa.large_binary()), n)
    large = [pa.scalar(piece, pa.large_binary()) if isinstance(piece, bytes) else piece for piece in merged]
    separator = pa.scalar(b"", pa.large_binary())
    return pc.binary_join_element_wise(*large, separator, null_handling="replace", null_replacement=_MISSING)


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)
