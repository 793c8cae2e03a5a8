"""`trl-kgps train`, the README's main job, end to end on a few steps: what it prints and writes."""

import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from trl_kgps import KGPSConfig, KGPSSelector, difficulty_table
from trl_kgps.demo.cli import main
from trl_kgps.demo.train import REFUSED_FLAGS, _check_output_dir, accuracy_reward


FEW_STEPS = [
    "--max_steps", "6", "--num_prompts", "16", "--num_eval_prompts", "8", "--eval_samples", "2",
    "--warm_start_steps", "5", "--per_device_train_batch_size", "16", "--num_generations", "4",
    "--logging_steps", "2", "--disable_tqdm", "true",
]  # fmt: skip


@pytest.mark.slow
def test_train_writes_the_model_state_card_summary_and_plot(tmp_path, capsys, monkeypatch):
    threads = torch.get_num_threads()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        main(["train", "--output_dir", str(tmp_path), *FEW_STEPS])
    printed = capsys.readouterr()
    assert "trl-kgps train: summary" in printed.out and "held-out accuracy" in printed.out
    # Levels named by what they are.
    assert "  level 4: ab+cd " in printed.out and "  level=4 (ab+cd) " in printed.out
    assert "times selected per prompt (uniform sampling: " in printed.out
    # A progress bar and a summary, not a metric dict per log, nor transformers' deprecation warnings.
    assert "'loss'" not in printed.out + printed.err
    assert not [w for w in caught if "deprecated and will be removed in v6" in str(w.message)]
    assert torch.get_num_threads() == threads, "the caller's torch threads are restored"

    summary = json.loads((tmp_path / "kgps_summary.json").read_text())
    # The built-in model trains on one thread by default without a GPU; with one, torch's threads are left alone.
    assert summary["threads"] == (threads if torch.cuda.is_available() else 1)
    # 16 prompts in batches of 4 prompts x 4 completions, all 6 chosen by KGPS (no warmup epoch by default).
    assert summary["steps"] == 6 and summary["rollouts"] == 6 * 16
    assert 4 / 16 <= summary["coverage"] <= 1.0
    assert set(summary["accuracy_before"]) == {"all", "level 1", "level 2", "level 3", "level 4"}
    assert 0.0 <= summary["accuracy_after"]["all"] <= 1.0
    assert "kgps/informative" in summary["kgps"]

    times = summary["times_selected_per_prompt"]
    assert times["uniform"] == pytest.approx(7 * 4 / 16)  # 6 batches and the one chosen ahead, 4 of 16 prompts
    assert set(times) == {"uniform", "level 1", "level 2", "level 3", "level 4"}
    for name in ("model.safetensors", "tokenizer.json", "kgps_state.npz", "kgps_difficulty.png", "kgps_rollouts.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    card = (tmp_path / "README.md").read_text()
    assert "## KGPS" in card
    # Named after the output folder, loadable from there, with no link to a base model or dataset that does not exist.
    assert f"# Model Card for {tmp_path.name}" in card and f'model="{tmp_path.name}"' in card
    assert "None" not in card.split("## Training procedure")[0]
    assert "huggingface.co/datasets/" not in card
    # 6 steps of one generation batch each, and the batch chosen ahead while the sixth trained.
    assert "- rounds: 6 generation batches rolled out and trained on, all chosen by the selector; 1 more" in card
    # The quick start runs on the model it describes (a tokenizer without a chat template: plain text).
    quick_start = card.split("## Quick start")[1].split("```python\n")[1].split("```")[0]
    monkeypatch.chdir(tmp_path.parent)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(quick_start, {})
    assert printed.getvalue().endswith("\n")  # it got as far as printing the generated text
    selector = KGPSSelector.from_pretrained(tmp_path)
    assert selector.num_prompts == 16
    table = difficulty_table(tmp_path)
    assert int(np.sum(table["times_selected"])) >= 6 * 4


@pytest.mark.slow
def test_the_demo_card_says_each_thing_once_as_the_summary_prints_it(tmp_path, capsys):
    # Before: coverage twice with two values (the prompts observed, and kgps/coverage: its mean over the last logged
    # steps), groups' predicted success other than the printed ones, and TRL's unfilled template (`licence: license`,
    # blank lines for tracker badges) left in.
    main(["train", "--output_dir", str(tmp_path), *FEW_STEPS])
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "kgps_summary.json").read_text())
    card = (tmp_path / "README.md").read_text()

    assert "licence" not in card
    assert "## Training procedure\n\nThis model was trained with GRPO" in card
    observed = summary["prompts_observed"]
    coverage = f"coverage: {observed} of 16 prompts observed ({observed / 16:.1%})"
    assert card.count("coverage") == 1 and f"- {coverage}\n" in card
    assert f"\n{coverage}\n" in printed and "kgps/coverage" not in summary["kgps"]
    # Each group's predicted success: the shared part's at the end, in the card's table as in the printed summary.
    groups = summary["group_predicted_success"]
    assert set(groups) == {f"level={level}" for level in (1, 2, 3, 4)}
    for group, success in groups.items():
        assert card.count(f"| {group} |") == 1 and re.search(rf"\| {group} \| \d+ \| {success:.3f} \|", card)
        assert re.search(rf"\n  {group} \(.*\)\s+{success:.3f} / ", printed)
        assert f"kgps/group/{group}/predicted_success" not in card
    assert "Last logged metrics, each the mean over the steps since the log before it" in card


