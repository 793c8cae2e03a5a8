"""
The index of the committed benchmark results (`benchmarks/results/INDEX.json`, rendered as `INDEX.md`): per directory
of results (and per top-level file), the command that made it, the commit and machine it ran on, when it was
committed, and which verdicts and pages read it; per verdict, what it reads in order of precedence
(`benchmarks/verdict.py`).

```bash
python benchmarks/results_index.py                       # INDEX.md again, from INDEX.json
python benchmarks/results_index.py add countdown_0_4     # a new directory: compacted, its entry drawn from its record
```

`add` compresses the directory's results files over 50 kB (`results_file.compact`), adds its entry to INDEX.json
with the command, commit and machine its results file records, and renders INDEX.md; name what reads it (`docs`, a
verdict's `reads`) and, once committed, the commit that wrote it (`date`, `committed_in`) in INDEX.json, then render
again.
"""

import argparse
import json
import os
import re
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.realcpu import results_file  # noqa: E402


RESULTS = "benchmarks/results"
INDEX = os.path.join(RESULTS, "INDEX.json")
RENDERED = os.path.join(RESULTS, "INDEX.md")
# The files of a directory that record how its results were made, in the order looked for.
RECORDS = ("real_cpu.json", "lr_sweep.json")
# A path on the machine that ran a command, which no committed command may hold: the repository's are relative.
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:tmp|work|home|Users)(?:/|\b)")


def machine_paths(text: str) -> list[str]:
    """The machine paths in `text` (`/tmp/...`, `/work/...`, `/home/...`, `/Users/...`)."""
    return [match.group(0) for match in MACHINE_PATH.finditer(text)]


def record_of(results: str, entry: str) -> str | None:
    """The results file of index `entry` under `results` that records its command and environment, if any."""
    if not os.path.isdir(os.path.join(results, entry)):  # a top-level file
        return os.path.join(results, entry) if entry.endswith(".json") else None
    for name in RECORDS:
        if results_file.exists(path := os.path.join(results, entry, name)):
            return path
    return None


def machine(env: dict) -> str:
    """The CPU a run recorded: model, cores and the vector instructions torch's kernels used."""
    return f"{env['cpu']}, {env['cores']} cores, {env['cpu_capability']}"


def recorded(path: str) -> dict:
    """What a results file records of how it was made: `command`, `commit`, `machine` (where recorded) and the
    files or commands whose runs it merged (`merged`)."""
    results = results_file.load(path)
    env = results.get("environment", {})
    merged = results.get("merged", [])
    commit = env.get("commit")
    return dict(
        command=results.get("command"),
        commit=commit and commit.removesuffix("+dirty"),
        uncommitted_changes=bool(commit and commit.endswith("+dirty")),
        machine=machine(env) if env.get("recorded") is not False and "cpu" in env else None,
        merged=[m.get("path") or m.get("command") for m in ([merged] if isinstance(merged, dict) else merged)],
    )


def commit_label(entry: dict) -> str:
    """An entry's commit in words: `ab12cd3`, or `uncommitted changes after ab12cd3` where the run's tree held changes
    beyond it (`uncommitted_changes`; the results file records `ab12cd3...+dirty`)."""
    if not entry.get("commit"):
        return "not recorded"
    short = entry["commit"][:7]
    return f"uncommitted changes after {short}" if entry.get("uncommitted_changes") else short


def entries_needed(results: str, files: list[str]) -> set[str]:
    """The entries an index of `files` (paths under `results`) must hold: each directory holding a file, each
    top-level file (the index's own files aside)."""
    needed = set()
    for path in files:
        relative = os.path.relpath(path, results)
        folder = os.path.dirname(relative)
        if folder:
            needed.add(folder)
        elif relative not in ("INDEX.json", os.path.basename(RENDERED)):
            needed.add(relative)
    return needed


def covered(index: dict) -> set[str]:
    """What the index holds an entry for: its results' keys and their top-level files, and the verdicts' files."""
    held = set(index["results"])
    for entry in index["results"].values():
        held.update(entry.get("files", []))
    for spec in index["verdicts"].values():
        held.update([spec["writes"], *spec.get("figures", {}).values()])
    return held


def readers(index: dict) -> dict[str, list[str]]:
    """Per results entry, the verdicts that read it (each role), from the verdicts' `reads`."""
    found: dict[str, list[str]] = {}
    for name, spec in index["verdicts"].items():
        for role, files in spec["reads"].items():
            lists = files.values() if isinstance(files, dict) else [files]
            for entry in dict.fromkeys(e for entries in lists for e in entries):
                found.setdefault(entry, []).append(f"`verdict.py {name}` ({role})")
    return found


def _code(text: str) -> str:
    return f"`{text}`"


