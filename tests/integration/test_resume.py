"""Resuming from a checkpoint continues the very run that was interrupted: same prompts, same posterior."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from harness import PromptStepReward, SpyKGPS, StepReward, StopAt, build_model, prompt_dataset, trainer_args

from trl_kgps import KGPSCallback, KGPSConfig
from trl_kgps.demo.variants import VARIANTS


trl = pytest.importorskip("trl")

OLD_RUN = Path(__file__).parents[1] / "data" / "trl_kgps_0.1_run"
RUN_0_2 = Path(__file__).parents[1] / "data" / "trl_kgps_0.2_run"
PAPER = KGPSConfig.paper()

# (prompts, trainer arguments): lag 1 with two prompts a batch, lag 0 with four prompts a batch spanning two steps.
CONFIGS = {
    "lag1": (6, dict(per_device_train_batch_size=8)),
    "lag0": (12, dict(per_device_train_batch_size=8, steps_per_generation=2)),
}


def run(
    tmp_path,
    tokenizer,
    num_prompts,
    args,
    stop_at=None,
    resume=None,
    selector=None,
    config=None,
    dataset=None,
    reward=None,
):
    kgps = SpyKGPS(config or KGPSConfig(), selector=selector)
    callbacks = [kgps] + ([StopAt(stop_at)] if stop_at else [])
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=reward or StepReward(),
        args=trainer_args(tmp_path, max_steps=8, **{"save_strategy": "steps", "save_steps": 4, **args}),
        train_dataset=prompt_dataset(num_prompts) if dataset is None else dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    trainer.train(resume_from_checkpoint=resume)
    return kgps


def logged_metrics(kgps):
    """The `kgps/*` metrics of each log of the run, by step; `kgps/select_ms`, a time, by its presence only."""
    return [
        (log["step"], {key: key == "kgps/select_ms" or value for key, value in log.items() if key.startswith("kgps/")})
        for log in kgps.trainer.state.log_history
    ]


@pytest.mark.parametrize(
    "name, selector, config",
    [
        ("lag1", None, None),
        ("lag0", None, None),
        ("lag1", None, KGPSConfig(feature_columns=[])),  # the default, gamma calibrated (no column: per prompt)
        ("lag1", None, KGPSConfig.paper()),
        ("lag0", None, KGPSConfig.paper()),
        ("lag1", "mopps", None),
        ("lag1", "greso", None),
        ("lag1", "dps", None),
        ("lag1", "uniform", None),
    ],
)
def test_resume_continues_exactly(tmp_path, tokenizer, name, selector, config):
    assert_resumes_exactly(tmp_path, tokenizer, name, selector, config, at=4)


@pytest.mark.parametrize("name, at", [("lag1", 3), ("lag1", 6), ("lag0", 6)])
def test_resume_from_the_last_step_of_an_epoch_starts_the_next_epoch_exactly(tmp_path, tokenizer, name, at):
    # lag1: 3 batches of 1 step an epoch; lag0: 3 batches of 2 steps. The trainer skips nothing and starts a new epoch.
    assert_resumes_exactly(tmp_path, tokenizer, name, None, None, at=at)


def assert_resumes_exactly(tmp_path, tokenizer, name, selector, config, at):
    """A run stopped after step `at` and resumed from its checkpoint equals the run trained straight through."""
    num_prompts, args = CONFIGS[name]
    args = {**args, "save_steps": at}
    straight = run(tmp_path / "straight", tokenizer, num_prompts, args, selector=selector, config=config)
    first = run(tmp_path / "split", tokenizer, num_prompts, args, stop_at=at, selector=selector, config=config)
    assert (tmp_path / "split" / f"checkpoint-{at}" / "kgps_state.npz").exists()
    checkpoint = str(tmp_path / "split" / f"checkpoint-{at}")
    second = run(tmp_path / "split", tokenizer, num_prompts, args, resume=checkpoint, selector=selector, config=config)

    resumed = first.batches + second.batches
    assert len(straight.batches) > first.sampler.ledger.warmup_batches, "the run never left warmup"
    assert resumed[: len(straight.batches)] == straight.batches
    assert type(second.selector).__name__ == type(straight.selector).__name__
    np.testing.assert_array_equal(second.selector.predicted_success(), straight.selector.predicted_success())
    assert second.sampler.ledger.batches_chosen == straight.sampler.ledger.batches_chosen
    np.testing.assert_array_equal(second.sampler.ledger.times_selected, straight.sampler.ledger.times_selected)
    assert second.sampler.ledger.times_selected.dtype == np.int32
    # The resumed log continues the checkpoint's: kgps/unique_prompts, repeats and lag as if never interrupted.
    np.testing.assert_equal(logged_metrics(second), logged_metrics(straight))
    if selector is None:
        np.testing.assert_array_equal(second.selector.mean, straight.selector.mean)
        np.testing.assert_array_equal(second.selector.variance, straight.selector.variance)
        resumed_state, straight_state = second.selector.state_dict(), straight.selector.state_dict()
        for key in resumed_state.keys() - {"mean", "variance_base", "variance_offset"}:
            np.testing.assert_equal(resumed_state[key], straight_state[key], err_msg=key)


def test_a_checkpoint_written_by_trl_kgps_0_1_resumes_exactly_with_the_paper_preset(tmp_path, tokenizer):
    shutil.copytree(OLD_RUN / "checkpoint-4", tmp_path / "checkpoint-4")
    resumed = run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"), config=PAPER)
    with np.load(OLD_RUN / "straight.npz") as straight:
        assert resumed.batches == straight["batches"][-len(resumed.batches) :].tolist()
        assert_same_beliefs(resumed.selector, straight)


def assert_same_beliefs(selector, straight) -> None:
    """
    The beliefs of a run resumed from a committed checkpoint against those of the committed uninterrupted run, to
    float32's rounding. They hold the update norms of this machine's training steps, which another CPU's kernels or
    another transformers move by an ulp (seen: 1.2e-7 in two variances, on an AMD EPYC with transformers 4.56.2).
    A resume within one environment is compared bit for bit above.
    """
    np.testing.assert_allclose(selector.mean, straight["mean"], rtol=1e-6, atol=0)
    np.testing.assert_allclose(selector.variance, straight["variance"], rtol=1e-6, atol=0)


def test_a_checkpoint_written_by_trl_kgps_0_1_is_refused_with_the_default_naming_the_preset(tmp_path, tokenizer):
    shutil.copytree(OLD_RUN / "checkpoint-4", tmp_path / "checkpoint-4")
    with pytest.raises(ValueError, match=r"KGPSConfig\.paper\(\).*state version 1"):
        run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"))


def test_a_checkpoint_written_by_trl_kgps_0_2_resumes_exactly_with_its_per_prompt_default(tmp_path, tokenizer, caplog):
    shutil.copytree(RUN_0_2 / "checkpoint-4", tmp_path / "checkpoint-4")
    assert KGPSConfig.per_prompt() == VARIANTS["kgps_per_prompt"]  # the benchmark's name for it
    resumed = run(
        tmp_path,
        tokenizer,
        6,
        CONFIGS["lag1"][1],
        resume=str(tmp_path / "checkpoint-4"),
        config=KGPSConfig.per_prompt(),
    )
    # It records no digest of its prompts: one line says that the dataset could not be checked.
    warnings = [r.getMessage() for r in caplog.records if "records no digest of its prompts" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    with np.load(RUN_0_2 / "straight.npz") as straight:
        assert resumed.batches == straight["batches"][-len(resumed.batches) :].tolist()
        assert_same_beliefs(resumed.selector, straight)
    # The one line on this column-less dataset keeps one filter per prompt too, but drawn over the whole pool.
    with pytest.raises(ValueError, match=r"candidates=16\.0 \(this run: 0\.0\).*KGPSConfig\.per_prompt\(\)"):
        run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"))


def as_written_by_a_development_build(path: Path, version: int) -> None:
    """Rewrites the KGPS state at `path` under `version`, the number a development build of trl-kgps 0.3 gave the
    layout that 0.3.0 writes as version 3, without the release that 0.3.0 records and they did not."""
    from trl_kgps.engine import state_file

    arrays, meta = state_file.load(str(path))
    selector = {key: value for key, value in meta["selector"].items() if key != "trl_kgps"}
    meta = {key: value for key, value in meta.items() if key != "trl_kgps"}
    state_file.save(str(path), arrays, {**meta, "selector": {**selector, "version": version}})


def test_a_checkpoint_of_trl_kgps_0_2_saved_with_a_variant_resumes_as_an_experimental_selector(tmp_path, tokenizer):
    from trl_kgps.engine import state_file
    from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector

    # 0.2's run with `objective="mixed"` and `candidate_pass`, public KGPSConfig fields then: its state names a
    # KGPSSelector, as 0.2 wrote it (the variant's own continuation is checked in tests/unit/test_state.py).
    shutil.copytree(RUN_0_2 / "checkpoint-4", tmp_path / "checkpoint-4")
    path = str(tmp_path / "checkpoint-4" / "kgps_state.npz")
    arrays, meta = state_file.load(path)
    config = {**meta["selector"]["config"], "objective": "mixed", "candidate_pass": True}
    state_file.save(path, arrays, {**meta, "selector": {**meta["selector"], "config": config}})
    variant = ExperimentalConfig.per_prompt(objective="mixed", candidate_pass=True)
    resumed = run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"), config=variant)
    assert type(resumed.selector) is ExperimentalSelector and resumed.trainer.state.global_step == 8
    assert resumed.effective_config.objective == "mixed" and resumed.effective_config.candidate_pass


def test_a_checkpoint_of_a_development_build_is_refused_naming_its_version_and_the_fix_that_works(tmp_path, tokenizer):
    num_prompts, args = CONFIGS["lag1"]
    run(tmp_path, tokenizer, num_prompts, args, stop_at=4)
    checkpoint = tmp_path / "checkpoint-4"
    as_written_by_a_development_build(checkpoint / "kgps_state.npz", 5)
    with pytest.raises(ValueError) as refused:
        run(tmp_path, tokenizer, num_prompts, args, resume=str(checkpoint))
    assert str(refused.value) == (
        f"{checkpoint / 'kgps_state.npz'}: state version 5 was written by a development build of trl-kgps 0.3 "
        "(0.3.0.dev), whose states this release does not read: it reads versions 1 (trl-kgps 0.1), 2 (0.2) and 3 "
        "(0.3). Resume with the build that wrote it, or start KGPS afresh from this checkpoint: move its "
        "kgps_state.npz out and pass KGPSConfig(restart_on_missing_state=True)."
    )
    (checkpoint / "kgps_state.npz").rename(tmp_path / "kgps_state.npz")
    restart = KGPSConfig(restart_on_missing_state=True)
    resumed = run(tmp_path, tokenizer, num_prompts, args, resume=str(checkpoint), config=restart)
    assert resumed.trainer.state.global_step == 8


def test_missing_state_is_refused_with_the_fix_or_restarted_on_request(tmp_path, tokenizer):
    run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], stop_at=4)
    (tmp_path / "checkpoint-4" / "kgps_state.npz").unlink()
    with pytest.raises(ValueError) as refused:
        run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"))
    assert str(refused.value) == (  # one sentence: what happened, what to do
        f"{tmp_path / 'checkpoint-4' / 'kgps_state.npz'} does not exist, so this checkpoint was not saved by a run "
        "with KGPSCallback: resume from one that was, or pass KGPSConfig(restart_on_missing_state=True) to start KGPS "
        "afresh from this one."
    )
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=StepReward(),
        args=trainer_args(tmp_path, max_steps=8, save_strategy="no", per_device_train_batch_size=8),
        train_dataset=prompt_dataset(6),
        processing_class=tokenizer,
        callbacks=[KGPSCallback(KGPSConfig(restart_on_missing_state=True))],
    )
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert trainer.state.global_step == 8


def test_state_of_another_dataset_is_refused(tmp_path, tokenizer):
    run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], stop_at=4)
    with pytest.raises(ValueError, match=r"saved for a dataset of 6 prompts, and this run's has 8; resume with the"):
        run(tmp_path, tokenizer, 8, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"))


@pytest.mark.parametrize(
    "other, reason",
    [
        (lambda: prompt_dataset(6).select(range(5, -1, -1)), r"its 6 prompts are this run's in another order"),
        (lambda: prompt_dataset(12).select(range(6, 12)), r"it was saved for other prompts than this run's 6"),
    ],
    ids=["reversed", "other prompts"],
)
def test_a_dataset_of_the_same_length_with_other_prompts_or_order_is_refused(tmp_path, tokenizer, other, reason):
    run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], stop_at=4)
    checkpoint = tmp_path / "checkpoint-4"
    saved = (checkpoint / "kgps_state.npz").read_bytes()
    kgps = SpyKGPS(KGPSConfig())
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=StepReward(),
        args=trainer_args(tmp_path, max_steps=8, per_device_train_batch_size=8),
        train_dataset=other(),
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    with pytest.raises(ValueError, match=reason + r".*resume with the dataset, batch size and selector it was saved"):
        trainer.train(resume_from_checkpoint=str(checkpoint))
    # Refused before anything changed: no batch was scored, no belief moved, and the checkpoint is as it was.
    assert kgps.ledger.batches_scored == 0 and (kgps.selector.mean == 0).all()
    assert (checkpoint / "kgps_state.npz").read_bytes() == saved
    # The same prompts in the saved order resume.
    resumed = run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(checkpoint))
    assert resumed.ledger.batches_scored > 0


def test_state_of_another_generation_batch_size_names_what_sets_it(tmp_path, tokenizer):
    run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], stop_at=4)
    with pytest.raises(
        ValueError, match=r"saved with 2 prompts per generation batch, and this run has 4 \(per_device_"
    ):
        run(tmp_path, tokenizer, 6, {"per_device_train_batch_size": 16}, resume=str(tmp_path / "checkpoint-4"))


def test_resume_inside_a_batch_does_not_count_its_regenerated_rewards(tmp_path, tokenizer):
    """With steps_per_generation 2, checkpoint-3 lies inside a batch's two steps: TRL generates that batch again."""
    num_prompts, args = CONFIGS["lag0"]
    args = {**args, "save_steps": 3}
    straight = run(tmp_path / "straight", tokenizer, num_prompts, args)
    run(tmp_path / "split", tokenizer, num_prompts, args, stop_at=3)
    resumed = run(tmp_path / "split", tokenizer, num_prompts, args, resume=str(tmp_path / "split" / "checkpoint-3"))
    assert resumed.ledger.batches_scored == straight.ledger.batches_scored == 4


