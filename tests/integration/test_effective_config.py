"""The config passed is the config that runs: in a real GRPOTrainer, the fields KGPSConfig leaves to the dataset are
decided from it, a value set is kept, and `KGPSCallback.effective_config`, the selector, the state file and the resume
check all hold the config that ran."""

import logging

import numpy as np
import pytest
from harness import StepReward, build_model, prompt_dataset, trainer_args

from trl_kgps import KGPSCallback, KGPSConfig
from trl_kgps.config import NO_METADATA, WITH_METADATA
from trl_kgps.engine import state_file


trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")


def decided(config):
    return {name: getattr(config, name) for name in WITH_METADATA}


def trainer_for(tmp_path, tokenizer, rows, config=None, kgps=None, **args):
    """A GRPOTrainer on `rows` with `kgps`, or `KGPSCallback(config)`, and the callback."""
    kgps = KGPSCallback(config) if kgps is None else kgps
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=StepReward(),
        args=trainer_args(tmp_path, **{"max_steps": 2, "per_device_train_batch_size": 8, **args}),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    return trainer, kgps


def test_a_value_set_to_the_with_metadata_default_runs_on_a_dataset_without_metadata_and_resumes(tmp_path, tokenizer):
    # `prompt` and `idx` (which the reward reads): no metadata column. The documented default, passed, ran with 0.
    mine = KGPSConfig(process_noise_adaptation=0.05)
    saved = dict(save_strategy="steps", save_steps=2)
    trainer, kgps = trainer_for(tmp_path, tokenizer, prompt_dataset(12), mine, **saved)
    assert kgps.effective_config is None  # before training
    trainer.train()
    assert kgps.effective_config is kgps.selector.config
    assert kgps.effective_config == KGPSConfig(**{**NO_METADATA, "process_noise_adaptation": 0.05})
    assert kgps.config is mine and mine.process_noise_adaptation == 0.05  # what was passed, unchanged
    _, meta = state_file.load(str(tmp_path / "checkpoint-2" / state_file.STATE_FILE))
    assert decided(KGPSConfig(**meta["selector"]["config"])) == {**NO_METADATA, "process_noise_adaptation": 0.05}

    # A resume compares the configs that run: KGPSConfig() decides 0 for this dataset, and is refused.
    checkpoint = str(tmp_path / "checkpoint-2")
    trainer, _ = trainer_for(tmp_path, tokenizer, prompt_dataset(12), KGPSConfig(), max_steps=4, **saved)
    with pytest.raises(ValueError, match=r"process_noise_adaptation=0\.05 \(this run: 0\.0\)"):
        trainer.train(resume_from_checkpoint=checkpoint)
    trainer, kgps = trainer_for(tmp_path, tokenizer, prompt_dataset(12), mine, max_steps=4, **saved)
    trainer.train(resume_from_checkpoint=checkpoint)
    assert trainer.state.global_step == 4 and kgps.effective_config.process_noise_adaptation == 0.05


def test_the_default_is_decided_from_the_dataset_and_float16_rates_are_read(tmp_path, tokenizer, caplog):
    trainer, kgps = trainer_for(tmp_path / "none", tokenizer, prompt_dataset(12), KGPSConfig(), max_steps=1)
    trainer.train()
    assert decided(kgps.effective_config) == NO_METADATA and kgps.selector.shared is None

    # With a `level` column, and another model's rates stored as float16 (which crashed `train()` in Arrow's min_max).
    rates = datasets.Value("float16")
    rows = prompt_dataset(12).add_column("level", [f"L{i % 3}" for i in range(12)])
    rows = rows.add_column("pass_rate", np.linspace(0, 1, 12).tolist()).cast_column("pass_rate", rates)
    trainer, kgps = trainer_for(tmp_path / "level", tokenizer, rows, KGPSConfig(), max_steps=1)
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.train()
    assert decided(kgps.effective_config) == WITH_METADATA and kgps.effective_config.feature_columns == ["level"]
    assert "`pass_rate` looks like another model's success rates" in caplog.text

    prior = KGPSConfig(prior_column="pass_rate")
    trainer, kgps = trainer_for(tmp_path / "prior", tokenizer, rows, prior, max_steps=1)
    trainer.train()
    assert kgps.effective_config.prior_column == "pass_rate"
    assert "level=L0, pass_rate=0" in kgps.selector.shared.design.names


