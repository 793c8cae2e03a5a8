"""
The committed benchmark results as a maintainer reads them (benchmarks/results): every file read through one loader
in either of its forms, plain or compressed.
"""

import json
import lzma
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest


ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT))

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
