"""
The library without the lab: importing trl_kgps and building the callback load none of the demo, the tiny tasks or the
experimental selectors, each checked in a fresh interpreter; the experimental selector plugs in through
`register_selector` when its module is imported, as a user's selector would, and a state it saved says so.
"""

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trl_kgps import KGPSConfig
from trl_kgps.engine import state_file
from trl_kgps.selectors import SELECTORS, build_selector
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector


# What the library never imports: the demo (`trl-kgps train`/`simulate`, the benchmarks' named variants), the tiny
# tasks and the experimental selectors.
LAB = ("trl_kgps.demo", "trl_kgps.tasks", "trl_kgps.selectors.experimental")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def _modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running `code`."""
    listed = _run(f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


@pytest.mark.parametrize(
    "code",
    [
        "import trl_kgps",
        "from trl_kgps import KGPSCallback",
        "from trl_kgps import KGPSCallback; KGPSCallback()",
        "from trl_kgps import KGPSCallback, KGPSConfig; KGPSCallback(KGPSConfig.per_prompt())",
        "from trl_kgps import plot_rollouts",
    ],
)
def test_the_library_loads_nothing_of_the_lab(code):
    modules = [m for m in _modules_after(code) if m == "trl_kgps" or m.startswith("trl_kgps.")]
    assert "trl_kgps" in modules  # the probe sees the package
    assert [m for m in modules if m.startswith(LAB) or {"variants", "lab"} & set(m.split("."))] == []


def test_plot_rollouts_is_the_librarys_and_imports_matplotlib_only_when_it_draws():
    modules = _modules_after("from trl_kgps import plot_rollouts; assert plot_rollouts.__module__ == 'trl_kgps.plots'")
    assert "trl_kgps.plots" in modules and "matplotlib" not in modules


def test_without_matplotlib_the_figures_name_the_package_to_install_not_an_extra_pypi_does_not_hold(
    monkeypatch, caplog
):
    from trl_kgps.plots import pyplot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert pyplot() is None
    assert "no figures (pip install matplotlib)" in caplog.text and "trl-kgps[" not in caplog.text


def test_the_experimental_selector_registers_itself_and_is_built_for_its_config():
    assert SELECTORS["kgps_experimental"] is ExperimentalSelector
    assert type(build_selector("kgps", 10, ExperimentalConfig(candidate_pass=True, candidates=2.0))) is (
        ExperimentalSelector
    )
    assert type(build_selector("kgps", 10, KGPSConfig())) is not ExperimentalSelector


@pytest.fixture
def experimental_state(tmp_path):
    """A state file holding an `ExperimentalSelector` that has seen a batch, and that selector."""
    selector = ExperimentalSelector(10, ExperimentalConfig(candidate_pass=True, candidates=2.0), seed=3)
    selector.update([1, 2], [1, 3], [4, 4])
    state_file.write(tmp_path, selector, {"pending": np.zeros((0, 2), dtype=np.int64)})
    return tmp_path, selector


def test_a_saved_experimental_selector_loads_once_its_module_is_imported_and_names_that_import_before(
    experimental_state,
):
    directory, selector = experimental_state
    load = (
        f"import trl_kgps\nselector = trl_kgps.load_selector({str(directory)!r})\nprint(selector.select(4).tolist())"
    )
    refused = _run(load)
    assert refused.returncode != 0
    assert "holds an ExperimentalSelector, a selector that registers" in refused.stderr
    assert "`import trl_kgps.selectors.experimental` first" in refused.stderr
    loaded = _run("import trl_kgps.selectors.experimental\n" + load)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split("\n")[0] == str(copy.deepcopy(selector).select(4).tolist())


def test_a_checkpoint_of_the_experimental_selector_names_the_import_to_resume_it(experimental_state):
    directory, _ = experimental_state
    resume = (
        "import types\n"
        "from trl_kgps import KGPSConfig, KGPSSelector\n"
        "from trl_kgps.adapters import checkpoint\n"
        f"checkpoint.resume({str(directory)!r}, KGPSConfig(), KGPSSelector(10), types.SimpleNamespace(batch_size=2), "
        "lambda: None)\n"
    )
    refused = _run(resume)
    assert refused.returncode != 0
    assert (
        "it holds an ExperimentalSelector, a selector that registers when its module is imported: " in refused.stderr
    )
    assert "`import trl_kgps.selectors.experimental` first" in refused.stderr


# A checkpoint trl-kgps 0.2 saved as a KGPSSelector's with one of its variants of KGPS (tests/data/README.md).
VARIANT_0_2 = str(Path(__file__).parents[1] / "data" / "trl_kgps_0.2_variants" / "mixed_pass")


def test_a_0_2_state_saved_with_a_variant_names_the_import_then_resumes_as_an_experimental_selector():
    resume = (
        "import types\n"
        "from trl_kgps import KGPSConfig, KGPSSelector\n"
        "from trl_kgps.adapters import checkpoint\n"
        f"checkpoint.resume({VARIANT_0_2!r}, KGPSConfig.per_prompt(candidates=4.0), KGPSSelector(40), "
        "types.SimpleNamespace(batch_size=4), lambda: None)\n"
    )
    saved = "(trl-kgps 0.2 saved it as a KGPSSelector with candidate_pass=True, objective='mixed', fields of "
    for code in (resume, f"import trl_kgps\ntrl_kgps.load_selector({VARIANT_0_2!r})"):
        refused = _run(code)
        assert refused.returncode != 0
        assert f"holds an ExperimentalSelector {saved}" in refused.stderr, refused.stderr
        assert "`import trl_kgps.selectors.experimental` first" in refused.stderr
    # Once imported, the callback builds an ExperimentalSelector for the ExperimentalConfig it was saved with.
    resumed = _run(
        "from trl_kgps.adapters import checkpoint\n"
        "from trl_kgps.sampler import KGPSRepeatSampler\n"
        "from trl_kgps.selectors import build_selector\n"
        "from trl_kgps.selectors.experimental import ExperimentalConfig\n"
        "config = ExperimentalConfig.per_prompt(objective='mixed', candidate_pass=True, candidates=4.0)\n"
        "selector = build_selector('kgps', 40, config)\n"
        "sampler = KGPSRepeatSampler(range(40), mini_repeat_count=8, batch_size=4, selector=selector, warmup_epochs=0)\n"
        f"checkpoint.resume({VARIANT_0_2!r}, config, selector, sampler, prompts=lambda: None)\n"
        "print(type(selector).__name__)\n"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split() == ["ExperimentalSelector"]


def test_the_command_lines_offer_the_built_in_selectors_whatever_was_imported_and_the_user_s_own():
    offered = (
        "import sys\n"
        "import trl_kgps.demo.simulator as simulator\n"  # imports the lab, which registers kgps_experimental
        "from trl_kgps import register_selector\n"
        "from trl_kgps.script_args import SELECTOR_CHOICES, KGPSScriptArguments\n"
        "from trl_kgps.selectors import SELECTORS\n"
        "from trl_kgps.selectors.baselines import UniformSelector\n"
        "assert 'kgps_experimental' in SELECTORS\n"
        "print(list(SELECTOR_CHOICES))\n"
        "print(sorted(set(simulator.METHODS) & set(SELECTORS)))\n"
        "class Mine(UniformSelector): ...\n"
        "register_selector('mine', Mine)\n"  # after the arguments' class was defined
        "from trl import TrlParser\n"
        "print(TrlParser((KGPSScriptArguments,)).parse_args_into_dataclasses(['--selector', 'mine'])[0].selector)\n"
        "TrlParser((KGPSScriptArguments,)).parse_args_into_dataclasses(['--selector', 'kgps_experimental'])\n"
    )
    result = _run(offered)
    built_in = ["kgps", "uniform", "mopps", "greso", "dps", "arcus", "gaussian", "insight", "offline_filter"]
    lines = result.stdout.splitlines()
    assert lines[:3] == [str(built_in), str(sorted(built_in)), "mine"], result.stderr
    assert "argument --selector: invalid choice: 'kgps_experimental'" in result.stderr


def test_the_experimental_selector_changes_only_the_documented_extension_point():
    """What `KGPSSelector`'s docstring names as its extension point is all a variant overrides: the core's private
    methods are not an API."""
    from trl_kgps import KGPSSelector

    extension_point = {"config_class", "rule_class", "new_filter", "process_noise"}
    overridden = {n for n in vars(ExperimentalSelector) if hasattr(KGPSSelector, n) and not n.startswith("__")}
    assert overridden == extension_point
    assert all(f"`{name}`" in KGPSSelector.__doc__ for name in extension_point)
