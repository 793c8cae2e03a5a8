"""
`trl-kgps train`: GRPO with KGPS choosing the prompts, out of the box.

With no `--model_name_or_path`, it builds a small Qwen2 from a config and a character tokenizer, loads the warm
start shipped with the package (600 supervised steps on arithmetic, so that its success rates spread between 0 and
1; `--train_warm_start` trains it here instead), then trains it with `GRPOTrainer` + `KGPSCallback` on the
package's graded arithmetic (`trl_kgps.tasks.arithmetic`) — on a CPU, in about half a minute, nothing downloaded.
With `--model_name_or_path`, that model trains instead. With `--dataset_name`, a dataset with `prompt` and
`solution` columns trains instead, rewarded by `trl.rewards.accuracy_reward` (math-verify).

It takes this command's flags, KGPS's (`KGPSConfig`) and TRL's (`GRPOConfig`, `ModelConfig`), and writes into
`--output_dir` the model, `kgps_state.npz`, the model card (`README.md`, with a KGPS section), `kgps_summary.json`,
`kgps_difficulty.png` and `kgps_rollouts.png` (where the rollouts went). A dataset with a `level` column (the
built-in one has it) shares what KGPS learns across the prompts of each level, unless `--feature_columns` names
other columns (`--shared_variance 0`: nothing shared).

```bash
trl-kgps train                                   # the demo: about half a minute on 2 idle CPU cores
trl-kgps train --selector uniform --output_dir uniform  # the same run with TRL's order, to compare
trl-kgps train --max_steps 600 --num_prompts 1024 --gamma 1.0
```
"""

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from ..adapters.dataset_columns import selector_for
from ..adapters.report import group_success, last_metrics, reported_metrics
from ..adapters.trainer_adapter import check_batch_arguments
from ..callback import KGPSCallback
from ..config import KGPSConfig
from ..engine.ledger import check_batch_size
from ..plots import natural_key, plot_rollouts, pyplot
from ..sampler import PROMPTS_PER_BATCH
from ..script_args import SelectorArguments
from ..tasks import arithmetic, tiny
from ..tasks.evaluation import success_rates


logger = logging.getLogger(__name__)

# The built-in model's warm start, shipped with the package: what `make_demo_warm_start` trained once from the recipe
# (supervised steps, seed), so that every machine starts the demo from the same bytes. Training it again on another
# CPU gives another network: 600 steps of a small model's training diverge with the kernels' rounding.
DEMO_WARM_START = Path(__file__).parents[1] / "tasks" / "demo_warm_start.safetensors"
DEMO_WARM_START_RECIPE = (600, 0)

# What the built-in demo changes in GRPOConfig's defaults; every one can still be set on the command line.
DEMO_DEFAULTS = dict(
    output_dir="trl-kgps-demo",
    max_steps=300,
    per_device_train_batch_size=64,  # 8 prompts x 8 completions per step
    num_generations=8,
    max_completion_length=4,
    learning_rate=3e-4,
    warmup_steps=20,  # RL's first Adam steps, at full rate, undo much of the warm start
    logging_steps=10,
    save_strategy="no",
    seed=0,
)


