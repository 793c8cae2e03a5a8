"""
The real CPU testbed: which prompt selector makes a real policy learn most per rollout, in several regimes?

A small Qwen2 (75k parameters, character tokenizer), warmed up on sums whose supervised answers are right only part
of the time at a rate set by the difficulty level, trains with the real `GRPOTrainer` from that one committed warm
start, once per regime, method and seed, at the same rollout budget. Success rates are exact (one teacher-forced pass,
`trl_kgps.tasks.evaluation.answer_probabilities`), so held-out accuracy and every training prompt's true success are
measured without sampling noise. The pieces live in `benchmarks/realcpu/` (setting, methods, runner, report,
environment, check); this script is their command line.

```bash
python benchmarks/real_cpu.py                  # the committed suite: 5 regimes x 8 methods x seeds 0-4, 2 processes
python benchmarks/real_cpu.py --quick --out /tmp/quick   # uniform, kgps, oracle on seeds 0, 1 of every regime
python benchmarks/real_cpu.py --check          # 20 s: does this environment reproduce the reference run?
python benchmarks/real_cpu.py --regimes base --methods uniform,kgps_paper,uniform_ds --seeds 0 --out /tmp/one
python benchmarks/real_cpu.py --report_only    # the table and plot again, from real_cpu.json
python benchmarks/real_cpu.py --combine a/real_cpu.json b/real_cpu.json --out both   # a sweep run a seed at a time
python benchmarks/real_cpu.py --make_warm_start 1   # retrain warm start 1 (this CPU's bytes, not the committed ones)
python benchmarks/real_cpu.py --family countdown --methods uniform,one_line,oracle --seeds 0 --out /tmp/countdown
python benchmarks/real_cpu.py --family countdown --make_warm_start 0   # Countdown's warm start (~1.5 min on a core)
python benchmarks/real_cpu.py --family countdown --recipe sharpened --make_warm_start 0   # from the sharpened recipe
```

Writes `real_cpu.json` (the environment, every run's curves and summary), `real_cpu.md` (the tables) and
`real_cpu_accuracy_vs_rollouts.png` into `--out`.
"""

import argparse
import dataclasses
import os
import shlex
import sys
import time

import torch


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from realcpu import check, methods, report, results_file, runner, setting  # noqa: E402
from realcpu.environment import environment  # noqa: E402


