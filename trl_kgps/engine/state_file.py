"""
The KGPS state file, `kgps_state.npz`, in every trainer checkpoint and beside a saved model: its format, its atomic
write, its validation and where it is read from (a local folder or a Hub repo).

One uncompressed `.npz` holds the selector's `state_dict()` (its arrays as `selector.<key>`, its other values in the
JSON `meta["selector"]`, with the selector's own state version), the sampler's `state_dict()` (its arrays as they
are, its counters `batches_chosen` and `batches_scored` in `meta`), where rows repeat prompts each row's prompt
(`copies_prompt_of_row`), and `meta`: `selector_class`, `num_prompts` (distinct prompts), `batch_size`, `copies` (the
key column, where rows repeat prompts), `prompts` (the digest of the train dataset's rows,
`prompts_digest`; absent before trl-kgps 0.3),
`trainer` (the trainer's `global_step` when it saved, and the arguments that map its steps to generation batches;
absent before trl-kgps 0.3), `trl_kgps` (the release that wrote it, `older_states.RELEASE`; absent before trl-kgps
0.3.0), `format` (`FORMAT_VERSION`).
"""

import json
import logging
import os
import re
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

from .. import __version__
from . import older_states
from .copies import PromptCopies
from .prompts_digest import mismatch
from .protocol import PromptSelector


logger = logging.getLogger(__name__)

STATE_FILE = "kgps_state.npz"
# The file's layout, the same since trl-kgps 0.1: what releases change is the selector's state version (and
# `older_states` reads the earlier ones) and the entries of `meta` (absent from an earlier release's file).
FORMAT_VERSION = 2
_SELECTOR = "selector."
# Each row's prompt, `(N,)` int32, in a state over a dataset whose rows repeat prompts (`engine.copies`).
COPIES = "copies_prompt_of_row"
# What may name a Hub repo (huggingface_hub's `validate_repo_id`, which `read` does not import for a local path):
# "name" or "namespace/name" of letters, digits, "_", "-" and ".", neither "--" nor "..", not a ".npz" file name.
_REPO_ID = re.compile(r"^(?!.*(--|\.\.))(\b[\w\-.]+\b/)?\b[\w\-.]+\b(?<!\.npz)$")
# An `.npz` is a zip archive, whose first entry starts with this signature.
_NPZ_SIGNATURE = b"PK\x03\x04"
# The JSON type of each `meta` entry `write` puts there; `load` refuses a hand-edited value of another type, which
# would otherwise fail far from the file (`AttributeError: 'str' object has no attribute 'get'`).
_META_TYPES = {
    "selector": (dict, "an object (the selector's state)"),
    "selector_class": (str, "a string (the selector's class name)"),
    "num_prompts": (int, "an integer"),
    "batch_size": (int, "an integer"),
    "batches_chosen": (int, "an integer"),
    "batches_scored": (int, "an integer"),
    "prompts": (dict, "an object (the digest of the rows)"),
    "trainer": (dict, "an object (the trainer's record)"),
    "copies": (dict, "an object (the key column)"),
    older_states.RELEASE: (str, "a string (the release that wrote it)"),
}


class UnreadableState(ValueError):
    """A state file that is missing, truncated or of another format: its message says what to resume from."""


