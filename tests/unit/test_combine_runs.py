"""`real_cpu.py --combine`: a sweep run one seed at a time becomes the results file of the sweep run at once."""

import json
import sys
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import real_cpu  # noqa: E402


ENVIRONMENT = dict(commit="e8485ae437c679010bc499dfb067d3ab42df8a1d", cpu="Intel(R) Xeon(R) Processor", cores=2)


def piece(seed: int | None, out: str, methods=("uniform", "one_line"), environment=ENVIRONMENT, rate=2e-4) -> dict:
    seeds = "" if seed is None else f" --seeds {seed}"
    command = f"python benchmarks/real_cpu.py --regimes r --methods {','.join(methods)}{seeds} --out {out}"
    seed = 0 if seed is None else seed
    runs = {method: {str(seed): dict(summary=dict(final_heldout_accuracy=seed / 10))} for method in methods}
    regime = dict(regime=dict(learning_rate=rate), fingerprint="f", runs=runs)
    return dict(environment=environment, command=command, held_back=5, regimes=dict(r=regime), wall_s=10.0)


def test_pieces_of_one_sweep_combine_into_its_results_under_its_whole_command():
    combined = real_cpu.combine([piece(1, "/tmp/s1"), piece(0, "/tmp/s0")], "benchmarks/results/r_0_1")
    assert combined["command"] == (
        "python benchmarks/real_cpu.py --regimes r --methods uniform,one_line --seeds 0,1 --out benchmarks/results/r_0_1"
    )
    assert combined["environment"] == ENVIRONMENT and combined["wall_s"] == 20.0 and combined["pieces"] == 2
    runs = combined["regimes"]["r"]["runs"]
    assert {m: sorted(runs[m]) for m in runs} == {"uniform": ["0", "1"], "one_line": ["0", "1"]}
    assert runs["uniform"]["1"]["summary"]["final_heldout_accuracy"] == 0.1


def test_a_piece_without_seeds_ran_the_default_ones_and_merged_files_are_kept_once():
    default, later = piece(None, "/tmp/all"), piece(5, "/tmp/s5")
    record = dict(path="benchmarks/results/real_cpu.json", command="python benchmarks/real_cpu.py", environment={})
    default["merged"], later["merged"] = [record], [record, {**record, "path": "other.json"}]
    combined = real_cpu.combine([default, later], "both")
    assert combined["command"] == (
        "python benchmarks/real_cpu.py --regimes r --methods uniform,one_line --out both --seeds 0,1,2,3,4,5"
    )
    assert combined["merged"] == [record, {**record, "path": "other.json"}]
    with pytest.raises(SystemExit, match="more than one piece"):
        real_cpu.combine([default, piece(3, "/tmp/s3")], "both")


@pytest.mark.parametrize(
    "other, named",
    [
        (piece(1, "/tmp/s1", methods=("uniform",)), "--methods 'uniform' against 'uniform,one_line'"),
        (piece(1, "/tmp/s1", environment={**ENVIRONMENT, "commit": "0" * 40}), "environment commit '0000"),
        (piece(1, "/tmp/s1", environment={**ENVIRONMENT, "cpu": "AMD EPYC"}), "environment cpu 'AMD EPYC'"),
    ],
    ids=["other methods", "other commit", "other machine"],
)
def test_what_pieces_differ_in_is_named(other, named):
    with pytest.raises(SystemExit, match=named):
        real_cpu.combine([piece(0, "/tmp/s0"), other], "out")


def test_combine_needs_a_named_out_without_a_results_file(tmp_path, monkeypatch):
    paths = []
    for seed in (0, 1):
        paths.append(str(tmp_path / f"s{seed}.json"))
        Path(paths[-1]).write_text(json.dumps(piece(seed, f"/tmp/s{seed}")))
    with pytest.raises(SystemExit, match="--out"):
        real_cpu.main(["--combine", *paths])
    for held in ("real_cpu.json", "real_cpu.json.xz"):
        out = tmp_path / held.replace(".", "_")
        out.mkdir()
        (out / held).write_text("{}")
        with pytest.raises(SystemExit, match=f"already holds the results file {out / held}.*new directory"):
            real_cpu.main(["--combine", *paths, "--out", str(out)])
        assert (out / held).read_text() == "{}"
    # A new directory is written.
    written = []
    monkeypatch.setattr(real_cpu.report, "write", lambda results, out: written.append((results, out)) or "")
    assert real_cpu.main(["--combine", *paths, "--out", str(tmp_path / "new")]) == 0
    assert [(sorted(r["regimes"]["r"]["runs"]["uniform"]), out) for r, out in written] == [
        (["0", "1"], str(tmp_path / "new"))
    ]


@pytest.mark.parametrize(
    "other",
    [
        piece(1, "/tmp/s1", methods=("uniform",)),
        piece(1, "/tmp/s1", environment={**ENVIRONMENT, "commit": "0" * 40}),
        piece(1, "/tmp/s1", rate=4e-4),
        piece(0, "/tmp/again"),
    ],
    ids=["other methods", "other commit", "other rate", "a seed twice"],
)
def test_pieces_that_differ_in_more_than_their_seeds_are_refused(other):
    with pytest.raises(SystemExit, match="--combine"):
        real_cpu.combine([piece(0, "/tmp/s0"), other], "out")
