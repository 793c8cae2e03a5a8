"""Which rows are copies of one prompt: `PromptCopies` and `find_copies`, against a dictionary over the Python values."""

import json

import numpy as np
import pytest
from datasets import Dataset

from trl_kgps import KGPSConfig, KGPSRepeatSampler, KGPSSelector
from trl_kgps.adapters.dataset_copies import find_copies
from trl_kgps.adapters.reward_reads import ColumnReaders
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
    assert "6 rows hold 3 distinct prompts (rows with equal 'prompt'; 3 rows repeat" in copies.describe()
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
    copies, _ = find_copies(dataset, "prompt", batch_size=2)
    np.testing.assert_array_equal(copies.prompt_of_row, numbered(dataset["prompt"]))
    assert copies.key == "prompt"


def test_find_copies_by_an_id_column_and_its_refusal():
    dataset = Dataset.from_dict({"prompt": [f"say it {i}" for i in range(6)], "problem": [3, 1, 3, 2, 1, 3]})
    assert find_copies(dataset, "problem", 2)[0].prompt_of_row.tolist() == [0, 1, 0, 2, 1, 0]
    assert not find_copies(dataset, "prompt", 2)[0].copies
    with pytest.raises(ValueError, match=r"prompt_key='uid' names a column the train dataset does not have"):
        find_copies(dataset, "uid", 2)


def test_every_row_is_its_own_prompt_where_copies_cannot_be_told_or_would_not_fill_a_batch():
    text = [f"q{i % 3}" for i in range(9)]
    assert find_copies(Dataset.from_dict({"prompt": text}), "prompt", 3)[0].num_prompts == 3
    assert find_copies(Dataset.from_dict({"prompt": text}), "prompt", 4)[0].num_prompts == 9  # 3 prompts < B
    assert find_copies(Dataset.from_dict({"prompt": text}), None, 3)[0].num_prompts == 9
    with_images = Dataset.from_dict({"prompt": text, "images": [[f"{i}.png"] for i in range(9)]})
    assert find_copies(with_images, "prompt", 3)[0].num_prompts == 9  # one instruction over many images
    assert find_copies(range(9), "prompt", 3)[0].num_prompts == 9  # no columns: a bare sampler


def reads_answer(completions, answer, **kwargs):
    return [float(c == a) for c, a in zip(completions, answer)]


def reads_any_column(completions, **kwargs):
    return [float(c == kwargs[sorted(kwargs)[0]][i]) for i, c in enumerate(completions)]


def test_rows_that_differ_in_a_column_a_reward_reads_are_not_copies():
    # one question with two reference answers, one asked three times: three prompts, not two
    dataset = Dataset.from_dict(
        {"prompt": ["q0", "q1", "q0", "q0", "q1", "q2"], "answer": ["a", "b", "c", "a", "b", "d"], "id": range(6)}
    )
    copies, notes = find_copies(dataset, "prompt", 2, ColumnReaders.of([reads_answer]))
    expected = numbered(list(zip(dataset["prompt"], dataset["answer"])))
    np.testing.assert_array_equal(copies.prompt_of_row, expected)
    assert copies.columns == ("answer",) and copies.identity == "'prompt' and 'answer'"
    assert len(notes) == 1 and "1 rows hold a 'prompt' of an earlier row but differ from it" in notes[0]
    assert "'answer': the reward function reads_answer reads it" in notes[0]
    # a reward that may read any column: rows are copies only where every column is equal (`id` never is)
    assert not find_copies(dataset, "prompt", 2, ColumnReaders.of([reads_any_column]))[0].copies
    # without readers, the prompt alone
    assert find_copies(dataset, "prompt", 2)[0].num_prompts == 3


class SeededGame:
    def reset(self, seed, **kwargs):
        self.seed = seed


def test_an_environments_reset_and_trls_routing_column_decide_copies():
    dataset = Dataset.from_dict(
        {"prompt": ["play"] * 24, "seed": list(range(12)) * 2, "environment": ["chess", "go"] * 12}
    )
    copies, _ = find_copies(dataset, "prompt", 4, ColumnReaders.of(environments=[SeededGame()]))
    assert copies.num_prompts == 12 and copies.columns == ("seed",)
    routed, _ = find_copies(dataset, "prompt", 4, ColumnReaders.of(environments=[SeededGame()]), ("environment",))
    np.testing.assert_array_equal(routed.prompt_of_row, numbered(list(zip(dataset["seed"], dataset["environment"]))))
    assert routed.num_prompts == 12  # seed i always meets the same environment here: 12 pairs


