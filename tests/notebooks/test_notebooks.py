"""
The notebooks, run as CI runs them: each executes top to bottom in a fresh `python3` kernel with `TRL_KGPS_SMOKE=1`
(a tiny model built in the notebook, a few CPU steps, a local folder instead of the Hub), offline. Each must finish
without an error and show its tables and figures; a probe cell appended to the executed copy reads the kernel's state.
The committed notebooks carry no outputs.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["quickstart.ipynb", "compare_selectors.ipynb"]
COLAB = "https://colab.research.google.com/github/trl-kgps/trl-kgps/blob/main/notebooks/"
SMOKE_ENV = {"TRL_KGPS_SMOKE": "1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def execute(name, directory, probe):
    """
    Runs `notebooks/<name>` in smoke mode with `directory` as its working directory, then prints `probe` (a Python
    expression) as JSON in the same kernel. Returns the notebook's executed cells and the probe's value.
    """
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(f"import json\nprint(json.dumps({probe}))"))
    env = {**os.environ, **SMOKE_ENV}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend turns figures into outputs
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(directory)}}
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
    """Outputs cleared, the Colab badge points at this very notebook, and the first code cell holds the one switch."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code), "clear the outputs"
    assert f"]({COLAB}{name})" in notebook.cells[0].source
    assert 'SMOKE = os.environ.get("TRL_KGPS_SMOKE") == "1"' in code[0].source
    assert '    %pip install -q "trl-kgps[demo] @ git+https://github.com/trl-kgps/trl-kgps"' in code[0].source
    assert sum("TRL_KGPS_SMOKE" in cell.source for cell in code) == 1


@pytest.mark.slow
def test_quickstart(tmp_path):
    probe = """{
        "global_step": trainer.state.global_step,
        "logged": sorted({name for entry in trainer.state.log_history for name in entry}),
        "batches_chosen": kgps.ledger.batches_chosen,
        "table": {"rows": len(table), "columns": list(table.columns), "selected": int(table["times_selected"].sum())},
        "saved": sorted(os.listdir(repo_id)),
        "same_beliefs": np.array_equal(selector.mean, kgps.selector.mean)
        and np.array_equal(selector.variance, kgps.selector.variance),
    }"""
    cells, state = execute("quickstart.ipynb", tmp_path, probe)
    assert errors(cells) == []
    assert outputs(cells, "install") == "", "smoke mode installs nothing"
    assert outputs(cells, "reward") == "[1.0, 0.0]"

    # Trained for the smoke run's 4 steps, through the warmup (16 puzzles, 8 a step) and then KGPS's own choices.
    assert state["global_step"] == 4
    assert {"kgps/informative", "kgps/mae", "kgps/coverage", "kgps/delta_norm", "kgps/process_noise"} <= set(
        state["logged"]
    )
    assert state["table"]["columns"] == ["index", "prompt", "predicted_success", "variance", "times_selected"]
    assert state["table"]["rows"] == 16
    assert state["table"]["selected"] == state["batches_chosen"] * 8 > 0

    # The shown tables, the two figures, and the state saved and loaded back as push_to_hub would.
    for cell_id, shown in (("table", "target"), ("hardest", "Using the numbers")):
        assert all(text in outputs(cells, cell_id) for text in (shown, "predicted_success", "times_selected"))
    assert figures(cells) == ["posterior", "rollouts", "metrics"]
    assert {"kgps_state.npz", "model.safetensors"} <= set(state["saved"])
    assert "same beliefs as the trained run: True" in outputs(cells, "load")
    assert state["same_beliefs"]


@pytest.mark.slow
def test_compare_selectors(tmp_path):
    probe = '{"table": mean.reset_index().to_dict("records"), "scenarios": list(SCENARIOS)}'
    cells, state = execute("compare_selectors.ipynb", tmp_path, probe)
    assert errors(cells) == []
    assert outputs(cells, "install") == "", "smoke mode installs nothing"

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
    assert figures(cells) == ["curves"]
