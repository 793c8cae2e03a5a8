"""
The notebooks, run as CI runs them: each executes top to bottom in a fresh `python3` kernel with `TRL_KGPS_SMOKE=1`
(the checkout under test, on the CPU, nothing sent to the Hub), offline; the quickstart also runs as a reader on a
CPU without network opens it, without the switch. Each must finish without an error and show its tables and figures,
and what they show must be what the notebook's text says; a probe cell appended to the executed copy reads the
kernel's state. The committed notebooks carry no outputs.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import trl_kgps


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["quickstart.ipynb", "compare_selectors.ipynb"]
COLAB = "https://colab.research.google.com/github/trl-kgps/trl-kgps/blob/main/notebooks/"
OFFLINE_CPU = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
SMOKE_ENV = {"TRL_KGPS_SMOKE": "1", **OFFLINE_CPU}
# What the notebook installs where trl-kgps is not installed: the one install command (tests/unit/test_install.py).
INSTALL = f'    %pip install -q "trl-kgps[demo] @ git+https://github.com/trl-kgps/trl-kgps@v{trl_kgps.__version__}"'


def execute(name, directory, probe, env=SMOKE_ENV, drop=()):
    """
    Runs `notebooks/<name>` with `env` added to the environment and the variables `drop` removed, in `directory`,
    then prints `probe` (a Python expression) as JSON in the same kernel. Returns the notebook's executed cells and
    the probe's value.
    """
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(f"import json\nprint(json.dumps({probe}))"))
    env = {key: value for key, value in {**os.environ, **env}.items() if key not in drop}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend turns figures into outputs
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(directory)}}
    )
    client.execute(env=env)  # raises CellExecutionError, with the traceback, if a cell fails
    *cells, probe_cell = notebook.cells
    printed = "".join(output["text"] for output in probe_cell.outputs if output.get("name") == "stdout")
    return cells, json.loads(printed)


def outputs(cells, cell_id):
    """The outputs of the cell with `cell_id`, as one string of their text, HTML and plain-text data."""
    (cell,) = [cell for cell in cells if cell.get("id") == cell_id]
    parts = []
    for output in cell.outputs:
        parts.append(output.get("text", ""))
        parts += [output.get("data", {}).get(kind, "") for kind in ("text/plain", "text/html")]
    return "".join(parts)


def stdout(cells, cell_id):
    """What the cell with `cell_id` printed, without what went to stderr (warnings, logs)."""
    (cell,) = [cell for cell in cells if cell.get("id") == cell_id]
    return "".join(output["text"] for output in cell.outputs if output.get("name") == "stdout")


def figures(cells):
    """The ids of the cells that displayed a PNG figure."""
    return [
        cell["id"]
        for cell in cells
        if any("image/png" in output.get("data", {}) for output in cell.get("outputs", []))
    ]


def errors(cells):
    return [output for cell in cells for output in cell.get("outputs", []) if output["output_type"] == "error"]


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_is_clean(name):
    """
    Outputs cleared, the Colab badge points at this very notebook, and the first code cell holds the one switch and
    the install, which runs only where trl-kgps is not installed.
    """
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code), "clear the outputs"
    assert f"]({COLAB}{name})" in notebook.cells[0].source
    assert 'SMOKE = os.environ.get("TRL_KGPS_SMOKE") == "1"' in code[0].source
    assert 'if SMOKE or importlib.util.find_spec("trl_kgps") is not None:' in code[0].source
    assert code[0].source.endswith("else:\n" + INSTALL)
    assert sum("TRL_KGPS_SMOKE" in cell.source for cell in code) == 1


QUICKSTART_PROBE = """{
    "global_step": trainer.state.global_step,
    "logged": sorted({name for entry in trainer.state.log_history for name in entry}),
    "informative": float(logs["kgps/informative"].mean()),
    "reward": float(logs[f"rewards/{reward.__name__}/mean"].mean()),
    "batches_chosen": kgps.ledger.batches_chosen,
    "table": {"rows": len(table), "columns": list(table.columns), "selected": int(table["times_selected"].sum())},
    "success_deciles": table["predicted_success"].quantile([0.1, 0.5, 0.9]).tolist(),
    "most_selected": table.nlargest(len(table) // 10, "times_selected")[["predicted_success", "variance"]]
    .median().to_dict(),
    "least_selected": table.nsmallest(len(table) // 10, "times_selected")[["predicted_success", "variance"]]
    .median().to_dict(),
    "per_group": table.groupby(groups)[["times_selected", "predicted_success"]].mean().to_dict("index"),
    "saved": sorted(os.listdir(repo_id)),
    "same_beliefs": np.array_equal(selector.mean, kgps.selector.mean)
    and np.array_equal(selector.variance, kgps.selector.variance),
}"""


@pytest.mark.slow
def test_quickstart(tmp_path):
    cells, state = execute("quickstart.ipynb", tmp_path, QUICKSTART_PROBE)
    assert errors(cells) == []
    assert stdout(cells, "install") == "trl-kgps is installed: nothing to install.\n"
    assert stdout(cells, "model") == "Smoke mode: the small model instead of Qwen/Qwen2.5-0.5B-Instruct.\n"
    assert stdout(cells, "device") == "Training on the CPU, in float32.\n"
    assert outputs(cells, "reward") == "[1.0, 0.0]"

    # The small model from the shipped warm start, trained as `trl-kgps train` trains it: 300 steps, KGPS sharing by
    # the `level` column it found, which the log says.
    assert "KGPS shares what it learns across prompts by `level` (4 values)" in outputs(cells, "train")
    assert state["global_step"] == 300
    assert {"kgps/informative", "kgps/mae", "kgps/coverage", "kgps/delta_norm", "kgps/group/level=4/batch_share"} <= (
        set(state["logged"])
    )
    assert state["table"]["columns"][:5] == ["index", "prompt", "predicted_success", "variance", "times_selected"]
    assert state["table"]["rows"] == 512
    assert state["table"]["selected"] == state["batches_chosen"] * 8 > 0

    # What the text says the figures show. The policy solves some sums and not others: predicted success spreads
    # between 0 and 1, most groups are informative, rewards are not all 0.
    low, median, high = state["success_deciles"]
    assert low < 0.2 and 0.3 < median < 0.7 and high > 0.7
    assert state["informative"] > 0.7 and 0.3 < state["reward"] < 0.7
    # The most selected prompts sit away from 0 and 1, with beliefs narrowed by their measurements; the least
    # selected are predicted out of reach, with wide beliefs.
    most, least = state["most_selected"], state["least_selected"]
    assert 0.3 < most["predicted_success"] < 0.8 and least["predicted_success"] < 0.2
    assert most["variance"] < least["variance"] / 2
    # Where the rollouts went: fewer than uniform's to the level predicted out of reach, more to the others.
    uniform = state["table"]["selected"] / state["table"]["rows"]
    per_group = state["per_group"]
    out_of_reach = min(per_group, key=lambda group: per_group[group]["predicted_success"])
    assert out_of_reach == "level 4" and per_group[out_of_reach]["predicted_success"] < 0.25
    assert per_group[out_of_reach]["times_selected"] < uniform * 0.8
    assert all(group["times_selected"] > uniform for name, group in per_group.items() if name != out_of_reach)
    heading, *rows = stdout(cells, "rollouts").splitlines()
    assert heading == f"times selected per prompt (uniform sampling: {uniform:.2f} each):"
    printed = {name.strip(): value for name, _, value in (row.rpartition(" ") for row in rows)}
    assert printed == {name: f"{group['times_selected']:.2f}" for name, group in per_group.items()}

    # The shown tables, the three figures, and the state saved and loaded back as push_to_hub would.
    for cell_id, shown in (("table", "level=1"), ("hardest", "level=4")):
        assert all(text in outputs(cells, cell_id) for text in (shown, "predicted_success", "times_selected"))
    assert figures(cells) == ["posterior", "rollouts", "metrics"]
    assert stdout(cells, "login") == "Smoke mode: nothing is sent to the Hub.\n"
    assert "Saved the model and its KGPS state to tiny-qwen2-sums-GRPO-KGPS/" in stdout(cells, "push")
    assert {"kgps_state.npz", "model.safetensors"} <= set(state["saved"])
    assert "same beliefs as the trained run: True" in outputs(cells, "load")
    assert state["same_beliefs"]


@pytest.mark.slow
def test_quickstart_offline_on_a_cpu_without_the_switch(tmp_path):
    """
    A reader who opens the quickstart on a CPU without network: no cell fails, and those that cannot do their part
    say why and what happens instead. With a GPU and no network, the model cannot be downloaded: the same fallback.
    """
    hub_login = ("TRL_KGPS_SMOKE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH")
    env = {**OFFLINE_CPU, "HF_HOME": str(tmp_path / "hf-home")}  # no token saved there
    cells, state = execute("quickstart.ipynb", tmp_path, '{"step": trainer.state.global_step}', env, hub_login)
    assert errors(cells) == []
    assert stdout(cells, "install") == "trl-kgps is installed: nothing to install.\n"
    assert "the small model instead" in stdout(cells, "model")
    assert stdout(cells, "device") == "Training on the CPU, in float32.\n"
    assert state["step"] == 300 and figures(cells) == ["posterior", "rollouts", "metrics"]
    assert stdout(cells, "login").startswith("Could not log in to the Hub (")
    assert "to push, log in and run this cell again" in stdout(cells, "push")
    assert "same beliefs as the trained run: True" in outputs(cells, "load")


@pytest.mark.slow
def test_compare_selectors(tmp_path):
    probe = (
        '{"table": mean.reset_index().to_dict("records"), "scenarios": list(SCENARIOS), "ranges": ranges.to_dict()}'
    )
    cells, state = execute("compare_selectors.ipynb", tmp_path, probe)
    assert errors(cells) == []
    assert stdout(cells, "install") == "trl-kgps is installed: nothing to install.\n"

    # Every selector in every scenario, in the table the notebook shows.
    rows = {(row["scenario"], row["selector"]): row for row in state["table"]}
    selectors = ["kgps", "kgps_paper", "mopps", "greso", "uniform", "ds"]
    assert set(rows) == {(scenario, selector) for scenario in state["scenarios"] for selector in selectors}
    shown = outputs(cells, "table")
    assert all(f">{selector}<" in shown for selector in selectors)

    # What the notebook's reading says holds even on the smoke run: the paper's KGPS has the most informative groups
    # of the selectors that spend no extra rollouts, the smallest error against the true success rate, and repeats
    # its batches; the default does not repeat them and finds more informative groups than uniform; DS buys its
    # informative groups with extra rollouts.
    for scenario in state["scenarios"]:
        paper, default, ds = rows[scenario, "kgps_paper"], rows[scenario, "kgps"], rows[scenario, "ds"]
        others = [rows[scenario, selector] for selector in selectors if selector != "kgps_paper"]
        assert paper["informative_share"] > max(row["informative_share"] for row in others if row is not ds)
        assert paper["mae_true"] < min(row["mae_true"] for row in others)
        assert paper["repeats"] > 0.5 > max(row["repeats"] for row in others)
        assert (
            default["repeats"] < 0.1 and default["informative_share"] > rows[scenario, "uniform"]["informative_share"]
        )
        assert ds["informative_share"] == 1 and ds["rollouts"] > paper["rollouts"]
    # In the four scenarios it reads (not `cpu`): the paper's rule has the lowest Spearman, MoPPS repeats more than
    # any selector but the paper's rule, uniform has the lowest MAE against s / k, and the final success of the
    # selectors lies within about 0.01.
    for scenario in set(state["scenarios"]) - {"cpu"}:
        row = {selector: rows[scenario, selector] for selector in selectors}
        assert min(selectors, key=lambda selector: row[selector]["spearman"]) == "kgps_paper"
        by_repeats = sorted(selectors, key=lambda selector: row[selector]["repeats"], reverse=True)
        assert by_repeats[:2] == ["kgps_paper", "mopps"]
        assert min(selectors, key=lambda selector: row[selector]["mae"]) == "uniform"
        finals = [row[selector]["final_success"] for selector in selectors]
        assert max(finals) - min(finals) < 0.015
    assert list(state["ranges"]) == ["informative_share", "mae_true", "mae", "spearman", "repeats", "rollouts"]
    assert all(f">{selector}<" in outputs(cells, "ranges") for selector in selectors)
    assert "final success, best selector minus worst: base " in outputs(cells, "ranges")
    assert figures(cells) == ["curves"]