def test_a_prior_column_naming_the_input_is_refused_before_any_log_line(tmp_path, tokenizer, caplog):
    trainer, kgps = trainer_for(tmp_path, tokenizer, prompt_dataset(12), KGPSConfig(prior_column="prompt"))
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        with pytest.raises(ValueError, match="names the model's input"):
            trainer.train()
    assert [r for r in caplog.records if r.name.startswith("trl_kgps")] == []
    assert trainer.state.global_step == 0


def test_an_id_over_copies_names_prompts_and_copies_that_disagree_are_said(tmp_path, tokenizer, caplog):
    # 12 problems, each on two rows with one `problem_id`; prompt 5's copies disagree on `level`.
    problems = np.repeat(np.arange(12), 2)
    level = [f"L{p % 3}" for p in problems]
    level[11] = "L0"  # the second copy of problem 5 (level L2)
    rows = datasets.Dataset.from_dict(
        {
            "prompt": [f"p{p} a b" for p in problems],
            "idx": problems.tolist(),
            "problem_id": [f"id-{p}" for p in problems],
            "level": level,
        }
    )
    trainer, kgps = trainer_for(tmp_path, tokenizer, rows, KGPSConfig(), max_steps=1)
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.train()
    assert kgps.effective_config.feature_columns == ["level"]
    assert kgps.adapter.metadata.skipped["problem_id"].endswith("it names prompts rather than grouping them")
    assert "carry different values in `level` (1 prompt)" in caplog.text


def test_a_config_that_the_selector_instance_contradicts_is_refused_naming_both_values_and_the_fix():
    from trl_kgps import KGPSSelector

    with pytest.raises(ValueError) as refused:
        KGPSCallback(KGPSConfig(success_threshold=0.9, warmup_epochs=1), selector=KGPSSelector(16))
    message = str(refused.value)
    assert "warmup_epochs=1 (the callback's) and 0 (the selector's), success_threshold=0.9 (the callback's) and " in (
        message
    )
    assert "0.5 (the selector's)" in message
    assert "`KGPSCallback(config, selector=KGPSSelector(num_prompts, config=config))`, or leave config out" in message
    # The config passed once, either way, or a field left to the dataset that the selector decided: no refusal.
    config = KGPSConfig(success_threshold=0.9, warmup_epochs=1)
    KGPSCallback(config, selector=KGPSSelector(16, config=config))
    KGPSCallback(KGPSConfig(feature_columns=[]), selector=KGPSSelector(16, KGPSConfig(shared_variance=0.0)))
    assert KGPSCallback(selector=KGPSSelector(16, config=config)).config.success_threshold == 0.9


def test_a_callback_given_only_a_selector_runs_with_its_config_and_a_replaced_config_is_refused_at_attach(
    tmp_path, tokenizer
):
    from trl_kgps import KGPSSelector

    rows = prompt_dataset(16)
    selector = KGPSSelector(16, KGPSConfig(success_threshold=0.9, warmup_epochs=1, feature_columns=[]))
    trainer, kgps = trainer_for(tmp_path, tokenizer, rows, kgps=KGPSCallback(selector=selector))
    trainer.train()
    # The engine scores rewards and warms up by the selector's config, the one the run reports.
    assert kgps.engine.rule.threshold == 0.9 and kgps.ledger.warmup_batches == 16 // kgps.ledger.batch_size > 0
    assert kgps.effective_config is selector.config is kgps.config
    replaced = KGPSCallback(selector=KGPSSelector(16))
    replaced.config = KGPSConfig(success_threshold=0.9)
    with pytest.raises(ValueError, match=r"success_threshold=0\.9 \(the callback's\) and 0\.5 \(the selector's\)"):
        replaced.attach(trainer)
    assert replaced.trainer is None