def save(path: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """
    Writes `arrays` and the JSON-able `meta` to `path` so that a crash at any moment leaves either the previous
    file or the new one, never a torn one: write a temporary file beside it, flush it to disk, rename it over.
    """
    payload = {**arrays, "meta": np.frombuffer(json.dumps({**meta, "format": FORMAT_VERSION}).encode(), np.uint8)}
    _replace(path, lambda f: np.savez(f, **payload))


def copy(source: str, directory: str | os.PathLike[str]) -> str:
    """Copies the state file `source` to `directory/kgps_state.npz`, as atomically as `save` writes; returns the
    path."""
    path = os.path.join(directory, STATE_FILE)
    with open(source, "rb") as f:
        content = f.read()
    _replace(path, lambda f: f.write(content))
    return path


def _replace(path: str, write: Callable[[BinaryIO], Any]) -> None:
    """Writes a temporary file beside `path` with `write`, flushes it to disk, and renames it over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".kgps_state.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load(path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Reads a file written by `save`; a missing, truncated or foreign file raises `UnreadableState` naming it."""
    if os.path.isdir(path):
        raise UnreadableState(
            f"{path} is a directory, not the file KGPS saves its state in: resume from a checkpoint whose "
            f"{STATE_FILE} is that file, or remove the directory from this checkpoint to start KGPS afresh from it "
            "(with KGPSConfig(restart_on_missing_state=True), KGPS restarts from a checkpoint that holds no state)."
        )
    if not os.path.isfile(path):
        raise UnreadableState(
            f"{path} does not exist, so this checkpoint was not saved by a run with KGPSCallback: resume from one "
            "that was, or pass KGPSConfig(restart_on_missing_state=True) to start KGPS afresh from this one."
        )
    try:
        _check_signature(path)
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
    except UnreadableState:
        raise  # not an .npz at all: its message says so
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, json.JSONDecodeError) as error:
        raise UnreadableState(
            f"{path} is not a readable KGPS state ({type(error).__name__}: {error}), perhaps truncated: resume from "
            "an earlier checkpoint."
        ) from None
    if not isinstance(meta, dict):
        raise UnreadableState(
            f"{path} is not a readable KGPS state: its `meta` is a JSON {_json_type(meta)}, where trl-kgps writes "
            "an object: resume from an earlier checkpoint."
        )
    if meta.get("format") != FORMAT_VERSION:
        release = meta.get(older_states.RELEASE)
        writer = "the trl-kgps release that wrote it" if release is None else f"trl-kgps {release}, which wrote it"
        raise UnreadableState(
            f"{path} has KGPS state format {meta.get('format')!r} and this trl-kgps ({__version__}) reads format "
            f"{FORMAT_VERSION}: resume with {writer}."
        )
    _check_meta_types(path, meta)
    return arrays, meta


def _check_signature(path: str) -> None:
    """Raises `UnreadableState` unless the file at `path` begins as an `.npz` archive does (before numpy reads a
    text file as a pickle and suggests `allow_pickle=True`)."""
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(_NPZ_SIGNATURE):
        return
    raise UnreadableState(
        f"{path} is not a KGPS state: "
        + (f"it begins {head!r}, not" if head else "it is empty, without")
        + f" the {_NPZ_SIGNATURE!r} that begins every .npz archive (a text file, or another file saved under its "
        f"name): resume from an earlier checkpoint, or restore the {STATE_FILE} that trl-kgps wrote there."
    )


def _check_meta_types(path: str, meta: dict[str, Any]) -> None:
    """Raises `UnreadableState` naming the first entry of `meta` (read from `path`) not of `_META_TYPES`' type."""
    for key, (kind, described) in _META_TYPES.items():
        value = meta.get(key)
        if key in meta and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            shown = json.dumps(value)
            raise UnreadableState(
                f"{path} is not a readable KGPS state: its meta[{key!r}] is "
                f"{shown if len(shown) <= 40 else shown[:37] + '...'} (a JSON {_json_type(value)}), where trl-kgps "
                f"writes {described}, so the file was edited or written by other code: resume from an earlier "
                f"checkpoint, or restore the {STATE_FILE} that trl-kgps wrote."
            )


def _json_type(value: Any) -> str:
    """The JSON name of the type of a value `json.loads` returned: `"oops"` -> "string"."""
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), "null")