@pytest.mark.parametrize(
    "args, message",
    [
        (["--num_prompts", "0"], r"--num_prompts 0 must be >= 1\.$"),
        (
            ["--num_prompts", "1"],
            r"A generation batch needs 8 distinct prompts .* and the dataset has 1: use a larger",
        ),
        (
            ["--feature_columns", "nosuch"],
            r"feature_columns names \['nosuch'\], which the train dataset does not have",
        ),
        (["--max_steps", "0"], r"--max_steps 0 trains nothing"),
        (
            ["--per_device_train_batch_size", "0"],  # before, "A generation batch needs 0 distinct prompts"
            r"per_device_train_batch_size=0 puts no prompt in a generation batch .* set per_device_train_batch_size "
            r"to 1 or more",
        ),
        (
            ["--dataset_name", "/nonexistent/sums"],  # before, datasets' FileNotFoundError and its traceback
            r"--dataset_name /nonexistent/sums: Couldn't find any data file at /nonexistent/sums\. Name a local folder",
        ),
    ],
)
def test_train_refuses_bad_flags_in_one_line_before_the_warm_start(tmp_path, caplog, args, message):
    with pytest.raises(SystemExit, match=r"^trl-kgps train: " + message):
        main(["train", "--output_dir", str(tmp_path), *args])
    assert "Warm start" not in caplog.text
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("inside", [False, True], ids=["a_file", "a_folder_under_a_file"])
def test_train_refuses_an_output_dir_that_names_a_file_before_the_warm_start(tmp_path, caplog, inside):
    # Before, the trainer's makedirs raised FileExistsError with a traceback, after the warm start had run.
    (tmp_path / "notes.txt").write_text("mine")
    output_dir = tmp_path / "notes.txt" / ("run" if inside else "")
    with pytest.raises(SystemExit, match=rf"^trl-kgps train: --output_dir {output_dir}: .*notes.txt is a file, not a"):
        main(["train", "--output_dir", str(output_dir), *FEW_STEPS])
    assert "Warm start" not in caplog.text
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux's /proc, where no folder can be created")
def test_train_refuses_an_output_dir_it_cannot_create_before_the_warm_start(caplog):
    # Before, the trainer's makedirs raised FileNotFoundError with a traceback.
    with pytest.raises(SystemExit, match=r"^trl-kgps train: --output_dir /proc/kgps/run: cannot create this folder"):
        main(["train", "--output_dir", "/proc/kgps/run", *FEW_STEPS])
    assert "Warm start" not in caplog.text


def test_an_output_dir_the_check_creates_is_removed_again(tmp_path):
    _check_output_dir(str(tmp_path / "new" / "run"))
    assert not any(tmp_path.iterdir())


def test_train_help_lists_trl_kgps_and_script_flags():
    result = subprocess.run(
        [sys.executable, "-m", "trl_kgps.demo.cli", "train", "--help"], capture_output=True, text=True, check=True
    )
    for flag in ("--max_steps", "--model_name_or_path", "--dataset_name", "--gamma", "--selector", "--num_prompts"):
        assert flag in result.stdout