@dataclass
class TrainScriptArguments(SelectorArguments):
    """
    The prompt selector, the built-in task's sizes and the dataset that may replace it.

    Args:
        num_prompts (`int`, *optional*, defaults to `512`):
            Training prompts generated when no `--dataset_name` is given.
        num_eval_prompts (`int`, *optional*, defaults to `256`):
            Held-out prompts on which accuracy is measured before and after training (built-in task only).
        eval_samples (`int`, *optional*, defaults to `8`):
            Completions per held-out prompt, sampled at the training temperature.
        warm_start_steps (`int`, *optional*, defaults to `600`):
            Supervised steps that warm up the small model built when no `--model_name_or_path` is given.
        train_warm_start (`bool`, *optional*, defaults to `False`):
            Train that warm start here instead of loading the one shipped with the package (`DEMO_WARM_START`, made
            by the same recipe with 600 steps and seed 0; other steps or seeds always train here).
        threads (`int`, *optional*):
            torch's CPU threads for a run without a GPU. Unset: 1 for the small built-in model (as fast as 2 for it,
            and slowed down in proportion, not many times over, when another CPU-heavy process shares the cores),
            torch's default for a `--model_name_or_path` model.
        dataset_name, dataset_config, dataset_train_split (`str`, *optional*):
            A dataset with `prompt` and `solution` columns to train on instead of the built-in task (TRL's
            `ScriptArguments` fields of the same names; its others do not apply here, see `REFUSED_FLAGS`).
    """

    num_prompts: int = field(default=512, metadata={"help": "Training prompts generated when no --dataset_name."})
    num_eval_prompts: int = field(
        default=256, metadata={"help": "Held-out prompts scored before and after training (built-in task only)."}
    )
    eval_samples: int = field(
        default=8, metadata={"help": "Completions per held-out prompt, sampled at the training temperature."}
    )
    warm_start_steps: int = field(
        default=600, metadata={"help": "Supervised warm-up steps of the small model built without a model name."}
    )
    train_warm_start: bool = field(
        default=False,
        metadata={
            "help": "Train the built-in model's warm start here from its recipe instead of loading the one shipped "
            "with the package (made by that recipe with 600 steps and seed 0; other steps or seeds always train "
            "here). Trained again on another CPU's kernels, it is another network."
        },
    )
    threads: int | None = field(
        default=None,
        metadata={
            "help": "torch CPU threads without a GPU. Unset: 1 for the built-in model (as fast as 2, and not slowed "
            "down many times over by another CPU-heavy process), torch's default for --model_name_or_path."
        },
    )
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "A dataset (Hub name or local folder) with 'prompt' and 'solution' columns, rewarded by "
            "math-verify, instead of the built-in arithmetic; a 'level' column is shared across prompts by KGPS."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "The --dataset_name configuration."})
    dataset_train_split: str = field(default="train", metadata={"help": "The --dataset_name split to train on."})

    def __post_init__(self):
        super().__post_init__()
        for name in ("num_prompts", "num_eval_prompts", "eval_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} {getattr(self, name)} must be >= 1.")
        if self.warm_start_steps < 0:
            raise ValueError(f"--warm_start_steps {self.warm_start_steps} must be >= 0 (0: no warm start).")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads {self.threads} must be >= 1 (or unset).")


# Flags of TRL's parsers that this command cannot use, and why: refused before anything is built.
_SHUFFLING = "KGPS chooses the order of the prompts, so TRL's shuffling would be ignored"
REFUSED_FLAGS = {
    "--dataset_streaming": "KGPS selects prompts by their dataset index, which a streamed dataset does not have",
    "--dataset_test_split": "held-out accuracy is measured on the built-in task only",
    "--ignore_bias_buffers": "it is a DDP workaround of TRL's scripts that this command does not read",
    "--shuffle_dataset": _SHUFFLING,
    "--no_shuffle_dataset": _SHUFFLING,
}


class DifficultyTrace(TrainerCallback):
    """Snapshots every prompt's predicted success after the warmup, every `logging_steps`: the plot's data."""

    def __init__(self, kgps: KGPSCallback):
        self.kgps = kgps
        self.steps: list[int] = []
        self.snapshots: list[np.ndarray] = []  # each (N,): sigmoid(m) of every prompt

    def on_step_end(self, args, state, control, **kwargs):
        if not self.kgps.in_warmup and state.global_step % args.logging_steps == 0:
            self.steps.append(state.global_step)
            self.snapshots.append(np.asarray(self.kgps.selector.predicted_success(), dtype=np.float32))


