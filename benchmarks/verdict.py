"""
Every verdict on the committed benchmark runs, by name: what each reads, in order of precedence, and what it writes
are data (`benchmarks/results/INDEX.json`, `verdicts`); how it judges them is its module in `benchmarks/verdicts/`.

```bash
python benchmarks/verdict.py all            # every verdict, from the committed runs, into benchmarks/results
python benchmarks/verdict.py one_line       # one: one_line, rollouts, calibration, datasets, practice
python benchmarks/verdict.py --list         # each verdict's files, in order of precedence, and what it writes
python benchmarks/verdict.py all --out /tmp/verdicts   # elsewhere, to compare with the committed files
```

A verdict reads roles (`runs`, `tuning`, ...), each a list of results files: an entry of the index (a directory,
whose `real_cpu.json` it reads, or a top-level `.json` file), in order of precedence, so that the first file holding a
run (regime, method, seed) gives it; a role may instead map a key (a multiple of the learning rate) to such a list.
Adding a results directory to a verdict is an edit of INDEX.json alone.
"""

import argparse
import importlib
import json
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.realcpu import results_file  # noqa: E402


RESULTS = "benchmarks/results"
INDEX = os.path.join(RESULTS, "INDEX.json")


def command(name: str) -> str:
    """The command that writes verdict `name`, as its markdown quotes it."""
    return f"python benchmarks/verdict.py {name}"


def verdicts(index: str = INDEX) -> dict:
    """The index's verdicts: `{name: {"writes": ..., "figures": {...}, "reads": {role: files}}}`."""
    with open(index) as f:
        return json.load(f)["verdicts"]


def results_path(results: str, entry: str) -> str:
    """The results file of an index `entry`: a top-level `.json` file itself, a directory's `real_cpu.json`."""
    return os.path.join(results, entry if entry.endswith(".json") else os.path.join(entry, "real_cpu.json"))


def union(paths: list[str], cache: dict | None = None) -> dict:
    """`runs[regime][method][seed]`, the union of the results files' runs: the first file holding a run gives it.
    `cache` keeps each file's JSON between calls (the runs are shared, never changed; the nesting is new)."""
    cache = {} if cache is None else cache
    runs: dict = {}
    for path in paths:
        if path not in cache:
            cache[path] = results_file.load(path)
        for regime, entry in cache[path]["regimes"].items():
            for method, seeds in entry["runs"].items():
                for seed, run in seeds.items():
                    runs.setdefault(regime, {}).setdefault(method, {}).setdefault(seed, run)
    return runs


def load(reads: dict, results: str = RESULTS, cache: dict | None = None) -> dict:
    """Each role of `reads` as runs (`union`), or as runs by key where the role maps keys to lists of entries."""
    cache = {} if cache is None else cache

    def runs(entries: list[str]) -> dict:
        return union([results_path(results, entry) for entry in entries], cache)

    return {
        role: {key: runs(entries) for key, entries in files.items()} if isinstance(files, dict) else runs(files)
        for role, files in reads.items()
    }


def module(name: str):
    """The module that judges verdict `name` (`benchmarks/verdicts/<name>.py`), its roles checked against the data."""
    return importlib.import_module(f"benchmarks.verdicts.{name}")


def check_roles(name: str, spec: dict) -> None:
    """Refuses a verdict whose data names a role its module does not read, or leaves out one it needs."""
    judge = module(name)
    given, known = set(spec["reads"]), set(judge.ROLES)
    needed = known - set(getattr(judge, "OPTIONAL", ()))
    if given - known or needed - given:
        raise SystemExit(
            f"INDEX.json's verdict {name!r} reads roles {sorted(given)}; benchmarks/verdicts/{name}.py reads "
            f"{sorted(known)} (needs {sorted(needed)}): name each role it reads in `reads`, and no other."
        )


def write(name: str, spec: dict, out: str, results: str = RESULTS, cache: dict | None = None) -> str:
    """Writes verdict `name` (its markdown and figures, named by `spec`) into `out`; returns the markdown."""
    check_roles(name, spec)
    text, figures = module(name).render(load(spec["reads"], results, cache), command(name))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, spec["writes"]), "w") as f:
        f.write(text)
    for role, filename in spec.get("figures", {}).items():
        figures[role](os.path.join(out, filename))
    return text


def listing(table: dict) -> str:
    """Each verdict: its command, what it writes, and each role's files in order of precedence."""
    lines = []
    for name, spec in table.items():
        written = [spec["writes"], *spec.get("figures", {}).values()]
        lines += [f"{command(name)}  ->  {', '.join(written)}"]
        for role, files in spec["reads"].items():
            if isinstance(files, dict):
                files = [f"{key}: {' > '.join(entries)}" for key, entries in files.items()]
                lines.append(f"  {role}: " + "; ".join(files))
            else:
                lines.append(f"  {role}: " + " > ".join(files))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="verdicts to write, or `all`")
    parser.add_argument("--results", default=RESULTS, help="where the runs are read (default %(default)s)")
    parser.add_argument("--out", help="where the verdicts are written (default: --results)")
    parser.add_argument("--index", default=INDEX, help="the index naming each verdict's inputs (default %(default)s)")
    parser.add_argument("--list", action="store_true", help="print what each verdict reads and writes, and exit")
    args = parser.parse_args(argv)
    table = verdicts(args.index)
    if args.list:
        print(listing(table))
        return 0
    names = list(table) if args.names == ["all"] else args.names
    unknown = [name for name in names if name not in table]
    if not names or unknown:
        parser.error(f"name verdicts among {list(table)}, or `all`" + (f"; unknown: {unknown}" if unknown else ""))
    cache: dict = {}
    for name in names:
        print(write(name, table[name], args.out or args.results, args.results, cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
