"""
Which rows, in which order, a KGPS state belongs to: a digest of the train dataset's rows, every column of each (what
the trainer and the reward functions see: the prompt, the images, the answer), which every saved state records and a
resumed run compares with its own dataset (`state_file.read_run`). KGPS stores each prompt's belief by its row, so a
dataset of the same length with other rows, or the same rows in another order, would give every belief to another
prompt: that includes rows that share their prompt text and differ in another column (one instruction over many
images, one question asked with several answers), which a digest of the `prompt` column alone cannot tell apart.
"""

import datetime
import decimal
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring_ascii
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .lexicographic import row_keys


COLUMN = "prompt"
_ROWS_PER_READ = 10_000
# Arrow types (by name) whose distinct values, as Arrow's `dictionary_encode` finds them, are the distinct values in
# Python; floats are told apart by their bits instead (Arrow's takes -0.0 for 0.0, which JSON writes apart).
_EXACT_TYPES = frozenset(
    {"string", "large_string", "binary", "large_binary", "bool"}
    | {f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)}
)
_FLOAT_TYPES = frozenset({"float", "double"})
# A column whose first `_SAMPLE` rows hold more than this share of distinct values is hashed row by row.
_SAMPLE = 4096
_DISTINCT_SHARE = 0.99
# A column's chunks are read as one below this size: the offsets of Arrow's `string` are int32.
_COMBINED_BYTES = 2**31
# `datasets` features whose values are stored as `{"bytes", "path"}`: digested by their bytes, or else by their file's
# name, so that a dataset reading its files from another folder (another machine, another cache) still fits.
_MEDIA = {"Image", "Audio", "Video", "Pdf", "Nifti"}
# The characters `json.dumps` escapes as two, the backslash first: it begins the others.
_SHORT_ESCAPES = (
    ("\\", "\\\\"),
    ('"', '\\"'),
    ("\n", "\\n"),
    ("\r", "\\r"),
    ("\t", "\\t"),
    ("\b", "\\b"),
    ("\f", "\\f"),
)
# A nested column's JSON texts are written this many rows at a time: few calls, a bounded copy.
_ROWS_PER_WRITE = 65_536


def prompts_digest(dataset: Any) -> dict[str, Any] | None:
    """
    Digests of the rows of a map-style `dataset`, or `None` when its rows are not dicts of columns.

    Returns:
        `dict`: `rows`, the digests of every row's content (all its columns): `ordered` (the rows in index order),
        `unordered` (the same rows in any order share it) and `columns` (each column's name and the digest of its
        values in order, to name the columns that differ); and, when the rows have a `prompt` column, `column`
        (`"prompt"`), `ordered` and `unordered` over that column alone. Each digest is 32 hex digits. A value is read
        as its text, or as sorted JSON (a conversation); bytes, arrays and images by the hash of their content, a date
        or decimal as its text, and another value JSON cannot hold by its type alone. A `datasets.Dataset` is read as
        stored, without decoding its images.
    """
    read = _columns(dataset)
    if not read:
        return None
    names = sorted(read)
    hashes = np.stack([distinct[codes] for codes, distinct in map(read.get, names)], axis=1)  # (N, C) uint64
    columns = {name: hashes[:, j] for j, name in enumerate(names)}
    # Rows sorted lexicographically by their column hashes (as `np.lexsort(hashes.T[::-1])` sorts them, in a second
    # for a million rows): the same rows in any order give the same matrix.
    unordered = np.take(hashes, np.argsort(_sort_keys(read, names)), axis=0) if len(hashes) else hashes
    header = json.dumps(names).encode()
    digest = {
        "rows": {
            "ordered": _hex(hashes, header),
            "unordered": _hex(unordered, header),
            "columns": {name: _hex(columns[name]) for name in names},
        }
    }
    if COLUMN in columns:
        digest.update(column=COLUMN, ordered=_hex(columns[COLUMN]), unordered=_hex(np.sort(columns[COLUMN])))
    return digest