def write(
    directory: str | os.PathLike[str],
    selector: PromptSelector,
    ledger_state: dict[str, Any],
    prompts: dict[str, Any] | None = None,
    trainer: dict[str, int] | None = None,
    copies: PromptCopies | None = None,
) -> str:
    """
    Writes `directory/kgps_state.npz` from a selector, its sampler's `state_dict()`, the digest of the rows they
    select among (`prompts_digest.prompts_digest`), the `trainer`'s record (its `global_step`, and the arguments
    that map its steps to generation batches) and, where rows repeat a prompt, the `copies`: each row's prompt
    (`COPIES`, `(N,)` int32) and the key column; returns the path.
    """
    os.makedirs(directory, exist_ok=True)
    arrays, selector_meta = pack_selector(selector.state_dict())
    if copies is not None and copies.copies:
        arrays[COPIES] = copies.prompt_of_row.astype(np.int32)
    meta = {"selector": selector_meta, "selector_class": type(selector).__name__, older_states.RELEASE: __version__}
    for key, value in ledger_state.items():
        if isinstance(value, np.ndarray):
            arrays[key] = value
        else:
            meta[key] = int(value)
    meta.update(num_prompts=selector.num_prompts, batch_size=int(ledger_state["pending"].shape[1]))
    if prompts is not None:
        meta["prompts"] = prompts
    if trainer is not None:
        meta["trainer"] = {key: int(value) for key, value in trainer.items()}
    if COPIES in arrays:
        meta["copies"] = {"key": copies.key, "columns": list(copies.columns)}
    path = os.path.join(directory, STATE_FILE)
    save(path, arrays, meta)
    return path