def refused_before_anything_changed(
    tmp_path, tokenizer, checkpoint, args, match, dataset=None, config=None, reward=None
):
    """Resuming from `checkpoint` with `args` raises a ValueError matching `match`; no batch was scored, no belief
    moved, and the checkpoint's state is as it was. Returns the message."""
    state = checkpoint / "kgps_state.npz"
    saved = state.read_bytes() if state.is_file() else None
    kgps = SpyKGPS(config or KGPSConfig())
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=reward or StepReward(),
        args=trainer_args(tmp_path, max_steps=8, **args),
        train_dataset=prompt_dataset(6) if dataset is None else dataset,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    with pytest.raises(ValueError, match=match) as refused:
        trainer.train(resume_from_checkpoint=str(checkpoint))
    assert kgps.ledger.batches_scored == 0 and (kgps.selector.mean == 0).all()
    assert (state.read_bytes() if state.is_file() else None) == saved
    return str(refused.value)


def answers(order):
    """Six rows, two per prompt text, each with its own answer (one question with several targets), in `order`."""
    from datasets import Dataset

    rows = [(f"p{i // 2} a b", f"answer {i}", i) for i in order]
    return Dataset.from_dict({key: list(values) for key, values in zip(("prompt", "answer", "idx"), zip(*rows))})


