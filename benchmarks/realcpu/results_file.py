"""
A results file on disk: the JSON a run writes (`real_cpu.json`, `lr_sweep.json`), or the same file compressed with
xz (`real_cpu.json.xz`), the form large files are committed in under benchmarks/results (its INDEX.md says which).
Every reader goes through `load`, so a path names either form: `load("benchmarks/results/real_cpu.json")` reads
`real_cpu.json.xz` where only that is there.
"""

import json
import lzma
import os


SUFFIX = ".xz"
# A committed results file larger than this is stored compressed (`compact`).
COMPACT_ABOVE = 50_000
# xz's strongest preset: the committed files shrink about five times, and `xz -d` gives back the bytes compressed.
PRESET = 9 | lzma.PRESET_EXTREME


def resolve(path: str) -> str:
    """`path` where it exists, else its compressed form `path.xz` where that does."""
    if os.path.exists(path) or not os.path.exists(path + SUFFIX):
        return path
    return path + SUFFIX


def exists(path: str) -> bool:
    """Whether `path` or its compressed form exists."""
    return os.path.exists(resolve(path))


def load(path: str) -> dict:
    """The JSON of the results file `path`, plain or compressed (`path.xz`, or `path` itself ending in `.xz`)."""
    path = resolve(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no results file {path} (nor {path + SUFFIX}): run the command that writes it first")
    opener = lzma.open if path.endswith(SUFFIX) else open
    with opener(path, "rt") as f:
        return json.load(f)


def save(results: dict, path: str) -> None:
    """
    Writes `results` to `path` as plain JSON, one space an indent level as every committed file, and removes the
    compressed `path.xz` it replaces (so that no older file shadows it when compacted).
    """
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    if os.path.exists(path + SUFFIX):
        os.remove(path + SUFFIX)


def compact(path: str) -> str:
    """Compresses the plain results file `path` into `path.xz` and removes `path`; returns the new path."""
    with open(path, "rb") as f:
        data = f.read()
    with open(path + SUFFIX, "wb") as f:
        f.write(lzma.compress(data, preset=PRESET))
    os.remove(path)
    return path + SUFFIX
