"""
Copies never lose a row, on the real `GRPOTrainer`: rows that differ in a column the reward reads are distinct prompts,
a prompt's copies train in turn, and `selector="uniform"` keeps TRL's share of every row, copies included.
"""

import logging

import numpy as np
import pytest
import trl
from datasets import Dataset
from harness import trainer_args

from trl_kgps import KGPSCallback, KGPSConfig


class RowProbe(trl.GRPOTrainer):
    """The real `GRPOTrainer`, recording the `idx` of every row it generates for (G times each)."""

    def _generate_and_score_completions(self, inputs):
        self.rows_seen.extend(int(x["idx"]) for x in inputs)
        return super()._generate_and_score_completions(inputs)


def answer_reward(completions, answer, **kwargs):
    return [float(answer[0] in c) for c in completions]


def probe(tmp_path, model, tokenizer, rows, callbacks, max_steps, reward=answer_reward, **args):
    trainer = RowProbe(
        model=model,
        reward_funcs=reward,
        args=trainer_args(tmp_path, max_steps=max_steps, **args),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    trainer.rows_seen = []
    trainer.train()
    return np.asarray(trainer.rows_seen)


def test_one_question_with_two_reference_answers_trains_both(tmp_path, model, tokenizer, caplog):
    # 8 questions, each twice with two different answers, then 8 exact copies of the first rows: 16 prompts, 24 rows
    rows = Dataset.from_dict(
        {
            "prompt": [f"p{i % 8} a b" for i in range(24)],
            "answer": ["a" if i < 8 else "b" if i < 16 else "a" for i in range(24)],
            "idx": list(range(24)),
        }
    )
    kgps = KGPSCallback()
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        seen = probe(tmp_path, model, tokenizer, rows, [kgps], max_steps=24, per_device_train_batch_size=16)
    assert kgps.selector.num_prompts == 16, "a question with two answers is two prompts"
    groups = seen[::4]  # G = 4 completions of each row
    for question in range(8):  # the 'a' rows of a question, i and 16 + i, train in turn; its 'b' row, 8 + i, alone
        a_rows = groups[np.isin(groups, [question, 16 + question])]
        assert a_rows.tolist() == ([question, 16 + question] * a_rows.size)[: a_rows.size]
    assert set(groups.tolist()) == set(range(24)), "every row reached the trainer"
    assert "24 rows hold 16 distinct prompts (rows with equal 'prompt' and 'answer'" in caplog.text
    assert "8 rows hold a 'prompt' of an earlier row but differ from it in a column that decides their rewards" in (
        caplog.text
    )


@pytest.mark.parametrize("selector", ["uniform", None])
def test_an_upsampled_source_keeps_trls_share_under_uniform(tmp_path, model, tokenizer, selector):
    # a mixture weighed by duplication: source A's 4 rows 10 times each (40 rows), source B's 20 rows once
    source_a = [f"p{i % 4} a" for i in range(40)]
    rows = Dataset.from_dict(
        {"prompt": source_a + [f"p{i} b" for i in range(20)], "answer": ["a"] * 60, "idx": list(range(60))}
    ).shuffle(seed=0)
    callbacks = [] if selector is None else [KGPSCallback(selector=selector)]
    # 15 steps of 8 prompts' groups (2 prompts, G = 4) = 30 prompts, half an epoch; 30 steps = one epoch of 60 rows
    seen = probe(tmp_path, model, tokenizer, rows, callbacks, max_steps=30)
    share = float(np.mean(seen < 40))
    assert share == pytest.approx(40 / 60), "TRL's order: each row once an epoch, the upsampled source 2/3"
    assert sorted(set(seen.tolist())) == list(range(60))


def test_kgps_weighs_an_upsampled_source_by_its_rows_only_when_asked(tmp_path, model, tokenizer, caplog):
    source_a = [f"p{i % 4} a" for i in range(40)]  # 4 prompts on 10 rows each: 40 of 60 rows, 4 of 24 prompts
    rows = Dataset.from_dict(
        {"prompt": source_a + [f"p{i} b" for i in range(20)], "answer": ["a"] * 60, "idx": list(range(60))}
    ).shuffle(seed=0)
    shares = {}
    for weight in ("prompt", "rows"):
        kgps = KGPSCallback(KGPSConfig(copies_weight=weight))
        with caplog.at_level(logging.WARNING, logger="trl_kgps"):
            seen = probe(tmp_path / weight, model, tokenizer, rows, [kgps], max_steps=30)
        shares[weight] = float(np.mean(seen < 40))
        said = "weighs each prompt by its rows" if weight == "rows" else "weighs each prompt once in selection"
        assert said in caplog.text
    # by prompt the source's 4 of 24 prompts get about 1/6 of the draws, by rows about 2/3
    assert shares["prompt"] < 0.35 < 0.45 < shares["rows"], shares
