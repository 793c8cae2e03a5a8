"""Feature columns in a real GRPOTrainer run: read by index, resumed exactly, reported, refused when bad."""

import logging

import numpy as np
import pytest
from harness import SpyKGPS, StepReward, StopAt, build_model, prompt_dataset, trainer_args

from trl_kgps import KGPSCallback, KGPSConfig, KGPSSelector, difficulty_table
from trl_kgps.engine import state_file


trl = pytest.importorskip("trl")

LEVEL = KGPSConfig(feature_columns=["level"])


def dataset(num_prompts=12, level=None):
    rows = prompt_dataset(num_prompts)
    return rows.add_column("level", level if level is not None else [f"L{i % 3}" for i in range(num_prompts)])


def run(tmp_path, tokenizer, rows, config=LEVEL, stop_at=None, resume=None, reward=None):
    kgps = SpyKGPS(config)
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=reward or StepReward(),
        args=trainer_args(tmp_path, max_steps=8, save_strategy="steps", save_steps=4, per_device_train_batch_size=8),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps] + ([StopAt(stop_at)] if stop_at else []),
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, kgps


def test_a_run_sharing_by_level_resumes_exactly_and_reports_its_groups(tmp_path, tokenizer):
    rows = dataset()
    straight_trainer, straight = run(tmp_path / "straight", tokenizer, rows)
    run(tmp_path / "split", tokenizer, rows, stop_at=4)
    _, second = run(tmp_path / "split", tokenizer, rows, resume=str(tmp_path / "split" / "checkpoint-4"))

    selector = straight.selector
    assert selector.shared.design.names == ["level=L0", "level=L1", "level=L2"]
    assert second.batches == straight.batches[len(straight.batches) - len(second.batches) :]
    for name, value in straight.selector.state_dict().items():
        np.testing.assert_equal(second.selector.state_dict()[name], value, err_msg=name)

    # The group of each prompt, read by its dataset index: prompt i is in level i % 3.
    np.testing.assert_array_equal(selector.shared.design.row_of, np.arange(12) % 3)
    logged = {key for record in straight_trainer.state.log_history for key in record}
    assert {f"kgps/group/level=L{j}/predicted_success" for j in range(3)} | {"kgps/residual_prior"} <= logged
    assert {f"kgps/group/level=L{j}/batch_share" for j in range(3)} <= logged
    assert any(key.endswith("/observed_success") for key in logged)

    table = straight.difficulty_table()
    assert table["group"] == [f"level=L{i % 3}" for i in range(12)]
    np.testing.assert_allclose(table["group_predicted_success"], selector.shared.group_success()[np.arange(12) % 3])
    shared_logit = np.log(
        np.array(table["group_predicted_success"]) / (1 - np.array(table["group_predicted_success"]))
    )
    np.testing.assert_allclose(
        np.array(table["own_logit"]) + shared_logit, selector.mean, rtol=1e-5, atol=1e-5
    )  # own residual plus the group's part is the prompt's logit

    # What the run saved comes back whole, its groups included.
    straight_trainer.save_model()
    restored = KGPSSelector.from_pretrained(str(tmp_path / "straight"))
    np.testing.assert_array_equal(restored.predicted_success(), selector.predicted_success())
    assert difficulty_table(str(tmp_path / "straight"))["group"] == table["group"]
    straight_trainer.create_model_card()
    card = (tmp_path / "straight" / "README.md").read_text()
    assert "- shared across prompts: the feature columns `level`, 3 groups" in card
    assert "| level=L0 | 4 |" in card


@pytest.mark.parametrize(
    "rows, config, message",
    [
        (
            dataset(),
            KGPSConfig(feature_columns=["type"]),
            r"feature_columns names \['type'\], which the train dataset",
        ),
        (dataset(level=[1.0] * 11 + [float("nan")]), LEVEL, r"feature 'level' is NaN or infinite at prompt 11"),
        (dataset(level=[[1.0, 2.0]] * 11 + [[1.0]]), LEVEL, r"feature column 'level' holds vectors"),
    ],
    ids=["missing", "nan", "ragged"],
)
def test_a_bad_feature_column_is_refused_before_training_starts(tmp_path, tokenizer, rows, config, message):
    kgps = SpyKGPS(config)
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=StepReward(),
        args=trainer_args(tmp_path, max_steps=4, per_device_train_batch_size=8),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    with pytest.raises(ValueError, match=message):
        trainer.train()
    assert trainer.state.global_step == 0 and kgps.batches == []