@pytest.mark.slow
def test_train_on_a_local_dataset_with_solutions_uses_the_math_verify_reward(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"prompt": f"{i}+1=", "solution": f"${i + 1}$"} for i in range(8)]
    (data / "train.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    out = tmp_path / "out"
    few = FEW_STEPS[FEW_STEPS.index("--warm_start_steps") :]  # the built-in task's sizes do not apply
    main(["train", "--output_dir", str(out), "--dataset_name", str(data), "--max_steps", "3", *few])
    summary = json.loads((out / "kgps_summary.json").read_text())
    assert summary["accuracy_before"] is None and summary["steps"] == 3 and summary["rollouts"] == 3 * 16
    assert "held-out accuracy" not in capsys.readouterr().out
    assert KGPSSelector.from_pretrained(out).num_prompts == 8


def test_the_math_reward_judges_plain_and_conversational_completions_alike():
    completions = ["so \\boxed{2}", "\\boxed{3}", [{"role": "assistant", "content": "\\boxed{2}"}]]
    assert accuracy_reward(completions, solution=["$2$"] * 3) == [1.0, 0.0, 1.0]


@pytest.mark.slow
def test_the_model_card_names_the_hub_repo_when_there_is_one(tmp_path, capsys):
    main(["train", "--output_dir", str(tmp_path), "--hub_model_id", "someone/kgps-sums", *FEW_STEPS])
    card = (tmp_path / "README.md").read_text()
    assert "# Model Card for kgps-sums" in card and 'model="someone/kgps-sums"' in card


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, reason",
    [
        # The paper's warmup epoch is 4 steps here (16 prompts, 4 a step); 2 steps never leave it.
        (["--warmup_epochs", "1", "--max_steps", "2"], "the run did not leave the warmup"),
        # The default has no warmup; one step is not a logging step (every 2).
        (["--max_steps", "1"], "no step after the warmup was a logging step (--logging_steps)"),
    ],
)
def test_a_run_without_a_logged_step_after_warmup_does_not_claim_a_difficulty_plot(
    tmp_path, capsys, caplog, args, reason
):
    main(["train", "--output_dir", str(tmp_path), *FEW_STEPS, *args])
    wrote = capsys.readouterr().out.strip().splitlines()[-1]
    assert wrote.startswith("wrote the model") and "kgps_difficulty.png" not in wrote
    assert not (tmp_path / "kgps_difficulty.png").exists()
    assert f"No difficulty estimates to plot: {reason}." in caplog.text


def test_train_help_opens_with_this_commands_and_kgps_flags_and_hides_the_unusable_ones(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    lines = capsys.readouterr().out.split("\noptions:")[1].splitlines()
    flags = [line.split()[0].rstrip(",") for line in lines if line.strip().startswith("--")]
    kgps = ["--" + field.name for field in dataclasses.fields(KGPSConfig)]
    assert flags[:8] == [
        "--selector", "--num_prompts", "--num_eval_prompts", "--eval_samples", "--warm_start_steps",
        "--train_warm_start", "--threads", "--dataset_name",
    ]  # fmt: skip
    assert flags.index("--dataset_train_split") < flags.index(kgps[0])
    assert flags[flags.index(kgps[0]) : flags.index(kgps[0]) + len(kgps)] == kgps  # then TRL's
    for refused in REFUSED_FLAGS:
        assert refused not in flags


@pytest.mark.parametrize("arg", ["--dataset_streaming", "--dataset-streaming=true", "--shuffle_dataset"])
def test_train_refuses_flags_it_cannot_use_with_the_reason(arg, tmp_path):
    with pytest.raises(SystemExit, match=r"trl-kgps train: --\w+ is not available here: .+\. Leave it out\.$"):
        main(["train", "--output_dir", str(tmp_path), arg])
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_demo_resumes_from_an_epochs_last_checkpoint_without_a_missing_weights_warning(tmp_path, capfd, caplog):
    # 16 prompts, 4 a step: checkpoint-4 closes the first epoch, and the built-in model ties its head to its embedding.
    args = [*FEW_STEPS, "--output_dir", str(tmp_path), "--save_strategy", "steps", "--save_steps", "2"]
    main(["train", *args, "--max_steps", "4"])
    capfd.readouterr()
    main(["train", *args, "--max_steps", "6", "--resume_from_checkpoint", str(tmp_path / "checkpoint-4")])
    summary = json.loads((tmp_path / "kgps_summary.json").read_text())
    assert summary["steps"] == 6 and summary["rollouts"] == 6 * 16
    assert "missing keys" not in capfd.readouterr().err + caplog.text


@pytest.mark.parametrize("cuda", [False, True])
def test_the_command_s_defaults_follow_whether_cuda_is_present(monkeypatch, cuda):
    # Where CUDA is visible the command keeps GRPOConfig's own precision and pinned memory; on a CPU it trains in
    # float32 and pins nothing. (CUDA's presence is faked here; tests/gpu runs the command on a GPU.)
    from trl import GRPOConfig

    from trl_kgps.demo.train import make_parser

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    parser = make_parser()
    fields = GRPOConfig.__dataclass_fields__
    expected = {name: fields[name].default if cuda else False for name in ("bf16", "dataloader_pin_memory")}
    assert {name: parser.get_default(name) for name in expected} == expected
