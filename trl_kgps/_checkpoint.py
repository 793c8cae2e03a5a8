"""
The KGPS state file, `kgps_state.npz`, in every trainer checkpoint and beside a saved model: one uncompressed `.npz`,
written atomically. It holds the selector's `state_dict()` (its arrays as `selector.<key>`, its other values in the
JSON `meta["selector"]`), the sampler's and the callback's arrays, and `meta`: `selector_class`, `num_prompts`,
`batch_size`, `batches_chosen`, `batches_scored`, `format`.
"""

import json
import os
import tempfile
import zipfile
from typing import Any

import numpy as np


STATE_FILE = "kgps_state.npz"
FORMAT_VERSION = 2
_SELECTOR = "selector."


def save(path: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """
    Writes `arrays` and the JSON-able `meta` to `path` so that a crash at any moment leaves either the previous
    file or the new one, never a torn one: write a temporary file beside it, flush it to disk, rename it over.
    """
    directory = os.path.dirname(os.path.abspath(path))
    payload = {**arrays, "meta": np.frombuffer(json.dumps({**meta, "format": FORMAT_VERSION}).encode(), np.uint8)}
    handle, temporary = tempfile.mkstemp(prefix=".kgps_state.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as f:
            np.savez(f, **payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load(path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Reads a file written by `save`; a missing, truncated or foreign file raises `ValueError` naming it."""
    if not os.path.isfile(path):
        raise ValueError(
            f"{path} does not exist: this checkpoint was not written with KGPSCallback, so the prompt-selection "
            "state cannot be restored. Resume from a checkpoint saved with KGPS, or start the estimator afresh with "
            "KGPSConfig(restart_on_missing_state=True)."
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not a readable KGPS state ({type(error).__name__}: {error}); it may be truncated. Resume "
            "from an earlier checkpoint."
        ) from None
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has KGPS state format {meta.get('format')!r}, but this trl-kgps reads format {FORMAT_VERSION}. "
            "Resume with the trl-kgps release that wrote it."
        )
    return arrays, meta


def pack_selector(state: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A selector's `state_dict()` as the file stores it: its arrays, as `selector.<key>`, and its other values."""
    arrays = {_SELECTOR + key: value for key, value in state.items() if isinstance(value, np.ndarray)}
    return arrays, {key: value for key, value in state.items() if not isinstance(value, np.ndarray)}


def unpack_selector(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any]:
    """The selector's `state_dict()` back from a file's `arrays` and `meta` (read by `load`)."""
    state = dict(meta["selector"])
    state.update({key[len(_SELECTOR) :]: value for key, value in arrays.items() if key.startswith(_SELECTOR)})
    return state