QUICK = dict(methods="uniform,kgps,oracle", seeds="0,1")
OUT = "benchmarks/results"


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--family", default="sums", choices=setting.FAMILIES,
        help="the task whose regimes run when --regimes is not given, and whose warm start --make_warm_start trains",
    )  # fmt: skip
    parser.add_argument("--regimes", help="comma-separated (default: every regime of --family in setting.REGIMES)")
    parser.add_argument("--methods", default=",".join(methods.SUITE), help="comma-separated (default %(default)s)")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated training seeds (default %(default)s)")
    parser.add_argument(
        "--held_back",
        type=int,
        default=3,
        help="seeds from this one on were held back from every choice (reported apart)",
    )
    parser.add_argument(
        "--lr_scale",
        type=float,
        default=1.0,
        help="train every regime at its peak learning rate times this (the sensitivity runs: 0.5 and 2)",
    )
    parser.add_argument("--quick", action="store_true", help=f"a smaller sweep: {QUICK}")
    parser.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default %(default)s)"
    )
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads per process (default %(default)s: as fast as 2 for this model, and the results do not "
        "depend on it)",
    )  # fmt: skip
    parser.add_argument(
        "--out", help=f"the directory written (default {OUT}; --combine needs one named, without a results file)"
    )
    parser.add_argument(
        "--merge",
        metavar="JSON",
        nargs="+",
        help="also report the runs of the same seeds found in these results files (e.g. the committed "
        "benchmarks/results/real_cpu.json) for methods not run now, and their regimes not run now: baselines "
        "measured once, paired with new ones",
    )
    parser.add_argument(
        "--combine",
        metavar="JSON",
        nargs="+",
        help="write into --out the runs of these results files, one sweep run in pieces (the same regimes, methods, "
        "commit and machine, other seeds: one invocation a seed, so that a stopped sweep keeps what finished), and exit",
    )
    parser.add_argument(
        "--check",
        nargs="?",
        const="reference",
        metavar="JSON",
        help="compare one run with a committed results file and exit: by default the reference run at 1e-4, which "
        "every environment reproduces; benchmarks/results/real_cpu.json reproduces in the environment it records",
    )
    parser.add_argument(
        "--report_only",
        action="store_true",
        help="rewrite the table and plot from real_cpu.json (or real_cpu.json.xz)",
    )
    parser.add_argument(
        "--make_warm_start",
        type=int,
        metavar="SEED",
        help="train the warm start of SEED, write it beside the code, exit",
    )
    parser.add_argument(
        "--recipe",
        default="",
        choices=sorted({r for recipes in setting.RECIPES.values() for r in recipes}),
        help="the recipe of the warm start --make_warm_start trains (default: the family's own)",
    )
    args = parser.parse_args(argv)
    if args.combine and args.out is None:
        raise SystemExit(
            f"--combine writes a new results file: name its directory with --out (not the committed suite's {OUT})."
        )
    args.out = args.out or OUT
    if args.quick:
        args.methods, args.seeds = QUICK["methods"], QUICK["seeds"]
    if args.regimes is None:
        args.regimes = ",".join(name for name, r in setting.REGIMES.items() if r.family == args.family)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.check:
        path = check.default_results() if args.check == "reference" else args.check
        passed, text = check.check(path, args.threads)
        print(text)
        return 0 if passed else 1
    if args.make_warm_start is not None:
        torch.set_num_threads(args.threads)
        print(setting.make_warm_start(args.make_warm_start, family=args.family, recipe=args.recipe))
        return 0
    if args.combine:
        written = results_file.resolve(os.path.join(args.out, "real_cpu.json"))
        if os.path.exists(written):
            raise SystemExit(
                f"--combine: --out {args.out} already holds the results file {written}, which it would replace: "
                "name a new directory with --out (or move that file away first)."
            )
        print(report.write(combine([results_file.load(path) for path in args.combine], args.out), args.out))
        return 0
    if args.report_only:
        print(report.write(results_file.load(os.path.join(args.out, "real_cpu.json")), args.out, save=False))
        return 0
    regimes, names = args.regimes.split(","), args.methods.split(",")
    unknown = [r for r in regimes if r not in setting.ALL_REGIMES] + [m for m in names if not methods.known(m)]
    if unknown:
        raise SystemExit(
            f"unknown regimes or methods {unknown}: regimes {list(setting.ALL_REGIMES)}, methods "
            f"{list(methods.SUITE + methods.OTHERS)} or a name in trl_kgps.demo.variants.VARIANTS."
        )
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"--seeds must be comma-separated integers such as 0,1,2, got {args.seeds!r}.") from None
    results = dict(
        environment=environment(args.threads),
        command=shlex.join(["python", "benchmarks/real_cpu.py", *(sys.argv[1:] if argv is None else argv)]),
        held_back=args.held_back,
        regimes={},
    )
    trained = {name: _scaled(setting.ALL_REGIMES[name], args.lr_scale) for name in regimes}
    for name in regimes:
        built = setting.build(setting.ALL_REGIMES[name])
        results["regimes"][name] = dict(
            regime=setting.describe(trained[name]), fingerprint=built.fingerprint(), runs={}
        )
    # A regime trained as defined goes to the workers by name, one trained at another rate whole.
    tasks = [(name if args.lr_scale == 1 else trained[name], m, s) for name in regimes for m in names for s in seeds]
    start = time.perf_counter()
    for (regime, method, seed), run in runner.sweep(tasks, args.jobs, args.threads):
        regime = regime if isinstance(regime, str) else regime.name
        results["regimes"][regime]["runs"].setdefault(method, {})[str(seed)] = run
        s = run["summary"]
        print(f"{regime} {method} seed {seed}: held-out {s['final_heldout_accuracy']:.4f}, unanimous "
              f"{s['unanimous_share']:.2f}, {s['wall_s']:.0f} s", flush=True)  # fmt: skip
    results["wall_s"] = time.perf_counter() - start
    if args.merge:
        _merge(results, args.merge, seeds)
    print(report.write(results, args.out))
    return 0


def _scaled(regime: setting.Regime, scale: float) -> setting.Regime:
    """`regime` at `scale` times its peak learning rate."""
    return regime if scale == 1 else dataclasses.replace(regime, learning_rate=regime.learning_rate * scale)


def _rate(entry: dict) -> tuple:
    """A results file's regime entry's peak learning rate and schedule (files before schedules were named: linear)."""
    return entry["regime"]["learning_rate"], entry["regime"].get("lr_scheduler_type", "linear")