def test_rows_that_share_a_prompt_reordered_are_refused(tmp_path, tokenizer):
    # The prompt column reads the same in both orders; the rows (their answers) do not.
    run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], stop_at=4, dataset=answers([0, 1, 2, 3, 4, 5]))
    swapped = answers([1, 0, 2, 3, 5, 4])
    assert swapped["prompt"] == answers(range(6))["prompt"]
    refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / "checkpoint-4",
        CONFIGS["lag1"][1],
        r"its 6 rows are this run's in another order: rows that share their 'prompt' and differ in another column",
        dataset=swapped,
    )
    refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / "checkpoint-4",
        CONFIGS["lag1"][1],
        r"saved for other rows than this run's 6 \(its 'answer' column differs",
        dataset=answers(range(6)).map(lambda row: {"answer": row["answer"] + "!"}),
    )
    resumed = run(
        tmp_path, tokenizer, 6, CONFIGS["lag1"][1], resume=str(tmp_path / "checkpoint-4"), dataset=answers(range(6))
    )
    assert resumed.ledger.batches_scored > 0


@pytest.mark.parametrize(
    "name, resumed, field",
    [
        ("lag0", dict(per_device_train_batch_size=16, steps_per_generation=1), "steps_per_generation=2 (this run: 1)"),
        ("lag1", dict(per_device_train_batch_size=8, num_iterations=2), "num_iterations=1 (this run: 2)"),
        (
            "lag1",
            dict(per_device_train_batch_size=8, gradient_accumulation_steps=2, steps_per_generation=1),
            "gradient_accumulation_steps=1 (this run: 2)",
        ),
    ],
    ids=["steps_per_generation", "num_iterations", "gradient_accumulation_steps"],
)
def test_another_mapping_of_steps_to_generation_batches_is_refused_naming_the_field(
    tmp_path, tokenizer, name, resumed, field
):
    # The same prompts per generation batch, read by other steps: before, a silent misattribution or, at the first
    # step, "The trainer scored prompts ... (a custom dataloader or sampler?)".
    num_prompts, args = CONFIGS[name]
    run(tmp_path, tokenizer, num_prompts, args, stop_at=4)
    message = refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / "checkpoint-4",
        resumed,
        re.escape(f"was saved by a run with {field}: the trainer maps its steps to generation batches"),
        dataset=prompt_dataset(num_prompts),
    )
    assert f"Resume with {field.split(' ')[0]}; to change it, move kgps_state.npz out" in message