def same_rows(previous: Any, dataset: Any) -> bool:
    """Whether `dataset` holds the rows of `previous` in the same order: the same object, or the same digest."""
    if dataset is previous:
        return True
    if len(dataset) != len(previous):
        return False
    digest = prompts_digest(previous)
    return digest is not None and digest == prompts_digest(dataset)


def mismatch(saved: dict[str, Any], current: dict[str, Any], num_prompts: int) -> str | None:
    """
    Why a state saved for the rows `saved` does not fit a dataset of `current` (both `prompts_digest`s); `None` if it
    fits.
    """
    rows = saved["rows"]
    if rows["ordered"] == current["rows"]["ordered"]:
        return None
    if "ordered" in saved:
        if "ordered" not in current:
            return f"it was saved for a dataset with a {COLUMN!r} column, and this run's has none"
        if saved["ordered"] != current["ordered"]:
            if saved["unordered"] == current["unordered"]:
                return (
                    f"its {num_prompts} prompts are this run's in another order (another shuffle seed, a sort), and "
                    "KGPS keeps each prompt's belief by its row"
                )
            return (
                f"it was saved for other prompts than this run's {num_prompts} (its {COLUMN!r} column differs: "
                "another dataset, filter or deduplication), and KGPS keeps each prompt's belief by its row"
            )
    saved_columns, current_columns = rows["columns"], current["rows"]["columns"]
    if set(saved_columns) != set(current_columns):
        return (
            f"it was saved for a dataset with the columns {sorted(saved_columns)}, and this run's has "
            f"{sorted(current_columns)}; KGPS keeps each prompt's belief by its row"
        )
    if rows["unordered"] == current["rows"]["unordered"]:
        return (
            f"its {num_prompts} rows are this run's in another order: rows that share their {COLUMN!r} and differ in "
            "another column (one instruction over many images, one question with several answers) were reordered "
            "(another shuffle seed, a sort), and KGPS keeps each prompt's belief by its row"
        )
    differ = [repr(name) for name in sorted(saved_columns) if saved_columns[name] != current_columns[name]]
    return (
        f"it was saved for other rows than this run's {num_prompts} (its {', '.join(differ)} column"
        f"{'s differ' if len(differ) > 1 else ' differs'}: another dataset, filter, or other values), and KGPS keeps "
        "each prompt's belief by its row"
    )


def _columns(dataset: Any) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """
    Each column as `(codes, hashes)`: `hashes[codes]` are its values' hashes in index order, `(N,)` uint64; `None`
    when the rows are not dicts of columns.
    """
    names = getattr(dataset, "column_names", None)
    if names and hasattr(dataset, "with_format") and hasattr(dataset, "iter"):
        return _stored_columns(dataset)
    if not len(dataset) or not isinstance(dataset[0], dict):
        return None
    names = sorted(dataset[0])
    rows: Iterator[dict[str, Any]] = (dataset[i] for i in range(len(dataset)))
    matrix = _hashes(row.get(name) for row in rows for name in names).reshape(len(dataset), len(names))
    return {name: (np.arange(len(dataset)), matrix[:, j]) for j, name in enumerate(names)}


