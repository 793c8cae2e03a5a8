"""The one line finds the metadata it shares by: which columns it reads, which it never reads, and what it logs."""

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.adapters.dataset_columns import (
    MAX_METADATA_VALUES,
    copies_that_differ,
    describe_differing,
    find_metadata,
    read_features,
    selector_for,
    with_metadata,
)
from trl_kgps.adapters.reward_reads import ColumnReaders
from trl_kgps.config import NO_METADATA, WITH_METADATA
from trl_kgps.engine.copies import PromptCopies
from trl_kgps.selectors.experimental import ExperimentalSelector


datasets = pytest.importorskip("datasets")

N = 64


def accuracy_reward(completions, answer, **kwargs):
    return [1.0] * len(completions)


def format_reward(completions, **kwargs):
    return [1.0] * len(completions)


class RewardModel:
    """A reward model as TRL takes one: a module, scored through `forward`, whose signature names no column."""

    def forward(self, input_ids, answer=None):
        return input_ids

    __call__ = forward


def user_dataset(**extra):
    rng = np.random.default_rng(0)
    columns = {
        "prompt": [f"problem {i}" for i in range(N)],
        "answer": [str(i % 4) for i in range(N)],  # few values, and the reward reads it: never metadata
        "level": [f"Level {1 + i % 4}" for i in range(N)],
        "type": [["Algebra", "Geometry", "Counting"][i % 3] for i in range(N)],
        "source": ["math"] * N,
        "id": list(range(N)),
        "score": rng.uniform(size=N).tolist(),
        "steps": [int(i % 3) for i in range(N)],
        **extra,
    }
    return datasets.Dataset.from_dict(columns)


def test_it_reads_labels_that_group_prompts_and_never_what_a_reward_reads():
    found = find_metadata(user_dataset(), ColumnReaders.of([accuracy_reward, format_reward]))
    assert found.columns == ["level", "type", "steps"]
    assert found.values == {"level": 4, "type": 3, "steps": 3}
    assert found.skipped == {
        "prompt": "the model's input",
        "answer": "the reward function accuracy_reward reads it",
        "source": "one value",
        "id": f"{N} of its {N} values label fewer than 2 distinct prompts each: it names prompts rather than grouping "
        "them",
        "score": "holds float64 values, not labels",
    }


def test_a_column_no_reward_function_can_read_is_read():
    # A reward model is given only the completions' text (its `forward` names no dataset column), a model id the
    # same, and a reward without **kwargs receives only the columns it names: `answer`'s four values make it a label.
    def strict_reward(completions, prompts):
        return [1.0] * len(completions)

    readers = ColumnReaders.of([strict_reward, RewardModel(), "some/reward-model"])
    assert "answer" in find_metadata(user_dataset(), readers).columns
    found = find_metadata(user_dataset(), ColumnReaders.of([format_reward]))
    assert found.skipped["answer"] == (
        "the reward function format_reward takes **kwargs, and the column's name says it may hold the answer"
    )


