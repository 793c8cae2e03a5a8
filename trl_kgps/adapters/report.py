"""
What a run reports about its prompts: the per-prompt difficulty table (a `datasets.Dataset`) and the `## KGPS`
section of the model card. `datasets` and `huggingface_hub` are imported on first use.
"""

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import KGPSConfig
from ..engine.copies import PromptCopies
from ..engine.metrics import MAX_LOGGED_GROUPS
from ..engine.protocol import PromptSelector
from ..selectors import KGPSSelector
from .dataset_columns import Metadata


if TYPE_CHECKING:
    from datasets import Dataset

CARD_TAGS = ("kgps", "trl-kgps")
_CARD_HEADING = "## KGPS"
_CARD_BEFORE = "## Citations"  # TRL's model card ends with this section; ours goes just above it


def difficulty_dataset(
    selector: PromptSelector,
    times_selected: np.ndarray,
    prompts: Sequence[Any] | None = None,
    copies: PromptCopies | None = None,
) -> "Dataset":
    """
    One row per prompt: `index` (int64, its row in the train dataset; where rows repeat prompts, its first), `rows`
    (int64, only where rows repeat prompts: how many rows hold it), `prompt` (str, only when `prompts` is given),
    `predicted_success` (float64, `selector.predicted_success()`), `variance` (float32, `KGPSSelector`'s logit
    variance; NaN for the baselines, which hold no logit-scale belief) and `times_selected` (int32, generation batches
    the prompt was chosen for).
    A KGPS selector that shares across prompts by categorical features adds `group` (str, e.g. `"level=3"`),
    `group_predicted_success` (float64, what the group's shared part predicts for a prompt with no evidence of its
    own) and `own_logit` (float32, the prompt's own residual: its logit minus its group's).

    Args:
        selector (`PromptSelector`): the selector, over `N` prompts.
        times_selected (`np.ndarray` of shape `(N,)`): the sampler's count.
        prompts (`Sequence`, *optional*): the prompts in dataset order, one per row, or one per distinct prompt in
            order of first appearance (the table's); strings, or conversations (lists of `{"role", "content"}`
            messages), which become the text of their last user message.
        copies (`PromptCopies`, *optional*): which rows hold one prompt; unset, prompt `i` is row `i`.
    """
    from datasets import Dataset

    n = selector.num_prompts
    copies = PromptCopies.by_row(n) if copies is None else copies
    if copies.num_prompts != n:
        raise ValueError(
            f"The selector holds {n} prompts, but copies maps {copies.num_rows} rows to {copies.num_prompts}: pass "
            "the copies of the run the selector is from (a saved state's are in its kgps_state.npz, read whole)."
        )
    if prompts is not None and len(prompts) not in (copies.num_rows, n):
        over = f"over {copies.num_rows} rows" if copies.copies else "one per row"
        raise ValueError(
            f"prompts has {len(prompts)} entries, but the state is for {n} prompts {over}: pass the train dataset's "
            "prompts, one per row in its order (e.g. `train_dataset['prompt']`)"
            + (f", or its {n} distinct prompts in order of first appearance" if copies.copies else "")
            + ", or prompts=None for a table without them."
        )
    variance = selector.variance if isinstance(selector, KGPSSelector) else np.full(n, np.nan, dtype=np.float32)
    columns: dict[str, Any] = {"index": copies.first_row}
    if copies.copies:
        columns["rows"] = copies.rows_per_prompt
    if prompts is not None:
        # One per row: each prompt's first row; one per distinct prompt: as they are (the same when no row repeats).
        rows = copies.first_row.tolist() if len(prompts) == copies.num_rows else range(n)
        columns["prompt"] = [prompt_text(prompts[row]) for row in rows]
    columns.update(
        predicted_success=selector.predicted_success(),
        variance=variance,
        times_selected=np.asarray(times_selected, dtype=np.int32),
    )
    shared = selector.shared if isinstance(selector, KGPSSelector) else None
    if shared is not None and shared.design.kind == "categorical":
        cell = shared.design.row_of
        columns.update(
            group=[shared.design.names[c] for c in cell],
            group_predicted_success=shared.group_success()[cell],
            own_logit=selector.mean - shared.cell_moments()[0][cell].astype(np.float32),
        )
    return Dataset.from_dict(columns)