def _stored_columns(dataset: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """
    The columns of a `datasets.Dataset` (`_columns`), read as stored: an image as its bytes and path, not decoded. A
    column of labels, texts or numbers is read whole from the Arrow table, through the rows `select`, `shuffle` or
    `filter` kept, and each of its distinct values is hashed once; any other (conversations, images) value by value,
    in batches.
    """
    media = {name for name, feature in (getattr(dataset, "features", None) or {}).items() if _is_media(feature)}
    table, indices = getattr(dataset, "data", None), getattr(dataset, "_indices", False)
    columns = {}
    if hasattr(table, "column") and indices is not False:  # `_indices`: None until rows are selected
        rows = None if indices is None else indices.column(0)
        for name in dataset.column_names:
            hashed = None if name in media else _read(table.column(name), rows)
            if hashed is not None:
                columns[name] = hashed
    rest = [name for name in dataset.column_names if name not in columns]
    if rest:
        parts: dict[str, list[np.ndarray]] = {name: [np.zeros(0, dtype=np.uint64)] for name in rest}
        for batch in dataset.select_columns(rest).with_format("arrow").iter(_ROWS_PER_READ):
            for name in rest:
                values = batch.column(name).to_pylist()
                parts[name].append(
                    _hashes(_media_content(value) for value in values) if name in media else _hashes(values)
                )
        for name in rest:
            hashes = np.concatenate(parts[name])
            columns[name] = (np.arange(len(hashes)), hashes)
    return {name: columns[name] for name in dataset.column_names}


def _read(values: Any, rows: Any = None) -> tuple[np.ndarray, np.ndarray] | None:
    """
    The Arrow column `values` at its `rows` (an Arrow index array; all by default) as `(codes, hashes)`, each value
    hashed as its Python value is; `None` for a type whose distinct values Arrow cannot tell as Python would
    (`_EXACT_TYPES`, `_FLOAT_TYPES`, `_json_type`). A column of few distinct values (labels, answers, prompts on
    several rows) hashes each once; one whose first rows are nearly all distinct (a prompt per row) hashes every row
    of the table instead, which saves finding the distinct values. A column of conversations (lists, structs) is read
    as its rows' JSON texts (`_json_texts`). Both are read in the table's order, whichever rows are kept: gathering
    long texts or lists through `rows` costs more than reading the few the rows leave out.
    """
    kind = str(values.type)
    if kind in _FLOAT_TYPES and not values.null_count:
        array = (values if rows is None else values.take(rows)).to_numpy()
        _, first, codes = np.unique(array.view(f"u{array.itemsize}"), return_index=True, return_inverse=True)
        return codes.reshape(-1), _hashes(array[first].tolist())
    nested = kind not in _EXACT_TYPES
    if nested and not _json_type(values.type):
        return None
    if rows is not None and len(rows) < len(values) // 2:  # a small part of the table: read it alone
        values, rows = values.take(rows), None
    if nested:
        values = pa.chunked_array(
            [
                _json_texts(values.slice(start, _ROWS_PER_WRITE).combine_chunks())
                for start in range(0, len(values), _ROWS_PER_WRITE)
            ],
            type=pa.large_string(),
        )
    sample = values.slice(0, _SAMPLE)
    if len(sample.unique()) > _DISTINCT_SHARE * len(sample):  # the table's rows hashed in order, not gathered first
        return np.arange(len(values)) if rows is None else rows.to_numpy(), _array_hashes(values)
    return _dictionary(values, None if rows is None else rows.to_numpy())


def _dictionary(values: Any, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """`_read` by the distinct values of the whole column, which are hashed where `rows` use them."""
    if values.num_chunks > 1 and values.nbytes < _COMBINED_BYTES:  # one chunk encodes twice as fast
        values = values.combine_chunks()
    encoded = values.dictionary_encode()
    chunks = getattr(encoded, "chunks", [encoded])
    if not chunks:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    dictionary = chunks[0].dictionary
    if not all(chunk.dictionary.equals(dictionary) for chunk in chunks):  # one, shared by every chunk
        return None
    # Each row's index in the dictionary, or just past it where the value is missing (None).
    codes = np.concatenate([chunk.indices.fill_null(len(dictionary)).to_numpy() for chunk in chunks])
    codes = codes if rows is None else codes[rows]
    present = np.bincount(codes, minlength=len(dictionary) + 1) > 0
    hashes = _array_hashes(dictionary.take(np.flatnonzero(present[:-1])))
    if present[-1]:
        hashes = np.append(hashes, _hashes([None]))
    return (np.cumsum(present) - 1)[codes], hashes


def _array_hashes(array: Any) -> np.ndarray:
    """`(n,)` uint64: the hashes of an Arrow array's values, read in slices; a text by its UTF-8 bytes as stored."""
    kind = str(array.type)
    texts = kind in ("string", "large_string")
    if texts:
        array = array.cast(kind.replace("string", "binary"))  # the same buffers, read as bytes
    parts = [np.zeros(0, dtype=np.uint64)]
    for start in range(0, len(array), _ROWS_PER_READ):
        values = array.slice(start, _ROWS_PER_READ).to_pylist()
        parts.append(_text_hashes(values) if texts else _hashes(values))
    return np.concatenate(parts)


def _json_type(kind: pa.DataType) -> bool:
    """Whether Arrow writes every value of type `kind` as JSON (`_json_texts`): lists, structs, texts, integers,
    booleans and nothing; not floats, bytes or maps, which only Python writes as it does."""
    if pa.types.is_struct(kind):
        names = [field.name for field in kind]
        return len(set(names)) == len(names) and all(_json_type(field.type) for field in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _json_type(kind.value_type)
    return any(is_(kind) for is_ in (pa.types.is_null, _is_text, pa.types.is_integer, pa.types.is_boolean))


def _json_texts(values: pa.Array) -> pa.Array:
    """
    `(n,)` large_string: each of `values`, of a type `_json_type` accepts, as `json.dumps(value, sort_keys=True)`
    writes its Python value (`to_pylist`), a missing one as `null`; each level written from the texts of the one below.
    """
    kind, n = values.type, len(values)
    if pa.types.is_null(kind):
        return _repeated("null", n)
    if _is_text(kind):
        texts = _concatenated(['"', _json_escaped(values.cast(pa.large_string())), '"'], n)
    elif pa.types.is_struct(kind):
        # {"content": "...", "role": "..."}: the fields in the order of `sort_keys`, each its key and its value; a text
        # that is never missing has its quotes written with the keys
        pieces = ["{"]
        for field in sorted(kind, key=lambda field: field.name):
            pieces.append(", " * (len(pieces) > 1) + json.dumps(field.name) + ": ")
            inner = values.field(field.name)
            if _is_text(field.type) and not inner.null_count:
                pieces += ['"', _json_escaped(inner.cast(pa.large_string())), '"']
            else:
                pieces.append(_json_texts(inner))
        texts = _concatenated([*pieces, "}"], n)
    elif pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        texts = values.cast(pa.large_string())  # 12, -3, true, false: as JSON writes them
    else:  # a list: its items' texts joined by ", " within each row's offsets
        lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), type=pa.int64())
        items = pa.LargeListArray.from_arrays(offsets, _json_texts(pc.list_flatten(values)))
        texts = _concatenated(["[", pc.binary_join(items, pa.scalar(", ", pa.large_string())), "]"], n)
    return pc.if_else(pc.is_valid(values), texts, pa.scalar("null", pa.large_string())) if values.null_count else texts


def _json_escaped(values: pa.Array) -> pa.Array:
    """
    Texts (large_string) escaped as `json.dumps` escapes them, without their quotes. Arrow writes the two-character
    escapes (quotes, backslashes, newlines); a text with another character to escape (one beyond ASCII, a control
    character) is written by the escaping that `json.dumps` calls.
    """
    to_escape = _to_escape(values)
    if not to_escape.any():
        return values
    escaped = pa.array(to_escape)
    texts = values.filter(escaped)
    for character, escape in _SHORT_ESCAPES:
        if pc.any(pc.match_substring(texts, character)).as_py():
            texts = pc.replace_substring(texts, character, escape)
    others = pc.invert(pc.ascii_is_printable(texts))
    if pc.any(others).as_py():
        written = [encode_basestring_ascii(text)[1:-1] for text in values.filter(escaped).filter(others).to_pylist()]
        texts = pc.replace_with_mask(texts, others, pa.array(written, type=pa.large_string()))
    return pc.replace_with_mask(values, escaped, texts)


def _to_escape(values: pa.Array) -> np.ndarray:
    """
    `(n,)` bool: whether each text (large_string) holds a character that `json.dumps` escapes: a quote, a backslash, a
    control character or one beyond ASCII, each of whose UTF-8 bytes lies outside 0x20-0x7e. Read from the bytes as
    stored, twice as fast as Arrow's regular expressions.
    """
    escaped = np.zeros(len(values), dtype=bool)
    if not len(values):
        return escaped
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset : values.offset + len(values) + 1]
    if offsets[-1] > offsets[0]:
        data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        at = np.flatnonzero((data < 0x20) | (data > 0x7E) | (data == ord('"')) | (data == ord("\\"))) + offsets[0]
        escaped[np.searchsorted(offsets, at, side="right") - 1] = True
    return escaped