def combine(pieces: list[dict], out: str) -> dict:
    """
    One results file from `pieces`, the results of one sweep run a few seeds at a time: each regime's runs of every
    piece, under the command that would have run them at once (its `--seeds` all of theirs, a piece without
    `--seeds` having run the parser's default ones, its `--out` `out`), with every file a piece merged in (once).
    Refused where pieces differ in anything but their seeds (naming what differs): the command's other flags, the
    environment (the commit, the machine), a regime's data or learning rate.
    """
    first, seeds, merged = pieces[0], [], []
    kept = _piece_flags(first["command"])
    for piece in pieces:
        flags = _piece_flags(piece["command"])
        seeds += flags["seeds"].split(",")
        differ = [
            f"--{flag} {flags[flag]!r} against {kept[flag]!r}"
            for flag in kept
            if flag != "seeds" and flags[flag] != kept[flag]
        ]
        environment = piece["environment"]
        differ += [
            f"environment {key} {environment.get(key)!r} against {first['environment'].get(key)!r}"
            for key in sorted(set(environment) | set(first["environment"]))
            if environment.get(key) != first["environment"].get(key)
        ]
        if differ:
            raise SystemExit(
                f"--combine: {piece['command']!r} is not a piece of the sweep of {first['command']!r}: "
                f"{'; '.join(differ)}."
            )
        merged += [record for record in report.merged_runs(piece) if record not in merged]
    if len(set(seeds)) < len(seeds):
        raise SystemExit(f"--combine: seeds {seeds} ran in more than one piece.")
    command = shlex.split(first["command"])
    _set_flag(command, "--seeds", ",".join(sorted(seeds, key=int)))
    _set_flag(command, "--out", out)
    results = dict(
        environment=first["environment"], command=shlex.join(command), held_back=first["held_back"], regimes={},
        wall_s=sum(piece["wall_s"] for piece in pieces), pieces=len(pieces),
    )  # fmt: skip
    if merged:
        results["merged"] = merged
    for piece in pieces:
        for name, entry in piece["regimes"].items():
            regime = results["regimes"].setdefault(name, {**entry, "runs": {}})
            if (entry["fingerprint"], _rate(entry)) != (regime["fingerprint"], _rate(regime)):
                raise SystemExit(f"--combine: regime {name!r} ran on other data or at another rate in a piece.")
            for method, runs in entry["runs"].items():
                regime["runs"].setdefault(method, {}).update(runs)
    return results


def _piece_flags(command: str) -> dict:
    """The flags of a results file's `command` as the parser reads them (its defaults where not given), but `--out`."""
    try:
        args = vars(parse(shlex.split(command)[2:]))
    except SystemExit:
        raise SystemExit(f"--combine: this real_cpu.py cannot read the command {command!r}.") from None
    return {flag: value for flag, value in args.items() if flag not in ("out", "combine")}


def _set_flag(command: list[str], flag: str, value: str) -> None:
    """Sets `flag` of the argument list `command` to `value` (`--flag value` or `--flag=value`), or appends it."""
    for i, word in enumerate(command):
        if word == flag:
            command[i + 1] = value
            return
        if word.startswith(flag + "="):
            command[i] = f"{flag}={value}"
            return
    command += [flag, value]


def _merge(results: dict, paths: list[str], seeds: list[int]) -> None:
    """
    Adds the runs of `paths`' results files, for methods not run now and the same seeds (the first file holding a
    regime's method gives its runs), and the regimes not run now whole; a regime's settings must match.
    """
    results["merged"] = []
    for path in paths:
        earlier = results_file.load(path)
        results["merged"].append(dict(path=path, command=earlier["command"], environment=earlier["environment"]))
        results["merged"] += report.merged_runs(earlier)  # what that file had merged in turn
        for name, other in earlier["regimes"].items():
            regime = results["regimes"].setdefault(name, {**other, "runs": {}})
            if other["fingerprint"] != regime["fingerprint"]:
                raise SystemExit(f"--merge {path}: regime {name!r} was run on other data or another warm start there.")
            if _rate(other) != _rate(regime):
                raise SystemExit(f"--merge {path}: regime {name!r} trained at another learning rate there.")
            for method, runs in other["runs"].items():
                if method not in regime["runs"]:  # run now, or given by an earlier file
                    regime["runs"][method] = {str(s): runs[str(s)] for s in seeds if str(s) in runs}


if __name__ == "__main__":
    raise SystemExit(main())