@pytest.mark.parametrize("source, target", [(6, 2), (2, 6)], ids=["later-into-earlier", "earlier-into-later"])
def test_a_state_copied_from_another_checkpoint_is_refused_naming_both_steps(tmp_path, tokenizer, source, target):
    run(tmp_path, tokenizer, 6, {**CONFIGS["lag1"][1], "save_steps": 2})
    shutil.copyfile(
        tmp_path / f"checkpoint-{source}" / "kgps_state.npz", tmp_path / f"checkpoint-{target}" / "kgps_state.npz"
    )
    message = refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / f"checkpoint-{target}",
        CONFIGS["lag1"][1],
        rf"holds KGPS's state at step {source} of training, and this checkpoint resumes the trainer at step {target}",
    )
    assert message.endswith(
        f"Resume from the checkpoint of step {source}, or put back the kgps_state.npz saved with this one."
    )


def test_a_state_that_is_a_directory_is_refused_without_asking_for_the_flag_already_set(tmp_path, tokenizer):
    run(tmp_path, tokenizer, 6, CONFIGS["lag1"][1], stop_at=4)
    state = tmp_path / "checkpoint-4" / "kgps_state.npz"
    state.unlink()
    state.mkdir()
    message = refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / "checkpoint-4",
        CONFIGS["lag1"][1],
        r"kgps_state\.npz is a directory, not the file KGPS saves its state in",
        config=KGPSConfig(restart_on_missing_state=True),
    )
    assert "does not exist" not in message and "pass KGPSConfig(restart_on_missing_state=True)" not in message
    assert "remove the directory from this checkpoint to start KGPS afresh" in message