def render(index: dict) -> str:
    """INDEX.md: the rules, the verdicts, then each entry of the results."""
    lines = [
        "# The benchmark results: what made each, and what reads it",
        "",
        "Rendered from `INDEX.json` by `python benchmarks/results_index.py`: edit INDEX.json, then run it "
        "(`tests/unit/test_benchmark_results.py` checks that they agree, that every directory and top-level file "
        "here has an entry, and that no recorded command holds a machine path).",
        "",
        *index["about"],
        "",
        "## Verdicts",
        "",
        "Each reads, per role, the entries below in order of precedence (the first file holding a run gives it) and "
        "writes the files named; `python benchmarks/verdict.py all` writes every one, byte for byte as committed.",
        "",
        "| verdict | writes | reads, in order of precedence | quoted by |",
        "|---|---|---|---|",
    ]
    for name, spec in index["verdicts"].items():
        roles = []
        for role, files in spec["reads"].items():
            if isinstance(files, dict):
                order = "; ".join(f"{key}x: " + " > ".join(map(_code, entries)) for key, entries in files.items())
            else:
                order = " > ".join(map(_code, files))
            roles.append(f"*{role}*: {order}")
        written = ", ".join(map(_code, [spec["writes"], *spec.get("figures", {}).values()]))
        quoted = "<br>".join(spec.get("quoted_by", []))
        lines.append(f"| `python benchmarks/verdict.py {name}` | {written} | " + "<br>".join(roles) + f" | {quoted} |")
    lines += ["", "## Results", ""]
    read_by = readers(index)
    for key, entry in sorted(index["results"].items()):
        lines += [f"### `{key}`", ""]
        if entry.get("files"):
            lines.append("- files: " + ", ".join(map(_code, entry["files"])))
        lines.append("- command: " + (_code(entry["command"]) if entry.get("command") else "not recorded"))
        for source in entry.get("merged", []):
            lines.append(f"  - with the runs of {_code(source)}")
        lines.append(f"- commit: {commit_label(entry)}; machine: {entry.get('machine') or 'not recorded'}")
        if entry.get("committed_in"):
            lines.append(f"- committed as it stands: {entry['date']}, in {entry['committed_in']}")
        else:
            lines.append(f"- committed as it stands: `git log -1 -- benchmarks/results/{key}` (not yet in the index)")
        readers_here = read_by.get(key, []) + entry.get("docs", [])
        lines.append("- read by: " + ("; ".join(readers_here) if readers_here else "none"))
        if entry.get("note"):
            lines.append(f"- {entry['note']}")
        lines.append("")
    return "\n".join(lines)


def write_index(index: dict, path: str = INDEX) -> None:
    with open(path, "w") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(os.path.dirname(path), os.path.basename(RENDERED)), "w") as f:
        f.write(render(index))


def add(index: dict, entry: str, results: str = RESULTS) -> dict:
    """
    Adds the new directory `entry`'s entry, drawn from what its results files record, and compacts them; refused,
    with the directory left as it was, where it records no command or a command with machine paths.
    """
    if entry in index["results"]:
        raise SystemExit(f"INDEX.json already has {entry!r}: edit that entry instead.")
    folder = os.path.join(results, entry)
    if not os.path.isdir(folder):
        raise SystemExit(f"{folder} is not a directory: `add` takes a new directory of results.")
    # Every check before any file changes: a refused directory is left as it was.
    path = record_of(results, entry)
    if path is None:
        raise SystemExit(f"{folder} holds none of {RECORDS}: write its entry in INDEX.json by hand.")
    made = recorded(path)
    found = machine_paths(made["command"] or "")
    if found:
        raise SystemExit(f"{path} records the machine paths {found} in its command: record the repository's path.")
    for name in sorted(os.listdir(folder)):
        file = os.path.join(folder, name)
        if name.endswith(".json") and os.path.getsize(file) > results_file.COMPACT_ABOVE:
            results_file.compact(file)
    index["results"][entry] = {
        "command": made["command"],
        **({"merged": made["merged"]} if made["merged"] else {}),
        "commit": made["commit"],
        **({"uncommitted_changes": True} if made["uncommitted_changes"] else {}),
        "machine": made["machine"],
        "docs": [],
    }
    return index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=("render", "add"), default="render")
    parser.add_argument("entry", nargs="?", help="with `add`: the new directory, relative to benchmarks/results")
    args = parser.parse_args(argv)
    with open(INDEX) as f:
        index = json.load(f)
    if args.action == "add":
        if not args.entry:
            parser.error("add needs the new directory, e.g. `add countdown_0_4`")
        index = add(index, args.entry)
    write_index(index)
    print(f"wrote {INDEX} and {RENDERED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