def test_a_named_key_that_a_reward_reads_merges_prompts_and_says_so():
    dataset = Dataset.from_dict({"prompt": ["1+1", "0+2", "2+0", "1+2"], "answer": ["2", "2", "2", "3"]})
    copies, notes = find_copies(dataset, "answer", 2, ColumnReaders.of([reads_answer]))
    assert copies.prompt_of_row.tolist() == [0, 0, 0, 1]
    assert len(notes) == 1 and "prompt_key='answer' names a column that decides rewards" in notes[0]
    assert "2 distinct prompts merged into others" in notes[0]


def test_fewer_distinct_prompts_than_a_batch_keep_rows_and_say_so():
    dataset = Dataset.from_dict({"prompt": [f"q{i % 3}" for i in range(9)]})
    copies, notes = find_copies(dataset, "prompt", 4)
    assert copies.num_prompts == 9 and copies.key is None
    assert notes == [
        "the 3 distinct prompts (by 'prompt') are fewer than the 4 of a generation batch: KGPS keeps one belief "
        "per row"
    ]


def test_a_prompts_rows_train_in_turn_in_the_datasets_order():
    copies = PromptCopies(np.array([0, 1, 0, 2, 1, 1]))
    # by hand: prompt 1's rows are 1, 4, 5; its turns 0..4 give 1, 4, 5, 1, 4
    assert copies.rows([1] * 5, turns=range(5)).tolist() == [1, 4, 5, 1, 4]
    assert copies.rows([0, 2, 1], turns=[3, 7, 2]).tolist() == [2, 3, 5]
    assert copies.rows([0, 2, 1]).tolist() == copies.rows([0, 2, 1], turns=[0, 0, 0]).tolist() == [0, 3, 1]


def test_every_row_of_a_prompt_with_copies_reaches_the_trainer():
    prompt_of_row = np.random.default_rng(0).permutation(np.repeat(np.arange(6), [1, 2, 3, 4, 5, 6]))
    copies = PromptCopies(numbered(prompt_of_row.tolist()))
    sampler = KGPSRepeatSampler(
        range(21), 1, 3, selector=KGPSSelector(6, KGPSConfig(warmup_epochs=0)), warmup_epochs=0, copies=copies
    )
    yielded = []
    for _ in range(6):  # epochs of 7 batches; each prompt is chosen in turn, its rows in turn
        yielded += list(sampler)
    turns = {}
    for row in yielded:
        prompt = copies.prompts([row])[0]
        expected = np.flatnonzero(copies.prompt_of_row == prompt)
        assert row == expected[turns.get(prompt, 0) % expected.size]
        turns[prompt] = turns.get(prompt, 0) + 1
    assert set(yielded) == set(range(21))


def test_the_sampler_chooses_distinct_prompts_and_yields_first_rows_first():
    copies = PromptCopies(np.array([0, 1, 0, 2, 1, 3, 3, 2, 0]))
    sampler = KGPSRepeatSampler(range(9), mini_repeat_count=2, batch_size=2, selector=KGPSSelector(4), copies=copies)
    assert len(sampler) == len(range(9)) // 2 * 2 * 2  # TRL's length: the rows' worth of batches
    rows = list(sampler)
    batches = [rows[i : i + 4 : 2] for i in range(0, len(rows), 4)]
    for batch in batches:
        assert len(set(copies.prompts(batch))) == 2
    first_seen = {copies.prompts([row])[0]: row for row in reversed(rows)}
    assert set(first_seen.values()) <= {0, 1, 3, 5}  # a prompt's first turn is its first row
    assert sampler.ledger.times_selected.sum() == 2 * len(batches) and sampler.ledger.num_prompts == 4


