"""
The documentation site's sources, checked without mkdocs: every page in `mkdocs.yml`'s nav exists, every object the
API reference renders imports, and no relative link leaves `docs/` (mkdocs cannot publish a file outside it).
`mkdocs build --strict` in CI checks the rest: anchors, docstrings, the rendered pages; where mkdocs is installed, one
test builds the site to read the API reference's types as rendered.
"""

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


class _Loader(yaml.SafeLoader):
    """A safe loader that reads `!!python/name:...` tags (which pymdownx settings use) as None instead of failing."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_pages(nav) -> list[str]:
    """The page paths of a mkdocs nav: a list of `path` or `{title: path or nav}`, nested to any depth."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def test_nav_pages_exist_and_every_page_is_in_the_nav():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    assert config["docs_dir"] == "docs"
    pages = nav_pages(config["nav"])
    assert [page for page in pages if not (DOCS / page).is_file()] == []
    assert sorted(pages) == sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))


def api_identifiers() -> list[str]:
    return re.findall(r"^::: *([\w.]+)", (DOCS / "api.md").read_text(), re.MULTILINE)


def test_api_reference_is_not_empty():
    assert "trl_kgps.KGPSCallback" in api_identifiers()


@pytest.mark.parametrize("identifier", api_identifiers())
def test_api_reference_identifier_imports(identifier):
    parts = identifier.split(".")
    # The longest importable module prefix, then attributes: `trl_kgps.selectors.DPSSelector` and
    # `trl_kgps.KGPSCallback` (a lazy attribute of the package) both resolve.
    for split in range(len(parts), 0, -1):
        module = ".".join(parts[:split])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:  # the module exists, but something it imports does not
                raise
            continue
        for name in parts[split:]:
            obj = getattr(obj, name)
        return
    pytest.fail(f"{identifier}: no module of this path imports")


def relative_links(page: Path) -> list[str]:
    """The targets of a page's relative links (outside code), without their anchors."""
    text = CODE.sub("", page.read_text())
    targets = [match.split()[0] for match in LINK.findall(text)]
    return [target.split("#")[0] for target in targets if not re.match(r"[a-z]+:|#", target)]


PAGES = sorted(DOCS.rglob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
def test_relative_links_stay_inside_docs(page):
    outside = []
    for target in relative_links(page):
        resolved = (page.parent / target).resolve()
        if not resolved.is_relative_to(DOCS.resolve()) or not resolved.is_file():
            outside.append(target)
    assert outside == [], (
        f"{page.name} links to files mkdocs cannot publish: {outside}. Link a file outside docs/ by its GitHub URL "
        "(https://github.com/trl-kgps/trl-kgps/blob/main/<path>), or copy an image into docs/figures/."
    )


def test_the_own_data_page_quotes_its_example_whole():
    """docs/own_data.md shows examples/own_data.py as it is (tests/examples runs it and checks the page's output)."""
    page = (DOCS / "own_data.md").read_text()
    (quoted,) = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    assert quoted == (ROOT / "examples" / "own_data.py").read_text()


def test_hugging_face_item_types_become_the_plain_types_google_style_reads():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("griffe_plain_types", DOCS / "griffe_plain_types.py")
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    docstring = "\n".join(
        [
            "Selects prompts.",
            "",
            "Args:",
            "    config (`KGPSConfig`, *optional*): the config (`KGPSConfig()` by default).",
            "    seed (`int`, *optional*, defaults to `0`): seeds",
            "        the draws (`rng`): a continuation.",
            "    features (*optional*): what prompts share.",
            "    m, P (`np.ndarray` of shape `(n,)`, float64): means and variances.",
            "",
            "Returns:",
            "    `np.ndarray` of shape `(B,)`, int64: the batch.",
            "",
            "Text after (`x`): untouched.",
        ]
    )
    assert extension.plain_types(docstring).splitlines() == [
        "Selects prompts.",
        "",
        "Args:",
        "    config (KGPSConfig): the config (`KGPSConfig()` by default).",
        "    seed (int): seeds",
        "        the draws (`rng`): a continuation.",
        "    features: what prompts share.",
        "    m, P (np.ndarray of shape (n,), float64): means and variances.",
        "",
        "Returns:",
        "    np.ndarray of shape (B,), int64: the batch.",
        "",
        "Text after (`x`): untouched.",
    ]


def test_the_api_reference_shows_every_type_without_markdown(tmp_path):
    # Before, the type column showed the docstrings' Markdown as typed: `KGPSConfig`, *optional*.
    pytest.importorskip("mkdocs")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    page = (tmp_path / "api" / "index.html").read_text()
    rows = [
        [" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in re.findall(r"<td>(.*?)</td>", row, re.DOTALL)]
        for row in re.findall(r'<tr class="doc-section-item">(.*?)</tr>', page, re.DOTALL)
    ]  # each row's cells as text: name, type, description, default (parameters); fewer for returns and attributes
    assert ["config", "KGPSConfig"] == rows[0][:2]  # KGPSCallback's first parameter
    assert [cell for row in rows for cell in row if "`" in cell or "*" in cell] == []  # Markdown left as typed


def _prose_words(text: str) -> int:
    """The words a reader reads as prose: code blocks and table rows left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return len(" ".join(line for line in text.splitlines() if not line.lstrip().startswith("|")).split())


def test_the_readme_and_the_docs_stay_short():
    root = Path(__file__).resolve().parents[2]
    assert _prose_words((root / "README.md").read_text()) <= 1500
    assert sum(_prose_words(page.read_text()) for page in (root / "docs").glob("*.md")) <= 10_000
