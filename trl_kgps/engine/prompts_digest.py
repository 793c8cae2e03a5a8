"""
Which prompts, in which order, a KGPS state belongs to: a digest of the train dataset's `prompt` column, which every
saved state records and a resumed run compares with its own dataset (`state_file.read_run`). KGPS stores each
prompt's belief by its row, so a dataset of the same length with other prompts, or the same prompts in another
order, would give every belief to another prompt.
"""

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np


COLUMN = "prompt"
_ROWS_PER_READ = 10_000


def prompts_digest(dataset: Any) -> dict[str, str] | None:
    """
    Digests of the prompts of a map-style `dataset`, or `None` when its rows have no `prompt` column.

    Returns:
        `dict`: `column` (`"prompt"`), `ordered` (the prompts in index order) and `unordered` (the same prompts in any
        order share it), each digest 32 hex digits. A prompt is read as its text, or as sorted JSON for a
        conversation; a value JSON cannot hold (an image) counts by its type alone.
    """
    prompts = _prompts(dataset)
    if prompts is None:
        return None
    hashes = np.fromiter((_hash(prompt) for prompt in prompts), dtype=np.uint64, count=len(dataset))
    return {"column": COLUMN, "ordered": _hex(hashes), "unordered": _hex(np.sort(hashes))}


def mismatch(saved: dict[str, str], current: dict[str, str], num_prompts: int) -> str | None:
    """Why a state saved for the prompts `saved` does not fit a dataset of `current`; `None` if it fits."""
    if saved["ordered"] == current["ordered"]:
        return None
    if saved["unordered"] == current["unordered"]:
        return (
            f"its {num_prompts} prompts are this run's in another order (another shuffle seed, a sort), and KGPS keeps "
            "each prompt's belief by its row"
        )
    return (
        f"it was saved for other prompts than this run's {num_prompts} (its {COLUMN!r} column differs: another "
        "dataset, filter or deduplication), and KGPS keeps each prompt's belief by its row"
    )


def _prompts(dataset: Any) -> Iterator[Any] | None:
    if COLUMN in (getattr(dataset, "column_names", None) or ()) and hasattr(dataset, "iter"):
        # datasets.Dataset: read in batches, not row by row
        return (p for batch in dataset.select_columns([COLUMN]).iter(_ROWS_PER_READ) for p in batch[COLUMN])
    if len(dataset) and isinstance(dataset[0], dict) and COLUMN in dataset[0]:
        return (dataset[i][COLUMN] for i in range(len(dataset)))
    return None


def _hash(prompt: Any) -> int:
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=_type_name)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _type_name(value: Any) -> str:
    return type(value).__name__


def _hex(hashes: np.ndarray) -> str:
    return hashlib.sha256(hashes.astype("<u8").tobytes()).hexdigest()[:32]