def test_a_resumed_epoch_replays_the_rows_it_yielded_and_goes_on_in_turn():
    copies = PromptCopies(np.array([0, 1, 0, 2, 1, 1, 2, 0, 3, 4, 4, 5]))

    def make():
        selector = KGPSSelector(6, KGPSConfig(warmup_epochs=0), seed=1)
        return KGPSRepeatSampler(range(12), 1, 2, selector=selector, warmup_epochs=0, copies=copies)

    def run(sampler, count, iterator=None, skip=0):
        """`count` rows; each batch yielded is scored, but the first `skip` (a resumed trainer skips them)."""
        iterator, rows = iterator or iter(sampler), []
        for _ in range(count):
            rows.append(next(iterator))
            if len(rows) % 2 == 0 and len(rows) > skip:
                sampler.engine.observe(sampler.ledger.pending[-1].indices, [1, 0], [2, 2])
        return iterator, rows

    original = make()
    run(original, 12)  # the first epoch, six batches
    iterator, head = run(original, 6)  # three batches of the second
    restored = make()
    restored.selector.load_state_dict(original.selector.state_dict())
    restored.load_state_dict(original.state_dict())
    _, replayed = run(restored, 12, skip=6)
    assert replayed[:6] == head, "the resumed epoch yields the rows it yielded before the checkpoint"
    assert replayed[6:] == run(original, 6, iterator)[1], "and goes on with the rows the run would have"


def test_copies_weigh_by_rows_in_the_draw_when_asked():
    """With `copies_weight="rows"`, a prompt's chance to be drawn alone is rows_i * u_i^(1/T) / sum (a chi-square
    against that law, the utilities from the selector's `scores`); with the default, u_i^(1/T) / sum."""
    from scipy import stats

    rows = np.array([1, 2, 3, 1, 4])
    for weight in ("rows", "prompt"):
        config = KGPSConfig(copies_weight=weight, selection_temperature=0.5, feature_columns=[])
        selector = KGPSSelector(5, config, seed=0, rows_per_prompt=rows)
        selector.update([0, 1, 2, 3], [7, 1, 4, 0], [8, 8, 8, 8])
        u = selector.scores().astype(np.float64)
        law = u ** (1 / 0.5) * (rows if weight == "rows" else 1)
        draws = np.bincount([selector.select(1)[0] for _ in range(6000)], minlength=5)
        assert stats.chisquare(draws, 6000 * law / law.sum()).pvalue > 1e-3, weight


@pytest.mark.parametrize(
    "config, rows, match",
    [
        (dict(copies_weight="rows", selection="top"), None, r"copies_weight must go with selection='sample'"),
        (dict(copies_weight="row"), None, r"copies_weight must be one of \('prompt', 'rows'\), got 'row'"),
        (
            dict(copies_weight="rows"),
            np.array([1, 0, 2]),
            r"rows_per_prompt must hold one count >= 1 per prompt \(3\)",
        ),
        (dict(copies_weight="rows"), np.array([1, 2]), r"rows_per_prompt must hold one count >= 1 per prompt"),
    ],
)
def test_a_copies_weight_it_cannot_apply_is_refused_naming_the_fix(config, rows, match):
    with pytest.raises(ValueError, match=match):
        KGPSSelector(3, KGPSConfig(**config), rows_per_prompt=rows)


def test_copies_weighed_by_rows_choose_as_by_prompt_when_every_prompt_has_as_many_rows():
    """Every prompt on 20 rows (the suite's `copies_20`): the weights are one constant, and the draw is the same, bit
    for bit, over 300 rounds of updates and drift."""
    rng = np.random.default_rng(0)
    by_prompt = KGPSSelector(512, KGPSConfig(feature_columns=[]), seed=3)
    by_rows = KGPSSelector(
        512, KGPSConfig(copies_weight="rows", feature_columns=[]), seed=3, rows_per_prompt=np.full(512, 20)
    )
    for _ in range(300):
        batch = by_prompt.select(4)
        np.testing.assert_array_equal(by_rows.select(4), batch)
        successes = rng.integers(0, 9, 4)
        for selector in (by_prompt, by_rows):
            selector.update(batch, successes, np.full(4, 8))
            selector.predict(0.01)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_float_column_a_reward_reads_tells_copies_apart_through_arrow(dtype, monkeypatch):
    from datasets import Value

    import trl_kgps.adapters.dataset_copies as dataset_copies

    def target(completions, target, **kwargs):
        return [0.0] * len(completions)

    rates = [0.5, 0.25, 0.5, float("nan"), float("nan"), 0.25]
    dataset = Dataset.from_dict({"prompt": ["q"] * 6, "target": rates}).cast_column("target", Value(dtype))
    monkeypatch.setattr(dataset_copies, "json", None)  # the Python path is not taken
    copies, _ = find_copies(dataset, "prompt", 2, ColumnReaders.of([target]))
    assert copies.prompt_of_row.tolist() == [0, 1, 0, 2, 2, 1]
