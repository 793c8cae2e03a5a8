"""The digest of a train dataset's rows that a KGPS state records: every column counts, images and bytes by their
content, and a state of a development build of 0.3 (its `prompt` column only) is refused."""

import io

import numpy as np
import pytest

from trl_kgps import KGPSSelector
from trl_kgps.engine import prompts_digest as prompts_digest_module
from trl_kgps.engine import state_file
from trl_kgps.engine.prompts_digest import mismatch, prompts_digest, same_rows
from trl_kgps.sampler import KGPSRepeatSampler


datasets = pytest.importorskip("datasets")
Image = pytest.importorskip("PIL.Image")


def png(color):
    buffer = io.BytesIO()
    Image.new("RGB", (2, 2), color).save(buffer, format="PNG")
    return buffer.getvalue()


COLORS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (9, 9, 9)]


def vision(order, paths=None):
    """One instruction over four images (a vision dataset), in `order`; stored as bytes, or as files at `paths`."""
    images = [{"bytes": png(COLORS[i]), "path": None} for i in order]
    if paths is not None:
        images = [{"bytes": None, "path": paths[i]} for i in order]
    features = datasets.Features({"prompt": datasets.Value("string"), "image": datasets.Image()})
    return datasets.Dataset.from_dict({"prompt": ["Describe the image."] * 4, "image": images}, features=features)


def test_rows_that_share_their_prompt_and_differ_in_an_image_reordered_do_not_fit():
    saved, shuffled = prompts_digest(vision([0, 1, 2, 3])), prompts_digest(vision([2, 0, 3, 1]))
    assert saved["ordered"] == shuffled["ordered"]  # the prompt column alone cannot tell them apart
    assert mismatch(saved, shuffled, 4).startswith("its 4 rows are this run's in another order: rows that share")
    other = prompts_digest(vision([0, 1, 2, 2]))
    assert mismatch(saved, other, 4).startswith("it was saved for other rows than this run's 4 (its 'image' column")
    assert mismatch(saved, prompts_digest(vision([0, 1, 2, 3])), 4) is None


def test_images_stored_as_files_are_read_by_their_names_so_the_folder_may_move(tmp_path):
    names = [f"{i}.png" for i in range(4)]
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        for name, color in zip(names, COLORS):
            (tmp_path / folder / name).write_bytes(png(color))
    here = prompts_digest(vision(range(4), [str(tmp_path / "a" / name) for name in names]))
    moved = vision(range(4), [str(tmp_path / "b" / name) for name in names])
    assert mismatch(here, prompts_digest(moved), 4) is None
    reordered = vision([1, 0, 2, 3], [str(tmp_path / "b" / name) for name in names])
    assert mismatch(here, prompts_digest(reordered), 4).startswith("its 4 rows are this run's in another order")


@pytest.mark.parametrize(
    "values",
    [
        [b"\x00\x01", b"\x00\x02"],
        [np.zeros(3), np.ones(3)],
        [Image.new("L", (2, 2), 0), Image.new("L", (2, 2), 1)],
        [np.float32(0.5), np.float32(0.25)],
    ],
    ids=["bytes", "arrays", "PIL images", "numpy scalars"],
)
def test_rows_of_a_plain_list_count_by_their_content(values):
    rows = [{"prompt": "same", "answer": value} for value in values]
    saved = prompts_digest(rows)
    assert saved == prompts_digest([dict(row) for row in rows])
    assert mismatch(saved, prompts_digest(rows[::-1]), 2).startswith("its 2 rows are this run's in another order")


def test_another_set_of_columns_is_named():
    rows = datasets.Dataset.from_dict({"prompt": ["a", "b"], "answer": ["1", "2"]})
    message = mismatch(prompts_digest(rows), prompts_digest(rows.remove_columns("answer")), 2)
    assert message.startswith("it was saved for a dataset with the columns ['answer', 'prompt'], and this run's has")


def test_the_prompt_columns_digest_is_the_one_trl_kgps_0_3_dev_recorded():
    """Computed by the prompt-only digest of commit 664b8b4, which checkpoints written before this one record."""
    prompts = datasets.Dataset.from_dict({"prompt": [f"p{i} a b" for i in range(6)], "idx": list(range(6))})
    digest = prompts_digest(prompts)
    assert (digest["column"], digest["ordered"], digest["unordered"]) == (
        "prompt",
        "19e34edd34d614ed7cf779be8604a93f",
        "3e5d9d949e07c2a355e963dcf168850a",
    )
    conversations = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    assert prompts_digest(datasets.Dataset.from_dict({"prompt": conversations}))["ordered"] == (
        "220bd2800a280b8b5f563a8a4a9a9d1f"
    )


def test_a_state_with_the_prompt_column_digest_only_of_a_development_build_is_refused_naming_the_fix(tmp_path):
    rows = datasets.Dataset.from_dict({"prompt": ["a", "a", "b", "c"], "answer": ["1", "2", "3", "4"]})
    development = {key: value for key, value in prompts_digest(rows).items() if key != "rows"}
    selector = KGPSSelector(4)
    sampler = KGPSRepeatSampler(range(4), mini_repeat_count=2, batch_size=2, selector=selector)
    path = state_file.write(tmp_path, selector, sampler.state_dict(), development)
    # even for the same rows: the prompt column alone cannot tell rows that share it apart
    with pytest.raises(state_file.UnreadableState) as refused:
        state_file.read_run(path, *state_file.load(path), selector, 2, prompts_digest(rows))
    assert str(refused.value) == (
        f"{path} records the digest of its prompt column only, as a development build of trl-kgps 0.3 (0.3.0.dev) "
        "wrote it, which this release does not read. Resume with the build that wrote it, or start KGPS afresh from "
        "this checkpoint: move its kgps_state.npz out and pass KGPSConfig(restart_on_missing_state=True)."
    )