def _concatenated(pieces: list[str | pa.Array], n: int) -> pa.Array:
    """`(n,)` large_string: the pieces, arrays or texts on every row, one after the other."""
    merged: list[str | pa.Array] = []
    for piece in pieces:  # neighbouring texts as one
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    if all(isinstance(piece, str) for piece in merged):
        return _repeated("".join(merged), n)
    large = (pa.scalar(piece, pa.large_string()) if isinstance(piece, str) else piece for piece in merged)
    return pc.binary_join_element_wise(*large, pa.scalar("", pa.large_string()))


def _repeated(text: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(text, pa.large_string()), n)


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _sort_keys(columns: dict[str, tuple[np.ndarray, np.ndarray]], names: list[str]) -> np.ndarray:
    """`(N,)` int64 keys that sort the rows as their column hashes do, lexicographically in the order of `names`."""
    ranks, sizes = [], []
    for name in names:
        codes, hashes = columns[name]
        distinct, rank = np.unique(hashes, return_inverse=True)  # each hash's rank among the column's
        ranks.append(rank.reshape(-1)[codes])
        sizes.append(len(distinct))
    return row_keys(ranks, sizes)


def _is_media(feature: Any) -> bool:
    """Whether a `datasets` feature holds media (an image, a list of them, a dict with one) anywhere."""
    if type(feature).__name__ in _MEDIA:
        return True
    if isinstance(feature, dict):
        return any(_is_media(inner) for inner in feature.values())
    inner = getattr(feature, "feature", None)
    return inner is not None and _is_media(inner)