def copies(num_rows=12, num_prompts=5):
    """`num_rows` shuffled rows over `num_prompts` prompt texts, each row with its own `idx`, which the reward of these
    runs, `PromptStepReward`, does not read."""
    rows = prompt_dataset(num_rows).map(lambda row: {"prompt": f"p{row['idx'] % num_prompts} a b"})
    return rows.shuffle(seed=3)


@pytest.mark.parametrize("at", [3, 4])
def test_a_run_over_copies_resumes_exactly(tmp_path, tokenizer, at):
    args = {**CONFIGS["lag1"][1], "save_steps": at}
    straight = run(tmp_path / "straight", tokenizer, 12, args, dataset=copies(), reward=PromptStepReward())
    first = run(tmp_path / "split", tokenizer, 12, args, stop_at=at, dataset=copies(), reward=PromptStepReward())
    second = run(
        tmp_path / "split",
        tokenizer,
        12,
        args,
        resume=str(tmp_path / "split" / f"checkpoint-{at}"),
        dataset=copies(),
        reward=PromptStepReward(),
    )
    assert straight.selector.num_prompts == 5
    assert (first.batches + second.batches)[: len(straight.batches)] == straight.batches
    np.testing.assert_array_equal(second.selector.mean, straight.selector.mean)
    np.testing.assert_array_equal(second.selector.variance, straight.selector.variance)
    np.testing.assert_array_equal(second.ledger.times_selected, straight.ledger.times_selected)


