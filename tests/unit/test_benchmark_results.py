"""
The committed benchmark results as a maintainer reads them (benchmarks/results): every file read through one loader
in either of its forms, plain or compressed; an entry in the index (INDEX.json, rendered as INDEX.md) for every
directory and top-level file, holding the command, commit and machine the results record; no machine path in any.
"""

import json
import lzma
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest


ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import results_index, verdict  # noqa: E402
from benchmarks.realcpu import results_file  # noqa: E402


def test_a_results_file_is_read_plain_or_compressed_by_the_same_path(tmp_path):
    results = {"command": "python benchmarks/real_cpu.py", "regimes": {"base": {"runs": {}}}, "x": 0.1 + 0.2}
    path = str(tmp_path / "real_cpu.json")
    results_file.save(results, path)
    plain = Path(path).read_bytes()
    assert json.loads(plain) == results and plain.startswith(b'{\n "command"')  # one space an indent level
    compressed = results_file.compact(path)
    assert compressed == path + ".xz" and not Path(path).exists()
    assert lzma.decompress(Path(compressed).read_bytes()) == plain  # `xz -d` gives back the bytes written
    assert results_file.load(path) == results == results_file.load(compressed)
    # a new run written over it replaces the compressed file rather than hide behind it
    results_file.save({**results, "x": 1.0}, path)
    assert not Path(compressed).exists() and results_file.load(path)["x"] == 1.0


def test_a_missing_results_file_names_both_forms(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"real_cpu\.json\.xz"):
        results_file.load(str(tmp_path / "real_cpu.json"))


def test_check_reads_the_committed_reference_run_in_its_compressed_form(monkeypatch):
    """`real_cpu.py --check`'s default file is committed compressed; the run itself is stood in by the committed one."""
    from benchmarks.realcpu import check

    path = check.default_results()
    assert not Path(path).exists() and Path(path + ".xz").exists()
    committed = results_file.load(path)
    entry = committed["regimes"][check.REGIME]
    built = SimpleNamespace(regime=check.settings.REGIMES[check.REGIME], fingerprint=lambda: entry["fingerprint"])
    monkeypatch.setattr(check.settings, "build", lambda regime: built)
    monkeypatch.setattr(check.settings, "with_regime", lambda setting, regime: setting)
    monkeypatch.setattr(check.runner, "run", lambda setting, method, seed: None)
    monkeypatch.setattr(check, "curves", lambda outcome: entry["runs"][check.METHOD][check.SEED])
    passed, text = check.check(path)
    assert passed, text