def make_parser():
    from trl import GRPOConfig, ModelConfig, TrlParser

    # This command's and KGPS's flags first, so that `--help` shows them before TRL's few hundred.
    parser = TrlParser(
        (TrainScriptArguments, KGPSConfig, GRPOConfig, ModelConfig),
        prog="trl-kgps train",
        description="GRPO with KGPS on CPU or GPU. Options: this command's and KGPS's first (--selector, --threads, "
        "--gamma, ...), then TRL's GRPOConfig and ModelConfig.",
    )
    for action in parser._actions:
        if REFUSED_FLAGS.keys() & set(action.option_strings):
            action.help = argparse.SUPPRESS
    defaults = dict(DEMO_DEFAULTS)
    if not torch.cuda.is_available():
        defaults.update(bf16=False, dataloader_pin_memory=False)  # no GPU: no bf16 autocast, nothing to pin for
    parser.set_defaults(**defaults)
    return parser


def main(argv: Sequence[str] | None = None) -> dict:
    """Parses `argv` (TRL's, KGPS's and this command's flags), trains, and returns the summary it prints."""
    argv = sys.argv[1:] if argv is None else list(argv)
    for arg in argv:
        flag = "--" + arg.removeprefix("--").split("=")[0].replace("-", "_")
        if arg.startswith("--") and flag in REFUSED_FLAGS:
            raise SystemExit(f"trl-kgps train: {flag} is not available here: {REFUSED_FLAGS[flag]}. Leave it out.")
    with warnings.catch_warnings():
        # transformers 5 renames gradient checkpointing and warns on every access TRL makes: noise for this command
        warnings.filterwarnings("ignore", message=r".*deprecated and will be removed in v6", category=FutureWarning)
        parser = make_parser()
        try:
            script_args, kgps_args, training_args, model_args = parser.parse_args_and_config(args=argv)
            return train(script_args, training_args, kgps_args, model_args)
        except ValueError as error:  # a bad flag or dataset: its message names the fix, a traceback would bury it
            raise SystemExit(f"trl-kgps train: {error}") from error


def train(script_args, training_args, kgps_args, model_args) -> dict:
    threads = torch.get_num_threads()
    if not torch.cuda.is_available() and (script_args.threads or model_args.model_name_or_path is None):
        torch.set_num_threads(script_args.threads or 1)
    try:
        return _train(script_args, training_args, kgps_args, model_args)
    finally:
        torch.set_num_threads(threads)  # as it was, for a caller in the same process (a notebook, a test)