def test_resuming_with_other_feature_values_is_refused(tmp_path, tokenizer):
    run(tmp_path, tokenizer, dataset(), stop_at=4)
    other = dataset(level=[f"L{i % 2}" for i in range(12)])
    with pytest.raises(ValueError, match=r"saved for other rows than this run's 12 \(its 'level' column differs"):
        run(tmp_path, tokenizer, other, resume=str(tmp_path / "checkpoint-4"))
    # A state that records the digest of its prompt column only (a development build's) is refused as such.
    path = str(tmp_path / "checkpoint-4" / state_file.STATE_FILE)
    arrays, meta = state_file.load(path)
    del meta["prompts"]["rows"]
    state_file.save(path, arrays, meta)
    with pytest.raises(ValueError, match=r"records the digest of its prompt column only, as a development build of"):
        run(tmp_path, tokenizer, other, resume=str(tmp_path / "checkpoint-4"))


class AnswerReward(StepReward):
    """StepReward, with a signature that reads the dataset's `answer` column (as a math-verify reward does)."""

    __name__ = "answer_reward"

    def __call__(self, prompts, completions, idx, answer, trainer_state, **kwargs):
        return super().__call__(prompts, completions, idx, trainer_state)


def test_the_one_line_shares_by_the_level_it_finds_never_the_answer_and_says_so(tmp_path, tokenizer, caplog):
    # `answer` has two values, so only the reward reading it keeps it out; `idx` names prompts and the reward reads it.
    rows = dataset().add_column("answer", [str(i % 2) for i in range(12)])
    kgps = KGPSCallback()
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=AnswerReward(),
        args=trainer_args(tmp_path, max_steps=4, per_device_train_batch_size=8),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.train()
    assert kgps.selector.config.feature_columns == ["level"]
    np.testing.assert_array_equal(kgps.selector.shared.design.row_of, np.arange(12) % 3)
    said = (
        "KGPS shares what it learns across prompts by `level` (3 values) (not read: `prompt`: the model's input; "
        "`idx`: the reward function answer_reward reads it; `answer`: the reward function answer_reward reads it)"
    )
    assert [r.getMessage() for r in caplog.records if r.name.startswith("trl_kgps")] == [said]
    trainer.create_model_card()
    card = (tmp_path / "README.md").read_text()
    assert "- shared across prompts: the feature columns `level`, 3 groups" in card and f"- {said}" in card


class KwargsReward(StepReward):
    """StepReward reading what it needs through **kwargs, the dataset's `solution` among it, as TRL users write."""

    __name__ = "kwargs_reward"

    def __call__(self, prompts, completions, **kwargs):
        assert len(kwargs["solution"]) == len(completions)
        return super().__call__(prompts, completions, kwargs["idx"], kwargs["trainer_state"])


