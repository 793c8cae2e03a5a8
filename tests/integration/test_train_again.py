"""A second `train()` on the same trainer: the same rows keep their beliefs, other rows (a curriculum's next stage)
start afresh as a new run would, and a selector instance about the previous rows is refused."""

import logging

import numpy as np
import pytest
from harness import prompt_dataset, train

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.engine import state_file


pytest.importorskip("trl")

CONFIG = KGPSConfig(delta_norm_sample=1.0, feature_columns=[])
FRESH = "trainer.train_dataset was replaced by other rows"


def train_again(trainer, dataset, max_steps, caplog):
    """`train()` again on `dataset` for `max_steps` steps; the log lines that say KGPS started afresh."""
    trainer.train_dataset = dataset
    trainer.args.max_steps = max_steps
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.train()
    return [record.getMessage() for record in caplog.records if FRESH in record.getMessage()]


@pytest.mark.parametrize("num_prompts", [16, 24], ids=["same-length", "other-length"])
def test_a_second_train_on_other_rows_starts_afresh_and_says_so(tmp_path, model, tokenizer, caplog, num_prompts):
    trainer, kgps, _ = train(tmp_path, model, tokenizer, max_steps=8, config=CONFIG)
    first = kgps.selector
    assert kgps.coverage > 0.25
    stage_two = prompt_dataset(16 + num_prompts).select(range(16, 16 + num_prompts))
    lines = train_again(trainer, stage_two, 2, caplog)

    assert (
        len(lines) == 1
        and f"other rows ({num_prompts}, where the last train() had 16): KGPS starts afresh" in lines[0]
    )
    assert kgps.selector is not first and kgps.selector.num_prompts == num_prompts
    # Two steps of two prompts each: at most 4 of the new rows observed, as in a new run.
    assert kgps.ledger.batches_scored == 2 and kgps.coverage <= 4 / num_prompts
    table = kgps.difficulty_table()
    assert table["prompt"] == stage_two["prompt"]
    assert sum(table["times_selected"]) == 2 * kgps.ledger.batches_chosen <= 2 * 3
    # What the next save records is the new rows' run.
    trainer.save_model(str(tmp_path / "stage_two"))
    _, meta = state_file.load(str(tmp_path / "stage_two" / state_file.STATE_FILE))
    assert meta["num_prompts"] == num_prompts and meta["batches_scored"] == 2


def test_a_second_train_on_the_same_rows_loaded_again_keeps_the_beliefs(tmp_path, model, tokenizer, caplog):
    trainer, kgps, _ = train(tmp_path, model, tokenizer, max_steps=4, config=CONFIG)
    selector, mean = kgps.selector, kgps.selector.mean.copy()
    assert train_again(trainer, prompt_dataset(16), 2, caplog) == []  # another object, the same rows
    assert kgps.selector is selector and kgps.ledger.batches_scored == 4 + 2
    assert not np.array_equal(kgps.selector.mean, mean)


@pytest.mark.parametrize("num_prompts", [16, 24], ids=["same-length", "other-length"])
def test_a_selector_instance_is_refused_on_other_rows_with_the_fix(tmp_path, model, tokenizer, num_prompts):
    instance = KGPSSelector(16, CONFIG)
    trainer, kgps, _ = train(tmp_path, model, tokenizer, max_steps=4, config=CONFIG, selector=instance)
    mean, scored = instance.mean.copy(), kgps.ledger.batches_scored
    trainer.train_dataset = prompt_dataset(16 + num_prompts).select(range(16, 16 + num_prompts))
    with pytest.raises(ValueError) as refused:
        trainer.train()
    message = str(refused.value)
    assert f"replaced by other rows ({num_prompts}, where the last train() had 16)" in message
    assert "selects with the KGPSSelector it was given, whose beliefs are about the previous rows" in message
    assert "build the callback with a selector name, e.g. KGPSCallback(config)" in message
    assert "KGPSSelector(len(train_dataset))" not in message
    # Refused before anything changed.
    assert kgps.selector is instance and kgps.ledger.batches_scored == scored
    np.testing.assert_array_equal(instance.mean, mean)