def test_same_rows_are_the_same_object_or_the_same_rows_in_the_same_order():
    from datasets import Dataset

    rows = Dataset.from_dict({"prompt": ["a", "b", "c"], "answer": ["1", "2", "3"]})
    assert same_rows(rows, rows)
    assert same_rows(rows, Dataset.from_dict(rows.to_dict()))  # another object, the same rows
    assert not same_rows(rows, rows.select([2, 1, 0]))  # another order
    assert not same_rows(rows, rows.select([0, 1]))  # another length
    assert not same_rows(rows, Dataset.from_dict({"prompt": ["a", "b", "c"], "answer": ["1", "2", "4"]}))


def _digest_value_by_value(dataset) -> dict:
    """The oracle: every value read in Python and hashed by itself, the rows sorted as tuples."""
    import hashlib
    import json
    import struct

    def value_hash(value):
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=_bytes_content)
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")

    def hex_of(rows, header=b""):
        packed = b"".join(struct.pack(f"<{len(row)}Q", *row) for row in rows)
        return hashlib.sha256(header + packed).hexdigest()[:32]

    names = sorted(dataset.column_names)
    table = dataset.with_format("arrow")[:]
    columns = {name: [value_hash(v) for v in table.column(name).to_pylist()] for name in names}
    rows = list(zip(*(columns[name] for name in names)))
    header = json.dumps(names).encode()
    digest = {
        "rows": {
            "ordered": hex_of(rows, header),
            "unordered": hex_of(sorted(rows), header),
            "columns": {name: hex_of([(h,) for h in columns[name]]) for name in names},
        }
    }
    if "prompt" in columns:
        prompts = [(h,) for h in columns["prompt"]]
        digest.update(column="prompt", ordered=hex_of(prompts), unordered=hex_of(sorted(prompts)))
    return digest


def _bytes_content(value):
    return {"bytes": __import__("hashlib").blake2b(bytes(value), digest_size=16).hexdigest()}


def _varied_rows(n: int, seed: int = 0) -> "datasets.Dataset":
    """Texts distinct and repeated (unicode, empty, missing), ints of several widths and signs, bools, floats (-0.0,
    NaN, inf), bytes, conversations, and a float column with missing values."""
    rng = np.random.default_rng(seed)
    words = ["", "a", "é", "😀 emoji", "日本語", "a" * 300, "x\ny", "\u0000nul"]
    floats = [0.0, -0.0, float("nan"), float("inf"), -1.5, 1e-300, 0.1]
    columns = {
        "prompt": [f"Problem {i}: {words[i % len(words)]}" for i in range(n)],
        "answer": [words[i] if i % 5 else None for i in rng.integers(0, len(words), n)],
        "level": rng.integers(-3, 3, n).tolist(),
        "big": [[-(2**63), 2**63 - 1, 0][i] for i in rng.integers(0, 3, n)],
        "count": rng.integers(0, 2**32, n).tolist(),
        "flag": (rng.random(n) < 0.3).tolist(),
        "score": [floats[i] for i in rng.integers(0, len(floats), n)],
        "blob": [bytes([i % 256, 7]) for i in rng.integers(0, 4, n)],
        "messages": [[{"role": "user", "content": f"q{i % 3}"}] for i in range(n)],
        "partial": [None if i % 7 == 0 else float(i % 4) for i in range(n)],
    }
    features = datasets.Features(
        {
            "prompt": datasets.Value("large_string"),
            "answer": datasets.Value("string"),
            "level": datasets.Value("int8"),
            "big": datasets.Value("int64"),
            "count": datasets.Value("uint32"),
            "flag": datasets.Value("bool"),
            "score": datasets.Value("float32" if seed % 2 else "float64"),
            "blob": datasets.Value("binary"),
            "messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
            "partial": datasets.Value("float64"),
        }
    )
    half = n // 2  # two tables, concatenated: a column in several chunks
    first = datasets.Dataset.from_dict({k: v[:half] for k, v in columns.items()}, features=features)
    second = datasets.Dataset.from_dict({k: v[half:] for k, v in columns.items()}, features=features)
    return datasets.concatenate_datasets([first, second])


@pytest.mark.parametrize(
    "rows",
    [
        lambda d: d,
        lambda d: d.shuffle(seed=1).select(range(len(d) - 3)),  # most rows, through an indices mapping
        lambda d: d.select(range(7, 400, 3)),  # a small part of the table
        lambda d: d.select([]),
        lambda d: d.select_columns(["answer", "level", "flag"]).shuffle(seed=2),  # labels only, repeated rows
    ],
    ids=["stored", "shuffled", "a_small_part", "empty", "labels_only"],
)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("chunks", ["combined", "chunked"])
def test_the_digest_is_that_of_hashing_every_value_by_itself(rows, seed, chunks, monkeypatch):
    """Reading columns whole and hashing their distinct values once changes no digest: every state saved before
    still fits the dataset it was saved for."""
    if chunks == "chunked":  # as a column too large to read as one chunk is
        monkeypatch.setattr(prompts_digest_module, "_COMBINED_BYTES", 0)
    dataset = rows(_varied_rows(6000, seed))
    assert prompts_digest(dataset) == _digest_value_by_value(dataset)