def prompt_text(prompt: str | Sequence[Mapping[str, Any]]) -> str:
    """A prompt as one string: a standard prompt itself; a conversational one, the text of its last user message."""
    if isinstance(prompt, str):
        return prompt
    messages = [message for message in prompt if message.get("role") == "user"] or list(prompt)
    content = messages[-1]["content"]
    if isinstance(content, str):
        return content
    # multimodal content: [{"type": "image"}, {"type": "text", "text": "..."}]
    return " ".join(part["text"] for part in content if part.get("type") == "text")


def last_metrics(log_history: list[dict[str, Any]], prefix: str = "kgps/") -> dict[str, tuple[float, int | None]]:
    """The last value logged for each metric named `prefix...`, with its step: `{name: (value, step)}`."""
    last = {}
    for entry in log_history:
        for name, value in entry.items():
            if name.startswith(prefix):
                last[name] = (value, entry.get("step"))
    return last


def reported_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """
    `metrics` (e.g. `last_metrics(...)`) less those a report states exactly at the end of the run: `kgps/coverage`
    (the prompts observed) and each group's `predicted_success` (the shared part's prediction). The trainer logs each
    metric as its mean over the steps since the previous log, which for these differs from their value at the end.
    """
    return {
        name: value
        for name, value in metrics.items()
        if name != "kgps/coverage" and not (name.startswith("kgps/group/") and name.endswith("/predicted_success"))
    }


def group_success(selector: PromptSelector) -> dict[str, float]:
    """What the shared part predicts for each group, `{name: success}`, for a KGPS selector that shares across
    prompts by categorical features (`{}` for any other)."""
    shared = selector.shared if isinstance(selector, KGPSSelector) else None
    if shared is None or shared.design.kind != "categorical":
        return {}
    return {name: float(p) for name, p in zip(shared.design.names, shared.group_success())}


def card_section(
    selector: PromptSelector,
    config: KGPSConfig,
    *,
    batches_chosen: int,
    batches_scored: int,
    warmup_batches: int,
    observed: int,
    metrics: dict[str, tuple[float, int | None]],
    location: str,
    metadata: Metadata | None = None,
    best_checkpoint: str | None = None,
    copies: PromptCopies | None = None,
) -> str:
    """
    The model card's `## KGPS` section, in markdown.

    Args:
        selector (`PromptSelector`): the selector the run used.
        config (`KGPSConfig`): the callback's config.
        batches_chosen (`int`): generation batches chosen, warmup included.
        batches_scored (`int`): of them, those rolled out and scored; the others were chosen ahead of training.
        warmup_batches (`int`): how many batches the warmup takes.
        observed (`int`): prompts with at least one scored rollout.
        metrics (`dict`): `last_metrics(...)` of the trainer's log history.
        location (`str`): where the state is loaded from: the Hub repo id, or the output directory.
        metadata (`Metadata`, *optional*): the metadata columns KGPS looked for in the dataset, when it did.
        copies (`PromptCopies`, *optional*): which rows of the dataset hold one prompt.
        best_checkpoint (`str`, *optional*): the checkpoint whose weights and KGPS state were saved as the model
            (`load_best_model_at_end`), when they were.
    """
    is_kgps = isinstance(selector, KGPSSelector)
    hyperparameters = selector.state_dict().get("hyperparameters") or {}
    arguments = ", ".join(f"{key}={value!r}" for key, value in hyperparameters.items())
    n = selector.num_prompts
    lines = [
        _CARD_HEADING,
        "",
        f"The prompts of every generation batch were chosen by `{type(selector).__name__}`"
        f"{f' ({arguments})' if arguments else ''} through the `KGPSCallback` of "
        "[trl-kgps](https://github.com/trl-kgps/trl-kgps) (Kalman-Guided Prompt Selection for TRL).",
        "",
        _rounds_line(batches_chosen, batches_scored, warmup_batches),
        f"- coverage: {observed} of {n} prompts observed ({observed / n:.1%})",
        *([f"- copies: {copies.describe()}"] if copies is not None and copies.copies else []),
        *_sharing_lines(selector),
        *([] if metadata is None else [f"- {metadata.describe()}"]),
        *(
            []
            if best_checkpoint is None
            else [
                f"- saved state: the best model's (`load_best_model_at_end`), from `{best_checkpoint}`; the rounds "
                "and coverage above are the whole run's"
            ]
        ),
        "",
        *_config_table(config),
        *([] if is_kgps else ["", "A baseline uses only the config's warmup and success rule."]),
        *_metrics_table(reported_metrics(metrics)),
        "",
        *_loading_snippet(type(selector).__name__, is_kgps, location),
    ]
    return "\n".join(lines) + "\n"


