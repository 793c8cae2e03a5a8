"""Conversations read through Arrow: the copies of a prompt (`find_copies`) and the rows digest (`prompts_digest`) of a
column of messages, whose fields may hold texts, integers, booleans, tool calls or nothing on every row, are those that
reading each value in Python gives, and never read a conversation in Python to get them."""

import json
import random
import types

import numpy as np
import pyarrow as pa
import pytest

from trl_kgps.adapters import dataset_copies
from trl_kgps.adapters.dataset_copies import find_copies
from trl_kgps.engine import prompts_digest as prompts_digest_module
from trl_kgps.engine.prompts_digest import prompts_digest


datasets = pytest.importorskip("datasets")
HASHES = prompts_digest_module._hashes

# Characters that JSON escapes in every way (two-character escapes, \u00XX, surrogate pairs), and the markers of a key.
CHARACTERS = ["a", " ", '"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "é", "日", "😀", "\u2028"]
CHARACTERS += ["\x1e", "\x1f", ":", ";", "{", "[", "n", "1", "null"]


def random_text(rng: random.Random) -> str | None:
    return None if rng.random() < 0.1 else "".join(rng.choice(CHARACTERS) for _ in range(rng.randint(0, 4)))


def random_conversations(n: int, seed: int) -> list:
    """Rows of 0-2 messages with every kind of field JSON-able through Arrow, each sometimes missing, and missing
    rows and messages."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        if rng.random() < 0.05:
            rows.append(None)
            continue
        messages = []
        for _ in range(rng.randint(0, 2)):
            call = {"function": {"arguments": random_text(rng), "name": random_text(rng)}, "id": random_text(rng)}
            messages.append(
                None
                if rng.random() < 0.05
                else {
                    "role": rng.choice(["user", "assistant", None, ""]),
                    "content": random_text(rng),
                    "name": None,
                    "turn": rng.choice([None, -3, 0, 2**40]),
                    "final": rng.choice([None, True, False]),
                    "tool_calls": rng.choice([None, [], [call]]),
                    "tags": rng.choice([None, [], ["a", None], [None], ["1:a"]]),
                }
            )
        rows.append(messages)
    return rows


def chat(n: int, key_none: bool = True) -> list:
    """`n` conversations of a system and a user message, 7 distinct; each message with `name: None` if `key_none`."""
    name = {"name": None} if key_none else {}
    system = {"role": "system", "content": "Solve it.", **name}
    return [[system, {"role": "user", "content": f"What is {i % 7} + 1?", **name}] for i in range(n)]


def numbered(values: list) -> np.ndarray:
    """The oracle of copies: each value's prompt, numbered by first appearance, values compared as sorted JSON."""
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(json.dumps(v, sort_keys=True), len(seen)) for v in values])


@pytest.fixture
def no_json_in_copies(monkeypatch):
    """`find_copies` may not write any value as JSON in Python, its slow path."""

    def refuse(*args, **kwargs):
        raise AssertionError("find_copies wrote a value as JSON in Python")

    monkeypatch.setattr(dataset_copies, "json", types.SimpleNamespace(dumps=refuse))


@pytest.fixture
def no_conversation_hashed_in_python(monkeypatch):
    """`prompts_digest` may not hash a list or a dict in Python, as its slow path reads every conversation."""

    def texts_only(values):
        values = list(values)
        assert not any(isinstance(value, (list, dict)) for value in values), "a conversation was read in Python"
        return HASHES(values)

    monkeypatch.setattr(prompts_digest_module, "_hashes", texts_only)


def digest_in_python(dataset, monkeypatch) -> dict:
    """The oracle of the digest: every conversation read in Python and hashed as its sorted JSON, as checkpoints
    written before conversations were read through Arrow record it."""
    with monkeypatch.context() as patch:
        patch.setattr(prompts_digest_module, "_json_type", lambda kind: False)
        patch.setattr(prompts_digest_module, "_hashes", HASHES)
        return prompts_digest(dataset)


