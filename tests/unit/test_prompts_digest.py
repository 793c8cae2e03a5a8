"""The digest of a train dataset's rows that a KGPS state records: every column counts, images and bytes by their
content, and a state of trl-kgps 0.3.0.dev (its `prompt` column only) is still read."""

import io
import logging

import numpy as np
import pytest

from trl_kgps import KGPSSelector
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


def test_a_state_with_the_prompt_column_digest_only_is_checked_by_it_and_read_with_one_line(tmp_path, caplog):
    rows = datasets.Dataset.from_dict({"prompt": ["a", "a", "b", "c"], "answer": ["1", "2", "3", "4"]})
    legacy = {key: value for key, value in prompts_digest(rows).items() if key != "rows"}
    selector = KGPSSelector(4)
    sampler = KGPSRepeatSampler(range(4), mini_repeat_count=2, batch_size=2, selector=selector)
    path = state_file.write(tmp_path, selector, sampler.state_dict(), legacy)
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        state_file.read_run(path, *state_file.load(path), selector, 2, prompts_digest(rows.select([1, 0, 2, 3])))
    lines = [
        r.getMessage() for r in caplog.records if "records the digest of its prompt column only" in r.getMessage()
    ]
    assert len(lines) == 1 and "\n" not in lines[0]
    with pytest.raises(ValueError, match="its 4 prompts are this run's in another order"):
        state_file.read_run(path, *state_file.load(path), selector, 2, prompts_digest(rows.select([2, 0, 1, 3])))


def test_same_rows_are_the_same_object_or_the_same_rows_in_the_same_order():
    from datasets import Dataset

    rows = Dataset.from_dict({"prompt": ["a", "b", "c"], "answer": ["1", "2", "3"]})
    assert same_rows(rows, rows)
    assert same_rows(rows, Dataset.from_dict(rows.to_dict()))  # another object, the same rows
    assert not same_rows(rows, rows.select([2, 1, 0]))  # another order
    assert not same_rows(rows, rows.select([0, 1]))  # another length
    assert not same_rows(rows, Dataset.from_dict({"prompt": ["a", "b", "c"], "answer": ["1", "2", "4"]}))