def add_kgps_section(
    trainer: Any,
    selector: PromptSelector,
    config: KGPSConfig,
    ledger: Any,
    dataset: Any,
    metadata: Metadata | None = None,
    best_checkpoint: str | None = None,
    copies: PromptCopies | None = None,
) -> None:
    """
    Adds the `## KGPS` section and tags to the README.md that `trainer.create_model_card` wrote into its output
    folder: the run's configuration and rounds from `selector`, `config` and `ledger` (the engine's `BatchLedger`), its
    last `kgps/*` metrics from `trainer.state.log_history`, and a quick start prompt from the train `dataset`; with
    `best_checkpoint`, that the state saved beside the model is that checkpoint's, and with `copies`, how many rows
    repeat a prompt (`card_section`).
    """
    section = card_section(
        selector,
        config,
        batches_chosen=ledger.batches_chosen,
        batches_scored=ledger.batches_scored,
        warmup_batches=ledger.warmup_batches,
        observed=ledger.observed_count,
        metrics=last_metrics(trainer.state.log_history),
        location=trainer.hub_model_id or trainer.args.output_dir,
        metadata=metadata,
        best_checkpoint=best_checkpoint,
        copies=copies,
    )
    add_to_card(str(Path(trainer.args.output_dir) / "README.md"), section, _plain_text_prompt(trainer, dataset))


def _plain_text_prompt(trainer: Any, dataset: Any) -> tuple[str, int] | None:
    """
    For a tokenizer without a chat template: the card's quick start prompt (the first training prompt, if it is text)
    and the tokens to generate (the run's completion length); `None` for a chat model.
    """
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    if getattr(tokenizer, "chat_template", None) is not None:
        return None
    first = dataset[0].get("prompt") if "prompt" in getattr(dataset, "column_names", ()) else None
    return (first if isinstance(first, str) else "Hello", getattr(trainer.args, "max_completion_length", 32))


def _rounds_line(batches_chosen: int, batches_scored: int, warmup_batches: int) -> str:
    """e.g. 301 chosen, 300 scored, no warmup: 300 trained on, all chosen by the selector, and 1 chosen ahead."""
    warmup = min(batches_scored, warmup_batches)
    line = f"- rounds: {batches_scored} generation batches rolled out and trained on, " + (
        f"the first {warmup} of them in the uniform warmup" if warmup else "all chosen by the selector"
    )
    ahead = batches_chosen - batches_scored
    if ahead:
        line += (
            f"; {ahead} more chosen but never rolled out (the trainer asks for the next batch while the current one "
            "trains, and training stopped first)"
        )
    return line


