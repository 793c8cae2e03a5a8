"""The KGPS state file: atomic writes, and clear errors for missing, truncated or foreign files."""

import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from trl_kgps.engine import state_file as state_file


def test_round_trip(tmp_path):
    path = str(tmp_path / state_file.STATE_FILE)
    arrays = {"mean": np.arange(5, dtype=np.float32), "pending": np.zeros((0, 3), dtype=np.int64)}
    state_file.save(path, arrays, {"rng_state": {"state": 2**100}})
    loaded, meta = state_file.load(path)
    np.testing.assert_array_equal(loaded["mean"], arrays["mean"])
    assert loaded["pending"].shape == (0, 3)
    assert meta["rng_state"]["state"] == 2**100


def test_a_failed_write_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = str(tmp_path / state_file.STATE_FILE)
    state_file.save(path, {"mean": np.ones(3)}, {"version": 1})

    def torn_write(f, **arrays):
        f.write(b"PK\x03\x04 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", torn_write)
    with pytest.raises(OSError, match="disk full"):
        state_file.save(path, {"mean": np.zeros(3)}, {"version": 2})
    arrays, meta = state_file.load(path)
    assert meta["version"] == 1 and arrays["mean"].tolist() == [1, 1, 1]
    assert os.listdir(tmp_path) == [state_file.STATE_FILE]


WRITER = """
import sys, numpy as np
from trl_kgps.engine import state_file as state_file
path = sys.argv[1]
big = np.ones(20_000_000, dtype=np.float32)
for version in range(2, 1000):
    state_file.save(path, {"mean": big * version}, {"version": version})
    print(version, flush=True)
"""


def test_a_process_killed_while_writing_leaves_a_whole_file(tmp_path):
    """SIGKILL in the middle of writing 80 MB states: the file on disk is always one complete state."""
    path = str(tmp_path / state_file.STATE_FILE)
    state_file.save(path, {"mean": np.ones(20_000_000, dtype=np.float32)}, {"version": 1})
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path], stdout=subprocess.PIPE, text=True)
    writer.stdout.readline()  # one state written; the next is being written
    time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    arrays, meta = state_file.load(path)
    assert meta["version"] >= 2
    assert (arrays["mean"] == meta["version"]).all()


def test_missing_file_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match="kgps_state.npz does not exist.*restart_on_missing_state"):
        state_file.load(str(tmp_path / state_file.STATE_FILE))


def test_truncated_file_is_refused(tmp_path):
    path = str(tmp_path / state_file.STATE_FILE)
    state_file.save(path, {"mean": np.ones(1000)}, {})
    with open(path, "rb") as f:
        head = f.read(300)
    with open(path, "wb") as f:
        f.write(head)
    with pytest.raises(ValueError, match="not a readable KGPS state.*truncated"):
        state_file.load(path)


def test_foreign_format_is_refused(tmp_path):
    path = str(tmp_path / state_file.STATE_FILE)
    meta = np.frombuffer(json.dumps({"format": 99}).encode(), np.uint8)
    np.savez(path, meta=meta)
    with pytest.raises(ValueError, match="format 99.*reads format 2"):
        state_file.load(path)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "not a state")
    with pytest.raises(ValueError, match="not a readable KGPS state"):
        state_file.load(path)


def written_state(directory):
    """`directory/kgps_state.npz` as a run writes it, for a KGPS selector over 4 prompts in batches of 2."""
    from trl_kgps import KGPSConfig, KGPSSelector
    from trl_kgps.engine.ledger import BatchLedger

    selector = KGPSSelector(4, KGPSConfig(), seed=0)
    return state_file.write(directory, selector, BatchLedger(selector.num_prompts, 2).state_dict()), selector


def edit_meta(path, **entries):
    """Rewrites the state file at `path` with `entries` replacing its meta's, as a hand edit would."""
    arrays, meta = state_file.load(path)
    meta.update(entries)
    del meta["format"]  # `save` writes it
    state_file.save(path, arrays, meta)


@pytest.mark.parametrize(
    "entries, said",
    [
        (
            {"selector": "KGPSSelector"},
            "its meta['selector'] is \"KGPSSelector\" (a JSON string), where trl-kgps "
            "writes an object (the selector's state)",
        ),
        ({"selector": [1, 2]}, "its meta['selector'] is [1, 2] (a JSON array), where trl-kgps writes an object"),
        ({"selector_class": None}, "its meta['selector_class'] is null (a JSON null), where trl-kgps writes a string"),
        ({"num_prompts": "4"}, "its meta['num_prompts'] is \"4\" (a JSON string), where trl-kgps writes an integer"),
        ({"batch_size": True}, "its meta['batch_size'] is true (a JSON boolean), where trl-kgps writes an integer"),
    ],
)
def test_a_meta_entry_of_another_type_is_refused_naming_the_file_and_the_entry(tmp_path, entries, said):
    from trl_kgps import difficulty_table, load_selector
    from trl_kgps.adapters import checkpoint
    from trl_kgps.engine.ledger import BatchLedger

    path, selector = written_state(tmp_path)
    edit_meta(path, **entries)
    before = selector.state_dict()
    ledger = BatchLedger(selector.num_prompts, 2)
    # Before, `meta["selector"] = "KGPSSelector"` raised `AttributeError: 'str' object has no attribute 'get'` on
    # resume and on loading alike.
    for read in (
        lambda: state_file.load(path),
        lambda: load_selector(tmp_path),
        lambda: difficulty_table(path),
        lambda: checkpoint.resume(str(tmp_path), selector.config, selector, ledger, prompts=lambda: None),
    ):
        with pytest.raises(state_file.UnreadableState) as error:
            read()
        message = str(error.value)
        assert message.startswith(f"{path} is not a readable KGPS state: ") and said in message, message
        assert "resume from an earlier checkpoint" in message, message
    assert selector.state_dict().keys() == before.keys() and ledger.batches_chosen == 0


@pytest.mark.parametrize("content", [b"num_prompts: 4\nselector: kgps\n", b""], ids=["text", "empty"])
def test_a_file_that_is_no_npz_is_refused_as_such_without_numpys_pickle_hint(tmp_path, content):
    from trl_kgps import load_selector

    path = tmp_path / state_file.STATE_FILE
    path.write_bytes(content)
    for read in (lambda: state_file.load(str(path)), lambda: load_selector(tmp_path)):
        with pytest.raises(state_file.UnreadableState) as error:
            read()
        message = str(error.value)
        assert message.startswith(f"{path} is not a KGPS state: it ") and "pickle" not in message, message
        assert "b'PK\\x03\\x04' that begins every .npz archive" in message, message
        assert ("begins b'num_prompts: 4\\ns'," if content else "it is empty") in message, message