def test_a_state_kept_by_row_resumes_by_row_on_a_dataset_with_copies(tmp_path, tokenizer, caplog):
    by_row = KGPSConfig(prompt_key=None)
    args = CONFIGS["lag1"][1]
    straight = run(
        tmp_path / "straight", tokenizer, 12, args, dataset=copies(), reward=PromptStepReward(), config=by_row
    )
    run(tmp_path / "split", tokenizer, 12, args, stop_at=4, dataset=copies(), reward=PromptStepReward(), config=by_row)
    resumed = run(
        tmp_path / "split",
        tokenizer,
        12,
        args,
        resume=str(tmp_path / "split" / "checkpoint-4"),
        dataset=copies(),
        reward=PromptStepReward(),
    )
    assert resumed.selector.num_prompts == straight.selector.num_prompts == 12
    assert resumed.batches == straight.batches[-len(resumed.batches) :]
    np.testing.assert_array_equal(resumed.selector.mean, straight.selector.mean)
    assert "keeps one KGPS belief per row" in caplog.text and "7 rows repeat another row's prompt" in caplog.text


def test_a_state_kept_by_prompt_is_refused_by_row_naming_prompt_key(tmp_path, tokenizer):
    run(tmp_path, tokenizer, 12, CONFIGS["lag1"][1], stop_at=4, dataset=copies(), reward=PromptStepReward())
    refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / "checkpoint-4",
        CONFIGS["lag1"][1],
        r"keeps one belief per distinct 'prompt' and this run one per row over the same 12 rows: resume with "
        r"KGPSConfig\(prompt_key='prompt'\)",
        dataset=copies(),
        reward=PromptStepReward(),
        config=KGPSConfig(prompt_key=None),
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda rows: rows.add_item(rows[0]), r"saved over 12 rows and this run's dataset has 13 \(1 rows added\)"),
        (lambda rows: rows.select(range(11)), r"saved over 12 rows and this run's dataset has 11 \(1 rows removed\)"),
        (
            lambda rows: rows.select([rows["prompt"].index(p) for p in dict.fromkeys(rows["prompt"])]),
            r"has 5 \(7 rows removed, as when copies are de-duplicated away\)",
        ),
    ],
    ids=["appended", "removed", "deduplicated"],
)
def test_a_state_over_copies_refuses_other_rows_naming_the_change_and_a_fix_that_works(
    tmp_path, tokenizer, change, match
):
    run(tmp_path, tokenizer, 12, CONFIGS["lag1"][1], stop_at=4, dataset=copies(), reward=PromptStepReward())
    message = refused_before_anything_changed(
        tmp_path,
        tokenizer,
        tmp_path / "checkpoint-4",
        CONFIGS["lag1"][1],
        match,
        dataset=change(copies()),
        reward=PromptStepReward(),
    )
    assert "Resume with that dataset; to train on these rows, start a new run from the checkpoint's weights" in message
    assert "prompt_key" not in message, "no config field can make other rows fit"
