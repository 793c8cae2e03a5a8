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
from collections.abc import Iterator
from typing import Any

import numpy as np


COLUMN = "prompt"
_ROWS_PER_READ = 10_000
# `datasets` features whose values are stored as `{"bytes", "path"}`: digested by their bytes, or else by their file's
# name, so that a dataset reading its files from another folder (another machine, another cache) still fits.
_MEDIA = {"Image", "Audio", "Video", "Pdf", "Nifti"}


def prompts_digest(dataset: Any) -> dict[str, Any] | None:
    """
    Digests of the rows of a map-style `dataset`, or `None` when its rows are not dicts of columns.

    Returns:
        `dict`: `rows`, the digests of every row's content (all its columns): `ordered` (the rows in index order),
        `unordered` (the same rows in any order share it) and `columns` (each column's name and the digest of its
        values in order, to name the columns that differ); and, when the rows have a `prompt` column, `column`
        (`"prompt"`), `ordered` and `unordered` over that column alone, which are all a state written by trl-kgps
        0.3.0.dev records. Each digest is 32 hex digits. A value is read as its text, or as sorted JSON (a
        conversation); bytes, arrays and images by the hash of their content, a date or decimal as its text, and
        another value JSON cannot hold by its type alone. A `datasets.Dataset` is read as stored, without decoding
        its images.
    """
    columns = _columns(dataset)
    if not columns:
        return None
    names = sorted(columns)
    hashes = np.stack([columns[name] for name in names], axis=1)  # (N, C) uint64, a hash per row and column
    # Rows sorted lexicographically by their column hashes: the same rows in any order give the same matrix.
    unordered = hashes[np.lexsort(hashes.T[::-1])] if len(hashes) else hashes
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
    fits. A `saved` digest without `rows` (trl-kgps 0.3.0.dev) is compared by its `prompt` column alone.
    """
    rows = saved.get("rows")
    if rows is not None and rows["ordered"] == current["rows"]["ordered"]:
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
        if rows is None:
            return None
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


def _columns(dataset: Any) -> dict[str, np.ndarray] | None:
    """Each column's value hashes, `(N,)` uint64 in index order; `None` when the rows are not dicts of columns."""
    names = getattr(dataset, "column_names", None)
    if names and hasattr(dataset, "with_format") and hasattr(dataset, "iter"):
        # datasets.Dataset: read as stored (an image as its bytes and path, not decoded), in batches
        media = {name for name, feature in (getattr(dataset, "features", None) or {}).items() if _is_media(feature)}
        hashes: dict[str, list[int]] = {name: [] for name in names}
        for table in dataset.with_format("arrow").iter(_ROWS_PER_READ):
            for name in names:
                values = table.column(name).to_pylist()
                if name in media:
                    values = [_media_content(value) for value in values]
                hashes[name].extend(_hash(value) for value in values)
        return {name: np.asarray(values, dtype=np.uint64).reshape(-1) for name, values in hashes.items()}
    if not len(dataset) or not isinstance(dataset[0], dict):
        return None
    names = sorted(dataset[0])
    rows: Iterator[dict[str, Any]] = (dataset[i] for i in range(len(dataset)))
    table = [[_hash(row.get(name)) for name in names] for row in rows]
    matrix = np.asarray(table, dtype=np.uint64).reshape(len(dataset), len(names))
    return {name: matrix[:, j] for j, name in enumerate(names)}


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


def _hash(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=_content)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


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
    return hashlib.sha256(header + hashes.astype("<u8").tobytes()).hexdigest()[:32]