@pytest.mark.parametrize(
    "values, why",
    [
        ([None] + ["a", "b"] * (N // 2 - 1) + ["a"], "some values are missing"),
        ([[1, 2]] * N, "holds vectors"),
        ([True, False] * (N // 2), None),
    ],
    ids=["missing", "vectors", "booleans"],
)
def test_missing_values_and_vectors_are_not_labels(values, why):
    found = find_metadata(user_dataset(extra=values))
    if why == "holds vectors":  # `datasets` names the type: List, or Sequence in datasets 3
        assert found.skipped["extra"] in ("holds List values, not labels", "holds Sequence values, not labels")
    else:
        assert found.skipped.get("extra") == why
    assert ("extra" in found.columns) == (why is None)


def test_more_values_than_the_limit_are_not_metadata():
    rows = 2 * (MAX_METADATA_VALUES + 1)
    dataset = datasets.Dataset.from_dict({"prompt": ["p"] * rows, "bucket": [i // 2 for i in range(rows)]})
    assert find_metadata(dataset).skipped["bucket"] == f"more than {MAX_METADATA_VALUES} distinct values"


def test_the_one_line_shares_by_what_it_found_exactly_as_if_it_were_named():
    dataset = user_dataset()
    config, metadata = with_metadata(dataset, KGPSConfig(), ColumnReaders.of([accuracy_reward]))
    assert config == KGPSConfig(feature_columns=["level", "type", "steps"]).resolved(has_metadata=True)
    assert metadata.describe().startswith(
        "KGPS shares what it learns across prompts by `level` (4 values), `type` (3 values), `steps` (3 values) "
        "(not read: `prompt`: the model's input; `answer`: the reward function accuracy_reward reads it;"
    )
    found = selector_for("kgps", dataset, config, seed=3)
    named = KGPSSelector(N, config, seed=3, features={c: dataset[c] for c in ("level", "type", "steps")})
    rng = np.random.default_rng(1)
    for _ in range(5):  # the same choices and beliefs, batch after batch
        batch = found.select(8)
        np.testing.assert_array_equal(batch, named.select(8))
        s = rng.integers(0, 5, size=8)
        for selector in (found, named):
            selector.predict(0.1)
            selector.update(batch, s, np.full(8, 4))
    np.testing.assert_array_equal(found.mean, named.mean)
    np.testing.assert_array_equal(found.variance, named.variance)


@pytest.mark.parametrize(
    "config",
    [
        KGPSConfig(feature_columns=[]),
        KGPSConfig(feature_columns=["type"]),
        KGPSConfig.per_prompt(),
        KGPSConfig.paper(),
    ],
    ids=["none", "named", "per_prompt", "paper"],
)
def test_it_looks_only_when_no_column_is_named_and_something_is_shared(config):
    # What it leaves to the dataset takes the with-metadata values, as it did before `None` meant "decide".
    expected = config.resolved(has_metadata=True)
    assert with_metadata(user_dataset(), config, ColumnReaders.of([accuracy_reward])) == (expected, None)


def test_an_empty_list_reads_no_column():
    selector = selector_for("kgps", user_dataset(), KGPSConfig(feature_columns=[]), 0)
    # The selector's config says `[]`, as the user set it: a state saved with it names `[]`, which resumes it.
    assert selector.config.feature_columns == [] and selector.shared.design.kind == "global"


def no_metadata_dataset():
    return datasets.Dataset.from_dict({"prompt": [f"p{i}" for i in range(N)], "answer": [str(i) for i in range(N)]})


def test_with_no_metadata_it_keeps_one_filter_per_prompt_and_what_the_user_set():
    dataset = no_metadata_dataset()
    config, metadata = with_metadata(dataset, KGPSConfig(), ColumnReaders.of([accuracy_reward]))
    assert config == KGPSConfig(**NO_METADATA)
    assert config == KGPSConfig.per_prompt(candidates=0.0)  # the per-prompt filter, drawn over the whole pool
    assert metadata.columns == [] and metadata.describe().startswith(
        "KGPS found no metadata column to share by, and keeps one filter per prompt (initial_variance=4.0, "
        "selection_temperature=0.5, process_noise_adaptation=0.0: the fields KGPSConfig leaves unset take these "
        "values, those set keep theirs) (not read: `prompt`"
    )
    assert selector_for("kgps", dataset, config, 0).shared is None
    mine, metadata = with_metadata(
        dataset,
        KGPSConfig(gamma=0.3, initial_variance=2.0, process_noise_adaptation=0.2),
        ColumnReaders.of([accuracy_reward]),
    )
    assert (mine.gamma, mine.initial_variance, mine.shared_variance, mine.selection_temperature) == (
        0.3,
        2.0,
        0.0,
        0.5,
    )
    assert mine.process_noise_adaptation == 0.2  # what the user set, kept
    assert "(initial_variance=2.0, selection_temperature=0.5, process_noise_adaptation=0.2:" in metadata.describe()


@pytest.mark.parametrize("name, value", list(WITH_METADATA.items()))
def test_a_field_set_to_its_with_metadata_default_keeps_it_on_a_dataset_without_metadata(name, value):
    # Before, a value equal to the default was taken as unset: process_noise_adaptation=0.05, passed, ran with 0.
    config, metadata = with_metadata(no_metadata_dataset(), KGPSConfig(**{name: value}))
    assert getattr(config, name) == value
    assert config == KGPSConfig(**{**NO_METADATA, name: value})  # the other fields decided as for KGPSConfig()
    assert getattr(selector_for("kgps", no_metadata_dataset(), config, 0).config, name) == value
    if name == "shared_variance":  # sharing set: one factor across the pool, which the log says
        assert metadata.describe().startswith("KGPS found no metadata column to share by, and shares one factor")


def test_a_selector_built_without_a_dataset_runs_the_with_metadata_values():
    for selector in (KGPSSelector(N), KGPSSelector(N, KGPSConfig()), ExperimentalSelector(N)):
        assert {name: getattr(selector.config, name) for name in WITH_METADATA} == WITH_METADATA
        assert selector.shared is not None  # the shared factor, as before `None` meant "decide"
    # and exactly as the config it resolves to: the same batches and beliefs
    resolved = KGPSSelector(N, KGPSConfig().resolved(has_metadata=True), seed=2)
    unresolved = KGPSSelector(N, KGPSConfig(), seed=2)
    for _ in range(3):
        batch = unresolved.select(8)
        np.testing.assert_array_equal(batch, resolved.select(8))
        for selector in (unresolved, resolved):
            selector.predict(0.1)
            selector.update(batch, np.arange(8) % 5, np.full(8, 4))
    np.testing.assert_array_equal(unresolved.mean, resolved.mean)
    np.testing.assert_array_equal(unresolved.variance, resolved.variance)
    assert unresolved.state_dict()["config"] == resolved.state_dict()["config"]  # the state file holds it resolved


def test_an_id_repeated_over_a_prompts_copies_names_prompts_and_the_grouping_is_still_found():
    # 40 problems, each on 5 rows: `problem_id` carries each value on 5 rows, yet on one prompt.
    problems, copies_each = 40, 5
    rows = [(p, c) for p in range(problems) for c in range(copies_each)]
    dataset = datasets.Dataset.from_dict(
        {
            "prompt": [f"problem {p}" for p, _ in rows],
            "problem_id": [f"id-{p}" for p, _ in rows],
            "level": [f"Level {1 + p % 4}" for p, _ in rows],
        }
    )
    copies = PromptCopies(np.repeat(np.arange(problems), copies_each), key="prompt")
    found = find_metadata(dataset, copies=copies)
    assert found.columns == ["level"]
    assert found.skipped["problem_id"] == (
        "40 of its 40 values label fewer than 2 distinct prompts each: it names prompts rather than grouping them"
    )
    config, metadata = with_metadata(dataset, KGPSConfig(), copies=copies)
    assert config.feature_columns == ["level"] and metadata.columns == ["level"]
    assert "problem_id" in find_metadata(dataset).columns  # counted by rows, it looked like 40 groups


def test_copies_that_disagree_on_a_column_kgps_reads_are_counted_by_prompt():
    # Rows 0-1 hold prompt 0, rows 2-4 prompt 1, row 5 prompt 2.
    copies = PromptCopies(np.array([0, 0, 1, 1, 1, 2]), key="prompt")
    dataset = datasets.Dataset.from_dict(
        {
            "prompt": ["a", "a", "b", "b", "b", "c"],
            "level": ["L1", "L2", "L1", "L1", "L1", "L3"],  # prompt 0's copies disagree
            "source": ["x", "x", "y", "z", "y", "x"],  # prompt 1's
            "solve_rate": [0.5, 0.5, None, None, float("nan"), 0.1],  # missing values agree with each other
            "embedding": [[0.0, 1.0]] * 2 + [[1.0, 0.0], [1.0, 0.0], [1.0, 0.5]] + [[0.5, 0.5]],  # prompt 1's
        }
    )
    differ = copies_that_differ(dataset, ["level", "source", "solve_rate", "embedding"], copies)
    assert differ == {"level": 1, "source": 1, "embedding": 1}
    assert copies_that_differ(dataset, ["level"], PromptCopies.by_row(6)) == {}
    assert describe_differing(differ, copies) == (
        "Copies of one prompt (rows with equal 'prompt') carry different values in `level` (1 prompt), `source` (1 "
        "prompt), `embedding` (1 prompt): KGPS keeps one belief per prompt and reads its values from its first "
        "row, so the other rows' values go unread. To read each row's own, give every copy of a prompt the same "
        "value, or keep one belief per row (KGPSConfig(prompt_key=None))."
    )


@pytest.mark.parametrize("format_type", [None, "pandas", "torch", "numpy"])
def test_columns_are_read_whatever_the_format_in_the_order_of_the_rows(format_type):
    # Rows selected and shuffled keep `datasets`' indices mapping over the table: the values come in the rows' order.
    plain = user_dataset().shuffle(seed=3).select(range(40))
    dataset = user_dataset().shuffle(seed=3).select(range(40))
    if format_type is not None:
        dataset.set_format(format_type)
    assert find_metadata(dataset) == find_metadata(plain)
    features = read_features(dataset, ["level", "steps", "type"])
    assert features["level"].tolist() == list(plain["level"]) and features["steps"].tolist() == list(plain["steps"])
    assert features["type"].dtype.kind == "U"  # strings, as `shared.design` takes labels


def test_integers_of_any_width_are_labels():
    dataset = (
        user_dataset()
        .cast_column("steps", datasets.Value("uint8"))
        .cast_column("level", datasets.ClassLabel(names=[f"Level {i}" for i in range(1, 5)]))
    )
    assert find_metadata(dataset, ColumnReaders.of([accuracy_reward])).columns == ["level", "type", "steps"]


def test_a_column_with_a_value_on_a_single_row_names_prompts():
    # 39 values on one row each and one value on the other 25 rows: on average more than two rows a value, yet the
    # 39 single rows each name a prompt.
    dataset = user_dataset(extra=list(range(39)) + [-1] * (N - 39))
    assert find_metadata(dataset).skipped["extra"] == (
        "39 of its 40 values label fewer than 2 distinct prompts each: it names prompts rather than grouping them"
    )


def test_columns_past_the_shared_factors_limit_are_skipped_and_the_rest_trains():
    # 17 label columns of 61 values each: 16 of them hold 976 values, the 17th would take them past 1,024.
    rows = 122
    columns = {f"c{j:02d}": [(i * (j + 1)) % 61 for i in range(rows)] for j in range(17)}
    dataset = datasets.Dataset.from_dict({"prompt": [f"p{i}" for i in range(rows)], **columns})
    config, metadata = with_metadata(dataset, KGPSConfig())
    assert metadata.columns == [f"c{j:02d}" for j in range(16)]
    assert metadata.skipped["c16"] == (
        "with the columns before it, 1,037 distinct values in all, more than the 1,024 KGPS shares across"
    )
    selector = selector_for("kgps", dataset, config, 0)
    assert selector.shared.design.dimension == 1 + 976


def test_long_labels_name_their_groups_briefly_and_distinctly():
    # Three labels of 100,000 characters that differ only at their end: each group is named in a few dozen
    # characters (metric keys, the model card's rows, the difficulty table), and the names stay distinct.
    labels = ["x" * 99_999 + tail for tail in "abc"]
    dataset = user_dataset(extra=[labels[i % 3] for i in range(N)])
    config, metadata = with_metadata(dataset, KGPSConfig(feature_columns=["extra"]))
    names = selector_for("kgps", dataset, config, 0).shared.design.names
    assert len(set(names)) == 3 and all(len(name) <= len("extra=") + 40 for name in names)
    assert all(name.startswith("extra=" + "x" * 29 + "...") for name in names)
