"""Which rows are copies of one prompt: `PromptCopies` and `find_copies`, against a dictionary over the Python values."""

import json

import numpy as np
import pytest
from datasets import Dataset

from trl_kgps import KGPSRepeatSampler, KGPSSelector
from trl_kgps.adapters.dataset_copies import find_copies
from trl_kgps.engine.copies import PromptCopies


def numbered(values):
    """The oracle: each value's prompt, numbered by first appearance, comparing values as sorted JSON."""
    seen = {}
    return np.array([seen.setdefault(json.dumps(v, sort_keys=True), len(seen)) for v in values])


def test_prompt_copies_by_hand():
    copies = PromptCopies(np.array([0, 1, 0, 2, 1, 1]), key="prompt")
    assert (copies.num_rows, copies.num_prompts, copies.copies) == (6, 3, 3)
    assert copies.first_row.tolist() == [0, 1, 3] and copies.rows_per_prompt.tolist() == [2, 3, 1]
    assert copies.rows([2, 0]).tolist() == [3, 0] and copies.prompts([4, 3, 2]).tolist() == [1, 2, 0]
    assert "6 rows hold 3 distinct prompts (by 'prompt'; 3 rows repeat" in copies.describe()
    assert PromptCopies.by_row(4).first_row.tolist() == [0, 1, 2, 3] and not PromptCopies.by_row(4).copies


@pytest.mark.parametrize("codes", [[1, 0], [0, 2, 1], [0, -1]])
def test_prompt_copies_refuses_prompts_not_numbered_by_first_row(codes):
    with pytest.raises(ValueError, match="number the prompts 0, 1, ... in the order of their first row"):
        PromptCopies(np.array(codes))


def conversation(i):
    return [{"role": "system", "content": "Solve."}, {"role": "user", "content": f"q{i % 7}"}]


@pytest.mark.parametrize(
    "values",
    [
        [f"q{i % 7}" for i in range(40)],
        [conversation(i) for i in range(40)],
        [[{"role": "user", "content": f"q{i % 3}"}] * (1 + i % 2) for i in range(40)],  # one or two messages
        [i % 9 for i in range(40)],
        [{"text": f"q{i % 5}", "n": i % 2} for i in range(40)],  # a struct: compared as JSON
    ],
    ids=["text", "conversation", "conversation_lengths", "ids", "struct"],
)
def test_find_copies_numbers_equal_values_as_one_prompt(values):
    dataset = Dataset.from_dict({"prompt": values, "answer": list(range(40))}).shuffle(seed=0).select(range(30))
    copies = find_copies(dataset, "prompt", batch_size=2)
    np.testing.assert_array_equal(copies.prompt_of_row, numbered(dataset["prompt"]))
    assert copies.key == "prompt"


def test_find_copies_by_an_id_column_and_its_refusal():
    dataset = Dataset.from_dict({"prompt": [f"say it {i}" for i in range(6)], "problem": [3, 1, 3, 2, 1, 3]})
    assert find_copies(dataset, "problem", 2).prompt_of_row.tolist() == [0, 1, 0, 2, 1, 0]
    assert not find_copies(dataset, "prompt", 2).copies
    with pytest.raises(ValueError, match=r"prompt_key='uid' names a column the train dataset does not have"):
        find_copies(dataset, "uid", 2)


def test_every_row_is_its_own_prompt_where_copies_cannot_be_told_or_would_not_fill_a_batch():
    text = [f"q{i % 3}" for i in range(9)]
    assert find_copies(Dataset.from_dict({"prompt": text}), "prompt", 3).num_prompts == 3
    assert find_copies(Dataset.from_dict({"prompt": text}), "prompt", 4).num_prompts == 9  # 3 prompts < B
    assert find_copies(Dataset.from_dict({"prompt": text}), None, 3).num_prompts == 9
    with_images = Dataset.from_dict({"prompt": text, "images": [[f"{i}.png"] for i in range(9)]})
    assert find_copies(with_images, "prompt", 3).num_prompts == 9  # one instruction over many images
    assert find_copies(range(9), "prompt", 3).num_prompts == 9  # no columns: a bare sampler


def test_the_sampler_chooses_distinct_prompts_and_yields_their_first_rows():
    copies = PromptCopies(np.array([0, 1, 0, 2, 1, 3, 3, 2, 0]))
    sampler = KGPSRepeatSampler(range(9), mini_repeat_count=2, batch_size=2, selector=KGPSSelector(4), copies=copies)
    assert len(sampler) == len(range(9)) // 2 * 2 * 2  # TRL's length: the rows' worth of batches
    rows = list(sampler)
    batches = [rows[i : i + 4 : 2] for i in range(0, len(rows), 4)]
    for batch in batches:
        assert set(batch) <= {0, 1, 3, 5} and len(set(copies.prompts(batch))) == 2
    assert sampler.ledger.times_selected.sum() == 2 * len(batches) and sampler.ledger.num_prompts == 4