def _sharing_lines(selector: PromptSelector) -> list[str]:
    """What the run shared across prompts: the features and, for categorical ones, each group's predicted success."""
    if not isinstance(selector, KGPSSelector):
        return []
    shared = selector.shared
    if shared is None:
        return ["- shared across prompts: nothing (one independent filter per prompt)"]
    design = shared.design
    if design.kind == "global":
        return ["- shared across prompts: one factor for the whole pool (no feature column)"]
    columns = ", ".join(f"`{name}`" for name in selector.config.feature_columns or ["features"])
    if design.kind == "embedding":
        return [f"- shared across prompts: the embedding column {columns} ({design.dimension - 1} dimensions)"]
    lines = [f"- shared across prompts: the feature columns {columns}, {design.num_cells} groups"]
    if design.num_cells <= MAX_LOGGED_GROUPS:
        success = shared.group_success()
        lines += ["", "| group | prompts | predicted success at the end of training |", "|---|---|---|"]
        counts = design.counts
        lines += [f"| {name} | {count} | {p:.3f} |" for name, count, p in zip(design.names, counts, success)]
    return lines


def _config_table(config: KGPSConfig) -> list[str]:
    rows = [f"| `{field.name}` | `{getattr(config, field.name)!r}` |" for field in dataclasses.fields(config)]
    return ["| KGPSConfig | value |", "|---|---|", *rows]


def _metrics_table(metrics: dict[str, tuple[float, int | None]]) -> list[str]:
    if not metrics:
        return []
    rows = [f"| `{name}` | {value:.4g} | {step} |" for name, (value, step) in sorted(metrics.items())]
    return [
        "",
        "Last logged metrics, each the mean over the steps since the log before it (as the trainer logs them):",
        "",
        "| metric | value | step |",
        "|---|---|---|",
        *rows,
    ]


def _loading_snippet(name: str, is_kgps: bool, location: str) -> list[str]:
    imports = (
        [f"from trl_kgps import {name}, difficulty_table"]
        if is_kgps
        else ["from trl_kgps import difficulty_table", f"from trl_kgps.selectors import {name}"]
    )
    return [
        "The selector's state, `kgps_state.npz`, is saved beside the model; to continue from it, or to see which "
        "prompts it found hard:",
        "",
        "```python",
        *imports,
        "",
        f'selector = {name}.from_pretrained("{location}")',
        f'table = difficulty_table("{location}")  # a row per prompt: predicted success, variance, times selected',
        "```",
    ]


def add_to_card(path: str, section: str, plain_text_prompt: tuple[str, int] | None = None) -> None:
    """
    Adds `section` to the model card at `path` (above `## Citations`, else at the end) and the KGPS tags; with
    `plain_text_prompt` (a prompt and the tokens to generate), for a tokenizer without a chat template, its quick
    start continues that prompt instead of sending TRL's chat message.
    """
    from huggingface_hub import ModelCard

    card = ModelCard.load(Path(path))
    card.data.tags = [*(card.data.tags or []), *(tag for tag in CARD_TAGS if tag not in (card.data.tags or []))]
    text = card.text if plain_text_prompt is None else _plain_text_quick_start(card.text, *plain_text_prompt)
    head, citations, tail = text.partition(_CARD_BEFORE)
    card.text = f"{head}{section}\n{citations}{tail}" if citations else f"{text.rstrip()}\n\n{section}"
    card.save(path)


def _plain_text_quick_start(text: str, prompt: str, max_new_tokens: int) -> str:
    """TRL's `## Quick start` code block, rewritten to continue `prompt`; the card unchanged if it has no such
    block."""
    head, heading, rest = text.partition("## Quick start")
    block = re.search(r"```python\n(.*?)```", rest, flags=re.DOTALL)
    model = block and re.search(r'model="([^"]*)"', block.group(1))
    if not heading or not model:
        return text
    code = "\n".join(
        [
            "from transformers import pipeline",
            "",
            f'generator = pipeline("text-generation", model="{model.group(1)}", device_map="auto")',
            "# The tokenizer has no chat template: the model continues plain text, as it was trained.",
            f"output = generator({json.dumps(prompt)}, max_new_tokens={max_new_tokens}, return_full_text=False)[0]",
            'print(output["generated_text"])',
            "",
        ]
    )
    return head + heading + rest[: block.start(1)] + code + rest[block.end(1) :]
