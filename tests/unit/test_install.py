"""One install path: every install command users read is the same one, at this release, and CI runs it on the wheel."""

import json
import re
import subprocess
import sys
from pathlib import Path

import trl_kgps


ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = (ROOT / "pyproject.toml").read_text()
# Where users read how to install: the README, the docs site, the examples' and notebooks' pages, the notebooks.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "README.md"]
PAGES += [ROOT / "notebooks" / "README.md", *sorted((ROOT / "notebooks").glob("*.ipynb"))]
RELEASE = f"git+https://github.com/trl-kgps/trl-kgps@v{trl_kgps.__version__}"
# The contributors' installs from a clone: the test command and the docs site's build.
FROM_A_CLONE = {'pip install -e ".[test]"', 'pip install -e ".[docs]"'}


def _installs() -> list[tuple[str, str]]:
    """Every `pip install` of trl-kgps on the pages, as `(page, command)`; notebooks' `%pip` and `-q` normalised."""
    found = []
    for page in PAGES:
        text = page.read_text()
        if page.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        for command in re.findall(r"pip install [^`\n]*", text):
            command = command.replace(" -q ", " ").strip()
            if "torch --index-url" not in command and "deepspeed" not in command:
                found.append((page.relative_to(ROOT).as_posix(), command))
    return found


def test_every_page_installs_the_release_one_way():
    optional = PYPROJECT.split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = set(re.findall(r"^([a-z]+) = ", optional, flags=re.M))
    installs = _installs()
    assert {page for page, _ in installs} >= {"README.md", "docs/index.md", "docs/quickstart.md", "examples/README.md"}
    for page, command in installs:
        if command.split(" &&")[0] in FROM_A_CLONE:
            continue
        match = re.fullmatch(r'pip install "trl-kgps\[([a-z,]+)\] @ (\S+)"', command)
        assert match, f"{page}: {command!r} is not the one install command"
        assert set(match.group(1).split(",")) <= extras and "demo" in match.group(1), (page, command)
        assert match.group(2) == RELEASE, (page, command)


def test_the_release_is_one_version_with_its_changelog():
    assert re.search(r'^version = "(.*)"', PYPROJECT, flags=re.M).group(1) == trl_kgps.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", trl_kgps.__version__), "a release, not a development version"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.findall(r"^## (\S+)", changelog, flags=re.M)[0] == trl_kgps.__version__


def test_ci_installs_the_built_wheel_with_the_readmes_own_lines(tmp_path):
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/wheel" in ci
    wheel = tmp_path / "trl_kgps-1.2.3-py3-none-any.whl"
    lines = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "readme_install.py"), str(wheel)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    first_block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S).group(1).splitlines()
    assert lines == [line.replace(RELEASE, wheel.as_uri()) for line in first_block if "pip install" in line]
    assert lines[-1] == f'pip install "trl-kgps[demo] @ {wheel.as_uri()}"'
    assert first_block[-1] == "trl-kgps train", "the demo is the command after the install line"


def test_ci_lints_with_the_ruff_the_dev_extra_pins():
    pinned = re.search(r'"ruff==([\d.]+)"', PYPROJECT).group(1)
    assert f'"ruff=={pinned}" && ruff check . && ruff format --check .' in (ROOT / ".ci" / "run").read_text()