ORDERS = {
    "in_order": lambda d: d,
    "shuffled": lambda d: d.shuffle(seed=1),  # through an indices mapping over every row
    "most_rows": lambda d: d.shuffle(seed=2).select(range(len(d) - 5)),
    "a_small_part": lambda d: d.select(range(3, len(d), 5)),
    "chunked": lambda d: datasets.concatenate_datasets([d.select(range(40)), d.select(range(40, len(d)))]),
}


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
def test_conversations_with_a_key_none_on_every_row_are_copies_as_their_json_says(order, no_json_in_copies):
    dataset = order(datasets.Dataset.from_dict({"prompt": chat(120), "answer": ["1"] * 120}))
    assert pa.types.is_null(dataset.features.arrow_schema.field("prompt").type.value_type.field("name").type)
    copies, _ = find_copies(dataset, "prompt", batch_size=2)
    np.testing.assert_array_equal(copies.prompt_of_row, numbered(dataset["prompt"]))
    assert copies.num_prompts == 7


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
@pytest.mark.parametrize("seed", [0, 1])
def test_conversations_of_every_field_type_are_copies_exactly_as_their_json_says(order, seed, no_json_in_copies):
    """Equal where and only where the values are: a missing text is not an empty one, a text holding a separator or
    a marker does not run into the next field, tool calls and lists count item by item."""
    values = random_conversations(300, seed)
    dataset = order(datasets.Dataset.from_dict({"prompt": values}))
    copies, _ = find_copies(dataset, "prompt", batch_size=2)
    np.testing.assert_array_equal(copies.prompt_of_row, numbered(dataset["prompt"]))


def test_texts_that_a_joined_key_would_run_together_stay_apart(no_json_in_copies):
    prompt = [
        [{"role": "a\x1fb", "content": "c"}],
        [{"role": "a", "content": "b\x1fc"}],
        [{"role": "user", "content": None}],
        [{"role": "user", "content": ""}],
        [{"role": "user", "content": ""}],
    ]
    copies, _ = find_copies(datasets.Dataset.from_dict({"prompt": prompt}), "prompt", batch_size=2)
    assert copies.prompt_of_row.tolist() == [0, 1, 2, 3, 3]


def test_values_arrow_cannot_write_are_still_compared_as_json():
    prompt = [[{"role": "user", "weight": w}] for w in (0.5, 0.25, 0.5)]
    copies, _ = find_copies(datasets.Dataset.from_dict({"prompt": prompt}), "prompt", batch_size=2)
    assert copies.prompt_of_row.tolist() == [0, 1, 0]


@pytest.mark.parametrize("seed", [0, 1])
def test_arrow_writes_each_value_as_json_dumps_does(seed):
    values = pa.array(random_conversations(400, seed))
    assert prompts_digest_module._json_type(values.type)
    for part in (values, values.slice(17, 200)):
        written = prompts_digest_module._json_texts(part).to_pylist()
        assert written == [json.dumps(value, sort_keys=True) for value in part.to_pylist()]


@pytest.mark.parametrize(
    "kind",
    [
        pa.list_(pa.struct([("role", pa.string()), ("weight", pa.float64())])),  # floats: Python's repr
        pa.list_(pa.binary()),  # bytes: hashed by content
        pa.struct([("a", pa.string()), ("a", pa.string())]),  # two fields of one name: one key in Python
        pa.map_(pa.string(), pa.string()),
    ],
    ids=["floats", "bytes", "a_name_twice", "map"],
)
def test_types_only_python_writes_as_json_are_left_to_it(kind):
    assert not prompts_digest_module._json_type(kind)


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
@pytest.mark.parametrize("rows", ["key_none", "every_field_type"])
def test_the_digest_of_conversations_is_that_of_reading_them_in_python(
    order, rows, monkeypatch, no_conversation_hashed_in_python
):
    """The digest a checkpoint records does not change: read through Arrow, a conversation is hashed as the JSON text
    Python wrote for it, whatever the rows' order, chunks and slices."""
    values = chat(150) if rows == "key_none" else random_conversations(150, 3)
    dataset = order(datasets.Dataset.from_dict({"prompt": values, "answer": [str(i % 4) for i in range(150)]}))
    monkeypatch.setattr(prompts_digest_module, "_ROWS_PER_WRITE", 64)  # several slices of the table
    digest = prompts_digest(dataset)
    assert digest == digest_in_python(dataset, monkeypatch)
