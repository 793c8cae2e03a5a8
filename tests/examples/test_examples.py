"""
The example scripts, as users launch them: each runs as a subprocess for two CPU steps on a tiny model saved to disk
and must finish, log KGPS's metrics, checkpoint KGPS's state with the selector it was asked for, and save the model;
own_data.py, which takes no flags, runs whole, as docs/own_data.md shows it. What cannot run here (GPUs, DeepSpeed,
vLLM, real weights) is listed in examples/README.md.
"""

import json
import re
from pathlib import Path

import pytest
from trl.import_utils import is_vllm_available

from trl_kgps.engine import state_file as state_file
from trl_kgps.script_args import KGPSScriptArguments
from trl_kgps.selectors import SELECTORS


DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS.parent / "examples"


KGPS_METRICS = {"kgps/coverage", "kgps/predicted_success", "kgps/informative", "kgps/lag", "kgps/delta_norm"}


def trained(output_dir, selector_class, num_prompts):
    """Checks a finished two-step run in `output_dir`; returns the names it logged."""
    state = json.loads((output_dir / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    _, meta = state_file.load(str(output_dir / "checkpoint-2" / state_file.STATE_FILE))
    assert (meta["selector_class"], meta["num_prompts"]) == (selector_class, num_prompts)
    logged = {name for entry in state["log_history"] for name in entry}
    assert KGPS_METRICS <= logged
    return logged


@pytest.mark.slow
def test_countdown(run_example, language_model):
    output_dir = run_example(
        "grpo_countdown.py",
        "--model_name_or_path", language_model,
        "--num_train_problems", 8,
        "--num_test_problems", 2,
        "--warmup_epochs", 0,  # a KGPSConfig field: KGPS selects from the first batch
    )  # fmt: skip
    logged = trained(output_dir, "KGPSSelector", num_prompts=8)
    assert {"kgps/mae", "kgps/process_noise", "rewards/countdown_reward/mean"} <= logged
    assert (output_dir / "model.safetensors").is_file()


@pytest.mark.slow
def test_math_with_lora_and_mopps(run_example, language_model, math_dataset):
    output_dir = run_example(
        "grpo_math.py",
        "--model_name_or_path", language_model,
        "--dataset_name", math_dataset,
        "--selector", "mopps",
        "--use_peft",
        "--lora_target_modules", "q_proj", "v_proj",
    )  # fmt: skip
    logged = trained(output_dir, "MoPPSSelector", num_prompts=8)
    assert "rewards/accuracy_reward/mean" in logged
    assert (output_dir / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_geometry3k_with_a_vision_language_model(run_example, vision_language_model, geometry_dataset, tmp_path):
    # The random tiny model may sample `<image>`, whose extra token mismatches the image features in the loss's
    # forward; TRL >= 1.16 suppresses it, older TRL is told to (a dict reaches GRPOConfig only through --config).
    config = tmp_path / "suppress_image_token.yaml"
    config.write_text('generation_kwargs: {"suppress_tokens": [3]}\n')  # SPECIAL_TOKENS.index("<image>")
    output_dir = run_example(
        "grpo_geometry3k.py",
        "--config", config,
        "--model_name_or_path", vision_language_model,
        "--dataset_name", geometry_dataset,
    )  # fmt: skip
    logged = trained(output_dir, "KGPSSelector", num_prompts=8)
    assert "rewards/accuracy_reward/mean" in logged
    assert (output_dir / "model.safetensors").is_file() and (output_dir / "processor_config.json").is_file()


@pytest.mark.parametrize(
    "script, dataset_name",
    [
        ("grpo_countdown.py", None),
        ("grpo_math.py", "DigitalLearningGmbH/MATH-lighteval"),
        ("grpo_geometry3k.py", "hiyouga/geometry3k"),
    ],
)
def test_arguments(load_example, script, dataset_name):
    parser = load_example(script)["make_parser"]()
    script_args, training_args, kgps_args, model_args = parser.parse_args_and_config(
        ["--model_name_or_path", "Qwen/Qwen3-0.6B", "--output_dir", "out", "--use_cpu", "true", "--selector", "greso"]
        + [
            "--gamma",
            "0.2",
            "--use_vllm",
            "--vllm_mode",
            "server",
            "--use_peft",
            "--lora_target_modules",
            "q_proj",
            "v_proj",
        ]
    )
    assert (script_args.selector, script_args.dataset_name) == ("greso", dataset_name)
    assert (training_args.use_vllm, training_args.vllm_mode) == (True, "server")
    assert kgps_args.gamma == 0.2
    assert model_args.use_peft and model_args.lora_target_modules == ["q_proj", "v_proj"]


def test_math_shares_across_its_level_and_type_columns(load_example):
    parser = load_example("grpo_math.py")["make_parser"]()
    _, _, kgps_args, _ = parser.parse_args_and_config(["--output_dir", "out", "--use_cpu", "true"])
    assert kgps_args.feature_columns == ["level", "type"]
    _, _, kgps_args, _ = parser.parse_args_and_config(
        ["--output_dir", "out", "--use_cpu", "true", "--feature_columns", "source"]
    )
    assert kgps_args.feature_columns == ["source"]


def test_unknown_selector_is_refused(load_example, capsys):
    parser = load_example("grpo_math.py")["make_parser"]()
    with pytest.raises(SystemExit):
        parser.parse_args_and_config(["--output_dir", "out", "--selector", "ds"])
    assert "invalid choice: 'ds'" in capsys.readouterr().err
    names = r"\['kgps', 'uniform', 'mopps', 'greso', 'dps', 'arcus', 'gaussian', 'insight', 'offline_filter'\]"
    with pytest.raises(ValueError, match=rf"selector='ds'.*{names}"):
        KGPSScriptArguments(selector="ds")


@pytest.mark.skipif(is_vllm_available(), reason="checks the error GRPOTrainer gives where vLLM is not installed")
def test_use_vllm_reaches_the_trainer(load_example, language_model, tmp_path):
    example = load_example("grpo_countdown.py")
    arguments = example["make_parser"]().parse_args_and_config(
        ["--model_name_or_path", str(language_model), "--output_dir", str(tmp_path), "--use_cpu", "true"]
        + ["--bf16", "false", "--report_to", "none", "--num_train_problems", "8", "--num_test_problems", "2"]
        + ["--per_device_train_batch_size", "4", "--num_generations", "2", "--use_vllm"]
    )
    with pytest.raises(ImportError, match="vLLM"):
        example["main"](*arguments)


def test_geometry3k_answers_are_verified_whole(load_example):
    from trl.rewards import accuracy_reward

    example = load_example("grpo_geometry3k.py")["make_conversation"](
        {"problem": "<image>Find x.", "answer": "2\\sqrt{3}"}
    )
    assert example["prompt"][0]["content"].startswith("Find x.\n")
    right, wrong = ([{"role": "assistant", "content": f"So x = \\boxed{{{x}}}."}] for x in ("2\\sqrt{3}", "2"))
    assert accuracy_reward([right, wrong], [example["solution"]] * 2) == [1.0, 0.0]


def page_block(page, after, language="text"):
    """The lines of the first ```language block after the text `after` in `docs/<page>`."""
    text = (DOCS / page).read_text()
    return text[text.index(after) :].split(f"```{language}\n", 1)[1].split("```", 1)[0].splitlines()


def group_table(lines):
    """{digits: (predicted_success, times_selected)} from the table `examples/own_data.py` prints."""
    rows = [line.split() for line in lines if re.match(r"\d\+\d ", line)]
    return {digits: (float(success), float(times)) for digits, success, times in rows}


@pytest.mark.slow
def test_own_data(run_example_as_is, tmp_path):
    """
    examples/own_data.py as docs/own_data.md tells users to run it: it trains 40 steps, logs the line the page quotes,
    checkpoints KGPS's state and prints the page's table, to what other kernels and thread counts change in 40 sampled
    steps (the warm start is the same bytes everywhere; torch 2.11 with two threads moved `2+2` from 0.05 to
    0.10), and what the page reads from it exactly.
    """
    result = run_example_as_is("own_data.py")
    (logged,) = page_block("own_data.md", "Before the first step KGPS logs")
    assert logged in result.stderr.splitlines()
    _, meta = state_file.load(str(tmp_path / "own-data-kgps" / "checkpoint-40" / state_file.STATE_FILE))
    assert (meta["selector_class"], meta["num_prompts"]) == ("KGPSSelector", 400)

    printed = group_table(result.stdout.splitlines())
    shown = group_table(page_block("own_data.md", "prints the table"))
    assert printed.keys() == shown.keys() == {"1+1", "1+2", "2+1", "2+2"}
    for group, (success, times) in printed.items():
        assert abs(success - shown[group][0]) <= 0.08 and abs(times - shown[group][1]) <= 0.4, group
    # What the page reads from it: the one-digit sums, right about half the time, drew the most rollouts; the sums
    # the model never gets right drew fewer than an even spread's 0.82 (41 batches of 8 over 400 prompts).
    assert max(printed, key=lambda group: printed[group][1]) == "1+1" and 0.4 < printed["1+1"][0] < 0.6
    assert all(printed[group][0] < 0.05 and printed[group][1] < 0.82 for group in ("1+2", "2+1"))


def baseline_lines():
    """The `KGPSCallback(selector=...)` lines docs/quickstart.md gives to compare with a baseline, less comments."""
    lines = page_block("quickstart.md", "## Compare with a baseline", language="python")
    return [line.split("  #")[0] for line in lines if line.startswith("KGPSCallback(selector=")]


@pytest.mark.slow
@pytest.mark.parametrize("callback", baseline_lines())
def test_own_data_runs_with_every_baseline_the_docs_suggest(run_example_as_is, tmp_path, callback):
    """
    examples/own_data.py with its `KGPSCallback()` replaced by one of the quickstart's baseline lines (as the page's
    "to compare" says), for two steps: it prints its table by `digits` as KGPS's run does. Before, the script read KGPS's
    own `group` column, and every baseline's run ended in `KeyError: 'group'`.
    """
    source = (EXAMPLES / "own_data.py").read_text()
    assert source.count("kgps = KGPSCallback()\n") == source.count("max_steps=40,") == 1
    script = tmp_path / "own_data_baseline.py"
    script.write_text(
        source.replace("kgps = KGPSCallback()\n", f"kgps = {callback}\n").replace("max_steps=40,", "max_steps=2,")
    )
    result = run_example_as_is(script)
    assert group_table(result.stdout.splitlines()).keys() == {"1+1", "1+2", "2+1", "2+2"}, result.stdout
    _, meta = state_file.load(str(tmp_path / "own-data-kgps" / "checkpoint-2" / state_file.STATE_FILE))
    (selector,) = re.findall(r'selector="(\w+)"', callback)
    assert meta["selector_class"] == SELECTORS[selector].__name__


def test_the_docs_suggest_the_same_baselines_everywhere():
    """The quickstart's lines, which the test above runs, name the baselines the README and own_data.md name."""
    names = [re.search(r'"(\w+)"', line).group(1) for line in baseline_lines()]
    assert names == ["uniform", "mopps", "greso", "dps", "gaussian", "insight"]
    listed = (
        '`KGPSCallback(selector="uniform")` (TRL\'s order), `"mopps"`, `"greso"`, `"dps"`, `"gaussian"` or `"insight"`'
    )
    assert listed in " ".join((DOCS.parent / "README.md").read_text().split())
    assert listed.replace("`KGPSCallback(", "`kgps = KGPSCallback(") in " ".join(
        (DOCS / "own_data.md").read_text().split()
    )