def read_run(
    path: str,
    arrays: dict[str, np.ndarray],
    meta: dict[str, Any],
    selector: PromptSelector,
    batch_size: int,
    prompts: dict[str, Any] | None = None,
    batch_formula: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """
    The selector's and the sampler's states in a file's `arrays` and `meta` (`load`ed from `path`), checked to fit a
    run of `selector` (its class and number of prompts) in batches of `batch_size` (set by `batch_formula`, named when
    they differ) over the rows of digest `prompts`; a `ValueError` says what does not fit. A state that records no
    digest (written before trl-kgps 0.3), or only its `prompt` column's, is read with a warning. The trainer's record
    the file holds is the adapter's to check (`adapters.trainer_record`).
    """
    num_prompts, saved_batch_size = int(meta["num_prompts"]), int(meta["batch_size"])
    if num_prompts != selector.num_prompts:
        raise ValueError(
            f"it was saved for a dataset of {num_prompts} prompts, and this run's has {selector.num_prompts}"
        )
    if saved_batch_size != batch_size:
        raise ValueError(
            f"it was saved with {saved_batch_size} prompts per generation batch, and this run has {batch_size}"
            + (f" ({batch_formula})" if batch_formula else "")
        )
    if older_states.selector_class(meta) != type(selector).__name__:
        raise ValueError(f"it holds {held(meta)}, but this run uses {type(selector).__name__}")
    refusal = older_states.digest_of_a_development_build(path, meta.get("prompts"))
    if refusal is not None:
        raise UnreadableState(refusal)
    if prompts is not None:
        rows = arrays[COPIES].size if COPIES in arrays else num_prompts
        reason = None if "prompts" not in meta else mismatch(meta["prompts"], prompts, rows)
        if reason is not None:
            raise ValueError(reason)
        unchecked = older_states.digest_warning(path, meta.get("prompts"))
        if unchecked is not None:
            logger.warning(unchecked)
    ledger_state = {key: value for key, value in arrays.items() if not key.startswith(_SELECTOR) and key != COPIES}
    ledger_state.update(batches_chosen=meta["batches_chosen"], batches_scored=meta["batches_scored"])
    return unpack_selector(arrays, meta), ledger_state


def read(
    path_or_repo_id: str | os.PathLike[str],
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    token: str | bool | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """
    The state file's arrays and meta, from a local directory (or its `kgps_state.npz` itself) or else the Hub repo of
    that id. A path that cannot be a repo id (a `PathLike`, more than one `/`, a `.npz`), or a local file other than
    the state file, raises before any Hub call.
    """
    location = os.fspath(path_or_repo_id)
    expected = (
        f"a folder holding {STATE_FILE} (a trainer's output_dir after `trainer.save_model()`, or one of its "
        f"checkpoint-N folders), that {STATE_FILE} itself, or a Hub repo id ('namespace/name')"
    )
    if os.path.isfile(location) and os.path.basename(location) == STATE_FILE:
        return load(location)
    if os.path.isfile(location):
        raise ValueError(f"{location!r} is a file, not {STATE_FILE}: pass {expected}.")
    if not os.path.exists(location) and (not isinstance(path_or_repo_id, str) or not _REPO_ID.match(location)):
        raise FileNotFoundError(f"{location!r} does not exist: pass {expected}.")
    if os.path.isdir(location):
        path = os.path.join(location, STATE_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{location!r} holds no {STATE_FILE}. Pass a trainer's output_dir after `trainer.save_model()` or "
                "`trainer.push_to_hub()` with KGPSCallback attached, or one of its checkpoint-N folders."
            )
        return load(path)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        path = hf_hub_download(location, STATE_FILE, revision=revision, cache_dir=cache_dir, token=token)
    except (OSError, ValueError, EntryNotFoundError) as error:
        raise OSError(
            f"{location!r} is not a local directory, and {STATE_FILE} could not be fetched from the Hub repo of that "
            f"id{'' if revision is None else f' at revision {revision!r}'} ({type(error).__name__}: {error}). A "
            "local directory works too: pass a trainer's output_dir or a checkpoint-N folder that holds "
            f"{STATE_FILE}; for the Hub, check the repo id, your connection, HF_HUB_OFFLINE and your token."
        ) from error
    return load(path)


def saved_copies(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> PromptCopies | None:
    """The rows that are copies of one prompt in a state file's `arrays` and `meta`; `None`: one prompt per row."""
    if COPIES not in arrays:
        return None
    saved = meta.get("copies", {})
    return PromptCopies(arrays[COPIES], key=saved.get("key"), columns=tuple(saved.get("columns", ())))


def selector_state(
    location: str, arrays: dict[str, np.ndarray], meta: dict[str, Any], selector_class: type
) -> dict[str, Any]:
    """
    The `state_dict()` of the `selector_class` a file's `arrays` and `meta` hold (read from `location`); a
    `ValueError` naming the right class if it holds another.
    """
    name = older_states.selector_class(meta)
    if name != selector_class.__name__:
        raise ValueError(
            f"The KGPS state of {location!r} holds {held(meta)}, not {with_article(selector_class.__name__)}. Load it "
            f'with `{name}.from_pretrained("{location}")` (from trl_kgps.selectors), or with '
            f'`trl_kgps.load_selector("{location}")`, which builds whichever selector the state holds.'
        )
    return unpack_selector(arrays, meta)


def held(meta: dict[str, Any]) -> str:
    """What a state file's `meta` holds, for messages: "an ExperimentalSelector", with what wrote it where the class it
    names reads as another today (`older_states.selector_class`)."""
    saved_as = older_states.saved_as(meta)
    return with_article(older_states.selector_class(meta)) + ("" if saved_as is None else f" ({saved_as})")


def with_article(name: str | None) -> str:
    """A class name with its article: "a KGPSSelector", "an ExperimentalSelector"; "no selector" for `None`."""
    if name is None:
        return "no selector"
    return f"{'an' if name[:1].upper() in 'AEIO' else 'a'} {name}"


def pack_selector(state: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A selector's `state_dict()` as the file stores it: its arrays, as `selector.<key>`, and its other values."""
    arrays = {_SELECTOR + key: value for key, value in state.items() if isinstance(value, np.ndarray)}
    return arrays, {key: value for key, value in state.items() if not isinstance(value, np.ndarray)}


def unpack_selector(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any]:
    """The selector's `state_dict()` back from a file's `arrays` and `meta` (read by `load`)."""
    state = dict(meta["selector"])
    state.update({key[len(_SELECTOR) :]: value for key, value in arrays.items() if key.startswith(_SELECTOR)})
    return state
