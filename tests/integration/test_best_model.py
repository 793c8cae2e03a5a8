"""`load_best_model_at_end=True`: the KGPS state saved beside the best model's weights is the best checkpoint's."""

import logging

import pytest
from harness import RewardLog, SpyKGPS, prompt_dataset, trainer_args
from transformers import TrainerCallback

from trl_kgps import KGPSConfig
from trl_kgps.engine import state_file


trl = pytest.importorskip("trl")


class RankByStep(TrainerCallback):
    """Adds `eval_rank`, minus the step, to every evaluation's metrics: the first evaluation is the best."""

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        metrics["eval_rank"] = -state.global_step


def test_the_best_model_is_saved_with_its_checkpoints_kgps_state_and_a_log_line(tmp_path, model, tokenizer, caplog):
    kgps = SpyKGPS(KGPSConfig(feature_columns=[]))
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(
            tmp_path,
            max_steps=6,
            save_strategy="steps",
            save_steps=2,
            eval_strategy="steps",
            eval_steps=2,
            per_device_eval_batch_size=8,
            load_best_model_at_end=True,
            metric_for_best_model="rank",
            greater_is_better=True,
        ),
        train_dataset=prompt_dataset(16),
        eval_dataset=prompt_dataset(4),
        processing_class=tokenizer,
        callbacks=[kgps, RankByStep()],
    )
    trainer.train()
    best = tmp_path / "checkpoint-2"
    assert trainer.state.best_model_checkpoint == str(best) and trainer.state.global_step == 6

    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.save_model(str(tmp_path / "final"))
    saved = tmp_path / "final" / state_file.STATE_FILE
    # Beside the best model's weights, the state of the step they are from, which says so; not the run's last.
    assert saved.read_bytes() == (best / state_file.STATE_FILE).read_bytes()
    _, meta = state_file.load(str(saved))
    assert meta["trainer"]["global_step"] == 2 and meta["batches_scored"] == 2
    assert kgps.ledger.batches_scored == 6  # the callback still holds the run's last beliefs
    lines = [r.getMessage() for r in caplog.records if "load_best_model_at_end" in r.getMessage()]
    assert len(lines) == 1 and f"the state of {best}" in lines[0] and "this run's last step (6)" in lines[0]
    # The model card says whose state lies beside the model, and that its rounds are the whole run's.
    trainer.create_model_card()
    card = (tmp_path / "README.md").read_text()
    assert f"- saved state: the best model's (`load_best_model_at_end`), from `{best}`; the rounds" in card
    assert "- rounds: 6 generation batches rolled out" in card