def _media_content(value: Any) -> Any:
    """A stored media value (`{"bytes", "path"}`, possibly nested) as its bytes, or without bytes its file's name."""
    if isinstance(value, dict):
        if set(value) == {"bytes", "path"}:
            return value["bytes"] if value["bytes"] is not None else {"file": os.path.basename(value["path"] or "")}
        return {key: _media_content(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_media_content(inner) for inner in value]
    return value


def _hashes(values: Iterable[Any]) -> np.ndarray:
    """`(n,)` uint64: each value's hash, that of its text (`_text_hashes`): a string as it is, else its sorted JSON."""
    texts = (
        value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=_content) for value in values
    )
    return _text_hashes(text.encode() for text in texts)


def _text_hashes(texts: Iterable[bytes]) -> np.ndarray:
    """`(n,)` uint64: the first 8 bytes of each UTF-8 text's BLAKE2b, read little-endian."""
    digests = b"".join([hashlib.blake2b(text, digest_size=8).digest() for text in texts])
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def _content(value: Any) -> Any:
    """What JSON cannot hold, as something it can that changes with the content (the `default` of `json.dumps`)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": hashlib.blake2b(bytes(value), digest_size=16).hexdigest()}
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal)):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().cpu().numpy()
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):  # numpy, a PIL image
        array = np.asarray(value)
        if array.dtype == object:
            return {"shape": list(array.shape), "values": array.tolist()}
        content = hashlib.blake2b(np.ascontiguousarray(array).tobytes(), digest_size=16).hexdigest()
        return {"dtype": str(array.dtype), "shape": list(array.shape), "bytes": content}
    return type(value).__name__


def _hex(hashes: np.ndarray, header: bytes = b"") -> str:
    digest = hashlib.sha256(header)
    digest.update(np.ascontiguousarray(hashes, dtype="<u8"))  # its bytes row by row, a contiguous array uncopied
    return digest.hexdigest()[:32]