@pytest.mark.parametrize("trainer_class", ["GRPOTrainer", "RLOOTrainer"])
def test_the_one_line_never_shares_by_a_column_a_reward_reads_through_kwargs(tmp_path, tokenizer, trainer_class):
    rows = dataset().add_column("solution", [str(i % 4) for i in range(12)])
    kgps = KGPSCallback()
    config_class = getattr(trl, trainer_class.replace("Trainer", "Config"))
    trainer = getattr(trl, trainer_class)(
        model=build_model(tokenizer),
        reward_funcs=KwargsReward(),
        args=trainer_args(tmp_path, config_class, max_steps=2, per_device_train_batch_size=8, beta=0.0),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    trainer.train()
    assert kgps.selector.config.feature_columns == ["level"]
    assert kgps.adapter.metadata.skipped["solution"] == (
        "the reward function kwargs_reward takes **kwargs and names it in its code"
    )


@pytest.mark.parametrize("config", [KGPSConfig(), LEVEL], ids=["one_line", "named"])
def test_a_dataset_formatted_for_pandas_trains_as_it_does_unformatted(tmp_path, tokenizer, config):
    plain = dataset()
    formatted = dataset()
    formatted.set_format("pandas")
    _, expected = run(tmp_path / "plain", tokenizer, plain, config=config)
    _, got = run(tmp_path / "pandas", tokenizer, formatted, config=config)
    assert got.selector.config.feature_columns == ["level"] and got.batches == expected.batches
    np.testing.assert_array_equal(got.selector.shared.design.row_of, np.arange(12) % 3)


def test_a_run_that_read_no_column_resumes_with_the_config_its_refusal_names(tmp_path, tokenizer):
    rows = dataset()
    none = KGPSConfig(feature_columns=[])
    run(tmp_path, tokenizer, rows, config=none, stop_at=4)
    checkpoint = str(tmp_path / "checkpoint-4")
    with pytest.raises(ValueError, match=r"pass KGPSCallback\(KGPSConfig\(feature_columns=\[\]\)\), the config it"):
        run(tmp_path, tokenizer, rows, config=KGPSConfig(), resume=checkpoint)  # the one line finds `level`
    trainer, resumed = run(tmp_path, tokenizer, rows, config=none, resume=checkpoint)
    assert resumed.selector.config.feature_columns == [] and len(resumed.batches) > 0
    trainer.create_model_card()  # its config table says `[]`, which a copy of it resumes with
    assert "| `feature_columns` | `[]` |" in (tmp_path / "README.md").read_text()


class LevelReward(StepReward):
    """StepReward that names the dataset's `level` in its signature."""

    def __call__(self, prompts, completions, idx, trainer_state, level, **kwargs):
        return super().__call__(prompts, completions, idx, trainer_state)


def test_a_run_whose_reward_now_reads_its_column_is_refused_naming_the_column_to_pass(tmp_path, tokenizer):
    rows = dataset()
    run(tmp_path, tokenizer, rows, config=KGPSConfig(), stop_at=4)  # the one line shares by `level`
    with pytest.raises(ValueError) as refused:
        run(
            tmp_path, tokenizer, rows, config=KGPSConfig(), resume=str(tmp_path / "checkpoint-4"), reward=LevelReward()
        )
    assert "feature_columns=['level'] (this run: [])" in str(refused.value)
    assert str(refused.value).endswith(
        "pass KGPSCallback(KGPSConfig(feature_columns=['level'])), the config it was saved with."
    )


def test_a_solve_rate_column_starts_each_prompt_and_resumes_exactly(tmp_path, tokenizer, caplog):
    """`KGPSConfig(prior_column="solve_rate")`: each prompt starts from its rate's bin, the log says so, and a run
    stopped and resumed equals the run trained straight through."""
    rates = [0.0, 0.1, 0.45, 0.9, 1.0, None] * 2
    rows = dataset(level=[f"L{i % 2}" for i in range(12)]).add_column("solve_rate", rates)
    prior = KGPSConfig(prior_column="solve_rate")
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        _, straight = run(tmp_path / "straight", tokenizer, rows, config=prior)
    assert "and the bins of the success rates in `solve_rate`" in caplog.text
    assert straight.selector.config.prior_column == "solve_rate"
    assert "level=L0, solve_rate=(0.4, 0.5]" in straight.selector.shared.design.names
    run(tmp_path / "split", tokenizer, rows, config=prior, stop_at=4)
    _, second = run(tmp_path / "split", tokenizer, rows, config=prior, resume=str(tmp_path / "split" / "checkpoint-4"))
    assert second.batches == straight.batches[len(straight.batches) - len(second.batches) :]
    for name, value in straight.selector.state_dict().items():
        np.testing.assert_equal(second.selector.state_dict()[name], value, err_msg=name)