def test_report_only_rewrites_a_runs_tables_from_its_compressed_file_and_leaves_the_file(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import real_cpu

    committed = ROOT / "benchmarks" / "results" / "copies_20"
    shutil.copy(committed / "real_cpu.json.xz", tmp_path)
    before = (tmp_path / "real_cpu.json.xz").read_bytes()
    real_cpu.main(["--report_only", "--out", str(tmp_path)])
    assert (tmp_path / "real_cpu.md").read_bytes() == (committed / "real_cpu.md").read_bytes()
    assert (tmp_path / "real_cpu.json.xz").read_bytes() == before and not (tmp_path / "real_cpu.json").exists()


RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def index():
    with open(RESULTS / "INDEX.json") as f:
        return json.load(f)


def test_every_directory_and_top_level_file_of_the_results_has_an_entry_in_the_index(index):
    files = [str(Path(folder) / name) for folder, _, names in os.walk(RESULTS) for name in names]
    missing = results_index.entries_needed(str(RESULTS), files) - results_index.covered(index)
    assert not missing, f"no entry in benchmarks/results/INDEX.json for {sorted(missing)}: add one (INDEX.md says how)"
    gone = [key for key in index["results"] if not (RESULTS / key).exists() and not (RESULTS / (key + ".xz")).exists()]
    assert not gone, f"INDEX.json has entries for results that are not there: {gone}"
    for key, entry in index["results"].items():
        assert all((RESULTS / name).exists() for name in entry.get("files", [])), key
    for spec in index["verdicts"].values():  # what a verdict reads is an entry, and there
        for files in spec["reads"].values():
            for entry in [e for entries in (files.values() if isinstance(files, dict) else [files]) for e in entries]:
                assert entry in index["results"] and results_file.exists(verdict.results_path(str(RESULTS), entry))


def test_the_rendered_index_is_the_index_data():
    with open(RESULTS / "INDEX.json") as f:
        rendered = results_index.render(json.load(f))
    assert (RESULTS / "INDEX.md").read_text() == rendered, "run `python benchmarks/results_index.py` after INDEX.json"


def test_no_committed_result_nor_the_index_records_a_machine_path():
    for path in sorted(RESULTS.rglob("*")):
        if path.is_file() and path.suffix != ".png" and path.suffix != ".parquet":
            text = lzma.open(path, "rt").read() if path.suffix == ".xz" else path.read_text()
            assert not results_index.machine_paths(text), f"{path}: {results_index.machine_paths(text)}"
    assert results_index.machine_paths("--out /tmp/x --merge /work/main/a.json /home/me /Users/me") == [
        "/tmp/", "/work/", "/home/", "/Users/",
    ]  # fmt: skip
    assert not results_index.machine_paths("--out benchmarks/results/tmp_runs --merge x/work/y.json")


def test_each_entry_holds_the_command_commit_and_machine_its_results_record(index):
    for key, entry in index["results"].items():
        path = results_index.record_of(str(RESULTS), key)
        if path is None or "command" not in results_file.load(path):  # a record older than commands
            continue
        made = results_index.recorded(path)
        assert entry["command"] == made["command"] and entry["commit"] == made["commit"], key
        assert entry.get("uncommitted_changes", False) == made["uncommitted_changes"], key
        assert entry["machine"] == made["machine"] and entry.get("merged", []) == made["merged"], key


def test_a_recorded_dirty_commit_is_named_as_uncommitted_changes_after_it(index):
    dirty = dict(commit="e8f78e2c44dd2bc082a8d96b9c49adc057d92000", uncommitted_changes=True)
    assert results_index.commit_label(dirty) == "uncommitted changes after e8f78e2"
    assert results_index.commit_label(dict(commit="f9d1c141501556647cf1231e52bf2fc54a15868b")) == "f9d1c14"
    text = (RESULTS / "INDEX.json").read_text() + (RESULTS / "INDEX.md").read_text()
    assert "+dirty" not in text, "the index names a clean commit and says where the tree held changes beyond it"


def test_adding_a_directory_compacts_it_and_draws_its_entry_from_its_record(tmp_path, index):
    results = tmp_path / "results"
    (results / "new_0_4").mkdir(parents=True)
    record = results_file.load(str(RESULTS / "copies_20" / "real_cpu.json"))
    results_file.save(record, str(results / "new_0_4" / "real_cpu.json"))
    added = results_index.add(json.loads(json.dumps(index)), "new_0_4", str(results))
    assert (results / "new_0_4" / "real_cpu.json.xz").exists() and not (results / "new_0_4" / "real_cpu.json").exists()
    entry = added["results"]["new_0_4"]
    assert entry["command"] == record["command"] and entry["commit"] == record["environment"]["commit"].removesuffix(
        "+dirty"
    )
    assert entry["machine"] == "AMD EPYC, 2 cores, AVX512"
    results_file.save({**record, "command": "python benchmarks/real_cpu.py --out /tmp/new"}, str(results / "x.json"))
    (results / "scratch").mkdir()
    (results / "x.json").rename(results / "scratch" / "real_cpu.json")
    (results / "scratch" / "big.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="machine paths"):
        results_index.add(json.loads(json.dumps(index)), "scratch", str(results))
    # Refused before any file changed: nothing compacted.
    assert sorted(p.name for p in (results / "scratch").iterdir()) == ["big.json", "real_cpu.json"]
    (results / "unrecorded").mkdir()
    (results / "unrecorded" / "big.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="holds none of"):
        results_index.add(json.loads(json.dumps(index)), "unrecorded", str(results))
    assert [p.name for p in (results / "unrecorded").iterdir()] == ["big.json"]
