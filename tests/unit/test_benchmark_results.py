"""
The committed benchmark results as a maintainer reads them (benchmarks/results): every file read through one loader
in either of its forms, plain or compressed.
"""

import json
import lzma
import sys
from pathlib import Path

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
