"""The package as users meet it: the README's code and commands, the public API, the import footprint."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import trl_kgps


ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = ci[ci.index(next(line for line in ci if line.startswith("# README test command"))) + 1]
    assert f"```bash\n{command}\n```" in README


def test_readme_python_snippets_run():
    snippets = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    runnable = [code for code in snippets if "=..." not in code]  # templates with `model=...` placeholders aside
    assert runnable
    for code in runnable:
        exec(compile(code, "README.md", "exec"), {})


def test_public_api_is_sorted_and_complete():
    assert trl_kgps.__all__ == sorted(trl_kgps.__all__)
    for name in trl_kgps.__all__:
        assert hasattr(trl_kgps, name)
    assert (Path(trl_kgps.__file__).parent / "py.typed").exists()


def test_estimator_imports_no_deep_learning_framework():
    code = (
        "import sys, trl_kgps; from trl_kgps import KGPSSelector, KGPSConfig; "
        "print(sorted(m for m in ('trl', 'transformers', 'torch', 'accelerate') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_training_and_resuming_import_no_demo_or_benchmark_code():
    # what a run with KGPSCallback loads, through a resume from a trl-kgps 0.2 checkpoint's config
    code = (
        "import sys, trl_kgps; from trl_kgps import KGPSCallback, KGPSConfig, difficulty_table; "
        "KGPSCallback(KGPSConfig.per_prompt()); "
        "print(sorted(m for m in sys.modules if m.startswith(('trl_kgps.tasks', 'trl_kgps.demo'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_example_tracks_drifting_prompts():
    script = ROOT / "examples" / "track_drifting_prompts.py"
    args = ["--num_prompts", "500", "--steps", "40", "--batch_size", "32"]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=True).stdout
    first, last = map(float, re.search(r"first quarter ([\d.]+), last quarter ([\d.]+)", out).groups())
    assert 0 < last < 0.3 and 0 < first < 0.4


def test_accelerate_configs_load():
    from accelerate.commands.config.config_args import load_config_from_file

    configs = sorted((ROOT / "examples" / "accelerate_configs").glob("*.yaml"))
    kinds = {path.stem: load_config_from_file(str(path)).distributed_type.value for path in configs}
    assert kinds == {
        "deepspeed_zero2": "DEEPSPEED",
        "deepspeed_zero3": "DEEPSPEED",
        "fsdp2": "FSDP",
        "multi_gpu": "MULTI_GPU",
    }
    for stem in kinds:
        assert f"examples/accelerate_configs/{stem}.yaml" in README + (ROOT / "docs" / "trl.md").read_text()


def test_the_commands_default_output_folders_are_ignored_by_git():
    ignored = subprocess.run(
        ["git", "check-ignore", "trl-kgps-demo/model.safetensors", "simulation/results.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.stdout.split() == ["trl-kgps-demo/model.safetensors", "simulation/results.json"]


def test_the_readmes_first_commands_install_the_cpu_torch_only_where_no_torch_is_installed():
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1).splitlines()
    guard, install = first_block[0], first_block[1]
    assert install.startswith('pip install "trl-kgps[demo] @ ') and "download.pytorch.org/whl/cpu" in guard
    assert "torch==2.13.0" in README[: README.index("## Use it in TRL")]
    # Run the guard with `pip install` replaced by an echo: silent where torch imports, an install where it does not.
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    dry = guard.replace("pip install", "echo would-install")
    here = subprocess.run(["bash", "-c", dry], capture_output=True, text=True, env=env)
    assert here.returncode == 0 and "would-install" not in here.stdout
    elsewhere = subprocess.run(
        ["bash", "-c", dry.replace("import torch", "import no_torch_here")], capture_output=True, text=True, env=env
    )
    assert "would-install torch --index-url https://download.pytorch.org/whl/cpu" in elsewhere.stdout


def _module_imports() -> dict[str, set[str]]:
    """
    Each `trl_kgps` module's imports of other `trl_kgps` modules, wherever they are written (inside functions and
    `TYPE_CHECKING` blocks too), with the subpackages whose `__init__` an import runs; the root package's is left out,
    since every module runs it first.
    """
    import ast

    package = Path(trl_kgps.__file__).parent
    paths = {
        ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for path in package.rglob("*.py")
    }
    graph = {}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(part for part in (base, node.module) if part)
                targets |= {f"{module}.{alias.name}" for alias in node.names} | {module}
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Dict) and name == "trl_kgps":  # the root's lazy `_LAZY` table
                targets |= {f"trl_kgps{v.value}" for v in node.values if isinstance(v, ast.Constant)}
        graph[name] = set()
        for target in targets & paths.keys() - {name}:
            parts = target.split(".")
            graph[name] |= (
                {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
                - {name}
                - {p for p in paths if name.startswith(p + ".")}
            )
    return graph


# The package's parts, lowest first: a module may import its own part and the parts below it, never one above.
LAYERS = [
    {"config"},
    {"engine"},
    {"selectors"},
    {"sampler"},
    {"adapters"},
    {"callback", "hub", "plots", "script_args"},
    {"tasks", "demo", "simulator"},
]


def _layer(module: str) -> int:
    part = module.split(".")[1]
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def test_no_line_of_the_library_is_longer_than_ruffs_119_characters():
    # ruff's formatter cannot split a docstring, a comment or a string, and CI's ruff ignores E501 (TRL's rule set).
    package = Path(trl_kgps.__file__).parent
    long = [
        f"{path.relative_to(package.parent)}:{number} ({len(line)})"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > 119
    ]
    assert long == []


def test_every_module_sits_in_a_part_and_imports_point_down():
    graph = _module_imports()
    assert "trl_kgps.engine.ledger" in graph["trl_kgps.sampler"]  # the graph sees relative imports
    assert "trl_kgps.plots" in graph["trl_kgps"]  # and the root's lazy ones
    upward = [
        f"{module} -> {target}"
        for module in graph
        if module != "trl_kgps"
        for target in graph[module]
        if _layer(target) > _layer(module)
    ]
    assert upward == []
    package = Path(trl_kgps.__file__).parent
    faces = sorted(path.name for path in package.glob("*.py"))
    assert len(faces) <= 8, faces  # everything else sits in a folder named for its part


def test_the_package_imports_without_a_cycle():
    graph, done, path = _module_imports(), set(), []

    def visit(module):
        assert module not in path, f"import cycle: {' -> '.join([*path[path.index(module) :], module])}"
        if module in done:
            return
        path.append(module)
        for target in sorted(graph[module]):
            visit(target)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_the_core_install_is_what_training_imports():
    # Every third-party module the package imports outside the demo (`demo/`, `tasks/`) is a core dependency, or
    # transformers' own (`huggingface_hub`), or matplotlib in `plots.py`, which `plot_rollouts` imports when it draws
    # (the `plots` extra's); peft, math-verify and matplotlib are the `demo` extra's.
    import ast

    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[<>=\[; ]", requirement)[0].replace("-", "_") for requirement in project["dependencies"]}
    package = Path(trl_kgps.__file__).parent
    imported = set()
    for path in package.rglob("*.py"):
        if path.relative_to(package).parts[0] in ("demo", "tasks"):
            continue
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
        imported |= names - {"matplotlib"} if path == package / "plots.py" else names
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "trl_kgps"}
    assert third_party - {"huggingface_hub"} <= core, third_party - core
    assert not {"peft", "math_verify", "matplotlib"} & core
    assert {"peft", "math_verify", "matplotlib"} <= {
        re.split(r"[<>=\[; ]", requirement)[0].replace("-", "_")
        for requirement in project["optional-dependencies"]["demo"]
    }
    assert any(requirement.startswith("matplotlib") for requirement in project["optional-dependencies"]["plots"])


def test_ci_s_oldest_environment_pins_the_floors_pyproject_declares():
    # What the README and pyproject.toml say is supported is what CI installs: each `>=` floor of a core or demo
    # dependency is the version .ci/oldest.txt pins, and every pin is such a floor.
    import tomllib
    from packaging.version import Version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["demo"]
    floors = dict(re.match(r"([\w-]+)>=([\w.]+)$", r).groups() for r in declared if re.match(r"[\w-]+>=[\w.]+$", r))
    lines = (ROOT / ".ci" / "oldest.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    assert {name: floors.get(name) and Version(floors[name]) for name in pins} == {
        name: Version(pin) for name, pin in pins.items()
    }
    assert {"torch", "trl", "transformers", "accelerate", "datasets"} <= pins.keys()
