"""
The model card's words (its count of rounds, its quick start for a model without a chat template), the difficulty
table's prompts and the rollouts figure, on datasets whose rows repeat prompts too.
"""

import os
import re
from pathlib import Path

import numpy as np
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


QUICKSTART = (Path(__file__).resolve().parents[2] / "docs" / "quickstart.md").read_text()
# A dataset whose rows repeat prompts: 5 rows, 3 distinct prompts ("1+1=" in rows 0 and 2, "2+2=" in rows 1 and 4).
REPEATED = {
    "prompt": ["1+1=", "2+2=", "1+1=", "9+9=", "2+2="],
    "level": ["level 1", "level 2", "level 1", "level 2", "level 2"],
}


@pytest.fixture
def saved_with_copies(tmp_path, monkeypatch):
    """
    A `trainer` whose `save_model()` writes `out/kgps_state.npz` (in `tmp_path`, the working directory) as a run over
    `REPEATED` does, after a batch of 2 prompts was chosen, and the `dataset`, as the quickstart names them.
    """
    from datasets import Dataset

    from trl_kgps import KGPSConfig, KGPSSelector
    from trl_kgps.engine import state_file
    from trl_kgps.engine.copies import PromptCopies
    from trl_kgps.engine.engine import SelectionEngine

    selector = KGPSSelector(3, KGPSConfig(), seed=0)
    selector.update(np.array([0, 1, 2]), np.array([8, 4, 0]), np.array([8, 8, 8]))
    engine = SelectionEngine(selector, 2)
    engine.choose()
    ledger = engine.ledger

    class Trainer:
        def save_model(self):
            copies = PromptCopies(np.array([0, 1, 0, 2, 1]), key="prompt")
            state_file.write("out", selector, ledger.state_dict(), copies=copies)

    monkeypatch.chdir(tmp_path)
    return {"trainer": Trainer(), "dataset": Dataset.from_dict(REPEATED)}, selector, ledger


def test_the_quickstarts_table_and_figure_lines_run_where_rows_repeat_prompts(saved_with_copies):
    pytest.importorskip("matplotlib")
    namespace, selector, ledger = saved_with_copies
    (block,) = [code for code in re.findall(r"```python\n(.*?)```", QUICKSTART, re.DOTALL) if "plot_rollouts" in code]
    assert 'groups=dataset["level"]' in block
    # Before, plot_rollouts refused the 5 labels for the table's 3 prompts, recommending this same call.
    exec(block, namespace)
    table = namespace["table"]
    assert table["index"] == [0, 1, 3] and table["rows"] == [2, 2, 1]
    assert table["prompt"] == ["1+1=", "2+2=", "9+9="]
    assert os.path.getsize("rollouts.png") > 0
    np.testing.assert_array_equal(table["times_selected"], ledger.times_selected)
    # The same figure as with one label per prompt, each its first row's: "level 1" for prompt 0, "level 2" for 1, 2.
    by_row = plot_rollouts(table, groups=namespace["dataset"]["level"]).axes[0]
    by_prompt = plot_rollouts(table, groups=["level 1", "level 2", "level 2"]).axes[0]
    times = ledger.times_selected
    assert [label.get_text() for label in by_row.get_xticklabels()] == ["level 1\n1 prompts", "level 2\n2 prompts"]
    assert [bar.get_height() for bar in by_row.patches] == [bar.get_height() for bar in by_prompt.patches]
    assert [bar.get_height() for bar in by_row.patches] == pytest.approx([times[0], times[1:].mean()])


def test_the_rollouts_figure_refuses_labels_it_cannot_map_with_a_call_that_works(saved_with_copies):
    pytest.importorskip("matplotlib")
    from datasets import Dataset

    from trl_kgps import difficulty_table

    namespace, _, _ = saved_with_copies
    namespace["trainer"].save_model()
    table = difficulty_table("out")
    with pytest.raises(ValueError) as error:
        plot_rollouts(table, groups=["level 1", "level 2"])  # two labels: neither one per prompt nor one per row
    message = str(error.value)
    assert "groups has 2 labels for a table of 3 prompts whose `index` reaches row 3" in message, message
    call = message.split("groups=", 1)[1].rstrip(".")
    assert call == "train_dataset.select(table['index'])['level']"
    labels = eval(call, {"train_dataset": Dataset.from_dict(REPEATED), "table": table})
    assert labels == ["level 1", "level 2", "level 2"]
    plot_rollouts(table, groups=labels)  # the call it recommends works


def test_the_difficulty_table_takes_the_prompts_one_per_row_or_one_per_distinct_prompt(saved_with_copies):
    from trl_kgps import difficulty_table

    namespace, _, _ = saved_with_copies
    namespace["trainer"].save_model()
    rows = namespace["dataset"]["prompt"]
    distinct = ["1+1=", "2+2=", "9+9="]
    # Before, the distinct prompts were refused: "prompts has 3 entries, but the state is for 3 prompts over 5 rows".
    assert difficulty_table("out", prompts=distinct)["prompt"] == difficulty_table("out", prompts=rows)["prompt"]
    assert difficulty_table("out", prompts=distinct)["prompt"] == distinct
    with pytest.raises(ValueError) as error:
        difficulty_table("out", prompts=rows[:4])
    assert str(error.value) == (
        "prompts has 4 entries, but the state is for 3 prompts over 5 rows: pass the train dataset's prompts, one per "
        "row in its order (e.g. `train_dataset['prompt']`), or its 3 distinct prompts in order of first appearance, "
        "or prompts=None for a table without them."
    )