def _train(script_args, training_args, kgps_args, model_args) -> dict:
    from trl import GRPOTrainer, get_peft_config

    if training_args.max_steps == 0:
        raise ValueError("--max_steps 0 trains nothing: give the optimizer steps to train (-1: --num_train_epochs).")
    _check_output_dir(training_args.output_dir)
    if script_args.dataset_name is None:
        problems = arithmetic.make_dataset(script_args.num_prompts + script_args.num_eval_prompts, seed=1)
        split = problems.train_test_split(test_size=script_args.num_eval_prompts, shuffle=False)
        train_dataset, eval_dataset, reward = split["train"], split["test"], arithmetic.arithmetic_reward
    else:
        from datasets import load_dataset

        try:
            train_dataset = load_dataset(
                script_args.dataset_name, script_args.dataset_config, split=script_args.dataset_train_split
            )
        except (FileNotFoundError, ConnectionError) as error:  # datasets' own errors, DatasetNotFoundError among them
            raise ValueError(
                f"--dataset_name {script_args.dataset_name}: {str(error).rstrip('.')}. Name a local folder or file "
                "of rows with 'prompt' and 'solution' columns, or a dataset on the Hub (online)."
            ) from None
        eval_dataset, reward = None, accuracy_reward
    if kgps_args.feature_columns is None and kgps_args.shared_variance != 0 and "level" in train_dataset.column_names:
        # Its data's difficulty level: what KGPS shares across prompts, unless --feature_columns names others
        # (--shared_variance 0 shares nothing).
        kgps_args = dataclasses.replace(kgps_args, feature_columns=["level"])
    # What the trainer would refuse once the model is built and warmed up, refused now: the dataset's size against a
    # generation batch, and the columns KGPS reads.
    check_batch_arguments(training_args, PROMPTS_PER_BATCH)
    check_batch_size(
        training_args.generation_batch_size // training_args.num_generations, len(train_dataset), PROMPTS_PER_BATCH
    )
    selector = selector_for(script_args.selector, train_dataset, kgps_args, training_args.seed)

    model, tokenizer = _policy(script_args, model_args, training_args.seed)
    before = _accuracy(model, tokenizer, eval_dataset, script_args, training_args)
    kgps = KGPSCallback(kgps_args, selector=selector)
    trace = DifficultyTrace(kgps)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=training_args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=[kgps, trace],
    )
    _progress_bar_only(trainer)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    after = _accuracy(trainer.model, tokenizer, eval_dataset, script_args, training_args)

    levels = train_dataset["level"] if "level" in train_dataset.column_names else None
    level_names = arithmetic.LEVEL_NAMES if script_args.dataset_name is None else {}
    summary = _summary(trainer, kgps, before, after, script_args.selector, levels, level_names)
    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        _write_model_card(trainer, training_args, script_args.dataset_name, model_args.model_name_or_path is None)
        with open(os.path.join(training_args.output_dir, "kgps_summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        labels = None if levels is None else [_level_label(level, level_names) for level in levels]
        warmup_steps = kgps.ledger.warmup_batches * training_args.steps_per_generation * trainer.num_iterations
        figures = [
            name
            for name, written in (
                ("kgps_difficulty.png", _plot(trace, labels, training_args.output_dir, warmup_steps)),
                ("kgps_rollouts.png", _plot_rollouts(kgps, labels, training_args.output_dir, script_args.selector)),
            )
            if written
        ]
        print(_format(summary, training_args.output_dir, figures))
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
    return summary


def _check_output_dir(output_dir: str) -> None:
    """
    Refuses an `--output_dir` that names a file, lies under one, or cannot be created, before anything is loaded or
    trained. A folder that does not exist yet is created and removed again: only trying tells whether it can be.
    """
    path = Path(output_dir).absolute()
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir():
        raise ValueError(
            f"--output_dir {output_dir}: {existing} is a file, not a folder. Name a folder to write the model, its "
            "KGPS state and card to (created if missing)."
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(
            f"--output_dir {output_dir}: cannot create this folder ({error.strerror}). Name a folder you can write "
            "to (created if missing)."
        ) from None
    for folder in (path, *path.parents):  # the folders created here, as they were: none
        if folder == existing:
            break
        folder.rmdir()


class _ProgressBar(ProgressCallback):
    """TRL's progress bar without the metric dict it prints at every log: those go to `--report_to`."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


def _progress_bar_only(trainer) -> None:
    """A progress bar (unless `--disable_tqdm`) and no metric dicts on stdout; the trackers still get every metric."""
    had_bar = any(isinstance(callback, ProgressCallback) for callback in trainer.callback_handler.callbacks)
    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    if had_bar:
        trainer.add_callback(_ProgressBar)


def _write_model_card(trainer, training_args, dataset_name: str | None, built_here: bool) -> None:
    """
    TRL's card (with KGPS's section), named after `--hub_model_id` or the output folder, its quick start pointing
    there; a dataset link only for a Hub dataset; without what TRL's template leaves unfilled (its placeholder
    `licence: license`, the blank lines of tracker badges the run had none of); and, for the built-in model
    (`built_here`: made from a config, no Hub base model), a sentence that says so instead of TRL's link to
    `huggingface.co/None`.
    """
    repo = training_args.hub_model_id or os.path.basename(os.path.normpath(training_args.output_dir))
    if trainer.hub_model_id is None:
        trainer.hub_model_id = repo  # where TRL's quick start loads the model from
    trainer.create_model_card(model_name=repo.split("/")[-1], dataset_name=dataset_name)
    path = os.path.join(training_args.output_dir, "README.md")
    with open(path) as f:
        card = f.read()
    card = card.replace("\nlicence: license\n", "\n", 1)
    card = re.sub(r"## Training procedure\n[ \n]*\n", "## Training procedure\n\n", card, count=1)
    if built_here:
        card = card.replace(
            "This model is a fine-tuned version of [None](https://huggingface.co/None)",
            "This model is a small Qwen2 built from its configuration and warmed up on generated arithmetic by "
            "`trl-kgps train`, then trained",
        )
    with open(path, "w") as f:
        f.write(card)


def accuracy_reward(completions: list, solution: list[str], **kwargs) -> list[float | None]:
    """`trl.rewards.accuracy_reward` (math-verify against the `solution` column), for plain-text completions too."""
    from trl.rewards import accuracy_reward as conversational_accuracy_reward

    messages = [c if isinstance(c, list) else [{"role": "assistant", "content": c}] for c in completions]
    # It reads no other column; passing **kwargs on would tell the one line that it may read any (reward_reads).
    return conversational_accuracy_reward(messages, solution)


def _policy(script_args, model_args, seed: int):
    """The model to train and its tokenizer: the named one, or a small one warmed up on arithmetic here."""
    if model_args.model_name_or_path is not None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        name = model_args.model_name_or_path
        tokenizer = AutoTokenizer.from_pretrained(name, revision=model_args.model_revision, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(
            name, revision=model_args.model_revision, dtype=model_args.dtype or "auto"
        )
        return model, tokenizer
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=seed)
    if not script_args.warm_start_steps:
        return model, tokenizer
    if (script_args.warm_start_steps, seed) == DEMO_WARM_START_RECIPE and not script_args.train_warm_start:
        tiny.load_weights(model, DEMO_WARM_START)
    else:
        logger.warning("Warm start: %d supervised steps on arithmetic...", script_args.warm_start_steps)
        _warm_start(model, tokenizer, script_args.warm_start_steps, seed)
    return model, tokenizer


def _warm_start(model, tokenizer, steps: int, seed: int) -> list[float]:
    """The demo's warm start: `steps` supervised steps on arithmetic, seeded by `seed`; returns the losses."""
    # Problems drawn apart from the training and held-out prompts' seed: the warm start teaches the task, not the
    # answers RL will be scored on (a few easy prompts overlap by chance: level 1 holds 100 problems).
    warm = arithmetic.make_problems(8000, seed=100 + seed)
    return tiny.warm_start(model, tokenizer, warm["prompt"], warm["answer"], steps, seed=seed)


def make_demo_warm_start(path: Path = DEMO_WARM_START) -> dict:
    """
    Trains the demo's warm start from its recipe (`DEMO_WARM_START_RECIPE`) and writes it to `path`, with a JSON
    record beside it (the recipe, the final loss, the file's SHA-256 and the environment that trained it). The bytes
    depend on the CPU's kernels: the shipped file is the one every run loads.

        python -c "from trl_kgps.demo.train import make_demo_warm_start; print(make_demo_warm_start())"
    """
    import platform

    import transformers

    steps, seed = DEMO_WARM_START_RECIPE
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the demo trains it
    try:
        tokenizer = tiny.build_tokenizer()
        model = tiny.build_model(tokenizer, seed=seed)
        losses = _warm_start(model, tokenizer, steps, seed)
    finally:
        torch.set_num_threads(threads)
    tiny.save_weights(model, path)
    record = dict(
        steps=steps,
        seed=seed,
        final_loss=losses[-1],
        heldout_success=demo_heldout_success(model, tokenizer),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        environment=dict(
            torch=torch.__version__,
            transformers=transformers.__version__,
            cpu=_cpu_name() or platform.processor(),
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
        ),
    )
    path.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def demo_heldout_success(model, tokenizer, num_prompts: int = 512, num_eval_prompts: int = 256) -> float:
    """The exact mean success (`answer_probabilities`, no sampling) of `model` on the demo's held-out prompts."""
    from ..tasks.evaluation import answer_probabilities

    held_out = arithmetic.make_dataset(num_prompts + num_eval_prompts, seed=1).select(
        range(num_prompts, num_prompts + num_eval_prompts)
    )
    return float(answer_probabilities(model, tokenizer, held_out["prompt"], held_out["answer"]).mean())


def _cpu_name() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


def _accuracy(model, tokenizer, eval_dataset, script_args, training_args) -> dict | None:
    """Held-out accuracy, overall and per level, sampled as the trainer samples; None without the built-in task."""
    if eval_dataset is None:
        return None
    rates = success_rates(
        model,
        tokenizer,
        eval_dataset["prompt"],
        arithmetic.arithmetic_reward,
        {"answer": eval_dataset["answer"]},
        samples=script_args.eval_samples,
        temperature=training_args.temperature,
        max_new_tokens=training_args.max_completion_length,
        seed=training_args.seed,
    )
    levels = np.asarray(eval_dataset["level"])
    return {"all": float(rates.mean()), **{f"level {k}": float(rates[levels == k].mean()) for k in np.unique(levels)}}


def _summary(
    trainer,
    kgps: KGPSCallback,
    before: dict | None,
    after: dict | None,
    selector: str,
    levels: Sequence | None,
    level_names: dict,
) -> dict:
    log = trainer.state.log_history
    last = {**last_metrics(log), "reward": last_metrics(log, "reward").get("reward", (float("nan"), None))}
    summary = {
        "selector": selector,
        "steps": trainer.state.global_step,
        "rollouts": kgps.rollouts,
        "accuracy_before": before,
        "accuracy_after": after,
        # The last logged metrics, less the two stated below at the end of the run (`reported_metrics`).
        "kgps": {key: float(value) for key, (value, _) in reported_metrics(last).items()},
        "coverage": kgps.coverage,
        "prompts_observed": kgps.ledger.observed_count,
        "num_prompts": kgps.selector.num_prompts,
        "group_predicted_success": group_success(kgps.selector),
        "threads": torch.get_num_threads(),
        "level_names": {str(level): name for level, name in level_names.items()},
    }
    if levels is not None:
        # Where the rollouts went: the mean times a prompt of each level was selected, against uniform sampling's
        # (the same selections spread evenly: the mean over all prompts).
        times, levels = kgps.ledger.times_selected, np.asarray(levels)
        summary["times_selected_per_prompt"] = {
            "uniform": float(times.mean()),
            **{f"level {level}": float(times[levels == level].mean()) for level in np.unique(levels)},
        }
    return summary


def _level_label(level, level_names: dict) -> str:
    """e.g. `level 1: a+b` for the built-in task's level 1, `level 3` for a dataset's."""
    name = level_names.get(level) or level_names.get(str(level))
    return f"level {level}" + (f": {name}" if name else "")


def _group_label(group: str, level_names: dict) -> str:
    """e.g. `level=1 (a+b)` for the built-in task's level 1; other groups as KGPS names them."""
    column, _, value = group.partition("=")
    name = level_names.get(value) if column == "level" else None
    return f"{group} ({name})" if name else group


def _format(summary: dict, output_dir: str, figures: Sequence[str]) -> str:
    names = summary["level_names"]

    def label(key: str) -> str:  # "level 1" -> "level 1: a+b" for the built-in task
        return _level_label(key.removeprefix("level "), names) if key.startswith("level ") else key

    lines = [f"\n{'=' * 30} trl-kgps train: summary {'=' * 30}"]
    lines.append(f"selector {summary['selector']}: {summary['steps']} steps, {summary['rollouts']} rollouts")
    observed, num_prompts = summary["prompts_observed"], summary["num_prompts"]
    lines.append(f"coverage: {observed} of {num_prompts} prompts observed ({observed / num_prompts:.1%})")
    before, after = summary["accuracy_before"], summary["accuracy_after"]
    if before is not None:
        lines.append("held-out accuracy (sampled):")
        width = max(len(label(key)) for key in before)
        lines += [f"  {label(key):<{width}}  {before[key]:.3f} -> {after[key]:.3f}" for key in before]
    if "times_selected_per_prompt" in summary:
        times = dict(summary["times_selected_per_prompt"])
        lines.append(f"times selected per prompt (uniform sampling: {times.pop('uniform'):.2f} each):")
        lines.append("  " + ", ".join(f"{label(key)} {value:.2f}" for key, value in times.items()))
    metrics = {key.removeprefix("kgps/"): value for key, value in summary["kgps"].items()}
    observed_success = {}
    for key in [key for key in metrics if key.startswith("group/")]:  # shown by group below, or not at all
        group, _, name = key.removeprefix("group/").rpartition("/")
        value = metrics.pop(key)
        if name == "observed_success":
            observed_success[group] = value
    lines.append("last KGPS metrics: " + ", ".join(f"{key} {value:.4g}" for key, value in metrics.items()))
    predicted = summary["group_predicted_success"]
    if predicted:
        lines.append("success by group (predicted by the shared part at the end / observed in the last logged steps):")
        width = max(len(_group_label(group, names)) for group in predicted)
        lines += [
            f"  {_group_label(group, names):<{width}}  {success:.3f} / {observed_success.get(group, float('nan')):.3f}"
            for group, success in predicted.items()
        ]
    files = ["the model", "kgps_state.npz", "README.md", "kgps_summary.json", *figures]
    lines.append(f"wrote {', '.join(files[:-1])} and {files[-1]} to {output_dir}")
    return "\n".join(lines)


def _plot(trace: DifficultyTrace, labels: Sequence[str] | None, output_dir: str, warmup_steps: int = 0) -> bool:
    """
    `kgps_difficulty.png`: the mean predicted success of each level's prompts (`labels`, one per prompt), or of all
    prompts with its quartiles, against the step; whether it was written (not without matplotlib, nor when the run
    never left a warmup).
    """
    plt = pyplot()
    if plt is None:
        return False
    if not trace.steps:
        logger.warning(
            "No difficulty estimates to plot: %s.",
            "the run did not leave the warmup"
            if trace.kgps.in_warmup
            else "no step after the warmup was a logging step (--logging_steps)",
        )
        return False
    snapshots = np.stack(trace.snapshots)  # (T, N)
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    if labels is None:
        low, median, high = np.quantile(snapshots, [0.25, 0.5, 0.75], axis=1)
        ax.fill_between(trace.steps, low, high, alpha=0.3, label="quartiles")
        ax.plot(trace.steps, median, label="median")
    else:
        labels = np.asarray(labels)
        for label in sorted(set(labels.tolist()), key=natural_key):
            ax.plot(trace.steps, snapshots[:, labels == label].mean(axis=1), label=label)
    if warmup_steps:
        ax.axvspan(0, warmup_steps, color="grey", alpha=0.15, label="uniform warmup")
    ax.set_xlabel("step")
    ax.set_ylabel("predicted success (mean)")
    ax.set_ylim(0, 1)
    ax.set_title("How the selector's difficulty estimates evolved")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(os.path.join(output_dir, "kgps_difficulty.png"), dpi=80)
    plt.close(fig)
    return True


def _plot_rollouts(kgps: KGPSCallback, labels: Sequence[str] | None, output_dir: str, selector: str) -> bool:
    """`kgps_rollouts.png`: where the run's rollouts went, by level and by predicted success; whether it was
    written."""
    title = f"Where the rollouts went (trl-kgps train --selector {selector})"
    figure = plot_rollouts(kgps.difficulty_table(), labels, group_name="level", title=title)
    if figure is None:
        return False
    figure.savefig(os.path.join(output_dir, "kgps_rollouts.png"), dpi=80)
    pyplot().close(figure)
    return True
