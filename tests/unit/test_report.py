"""The model card's words: its count of rounds and its quick start for a model without a chat template."""

import pytest

from trl_kgps import plot_rollouts
from trl_kgps.adapters.report import _plain_text_quick_start, _rounds_line
from trl_kgps.demo.train import _format


def test_the_rounds_line_explains_the_batch_chosen_ahead_and_the_warmup():
    assert _rounds_line(301, 300, 0) == (
        "- rounds: 300 generation batches rolled out and trained on, all chosen by the selector; 1 more chosen but "
        "never rolled out (the trainer asks for the next batch while the current one trains, and training stopped "
        "first)"
    )
    assert (
        _rounds_line(8, 8, 4)
        == "- rounds: 8 generation batches rolled out and trained on, the first 4 of them in the uniform warmup"
    )
    assert _rounds_line(3, 2, 4).startswith("- rounds: 2 generation batches rolled out and trained on, the first 2 of")


TRL_CARD = """# Model Card for out

## Quick start

```python
from transformers import pipeline

question = "If you had a time machine?"
generator = pipeline("text-generation", model="someone/out", device_map="auto")
output = generator([{"role": "user", "content": question}], max_new_tokens=128, return_full_text=False)[0]
print(output["generated_text"])
```

## Training procedure
"""


def test_the_quick_start_of_a_model_without_chat_template_continues_plain_text():
    card = _plain_text_quick_start(TRL_CARD, '3+"5=', 4)
    head, code, tail = card.split("```")[0], card.split("```")[1], card.split("```")[2]
    assert head == TRL_CARD.split("```")[0] and tail == "\n\n## Training procedure\n"
    assert 'model="someone/out"' in code and "role" not in code
    assert 'output = generator("3+\\"5=", max_new_tokens=4, return_full_text=False)[0]' in code
    compile(code.removeprefix("python\n"), "quick start", "exec")
    assert _plain_text_quick_start("# A card with no quick start\n", "1+1=", 4) == "# A card with no quick start\n"


def test_the_rollouts_figure_shows_each_groups_mean_against_uniforms():
    pytest.importorskip("matplotlib")
    table = {"times_selected": [6, 2, 4, 0, 3, 3], "predicted_success": [0.5, 0.1, 0.45, 0.95, 0.7, 0.3]}
    figure = plot_rollouts(table, groups=["level 2", "level 10", "level 2", "level 10", "level 1", "level 1"], bins=2)
    by_level, by_success = figure.axes
    bars = [round(bar.get_height(), 6) for bar in by_level.patches]
    assert [label.get_text() for label in by_level.get_xticklabels()] == [
        "level 1\n2 prompts", "level 2\n2 prompts", "level 10\n2 prompts"
    ]  # fmt: skip
    assert bars == [3.0, 5.0, 1.0]  # the mean of each level's counts: (3+3)/2, (6+4)/2, (2+0)/2
    assert by_level.lines[0].get_ydata()[0] == by_success.lines[0].get_ydata()[0] == 3.0  # uniform: 18 / 6
    assert [round(bar.get_height(), 6) for bar in by_success.patches] == [
        3.0,
        3.0,
    ]  # [0, 0.5): 2, 4, 3; [0.5, 1]: 6, 0, 3
    with pytest.raises(ValueError, match="groups has 2 labels for a table of 6 prompts"):
        plot_rollouts(table, groups=["a", "b"])
    with pytest.raises(ValueError, match="bins=0 must be a positive integer"):
        plot_rollouts(table, bins=0)


def test_the_train_summary_prints_small_values_in_scientific_notation_and_names_the_levels():
    summary = {
        "selector": "kgps", "steps": 300, "rollouts": 19200, "level_names": {"1": "a+b", "4": "ab+cd"},
        "accuracy_before": {"all": 0.5, "level 1": 0.4, "level 4": 0.1},
        "accuracy_after": {"all": 0.6, "level 1": 0.5, "level 4": 0.1},
        "times_selected_per_prompt": {"uniform": 4.7, "level 1": 6.19, "level 4": 2.2},
        "kgps": {"kgps/process_noise": 4.23e-05, "kgps/delta_norm": 0.000423, "kgps/group/level=4/batch_share": 0.2},
        "coverage": 509 / 512, "prompts_observed": 509, "num_prompts": 512,
        "group_predicted_success": {"level=4": 0.1},
    }  # fmt: skip
    text = _format(summary, "out", ["kgps_rollouts.png"])
    assert "selector kgps: 300 steps, 19200 rollouts\ncoverage: 509 of 512 prompts observed (99.4%)\n" in text
    assert "last KGPS metrics: process_noise 4.23e-05, delta_norm 0.000423\n" in text
    assert "  level 1: a+b    0.400 -> 0.500\n  level 4: ab+cd  0.100 -> 0.100\n" in text
    assert (
        "times selected per prompt (uniform sampling: 4.70 each):\n  level 1: a+b 6.19, level 4: ab+cd 2.20\n" in text
    )
    assert "  level=4 (ab+cd)  0.100 / nan\n" in text
    assert text.endswith("wrote the model, kgps_state.npz, README.md, kgps_summary.json and kgps_rollouts.png to out")
